/*
 * The kernels of the numeric engine: forward and backward of every op kind,
 * on real values in the numerics of the audit, and the op table.  The stage
 * kernels with communication (tp collectives, pipeline transfers, routed
 * experts) build their rounds from collective.h.
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
#include "numeric/field.h"
#include "numeric/kernels.h"
#include "numeric/numdata.h"
#include "numeric/numengine.h"
#include "numeric/numvalue.h"

/* The RMSNorm epsilon of the float numerics. */
#define NUM_NORM_EPS		1e-6

/*
 * What several kernels compute: the activation and the products of a
 * linear map.
 */

/* The activation: polynomial a(u) = u^2 + u in the field, SiLU in floats. */
static union num
act_value(union num u)
{
	union num	 r;
	double		 s;

	if (num_arith == ARITH_EXACT) {
		r.f = f_add(f_mul(u.f, u.f), u.f);
		return r;
	}
	s = 1.0 / (1.0 + exp(-u.d));
	r.d = num_round(u.d * s);
	return r;
}

static union num
act_derivative(union num u)
{
	union num	 r;
	double		 s;

	if (num_arith == ARITH_EXACT) {
		r.f = f_add(f_add(u.f, u.f), 1);
		return r;
	}
	s = 1.0 / (1.0 + exp(-u.d));
	r.d = num_round(s * (1.0 + u.d * (1.0 - s)));
	return r;
}

/* out = x W^T with W [nout, nin]. */
static void
mm_x_wt(struct tensor *out, const struct tensor *x, const union num *w,
    int64_t nout, int64_t nin)
{
	int64_t		 t, o;

	tensor_check(x, x->rows, nin, "linear input");
	tensor_alloc(out, x->rows, nout);
	for (t = 0; t < x->rows; t++)
		for (o = 0; o < nout; o++)
			out->v[t * nout + o] = num_dot(x->v + t * nin, 1,
			    w + o * nin, 1, nin);
}

/* dx = d W with W [nout, nin]. */
static void
mm_d_w(struct tensor *dx, const struct tensor *d, const union num *w,
    int64_t nout, int64_t nin)
{
	int64_t		 t, i;

	tensor_check(d, d->rows, nout, "linear output gradient");
	tensor_alloc(dx, d->rows, nin);
	for (t = 0; t < d->rows; t++)
		for (i = 0; i < nin; i++)
			dx->v[t * nin + i] = num_dot(d->v + t * nout, 1,
			    w + i, nin, nout);
}

/* g += d^T x: the weight gradient of a linear map, summed over tokens. */
static void
mm_acc_dt_x(union num *g, const struct tensor *d, const struct tensor *x)
{
	int64_t		 o, i;

	if (d->rows != x->rows)
		fatalx("numeric: weight gradient over %lld and %lld tokens",
		    (long long)d->rows, (long long)x->rows);
	for (o = 0; o < d->cols; o++)
		for (i = 0; i < x->cols; i++)
			g[o * x->cols + i] = num_add(g[o * x->cols + i],
			    num_dot(d->v + o, d->cols, x->v + i, x->cols,
			    d->rows));
}

/*
 * Rank kernels.
 */

static struct slot *
act_in(struct rank_state *rs, const struct op *op, int j)
{
	if (op->in[j] < 0)
		fatalx("numeric: %s has no input %d", op_kind_name(op->kind), j);
	return &rs->act[op->in[j]];
}

/*
 * Does the id that slot t looks up with a roll by j reach a loss?  The
 * main model's at a valid slot does, and layer j's and each later layer's
 * (which run on its hidden states) where its rolled mask counts.
 */
static bool
slot_matters(const struct loss_norm *ln, int c, int64_t t, int j)
{
	int	 k;

	if (j == 0 && lossnorm_slot_counts(ln, c, t, 0))
		return true;
	for (k = j > 1 ? j : 1; k <= ln->mtp; k++)
		if (lossnorm_slot_counts(ln, c, t, k))
			return true;
	return false;
}

