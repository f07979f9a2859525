/*
 * DTensor-style placement rules for every op of the model, forward and
 * backward, and the walk that derives the true placement of every
 * parameter gradient.  This is where "the router gradient is Partial over
 * tp" comes from (torchtitan #2416): not from a rule about knobs, but from
 * following the tokens and gradients through the MoE block.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "model/placement.h"

struct placement
pl_uniform(enum place p)
{
	struct placement pl = { p, p };

	return pl;
}

bool
pl_keeps_value(const struct coord *c, struct placement from,
    struct placement to)
{
	if (from.slice == PLACE_REPLICATE && to.slice == PLACE_PARTIAL &&
	    c->slice != 0)
		return false;
	if (from.etp == PLACE_REPLICATE && to.etp == PLACE_PARTIAL &&
	    c->etp != 0)
		return false;
	return true;
}

bool
pl_expert_input_reduced(const struct model *m)
{
	return m->config->sync.expert_input_grad ==
	    EXPERT_INPUT_ETP_ALL_REDUCE;
}

bool
pl_router_input_reduced(const struct model *m)
{
	return m->config->sync.router_input_grad ==
	    ROUTER_INPUT_TP_ALL_REDUCE;
}

enum moe_input_sync
pl_moe_boundary(const struct model *m)
{
	return cfg_moe_input_sync(m->config);
}

bool
pl_tp_mask(const struct model *m)
{
	return m->config->model.has_moe &&
	    m->config->model.moe.ep_on == MOE_EP_TP_MASK;
}

void
pl_dispatched_slices(const struct model *m, const struct coord *c,
    int *first, int *count)
{
	if (pl_tp_mask(m) || pl_tp_replicated(m)) {
		*first = 0;
		*count = m->mesh.slices;
		return;
	}
	*first = c->slice;
	*count = 1;
}

bool
pl_tp_replicated(const struct model *m)
{
	return mesh_dispatch_replicated(&m->mesh, m->config);
}

int
pl_dispatch_twin(const struct model *m, int rank)
{
	struct coord	 c;
	int		 first, count;

	if (!pl_tp_replicated(m))
		return rank;
	mesh_coord_of(&m->mesh, rank, &c);
	pl_dispatched_slices(m, &c, &first, &count);
	/* The same rows from the lowest rank that dispatches them. */
	return mesh_rank_of(&m->mesh, c.pp, c.dp, first * m->mesh.etp +
	    c.etp);
}

bool
pl_block_grad_summed(const struct model *m, int a)
{
	int	 i = pl_activation_declare(m, a);

	return i >= 0 && m->config->plan[i].declare == PLAN_DECLARE_PARTIAL;
}

struct placement
pl_route_scores_grad(const struct model *m, struct placement dout)
{
	if (pl_block_grad_summed(m, PLAN_ACTIVATION_ROUTER_SCORES))
		return pl_uniform(PLACE_REPLICATE);
	return dout;
}

int
pl_activation_declare(const struct model *m, int a)
{
	const struct config *c = m->config;
	int	 i;

	for (i = 0; i < c->nplan; i++)
		if (c->plan[i].op == PLAN_DECLARE && c->plan[i].activation == a)
			return i;
	return -1;
}

bool
pl_scores_detached(const struct model *m)
{
	int	 i = pl_activation_declare(m, PLAN_ACTIVATION_ROUTER_SCORES);

	/*
	 * The gather runs over ep, and only where it has more than one
	 * rank (GroupedExperts.forward: if ep_size > 1): never in the
	 * single-rank reference.
	 */
	return m->config->model.has_moe && m->mesh.ep > 1 && i >= 0 &&
	    m->config->plan[i].declare == PLAN_DECLARE_DETACHED;
}

bool
pl_output_boundary_replicate(const struct model *m)
{
	int	 i = pl_activation_declare(m, PLAN_ACTIVATION_OUTPUT);

	return i >= 0 && m->config->plan[i].declare == PLAN_DECLARE_REPLICATE;
}

int
pl_mixer_input_declared(const struct model *m)
{
	int	 i = pl_activation_declare(m, PLAN_ACTIVATION_MIXER_INPUT);

	return i >= 0 ? (int)m->config->plan[i].declare : -1;
}

struct placement
pl_normalize(const struct mesh *mesh, struct placement pl)
{
	if (mesh->slices == 1)
		pl.slice = PLACE_REPLICATE;
	if (mesh->etp == 1)
		pl.etp = PLACE_REPLICATE;
	return pl;
}

