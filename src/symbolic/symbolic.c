/*
 * The symbolic audit: every rank's gradient of every parameter as a list of
 * segments (element ranges) each holding an exact linear combination of
 * atoms, pushed through the sync plan, then compared with the expected
 * combination.  Collectives over a group compute their result once and
 * share it between the members, so a 16,384-rank mesh costs a few
 * combinations per group, not one per pair of ranks.
 *
 * Each segment also carries the set of steps that have combined it.  A
 * collective that adds up segments whose sets differ is combining values in
 * different states of synchronization (one already reduced over dp, the
 * other not): that is how the wrong order of Megatron-LM #844 shows up,
 * found by the simulation rather than by a rule about the knob.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/framework.h"
#include "model/layout.h"
#include "model/lossnorm.h"
#include "symbolic/gradnorm.h"
#include "symbolic/lincomb.h"
#include "symbolic/measure.h"
#include "symbolic/symbolic.h"

/*
 * A rank's segments.  Most lists hold one segment, kept in the list
 * itself (v == &one): a 131,072-rank audit allocated a segment per rank
 * for every step that touched it, a third of its memory (issue 10).
 * Lists of several segments share immutable arrays in the arena.
 */
struct seglist {
	struct segment	*v;
	int		 n;
	struct segment	 one;
};

/* A collective that combined segments in different states. */
struct order_issue {
	int	step;
	int	logical;
};

struct sym_run {
	const struct sym_context *ctx;
	const struct model	*model;
	struct arena		*arena;
	int			 stage_ranks;	/* dp * tp */
	struct seglist		**vals;		/* [param][rank - stage base] */
	const struct lincomb	***expected;	/* [param][rank - stage base] */
	struct order_issue	*issues;
	int			 nissues;
	int			 step;		/* step being executed */
	/*
	 * Coordinates of the ranks of stage 0 (another stage's differ only in
	 * pp): the loops over params and ranks asked mesh_coord_of, six
	 * divisions, millions of times.
	 */
	struct coord		*coords;
	/*
	 * Atom r as a combination, one per rank and shared by every param,
	 * and the last scaling of each (by scaled_by): values are immutable,
	 * so equal ones need not be built twice.
	 */
	const struct lincomb	**atoms;
	const struct lincomb	**scaled;
	struct rational		 scaled_by;
	size_t			 natoms;	/* world * sources * K */
	/*
	 * A rank's local gradient before the sync, the sum over its
	 * micro-batches (and, for experts kept per source, its sources) of
	 * the loss factor times the atom: one per atom base, [0] for own
	 * chunks, [1] for experts per source.
	 */
	/* [held][0 dense, 1 experts per source, 2 routers with aux] */
	const struct lincomb	**local[2][3];
	/*
	 * Every value the run builds, by value: the dp sums of the 58
	 * parameters of a stage hold the same atoms and were built 58 times
	 * (issue 10: half the memory of a 131,072-rank audit).
	 */
	struct lc_table		 table;
	/*
	 * The segments and expected values of each logical parameter (its
	 * instances share collectives) in an arena of their own, freed once
	 * its cells are made: only the combinations outlive the run.
	 */
	struct arena		*seg_arenas;
	/*
	 * The last comparison of a value with its expected one: all members
	 * of a group share both, and comparing a dp-term sum on every one of
	 * dp ranks would cost dp squared.
	 */
	const struct lincomb	*cmp_value, *cmp_expected;
	bool			 cmp_equal;
};

/* Groups up to this size sum without a scratch allocation. */
#define SEG_STACK_MEMBERS	64

/*
 * Values of fewer terms are not looked up: hashing them costs more than
 * building them, and only the sums over large groups repeat expensively.
 * Every value of this many terms or more is built through share(), so a
 * value given to lc_intern is either new or already in the table.
 */
#define SHARE_MIN_TERMS		16

/* *dst = src, a single segment copied into dst itself. */
static void
seglist_set(struct seglist *dst, const struct seglist *src)
{
	if (src->n == 1) {
		dst->one = src->v[0];
		dst->v = &dst->one;
	} else
		dst->v = src->v;
	dst->n = src->n;
}

static void
run_coord(const struct sym_run *run, int rank, struct coord *c)
{
	*c = run->coords[rank % run->stage_ranks];
	c->pp = rank / run->stage_ranks;
}

/* x, or the equal value built before (x, just built, is then given back). */
static const struct lincomb *
share(struct sym_run *run, const struct lincomb *x)
{
	if (x->nterms < SHARE_MIN_TERMS)
		return x;
	return lc_intern(&run->table, run->arena, x);
}

static const struct lincomb *
atom_value(struct sym_run *run, uint32_t atom)
{
	if (run->atoms[atom] == NULL)
		run->atoms[atom] = share(run, lc_atom(run->arena, atom));
	return run->atoms[atom];
}

