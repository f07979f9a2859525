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

#endif
