/*
 * The verdicts of a symbolic audit: each rank's segments of a parameter
 * cut at the boundaries of the ranges it uses (and where a word
 * embedding's padded rows begin), each cell compared with its expected
 * value, and whether the used copies agree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/hash.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "model/syncplan.h"
#include "symbolic/cells.h"
#include "symbolic/lincomb.h"
#include "symbolic/run.h"

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

/* The elements of a rank's shard of a vocab-parallel param below vocab. */
static int64_t
vocab_real_elems(const struct sym_run *run, const struct param *p, int rank)
{
	int64_t		 rows = p->local_shape[0], real;
	struct coord	 c;

	run_coord(run, rank, &c);
	real = run->model->config->model.vocab - (int64_t)c.tp * rows;
	if (real < 0)
		real = 0;
	if (real > rows)
		real = rows;
	return real * p->local_shape[1];
}

/*
 * Where the padded rows of a word embedding begin in a rank's shard of
 * param (an instance of it, or the tied output layer); local_elems for
 * any other parameter.
 */
static int64_t
padded_from(const struct sym_run *run, int param, int rank)
{
	const struct model		*m = run->model;
	const struct param		*p = &m->params[param];
	const struct logical_param	*l = &m->logical[p->logical];

	if (m->params[l->instance[0]].role != ROLE_EMBEDDING)
		return p->local_elems;
	return vocab_real_elems(run, p, rank);
}

/*
 * Where the auxiliary losses' atoms of a word embedding are zero in a
 * rank's shard: they reach it through its lookups alone (issue 25: the
 * output layer follows every router), so from its padded rows on, even
 * where one instance is the output layer too.  local_elems elsewhere.
 */
static int64_t
aux_zero_from(const struct sym_run *run, int param, int rank)
{
	const struct model	*m = run->model;
	const struct param	*p = &m->params[param];

	if (p->role != ROLE_EMBEDDING || !model_has_aux(m, p))
		return p->local_elems;
	return vocab_real_elems(run, p, rank);
}

/*
 * The derivations a cell's value may go through, the memo's tags: a
 * padded-rows value is tagged with the first atom it keeps (padded_rows_
 * value: any uint32_t), the stripping of the auxiliary atoms above them.
 */
#define DERIVED_WITHOUT_AUX	((uint64_t)1 << 32)

static bool
derived_find(struct derived_memo *dm, const struct lincomb *x, uint64_t how,
    size_t *slot)
{
	uint64_t	 key[2] = { (uintptr_t)x, how };
	size_t		 j;

	for (j = hash_bytes(key, sizeof key) & (dm->cap - 1); dm->in[j] !=
	    NULL; j = (j + 1) & (dm->cap - 1))
		if (dm->in[j] == x && dm->how[j] == how) {
			*slot = j;
			return true;
		}
	*slot = j;
	return false;
}

static void
derived_grow(struct derived_memo *dm)
{
	struct derived_memo old = *dm;
	size_t	 i, j;

	dm->cap = old.cap ? 2 * old.cap : 256;
	dm->in = xcalloc(dm->cap, sizeof *dm->in);
	dm->out = xcalloc(dm->cap, sizeof *dm->out);
	dm->how = xcalloc(dm->cap, sizeof *dm->how);
	for (i = 0; i < old.cap; i++) {
		if (old.in[i] == NULL)
			continue;
		(void)derived_find(dm, old.in[i], old.how[i], &j);
		dm->in[j] = old.in[i];
		dm->out[j] = old.out[i];
		dm->how[j] = old.how[i];
	}
	free(old.in);
	free(old.out);
	free(old.how);
}

/* The value derived from x before, or NULL (*slot: where it goes). */
static const struct lincomb *
derived_get(struct sym_run *run, const struct lincomb *x, uint64_t how,
    size_t *slot)
{
	struct derived_memo *dm = &run->derived;

	if (2 * (dm->n + 1) > dm->cap)
		derived_grow(dm);
	return derived_find(dm, x, how, slot) ? dm->out[*slot] : NULL;
}

static const struct lincomb *
derived_put(struct sym_run *run, const struct lincomb *x, uint64_t how,
    size_t slot, const struct lincomb *y)
{
	struct derived_memo *dm = &run->derived;

	dm->in[slot] = x;
	dm->how[slot] = how;
	dm->out[slot] = y;
	dm->n++;
	return y;
}

