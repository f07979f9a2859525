/*
 * The stale rows of the model layer (model/stale.h) as the audit's
 * result and its finding, for the symbolic audit and the numeric one
 * alike.
 */
#ifndef GRADAUDIT_STALEROWS_H
#define GRADAUDIT_STALEROWS_H

#include "symbolic/audit.h"

struct layout;
struct model;

/*
 * Record in a the rows no update reaches and, when there are some, the
 * finding that tells them (findings.c); returns how many ranks hold some.
 */
size_t	 sym_stale_rows(const struct model *, const struct layout *,
	    struct audit *);

#endif
