/*
 * The values of a symbolic audit (run.h): each rank's local gradient
 * before the sync as a combination of atoms, built once and shared
 * between equal values, and the expected value of every shard.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/exitcode.h"
#include "base/hash.h"
#include "base/xmalloc.h"
#include "model/lossnorm.h"
#include "symbolic/lincomb.h"
#include "symbolic/run.h"

/*
 * Values of fewer terms are not looked up: hashing them costs more than
 * building them, and only the sums over large groups repeat expensively.
 * Every value of this many terms or more is built through run_share(), so a
 * value given to lc_intern is either new or already in the table.
 */
#define SHARE_MIN_TERMS		16

/* *dst = src, a single segment copied into dst itself. */
void
run_seglist_set(struct seglist *dst, const struct seglist *src)
{
	if (src->n == 1) {
		dst->one = src->v[0];
		dst->v = &dst->one;
	} else
		dst->v = src->v;
	dst->n = src->n;
}

void
run_coord(const struct sym_run *run, int rank, struct coord *c)
{
	*c = run->coords[rank % run->stage_ranks];
	c->pp = rank / run->stage_ranks;
}

/* x, or the equal value built before (x, just built, is then given back). */
const struct lincomb *
run_share(struct sym_run *run, const struct lincomb *x)
{
	if (x->nterms < SHARE_MIN_TERMS)
		return x;
	return lc_intern(&run->table, run->arena, x);
}

/*
 * Sums of fewer members, and of fewer terms, are built each time: hashing
 * their pointers costs about what adding them does.  Few members may hold
 * many terms: the embedding group's two members each hold their dp
 * group's sum, and building it for each of the dp * tp groups made a
 * 131,072-rank check without the distributed optimizer quadratic in dp
 * (67 million terms added, 1.8 s; issue 24).
 */
#define SUM_MEMO_MIN		8
#define SUM_MEMO_MIN_TERMS	64

static void
sum_memo_grow(struct sum_memo *sm)
{
	struct sum_memo_entry	*v;
	size_t			 cap = sm->cap ? 2 * sm->cap : 256, i, j;

	v = xcalloc(cap, sizeof *v);
	for (i = 0; i < sm->cap; i++) {
		if (sm->v[i].in == NULL)
			continue;
		for (j = sm->v[i].hash & (cap - 1); v[j].in != NULL;
		    j = (j + 1) & (cap - 1))
			;
		v[j] = sm->v[i];
	}
	free(sm->v);
	sm->v = v;
	sm->cap = cap;
}

/*
 * The most terms a sum of xs (of `total` terms) can have: no more than its
 * inputs hold, nor than the atoms between the lowest and the highest (an
 * all-reduce's members summed again hold one value, dp copies of it).
 */
static size_t
sum_bound(const struct lincomb **xs, size_t n, size_t total)
{
	uint32_t lo = UINT32_MAX, hi = 0;
	size_t	 j;

	for (j = 0; j < n; j++) {
		if (xs[j]->nterms == 0)
			continue;
		if (xs[j]->terms[0].atom < lo)
			lo = xs[j]->terms[0].atom;
		if (xs[j]->terms[xs[j]->nterms - 1].atom > hi)
			hi = xs[j]->terms[xs[j]->nterms - 1].atom;
	}
	if (lo > hi)
		return 0;
	return (size_t)(hi - lo) + 1 < total ? (size_t)(hi - lo) + 1 : total;
}

const struct lincomb *
run_sum(struct sym_run *run, const struct lincomb **xs, size_t n,
    struct rational scale)
{
	struct sum_memo		*sm = &run->sums;
	struct sum_memo_entry	*e;
	uint64_t		 h;
	size_t			 j, bytes = n * sizeof *xs, terms = 0;

