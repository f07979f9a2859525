/*
 * The numeric audit (SPEC section 8): the model of model.h run for real on
 * the mesh ranks this process hosts, every collective and every pipeline
 * transfer a round of messages between MPI processes (transport.h), then
 * the sync plan executed on real gradient buffers, then every rank's values
 * hashed and compared with a single-rank reference on process 0.
 *
 * The engine is layered, one file a layer, each using those before it:
 *
 *   numvalue.c	one number type for the three numerics, and tensors;
 *   numdata.c	weights and inputs as pure functions of (seed, indices);
 *   collective.c messages, rounds of the transport or a loopback for the
 *		reference, and the collectives over mesh groups;
 *   numengine.c the ranks this process hosts and their state;
 *   kernels.c	forward and backward of every op kind, in a table;
 *
 * and this file drives them:
 *
 *   interpreter every process walks the same global sequence of ops
 *		(forward over stages 0..pp-1, backward over pp-1..0), so the
 *		rounds of all processes line up: a process with no rank on the
 *		active stage takes part with an empty outbox;
 *   sync	the steps of the sync plan, as syncplan.h defines them and
 *		symbolic.c executes them on expressions;
 *   reference	the same interpreter on the single-rank model, once per dp
 *		micro-batch;
 *   comparison	hashes, reference verdicts and the self-check against the
 *		symbolic audit (process 0).
 *
 * Test hooks, environment variables the test suite sets to exercise the
 * failure paths of `gradaudit run` (never set them otherwise); r is a mesh
 * rank and the process hosting it acts:
 *   GRADAUDIT_TEST_KILL_RANK=r	 raise SIGKILL at the start of backward;
 *   GRADAUDIT_TEST_HANG_RANK=r	 sleep forever there;
 *   GRADAUDIT_TEST_CORRUPT_RANK=r add 1 to the first element of the rank's
 *				 first synced gradient, which the self-check
 *				 must report (exit 3);
 *   GRADAUDIT_TEST_SHIFT_PADDING=1 shift the token ids of every padded
 *				 token by one (kernels.c): a padded token
 *				 contributes nothing, so no value may change;
 *   GRADAUDIT_TEST_NUDGE_RANK=r move that element to the next float (in
 *				 float numerics), a difference within rounding
 *				 that only the bit-for-bit comparison of
 *				 replicas must report (exit 3).
 */
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/exitcode.h"
#include "base/hash.h"
#include "base/progress.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "model/layout.h"
#include "model/mesh.h"
#include "model/model.h"
#include "model/placement.h"
#include "model/syncplan.h"
#include "numeric/collective.h"
#include "numeric/kernels.h"
#include "numeric/numdata.h"
#include "numeric/numengine.h"
#include "numeric/numeric.h"
#include "numeric/numvalue.h"
#include "numeric/transport.h"
#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/gradnorm.h"
#include "symbolic/lincomb.h"
#include "symbolic/symbolic.h"

/* Self-check failures printed before the rest are only counted. */
#define NUM_MAX_MESSAGES	10

/*
 * The most values (8 bytes each) the numeric audit holds for one mesh
 * rank, and for all of them together: process 0 also gathers every rank's
 * gradients and runs the reference, so the mesh total bounds its memory
 * (512 MiB).  The test cases need a few thousand values a rank.
 */
#define NUM_MAX_RANK_VALUES	((int64_t)1 << 24)
#define NUM_MAX_MESH_VALUES	((int64_t)1 << 26)

/*
 * The interpreter.
 */

static struct placement
place_of(struct placement *place, int slot)
{
	return slot >= 0 ? place[slot] : pl_uniform(PLACE_REPLICATE);
}

static void
run_rank_kernel(struct engine *eng, rank_kernel *fn, int stage, int opi)
{
	int	 i;

	for (i = 0; i < eng->nranks; i++)
		if (rank_on_stage(&eng->ranks[i], stage))
			fn(eng, &eng->ranks[i], stage, opi);
}

static void
forward_op(struct engine *eng, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct op_rule	*rule = kernel_rule(op);
	struct placement	 in[2], *place = eng->act_place[stage];

	in[0] = place_of(place, op->in[0]);
	in[1] = place_of(place, op->in[1]);
	if (op->out >= 0)
		place[op->out] = pl_forward(eng->model, op, in);
	if (rule->forward_stage != NULL)
		rule->forward_stage(eng, stage, opi);
	else
		run_rank_kernel(eng, rule->forward, stage, opi);
}

/*
 * Is `slot` the gathered input of an MoE block whose boundary declares its
 * gradient Replicate or Partial whatever it holds (KEY_MOE_INPUT_GRAD)?
 * There the framework adds the plain local tensors of the router, the
 * routed and the shared experts, and nothing is ever masked for a sum.
 */
static bool
declared_plain(const struct engine *eng, int stage, int slot)
{
	const struct stage_program *sp = &eng->model->stages[stage];
	int	 i;

	if (eng->boundary_reduced ||
	    pl_moe_boundary(eng->model) == MOE_INPUT_AUTO)
		return false;
	for (i = 0; i < sp->nops; i++)
		if (sp->ops[i].out == slot)
			return sp->ops[i].moe_input;
	return false;
}

/*
 * Add din[j] of every rank of the stage to the gradient of input slot
 * `slot`, joining placements: a Replicate part that meets a Partial one is
 * masked to member 0 first, unless the slot is summed by no one.
 */
static void
accumulate(struct engine *eng, int stage, int slot, int j,
    struct placement incoming)
{
	struct placement	 old = eng->grad_place[stage][slot], joined;
	bool			 had = eng->grad_set[stage][slot], raw;
	struct rank_state	*rs;
	struct tensor		*g, *d;
	int64_t			 k;
	int			 i;

	joined = had ? pl_join(old, incoming) : incoming;
	raw = declared_plain(eng, stage, slot);
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!rank_on_stage(rs, stage))
			continue;
		g = &rs->grad[slot];
		d = &rs->din[j];
		if (d->v == NULL)
			fatalx("numeric: no gradient for input %d", j);
		if (!raw)
			engine_mask_to(&rs->coord, d, incoming, joined);
		if (!had) {
			tensor_free(g);
			*g = *d;
			memset(d, 0, sizeof(*d));
			continue;
		}
		tensor_check(d, g->rows, g->cols, "gradient contribution");
		if (!raw)
			engine_mask_to(&rs->coord, g, old, joined);
		for (k = 0; k < g->rows * g->cols; k++)
			g->v[k] = num_add(g->v[k], d->v[k]);
		tensor_free(d);
	}
	eng->grad_place[stage][slot] = joined;
	eng->grad_set[stage][slot] = true;
}

static void
backward_op(struct engine *eng, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct op_rule	*rule = kernel_rule(op);
	struct placement	 fwd_in[2], din[2], dparam[2], dout;
	struct placement	*place = eng->act_place[stage];
	struct backward_reduction red;
	struct rank_state	*rs;
	int			 i, j;

	fwd_in[0] = place_of(place, op->in[0]);
	fwd_in[1] = place_of(place, op->in[1]);
	if (op->kind == OP_SEND)
		dout = eng->pipe_place;
	else if (op->out >= 0 && eng->grad_set[stage][op->out])
		dout = eng->grad_place[stage][op->out];
	else
		dout = pl_uniform(PLACE_REPLICATE);
	/*
	 * As pl_walk() does: the loss seeds a gradient placed like the
	 * logits, and a stage's last activation gets what the next stage's
	 * first op sent back.
	 */
	if (op->kind == OP_LOSS || op->kind == OP_SEND)
		din[0] = din[1] = pl_normalize(&eng->model->mesh,
		    op->kind == OP_LOSS ? fwd_in[0] : dout);
	else
		pl_backward(eng->model, op, fwd_in, dout, din, dparam, &red);

	/* An output nothing read back has a zero gradient. */
	if (op->out >= 0 && !eng->grad_set[stage][op->out]) {
		for (i = 0; i < eng->nranks; i++) {
			rs = &eng->ranks[i];
			if (rank_on_stage(rs, stage))
				tensor_alloc(&rs->grad[op->out],
				    rs->act[op->out].t.rows,
				    rs->act[op->out].t.cols);
		}
		eng->grad_place[stage][op->out] = dout;
		eng->grad_set[stage][op->out] = true;
	}
	if (rule->backward_stage != NULL)
		rule->backward_stage(eng, stage, opi);
	else
		run_rank_kernel(eng, rule->backward, stage, opi);
	for (j = 0; j < 2; j++)
		if ((rule->grad_inputs & (1u << j)) && op->in[j] >= 0)
			accumulate(eng, stage, op->in[j], j, din[j]);
	for (i = 0; i < eng->nranks; i++) {
		tensor_free(&eng->ranks[i].din[0]);
		tensor_free(&eng->ranks[i].din[1]);
	}
}

/*
 * Fault injection for the test suite (see the top of the file): the local
 * index of the mesh rank that environment variable `var` names, or -1.
 */
