/*
 * The effect of a finding as a value (effect.h): its kinds' names and the
 * few words every report writer prints.  How an effect is measured from an
 * audit's cells is measure.c, above the audit it reads.
 */
#include <stdio.h>

#include "symbolic/effect.h"

static const char *const kind_names[] = {
	[EFFECT_NONE] = NULL,
	[EFFECT_FACTOR] = "factor",
	[EFFECT_WEIGHTS] = "weights",
	[EFFECT_NORM] = "norm",
	[EFFECT_DIFFERENCE] = "difference",
	[EFFECT_UNMEASURED] = "unmeasured",
};

const char *
effect_kind_name(enum effect_kind k)
{
	return kind_names[k];
}

void
effect_format(const struct effect *e, char *buf, size_t size)
{
	char	 lo[48], hi[48];

	switch (e->kind) {
	case EFFECT_NONE:
		snprintf(buf, size, "%s", "");
		break;
	case EFFECT_FACTOR:
		q_format(e->lo, lo, sizeof lo);
		snprintf(buf, size, "x%s", lo);
		break;
	case EFFECT_WEIGHTS:
		q_format(e->lo, lo, sizeof lo);
		q_format(e->hi, hi, sizeof hi);
		snprintf(buf, size, "weights x%s..x%s", lo, hi);
		break;
	case EFFECT_NORM:
		snprintf(buf, size, "norm^2 %+.3g%%", 100 * e->fraction);
		break;
	case EFFECT_DIFFERENCE:
		snprintf(buf, size, "relative difference %.3g", e->difference);
		break;
	case EFFECT_UNMEASURED:
		snprintf(buf, size, "%s", "unmeasured past a lossy boundary");
		break;
	}
}