static bool
same_value(struct sym_run *run, const struct lincomb *a,
    const struct lincomb *b)
{
	if (a == b)
		return true;
	if (a != run->cmp_value || b != run->cmp_expected) {
		run->cmp_value = a;
		run->cmp_expected = b;
		run->cmp_equal = lc_equal(a, b);
	}
	return run->cmp_equal;
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
static uint32_t
run_atom_of(const struct sym_run *run, int param, int rank)
{
	struct coord	 c;

	run_coord(run, rank, &c);
	return atom_at(&run->model->mesh, run->ctx->grad_placement[param], &c);
}

static struct arena *
seg_arena(const struct sym_run *run, int param)
{
	return &run->seg_arenas[run->model->params[param].logical];
}

static int
stage_base(const struct sym_run *run, int param)
{
	return run->model->params[param].stage * run->stage_ranks;
}

static struct seglist *
values_of(const struct sym_run *run, int param, int rank)
{
	int	i = rank - stage_base(run, param);

	if (i < 0 || i >= run->stage_ranks)
		return NULL;
	return &run->vals[param][i];
}

const struct segment *
sym_segments(const struct sym_run *run, int param, int rank, int *nsegs)
{
	struct seglist *sl = values_of(run, param, rank);

	*nsegs = sl ? sl->n : 0;
	return sl ? sl->v : NULL;
}

const struct lincomb *
sym_expected(const struct sym_run *run, int param, int rank)
{
	int	i = rank - stage_base(run, param);

	if (i < 0 || i >= run->stage_ranks)
		return NULL;
	return run->expected[param][i];
}

const struct sym_context *
sym_run_context(const struct sym_run *run)
{
	return run->ctx;
}

struct arena *
sym_run_arena(const struct sym_run *run)
{
	return run->arena;
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
	for (j = 1; j <= m->mesh.ep; j++)
		for (k = 0; k < K; k++)
			out[n++] = atom_id(sp, base, j, k);
	return n;
}

/*
 * Rank `base`'s local gradient of p before the sync: each of its atoms
 * times the loss factor of the chunk it comes from.  All parameters of a
 * kind share it.
 */
static const struct lincomb *
local_value(struct sym_run *run, const struct param *p, int base, bool held)
{
	const struct model *m = run->model;
	const struct atom_space *sp = &run->ctx->atoms;
	const struct loss_norm *ln = &m->loss;
	const struct lincomb **slot, **parts;
	bool	 split = model_per_source(m, p);
	int	 K = ln->micro_batches, j, k, n = 0, src, chunk;
	struct coord c;

	bool	 aux = model_has_aux(m, p);

	slot = &run->local[held][split ? 1 : aux ? 2 : 0][base];
	if (*slot != NULL)
		return *slot;
	mesh_coord_of(&m->mesh, base, &c);
	if (!split && !aux && ln->mtp == 0 && K == 1 && q_equal(ln->coef[
	    lossnorm_chunk(
	    &m->mesh, 0, c.dp)], q_make(1, 1)))
		return *slot = atom_value(run, held ?
		    atom_held(sp, atom_id(sp, base, 0, 0)) :
		    atom_id(sp, base, 0, 0));
	parts = xcalloc((size_t)ln->sources * K, sizeof *parts);
	/* The auxiliary losses' atoms, with the framework's factor. */
	for (k = 0; aux && k < K; k++)
		parts[n++] = lc_scale(run->arena, atom_value(run, held ?
		    atom_held(sp, atom_id(sp, base, ln->aux_source, k)) :
		    atom_id(sp, base, ln->aux_source, k)), ln->aux_coef);
	/*
	 * The multi-token prediction losses' atoms, each layer's with the
	 * framework's factor of its chunk.
	 */
	for (j = 0; model_has_mtp(m, p) && j < ln->mtp; j++)
		for (k = 0; k < K; k++) {
			chunk = lossnorm_chunk(&m->mesh, k, c.dp);
			parts[n++] = lc_scale(run->arena, atom_value(run,
			    held ? atom_held(sp, atom_id(sp, base,
			    ln->mtp_source + j, k)) : atom_id(sp, base,
			    ln->mtp_source + j, k)),
			    ln->mtp_coef[j * ln->chunks + chunk]);
		}
	for (j = split ? 1 : 0; j < (split ? 1 + m->mesh.ep : 1); j++) {
		struct coord sc = c;

		if (split) {
			src = mesh_rank_of_expert(&m->mesh, c.pp, j - 1, c.etp,
			    c.edp);
			mesh_coord_of(&m->mesh, src, &sc);
		}
		for (k = 0; k < K; k++) {
			chunk = lossnorm_chunk(&m->mesh, k, sc.dp);
			parts[n++] = lc_scale(run->arena, atom_value(run,
			    held ? atom_held(sp, atom_id(sp, base, j, k)) :
			    atom_id(sp, base, j, k)), ln->coef[chunk]);
		}
	}
	*slot = lc_intern(&run->table, run->arena, lc_sum(run->arena, parts,
	    (size_t)n, q_make(1, 1)));
	free(parts);
	return *slot;
}

static void
init_values(struct sym_run *run)
{
	const struct model *m = run->model;
	int	p, i;

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
	run->scaled = xcalloc(run->natoms, sizeof *run->scaled);
	for (i = 0; i < 6; i++)
		run->local[i / 3][i % 3] = xcalloc(m->mesh.world,
		    sizeof *run->local[0][0]);
	run->seg_arenas = xcalloc(m->nlogical, sizeof *run->seg_arenas);
	for (p = 0; p < m->nlogical; p++)
		arena_init(&run->seg_arenas[p]);
	run->vals = xcalloc(m->nparams, sizeof *run->vals);
	for (p = 0; p < m->nparams; p++) {
		int base = m->params[p].stage * run->stage_ranks;

		run->vals[p] = arena_alloc(seg_arena(run, p),
		    run->stage_ranks * sizeof **run->vals);
		for (i = 0; i < run->stage_ranks; i++) {
			struct seglist *sl = &run->vals[p][i];

			sl->v = &sl->one;
			sl->n = 1;
			sl->one.lo = 0;
			sl->one.hi = m->params[p].local_elems;
			/*
			 * Past a lossy MoE boundary every rank holds a
			 * value of its own: its own share of the block
			 * input's gradient went into it.
			 */
			if (m->params[p].boundary >= 0)
				sl->one.value = local_value(run, &m->params[p],
				    base + i, true);
			else
				sl->one.value = local_value(run, &m->params[p],
				    run_atom_of(run, p, base + i), false);
		}
	}
}

/* ---- expected values ------------------------------------------------- */


static int
shard_key(const struct sym_run *run, const struct param *p, int rank)
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
	struct coord c;

	mesh_coord_of(&m->mesh, r, &c);
	if (m->loss.split && j >= 1 && j <= m->mesh.ep) {
		r = mesh_rank_of_expert(&m->mesh, c.pp, j - 1, c.etp, c.edp);
		mesh_coord_of(&m->mesh, r, &c);
	}
	return lossnorm_weight(&m->loss, lossnorm_chunk(&m->mesh,
	    atom_micro_batch(sp, a), c.dp));
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
			parts[n++] = lc_scale(run->arena, atom_value(run,
			    b[i]), atom_objective_weight(run, b[i]));
	v = lc_sum(run->arena, parts, n, q_make(1, 1));
	free(parts);
	return v;
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

static void
init_expected(struct sym_run *run)
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

		n = 0;
		memset(start, 0, (nkeys + 1) * sizeof *start);
		for (k = 0; k < lp->ninstances; k++) {
			int pi = lp->instance[k];
			int base = m->params[pi].stage * run->stage_ranks;

			for (i = 0; i < run->stage_ranks; i++) {
				key = shard_key(run, &m->params[pi], base + i);
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
			by_key[key] = share(run, expected_sum(run, b, nb,
			    weight));
		}
		for (k = 0; k < lp->ninstances; k++) {
			int pi = lp->instance[k];
			int base = m->params[pi].stage * run->stage_ranks;

			run->expected[pi] = arena_alloc(seg_arena(run, pi),
			    run->stage_ranks * sizeof **run->expected);
			for (i = 0; i < run->stage_ranks; i++)
				run->expected[pi][i] = by_key[shard_key(run,
				    &m->params[pi], base + i)];
		}
	}
	free(keys);
	free(atoms);
	free(bucket);
	free(start);
	free(by_key);
	free(mine);
}

/* ---- segment arithmetic ---------------------------------------------- */

