/*
 * The numbers of the numeric engine (numeric.c): one number type for the
 * three numerics of SPEC section 8, a field element of GF(2^61-1) or a
 * double (float32 is a double rounded to float after every operation,
 * which is exactly IEEE float32 arithmetic since a double holds more than
 * twice float's precision), so every kernel is written once; and tensors
 * of such numbers.
 */
#ifndef GRADAUDIT_NUMVALUE_H
#define GRADAUDIT_NUMVALUE_H

#include <stdint.h>

#include "base/rational.h"
#include "symbolic/audit.h"

union num {
	uint64_t	f;	/* exact: an element of GF(2^61-1) */
	double		d;	/* float64, or a float32 value held in a double */
};

/*
 * The numerics of the audit in progress, set by numeric_audit().  One audit
 * runs at a time, and threading the mode through every kernel would only
 * add noise.
 */
extern enum arith	 num_arith;

double		 num_round(double);	/* to float in float32, else as is */
union num	 num_add(union num, union num);
union num	 num_sub(union num, union num);
union num	 num_mul(union num, union num);
union num	 num_from_rational(struct rational);
union num	 num_div_int(union num, int);
int		 num_greater(union num, union num);
union num	 num_dot(const union num *a, int64_t astride,
		    const union num *b, int64_t bstride, int64_t n);

/* Tensors: row-major [tokens, features] activations and gradients. */
struct tensor {
	int64_t		 rows, cols;
	union num	*v;
};

void		 tensor_alloc(struct tensor *, int64_t rows, int64_t cols);
void		 tensor_free(struct tensor *);
void		 tensor_copy(struct tensor *dst, const struct tensor *src);
/* Fatal unless t holds rows x cols values; what names t in the message. */
void		 tensor_check(const struct tensor *t, int64_t rows,
		    int64_t cols, const char *what);

#endif
