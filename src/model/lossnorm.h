/*
 * The loss of one optimizer step and how a framework normalizes it: the
 * valid tokens of every micro-batch on every data-parallel rank, the
 * reference objective, and the factor each rank's loss is multiplied by.
 *
 * The data of a step is a set of chunks, one per (micro-batch m, dp rank d
 * of the dp_cp group): chunk m * dp + d holds `tokens` token slots (the
 * cp rank's share of micro_batch * seq), of which `valid[chunk]` come
 * first and carry a loss; the rest are padding and contribute nothing.
 *
 * The atoms of the symbolic audit are gradients of chunks: atom
 * (rank r, source j, micro-batch m) is 1/tokens times the gradient, on
 * rank r, of the summed loss of the valid tokens of micro-batch m of the
 * source's chunk.  Source 0 is the rank's own chunk (every dense
 * parameter); when the ranks of an expert-parallel group scale their
 * losses differently, or the objective weighs their tokens differently
 * (lossnorm.c, sources_differ), an expert's gradient is kept apart per
 * source, j = 1 + the source's index in the ep group.  Then:
 *
 *   reference	sum of every atom times tokens / N, N the valid tokens of
 *		the step: the gradient of the mean over all valid tokens;
 *   framework	rank r's local gradient is the sum over m (and sources) of
 *		coef[chunk] times the atom: what loss.normalize_by and
 *		loss.scale make of the summed loss, in atom units.
 *
 * The MoE auxiliary losses (the load-balancing loss and the z-loss, with
 * their coefficients) have atoms of their own, source aux_source, on every
 * parameter they reach (model_has_aux): the routers and, through each
 * router's input, every parameter upstream of one in the op graph (issue
 * 25), as autograd carries them in the frameworks.  Atom (r, aux_source,
 * m) is the gradient on rank r of the auxiliary losses of micro-batch m
 * of r's chunk, each a mean over the chunk's token slots (kernels-moe.c
 * has the stand-in), with every tp, sp, cp and pipeline reduction the
 * main loss's gradient gets on its way.  The objective's
 * auxiliary term is the mean over micro-batches and data-parallel ranks of
 * each micro-batch's auxiliary loss over its whole sequence (every cp
 * rank's tokens), so every aux atom's expected weight is aux_expected =
 * 1/chunks, and a framework multiplies it by aux_coef (loss.aux_scale).
 *
 * Those atoms count the tokens routed to each expert, c_e, and the token
 * slots T, over the chunk (Megatron's aux_loss, counted over tp_cp).  With
 * loss.aux_type global-aux-loss (Megatron's global_aux_loss) the counts
 * are the dp group's, C_e and T_G = T dp (dp the dp_cp group's size),
 * summed by a forward all-reduce, and each micro-batch m uses the mean of
 * the counts of micro-batches 0..m of the step (router.py keeps their
 * running sum).  Its atom is another one, aux_global: the gradient on
 * rank r of a E/k sum_e (C_e / T_G) (sum_t p[t,e]) / T over r's own
 * tokens t, the global fraction routed to e times the local mean score.
 * The objective's term with global counts is the same fraction times
 * the mean score of the global batch, so the expected weight stays
 * 1/chunks; Megatron divides by T_G^2 instead of T_G T, which puts a
 * factor T / T_G = 1/dp on that atom, pure_dp once the tp_cp part
 * aux_factor already holds is taken out.  Counts of one kind against an
 * objective of the other are refused by the loader (aux_objective_fits):
 * their gradients are different atoms, neither a multiple of the other.
 *
 * The multi-token prediction losses (model.mtp, depth D) have atoms of
 * their own too, sources mtp_source + k - 1 for layer k, on every
 * parameter: atom (r, mtp_source + k - 1, m) is 1/tokens times the
 * gradient on rank r of the summed loss of layer k over the chunk's
 * rolled mask (mtp_valid of its slots are valid).  The objective's term
 * of layer k is mtp_loss_scaling_factor / D times the mean over the
 * step's N_k rolled valid tokens, so the atom's expected weight is
 * mtp_expected[k - 1] = tokens x factor / (D N_k), and a framework
 * multiplies it by mtp_coef (loss.mtp_scale).  Where expert atoms are
 * kept per source, an expert's atoms of layer k are too (sources
 * mtp_split_source on), each at its source chunk's factor: the ranks of
 * an ep group may scale a layer's loss differently where they scale the
 * main loss alike (local rolled counts, Megatron-LM #7452), and that
 * alone keeps them per source.
 *
 * The roll is Megatron's roll_tensor: every sample of a micro-batch
 * rolled by k along its whole sequence, the last k positions of each
 * sample filled with zeros (no label, masked), across the cp ranks from
 * core 0.14 on (08abeedbfe).  So a chunk's slots are placed in their
 * sequences as Megatron's get_batch_on_this_cp_rank places them: sample
 * after sample, seq / cp slots each, and with cp > 1 a sample's slots are
 * two pieces of seq / (2 cp) positions, pieces r and 2 cp - 1 - r of the
 * sequence on cp rank r.  A chunk's valid tokens are its first valid
 * slots in that order, so a sequence's mask may have holes, and a slot's
 * rolled label, token id and mask come from another cp rank's chunk.
 */
