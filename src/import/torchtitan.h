/*
 * A torchtitan train config (its TOML file, v0.1.0 to v0.2.2), read as a
 * gradaudit configuration: what `gradaudit import torchtitan CONFIG.toml`
 * does (issue 28).
 *
 * Every key of torchtitan's JobConfig that gradaudit knows is in one table
 * (torchtitan.c) with one of three fates: it sets configuration keys, it
 * cannot change gradient synchronization and is ignored with the reason,
 * or it changes the synchronization in a way gradaudit cannot model and
 * the import is refused naming it.  A key the table does not know is
 * refused too.  Every problem of a file is reported in one run.
 */
#ifndef GRADAUDIT_TORCHTITAN_H
#define GRADAUDIT_TORCHTITAN_H

#include <stdbool.h>

#include "config/config.h"
#include "import/toml.h"

struct torchtitan_import {
	/* Given by the caller. */
	int		 world;		/* --world, 0: not given */
	/* The release whose flavour tables apply ("0.2.2"); NULL: any. */
	const char	*version;
	/*
	 * The entries come from main's registry and command line
	 * (torchtitan-args.h), not a TOML file: the keys are main's
	 * Trainer.Config's, and each entry names its origin.
	 */
	bool		 registry;
	/*
	 * main from 73aed7f6c (PR #4121): TrainingConfig counts a
	 * micro-batch's tokens (num_tokens_per_microbatch_per_dp_rank,
	 * num_tokens_per_train_step, max_context_length and the pipeline's
	 * num_pp_microbatches), not samples of seq_len tokens.
	 */
	bool		 folded;
	/* parallelism.spmd_backend's default at the commit read; NULL:
	 * "default". */
	const char	*spmd_default;
	/* Problems the caller already said (the command line's): the
	 * import then only adds its refusals, and returns -1. */
	int		 prior_errors;

	/*
	 * The result: the keys set are the `given` bits of cfg, and for each
	 * of them why[k] says which TOML keys it came from, for a comment.
	 */
	struct config	 cfg;
	char		*why[KEY__COUNT];
};

/*
 * Read the parsed file.  Errors, notes and the list of ignored keys go to
 * stderr, each line starting with "gradaudit: import: ".  Returns 0, or
 * -1 when a key is refused or invalid: then only the refusals were
 * printed, and cfg is not to be used.
 */
int	 torchtitan_import(struct torchtitan_import *, const struct toml_doc *);
void	 torchtitan_import_free(struct torchtitan_import *);

#endif