static void
fwd_tokens(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);
	struct tensor	*out = &rs->act[op->out].t;
	const struct loss_norm *ln = eng->loss;
	int64_t		 t, u, valid;
	int		 from;

	/*
	 * The valid tokens spread over the whole vocabulary on their own, so
	 * that padding never leaves a vocab shard without a gradient (which
	 * would hide a wrong combination of it from the numbers).
	 */
	tensor_alloc(out, eng->model->tokens, 1);
	/*
	 * Multi-token prediction layer k looks up the ids rolled by k, across
	 * the cp ranks, 0 past the end of each sequence (roll_tensor).
	 */
	for (t = 0; t < out->rows; t++) {
		u = lossnorm_rolled_slot(ln, rs->batch, t, op->shift, &from);
		valid = u < 0 ? 0 : ln->valid[from];
		out->v[t].f = u < 0 ? 0 : (uint64_t)token_id(
		    eng->weights->seed, from, u, u < valid ? valid :
		    out->rows, eng->cfg->model.vocab);
	}
	/* The test hook of numeric.c: padding must not matter. */
	if (getenv("GRADAUDIT_TEST_SHIFT_PADDING") != NULL)
		for (t = 0; t < out->rows; t++)
			if (!slot_matters(ln, rs->batch, t, op->shift))
				out->v[t].f = (out->v[t].f + 1) %
				    (uint64_t)eng->cfg->model.vocab;
}

/* The vocab rows [lo, lo + rows) of a vocab-parallel weight on a rank. */
static int64_t
vocab_lo(const struct param *p, const struct rank_state *rs)
{
	return (int64_t)rs->coord.tp * p->local_shape[0];
}

static void
fwd_embed(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	const struct tensor	*ids = &act_in(rs, op, 0)->t;
	struct tensor		*out = &rs->act[op->out].t;
	int64_t			 t, row, lo = vocab_lo(p, rs), h = p->local_shape[1];

	tensor_alloc(out, ids->rows, h);
	for (t = 0; t < ids->rows; t++) {
		row = (int64_t)ids->v[t].f - lo;
		if (row >= 0 && row < p->local_shape[0])
			memcpy(out->v + t * h, rs->weight[op->param] + row * h,
			    (size_t)h * sizeof(*out->v));
	}
}

static void
bwd_embed(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	const struct tensor	*ids = &act_in(rs, op, 0)->t;
	const struct tensor	*d = &rs->grad[op->out];
	union num		*g = rs->pgrad[op->param];
	int64_t			 t, k, row, lo = vocab_lo(p, rs);
	int64_t			 h = p->local_shape[1];

	tensor_check(d, ids->rows, h, "embedding gradient");
	for (t = 0; t < ids->rows; t++) {
		row = (int64_t)ids->v[t].f - lo;
		if (row < 0 || row >= p->local_shape[0])
			continue;
		for (k = 0; k < h; k++)
			g[row * h + k] = num_add(g[row * h + k],
			    d->v[t * h + k]);
	}
}

/*
 * Norm: x * w in the field (a linear stand-in that keeps gradients
 * polynomial), RMSNorm x / sqrt(mean(x^2) + eps) * w in floats.  The
 * normalized row goes to xhat and 1/rms to *r.
 */
static void
norm_row(const union num *x, int64_t h, union num *xhat, double *r)
{
	double		 ms = 0;
	int64_t		 k;

	if (num_arith == ARITH_EXACT) {
		memcpy(xhat, x, (size_t)h * sizeof(*x));
		*r = 1;
		return;
	}
	for (k = 0; k < h; k++)
		ms += x[k].d * x[k].d;
	*r = num_round(1.0 / sqrt(ms / (double)h + NUM_NORM_EPS));
	for (k = 0; k < h; k++)
		xhat[k].d = num_round(x[k].d * *r);
}

static void
fwd_norm(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const union num		*w = rs->weight[op->param];
	struct tensor		*out = &rs->act[op->out].t;
	int64_t			 t, k, h = x->cols;
	double			 r;

	tensor_check(x, x->rows, eng->model->params[op->param].local_shape[0],
	    "norm input");
	tensor_alloc(out, x->rows, h);
	for (t = 0; t < x->rows; t++) {
		norm_row(x->v + t * h, h, out->v + t * h, &r);
		for (k = 0; k < h; k++)
			out->v[t * h + k] = num_mul(out->v[t * h + k], w[k]);
	}
}

