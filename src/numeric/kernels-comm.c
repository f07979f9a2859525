/*
 * The stage kernels of the numeric engine (kernels.c) whose ops are
 * communication: Megatron's tp collectives "f" and "g", with and without
 * sequence parallelism, and the pipeline transfers between stages.  They
 * work on every local rank of the stage at once, around the rounds of
 * collective.h.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "model/mesh.h"
#include "model/model.h"
#include "model/placement.h"
#include "numeric/collective.h"
#include "numeric/kernels-internal.h"
#include "numeric/numengine.h"
#include "numeric/numvalue.h"

/* in[i]: the tensor in slot `slot` of local rank i, NULL off the stage. */
static struct tensor **
stage_tensors(struct engine *eng, int stage, int slot, bool grad)
{
	struct tensor	**t;
	int		  i;

	t = xcalloc((size_t)eng->nranks, sizeof(*t));
	for (i = 0; i < eng->nranks; i++)
		if (rank_on_stage(&eng->ranks[i], stage))
			t[i] = grad ? &eng->ranks[i].grad[slot] :
			    &eng->ranks[i].act[slot].t;
	return t;
}

/*
 * The three shapes of a tp collective on activations: sum over tp, sum
 * and keep my token shard (SP), gather every token shard (SP).
 */
enum tp_collective {
	TP_IDENTITY,
	TP_KEEP_SHARD,
	TP_ALL_REDUCE,
	TP_REDUCE_SCATTER,
	TP_ALL_GATHER
};

/* dst[i] (alloc'd here) = collective over src[i], for the stage's ranks. */
static void
tp_collective(struct engine *eng, enum tp_collective kind,
    struct tensor **src, struct tensor *dst)
{
	struct tensor	**t;
	int		  i;

	/* A cp rank's sequences are seq / cp long (Megatron's CP slice). */
	int		  seq = eng->cfg->model.seq / eng->model->mesh.cp;

	if (eng->model->mesh.tp == 1 && kind != TP_IDENTITY)
		kind = TP_IDENTITY;
	switch (kind) {
	case TP_REDUCE_SCATTER:
		coll_reduce_scatter_tokens(&eng->comm, seq, src, dst);
		return;
	case TP_ALL_GATHER:
		coll_all_gather_tokens(&eng->comm, seq, src, dst);
		return;
	case TP_KEEP_SHARD:
		coll_keep_tokens(&eng->comm, seq, src, dst);
		return;
	case TP_IDENTITY:
	case TP_ALL_REDUCE:
		break;
	}
	t = xcalloc((size_t)eng->nranks, sizeof(*t));
	for (i = 0; i < eng->nranks; i++)
		if (src[i] != NULL) {
			tensor_copy(&dst[i], src[i]);
			t[i] = &dst[i];
		}
	if (kind == TP_ALL_REDUCE)
		coll_all_reduce_tensors(&eng->comm, t);
	free(t);
}

/* Run a tp collective from slot `from` into out[i] (then moved by caller). */
static void
stage_tp_collective(struct engine *eng, int stage, int from, bool grad,
    enum tp_collective kind, struct tensor *out)
{
	struct tensor	**src;

	src = stage_tensors(eng, stage, from, grad);
	tp_collective(eng, kind, src, out);
	free(src);
}

/*
 * A tp collective on one slot of every rank of the stage, stored as the
 * activation `out_slot` (forward) or, when out_slot < 0, as the op's input
 * gradient (backward).
 */
static void
stage_tp_apply(struct engine *eng, int stage, int from, bool grad,
    enum tp_collective kind, int out_slot)
{
	struct tensor	*out;
	int		 i;

	out = xcalloc((size_t)eng->nranks, sizeof(*out));
	stage_tp_collective(eng, stage, from, grad, kind, out);
	for (i = 0; i < eng->nranks; i++) {
		if (!rank_on_stage(&eng->ranks[i], stage))
			continue;
		if (out_slot >= 0)
			eng->ranks[i].act[out_slot].t = out[i];
		else
			eng->ranks[i].din[0] = out[i];
	}
	free(out);
}

