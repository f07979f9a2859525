/*
 * torchtitan main's config registry, as `gradaudit import torchtitan
 * --module M --config C` reads it (issue 28).  9810191bb (PR #2386,
 * 2026-02-23) replaced the TOML train configs by Python functions, one
 * per entry, in torchtitan/models/M/config_registry.py, selected on the
 * command line by --module and --config.  What each entry sets that the
 * importer needs is data here (torchtitan-registry.c), read at the
 * commits of main's windows (frameworks/torchtitan.yaml), each row
 * citing its file and the windows it holds for.
 */
#ifndef GRADAUDIT_TORCHTITAN_REGISTRY_H
#define GRADAUDIT_TORCHTITAN_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "config/framework.h"

struct tt_entry {
	const char	*module;	/* --module: "llama3" */
	const char	*config;	/* --config: "llama3_8b" */
	/* The windows (their commits) it holds for: since..until, NULL
	 * until: the newest. */
	const char	*since, *until;
	const char	*source;	/* the file and commits read */
	/*
	 * What the entry's function sets, as the command line would say
	 * it (torchtitan-args.h): "--model.flavor 8B --training.seq_len
	 * 8192 ...".
	 */
	const char	*settings;
};

/*
 * The places of main's history below (at) are indices into the history of
 * p's framework, as fw_history_at gives them for --framework: p is the
 * window, at the commit inside it whose code the command line is read for.
 */

/*
 * The entry module/config of window p at commit at, or NULL.  *known is
 * set when some window has it (the name is right, the window is not).
 */
const struct tt_entry *tt_registry_find(const char *module,
		    const char *config, const struct fw_profile *p, int at,
		    int *known);

/* "llama3_8b llama3_70b ..." of module at p and at (every module's when
 * it has none), into buf. */
void	 tt_registry_names(const char *module, const struct fw_profile *p,
	    int at, char *buf, size_t size);

/*
 * A key of the command line that main's code at commit at does not have
 * (added later, or removed or renamed before): why, naming the commit
 * and what to give instead; or NULL.
 */
const char *tt_registry_absent(const char *path, const struct fw_profile *p,
	    int at);

/*
 * parallelism.spmd_backend's default at commit at: the value with which
 * it changes nothing ("default", then "spmd_types" from 5ab3a0fd1).
 */
const char *tt_registry_spmd_default(const struct fw_profile *p, int at);

/*
 * Whether TrainingConfig counts tokens at commit at: from 73aed7f6c (PR
 * #4121) a micro-batch is num_tokens_per_microbatch_per_dp_rank tokens,
 * no longer local_batch_size samples of seq_len.
 */
bool	 tt_registry_folded(const struct fw_profile *p, int at);

#endif