/*
 * Adding a Replicate and a Partial tensor gives a Partial one (DTensor
 * first turns the Replicate operand into Partial by keeping it on one
 * rank).  Any other mix of different placements is a bug in the model
 * description.
 */
static enum place
join_one(enum place a, enum place b)
{
	if (a == b)
		return a;
	if ((a == PLACE_PARTIAL && b == PLACE_REPLICATE) ||
	    (a == PLACE_REPLICATE && b == PLACE_PARTIAL))
		return PLACE_PARTIAL;
	fatalx("cannot add tensors placed %d and %d", a, b);
}

struct placement
pl_join(struct placement a, struct placement b)
{
	struct placement r;

	r.slice = join_one(a.slice, b.slice);
	r.etp = join_one(a.etp, b.etp);
	return r;
}

bool
pl_equal(struct placement a, struct placement b)
{
	return a.slice == b.slice && a.etp == b.etp;
}

bool
pl_any(struct placement a, enum place p)
{
	return a.slice == p || a.etp == p;
}

static const char *
place_name(enum place p)
{
	switch (p) {
	case PLACE_REPLICATE:
		return "Replicate";
	case PLACE_PARTIAL:
		return "Partial";
	case PLACE_SHARD_TOKENS:
		return "Shard(tokens)";
	case PLACE_SHARD_FEATURES:
		return "Shard(features)";
	}
	return "?";
}

const char *
pl_format(const struct mesh *mesh, struct placement pl, char *buf,
    size_t len)
{
	bool	slices = mesh->slices > 1, etp = mesh->etp > 1;

	if (pl.slice == pl.etp || !etp)
		snprintf(buf, len, "%s", place_name(pl.slice));
	else if (!slices)
		snprintf(buf, len, "%s", place_name(pl.etp));
	else
		snprintf(buf, len, "%s over the token slices, %s over etp",
		    place_name(pl.slice), place_name(pl.etp));
	return buf;
}

static struct placement
residual_placement(const struct model *m)
{
	/* Between blocks the residual stream is Shard(seq) under SP. */
	return pl_uniform(m->config->training.sequence_parallel ?
	    PLACE_SHARD_TOKENS : PLACE_REPLICATE);
}

/* A linear of a duplicated mixer: the whole weight on every tp rank. */
static bool
duplicated(const struct model *m, const struct op *op)
{
	return op->param >= 0 && m->params[op->param].role == ROLE_DUPLICATED;
}

struct placement
pl_forward(const struct model *m, const struct op *op,
    const struct placement *in)
{
	struct placement out = pl_uniform(PLACE_REPLICATE);

	switch (op->kind) {
	case OP_TOKENS:
		break;
	case OP_RECV:
		out = residual_placement(m);
		break;
	case OP_EMBED:
		/* Each tp rank looks up only the rows of its vocab shard. */
		out = pl_uniform(PLACE_PARTIAL);
		break;
	case OP_TP_REDUCE:
		out = residual_placement(m);
		break;
	case OP_TP_GATHER:
	case OP_ROUTE:
		break;
	case OP_NORM:
	case OP_ACT:
	case OP_HEAD_NORM:
	case OP_KV:
	case OP_SINK:
		out = in[0];
		break;
	case OP_LINEAR_COL:
	case OP_OUTPUT:
		out = pl_uniform(PLACE_SHARD_FEATURES);
		if (duplicated(m, op))
			out = in[0];
		break;
	case OP_LINEAR_ROW:
		out = pl_uniform(PLACE_PARTIAL);
		if (duplicated(m, op))
			out = in[0];
		break;
	case OP_ADD:
		out = pl_join(in[0], in[1]);
		break;
	case OP_EXPERTS:
		/*
		 * Each token slice is handled by one etp group (so the output
		 * is non-zero only on the slice's ranks: Partial over slices),
		 * and the experts' fc2 is row-parallel over etp (Partial).
		 * Under tp-replicated every rank gets back the whole output
		 * of all its tokens, as its tp peers do: Replicate.
		 */
		out.slice = pl_tp_replicated(m) ? PLACE_REPLICATE :
		    PLACE_PARTIAL;
		out.etp = PLACE_PARTIAL;
		break;
	case OP_GATE:
		/* A per-token scale of the reduced shared-expert output. */
		out = in[1];
		break;
	case OP_LOSS:
	case OP_SEND:
		out = in[0];
		break;
	}
	return pl_normalize(&m->mesh, out);
}