	for (j = 0; j < n; j++)
		terms += xs[j]->nterms;
	/* Past the limit the run stops: what it builds then is never read. */
	if (!run_check_memory(run, sum_bound(xs, n, terms) *
	    sizeof(struct term)))
		return &lincomb_zero;
	if (n < SUM_MEMO_MIN) {
		if (terms < SUM_MEMO_MIN_TERMS)
			return run_share(run, lc_sum(run->arena, xs, n,
			    scale));
	}
	h = hash_bytes(xs, bytes) ^ hash_bytes(&scale, sizeof scale);
	if (h == 0)
		h = 1;
	if (2 * (sm->n + 1) > sm->cap)
		sum_memo_grow(sm);
	for (j = h & (sm->cap - 1); sm->v[j].in != NULL;
	    j = (j + 1) & (sm->cap - 1)) {
		e = &sm->v[j];
		if (e->hash == h && e->n == n && q_equal(e->scale, scale) &&
		    memcmp(e->in, xs, bytes) == 0)
			return e->out;
	}
	e = &sm->v[j];
	if (sm->key_bytes + bytes > SUM_MEMO_BYTES)
		return run_share(run, lc_sum(run->arena, xs, n, scale));
	e->out = run_share(run, lc_sum(run->arena, xs, n, scale));
	e->in = xmalloc(bytes);
	memcpy(e->in, xs, bytes);
	e->hash = h;
	e->n = n;
	e->scale = scale;
	sm->n++;
	sm->key_bytes += bytes;
	return e->out;
}

/*
 * x + y, through the sum memo: every parameter of a stage adds the same
 * local value to the same value after a micro-batch's sync (a dp sum,
 * when the plan syncs the first micro-batch: nanoGPT #30), and building
 * and interning that sum for each of them was dp squared terms.
 */
static const struct lincomb *
run_add(struct sym_run *run, const struct lincomb *x, const struct lincomb *y)
{
	const struct lincomb *xs[2] = { x, y };

	return run_sum(run, xs, 2, q_make(1, 1));
}

const struct lincomb *
run_atom_value(struct sym_run *run, uint32_t atom)
{
	if (run->atoms[atom] == NULL)
		run->atoms[atom] = run_share(run, lc_atom(run->arena, atom));
	return run->atoms[atom];
}

bool
run_same_value(struct sym_run *run, const struct lincomb *a,
    const struct lincomb *b)
{
	uintptr_t		 key[2] = { (uintptr_t)a, (uintptr_t)b };
	struct same_value_slot	*s;

	if (a == b)
		return true;
	if (run->same == NULL)
		run->same = xcalloc(SAME_VALUE_SLOTS, sizeof *run->same);
	s = &run->same[hash_bytes(key, sizeof key) & (SAME_VALUE_SLOTS - 1)];
	if (s->a != a || s->b != b) {
		s->a = a;
		s->b = b;
		s->equal = lc_equal(a, b);
	}
	return s->equal;
}


/*
 * Ranks of one tp group that compute identical local gradients share an
 * atom: they differ only along tp sub-dimensions where the gradient is
 * Replicate.  Along Partial or Shard sub-dimensions each rank has its own.
 */
static uint32_t
atom_at(const struct mesh *mesh, struct placement g, const struct coord *c)
{
	int	 slice = c->slice, etp_i = c->etp;

	if (g.slice == PLACE_REPLICATE)
		slice = 0;
	if (g.etp == PLACE_REPLICATE)
		etp_i = 0;
	return (uint32_t)mesh_rank_of(mesh, c->pp, c->dp, slice * mesh->etp +
	    etp_i);
}

uint32_t
sym_atom_of(const struct sym_context *ctx, int param, int rank)
{
	struct coord	 c;

	mesh_coord_of(&ctx->model.mesh, rank, &c);
	return atom_at(&ctx->model.mesh, ctx->grad_placement[param], &c);
}

/* sym_atom_of from the coordinate table. */
uint32_t
run_atom_of(const struct sym_run *run, int param, int rank)
{
	struct coord	 c;

	run_coord(run, rank, &c);
	return atom_at(&run->model->mesh, run->ctx->grad_placement[param], &c);
}

struct arena *
run_seg_arena(const struct sym_run *run, int param)
{
	return &run->seg_arenas[run->model->params[param].logical];
}

int
run_stage_base(const struct sym_run *run, int param)
{
	return run->model->params[param].stage * run->stage_ranks;
}

struct seglist *
run_values_of(const struct sym_run *run, int param, int rank)
{
	int	i = rank - run_stage_base(run, param);

	if (i < 0 || i >= run->stage_ranks)
		return NULL;
	return &run->vals[param][i];
}

