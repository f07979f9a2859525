/*
 * Linear combinations written by mesh groups (meshsum.h).
 *
 * The terms are split by coefficient; within one coefficient, candidate
 * groups are tried from the largest down: a group is the set of ranks
 * whose coordinates outside the summed ones are equal, in the dense view
 * (pp, dp, tp) or the expert one (pp, ep, etp, edp).  Counting the atoms
 * left by their fixed coordinates, a key held by as many atoms as the
 * group has members is the whole group, since atoms are distinct.  The
 * class of an atom (its source, and whether it is held) is part of that
 * key: a group never mixes classes.  The keys are counted in a hash
 * table, so the cost is O(candidates * m) for m terms, after one pass
 * that puts the terms in coefficient order.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L		/* open_memstream */
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/hash.h"
#include "base/xmalloc.h"
#include "symbolic/atom.h"
#include "symbolic/meshsum.h"

static const char *const dim_name[MS__COUNT] = {
	"pp", "dp", "tp", "ep", "etp", "edp", "mb", "src"
};

#define VIEW_DENSE	((1u << MS_PP) | (1u << MS_DP) | (1u << MS_TP) | \
			    (1u << MS_MB) | (1u << MS_SRC))
#define VIEW_EXPERT	((1u << MS_PP) | (1u << MS_EP) | (1u << MS_ETP) | \
			    (1u << MS_EDP) | (1u << MS_MB) | (1u << MS_SRC))

/*
 * An atom's rank coordinates, micro-batch and expert source (0 for an atom
 * not kept per source); -1 for both of a rank.
 */
struct acoord {
	struct coord	 c;
	int		 mb, src;
};

static void
atom_coord(const struct atom_space *sp, uint32_t atom, struct acoord *a)
{
	int	 src = atom_expert_source(sp, atom);

	mesh_coord_of(&sp->mesh, atom_rank(sp, atom), &a->c);
	a->mb = atom_micro_batch(sp, atom);
	a->src = src >= 0 ? src : 0;
}

static void
rank_coord(const struct atom_space *sp, int rank, struct acoord *a)
{
	mesh_coord_of(&sp->mesh, rank, &a->c);
	a->mb = a->src = -1;
}

struct candidate {
	unsigned	 view, varied;
	int64_t		 size;
};

/*
 * The nonempty subsets of each view's coordinates: 31 of the dense view's
 * five and 63 of the expert view's six.  32 overflowed once the
 * micro-batch became a coordinate of both.
 */
#define MAX_CANDIDATES	((1 << 5) - 1 + (1 << 6) - 1)

static int
dim_size(const struct atom_space *sp, int d)
{
	const struct mesh *m = &sp->mesh;
	const int v[MS__COUNT] = { m->pp, m->dp, m->tp, m->ep, m->etp, m->edp,
	    atom_space_micro_batches(sp), atom_space_expert_sources(sp) };

	return v[d] > 0 ? v[d] : 1;
}

static int
dim_coord(const struct acoord *a, int d)
{
	const int v[MS__COUNT] = { a->c.pp, a->c.dp, a->c.tp, a->c.ep,
	    a->c.etp, a->c.edp, a->mb, a->src };

	return v[d];
}

static int
cmp_candidate(const void *pa, const void *pb)
{
	const struct candidate *a = pa, *b = pb;

	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	if (a->view != b->view)
		return a->view == VIEW_DENSE ? -1 : 1;
	return (a->varied > b->varied) - (a->varied < b->varied);
}

/*
 * Every nonempty set of coordinates of size > 1 within a view, largest
 * group first; the dense view first among equals, so that a mesh without
 * experts never speaks of edp.
 */
static size_t
candidates_of(const struct atom_space *sp, struct candidate *out)
{
	static const unsigned views[2] = { VIEW_DENSE, VIEW_EXPERT };
	size_t		 n = 0;
	unsigned	 v, s, big;
	int		 d;

	for (v = 0; v < 2; v++) {
		big = 0;
		for (d = 0; d < MS__COUNT; d++)
			if ((views[v] >> d & 1) && dim_size(sp, d) > 1)
				big |= 1u << d;
		/* The subsets of big, as in the usual (s - 1) & big walk. */
		for (s = big; s != 0; s = (s - 1) & big) {
			if (n == MAX_CANDIDATES)
				fatalx("meshsum: more group candidates than "
				    "the views have subsets");
			out[n].view = views[v];
			out[n].varied = s;
			out[n].size = 1;
			for (d = 0; d < MS__COUNT; d++)
				if (s >> d & 1)
					out[n].size *= dim_size(sp, d);
			n++;
		}
	}
	qsort(out, n, sizeof *out, cmp_candidate);
	return n;
}