/*
 * The gradient of a weight is a contraction over tokens of its output
 * gradient with its input.  It is Partial over a sub-dimension where either
 * factor is Partial or the tokens are split (each rank saw only its
 * tokens); Shard where the weight itself is split; Replicate otherwise.
 */
static enum place
weight_grad_one(bool sharded, enum place contrib)
{
	if (contrib == PLACE_PARTIAL || contrib == PLACE_SHARD_TOKENS)
		return PLACE_PARTIAL;
	return sharded ? PLACE_SHARD_FEATURES : PLACE_REPLICATE;
}

static struct placement
weight_grad(const struct model *m, bool sharded, struct placement dout,
    struct placement x)
{
	struct placement g;

	g.slice = weight_grad_one(sharded, dout.slice == PLACE_PARTIAL ||
	    x.slice == PLACE_PARTIAL ? PLACE_PARTIAL :
	    dout.slice == PLACE_SHARD_TOKENS || x.slice == PLACE_SHARD_TOKENS ?
	    PLACE_SHARD_TOKENS : PLACE_REPLICATE);
	g.etp = weight_grad_one(sharded, dout.etp == PLACE_PARTIAL ||
	    x.etp == PLACE_PARTIAL ? PLACE_PARTIAL :
	    dout.etp == PLACE_SHARD_TOKENS || x.etp == PLACE_SHARD_TOKENS ?
	    PLACE_SHARD_TOKENS : PLACE_REPLICATE);
	return pl_normalize(&m->mesh, g);
}

/*
 * Backward through the routed experts (torchtitan's MoE with token slices
 * over tp, SPEC section 4).  The experts' input gradient is a sum over the
 * etp shards of expert_ffn, so it is Partial over etp until the etp
 * all-reduce of torchtitan #1878 runs; the score gradient then inherits
 * the placement of whatever it is contracted with.
 */
static void
experts_backward(const struct model *m, const struct op *op,
    struct placement *din, struct placement *dparam,
    struct backward_reduction *red)
{
	const struct config	*cfg = m->config;
	struct placement	 routed_input_grad, expert_out, score_grad;
	bool			 reduce;

	expert_out = pl_uniform(PLACE_PARTIAL);
	/* tp-replicated: each rank's own tokens, whole (pl_forward). */
	if (pl_tp_replicated(m))
		expert_out.slice = PLACE_REPLICATE;
	expert_out = pl_normalize(&m->mesh, expert_out);
	routed_input_grad = expert_out;

	memset(red, 0, sizeof *red);
	red->plan_item = -1;
	red->what = "routed expert input gradient";
	red->dim = "etp";
	red->cite = REDUCTION_CITE_EXPERT_INPUT;
	red->truth = routed_input_grad;
	reduce = pl_expert_input_reduced(m);
	red->declared = routed_input_grad;
	if (!reduce)
		red->declared.etp = PLACE_REPLICATE;
	red->declared = pl_normalize(&m->mesh, red->declared);
	if (reduce)
		routed_input_grad.etp = PLACE_REPLICATE;
	routed_input_grad = pl_normalize(&m->mesh, routed_input_grad);

	if (cfg->model.moe.score_before_experts)
		score_grad = routed_input_grad;	/* d score = <d input, x> */
	else
		score_grad = expert_out;	/* d score = <d out, expert out> */
	/*
	 * tp-mask: each rank's experts' share of the input gradient, summed
	 * over tp inside the block where the plan declares it Partial
	 * (transformers' MoEExpertsParallel, _AllReduceBackward on the
	 * hidden states).  Each pair's score gradient stays its owner's.
	 */
	if (pl_tp_mask(m) &&
	    pl_block_grad_summed(m, PLAN_ACTIVATION_EXPERTS_INPUT))
		routed_input_grad = pl_uniform(PLACE_REPLICATE);

	din[0] = routed_input_grad;
	din[1] = score_grad;
	dparam[0] = dparam[1] = pl_uniform(PLACE_SHARD_FEATURES);
	(void)op;
}

/*
 * A duplicated mixer's linear: the whole weight on the whole sequence, so
 * its gradient and its input's are what every rank computes alike
 * (model.duplicated_mixer).
 */
