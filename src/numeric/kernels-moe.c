/*
 * The kernels of the numeric engine (kernels.c) for mixture of experts:
 * the router with its top-k choice and its auxiliary losses, and the
 * routed experts, dispatched to their owners in the ep group and combined
 * back in rounds of collective.h.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "model/mesh.h"
#include "model/model.h"
#include "model/placement.h"
#include "numeric/collective.h"
#include "numeric/kernels-internal.h"
#include "numeric/numengine.h"
#include "numeric/numvalue.h"

/*
 * Router: logits = x W_r^T for every token.  Scores are the logits in the
 * field (identity score function), softmax or sigmoid over the experts in
 * floats.  The top k experts of a token, larger score first and ties to
 * the lower expert, are kept in ascending expert order.
 */
static void
score_row(const struct engine *eng, union num *s, int64_t n)
{
	enum arith	 arith = eng->arith;
	double		 max, sum = 0;
	int64_t		 e;

	if (arith == ARITH_EXACT)
		return;
	if (eng->cfg->model.moe.score_func == SCORE_SIGMOID) {
		for (e = 0; e < n; e++)
			s[e].d = num_round(arith, 1.0 / (1.0 + exp(-s[e].d)));
		return;
	}
	max = s[0].d;
	for (e = 1; e < n; e++)
		if (s[e].d > max)
			max = s[e].d;
	for (e = 0; e < n; e++) {
		s[e].d = num_round(arith, exp(s[e].d - max));
		sum += s[e].d;
	}
	for (e = 0; e < n; e++)
		s[e].d = num_round(arith, s[e].d / sum);
}

static void
top_k(enum arith arith, const union num *s, int n, int k, int *choice)
{
	bool		*taken;
	int		 i, e, best;

	taken = xcalloc((size_t)n, sizeof(*taken));
	for (i = 0; i < k; i++) {
		best = -1;
		for (e = 0; e < n; e++)
			if (!taken[e] && (best < 0 || num_greater(arith, s[e],
			    s[best])))
				best = e;
		taken[best] = true;
	}
	for (i = 0, e = 0; e < n; e++)
		if (taken[e])
			choice[i++] = e;
	free(taken);
}

static void
fwd_route(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	struct slot		*out = &rs->act[op->out];
	int			 experts = (int)p->local_shape[0];
	int			 k = eng->cfg->model.moe.top_k;
	int64_t			 t;

	mm_x_wt(arith, &out->t, &act_in(rs, op, 0)->t, rs->weight[op->param],
	    p->local_shape[0], p->local_shape[1]);
	out->choice = xcalloc((size_t)(out->t.rows * k),
	    sizeof(*out->choice));
	for (t = 0; t < out->t.rows; t++) {
		score_row(eng, out->t.v + t * experts, experts);
		top_k(arith, out->t.v + t * experts, experts, k,
		    out->choice + t * k);
	}
}

/*
 * The dp group's tokens per expert of this micro-batch, when the
 * load-balancing loss counts them (lossnorm.h aux_global): Megatron's
 * _apply_global_aux_loss sums routing_map over the tokens and all-reduces
 * it over tp_dp_cp in the router's forward (moe_utils.py
 * get_tokens_per_expert_and_token_count).  Every rank here holds its
 * chunk's whole rows, the same on the tp ranks, so the stand-in's group
 * is the dp_cp one.  The count is the same whatever pass runs the
 * forward, so each pass writes it again.
 */
static union num *
route_counts(struct engine *eng, struct rank_state *rs, const struct op *op,
    int experts)
{
	const struct model	*m = eng->model;
	size_t			 K = (size_t)eng->loss->micro_batches;

	if (rs->aux_counts == NULL)
		rs->aux_counts = xcalloc((size_t)m->nparams,
		    sizeof(*rs->aux_counts));
	if (rs->aux_counts[op->param] == NULL)
		rs->aux_counts[op->param] = xcalloc(K * (size_t)experts,
		    sizeof(union num));
	return rs->aux_counts[op->param] + (size_t)(rs->batch /
	    eng->loss->dp_cp) * (size_t)experts;
}