bool
run_selected(const struct sym_run *run, int param)
{
	return run->only < 0 || run->model->params[param].logical == run->only;
}

const struct segment *
sym_segments(const struct sym_run *run, int param, int rank, int *nsegs)
{
	struct seglist *sl = run_values_of(run, param, rank);

	*nsegs = sl ? sl->n : 0;
	return sl ? sl->v : NULL;
}

const struct lincomb *
sym_expected(const struct sym_run *run, int param, int rank)
{
	int	i = rank - run_stage_base(run, param);

	if (i < 0 || i >= run->stage_ranks)
		return NULL;
	return run->expected[param][run_shard_key(run,
	    &run->model->params[param], rank)];
}

const struct sym_context *
sym_run_context(const struct sym_run *run)
{
	return run->ctx;
}

int
sym_run_micro_batch(const struct sym_run *run)
{
	return run->micro_batch;
}

struct arena *
sym_run_arena(const struct sym_run *run)
{
	return run->arena;
}

/*
 * The source (1 + ep coordinate) whose atom stands for the tokens source j
 * of `base`'s ep group dispatches to it: j itself, or under tp-replicated
 * the lowest of the sources that dispatch the same tokens
 * (pl_dispatch_twin), which constraints.c keeps in the one ep group.
 */
static int
twin_source(const struct model *m, int base, int j)
{
	struct coord	 c;
	int		 src;

	mesh_coord_of(&m->mesh, base, &c);
	src = mesh_rank_of_expert(&m->mesh, c.pp, j - 1, c.etp, c.edp);
	mesh_coord_of(&m->mesh, pl_dispatch_twin(m, src), &c);
	return c.ep + 1;
}

/*
 * The atoms of rank `base` for parameter p, in increasing order: one per
 * micro-batch of its own chunk, or per source and micro-batch.
 */
static size_t
atoms_of(const struct model *m, const struct atom_space *sp,
    const struct param *p, int base, uint32_t *out)
{
	int	 K = m->loss.micro_batches, j, k;
	size_t	 n = 0;

	if (!model_per_source(m, p)) {
		for (k = 0; k < K; k++)
			out[n++] = atom_id(sp, base, 0, k);
		if (model_has_aux(m, p))
			for (k = 0; k < K; k++)
				out[n++] = atom_id(sp, base, m->loss.aux_source,
				    k);
		for (j = 0; model_has_mtp(m, p) && j < m->loss.mtp; j++)
			for (k = 0; k < K; k++)
				out[n++] = atom_id(sp, base,
				    m->loss.mtp_source + j, k);
		return n;
	}
	/* One atom for the tokens of every group of twin sources. */
	for (j = 1; j <= m->mesh.ep; j++) {
		if (twin_source(m, base, j) != j)
			continue;
		for (k = 0; k < K; k++)
			out[n++] = atom_id(sp, base, j, k);
	}
	/* An expert upstream of a later layer's router (issue 25). */
	if (model_has_aux(m, p))
		for (k = 0; k < K; k++)
			out[n++] = atom_id(sp, base, m->loss.aux_source, k);
	/* Each multi-token prediction layer's, per source (lossnorm.h). */
	for (j = 0; model_has_mtp(m, p) && j < m->loss.mtp * m->mesh.ep; j++)
		for (k = 0; k < K; k++)
			out[n++] = atom_id(sp, base,
			    m->loss.mtp_split_source + j, k);
	return n;
}

/* t[n] = factor times the atom, or its held twin; n + 1. */
static int
local_term(struct term *t, int n, const struct atom_space *sp, bool held,
    uint32_t atom, struct rational factor)
{
	t[n].atom = held ? atom_held(sp, atom) : atom;
	t[n].coef = factor;
	return n + 1;
}

/*
 * Rank `base`'s local gradient of p before the sync: each of its atoms
 * times the loss factor of the chunk it comes from, over every
 * micro-batch, or micro-batch run->micro_batch alone when the plan runs
 * per micro-batch.  All parameters of a kind share it.
 */