static void
bwd_norm(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const struct tensor	*d = &rs->grad[op->out];
	const union num		*w = rs->weight[op->param];
	union num		*g = rs->pgrad[op->param], *xhat, *dxhat;
	struct tensor		*dx = &rs->din[0];
	int64_t			 t, k, h = x->cols;
	double			 r;
	union num		 c;

	tensor_check(d, x->rows, h, "norm gradient");
	xhat = xcalloc((size_t)h, sizeof(*xhat));
	dxhat = xcalloc((size_t)h, sizeof(*dxhat));
	tensor_alloc(dx, x->rows, h);
	for (t = 0; t < x->rows; t++) {
		norm_row(x->v + t * h, h, xhat, &r);
		for (k = 0; k < h; k++) {
			g[k] = num_add(g[k], num_mul(d->v[t * h + k], xhat[k]));
			dxhat[k] = num_mul(d->v[t * h + k], w[k]);
		}
		if (num_arith == ARITH_EXACT) {
			memcpy(dx->v + t * h, dxhat, (size_t)h *
			    sizeof(*dxhat));
			continue;
		}
		/* dx = r * (dxhat - xhat * mean(dxhat * xhat)). */
		c.d = num_round(num_dot(dxhat, 1, xhat, 1, h).d / (double)h);
		for (k = 0; k < h; k++)
			dx->v[t * h + k].d = num_round(r * num_round(
			    dxhat[k].d - num_round(xhat[k].d * c.d)));
	}
	free(dxhat);
	free(xhat);
}

/*
 * Column- and row-parallel linears and the vocab-parallel output layer:
 * out = x W^T with the local W.
 */
static void
fwd_linear(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];

	mm_x_wt(&rs->act[op->out].t, &act_in(rs, op, 0)->t,
	    rs->weight[op->param], p->local_shape[0], p->local_shape[1]);
}

static void
bwd_linear(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	const struct tensor	*d = &rs->grad[op->out];

	mm_acc_dt_x(rs->pgrad[op->param], d, &act_in(rs, op, 0)->t);
	mm_d_w(&rs->din[0], d, rs->weight[op->param], p->local_shape[0],
	    p->local_shape[1]);
}

static void
fwd_act(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	struct tensor		*out = &rs->act[op->out].t;
	int64_t			 k;

	tensor_alloc(out, x->rows, x->cols);
	for (k = 0; k < x->rows * x->cols; k++)
		out->v[k] = act_value(x->v[k]);
}

static void
bwd_act(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const struct tensor	*d = &rs->grad[op->out];
	int64_t			 k;

	tensor_check(d, x->rows, x->cols, "activation gradient");
	tensor_alloc(&rs->din[0], x->rows, x->cols);
	for (k = 0; k < x->rows * x->cols; k++)
		rs->din[0].v[k] = num_mul(d->v[k], act_derivative(x->v[k]));
}

/*
 * qk-norm: one [head_dim] weight scales every head of the features this
 * rank holds (whole heads, so the local feature j is head dimension
 * j % head_dim).  Its gradient sums over tokens and over the local heads.
 */
static void
fwd_head_norm(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const union num		*w = rs->weight[op->param];
	int64_t			 hd = eng->model->params[op->param].shape[0];
	struct tensor		*out = &rs->act[op->out].t;
	int64_t			 k;

	tensor_alloc(out, x->rows, x->cols);
	for (k = 0; k < x->rows * x->cols; k++)
		out->v[k] = num_mul(x->v[k], w[(k % x->cols) % hd]);
}

static void
bwd_head_norm(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const struct tensor	*d = &rs->grad[op->out];
	const union num		*w = rs->weight[op->param];
	union num		*g = rs->pgrad[op->param];
	int64_t			 hd = eng->model->params[op->param].shape[0];
	int64_t			 k, j;

	tensor_check(d, x->rows, x->cols, "head norm gradient");
	tensor_alloc(&rs->din[0], x->rows, x->cols);
	for (k = 0; k < x->rows * x->cols; k++) {
		j = (k % x->cols) % hd;
		g[j] = num_add(g[j], num_mul(d->v[k], x->v[k]));
		rs->din[0].v[k] = num_mul(d->v[k], w[j]);
	}
}

