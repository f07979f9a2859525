/*
 * The model of SPEC section 4 as one description that two interpreters
 * read: the symbolic engine (placements and exact combinations of gradient
 * atoms) and the numeric engine (real values on MPI ranks).
 *
 * The description has two parts.  The parameters, one entry per instance a
 * stage holds (a tied word embedding has two instances, embedding.weight on
 * the first stage and output.weight on the last, that form one logical
 * parameter).  And one program per pipeline stage: the forward ops in order,
 * reading and writing numbered activation slots.  Backward is the same
 * program walked in reverse; every op kind's forward and backward rules live
 * in placement.c (placements, both engines) and kernels.c (values).
 */
#ifndef GRADAUDIT_MODEL_H
#define GRADAUDIT_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/lossnorm.h"
#include "model/mesh.h"

struct config;

enum param_role {
	ROLE_EMBEDDING,		/* [vocab, hidden], rows over tp (vocab-parallel) */
	ROLE_NORM,		/* [hidden], replicated over tp */
	ROLE_HEAD_NORM,		/* [head_dim], replicated, shared by every head */
	ROLE_KV,		/* [kv_heads * head_dim, hidden], replicated: kv_heads < tp */
	ROLE_OUT_NORM,		/* [head_dim], replicated, heads' outputs */
	ROLE_SINK,		/* [heads], one a head, split with the heads */
	ROLE_COLUMN,		/* [out, in], rows over tp (column-parallel) */
	ROLE_ROW,		/* [out, in], columns over tp (row-parallel) */
	ROLE_ROUTER,		/* [experts, hidden], replicated over tp */
	ROLE_GATE,		/* [1, hidden], a shared expert's gate, replicated */
	ROLE_DUPLICATED,	/* [out, in], a duplicated mixer's linear, replicated */
	ROLE_EXPERT_FC1,	/* [experts, expert_ffn, hidden]: dim 0 over ep, dim 1 over etp */
	ROLE_EXPERT_FC2,	/* [experts, hidden, expert_ffn]: dim 0 over ep, dim 2 over etp */
	ROLE_OUTPUT		/* [vocab, hidden], rows over tp (vocab-parallel) */
};

/* One parameter instance, held by every rank of one pipeline stage. */
struct param {
	char		*name;		/* "layers.3.moe.router.weight" */
	int		 index;		/* position in model.params (registration order) */
	int		 logical;	/* index in model.logical */
	int		 stage;		/* pipeline stage holding it */
	int		 chunk;		/* model chunk of the stage (mesh.vpp) */
	int		 layer;		/* layer number, -1 outside the layers */
	enum param_role	 role;
	int		 ndims;
	int64_t		 shape[3];	/* logical (unsharded) shape */
	int64_t		 local_shape[3]; /* one rank's shard */
	int64_t		 elems;		/* product of shape (logical) */
	int64_t		 local_elems;	/* product of local_shape */
	bool		 expert;	/* expert buffer, reduced over edp */
	/*
	 * Megatron marks norm weights (and the shared-expert gate,
	 * 1fa9464e7c) with `sequence_parallel` when sequence parallelism is
	 * on; _allreduce_layernorm_grads then all-reduces their gradients
	 * over tp (Megatron #1446).
	 */
	bool		 sequence_parallel;
	/*
	 * A norm outside the transformer layers (final_norm): Megatron
	 * #1446 is a sequence-parallel reduction that missed exactly these.
	 */
	bool		 standalone;
	/*
	 * The MoE block boundary (a backward_reduction of placement.h, by
	 * index) whose unreduced input gradient reaches this parameter's
	 * gradient, or -1 (torchtitan #2387 / PR #2416).  Such a parameter
	 * has two atoms per chunk: its gradient with the boundary reduced as
	 * the placement rules say, and the one its rank accumulates.
	 */
	int		 boundary;
	/*
	 * The MoE auxiliary losses' gradient reaches it (issue 25): a
	 * router, or a parameter upstream of one in the op graph, whose
	 * gradient the aux terms reach through the router's input, as
	 * autograd carries them from the scores in Megatron
	 * (MoEAuxLossAutoScaler) and torchtitan.  Only with an aux loss.
	 */
	bool		 aux;
};

/* A logical parameter: the unit of the report (a tied pair is one). */
struct logical_param {
	const char	*name;		/* first instance's name */
	const char	*tied_with;	/* second instance's name, or NULL */
	int		 instance[2];	/* indices in model.params */
	int		 ninstances;
};

enum op_kind {
	OP_TOKENS,	/* first stage: the micro-batch's token ids -> out */
	OP_RECV,	/* other stages: activation from the previous stage -> out */
	OP_EMBED,	/* vocab-parallel lookup: out = E[ids] on the owning tp rank (Partial) */
	OP_TP_REDUCE,	/* Megatron "g": all-reduce over tp, or reduce-scatter on seq with SP */
	OP_TP_GATHER,	/* Megatron "f": identity, or all-gather on seq with SP; backward reduces */
	OP_NORM,	/* out = norm(in) * w, elementwise over hidden */
	OP_LINEAR_COL,	/* out = in W^T with W's rows over tp: Replicate -> Shard(features) */
	OP_ACT,		/* elementwise activation */
	OP_HEAD_NORM,	/* qk-norm: out[t][j] = in[t][j] * w[j % head_dim] on head-sharded features */
	OP_KV,		/* out = in[0] + its heads' key/value heads of in[1] W^T */
	OP_SINK,	/* sink: out[t][j] = in[t][j] * w[local head of j] */
	OP_LINEAR_ROW,	/* out = in W^T with W's columns over tp: Shard(features) -> Partial */
	OP_ADD,		/* out = in[0] + in[1] (residual) */
	OP_ROUTE,	/* scores = in W_r^T and the top-k choice -> out */
	OP_EXPERTS,	/* routed experts: in[0] = block input, in[1] = scores -> out (Partial) */
	OP_GATE,	/* shared-expert gate: out = in[1] * s(in[0] w^T), per token */
	OP_OUTPUT,	/* vocab-parallel logits: Replicate -> Shard(vocab) */
	OP_LOSS,	/* squared error against the targets; seeds backward */
	OP_SEND		/* other than the last stage: activation to the next stage */
};

