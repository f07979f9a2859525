/*
 * Exact rationals (rational.h), the coefficients of every loss factor,
 * scale and linear combination.
 *
 * Rationals are kept reduced with a positive denominator, so equality is
 * equality of the two integers.  Every operation that could overflow int64
 * is checked: a silently wrapped coefficient would turn a correct gradient
 * into a "wrong" verdict, so overflow is an internal error (exit 3) instead.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/rational.h"
#include "base/xmalloc.h"

static uint64_t
gcd_u64(uint64_t a, uint64_t b)
{
	int	 shift;

	/* Binary gcd: no division, which matters in lc_sum()'s inner loop. */
	if (a == 0)
		return b;
	if (b == 0)
		return a;
	shift = __builtin_ctzll(a | b);
	a >>= __builtin_ctzll(a);
	do {
		b >>= __builtin_ctzll(b);
		if (a > b) {
			uint64_t t = a;
			a = b;
			b = t;
		}
		b -= a;
	} while (b != 0);
	return a << shift;
}

/* |x| as an unsigned value: correct for INT64_MIN too. */
static uint64_t
abs_u64(int64_t x)
{
	return x < 0 ? -(uint64_t)x : (uint64_t)x;
}

static int64_t
mul_checked(int64_t a, int64_t b)
{
	int64_t	 r;

	if (__builtin_mul_overflow(a, b, &r))
		fatalx("rational overflow: %" PRId64 " * %" PRId64, a, b);
	return r;
}

static int64_t
add_checked(int64_t a, int64_t b)
{
	int64_t	 r;

	if (__builtin_add_overflow(a, b, &r))
		fatalx("rational overflow: %" PRId64 " + %" PRId64, a, b);
	return r;
}

struct rational
q_make(int64_t num, int64_t den)
{
	struct rational	 q;
	uint64_t	 un, ud, g;
	int		 negative;

	if (den == 0)
		fatalx("rational with zero denominator");
	if (num == 0) {
		q.num = 0;
		q.den = 1;
		return q;
	}
	/*
	 * Reduce the magnitudes as unsigned values, so that INT64_MIN in
	 * either position is handled, then put the sign on the numerator.
	 */
	negative = (num < 0) != (den < 0);
	un = abs_u64(num);
	ud = abs_u64(den);
	if (ud != 1) {
		g = gcd_u64(un, ud);
		un /= g;
		ud /= g;
	}
	if (ud > INT64_MAX)
		fatalx("rational overflow: %" PRId64 "/%" PRId64, num, den);
	if (negative) {
		if (un > (uint64_t)INT64_MAX + 1)
			fatalx("rational overflow: %" PRId64 "/%" PRId64,
			    num, den);
		q.num = un == (uint64_t)INT64_MAX + 1 ? INT64_MIN :
		    -(int64_t)un;
	} else {
		if (un > INT64_MAX)
			fatalx("rational overflow: %" PRId64 "/%" PRId64,
			    num, den);
		q.num = (int64_t)un;
	}
	q.den = (int64_t)ud;
	return q;
}

struct rational
q_add(struct rational a, struct rational b)
{
	int64_t	 g, da, db;

	if (a.num == 0)
		return b;
	if (b.num == 0)
		return a;
	if (a.den == b.den)
		return q_make(add_checked(a.num, b.num), a.den);
	/* Over the lcm of the denominators, not their product. */
	g = (int64_t)gcd_u64((uint64_t)a.den, (uint64_t)b.den);
	da = a.den / g;
	db = b.den / g;
	return q_make(add_checked(mul_checked(a.num, db), mul_checked(b.num, da)),
	    mul_checked(a.den, db));
}

/*
 * a * b, reduced by cross-cancelling first so that the products stay as
 * small as the result allows.  Returns false on overflow.
 */
bool
q_mul_try(struct rational a, struct rational b, struct rational *r)
{
	int64_t	 g1, g2;

	if (a.num == 0 || b.num == 0) {
		r->num = 0;
		r->den = 1;
		return true;
	}
	g1 = (int64_t)gcd_u64(abs_u64(a.num), (uint64_t)b.den);
	g2 = (int64_t)gcd_u64(abs_u64(b.num), (uint64_t)a.den);
	/*
	 * g1 divides b.den, which is positive and at most INT64_MAX, so the
	 * divisions below cannot overflow even for INT64_MIN numerators.
	 */
	if (__builtin_mul_overflow(a.num / g1, b.num / g2, &r->num))
		return false;
	if (__builtin_mul_overflow(a.den / g2, b.den / g1, &r->den))
		return false;
	return true;
}

struct rational
q_mul(struct rational a, struct rational b)
{
	struct rational	 r;

	if (!q_mul_try(a, b, &r))
		fatalx("rational overflow: %" PRId64 "/%" PRId64 " * %"
		    PRId64 "/%" PRId64, a.num, a.den, b.num, b.den);
	return r;
}

struct rational
q_div(struct rational a, struct rational b)
{
	if (b.num == 0)
		fatalx("rational division by zero");
	return q_mul(a, q_make(b.den, b.num));
}

bool
q_is_zero(struct rational q)
{
	return q.num == 0;
}

bool
q_equal(struct rational a, struct rational b)
{
	return a.num == b.num && a.den == b.den;
}

int
q_cmp(struct rational a, struct rational b)
{
	__extension__ typedef __int128 wide;
	wide	l, r;

	/* Denominators are positive: cross-multiplying keeps the order. */
	l = (wide)a.num * b.den;
	r = (wide)b.num * a.den;
	return (l > r) - (l < r);
}

bool
q_is_one(struct rational q)
{
	return q.num == 1 && q.den == 1;
}

void
q_format(struct rational q, char *buf, size_t len)
{
	if (q.den == 1)
		snprintf(buf, len, "%" PRId64, q.num);
	else
		snprintf(buf, len, "%" PRId64 "/%" PRId64, q.num, q.den);
}
