/*
 * The diagnosis of a symbolic audit: the wrong cells of a parameter
 * classified into findings (a missing reduction, a wrong factor, a wrong
 * group, unequal weights, ...).
 */
#ifndef GRADAUDIT_DIAGNOSE_H
#define GRADAUDIT_DIAGNOSE_H

#include <stddef.h>

#include "symbolic/audit.h"
#include "symbolic/run.h"

struct finding_list {
	struct audit	*audit;
	size_t		 cap;
};

/*
 * The used wrong cells of pr with distinct (value, expected) pairs, in
 * *dw (its cells xmalloc'd, for the caller to free).
 */
void	 diag_distinct_wrong(const struct param_result *pr,
	    struct param_result *dw);
/* Findings of logical parameter l from its result pr and dw. */
void	 diag_explain_param(struct finding_list *, const struct sym_run *,
	    int l, const struct param_result *pr,
	    const struct param_result *dw);

#endif