static int
local_rank_from_env(const struct engine *eng, const char *var)
{
	const char	*s = getenv(var);
	char		*end;
	long		 r;
	int		 i;

	if (eng->comm.transport == NULL || s == NULL || *s == '\0')
		return -1;
	r = strtol(s, &end, 10);
	if (*end != '\0')
		return -1;
	for (i = 0; i < eng->nranks; i++)
		if (eng->ranks[i].rank == r)
			return i;
	return -1;
}

static void
test_faults(const struct engine *eng)
{
	if (local_rank_from_env(eng, "GRADAUDIT_TEST_KILL_RANK") >= 0)
		raise(SIGKILL);
	if (local_rank_from_env(eng, "GRADAUDIT_TEST_HANG_RANK") >= 0)
		for (;;)
			pause();
}

/* The first synced gradient element of the rank `var` names, or NULL. */
static union num *
test_target(struct engine *eng, const char *var)
{
	struct rank_state	*rs;
	int			 i, p;

	if ((i = local_rank_from_env(eng, var)) < 0)
		return NULL;
	rs = &eng->ranks[i];
	for (p = 0; p < eng->model->nparams; p++)
		if (rs->pgrad[p] != NULL)
			return &rs->pgrad[p][0];
	return NULL;
}

static void
test_corruption(struct engine *eng)
{
	union num	*x;

	if ((x = test_target(eng, "GRADAUDIT_TEST_CORRUPT_RANK")) != NULL)
		*x = num_add(*x, num_from_rational(q_make(1, 1)));
	if ((x = test_target(eng, "GRADAUDIT_TEST_NUDGE_RANK")) == NULL)
		return;
	if (num_arith == ARITH_FLOAT32)
		x->d = (double)nextafterf((float)x->d, INFINITY);
	else if (num_arith == ARITH_FLOAT64)
		x->d = nextafter(x->d, INFINITY);
}

/* Progress, on process 0 only; units are ops, sync steps and params. */
struct progress_count {
	bool	 on;
	int64_t	 done;
};

static void
progress_tick(struct progress_count *pc)
{
	if (pc != NULL && pc->on)
		progress_update(++pc->done);
}

static void
run_model(struct engine *eng, struct progress_count *pc)
{
	const struct model	*m = eng->model;
	const int		*start;
	int			 pp = m->mesh.pp, nv = pp * m->chunks, s, k, v;

	/* Chunks in the model's layer order (model.h), backward reversed. */
	for (v = 0; v < nv; v++) {
		s = v % pp;
		start = m->stages[s].chunk_start;
		for (k = start[v / pp]; k < start[v / pp + 1]; k++) {
			forward_op(eng, s, k);
			progress_tick(pc);
		}
	}
	test_faults(eng);
	for (s = 0; s < pp; s++)
		memset(eng->grad_set[s], 0, (size_t)m->stages[s].nslots *
		    sizeof(bool));
	for (v = nv - 1; v >= 0; v--) {
		s = v % pp;
		start = m->stages[s].chunk_start;
		for (k = start[v / pp + 1] - 1; k >= start[v / pp]; k--) {
			backward_op(eng, s, k);
			progress_tick(pc);
		}
	}
}

/*
 * A router's gradient of the auxiliary losses of one micro-batch is an
 * atom of its own (lossnorm.h), added to the local gradient with the
 * framework's factor loss.aux_scale makes.
 */
static void
add_aux_atom(union num *atom, union num *total, const union num *g,
    int64_t e, struct rational coef)
{
	union num	 c = num_from_rational(coef);
	int64_t		 x;

	memcpy(atom, g, (size_t)e * sizeof(union num));
	for (x = 0; x < e; x++)
		total[x] = num_add(total[x], num_mul(c, g[x]));
}

/* Zero the gradients of the hosted ranks for another pass. */
static void
clear_grads(struct engine *eng, int mb)
{
	const struct model	*m = eng->model;
	struct rank_state	*rs;
	int			 i, k, j;
	int64_t			 e;

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		rank_clear(eng, rs);
		rs->batch = lossnorm_chunk(&m->mesh, mb, rs->coord.dp);
		for (k = 0; k < m->nparams; k++) {
			if (rs->pgrad[k] == NULL)
				continue;
			e = m->params[k].local_elems;
			memset(rs->pgrad[k], 0, (size_t)e * sizeof(union num));
			if (rs->src_grad != NULL && rs->src_grad[k] != NULL)
				for (j = 0; j < m->mesh.ep; j++)
					memset(rs->src_grad[k][j], 0,
					    (size_t)e * sizeof(union num));
			if (rs->aux_grad != NULL && rs->aux_grad[k] != NULL)
				memset(rs->aux_grad[k], 0, (size_t)e *
				    sizeof(union num));
		}
	}
}

/*
 * The passes of micro-batch mb that seed the multi-token prediction
 * layers' losses, one a layer: what each leaves is that layer's atom
 * (lossnorm.h), added to the local gradient times the framework's factor
 * of the layer and chunk (loss.mtp_scale).
 */
static void
run_mtp(struct engine *eng, struct progress_count *pc, union num ***atoms,
    union num **total, int mb)
{
	const struct model	*m = eng->model;
	const struct loss_norm	*ln = &m->loss;
	struct rank_state	*rs;
	union num		 coef, **t;
	int64_t			 e, x;
	int			 K = ln->micro_batches, i, k, d, slot;

	for (d = 1; d <= ln->mtp; d++) {
		clear_grads(eng, mb);
		eng->seed = d;
		run_model(eng, pc);
		eng->seed = 0;
		for (i = 0; i < eng->nranks; i++) {
			rs = &eng->ranks[i];
			coef = num_from_rational(ln->mtp_coef[(d - 1) *
			    ln->chunks + rs->batch]);
			for (k = 0; k < m->nparams; k++) {
				if (rs->pgrad[k] == NULL)
					continue;
				e = m->params[k].local_elems;
				t = &total[i * m->nparams + k];
				if (*t == NULL)
					*t = xcalloc((size_t)e,
					    sizeof(union num));
				slot = model_atom_slot(m, &m->params[k],
				    ln->mtp_source + d - 1);
				memcpy(atoms[i][k] + (slot * K + mb) * e,
				    rs->pgrad[k], (size_t)e *
				    sizeof(union num));
				for (x = 0; x < e; x++)
					(*t)[x] = num_add((*t)[x], num_mul(
					    coef, rs->pgrad[k][x]));
			}
		}
	}
}

/*
 * Every micro-batch of the step on the hosted ranks, each from zero
 * gradients: what it leaves is kept as the rank's atoms of that
 * micro-batch (per source for experts kept apart), and added to the
 * local gradient times the loss factor of the chunk it comes from
 * (lossnorm.h), total[local rank * nparams + param].  With `held`, the
 * atoms of parameters before a lossy MoE boundary go to their held half.
 */
static void
run_micro_batches(struct engine *eng, struct progress_count *pc,
    union num ***atoms, union num **total, bool held)
{
	const struct model	*m = eng->model;
	const struct loss_norm	*ln = &m->loss;
	struct rank_state	*rs;
	union num		 coef;
	const union num		*g;
	int64_t			 e, x, off;
	int			 K = ln->micro_batches, mb, i, k, j, n, src;
	struct coord		 c;

	for (mb = 0; mb < K; mb++) {
		run_mtp(eng, pc, atoms, total, mb);
		clear_grads(eng, mb);
		run_model(eng, pc);
		for (i = 0; i < eng->nranks; i++) {
			rs = &eng->ranks[i];
			for (k = 0; k < m->nparams; k++) {
				if (rs->pgrad[k] == NULL)
					continue;
				e = m->params[k].local_elems;
				if (total[i * m->nparams + k] == NULL)
					total[i * m->nparams + k] = xcalloc(
					    (size_t)e, sizeof(union num));
				off = held && m->params[k].boundary >= 0 ?
				    (int64_t)model_atoms_per_rank(m,
				    &m->params[k]) / 2 * e : 0;
				n = model_per_source(m, &m->params[k]) ?
				    m->mesh.ep : 1;
				for (j = 0; j < n; j++) {
					g = n > 1 ? rs->src_grad[k][j] :
					    rs->pgrad[k];
					src = n > 1 ? mesh_rank_of_expert(
					    &m->mesh, rs->coord.pp, j,
					    rs->coord.etp, rs->coord.edp) :
					    rs->rank;
					mesh_coord_of(&m->mesh, src, &c);
					coef = num_from_rational(ln->coef[
					    lossnorm_chunk(&m->mesh, mb,
					    c.dp)]);
					memcpy(atoms[i][k] + off +
					    (j * K + mb) * e, g, (size_t)e *
					    sizeof(union num));
					for (x = 0; x < e; x++)
						total[i * m->nparams + k][x] =
						    num_add(total[i *
						    m->nparams + k][x],
						    num_mul(coef, g[x]));
				}
				if (model_has_aux(m, &m->params[k]))
					add_aux_atom(atoms[i][k] + off +
					    (K + mb) * e,
					    total[i * m->nparams + k],
					    rs->aux_grad[k], e, ln->aux_coef);
			}
		}
	}
}

/*
 * The step: the atoms, [local rank][param], and each rank's local
 * gradients.  Parameters before a lossy MoE boundary keep two atoms a
 * chunk (lossnorm.h): a first pass with every boundary reduced as its
 * placement says gives their plain atoms, the step as configured their
 * held ones and the local gradients.
 */