#ifndef GRADAUDIT_LOSSNORM_H
#define GRADAUDIT_LOSSNORM_H

#include <stdbool.h>
#include <stdint.h>

#include "base/rational.h"
#include "config/config.h"
#include "model/mesh.h"

struct loss_norm {
	int		 micro_batches;	/* K */
	int		 chunks;	/* K * mesh.dp */
	int64_t		 tokens;	/* token slots of a chunk */
	int		*valid;		/* per chunk */
	int64_t		 total;		/* N: valid tokens of the step */
	struct rational	*coef;		/* per chunk, in atom units */
	struct rational	 expected;	/* tokens / N, every atom's weight */
	/*
	 * The objective's weight of each chunk's atoms (loss.objective):
	 * tokens / N for the per-token mean (then every weight is
	 * `expected`), tokens / (K pure_dp n) for the mean of micro-batch
	 * means, n the micro-batch's valid tokens over its cp ranks, and
	 * tokens for the sum.  Both engines read it (symbolic/run.c, numeric.c).
	 */
	struct rational	*weight;
	bool		 uniform;	/* every weight is weight[0] */
	/*
	 * Atom ids per rank: 1, or 1 + ep when expert gradients are kept
	 * per source (coefficients or objective weights differ inside an
	 * ep group, or tp-replicated dispatch).
	 */
	int		 sources;
	bool		 split;		/* expert atoms kept per source */
	bool		 replicated;	/* ... for tp-replicated dispatch */
	/* What of the config this loss cannot express, or NULL (mtp_build). */
	const char	*unmodelled;
	/*
	 * The auxiliary losses' atoms (-1: no auxiliary loss), the
	 * coefficients of the load-balancing and z-loss, the framework's
	 * factor and the reference's weight.
	 */
	int		 aux_source;
	struct rational	 aux_loss_coeff, z_loss_coeff;
	struct rational	 aux_coef, aux_expected;
	/*
	 * The counts of the load-balancing loss are the dp group's, a
	 * running mean over the step's micro-batches (aux_type
	 * global-aux-loss), not the chunk's.
	 */
	bool		 aux_global;
	/*
	 * The multi-token prediction layers (0: none), their atoms' first
	 * source (-1: none), mtp_loss_scaling_factor, the valid tokens of
	 * layer k's rolled mask in a chunk and the framework's factor,
	 * [(k - 1) * chunks + chunk], and the reference's weight per layer.
	 */
	int		 mtp;
	int		 mtp_source;
	/*
	 * With expert atoms kept per source, the experts' atoms of the
	 * layers: source mtp_split_source + (k - 1) * ep + i for layer k
	 * and the source of ep index i (-1: none).
	 */
	int		 mtp_split_source;
	/*
	 * Where the slots of a chunk sit in their sequences: samples of
	 * seq / cp slots, in pieces of `piece` positions (seq / (2 cp), or
	 * seq when cp is 1) over mesh cp, dp_cp chunks per micro-batch.
	 */
	int		 seq, cp, dp_cp;
	int		 piece;
	struct rational	 mtp_factor;
	int		*mtp_valid;
	struct rational	*mtp_coef;
	struct rational	*mtp_expected;
};

