/*
 * A parameter's cells grouped as the reports print them (cells.c).
 */
#ifndef GRADAUDIT_REPORT_CELLS_H
#define GRADAUDIT_REPORT_CELLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/lincomb.h"
#include "symbolic/meshsum.h"

/*
 * A piece that is self for some ranks, those whose key under mask is
 * key; sum: what making it and the entries before it self adds to the
 * value's hash (a prefix sum, so that a run of entries adds a
 * difference of two).
 */
struct self_entry {
	unsigned	 mask;
	uint64_t	 key;
	size_t		 piece;
	uint64_t	 sum;
};

/*
 * The pieces of each lincomb, by pointer: lincombs are shared.  Ranks
 * compare a value relative to themselves by which of its pieces are
 * "self" for them; the memo keeps those pieces by (mask, key), sorted,
 * so that a rank finds its own in one search per mask, and the hash
 * with no piece self, to which a rank's self pieces add: a value of dp
 * pieces (each dp rank's micro-batch sums, MTP with cp) held by dp ranks
 * was read piece by piece on every one of them, dp squared (issue 24).
 */
struct piece_memo {
	const struct lincomb	*x;
	struct ms_piece		*p;
	size_t			 n;
	uint64_t		 base;
	struct self_entry	*self;
	size_t			 nself;
	unsigned		*masks;
	size_t			 nmasks;
};

struct piece_cache {
	struct piece_memo	**slot;	/* memos stay put when it grows */
	size_t			  cap, used;
	/*
	 * The caller's, to share what it knows of values alike between
	 * parameters, or NULL: then one of the cache's own, made by the
	 * first value.
	 */
	struct ms_grouper	 *grouper;
	bool			  own_grouper;
};

/*
 * A cell with its pieces, as its group compares it: relative to rank
 * self ("self" terms), or as they are when self is -1.
 */
struct cell_key {
	const struct cell		*c;
	const struct piece_memo		*v, *e;
	int				 self;
};

struct cell_group {
	struct cell_key	 key;		/* of its first cell */
	int		*ranks;		/* ascending */
	size_t		 nranks;
};

/*
 * The groups of p's cells (only the wrong ones if wrong_only) in order of
 * their first cell; *n: how many.  First the ranks holding the very same
 * value; then those groups whose ranks all read it alike relative to
 * themselves are merged by that reading, "self": the average over each
 * rank's own dp group is one group for the whole mesh, g0/64 on rank 0
 * and g1/64 on rank 1 share one, while (g0+...+g62)/64 on 64 ranks stays
 * one group written by its atoms (g0 is rank 0's own, not rank 1's).
 */
struct cell_group *cells_group(const struct atom_space *sp,
	    const struct param_result *p, struct piece_cache *pc,
	    bool wrong_only, size_t *n);
const struct piece_memo *cells_pieces_of(struct piece_cache *pc,
	    const struct atom_space *sp, const struct lincomb *x);
void	 cells_piece_cache_free(struct piece_cache *pc);

#endif
