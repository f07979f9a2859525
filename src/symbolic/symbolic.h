/*
 * The symbolic audit (SPEC section 7): every rank's gradient for every
 * parameter as a piecewise (by element range) linear combination of atoms,
 * pushed through the sync plan step by step, then compared with the
 * expected combination (1/dp) * sum of the complete local gradients.
 */
#ifndef GRADAUDIT_SYMBOLIC_H
#define GRADAUDIT_SYMBOLIC_H

#include <stdbool.h>
#include <stdint.h>

#include "model/layout.h"
#include "model/model.h"
#include "model/placement.h"
#include "model/syncplan.h"
#include "symbolic/audit.h"
#include "symbolic/context.h"

struct config;

/* A value over the element range [lo, hi) of one rank's parameter shard. */
struct segment {
	int64_t			 lo, hi;
	const struct lincomb	*value;
	uint32_t		 state;	/* bit s: sync step s has combined it */
};


/*
 * Atom of rank r's local gradient for param p: r itself, or the lowest rank
 * that computes an identical local gradient.
 */
uint32_t sym_atom_of(const struct sym_context *, int param, int rank);


/* The state of an audit while its sync plan runs (for explain). */
struct sym_run;

/*
 * Called once before the first step (step -1) and after every step of the
 * plan; explain uses it to print the per-rank tables.
 */
typedef void	 sym_step_hook(void *arg, const struct sym_run *, int step);

/* A rank's current segments for a param (NULL, 0 if it does not hold it). */
const struct segment *sym_segments(const struct sym_run *, int param,
		    int rank, int *nsegs);
/* The expected value of a param on a rank (its shard). */
const struct lincomb *sym_expected(const struct sym_run *, int param,
		    int rank);
const struct sym_context *sym_run_context(const struct sym_run *);
struct arena	*sym_run_arena(const struct sym_run *);

/*
 * Run the audit of one config and fill *audit (which the caller frees with
 * audit_free).  hook may be NULL.
 */
void	 sym_audit(const struct sym_context *, struct audit *,
	    sym_step_hook *hook, void *hook_arg);

#endif
