/*
 * TAP unit test of lincomb.c: exact rationals, the combination operations,
 * the report's printing style (every example of SPEC section 7 and the
 * Megatron report), and lc_sum() against repeated lc_add() and against a
 * dense accumulation that shares no code with the merge.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "symbolic/atom.h"
#include "symbolic/context.h"
#include "symbolic/lincomb.h"
#include "symbolic/run.h"
#include "tap.h"

static int
q_is(struct rational q, int64_t num, int64_t den)
{
	if (q.num == num && q.den == den)
		return 1;
	tap_diag("got %" PRId64 "/%" PRId64 ", want %" PRId64 "/%" PRId64,
	    q.num, q.den, num, den);
	return 0;
}

/* One source, one micro-batch, no mesh: every atom is a rank, none held. */
static const struct atom_space trivial = {
	.sources = 1, .aux_source = -1, .mtp_source = -1, .micro_batches = 1
};

static void
test_rationals(void)
{
	char	 buf[48];

	tap_ok(q_is(q_make(2, 4), 1, 2), "2/4 reduces to 1/2");
	tap_ok(q_is(q_make(-2, 4), -1, 2), "-2/4 is -1/2");
	tap_ok(q_is(q_make(2, -4), -1, 2),
	    "2/-4 puts the sign on the numerator");
	tap_ok(q_is(q_make(-6, -4), 3, 2), "-6/-4 is 3/2");
	tap_ok(q_is(q_make(0, -5), 0, 1), "0/-5 is 0/1");
	tap_ok(q_is(q_make(7, 1), 7, 1), "7/1 stays");
	tap_ok(q_is(q_make(INT64_MIN, INT64_MIN), 1, 1),
	    "INT64_MIN/INT64_MIN is 1");
	tap_ok(q_is(q_make(INT64_MIN, 2), INT64_MIN / 2, 1),
	    "INT64_MIN/2 reduces");
	tap_ok(q_is(q_make(4, INT64_MIN), -1, -(INT64_MIN / 4)),
	    "4/INT64_MIN is -1/2^61");

	tap_ok(q_is(q_add(q_make(1, 2), q_make(1, 3)), 5, 6), "1/2+1/3 = 5/6");
	tap_ok(q_is(q_add(q_make(1, 6), q_make(1, 3)), 1, 2), "1/6+1/3 = 1/2");
	tap_ok(q_is(q_add(q_make(1, 2), q_make(-1, 2)), 0, 1), "1/2-1/2 = 0");
	tap_ok(q_is(q_add(q_make(3, 4), q_make(1, 4)), 1, 1), "3/4+1/4 = 1");
	tap_ok(q_is(q_add(q_make(-1, 3), q_make(-1, 6)), -1, 2),
	    "-1/3-1/6 = -1/2");
	tap_ok(q_is(q_add(q_make(0, 1), q_make(5, 7)), 5, 7), "0+5/7 = 5/7");
	tap_ok(q_is(q_mul(q_make(2, 3), q_make(3, 4)), 1, 2), "2/3*3/4 = 1/2");
	tap_ok(q_is(q_mul(q_make(-2, 3), q_make(3, -4)), 1, 2),
	    "-2/3*-3/4 = 1/2");
	tap_ok(q_is(q_mul(q_make(0, 1), q_make(3, 4)), 0, 1), "0*3/4 = 0");
	tap_ok(q_is(q_div(q_make(1, 2), q_make(-1, 4)), -2, 1),
	    "1/2 / -1/4 = -2");
	tap_ok(q_is(q_div(q_make(3, 5), q_make(9, 10)), 2, 3),
	    "3/5 / 9/10 = 2/3");
	tap_ok(q_is(q_mul(q_make(INT64_MAX, 2), q_make(2, INT64_MAX)), 1, 1),
	    "cross-cancellation keeps big products in range");
	tap_ok(q_is_zero(q_make(0, 3)) && !q_is_zero(q_make(1, 3)),
	    "q_is_zero");
	tap_ok(q_equal(q_make(2, 6), q_make(1, 3)) &&
	    !q_equal(q_make(1, 3), q_make(-1, 3)), "q_equal");
	tap_ok(q_cmp(q_make(1, 3), q_make(1, 2)) == -1 &&
	    q_cmp(q_make(1, 2), q_make(1, 3)) == 1 &&
	    q_cmp(q_make(2, 6), q_make(1, 3)) == 0 &&
	    q_cmp(q_make(-1, 2), q_make(1, 3)) == -1, "q_cmp");
	/* Products past 64 bits: 1/(2^62-1) < 1/(2^62-2). */
	tap_ok(q_cmp(q_make(1, INT64_MAX / 2), q_make(1, INT64_MAX / 2 - 1)) ==
	    -1 && q_cmp(q_make(INT64_MAX, INT64_MAX - 1),
	    q_make(INT64_MAX - 1, INT64_MAX - 2)) == -1,
	    "q_cmp: exact where the cross products pass 64 bits");

	q_format(q_make(1, 1), buf, sizeof(buf));
	tap_ok_str_eq(buf, "1", "format 1");
	q_format(q_make(1, 2), buf, sizeof(buf));
	tap_ok_str_eq(buf, "1/2", "format 1/2");
	q_format(q_make(-3, 4), buf, sizeof(buf));
	tap_ok_str_eq(buf, "-3/4", "format -3/4");
	q_format(q_make(0, 9), buf, sizeof(buf));
	tap_ok_str_eq(buf, "0", "format 0");
	q_format(q_make(INT64_MIN, INT64_MAX), buf, sizeof(buf));
	tap_ok_str_eq(buf, "-9223372036854775808/9223372036854775807",
	    "format the widest rational");
}