static union num ***
run_step(struct engine *eng, struct progress_count *pc)
{
	const struct model	*m = eng->model;
	struct rank_state	*rs;
	union num		***atoms, **total;
	int			 i, k;
	bool			 held = false;

	atoms = xcalloc((size_t)eng->nranks, sizeof(*atoms));
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		atoms[i] = xcalloc((size_t)m->nparams, sizeof(**atoms));
		for (k = 0; k < m->nparams; k++)
			if (rs->pgrad[k] != NULL)
				atoms[i][k] = xcalloc((size_t)(
				    model_atoms_per_rank(m, &m->params[k]) *
				    m->params[k].local_elems),
				    sizeof(union num));
	}
	for (k = 0; k < m->nparams; k++)
		held = held || m->params[k].boundary >= 0;
	total = xcalloc((size_t)eng->nranks * m->nparams, sizeof(*total));
	if (held) {
		eng->boundary_reduced = true;
		run_micro_batches(eng, pc, atoms, total, false);
		eng->boundary_reduced = false;
		for (i = 0; i < eng->nranks * m->nparams; i++) {
			free(total[i]);
			total[i] = NULL;
		}
	}
	run_micro_batches(eng, pc, atoms, total, held);
	for (i = 0; i < eng->nranks; i++)
		for (k = 0; k < m->nparams; k++)
			if (total[i * m->nparams + k] != NULL) {
				free(eng->ranks[i].pgrad[k]);
				eng->ranks[i].pgrad[k] =
				    total[i * m->nparams + k];
			}
	free(total);
	return atoms;
}

/*
 * The sync plan (syncplan.h), executed on the real local gradients.
 */

/*
 * SYNC_MASK_REPLICAS (the plan emits it over tp only): keep the value on
 * coordinate 0 of every sub-dimension `replicate` marks Replicate.
 */
static bool
mask_keeps(const struct sync_step *st, const struct rank_state *rs)
{
	return pl_keeps_value(&rs->coord, st->replicate,
	    pl_uniform(PLACE_PARTIAL));
}

/*
 * The buffer of `kind` of a rank's model chunk, gathered from its
 * parameters: each chunk has buffers of its own (one DDP a chunk).
 */
static union num *
buffer_pack(const struct engine *eng, const struct layout *layout,
    const struct rank_state *rs, enum buffer_kind kind, int chunk)
{
	const struct model		*m = eng->model;
	const struct stage_layout	*sl = &layout->stages[rs->coord.pp *
					    m->chunks + chunk];
	union num			*buf;
	int				 p;

	if (sl->buffer[kind].size == 0)
		return NULL;
	buf = xcalloc((size_t)sl->buffer[kind].size, sizeof(*buf));
	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && layout_buffer_of(m, p) == kind &&
		    m->params[p].chunk == chunk)
			memcpy(buf + layout->offset[p], rs->pgrad[p],
			    (size_t)m->params[p].local_elems * sizeof(*buf));
	return buf;
}

static void
buffer_unpack(const struct engine *eng, const struct layout *layout,
    struct rank_state *rs, enum buffer_kind kind, int chunk,
    const union num *buf)
{
	const struct model		*m = eng->model;
	int				 p;

	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && layout_buffer_of(m, p) == kind &&
		    m->params[p].chunk == chunk)
			memcpy(rs->pgrad[p], buf + layout->offset[p],
			    (size_t)m->params[p].local_elems * sizeof(*buf));
}

/* The parameters a TARGET_PARAMS step selects on a rank, concatenated. */
static union num *
params_pack(const struct engine *eng, const struct sync_step *st,
    const struct rank_state *rs, int64_t *len)
{
	const struct model	*m = eng->model;
	union num		*v = NULL;
	int64_t			 n = 0;
	int			 p;

	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && syncplan_touches(st, m, p))
			n += m->params[p].local_elems;
	*len = n;
	if (n == 0)
		return NULL;
	v = xcalloc((size_t)n, sizeof(*v));
	for (n = 0, p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && syncplan_touches(st, m, p)) {
			memcpy(v + n, rs->pgrad[p],
			    (size_t)m->params[p].local_elems * sizeof(*v));
			n += m->params[p].local_elems;
		}
	return v;
}

static void
params_unpack(const struct engine *eng, const struct sync_step *st,
    struct rank_state *rs, const union num *v)
{
	const struct model	*m = eng->model;
	int64_t			 n = 0;
	int			 p;

	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && syncplan_touches(st, m, p)) {
			memcpy(rs->pgrad[p], v + n,
			    (size_t)m->params[p].local_elems * sizeof(*v));
			n += m->params[p].local_elems;
		}
}

static void
sync_local(struct engine *eng, const struct sync_step *st)
{
	const struct model	*m = eng->model;
	struct rank_state	*rs;
	union num		 scale = num_from_rational(st->scale);
	int64_t			 k;
	int			 i, p;

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		for (p = 0; p < m->nparams; p++) {
			if (rs->pgrad[p] == NULL || !syncplan_touches(st, m, p))
				continue;
			if (st->op == SYNC_MASK_REPLICAS) {
				if (!mask_keeps(st, rs))
					memset(rs->pgrad[p], 0, (size_t)m->
					    params[p].local_elems *
					    sizeof(*rs->pgrad[p]));
				continue;
			}
			for (k = 0; k < m->params[p].local_elems; k++)
				rs->pgrad[p][k] = num_mul(rs->pgrad[p][k],
				    scale);
		}
	}
}

static void
sync_collective(struct engine *eng, const struct layout *layout,
    const struct sync_step *st, int chunk)
{
	const struct buffer_layout	**bl;
	struct rank_state		*rs;
	union num			**vec;
	int64_t				*len;
	int				 i;

	vec = xcalloc((size_t)eng->nranks, sizeof(*vec));
	len = xcalloc((size_t)eng->nranks, sizeof(*len));
	bl = xcalloc((size_t)eng->nranks, sizeof(*bl));
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (st->target == TARGET_BUFFER) {
			vec[i] = buffer_pack(eng, layout, rs, st->buffer,
			    chunk);
			bl[i] = &layout->stages[rs->coord.pp *
			    eng->model->chunks + chunk].buffer[st->buffer];
			len[i] = bl[i]->size;
		} else
			vec[i] = params_pack(eng, st, rs, &len[i]);
	}
	if (st->op == SYNC_REDUCE_SCATTER) {
		if (st->target != TARGET_BUFFER)
			fatalx("numeric: reduce-scatter of loose parameters");
		coll_reduce_scatter(&eng->comm, st->group, vec, bl,
		    st->average);
	} else
		coll_all_reduce(&eng->comm, st->group, vec, len, st->average);
	for (i = 0; i < eng->nranks; i++) {
		if (vec[i] == NULL)
			continue;
		if (st->target == TARGET_BUFFER)
			buffer_unpack(eng, layout, &eng->ranks[i], st->buffer,
			    chunk, vec[i]);
		else
			params_unpack(eng, st, &eng->ranks[i], vec[i]);
		free(vec[i]);
	}
	free(bl);
	free(len);
	free(vec);
}

/* Is p one of the step's, in buffer k of chunk c, and held by rs? */
static bool
step_holds(const struct model *m, const struct rank_state *rs,
    const struct sync_step *st, int p, int c, int k)
{
	return rs->pgrad[p] != NULL && st->params[p] &&
	    m->params[p].chunk == c && (int)layout_buffer_of(m, p) == k;
}

/*
 * An all-gather of the selected parameters' shards: each rank's buffer of
 * every chunk and kind goes through the collective (every process takes
 * part in each round), and only the selected parameters are written back.
 */
static void
sync_all_gather(struct engine *eng, const struct layout *layout,
    const struct sync_step *st)
{
	const struct model		*m = eng->model;
	const struct buffer_layout	**bl;
	struct rank_state		*rs;
	union num			**vec;
	int				 i, p, c, k;
	bool				 holds;

	vec = xcalloc((size_t)eng->nranks, sizeof(*vec));
	bl = xcalloc((size_t)eng->nranks, sizeof(*bl));
	for (c = 0; c < m->chunks; c++)
		for (k = 0; k < BUFFER__COUNT; k++) {
			for (i = 0; i < eng->nranks; i++) {
				rs = &eng->ranks[i];
				holds = false;
				for (p = 0; p < m->nparams; p++)
					holds = holds ||
					    step_holds(m, rs, st, p, c, k);
				vec[i] = holds ? buffer_pack(eng, layout, rs,
				    k, c) : NULL;
				bl[i] = &layout->stages[rs->coord.pp *
				    m->chunks + c].buffer[k];
			}
			coll_all_gather(&eng->comm, st->group, vec, bl);
			for (i = 0; i < eng->nranks; i++) {
				if (vec[i] == NULL)
					continue;
				rs = &eng->ranks[i];
				for (p = 0; p < m->nparams; p++)
					if (step_holds(m, rs, st, p, c, k))
						memcpy(rs->pgrad[p], vec[i] +
						    layout->offset[p],
						    (size_t)m->params[p].
						    local_elems *
						    sizeof(*vec[i]));
				free(vec[i]);
			}
		}
	free(bl);
	free(vec);
}