static void
seg_push(struct segment *out, int *n, int64_t lo, int64_t hi,
    const struct lincomb *v, uint32_t state)
{
	struct segment *last = *n > 0 ? &out[*n - 1] : NULL;

	if (lo >= hi)
		return;
	/* Neighbours with the same value and state merge into one. */
	if (last != NULL && last->hi == lo && last->state == state &&
	    (last->value == v || lc_equal(last->value, v))) {
		last->hi = hi;
		return;
	}
	out[*n].lo = lo;
	out[*n].hi = hi;
	out[*n].value = v;
	out[*n].state = state;
	(*n)++;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* Cut points of a few segments, sorted without qsort's set-up. */
#define FEW_CUTS	32

static void
sort_cuts(int64_t *cuts, int n)
{
	int64_t	 v;
	int	 i, j;

	if (n > FEW_CUTS) {
		qsort(cuts, n, sizeof *cuts, cmp_i64);
		return;
	}
	for (i = 1; i < n; i++) {
		v = cuts[i];
		for (j = i; j > 0 && cuts[j - 1] > v; j--)
			cuts[j] = cuts[j - 1];
		cuts[j] = v;
	}
}

/*
 * The sum of the members' segment lists, times scale: one piece per range
 * where every member's value is constant.  Flags *mixed when two members
 * contribute to a piece in different synchronization states.
 */
static void
seg_sum(struct sym_run *run, struct arena *sa,
    struct seglist *const *members, int n, struct rational scale,
    bool *mixed, struct seglist *outp)
{
	struct seglist	 out;
	int64_t		*cuts, cuts_stack[FEW_CUTS];
	int		 ncuts = 0, i, j, nout = 0;
	int		 pos_stack[SEG_STACK_MEMBERS];
	const struct lincomb *vals_stack[SEG_STACK_MEMBERS];
	int		*pos = n <= SEG_STACK_MEMBERS ? pos_stack :
			    xcalloc(n, sizeof *pos);
	const struct lincomb **vals = n <= SEG_STACK_MEMBERS ? vals_stack :
			    xcalloc(n, sizeof *vals);
	bool		 single = true;

	for (i = 0; i < n; i++)
		if (members[i]->n != 1)
			single = false;
	if (single) {
		/* The common case: one segment per member, one piece. */
		uint32_t state = 0;

		for (i = 0; i < n; i++) {
			vals[i] = members[i]->v[0].value;
			state |= members[i]->v[0].state;
			if (members[i]->v[0].state != members[0]->v[0].state)
				*mixed = true;
		}
		outp->one.lo = members[0]->v[0].lo;
		outp->one.hi = members[0]->v[0].hi;
		outp->one.value = share(run, lc_sum(run->arena, vals, n,
		    scale));
		outp->one.state = state | (1u << run->step);
		outp->v = &outp->one;
		outp->n = 1;
		if (pos != pos_stack) {
			free(pos);
			free(vals);
		}
		return;
	}
	memset(pos, 0, n * sizeof *pos);
	for (i = 0; i < n; i++)
		ncuts += members[i]->n + 1;
	cuts = ncuts <= FEW_CUTS ? cuts_stack : xcalloc(ncuts, sizeof *cuts);
	ncuts = 0;
	for (i = 0; i < n; i++) {
		for (j = 0; j < members[i]->n; j++)
			cuts[ncuts++] = members[i]->v[j].lo;
		cuts[ncuts++] = members[i]->v[members[i]->n - 1].hi;
	}
	sort_cuts(cuts, ncuts);
	out.v = arena_alloc(sa, ncuts * sizeof *out.v);
	for (j = 0; j + 1 < ncuts; j++) {
		int64_t lo = cuts[j], hi = cuts[j + 1];
		uint32_t state = 0, first = 0;

		if (lo == hi)
			continue;
		for (i = 0; i < n; i++) {
			const struct seglist *sl = members[i];

			while (sl->v[pos[i]].hi <= lo)
				pos[i]++;
			vals[i] = sl->v[pos[i]].value;
			if (i == 0)
				first = sl->v[pos[i]].state;
			else if (sl->v[pos[i]].state != first)
				*mixed = true;
			state |= sl->v[pos[i]].state;
		}
		seg_push(out.v, &nout, lo, hi, share(run, lc_sum(run->arena,
		    vals, n, scale)), state | (1u << run->step));
	}
	out.n = nout;
	if (cuts != cuts_stack)
		free(cuts);
	if (pos != pos_stack) {
		free(pos);
		free(vals);
	}
	seglist_set(outp, &out);
}

/*
 * Member `mine` after a reduce-scatter: the combined value inside the
 * ranges it owns, its own value elsewhere.
 */
static struct seglist
seg_overlay(struct arena *sa, const struct seglist *mine,
    const struct seglist *combined, int64_t (*owned)[2], int nowned)
{
	struct seglist	 out;
	int64_t		*cuts, cuts_stack[FEW_CUTS];
	int		 ncuts = 0, i, j, r, nout = 0, pm = 0, pc = 0;

	ncuts = mine->n + combined->n + 2 * nowned + 2;
	cuts = ncuts <= FEW_CUTS ? cuts_stack : xcalloc(ncuts, sizeof *cuts);
	ncuts = 0;
	for (i = 0; i < mine->n; i++)
		cuts[ncuts++] = mine->v[i].lo;
	for (i = 0; i < combined->n; i++)
		cuts[ncuts++] = combined->v[i].lo;
	for (r = 0; r < nowned; r++) {
		cuts[ncuts++] = owned[r][0];
		cuts[ncuts++] = owned[r][1];
	}
	cuts[ncuts++] = mine->v[mine->n - 1].hi;
	sort_cuts(cuts, ncuts);
	out.v = arena_alloc(sa, ncuts * sizeof *out.v);
	for (j = 0; j + 1 < ncuts; j++) {
		int64_t lo = cuts[j], hi = cuts[j + 1];
		bool owns = false;

		if (lo == hi)
			continue;
		for (r = 0; r < nowned; r++)
			if (owned[r][0] <= lo && hi <= owned[r][1])
				owns = true;
		if (owns) {
			while (combined->v[pc].hi <= lo)
				pc++;
			seg_push(out.v, &nout, lo, hi, combined->v[pc].value,
			    combined->v[pc].state);
		} else {
			while (mine->v[pm].hi <= lo)
				pm++;
			seg_push(out.v, &nout, lo, hi, mine->v[pm].value,
			    mine->v[pm].state);
		}
	}
	out.n = nout;
	if (cuts != cuts_stack)
		free(cuts);
	return out;
}

/* ---- executing the steps --------------------------------------------- */

static void
note_order_issue(struct sym_run *run, int param)
{
	int	l = run->model->params[param].logical, i;

	for (i = 0; i < run->nissues; i++)
		if (run->issues[i].step == run->step &&
		    run->issues[i].logical == l)
			return;
	run->issues = xreallocarray(run->issues, run->nissues + 1,
	    sizeof *run->issues);
	run->issues[run->nissues].step = run->step;
	run->issues[run->nissues].logical = l;
	run->nissues++;
}

/* q * x, an atom's product built once per step for all params. */
static const struct lincomb *
scale_value(struct sym_run *run, const struct lincomb *x, struct rational q)
{
	uint32_t	 atom;

	if (x->nterms != 1 || run->atoms[atom = x->terms[0].atom] != x)
		return share(run, lc_scale(run->arena, x, q));
	if (!q_equal(run->scaled_by, q)) {
		memset(run->scaled, 0, run->natoms * sizeof *run->scaled);
		run->scaled_by = q;
	}
	if (run->scaled[atom] == NULL)
		run->scaled[atom] = share(run, lc_scale(run->arena, x, q));
	return run->scaled[atom];
}

static void
scale_values(struct sym_run *run, int param, struct seglist *sl,
    struct rational q)
{
	struct segment	*v;
	int		 i;

	if (sl->n == 1) {
		sl->one.value = scale_value(run, sl->one.value, q);
		return;
	}
	v = arena_alloc(seg_arena(run, param), sl->n * sizeof *v);
	for (i = 0; i < sl->n; i++) {
		v[i] = sl->v[i];
		v[i].value = scale_value(run, sl->v[i].value, q);
	}
	sl->v = v;
}

static void
run_scale(struct sym_run *run, const struct sync_step *s)
{
	const struct model *m = run->model;
	const struct lincomb *last_in = NULL, *last_out = NULL;
	int	p, i, k;

	for (p = 0; p < m->nparams; p++) {
		if (!syncplan_touches(s, m, p))
			continue;
		for (i = 0; i < run->stage_ranks; i++) {
			struct seglist *sl = &run->vals[p][i];

			/* Replicas share values: remember the last result. */
			if (sl->n == 1 && sl->one.value == last_in) {
				sl->one.value = last_out;
				continue;
			}
			k = sl->n == 1;
			if (k)
				last_in = sl->v[0].value;
			scale_values(run, p, sl, s->scale);
			if (k)
				last_out = sl->v[0].value;
		}
	}
}

static void
run_mask(struct sym_run *run, const struct sync_step *s)
{
	const struct model *m = run->model;
	int	p, i, j;

	for (p = 0; p < m->nparams; p++) {
		if (!syncplan_touches(s, m, p))
			continue;
		for (i = 0; i < run->stage_ranks; i++) {
			struct coord c;
			struct seglist *sl = &run->vals[p][i];
			struct segment *v;

			run_coord(run, stage_base(run, p) + i, &c);
			if (pl_keeps_value(&c, s->replicate,
			    pl_uniform(PLACE_PARTIAL)))
				continue;
			if (sl->n == 1) {
				sl->one.value = &lincomb_zero;
				continue;
			}
			v = arena_alloc(seg_arena(run, p), sl->n * sizeof *v);
			for (j = 0; j < sl->n; j++) {
				v[j] = sl->v[j];
				v[j].value = &lincomb_zero;
			}
			sl->v = v;
		}
	}
}

/* model_instance_on, at once for a parameter with one instance. */
static int
instance_on(const struct sym_run *run, int param, int rank)
{
	const struct model *m = run->model;

	if (m->logical[m->params[param].logical].ninstances == 1)
		return param;
	return model_instance_on(m, param, rank);
}

/*
 * An all-gather over a reduce-scatter's group: every member's owned ranges
 * go to every member, so all hold what the owners hold.
 */
static void
gather_group(struct sym_run *run, int param, const int *members,
    struct seglist **lists, int n)
{
	const struct model *m = run->model;
	struct seglist	 gathered = *lists[0];
	int64_t		 owned[16][2];
	int		 i, no;

	for (i = 0; i < n; i++) {
		no = layout_owned_ranges(&run->ctx->layout, m,
		    instance_on(run, param, members[i]), i, owned, 16);
		gathered = seg_overlay(seg_arena(run, param), &gathered,
		    lists[i], owned, no);
	}
	for (i = 0; i < n; i++)
		seglist_set(lists[i], &gathered);
}

/*
 * One collective over the group of `leader` on the parameter `param` (or,
 * for the embedding group, on whichever instance each member holds).
 */
static void
reduce_group(struct sym_run *run, const struct sync_step *s, int param,
    int leader, int *members, struct seglist **lists)
{
	const struct model *m = run->model;
	int	n, i, inst;
	struct rational scale = q_make(1, 1);
	struct seglist combined, overlay;
	bool	mixed = false;

	n = mesh_group_size(&m->mesh, s->group);
	mesh_group(&m->mesh, s->group, leader, members);
	if (n < 2)
		return;
	for (i = 0; i < n; i++) {
		inst = instance_on(run, param, members[i]);
		lists[i] = values_of(run, inst, members[i]);
	}
	if (s->op == SYNC_ALL_GATHER) {
		gather_group(run, param, members, lists, n);
		return;
	}
	if (s->average)
		scale = q_make(1, n);
	seg_sum(run, seg_arena(run, param), lists, n, scale, &mixed,
	    &combined);
	if (mixed)
		note_order_issue(run, param);
	for (i = 0; i < n; i++) {
		if (s->op == SYNC_REDUCE_SCATTER) {
			int64_t owned[16][2];
			int no;

			inst = instance_on(run, param, members[i]);
			no = layout_owned_ranges(&run->ctx->layout, m, inst, i,
			    owned, 16);
			overlay = seg_overlay(seg_arena(run, param), lists[i],
			    &combined,
			    owned, no);
			seglist_set(lists[i], &overlay);
		} else
			seglist_set(lists[i], &combined);
	}
}

/* mesh_group_index from the coordinate table. */
static int
group_index(const struct sym_run *run, enum group_kind kind, int rank)
{
	struct coord	c;

	run_coord(run, rank, &c);
	switch (kind) {
	case GROUP_DP:
		return c.dp;
	case GROUP_TP:
		return c.tp;
	case GROUP_PP:
		return c.pp;
	case GROUP_EP:
		return c.ep;
	case GROUP_ETP:
		return c.etp;
	case GROUP_EDP:
		return c.edp;
	case GROUP_CP:
		return c.cp;
	case GROUP_PURE_DP:
		return c.pure_dp;
	case GROUP_EMBEDDING:
	case GROUP_DP_SHARD:
	case GROUP_DP_REPLICATE:
	case GROUP_EFSDP:
	case GROUP_EDP_REPLICATE:
	case GROUP__COUNT:
		break;
	}
	return mesh_group_index(&run->model->mesh, kind, rank);
}

static void
run_collective(struct sym_run *run, const struct sync_step *s)
{
	const struct model *m = run->model;
	int	 size = mesh_group_size(&m->mesh, s->group);
	int	*members = xcalloc(size, sizeof *members);
	struct seglist **lists = xcalloc(size, sizeof *lists);
	int	 p, i, rank;

	for (p = 0; p < m->nparams; p++) {
		if (!syncplan_touches(s, m, p))
			continue;
		for (i = 0; i < run->stage_ranks; i++) {
			rank = stage_base(run, p) + i;
			/* Member 0, the lowest, runs the group's collective. */
			if (group_index(run, s->group, rank) != 0)
				continue;
			reduce_group(run, s, p, rank, members, lists);
		}
	}
	free(members);
	free(lists);
}

static void
run_plan(struct sym_run *run, sym_step_hook *hook, void *hook_arg)
{
	const struct sync_plan *plan = &run->ctx->plan;
	int	k;

	if (hook != NULL)
		hook(hook_arg, run, -1);
	for (k = 0; k < plan->nsteps; k++) {
		const struct sync_step *s = &plan->steps[k];

		run->step = k;
		switch (s->op) {
		case SYNC_SCALE:
			run_scale(run, s);
			break;
		case SYNC_MASK_REPLICAS:
			run_mask(run, s);
			break;
		case SYNC_ALL_REDUCE:
		case SYNC_REDUCE_SCATTER:
		case SYNC_ALL_GATHER:
			run_collective(run, s);
			break;
		}
		if (hook != NULL)
			hook(hook_arg, run, k);
	}
}

/* ---- verdicts -------------------------------------------------------- */

struct cell_list {
	struct cell	*v;
	int		*key;	/* shard key of each cell */
	size_t		 n, cap;
};

static struct cell *
cell_add(struct cell_list *cl)
{
	if (cl->n == cl->cap) {
		cl->cap = cl->cap ? 2 * cl->cap : 64;
		cl->v = xreallocarray(cl->v, cl->cap, sizeof *cl->v);
		cl->key = xreallocarray(cl->key, cl->cap, sizeof *cl->key);
	}
	memset(&cl->v[cl->n], 0, sizeof cl->v[cl->n]);
	return &cl->v[cl->n++];
}

/*
 * Where the padded rows of a word embedding begin in a rank's shard of
 * param (an instance of it, or the tied output layer), when their lookup
 * gradients are known to be zero: token ids stay below model.vocab, so
 * the local gradients of the embedding's own ranks (stage 0, atoms below
 * dp * tp) are zero on the padded rows.  Where one instance serves both
 * lookup and output (tied, one stage), its atoms are not: local_elems.
 */
static int64_t
lookup_zero_from(const struct sym_run *run, int param, int rank)
{
	const struct model		*m = run->model;
	const struct param		*p = &m->params[param];
	const struct logical_param	*l = &m->logical[p->logical];
	int64_t				 rows = p->local_shape[0], real;
	struct coord			 c;

	if (m->params[l->instance[0]].role != ROLE_EMBEDDING ||
	    (l->tied_with != NULL && l->ninstances == 1))
		return p->local_elems;
	run_coord(run, rank, &c);
	real = m->config->model.vocab - (int64_t)c.tp * rows;
	if (real < 0)
		real = 0;
	if (real > rows)
		real = rows;
	return real * p->local_shape[1];
}

/* No instance of param's logical parameter is an output layer. */
static bool
lookup_only(const struct model *m, int param)
{
	const struct logical_param *l = &m->logical[m->params[param].logical];
	int	 k;

	for (k = 0; k < l->ninstances; k++)
		if (m->params[l->instance[k]].role == ROLE_OUTPUT)
			return false;
	return true;
}

/*
 * Split a rank's segments at the boundaries of the ranges it uses, and
 * where a word embedding's padded rows begin.
 */
static void
emit_cells(struct sym_run *run, struct cell_list *cl, int param, int rank)
{
	const struct model *m = run->model;
	const struct atom_space *sp = &run->ctx->atoms;
	const struct seglist *sl = values_of(run, param, rank);
	const struct lincomb *expected = sym_expected(run, param, rank);
	int64_t	 used[16][2], padded = lookup_zero_from(run, param, rank);
	int	 nused, i, r, key = shard_key(run, &m->params[param], rank);
	struct coord c;

	nused = syncplan_used_ranges(m, &run->ctx->layout, param, rank, used,
	    16);
	run_coord(run, rank, &c);
	for (i = 0; i < sl->n; i++) {
		int64_t lo = sl->v[i].lo, hi = sl->v[i].hi;

		while (lo < hi) {
			int64_t end = hi;
			bool inside = false;

			for (r = 0; r < nused; r++) {
				if (used[r][0] <= lo && lo < used[r][1]) {
					inside = true;
					if (used[r][1] < end)
						end = used[r][1];
				} else if (used[r][0] > lo && used[r][0] < end)
					end = used[r][0];
			}
			if (lo < padded && padded < end)
				end = padded;
			struct cell *ce = cell_add(cl);

			cl->key[cl->n - 1] = key;
			ce->rank = rank;
			ce->coord = c;
			ce->lo = lo;
			ce->hi = end;
			ce->used = inside;
			ce->value = sl->v[i].value;
			ce->expected = expected;
			if (lo >= padded) {
				/*
				 * The atoms of ranks past the first stage,
				 * where the output layer is; none when the
				 * last stage's copy is only looked up (the
				 * untied embedding of the MTP layers).
				 */
				uint32_t from = lookup_only(m, param) ?
				    UINT32_MAX : atom_id(sp, run->stage_ranks,
				    0, 0);

				ce->value = lc_from_atom(run->arena, sp,
				    ce->value, from);
				ce->expected = lc_from_atom(run->arena, sp,
				    expected, from);
			}
			ce->ok = inside && same_value(run, ce->value,
			    ce->expected);
			lo = end;
		}
	}
}

/*
 * Consistent: for every element, every used copy holds the same value.
 * Cells of one shard key are cut at all their boundaries; each piece keeps
 * the first used value seen and every other used cell covering it must
 * match.  Only needed when some used cell is wrong.
 */
static bool
cells_consistent(const struct cell_list *cl)
{
	int64_t	*cuts = xcalloc(2 * cl->n + 1, sizeof *cuts);
	const struct lincomb **piece = xcalloc(2 * cl->n + 1, sizeof *piece);
	size_t	 i, j, ncuts, lo;
	int	 key, maxkey = 0;
	bool	 ok = true;

	for (i = 0; i < cl->n; i++)
		if (cl->key[i] > maxkey)
			maxkey = cl->key[i];
	for (key = 0; key <= maxkey && ok; key++) {
		ncuts = 0;
		for (i = 0; i < cl->n; i++)
			if (cl->v[i].used && cl->key[i] == key) {
				cuts[ncuts++] = cl->v[i].lo;
				cuts[ncuts++] = cl->v[i].hi;
			}
		if (ncuts == 0)
			continue;
		qsort(cuts, ncuts, sizeof *cuts, cmp_i64);
		for (i = j = 1; i < ncuts; i++)
			if (cuts[i] != cuts[j - 1])
				cuts[j++] = cuts[i];
		ncuts = j;
		memset(piece, 0, ncuts * sizeof *piece);
		for (i = 0; i < cl->n && ok; i++) {
			const struct cell *c = &cl->v[i];
			size_t a = 0, b = ncuts;

			if (!c->used || cl->key[i] != key)
				continue;
			while (a < b) {		/* first cut >= c->lo */
				size_t mid = (a + b) / 2;

				if (cuts[mid] < c->lo)
					a = mid + 1;
				else
					b = mid;
			}
			for (lo = a; lo + 1 < ncuts && cuts[lo] < c->hi; lo++) {
				if (piece[lo] == NULL)
					piece[lo] = c->value;
				else if (piece[lo] != c->value &&
				    !lc_equal(piece[lo], c->value))
					ok = false;
			}
		}
	}
	free(cuts);
	free(piece);
	return ok;
}

static void
fill_param(struct sym_run *run, struct audit *a, int l,
    struct param_result *pr)
{
	const struct model *m = run->model;
	const struct logical_param *lp = &m->logical[l];
	const struct param *first = &m->params[lp->instance[0]];
	struct cell_list cl = { 0 };
	int	 inst, rank, k, base;
	size_t	 c;

	/* The audit outlives the model: copy the names into its arena. */
	pr->name = arena_strdup(&a->arena, lp->name);
	pr->tied_with = lp->tied_with ? arena_strdup(&a->arena, lp->tied_with) :
	    NULL;
	pr->has_chunk = m->chunks > 1;
	pr->chunk = pr->tied_chunk = first->chunk;
	if (lp->ninstances == 2)
		pr->tied_chunk = m->params[lp->instance[1]].chunk;
	pr->elems = first->elems;
	pr->is_expert = first->expert;
	/* Instances are in stage order, so cells come out sorted by rank. */
	for (k = 0; k < lp->ninstances; k++) {
		inst = lp->instance[k];
		base = m->params[inst].stage * run->stage_ranks;
		for (rank = base; rank < base + run->stage_ranks; rank++)
			emit_cells(run, &cl, inst, rank);
	}
	pr->correct = true;
	for (c = 0; c < cl.n; c++)
		if (cl.v[c].used && !cl.v[c].ok)
			pr->correct = false;
	pr->consistent = pr->correct || cells_consistent(&cl);
	pr->cells = arena_alloc(&a->arena, cl.n * sizeof *pr->cells);
	memcpy(pr->cells, cl.v, cl.n * sizeof *pr->cells);
	pr->ncells = cl.n;
	free(cl.v);
	free(cl.key);
}

/* ---- findings -------------------------------------------------------- */

struct finding_list {
	struct audit	*audit;
	size_t		 cap;
};

static int *
wrong_ranks(struct audit *a, const struct param_result *pr, size_t *n)
{
	int	*r = arena_alloc(&a->arena, (pr->ncells + 1) * sizeof *r);
	size_t	 i;

	*n = 0;
	for (i = 0; i < pr->ncells; i++) {
		const struct cell *c = &pr->cells[i];

		if (!c->used || c->ok)
			continue;
		if (*n > 0 && r[*n - 1] == c->rank)
			continue;
		r[(*n)++] = c->rank;
	}
	return r;
}

/*
 * Merge into an existing finding of the same kind and op (one finding for
 * all routers of a model), or add a new one.
 */
static void
add_finding(struct finding_list *fl, enum finding_kind kind,
    enum cfg_key cause, const struct param_result *pr, const char *op,
    const char *dim, const char *message, const char *fix)
{
	struct audit	*a = fl->audit;
	struct finding	*f;
	size_t		 i, nr, j, k, n;
	int		*ranks = wrong_ranks(a, pr, &nr);

	for (i = 0; i < a->nfindings; i++) {
		f = &a->findings[i];
		if (f->kind != kind || strcmp(f->op, op) != 0 ||
		    strcmp(f->message, message) != 0)
			continue;
		const char **params = arena_alloc(&a->arena,
		    (f->nparams + 1) * sizeof *params);
		memcpy(params, f->params, f->nparams * sizeof *params);
		params[f->nparams] = pr->name;
		f->params = params;
		f->nparams++;
		/* Union of two ascending rank lists. */
		int *u = arena_alloc(&a->arena, (f->nranks + nr + 1) *
		    sizeof *u);
		for (j = k = n = 0; j < f->nranks || k < nr;) {
			int x;

			if (k >= nr || (j < f->nranks && f->ranks[j] < ranks[k]))
				x = f->ranks[j++];
			else if (j >= f->nranks || ranks[k] < f->ranks[j])
				x = ranks[k++];
			else {
				x = ranks[k++];
				j++;
			}
			u[n++] = x;
		}
		f->ranks = u;
		f->nranks = n;
		return;
	}
	if (a->nfindings == fl->cap) {
		struct finding *nf;

		fl->cap = fl->cap ? 2 * fl->cap : 8;
		nf = arena_alloc(&a->arena, fl->cap * sizeof *nf);
		if (a->nfindings > 0)
			memcpy(nf, a->findings, a->nfindings * sizeof *nf);
		a->findings = nf;
	}
	f = &a->findings[a->nfindings++];
	memset(f, 0, sizeof *f);
	f->kind = kind;
	f->param = pr->name;
	f->params = arena_alloc(&a->arena, sizeof *f->params);
	f->params[0] = pr->name;
	f->nparams = 1;
	f->ranks = ranks;
	f->nranks = nr;
	f->op = op;
	f->dim = dim;
	f->message = message;
	f->fix = fix;
	f->cause = cause;
}

static const char *
fmt(struct audit *a, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static const char *
fmt(struct audit *a, const char *format, ...)
{
	char	 buf[1024];
	va_list	 ap;

	va_start(ap, format);
	vsnprintf(buf, sizeof buf, format, ap);
	va_end(ap);
	return arena_strdup(&a->arena, buf);
}

static bool
touches_logical(const struct sync_step *s, const struct model *m, int l)
{
	int	k;

	for (k = 0; k < m->logical[l].ninstances; k++)
		if (syncplan_touches(s, m, m->logical[l].instance[k]))
			return true;
	return false;
}

/*
 * A gradient whose true placement (from the placement rules) and declared
 * placement (what the framework does) disagree: Partial declared Replicate
 * is a missing reduction, Replicate declared Partial a double count.
 */
static bool
explain_placement(struct finding_list *fl, const struct mesh *mesh,
    const struct sync_step *s, const struct param_result *pr)
{
	struct audit	*a = fl->audit;
	bool		 missing, doubled;
	char		 truth[96], declared[96];

	missing = (s->truth.slice == PLACE_PARTIAL &&
	    s->declared.slice == PLACE_REPLICATE) ||
	    (s->truth.etp == PLACE_PARTIAL &&
	    s->declared.etp == PLACE_REPLICATE);
	doubled = (s->truth.slice == PLACE_REPLICATE &&
	    s->declared.slice == PLACE_PARTIAL) ||
	    (s->truth.etp == PLACE_REPLICATE &&
	    s->declared.etp == PLACE_PARTIAL);
	if (missing)
		add_finding(fl, FINDING_MISSING_REDUCTION, s->key, pr, s->label,
		    "tp",
		    fmt(a, "over tp the gradient is %s (each tp rank holds "
		    "only its share) but is declared %s, so the %s never "
		    "runs%s%s%s", pl_format(mesh, s->truth, truth, sizeof truth),
		    pl_format(mesh, s->declared, declared, sizeof declared),
		    s->label, s->cite ? " (" : "", s->cite ? s->cite : "",
		    s->cite ? ")" : ""), s->fix);
	else if (doubled)
		add_finding(fl, FINDING_DOUBLE_COUNT, s->key, pr, s->label,
		    "tp",
		    fmt(a, "over tp the gradient is %s but is declared %s "
		    "and reduced over tp, which counts its replicated part "
		    "once per replica", pl_format(mesh, s->truth, truth,
		    sizeof truth), pl_format(mesh, s->declared, declared,
		    sizeof declared)), s->fix);
	return missing || doubled;
}

/*
 * The experts' input gradient (torchtitan #1878) feeds the router's score
 * gradient: when its etp all-reduce is skipped, say so next to the router.
 */
static void
explain_backward_reductions(struct finding_list *fl, const struct model *m,
    const struct sym_context *ctx, const struct param_result *pr, int stage)
{
	char	truth[96], declared[96];
	int	i;

	for (i = 0; i < ctx->nreductions; i++) {
		const struct backward_reduction *r = &ctx->reductions[i];

		if (r->stage != stage || r->boundary ||
		    pl_equal(r->truth, r->declared))
			continue;
		add_finding(fl, FINDING_MISSING_REDUCTION,
		    KEY_EXPERT_INPUT_GRAD, pr, r->what, r->dim,
		    fmt(fl->audit, "the %s is %s over %s but declared %s, so "
		    "its all-reduce over %s (%s) is skipped and the router's "
		    "score gradient stays Partial", r->what, pl_format(&m->mesh,
		    r->truth, truth, sizeof truth), r->dim, pl_format(&m->mesh,
		    r->declared, declared, sizeof declared), r->dim, r->cite),
		    "all-reduce the routed expert input gradient over etp in "
		    "backward (sync.expert_input_grad: etp-all-reduce)");
	}
}

/*
 * The used wrong cells of pr with distinct (value, expected) pairs, in
 * *dw (its cells xmalloc'd, for the caller to free): the tests below
 * depend on those pairs alone, and values are interned (lc_intern), so
 * each distinct pair is classified once instead of once per rank (issue
 * 24: at 2,048 ranks the same 24,000-term pair was read per rank).
 */
static void
distinct_wrong(const struct param_result *pr, struct param_result *dw)
{
	const struct cell **slot;
	struct cell	*out;
	size_t		 i, k, cap = 16, n = 0;

	while (cap < 2 * pr->ncells)
		cap *= 2;
	slot = xcalloc(cap, sizeof *slot);
	out = xreallocarray(NULL, pr->ncells + 1, sizeof *out);
	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];
		uintptr_t h;

		if (!ce->used || ce->ok)
			continue;
		h = ((uintptr_t)ce->value >> 4) * 31 +
		    ((uintptr_t)ce->expected >> 4);
		for (k = (h * 0x9e3779b97f4a7c15u) & (cap - 1); slot[k] != NULL;
		    k = (k + 1) & (cap - 1))
			if (slot[k]->value == ce->value &&
			    slot[k]->expected == ce->expected)
				break;
		if (slot[k] != NULL)
			continue;
		slot[k] = ce;
		out[n++] = *ce;
	}
	free(slot);
	*dw = *pr;
	dw->cells = out;
	dw->ncells = n;
}