static void
duplicated_backward(const struct model *m, const struct placement *fwd_in,
    struct placement dout, struct placement *din, struct placement *dparam)
{
	dparam[0] = weight_grad(m, false, dout, fwd_in[0]);
	din[0] = dout;
}

bool
pl_backward(const struct model *m, const struct op *op,
    const struct placement *fwd_in, struct placement dout,
    struct placement *din, struct placement *dparam,
    struct backward_reduction *red)
{
	bool	sp = m->config->training.sequence_parallel;
	struct placement rep = pl_uniform(PLACE_REPLICATE);

	din[0] = din[1] = rep;
	dparam[0] = dparam[1] = rep;
	switch (op->kind) {
	case OP_TOKENS:
	case OP_RECV:
	case OP_LOSS:
	case OP_SEND:
		break;
	case OP_EMBED:
		dparam[0] = weight_grad(m, true, dout, rep);
		break;
	case OP_TP_REDUCE:
		/* The gradient of a Partial tensor is Replicate. */
		din[0] = rep;
		break;
	case OP_TP_GATHER:
		/*
		 * Megatron's "f": backward all-reduces (or reduce-scatters
		 * under SP) whatever mix of Partial and Replicate arrives, each
		 * replica counted once.
		 */
		din[0] = pl_uniform(sp && !op->reduce_only ?
		    PLACE_SHARD_TOKENS : PLACE_REPLICATE);
		break;
	case OP_NORM:
		dparam[0] = weight_grad(m, false, dout, fwd_in[0]);
		din[0] = dout;
		break;
	case OP_ACT:
		din[0] = dout;
		break;
	case OP_HEAD_NORM:
		/*
		 * One weight serves every head, and each tp rank holds only
		 * its heads' features: the weight gradient is a sum over all
		 * heads, Partial over tp wherever the features are split,
		 * with or without sequence parallelism (qk-norm, and Gated
		 * DeltaNet's out_norm, Megatron #7452 finding 11).
		 */
		dparam[0] = weight_grad(m, false, dout, fwd_in[0]);
		if (fwd_in[0].slice == PLACE_SHARD_FEATURES)
			dparam[0].slice = PLACE_PARTIAL;
		if (fwd_in[0].etp == PLACE_SHARD_FEATURES)
			dparam[0].etp = PLACE_PARTIAL;
		din[0] = dout;
		break;
	case OP_KV:
		/*
		 * Each rank adds to its own query heads only.  A key/value
		 * weight split over tp with the heads holds its rows' whole
		 * gradient; one replicated over tp (fewer key/value heads than
		 * ranks) gets a part from every rank whose heads use it,
		 * Partial as the qk-norm weight.  The block input's gradient
		 * is a sum over the rank's heads: Partial.
		 */
		if (m->params[op->param].role == ROLE_KV) {
			dparam[0] = weight_grad(m, false, dout, fwd_in[1]);
			if (fwd_in[0].slice == PLACE_SHARD_FEATURES)
				dparam[0].slice = PLACE_PARTIAL;
			if (fwd_in[0].etp == PLACE_SHARD_FEATURES)
				dparam[0].etp = PLACE_PARTIAL;
		} else
			dparam[0] = weight_grad(m, true, dout, fwd_in[1]);
		din[0] = dout;
		din[1] = pl_uniform(PLACE_PARTIAL);
		break;
	case OP_SINK:
		/*
		 * Each head's value scales that head's features alone, and a
		 * tp rank holds the values of its own heads: the gradient of
		 * each sums over the tokens and the head's features, all on
		 * the rank, so it is whole there, split over tp as the heads
		 * are (Megatron #7452 finding 8: head-sharded, yet not marked
		 * tensor parallel).
		 */
		dparam[0] = weight_grad(m, true, dout, fwd_in[0]);
		din[0] = dout;
		break;
	case OP_LINEAR_COL:
	case OP_OUTPUT:
		if (duplicated(m, op)) {
			duplicated_backward(m, fwd_in, dout, din, dparam);
			break;
		}
		dparam[0] = weight_grad(m, true, dout, fwd_in[0]);
		din[0] = pl_uniform(PLACE_PARTIAL);
		break;
	case OP_LINEAR_ROW:
		if (duplicated(m, op)) {
			duplicated_backward(m, fwd_in, dout, din, dparam);
			break;
		}
		dparam[0] = weight_grad(m, true, dout, fwd_in[0]);
		din[0] = pl_uniform(PLACE_SHARD_FEATURES);
		break;
	case OP_ADD:
		din[0] = din[1] = dout;
		break;
	case OP_ROUTE:
		/*
		 * tp-mask: the scores' gradient covers the rank's own
		 * experts' slots, Partial over tp, unless the plan sums it
		 * first (transformers PR #48205).
		 */
		dout = pl_normalize(&m->mesh, pl_route_scores_grad(m, dout));
		dparam[0] = weight_grad(m, false, dout, fwd_in[0]);
		din[0] = dout;
		/*
		 * torchtitan de329200b: NoParallel's from_local(Replicate)
		 * all-reduces the gate's Partial input gradient, which is
		 * then complete on every tp rank.
		 */
		if (pl_router_input_reduced(m))
			din[0] = rep;
		break;
	case OP_GATE:
		/*
		 * The gate weight's gradient contracts the block input with the
		 * per-token gate gradient: Partial over tp when each rank holds
		 * only its sequence shard, Replicate otherwise.
		 */
		dparam[0] = weight_grad(m, false, dout, fwd_in[0]);
		din[0] = din[1] = dout;
		break;
	case OP_EXPERTS:
		experts_backward(m, op, din, dparam, red);
		red->op = (int)(op - m->stages[m->params[op->param].stage].ops);
		red->stage = m->params[op->param].stage;
		din[0] = pl_normalize(&m->mesh, din[0]);
		din[1] = pl_normalize(&m->mesh, din[1]);
		return true;
	}
	din[0] = pl_normalize(&m->mesh, din[0]);
	din[1] = pl_normalize(&m->mesh, din[1]);
	dparam[0] = pl_normalize(&m->mesh, dparam[0]);
	dparam[1] = pl_normalize(&m->mesh, dparam[1]);
	return false;
}