/*
 * An atom's class (meshsum.h): its source, one for every expert source,
 * and held or not.  When experts are kept per source those are sources 1
 * to ep, and a block of ep for each multi-token prediction layer
 * (lossnorm.h), so the first source of its block stands for them all.
 */
static int
class_source(const struct atom_space *sp, uint32_t atom)
{
	return atom_source(sp, atom) - (atom_expert_source(sp, atom) >= 0 ?
	    atom_expert_source(sp, atom) : 0);
}

static int64_t
atom_class(const struct atom_space *sp, uint32_t atom)
{
	return (int64_t)class_source(sp, atom) * 2 + atom_is_held(sp, atom);
}

static void
set_class(const struct atom_space *sp, struct ms_piece *p)
{
	p->source = class_source(sp, p->atom);
	p->held = atom_is_held(sp, p->atom);
}

static int
cmp_piece(const void *pa, const void *pb)
{
	const struct ms_piece *a = pa, *b = pb;

	return (a->atom > b->atom) - (a->atom < b->atom);
}

/*
 * On a small mesh, weighted pieces are tried only when the plain ones are
 * long: a few terms read best as they are, the unequal weights being the
 * bug's evidence ("8*(g1+g3)/11+8*(g0+g2)/15", verl #5993).  Short is
 * what the text report prints whole (its EXPR_MAX); above
 * PLAIN_MAX_PIECES pieces the form cannot be short and is not formatted
 * to find out.  Above MS_ATOMS_WORLD ranks they are always tried: a rank's
 * own micro-batches, "g0m5/512+g0m3/576+...", are short but differ from
 * rank to rank, and written so the 4,096-rank JSON report was 61 MB.
 */
#define PLAIN_SHORT		100
#define PLAIN_MAX_PIECES	16

static bool
plain_is_short(const struct atom_space *sp, const struct ms_piece *p, size_t n)
{
	struct arena	 ar;
	bool		 is_short;

	if (n > PLAIN_MAX_PIECES || sp->mesh.world > MS_ATOMS_WORLD)
		return false;
	arena_init(&ar);
	is_short = strlen(ms_format(&ar, sp, p, n, -1)) <= PLAIN_SHORT;
	arena_free(&ar);
	return is_short;
}

/*
 * What grouping needs of the atom space, computed once for a report, not
 * once a value: the candidates, the coordinates' sizes, and the pieces of
 * the values grouped so far.  Computed per value, per bucket and per
 * candidate, with each value's terms sorted twice, they were nearly all
 * of the JSON report's time on Megatron's DeepSeek-V3 shape at 2,048
 * ranks with local MTP counts (Megatron-LM #7452, issue 24).
 */
struct ms_grouper {
	const struct atom_space	*sp;
	int			 size[MS__COUNT];
	int64_t			 nclass;	/* classes: 2 per source */
	struct candidate	 cand[MAX_CANDIDATES];
	size_t			 ncand;
	/*
	 * Each candidate's fixed coordinates of size > 1, the others
	 * adding nothing to its keys.
	 */
	int			 keyed[MAX_CANDIDATES][MS__COUNT];
	int			 nkeyed[MAX_CANDIDATES];
	/*
	 * The pieces of each value grouped so far, by its terms: the
	 * reports hold many values alike in distinct objects (on
	 * Megatron's DeepSeek-V3 shape at 2,048 ranks with local MTP
	 * counts, 71,000 values of 4,200 contents), and a value's pieces
	 * depend on its terms alone.
	 */
	struct grouped		*known;
	size_t			 cap, n;	/* cap: 0 or a power of two */
};

struct grouped {
	const struct lincomb	*value;		/* the first of its terms */
	struct ms_piece		*pieces;
	size_t			 n;
};

