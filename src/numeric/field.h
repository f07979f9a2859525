/*
 * Exact arithmetic in the prime field GF(p), p = 2^61 - 1 (SPEC section 8).
 * Division by n is multiplication by the inverse of n, so averaging is exact
 * and the result of a reduction does not depend on its order: a correct
 * rank is bit-identical to the single-rank reference, and a wrong one
 * differs with overwhelming probability (Schwartz-Zippel).
 */
#ifndef GRADAUDIT_FIELD_H
#define GRADAUDIT_FIELD_H

#include <stdbool.h>
#include <stdint.h>

#define FIELD_P		((UINT64_C(1) << 61) - 1)

uint64_t	 f_add(uint64_t, uint64_t);
uint64_t	 f_sub(uint64_t, uint64_t);
uint64_t	 f_mul(uint64_t, uint64_t);
uint64_t	 f_neg(uint64_t);
uint64_t	 f_inv(uint64_t);		/* a != 0 */
uint64_t	 f_from_int(int64_t);		/* negative values wrap */
/* num/den as a field element (den != 0 mod p). */
uint64_t	 f_from_rational(int64_t num, int64_t den);

/*
 * A small deterministic generator (splitmix64) for weights and inputs:
 * the same seed gives the same model on every rank and in the reference.
 */
uint64_t	 rng_next(uint64_t *state);
uint64_t	 f_random(uint64_t *state);		/* uniform in [0, p) */
double		 d_random(uint64_t *state);		/* uniform in [-1, 1) */

#endif
