/*
 * Grouped cells (cells.h): the cells of a parameter as the reports print
 * them, one object per group of ranks holding the same value, or reading
 * it alike relative to themselves, with each value's pieces as sums over
 * mesh groups (meshsum.h) memoized by value.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/framework.h"
#include "model/lossnorm.h"
#include "report/baseline.h"
#include "report/cells.h"
#include "report/parts.h"
#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/lincomb.h"
#include "symbolic/meshsum.h"

/*
 * Grouped cells (the default): one object per set of ranks holding the
 * same thing, found with a hash table over everything a cell object says
 * but its rank and coordinates.  A 4,096-rank report listed 44,880 cells
 * of up to 4,096 atoms each, 415 MB (issue 10); grouped, a value shared
 * by a dp group is written once, by mesh groups (meshsum.h), and terms
 * relative to the rank ("self") let the ranks whose values differ only by
 * their own atom, such as the unused shards of a distributed optimizer,
 * share one object too.
 */

static uint64_t
mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdULL;
}

static void	index_self(const struct atom_space *, struct piece_memo *);

static size_t
memo_home(const struct piece_cache *pc, const struct lincomb *x)
{
	return (size_t)(mix(0, (uintptr_t)x) & (pc->cap - 1));
}

const struct piece_memo *
cells_pieces_of(struct piece_cache *pc, const struct atom_space *sp,
    const struct lincomb *x)
{
	struct piece_memo	**old, *pm;
	size_t			  k, i, oldcap;

	if (x == NULL)
		return NULL;
	if (pc->used * 2 >= pc->cap) {
		old = pc->slot;
		oldcap = pc->cap;
		pc->cap = oldcap ? 2 * oldcap : 64;
		pc->slot = xcalloc(pc->cap, sizeof *pc->slot);
		for (i = 0; i < oldcap; i++)
			if (old[i] != NULL) {
				for (k = memo_home(pc, old[i]->x);
				    pc->slot[k] != NULL;
				    k = (k + 1) & (pc->cap - 1))
					continue;
				pc->slot[k] = old[i];
			}
		free(old);
	}
	for (k = memo_home(pc, x); pc->slot[k] != NULL;
	    k = (k + 1) & (pc->cap - 1))
		if (pc->slot[k]->x == x)
			return pc->slot[k];
	pm = pc->slot[k] = xcalloc(1, sizeof *pm);
	pm->x = x;
	if (pc->grouper == NULL) {
		pc->grouper = ms_grouper_new(sp);
		pc->own_grouper = true;
	}
	pm->p = ms_grouper_pieces(pc->grouper, x, &pm->n);
	index_self(sp, pm);
	pc->used++;
	return pm;
}

void
cells_piece_cache_free(struct piece_cache *pc)
{
	size_t	 i;

	for (i = 0; i < pc->cap; i++)
		if (pc->slot[i] != NULL) {
			free(pc->slot[i]->p);
			free(pc->slot[i]->self);
			free(pc->slot[i]->masks);
			free(pc->slot[i]);
		}
	free(pc->slot);
	if (pc->own_grouper)
		ms_grouper_free(pc->grouper);
}

/*
 * Piece i's word of its value's hash, as the rank's own ("self": read by
 * its micro-batch, not its atom) or as it is.  A value's hash relative to
 * a rank is the sum of its pieces' words, so it is the hash with no piece
 * self plus, for each of the rank's self pieces, the difference of its
 * two words.
 */
static uint64_t
piece_word(const struct atom_space *sp, const struct ms_piece *p, size_t i,
    bool self)
{
	uint64_t	 h = mix(0x5bd1e995, i);

	h = mix(h, (uint64_t)p->coef.num);
	h = mix(h, (uint64_t)p->coef.den);
	h = mix(h, (uint64_t)p->weighted << 32 |
	    (uint64_t)p->varied << 16 | p->fixed);
	h = mix(h, (uint64_t)p->source << 1 | p->held);
	return mix(h, self ? UINT64_MAX -
	    (uint64_t)atom_micro_batch(sp, p->atom) : p->atom);
}

static int
cmp_self_entry(const void *a, const void *b)
{
	const struct self_entry *x = a, *y = b;

	if (x->mask != y->mask)
		return x->mask < y->mask ? -1 : 1;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->piece > y->piece) - (x->piece < y->piece);
}

static void
index_self(const struct atom_space *sp, struct piece_memo *pm)
{
	struct self_entry *e;
	uint64_t	 sum = 0;
	size_t		 i;

	pm->self = xcalloc(pm->n + 1, sizeof *pm->self);
	pm->masks = xcalloc(pm->n + 1, sizeof *pm->masks);
	for (i = 0; i < pm->n; i++) {
		pm->base += piece_word(sp, &pm->p[i], i, false);
		e = &pm->self[pm->nself];
		if (!ms_piece_self_key(sp, &pm->p[i], &e->mask, &e->key))
			continue;
		e->piece = i;
		/* its own difference, summed below */
		e->sum = piece_word(sp, &pm->p[i], i, true) -
		    piece_word(sp, &pm->p[i], i, false);
		pm->nself++;
	}
	qsort(pm->self, pm->nself, sizeof *pm->self, cmp_self_entry);
	for (i = 0; i < pm->nself; i++) {
		sum += pm->self[i].sum;
		pm->self[i].sum = sum;
		if (i == 0 || pm->self[i].mask != pm->self[i - 1].mask)
			pm->masks[pm->nmasks++] = pm->self[i].mask;
	}
}

