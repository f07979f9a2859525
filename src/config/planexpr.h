/*
 * The factor of a plan step (issue 25): "1/micro_batches", "dp*cp",
 * "(tp/etp)/2" -- integers, the mesh and step sizes by name, `*`, `/`
 * and parentheses, evaluated exactly as a rational (planexpr.c).  It is
 * read when the config is loaded, for its errors, and evaluated when the
 * sync plan is built, with that config's sizes: a sweep or a shrink that
 * changes the mesh changes the factor with it.
 */
#ifndef GRADAUDIT_PLANEXPR_H
#define GRADAUDIT_PLANEXPR_H

#include <stddef.h>
#include <stdint.h>

#include "base/rational.h"

/* The sizes an expression may name, in plan_expr_names[] order. */
enum plan_name {
	PLAN_NAME_DP, PLAN_NAME_CP, PLAN_NAME_PP, PLAN_NAME_TP, PLAN_NAME_EP,
	PLAN_NAME_ETP, PLAN_NAME_EDP, PLAN_NAME_VPP, PLAN_NAME_DP_SHARD,
	PLAN_NAME_DP_REPLICATE, PLAN_NAME_MICRO_BATCHES, PLAN_NAME_GTP,
	PLAN_NAME_EGTP,
	PLAN_NAME__COUNT
};

extern const char *const plan_expr_names[PLAN_NAME__COUNT + 1];

/* Longest expression, deepest nesting and largest integer literal. */
#define PLAN_EXPR_MAX_LEN	256
#define PLAN_EXPR_MAX_DEPTH	32
#define PLAN_EXPR_MAX_INT	1000000000

/*
 * Evaluate s (len bytes) with the sizes values[] (PLAN_NAME__COUNT of
 * them, each at least 1), or with every size 1 when values is NULL, which
 * finds every error that does not depend on the sizes.  Returns 0 and the
 * value in *out, or -1 with the 0-based byte offset of the fault in *at
 * and what is wrong in why.
 */
int	 plan_expr_eval(const char *s, size_t len, const int64_t *values,
	    struct rational *out, size_t *at, char *why, size_t whylen);

#endif
