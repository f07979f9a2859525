/*
 * Loading configuration documents: files of one config, lists and streams
 * of documents, with --set overrides, framework profiles and constraints
 * (load.c).
 */
#ifndef GRADAUDIT_LOAD_H
#define GRADAUDIT_LOAD_H

#include <stddef.h>

#include "config/config.h"

/*
 * Load every configuration in path (one document, or a sequence of
 * documents), apply the overrides in order, fill in defaults and validate.
 * A config's `framework:` resolves in the registry given (framework.h),
 * which the configs point into: the caller closes it after freeing them
 * (NULL: the configs name no framework).
 * On error, print "gradaudit: FILE:LINE:COL: KEY: what is wrong" to stderr
 * and return -1 (the caller exits EXIT_USAGE); the list is left empty.
 * Appends to *out on success and returns 0, after printing "gradaudit:
 * FILE:LINE:COL: warning: KEY has no effect without ..." for each key
 * the file or --set writes where nothing reads it (cfg_find_no_effect).
 */
int	 cfg_load(struct fw_registry *, const char *path,
	    const struct cfg_override *, size_t, struct config_list *out);

/*
 * cfg_load_as (config.h) for sweep, which sets the keys of varying
 * itself (the mesh, its --vary flags): a key whose effect depends on one
 * of those is not warned about.  NULL: warn about every key.
 */
int	 cfg_load_varying(struct fw_registry *, const char *path,
	    const char *copy,
	    const struct cfg_override *, size_t,
	    const struct keyset *varying, struct config_list *out);

/*
 * Load the configurations of text, len bytes named `name` in messages, as
 * cfg_load loads a file's, without printing a message: the error is only
 * kept, in out->error and out->error_key.  For a program that wrote the
 * text and says in its own words what is wrong (import).
 */
int	 cfg_load_quietly(struct fw_registry *, const char *name,
	    const char *text, size_t len, struct config_list *out);

/*
 * Report a problem found in a loaded config after loading (an audit too
 * large to hold) as the loader reports its own: "gradaudit:
 * FILE:LINE:COL: KEY: message" at key k, or at the document when the file
 * does not write k.  With keep, the message is also stored in *keep (as
 * config_list.error holds one): any old value there is freed and replaced.
 */
void	 cfg_error(const struct config *, enum cfg_key, char **keep,
	    const char *, ...) __attribute__((format(printf, 4, 5)));

/*
 * The same at mark m of the file, with no key: the message names what it
 * is about ("plan[2].params[0]: ...").
 */
void	 cfg_error_at(const struct config *, struct cfg_mark, char **keep,
	    const char *, ...) __attribute__((format(printf, 4, 5)));

/*
 * The name a config file gives its configs when they have none: its base
 * name without .yaml or .yml; xmalloc'd.
 */
char	*cfg_file_name(const char *path);

#endif
