/*
 * The sentences of the fixes (fix.h): the settings of a fix, its prose
 * with what the framework's profile decided, and the alternatives.
 */
#ifndef GRADAUDIT_FIXTEXT_H
#define GRADAUDIT_FIXTEXT_H

#include "symbolic/audit.h"
#include "symbolic/fixer.h"

const struct fix_setting *fixtext_settings(struct audit *a,
	    const struct candidate *c);
const char *fixtext_fix(struct fixer *fx, const struct finding *f,
	    const struct candidate *fix, const struct candidate *alt);
const char *fixtext_prose(struct audit *a, const struct finding *f);
const char *fixtext_alternative(struct audit *a, const struct finding *f,
	    const struct candidate *alt);

#endif