void	 lossnorm_build(struct loss_norm *, const struct config *,
	    const struct mesh *);
void	 lossnorm_free(struct loss_norm *);
/*
 * Multi-token prediction layer k's rolled data at slot t of chunk c (its
 * label, token id and mask): those of slot return value of chunk *from,
 * or -1 past the end of the slot's sequence.  k = 0 is the slot itself.
 */
int64_t	 lossnorm_rolled_slot(const struct loss_norm *, int c, int64_t t,
	    int k, int *from);
/* Does slot t of chunk c carry a loss of layer k's rolled mask (0: main)? */
bool	 lossnorm_slot_counts(const struct loss_norm *, int c, int64_t t,
	    int k);
/*
 * What a stated objective other than the per-token mean means, in one
 * line for the report's header (NULL for token-mean, the default).
 */
const char *lossnorm_objective_note(enum loss_objective);
/*
 * Does each chunk's loss factor, divided by `divisor` in the
 * data-parallel reduction (lossnorm_size of sync.dp_divisor), weigh its
 * atoms as the objective does: the main loss's, the multi-token
 * prediction layers' and the auxiliary losses' (true when the model has
 * none)?  What fix.c derives a loss's fix from, before it audits it.
 */
bool	 lossnorm_main_matches(const struct loss_norm *, int divisor);
bool	 lossnorm_mtp_matches(const struct loss_norm *, int divisor);
bool	 lossnorm_aux_matches(const struct loss_norm *, int divisor);
/* The default ("uneven") valid tokens of a chunk of `tokens` slots. */
int	 lossnorm_uneven_count(int64_t tokens, int chunk);
/*
 * The slots of chunk `chunk`, of `tokens` slots, that a mask of the share
 * num/den ("eod:N", "fraction:F": cfg_token_mask) takes away.
 */
int64_t	 lossnorm_masked_count(int64_t tokens, int chunk, int64_t num,
	    int64_t den);
/* The size loss.scale or sync.dp_divisor names: dp*cp, dp, cp or 1. */
int	 lossnorm_size(const struct mesh *, enum data_size);

/*
 * The objective's weight of chunk c's atoms.  The per-token mean, the
 * default, keeps no array: every weight is `expected`, and a chunk array
 * of 2^25 rationals would double the loss's memory at the size limit.
 */
static inline struct rational
lossnorm_weight(const struct loss_norm *ln, int c)
{
	return ln->weight != NULL ? ln->weight[c] : ln->expected;
}

/* The chunk of micro-batch m on the rank with dp_cp index d. */
static inline int
lossnorm_chunk(const struct mesh *mesh, int m, int d)
{
	return m * mesh->dp + d;
}

/*
 * The chunk, at micro-batch m, of the rank of ep index j in the ep group
 * of the rank at c (its pp, etp and expert-dp coordinates).  An expert
 * atom kept per source for j carries that chunk's factor and weight:
 * Megatron scales each rank's loss before the tokens are dispatched
 * (process_mtp_loss and the all-to-all dispatcher, core_v0.19.0).  Both
 * engines and the atom space ask here, so that they cannot disagree on
 * which rank's chunk it is.
 */
int	 lossnorm_source_chunk(const struct mesh *, const struct coord *c,
	    int j, int m);

/* The cp rank of chunk c (chunks number the cp rank fastest). */
static inline int
lossnorm_chunk_cp(const struct loss_norm *ln, int c)
{
	return c % ln->dp_cp % ln->cp;
}

#endif