static bool
all_wrong_proportional(const struct param_result *pr, struct rational *c)
{
	size_t	i;
	bool	have = false;

	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];
		struct rational	 q;

		if (!ce->used || ce->ok)
			continue;
		if (!lc_proportional(ce->value, ce->expected, &q))
			return false;
		if (have && !q_equal(q, *c))
			return false;
		*c = q;
		have = true;
	}
	return have;
}

/*
 * True when every wrong used cell's value stands in relation `rel` to its
 * expected value, and there is one.
 */
static bool
all_wrong(const struct param_result *pr,
    bool (*rel)(const struct lincomb *, const struct lincomb *))
{
	size_t	i;
	bool	have = false;

	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];

		if (!ce->used || ce->ok)
			continue;
		if (!rel(ce->value, ce->expected))
			return false;
		have = true;
	}
	return have;
}

/*
 * A parameter before a lossy MoE block boundary: name the boundary, as
 * its gradient went wrong there and not in any step of the plan.
 */
static bool
explain_boundary(struct finding_list *fl, const struct model *m,
    const struct sym_context *ctx, const struct param_result *pr, int p)
{
	const struct backward_reduction *r;
	char	 truth[96], declared[96];

	if (m->params[p].boundary < 0 || pr->correct)
		return false;
	r = &ctx->reductions[m->params[p].boundary];
	if (r->router_twice)
		add_finding(fl, FINDING_DOUBLE_COUNT, KEY_ROUTER_INPUT_GRAD, pr,
		    r->what, r->dim,
		    fmt(fl->audit, "in the MoE block of layer %d the router's "
		    "input gradient is all-reduced over tp although it is "
		    "complete on every tp rank already, so it is counted tp "
		    "times in every gradient computed before the block "
		    "(norms, mixer, embedding, earlier layers) (torchtitan "
		    "de329200b's from_local(Replicate) of the gate's input)",
		    r->layer),
		    "leave the router's input gradient as its placement says "
		    "(sync.router_input_grad: none; torchtitan PR #3386 stops "
		    "wrapping the gate's input in from_local(Replicate))");
	if (r->summed_whole)
		add_finding(fl, FINDING_DOUBLE_COUNT, KEY_ROUTER_INPUT_GRAD, pr,
		    r->what, r->dim,
		    fmt(fl->audit, "at the boundary of the MoE block of layer "
		    "%d the block input's gradient is declared Partial and "
		    "summed over tp as it is, but part of it was all-reduced "
		    "over tp inside the block already, so that part is "
		    "counted tp times in every gradient computed before the "
		    "block (norms, mixer, embedding, earlier layers) "
		    "(torchtitan de329200b, until 963c20cba, PR #3386)",
		    r->layer),
		    "keep the input gradients inside the block Partial, so "
		    "that the boundary sums them once (sync.router_input_grad: "
		    "none and sync.expert_input_grad: none; torchtitan PR "
		    "#3386 stops wrapping the gate's input in "
		    "from_local(Replicate))");
	if (!r->missing)
		return true;
	add_finding(fl, FINDING_MISSING_REDUCTION, KEY_MOE_INPUT_GRAD, pr,
	    r->what, r->dim, fmt(fl->audit, "at the boundary of the MoE "
	    "block of layer %d the "
	    "block input's gradient is %s over tp but declared %s, so it is "
	    "never summed over tp: each tp rank keeps its own share, and "
	    "every gradient computed before the block (norms, mixer, "
	    "embedding, earlier layers) misses the other tp ranks' "
	    "contributions (%s)", r->layer, pl_format(&m->mesh, r->truth,
	    truth, sizeof truth), pl_format(&m->mesh, r->declared, declared,
	    sizeof declared), r->cite),
	    "declare the MoE block input's gradient Partial and reduce it "
	    "over tp at the block boundary (sync.moe_input_grad: auto; "
	    "torchtitan PR #2416, to_local(grad_placements=(Partial(),)))");
	return true;
}