static const struct lincomb *
local_value(struct sym_run *run, const struct param *p, int base, bool held)
{
	const struct model *m = run->model;
	const struct atom_space *sp = &run->ctx->atoms;
	const struct loss_norm *ln = &m->loss;
	const struct lincomb **slot;
	struct term *t;
	bool	 split = model_per_source(m, p);
	int	 K = ln->micro_batches, j, k, n = 0, chunk, a;
	int	 lo = run->micro_batch >= 0 ? run->micro_batch : 0;
	int	 hi = run->micro_batch >= 0 ? run->micro_batch + 1 : K;
	struct coord c;

	bool	 aux = model_has_aux(m, p);

	slot = &run->local[held][(split ? 1 : 0) + (aux ? 2 : 0)][base];
	if (*slot != NULL)
		return *slot;
	mesh_coord_of(&m->mesh, base, &c);
	if (!split && !aux && ln->mtp == 0 && hi - lo == 1 && q_equal(ln->coef[
	    lossnorm_chunk(
	    &m->mesh, lo, c.dp)], q_make(1, 1)))
		return *slot = run_atom_value(run, held ?
		    atom_held(sp, atom_id(sp, base, 0, lo)) :
		    atom_id(sp, base, 0, lo));
	/*
	 * Each atom with its factor, as terms of one combination: building
	 * the atom, its scaled copy and their sum for every rank was 13 MiB
	 * of the peak of scripts/bench's 131,072-rank audit with aux losses
	 * (issue 24).
	 */
	t = xcalloc((size_t)ln->sources * K, sizeof *t);
	/* The auxiliary losses' atoms, with the framework's factor. */
	for (k = lo; aux && k < hi; k++)
		n = local_term(t, n, sp, held, atom_id(sp, base, ln->aux_source,
		    k), ln->aux_coef);
	/*
	 * The multi-token prediction losses' atoms, each layer's with the
	 * framework's factor of its chunk: the source's for an expert
	 * kept per source (no twins: lossnorm.c, mtp_place).
	 */
	for (j = 0; model_has_mtp(m, p) && !split && j < ln->mtp; j++)
		for (k = lo; k < hi; k++) {
			chunk = lossnorm_chunk(&m->mesh, k, c.dp);
			n = local_term(t, n, sp, held, atom_id(sp, base,
			    ln->mtp_source + j, k),
			    ln->mtp_coef[j * ln->chunks + chunk]);
		}
	for (j = 0; model_has_mtp(m, p) && split && j < ln->mtp * m->mesh.ep;
	    j++)
		for (k = lo; k < hi; k++) {
			chunk = lossnorm_source_chunk(&m->mesh, &c,
			    j % m->mesh.ep, k);
			n = local_term(t, n, sp, held, atom_id(sp, base,
			    ln->mtp_split_source + j, k), ln->mtp_coef[
			    j / m->mesh.ep * ln->chunks + chunk]);
		}
	for (j = split ? 1 : 0; j < (split ? 1 + m->mesh.ep : 1); j++) {
		/* Twin sources' tokens are one (twin_source). */
		a = split ? twin_source(m, base, j) : j;
		for (k = lo; k < hi; k++) {
			chunk = split ? lossnorm_source_chunk(&m->mesh, &c,
			    j - 1, k) : lossnorm_chunk(&m->mesh, k, c.dp);
			n = local_term(t, n, sp, held, atom_id(sp, base, a, k),
			    ln->coef[chunk]);
		}
	}
	*slot = lc_intern(&run->table, run->arena, lc_terms(run->arena, t,
	    (size_t)n));
	free(t);
	return *slot;
}

/* Rank base + i's local gradient of parameter p (local_value's atom base). */
static const struct lincomb *
local_of(struct sym_run *run, int p, int base, int i)
{
	const struct model *m = run->model;

	/*
	 * Past a lossy MoE boundary every rank holds a value of its own: its
	 * own share of the block input's gradient went into it.  Past a
	 * duplicated mixer's input summed tp times (slime PR #1748) the
	 * sum is alike on every tp rank, so the held values are placed as
	 * the plain ones: a duplicated weight's alike on every tp rank.
	 */
	if (m->params[p].boundary >= 0)
		return local_value(run, &m->params[p], run->ctx->reductions[
		    m->params[p].boundary].cite == REDUCTION_CITE_MIXER_INPUT ?
		    run_atom_of(run, p, base + i) : (uint32_t)(base + i), true);
	return local_value(run, &m->params[p], run_atom_of(run, p, base + i),
	    false);
}

