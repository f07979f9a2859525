/*
 * The single-rank reference of the numeric audit (reference.c).
 */
#ifndef GRADAUDIT_REFERENCE_H
#define GRADAUDIT_REFERENCE_H

#include "numeric/numvalue.h"

struct model;
struct progress_count;
struct weight_source;

/* The index of the logical parameter `name` of m, or -1. */
int		 logical_by_name(const struct model *m, const char *name);
/*
 * The gradient of the step's mean loss, one global gradient per logical
 * parameter of the audited model, computed on one rank; freed by the
 * caller, each then the array.
 */
union num	**reference_gradients(const struct model *audited,
		    const struct weight_source *, struct progress_count *);

#endif
