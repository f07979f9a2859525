/*
 * The numeric step written as a trace of gradaudit-trace(5): each rank's
 * contribution of each micro-batch before any collective and the gradient
 * its optimizer steps with, and the one-rank reference's gradients, so
 * that gradaudit compare, which sees only what a real job records, can be
 * held against the symbolic engine on every config the test suite has
 * (tests/compare-oracle.test).  A test hook, GRADAUDIT_TEST_TRACE_DIR
 * (numeric.c), not a feature: a real job writes its trace with the hook of
 * python/gradaudit_trace.py.
 */
#ifndef GRADAUDIT_TRACEWRITE_H
#define GRADAUDIT_TRACEWRITE_H

#include <stddef.h>

#include "numeric/numcheck.h"

struct audit;
struct model;

/*
 * Write DIR/parallel and DIR/reference (float64 numerics only).  Returns 0
 * when written; 1, with the reason in why, for a config whose step a trace
 * cannot record as it is (a shard that is no box of its parameter, a
 * chunk with atoms of several losses or sources, or of a MoE block
 * boundary's two kinds); exits on an error of the file system.
 */
int	 trace_write_step(const char *dir, const struct model *,
	    const struct gathered *, union num **ref, const struct audit *,
	    char *why, size_t len);

#endif
