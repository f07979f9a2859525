/*
 * The interpreter of the numeric engine (numeric.c): every process walks
 * the same global sequence of ops (forward over stages 0..pp-1, backward
 * over pp-1..0), so the rounds of all processes line up: a process with no
 * rank on the active stage takes part with an empty outbox.  It runs the
 * micro-batches of a step and the passes that give the atoms, and holds
 * the test hooks of the failure paths (numeric.c lists them).
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/progress.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "model/layout.h"
#include "model/mesh.h"
#include "model/model.h"
#include "model/placement.h"
#include "model/syncplan.h"
#include "numeric/interpret.h"
#include "numeric/kernels.h"
#include "numeric/numengine.h"
#include "numeric/numvalue.h"
#include "symbolic/audit.h"
#include "symbolic/lincomb.h"

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
	enum arith		 arith = eng->arith;
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
			g->v[k] = num_add(arith, g->v[k], d->v[k]);
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
	eng->din_place[0] = din[0];
	eng->din_place[1] = din[1];
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

void
test_corruption(struct engine *eng)
{
	enum arith	 arith = eng->arith;
	union num	*x;

	if ((x = test_target(eng, "GRADAUDIT_TEST_CORRUPT_RANK")) != NULL)
		*x = num_add(arith, *x, num_from_rational(arith, q_make(1, 1)));
	if ((x = test_target(eng, "GRADAUDIT_TEST_NUDGE_RANK")) == NULL)
		return;
	if (arith == ARITH_FLOAT32)
		x->d = (double)nextafterf((float)x->d, INFINITY);
	else if (arith == ARITH_FLOAT64)
		x->d = nextafter(x->d, INFINITY);
}

void
progress_tick(struct progress_count *pc)
{
	if (pc != NULL && pc->on)
		progress_update(++pc->done);
}

void
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
		}
	}
}

/*
 * What layer d's pass left on rank rs's parameter k (of the tokens of its
 * ep group's source j, for an expert kept per source) is an atom, kept at
 * `atom`, and added to the local gradient `total` times the framework's
 * factor of the chunk it comes from: the source's (lossnorm.h).
 */
static void
mtp_keep(struct engine *eng, const struct rank_state *rs, int k, int d,
    int j, bool per_source, union num *atom, union num *total, int mb)
{
	enum arith		 arith = eng->arith;
	const struct model	*m = eng->model;
	const struct loss_norm	*ln = &m->loss;
	const union num		*g = per_source ? rs->src_grad[k][j] :
				    rs->pgrad[k];
	int64_t			 e = m->params[k].local_elems, x;
	int			 chunk = per_source ? lossnorm_source_chunk(
				    &m->mesh, &rs->coord, j, mb) : rs->batch;
	union num		 coef;
	coef = num_from_rational(arith, ln->mtp_coef[(d - 1) * ln->chunks +
	    chunk]);
	memcpy(atom, g, (size_t)e * sizeof(union num));
	for (x = 0; x < e; x++)
		total[x] = num_add(arith, total[x], num_mul(arith, coef, g[x]));
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
	union num		**t;
	int			 K = ln->micro_batches, i, k, d, j;
	bool			 split;

	for (d = 1; d <= ln->mtp; d++) {
		clear_grads(eng, mb);
		eng->seed = d;
		run_model(eng, pc);
		eng->seed = 0;
		for (i = 0; i < eng->nranks; i++) {
			rs = &eng->ranks[i];
			for (k = 0; k < m->nparams; k++) {
				if (rs->pgrad[k] == NULL)
					continue;
				t = &total[i * m->nparams + k];
				if (*t == NULL)
					*t = xcalloc((size_t)m->params[k].
					    local_elems, sizeof(union num));
				split = model_per_source(m, &m->params[k]);
				for (j = 0; j < (split ? m->mesh.ep : 1); j++)
					mtp_keep(eng, rs, k, d, j, split,
					    atoms[i][k] + (model_atom_slot(m,
					    &m->params[k], split ?
					    ln->mtp_split_source + (d - 1) *
					    m->mesh.ep + j : ln->mtp_source +
					    d - 1) * K + mb) *
					    m->params[k].local_elems, *t, mb);
			}
		}
	}
}

/*
 * The pass of micro-batch mb that seeds the MoE auxiliary losses at every
 * router (bwd_route): what it leaves on a parameter they reach (issue 25:
 * the routers and everything upstream, model_has_aux) is its aux atom
 * (lossnorm.h), added to the local gradient times loss.aux_scale's factor.
 * With `held`, the atoms of parameters before a lossy MoE boundary go to
 * their held half, as the main loss's do.
 */
static void
run_aux(struct engine *eng, struct progress_count *pc, union num ***atoms,
    union num **total, int mb, bool held)
{
	enum arith		 arith = eng->arith;
	const struct model	*m = eng->model;
	const struct loss_norm	*ln = &m->loss;
	struct rank_state	*rs;
	union num		 coef, **t, *a;
	int64_t			 e, x, off;
	int			 K = ln->micro_batches, i, k, j, slot;