/* Build a combination from (atom, num, den) triples, terminated by den 0. */
static const struct lincomb *
build(struct arena *a, const int64_t (*t)[3])
{
	const struct lincomb	*x = &lincomb_zero;

	for (; t[0][2] != 0; t++)
		x = lc_add(a, x, lc_scale(a, lc_atom(a, (uint32_t)t[0][0]),
		    q_make(t[0][1], t[0][2])));
	return x;
}

static int
lc_is_sorted_nonzero(const struct lincomb *x)
{
	uint32_t	 i;

	for (i = 0; i < x->nterms; i++) {
		if (q_is_zero(x->terms[i].coef) || x->terms[i].coef.den <= 0)
			return 0;
		if (i > 0 && x->terms[i - 1].atom >= x->terms[i].atom)
			return 0;
	}
	return 1;
}

static void
test_operations(struct arena *a)
{
	static const int64_t	 ta[][3] = { {0, 1, 2}, {3, 1, 1}, {5, -2, 3},
				     {0, 0, 0} };
	static const int64_t	 tb[][3] = { {1, 1, 1}, {3, -1, 1}, {5, 1, 3},
				     {0, 0, 0} };
	static const int64_t	 tab[][3] = { {0, 1, 2}, {1, 1, 1},
				     {5, -1, 3}, {0, 0, 0} };
	static const int64_t	 t3a[][3] = { {0, 3, 4}, {3, 3, 2},
				     {5, -1, 1}, {0, 0, 0} };
	const struct lincomb	*x, *y, *z, *g2;
	struct rational		 c;

	g2 = lc_atom(a, 2);
	tap_ok(g2->nterms == 1 && g2->terms[0].atom == 2 &&
	    q_is(g2->terms[0].coef, 1, 1), "lc_atom");
	tap_ok(((uintptr_t)g2 & 15) == 0,
	    "arena allocations are 16-byte aligned");

	x = build(a, ta);
	y = build(a, tb);
	tap_ok(x->nterms == 3 && lc_is_sorted_nonzero(x), "build sorts terms");
	z = lc_add(a, x, y);
	tap_ok(lc_equal(z, build(a, tab)), "lc_add merges and cancels g3");
	tap_ok(lc_is_sorted_nonzero(z), "lc_add result sorted without zeros");
	tap_ok(lc_equal(lc_add(a, y, x), z), "lc_add commutes");
	tap_ok(lc_add(a, x, &lincomb_zero) == x &&
	    lc_add(a, &lincomb_zero, x) == x,
	    "adding zero returns the same combination");
	z = lc_add(a, x, lc_scale(a, x, q_make(-1, 1)));
	tap_ok(z->nterms == 0 && lc_equal(z, &lincomb_zero), "x - x is zero");

	tap_ok(lc_scale(a, x, q_make(1, 1)) == x,
	    "scale by 1 is the same pointer");
	tap_ok(lc_scale(a, x, q_make(0, 1)) == &lincomb_zero,
	    "scale by 0 is lincomb_zero");
	z = lc_scale(a, x, q_make(3, 2));
	tap_ok(lc_equal(z, build(a, t3a)), "scale by 3/2");

	tap_ok(lc_equal(x, x) && !lc_equal(x, y), "lc_equal");
	tap_ok(!lc_equal(g2, lc_atom(a, 3)), "lc_equal compares atoms");
	tap_ok(!lc_equal(x, g2) && !lc_equal(&lincomb_zero, g2),
	    "lc_equal compares lengths");
	tap_ok(!lc_equal(g2, lc_scale(a, g2, q_make(2, 1))),
	    "lc_equal compares coefficients");
	tap_ok(lc_equal(&lincomb_zero, lc_add(a, g2, lc_scale(a, g2,
	    q_make(-1, 1)))), "zero equals an emptied combination");

	tap_ok(lc_proportional(z, x, &c) && q_is(c, 3, 2),
	    "lc_proportional finds 3/2");
	tap_ok(lc_proportional(x, z, &c) && q_is(c, 2, 3),
	    "lc_proportional finds 2/3");
	tap_ok(!lc_proportional(x, y, &c),
	    "different atoms are not proportional");
	tap_ok(!lc_proportional(x, lc_add(a, x, lc_scale(a, lc_atom(a, 3),
	    q_make(1, 7))), &c), "same atoms, other ratios: not proportional");
	tap_ok(!lc_proportional(x, g2, &c),
	    "different lengths: not proportional");
	tap_ok(lc_proportional(lc_scale(a, x, q_make(-5, 1)), x, &c) &&
	    q_is(c, -5, 1), "negative factor");
	tap_ok(lc_proportional(&lincomb_zero, &lincomb_zero, &c) &&
	    q_is(c, 1, 1),
	    "zero is 1 * zero");
	tap_ok(!lc_proportional(lc_add(a, lc_atom(a, 0), lc_atom(a, 1)),
	    lc_add(a, lc_atom(a, 0), lc_atom(a, 2)), &c),
	    "a later atom differs: not proportional");
	{
		static const int64_t	 big[][3] = { {0, INT64_C(1) << 62, 1},
					     {1, 1, 1}, {0, 0, 0} };
		static const int64_t	 small[][3] = { {0, 1, 1}, {1, 4, 1},
					     {0, 0, 0} };

		tap_ok(!lc_proportional(build(a, big), build(a, small), &c),
		    "a ratio whose product overflows is not proportional");
	}
}

