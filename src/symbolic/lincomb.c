/*
 * The immutable linear combinations of lincomb.h, over the exact
 * rationals of rational.h.
 *
 * lc_sum() is on the hot path of the symbolic audit (an all-reduce over a
 * group of n ranks sums n combinations, for every parameter and every group
 * of a 16,384-rank mesh), so it has fast paths for the two shapes that
 * dominate: n copies of one combination (after an earlier all-reduce every
 * member points at the same lincomb) and inputs over disjoint ranges of
 * atoms.  Otherwise atoms that fill their range are accumulated densely,
 * and only sparse inputs take a k-way heap merge, O(T log n) for T terms.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "symbolic/lincomb.h"

const struct lincomb lincomb_zero = { 0 };

/* Inputs and terms that fit here need no heap allocation in lc_sum(). */
#define LC_STACK_INPUTS	64
#define LC_STACK_TERMS	256

/*
 * Allocation of combinations.
 */

static struct lincomb *
lc_alloc(struct arena *a, size_t nterms)
{
	struct lincomb	*x;

	if (nterms > UINT32_MAX ||
	    nterms > (SIZE_MAX - sizeof(*x)) / sizeof(struct term))
		fatalx("linear combination of %zu terms is too large", nterms);
	x = arena_alloc(a, sizeof(*x) + nterms * sizeof(struct term));
	x->nterms = (uint32_t)nterms;
	return x;
}

/* Copy n finished terms (sorted, no zeros) into the arena. */
static const struct lincomb *
lc_from_terms(struct arena *a, const struct term *t, size_t n)
{
	struct lincomb	*x;

	if (n == 0)
		return &lincomb_zero;
	x = lc_alloc(a, n);
	memcpy(x->terms, t, n * sizeof(*t));
	return x;
}

/* A scratch array of n terms: the caller's stack buffer when it fits. */
static struct term *
scratch_terms(struct term *stack, size_t stack_len, size_t n)
{
	if (n <= stack_len)
		return stack;
	return xreallocarray(NULL, n, sizeof(struct term));
}

static void
scratch_free(struct term *t, struct term *stack)
{
	if (t != stack)
		free(t);
}

/*
 * Scale n terms in place (s != 0, so no term becomes zero).  Neighbouring
 * terms usually share a coefficient (a group average gives every atom the
 * same 1/n), so the last product is reused instead of recomputed: two
 * comparisons instead of two gcds per term.
 */
static void
scale_terms(struct term *t, size_t n, struct rational s)
{
	struct rational	 in = { 0, 1 }, out = { 0, 1 };
	size_t		 i;

	if (q_is_one(s))
		return;
	for (i = 0; i < n; i++) {
		if (!q_equal(t[i].coef, in)) {
			in = t[i].coef;
			out = q_mul(in, s);
		}
		t[i].coef = out;
	}
}

const struct lincomb *
lc_atom(struct arena *a, uint32_t atom)
{
	struct lincomb	*x;

	x = lc_alloc(a, 1);
	x->terms[0].atom = atom;
	x->terms[0].coef.num = 1;
	x->terms[0].coef.den = 1;
	return x;
}

static int
cmp_term_atom(const void *pa, const void *pb)
{
	const struct term *x = pa, *y = pb;

	return x->atom < y->atom ? -1 : x->atom > y->atom;
}

const struct lincomb *
lc_terms(struct arena *a, struct term *t, size_t n)
{
	size_t	 i, k = 0;

	for (i = 1; i < n && t[i - 1].atom <= t[i].atom; i++)
		;
	if (i < n)
		qsort(t, n, sizeof(*t), cmp_term_atom);
	for (i = 0; i < n; i++) {
		if (k > 0 && t[k - 1].atom == t[i].atom) {
			t[k - 1].coef = q_add(t[k - 1].coef, t[i].coef);
			continue;
		}
		/* A sum that cancelled is overwritten, not kept. */
		if (k > 0 && q_is_zero(t[k - 1].coef))
			k--;
		t[k++] = t[i];
	}
	if (k > 0 && q_is_zero(t[k - 1].coef))
		k--;
	return lc_from_terms(a, t, k);
}

const struct lincomb *
lc_atoms(struct arena *a, const uint32_t *atoms, size_t n,
    struct rational coef)
{
	struct lincomb	*x;
	size_t		 i, k = 0;

