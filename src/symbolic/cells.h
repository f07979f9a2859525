/*
 * A symbolic audit's verdicts: each parameter's values cut into cells
 * at the ranges its ranks use, each compared with its expected value.
 */
#ifndef GRADAUDIT_CELLS_H
#define GRADAUDIT_CELLS_H

#include "symbolic/audit.h"
#include "symbolic/run.h"

/* The result of logical parameter l, its cells in a's arena. */
void	 cells_fill_param(struct sym_run *, struct audit *, int l,
	    struct param_result *);

#endif