/*
 * What grouping one value needs, shared by its plain and weighted passes:
 * each term's coordinates and class, by its index in the value, and
 * scratch room for its largest bucket.
 */
struct grouping {
	const struct ms_grouper	*gr;
	const struct atom_space	*sp;
	int			(*co)[MS__COUNT];	/* per term of x */
	int64_t			*cls;
	struct key_count	*tab;
	size_t			 cap;
	size_t			*alive, *at;
	bool			*dead;
};

/* A term of x with its index there, to find its coordinates. */
struct gterm {
	struct rational	 coef;
	uint32_t	 atom;
	uint32_t	 i;
};

/*
 * The fixed keys of one candidate, counted in an open-addressing table of
 * `cap` slots (a power of two, at least twice the terms): a sort of the
 * terms by key for every candidate was most of the JSON report's time
 * with expert atoms kept per source (Megatron-LM #7452 at 2,048 ranks).
 */
struct key_count {
	int64_t		 key;
	size_t		 count;
	bool		 used, named;
};

static size_t
key_home(int64_t key, size_t cap)
{
	uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 17) & (cap - 1);
}

static struct key_count *
key_find(struct key_count *tab, size_t cap, int64_t key)
{
	size_t	 k;

	for (k = key_home(key, cap); tab[k].used && tab[k].key != key;
	    k = (k + 1) & (cap - 1))
		continue;
	return &tab[k];
}

/*
 * Candidate k's fixed coordinates and the class: equal for a group's
 * members.
 */
static int64_t
fixed_key(const struct ms_grouper *gr, size_t k, const int *co, int64_t cls)
{
	int64_t	 key = 0;
	int	 i, d;

	for (i = 0; i < gr->nkeyed[k]; i++) {
		d = gr->keyed[k][i];
		key = key * gr->size[d] + co[d];
	}
	return key * gr->nclass + cls;
}

struct ms_grouper *
ms_grouper_new(const struct atom_space *sp)
{
	struct ms_grouper *gr = xcalloc(1, sizeof *gr);
	unsigned	 fixed;
	size_t		 k;
	int		 d;

	gr->sp = sp;
	for (d = 0; d < MS__COUNT; d++)
		gr->size[d] = dim_size(sp, d);
	gr->nclass = 2 * (int64_t)atom_space_sources(sp);
	gr->ncand = candidates_of(sp, gr->cand);
	for (k = 0; k < gr->ncand; k++) {
		fixed = gr->cand[k].view & ~gr->cand[k].varied;
		for (d = 0; d < MS__COUNT; d++)
			if ((fixed >> d & 1) && gr->size[d] > 1)
				gr->keyed[k][gr->nkeyed[k]++] = d;
	}
	return gr;
}

void
ms_grouper_free(struct ms_grouper *gr)
{
	size_t	 i;

	if (gr == NULL)
		return;
	for (i = 0; i < gr->cap; i++)
		free(gr->known[i].pieces);
	free(gr->known);
	free(gr);
}

/* The slot of x's terms among the values grouped, or the empty one. */
static size_t
known_slot(const struct ms_grouper *gr, const struct lincomb *x)
{
	size_t	 i;

	for (i = lc_hash32(x) & (gr->cap - 1); gr->known[i].value != NULL &&
	    !lc_equal(gr->known[i].value, x); i = (i + 1) & (gr->cap - 1))
		continue;
	return i;
}

static void
known_grow(struct ms_grouper *gr)
{
	struct grouped	*old = gr->known;
	size_t		 oldcap = gr->cap, i;

	gr->cap = oldcap ? 2 * oldcap : 256;
	gr->known = xcalloc(gr->cap, sizeof *gr->known);
	for (i = 0; i < oldcap; i++)
		if (old[i].value != NULL)
			gr->known[known_slot(gr, old[i].value)] = old[i];
	free(old);
}

