/*
 * Arithmetic in GF(p), p = 2^61 - 1, and the deterministic generator for
 * weights and inputs (SPEC section 8).  p is a Mersenne prime, so a 122-bit
 * product reduces with two shifts and adds instead of a division: the
 * exact numeric audit does all of its arithmetic here.
 */
#include <stdint.h>

#include "base/xmalloc.h"
#include "numeric/field.h"

__extension__ typedef unsigned __int128 field_wide;

/*
 * Reduce x < 2^122 modulo p.  Since 2^61 == 1 (mod p), x = hi * 2^61 + lo
 * is congruent to hi + lo; two folds bring any such x below 2^61 + 1, and
 * one conditional subtraction finishes the job.
 */
static uint64_t
f_reduce(field_wide x)
{
	uint64_t	 r;

	r = (uint64_t)(x & FIELD_P) + (uint64_t)(x >> 61);
	r = (r & FIELD_P) + (r >> 61);
	if (r >= FIELD_P)
		r -= FIELD_P;
	return r;
}

uint64_t
f_add(uint64_t a, uint64_t b)
{
	uint64_t	 r;

	/* Both operands are below 2^61, so the sum cannot overflow. */
	r = a + b;
	if (r >= FIELD_P)
		r -= FIELD_P;
	return r;
}

uint64_t
f_sub(uint64_t a, uint64_t b)
{
	return a >= b ? a - b : a + FIELD_P - b;
}

uint64_t
f_mul(uint64_t a, uint64_t b)
{
	return f_reduce((field_wide)a * b);
}

uint64_t
f_neg(uint64_t a)
{
	return a == 0 ? 0 : FIELD_P - a;
}

/*
 * Fermat: a^(p-2) is the inverse of a.  About 120 multiplications; the
 * callers invert group sizes and denominators, never inner-loop values.
 */
uint64_t
f_inv(uint64_t a)
{
	uint64_t	 result = 1, base = a, e = FIELD_P - 2;

	if (a % FIELD_P == 0)
		fatalx("f_inv: zero has no inverse");
	while (e != 0) {
		if (e & 1)
			result = f_mul(result, base);
		base = f_mul(base, base);
		e >>= 1;
	}
	return result;
}

uint64_t
f_from_int(int64_t v)
{
	uint64_t	 magnitude;

	if (v >= 0)
		return (uint64_t)v % FIELD_P;
	/* -(v + 1) + 1 avoids overflow when v is INT64_MIN. */
	magnitude = (uint64_t)(-(v + 1)) + 1;
	return f_neg(magnitude % FIELD_P);
}

uint64_t
f_from_rational(int64_t num, int64_t den)
{
	uint64_t	 d;

	d = f_from_int(den);
	if (d == 0)
		fatalx("f_from_rational: denominator %lld is 0 modulo p",
		    (long long)den);
	return f_mul(f_from_int(num), f_inv(d));
}

/* splitmix64 (Steele, Lea and Flood): one add and a mixing function. */
uint64_t
rng_next(uint64_t *state)
{
	uint64_t	 z;

	z = (*state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * The top 61 bits of a draw are uniform in [0, 2^61); the only value out of
 * range is p itself, so rejection almost never loops and keeps the result
 * exactly uniform.
 */
uint64_t
f_random(uint64_t *state)
{
	uint64_t	 v;

	do
		v = rng_next(state) >> 3;
	while (v >= FIELD_P);
	return v;
}

/* 53 random bits give every double k * 2^-52 - 1 in [-1, 1) exactly. */
double
d_random(uint64_t *state)
{
	uint64_t	 bits = rng_next(state) >> 11;

	return (double)bits * 0x1p-52 - 1.0;
}