/*
 * The main loss's atoms of v as expected, and its auxiliary losses' atoms
 * (lossnorm.h) q times the expected ones, q the same for all (0 when they
 * are missing)?
 */
static bool
aux_proportional(const struct atom_space *sp, const struct lincomb *v,
    const struct lincomb *e, struct rational *q, bool *have)
{
	int	 aux = atom_space_aux_source(sp);
	uint32_t i = 0, j = 0;

	while (i < v->nterms || j < e->nterms) {
		const struct term *a = i < v->nterms ? &v->terms[i] : NULL;
		const struct term *b = j < e->nterms ? &e->terms[j] : NULL;
		struct rational	 r;

		if (a != NULL && (b == NULL || a->atom < b->atom))
			return false;	/* an atom nobody expects */
		if (a == NULL || b->atom < a->atom) {
			if (atom_source(sp, b->atom) != aux)
				return false;
			r = q_make(0, 1);
			j++;
		} else {
			if (atom_source(sp, a->atom) != aux) {
				if (!q_equal(a->coef, b->coef))
					return false;
				i++, j++;
				continue;
			}
			r = q_div(a->coef, b->coef);
			i++, j++;
		}
		if (*have && !q_equal(r, *q))
			return false;
		*q = r;
		*have = true;
	}
	return true;
}

