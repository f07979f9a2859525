/*
 * DTensor-style placements over the tensor-parallel group, and the forward
 * and backward placement rule of every op kind of model.h.
 *
 * Inside an MoE layer the tp group of size tp is really a 2-D mesh: tp/etp
 * token slices (each handled by one expert-tensor-parallel group, SPEC
 * section 4) times etp.  A placement therefore has one state per
 * sub-dimension; outside MoE layers both carry the same state.  A
 * sub-dimension of size 1 is always Replicate.
 *
 * Both engines walk the stage programs with these rules: the symbolic engine
 * to learn the true placement of every parameter gradient (which decides
 * which ranks share an atom, and whether a collective is missing or
 * doubled), the numeric engine to know how to sum a mix of Partial and
 * Replicate contributions correctly at the MoE block boundary.
 */
#ifndef GRADAUDIT_PLACEMENT_H
#define GRADAUDIT_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model.h"

enum place {
	PLACE_REPLICATE,	/* every rank of the sub-group holds the whole value */
	PLACE_PARTIAL,		/* the value is the sum over the sub-group */
	PLACE_SHARD_TOKENS,	/* rows (tokens) split over the sub-group (SP) */
	PLACE_SHARD_FEATURES	/* columns split over the sub-group */
};

struct placement {
	enum place	slice;	/* over the tp/etp token slices */
	enum place	etp;	/* over the etp ranks of one slice */
};

struct placement pl_uniform(enum place);
/* Sub-dimensions of size 1 become Replicate. */
struct placement pl_normalize(const struct mesh *, struct placement);
/* Placement of a sum a + b (Replicate parts become Partial if needed). */
struct placement pl_join(struct placement, struct placement);
bool		 pl_equal(struct placement, struct placement);
bool		 pl_any(struct placement, enum place);
/*
 * Does a value on the rank at c keep its value when its placement goes
 * from `from` to `to`?  Adding a Replicate part to a Partial one (DTensor's
 * Replicate -> Partial conversion, the sync plan's mask step) keeps it on
 * coordinate 0 of that tp sub-dimension and zero elsewhere, so the eventual
 * sum counts it once.  Decided here for both engines (issue 22): the
 * symbolic mask step and the numeric kernels zero the same ranks.
 */
bool		 pl_keeps_value(const struct coord *c, struct placement from,
		    struct placement to);
/*
 * "Replicate", "Partial", or for a mix "Partial over the token slices,
 * Replicate over etp"; sub-dimensions of size 1 are left out.  Writes into
 * buf and returns it.
 */
const char	*pl_format(const struct mesh *, struct placement, char *buf,
		    size_t len);

/*
 * A reduction that the framework performs (or skips) inside backward, as
 * the rules saw it: the true placement of the tensor and what the framework
 * declares.  A Partial declared Replicate is a missing reduction; a
 * Replicate declared Partial is a double count.
 */
/* The report a backward reduction models; findings.c puts it in words. */
enum reduction_cite {
	REDUCTION_CITE_EXPERT_INPUT,	/* torchtitan #1878 */
	REDUCTION_CITE_MOE_BOUNDARY,	/* torchtitan #2387 / PR #2416 */
	REDUCTION_CITE_OUTPUT_BOUNDARY,	/* torchtitan PR #3412 */
	REDUCTION_CITE_ROUTER_SHARE,	/* transformers PR #48205 */
	REDUCTION_CITE_MIXER_INPUT,	/* slime PR #1748 */
	REDUCTION_CITE_SCORES_DETACHED	/* NeMo Automodel PR #2995 */
};

struct backward_reduction {
	int			 op;		/* index in the stage program */
	int			 stage;
	const char		*what;		/* "routed expert input gradient" */
	const char		*dim;		/* "etp" */
	enum reduction_cite	 cite;
	struct placement	 truth;
	struct placement	 declared;
	/*
	 * The MoE block boundary (sync.moe_input_grad), and whether what it
	 * declares loses contributions: each rank keeps only its own share,
	 * and some of the gradient of the rows it keeps was computed on other
	 * tp ranks (torchtitan #2387 / PR #2416).
	 */
	bool			 boundary;
	bool			 lost;
	/*
	 * Why a boundary is lost, each cause its own finding: the Replicate
	 * declaration keeps Partial shares (missing); a Partial declaration
	 * sums a part already complete on every tp rank (summed_whole,
	 * torchtitan de329200b's boundary); the router's all-reduce met a
	 * complete gradient inside the block (router_twice,
	 * sync.router_input_grad).  lost is any of them.
	 */
	bool			 missing;
	bool			 summed_whole;
	bool			 router_twice;
	int			 layer;		/* the boundary's MoE layer */
	/*
	 * The plan's declare: that decided the declared placement (the
	 * output layer's input, activation: output), or -1.
	 */
	int			 plan_item;
};

/*
 * The reductions inside backward that a framework performs or skips, each
 * decided here once from its sync.* setting: the placement rules below use
 * them, and the numeric kernels execute them, so that the two engines
 * cannot disagree on them by construction (issue 22).
 *
 * pl_expert_input_reduced: the routed experts' input gradient is
 * all-reduced over etp (torchtitan #1878; sync.expert_input_grad).
 * pl_router_input_reduced: the router's input gradient is all-reduced over
 * tp by NoParallel's from_local(Replicate) (torchtitan de329200b;
 * sync.router_input_grad).  pl_moe_boundary: how the gradient of an MoE
 * block's gathered input is declared (sync.moe_input_grad).
 */