/*
 * Does a rank that keeps only its own share of the block input's gradient
 * (declared Replicate: nothing summed, and under sequence parallelism the
 * rank's sequence shard of its own local gradient) lose contributions?
 * Follow the rows: a Partial over etp is a true sum and always loses; a
 * Partial over the token slices is non-zero only on the rows of the
 * rank's own slice (moe_items in kernels.c: slice tp_i / etp holds the
 * contiguous rows [slice * per, (slice + 1) * per) of the rank's tokens),
 * so it loses exactly where some row the rank keeps belongs to another
 * slice: always without sequence parallelism, and with it where the
 * slices (cut along batch * sequence, ReordererSequenceParallel) are not
 * the sequence shards (cut along each sequence).
 */
static bool
boundary_loses(const struct model *m, struct placement truth)
{
	const struct mesh *mesh = &m->mesh;
	int	 slices = mesh->slices, tp_i, b, pos;
	int	 seq = m->config->model.seq / mesh->cp;
	int	 batch = m->tokens / seq, shard = seq / mesh->tp;
	int	 per = m->tokens / slices;

	if (truth.etp == PLACE_PARTIAL)
		return true;
	if (truth.slice != PLACE_PARTIAL)
		return false;
	/*
	 * tp-mask cuts no tokens: every row holds a share of every rank's
	 * experts (and router).
	 */
	if (!m->config->training.sequence_parallel || pl_tp_mask(m))
		return true;
	for (tp_i = 0; tp_i < mesh->tp; tp_i++)
		for (b = 0; b < batch; b++)
			for (pos = tp_i * shard; pos < (tp_i + 1) * shard;
			    pos++)
				if ((b * seq + pos) / per != tp_i / mesh->etp)
					return true;
	return false;
}

/*
 * Is g complete on every rank of a tp sub-dimension that has more than
 * one rank?  A sum over tp would count it that many times.
 */
static bool
replicated_over_tp(const struct mesh *mesh, struct placement g)
{
	return (mesh->slices > 1 && g.slice == PLACE_REPLICATE) ||
	    (mesh->etp > 1 && g.etp == PLACE_REPLICATE);
}

/*
 * The lossy boundaries the walk models, by the report each cites: what
 * the gradient is, over which dimension it is reduced, and the plan's
 * activation that declares it (-1: a sync key does, not the plan).
 */
