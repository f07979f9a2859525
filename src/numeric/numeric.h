/*
 * The numeric audit (SPEC section 8): the model of model.h run for real on
 * the mesh ranks hosted by this process, with real exchanges between MPI
 * processes for every collective and every pipeline send, then the sync
 * plan executed on real gradient buffers, then every rank's used values
 * compared with a single-rank reference and hashed (XXH3-64).
 *
 * It also checks itself against the symbolic audit: the value a rank holds
 * must equal its symbolic expression evaluated on the numeric atoms (the
 * local gradients before synchronization).  A disagreement is an internal
 * error, never a verdict.
 */
#ifndef GRADAUDIT_NUMERIC_H
#define GRADAUDIT_NUMERIC_H

#include <stdbool.h>
#include <stdint.h>

#include "symbolic/audit.h"

struct config;
struct sym_context;
struct transport;

struct numeric_options {
	enum arith	 arith;
	uint64_t	 seed;
	bool		 progress;	/* progress bar on stderr (tty only) */
};

/*
 * Collective over all processes of the transport.  On process 0, fills the
 * numeric fields of every cell of *audit (has_hash, hash, reference_hash,
 * numeric_ok, ulps/relative error) and param reference_hash, and sets
 * audit->numeric, arith, procs.  Returns EXIT_OK, or EXIT_RUNTIME after
 * printing a message when the self-check fails (same value on every process).
 */
int	 numeric_audit(const struct sym_context *, struct transport *,
	    const struct numeric_options *, struct audit *);

#define NUMERIC_WHY_SIZE	256

/*
 * Whether the numeric audit of a valid config fits in memory: NULL when
 * it does, else msg (NUMERIC_WHY_SIZE bytes hold any), a sentence saying
 * how many values it would need and what to do ("the numeric audit needs
 * ... values per rank ...").
 * Configs within the limits of config.h can need terabytes; sweep
 * --numeric calls this before it starts a point's job.
 */
const char *numeric_too_big(const struct config *, char *msg, size_t len);
/*
 * What the numeric audit of a config costs, in values held over its whole
 * mesh (a rank past the per-rank limit counts in full): run --shrink
 * (shrink.h) compares candidates by it.
 */
int64_t	 numeric_values(const struct config *);
/*
 * The same test, said as a report line's reason: "needs N values per
 * rank, limit M" (or "over R ranks"), or NULL when the audit fits.  run
 * audits such a config symbolically and skips only its numeric audit.
 */
const char *numeric_skip_reason(const struct config *, char *msg,
		    size_t len);

#endif
