/*
 * Inferring a rank's expression from measured values (compare): the
 * coefficients of a final gradient over the recorded contributions, by
 * least squares, snapped to small rationals only when the snapped
 * coefficients reproduce the values to rounding level.
 */
#ifndef GRADAUDIT_FIT_H
#define GRADAUDIT_FIT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/rational.h"

/* The largest denominator a snapped coefficient may have. */
#define FIT_MAX_DEN	4096

/*
 * Least squares of y (m values) over the k columns of x (column-major, m
 * rows each) by Householder QR: c gets k coefficients.  Returns false when
 * the columns are linearly dependent on these rows (fewer rows than
 * columns, or a column a combination of others): the coefficients are then
 * not determined.  A column is taken as a combination of the others when
 * what it has apart from them is at most rank_tol of its norm: columns
 * that differ by rounding alone (tp copies summed in another order) only
 * determine their sum, and any split of it would fit.  x and y are
 * overwritten.
 */
bool	 fit_least_squares(double *x, int m, int k, double *y, double *c,
	    double rank_tol);

/*
 * The rational with the smallest denominator (at most FIT_MAX_DEN) within
 * tol * max(1, |v|) of v, by continued fractions; false if there is none.
 */
bool	 fit_rational(double v, double tol, struct rational *q);

#endif