static void
grouping_init(struct grouping *g, const struct ms_grouper *gr,
    const struct lincomb *x)
{
	const struct atom_space *sp = gr->sp;
	struct acoord	 a;
	size_t		 i, nt = x->nterms;
	int		 d;

	g->gr = gr;
	g->sp = sp;
	g->co = xreallocarray(NULL, nt, sizeof *g->co);
	g->cls = xreallocarray(NULL, nt, sizeof *g->cls);
	for (i = 0; i < nt; i++) {
		atom_coord(sp, x->terms[i].atom, &a);
		for (d = 0; d < MS__COUNT; d++)
			g->co[i][d] = dim_coord(&a, d);
		g->cls[i] = atom_class(sp, x->terms[i].atom);
	}
	for (g->cap = 16; g->cap < 2 * nt; g->cap *= 2)
		continue;
	g->tab = xcalloc(g->cap, sizeof *g->tab);
	g->alive = xreallocarray(NULL, nt, sizeof *g->alive);
	g->at = xreallocarray(NULL, nt, sizeof *g->at);
	g->dead = xcalloc(nt, sizeof *g->dead);
}

static void
grouping_free(struct grouping *g)
{
	free(g->dead);
	free(g->at);
	free(g->alive);
	free(g->tab);
	free(g->cls);
	free(g->co);
}

/*
 * The pieces of m terms t[] sharing one coefficient, appended to out.
 * The table is left empty and every term alive for the next bucket.
 */
static size_t
bucket_pieces(struct grouping *g, const struct gterm *t, size_t nt,
    struct ms_piece *out)
{
	const struct candidate *cand = g->gr->cand;
	struct key_count *tab = g->tab, *e;
	bool		*dead = g->dead;
	int64_t		 key;
	size_t		*alive = g->alive, *at = g->at, cap = g->cap;
	size_t		 a, i, k, na = nt, m, n = 0;

	/*
	 * Alive and dead are by position in t[]; each candidate's work is
	 * over the terms still alive alone.
	 */
	for (i = 0; i < nt; i++)
		alive[i] = i;
	for (k = 0; k < g->gr->ncand && na > 1; k++) {
		unsigned fixed = cand[k].view & ~cand[k].varied;

		if (cand[k].size > (int64_t)na)
			continue;
		for (a = 0; a < na; a++) {
			i = alive[a];
			key = fixed_key(g->gr, k, g->co[t[i].i],
			    g->cls[t[i].i]);
			e = key_find(tab, cap, key);
			e->used = true;
			e->key = key;
			e->count++;
			at[i] = (size_t)(e - tab);
		}
		/*
		 * A key of exactly the candidate's size is a piece, named
		 * by its first term (the pieces are sorted by atom below).
		 */
		for (a = 0; a < na; a++) {
			i = alive[a];
			e = &tab[at[i]];
			if (e->count != (size_t)cand[k].size)
				continue;
			if (!e->named) {
				e->named = true;
				out[n].coef = t[0].coef;
				out[n].atom = t[i].atom;
				out[n].n = (uint32_t)cand[k].size;
				out[n].varied = cand[k].varied;
				out[n].fixed = fixed;
				set_class(g->sp, &out[n]);
				n++;
			}
			dead[i] = true;
		}
		/* Empty the table where this candidate wrote, keep the rest. */
		for (a = m = 0; a < na; a++) {
			i = alive[a];
			memset(&tab[at[i]], 0, sizeof *tab);
			if (!dead[i])
				alive[m++] = i;
		}
		na = m;
	}
	for (a = 0; a < na; a++) {
		i = alive[a];
		out[n].coef = t[i].coef;
		out[n].atom = t[i].atom;
		out[n].n = 1;
		out[n].varied = out[n].fixed = 0;
		set_class(g->sp, &out[n]);
		n++;
	}
	for (i = 0; i < nt; i++)
		dead[i] = false;
	if (n > 1)
		qsort(out, n, sizeof *out, cmp_piece);
	return n;
}

/*
 * A distinct coefficient of a value and where its terms go: its slots in
 * a table of g->cap (at least twice the terms), then in a list sorted
 * decreasing.
 */
struct coef_run {
	struct rational	 coef;
	size_t		 count, next;
	bool		 used;
};

static size_t
coef_home(struct rational q, size_t cap)
{
	uint64_t h = (uint64_t)q.num * 0x9e3779b97f4a7c15ULL ^
	    (uint64_t)q.den * 0xff51afd7ed558ccdULL;

	return (size_t)(h >> 17) & (cap - 1);
}

