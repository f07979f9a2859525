/*
 * Gradient atoms: what the symbolic engine writes every value in.  An atom
 * is one rank's local gradient contribution (of one micro-batch, and for
 * experts kept per source of one source rank, or of the auxiliary or
 * multi-token prediction losses); a held atom is what a rank accumulates
 * past a lossy MoE block boundary.  The atom space of one audit says how
 * ids decode; it is a value of that audit (issue 22).
 */
#ifndef GRADAUDIT_ATOM_H
#define GRADAUDIT_ATOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/lossnorm.h"
#include "model/mesh.h"
#include "symbolic/lincomb.h"

struct arena;

/*
 * Atom ids: (rank * sources + source) * K + m.  With one micro-batch and
 * one source an atom is its rank, as in a config without either.
 */
struct atom_space {
	int		 sources;
	int		 aux_source;
	bool		 aux_global;	/* its atoms count the dp group */
	int		 mtp_source, mtp;
	int		 mtp_split_source;	/* lossnorm.h */
	int		 expert_sources;	/* ep when kept per source */
	int		 micro_batches;
	struct mesh	 mesh;
	struct rational	*factor;	/* loss_norm.coef, per chunk */
	int		 nfactors;
	bool		 weighted;	/* factors differ (atom_space_weighted) */
	/* loss_norm.mtp_coef, [(layer - 1) * nfactors + chunk]. */
	struct rational	*mtp_factor;
	bool		 mtp_weighted;	/* some layer's factors differ */
};

/*
 * A parameter past a lossy MoE block boundary (model.h, param.boundary)
 * has a second atom per chunk: "h5" is what rank 5 accumulates with the
 * boundary as declared, "g5" what it would with the boundary reduced as
 * the placement rules say.  Held atoms follow every plain one:
 * atom_held(a) = a + world * sources * K.
 */
uint32_t	 atom_held(const struct atom_space *, uint32_t);
bool		 atom_is_held(const struct atom_space *, uint32_t);
/* The plain atom of a held one (a itself if plain). */
uint32_t	 atom_plain(const struct atom_space *, uint32_t);

/*
 * The atom space of one audit: built with its symbolic context
 * (symbolic.h), copied into the audit it reports (audit.h), and passed to
 * everything that names or reads atoms, so that audits of different
 * configs never share one (issue 22: a process-wide space made
 * `run A B` print A's expressions in B's atoms).
 */
void		 atom_space_init(struct atom_space *);
void		 atom_space_build(struct atom_space *,
		    const struct loss_norm *, const struct mesh *);
void		 atom_space_free(struct atom_space *);
/* A copy whose factors live in the arena (nothing to free). */
void		 atom_space_copy(struct atom_space *dst,
		    const struct atom_space *src, struct arena *);
/* Room for an atom's name with a short prefix. */
#define ATOM_NAME_SIZE	48

/* True when every atom is a rank (one source, one micro-batch). */
bool		 atom_space_trivial(const struct atom_space *);
int		 atom_space_micro_batches(const struct atom_space *);
int		 atom_space_sources(const struct atom_space *);
/*
 * True when the chunks' loss factors differ (none zero), or those of a
 * multi-token prediction layer do: a value may then be written as a sum
 * weighted by them (meshsum.h).  The first alone, and the second alone.
 */
bool		 atom_space_weighted(const struct atom_space *);
bool		 atom_space_main_weighted(const struct atom_space *);
bool		 atom_space_mtp_weighted(const struct atom_space *);
/*
 * The framework's factor of the atom's chunk, in atom units: the main
 * loss's (loss_norm.coef), or its layer's for a multi-token prediction
 * atom (loss_norm.mtp_coef); the source's chunk for an expert atom kept
 * per source.
 */
struct rational	 atom_loss_factor(const struct atom_space *, uint32_t);
/*
 * Is the atom weighed by atom_loss_factor in a weighted sum?  Not the
 * auxiliary losses' (one factor for every chunk), nor an atom of factor 0
 * or of a kind whose factors are all alike.
 */