static void
test_format(struct arena *a)
{
	static const struct {
		int64_t		 t[6][3];
		const char	*want;
	} cases[] = {
		{ { {0, 1, 2}, {1, 1, 2}, {3, 1, 1}, {0, 0, 0} },
		  "g3+(g0+g1)/2" },
		{ { {0, 1, 1}, {2, 1, 2}, {3, 1, 2}, {0, 0, 0} },
		  "g0+(g2+g3)/2" },
		{ { {0, 1, 2}, {1, 1, 2}, {2, 1, 2}, {3, 1, 2}, {0, 0, 0} },
		  "(g0+g1+g2+g3)/2" },
		{ { {0, 1, 1}, {2, 1, 1}, {0, 0, 0} }, "g0+g2" },
		{ { {0, 3, 4}, {1, 3, 4}, {0, 0, 0} }, "3*(g0+g1)/4" },
		{ { {1, 1, 2}, {0, 0, 0} }, "g1/2" },
		{ { {0, 2, 1}, {0, 0, 0} }, "2*g0" },
		{ { {0, 1, 1}, {1, -1, 2}, {0, 0, 0} }, "g0-g1/2" },
		{ { {0, 0, 0} }, "0" },
		{ { {0, -1, 1}, {0, 0, 0} }, "-g0" },
		/* Beyond the brief's list: signs, mixed groups, big atoms. */
		{ { {0, 1, 2}, {1, 1, 2}, {2, 1, 1}, {3, 1, 2}, {0, 0, 0} },
		  "g2+(g0+g1+g3)/2" },
		{ { {4, -1, 1}, {7, -2, 1}, {0, 0, 0} }, "-g4-2*g7" },
		{ { {1, -3, 4}, {2, -3, 4}, {5, 1, 1}, {0, 0, 0} },
		  "g5-3*(g1+g2)/4" },
		{ { {0, -1, 2}, {1, -1, 2}, {0, 0, 0} }, "-(g0+g1)/2" },
		{ { {0, 2, 1}, {1, 2, 1}, {0, 0, 0} }, "2*(g0+g1)" },
		{ { {16383, 1, 3}, {10, 2, 3}, {0, 0, 0} },
		  "2*g10/3+g16383/3" },
	};
	const struct lincomb	*x;
	size_t			 i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		x = build(a, cases[i].t);
		tap_ok_str_eq(lc_format(a, &trivial, x, "g"), cases[i].want,
		    "format %s", cases[i].want);
	}
	x = build(a, cases[0].t);
	tap_ok_str_eq(lc_format(a, &trivial, x, "x_"), "x_3+(x_0+x_1)/2",
	    "format with another prefix");
}