void
fwd_route_stage(struct engine *eng, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	int			 experts = (int)p->local_shape[0];
	int			 k = eng->cfg->model.moe.top_k, i;
	union num		**vec, *mine, one;
	int64_t			*len, t;
	const struct slot	*out;

	for (i = 0; i < eng->nranks; i++)
		if (rank_on_stage(&eng->ranks[i], stage))
			fwd_route(eng, &eng->ranks[i], stage, opi);
	if (eng->loss == NULL || !eng->loss->aux_global ||
	    !model_has_aux(eng->model, p) ||
	    eng->aux_counting == AUX_COUNT_KEEP)
		return;
	one = num_from_rational(arith, q_make(1, 1));
	vec = xcalloc((size_t)eng->nranks, sizeof(*vec));
	len = xcalloc((size_t)eng->nranks, sizeof(*len));
	for (i = 0; i < eng->nranks; i++) {
		struct rank_state *rs = &eng->ranks[i];

		if (!rank_on_stage(rs, stage))
			continue;
		out = &rs->act[op->out];
		mine = xcalloc((size_t)experts, sizeof(*mine));
		for (t = 0; t < out->t.rows * k; t++)
			mine[out->choice[t]] = num_add(arith,
			    mine[out->choice[t]], one);
		vec[i] = mine;
		len[i] = experts;
	}
	if (eng->aux_counting == AUX_COUNT_GROUP)
		coll_all_reduce(&eng->comm, GROUP_DP, vec, len, false);
	for (i = 0; i < eng->nranks; i++) {
		union num	*c;
		int		 e;

		if (vec[i] == NULL)
			continue;
		c = route_counts(eng, &eng->ranks[i], op, experts);
		for (e = 0; e < experts; e++)
			c[e] = eng->aux_counting == AUX_COUNT_GROUP ? vec[i][e] :
			    num_add(arith, c[e], vec[i][e]);
		free(vec[i]);
	}
	free(vec);
	free(len);
}

/* dlogits from dscores: identity, or the softmax / sigmoid Jacobian. */
static void
score_row_backward(const struct engine *eng, const union num *s,
    const union num *ds, union num *dl, int64_t n)
{
	enum arith	 arith = eng->arith;
	union num	 c;
	int64_t		 e;

	if (arith == ARITH_EXACT) {
		memcpy(dl, ds, (size_t)n * sizeof(*ds));
		return;
	}
	if (eng->cfg->model.moe.score_func == SCORE_SIGMOID) {
		for (e = 0; e < n; e++)
			dl[e].d = num_round(arith, ds[e].d * num_round(arith,
			    s[e].d * num_round(arith, 1.0 - s[e].d)));
		return;
	}
	c = num_dot(arith, s, 1, ds, 1, n);
	for (e = 0; e < n; e++)
		dl[e].d = num_round(arith, s[e].d * num_round(arith, ds[e].d -
		    c.d));
}

/* dl += 2 z lse(l) softmax(l), the z-loss's seed in floats. */
static void
z_row_float(enum arith arith, const union num *l, int64_t n, double z, union num
    *dl)
{
	double	 max = l[0].d, sum = 0, lse;
	int64_t	 e;

	for (e = 1; e < n; e++)
		if (l[e].d > max)
			max = l[e].d;
	for (e = 0; e < n; e++)
		sum += exp(l[e].d - max);
	lse = max + log(sum);
	for (e = 0; e < n; e++)
		dl[e].d = num_round(arith, dl[e].d + num_round(arith, 2 * z *
		    lse * exp(l[e].d - lse)));
}

/*
 * The MoE auxiliary losses of the chunk, differentiated into the
 * router's logits (lossnorm.h: their own atoms), added to dl, the logits'
 * gradient of the pass.  With T the chunk's token
 * slots, E experts, top k, c_e the tokens routed to expert e and p the
 * scores, the load-balancing loss is Switch's a E/(k T^2) sum_e c_e
 * sum_t p[t,e] (Megatron's switch_load_balancing_loss_func) and the z-loss
 * b/T sum_t lse(l[t])^2 over the logits l (z_loss_func).  The counts come
 * from top-k and have no gradient, so the load-balancing loss is linear in
 * the scores and its seed a per-token contribution, a E c_e/(k T^2) on
 * every token's score of e; the z-loss seeds 2b/T lse(l[t]) softmax(l[t])
 * on the logits.  In the field the score function is the identity and
 * lse(l) is replaced by sum_e l[t,e] with softmax 1 (its gradient stays a
 * polynomial), which keeps every seed exact.  bwd_route carries dl into
 * the router weight and, times the weight, into the block's input, from
 * where the pass's backward takes it to every parameter upstream (issue
 * 25: autograd does so from the scores in Megatron, whose
 * MoEAuxLossAutoScaler attaches the loss to the probs, and torchtitan).
 */
/*
 * The seed of expert e with the dp group's counts (lossnorm.h): a E/k
 * times the running mean over micro-batches 0..m of the group's count
 * C_e (router.py: global_tokens_per_expert / ga_steps), over T_G T, T_G
 * = T dp_cp the group's token slots.  The audited ranks keep each
 * micro-batch's count and take the mean as the framework does; the
 * reference's counts are the objective's already (reference.c).
 */