void
run_init_values(struct sym_run *run)
{
	const struct model *m = run->model;
	int	p, i;

	run->micro_batch = -1;
	run->coords = xcalloc(run->stage_ranks, sizeof *run->coords);
	for (i = 0; i < run->stage_ranks; i++)
		mesh_coord_of(&m->mesh, i, &run->coords[i]);
	run->natoms = (size_t)m->mesh.world * m->loss.sources *
	    m->loss.micro_batches;
	/* Room for the held atoms too (atom.h): a plain one each. */
	for (p = 0; p < m->nparams; p++)
		if (m->params[p].boundary >= 0) {
			run->natoms *= 2;
			break;
		}
	run->atoms = xcalloc(run->natoms, sizeof *run->atoms);
	for (i = 0; i < 8; i++)
		if (i % 4 < 3 || m->loss.aux_source >= 0)
			run->local[i / 4][i % 4] = xcalloc(m->mesh.world,
			    sizeof *run->local[0][0]);
	run->seg_arenas = xcalloc(m->nlogical, sizeof *run->seg_arenas);
	for (p = 0; p < m->nlogical; p++)
		arena_init_cached(&run->seg_arenas[p], run->ctx->blocks);
	run->vals = xcalloc(m->nparams, sizeof *run->vals);
	for (p = 0; p < m->nparams; p++) {
		int base = m->params[p].stage * run->stage_ranks;

		if (!run_selected(run, p))
			continue;
		run->vals[p] = arena_alloc(run_seg_arena(run, p),
		    run->stage_ranks * sizeof **run->vals);
		for (i = 0; i < run->stage_ranks; i++) {
			struct seglist *sl = &run->vals[p][i];

			sl->v = &sl->one;
			sl->n = 1;
			sl->one.lo = 0;
			sl->one.hi = m->params[p].local_elems;
			/*
			 * Run per micro-batch, the buffer starts at zero and
			 * each backward adds its own (run_add_micro_batch).
			 */
			sl->one.value = run->ctx->plan.per_micro_batch ?
			    &lincomb_zero : local_of(run, p, base, i);
		}
	}
}

void
run_add_micro_batch(struct sym_run *run, int mb)
{
	const struct model *m = run->model;
	const struct lincomb *local;
	struct segment *v;
	int	 p, i, j;

	/* The cached local values are of the micro-batch before. */
	run->micro_batch = mb;
	for (i = 0; i < 8; i++)
		if (run->local[i / 4][i % 4] != NULL)
			memset(run->local[i / 4][i % 4], 0, m->mesh.world *
			    sizeof *run->local[0][0]);
	for (p = 0; p < m->nparams; p++) {
		int base = m->params[p].stage * run->stage_ranks;

		if (!run_selected(run, p))
			continue;
		for (i = 0; i < run->stage_ranks; i++) {
			struct seglist *sl = &run->vals[p][i];

			local = local_of(run, p, base, i);
			if (sl->n == 1) {
				sl->one.value = sl->one.value->nterms == 0 ?
				    local : run_add(run, sl->one.value, local);
				continue;
			}
			v = arena_alloc(run_seg_arena(run, p), sl->n *
			    sizeof *v);
			for (j = 0; j < sl->n; j++) {
				v[j] = sl->v[j];
				v[j].value = run_add(run, sl->v[j].value,
				    local);
			}
			sl->v = v;
		}
	}
}

void
run_free_caches(struct sym_run *run)
{
	int	 i;

	/*
	 * 33 MB at 131,072 ranks (an atom for every source of every rank,
	 * a scaling for every rank), which the cells made next can take
	 * (issue 24).
	 */
	free(run->atoms);
	run->atoms = NULL;
	run->natoms = 0;
	free(run->scaled.in);
	free(run->scaled.out);
	memset(&run->scaled, 0, sizeof run->scaled);
	for (i = 0; i < 8; i++) {
		free(run->local[i / 4][i % 4]);
		run->local[i / 4][i % 4] = NULL;
	}
	lc_table_free(&run->table);
	for (i = 0; i < (int)run->sums.cap; i++)
		free(run->sums.v[i].in);
	free(run->sums.v);
	memset(&run->sums, 0, sizeof run->sums);
}