static void
run_sync(struct engine *eng, const struct layout *layout,
    const struct sync_plan *plan, struct progress_count *pc)
{
	const struct sync_step	*st;
	int			 s, c;

	for (s = 0; s < plan->nsteps; s++) {
		st = &plan->steps[s];
		switch (st->op) {
		case SYNC_SCALE:
		case SYNC_MASK_REPLICAS:
			sync_local(eng, st);
			break;
		case SYNC_ALL_REDUCE:
		case SYNC_REDUCE_SCATTER:
			/* A buffer step runs in every chunk's DDP. */
			for (c = 0; c < (st->target == TARGET_BUFFER ?
			    eng->model->chunks : 1); c++)
				sync_collective(eng, layout, st, c);
			break;
		case SYNC_ALL_GATHER:
			sync_all_gather(eng, layout, st);
			break;
		}
		progress_tick(pc);
	}
}

/*
 * The reference: the same interpreter on the single-rank model (mesh
 * 1x1x1, a cp rank's share of the sequence), once per chunk of the step
 * (every micro-batch of every dp and cp rank) with that chunk's inputs and
 * valid tokens, summed with the weight tokens/N of lossnorm.h: the
 * gradient of the mean loss over every valid token of the step.  The
 * result is one global gradient per logical parameter of the audited
 * model, matched by name.
 */
static int
logical_by_name(const struct model *m, const char *name)
{
	int	 i;

	for (i = 0; i < m->nlogical; i++)
		if (strcmp(m->logical[i].name, name) == 0)
			return i;
	return -1;
}

static union num **
reference_gradients(const struct model *audited, const struct weight_source *ws,
    struct progress_count *pc)
{
	struct config		 cfg;
	struct model		 ref;
	struct engine		 eng;
	const struct param	*p;
	union num		**out, **aux, **mtp, factor, w;
	int64_t			 i, g, elems;
	int			*key, k, d, s, rank0 = 0;

	cfg_one_rank(&cfg, audited->config);
	model_build(&ref, &cfg);
	key = xcalloc((size_t)ref.nparams, sizeof(*key));
	for (k = 0; k < ref.nparams; k++) {
		key[k] = logical_by_name(audited,
		    ref.logical[ref.params[k].logical].name);
		if (key[k] < 0)
			fatalx("numeric: reference parameter %s is not in the "
			    "audited model", ref.params[k].name);
	}
	out = xcalloc((size_t)audited->nlogical, sizeof(*out));
	for (k = 0; k < audited->nlogical; k++) {
		p = &audited->params[audited->logical[k].instance[0]];
		elems = p->elems;
		out[k] = xcalloc((size_t)elems, sizeof(*out[k]));
	}
	/* The auxiliary losses' gradients of the routers, summed apart. */
	aux = xcalloc((size_t)audited->nlogical, sizeof(*aux));
	engine_init(&eng, &ref, NULL, &rank0, 1, ws, key);
	eng.loss = &audited->loss;
	/* The multi-token prediction losses', weighed as they go. */
	mtp = xcalloc((size_t)audited->nlogical, sizeof(*mtp));
	for (d = 0; d < audited->loss.chunks; d++)
		for (s = 1; s <= audited->loss.mtp; s++) {
			w = num_from_rational(audited->loss.mtp_expected[
			    s - 1]);
			rank_clear(&eng, &eng.ranks[0]);
			eng.ranks[0].batch = d;
			for (k = 0; k < ref.nparams; k++)
				memset(eng.ranks[0].pgrad[k], 0,
				    (size_t)ref.params[k].local_elems *
				    sizeof(union num));
			eng.seed = s;
			run_model(&eng, NULL);
			eng.seed = 0;
			for (k = 0; k < ref.nparams; k++) {
				const union num *pg = eng.ranks[0].pgrad[k];
				union num **acc = &mtp[key[k]];

				if (*acc == NULL)
					*acc = xcalloc((size_t)ref.params[
					    k].elems, sizeof(union num));
				for (i = 0; i < ref.params[k].local_elems;
				    i++) {
					g = model_global_index(&ref,
					    &ref.params[k], 0, i);
					(*acc)[g] = num_add((*acc)[g],
					    num_mul(w, pg[i]));
				}
			}
		}
	for (d = 0; d < audited->loss.chunks; d++) {
		rank_clear(&eng, &eng.ranks[0]);
		eng.ranks[0].batch = d;
		for (k = 0; k < ref.nparams; k++) {
			memset(eng.ranks[0].pgrad[k], 0,
			    (size_t)ref.params[k].local_elems *
			    sizeof(union num));
			if (eng.ranks[0].aux_grad != NULL &&
			    eng.ranks[0].aux_grad[k] != NULL)
				memset(eng.ranks[0].aux_grad[k], 0,
				    (size_t)ref.params[k].local_elems *
				    sizeof(union num));
		}
		run_model(&eng, NULL);
		/* The objective's weight of this chunk (lossnorm.h). */
		factor = num_from_rational(lossnorm_weight(&audited->loss, d));
		for (k = 0; k < ref.nparams; k++) {
			const union num *ag = eng.ranks[0].aux_grad != NULL ?
			    eng.ranks[0].aux_grad[k] : NULL;

			if (ag != NULL && aux[key[k]] == NULL)
				aux[key[k]] = xcalloc((size_t)ref.params[
				    k].elems, sizeof(union num));
			for (i = 0; i < ref.params[k].local_elems; i++) {
				g = model_global_index(&ref, &ref.params[k], 0,
				    i);
				out[key[k]][g] = num_add(out[key[k]][g],
				    num_mul(factor, eng.ranks[0].pgrad[k][i]));
				if (ag != NULL)
					aux[key[k]][g] = num_add(
					    aux[key[k]][g], ag[i]);
			}
		}
		progress_tick(pc);
	}
	/*
	 * 1/chunks on the auxiliary losses' atoms (lossnorm.h); the main
	 * loss's and the MTP losses' are weighed already.
	 */
	for (k = 0; k < audited->nlogical; k++) {
		p = &audited->params[audited->logical[k].instance[0]];
		elems = p->elems;
		for (i = 0; i < elems; i++) {
			if (aux[k] != NULL)
				out[k][i] = num_add(out[k][i], num_mul(
				    aux[k][i], num_from_rational(
				    audited->loss.aux_expected)));
			if (mtp[k] != NULL)
				out[k][i] = num_add(out[k][i], mtp[k][i]);
		}
		free(aux[k]);
		free(mtp[k]);
	}
	free(aux);
	free(mtp);
	engine_free(&eng);
	free(key);
	model_free(&ref);
	cfg_free(&cfg);
	return out;
}

/*
 * Gathering on process 0: every rank's atoms (local gradients before the
 * sync) and synced values of every parameter it holds.  Ranks hosted on
 * process 0 need no message.
 */
struct gathered {
	union num	***atom;	/* [rank][param], NULL if not held */
	union num	***synced;
	struct inbox	 in;
};

static void
gather_values(struct engine *eng, union num ***atoms, struct gathered *gv)
{
	const struct model	*m = eng->model;
	struct outbox		 ob = { 0 };
	struct rank_state	*rs;
	union num		*p;
	const union num		*q;
	int64_t			 n, off, a;
	size_t			 j;
	int			 i, k, r, root = 0;
	bool			 here;

	here = eng->comm.transport->proc ==
	    transport_host_of(eng->comm.transport, root);
	for (i = 0; i < eng->nranks && !here; i++) {
		rs = &eng->ranks[i];
		for (n = 0, k = 0; k < m->nparams; k++)
			if (rs->pgrad[k] != NULL)
				n += (model_atoms_per_rank(m, &m->params[k]) +
				    1) * m->params[k].local_elems;
		p = xcalloc((size_t)n, sizeof(*p));
		for (off = 0, k = 0; k < m->nparams; k++) {
			if (rs->pgrad[k] == NULL)
				continue;
			n = m->params[k].local_elems;
			a = model_atoms_per_rank(m, &m->params[k]) * n;
			memcpy(p + off, atoms[i][k], (size_t)a * sizeof(*p));
			memcpy(p + off + a, rs->pgrad[k], (size_t)n *
			    sizeof(*p));
			off += a + n;
		}
		outbox_add(&ob, rs->rank, root, TAG_COLLECT, p, (size_t)off *
		    sizeof(*p));
	}
	coll_exchange(&eng->comm, &ob, &gv->in);
	if (!here)
		return;
	gv->atom = xcalloc((size_t)m->mesh.world, sizeof(*gv->atom));
	gv->synced = xcalloc((size_t)m->mesh.world, sizeof(*gv->synced));
	for (r = 0; r < m->mesh.world; r++) {
		gv->atom[r] = xcalloc((size_t)m->nparams, sizeof(**gv->atom));
		gv->synced[r] = xcalloc((size_t)m->nparams,
		    sizeof(**gv->synced));
	}
	for (i = 0; i < eng->nranks; i++)
		for (k = 0; k < m->nparams; k++) {
			gv->atom[eng->ranks[i].rank][k] = atoms[i][k];
			gv->synced[eng->ranks[i].rank][k] =
			    eng->ranks[i].pgrad[k];
		}
	for (j = 0; j < gv->in.n; j++) {
		r = gv->in.v[j].src;
		q = gv->in.v[j].data;
		n = (int64_t)(gv->in.v[j].len / sizeof(*q));
		for (off = 0, k = 0; k < m->nparams; k++) {
			if (!model_rank_holds(m, &m->params[k], r))
				continue;
			a = model_atoms_per_rank(m, &m->params[k]) *
			    m->params[k].local_elems;
			if (off + a + m->params[k].local_elems > n)
				fatalx("numeric: short gradients from rank %d",
				    r);
			gv->atom[r][k] = (union num *)(q + off);
			gv->synced[r][k] = (union num *)(q + off + a);
			off += a + m->params[k].local_elems;
		}
	}
}