	if (ln->aux_source < 0)
		return;
	clear_grads(eng, mb);
	eng->seed = SEED_AUX;
	run_model(eng, pc);
	eng->seed = 0;
	coef = num_from_rational(arith, ln->aux_coef);
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		for (k = 0; k < m->nparams; k++) {
			if (rs->pgrad[k] == NULL ||
			    !model_has_aux(m, &m->params[k]))
				continue;
			e = m->params[k].local_elems;
			t = &total[i * m->nparams + k];
			if (*t == NULL)
				*t = xcalloc((size_t)e, sizeof(union num));
			off = held && m->params[k].boundary >= 0 ?
			    (int64_t)model_atoms_per_rank(m, &m->params[k]) /
			    2 * e : 0;
			slot = model_atom_slot(m, &m->params[k],
			    ln->aux_source);
			a = atoms[i][k] + off + (slot * K + mb) * e;
			memcpy(a, rs->pgrad[k], (size_t)e * sizeof(union num));
			/*
			 * An expert kept per source (before a later router):
			 * every source's tokens carry the aux losses back to
			 * it, all with the one weight aux_expected, so its
			 * aux atom is their sum.
			 */
			for (j = 0; model_per_source(m, &m->params[k]) &&
			    j < m->mesh.ep; j++)
				for (x = 0; x < e; x++)
					a[x] = num_add(arith, a[x],
					    rs->src_grad[k][j][x]);
			for (x = 0; x < e; x++)
				(*t)[x] = num_add(arith, (*t)[x],
				    num_mul(arith, coef, a[x]));
		}
	}
}

/*
 * The hook (interpret.h) with each rank's buffer, total, in its pgrad:
 * the two are swapped for the call and back.
 */
static void
call_hook(struct engine *eng, union num **total, buffer_hook *hook,
    void *arg, int mb, bool before)
{
	const struct model	*m = eng->model;
	union num		*t;
	int			 i, k;

	for (i = 0; i < eng->nranks; i++)
		for (k = 0; k < m->nparams; k++) {
			t = eng->ranks[i].pgrad[k];
			eng->ranks[i].pgrad[k] = total[i * m->nparams + k];
			total[i * m->nparams + k] = t;
		}
	hook(eng, mb, before, arg);
	for (i = 0; i < eng->nranks; i++)
		for (k = 0; k < m->nparams; k++) {
			t = eng->ranks[i].pgrad[k];
			eng->ranks[i].pgrad[k] = total[i * m->nparams + k];
			total[i * m->nparams + k] = t;
		}
}

/*
 * Every micro-batch of the step on the hosted ranks, each from zero
 * gradients: what it leaves is kept as the rank's atoms of that
 * micro-batch (per source for experts kept apart), and added to the
 * local gradient times the loss factor of the chunk it comes from
 * (lossnorm.h), total[local rank * nparams + param].  With `held`, the
 * atoms of parameters before a lossy MoE boundary go to their held half.
 * The hook, if any, sees the buffer around each micro-batch's backward
 * (its multi-token prediction and auxiliary passes are part of that
 * backward).
 */
static void
run_micro_batches(struct engine *eng, struct progress_count *pc,
    union num ***atoms, union num **total, bool held, buffer_hook *hook,
    void *arg)
{
	enum arith		 arith = eng->arith;
	const struct model	*m = eng->model;
	const struct loss_norm	*ln = &m->loss;
	struct rank_state	*rs;
	union num		 coef;
	const union num		*g;
	int64_t			 e, x, off;
	int			 K = ln->micro_batches, mb, i, k, j, n, chunk;

	/* The buffer exists, at zero, before the first backward. */
	for (i = 0; hook != NULL && i < eng->nranks; i++)
		for (k = 0; k < m->nparams; k++)
			if (eng->ranks[i].pgrad[k] != NULL &&
			    total[i * m->nparams + k] == NULL)
				total[i * m->nparams + k] = xcalloc((size_t)
				    m->params[k].local_elems,
				    sizeof(union num));
	for (mb = 0; mb < K; mb++) {
		if (hook != NULL)
			call_hook(eng, total, hook, arg, mb, true);
		run_mtp(eng, pc, atoms, total, mb);
		run_aux(eng, pc, atoms, total, mb, held);
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
					chunk = n > 1 ? lossnorm_source_chunk(
					    &m->mesh, &rs->coord, j, mb) :
					    lossnorm_chunk(&m->mesh, mb,
					    rs->coord.dp);
					coef = num_from_rational(arith,
					    ln->coef[chunk]);
					memcpy(atoms[i][k] + off +
					    (j * K + mb) * e, g, (size_t)e *
					    sizeof(union num));
					for (x = 0; x < e; x++)
						total[i * m->nparams + k][x] =
						    num_add(arith, total[i *
						    m->nparams + k][x],
						    num_mul(arith, coef, g[x]));
				}
			}
		}
		if (hook != NULL)
			call_hook(eng, total, hook, arg, mb, false);
	}
}

/*
 * The step: the atoms, [local rank][param], and each rank's local
 * gradients.  Parameters before a lossy MoE boundary keep two atoms a
 * chunk (lossnorm.h): a first pass with every boundary reduced as its
 * placement says gives their plain atoms, the step as configured their
 * held ones and the local gradients.
 */
union num ***
run_step(struct engine *eng, struct progress_count *pc, buffer_hook *hook,
    void *arg)
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
		/* The plain atoms' pass: no step sees its buffer. */
		eng->boundary_reduced = true;
		run_micro_batches(eng, pc, atoms, total, false, NULL, NULL);
		eng->boundary_reduced = false;
		for (i = 0; i < eng->nranks * m->nparams; i++) {
			free(total[i]);
			total[i] = NULL;
		}
	}
	run_micro_batches(eng, pc, atoms, total, held, hook, arg);
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