static bool
all_wrong_aux(const struct atom_space *sp, const struct param_result *pr,
    struct rational *q)
{
	size_t	 i;
	bool	 have = false, any = false;

	if (atom_space_aux_source(sp) < 0)
		return false;
	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];

		if (!ce->used || ce->ok)
			continue;
		if (!aux_proportional(sp, ce->value, ce->expected, q, &have))
			return false;
		any = true;
	}
	return any && have;
}

/*
 * The other atoms of v as expected, and its multi-token prediction
 * losses' atoms (lossnorm.h) the expected ones with other coefficients:
 * *uniform stays true while all of them are q times the expected.
 */
static bool
mtp_off(const struct atom_space *sp, const struct lincomb *v,
    const struct lincomb *e, struct rational *q, bool *have, bool *uniform)
{
	uint32_t i = 0, j = 0;

	while (i < v->nterms || j < e->nterms) {
		const struct term *a = i < v->nterms ? &v->terms[i] : NULL;
		const struct term *b = j < e->nterms ? &e->terms[j] : NULL;
		struct rational	 r;

		if (a != NULL && (b == NULL || a->atom < b->atom))
			return false;	/* an atom nobody expects */
		if (a == NULL || b->atom < a->atom) {
			if (atom_mtp_layer(sp, b->atom) == 0)
				return false;
			r = q_make(0, 1);
			j++;
		} else {
			if (atom_mtp_layer(sp, a->atom) == 0) {
				if (!q_equal(a->coef, b->coef))
					return false;
				i++, j++;
				continue;
			}
			r = q_div(a->coef, b->coef);
			i++, j++;
		}
		if (*have && !q_equal(r, *q))
			*uniform = false;
		*q = r;
		*have = true;
	}
	return true;
}