/* Larger coefficients first, as lc_cmp_format_order orders terms. */
static int
cmp_coef_run(const void *pa, const void *pb)
{
	const struct coef_run	*a = pa, *b = pb;

	return q_cmp(b->coef, a->coef);
}

/*
 * t[] (in atom order, as a value's terms are) into the order of
 * lc_cmp_format_order: decreasing coefficient, by atom within one.  The
 * terms are counted by coefficient and placed in one pass, keeping their
 * atom order; only the distinct coefficients are sorted.
 */
static void
format_order(const struct grouping *g, struct gterm *t, size_t nt)
{
	struct coef_run	*tab, *runs;
	struct gterm	*sorted;
	size_t		*slot, i, k, nr = 0, cap = g->cap;

	tab = xcalloc(cap, sizeof *tab);
	slot = xreallocarray(NULL, nt, sizeof *slot);
	for (i = 0; i < nt; i++) {
		for (k = coef_home(t[i].coef, cap); tab[k].used &&
		    !q_equal(tab[k].coef, t[i].coef); k = (k + 1) & (cap - 1))
			continue;
		if (!tab[k].used) {
			tab[k].used = true;
			tab[k].coef = t[i].coef;
			nr++;
		}
		tab[k].count++;
		slot[i] = k;
	}
	runs = xreallocarray(NULL, nr, sizeof *runs);
	for (k = nr = 0; k < cap; k++)
		if (tab[k].used)
			runs[nr++] = tab[k];
	qsort(runs, nr, sizeof *runs, cmp_coef_run);
	/* Each run's first position, written back into its slot. */
	for (k = i = 0; k < nr; i += runs[k].count, k++) {
		size_t j = coef_home(runs[k].coef, cap);

		while (!q_equal(tab[j].coef, runs[k].coef))
			j = (j + 1) & (cap - 1);
		tab[j].next = i;
	}
	sorted = xreallocarray(NULL, nt, sizeof *sorted);
	for (i = 0; i < nt; i++)
		sorted[tab[slot[i]].next++] = t[i];
	memcpy(t, sorted, nt * sizeof *t);
	free(sorted);
	free(runs);
	free(slot);
	free(tab);
}

/*
 * The pieces of the nt terms t[] (in atom order; left in format order),
 * sorted by lc_cmp_format_order.
 */
static size_t
group_terms(struct grouping *g, struct gterm *t, size_t nt,
    struct ms_piece *out)
{
	size_t	 i, j, n = 0;

	format_order(g, t, nt);
	for (i = 0; i < nt; i = j) {
		for (j = i + 1; j < nt && q_equal(t[j].coef, t[i].coef); j++)
			continue;
		n += bucket_pieces(g, t + i, j - i, out + n);
	}
	return n;
}

/*
 * The pieces of x with every coefficient divided by its atom's loss
 * factor (where atom_weighs says so), into out; a group so found is a
 * weighted piece, and a single atom gets its own coefficient back.
 * Returns their number.
 */
static size_t
weighted_pieces(struct grouping *g, const struct lincomb *x,
    struct ms_piece *out)
{
	const struct atom_space *sp = g->sp;
	struct gterm	*w;
	struct rational	 f;
	size_t		 i, n, nt = x->nterms;

	w = xreallocarray(NULL, nt, sizeof *w);
	for (i = 0; i < nt; i++) {
		w[i].atom = x->terms[i].atom;
		w[i].i = (uint32_t)i;
		w[i].coef = atom_weight(sp, w[i].atom, &f) ?
		    q_div(x->terms[i].coef, f) : x->terms[i].coef;
	}
	n = group_terms(g, w, nt, out);
	free(w);
	for (i = 0; i < n; i++) {
		if (!atom_weight(sp, out[i].atom, &f))
			continue;
		if (out[i].n > 1)
			out[i].weighted = true;
		else
			out[i].coef = q_mul(out[i].coef, f);
	}
	return n;
}

struct ms_piece *
ms_pieces(const struct atom_space *sp, const struct lincomb *x, size_t *np)
{
	struct ms_grouper *gr;
	struct ms_piece	*p;

	*np = 0;
	if (x->nterms == 0)
		return NULL;
	gr = ms_grouper_new(sp);
	p = ms_grouper_pieces(gr, x, np);
	ms_grouper_free(gr);
	return p;
}