static union num
global_seed(struct engine *eng, struct rank_state *rs, const struct op *op,
    int64_t e, int64_t n, int64_t T)
{
	enum arith		 arith = eng->arith;
	const struct loss_norm	*ln = eng->loss;
	int			 k = eng->cfg->model.moe.top_k;
	int			 mb = rs->batch / ln->dp_cp, j;
	const union num		*c = rs->aux_counts[op->param];
	union num		 sum;

	int64_t			 steps = 1;

	memset(&sum, 0, sizeof sum);
	if (eng->aux_counting == AUX_COUNT_KEEP)
		sum = c[mb * n + e];
	else {
		for (j = 0; j <= mb; j++)
			sum = num_add(arith, sum, c[j * n + e]);
		steps = mb + 1;
	}
	return num_mul(arith, num_mul(arith, num_from_rational(arith,
	    ln->aux_loss_coeff), num_from_rational(arith, q_make(n,
	    (int64_t)k * T * T * ln->dp_cp * steps))), sum);
}

static void
aux_seed(struct engine *eng, struct rank_state *rs, const struct op *op,
    const struct param *p, struct placement pl, struct tensor *dl_out)
{
	enum arith		 arith = eng->arith;
	const struct loss_norm	*ln = eng->loss;
	const struct slot	*out = &rs->act[op->out];
	const struct tensor	*s = &out->t, *x = &act_in(rs, op, 0)->t;
	struct tensor		 ds, dl, logits;
	int64_t			 t, e, n = s->cols, T = s->rows;
	int			 k = eng->cfg->model.moe.top_k, i;
	int64_t			*count;
	union num		 a, z, lse, two;

	/*
	 * The router's gradient is Partial over the tp sub-groups its score
	 * gradient is Partial over (placement.c): each rank there holds the
	 * part of the tokens it routes.  So does Megatron's under sequence
	 * parallelism, each tp rank its sequence shard, the counts and T of
	 * the whole sequence (tokens_per_expert all-reduced over tp_cp).  A
	 * rank seeds its share of the tokens; the plan's tp reduction sums
	 * the shares as it sums the main loss's.
	 */
	int64_t	 parts = 1, part = 0, etp = eng->model->mesh.etp;
	int64_t	 lo, hi;

	if (pl.slice == PLACE_PARTIAL) {
		parts *= eng->model->mesh.slices;
		part = rs->coord.slice;
	}
	if (pl.etp == PLACE_PARTIAL) {
		parts *= etp;
		part = part * etp + rs->coord.etp;
	}
	lo = T * part / parts;
	hi = T * (part + 1) / parts;
	count = xcalloc((size_t)n, sizeof(*count));
	for (t = 0; t < T; t++)
		for (i = 0; i < k; i++)
			count[out->choice[t * k + i]]++;
	tensor_alloc(&ds, T, n);
	tensor_alloc(&dl, T, n);
	for (e = 0; e < n; e++) {
		if (ln->aux_global)
			a = global_seed(eng, rs, op, e, n, T);
		else
			a = num_mul(arith, num_from_rational(arith,
			    ln->aux_loss_coeff), num_from_rational(arith,
			    q_make(n * count[e], (int64_t)k * T * T)));
		for (t = lo; t < hi; t++)
			ds.v[t * n + e] = a;
	}
	for (t = 0; t < T; t++)
		score_row_backward(eng, s->v + t * n, ds.v + t * n,
		    dl.v + t * n, n);
	if (ln->z_loss_coeff.num != 0) {
		z = num_mul(arith, num_from_rational(arith, ln->z_loss_coeff),
		    num_from_rational(arith, q_make(1, T)));
		two = num_from_rational(arith, q_make(2, 1));
		mm_x_wt(arith, &logits, x, rs->weight[op->param],
		    p->local_shape[0], p->local_shape[1]);
		for (t = lo; t < hi; t++) {
			union num *l = logits.v + t * n;

			if (arith == ARITH_EXACT) {
				lse.f = 0;
				for (e = 0; e < n; e++)
					lse = num_add(arith, lse, l[e]);
				for (e = 0; e < n; e++)
					dl.v[t * n + e] = num_add(arith, dl.v[t
					    * n + e], num_mul(arith, z,
					    num_mul(arith, two, lse)));
				continue;
			}
			z_row_float(arith, l, n, z.d, dl.v + t * n);
		}
		tensor_free(&logits);
	}
	for (t = 0; t < T * n; t++)
		dl_out->v[t] = num_add(arith, dl_out->v[t], dl.v[t]);
	tensor_free(&ds);
	tensor_free(&dl);
	free(count);
}

/*
 * The scores declared detached (placement.h): in the step as configured
 * nothing of their gradient reaches the router, neither the main loss's
 * nor the auxiliary losses' (NeMo Automodel before PR #2995: the plain
 * dist.all_gather of GroupedExperts.forward cuts the routing weights off
 * the graph, and with them the MoEAuxLossAutoScaler the gate applied to
 * them, whose backward then never runs).  The pass with every boundary
 * reduced keeps both, for the plain atoms.
 */
static bool
scores_cut(const struct engine *eng)
{
	return pl_scores_detached(eng->model) && !eng->boundary_reduced;
}