	if (n == 0 || q_is_zero(coef))
		return &lincomb_zero;
	for (i = 0; i < n; i++) {
		if (i > 0 && atoms[i] < atoms[i - 1])
			fatalx("lc_atoms: atoms out of order");
		k += i == 0 || atoms[i] != atoms[i - 1];
	}
	x = lc_alloc(a, k);
	for (i = 0, k = 0; i < n; i++) {
		if (i > 0 && atoms[i] == atoms[i - 1])
			continue;
		x->terms[k].atom = atoms[i];
		x->terms[k++].coef = coef;
	}
	return x;
}

const struct lincomb *
lc_scale(struct arena *a, const struct lincomb *x, struct rational s)
{
	struct lincomb	*y;

	if (q_is_one(s) || x->nterms == 0)
		return x;
	if (q_is_zero(s))
		return &lincomb_zero;
	y = lc_alloc(a, x->nterms);
	memcpy(y->terms, x->terms, x->nterms * sizeof(struct term));
	scale_terms(y->terms, y->nterms, s);
	return y;
}

const struct lincomb *
lc_select(struct arena *a, const struct lincomb *x,
    bool (*keep)(uint32_t atom, const void *arg), const void *arg)
{
	struct lincomb	*y;
	uint32_t	 i, n = 0;

	for (i = 0; i < x->nterms; i++)
		if (keep(x->terms[i].atom, arg))
			n++;
	if (n == x->nterms)
		return x;
	if (n == 0)
		return &lincomb_zero;
	y = lc_alloc(a, n);
	for (i = 0, n = 0; i < x->nterms; i++)
		if (keep(x->terms[i].atom, arg))
			y->terms[n++] = x->terms[i];
	return y;
}

/*
 * Merge two sorted term arrays into out (room for na + nb terms),
 * combining equal atoms and dropping the zeros that cancellation leaves.
 * Returns the number of terms written.
 */
static size_t
merge2(const struct term *ta, size_t na, const struct term *tb, size_t nb,
    struct term *out)
{
	size_t	 i = 0, j = 0, n = 0;

	while (i < na && j < nb) {
		if (ta[i].atom < tb[j].atom)
			out[n++] = ta[i++];
		else if (ta[i].atom > tb[j].atom)
			out[n++] = tb[j++];
		else {
			out[n].atom = ta[i].atom;
			out[n].coef = q_add(ta[i].coef, tb[j].coef);
			if (!q_is_zero(out[n].coef))
				n++;
			i++;
			j++;
		}
	}
	memcpy(out + n, ta + i, (na - i) * sizeof(*out));
	n += na - i;
	memcpy(out + n, tb + j, (nb - j) * sizeof(*out));
	n += nb - j;
	return n;
}

const struct lincomb *
lc_add(struct arena *a, const struct lincomb *x, const struct lincomb *y)
{
	struct term		 stack[LC_STACK_TERMS], *t;
	const struct lincomb	*r;
	size_t			 n;

	if (x->nterms == 0)
		return y;
	if (y->nterms == 0)
		return x;
	t = scratch_terms(stack, LC_STACK_TERMS,
	    (size_t)x->nterms + y->nterms);
	n = merge2(x->terms, x->nterms, y->terms, y->nterms, t);
	r = lc_from_terms(a, t, n);
	scratch_free(t, stack);
	return r;
}

const struct lincomb *
lc_fold(struct arena *a, const struct lincomb *x, uint32_t from, uint32_t by)
{
	struct term		 stack[LC_STACK_TERMS], *t, *moved;
	const struct lincomb	*r;
	size_t			 k = x->nterms, i, n;

	if (by > from)
		fatalx("lc_fold: atoms from %" PRIu32 " moved down by %" PRIu32,
		    from, by);
	/* The terms are sorted: those from `from` on are a suffix. */
	while (k > 0 && x->terms[k - 1].atom >= from)
		k--;
	if (k == x->nterms)
		return x;
	n = x->nterms - k;
	t = scratch_terms(stack, LC_STACK_TERMS, x->nterms + n);
	/* Moved down alike, the suffix stays sorted. */
	moved = t + x->nterms;
	for (i = 0; i < n; i++) {
		moved[i] = x->terms[k + i];
		moved[i].atom -= by;
	}
	n = merge2(x->terms, k, moved, n, t);
	r = lc_from_terms(a, t, n);
	scratch_free(t, stack);
	return r;
}

static int
cmp_first_atom(const void *pa, const void *pb)
{
	const struct lincomb *const *a = pa, *const *b = pb;
	uint32_t	 x = (*a)->terms[0].atom, y = (*b)->terms[0].atom;

	return (x > y) - (x < y);
}