static struct ms_piece *group_value(struct ms_grouper *,
		    const struct lincomb *, size_t *);

const struct ms_piece *
ms_grouper_find(struct ms_grouper *gr, const struct lincomb *x, size_t *np)
{
	struct grouped	*e;

	*np = 0;
	if (x->nterms == 0)
		return NULL;
	if (2 * (gr->n + 1) > gr->cap)
		known_grow(gr);
	e = &gr->known[known_slot(gr, x)];
	if (e->value == NULL) {
		e->value = x;
		e->pieces = group_value(gr, x, &e->n);
		gr->n++;
	}
	*np = e->n;
	return e->pieces;
}

struct ms_piece *
ms_grouper_pieces(struct ms_grouper *gr, const struct lincomb *x, size_t *np)
{
	const struct ms_piece *e = ms_grouper_find(gr, x, np);
	struct ms_piece	*p;

	if (*np == 0)
		return NULL;
	p = xreallocarray(NULL, *np, sizeof *p);
	memcpy(p, e, *np * sizeof *p);
	return p;
}

static struct ms_piece *
group_value(struct ms_grouper *gr, const struct lincomb *x, size_t *np)
{
	const struct atom_space *sp = gr->sp;
	struct grouping	 g;
	struct ms_piece	*out, *wout;
	struct gterm	*t;
	size_t		 i, nt = x->nterms, n, nw;

	*np = 0;
	if (nt == 0)
		return NULL;
	grouping_init(&g, gr, x);
	t = xreallocarray(NULL, nt, sizeof *t);
	for (i = 0; i < nt; i++) {
		t[i].coef = x->terms[i].coef;
		t[i].atom = x->terms[i].atom;
		t[i].i = (uint32_t)i;
	}
	out = xcalloc(nt, sizeof *out);
	n = group_terms(&g, t, nt, out);
	free(t);
	if (n > 1 && atom_space_weighted(sp) && !plain_is_short(sp, out, n)) {
		wout = xcalloc(nt, sizeof *wout);
		nw = weighted_pieces(&g, x, wout);
		if (nw < n) {
			free(out);
			out = wout;
			n = nw;
		} else
			free(wout);
	}
	grouping_free(&g);
	*np = n;
	return out;
}

/* Append "name" of each dimension in bits, joined by sep. */
static void
put_dims(char *buf, size_t len, unsigned bits, const char *sep)
{
	size_t	 off = 0;
	int	 d;

	if (len > 0)
		buf[0] = '\0';
	for (d = 0; d < MS__COUNT && off < len; d++)
		if (bits >> d & 1)
			off += (size_t)snprintf(buf + off, len - off, "%s%s",
			    off > 0 ? sep : "", dim_name[d]);
}

void
ms_piece_sum(const struct ms_piece *p, char *buf, size_t len)
{
	put_dims(buf, len, p->varied, " ");
}

/*
 * The class of a group's atoms as words after its coordinates, each as the
 * atoms' names mark it (atom_name): "a" for the auxiliary losses ("ad"
 * with the dp group's counts), "t2" for
 * multi-token prediction layer 2, "held" for held atoms.  Expert atoms kept
 * per source need none: "src" is among the coordinates summed or fixed.
 */
static size_t
put_class(const struct atom_space *sp, const struct ms_piece *p, char *buf,
    size_t len, size_t off, const char *sep)
{
	char	 w[2][24];
	int	 nw = 0, i;

	if (p->source > 0 && p->source == atom_space_aux_source(sp))
		snprintf(w[nw++], sizeof w[0], "%s", sp->aux_global ? "ad" :
		    "a");
	else if (atom_mtp_layer(sp, p->atom) > 0)
		snprintf(w[nw++], sizeof w[0], "t%d",
		    atom_mtp_layer(sp, p->atom));
	if (p->held)
		snprintf(w[nw++], sizeof w[0], "held");
	for (i = 0; i < nw && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    off > 0 ? sep : "", w[i]);
	return off;
}

