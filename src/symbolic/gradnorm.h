/*
 * The gradient norm that clipping divides by, as data: which elements of
 * its gradients each rank squares into its partial sums (a dense one and an
 * expert one, as Megatron's ChainedOptimizer keeps them), and the ordered
 * all-reduces of those partial sums over mesh groups.  The config's
 * grad_norm: section only chooses the rows; the symbolic engine (here) and
 * the numeric engine (numeric.c) both execute the same plan.
 *
 * The symbolic audit counts, for every rank, how many times each (logical
 * parameter, shard, element range, value) enters its norm squared after the
 * all-reduces.  The expected norm squared counts every logical element
 * once, with its expected gradient.  A rank's norm is correct when its
 * count is exactly that; ranks clip consistently when they all compute the
 * same norm.  The bugs it models are class GN of the catalogue: torchtitan
 * #596, Megatron PR #5916 and #7227, TransformerEngine PR #715, DeepSpeed
 * #8469 and PR #8613, Colossal-AI #2192, VeOmni PR #862, SpecForge PR #663
 * and the BLOOM-176B clipping on one tp rank.
 */
#ifndef GRADAUDIT_GRADNORM_H
#define GRADAUDIT_GRADNORM_H

#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "model/mesh.h"

struct audit;
struct model;
struct sym_context;

/* Which partial sum a step reduces. */
enum gn_part {
	GN_PART_DENSE,		/* the dense optimizer's parameters */
	GN_PART_EXPERT,		/* the expert optimizer's (own buffer) */
	GN_PART_TOTAL,		/* dense + expert, after their own steps */
	GN_PART__COUNT
};

struct gn_step {
	enum gn_part	 part;
	enum group_kind	 group;
	bool		 average;	/* AVG instead of SUM */
	enum cfg_key	 key;		/* the setting that decides it, or
					   KEY_GRAD_NORM: it always runs */
	const char	*label;		/* "all-reduce of the dense norm over tp" */
};

#define GN_MAX_STEPS	8

struct gn_plan {
	struct gn_step	 steps[GN_MAX_STEPS];
	int		 nsteps;
	/*
	 * Expert parameters with a buffer of their own form the expert part;
	 * those in the dense buffer belong to the dense optimizer.
	 */
	bool		 expert_part;
};

void	 gn_plan_build(struct gn_plan *, const struct sym_context *);
/* "all-reduce (sum) over tp of the dense norm squared" */
void	 gn_step_describe(const struct gn_step *, char *, size_t);

/*
 * The part of the norm of the rank at coordinates c that parameter
 * instance param's used elements go into, or -1 when the rank leaves them
 * out.
 */
int	 gn_part_of(const struct gn_plan *, const struct model *, int param,
	    const struct coord *);
/* Does the rank clip at all (BLOOM-176B: tp rank 0 only)? */
bool	 gn_clips(const struct model *, int rank);

/*
 * The symbolic norm audit on an audit sym_audit has filled: sets
 * audit->grad_norm, adds its findings, and clears audit->correct or
 * consistent when a norm is wrong or the ranks clip differently.  It
 * counts its memory against GRADAUDIT_MAX_MEMORY as the run does: false,
 * what it took of its own freed, when it went past it and the context
 * returns there (over_limit_returns).
 */
bool	 gn_audit(const struct sym_context *, struct audit *);

#endif