/* The first of pm's self entries from `from` on not below want. */
static size_t
self_bound(const struct piece_memo *pm, size_t from,
    const struct self_entry *want)
{
	size_t	 a = from, b = pm->nself, m;

	while (a < b) {
		m = a + (b - a) / 2;
		if (cmp_self_entry(&pm->self[m], want) < 0)
			a = m + 1;
		else
			b = m;
	}
	return a;
}

/*
 * The entries [*lo, *hi) of pm's self pieces under mask with key: no
 * entry has piece SIZE_MAX, so the first not below it is the first above
 * them.
 */
static void
self_range(const struct piece_memo *pm, unsigned mask, uint64_t key,
    size_t *lo, size_t *hi)
{
	struct self_entry want = { mask, key, 0, 0 };

	*lo = self_bound(pm, 0, &want);
	want.piece = SIZE_MAX;
	*hi = self_bound(pm, *lo, &want);
}

static uint64_t
relative_hash(const struct atom_space *sp, const struct piece_memo *pm,
    int rank)
{
	uint64_t	 h;
	size_t		 i, lo, hi;

	if (pm == NULL)
		return 1;
	h = pm->base;
	for (i = 0; rank >= 0 && i < pm->nmasks; i++) {
		self_range(pm, pm->masks[i], ms_rank_key(sp, rank,
		    pm->masks[i]), &lo, &hi);
		if (lo < hi)
			h += pm->self[hi - 1].sum -
			    (lo > 0 ? pm->self[lo - 1].sum : 0);
	}
	return mix(h, pm->n);
}

/*
 * Whether ranks rx and ry have the same pieces of one value self: each
 * piece is self under one mask, for one key of it, so they do when under
 * every mask their keys are one or neither has a piece.
 */
static bool
same_self_pieces(const struct atom_space *sp, const struct piece_memo *pm,
    int rx, int ry)
{
	uint64_t kx, ky;
	size_t	 i, lo, hi;

	for (i = 0; i < pm->nmasks; i++) {
		kx = rx < 0 ? UINT64_MAX : ms_rank_key(sp, rx, pm->masks[i]);
		ky = ry < 0 ? UINT64_MAX : ms_rank_key(sp, ry, pm->masks[i]);
		if (kx == ky)
			continue;
		if (rx >= 0) {
			self_range(pm, pm->masks[i], kx, &lo, &hi);
			if (lo < hi)
				return false;
		}
		if (ry >= 0) {
			self_range(pm, pm->masks[i], ky, &lo, &hi);
			if (lo < hi)
				return false;
		}
	}
	return true;
}

static bool
same_relative(const struct atom_space *sp, const struct piece_memo *x, int rx,
    const struct piece_memo *y, int ry)
{
	const struct ms_piece	*p, *q;
	bool			 selfp, selfq;
	size_t			 i;

	if (x == NULL || y == NULL)
		return x == y;
	if (x == y)
		return rx == ry || same_self_pieces(sp, x, rx, ry);
	if (x->n != y->n)
		return false;
	for (i = 0; i < x->n; i++) {
		p = &x->p[i];
		q = &y->p[i];
		if (!q_equal(p->coef, q->coef) || p->varied != q->varied ||
		    p->fixed != q->fixed || p->n != q->n ||
		    p->weighted != q->weighted || p->source != q->source ||
		    p->held != q->held)
			return false;
		selfp = ms_piece_is_self(sp, p, rx);
		selfq = ms_piece_is_self(sp, q, ry);
		if (selfp != selfq || (!selfp && p->atom != q->atom))
			return false;
		/* Each rank's own atom of the same micro-batch (and class). */
		if (selfp && atom_micro_batch(sp, p->atom) !=
		    atom_micro_batch(sp, q->atom))
			return false;
	}
	return true;
}

static bool
same_bits(double x, double y)
{
	return memcmp(&x, &y, sizeof x) == 0;
}

/* Two cells print the same object, rank and coordinates aside. */
static bool
same_cell(const struct atom_space *sp, const struct cell_key *kx,
    const struct cell_key *ky)
{
	const struct cell	*x = kx->c, *y = ky->c;

	return x->lo == y->lo && x->hi == y->hi && x->used == y->used &&
	    (!x->used || x->ok == y->ok) && x->has_hash == y->has_hash &&
	    (!x->has_hash || (x->hash == y->hash &&
	    x->reference_hash == y->reference_hash &&
	    x->numeric_ok == y->numeric_ok &&
	    same_bits(x->max_ulps, y->max_ulps) &&
	    same_bits(x->max_rel_error, y->max_rel_error))) &&
	    (kx->self >= 0) == (ky->self >= 0) &&
	    same_relative(sp, kx->v, kx->self, ky->v, ky->self) &&
	    same_relative(sp, kx->e, kx->self, ky->e, ky->self);
}