static void
gathered_free(struct engine *eng, struct gathered *gv, int world)
{
	int	 r;

	if (gv->atom != NULL)
		for (r = 0; r < world; r++) {
			free(gv->atom[r]);
			free(gv->synced[r]);
		}
	free(gv->atom);
	free(gv->synced);
	coll_release(&eng->comm, &gv->in);
}

/*
 * Comparison (process 0).
 */

/* Hash of n values in the audit's numerics (float32 hashed as floats). */
static uint64_t
hash_nums(const union num *v, int64_t n)
{
	float		*f;
	uint64_t	 h;
	int64_t		 i;

	if (num_arith == ARITH_EXACT)
		return hash_u64s(&v->f, (size_t)n);
	if (num_arith == ARITH_FLOAT64)
		return hash_doubles(&v->d, (size_t)n);
	f = xcalloc((size_t)n, sizeof(*f));
	for (i = 0; i < n; i++)
		f[i] = (float)v[i].d;
	h = hash_floats(f, (size_t)n);
	free(f);
	return h;
}

/* Distance in units in the last place of the audit's float type. */
static double
ulp_distance(double a, double b)
{
	uint64_t	 ua, ub;
	uint32_t	 fa, fb;
	float		 xa = (float)a, xb = (float)b;

	if (num_arith == ARITH_FLOAT32) {
		memcpy(&fa, &xa, 4);
		memcpy(&fb, &xb, 4);
		fa = (fa >> 31) ? ~fa : fa | UINT32_C(0x80000000);
		fb = (fb >> 31) ? ~fb : fb | UINT32_C(0x80000000);
		return fa > fb ? (double)(fa - fb) : (double)(fb - fa);
	}
	memcpy(&ua, &a, 8);
	memcpy(&ub, &b, 8);
	ua = (ua >> 63) ? ~ua : ua | (UINT64_C(1) << 63);
	ub = (ub >> 63) ? ~ub : ub | (UINT64_C(1) << 63);
	return ua > ub ? (double)(ua - ub) : (double)(ub - ua);
}

/*
 * Float tolerances.  Against the reference: the model runs in a different
 * order on one rank, so relative error grows with depth; wrong gradients
 * differ by whole atoms.  Against a symbolic expression: only the last
 * few sums and scalings differ.
 */
static double
reference_tolerance(void)
{
	return num_arith == ARITH_FLOAT32 ? 1e-4 : 1e-10;
}

static double
expression_tolerance(void)
{
	return num_arith == ARITH_FLOAT32 ? 1e-5 : 1e-13;
}

/* Compare a region with the reference; fills the cell's numeric fields. */
static void
compare_region(struct cell *cell, const union num *v, const union num *ref,
    int64_t n, double ref_max)
{
	double		 diff, rel;
	int64_t		 i;

	cell->numeric_ok = true;
	cell->max_ulps = 0;
	cell->max_rel_error = 0;
	for (i = 0; i < n; i++) {
		if (num_arith == ARITH_EXACT) {
			if (v[i].f != ref[i].f)
				cell->numeric_ok = false;
			continue;
		}
		diff = fabs(v[i].d - ref[i].d);
		if (ref[i].d != 0)
			rel = diff / fabs(ref[i].d);
		else
			rel = ref_max > 0 ? diff / ref_max : diff;
		if (rel > cell->max_rel_error)
			cell->max_rel_error = rel;
		if (ulp_distance(v[i].d, ref[i].d) > cell->max_ulps)
			cell->max_ulps = ulp_distance(v[i].d, ref[i].d);
		if (diff > reference_tolerance() * (fabs(ref[i].d) + ref_max))
			cell->numeric_ok = false;
	}
}

/* The instance of logical parameter lp that `rank` holds, or NULL. */
static const struct param *
instance_held(const struct model *m, int lp, int rank)
{
	int	inst = model_instance_on(m, m->logical[lp].instance[0], rank);

	return inst >= 0 ? &m->params[inst] : NULL;
}

/*
 * Evaluate a symbolic expression on the numeric atoms at local elements
 * [lo, hi): exact in the field, in double (with the sum of the absolute
 * terms, the scale of its rounding error) in floats.  Atom a is rank a's
 * local gradient of the instance of the logical parameter on a's stage.
 */
static void
eval_expression(const struct model *m, const struct atom_space *sp,
    const struct gathered *gv, int lp, const struct lincomb *lc, int64_t lo,
    int64_t hi, union num *out, double *magnitude)
{
	const struct param		*p;
	const union num			*atom;
	union num			 coef;
	double				 cd;
	int64_t				 i;
	uint32_t			 t;
	int				 a;

	memset(out, 0, (size_t)(hi - lo) * sizeof(*out));
	memset(magnitude, 0, (size_t)(hi - lo) * sizeof(*magnitude));
	for (t = 0; t < lc->nterms; t++) {
		a = atom_rank(sp, lc->terms[t].atom);
		if (a < 0 || a >= m->mesh.world)
			fatalx("numeric: atom g%d outside the mesh", a);
		if ((p = instance_held(m, lp, a)) == NULL ||
		    (atom = gv->atom[a][p->index]) == NULL)
			fatalx("numeric: atom g%d of %s is on a rank without "
			    "the parameter", a, m->logical[lp].name);
		/* The rank's atoms: per (source,) micro-batch, lossnorm.h. */
		atom += (int64_t)(model_atom_slot(m, p,
		    atom_source(sp, lc->terms[t].atom)) *
		    m->loss.micro_batches + atom_micro_batch(sp,
		    lc->terms[t].atom)) * p->local_elems;
		/* Held atoms follow the plain ones (run_step). */
		if (atom_is_held(sp, lc->terms[t].atom))
			atom += (int64_t)model_atoms_per_rank(m, p) / 2 *
			    p->local_elems;
		if (hi > p->local_elems)
			fatalx("numeric: region of %s beyond its shard",
			    m->logical[lp].name);
		coef = num_from_rational(lc->terms[t].coef);
		cd = (double)lc->terms[t].coef.num /
		    (double)lc->terms[t].coef.den;
		for (i = lo; i < hi; i++) {
			if (num_arith == ARITH_EXACT) {
				out[i - lo] = num_add(out[i - lo],
				    num_mul(coef, atom[i]));
				continue;
			}
			out[i - lo].d += cd * atom[i].d;
			magnitude[i - lo] += fabs(cd * atom[i].d);
		}
	}
}

/* Does v equal the evaluated expression e (within rounding, in floats)? */
static bool
matches_expression(const union num *v, const union num *e,
    const double *magnitude, int64_t n, int nterms, double scale)
{
	double		 tol;
	int64_t		 i;

	for (i = 0; i < n; i++) {
		if (num_arith == ARITH_EXACT) {
			if (v[i].f != e[i].f)
				return false;
			continue;
		}
		tol = expression_tolerance() * (nterms + 1) *
		    (magnitude[i] + fabs(v[i].d)) + 1e-300;
		if (fabs(v[i].d - e[i].d) > tol + scale)
			return false;
	}
	return true;
}

/*
 * An expression evaluated on the atoms, kept for the next cell: replicas
 * (every dp rank of an averaged parameter) share one expression, and
 * evaluating its dp terms again on each of them made the self-check
 * quadratic in dp (dp=512 took 100 s on 16 processes).
 */
struct evaluated {
	const struct lincomb	*lc;	/* NULL: nothing kept yet */
	int			 lp;
	int64_t			 lo, hi;
	union num		*v;
	double			*magnitude;
};

struct self_check {
	const struct atom_space *atoms;	/* the audit's (atom.h) */
	int		 failures;
	struct arena	 arena;
	struct evaluated value, expected;
};

/* eval_expression(), unless ev holds the same evaluation already. */
static const union num *
evaluate(const struct model *m, const struct atom_space *sp,
    const struct gathered *gv, int lp, const struct lincomb *lc, int64_t lo,
    int64_t hi, struct evaluated *ev, const double **magnitude)
{
	if (ev->lc == NULL || ev->lp != lp || ev->lo != lo || ev->hi != hi ||
	    !lc_equal(ev->lc, lc)) {
		free(ev->v);
		free(ev->magnitude);
		ev->v = xcalloc((size_t)(hi - lo), sizeof(*ev->v));
		ev->magnitude = xcalloc((size_t)(hi - lo),
		    sizeof(*ev->magnitude));
		eval_expression(m, sp, gv, lp, lc, lo, hi, ev->v,
		    ev->magnitude);
		ev->lc = lc;
		ev->lp = lp;
		ev->lo = lo;
		ev->hi = hi;
	}
	*magnitude = ev->magnitude;
	return ev->v;
}

