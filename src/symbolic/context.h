/*
 * The context of one audit: everything both engines need, built once from
 * a config, before either runs: the model, the true placements and the
 * reductions inside backward (placement.h), the gradient buffers'
 * layout, the sync plan and the atom space.  The symbolic engine
 * (symbolic.h), the gradient norm (gradnorm.h) and the numeric engine
 * (numeric.h) all read it; none of them builds any part of it, so each
 * decision in it is made once.
 */
#ifndef GRADAUDIT_CONTEXT_H
#define GRADAUDIT_CONTEXT_H

#include <stddef.h>

#include "config/config.h"
#include "model/layout.h"
#include "model/lossnorm.h"
#include "model/model.h"
#include "model/placement.h"
#include "model/syncplan.h"
#include "symbolic/atom.h"

/* Everything the audit of one config needs, built once. */
struct sym_context {
	struct model		 model;
	struct placement	*grad_placement;	/* per param */
	struct backward_reduction *reductions;
	int			 nreductions;
	struct layout		 layout;
	struct sync_plan	 plan;
	struct atom_space	 atoms;		/* its atoms */
	/*
	 * The findings' effect sizes are not wanted: the fix search audits
	 * candidate settings only to see which findings remain, and measuring
	 * each one's effect was half its time on a wrong MoE config of 512
	 * ranks (issue 24).
	 */
	bool			 no_effects;
	/*
	 * The block cache of the audit's arenas (arena.h), or NULL: owned by
	 * the caller that audits in a loop (a sweep, check's batch), which
	 * sets it after sym_context_build and frees it after the audits.
	 */
	struct arena_cache	*blocks;
	/*
	 * GRADAUDIT_MAX_MEMORY in bytes.  The size estimate refuses most
	 * audits over it before they start; the run and the gradient norm
	 * stop the others (sym_context_over_limit): it prints why and
	 * exits 2, or, when set, calls over_limit with why, which must not
	 * return either (run's MPI job, whose processes all reach it,
	 * tells its launcher first).
	 */
	int64_t			 memory_limit;
	void			(*over_limit)(const char *why, void *arg);
	void			*over_limit_arg;
	/*
	 * Past the limit the audit stops and returns instead, all it took
	 * freed: sym_audit is false and the audit empty.  The fix search
	 * and run --shrink set it for the settings they try, which are no
	 * verdict: one past the limit exited 2 by itself, throwing away
	 * check's verdict of the config, which fit, or leaving run's
	 * process 0 gone while the others waited for it.
	 */
	bool			 over_limit_returns;
};

void	 sym_context_build(struct sym_context *, const struct config *);

/*
 * NULL when a valid config can be audited, else why not (written into
 * why, SYM_WHY_SIZE bytes suffice), with the key the message is about in
 * *blame.  Either the symbolic audit would not fit in memory (it keeps a value per parameter and rank holding
 * it, so thousands of layers on thousands of ranks would take tens of
 * gigabytes: blame the mesh), or the framework the config names would stop
 * at start-up on its layout, one of its asserts (blame the framework, or
 * the layout: keys): such a config trains nothing, and is a configuration
 * error rather than a verdict.  The model is built once for both.
 */
#define SYM_WHY_SIZE	1024
const char *sym_unauditable(const struct config *, enum cfg_key *blame,
		    char *why, size_t len);
/*
 * The same, with the mark of the plan: step at fault in *at when the
 * plan is (blame KEY_PLAN; line 0 otherwise): the message names it.
 */
const char *sym_unauditable_at(const struct config *, enum cfg_key *blame,
		    struct cfg_mark *at, char *why, size_t len);
/*
 * The same for a context already built: sweep builds one per mesh, and
 * building the model twice was a tenth of its time.
 */
const char *sym_context_unauditable(const struct sym_context *,
		    const struct config *, enum cfg_key *blame, char *why,
		    size_t len);
void	 sym_context_free(struct sym_context *);
/*
 * The audit of ctx went past its memory_limit, why says how: the hook
 * is called, or why printed and the program ended, exit 2; this returns
 * only when ctx->over_limit_returns, for the audit to stop.
 */
void	 sym_context_over_limit(const struct sym_context *, const char *why);
/*
 * GRADAUDIT_MAX_MEMORY, if set, is a number of MiB the audit may take:
 * NULL, or why not.  The commands that audit ask before any config, so
 * that a bad value is told as the environment's, not at a config's line.
 */
const char *sym_memory_limit_invalid(char *why, size_t len);

#endif