static const struct {
	const char	*what;
	const char	*dim;
	int		 activation;
} boundary_kinds[] = {
	[REDUCTION_CITE_MOE_BOUNDARY] =
	    { "MoE block input gradient", "tp", -1 },
	[REDUCTION_CITE_SCORES_DETACHED] =
	    { "router's score gradient", "ep", PLAN_ACTIVATION_ROUTER_SCORES },
	[REDUCTION_CITE_OUTPUT_BOUNDARY] =
	    { "output layer input gradient", "tp", PLAN_ACTIVATION_OUTPUT },
	[REDUCTION_CITE_MIXER_INPUT] =
	    { "mixer input gradient", "tp", PLAN_ACTIVATION_MIXER_INPUT },
};

/*
 * A lossy boundary at op, of layer `layer` (-1: none), whose gradient
 * dout is what it truly is and, until the caller says otherwise, what
 * the framework declares.
 */
static void
boundary_init(struct backward_reduction *r, const struct model *m,
    const struct op *op, int stage, enum reduction_cite cite, int layer,
    struct placement dout)
{
	int	 a = boundary_kinds[cite].activation;

	memset(r, 0, sizeof *r);
	r->op = (int)(op - m->stages[stage].ops);
	r->stage = stage;
	r->what = boundary_kinds[cite].what;
	r->dim = boundary_kinds[cite].dim;
	r->cite = cite;
	r->boundary = true;
	r->layer = layer;
	r->plan_item = a >= 0 ? pl_activation_declare(m, a) : -1;
	r->truth = pl_normalize(&m->mesh, dout);
	r->declared = r->truth;
}

/*
 * Backward through the gather of an MoE block's input: what reaches it is
 * the sum of the router's, the routed and the shared experts' input
 * gradients, whatever their placements; the framework declares it as
 * KEY_MOE_INPUT_GRAD says.  `whole` says that one of them is complete on
 * every tp rank already, which a declared Partial sums tp times; `twice`
 * that one was counted tp times inside the block (an all-reduce of a
 * complete gradient, KEY_ROUTER_INPUT_GRAD), whatever is declared here.
 */
static void
moe_boundary(const struct model *m, const struct op *op, int stage,
    struct placement dout, bool whole, bool twice,
    struct backward_reduction *r)
{
	/* The router reads the gathered input first (model.c). */
	boundary_init(r, m, op, stage, REDUCTION_CITE_MOE_BOUNDARY,
	    op[1].kind == OP_ROUTE ? m->params[op[1].param].layer : -1, dout);
	r->router_twice = twice;
	/*
	 * tp-mask with the experts' share summed inside the block: what
	 * can still be Partial here is the router's share alone, each rank's
	 * scores of its own experts (transformers before PR #48205).
	 */
	if (pl_tp_mask(m) &&
	    pl_block_grad_summed(m, PLAN_ACTIVATION_EXPERTS_INPUT)) {
		r->what = "router's share of the MoE block input gradient";
		r->cite = REDUCTION_CITE_ROUTER_SHARE;
	}
	switch (pl_moe_boundary(m)) {
	case MOE_INPUT_AUTO:
		break;
	case MOE_INPUT_REPLICATE:
		r->declared = pl_uniform(PLACE_REPLICATE);
		r->missing = !pl_equal(r->truth, r->declared) &&
		    boundary_loses(m, r->truth);
		break;
	case MOE_INPUT_PARTIAL:
	/* Resolved by pl_moe_boundary: never seen here. */
	case MOE_INPUT_REPLICATE_WITHOUT_EP:
		r->declared = pl_normalize(&m->mesh,
		    pl_uniform(PLACE_PARTIAL));
		r->summed_whole = whole;
		break;
	}
	r->lost = r->missing || r->summed_whole || r->router_twice;
}

/*
 * The router's scores gathered by an op whose backward yields nothing
 * (the plan's declare: detached): every rank loses the whole of the main
 * loss's score gradient, whatever its placement, so the router's weight
 * and every gradient before the block miss the router's share.  What
 * still reaches them (the auxiliary losses' part, the experts' share of
 * the block input) is the step's to say, as with any lossy boundary.
 */
static void
detached_scores(const struct model *m, const struct op *op, int stage,
    struct placement dout, struct backward_reduction *r)
{
	boundary_init(r, m, op, stage, REDUCTION_CITE_SCORES_DETACHED,
	    m->params[op->param].layer, dout);
	r->missing = true;
	r->lost = true;
}