/*
 * When the inputs, ordered by first atom, cover disjoint ascending ranges
 * (a dp group of tp-reduced gradients, for instance), their concatenation
 * is already the sorted result: no merge and no additions.
 */
static const struct lincomb *
sum_disjoint(struct arena *a, const struct lincomb **in, size_t k,
    size_t total, struct rational s)
{
	struct lincomb	*r;
	size_t		 i, n = 0;

	for (i = 0; i + 1 < k; i++)
		if (in[i]->terms[in[i]->nterms - 1].atom >=
		    in[i + 1]->terms[0].atom)
			return NULL;
	r = lc_alloc(a, total);
	for (i = 0; i < k; i++) {
		memcpy(r->terms + n, in[i]->terms,
		    in[i]->nterms * sizeof(struct term));
		n += in[i]->nterms;
	}
	scale_terms(r->terms, n, s);
	return r;
}

/*
 * When the inputs' atoms fill most of the range between the lowest and the
 * highest (a tp group of dp-reduced gradients interleaves its atoms with
 * stride tp, say), accumulating into an array indexed by atom is linear
 * and beats any merge.  A slot with a zero denominator is empty, so
 * calloc()'s zeroes are the initial state.  Returns NULL when the range is
 * too sparse for this to pay.
 */
static const struct lincomb *
sum_dense(struct arena *a, const struct lincomb **in, size_t k,
    size_t total, struct rational s)
{
	struct rational		*acc, *slot;
	struct lincomb		*r;
	const struct term	*t;
	uint32_t		 lo, hi = 0, j;
	size_t			 i, span, n = 0;

	lo = in[0]->terms[0].atom;	/* the inputs are sorted by it */
	for (i = 0; i < k; i++)
		if (in[i]->terms[in[i]->nterms - 1].atom > hi)
			hi = in[i]->terms[in[i]->nterms - 1].atom;
	span = (size_t)(hi - lo) + 1;
	if (span / 4 > total)
		return NULL;

	acc = xcalloc(span, sizeof(*acc));
	for (i = 0; i < k; i++) {
		for (j = 0; j < in[i]->nterms; j++) {
			t = &in[i]->terms[j];
			slot = &acc[t->atom - lo];
			if (slot->den == 0)
				*slot = t->coef;
			else
				*slot = q_add(*slot, t->coef);
		}
	}
	for (i = 0; i < span; i++)
		if (acc[i].num != 0)
			n++;
	if (n == 0) {
		free(acc);
		return &lincomb_zero;
	}
	r = lc_alloc(a, n);
	n = 0;
	for (i = 0; i < span; i++) {
		if (acc[i].num != 0) {
			r->terms[n].atom = lo + (uint32_t)i;
			r->terms[n].coef = acc[i];
			n++;
		}
	}
	free(acc);
	scale_terms(r->terms, n, s);
	return r;
}

struct heap_entry {
	uint32_t	 atom;
	uint32_t	 src;
};

static void
heap_sift_down(struct heap_entry *h, size_t n, size_t i)
{
	struct heap_entry	 e = h[i];
	size_t			 c;

	for (;;) {
		c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && h[c + 1].atom < h[c].atom)
			c++;
		if (h[c].atom >= e.atom)
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = e;
}

/*
 * The general case: a k-way merge with a binary heap keyed by each
 * input's next atom.  out has room for every input term.
 */
static size_t
merge_k(const struct lincomb **in, size_t k, struct term *out)
{
	struct heap_entry	*h;
	uint32_t		*pos;
	size_t			 i, hn = k, n = 0;
	const struct term	*t;

	h = xreallocarray(NULL, k, sizeof(*h));
	pos = xreallocarray(NULL, k, sizeof(*pos));
	for (i = 0; i < k; i++) {
		h[i].atom = in[i]->terms[0].atom;
		h[i].src = (uint32_t)i;
		pos[i] = 0;
	}
	for (i = k / 2; i-- > 0;)
		heap_sift_down(h, hn, i);

	while (hn > 0) {
		i = h[0].src;
		t = &in[i]->terms[pos[i]];
		if (n > 0 && out[n - 1].atom == t->atom)
			out[n - 1].coef = q_add(out[n - 1].coef, t->coef);
		else {
			/*
			 * A previous atom whose sum cancelled to zero is
			 * overwritten here instead of being kept.
			 */
			if (n > 0 && q_is_zero(out[n - 1].coef))
				n--;
			out[n++] = *t;
		}
		if (++pos[i] < in[i]->nterms) {
			h[0].atom = in[i]->terms[pos[i]].atom;
		} else
			h[0] = h[--hn];
		if (hn > 0)
			heap_sift_down(h, hn, 0);
	}
	if (n > 0 && q_is_zero(out[n - 1].coef))
		n--;
	free(h);
	free(pos);
	return n;
}