/* Residual add: placements join, Replicate parts masked where needed. */
static void
fwd_add(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	struct placement	*place = eng->act_place[stage];
	struct tensor		*out = &rs->act[op->out].t, b;
	int64_t			 k;

	tensor_copy(out, &act_in(rs, op, 0)->t);
	tensor_copy(&b, &act_in(rs, op, 1)->t);
	tensor_check(&b, out->rows, out->cols, "residual input");
	engine_mask_to(&rs->coord, out, place[op->in[0]], place[op->out]);
	engine_mask_to(&rs->coord, &b, place[op->in[1]], place[op->out]);
	for (k = 0; k < out->rows * out->cols; k++)
		out->v[k] = num_add(out->v[k], b.v[k]);
	tensor_free(&b);
}

static void
bwd_add(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	tensor_copy(&rs->din[0], &rs->grad[op->out]);
	tensor_copy(&rs->din[1], &rs->grad[op->out]);
}

/*
 * Router: logits = x W_r^T for every token.  Scores are the logits in the
 * field (identity score function), softmax or sigmoid over the experts in
 * floats.  The top k experts of a token, larger score first and ties to
 * the lower expert, are kept in ascending expert order.
 */
static void
score_row(const struct engine *eng, union num *s, int64_t n)
{
	double		 max, sum = 0;
	int64_t		 e;

	if (num_arith == ARITH_EXACT)
		return;
	if (eng->cfg->model.moe.score_func == SCORE_SIGMOID) {
		for (e = 0; e < n; e++)
			s[e].d = num_round(1.0 / (1.0 + exp(-s[e].d)));
		return;
	}
	max = s[0].d;
	for (e = 1; e < n; e++)
		if (s[e].d > max)
			max = s[e].d;
	for (e = 0; e < n; e++) {
		s[e].d = num_round(exp(s[e].d - max));
		sum += s[e].d;
	}
	for (e = 0; e < n; e++)
		s[e].d = num_round(s[e].d / sum);
}