/*
 * Backward through the gather of the output layer's input: the output
 * layer is vocab-parallel, so what reaches it is each tp rank's share of
 * a sum over the vocabulary, Partial over tp on every row.  Declared
 * Replicate by the plan, it is never summed: each rank keeps its own
 * share (of its own sequence shard under SP), which misses the others'
 * whenever it is Partial at all.
 */
static void
output_boundary(const struct model *m, const struct op *op, int stage,
    struct placement dout, struct backward_reduction *r)
{
	boundary_init(r, m, op, stage, REDUCTION_CITE_OUTPUT_BOUNDARY, -1,
	    dout);
	if (pl_output_boundary_replicate(m)) {
		r->declared = pl_uniform(PLACE_REPLICATE);
		r->missing = pl_any(r->truth, PLACE_PARTIAL);
	} else
		r->declared = pl_normalize(&m->mesh,
		    pl_uniform(PLACE_PARTIAL));
	r->lost = r->missing;
}

/*
 * Backward through the gather of a duplicated mixer's input
 * (model.duplicated_mixer): every tp rank computed the whole mixer on the
 * whole sequence, so what reaches the gather is complete and alike on
 * every rank.  Declared Partial, it is summed over tp as it is, tp times
 * the gradient in every parameter before the mixer (slime before PR
 * #1748); declared Replicate, each rank keeps its own, whole.
 */
static void
mixer_boundary(const struct model *m, const struct op *op, int stage,
    struct placement dout, struct backward_reduction *r)
{
	boundary_init(r, m, op, stage, REDUCTION_CITE_MIXER_INPUT,
	    m->params[op[1].param].layer, dout);
	if (pl_mixer_input_declared(m) == PLAN_DECLARE_REPLICATE) {
		r->declared = pl_uniform(PLACE_REPLICATE);
		r->missing = pl_any(r->truth, PLACE_PARTIAL);
	} else {
		r->declared = pl_normalize(&m->mesh,
		    pl_uniform(PLACE_PARTIAL));
		r->summed_whole = replicated_over_tp(&m->mesh, r->truth);
	}
	r->lost = r->missing || r->summed_whole;
}

static void
accumulate(struct placement *slot, bool *set, struct placement g)
{
	*slot = *set ? pl_join(*slot, g) : g;
	*set = true;
}

void
pl_walk(const struct model *m, struct placement *grad,
    struct backward_reduction **reductions, int *nreductions)
{
	int	 s, i, k, n = 0;
	bool	*param_set = xcalloc(m->nparams, sizeof *param_set);
	struct backward_reduction *red = NULL;

