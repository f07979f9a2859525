/*
 * A linear combination of gradient atoms written by mesh groups: the terms
 * that share a coefficient and together make a whole group of the mesh
 * (every rank with some coordinates fixed) become one piece, "sum over dp
 * of pp7 tp0", instead of 64 atoms.  The reports use it so that their size
 * follows the number of groups, not the square of the world (issue 10: a
 * 4,096-rank report listed every atom of every cell, 415 MB of JSON).
 */
#ifndef GRADAUDIT_MESHSUM_H
#define GRADAUDIT_MESHSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/mesh.h"
#include "symbolic/lincomb.h"

struct arena;

/*
 * The coordinates a piece can sum over, in the order they are printed: the
 * mesh's, the micro-batch of an atom (atom.h), "mb", and for expert atoms
 * kept per source, the ep coordinate of the tokens' source, "src".
 */
enum ms_dim { MS_PP, MS_DP, MS_TP, MS_EP, MS_ETP, MS_EDP, MS_MB, MS_SRC,
	MS__COUNT };

struct ms_piece {
	struct rational	 coef;
	uint32_t	 atom;		/* the lowest atom of the piece */
	uint32_t	 n;		/* its number of atoms */
	/*
	 * The class every atom of the piece shares: its loss (atom.h: 0 for
	 * the main loss, else the auxiliary losses' or a multi-token
	 * prediction layer's source; expert atoms kept per source are one
	 * class, their source a coordinate) and whether the atoms are held
	 * ones.  A group sums atoms of one class only, and its name says
	 * which ("sum_dp(pp0,t1)"): written atom by atom, a DeepSeek-V3
	 * shape's JSON report at 2,048 ranks was over 36 GB (issue 24).
	 */
	int		 source;
	bool		 held;
	/*
	 * Bits (1 << enum ms_dim) of the coordinates summed over; 0 for a
	 * single atom.  The other coordinates of the view (pp, dp, tp for a
	 * dense group; pp, ep, etp, edp for an expert one) are those of atom.
	 */
	unsigned	 varied;
	unsigned	 fixed;		/* bits of the coordinates held fixed */
	/*
	 * Each atom of the group weighted by its chunk's loss factor
	 * (atom_loss_factor): "wsum_dp_mb(self)".  A framework that divides
	 * each chunk by a count of its own (a mean of means) gives every atom
	 * another coefficient; written atom by atom a 4,096-rank JSON report
	 * was 418 MB, and weighted it is a group again.
	 */
	bool		 weighted;
};

/*
 * The largest world whose reports name atoms one by one: up to it a value
 * reads as the #844 report's tables do ("g0+g1+g2+g3"); above it every
 * rank's value differs from its neighbours' unless written relative to the
 * rank, so explain folds its tables and meshsum tries weighted pieces.
 */
#define MS_ATOMS_WORLD	64

/*
 * The pieces of x, xmalloc'd, in decreasing coefficient order and by
 * lowest atom within a coefficient; *n gets their number.  Larger groups
 * are preferred, so the whole world is one piece when it can be.  When the
 * chunks' loss factors differ (atom_space_weighted) and the plain pieces
 * are long to write, the pieces are also tried weighted by them, and the
 * fewer pieces win.
 */
struct ms_piece	*ms_pieces(const struct atom_space *,
		    const struct lincomb *x, size_t *n);
/*
 * ms_pieces with what depends on the atom space alone (the candidate
 * groups, the coordinates' sizes) computed once, not once a value: a
 * report groups tens of thousands of values of one space (issue 24).  The
 * grouper must not outlive the space.
 */
struct ms_grouper;

struct ms_grouper *ms_grouper_new(const struct atom_space *);
struct ms_piece	*ms_grouper_pieces(struct ms_grouper *,
		    const struct lincomb *x, size_t *n);
/*
 * The same pieces, the grouper's own (valid until it is freed; do not
 * free them): explain groups a value per rank, and the ranks of a class
 * hold the very same one, so copying them for each rank was waste.
 */
const struct ms_piece *ms_grouper_find(struct ms_grouper *,
		    const struct lincomb *x, size_t *n);
void		 ms_grouper_free(struct ms_grouper *);

/*
 * Relative to a rank: a piece is "self" for rank r when it is r's own
 * atom, or the group r belongs to (its fixed coordinates are r's).  The
 * reports write such pieces as "self", so that every rank whose value is,
 * say, the average over its own dp group holds the same written value and
 * the ranks can share one cell object.  A rank of -1 is no rank.
 */
bool		 ms_piece_is_self(const struct atom_space *,
		    const struct ms_piece *, int rank);
/*
 * The same decision as a key, so that a report finds a rank's self
 * pieces among a value's many without asking each one (a value of dp
 * pieces on each of dp ranks, issue 24): false when the piece is self
 * for no rank, else it is for exactly the ranks r with
 * ms_rank_key(sp, r, *mask) == *key.  MS_SELF_RANK: the rank itself.
 */
#define MS_SELF_RANK	(1u << 31)
bool		 ms_piece_self_key(const struct atom_space *,
		    const struct ms_piece *, unsigned *mask, uint64_t *key);
uint64_t	 ms_rank_key(const struct atom_space *, int rank,
		    unsigned mask);
/* Whether atom is one of the piece's. */
bool		 ms_piece_has(const struct atom_space *,
		    const struct ms_piece *, uint32_t atom);
/*
 * "dp" or "dp tp": the summed coordinates; "" for an atom.  A weighted
 * piece is named by the same sum ("wsum" in ms_piece_name, its coefficient
 * "wcoef" in JSON).
 */
void		 ms_piece_sum(const struct ms_piece *, char *, size_t);
/*
 * "pp7 tp0": the fixed coordinates of size > 1 with their values; "" for
 * the whole world; "g5" for an atom; "self" when ms_piece_is_self.
 */
void		 ms_piece_of(const struct atom_space *,
		    const struct ms_piece *, int rank, char *, size_t);
/*
 * The pieces in report notation, coefficients grouped as lc_format does:
 * "(sum_dp(pp0,tp0)+sum_dp(pp7,tp0))/64", "g3+sum_tp(pp0,dp1)/2",
 * "sum_all()" for the whole world, and relative to rank, "self/64" or
 * "sum_dp(self)/64"; a weighted piece "wsum_dp_mb(self)/4".  Allocated in
 * the arena.
 */
const char	*ms_format(struct arena *, const struct atom_space *,
		    const struct ms_piece *, size_t n, int rank);
/* One piece in that notation, without coefficient: "sum_dp(pp7,tp0)". */
void		 ms_piece_name(const struct atom_space *,
		    const struct ms_piece *, int rank, char *, size_t);

#endif
