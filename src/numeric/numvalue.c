/*
 * The arithmetic of the numeric engine: every operation in the numerics of
 * the audit in progress, exact in the field (field.h) or in double, rounded
 * to float after every operation in float32; and the tensors the kernels
 * and the collectives pass around.
 */
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "numeric/field.h"
#include "numeric/numvalue.h"

double
num_round(enum arith arith, double x)
{
	return arith == ARITH_FLOAT32 ? (double)(float)x : x;
}

union num
num_add(enum arith arith, union num a, union num b)
{
	union num	 r;

	if (arith == ARITH_EXACT)
		r.f = f_add(a.f, b.f);
	else
		r.d = num_round(arith, a.d + b.d);
	return r;
}

union num
num_sub(enum arith arith, union num a, union num b)
{
	union num	 r;

	if (arith == ARITH_EXACT)
		r.f = f_sub(a.f, b.f);
	else
		r.d = num_round(arith, a.d - b.d);
	return r;
}

union num
num_mul(enum arith arith, union num a, union num b)
{
	union num	 r;

	if (arith == ARITH_EXACT)
		r.f = f_mul(a.f, b.f);
	else
		r.d = num_round(arith, a.d * b.d);
	return r;
}

/* All bits zero is 0 in the field and +0.0 as a double. */
static union num
num_zero(void)
{
	union num	 r = { 0 };

	return r;
}

union num
num_from_rational(enum arith arith, struct rational q)
{
	union num	 r;

	if (arith == ARITH_EXACT)
		r.f = f_from_rational(q.num, q.den);
	else
		r.d = num_round(arith, (double)q.num / (double)q.den);
	return r;
}

struct num_divisor
num_divisor(enum arith arith, int n)
{
	struct num_divisor	 d = { n, 0 };

	if (arith == ARITH_EXACT)
		d.inverse = f_inv(f_from_int(n));
	return d;
}

/* a / n: a real division, or a multiplication by the field inverse. */
union num
num_div_int(enum arith arith, union num a, const struct num_divisor *d)
{
	union num	 r;

	if (arith != ARITH_EXACT) {
		r.d = num_round(arith, a.d / d->n);
		return r;
	}
	r.f = f_mul(a.f, d->inverse);
	return r;
}

/* Ordering for top-k: canonical field value, or the real value. */
int
num_greater(enum arith arith, union num a, union num b)
{
	if (arith == ARITH_EXACT)
		return a.f > b.f;
	return a.d > b.d;
}

union num
num_dot(enum arith arith, const union num *a, int64_t astride,
    const union num *b, int64_t bstride, int64_t n)
{
	union num	 acc = num_zero();
	int64_t		 i;

	for (i = 0; i < n; i++)
		acc = num_add(arith, acc, num_mul(arith, a[i * astride],
		    b[i * bstride]));
	return acc;
}

/*
 * Tensors.
 */

void
tensor_alloc(struct tensor *t, int64_t rows, int64_t cols)
{
	t->rows = rows;
	t->cols = cols;
	t->v = xcalloc((size_t)(rows * cols), sizeof(*t->v));
}

void
tensor_free(struct tensor *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}

void
tensor_copy(struct tensor *dst, const struct tensor *src)
{
	tensor_alloc(dst, src->rows, src->cols);
	memcpy(dst->v, src->v, (size_t)(src->rows * src->cols) *
	    sizeof(*src->v));
}

void
tensor_check(const struct tensor *t, int64_t rows, int64_t cols,
    const char *what)
{
	if (t->v == NULL || t->rows != rows || t->cols != cols)
		fatalx("numeric: %s is %lldx%lld, expected %lldx%lld", what,
		    (long long)t->rows, (long long)t->cols, (long long)rows,
		    (long long)cols);
}