static uint64_t
cell_hash(const struct atom_space *sp, const struct cell_key *key)
{
	const struct cell	*c = key->c;
	uint64_t		 h;

	h = mix(relative_hash(sp, key->v, key->self),
	    relative_hash(sp, key->e, key->self));
	h = mix(mix(h, (uint64_t)c->lo), (uint64_t)c->hi);
	h = mix(h, (uint64_t)c->used << 1 | (uint64_t)(c->used && c->ok));
	if (c->has_hash)
		h = mix(h, c->hash);
	return h;
}

/*
 * Add key to the groups g[0..*ng) through the hash table: to the group
 * of an equal key, or as a new group; return its index.
 */
static size_t
group_add(const struct atom_space *sp, struct cell_group **g, size_t *ng,
    size_t *table, size_t cap, const struct cell_key *key)
{
	size_t	 k;

	for (k = cell_hash(sp, key) & (cap - 1); table[k] != SIZE_MAX;
	    k = (k + 1) & (cap - 1))
		if (same_cell(sp, &(*g)[table[k]].key, key))
			break;
	if (table[k] == SIZE_MAX) {
		*g = xreallocarray(*g, *ng + 1, sizeof **g);
		(*g)[*ng].key = *key;
		(*g)[*ng].ranks = NULL;
		(*g)[*ng].nranks = 0;
		table[k] = (*ng)++;
	}
	(*g)[table[k]].ranks = xreallocarray((*g)[table[k]].ranks,
	    (*g)[table[k]].nranks + 1, sizeof(int));
	(*g)[table[k]].ranks[(*g)[table[k]].nranks++] = key->c->rank;
	return table[k];
}

static int
cmp_int(const void *a, const void *b)
{
	int	 x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Whether every rank of g reads its value alike relative to itself. */
static bool
uniform(const struct atom_space *sp, const struct cell_group *g)
{
	size_t	 i;
	int	 r0 = g->ranks[0];

	for (i = 1; i < g->nranks; i++)
		if (!same_relative(sp, g->key.v, r0, g->key.v, g->ranks[i]) ||
		    !same_relative(sp, g->key.e, r0, g->key.e, g->ranks[i]))
			return false;
	return true;
}

/*
 * The groups of p's cells (only the wrong ones if wrong_only) in order of
 * their first cell; *n: how many.  First the ranks holding the very same
 * value; then those groups whose ranks all read it alike relative to
 * themselves are merged by that reading, "self": the average over each
 * rank's own dp group is one group for the whole mesh, g0/64 on rank 0
 * and g1/64 on rank 1 share one, while (g0+...+g62)/64 on 64 ranks stays
 * one group written by its atoms (g0 is rank 0's own, not rank 1's).
 */
struct cell_group *
cells_group(const struct atom_space *sp, const struct param_result *p,
    struct piece_cache *pc, bool wrong_only, size_t *n)
{
	struct cell_group	*g1 = NULL, *g = NULL;
	struct cell_key		 key;
	size_t			*table, cap = 16, i, j, k, ng1 = 0, ng = 0;

	while (cap < 2 * p->ncells)
		cap *= 2;
	table = xreallocarray(NULL, cap, sizeof *table);
	for (i = 0; i < cap; i++)
		table[i] = SIZE_MAX;
	for (i = 0; i < p->ncells; i++) {
		key.c = &p->cells[i];
		if (wrong_only && !rp_cell_wrong(key.c))
			continue;
		key.v = cells_pieces_of(pc, sp, key.c->value);
		key.e = cells_pieces_of(pc, sp, key.c->expected);
		key.self = -1;
		group_add(sp, &g1, &ng1, table, cap, &key);
	}
	for (i = 0; i < cap; i++)
		table[i] = SIZE_MAX;
	for (i = 0; i < ng1; i++) {
		key = g1[i].key;
		if (!uniform(sp, &g1[i])) {
			g = xreallocarray(g, ng + 1, sizeof *g);
			g[ng++] = g1[i];
			continue;
		}
		key.self = key.c->rank;
		k = group_add(sp, &g, &ng, table, cap, &key);
		g[k].ranks = xreallocarray(g[k].ranks, g[k].nranks +
		    g1[i].nranks - 1, sizeof(int));
		for (j = 1; j < g1[i].nranks; j++)
			g[k].ranks[g[k].nranks++] = g1[i].ranks[j];
		free(g1[i].ranks);
	}
	for (i = 0; i < ng; i++)
		qsort(g[i].ranks, g[i].nranks, sizeof(int), cmp_int);
	free(g1);
	free(table);
	*n = ng;
	return g;
}
