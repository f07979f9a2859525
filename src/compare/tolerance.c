/*
 * The tolerances of compare (tolerance.h), by the dtype of a trace's
 * gradients.
 */
#include "compare/tolerance.h"

void
compare_tolerance(enum trace_dtype dt, struct compare_tolerance *tol)
{
	switch (dt) {
	case TRACE_F64:
		tol->value = 1e-10;
		tol->residual = 1e-10;
		tol->snap = 1e-8;
		tol->rank = 1e-9;
		tol->infer = true;
		break;
	case TRACE_F32:
		/*
		 * The window that gives right fractions in float32 is about
		 * 1e-6 to 1e-4 (issue 29's prototype): wider snaps to simpler
		 * wrong fractions.
		 */
		tol->value = 1e-5;
		tol->residual = 1e-5;
		tol->snap = 1e-4;
		/*
		 * Copies that differ in the last bits (2^-24 relative) are
		 * dependent here: fitted apart, any split of their sum would
		 * snap to some fraction and pass the residual check.
		 */
		tol->rank = 1e-5;
		tol->infer = true;
		break;
	case TRACE_BF16:
	case TRACE_F16:
		/* Too coarse to tell 1/3 from 11/32: values only. */
		tol->value = 2e-2;
		tol->residual = 0;
		tol->snap = 0;
		tol->rank = 0;
		tol->infer = false;
		break;
	}
}