/* Long combinations format in one piece, correctly. */
static void
test_format_long(struct arena *a)
{
	enum { N = 5000 };
	const struct lincomb	*parts[N], *x, *y;
	char			*want, *p;
	uint32_t		 i;

	for (i = 0; i < N; i++)
		parts[i] = lc_atom(a, i);
	x = lc_sum(a, parts, N, q_make(1, 2));
	want = xmalloc(N * 8 + 8);
	p = want;
	*p++ = '(';
	for (i = 0; i < N; i++)
		p += sprintf(p, "%sg%" PRIu32, i ? "+" : "", i);
	strcpy(p, ")/2");
	tap_ok_str_eq(lc_format(a, &trivial, x, "g"), want,
	    "format of %d equal terms",
	    N);

	/* Alternating coefficients: two groups of N/2. */
	y = lc_add(a, x, lc_sum(a, parts, N / 2, q_make(1, 2)));
	p = want;
	for (i = 0; i < N / 2; i++)
		p += sprintf(p, "%sg%" PRIu32, i ? "+" : "", i);
	p += sprintf(p, "+(");
	for (i = N / 2; i < N; i++)
		p += sprintf(p, "%sg%" PRIu32, i > N / 2 ? "+" : "", i);
	strcpy(p, ")/2");
	tap_ok_str_eq(lc_format(a, &trivial, y, "g"), want,
	    "format of two long groups");
	free(want);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t
rnd(void)
{
	uint64_t	 z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A random combination: up to maxterms atoms below range. */
static const struct lincomb *
random_lc(struct arena *a, uint32_t range, uint32_t maxterms)
{
	const struct lincomb	*x = &lincomb_zero;
	uint32_t		 i, n = (uint32_t)(rnd() % (maxterms + 1));
	int64_t			 num, den;

	for (i = 0; i < n; i++) {
		num = (int64_t)(rnd() % 7) - 3;
		den = (int64_t)(rnd() % 4) + 1;
		if (num == 0)
			num = 1;
		x = lc_add(a, x, lc_scale(a, lc_atom(a,
		    (uint32_t)(rnd() % range)), q_make(num, den)));
	}
	return x;
}

/* The sum computed by repeated lc_add, then scaled. */
static const struct lincomb *
sum_by_add(struct arena *a, const struct lincomb **xs, size_t n,
    struct rational s)
{
	const struct lincomb	*r = &lincomb_zero;
	size_t			 i;

	for (i = 0; i < n; i++)
		r = lc_add(a, r, xs[i]);
	return lc_scale(a, r, s);
}

/* The sum accumulated densely per atom: no merging at all. */
static int
matches_dense(const struct lincomb *got, const struct lincomb **xs,
    size_t n, struct rational s, uint32_t range)
{
	struct rational	*acc;
	size_t		 i;
	uint32_t	 j, k = 0;
	int		 good = 1;

	acc = xreallocarray(NULL, range, sizeof(*acc));
	for (j = 0; j < range; j++)
		acc[j] = q_make(0, 1);
	for (i = 0; i < n; i++)
		for (j = 0; j < xs[i]->nterms; j++)
			acc[xs[i]->terms[j].atom] = q_add(acc[xs[i]->terms[j].atom],
			    xs[i]->terms[j].coef);
	for (j = 0; j < range && good; j++) {
		acc[j] = q_mul(acc[j], s);
		if (q_is_zero(acc[j]))
			continue;
		if (k >= got->nterms || got->terms[k].atom != j ||
		    !q_equal(got->terms[k].coef, acc[j]))
			good = 0;
		k++;
	}
	free(acc);
	return good && k == got->nterms;
}

static void
test_sum(struct arena *a)
{
	enum { MAXN = 200 };
	const struct lincomb	*xs[MAXN], *r, *x;
	struct rational		 scales[3];
	size_t			 n, i, round;
	int			 good_add = 1, good_dense = 1, good_form = 1;
	uint32_t		 range;

	scales[0] = q_make(1, 1);
	scales[1] = q_make(1, 4);
	scales[2] = q_make(-3, 2);
	for (round = 0; round < 60; round++) {
		n = 1 + (size_t)(rnd() % MAXN);
		/*
		 * Small ranges force overlaps and cancellations (the dense
		 * path); a wide range with few terms takes the heap merge.
		 */
		range = round % 4 == 0 ? 8 : round % 4 == 1 ? 200 :
		    round % 4 == 2 ? 4000 : 1 << 20;
		for (i = 0; i < n; i++)
			xs[i] = random_lc(a, range, round % 4 == 3 ? 16 : 128);
		if (round % 4 == 3 && round % 8 == 7)	/* force overlaps */
			for (i = 1; i < n; i += 3)
				xs[i] = lc_add(a, xs[i], xs[i - 1]);
		if (round % 5 == 0)	/* repeated pointers, not all equal */
			for (i = 1; i < n; i += 2)
				xs[i] = xs[0];
		r = lc_sum(a, xs, n, scales[round % 3]);
		if (!lc_equal(r, sum_by_add(a, xs, n, scales[round % 3])))
			good_add = 0;
		if (!matches_dense(r, xs, n, scales[round % 3], range))
			good_dense = 0;
		if (!lc_is_sorted_nonzero(r))
			good_form = 0;
	}
	tap_ok(good_add, "lc_sum of random inputs equals repeated lc_add");
	tap_ok(good_dense, "lc_sum of random inputs equals dense accumulation");
	tap_ok(good_form, "lc_sum results sorted without zeros");

	/* Disjoint ranges, given out of order: the concatenation path. */
	for (i = 0; i < 128; i++) {
		const struct lincomb	*parts[128];
		size_t			 j;

		for (j = 0; j < 128; j++)
			parts[j] = lc_scale(a, lc_atom(a,
			    (uint32_t)(((i * 37) % 128) * 128 + j)),
			    q_make((int64_t)(j % 3) + 1, 2));
		xs[i] = lc_sum(a, parts, 128, q_make(1, 1));
	}
	r = lc_sum(a, xs, 128, q_make(1, 2));
	tap_ok(r->nterms == 128 * 128 && lc_is_sorted_nonzero(r),
	    "disjoint inputs: 16384 sorted terms");
	tap_ok(lc_equal(r, sum_by_add(a, xs, 128, q_make(1, 2))),
	    "disjoint inputs equal repeated lc_add");
	tap_ok(matches_dense(r, xs, 128, q_make(1, 2), 128 * 128),
	    "disjoint inputs equal dense accumulation");

	/* Interleaved atoms (a strided group): the heap merge. */
	for (i = 0; i < 128; i++) {
		const struct lincomb	*parts[128];
		size_t			 j;

		for (j = 0; j < 128; j++)
			parts[j] = lc_atom(a, (uint32_t)(j * 128 + i));
		xs[i] = lc_sum(a, parts, 128, q_make(1, 1));
	}
	r = lc_sum(a, xs, 128, q_make(1, 128));
	tap_ok(r->nterms == 128 * 128 && lc_is_sorted_nonzero(r) &&
	    matches_dense(r, xs, 128, q_make(1, 128), 128 * 128),
	    "interleaved inputs: 16384 terms of 1/128");

	/* n copies of the same pointer: x scaled by n * scale. */
	x = random_lc(a, 50, 40);
	while (x->nterms == 0)
		x = random_lc(a, 50, 40);
	for (i = 0; i < 100; i++)
		xs[i] = x;
	r = lc_sum(a, xs, 100, q_make(1, 100));
	tap_ok(r == x, "100 copies scaled by 1/100 is the same pointer");
	r = lc_sum(a, xs, 100, q_make(1, 50));
	tap_ok(lc_equal(r, lc_scale(a, x, q_make(2, 1))),
	    "100 copies scaled by 1/50 is 2x");
	xs[100] = &lincomb_zero;
	r = lc_sum(a, xs, 101, q_make(1, 1));
	tap_ok(lc_equal(r, lc_scale(a, x, q_make(100, 1))),
	    "copies plus zero: zero inputs are ignored");

	/* Sparse atoms (the heap merge) with cancellations inside and last. */
	{
		static const int64_t	 s1[][3] = { {0, 1, 1}, {1000000, 1, 2},
					     {0, 0, 0} };
		static const int64_t	 s2[][3] = { {0, -1, 1}, {500000, 1, 1},
					     {0, 0, 0} };
		static const int64_t	 s3[][3] = { {7, 1, 1},
					     {1000000, -1, 2}, {0, 0, 0} };
		static const int64_t	 want[][3] = { {7, 1, 3},
					     {500000, 1, 3}, {0, 0, 0} };

		xs[0] = build(a, s1);
		xs[1] = build(a, s2);
		xs[2] = build(a, s3);
		r = lc_sum(a, xs, 3, q_make(1, 3));
		tap_ok(lc_equal(r, build(a, want)),
		    "sparse inputs: cancelled atoms disappear");
	}
	/* Dense atoms that all cancel. */
	x = random_lc(a, 20, 20);
	while (x->nterms == 0)
		x = random_lc(a, 20, 20);
	xs[0] = x;
	xs[1] = lc_scale(a, x, q_make(-1, 2));
	xs[2] = lc_scale(a, x, q_make(-1, 3));
	xs[3] = lc_scale(a, x, q_make(-1, 6));
	tap_ok(lc_sum(a, xs, 4, q_make(1, 1)) == &lincomb_zero,
	    "dense inputs summing to zero give lincomb_zero");

	tap_ok(lc_sum(a, xs, 0, q_make(1, 1)) == &lincomb_zero,
	    "sum of nothing is zero");
	tap_ok(lc_sum(a, xs, 5, q_make(0, 1)) == &lincomb_zero,
	    "sum scaled by zero is zero");
	xs[0] = lc_atom(a, 1);
	xs[1] = lc_scale(a, xs[0], q_make(-1, 1));
	tap_ok(lc_sum(a, xs, 2, q_make(1, 1))->nterms == 0,
	    "x + (-x) cancels to zero");
}

/*
 * lc_terms: terms in any order, atoms repeated and cancelling, equal to
 * the sum of each term's scaled atom (the way local values were built).
 */
static void
test_terms(struct arena *a)
{
	enum { MAXN = 64 };
	struct term		 t[MAXN];
	const struct lincomb	*parts[MAXN], *r;
	size_t			 n, i, round;
	int			 good = 1, form = 1;

	for (round = 0; round < 200; round++) {
		n = (size_t)(rnd() % MAXN);
		for (i = 0; i < n; i++) {
			/* A small range repeats atoms; some factors cancel. */
			t[i].atom = (uint32_t)(rnd() % (round % 2 ? 8 : 1000));
			t[i].coef = q_make((int64_t)(rnd() % 7) - 3,
			    (int64_t)(rnd() % 4) + 1);
			parts[i] = lc_scale(a, lc_atom(a, t[i].atom),
			    t[i].coef);
		}
		r = lc_terms(a, t, n);
		if (!lc_equal(r, lc_sum(a, parts, n, q_make(1, 1))))
			good = 0;
		if (!lc_is_sorted_nonzero(r))
			form = 0;
	}
	tap_ok(good, "lc_terms equals the sum of its terms' scaled atoms");
	tap_ok(form, "lc_terms results sorted without zeros");
	t[0].atom = 4;
	t[0].coef = q_make(1, 2);
	t[1].atom = 2;
	t[1].coef = q_make(1, 3);
	t[2].atom = 4;
	t[2].coef = q_make(-1, 2);
	r = lc_terms(a, t, 3);
	tap_ok(r->nterms == 1 && r->terms[0].atom == 2 &&
	    q_is(r->terms[0].coef, 1, 3),
	    "lc_terms: an atom whose factors cancel is left out");
	tap_ok(lc_terms(a, t, 0) == &lincomb_zero, "lc_terms of nothing is zero");
}

static void
test_arena(void)
{
	struct arena	 a;
	unsigned char	*p, *q;
	size_t		 i;
	int		 zero = 1, aligned = 1;

	arena_init(&a);
	tap_ok(a.used_bytes == 0, "fresh arena is empty");
	for (i = 1; i < 5000; i += 7) {
		p = arena_alloc(&a, i);
		if (((uintptr_t)p & 15) != 0)
			aligned = 0;
		if (p[0] != 0 || p[i - 1] != 0)
			zero = 0;
		memset(p, 0xa5, i);
	}
	tap_ok(aligned, "all allocations 16-byte aligned");
	tap_ok(zero, "all allocations zeroed");
	p = arena_alloc(&a, 3 << 20);	/* bigger than a block */
	tap_ok(((uintptr_t)p & 15) == 0 && p[(3 << 20) - 1] == 0,
	    "big allocation aligned and zeroed");
	memset(p, 1, 3 << 20);
	q = arena_alloc(&a, 10);
	tap_ok(q != NULL && q[9] == 0, "small allocation after a big one");
	tap_ok(a.used_bytes >= (3u << 20) + 16,
	    "used_bytes counts allocations");
	tap_ok(strcmp(arena_strdup(&a, "gradaudit"), "gradaudit") == 0,
	    "arena_strdup");
	arena_free(&a);
	tap_ok(a.used_bytes == 0 && a.head == NULL, "arena_free releases all");
}

/*
 * Every rank's value after a synced micro-batch is the dp sum and its own
 * atom of the next one (nanoGPT #30): values that differ in one term.  A
 * hash of a sample of the terms gave a run of ranks one hash, and every
 * lookup among them compared whole values: dp cubed.
 */
static void
test_hash_family(struct arena *a)
{
	enum { N = 256 };
	uint32_t	 atoms[N + 1];
	uint64_t	 h[N];
	size_t		 r, i, k, distinct = 0;

	for (r = 0; r < N; r++) {
		for (i = k = 0; i < N; i++) {
			atoms[k++] = 2 * (uint32_t)i;
			if (i == r)
				atoms[k++] = 2 * (uint32_t)r + 1;
		}
		h[r] = lc_hash(lc_atoms(a, atoms, k, q_make(1, 2)));
	}
	for (r = 0; r < N; r++) {
		for (i = 0; i < r && h[i] != h[r]; i++)
			;
		if (i == r)
			distinct++;
	}
	tap_ok(distinct == N, "lc_hash: %d values that differ in one term, "
	    "%zu hashes", N, distinct);
}

/* lc_atoms builds a group's sum; lc_intern shares equal values. */
/*
 * lc_fold and lc_plain: held atoms written as their plain ones, merged
 * with the plain terms already there (cells.c, a tied embedding's padded
 * rows, which only the output layer's gradient reaches).
 */
static void
test_fold(struct arena *a)
{
	struct atom_space	 sp = trivial;
	const struct lincomb	*x, *y, *z;
	uint32_t		 h;

	sp.mesh.world = 4;
	h = atom_held(&sp, 0);
	tap_ok(h == 4 && atom_plain(&sp, atom_held(&sp, 3)) == 3,
	    "held atoms follow the plain ones, world on");
	/* (g0 + h0 + h2)/2: h0 meets g0, h2 lands alone. */
	x = lc_scale(a, lc_add(a, lc_add(a, lc_atom(a, 0),
	    lc_atom(a, atom_held(&sp, 0))), lc_atom(a, atom_held(&sp, 2))),
	    q_make(1, 2));
	y = lc_plain(a, &sp, x);
	tap_ok(y->nterms == 2 && y->terms[0].atom == 0 &&
	    q_is(y->terms[0].coef, 1, 1) && y->terms[1].atom == 2 &&
	    q_is(y->terms[1].coef, 1, 2), "lc_plain: g0/2+h0/2+h2/2 is g0+g2/2");
	z = lc_plain(a, &sp, y);
	tap_ok(z == y, "lc_plain: nothing held, the same combination");
	/* g1 - h1 cancels to zero. */
	x = lc_add(a, lc_atom(a, 1), lc_scale(a, lc_atom(a,
	    atom_held(&sp, 1)), q_make(-1, 1)));
	tap_ok(lc_plain(a, &sp, x)->nterms == 0,
	    "lc_plain: g1-h1 is zero once h1 is g1");
	tap_ok(lc_plain(a, &trivial, x) == x,
	    "lc_plain: no mesh, no held atoms, x itself");
	x = lc_fold(a, lc_add(a, lc_atom(a, 9), lc_atom(a, 7)), 8, 8);
	tap_ok(x->nterms == 2 && x->terms[0].atom == 1 &&
	    x->terms[1].atom == 7, "lc_fold: only the atoms from `from` on "
	    "move, and the result stays sorted");
}

static void
test_intern(struct arena *a)
{
	static const uint32_t atoms[] = { 1, 3, 3, 5 };
	const struct lincomb *x, *y, *z, *terms[3];
	struct lc_table	 t;
	size_t		 used;

	x = lc_atoms(a, atoms, 4, q_make(1, 2));
	tap_ok_str_eq(lc_format(a, &trivial, x, "g"), "(g1+g3+g5)/2",
	    "lc_atoms: distinct atoms times the coefficient");
	terms[0] = lc_atom(a, 1);
	terms[1] = lc_atom(a, 3);
	terms[2] = lc_atom(a, 5);
	tap_ok(lc_equal(x, lc_sum(a, terms, 3, q_make(1, 2))),
	    "lc_atoms equals the lc_sum of the atoms");
	lc_table_init(&t);
	tap_ok(lc_intern(&t, a, x) == x, "the first value is kept");
	used = a->used_bytes;
	y = lc_atoms(a, atoms + 1, 3, q_make(1, 2));
	z = lc_intern(&t, a, y);
	tap_ok(z == y && !lc_equal(z, x), "a different value is kept too");
	y = lc_atoms(a, atoms, 4, q_make(1, 2));
	tap_ok(y != x && lc_intern(&t, a, y) == x,
	    "an equal value built apart is the first one");
	tap_ok(lc_intern(&t, a, z) == z, "an interned value is itself");
	used = a->used_bytes;
	y = lc_atoms(a, atoms, 4, q_make(1, 2));
	(void)lc_intern(&t, a, y);
	tap_ok(a->used_bytes == used, "the duplicate's memory is given back");
	lc_table_free(&t);
	test_hash_family(a);
}

/*
 * run_sum: a collective's sum built once for equal member values, and
 * every sum equal to lc_sum's, whether the memo holds it, misses it or is
 * full.
 */
static void
test_run_sum(void)
{
	struct arena		 a;
	struct sym_run		 run;
	struct sym_context	 ctx;
	struct model		 m;
	const struct lincomb	*x[12], *y[12], *s1, *s2, *s3, *s4, *s5;
	size_t			 i;

	arena_init(&a);
	memset(&run, 0, sizeof run);
	/* A sum asks the run's memory limit first (run_check_memory). */
	memset(&ctx, 0, sizeof ctx);
	memset(&m, 0, sizeof m);
	ctx.memory_limit = INT64_MAX;
	run.ctx = &ctx;
	run.model = &m;
	run.arena = &a;
	for (i = 0; i < 12; i++)
		x[i] = run_share(&run, lc_atom(&a, (uint32_t)i));
	s1 = run_sum(&run, x, 12, q_make(1, 1));
	tap_ok(lc_equal(s1, lc_sum(&a, x, 12, q_make(1, 1))),
	    "run_sum: the sum of twelve atoms is lc_sum's");
	s2 = run_sum(&run, x, 12, q_make(1, 1));
	tap_ok(s2 == s1, "run_sum: the same members again: the sum built "
	    "before");
	s3 = run_sum(&run, x, 12, q_make(1, 12));
	tap_ok(s3 != s1 && q_is(lc_coef(s3, 5), 1, 12),
	    "run_sum: the same members averaged: another sum, 1/12 each");
	memcpy(y, x, sizeof y);
	y[11] = x[0];
	s4 = run_sum(&run, y, 12, q_make(1, 1));
	tap_ok(q_is(lc_coef(s4, 0), 2, 1) && q_is(lc_coef(s4, 11), 0, 1),
	    "run_sum: another member in one place: its own sum");
	/*
	 * Two members of many terms (a tied embedding's group, each its dp
	 * group's sum): the second time, the sum built before, nothing new.
	 */
	{
		const struct lincomb *z[2], *sz;
		uint32_t atoms[64], k;
		size_t kept = run.sums.n;

		for (i = 0; i < 2; i++) {
			for (k = 0; k < 64; k++)
				atoms[k] = 64 * (uint32_t)i + k;
			z[i] = run_share(&run, lc_atoms(&a, atoms, 64,
			    q_make(1, 1)));
		}
		sz = run_sum(&run, z, 2, q_make(1, 1));
		tap_ok(run.sums.n == kept + 1 && run_sum(&run, z, 2,
		    q_make(1, 1)) == sz, "run_sum: two members of 64 terms: "
		    "the memo keeps their sum");
	}
	/* The keys are full: the sum is built, right, and not kept. */
	run.sums.key_bytes = SUM_MEMO_BYTES;
	y[11] = x[1];
	s5 = run_sum(&run, y, 12, q_make(1, 1));
	tap_ok(q_is(lc_coef(s5, 1), 2, 1) && q_is(lc_coef(s5, 0), 1, 1),
	    "run_sum: past the memo's bound, still the sum");
	tap_ok(run_sum(&run, x, 12, q_make(1, 1)) == s1,
	    "run_sum: past the bound, the sums kept before are still found");
	run_free_caches(&run);
	arena_free(&a);
}

int
main(void)
{
	struct arena	 a;

	arena_init(&a);
	test_rationals();
	test_operations(&a);
	test_format(&a);
	test_format_long(&a);
	test_sum(&a);
	test_fold(&a);
	test_intern(&a);
	test_terms(&a);
	arena_free(&a);
	test_run_sum();
	test_arena();
	return tap_done();
}
