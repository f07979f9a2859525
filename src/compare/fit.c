/*
 * Least squares and rational snapping for compare (fit.h).  The systems
 * are small (a column per rank and micro-batch, a few rows per column), so
 * a plain Householder QR is enough; what matters is saying "not
 * determined" rather than returning noise when the columns are dependent.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "compare/fit.h"

/* A column whose norm after elimination is below this, relative, is lost. */
#define FIT_RANK_TOL	1e-9

bool
fit_least_squares(double *x, int m, int k, double *y, double *c,
    double rank_tol)
{
	double	maxnorm = 0, norm, full, alpha, beta, s;
	int	i, j, l;

	if (k == 0)
		return true;
	if (m < k)
		return false;
	for (j = 0; j < k; j++) {
		for (norm = 0, i = 0; i < m; i++)
			norm += x[j * m + i] * x[j * m + i];
		if (sqrt(norm) > maxnorm)
			maxnorm = sqrt(norm);
	}
	if (maxnorm == 0)
		return false;
	for (j = 0; j < k; j++) {
		double *v = &x[j * m];

		/*
		 * The reflections so far are orthogonal: all m rows still
		 * have the column's own norm, rows j on what the columns
		 * before it leave of it.
		 */
		for (full = 0, i = 0; i < j; i++)
			full += v[i] * v[i];
		for (norm = 0, i = j; i < m; i++)
			norm += v[i] * v[i];
		full = sqrt(full + norm);
		norm = sqrt(norm);
		if (norm <= FIT_RANK_TOL * maxnorm || norm <= rank_tol * full)
			return false;
		alpha = v[j] > 0 ? -norm : norm;
		/* v becomes the Householder vector u = x - alpha e_j. */
		v[j] -= alpha;
		beta = alpha * v[j];	/* -(u.u)/2, negative */
		for (l = j + 1; l < k; l++) {
			double *w = &x[l * m];

			for (s = 0, i = j; i < m; i++)
				s += v[i] * w[i];
			s /= beta;
			for (i = j; i < m; i++)
				w[i] += s * v[i];
		}
		for (s = 0, i = j; i < m; i++)
			s += v[i] * y[i];
		s /= beta;
		for (i = j; i < m; i++)
			y[i] += s * v[i];
		v[j] = alpha;	/* R's diagonal */
	}
	for (j = k - 1; j >= 0; j--) {
		s = y[j];
		for (l = j + 1; l < k; l++)
			s -= x[l * m + j] * c[l];
		c[j] = s / x[j * m + j];
	}
	return true;
}

bool
fit_rational(double v, double tol, struct rational *q)
{
	double	 bound = tol * (fabs(v) > 1 ? fabs(v) : 1), r = fabs(v), a;
	int64_t	 p0 = 0, q0 = 1, p1 = 1, q1 = 0, p2, q2;
	int	 sign = v < 0 ? -1 : 1, n;

	if (!isfinite(v) || fabs(v) > 1e12)
		return false;
	for (n = 0; n < 64; n++) {
		a = floor(r);
		if (a > 1e12)
			return false;
		p2 = (int64_t)a * p1 + p0;
		q2 = (int64_t)a * q1 + q0;
		if (q2 > FIT_MAX_DEN)
			return false;
		if (fabs(fabs(v) - (double)p2 / (double)q2) <= bound) {
			*q = q_make(sign * p2, q2);
			return true;
		}
		p0 = p1; q0 = q1; p1 = p2; q1 = q2;
		if (r - a < 1e-300)
			return false;
		r = 1 / (r - a);
	}
	return false;
}