/*
 * Are the multi-token prediction atoms of one micro-batch weighed
 * differently against the expected on its cp ranks?  Each atom is
 * compared with its cp rank 0 sibling's: what a rolled count of the cp
 * rank's own makes of a roll across the cp ranks, which leaves the one
 * holding a sequence's end fewer tokens (Megatron core 0.14 on).
 */
static bool
mtp_unequal_over_cp(const struct atom_space *sp,
    const struct param_result *pr)
{
	const struct mesh *mesh = &sp->mesh;
	const struct term *b;
	struct coord	 c;
	struct rational	 e0;
	uint32_t	 sib, j;
	size_t		 i;
	int		 r0;

	if (mesh->cp == 1)
		return false;
	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];

		if (!ce->used || ce->ok)
			continue;
		for (j = 0; j < ce->expected->nterms; j++) {
			b = &ce->expected->terms[j];
			if (atom_mtp_layer(sp, b->atom) == 0 ||
			    atom_is_held(sp, b->atom))
				continue;
			mesh_coord_of(mesh, atom_rank(sp, b->atom), &c);
			if (c.cp == 0)
				continue;
			r0 = mesh_rank_of(mesh, c.pp, c.dp - c.cp, c.tp);
			sib = atom_id(sp, r0, atom_source(sp, b->atom),
			    atom_micro_batch(sp, b->atom));
			e0 = lc_coef(ce->expected, sib);
			if (q_is_zero(e0))
				continue;
			if (!q_equal(q_div(lc_coef(ce->value, b->atom),
			    b->coef), q_div(lc_coef(ce->value, sib), e0)))
				return true;
		}
	}
	return false;
}

static bool
all_wrong_mtp(const struct atom_space *sp, const struct param_result *pr,
    struct rational *q, bool *uniform)
{
	size_t	 i;
	bool	 have = false, any = false;

	*uniform = true;
	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];

		if (!ce->used || ce->ok)
			continue;
		if (!mtp_off(sp, ce->value, ce->expected, q, &have, uniform))
			return false;
		any = true;
	}
	return have && any;
}