/*
 * Is a tensor placed as sequence parallelism places it, a shard of the
 * tokens on each tp rank?  The tp collectives execute the placements the
 * rules decided (placement.c: the residual stream between blocks, the
 * gradient of an "f"), instead of reading training.sequence_parallel
 * again, so the two engines cannot disagree on it (issue 22).  Either
 * sub-dimension says so: one of size 1 is normalized to Replicate (a
 * single token slice when etp = tp).
 */
static bool
token_shard(struct placement pl)
{
	return pl.slice == PLACE_SHARD_TOKENS || pl.etp == PLACE_SHARD_TOKENS;
}

/* Megatron "g": all-reduce over tp, reduce-scatter on tokens with SP. */
void
fwd_tp_reduce(struct engine *eng, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);
	bool		 sp = token_shard(eng->act_place[stage][op->out]);

	/*
	 * A Replicate input, a duplicated mixer's output, is only cut back
	 * to the rank's shard (scatter_to_sequence_parallel_region): the
	 * rules' placement says so, as it says what the gather's backward
	 * gets (model.duplicated_mixer).
	 */
	if (!pl_any(eng->act_place[stage][op->in[0]], PLACE_PARTIAL)) {
		stage_tp_apply(eng, stage, op->in[0], false, sp ?
		    TP_KEEP_SHARD : TP_IDENTITY, op->out);
		return;
	}
	stage_tp_apply(eng, stage, op->in[0], false, sp ? TP_REDUCE_SCATTER :
	    TP_ALL_REDUCE, op->out);
}

void
bwd_tp_reduce(struct engine *eng, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	/* The tokens the forward scattered are gathered back. */
	stage_tp_apply(eng, stage, op->out, true,
	    token_shard(eng->act_place[stage][op->out]) ? TP_ALL_GATHER :
	    TP_IDENTITY, -1);
}

/*
 * Megatron "f": its output is Replicate; an input sharded on tokens (SP)
 * is all-gathered, any other passes as it is (an input gathered already,
 * reduce_only).
 */
void
fwd_tp_gather(struct engine *eng, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	stage_tp_apply(eng, stage, op->in[0], false,
	    token_shard(eng->act_place[stage][op->in[0]]) ? TP_ALL_GATHER :
	    TP_IDENTITY, op->out);
}

/*
 * Backward of "f": the incoming gradient can be a sum of contributions of
 * different placements (router, routed and shared experts of an MoE
 * block).  Every Replicate sub-dimension becomes Partial first, so the sum
 * over tp counts each replica once (SPEC section 6.2), unless the MoE
 * block boundary declares the gradient otherwise (KEY_MOE_INPUT_GRAD).
 */
void
bwd_tp_gather(struct engine *eng, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	struct placement	 from = eng->grad_place[stage][op->out];
	struct rank_state	*rs;
	/* The rules' gradient of the input: a token shard under SP. */
	bool			 sp = token_shard(eng->din_place[0]);
	int			 i;

	/*
	 * An MoE block input declared Replicate (torchtitan before PR
	 * #2416, use_local_input=True): each rank keeps its own local
	 * gradient, its own sequence shard of it under SP, summed with
	 * nothing.
	 */
	if (op->moe_input && !eng->boundary_reduced &&
	    pl_moe_boundary(eng->model) == MOE_INPUT_REPLICATE) {
		stage_tp_apply(eng, stage, op->out, true, sp ? TP_KEEP_SHARD :
		    TP_IDENTITY, -1);
		return;
	}
	/*
	 * The output layer's input declared Replicate by the plan
	 * (torchtitan's ChunkedCELoss before PR #3412 wrapped the chunks'
	 * Partial gradients with the hidden states' Replicate placement):
	 * likewise kept as it is, nothing summed.
	 */
	if (op->output_input && !eng->boundary_reduced &&
	    pl_output_boundary_replicate(eng->model)) {
		stage_tp_apply(eng, stage, op->out, true, sp ? TP_KEEP_SHARD :
		    TP_IDENTITY, -1);
		return;
	}
	/*
	 * A duplicated mixer's input as the plan declares it (slime PR
	 * #1748): Partial, the complete local gradients summed as they are
	 * (tensor_parallel_output_grad=True); Replicate, each rank's own
	 * kept, its sequence shard of it under SP (False).
	 */
	if (op->mixer_input && !eng->boundary_reduced &&
	    pl_mixer_input_declared(eng->model) >= 0) {
		bool replicate = pl_mixer_input_declared(eng->model) ==
		    PLAN_DECLARE_REPLICATE;

		stage_tp_apply(eng, stage, op->out, true, replicate ?
		    (sp ? TP_KEEP_SHARD : TP_IDENTITY) :
		    (sp ? TP_REDUCE_SCATTER : TP_ALL_REDUCE), -1);
		return;
	}
	/*
	 * Declared Partial (torchtitan de329200b, to_local(grad_placements=
	 * (Partial(),))): the local tensors are summed as they are, a part
	 * complete on every tp rank included.
	 */
	if (op->moe_input && !eng->boundary_reduced &&
	    pl_moe_boundary(eng->model) == MOE_INPUT_PARTIAL) {
		stage_tp_apply(eng, stage, op->out, true, sp ?
		    TP_REDUCE_SCATTER : TP_ALL_REDUCE, -1);
		return;
	}
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (rank_on_stage(rs, stage))
			engine_mask_to(&rs->coord, &rs->grad[op->out],
			    from, pl_uniform(PLACE_PARTIAL));
	}
	stage_tp_apply(eng, stage, op->out, true, sp ? TP_REDUCE_SCATTER :
	    TP_ALL_REDUCE, -1);
}

