/*
 * Exact rationals: reduced fractions of int64 with a positive denominator,
 * every operation checked for overflow (rational.c).  The loss
 * normalization, the sync plan's scales and the symbolic values all count
 * in them.
 */
#ifndef GRADAUDIT_RATIONAL_H
#define GRADAUDIT_RATIONAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A reduced fraction, den > 0.  Overflow is an internal error (exit 3). */
struct rational {
	int64_t	num;
	int64_t	den;
};

struct rational	 q_make(int64_t num, int64_t den);
struct rational	 q_add(struct rational, struct rational);
struct rational	 q_mul(struct rational, struct rational);
struct rational	 q_div(struct rational, struct rational);
bool		 q_is_zero(struct rational);
bool		 q_equal(struct rational, struct rational);
/* -1, 0 or 1 as a < b, a == b or a > b, exactly (no overflow). */
int		 q_cmp(struct rational a, struct rational b);
/* a * b into *r; false, and *r unspecified, when it overflows. */
bool		 q_mul_try(struct rational, struct rational, struct rational *r);
bool		 q_is_one(struct rational);
/* "1", "1/2", "-3/4": writes at most 48 bytes including the NUL. */
void		 q_format(struct rational, char *buf, size_t len);

#endif
