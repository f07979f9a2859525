/*
 * Unit tests for the prime field and the generator (TAP).  Products are
 * checked against a plain 128-bit remainder, an implementation independent
 * of the Mersenne folding under test.
 */
#include <stddef.h>
#include <stdint.h>

#include "numeric/field.h"
#include "tap.h"

#define ROUNDS	100000
#define PLAN	26

__extension__ typedef unsigned __int128 wide;

static uint64_t
slow_mul(uint64_t a, uint64_t b)
{
	return (uint64_t)(((wide)a * b) % FIELD_P);
}

/* Values that stress the reductions: near 0, near p, and powers of two. */
static const uint64_t edges[] = {
	0, 1, 2, 3, FIELD_P - 1, FIELD_P - 2, FIELD_P / 2, FIELD_P / 2 + 1,
	UINT64_C(1) << 60, (UINT64_C(1) << 60) - 1, UINT64_C(1) << 32,
	UINT64_C(0xffffffff), UINT64_C(0x1234567890abcde)
};
#define NEDGES	(sizeof(edges) / sizeof(edges[0]))

static void
test_constants(void)
{
	tap_ok(f_add(FIELD_P - 1, 1) == 0, "p-1 + 1 == 0");
	tap_ok(f_sub(0, 1) == FIELD_P - 1, "0 - 1 == p-1");
	tap_ok(f_neg(0) == 0 && f_neg(1) == FIELD_P - 1, "neg 0 and neg 1");
	tap_ok(f_mul(FIELD_P - 1, FIELD_P - 1) == 1, "(-1)*(-1) == 1");
	tap_ok(f_mul(UINT64_C(1) << 60, 2) == 1,
	    "2^60 * 2 == 1 since 2^61 == 1");
	tap_ok(f_from_int(-1) == FIELD_P - 1, "from_int(-1) == p-1");
	tap_ok(f_from_int((int64_t)FIELD_P) == 0, "from_int(p) == 0");
	/* 2^63 = 4 * 2^61 == 4, so -2^63 == p - 4. */
	tap_ok(f_from_int(INT64_MIN) == FIELD_P - 4,
	    "from_int(INT64_MIN) == p-4");
	tap_ok(f_from_int(INT64_MAX) == 3, "from_int(INT64_MAX) == 3");
	tap_ok(f_mul(f_from_rational(1, 2), 2) == 1,
	    "from_rational(1,2) * 2 == 1");
	tap_ok(f_mul(f_from_rational(-3, 4), 4) == FIELD_P - 3,
	    "from_rational(-3,4) * 4 == -3");
	tap_ok(f_from_rational(6, -3) == FIELD_P - 2,
	    "from_rational(6,-3) == -2");
}

static void
test_edges(void)
{
	size_t	 i, j;
	int	 good = 1;

	for (i = 0; i < NEDGES; i++)
		for (j = 0; j < NEDGES; j++) {
			if (f_mul(edges[i], edges[j]) !=
			    slow_mul(edges[i], edges[j]))
				good = 0;
			if (f_sub(f_add(edges[i], edges[j]), edges[j]) !=
			    edges[i])
				good = 0;
		}
	tap_ok(good,
	    "edge values: mul matches 128-bit remainder, add/sub undo");
	good = 1;
	for (i = 1; i < NEDGES; i++)
		if (f_mul(edges[i], f_inv(edges[i])) != 1)
			good = 0;
	tap_ok(good, "edge values: a * inv(a) == 1");
}

static void
test_random(void)
{
	uint64_t	 state = 42, a, b, c;
	int		 mul = 1, inv = 1, div = 1, dist = 1, addsub = 1;
	int		 range = 1;
	int		 i;

	for (i = 0; i < ROUNDS; i++) {
		a = f_random(&state);
		b = f_random(&state);
		c = f_random(&state);
		if (a >= FIELD_P || b >= FIELD_P || c >= FIELD_P)
			range = 0;
		if (f_mul(a, b) != slow_mul(a, b))
			mul = 0;
		if (b != 0 && f_mul(f_mul(a, b), f_inv(b)) != a)
			div = 0;
		if (a != 0 && f_mul(a, f_inv(a)) != 1)
			inv = 0;
		if (f_mul(a, f_add(b, c)) != f_add(f_mul(a, b), f_mul(a, c)))
			dist = 0;
		if (f_add(f_sub(a, b), b) != a || f_add(a, f_neg(a)) != 0)
			addsub = 0;
	}
	tap_ok(range, "f_random stays in [0, p)");
	tap_ok(mul, "random mul matches 128-bit remainder");
	tap_ok(inv, "random a * inv(a) == 1");
	tap_ok(div, "random (a*b)/b == a");
	tap_ok(dist, "random a*(b+c) == a*b + a*c");
	tap_ok(addsub, "random (a-b)+b == a and a + (-a) == 0");
}

static void
test_rng(void)
{
	uint64_t	 s1 = 7, s2 = 7, s3 = 8, zero = 0, state = 1;
	int		 same = 1, differ = 0, range = 1, neg = 0, pos = 0;
	int		 high = 0, i;
	double		 d, sum = 0;

	for (i = 0; i < 1000; i++) {
		uint64_t x = rng_next(&s1);

		if (x != rng_next(&s2))
			same = 0;
		if (x != rng_next(&s3))
			differ = 1;
	}
	tap_ok(same, "same seed gives the same sequence");
	tap_ok(differ, "different seeds give different sequences");
	/* The published first output of splitmix64 seeded with 0. */
	tap_ok(rng_next(&zero) == UINT64_C(0xe220a8397b1dcdaf),
	    "splitmix64 reference value for seed 0");
	for (i = 0; i < ROUNDS; i++) {
		d = d_random(&state);
		if (!(d >= -1.0 && d < 1.0))
			range = 0;
		if (d < 0)
			neg++;
		else
			pos++;
		sum += d;
		if (f_random(&state) >= FIELD_P / 2)
			high++;
	}
	tap_ok(range, "d_random stays in [-1, 1)");
	tap_ok(neg > ROUNDS * 45 / 100 && pos > ROUNDS * 45 / 100 &&
	    sum / ROUNDS > -0.02 && sum / ROUNDS < 0.02,
	    "d_random is centred on 0");
	tap_ok(high > ROUNDS * 45 / 100 && high < ROUNDS * 55 / 100,
	    "f_random covers the upper half of the field");
}

int
main(void)
{
	tap_plan(PLAN);
	test_constants();
	test_edges();
	test_random();
	test_rng();
	return tap_done();
}