static int
rank_at(const struct engine *eng, int pp, int dp, int tp)
{
	return mesh_rank_of(&eng->model->mesh, pp, dp, tp);
}

/*
 * Pipeline: SEND hands the activation to the same (dp, tp) rank of the
 * next stage in one round; the message waits in eng->pipe until that
 * stage's RECV.  Backward runs the other way.
 */
static void
pipe_send(struct engine *eng, int stage, int slot, bool grad, int to_stage)
{
	struct outbox		 ob = { 0 };
	struct rank_state	*rs;
	int			 i;

	if (eng->pipe_full)
		fatalx("numeric: two pipeline transfers in flight");
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (rank_on_stage(rs, stage))
			outbox_add_tensor(&ob, rs->rank, rank_at(eng, to_stage,
			    rs->coord.dp, rs->coord.tp), TAG_PIPE, grad ?
			    &rs->grad[slot] : &rs->act[slot].t);
	}
	coll_exchange(&eng->comm, &ob, &eng->pipe);
	eng->pipe_full = true;
}

static void
pipe_receive(struct engine *eng, int stage, int from_stage, bool grad,
    int slot)
{
	struct rank_state	*rs;
	int			 i;

	if (!eng->pipe_full)
		fatalx("numeric: pipeline receive with nothing in flight");
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (rank_on_stage(rs, stage))
			inbox_tensor(&eng->pipe, rank_at(eng, from_stage,
			    rs->coord.dp, rs->coord.tp), rs->rank, TAG_PIPE,
			    grad ? &rs->din[0] : &rs->act[slot].t);
	}
	coll_release(&eng->comm, &eng->pipe);
	eng->pipe_full = false;
}

/*
 * The neighbouring stages, cyclic: with a virtual pipeline the last
 * stage's chunk sends to the first stage's next chunk.
 */
static int
next_stage(const struct engine *eng, int stage)
{
	return (stage + 1) % eng->model->mesh.pp;
}

static int
prev_stage(const struct engine *eng, int stage)
{
	return (stage + eng->model->mesh.pp - 1) % eng->model->mesh.pp;
}

void
fwd_send(struct engine *eng, int stage, int opi)
{
	pipe_send(eng, stage, engine_op(eng, stage, opi)->in[0], false,
	    next_stage(eng, stage));
}

void
fwd_recv(struct engine *eng, int stage, int opi)
{
	pipe_receive(eng, stage, prev_stage(eng, stage), false,
	    engine_op(eng, stage, opi)->out);
}

void
bwd_recv(struct engine *eng, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	pipe_send(eng, stage, op->out, true, prev_stage(eng, stage));
	eng->pipe_place = eng->grad_place[stage][op->out];
}

void
bwd_send(struct engine *eng, int stage, int opi)
{
	(void)opi;
	pipe_receive(eng, stage, next_stage(eng, stage), true, -1);
}
