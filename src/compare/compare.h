/*
 * The audit of a traced step (gradaudit compare): each rank's final
 * gradient, region by region, against what the same code computes on one
 * process (the reference trace), with each side's expression inferred over
 * the ranks' recorded contributions by least squares (fit.h).  The result
 * is a struct audit like check's and run's, so that the same tables,
 * findings, JSON, JUnit and exit codes report it.
 */
#ifndef GRADAUDIT_COMPARE_H
#define GRADAUDIT_COMPARE_H

#include <stddef.h>

#include "compare/tolerance.h"
#include "compare/trace.h"
#include "symbolic/audit.h"

/*
 * Compare trace t with reference ref into *a (freed with audit_free).
 * 0, or -1 with a message in err when the two do not belong together (a
 * reference of another step or model: exit 2).
 */
int	 compare_traces(const struct trace *t, const struct trace *ref,
	    struct audit *a, char *err, size_t errlen);

/*
 * Compare trace t with what a config's symbolic audit cfg says each rank
 * holds (gradaudit compare TRACE_DIR CONFIG): the config validated
 * against the real code.  Parameters are matched by name; -1 with a
 * message when the mesh, micro-batches or sizes disagree.
 */
int	 compare_config(const struct trace *t, const struct audit *cfg,
	    const char *config_file, struct audit *a, char *err,
	    size_t errlen);

#endif
