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
 * The entry module/config of window p (a profile of main), or NULL.
 * *known is set when some window has it (the name is right, the window
 * is not).
 */
const struct tt_entry *tt_registry_find(const char *module,
		    const char *config, const struct fw_profile *p,
		    int *known);

/* "llama3_8b llama3_70b ..." of module at p (every module's when it has
 * none), into buf. */
void	 tt_registry_names(const char *module, const struct fw_profile *p,
	    char *buf, size_t size);

/*
 * A key of the command line that window p no longer has: why (the commit
 * that removed it), or NULL.
 */
const char *tt_registry_removed(const char *path, const struct fw_profile *p);

#endif