static void
bwd_route(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	const struct tensor	*s = &rs->act[op->out].t;
	const struct tensor	*ds = &rs->grad[op->out];
	struct tensor		 dl;
	int64_t			 t, e = s->cols;

	tensor_check(ds, s->rows, e, "score gradient");
	tensor_alloc(&dl, s->rows, e);
	for (t = 0; t < s->rows; t++)
		score_row_backward(eng, s->v + t * e, ds->v + t * e,
		    dl.v + t * e, e);
	/*
	 * The auxiliary losses' pass (numengine.h) seeds them here, into
	 * the weight's gradient and the input's alike (issue 25): at the
	 * scores, where MoEAuxLossAutoScaler hangs them, so that scores
	 * detached lose them too.
	 */
	if (eng->seed == SEED_AUX && !scores_cut(eng))
		aux_seed(eng, rs, op, p, pl_route_scores_grad(eng->model,
		    eng->grad_place[stage][op->out]), &dl);
	mm_d_w(arith, &rs->din[0], &dl, rs->weight[op->param],
	    p->local_shape[0], p->local_shape[1]);
	mm_acc_dt_x(arith, rs->pgrad[op->param], &dl, &act_in(rs, op, 0)->t);
	tensor_free(&dl);
}

/*
 * The router on every rank of the stage, then, under KEY_ROUTER_INPUT_GRAD:
 * tp-all-reduce, its input gradient summed over tp: torchtitan de329200b
 * wraps the gate's plain-tensor input with NoParallel's
 * from_local(Replicate), whose backward all-reduces the Partial gradient
 * that the gate's output declared (local_output_grad_placements).  Where
 * the scores' gradient is complete already, that sum counts it tp times;
 * the pass with every boundary reduced (interpret.c) keeps it once instead,
 * as the placement rules say.
 */
void
bwd_route_stage(struct engine *eng, int stage, int opi)
{
	const struct op	 *op = engine_op(eng, stage, opi);
	/*
	 * The scores' gradient as the router's backward sees it, summed
	 * where the plan declares it Partial: the pass with every boundary
	 * reduced masks the router's input gradient from that.
	 */
	struct placement  from = pl_route_scores_grad(eng->model,
	    eng->grad_place[stage][op->out]);
	struct tensor	**dx;
	int		  i;

	/* The scores declared detached: their gradient never arrives. */
	if (scores_cut(eng))
		for (i = 0; i < eng->nranks; i++) {
			struct tensor *ds = &eng->ranks[i].grad[op->out];

			/* All bits zero is zero, as tensor_alloc's. */
			if (rank_on_stage(&eng->ranks[i], stage))
				memset(ds->v, 0, (size_t)(ds->rows *
				    ds->cols) * sizeof(*ds->v));
		}
	/*
	 * tp-mask with router-scores declared Partial (transformers PR
	 * #48205): the scores' gradient, each rank's own experts' slots, is
	 * summed over tp before the router's backward uses it.
	 */
	if (pl_block_grad_summed(eng->model, PLAN_ACTIVATION_ROUTER_SCORES)) {
		dx = xcalloc((size_t)eng->nranks, sizeof(*dx));
		for (i = 0; i < eng->nranks; i++)
			if (rank_on_stage(&eng->ranks[i], stage))
				dx[i] = &eng->ranks[i].grad[op->out];
		coll_all_reduce_tensors(&eng->comm, dx);
		free(dx);
	}
	for (i = 0; i < eng->nranks; i++)
		if (rank_on_stage(&eng->ranks[i], stage))
			bwd_route(eng, &eng->ranks[i], stage, opi);
	if (!pl_router_input_reduced(eng->model))
		return;
	dx = xcalloc((size_t)eng->nranks, sizeof(*dx));
	for (i = 0; i < eng->nranks; i++) {
		struct rank_state *rs = &eng->ranks[i];

		if (!rank_on_stage(rs, stage))
			continue;
		if (eng->boundary_reduced)
			engine_mask_to(&rs->coord, &rs->din[0], from,
			    pl_uniform(PLACE_PARTIAL));
		dx[i] = &rs->din[0];
	}
	coll_all_reduce_tensors(&eng->comm, dx);
	free(dx);
}

/*
 * Routed experts (SPEC section 4, MoE flow).  The tp group's tokens are
 * split into tp/etp slices; rank tp_i handles slice tp_i / etp (all of
 * them under tp-mask and tp-replicated, pl_dispatched_slices).  For each
 * of its tokens and chosen experts it dispatches the (maybe score-scaled)
 * input to the expert's owner in its ep group, which returns its etp part
 * of the expert output (Partial over etp).
 */
struct moe_dims {
	int64_t		 hidden;
	int64_t		 ffn;		/* expert_ffn / etp, the local rows */
	int		 local_experts;	/* experts / ep */
	int		 experts;
	int		 top_k;
	bool		 before;	/* score_before_experts */
};