const struct lincomb *
lc_sum(struct arena *a, const struct lincomb *const *xs, size_t n,
    struct rational s)
{
	const struct lincomb	*stack_in[LC_STACK_INPUTS], **in;
	const struct lincomb	*first = NULL, *r;
	struct term		 stack_t[LC_STACK_TERMS], *t;
	size_t			 i, k = 0, total = 0, nt;
	int			 same = 1;

	if (q_is_zero(s))
		return &lincomb_zero;
	for (i = 0; i < n; i++) {
		if (xs[i]->nterms == 0)
			continue;
		if (first == NULL)
			first = xs[i];
		else if (xs[i] != first)
			same = 0;
		k++;
		total += xs[i]->nterms;
	}
	if (k == 0)
		return &lincomb_zero;
	/* k copies of one combination: after an all-reduce, the usual case. */
	if (same) {
		if (k > INT64_MAX)
			fatalx("lc_sum of %zu inputs", k);
		return lc_scale(a, first, q_mul(q_make((int64_t)k, 1), s));
	}

	in = k <= LC_STACK_INPUTS ? stack_in :
	    xreallocarray(NULL, k, sizeof(*in));
	k = 0;
	for (i = 0; i < n; i++)
		if (xs[i]->nterms != 0)
			in[k++] = xs[i];
	/* A group's members come in rank order: usually sorted already. */
	for (i = 1; i < k && in[i - 1]->terms[0].atom <= in[i]->terms[0].atom;
	    i++)
		;
	if (i < k)
		qsort(in, k, sizeof(*in), cmp_first_atom);

	if ((r = sum_disjoint(a, in, k, total, s)) == NULL &&
	    (k == 2 || (r = sum_dense(a, in, k, total, s)) == NULL)) {
		t = scratch_terms(stack_t, LC_STACK_TERMS, total);
		if (k == 2)
			nt = merge2(in[0]->terms, in[0]->nterms,
			    in[1]->terms, in[1]->nterms, t);
		else
			nt = merge_k(in, k, t);
		scale_terms(t, nt, s);
		r = lc_from_terms(a, t, nt);
		scratch_free(t, stack_t);
	}
	if (in != stack_in)
		free(in);
	return r;
}

/* The coefficient of atom in x, 0 when absent (terms sorted by atom). */
struct rational
lc_coef(const struct lincomb *x, uint32_t atom)
{
	uint32_t	 lo = 0, hi = x->nterms, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (x->terms[mid].atom < atom)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < x->nterms && x->terms[lo].atom == atom)
		return x->terms[lo].coef;
	return q_make(0, 1);
}

bool
lc_equal(const struct lincomb *x, const struct lincomb *y)
{
	uint32_t	 i;

	if (x == y)
		return true;
	if (x->nterms != y->nterms)
		return false;
	for (i = 0; i < x->nterms; i++) {
		if (x->terms[i].atom != y->terms[i].atom ||
		    !q_equal(x->terms[i].coef, y->terms[i].coef))
			return false;
	}
	return true;
}

bool
lc_strict_part(const struct lincomb *a, const struct lincomb *b)
{
	uint32_t	 i, j = 0;

	if (a->nterms >= b->nterms)
		return false;
	for (i = 0; i < a->nterms; i++) {
		while (j < b->nterms && b->terms[j].atom < a->terms[i].atom)
			j++;
		if (j == b->nterms || b->terms[j].atom != a->terms[i].atom ||
		    !q_equal(b->terms[j].coef, a->terms[i].coef))
			return false;
		j++;
	}
	return true;
}

bool
lc_same_atoms(const struct lincomb *a, const struct lincomb *b)
{
	uint32_t	 i;

	if (a->nterms != b->nterms)
		return false;
	for (i = 0; i < a->nterms; i++)
		if (a->terms[i].atom != b->terms[i].atom)
			return false;
	return true;
}

bool
lc_proportional(const struct lincomb *x, const struct lincomb *y,
    struct rational *c)
{
	struct rational	 k, p;
	uint32_t	 i;

