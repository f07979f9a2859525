/* Rendering an audit's text and JSON reports (tests/fuzz-render.c). */
#ifndef GRADAUDIT_FUZZ_RENDER_H
#define GRADAUDIT_FUZZ_RENDER_H

#include <stdio.h>

#include "symbolic/audit.h"

/* Every report compare can print of a, written to fp. */
void	 fuzz_render(FILE *, const struct audit *);

#endif
