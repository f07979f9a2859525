/*
 * How much a finding matters (issue 23): how far the used values are from
 * the expected ones, so that a norm missing half its experts and a value
 * one ulp off no longer look alike.  Measured once per audit, after the
 * findings, from the cells and the norm classes alone; every report
 * writer prints the same effect.
 */
#ifndef GRADAUDIT_EFFECT_H
#define GRADAUDIT_EFFECT_H

#include <stddef.h>

#include "symbolic/lincomb.h"

enum effect_kind {
	EFFECT_NONE,		/* nothing to measure (not wrong, or no cells) */
	EFFECT_FACTOR,		/* one factor on every wrong value: lo (== hi) */
	EFFECT_WEIGHTS,		/* every contribution, weighed lo..hi times */
	EFFECT_NORM,		/* fraction of the norm squared extra or missing */
	EFFECT_DIFFERENCE,	/* the largest relative difference */
	EFFECT_UNMEASURED	/* past a lossy boundary, no numbers */
};

struct effect {
	enum effect_kind kind;
	struct rational	 lo, hi;	/* FACTOR, WEIGHTS */
	double		 fraction;	/* NORM: > 0 extra, < 0 missing */
	double		 difference;	/* DIFFERENCE */
};

/*
 * "x1/8", "weights x4/15..x1/2", "norm^2 +25%", "relative difference
 * 0.41": the effect in a few words, into buf (empty for EFFECT_NONE).
 */
void	 effect_format(const struct effect *, char *buf, size_t size);
/* "factor", "weights", "norm", "difference", "unmeasured" or NULL. */
const char *effect_kind_name(enum effect_kind);

#endif
