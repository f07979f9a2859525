/*
 * Process 0's part of the numeric audit (numcheck.c): what it gathers from
 * every rank and how it holds that against the reference and against the
 * symbolic audit.
 */
#ifndef GRADAUDIT_NUMCHECK_H
#define GRADAUDIT_NUMCHECK_H

#include <stdbool.h>

#include "numeric/collective.h"
#include "numeric/numvalue.h"

struct audit;
struct engine;
struct model;
struct progress_count;
struct sym_context;

/*
 * Gathering on process 0: every rank's atoms (local gradients before the
 * sync) and synced values of every parameter it holds.  Ranks hosted on
 * process 0 need no message.
 */
struct gathered {
	union num	***atom;	/* [rank][param], NULL if not held */
	union num	***synced;
	struct inbox	 in;
};

/* Collective: gv filled on process 0 only. */
void		 gather_values(struct engine *, union num ***atoms,
		    struct gathered *gv);
void		 gathered_free(struct engine *, struct gathered *, int world);
/* The world's gradient norms squared on process 0, NULL elsewhere. */
union num	*norm_on_ranks(struct engine *, const struct sym_context *);
/*
 * On process 0: every cell and replica set of the audit against the
 * reference ref and against its symbolic expression, and the gradient
 * norm when the audit has one, filling the numeric fields of *audit.
 * Returns the number of self-check failures, each printed on stderr (the
 * first few; then how many more).
 */
int		 numeric_check(enum arith, const struct model *, const struct
    gathered *,
		    union num **ref, const union num *norm2, struct audit *,
		    struct progress_count *);
/* Every used cell holds its region of the reference. */
bool		 numeric_verdict(const struct audit *);

#endif