/*
 * Whether a coordinate of size > 1 says something of the piece: "src"
 * only of expert atoms kept per source, the others being its 0.
 */
static bool
dim_shown(const struct atom_space *sp, const struct ms_piece *p, int d)
{
	if (dim_size(sp, d) == 1)
		return false;
	return d != MS_SRC || atom_expert_source(sp, p->atom) >= 0;
}

/* Whether the piece holds some coordinate of size > 1 fixed. */
static bool
fixes_some(const struct atom_space *sp, const struct ms_piece *p)
{
	int	 d;

	for (d = 0; d < MS__COUNT; d++)
		if ((p->fixed >> d & 1) && dim_shown(sp, p, d))
			return true;
	return false;
}

/* The fixed coordinates of size > 1 and the class; "" for the world. */
static void
put_fixed(const struct atom_space *sp, const struct ms_piece *p, char *buf,
    size_t len, const char *sep, bool self)
{
	struct acoord	 c;
	size_t		 off = 0;
	int		 d;

	if (len > 0)
		buf[0] = '\0';
	if (self)
		off = (size_t)snprintf(buf, len, "self");
	else {
		atom_coord(sp, p->atom, &c);
		for (d = 0; d < MS__COUNT && off < len; d++)
			if ((p->fixed >> d & 1) && dim_shown(sp, p, d))
				off += (size_t)snprintf(buf + off, len - off,
				    "%s%s%d", off > 0 ? sep : "", dim_name[d],
				    dim_coord(&c, d));
	}
	if (off < len)
		put_class(sp, p, buf, len, off, sep);
}

/*
 * A key of the coordinates of mask (bits of enum ms_dim), mixed radix by
 * the coordinates' sizes: pp, dp and tp multiply to at most the world,
 * ep, etp and edp too, so 64 bits hold it.
 */
static uint64_t
coord_key(const struct atom_space *sp, const struct acoord *a, unsigned mask)
{
	uint64_t k = 0;
	int	 d;

	for (d = 0; d < MS__COUNT; d++)
		if (mask >> d & 1)
			k = k * (uint64_t)dim_size(sp, d) +
			    (uint64_t)dim_coord(a, d);
	return k;
}

bool
ms_piece_self_key(const struct atom_space *sp, const struct ms_piece *p,
    unsigned *mask, uint64_t *key)
{
	struct acoord	 a;
	int		 d;

	/*
	 * A lone expert atom kept per source is no rank's own: its name
	 * says its source by rank ("g2s3t1", rank 3's tokens), while self
	 * keys and the cells' relative hashes read an atom by micro-batch
	 * alone.  Taken as self ("selfs3t1"), the unused shards of ranks 0
	 * and 2 under a distributed optimizer, one holding sources 0 and 1
	 * and the other 2 and 3 at equal factors, merged into one object
	 * that named rank 0's sources for rank 2 (self-terms.test).
	 */
	if (p->varied == 0) {
		if (p->held || atom_expert_source(sp, p->atom) >= 0 ||
		    !(p->source == 0 ||
		    p->source == atom_space_aux_source(sp) ||
		    atom_mtp_layer(sp, p->atom) > 0))
			return false;
		*mask = MS_SELF_RANK;
		*key = (uint64_t)atom_rank(sp, p->atom);
		return true;
	}
	*mask = 0;
	for (d = 0; d < MS__COUNT; d++)
		if ((p->fixed >> d & 1) && dim_shown(sp, p, d))
			*mask |= 1u << d;
	/*
	 * The whole world is everyone's: written as it is, sum_all().  A
	 * rank has no micro-batch or source of its own.
	 */
	if (*mask == 0 || (*mask & (1u << MS_MB | 1u << MS_SRC)) != 0)
		return false;
	atom_coord(sp, p->atom, &a);
	*key = coord_key(sp, &a, *mask);
	return true;
}

uint64_t
ms_rank_key(const struct atom_space *sp, int rank, unsigned mask)
{
	struct acoord	 r;

	if (mask == MS_SELF_RANK)
		return (uint64_t)rank;
	rank_coord(sp, rank, &r);
	return coord_key(sp, &r, mask);
}

