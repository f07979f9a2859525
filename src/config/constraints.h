/*
 * The constraints of SPEC section 5 on a config (constraints.c).
 */
#ifndef GRADAUDIT_CONSTRAINTS_H
#define GRADAUDIT_CONSTRAINTS_H

#include <stddef.h>

#include "config/config.h"

/*
 * The first violated constraint of c, described in buf, and the key it
 * concerns; KEY__COUNT when c is valid.  The loader blames that key.
 */
enum cfg_key cfg_find_violation(const struct config *c, char *buf,
	    size_t size);
/*
 * Check the constraints of SPEC section 5 on an already loaded config whose
 * mesh or flags were changed (sweep).  Returns NULL when valid, otherwise
 * buf, holding a description of the failing constraint ("etp must divide
 * tp"); CFG_WHY_SIZE bytes hold any.
 */
const char *cfg_check_constraints(const struct config *, char *buf,
	    size_t len);

/*
 * The first key at or after row `from` of the table of keys without
 * effect that c writes (in the file or with --set) where it has none:
 * sets *key and *without, the key or value that would give it effect
 * ("model.moe"), and returns the row, for the next call's from + 1; -1
 * when there is none.  A row whose condition reads a key of varying
 * (NULL: none) is skipped: sweep sets those keys itself.
 */
int	 cfg_find_no_effect(const struct config *, const struct keyset *varying,
	    int from, enum cfg_key *key, const char **without);

#endif