/* x without the auxiliary losses' atoms, derived once per value. */
static const struct lincomb *
without_aux(struct sym_run *run, const struct lincomb *x)
{
	const struct lincomb *y;
	size_t	 slot;

	if ((y = derived_get(run, x, DERIVED_WITHOUT_AUX, &slot)) != NULL)
		return y;
	return derived_put(run, x, DERIVED_WITHOUT_AUX, slot,
	    lc_without_source(run->arena, &run->ctx->atoms, x,
	    run->model->loss.aux_source));
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
 * What a word embedding's padded rows hold of x, a value (or the expected
 * value) of a rank's shard of param.  Token ids stay below model.vocab, so
 * no lookup reaches them: only the output layer's gradient does (model.c:
 * the padded logits are in the loss).  So the atoms of the ranks that only
 * look the rows up are zero there: those of the embedding's own stage
 * (below stage_ranks) when the output layer is a second instance on the
 * last, all of them when no instance is an output layer (an untied
 * embedding, the MTP layers' copy of it), none when one instance serves
 * both (tied, one stage).  And a held atom is its plain one there: the two
 * differ only by what came back through a lossy boundary (atom.h), which
 * reaches an embedding through its lookups alone, the output layer
 * following every block.
 */
static const struct lincomb *
padded_rows_value(struct sym_run *run, int param, const struct lincomb *x)
{
	const struct model		*m = run->model;
	const struct logical_param	*l = &m->logical[m->params[param].logical];
	const struct atom_space		*sp = &run->ctx->atoms;
	const struct lincomb		*y;
	uint32_t			 from;
	size_t				 slot;

	if (l->tied_with != NULL && l->ninstances == 1)
		from = 0;
	else if (lookup_only(m, param))
		from = UINT32_MAX;
	else
		from = atom_id(sp, run->stage_ranks, 0, 0);
	if ((y = derived_get(run, x, from, &slot)) != NULL)
		return y;
	y = lc_plain(run->arena, sp, lc_from_atom(run->arena, sp, x, from));
	/* Unchanged, it stays the one shared combination. */
	return derived_put(run, x, from, slot, y == x || lc_equal(y, x) ? x :
	    y);
}

/*
 * Split a rank's segments at the boundaries of the ranges it uses, and
 * where a word embedding's padded rows begin if they hold another value
 * (or expected value) than the rows before them.
 */
static void
emit_cells(struct sym_run *run, struct cell_list *cl, int param, int rank)
{
	const struct model *m = run->model;
	const struct seglist *sl = run_values_of(run, param, rank);
	const struct lincomb *expected = sym_expected(run, param, rank);
	const struct lincomb *padded_expected = expected, *padded_value;
	int64_t	 used[16][2], padded = padded_from(run, param, rank);
	int64_t	 aux_padded = aux_zero_from(run, param, rank);
	int	 nused, i, r, key = run_shard_key(run, &m->params[param], rank);

	nused = syncplan_used_ranges(m, &run->ctx->layout, param, rank, used,
	    16);
	if (padded < m->params[param].local_elems)
		padded_expected = padded_rows_value(run, param, expected);
	for (i = 0; i < sl->n; i++) {
		int64_t lo = sl->v[i].lo, hi = sl->v[i].hi;
		bool	cut;

		padded_value = hi > padded ? padded_rows_value(run, param,
		    sl->v[i].value) : sl->v[i].value;
		cut = padded_value != sl->v[i].value ||
		    padded_expected != expected;

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
			if (cut && lo < padded && padded < end)
				end = padded;
			if (lo < aux_padded && aux_padded < end)
				end = aux_padded;
			struct cell *ce = cell_add(cl);

			cl->key[cl->n - 1] = key;
			ce->rank = rank;
			ce->lo = lo;
			ce->hi = end;
			ce->used = inside;
			ce->value = sl->v[i].value;
			ce->expected = expected;
			if (lo >= padded) {
				ce->value = padded_value;
				ce->expected = padded_expected;
			}
			if (lo >= aux_padded) {
				ce->value = without_aux(run, ce->value);
				ce->expected = without_aux(run, ce->expected);
			}
			ce->ok = inside && run_same_value(run, ce->value,
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
		qsort(cuts, ncuts, sizeof *cuts, run_cmp_i64);
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

void
cells_fill_param(struct sym_run *run, struct audit *a, int l,
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