bool		 atom_weighs(const struct atom_space *, uint32_t);
/*
 * atom_weighs, and when true its atom_loss_factor into *factor: both in
 * one reading of the atom, for the reports that weigh every term of a
 * value (meshsum.c).
 */
bool		 atom_weight(const struct atom_space *, uint32_t,
		    struct rational *factor);
/* The chunks (lossnorm_chunk numbers them) and each one's loss factor. */
int		 atom_space_chunks(const struct atom_space *);
struct rational	 atom_chunk_factor(const struct atom_space *, int chunk);
/* Layer `layer`'s (1..D) factor of a chunk. */
struct rational	 atom_mtp_chunk_factor(const struct atom_space *, int layer,
		    int chunk);
uint32_t	 atom_id(const struct atom_space *, int rank, int source,
		    int m);
int		 atom_rank(const struct atom_space *, uint32_t);
int		 atom_source(const struct atom_space *, uint32_t);
int		 atom_micro_batch(const struct atom_space *, uint32_t);
/* The source of the auxiliary losses' atoms, or -1 (lossnorm.h). */
int		 atom_space_aux_source(const struct atom_space *);
/* The multi-token prediction layer (1..D) of an atom, or 0. */
int		 atom_mtp_layer(const struct atom_space *, uint32_t);
/*
 * For an expert atom kept per source, the ep coordinate of the tokens'
 * source ("g5s3": rank 3 is that coordinate's member of rank 5's ep
 * group); -1 for any other atom.  How many such sources there are: ep
 * when expert atoms are kept per source, else 0.
 */
int		 atom_expert_source(const struct atom_space *, uint32_t);
int		 atom_space_expert_sources(const struct atom_space *);
/*
 * "g5", "g5m1" (micro-batch 1 of rank 5, with K > 1), "g5s3m1" (rank 5's
 * expert gradient from the tokens of rank 3), "g5am1" (rank 5's gradient
 * of the auxiliary losses of its micro-batch 1), "g5t2m1" (of the loss of
 * multi-token prediction layer 2), "g5s3t2m1" (of that layer's loss of
 * rank 3's tokens); a held atom is named "h5".
 */
void		 atom_name(const struct atom_space *, char *buf,
		    size_t size, const char *prefix, uint32_t atom);


/*
 * x without its terms of atoms below `first`, and of the held atoms of
 * those (lossnorm.h): x where those atoms are known to be zero (the padded
 * rows of a word embedding's lookups).
 */
const struct lincomb *lc_from_atom(struct arena *, const struct atom_space *,
		    const struct lincomb *x, uint32_t first);

/*
 * x with each held atom written as its plain one: x where the two are
 * known to be equal (the padded rows of a tied word embedding, which only
 * the output layer's gradient reaches, and that crosses no lossy boundary).
 */
const struct lincomb *lc_plain(struct arena *, const struct atom_space *,
		    const struct lincomb *x);

/*
 * x without its terms of atoms (plain or held) of `source`: x where those
 * atoms are known to be zero (the auxiliary losses' on a word embedding's
 * padded rows, which no lookup reaches).
 */
const struct lincomb *lc_without_source(struct arena *,
		    const struct atom_space *, const struct lincomb *x,
		    int source);

/*
 * Print in the style of the Megatron report: terms with equal coefficients
 * grouped, groups in decreasing order of coefficient, atoms in rank order
 * inside a group: "g3+(g0+g1)/2", "(g0+g1+g2+g3)/2", "3*(g0+g1)/4",
 * "g0-g1/2", "0".  A group of one atom needs no parentheses ("g1/2").
 * Atoms print as prefix followed by the rank ("g").  Returns a string
 * allocated in the arena.
 */
const char	*lc_format(struct arena *, const struct atom_space *,
		    const struct lincomb *, const char *prefix);

#endif