static struct moe_dims
moe_dims(const struct engine *eng, const struct op *op)
{
	const struct param	*fc1 = &eng->model->params[op->param];
	struct moe_dims		 d;

	d.hidden = fc1->local_shape[2];
	d.ffn = fc1->local_shape[1];
	d.local_experts = (int)fc1->local_shape[0];
	d.experts = eng->cfg->model.moe.experts;
	d.top_k = eng->cfg->model.moe.top_k;
	d.before = eng->cfg->model.moe.score_before_experts;
	return d;
}

/* My (token, expert) pairs in (token, expert) order, with their owners. */
static void
moe_items(const struct engine *eng, struct rank_state *rs, int stage,
    const struct slot *scores, const struct moe_dims *d, struct moe_state *st)
{
	const struct mesh	*m = &eng->model->mesh;
	int64_t			 tokens = scores->t.rows;
	int64_t			 per = tokens / m->slices, t0, rows, t;
	int			 j, n = 0, expert, first, count;
	bool			 mask = pl_tp_mask(eng->model);

	/*
	 * The rows of the slices the rank dispatches (placement.h).
	 * tp-mask: of its pairs only those of the experts it holds (ep =
	 * tp, so its ep coordinate): the others are masked out, and
	 * another tp rank runs them.
	 */
	pl_dispatched_slices(eng->model, &rs->coord, &first, &count);
	t0 = (int64_t)first * per;
	rows = count == m->slices ? tokens : (int64_t)count * per;
	st->items = xcalloc((size_t)(rows * d->top_k), sizeof(*st->items));
	for (t = t0; t < t0 + rows; t++)
		for (j = 0; j < d->top_k; j++) {
			expert = scores->choice[t * d->top_k + j];
			if (mask && expert / d->local_experts != rs->coord.ep)
				continue;
			st->items[n].token = (int)t;
			st->items[n].expert = expert;
			st->items[n].owner = mesh_rank_of_expert(m, stage,
			    st->items[n].expert / d->local_experts,
			    rs->coord.etp, rs->coord.edp);
			n++;
		}
	st->nitems = n;
}

/*
 * Send one vector per pair to its owner: one message per owner, pairs in
 * order, each as [token, expert, values...]; pair i's values are
 * vecs[i * width ...].
 */
static void
moe_dispatch(struct outbox *ob, int src, const struct moe_state *st,
    const union num *vecs, int64_t width, int tag)
{
	union num	*p;
	int64_t		 stride = width + 2;
	int		 i, j, n, owner;
	bool		*sent;

	sent = xcalloc((size_t)st->nitems, sizeof(*sent));
	for (i = 0; i < st->nitems; i++) {
		if (sent[i])
			continue;
		owner = st->items[i].owner;
		for (n = 0, j = i; j < st->nitems; j++)
			n += st->items[j].owner == owner;
		p = xcalloc((size_t)(n * stride), sizeof(*p));
		for (n = 0, j = i; j < st->nitems; j++) {
			if (st->items[j].owner != owner)
				continue;
			sent[j] = true;
			p[n * stride].f = (uint64_t)st->items[j].token;
			p[n * stride + 1].f = (uint64_t)st->items[j].expert;
			memcpy(p + n * stride + 2, vecs + j * width,
			    (size_t)width * sizeof(*p));
			n++;
		}
		outbox_add(ob, src, owner, tag, p, (size_t)(n * stride) *
		    sizeof(*p));
	}
	free(sent);
}

/*
 * The reverse: the owners' replies, one message per owner with the pairs
 * in the order they were sent, into out (nitems x width).
 */
static void
moe_collect(const struct inbox *in, int me, const struct moe_state *st,
    union num *out, int64_t width, int tag)
{
	const union num	*p;
	int64_t		 stride = width + 2, n;
	int		 i, j, k, owner;
	bool		*done;

	done = xcalloc((size_t)st->nitems, sizeof(*done));
	for (i = 0; i < st->nitems; i++) {
		if (done[i])
			continue;
		owner = st->items[i].owner;
		p = inbox_nums(in, owner, me, tag, &n);
		for (k = 0, j = i; j < st->nitems; j++) {
			if (st->items[j].owner != owner)
				continue;
			if ((k + 1) * stride > n ||
			    (int)p[k * stride].f != st->items[j].token ||
			    (int)p[k * stride + 1].f != st->items[j].expert)
				fatalx("numeric: expert reply from rank %d out "
				    "of order", owner);
			memcpy(out + j * width, p + k * stride + 2,
			    (size_t)width * sizeof(*p));
			done[j] = true;
			k++;
		}
		if (k * stride != n)
			fatalx("numeric: expert reply from rank %d has extra "
			    "pairs", owner);
	}
	free(done);
}

/*
 * Walk the dispatch messages addressed to rank `me`, in inbox order (by
 * source), calling fn for each pair.
 */
typedef void moe_pair_fn(void *arg, int src, int token, int expert,
    const union num *v, union num *reply, int index);

