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
 * Every operation runs in the numerics its first argument names: those of
 * the audit in progress, which the numeric audit owns and passes down
 * (struct engine, struct coll_comm, struct weight_source), so that no
 * process-wide mode decides how a number is added (issue 22).
 */
double		 num_round(enum arith, double);	/* to float in float32 */
union num	 num_add(enum arith, union num, union num);
union num	 num_sub(enum arith, union num, union num);
union num	 num_mul(enum arith, union num, union num);
union num	 num_from_rational(enum arith, struct rational);
int		 num_greater(enum arith, union num, union num);
union num	 num_dot(enum arith, const union num *a, int64_t astride,
		    const union num *b, int64_t bstride, int64_t n);

/*
 * A division by the integer n, the AVG of a collective: in the field a
 * multiplication by the inverse of n, worked out once for every element
 * the collective divides.
 */
struct num_divisor {
	int		 n;
	uint64_t	 inverse;	/* exact numerics: 1/n in the field */
};

struct num_divisor num_divisor(enum arith, int n);
union num	 num_div_int(enum arith, union num, const struct num_divisor *);

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
