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

#include "audit.h"
#include "layout.h"
#include "model.h"
#include "placement.h"
#include "syncplan.h"

struct config;

/* A value over the element range [lo, hi) of one rank's parameter shard. */
struct segment {
	int64_t			 lo, hi;
	const struct lincomb	*value;
	uint32_t		 state;	/* bit s: sync step s has combined it */
};

/* Everything the audit of one config needs, built once. */
struct sym_context {
	struct model		 model;
	struct placement	*grad_placement;	/* per param */
	struct backward_reduction *reductions;
	int			 nreductions;
	struct layout		 layout;
	struct sync_plan	 plan;
	struct atom_space	 atoms;		/* its atoms */
};

void	 sym_context_build(struct sym_context *, const struct config *);

/*
 * NULL when a valid config can be audited, else why not (written into
 * why, SYM_WHY_SIZE bytes suffice), with the key the message is about in
 * *blame.  Either the symbolic audit
 * would not fit in memory (it keeps a value per parameter and rank holding
 * it, so thousands of layers on thousands of ranks would take tens of
 * gigabytes: blame the mesh), or the framework the config names would stop
 * at start-up on its layout, one of its asserts (blame the framework, or
 * the layout: keys): such a config trains nothing, and is a configuration
 * error rather than a verdict.  The model is built once for both.
 */
#define SYM_WHY_SIZE	512
const char *sym_unauditable(const struct config *, enum cfg_key *blame,
		    char *why, size_t len);
/*
 * The same for a context already built: sweep builds one per mesh, and
 * building the model twice was a tenth of its time.
 */
const char *sym_context_unauditable(const struct sym_context *,
		    const struct config *, enum cfg_key *blame, char *why,
		    size_t len);
void	 sym_context_free(struct sym_context *);

/*
 * Atom of rank r's local gradient for param p: r itself, or the lowest rank
 * that computes an identical local gradient.
 */
uint32_t sym_atom_of(const struct sym_context *, int param, int rank);

/*
 * Ranks that hold the same part of a logical parameter share a shard key:
 * the tp coordinate for tp-sharded weights, the expert coordinates for
 * expert weights, 0 for replicated ones.
 */
int	 sym_shard_key(const struct model *, const struct param *,
	    const struct coord *);

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
