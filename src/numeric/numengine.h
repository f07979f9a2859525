/*
 * The state of the numeric engine (numeric.c): the mesh ranks this process
 * hosts, each with its weights, its local gradients and the values of its
 * stage program's slots, and what all ranks share: the placements of every
 * slot and the pipeline transfer in flight.  The kernels (kernels*.c) and
 * the interpreter (interpret.c) work on it.
 */
#ifndef GRADAUDIT_NUMENGINE_H
#define GRADAUDIT_NUMENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/mesh.h"
#include "model/placement.h"
#include "numeric/collective.h"
#include "numeric/numvalue.h"
#include "numeric/transport.h"

struct config;
struct model;
struct op;
struct weight_source;
struct loss_norm;

/* One (token, expert) pair a source rank routes, and its owner. */
struct moe_item {
	int	 token;
	int	 expert;
	int	 owner;
};

/* What an OP_EXPERTS forward leaves for its backward, on one rank. */
struct moe_state {
	/* As a source: its pairs in (token, expert) order, expert outputs. */
	struct moe_item	*items;
	int		 nitems;
	union num	*o;		/* nitems x hidden */
	/* As an owner: the pairs received, in inbox order. */
	struct moe_item	*work;		/* owner field holds the source */
	int		 nwork;
	union num	*u, *h, *a;	/* nwork x hidden, x ffn/etp, x ffn/etp */
};

/* engine.seed of the auxiliary losses' pass: no OP_LOSS has this shift. */
#define SEED_AUX	(-1)

struct slot {
	struct tensor	 t;
	int		*choice;	/* OP_ROUTE: top_k experts per token */
};

struct rank_state {
	int		 rank;
	struct coord	 coord;
	int		 batch;		/* whose inputs: the dp index */
	struct slot	*act;		/* forward values, per slot */
	struct tensor	*grad;		/* gradients, per slot */
	struct tensor	 din[2];	/* backward of the current op */
	union num	**weight;	/* per model param, NULL if not held */
	union num	**pgrad;	/* local gradients, per model param */
	/*
	 * Expert gradients kept per source (lossnorm.h): [param][j], j the
	 * source's index in the ep group; NULL when not kept apart.
	 */
	union num	***src_grad;
	/*
	 * With the dp group's counts (lossnorm.h aux_global): per router
	 * param, the group's tokens per expert of each micro-batch of the
	 * step, [m * experts + e]; NULL otherwise.
	 */
	union num	**aux_counts;
	struct moe_state *moe;		/* per op of the stage program */
};

struct engine {
	const struct model		*model;
	const struct config		*cfg;
	/* The numerics of the audit (numvalue.h), its weight source's. */
	enum arith			 arith;
	struct coll_comm		 comm;		/* ranks[] for rounds */
	struct rank_state		*ranks;
	int				 nranks;
	const struct weight_source	*weights;
	/* Valid tokens per chunk: the audited model's, for the reference too. */
	const struct loss_norm		*loss;
	int				*key;		/* per param */

	/* Placements, the same on every rank: per stage, per slot. */
	struct placement		**act_place;
	struct placement		**grad_place;
	bool				**grad_set;

	/* The pipeline transfer in flight between two stages. */
	struct inbox			 pipe;
	bool				 pipe_full;
	struct placement		 pipe_place;
	/*
	 * Reduce every MoE block input's gradient as its placement says,
	 * whatever sync.moe_input_grad declares: the pass that gives the
	 * plain atoms of the parameters before a lossy boundary (atom.h).
	 */
	bool				 boundary_reduced;
	/*
	 * The loss a backward pass seeds: 0 the main model's, k the loss of
	 * multi-token prediction layer k, SEED_AUX the MoE auxiliary losses
	 * (at every router, bwd_route), each with atoms of its own
	 * (lossnorm.h).
	 */
	int				 seed;
	/*
	 * How a router's forward fills aux_counts: all-reduced over the dp
	 * group (the audited ranks), or, on the reference's one rank, each
	 * chunk's own counts added into its micro-batch's (a pass over the
	 * step's chunks first), then kept while the step runs.
	 */
	enum { AUX_COUNT_GROUP, AUX_COUNT_ADD, AUX_COUNT_KEEP } aux_counting;
	/*
	 * The gradient placements the placement rules gave the inputs of
	 * the op whose backward runs (pl_backward): a kernel executes them
	 * rather than read the settings behind them again (issue 22).
	 */
	struct placement		 din_place[2];
};

/*
 * The ranks[] of a process (of the transport, or rank 0 of the single-rank
 * reference with a NULL transport) with weights drawn from ws, zero
 * gradients and empty slots.  key[p] is the weight key (numdata.h) of
 * param p; ranks and key are borrowed.
 */
void		 engine_init(struct engine *, const struct model *,
		    struct transport *, const int *ranks, int nranks,
		    const struct weight_source *ws, int *key);
void		 engine_free(struct engine *);
/* Empty a rank's slots and expert state, for another micro-batch. */
void		 rank_clear(struct engine *, struct rank_state *);
void		 moe_state_free(struct moe_state *);

/* Op opi of the program of stage `stage`. */
const struct op	*engine_op(const struct engine *, int stage, int opi);
bool		 rank_on_stage(const struct rank_state *, int stage);

/* Zero t on a rank that does not keep it (pl_keeps_value). */
void		 engine_mask_to(const struct coord *c, struct tensor *t,
		    struct placement from, struct placement to);

#endif
