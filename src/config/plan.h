/*
 * The plan: section (issue 25): the gradient synchronization after the
 * backward pass written as steps, read from YAML, copied and checked
 * against the config's mesh (plan.c).  The model layer expands it into
 * sync steps (syncplan.c); the engines never see it.
 *
 *	plan:
 *	  - preset
 *	  - scale: 1/micro_batches
 *	    params: "*"
 *	    stages: [0]
 *	  - all-reduce: tp
 *	    average: true
 *	    params: ["*norm*"]
 *	  - reset: grads
 *	    micro-batches: [1]
 */
#ifndef GRADAUDIT_PLAN_H
#define GRADAUDIT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rational.h"
#include "config/config.h"
#include "config/planexpr.h"

/*
 * The most steps a plan may write, and globs, stages or micro-batches one
 * step may.
 */
#define PLAN_MAX_ITEMS		16
#define PLAN_MAX_LIST		64
/*
 * The most the product of a plan's scale factors may hold, in numerator
 * and in denominator: the engines multiply it into every loss factor and
 * coefficient, whose own terms reach billions (valid tokens times ranks),
 * and two steps of 10^9 overflowed 64 bits there (an internal error, not
 * a configuration one).  2^31 holds a scale by the whole world times the
 * micro-batches twice over at a world of 1,024 and 32 micro-batches.
 */
#define PLAN_MAX_SCALE		((int64_t)1 << 31)

/* Does the config write a plan: (else its plan is the preset alone)? */
bool	 plan_given(const struct config *);

/* The sizes a factor may name, for this config (planexpr.h). */
void	 plan_sizes(const struct config *, int64_t values[PLAN_NAME__COUNT]);

/*
 * The factor of scale step item with the config's sizes; -1 when it
 * cannot be evaluated (plan_violation says why).
 */
int	 plan_factor(const struct config *, const struct plan_item *,
	    struct rational *);

/*
 * The first error of the plan that depends on the mesh (a stage past the
 * last, a factor that overflows with these sizes): false, with the step
 * named in buf ("plan[2].stages[0]: ...") and its mark in *m.  A
 * constraint (constraints.c) and the loader's blame (load.c) call it.
 */
bool	 plan_violation(const struct config *, struct cfg_mark *m,
	    char *buf, size_t size);

/*
 * Does the config's model have loss term t (the main loss always; the
 * auxiliary losses with a non-zero coefficient; mtp with model.mtp)?
 */
bool	 plan_has_term(const struct config *, enum plan_term);

/* Does glob match a parameter name ("*" matches dots too)? */
bool	 plan_glob_match(const char *glob, const char *name);

#endif