static void
top_k(const union num *s, int n, int k, int *choice)
{
	bool		*taken;
	int		 i, e, best;

	taken = xcalloc((size_t)n, sizeof(*taken));
	for (i = 0; i < k; i++) {
		best = -1;
		for (e = 0; e < n; e++)
			if (!taken[e] && (best < 0 || num_greater(s[e],
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
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	struct slot		*out = &rs->act[op->out];
	int			 experts = (int)p->local_shape[0];
	int			 k = eng->cfg->model.moe.top_k;
	int64_t			 t;

	mm_x_wt(&out->t, &act_in(rs, op, 0)->t, rs->weight[op->param],
	    p->local_shape[0], p->local_shape[1]);
	out->choice = xcalloc((size_t)(out->t.rows * k),
	    sizeof(*out->choice));
	for (t = 0; t < out->t.rows; t++) {
		score_row(eng, out->t.v + t * experts, experts);
		top_k(out->t.v + t * experts, experts, k,
		    out->choice + t * k);
	}
}

/* dlogits from dscores: identity, or the softmax / sigmoid Jacobian. */
static void
score_row_backward(const struct engine *eng, const union num *s,
    const union num *ds, union num *dl, int64_t n)
{
	union num	 c;
	int64_t		 e;

	if (num_arith == ARITH_EXACT) {
		memcpy(dl, ds, (size_t)n * sizeof(*ds));
		return;
	}
	if (eng->cfg->model.moe.score_func == SCORE_SIGMOID) {
		for (e = 0; e < n; e++)
			dl[e].d = num_round(ds[e].d * num_round(s[e].d *
			    num_round(1.0 - s[e].d)));
		return;
	}
	c = num_dot(s, 1, ds, 1, n);
	for (e = 0; e < n; e++)
		dl[e].d = num_round(s[e].d * num_round(ds[e].d - c.d));
}

/* dl += 2 z lse(l) softmax(l), the z-loss's seed in floats. */
static void
z_row_float(const union num *l, int64_t n, double z, union num *dl)
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
		dl[e].d = num_round(dl[e].d + num_round(2 * z * lse *
		    exp(l[e].d - lse)));
}

/*
 * The MoE auxiliary losses of the chunk, differentiated into the router
 * weight alone (lossnorm.h: their own atoms).  With T the chunk's token
 * slots, E experts, top k, c_e the tokens routed to expert e and p the
 * scores, the load-balancing loss is Switch's a E/(k T^2) sum_e c_e
 * sum_t p[t,e] (Megatron's switch_load_balancing_loss_func) and the z-loss
 * b/T sum_t lse(l[t])^2 over the logits l (z_loss_func).  The counts come
 * from top-k and have no gradient, so the load-balancing loss is linear in
 * the scores and its seed a per-token contribution, a E c_e/(k T^2) on
 * every token's score of e; the z-loss seeds 2b/T lse(l[t]) softmax(l[t])
 * on the logits.  In the field the score function is the identity and
 * lse(l) is replaced by sum_e l[t,e] with softmax 1 (its gradient stays a
 * polynomial), which keeps every seed exact.  The seeds go into the
 * router weight only, not into the block's input: the auxiliary terms
 * reach the hidden states through the same router input gradient as the
 * main loss's, so a scale the framework gets wrong shows in the router's
 * gradient, and the stand-in keeps them out of every other parameter's
 * atoms.
 */
static void
bwd_aux_losses(struct engine *eng, struct rank_state *rs, const struct op *op,
    const struct param *p, struct placement pl)
{
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
		a = num_mul(num_from_rational(ln->aux_loss_coeff),
		    num_from_rational(q_make(n * count[e], (int64_t)k * T * T)));
		for (t = lo; t < hi; t++)
			ds.v[t * n + e] = a;
	}
	for (t = 0; t < T; t++)
		score_row_backward(eng, s->v + t * n, ds.v + t * n,
		    dl.v + t * n, n);
	if (ln->z_loss_coeff.num != 0) {
		z = num_mul(num_from_rational(ln->z_loss_coeff),
		    num_from_rational(q_make(1, T)));
		two = num_from_rational(q_make(2, 1));
		mm_x_wt(&logits, x, rs->weight[op->param], p->local_shape[0],
		    p->local_shape[1]);
		for (t = lo; t < hi; t++) {
			union num *l = logits.v + t * n;

			if (num_arith == ARITH_EXACT) {
				lse.f = 0;
				for (e = 0; e < n; e++)
					lse = num_add(lse, l[e]);
				for (e = 0; e < n; e++)
					dl.v[t * n + e] = num_add(dl.v[t * n +
					    e], num_mul(z, num_mul(two, lse)));
				continue;
			}
			z_row_float(l, n, z.d, dl.v + t * n);
		}
		tensor_free(&logits);
	}
	mm_acc_dt_x(rs->aux_grad[op->param], &dl, x);
	tensor_free(&ds);
	tensor_free(&dl);
	free(count);
}

static void
bwd_route(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
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
	mm_acc_dt_x(rs->pgrad[op->param], &dl, &act_in(rs, op, 0)->t);
	mm_d_w(&rs->din[0], &dl, rs->weight[op->param], p->local_shape[0],
	    p->local_shape[1]);
	tensor_free(&dl);
	if (rs->aux_grad != NULL && rs->aux_grad[op->param] != NULL &&
	    eng->seed == 0)
		bwd_aux_losses(eng, rs, op, p, eng->grad_place[stage][op->out]);
}

/*
 * The router on every rank of the stage, then, under KEY_ROUTER_INPUT_GRAD:
 * tp-all-reduce, its input gradient summed over tp: torchtitan de329200b
 * wraps the gate's plain-tensor input with NoParallel's
 * from_local(Replicate), whose backward all-reduces the Partial gradient
 * that the gate's output declared (local_output_grad_placements).  Where
 * the scores' gradient is complete already, that sum counts it tp times;
 * the pass with every boundary reduced (numeric.c) keeps it once instead,
 * as the placement rules say.
 */
static void
bwd_route_stage(struct engine *eng, int stage, int opi)
{
	const struct op	 *op = engine_op(eng, stage, opi);
	struct placement  from = eng->grad_place[stage][op->out];
	struct tensor	**dx;
	int		  i;

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
 * Shared-expert gate (Megatron 1fa9464e7c): out[t] = y[t] * s(x[t] . w)
 * with x the block input and y the reduced shared-expert output.  The
 * score s is the identity in the field (to keep gradients polynomial) and
 * the sigmoid of SharedExpertMLP.forward in floats.
 */
static union num
gate_score(union num u)
{
	if (num_arith != ARITH_EXACT)
		u.d = num_round(1.0 / (1.0 + exp(-u.d)));
	return u;
}

static union num
gate_score_derivative(union num s)
{
	union num	 r;

	if (num_arith == ARITH_EXACT) {
		r.f = 1;
		return r;
	}
	r.d = num_round(s.d * num_round(1.0 - s.d));
	return r;
}

static void
fwd_gate(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const struct tensor	*y = &act_in(rs, op, 1)->t;
	const union num		*w = rs->weight[op->param];
	struct tensor		*out = &rs->act[op->out].t;
	int64_t			 t, k, h = x->cols;
	union num		 s;

	tensor_check(x, x->rows, eng->model->params[op->param].local_shape[1],
	    "gate input");
	tensor_check(y, x->rows, h, "shared expert output");
	tensor_alloc(out, x->rows, h);
	for (t = 0; t < x->rows; t++) {
		s = gate_score(num_dot(x->v + t * h, 1, w, 1, h));
		for (k = 0; k < h; k++)
			out->v[t * h + k] = num_mul(y->v[t * h + k], s);
	}
}

static void
bwd_gate(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const struct tensor	*y = &act_in(rs, op, 1)->t;
	const struct tensor	*d = &rs->grad[op->out];
	const union num		*w = rs->weight[op->param];
	union num		*g = rs->pgrad[op->param];
	int64_t			 t, k, h = x->cols;
	union num		 s, du;

	tensor_check(d, x->rows, h, "gate gradient");
	tensor_alloc(&rs->din[0], x->rows, h);
	tensor_alloc(&rs->din[1], x->rows, h);
	for (t = 0; t < x->rows; t++) {
		s = gate_score(num_dot(x->v + t * h, 1, w, 1, h));
		du = num_mul(num_dot(d->v + t * h, 1, y->v + t * h, 1, h),
		    gate_score_derivative(s));
		for (k = 0; k < h; k++) {
			rs->din[1].v[t * h + k] = num_mul(d->v[t * h + k], s);
			rs->din[0].v[t * h + k] = num_mul(du, w[k]);
			g[k] = num_add(g[k], num_mul(du, x->v[t * h + k]));
		}
	}
	(void)eng;
}

/*
 * Loss 1/2 sum (logit - target)^2 over the valid tokens of the chunk, the
 * first valid[batch] of its rows, divided by the chunk's token slots
 * (lossnorm.h: the atoms' unit): dlogits = (logits - target) / tokens on
 * my vocab, 0 on padding.  The framework's loss factor multiplies the
 * result where the micro-batches accumulate, as the backward is linear.
 */
static void
bwd_loss(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*l = &act_in(rs, op, 0)->t;
	struct tensor		*d = &rs->din[0];
	const struct loss_norm	*ln = eng->loss;
	int64_t			 t, u, c, lo = (int64_t)rs->coord.tp * l->cols;
	int64_t			 counted = 0, want;
	int			 from;
	union num		 slot = num_from_rational(q_make(1, l->rows));

	tensor_alloc(d, l->rows, l->cols);
	/* Another loss's pass (numengine.h): no seed from this one. */
	if (op->shift != eng->seed)
		return;
	/*
	 * Multi-token prediction layer k: the labels and the mask rolled by
	 * k across the cp ranks (process_mtp_loss, roll_tensor), so a slot
	 * counts where the slot k positions on does, against its label.
	 */
	for (t = 0; t < l->rows; t++) {
		u = lossnorm_rolled_slot(ln, rs->batch, t, op->shift, &from);
		if (u < 0 || u >= ln->valid[from])
			continue;
		counted++;
		for (c = 0; c < l->cols; c++)
			d->v[t * l->cols + c] = num_mul(slot, num_sub(
			    l->v[t * l->cols + c], target_value(
			    eng->weights->seed, from, u, lo + c)));
	}
	/*
	 * The factors of both engines come from the counts of lossnorm.c,
	 * the mask from these slots: they must be the same tokens.
	 */
	want = op->shift == 0 ? ln->valid[rs->batch] :
	    ln->mtp_valid[(op->shift - 1) * ln->chunks + rs->batch];
	if (counted != want)
		fatalx("numeric: the loss of chunk %d, roll %d, counts %lld "
		    "tokens, its normalization %lld", rs->batch, op->shift,
		    (long long)counted, (long long)want);
}

static void
kernel_none(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	(void)eng;
	(void)rs;
	(void)stage;
	(void)opi;
}

/*
 * Stage kernels with communication.
 */

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

/* Megatron "g": all-reduce over tp, reduce-scatter on tokens with SP. */
static void
fwd_tp_reduce(struct engine *eng, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	stage_tp_apply(eng, stage, op->in[0], false,
	    eng->cfg->training.sequence_parallel ? TP_REDUCE_SCATTER :
	    TP_ALL_REDUCE, op->out);
}

static void
bwd_tp_reduce(struct engine *eng, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	stage_tp_apply(eng, stage, op->out, true,
	    eng->cfg->training.sequence_parallel ? TP_ALL_GATHER :
	    TP_IDENTITY, -1);
}

/* Megatron "f": identity, all-gather on tokens with SP. */
static void
fwd_tp_gather(struct engine *eng, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	stage_tp_apply(eng, stage, op->in[0], false,
	    eng->cfg->training.sequence_parallel && !op->reduce_only ?
	    TP_ALL_GATHER : TP_IDENTITY, op->out);
}

/*
 * Backward of "f": the incoming gradient can be a sum of contributions of
 * different placements (router, routed and shared experts of an MoE
 * block).  Every Replicate sub-dimension becomes Partial first, so the sum
 * over tp counts each replica once (SPEC section 6.2), unless the MoE
 * block boundary declares the gradient otherwise (KEY_MOE_INPUT_GRAD).
 */
static void
bwd_tp_gather(struct engine *eng, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	struct placement	 from = eng->grad_place[stage][op->out];
	struct rank_state	*rs;
	bool			 sp = eng->cfg->training.sequence_parallel;
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
	stage_tp_apply(eng, stage, op->out, true, sp && !op->reduce_only ?
	    TP_REDUCE_SCATTER : TP_ALL_REDUCE, -1);
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

static void
fwd_send(struct engine *eng, int stage, int opi)
{
	pipe_send(eng, stage, engine_op(eng, stage, opi)->in[0], false,
	    next_stage(eng, stage));
}

static void
fwd_recv(struct engine *eng, int stage, int opi)
{
	pipe_receive(eng, stage, prev_stage(eng, stage), false,
	    engine_op(eng, stage, opi)->out);
}

static void
bwd_recv(struct engine *eng, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	pipe_send(eng, stage, op->out, true, prev_stage(eng, stage));
	eng->pipe_place = eng->grad_place[stage][op->out];
}

static void
bwd_send(struct engine *eng, int stage, int opi)
{
	(void)opi;
	pipe_receive(eng, stage, next_stage(eng, stage), true, -1);
}

/*
 * Routed experts (SPEC section 4, MoE flow).  The tp group's tokens are
 * split into tp/etp slices; rank tp_i handles slice tp_i / etp.  For each
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
	int64_t			 per = tokens / m->slices, t0, t;
	int			 j, n = 0;

	t0 = (int64_t)rs->coord.slice * per;
	st->items = xcalloc((size_t)(per * d->top_k), sizeof(*st->items));
	for (t = t0; t < t0 + per; t++)
		for (j = 0; j < d->top_k; j++) {
			st->items[n].token = (int)t;
			st->items[n].expert = scores->choice[t * d->top_k + j];
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
		h[f] = num_dot(w1 + f * H, 1, u, 1, H);
		a[f] = act_value(h[f]);
	}
	for (f = 0; f < H; f++)
		o[f] = num_dot(w2 + f * F, 1, a, 1, F);
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
			g2[k * F + f] = num_add(g2[k * F + f], num_mul(dout[k],
			    a[f]));
	for (f = 0; f < F; f++)
		dh[f] = num_mul(num_dot(w2 + f, F, dout, 1, H),
		    act_derivative(h[f]));
	for (f = 0; f < F; f++)
		for (k = 0; k < H; k++)
			g1[f * H + k] = num_add(g1[f * H + k], num_mul(dh[f],
			    u[k]));
	for (k = 0; k < H; k++)
		du[k] = num_dot(w1 + k, H, dh, 1, F);
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

static void
fwd_experts(struct engine *eng, int stage, int opi)
{
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
				    num_mul(s->v[t * s->cols + e],
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
				out->v[t * d.hidden + k] = num_add(
				    out->v[t * d.hidden + k], d.before ?
				    st->o[j * d.hidden + k] : num_mul(w,
				    st->o[j * d.hidden + k]));
		}
	}
	coll_release(&eng->comm, &in);
}

static void
bwd_experts(struct engine *eng, int stage, int opi)
{
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
				dov[j * d.hidden + k] = d.before ?
				    dout->v[t * d.hidden + k] :
				    num_mul(w, dout->v[t * d.hidden + k]);
			if (!d.before)
				ds->v[t * s->cols + e] = num_dot(dout->v +
				    t * d.hidden, 1, st->o + j * d.hidden, 1,
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
				ds->v[t * s->cols + e] = num_dot(du[i] +
				    j * d.hidden, 1, x->v + t * d.hidden, 1,
				    d.hidden);
			for (k = 0; k < d.hidden; k++)
				dx->v[t * d.hidden + k] = num_add(
				    dx->v[t * d.hidden + k], d.before ?
				    num_mul(w, du[i][j * d.hidden + k]) :
				    du[i][j * d.hidden + k]);
		}
		free(du[i]);
	}
	free(len);
	free(du);
}

/*
 * The op table.
 */
static const struct op_rule op_rules[] = {
	[OP_TOKENS] =	  { fwd_tokens, NULL, kernel_none, NULL, 0 },
	[OP_RECV] =	  { NULL, fwd_recv, NULL, bwd_recv, 0 },
	[OP_EMBED] =	  { fwd_embed, NULL, bwd_embed, NULL, 0 },
	[OP_TP_REDUCE] =  { NULL, fwd_tp_reduce, NULL, bwd_tp_reduce, 1 },
	[OP_TP_GATHER] =  { NULL, fwd_tp_gather, NULL, bwd_tp_gather, 1 },
	[OP_NORM] =	  { fwd_norm, NULL, bwd_norm, NULL, 1 },
	[OP_LINEAR_COL] = { fwd_linear, NULL, bwd_linear, NULL, 1 },
	[OP_ACT] =	  { fwd_act, NULL, bwd_act, NULL, 1 },
	[OP_HEAD_NORM] =  { fwd_head_norm, NULL, bwd_head_norm, NULL, 1 },
	[OP_LINEAR_ROW] = { fwd_linear, NULL, bwd_linear, NULL, 1 },
	[OP_ADD] =	  { fwd_add, NULL, bwd_add, NULL, 3 },
	[OP_ROUTE] =	  { fwd_route, NULL, NULL, bwd_route_stage, 1 },
	[OP_EXPERTS] =	  { NULL, fwd_experts, NULL, bwd_experts, 3 },
	[OP_GATE] =	  { fwd_gate, NULL, bwd_gate, NULL, 3 },
	[OP_OUTPUT] =	  { fwd_linear, NULL, bwd_linear, NULL, 1 },
	[OP_LOSS] =	  { kernel_none, NULL, bwd_loss, NULL, 1 },
	[OP_SEND] =	  { NULL, fwd_send, NULL, bwd_send, 1 },
};

const struct op_rule *
kernel_rule(const struct op *op)
{
	if ((size_t)op->kind >= sizeof(op_rules) / sizeof(op_rules[0]))
		fatalx("numeric: unknown op kind %d", (int)op->kind);
	return &op_rules[op->kind];
}