static void
evaluated_free(struct evaluated *ev)
{
	free(ev->v);
	free(ev->magnitude);
	memset(ev, 0, sizeof(*ev));
}

static void
self_check_fail(struct self_check *sc, const char *param, int rank,
    int64_t lo, int64_t hi, const char *what, const struct lincomb *lc)
{
	if (sc->failures++ < NUM_MAX_MESSAGES)
		fprintf(stderr, "%s: self-check failed: %s on rank %d "
		    "[%lld,%lld): %s %s\n", progname, param, rank,
		    (long long)lo, (long long)hi, what,
		    lc_format(&sc->arena, sc->atoms, lc, "g"));
}

/* Per logical parameter: the reference, its size and largest value. */
struct reference_view {
	const union num	*grad;
	int64_t		 elems;
	double		 max;
};

static void
check_cell(const struct model *m, const struct gathered *gv, int lp,
    const struct reference_view *ref, struct cell *cell,
    struct self_check *sc)
{
	const struct logical_param	*l = &m->logical[lp];
	const struct param		*p;
	const union num			*e;
	union num			*rv;
	const double			*mag;
	int64_t				 n = cell->hi - cell->lo, i;

	if ((p = instance_held(m, lp, cell->rank)) == NULL ||
	    gv->synced[cell->rank][p->index] == NULL || cell->lo < 0 ||
	    cell->hi > p->local_elems || n < 0)
		fatalx("numeric: cell of %s on rank %d has no values",
		    l->name, cell->rank);

	rv = xcalloc((size_t)n, sizeof(*rv));
	for (i = 0; i < n; i++)
		rv[i] = ref->grad[model_global_index(m, p, cell->rank,
		    cell->lo + i)];
	cell->has_hash = true;
	cell->hash = hash_nums(gv->synced[cell->rank][p->index] + cell->lo,
	    n);
	cell->reference_hash = hash_nums(rv, n);
	compare_region(cell, gv->synced[cell->rank][p->index] + cell->lo, rv,
	    n, ref->max);

	/* The value must be its expression evaluated on the atoms... */
	e = evaluate(m, sc->atoms, gv, lp, cell->value, cell->lo, cell->hi,
	    &sc->value, &mag);
	if (!matches_expression(gv->synced[cell->rank][p->index] + cell->lo,
	    e, mag, n, (int)cell->value->nterms, 0))
		self_check_fail(sc, l->name, cell->rank, cell->lo, cell->hi,
		    "numeric value differs from its symbolic expression",
		    cell->value);

	/* ...and the reference the expected expression. */
	e = evaluate(m, sc->atoms, gv, lp, cell->expected, cell->lo, cell->hi,
	    &sc->expected, &mag);
	if (!matches_expression(rv, e, mag, n, (int)cell->expected->nterms,
	    num_arith == ARITH_EXACT ? 0 : reference_tolerance() * ref->max))
		self_check_fail(sc, l->name, cell->rank, cell->lo, cell->hi,
		    "reference differs from the expected expression",
		    cell->expected);

	/*
	 * In exact numerics, with both checks passed, a symbolically correct
	 * cell is numerically correct.  The converse can fail without any
	 * inconsistency: where the atoms that make a value wrong are zero over
	 * the whole region (embedding rows no token of a batch uses, an expert
	 * no token chose), a wrong expression has right numbers, a blind spot
	 * of any numeric test.  So only one direction is an internal error.
	 */
	if (num_arith == ARITH_EXACT && cell->used && cell->ok &&
	    !cell->numeric_ok)
		self_check_fail(sc, l->name, cell->rank, cell->lo, cell->hi,
		    "differs from the reference although its expression is the "
		    "expected one,", cell->value);
	free(rv);
}

/*
 * Replicas (SPEC section 8): cells whose values have one expression over
 * one region of one parameter instance must hold the same bits in every
 * arithmetic, floats included, because every collective hands all members
 * of a group the one result its receivers summed in group order.  Sorting
 * the cells by (instance, region, expression) puts each set of replicas in
 * one run, so the check takes n log n comparisons, not n^2.
 */
struct replica {
	const struct cell	*cell;
	int			 instance;
};