/* ---- expected values ------------------------------------------------- */


int
run_shard_key(const struct sym_run *run, const struct param *p, int rank)
{
	struct coord	c;

	run_coord(run, rank, &c);
	return model_shard_key(run->model, p, &c);
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int
run_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Expected: the gradient of the mean over all valid tokens of the step,
 * tokens/N times the sum of the complete local gradients over all
 * micro-batches and both uses of a tied weight, which is the sum of the
 * distinct atoms of all ranks holding the same shard (lossnorm.h).  The holders' atoms
 * are bucketed by shard key in rank order, which leaves each bucket
 * sorted but where a Replicate tp sub-dimension folds atoms back (then it
 * is sorted), and each shard's sum is built from its bucket in one pass:
 * qsort of every holder and an atom combination per term made half the
 * time of a 64-rank audit and a sixth of a 131,072-rank one's memory.
 */
/*
 * weight times the sum of the sorted atoms b, but the auxiliary losses'
 * atoms (lossnorm.h) weigh aux_expected and those of multi-token
 * prediction layer k mtp_expected[k - 1].  Each class keeps b's order.
 */
/*
 * The objective's weight of a main-loss atom: its chunk's (lossnorm.h,
 * loss.objective), the chunk of the source rank for an expert atom kept
 * per source.
 */
static struct rational
atom_objective_weight(const struct sym_run *run, uint32_t a)
{
	const struct model *m = run->model;
	const struct atom_space *sp = &run->ctx->atoms;
	int	 r = atom_rank(sp, a), j = atom_source(sp, a);
	int	 mb = atom_micro_batch(sp, a);
	struct coord c;

	mesh_coord_of(&m->mesh, r, &c);
	return lossnorm_weight(&m->loss, m->loss.split && j >= 1 &&
	    j <= m->mesh.ep ? lossnorm_source_chunk(&m->mesh, &c, j - 1, mb) :
	    lossnorm_chunk(&m->mesh, mb, c.dp));
}

/*
 * The main loss's distinct atoms (b is sorted; the tp copies of a
 * replicated parameter's atom repeat, and count once, as in lc_atoms),
 * each with its objective's weight.
 */
static const struct lincomb *
objective_sum(struct sym_run *run, const uint32_t *b, size_t nb,
    struct rational weight)
{
	const struct lincomb **parts;
	const struct lincomb *v;
	size_t	 i, n = 0;

	if (run->model->loss.uniform)
		return lc_atoms(run->arena, b, nb, weight);
	parts = xcalloc(nb + 1, sizeof *parts);
	for (i = 0; i < nb; i++)
		if (i == 0 || b[i] != b[i - 1])
			parts[n++] = lc_scale(run->arena, run_atom_value(run,
			    b[i]), atom_objective_weight(run, b[i]));
	v = lc_sum(run->arena, parts, n, q_make(1, 1));
	free(parts);
	return v;
}

/* Does chunk `chunk` keep no token of layer `layer`? */
static bool
mtp_chunk_empty(const struct model *m, int chunk, int layer)
{
	return m->loss.mtp_valid[(layer - 1) * m->loss.chunks + chunk] == 0;
}

/*
 * Is a multi-token prediction atom of layer `layer` the gradient of
 * chunks whose rolled masks keep no token?  Then it is zero: the loss has
 * no term, and the framework's factor is 0 (mtp_factor).  The objective
 * has no term for it either, and an expected value that kept it at the
 * layer's weight called such a step wrong where it is right, against the
 * numbers (the self-check, which holds the atom's value of 0, passed).
 * An expert's atom, with ep > 1, holds the tokens that every rank of its
 * ep group routes to it: it is zero only when all of theirs are (below).
 */
static bool
mtp_atom_empty(const struct sym_run *run, uint32_t a, int layer)
{
	const struct model *m = run->model;
	const struct atom_space *sp = &run->ctx->atoms;
	int	 mb = atom_micro_batch(sp, a);
	struct coord c;

	mesh_coord_of(&m->mesh, atom_rank(sp, a), &c);
	/* Kept per source: its source's tokens alone. */
	if (atom_expert_source(sp, a) >= 0)
		return mtp_chunk_empty(m, lossnorm_source_chunk(&m->mesh, &c,
		    atom_expert_source(sp, a), mb), layer);
	/*
	 * One atom an owner: its group's chunks share the layer's factor
	 * (sources_differ keeps them per source otherwise, and an empty
	 * chunk's factor is 0), so the owner's chunk speaks for all.  Not
	 * with mtp_loss_scaling_factor 0, where every chunk's factor is 0
	 * and an empty owner's atom may hold its group's tokens; but the
	 * layer's expected weight is 0 too (mtp_weigh), and dropping the
	 * atom leaves the expected value as it was (tests/mtp-empty-chunk.test).
	 */
	return mtp_chunk_empty(m, lossnorm_chunk(&m->mesh, mb, c.dp), layer);
}

static const struct lincomb *
expected_sum(struct sym_run *run, const uint32_t *b, size_t nb,
    struct rational weight)
{
	const struct atom_space *sp = &run->ctx->atoms;
	const struct loss_norm *ln = &run->model->loss;
	uint32_t **part;
	size_t	 i, *np;
	int	 nparts = 2 + ln->mtp, j, src, layer;
	const struct lincomb *v;

	if (ln->aux_source < 0 && ln->mtp == 0)
		return objective_sum(run, b, nb, weight);
	/* 0 the main loss's atoms, 1 the auxiliary, 1 + k layer k's. */
	part = xcalloc(nparts, sizeof *part);
	np = xcalloc(nparts, sizeof *np);
	for (j = 0; j < nparts; j++)
		part[j] = xcalloc(nb, sizeof **part);
	for (i = 0; i < nb; i++) {
		src = atom_source(sp, b[i]);
		layer = atom_mtp_layer(sp, b[i]);
		if (layer > 0 && mtp_atom_empty(run, b[i], layer))
			continue;
		j = layer > 0 ? 1 + layer : ln->aux_source >= 0 &&
		    src == ln->aux_source ? 1 : 0;
		part[j][np[j]++] = b[i];
	}
	v = objective_sum(run, part[0], np[0], weight);
	if (np[1] > 0)
		v = lc_add(run->arena, v, lc_atoms(run->arena, part[1], np[1],
		    ln->aux_expected));
	for (j = 2; j < nparts; j++)
		if (np[j] > 0)
			v = lc_add(run->arena, v, lc_atoms(run->arena,
			    part[j], np[j], ln->mtp_expected[j - 2]));
	for (j = 0; j < nparts; j++)
		free(part[j]);
	free(part);
	free(np);
	return v;
}

void
run_init_expected(struct sym_run *run)
{
	const struct model *m = run->model;
	int	 nkeys = m->mesh.tp > m->mesh.ep * m->mesh.etp ? m->mesh.tp :
		    m->mesh.ep * m->mesh.etp;
	size_t	 per = (size_t)m->loss.sources * m->loss.micro_batches;
	size_t	 cap = 2 * (size_t)run->stage_ranks * per;
	int	*keys = xcalloc(cap, sizeof *keys);
	uint32_t *atoms = xcalloc(cap, sizeof *atoms);
	uint32_t *bucket = xcalloc(cap, sizeof *bucket);
	size_t	*start = xcalloc(nkeys + 1, sizeof *start);
	const struct lincomb **by_key = xcalloc(nkeys, sizeof *by_key);
	struct rational weight = lossnorm_weight(&m->loss, 0);	/* uniform */
	int	 l, k, i, key;
	size_t	 n, j, z, na, a;
	uint32_t *mine = xcalloc(per, sizeof *mine);

	run->expected = xcalloc(m->nparams, sizeof *run->expected);
	for (l = 0; l < m->nlogical; l++) {
		const struct logical_param *lp = &m->logical[l];

		if (run->only >= 0 && l != run->only)
			continue;
		n = 0;
		memset(start, 0, (nkeys + 1) * sizeof *start);
		memset(by_key, 0, nkeys * sizeof *by_key);
		for (k = 0; k < lp->ninstances; k++) {
			int pi = lp->instance[k];
			int base = m->params[pi].stage * run->stage_ranks;

			for (i = 0; i < run->stage_ranks; i++) {
				key = run_shard_key(run, &m->params[pi], base + i);
				na = atoms_of(m, &run->ctx->atoms,
				    &m->params[pi],
				    run_atom_of(run, pi, base + i), mine);
				for (a = 0; a < na; a++, n++) {
					keys[n] = key;
					atoms[n] = mine[a];
					start[key + 1]++;
				}
			}
		}
		for (key = 0; key < nkeys; key++)
			start[key + 1] += start[key];
		for (j = 0; j < n; j++)
			bucket[start[keys[j]]++] = atoms[j];
		/* start[key] is now the end of the bucket of key. */
		for (key = 0, z = 0; key < nkeys; z = start[key++]) {
			uint32_t *b = bucket + z;
			size_t nb = start[key] - z;

			if (nb == 0)
				continue;
			for (j = 1; j < nb && b[j - 1] <= b[j]; j++)
				;
			if (j < nb)
				qsort(b, nb, sizeof *b, cmp_u32);
			by_key[key] = run_share(run, expected_sum(run, b, nb,
			    weight));
		}
		for (k = 0; k < lp->ninstances; k++) {
			int pi = lp->instance[k];

			run->expected[pi] = arena_alloc(run_seg_arena(run, pi),
			    nkeys * sizeof **run->expected);
			memcpy(run->expected[pi], by_key, nkeys *
			    sizeof **run->expected);
		}
	}
	free(keys);
	free(atoms);
	free(bucket);
	free(start);
	free(by_key);
	free(mine);
}

void
run_free_derived(struct sym_run *run)
{
	free(run->derived.in);
	free(run->derived.out);
	free(run->derived.how);
	memset(&run->derived, 0, sizeof run->derived);
	free(run->same);
	run->same = NULL;
}

/*
 * The size estimate (context.c) counts a value a parameter copy and a
 * term an atom it sums, as measured where groups share their sums.  A sum
 * in a wrong order leaves ranks values of their own, and the distributed
 * optimizer's shards cut them into segments that each sum a group: the
 * memory of Megatron-LM #844 at dp 524,288, estimated at 1.8 GiB, passed
 * 12.8 GB and kept growing, where a runner kills the job.  So the run
 * counts what it holds (the arenas of its values and segments, the table
 * of shared values) as the steps go, and stops at the limit with a
 * refusal, exit 2, nothing audited.  A sum asks before it is built, with
 * the most it can take (its inputs' terms): one of #844's members' values
 * at dp 16,384 took 190 MiB.  Elsewhere the steps ask between their
 * parameters.  The audit of a fix's or run --shrink's candidate
 * (over_limit_returns) stops instead, and the steps after are not run.
 */
bool
run_check_memory(struct sym_run *run, size_t more)
{
	const struct model *m = run->model;
	const struct sym_context *ctx = run->ctx;
	size_t	 bytes;
	char	 why[SYM_WHY_SIZE];
	int	 l;

	if (run->stopped)
		return false;
	bytes = more + run->arena->used_bytes + run->table.cap *
	    (sizeof *run->table.slot + sizeof *run->table.hash);
	for (l = 0; l < m->nlogical; l++)
		bytes += run->seg_arenas[l].used_bytes;
	if ((int64_t)bytes <= ctx->memory_limit)
		return true;
	snprintf(why, sizeof why, "%s: the symbolic audit of %d ranks took "
	    "over %lld MiB, the most supported (GRADAUDIT_MAX_MEMORY), though "
	    "its size estimate fit: its ranks hold values of their own, as a "
	    "gradient summed in a wrong order leaves them; audit the recipe "
	    "on a smaller mesh (--set mesh.dp=N)", m->config->file,
	    m->mesh.world, (long long)(ctx->memory_limit >> 20));
	sym_context_over_limit(ctx, why);
	run->stopped = true;
	return false;
}
