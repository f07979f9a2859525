/*
 * Rows of a weight that no optimizer step reaches (pytorch #176076).
 *
 * FSDP2 keeps, for every fully_shard group that manages a parameter, a
 * padded copy of the rank's shard that it all-gathers from.  When a tied
 * weight is wrapped in two groups (layout.tied_fsdp_groups: two) and the
 * model re-ties it after sharding, as torchtitan's init_weights does, the
 * second group's lazy init adopts the first group's sharded parameter
 * (_fsdp_param.py reset_sharded_param).  A rank whose shard fills the
 * padded size shares that storage, so the optimizer updates what both
 * groups gather.  A rank whose shard is short (the weight's dim 0 not a
 * multiple of the shard group) gets a fresh padded copy instead, and the
 * parameter's local tensor moves to it: the optimizer updates the second
 * group's copy, while the first group, the embedding's, keeps gathering
 * the old one.  Those rows of the embedding lookup never change.
 *
 * The gradients are right on every rank (both groups reduce into the one
 * parameter's .grad), so no gradient value shows it: the rows follow from
 * the FSDP2 layout alone, decided here once, and both engines' reports
 * take them from here.
 */
#ifndef GRADAUDIT_STALE_H
#define GRADAUDIT_STALE_H

#include <stddef.h>
#include <stdint.h>

struct layout;
struct model;

struct stale_rows {
	int	 rank;
	int	 param;		/* model parameter index: the tied weight */
	int	 member;	/* the rank's index in its shard group */
	int64_t	 lo, hi;	/* elements of the rank's local weight */
	int64_t	 row_lo, row_hi; /* rows of the logical weight, [lo, hi) */
};

/*
 * The ranks holding rows no update reaches, ascending, into *out (freed
 * by the caller; NULL when none); returns how many.  out may be NULL to
 * count them only.
 */
size_t	 stale_rows_find(const struct model *, const struct layout *,
	    struct stale_rows **out);

#endif