bool
ms_piece_is_self(const struct atom_space *sp, const struct ms_piece *p,
    int rank)
{
	unsigned mask;
	uint64_t key;

	return rank >= 0 && ms_piece_self_key(sp, p, &mask, &key) &&
	    ms_rank_key(sp, rank, mask) == key;
}

bool
ms_piece_has(const struct atom_space *sp, const struct ms_piece *p,
    uint32_t atom)
{
	struct acoord	 a, b;
	int		 d;

	if (p->varied == 0)
		return p->atom == atom;
	if (class_source(sp, atom) != p->source ||
	    atom_is_held(sp, atom) != p->held)
		return false;
	atom_coord(sp, p->atom, &a);
	atom_coord(sp, atom, &b);
	for (d = 0; d < MS__COUNT; d++)
		if ((p->fixed >> d & 1) && dim_coord(&a, d) != dim_coord(&b, d))
			return false;
	return true;
}

/*
 * A rank's own atom relative to it: "self", or with the rest of its name
 * when the rank has several ("selft1m3" for its micro-batch 3 of
 * multi-token prediction layer 1), so that the ranks of a cell group read
 * the same words however many sources and micro-batches there are.
 */
static void
put_self_atom(const struct atom_space *sp, const struct ms_piece *p,
    char *buf, size_t len)
{
	char	 name[ATOM_NAME_SIZE];
	size_t	 i = 1;

	atom_name(sp, name, sizeof name, "g", p->atom);
	while (name[i] >= '0' && name[i] <= '9')
		i++;
	snprintf(buf, len, "self%s", name + i);
}

void
ms_piece_of(const struct atom_space *sp, const struct ms_piece *p, int rank,
    char *buf, size_t len)
{
	if (p->varied == 0) {
		if (ms_piece_is_self(sp, p, rank))
			put_self_atom(sp, p, buf, len);
		else
			atom_name(sp, buf, len, "g", p->atom);
	} else
		put_fixed(sp, p, buf, len, " ", ms_piece_is_self(sp, p, rank));
}

void
ms_piece_name(const struct atom_space *sp, const struct ms_piece *p, int rank,
    char *buf, size_t len)
{
	char	 sum[32], of[64];
	bool	 self = ms_piece_is_self(sp, p, rank);

	if (p->varied == 0) {
		if (self)
			put_self_atom(sp, p, buf, len);
		else
			atom_name(sp, buf, len, "g", p->atom);
		return;
	}
	put_fixed(sp, p, of, sizeof of, ",", self);
	if (!self && !fixes_some(sp, p)) {
		/* No coordinate fixed: the whole world, of this class. */
		snprintf(buf, len, "%ssum_all(%s)", p->weighted ? "w" : "", of);
		return;
	}
	put_dims(sum, sizeof sum, p->varied, "_");
	snprintf(buf, len, "%ssum_%s(%s)", p->weighted ? "w" : "", sum, of);
}

const char *
ms_format(struct arena *a, const struct atom_space *sp,
    const struct ms_piece *p, size_t n, int rank)
{
	char		*buf = NULL, name[128];
	size_t		 len = 0, i, j, k;
	FILE		*fp;
	int64_t		 num;
	const char	*s;

	if (n == 0)
		return arena_strdup(a, "0");
	if ((fp = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && q_equal(p[j].coef, p[i].coef); j++)
			continue;
		num = p[i].coef.num;
		if (num < 0)
			putc('-', fp);
		else if (i > 0)
			putc('+', fp);
		if (num < 0)
			num = -num;
		if (num != 1)
			fprintf(fp, "%lld*", (long long)num);
		if (j - i > 1 && (p[i].coef.den != 1 || num != 1))
			putc('(', fp);
		for (k = i; k < j; k++) {
			ms_piece_name(sp, &p[k], rank, name, sizeof name);
			fprintf(fp, "%s%s", k > i ? "+" : "", name);
		}
		if (j - i > 1 && (p[i].coef.den != 1 || num != 1))
			putc(')', fp);
		if (p[i].coef.den != 1)
			fprintf(fp, "/%lld", (long long)p[i].coef.den);
	}
	if (fclose(fp) != 0)
		fatal("open_memstream");
	s = arena_strdup(a, buf);
	free(buf);
	return s;
}
