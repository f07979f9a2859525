/*
 * run --shrink (issue 24): a smaller configuration with the same symbolic
 * verdict, on which the numeric audit can run when the audited one is too
 * large for it.
 *
 * The search moves the mesh axes, the micro-batches and the model sizes
 * that only scale the numeric cost, one at a time and greedily, and keeps
 * a move only when the loader's constraints still hold and the symbolic
 * verdict's signature (shrink.c says what it holds) equals the full
 * config's.  It never decides a verdict itself: the symbolic engine does,
 * on every candidate.
 */
#ifndef GRADAUDIT_SHRINK_H
#define GRADAUDIT_SHRINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolic/audit.h"
#include "config/config.h"

/* The keys the search moves (shrink.c's table). */
#define SHRINK_KNOBS	30

/*
 * What a search found: plain data, so that run's process 0 can search
 * and send it to the other processes of its job as bytes.
 */
struct shrink_result {
	bool	 smaller;	/* a cheaper config keeps the signature */
	bool	 fits;		/* the result fits the numeric audit */
	bool	 timed_out;	/* the budget ran out before the search did */
	int	 tried;		/* candidates audited symbolically */
	int	 over_limit;	/* of them, past GRADAUDIT_MAX_MEMORY */
	int64_t	 value[SHRINK_KNOBS];	/* each knob's value in the result */
	int64_t	 full_values, values;	/* numeric_values(), full and result */
	int64_t	 full_world, world;
	double	 seconds;
};

/*
 * Search for the cheapest config that keeps the verdict of `full`, whose
 * symbolic audit is `audit`, for at most budget seconds.
 */
void	 shrink_search(const struct config *full, const struct audit *audit,
	    double budget, struct shrink_result *);
/* dst: a copy of full with the result's values (cfg_free it). */
void	 shrink_apply(struct config *dst, const struct config *full,
	    const struct shrink_result *);
/*
 * The KEY=VALUE assignments that give the result from full when passed as
 * --set options after the user's own: *n strings, allocated in arena.
 */
const char **shrink_sets(const struct config *full,
	    const struct shrink_result *, struct arena *, size_t *n);

#endif
