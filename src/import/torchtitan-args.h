/*
 * torchtitan main's command line, as `gradaudit import torchtitan
 * --module M --config C [--SECTION.KEY VALUE ...]` takes it (issue 28):
 * the words a user gives torchtitan.train (run_train.sh passes its own
 * "$@" through), read as torchtitan reads them.
 *
 * ConfigManager._load_config (torchtitan/config/manager.py, from
 * 9810191bb) takes --module and --config out, in their "--x V" and
 * "--x=V" forms; tyro parses the rest over the registry entry's config:
 * "--a.b V", "--a.b=V", "-" and "_" alike in names, a boolean as the flag
 * "--a.b" or "--a.no_b" (or "--a.no-b"), a list as the words up to the
 * next option.  Each override becomes a TOML-like entry (toml.h) with its
 * origin, so that torchtitan.c maps it with the same key table as a
 * train config's keys.  The registry's own entries are written in this
 * syntax too (torchtitan-registry.c) and read by the same parser.
 */
#ifndef GRADAUDIT_TORCHTITAN_ARGS_H
#define GRADAUDIT_TORCHTITAN_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "import/toml.h"

struct tt_args {
	char			*module;	/* --module, or NULL */
	char			*config;	/* --config, or NULL */
	/* The overrides, in order, a later one of a key replacing it. */
	struct toml_doc		 doc;
	/* What was wrong, one line each, "\n"-ended; NULL: nothing. */
	char			*problems;
	int			 nproblems;
};

/*
 * Read words[0..n).  origin_prefix, when not NULL, starts each entry's
 * origin ("llama3_8b " for a registry entry's settings); else the origin
 * is the option as spelled ("--parallelism.tensor_parallel_degree").
 * model.* is a registry entry's own (model_spec is no option of the
 * command line: tyro.conf.Suppress): refused unless allow_model.  Every
 * problem is collected; returns their number.
 */
int	 tt_args_parse(char *const *words, size_t n, const char *origin_prefix,
	    bool allow_model, struct tt_args *);
void	 tt_args_free(struct tt_args *);

/*
 * Set, or replace, the entry of e's path in doc with e (which doc then
 * owns): a later override wins, as tyro's last value does.
 */
void	 tt_args_put(struct toml_doc *doc, struct toml_entry *e);

#endif