static void
moe_serve(struct outbox *ob, const struct inbox *in, int me, int64_t width,
    int64_t reply_width, int tag_in, int tag_out, moe_pair_fn *fn, void *arg)
{
	const struct message	*m;
	union num		*reply;
	const union num		*p;
	int64_t			 n, k, stride = width + 2;
	int64_t			 rstride = reply_width + 2;
	size_t			 i;
	int			 index = 0;

	for (i = 0; i < in->n; i++) {
		m = &in->v[i];
		if (m->dst != me || m->tag != tag_in)
			continue;
		p = m->data;
		n = (int64_t)(m->len / sizeof(*p)) / stride;
		reply = xcalloc((size_t)(n * rstride), sizeof(*reply));
		for (k = 0; k < n; k++) {
			reply[k * rstride] = p[k * stride];
			reply[k * rstride + 1] = p[k * stride + 1];
			fn(arg, m->src, (int)p[k * stride].f,
			    (int)p[k * stride + 1].f, p + k * stride + 2,
			    reply + k * rstride + 2, index++);
		}
		outbox_add(ob, me, m->src, tag_out, reply, (size_t)(n *
		    rstride) * sizeof(*reply));
	}
}

struct moe_serve_ctx {
	enum arith		 arith;
	const struct mesh	*mesh;
	struct rank_state	*rs;
	const struct op		*op;
	struct moe_dims		 d;
	struct moe_state	*st;
};

/* The local expert of a pair, checking the pair was sent to its owner. */
static int
moe_local_expert(const struct moe_serve_ctx *c, int expert)
{
	if (expert < 0 || expert / c->d.local_experts != c->rs->coord.ep)
		fatalx("numeric: rank %d got a token for expert %d it does "
		    "not hold", c->rs->rank, expert);
	return expert % c->d.local_experts;
}

/* Owner, forward: h = W1 u, a = act(h), o = W2 a (my etp part). */
static void
moe_serve_forward(void *arg, int src, int token, int expert,
    const union num *u, union num *o, int index)
{
	struct moe_serve_ctx	*c = arg;
	enum arith		 arith = c->arith;
	struct moe_state	*st = c->st;
	int64_t			 H = c->d.hidden, F = c->d.ffn, f;
	int			 le = moe_local_expert(c, expert);
	const union num		*w1 = c->rs->weight[c->op->param] + le * F * H;
	const union num		*w2 = c->rs->weight[c->op->param2] + le * H * F;
	union num		*h, *a;

	if (index >= st->nwork)
		fatalx("numeric: expert work overflow");
	st->work[index].token = token;
	st->work[index].expert = expert;
	st->work[index].owner = src;
	memcpy(st->u + index * H, u, (size_t)H * sizeof(*u));
	h = st->h + index * F;
	a = st->a + index * F;
	for (f = 0; f < F; f++) {
		h[f] = num_dot(arith, w1 + f * H, 1, u, 1, H);
		a[f] = act_value(arith, h[f]);
	}
	for (f = 0; f < H; f++)
		o[f] = num_dot(arith, w2 + f * F, 1, a, 1, F);
}

/*
 * Owner, backward: dW2 += do a^T, da = W2^T do, dh = da * act'(h),
 * dW1 += dh u^T, du = W1^T dh (Partial over etp).
 */
static void
moe_serve_backward(void *arg, int src, int token, int expert,
    const union num *dout, union num *du, int index)
{
	struct moe_serve_ctx	*c = arg;
	enum arith		 arith = c->arith;
	struct moe_state	*st = c->st;
	int64_t			 H = c->d.hidden, F = c->d.ffn, f, k;
	int			 le = moe_local_expert(c, expert);
	const union num		*w1 = c->rs->weight[c->op->param] + le * F * H;
	const union num		*w2 = c->rs->weight[c->op->param2] + le * H * F;
	union num		*g1 = c->rs->pgrad[c->op->param] + le * F * H;
	union num		*g2 = c->rs->pgrad[c->op->param2] + le * H * F;
	union num		***sg = c->rs->src_grad;
	const union num		*u, *h, *a;
	union num		*dh;

	if (index >= st->nwork || st->work[index].owner != src ||
	    st->work[index].token != token ||
	    st->work[index].expert != expert)
		fatalx("numeric: expert backward pair (%d, %d) from rank %d "
		    "does not match forward", token, expert, src);
	/* Kept per source: the source's index in my ep group (lossnorm.h). */
	if (sg != NULL && sg[c->op->param] != NULL) {
		int j = mesh_group_index(c->mesh, GROUP_EP, src);

		g1 = sg[c->op->param][j] + le * F * H;
		g2 = sg[c->op->param2][j] + le * H * F;
	}
	u = st->u + index * H;
	h = st->h + index * F;
	a = st->a + index * F;
	dh = xcalloc((size_t)F, sizeof(*dh));
	for (k = 0; k < H; k++)
		for (f = 0; f < F; f++)
			g2[k * F + f] = num_add(arith, g2[k * F + f],
			    num_mul(arith, dout[k], a[f]));
	for (f = 0; f < F; f++)
		dh[f] = num_mul(arith, num_dot(arith, w2 + f, F, dout, 1, H),
		    act_derivative(arith, h[f]));
	for (f = 0; f < F; f++)
		for (k = 0; k < H; k++)
			g1[f * H + k] = num_add(arith, g1[f * H + k],
			    num_mul(arith, dh[f], u[k]));
	for (k = 0; k < H; k++)
		du[k] = num_dot(arith, w1 + k, H, dh, 1, F);
	free(dh);
}

