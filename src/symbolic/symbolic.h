/*
 * The symbolic audit (SPEC section 7): every rank's gradient for every
 * parameter as a piecewise (by element range) linear combination of atoms,
 * pushed through the sync plan step by step, then compared with the
 * expected combination (1/dp) * sum of the complete local gradients.
 * The run's values and the accessors explain reads are in run.h.
 */
#ifndef GRADAUDIT_SYMBOLIC_H
#define GRADAUDIT_SYMBOLIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/layout.h"
#include "model/model.h"
#include "model/placement.h"
#include "model/syncplan.h"
#include "symbolic/audit.h"
#include "symbolic/context.h"
#include "symbolic/run.h"

struct config;

/*
 * Run the audit of one config and fill *audit (which the caller frees with
 * audit_free).  hook may be NULL.  False when it went past the memory
 * limit and the context returns there (over_limit_returns): *audit is
 * then empty, and all else the audit took is freed.
 */
bool	 sym_audit(const struct sym_context *, struct audit *,
	    sym_step_hook *hook, void *hook_arg);
/*
 * The audit of one of the logical parameters named in names[0..n) alone
 * into *audit (one param_result, and the findings on it), the cheapest
 * to audit: the parameters' values never mix, so each finding it holds
 * is on that parameter, with its kind and op, in the audit of all
 * (sym_audit) too; the gradient norm's findings, the stale rows' and
 * the effects are left out.  Its index in names, or -1, *audit
 * untouched, when the model has none of them; -2, *audit empty, when
 * it went past the memory limit as sym_audit can.
 */
int	 sym_audit_param(const struct sym_context *, struct audit *,
	    const char *const *names, size_t n);

#endif