static void
explain_param(struct finding_list *fl, const struct sym_run *run, int l,
    const struct param_result *pr, const struct param_result *dw)
{
	const struct sym_context *ctx = run->ctx;
	const struct model *m = run->model;
	struct audit	*a = fl->audit;
	const struct sync_step *scale_step = NULL, *factor_step;
	enum cfg_key	 scale_cause;
	struct rational	 c;
	char		 q[48];
	bool		 explained = false, uniform;
	int		 i;

	for (i = 0; i < ctx->plan.nsteps; i++) {
		const struct sync_step *s = &ctx->plan.steps[i];

		if (!touches_logical(s, m, l))
			continue;
		/*
		 * A scaling with a fix of its own (not its rule's, which the
		 * collective after it shares) says most about a factor.
		 */
		if ((s->op == SYNC_SCALE || s->op == SYNC_REDUCE_SCATTER ||
		    (s->op == SYNC_ALL_REDUCE && s->target == TARGET_BUFFER)) &&
		    !(scale_step != NULL && scale_step->op == SYNC_SCALE &&
		    s->op != SYNC_SCALE && scale_step->fix != NULL &&
		    scale_step->fix != s->fix))
			scale_step = s;
		if (s->has_placement && s->op == SYNC_ALL_REDUCE &&
		    explain_placement(fl, &m->mesh, s, pr))
			explained = true;
	}
	for (i = 0; i < ctx->plan.nskipped; i++)
		if (touches_logical(&ctx->plan.skipped[i], m, l) &&
		    explain_placement(fl, &m->mesh,
		    &ctx->plan.skipped[i], pr))
			explained = true;
	if (explained && m->params[m->logical[l].instance[0]].role ==
	    ROLE_ROUTER)
		explain_backward_reductions(fl, m, ctx, pr,
		    m->params[m->logical[l].instance[0]].stage);
	if (explain_boundary(fl, m, ctx, pr, m->logical[l].instance[0]) ||
	    (m->logical[l].ninstances > 1 && explain_boundary(fl, m, ctx, pr,
	    m->logical[l].instance[1])))
		explained = true;
	for (i = 0; i < run->nissues; i++) {
		const struct sync_step *s = &ctx->plan.steps[run->issues[i].step];

		if (run->issues[i].logical != l)
			continue;
		add_finding(fl, FINDING_WRONG_ORDER, s->key, pr, s->label,
		    mesh_group_name(s->group), fmt(a, "the %s combined copies "
		    "in different states: parts of one were already reduced "
		    "by an earlier collective and parts of the other were "
		    "not, so the owners' values mix reduced and unreduced "
		    "gradients%s%s%s", s->label, s->cite ? " (" : "",
		    s->cite ? s->cite : "", s->cite ? ")" : ""), s->fix);
		explained = true;
	}
	if (explained || pr->correct)
		return;
	/*
	 * The scaling step's setting is the cause of a wrong factor (or
	 * group) only when it decides one (sync.dp_divisor, dp_group,
	 * expert_grad_divisor, ...) and its fix names it: a step decided by
	 * its rule alone (the distributed optimizer's reduce-scatter) leaves
	 * the loss's own factor as the cause (issue 23: a dense model was
	 * told to set sync.expert_grad_divisor).
	 */
	factor_step = scale_step != NULL && scale_step->fix != NULL &&
	    strstr(scale_step->fix, cfg_key_path(scale_step->key)) != NULL ?
	    scale_step : NULL;
	/* The group a reduction runs over is no factor. */
	scale_cause = factor_step != NULL && factor_step->key !=
	    KEY_DP_GROUP ? factor_step->key : KEY__COUNT;
	if (all_wrong_proportional(dw, &c)) {
		q_format(c, q, sizeof q);
		add_finding(fl, FINDING_WRONG_SCALE, scale_cause, pr,
		    scale_step ?
		    scale_step->label : "gradient scaling", scale_step ?
		    mesh_group_name(scale_step->group) : "dp",
		    fmt(a, "the used values are %s times the expected "
		    "gradient: the right contributions with the wrong "
		    "factor (the data-parallel divisor, or the loss's own "
		    "normalization and scale)", q), scale_cause != KEY__COUNT ?
		    factor_step->fix : "make the loss "
		    "factor times the data-parallel divisor 1/N for every "
		    "token (loss.normalize_by, loss.scale, sync.dp_divisor)");
		return;
	}
	/*
	 * The main loss's part right, the auxiliary losses' part (a router's
	 * load-balancing and z-loss) by another factor or not at all: their
	 * own normalization is wrong (catalogue class AUX).
	 */
	if (all_wrong_aux(&ctx->atoms, dw, &c)) {
		q_format(c, q, sizeof q);
		add_finding(fl, FINDING_WRONG_SCALE, KEY_AUX_SCALE, pr,
		    "auxiliary loss "
		    "scaling", "dp", q_is_zero(c) ? fmt(a, "the router's "
		    "gradient holds the main loss's part but none of the "
		    "auxiliary losses' (load balancing, z-loss): their "
		    "gradient never reaches the router (NeMo Automodel "
		    "#1408)") : fmt(a, "the main loss's part of the router's "
		    "gradient is right, but the auxiliary losses' part (load "
		    "balancing, z-loss) is %s times the expected one: their "
		    "backward scale or token count is wrong for this mesh "
		    "(Megatron-LM PR #2237, PR #5047)", q),
		    "scale the auxiliary losses' gradient so that each "
		    "micro-batch's term weighs 1/(micro-batches x dp) after "
		    "the data-parallel reduction (loss.aux_scale)");
		return;
	}
	/*
	 * The main loss's part right, the multi-token prediction losses'
	 * part wrong: their scale (Megatron #3943) or their token counts
	 * (#2417, #7452 finding 3) are (catalogue class AUX).
	 */
	if (m->loss.mtp > 0 && all_wrong_mtp(&ctx->atoms, dw, &c, &uniform)) {
		q_format(c, q, sizeof q);
		if (uniform)
			add_finding(fl, FINDING_WRONG_SCALE, KEY_MTP_SCALE, pr,
			    "multi-token "
			    "prediction loss scaling", "dp", fmt(a, "the main "
			    "loss's part is right, but the multi-token "
			    "prediction losses' part is %s times the expected "
			    "one: their backward scale or token count is "
			    "wrong (Megatron-LM #2417, PR #3959)", q), "scale "
			    "the MTP losses' gradient so that layer k's term "
			    "weighs mtp_loss_scaling_factor / depth over the "
			    "step's valid tokens of its rolled mask "
			    "(loss.mtp_scale)");
		else if (mtp_unequal_over_cp(&ctx->atoms, dw))
			add_finding(fl, FINDING_WRONG_WEIGHTS, KEY_MTP_SCALE,
			    pr, "multi-token prediction loss normalization",
			    "cp",
			    fmt(a, "the main loss's part is right, but the "
			    "multi-token prediction losses' atoms of one "
			    "micro-batch weigh differently on its cp ranks: "
			    "each cp rank divides its loss by its own rolled "
			    "count, which differs over the cp ranks (the roll "
			    "across them leaves the one holding a sequence's "
			    "end k tokens a sample fewer: Megatron core 0.14 "
			    "on, roll_tensor and process_mtp_loss)"), "divide "
			    "each MTP layer's summed loss by the step's rolled "
			    "count (loss.mtp_scale: tokens-global) or, where "
			    "every cp group counts as many, by its micro-batch's "
			    "count over the cp group, times cp (loss.mtp_scale: "
			    "micro-batches-cp-group)");
		else
			add_finding(fl, FINDING_WRONG_WEIGHTS, KEY_MTP_SCALE,
			    pr, "multi-token prediction loss normalization",
			    "dp",
			    fmt(a, "the main loss's part is right, but the "
			    "multi-token prediction losses' atoms are weighted "
			    "unequally: their losses are divided by token "
			    "counts other than the step's valid tokens of each "
			    "layer's rolled mask (Megatron-LM #2417 / PR "
			    "#3159, #7452)"), "divide each MTP layer's summed "
			    "loss by the valid tokens of its rolled mask over "
			    "the whole step (loss.mtp_scale: tokens-global)");
		return;
	}
	/*
	 * Exactly the expected atoms, not in proportion: every token counts,
	 * with unequal weights, as a loss divided by the wrong token counts
	 * makes them (lossnorm.h).
	 */
	/*
	 * With pp > 1 a loss.pp_normalize_by other than "same" decides the
	 * normalization (torchtitan #2972): it is the setting to change.
	 */
	if (all_wrong(dw, lc_same_atoms) && m->mesh.pp > 1 &&
	    m->config->loss.pp_normalize_by != PP_NORMALIZE_SAME) {
		add_finding(fl, FINDING_WRONG_WEIGHTS, KEY_PP_NORMALIZE_BY, pr,
		    "loss normalization", "dp", fmt(a, "the used values hold "
		    "every chunk's contribution, but weighted unequally for "
		    "the stated objective: with pp > 1 the loss the pipeline "
		    "back-propagates is normalized otherwise than without it "
		    "(torchtitan #2972)"), "divide the loss the pipeline "
		    "schedule back-propagates as without pp (loss."
		    "pp_normalize_by: same; torchtitan 786e26f8e, #2972)");
		return;
	}
	if (all_wrong(dw, lc_same_atoms)) {
		add_finding(fl, FINDING_WRONG_WEIGHTS, KEY_NORMALIZE_BY, pr,
		    "loss "
		    "normalization", "dp", fmt(a, "the used values hold "
		    "every chunk's contribution (a micro-batch of a dp or cp "
		    "rank), but weighted unequally: the chunks' losses are "
		    "divided by token counts of their own rank, micro-batch "
		    "or cp share, not by the valid tokens of the whole step "
		    "(%lld), so tokens in short chunks weigh more",
		    (long long)m->loss.total),
		    "sum the token losses and divide by the valid tokens of "
		    "the whole step, counted over dp, cp and the "
		    "micro-batches (loss.normalize_by: global; HF #34191, "
		    "torchtitan #2206)");
		return;
	}
	/*
	 * Part of the expected sum with the right coefficients: some
	 * contributing ranks never reached it, so the reduction ran over too
	 * small a group.
	 */
	if (all_wrong(dw, lc_strict_part)) {
		int p = m->logical[l].instance[0];
		bool dense_expert = m->params[p].expert &&
		    layout_buffer_of(m, p) == BUFFER_DENSE;

		add_finding(fl, FINDING_WRONG_GROUP, dense_expert ?
		    KEY_EXPERT_BUFFER : factor_step ? factor_step->key :
		    KEY__COUNT, pr, scale_step ?
		    scale_step->label : "gradient synchronization", scale_step ?
		    mesh_group_name(scale_step->group) : "dp", fmt(a, "each "
		    "wrong rank holds a partial sum: contributions computed "
		    "on other ranks never reach it, so the reduction over %s "
		    "runs over too small a group%s", scale_step ?
		    mesh_group_name(scale_step->group) : "dp", dense_expert ?
		    " (expert parameters in the dense buffer are reduced over "
		    "dp, but the tp group's tokens are split over the etp "
		    "groups: they need edp)" : ""), dense_expert ?
		    "give expert parameters their own buffer, reduced over "
		    "edp, whenever etp differs from tp (layout.expert_buffer: "
		    "if-expert-mesh; Megatron cd4afffa64)" :
		    "reduce this gradient over every rank that computes a "
		    "part of it; explain shows which ranks each one misses");
		return;
	}
	if (!pr->consistent)
		add_finding(fl, FINDING_REPLICA_MISMATCH, factor_step ?
		    factor_step->key : KEY__COUNT, pr, "gradient "
		    "synchronization", "dp", "replicas that must hold the "
		    "same gradient disagree", "run gradaudit explain on this "
		    "parameter to see which collective separates them");
	else
		add_finding(fl, FINDING_WRONG_GROUP, factor_step ?
		    factor_step->key : KEY__COUNT, pr, "gradient "
		    "synchronization", "dp", "the used values combine "
		    "contributions of the wrong set of ranks",
		    "run gradaudit explain on this parameter to see which "
		    "collective gathers the wrong ranks");
}

void
sym_audit(const struct sym_context *ctx, struct audit *a,
    sym_step_hook *hook, void *hook_arg)
{
	struct sym_run	 run;
	struct finding_list fl = { a, 0 };
	const struct model *m = &ctx->model;
	int		 l, k;

	memset(a, 0, sizeof *a);
	arena_init(&a->arena);
	a->config = m->config;
	a->mesh = m->mesh;
	atom_space_copy(&a->atoms, &ctx->atoms, &a->arena);

	memset(&run, 0, sizeof run);
	run.ctx = ctx;
	run.model = m;
	run.arena = &a->arena;
	run.stage_ranks = m->mesh.dp * m->mesh.tp;
	init_values(&run);
	init_expected(&run);
	run_plan(&run, hook, hook_arg);

	a->nparams = m->nlogical;
	a->params = arena_alloc(&a->arena, m->nlogical * sizeof *a->params);
	a->consistent = a->correct = true;
	for (l = 0; l < m->nlogical; l++) {
		fill_param(&run, a, l, &a->params[l]);
		a->consistent = a->consistent && a->params[l].consistent;
		a->correct = a->correct && a->params[l].correct;
		for (k = 0; k < m->logical[l].ninstances; k++) {
			run.vals[m->logical[l].instance[k]] = NULL;
			run.expected[m->logical[l].instance[k]] = NULL;
		}
		arena_free(&run.seg_arenas[l]);
	}
	for (l = 0; l < m->nlogical; l++)
		if (!a->params[l].correct || !a->params[l].consistent) {
			struct param_result dw;

			distinct_wrong(&a->params[l], &dw);
			explain_param(&fl, &run, l, &a->params[l], &dw);
			free(dw.cells);
		}
	/* The norm clipping divides by, from the cells just made. */
	gn_audit(ctx, a);
	/* How much each finding matters, from the same cells (issue 23). */
	if (!ctx->no_effects)
		measure_effects(a);
	free(run.vals);
	free(run.expected);
	free(run.issues);
	free(run.coords);
	free(run.atoms);
	free(run.scaled);
	for (k = 0; k < 6; k++)
		free(run.local[k / 3][k % 3]);
	lc_table_free(&run.table);
	free(run.seg_arenas);
}