struct op {
	enum op_kind	 kind;
	int		 param;		/* parameter used, or -1 */
	int		 param2;	/* OP_EXPERTS: fc2 (param is fc1); else -1 */
	int		 in[2];		/* input slots, -1 when unused */
	int		 out;		/* output slot, -1 for OP_LOSS and OP_SEND */
	const char	*label;		/* "layers.1.moe.experts", for explain */
	bool		 moe_input;	/* OP_TP_GATHER of an MoE block's input */
	/*
	 * OP_TP_GATHER of the output layer's input: its gradient is what a
	 * plan's declare: with activation: output declares.
	 */
	bool		 output_input;
	/*
	 * OP_TP_GATHER of a duplicated mixer's input (model.duplicated_mixer):
	 * its gradient is what a plan's declare: with activation:
	 * mixer-input declares.
	 */
	bool		 mixer_input;
	/*
	 * OP_TP_GATHER of an input already gathered: identity forward, a tp
	 * all-reduce of its gradient backward, whatever sequence parallelism
	 * does (ColwiseParallel's from_local(Replicate) on torchtitan's
	 * shared experts before PR #2416).
	 */
	bool		 reduce_only;
	/*
	 * OP_TOKENS and OP_LOSS of multi-token prediction layer k: k (the
	 * token ids rolled by k, the loss over the rolled mask); 0 for the
	 * main model's.
	 */
	int		 shift;
};

/*
 * A stage's ops.  With a virtual pipeline (mesh.vpp chunks a stage) they
 * are its chunks' programs one after the other: chunk c is the ops from
 * chunk_start[c] to chunk_start[c + 1], each begun by a RECV (or the
 * tokens) and ended by a SEND (or the loss).  The forward pass runs the
 * chunks in the model's layer order, chunk-major: (chunk 0, stage 0),
 * (chunk 0, stage 1), ..., (chunk 1, stage 0), ...; backward reversed.
 */
struct stage_program {
	struct op	*ops;
	int		 nops;
	int		 nslots;
	int		*chunk_start;	/* chunks + 1 entries */
};

struct model {
	const struct config	*config;
	struct mesh		 mesh;
	int			 tokens;	/* micro_batch * seq / cp a rank */
	struct loss_norm	 loss;		/* valid tokens and loss factors */
	struct param		*params;	/* registration order */
	int			 nparams;
	struct logical_param	*logical;
	int			 nlogical;
	struct stage_program	*stages;	/* pp entries */
	int			 chunks;	/* model chunks a stage */
};

/* The gradient buffer unit of a parameter: its stage's chunk. */
static inline int
model_unit(const struct model *m, const struct param *p)
{
	return p->stage * m->chunks + p->chunk;
}

void	 model_build(struct model *, const struct config *);
void	 model_free(struct model *);

const char *op_kind_name(enum op_kind);

/*
 * Which part of a parameter a rank holds: the element at local index i of
 * rank `rank` is the element model_global_index(...) of the logical tensor.
 * Both engines use this to compare a rank's shard with the reference.
 */
int64_t	 model_global_index(const struct model *, const struct param *,
	    int rank, int64_t local_index);
/*
 * The instance of param's logical parameter that `rank` holds (a tied
 * embedding: embedding.weight on the first stage, output.weight on the
 * last), or -1 when it holds none.
 */
int	 model_instance_on(const struct model *, int param, int rank);
/*
 * Are p's gradients kept per source (lossnorm.h)?  And how many atoms a
 * rank holding p has: one per micro-batch, times the sources if so; D
 * more with D multi-token prediction layers (times the sources too); and
 * one more per micro-batch for a parameter the auxiliary losses reach.
 */
bool	 model_per_source(const struct model *, const struct param *);
int	 model_atoms_per_rank(const struct model *, const struct param *);
/*
 * Does p get the multi-token prediction losses' gradient?  Every
 * parameter does when model.mtp > 0 (lossnorm.h).
 */
bool	 model_has_mtp(const struct model *, const struct param *);
/*
 * Does p get the auxiliary losses' gradient (a router or a parameter
 * upstream of one, lossnorm.h)?
 */
bool	 model_has_aux(const struct model *, const struct param *);
/*
 * Where atoms of `source` are among a rank's atoms of p, in units of K
 * (micro-batches): the expert source's index, the auxiliary losses'
 * atoms after the ep sources, then the layers' per source; or 1 for the
 * auxiliary losses' atoms, then one per multi-token prediction layer,
 * else 0.
 */
int	 model_atom_slot(const struct model *, const struct param *,
	    int source);
/* True when `rank` holds an instance of param (it is on the param's stage). */
bool	 model_rank_holds(const struct model *, const struct param *, int rank);

/*
 * Ranks that hold the same part of a logical parameter share a shard key:
 * the tp coordinate for tp-sharded weights, the expert coordinates for
 * expert weights, 0 for replicated ones.
 */
int	 model_shard_key(const struct model *, const struct param *,
	    const struct coord *);

#endif
