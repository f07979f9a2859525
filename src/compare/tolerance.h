/*
 * The tolerances compare (compare.h) holds a trace's values and fits to,
 * by the dtype of its gradients (tolerance.c).
 */
#ifndef GRADAUDIT_TOLERANCE_H
#define GRADAUDIT_TOLERANCE_H

#include <stdbool.h>

#include "compare/trace.h"

/* The tolerances of a trace's gradient dtype (gradaudit-trace(5)). */
struct compare_tolerance {
	double	value;		/* max |held - reference| / max |reference| */
	double	residual;	/* ||fit residual||_2 / ||values||_2 */
	double	snap;		/* |coefficient - p/q| / max(1, |coefficient|) */
	/*
	 * A column whose part independent of the others is at most this of
	 * its norm is a combination of them (fit_least_squares).
	 */
	double	rank;
	bool	infer;		/* fine enough to infer expressions at all */
};

void	 compare_tolerance(enum trace_dtype, struct compare_tolerance *);

#endif