/* Number of pairs addressed to `me` in a dispatch round. */
static int
moe_incoming(const struct inbox *in, int me, int64_t width, int tag)
{
	size_t		 i;
	int		 n = 0;

	for (i = 0; i < in->n; i++)
		if (in->v[i].dst == me && in->v[i].tag == tag)
			n += (int)(in->v[i].len / sizeof(union num) /
			    (size_t)(width + 2));
	return n;
}

void
fwd_experts(struct engine *eng, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	struct moe_dims		 d = moe_dims(eng, op);
	struct moe_serve_ctx	 c;
	struct rank_state	*rs;
	struct moe_state	*st;
	const struct tensor	*x, *s;
	struct tensor		*out;
	struct outbox		 ob = { 0 };
	struct inbox		 in;
	union num		*u, w;
	int64_t			 k;
	int			 i, j, t, e;

	/* Dispatch: u = s x (score before the experts) or x. */
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!rank_on_stage(rs, stage))
			continue;
		st = &rs->moe[opi];
		moe_state_free(st);
		x = &act_in(rs, op, 0)->t;
		s = &act_in(rs, op, 1)->t;
		tensor_check(x, s->rows, d.hidden, "expert input");
		moe_items(eng, rs, stage, act_in(rs, op, 1), &d, st);
		u = xcalloc((size_t)(st->nitems * d.hidden), sizeof(*u));
		for (j = 0; j < st->nitems; j++) {
			t = st->items[j].token;
			e = st->items[j].expert;
			for (k = 0; k < d.hidden; k++)
				u[j * d.hidden + k] = d.before ?
				    num_mul(arith, s->v[t * s->cols + e],
				    x->v[t * d.hidden + k]) :
				    x->v[t * d.hidden + k];
		}
		moe_dispatch(&ob, rs->rank, st, u, d.hidden, TAG_DISPATCH);
		free(u);
	}
	coll_exchange(&eng->comm, &ob, &in);

	/* The experts, on their owners. */
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!rank_on_stage(rs, stage))
			continue;
		st = &rs->moe[opi];
		st->nwork = moe_incoming(&in, rs->rank, d.hidden, TAG_DISPATCH);
		st->work = xcalloc((size_t)st->nwork, sizeof(*st->work));
		st->u = xcalloc((size_t)(st->nwork * d.hidden), sizeof(*st->u));
		st->h = xcalloc((size_t)(st->nwork * d.ffn), sizeof(*st->h));
		st->a = xcalloc((size_t)(st->nwork * d.ffn), sizeof(*st->a));
		c.arith = eng->arith;
		c.rs = rs;
		c.op = op;
		c.d = d;
		c.st = st;
		moe_serve(&ob, &in, rs->rank, d.hidden, d.hidden, TAG_DISPATCH,
		    TAG_COMBINE, moe_serve_forward, &c);
	}
	coll_release(&eng->comm, &in);
	coll_exchange(&eng->comm, &ob, &in);

	/* Combine: out_t = sum over my pairs of (score after ? s o : o). */
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!rank_on_stage(rs, stage))
			continue;
		st = &rs->moe[opi];
		s = &act_in(rs, op, 1)->t;
		st->o = xcalloc((size_t)(st->nitems * d.hidden),
		    sizeof(*st->o));
		moe_collect(&in, rs->rank, st, st->o, d.hidden, TAG_COMBINE);
		out = &rs->act[op->out].t;
		tensor_alloc(out, s->rows, d.hidden);
		for (j = 0; j < st->nitems; j++) {
			t = st->items[j].token;
			e = st->items[j].expert;
			w = s->v[t * s->cols + e];
			for (k = 0; k < d.hidden; k++)
				out->v[t * d.hidden + k] = num_add(arith, 
				    out->v[t * d.hidden + k], d.before ?
				    st->o[j * d.hidden + k] : num_mul(arith, w,
				    st->o[j * d.hidden + k]));
		}
	}
	coll_release(&eng->comm, &in);
}