static int
cmp_int64(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

/* Any total order on expressions in which equal ones are adjacent. */
static int
lincomb_order(const struct lincomb *a, const struct lincomb *b)
{
	const struct term	*s, *t;
	uint32_t		 i;
	int			 c;

	if (a->nterms != b->nterms)
		return a->nterms < b->nterms ? -1 : 1;
	for (i = 0; i < a->nterms; i++) {
		s = &a->terms[i];
		t = &b->terms[i];
		if ((c = cmp_int64(s->atom, t->atom)) != 0 ||
		    (c = cmp_int64(s->coef.num, t->coef.num)) != 0 ||
		    (c = cmp_int64(s->coef.den, t->coef.den)) != 0)
			return c;
	}
	return 0;
}

static int
replica_order(const void *x, const void *y)
{
	const struct replica	*a = x, *b = y;
	int			 c;

	if ((c = cmp_int64(a->instance, b->instance)) != 0 ||
	    (c = cmp_int64(a->cell->lo, b->cell->lo)) != 0 ||
	    (c = cmp_int64(a->cell->hi, b->cell->hi)) != 0 ||
	    (c = lincomb_order(a->cell->value, b->cell->value)) != 0)
		return c;
	return cmp_int64(a->cell->rank, b->cell->rank);
}

static bool
same_replica_set(const struct replica *a, const struct replica *b)
{
	return a->instance == b->instance && a->cell->lo == b->cell->lo &&
	    a->cell->hi == b->cell->hi && lc_equal(a->cell->value,
	    b->cell->value);
}

static void
check_replicas(const struct model *m, int lp, const struct param_result *pr,
    struct self_check *sc)
{
	struct replica		*v;
	const struct param	*p;
	const struct cell	*a, *b;
	size_t			 i, j, n = 0;

	v = xcalloc(pr->ncells, sizeof(*v));
	for (i = 0; i < pr->ncells; i++) {
		if (!pr->cells[i].has_hash)
			continue;
		if ((p = instance_held(m, lp, pr->cells[i].rank)) == NULL)
			fatalx("numeric: cell of %s on rank %d has no instance",
			    pr->name, pr->cells[i].rank);
		v[n].cell = &pr->cells[i];
		v[n++].instance = p->index;
	}
	qsort(v, n, sizeof(*v), replica_order);
	for (i = 0; i < n; i = j)
		for (j = i + 1; j < n && same_replica_set(&v[i], &v[j]); j++) {
			a = v[i].cell;
			b = v[j].cell;
			if (a->hash != b->hash && sc->failures++ <
			    NUM_MAX_MESSAGES)
				fprintf(stderr, "%s: self-check failed: %s: "
				    "replicas ranks %d and %d hold the same "
				    "expression but different bits "
				    "[%lld,%lld)\n", progname, pr->name,
				    a->rank, b->rank, (long long)a->lo,
				    (long long)a->hi);
		}
	free(v);
}

static void
compare_all(const struct model *m, const struct gathered *gv,
    union num **ref, struct audit *audit, struct self_check *sc,
    struct progress_count *pc)
{
	struct param_result	*pr;
	struct reference_view	 rv;
	const struct param	*p;
	size_t			 i, j;
	int64_t			 k;
	int			 lp;

	for (i = 0; i < audit->nparams; i++) {
		pr = &audit->params[i];
		if ((lp = logical_by_name(m, pr->name)) < 0)
			fatalx("numeric: audited parameter %s not in the model",
			    pr->name);
		p = &m->params[m->logical[lp].instance[0]];
		rv.grad = ref[lp];
		rv.elems = p->elems;
		rv.max = 0;
		if (num_arith != ARITH_EXACT)
			for (k = 0; k < rv.elems; k++)
				if (fabs(rv.grad[k].d) > rv.max)
					rv.max = fabs(rv.grad[k].d);
		pr->has_hash = true;
		pr->reference_hash = hash_nums(rv.grad, rv.elems);
		for (j = 0; j < pr->ncells; j++)
			check_cell(m, gv, lp, &rv, &pr->cells[j], sc);
		check_replicas(m, lp, pr, sc);
		progress_tick(pc);
	}
}

/*
 * The gradient norm (gradnorm.h) on the real gradients: every hosted rank
 * squares the used elements its filters keep into a dense and an expert
 * partial sum, in the audit's numerics, the plan's all-reduces run as real
 * collectives, and process 0 gathers every rank's norm squared.  Returns
 * the world's norms squared on process 0, NULL elsewhere.
 */
static union num *
norm_on_ranks(struct engine *eng, const struct sym_context *ctx)
{
	const struct model	*m = eng->model;
	struct gn_plan		 plan;
	struct outbox		 ob = { 0 };
	struct inbox		 in;
	union num		*val, **vec, *all = NULL, *p;
	int64_t			*len, used[16][2], k;
	size_t			 j;
	int			 i, q, n, r, s, part, root = 0;
	bool			 added = false;

	gn_plan_build(&plan, ctx);
	val = xcalloc((size_t)eng->nranks * GN_PART__COUNT, sizeof(*val));
	vec = xcalloc((size_t)eng->nranks, sizeof(*vec));
	len = xcalloc((size_t)eng->nranks, sizeof(*len));
	for (i = 0; i < eng->nranks; i++) {
		struct rank_state *rs = &eng->ranks[i];

		len[i] = 1;
		for (q = 0; q < m->nparams; q++) {
			if (rs->pgrad[q] == NULL || (part = gn_part_of(&plan,
			    m, q, &rs->coord)) < 0)
				continue;
			n = syncplan_used_ranges(m, &ctx->layout, q, rs->rank,
			    used, 16);
			for (r = 0; r < n; r++)
				for (k = used[r][0]; k < used[r][1]; k++)
					val[i * GN_PART__COUNT + part] =
					    num_add(val[i * GN_PART__COUNT +
					    part], num_mul(rs->pgrad[q][k],
					    rs->pgrad[q][k]));
		}
	}
	for (s = 0; s <= plan.nsteps; s++) {
		if (!added && (s == plan.nsteps ||
		    plan.steps[s].part == GN_PART_TOTAL)) {
			/* ChainedOptimizer: the parts' squares add up. */
			for (i = 0; i < eng->nranks; i++)
				val[i * GN_PART__COUNT + GN_PART_TOTAL] =
				    num_add(val[i * GN_PART__COUNT +
				    GN_PART_DENSE], val[i * GN_PART__COUNT +
				    GN_PART_EXPERT]);
			added = true;
		}
		if (s == plan.nsteps)
			break;
		for (i = 0; i < eng->nranks; i++)
			vec[i] = &val[i * GN_PART__COUNT + plan.steps[s].part];
		coll_all_reduce(&eng->comm, plan.steps[s].group, vec, len,
		    plan.steps[s].average);
	}
	for (i = 0; i < eng->nranks; i++) {
		p = xcalloc(1, sizeof(*p));
		*p = val[i * GN_PART__COUNT + GN_PART_TOTAL];
		outbox_add(&ob, eng->ranks[i].rank, root, TAG_COLLECT, p,
		    sizeof(*p));
	}
	coll_exchange(&eng->comm, &ob, &in);
	if (eng->comm.transport->proc == transport_host_of(eng->comm.transport,
	    root)) {
		all = xcalloc((size_t)m->mesh.world, sizeof(*all));
		for (j = 0; j < in.n; j++) {
			if (in.v[j].len != sizeof(*all) || in.v[j].src < 0 ||
			    in.v[j].src >= m->mesh.world)
				fatalx("numeric: bad norm from rank %d",
				    in.v[j].src);
			memcpy(&all[in.v[j].src], in.v[j].data, sizeof(*all));
		}
	}
	coll_release(&eng->comm, &in);
	free(val);
	free(vec);
	free(len);
	return all;
}

/* The norm squared of the reference: every logical element once. */
static union num
reference_norm(const struct model *m, union num **ref)
{
	union num	 sum;
	int64_t		 e;
	int		 l;

	memset(&sum, 0, sizeof(sum));
	for (l = 0; l < m->nlogical; l++)
		for (e = 0; e < m->params[m->logical[l].instance[0]].elems;
		    e++)
			sum = num_add(sum, num_mul(ref[l][e], ref[l][e]));
	return sum;
}

/* The symbolic norm squared of a class evaluated on the numeric atoms. */
static union num
class_norm(const struct model *m, const struct gathered *gv,
    const struct audit *audit, const struct gn_class *cl, int64_t *nelems)
{
	union num	 sum, part, *v;
	double		*mag;
	size_t		 i;
	int64_t		 e, n;
	int		 lp;

	memset(&sum, 0, sizeof(sum));
	*nelems = 0;
	for (i = 0; i < cl->npieces; i++) {
		const struct gn_piece *pc = &cl->pieces[i];

		if ((lp = logical_by_name(m, audit->params[pc->param].name)) <
		    0)
			fatalx("numeric: norm of an unknown parameter");
		n = pc->hi - pc->lo;
		v = xcalloc((size_t)n, sizeof(*v));
		mag = xcalloc((size_t)n, sizeof(*mag));
		eval_expression(m, &audit->atoms, gv, lp, pc->value, pc->lo,
		    pc->hi, v, mag);
		memset(&part, 0, sizeof(part));
		for (e = 0; e < n; e++)
			part = num_add(part, num_mul(v[e], v[e]));
		sum = num_add(sum, num_mul(num_from_rational(pc->mult), part));
		*nelems += n;
		free(v);
		free(mag);
	}
	return sum;
}

static double
clip_coefficient(double norm2)
{
	double	c = GN_CLIP_GRAD / (sqrt(norm2) + GN_CLIP_EPS);

	return num_round(c < 1 ? c : 1);
}

/*
 * The clip coefficient's tolerance in ulps: the reference tolerance of a
 * norm squared, relative, in units of the float type's epsilon (the
 * coefficient's relative error is at most half the norm squared's).
 */
static double
clip_ulps_tolerance(void)
{
	return ceil(reference_tolerance() / (num_arith == ARITH_FLOAT32 ?
	    (double)FLT_EPSILON : DBL_EPSILON));
}

/*
 * Process 0: every rank's norm squared against the reference's (the
 * verdict) and against its symbolic value evaluated on the atoms (the
 * self-check).  In floats the verdict needs both the norms squared within
 * the reference tolerance and the clip coefficients min(1, clip / (norm +
 * eps)) within clip_ulps_tolerance() ulps: the coefficient alone would
 * pass a wrong norm below the clip value, where it is 1 either way.
 */
static bool
compare_norms(const struct model *m, const struct gathered *gv,
    union num **ref, const union num *norm2, struct audit *audit,
    struct self_check *sc)
{
	struct grad_norm_result	*g = &audit->grad_norm;
	union num		 rn = reference_norm(m, ref), *sym;
	bool			*have, all_ok = true;
	int64_t			*nel;
	double			 tol;
	int			 r, c, world = m->mesh.world;

	g->hash = arena_alloc(&audit->arena, world * sizeof(*g->hash));
	g->numeric_ok = arena_alloc(&audit->arena, world *
	    sizeof(*g->numeric_ok));
	g->norm = arena_alloc(&audit->arena, world * sizeof(*g->norm));
	g->coefficient = arena_alloc(&audit->arena, world *
	    sizeof(*g->coefficient));
	g->ulps = arena_alloc(&audit->arena, world * sizeof(*g->ulps));
	g->reference_hash = hash_nums(&rn, 1);
	if (num_arith != ARITH_EXACT) {
		g->reference_norm = sqrt(rn.d);
		g->reference_coefficient = clip_coefficient(rn.d);
	}
	sym = xcalloc(g->nclasses + 1, sizeof(*sym));
	have = xcalloc(g->nclasses + 1, sizeof(*have));
	nel = xcalloc(g->nclasses + 1, sizeof(*nel));
	for (r = 0; r < world; r++) {
		/* A rank that never clips acts as if its norm were 0. */
		if (!gn_clips(m, r)) {
			union num zero;

			memset(&zero, 0, sizeof(zero));
			g->hash[r] = hash_nums(&zero, 1);
			g->numeric_ok[r] = false;
			g->coefficient[r] = 1;
			g->ulps[r] = num_arith == ARITH_EXACT ? 0 :
			    ulp_distance(1, g->reference_coefficient);
			all_ok = false;
			continue;
		}
		g->hash[r] = hash_nums(&norm2[r], 1);
		if (num_arith == ARITH_EXACT)
			g->numeric_ok[r] = norm2[r].f == rn.f;
		else {
			g->norm[r] = sqrt(norm2[r].d);
			g->coefficient[r] = clip_coefficient(norm2[r].d);
			g->ulps[r] = ulp_distance(g->coefficient[r],
			    g->reference_coefficient);
			g->numeric_ok[r] = fabs(norm2[r].d - rn.d) <=
			    reference_tolerance() * fabs(rn.d) &&
			    g->ulps[r] <= clip_ulps_tolerance();
		}
		all_ok = all_ok && g->numeric_ok[r];
		if ((c = g->class_of[r]) < 0)
			continue;
		if (!have[c]) {
			sym[c] = class_norm(m, gv, audit, &g->classes[c],
			    &nel[c]);
			have[c] = true;
		}
		tol = expression_tolerance() * (double)(nel[c] + 1) *
		    fabs(sym[c].d);
		if (num_arith == ARITH_EXACT ? sym[c].f != norm2[r].f :
		    fabs(sym[c].d - norm2[r].d) > tol) {
			if (sc->failures++ < NUM_MAX_MESSAGES)
				fprintf(stderr, "%s: self-check failed: the "
				    "gradient norm of rank %d differs from "
				    "its symbolic value\n", progname, r);
		}
		/* Exact, symbolically right: numerically right too. */
		if (num_arith == ARITH_EXACT && g->classes[c].correct &&
		    !g->numeric_ok[r] && sc->failures++ < NUM_MAX_MESSAGES)
			fprintf(stderr, "%s: self-check failed: the gradient "
			    "norm of rank %d differs from the reference's "
			    "although it counts every element once\n",
			    progname, r);
	}
	free(sym);
	free(have);
	free(nel);
	g->numeric = true;
	g->numeric_correct = all_ok;
	return all_ok;
}

/*
 * The numeric verdict of the audit: correct iff every used cell holds its
 * region of the reference.  It reads only what compare_region measured
 * (numeric_ok), never the symbolic ok, so that the tests can hold the two
 * verdicts against each other (issue 8: an agreement test that compared the
 * exit status of run with that of check compared the symbolic verdict with
 * itself).
 */
static bool
numeric_verdict(const struct audit *audit)
{
	const struct param_result	*pr;
	size_t				 i, j;

	for (i = 0; i < audit->nparams; i++) {
		pr = &audit->params[i];
		for (j = 0; j < pr->ncells; j++)
			if (pr->cells[j].used && !pr->cells[j].numeric_ok)
				return false;
	}
	return true;
}

/*
 * The size limit.  A rank of stage s holds, for every parameter of s, its
 * weights, its local gradient and a copy of it (the atoms), and for every
 * slot of the stage program a value and its gradient, tokens rows of at
 * most the widest dimension but the vocabulary, which only the logits
 * have; an expert op also keeps the items it routes
 * and those it receives from its ep group, each a row of hidden plus two
 * of expert_ffn.  An estimate from above, in int64 without overflow: a
 * valid config has at most 2^40 elements a parameter and 2^20 tokens.
 */
static int64_t
stage_values(const struct model *m, int stage)
{
	const struct config		*cfg = m->config;
	const struct stage_program	*sp = &m->stages[stage];
	int64_t				 n = 0, width, routed;
	int				 k;

	for (k = 0; k < m->nparams; k++)
		if (m->params[k].stage == stage)
			n += (3 + model_atoms_per_rank(m, &m->params[k]) +
			    (model_per_source(m, &m->params[k]) ?
			    m->mesh.ep : 0)) * m->params[k].local_elems;
	width = cfg->model.hidden;
	if (cfg->model.ffn > width)
		width = cfg->model.ffn;
	if (cfg->model.has_moe && cfg_shared_expert_ffn(cfg) > width)
		width = cfg_shared_expert_ffn(cfg);
	if (cfg->model.has_moe && cfg->model.moe.experts > width)
		width = cfg->model.moe.experts;
	n += 2 * (int64_t)sp->nslots * m->tokens * width;
	/*
	 * Only the logits are as wide as the vocabulary: a 50257-token
	 * vocabulary counted in every slot put GPT-3's shape past the limit.
	 */
	for (k = 0; k < sp->nops; k++)
		if (sp->ops[k].kind == OP_OUTPUT)
			n += 2 * (int64_t)m->tokens * (cfg_padded_vocab(cfg) /
			    m->mesh.tp);
	if (!cfg->model.has_moe)
		return n;
	routed = (int64_t)m->tokens * cfg->model.moe.top_k;
	for (k = 0; k < sp->nops; k++)
		if (sp->ops[k].kind == OP_EXPERTS)
			n += routed * cfg->model.hidden + routed *
			    m->mesh.ep * (cfg->model.hidden +
			    2 * (int64_t)cfg->model.moe.expert_ffn);
	return n;
}

/* The values the numeric audit holds on its fullest rank and over the mesh. */
static void
numeric_sizes(const struct config *cfg, int64_t *rank_max, int64_t *total,
    int *world)
{
	struct model	 m;
	int64_t		 n;
	int		 s, per_stage;

	model_build(&m, cfg);
	per_stage = m.mesh.world / m.mesh.pp;
	*rank_max = *total = 0;
	*world = m.mesh.world;
	for (s = 0; s < m.mesh.pp; s++) {
		n = stage_values(&m, s);
		if (n > *rank_max)
			*rank_max = n;
		/* Past the rank limit the total is never needed. */
		if (n <= NUM_MAX_RANK_VALUES)
			*total += n * per_stage;
	}
	model_free(&m);
}

const char *
numeric_too_big(const struct config *cfg, char *msg, size_t len)
{
	int64_t		 rank_max, total;
	int		 world;

	numeric_sizes(cfg, &rank_max, &total, &world);
	if (rank_max > NUM_MAX_RANK_VALUES) {
		snprintf(msg, len, "the numeric audit needs %lld "
		    "values per rank; at most %lld are supported (use "
		    "gradaudit check, or smaller model sizes)",
		    (long long)rank_max, (long long)NUM_MAX_RANK_VALUES);
		return msg;
	}
	if (total > NUM_MAX_MESH_VALUES) {
		snprintf(msg, len, "the numeric audit needs %lld "
		    "values over its %d ranks; at most %lld are supported "
		    "(use gradaudit check, or a smaller mesh or model)",
		    (long long)total, world,
		    (long long)NUM_MAX_MESH_VALUES);
		return msg;
	}
	return NULL;
}

const char *
numeric_skip_reason(const struct config *cfg, char *msg, size_t len)
{
	int64_t		 rank_max, total;
	int		 world;

	numeric_sizes(cfg, &rank_max, &total, &world);
	if (rank_max > NUM_MAX_RANK_VALUES)
		snprintf(msg, len, "needs %lld values per rank, "
		    "limit %lld", (long long)rank_max,
		    (long long)NUM_MAX_RANK_VALUES);
	else if (total > NUM_MAX_MESH_VALUES)
		snprintf(msg, len, "needs %lld values over %d ranks, "
		    "limit %lld", (long long)total, world,
		    (long long)NUM_MAX_MESH_VALUES);
	else
		return NULL;
	return msg;
}

/*
 * The audit.
 */
int
numeric_audit(const struct sym_context *ctx, struct transport *transport,
    const struct numeric_options *options, struct audit *audit)
{
	const struct model		*m = &ctx->model;
	struct weight_source		 ws;
	struct engine			 eng;
	struct gathered			 gv;
	struct self_check		 sc;
	struct progress_count		 pc = { false, 0 };
	union num			***atoms, **ref = NULL, *norm2;
	int				*key, k, i, status = EXIT_OK;
	int64_t				 total;
	bool				 root;

	if (transport->world != m->mesh.world)
		fatalx("numeric: transport of %d ranks for a mesh of %d",
		    transport->world, m->mesh.world);
	num_arith = options->arith;
	root = transport->proc == transport_host_of(transport, 0);

	ws.seed = options->seed;
	ws.scale = xcalloc((size_t)m->nlogical, sizeof(*ws.scale));
	for (k = 0; k < m->nlogical; k++)
		ws.scale[k] = weight_scale(&m->params[m->logical[k].instance[0]]);
	key = xcalloc((size_t)m->nparams, sizeof(*key));
	for (k = 0; k < m->nparams; k++)
		key[k] = m->params[k].logical;

	if (root && options->progress) {
		for (total = 0, k = 0; k < m->mesh.pp; k++)
			total += 2 * m->stages[k].nops;
		total *= m->loss.micro_batches * (1 + m->loss.mtp);
		total += ctx->plan.nsteps + m->loss.chunks +
		    (int64_t)audit->nparams;
		progress_start("numeric audit", total);
		pc.on = true;
	}

	engine_init(&eng, m, transport, transport->local, transport->nlocal,
	    &ws, key);
	/* The atoms: every micro-batch's local gradient, before the sync. */
	atoms = run_step(&eng, &pc);
	run_sync(&eng, &ctx->layout, &ctx->plan, &pc);
	test_corruption(&eng);
	norm2 = norm_on_ranks(&eng, ctx);

	memset(&gv, 0, sizeof(gv));
	gather_values(&eng, atoms, &gv);
	if (root) {
		ref = reference_gradients(m, &ws, &pc);
		memset(&sc, 0, sizeof(sc));
		sc.atoms = &audit->atoms;
		arena_init(&sc.arena);
		compare_all(m, &gv, ref, audit, &sc, &pc);
		if (audit->grad_norm.present)
			compare_norms(m, &gv, ref, norm2, audit, &sc);
		if (sc.failures > NUM_MAX_MESSAGES)
			fprintf(stderr, "%s: self-check failed on %d more "
			    "regions\n", progname, sc.failures -
			    NUM_MAX_MESSAGES);
		if (sc.failures > 0)
			status = EXIT_RUNTIME;
		arena_free(&sc.arena);
		evaluated_free(&sc.value);
		evaluated_free(&sc.expected);
		audit->numeric = true;
		/* The norm's numeric verdict is grad_norm.numeric_correct. */
		audit->numeric_correct = numeric_verdict(audit);
		audit->arith = options->arith;
		audit->procs = transport->nprocs;
		for (k = 0; k < m->nlogical; k++)
			free(ref[k]);
		free(ref);
	}
	if (pc.on)
		progress_end();

	free(norm2);
	gathered_free(&eng, &gv, m->mesh.world);
	for (i = 0; i < eng.nranks; i++) {
		for (k = 0; k < m->nparams; k++)
			free(atoms[i][k]);
		free(atoms[i]);
	}
	free(atoms);
	engine_free(&eng);
	free(key);
	free(ws.scale);
	return transport_max_int(transport, status);
}
