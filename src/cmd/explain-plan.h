/*
 * explain --plan (explain-plan.c): the config's sync plan printed as the
 * steps of a plan: section, the preset written out.
 */
#ifndef GRADAUDIT_EXPLAIN_PLAN_H
#define GRADAUDIT_EXPLAIN_PLAN_H

#include <stdio.h>

#include "config/config.h"
#include "symbolic/context.h"

/*
 * Write c's plan, as ctx built it, to fp; EXIT_OK, or EXIT_RUNTIME when
 * a step has no spelling in the plan: vocabulary (said on stderr).
 */
int	 explain_plan(FILE *, const struct config *, const struct sym_context *);

#endif