void
bwd_experts(struct engine *eng, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	struct moe_dims		 d = moe_dims(eng, op);
	struct moe_serve_ctx	 c;
	struct rank_state	*rs;
	struct moe_state	*st;
	const struct tensor	*x, *s, *dout;
	struct tensor		*dx, *ds;
	struct outbox		 ob = { 0 };
	struct inbox		 in;
	union num		**du, *dov, w;
	int64_t			*len, k;
	int			 i, j, t, e;

	du = xcalloc((size_t)eng->nranks, sizeof(*du));
	len = xcalloc((size_t)eng->nranks, sizeof(*len));

	/* do = s dout (score after the experts) or dout; ds = <dout, o>. */
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!rank_on_stage(rs, stage))
			continue;
		st = &rs->moe[opi];
		s = &act_in(rs, op, 1)->t;
		dout = &rs->grad[op->out];
		tensor_check(dout, s->rows, d.hidden, "expert output gradient");
		ds = &rs->din[1];
		tensor_alloc(ds, s->rows, s->cols);
		dov = xcalloc((size_t)(st->nitems * d.hidden), sizeof(*dov));
		for (j = 0; j < st->nitems; j++) {
			t = st->items[j].token;
			e = st->items[j].expert;
			w = s->v[t * s->cols + e];
			for (k = 0; k < d.hidden; k++)
				dov[j * d.hidden + k] = d.before ? dout->v[t *
				    d.hidden + k] : num_mul(arith, w, dout->v[t
				    * d.hidden + k]);
			if (!d.before)
				ds->v[t * s->cols + e] = num_dot(arith, dout->v
				    + t * d.hidden, 1, st->o + j * d.hidden, 1,
				    d.hidden);
		}
		moe_dispatch(&ob, rs->rank, st, dov, d.hidden, TAG_DISPATCH);
		free(dov);
	}
	coll_exchange(&eng->comm, &ob, &in);

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!rank_on_stage(rs, stage))
			continue;
		c.mesh = &eng->model->mesh;
		c.arith = eng->arith;
		c.rs = rs;
		c.op = op;
		c.d = d;
		c.st = &rs->moe[opi];
		if (moe_incoming(&in, rs->rank, d.hidden, TAG_DISPATCH) !=
		    c.st->nwork)
			fatalx("numeric: rank %d got a different number of "
			    "expert pairs in backward", rs->rank);
		moe_serve(&ob, &in, rs->rank, d.hidden, d.hidden, TAG_DISPATCH,
		    TAG_COMBINE, moe_serve_backward, &c);
	}
	coll_release(&eng->comm, &in);
	coll_exchange(&eng->comm, &ob, &in);

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!rank_on_stage(rs, stage))
			continue;
		st = &rs->moe[opi];
		len[i] = st->nitems * d.hidden;
		du[i] = xcalloc((size_t)len[i], sizeof(*du[i]));
		moe_collect(&in, rs->rank, st, du[i], d.hidden, TAG_COMBINE);
	}
	coll_release(&eng->comm, &in);

	/*
	 * torchtitan #1878: the routed input's gradient is Partial over etp
	 * and must be all-reduced there; "none" skips it.  The members of an
	 * etp group share one token slice and one routing, so their pairs
	 * line up one to one.
	 */
	if (pl_expert_input_reduced(eng->model))
		coll_all_reduce(&eng->comm, GROUP_ETP, du, len, false);

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!rank_on_stage(rs, stage))
			continue;
		st = &rs->moe[opi];
		x = &act_in(rs, op, 0)->t;
		s = &act_in(rs, op, 1)->t;
		ds = &rs->din[1];
		dx = &rs->din[0];
		tensor_alloc(dx, x->rows, d.hidden);
		for (j = 0; j < st->nitems; j++) {
			t = st->items[j].token;
			e = st->items[j].expert;
			w = s->v[t * s->cols + e];
			if (d.before)
				ds->v[t * s->cols + e] = num_dot(arith, du[i] +
				    j * d.hidden, 1, x->v + t * d.hidden, 1,
				    d.hidden);
			for (k = 0; k < d.hidden; k++)
				dx->v[t * d.hidden + k] = num_add(arith, 
				    dx->v[t * d.hidden + k], d.before ?
				    num_mul(arith, w, du[i][j * d.hidden + k]) :
				    du[i][j * d.hidden + k]);
		}
		free(du[i]);
	}
	free(len);
	free(du);

	/*
	 * tp-mask with experts-input declared Partial (transformers'
	 * MoEExpertsParallel, _AllReduceBackward on the hidden states): each
	 * rank's experts' share of the input gradient, summed over tp.
	 */
	if (pl_tp_mask(eng->model) && pl_block_grad_summed(eng->model,
	    PLAN_ACTIVATION_EXPERTS_INPUT)) {
		struct tensor **dxs = xcalloc((size_t)eng->nranks,
		    sizeof(*dxs));

		for (i = 0; i < eng->nranks; i++)
			if (rank_on_stage(&eng->ranks[i], stage))
				dxs[i] = &eng->ranks[i].din[0];
		coll_all_reduce_tensors(&eng->comm, dxs);
		free(dxs);
	}
}