	for (s = 0; s < m->mesh.pp; s++) {
		const struct stage_program *sp = &m->stages[s];
		struct placement *fwd = xcalloc(sp->nslots + 1, sizeof *fwd);
		struct placement *bwd = xcalloc(sp->nslots + 1, sizeof *bwd);
		bool *bwd_set = xcalloc(sp->nslots + 1, sizeof *bwd_set);
		bool *whole = xcalloc(sp->nslots + 1, sizeof *whole);
		bool *twice = xcalloc(sp->nslots + 1, sizeof *twice);

		for (i = 0; i < sp->nops; i++) {
			const struct op *op = &sp->ops[i];
			struct placement in[2];

			for (k = 0; k < 2; k++)
				in[k] = op->in[k] >= 0 ? fwd[op->in[k]] :
				    pl_uniform(PLACE_REPLICATE);
			if (op->out >= 0)
				fwd[op->out] = pl_forward(m, op, in);
		}
		for (i = sp->nops - 1; i >= 0; i--) {
			const struct op *op = &sp->ops[i];
			struct placement in[2], din[2], dparam[2], dout;
			struct backward_reduction r;

			for (k = 0; k < 2; k++)
				in[k] = op->in[k] >= 0 ? fwd[op->in[k]] :
				    pl_uniform(PLACE_REPLICATE);
			if (op->kind == OP_LOSS)
				dout = in[0];
			else if (op->kind == OP_SEND)
				dout = residual_placement(m);
			else if (bwd_set[op->out])
				dout = bwd[op->out];
			else
				continue;	/* no gradient reaches it */
			if (op->kind == OP_LOSS || op->kind == OP_SEND) {
				/* The gradient of the op's input is dout. */
				accumulate(&bwd[op->in[0]], &bwd_set[op->in[0]],
				    pl_normalize(&m->mesh, dout));
				continue;
			}
			if (op->moe_input && m->mesh.tp > 1) {
				moe_boundary(m, op, s, dout, whole[op->out],
				    twice[op->out], &r);
				red = xreallocarray(red, n + 1, sizeof *red);
				red[n++] = r;
			}
			if (op->output_input && m->mesh.tp > 1 &&
			    pl_activation_declare(m,
			    PLAN_ACTIVATION_OUTPUT) >= 0) {
				output_boundary(m, op, s, dout, &r);
				red = xreallocarray(red, n + 1, sizeof *red);
				red[n++] = r;
			}
			if (op->mixer_input && m->mesh.tp > 1 &&
			    pl_mixer_input_declared(m) >= 0) {
				mixer_boundary(m, op, s, dout, &r);
				red = xreallocarray(red, n + 1, sizeof *red);
				red[n++] = r;
			}
			if (op->kind == OP_ROUTE && pl_scores_detached(m)) {
				detached_scores(m, op, s, dout, &r);
				red = xreallocarray(red, n + 1, sizeof *red);
				red[n++] = r;
			}
			if (pl_backward(m, op, in, dout, din, dparam, &r)) {
				red = xreallocarray(red, n + 1, sizeof *red);
				red[n++] = r;
			}
			for (k = 0; k < 2; k++) {
				if (op->in[k] < 0 || op->kind == OP_EMBED)
					continue;
				accumulate(&bwd[op->in[k]],
				    &bwd_set[op->in[k]], din[k]);
				whole[op->in[k]] = whole[op->in[k]] ||
				    replicated_over_tp(&m->mesh, din[k]);
			}
			/*
			 * The router's input gradient all-reduced although
			 * the scores' gradient was complete: tp times.  As
			 * the router's backward sees it: a declared Partial
			 * of router-scores has summed it already (tp-mask).
			 */
			if (op->kind == OP_ROUTE &&
			    pl_router_input_reduced(m) &&
			    replicated_over_tp(&m->mesh, pl_normalize(&m->mesh,
			    pl_route_scores_grad(m, dout))))
				twice[op->in[0]] = true;
			if (op->param >= 0)
				accumulate(&grad[op->param],
				    &param_set[op->param], dparam[0]);
			if (op->param2 >= 0)
				accumulate(&grad[op->param2],
				    &param_set[op->param2], dparam[1]);
		}
		free(fwd);
		free(bwd);
		free(bwd_set);
		free(whole);
		free(twice);
	}
	free(param_set);
	*reductions = red;
	*nreductions = n;
}

/*
 * The taint of an unreduced boundary follows the gradient: through every
 * op's input and parameter gradients, and back over the pipeline from a
 * chunk's RECV to the previous chunk's SEND.  Virtual stages run backward
 * in reverse order (model.h), so one pass in that order sees every RECV
 * before the SEND it feeds.
 */
void
pl_mark_boundaries(struct model *m, const struct backward_reduction *red,
    int n)
{
	int	 nv = m->mesh.pp * m->chunks, v, i, k, j, carry = -1;

	for (v = nv - 1; v >= 0; v--) {
		int	 stage = v % m->mesh.pp, chunk = v / m->mesh.pp;
		const struct stage_program *sp = &m->stages[stage];
		int	*taint = xcalloc(sp->nslots + 1, sizeof *taint);
		int	 lo = sp->chunk_start[chunk], hi = sp->chunk_start[chunk + 1];

		for (k = 0; k <= sp->nslots; k++)
			taint[k] = -1;
		for (i = hi - 1; i >= lo; i--) {
			const struct op *op = &sp->ops[i];
			int t;

			if (op->kind == OP_LOSS)
				continue;
			t = op->kind == OP_SEND ? carry : taint[op->out];
			if (op->kind == OP_RECV) {
				carry = t;
				continue;
			}
			for (j = 0; j < n; j++)
				if (red[j].boundary && red[j].lost &&
				    red[j].stage == stage && red[j].op == i &&
				    t < 0)
					t = j;
			if (t < 0)
				continue;
			if (op->param >= 0 && m->params[op->param].boundary < 0)
				m->params[op->param].boundary = t;
			if (op->param2 >= 0 &&
			    m->params[op->param2].boundary < 0)
				m->params[op->param2].boundary = t;
			for (k = 0; k < 2; k++)
				if (op->in[k] >= 0 && taint[op->in[k]] < 0)
					taint[op->in[k]] = t;
		}
		free(taint);
	}
}