	if (x->nterms != y->nterms)
		return false;
	if (x->nterms == 0) {
		/* 0 == 1 * 0. */
		c->num = c->den = 1;
		return true;
	}
	if (x->terms[0].atom != y->terms[0].atom)
		return false;
	k = q_div(x->terms[0].coef, y->terms[0].coef);
	for (i = 1; i < x->nterms; i++) {
		if (x->terms[i].atom != y->terms[i].atom)
			return false;
		/*
		 * A product that overflows cannot equal a coefficient that
		 * fits: not proportional, not an internal error.
		 */
		if (!q_mul_try(k, y->terms[i].coef, &p) ||
		    !q_equal(p, x->terms[i].coef))
			return false;
	}
	*c = k;
	return true;
}

/*
 * Formatting.
 */

int
lc_cmp_format_order(const void *pa, const void *pb)
{
	const struct term	*a = pa, *b = pb;
	int			 c = q_cmp(b->coef, a->coef);

	if (c != 0)
		return c;
	return (a->atom > b->atom) - (a->atom < b->atom);
}

void
lc_table_init(struct lc_table *t)
{
	memset(t, 0, sizeof *t);
}

void
lc_table_free(struct lc_table *t)
{
	free(t->slot);
	free(t->hash);
	memset(t, 0, sizeof *t);
}

static uint64_t
lc_hash_term(uint64_t h, const struct term *t)
{
	h = (h ^ t->atom) * 0x100000001b3ULL;
	h = (h ^ (uint64_t)t->coef.num) * 0x100000001b3ULL;
	h = (h ^ (uint64_t)t->coef.den) * 0x100000001b3ULL;
	return h ^ h >> 29;
}

/*
 * The hash of a combination from its size and every term.  It hashed a
 * sample of 17, spread over it, when every dp-wide sum was built and
 * interned once per parameter; since collectives' sums are memoized
 * (run_sum) hashing all terms costs 3% of a 131,072-rank check, while
 * values that differ in one term (every rank's own atom added to a dp
 * sum, nanoGPT #30) shared a sample's hash in runs of dp / 16 ranks, and
 * every lookup among them compared whole values.  A match is confirmed
 * term by term.
 */
uint64_t
lc_hash(const struct lincomb *x)
{
	uint64_t	 h = 0x9e3779b97f4a7c15ULL ^ x->nterms;
	uint32_t	 i;

	for (i = 0; i < x->nterms; i++)
		h = lc_hash_term(h, &x->terms[i]);
	return h | 1;		/* 0 marks an empty slot */
}

static uint32_t
hash32_of(uint64_t h)
{
	return (uint32_t)(h >> 32) | 1;
}

/*
 * Kept in x once taken: values derived from interned ones (a padded
 * row's, cells.c) are not interned themselves, and hashing one of dp
 * terms on each of dp ranks was dp squared again.  Every combination but
 * the shared zero is the arena's, so writable; nothing runs in threads.
 */
uint32_t
lc_hash32(const struct lincomb *x)
{
	if (x->hash != 0)
		return x->hash;
	if (x->nterms == 0)
		return hash32_of(lc_hash(x));
	((struct lincomb *)x)->hash = hash32_of(lc_hash(x));
	return x->hash;
}

static void
lc_table_grow(struct lc_table *t)
{
	const struct lincomb	**slot;
	uint64_t		 *hash;
	size_t			  cap = t->cap ? 2 * t->cap : 1024, i, j;

	slot = xcalloc(cap, sizeof *slot);
	hash = xcalloc(cap, sizeof *hash);
	for (i = 0; i < t->cap; i++) {
		if (t->hash[i] == 0)
			continue;
		for (j = t->hash[i] & (cap - 1); hash[j] != 0;
		    j = (j + 1) & (cap - 1))
			;
		hash[j] = t->hash[i];
		slot[j] = t->slot[i];
	}
	free(t->slot);
	free(t->hash);
	t->slot = slot;
	t->hash = hash;
	t->cap = cap;
}

const struct lincomb *
lc_intern(struct lc_table *t, struct arena *a, const struct lincomb *x)
{
	uint64_t	 h;
	size_t		 j;

	if (x->nterms == 0)
		return x;
	if (2 * (t->n + 1) > t->cap)
		lc_table_grow(t);
	h = lc_hash(x);
	for (j = h & (t->cap - 1); t->hash[j] != 0; j = (j + 1) & (t->cap - 1))
		if (t->hash[j] == h && lc_equal(t->slot[j], x)) {
			if (t->slot[j] != x)
				arena_unalloc(a, (void *)x, sizeof *x +
				    x->nterms * sizeof(struct term));
			return t->slot[j];
		}
	t->hash[j] = h;
	t->slot[j] = x;
	t->n++;
	/* x is the caller's new allocation: const only to the callers. */
	((struct lincomb *)x)->hash = hash32_of(h);
	return x;
}
