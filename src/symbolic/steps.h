/*
 * The sync plan executed on a symbolic audit's values (run.h): scalings,
 * masks and collectives, each group's result built once and shared.
 */
#ifndef GRADAUDIT_STEPS_H
#define GRADAUDIT_STEPS_H

#include "symbolic/run.h"

/* Run every step of the context's plan; hook may be NULL. */
void	 run_plan(struct sym_run *, sym_step_hook *hook, void *hook_arg);

#endif