bool		 pl_expert_input_reduced(const struct model *);
bool		 pl_router_input_reduced(const struct model *);
enum moe_input_sync pl_moe_boundary(const struct model *);
/*
 * pl_activation_declare: the index of the plan's declare: of activation
 * a's gradient (PLAN_ACTIVATION_*), or -1 when the plan declares none and
 * it is reduced as its placement says.  Declared Replicate, the output
 * layer's input gradient goes on into the layers before it with no sum
 * over tp (torchtitan's ChunkedCELoss before PR #3412).
 */
int		 pl_activation_declare(const struct model *, int a);
/*
 * model.moe.ep_on: tp-mask (issue 25): every tp rank routes all its
 * tokens and runs only the pairs of its own experts.  pl_block_grad_summed:
 * the plan declares activation a's gradient inside the block Partial, so
 * it is summed over tp there (PLAN_ACTIVATION_ROUTER_SCORES,
 * PLAN_ACTIVATION_EXPERTS_INPUT).  pl_route_scores_grad: the placement of
 * the scores' gradient the router's backward works from, after that sum.
 */
bool		 pl_tp_mask(const struct model *);
/*
 * Which tokens each rank dispatches to the experts (model.moe.ep_on), the
 * one decision both engines read: the token slices [*first, *first +
 * *count) of its tp group's tokens (mesh.slices of them, contiguous rows).
 * all-to-all: its own slice.  tp-mask: every slice, of whose pairs it
 * runs only its own experts'.  tp-replicated (NeMo Automodel 41ccabac4,
 * PR #2995): every slice, to every expert's owner, as each of its tp
 * peers does, so every expert computes each token once per tp rank.
 * pl_tp_replicated: that last mode, with more than one slice.
 * pl_dispatch_twin: the rank of `rank`'s tp group, of the lowest tp
 * coordinate, that dispatches the same pairs as `rank` (`rank` itself
 * but under tp-replicated): the atoms of an expert's gradient from the
 * tokens of either are one (symbolic/run.c).
 */
void		 pl_dispatched_slices(const struct model *,
		    const struct coord *, int *first, int *count);
bool		 pl_tp_replicated(const struct model *);
int		 pl_dispatch_twin(const struct model *, int rank);
bool		 pl_block_grad_summed(const struct model *, int a);
struct placement pl_route_scores_grad(const struct model *, struct placement);
bool		 pl_output_boundary_replicate(const struct model *);
/*
 * model.duplicated_mixer: how the backward of the gather of the mixer's
 * input treats its gradient, complete and alike on every tp rank since
 * each computed the whole mixer: PLAN_DECLARE_PARTIAL sums it over tp as
 * it is (reduce-scatters it under sequence parallelism), tp times what
 * it is (slime before PR #1748, gather_from_sequence_parallel_region's
 * tensor_parallel_output_grad=True); PLAN_DECLARE_REPLICATE keeps each
 * rank's own (its sequence shard of it), which is whole (after PR
 * #1748); -1, undeclared: each replica counted once, as the rules say.
 */
int		 pl_mixer_input_declared(const struct model *);

/*
 * The plan declares the router's score gradient detached (NeMo Automodel
 * before PR #2995 gathered the routing weights over ep with a plain
 * dist.all_gather, over ep, so only where ep > 1): nothing of the
 * scores' gradient reaches the router, the auxiliary losses' included,
 * which enter at the scores (MoEAuxLossAutoScaler).  pl_walk makes it a
 * lossy boundary at the router (held atoms, atom.h); the numeric engine
 * zeroes the scores' gradient and skips the auxiliary losses' seed in
 * the step as configured (kernels-moe.c).
 */
bool		 pl_scores_detached(const struct model *);

/* The rules: forward placement of an op's output from its inputs. */
struct placement pl_forward(const struct model *, const struct op *,
		    const struct placement *in);
/*
 * Backward: from the gradient placement of the op's output, the gradient
 * placements of its inputs (din[0..1]) and of its parameter(s) (dparam[0..1],
 * Replicate/Partial over tp; Shard means "each rank holds its own shard,
 * complete").  fwd_in are the forward placements of the inputs.  When the
 * op performs a reduction inside backward, *reduction is filled and true is
 * returned.
 */
bool		 pl_backward(const struct model *, const struct op *,
		    const struct placement *fwd_in, struct placement dout,
		    struct placement *din, struct placement *dparam,
		    struct backward_reduction *reduction);

/*
 * Walk every stage program forward and backward with the rules above.
 * Fills grad[] (one per model parameter: the true placement of its local
 * gradient over tp) and appends to *reductions the backward-time reductions
 * met on the way (caller frees).
 */
void		 pl_walk(const struct model *, struct placement *grad,
		    struct backward_reduction **reductions, int *nreductions);

/*
 * Mark every parameter whose gradient the unreduced input gradient of a
 * lossy MoE block boundary reaches (param.boundary): everything the
 * backward walk meets after it, on its stage and on the stages before.
 */
void		 pl_mark_boundaries(struct model *,
		    const struct backward_reduction *, int nreductions);

#endif
