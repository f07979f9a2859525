/*
 * The rank kernels of the numeric engine (kernels.c): token ids, the
 * embedding, norms, linears, the activation, qk-norm (and out_norm), the
 * key/value heads, the attention sink, the residual add, the shared-expert
 * gate and the loss, each on one rank at a time.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "model/model.h"
#include "model/placement.h"
#include "numeric/kernels-internal.h"
#include "numeric/numdata.h"
#include "numeric/numengine.h"
#include "numeric/numvalue.h"

/* The RMSNorm epsilon of the float numerics. */
#define NUM_NORM_EPS		1e-6

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

void
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

void
fwd_embed(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	const struct tensor	*ids = &act_in(rs, op, 0)->t;
	struct tensor		*out = &rs->act[op->out].t;
	int64_t			 t, row, lo = vocab_lo(p, rs), h =
	    p->local_shape[1];

	tensor_alloc(out, ids->rows, h);
	for (t = 0; t < ids->rows; t++) {
		row = (int64_t)ids->v[t].f - lo;
		if (row >= 0 && row < p->local_shape[0])
			memcpy(out->v + t * h, rs->weight[op->param] + row * h,
			    (size_t)h * sizeof(*out->v));
	}
}

void
bwd_embed(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
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
			g[row * h + k] = num_add(arith, g[row * h + k],
			    d->v[t * h + k]);
	}
}

/*
 * Norm: x * w in the field (a linear stand-in that keeps gradients
 * polynomial), RMSNorm x / sqrt(mean(x^2) + eps) * w in floats.  The
 * normalized row goes to xhat and 1/rms to *r.
 */
static void
norm_row(enum arith arith, const union num *x, int64_t h, union num *xhat,
    double *r)
{
	double		 ms = 0;
	int64_t		 k;

	if (arith == ARITH_EXACT) {
		memcpy(xhat, x, (size_t)h * sizeof(*x));
		*r = 1;
		return;
	}
	for (k = 0; k < h; k++)
		ms += x[k].d * x[k].d;
	*r = num_round(arith, 1.0 / sqrt(ms / (double)h + NUM_NORM_EPS));
	for (k = 0; k < h; k++)
		xhat[k].d = num_round(arith, x[k].d * *r);
}

void
fwd_norm(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
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
		norm_row(arith, x->v + t * h, h, out->v + t * h, &r);
		for (k = 0; k < h; k++)
			out->v[t * h + k] = num_mul(arith, out->v[t * h + k],
			    w[k]);
	}
}

void
bwd_norm(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
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
		norm_row(arith, x->v + t * h, h, xhat, &r);
		for (k = 0; k < h; k++) {
			g[k] = num_add(arith, g[k], num_mul(arith, d->v[t * h +
			    k], xhat[k]));
			dxhat[k] = num_mul(arith, d->v[t * h + k], w[k]);
		}
		if (arith == ARITH_EXACT) {
			memcpy(dx->v + t * h, dxhat, (size_t)h *
			    sizeof(*dxhat));
			continue;
		}
		/* dx = r * (dxhat - xhat * mean(dxhat * xhat)). */
		c.d = num_round(arith, num_dot(arith, dxhat, 1, xhat, 1, h).d /
		    (double)h);
		for (k = 0; k < h; k++)
			dx->v[t * h + k].d = num_round(arith, r *
			    num_round(arith, dxhat[k].d - num_round(arith,
			    xhat[k].d * c.d)));
	}
	free(dxhat);
	free(xhat);
}

/*
 * Column- and row-parallel linears and the vocab-parallel output layer:
 * out = x W^T with the local W.
 */
void
fwd_linear(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];

	mm_x_wt(arith, &rs->act[op->out].t, &act_in(rs, op, 0)->t,
	    rs->weight[op->param], p->local_shape[0], p->local_shape[1]);
}

void
bwd_linear(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	const struct tensor	*d = &rs->grad[op->out];

	mm_acc_dt_x(arith, rs->pgrad[op->param], d, &act_in(rs, op, 0)->t);
	mm_d_w(arith, &rs->din[0], d, rs->weight[op->param], p->local_shape[0],
	    p->local_shape[1]);
}

void
fwd_act(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	struct tensor		*out = &rs->act[op->out].t;
	int64_t			 k;

	tensor_alloc(out, x->rows, x->cols);
	for (k = 0; k < x->rows * x->cols; k++)
		out->v[k] = act_value(arith, x->v[k]);
}

void
bwd_act(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const struct tensor	*d = &rs->grad[op->out];
	int64_t			 k;

	tensor_check(d, x->rows, x->cols, "activation gradient");
	tensor_alloc(&rs->din[0], x->rows, x->cols);
	for (k = 0; k < x->rows * x->cols; k++)
		rs->din[0].v[k] = num_mul(arith, d->v[k], act_derivative(arith,
		    x->v[k]));
}

/*
 * A per-feature scaling: feature column j of the rank's activation is
 * multiplied by w[(j / stride) % period], and the weight's gradient sums
 * d * x over the tokens and the features that share an entry.  The
 * qk-norm and the attention sink's stand-in are two such maps.
 */
static void
fwd_feature_scale(struct engine *eng, struct rank_state *rs,
    const struct op *op, int64_t stride, int64_t period)
{
	enum arith		 arith = eng->arith;
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const union num		*w = rs->weight[op->param];
	struct tensor		*out = &rs->act[op->out].t;
	int64_t			 k;

	tensor_alloc(out, x->rows, x->cols);
	for (k = 0; k < x->rows * x->cols; k++)
		out->v[k] = num_mul(arith, x->v[k],
		    w[(k % x->cols) / stride % period]);
}

static void
bwd_feature_scale(struct engine *eng, struct rank_state *rs,
    const struct op *op, int64_t stride, int64_t period, const char *what)
{
	enum arith		 arith = eng->arith;
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const struct tensor	*d = &rs->grad[op->out];
	const union num		*w = rs->weight[op->param];
	union num		*g = rs->pgrad[op->param];
	int64_t			 k, j;

	tensor_check(d, x->rows, x->cols, what);
	tensor_alloc(&rs->din[0], x->rows, x->cols);
	for (k = 0; k < x->rows * x->cols; k++) {
		j = (k % x->cols) / stride % period;
		g[j] = num_add(arith, g[j], num_mul(arith, d->v[k], x->v[k]));
		rs->din[0].v[k] = num_mul(arith, d->v[k], w[j]);
	}
}

/*
 * qk-norm: one [head_dim] weight scales every head of the features this
 * rank holds (whole heads, so the local feature j is head dimension
 * j % head_dim).  Its gradient sums over tokens and over the local heads.
 */
void
fwd_head_norm(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	fwd_feature_scale(eng, rs, op, 1,
	    eng->model->params[op->param].shape[0]);
}

void
bwd_head_norm(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	bwd_feature_scale(eng, rs, op, 1,
	    eng->model->params[op->param].shape[0], "head norm gradient");
}

/*
 * Grouped-query key/value heads: local feature column j belongs to query
 * head tp * (columns / head_dim) + j / head_dim of the model, which reads
 * key/value head (its query head) / (heads / kv_heads).  The row of the
 * weight this rank holds for it: all key/value heads when the weight is
 * replicated, the rank's own share when it is split with the heads.
 */
static int64_t
kv_row(const struct engine *eng, const struct rank_state *rs,
    const struct param *p, int64_t cols, int64_t j)
{
	int64_t	 hd = eng->cfg->model.head_dim;
	int64_t	 heads = eng->cfg->model.ffn / hd;
	int64_t	 group = heads / eng->cfg->model.kv_heads;
	int64_t	 query = (int64_t)rs->coord.tp * (cols / hd) + j / hd;
	int64_t	 first = 0;

	if (p->local_shape[0] < p->shape[0])
		first = (int64_t)rs->coord.tp * (p->local_shape[0] / hd);
	return (query / group - first) * hd + j % hd;
}

void
fwd_kv(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const struct tensor	*u = &act_in(rs, op, 1)->t;
	const union num		*w = rs->weight[op->param];
	struct tensor		*out = &rs->act[op->out].t;
	int64_t			 t, j, h = p->shape[1];

	tensor_check(u, x->rows, h, "key/value input");
	tensor_copy(out, x);
	for (t = 0; t < x->rows; t++)
		for (j = 0; j < x->cols; j++)
			out->v[t * x->cols + j] = num_add(arith,
			    out->v[t * x->cols + j], num_dot(arith,
			    u->v + t * h, 1, w + kv_row(eng, rs, p, x->cols,
			    j) * h, 1, h));
}

void
bwd_kv(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const struct tensor	*u = &act_in(rs, op, 1)->t;
	const struct tensor	*d = &rs->grad[op->out];
	const union num		*w = rs->weight[op->param];
	union num		*g = rs->pgrad[op->param], dv;
	int64_t			 t, j, i, row, h = p->shape[1];

	tensor_check(d, x->rows, x->cols, "key/value gradient");
	tensor_copy(&rs->din[0], d);
	tensor_alloc(&rs->din[1], x->rows, h);
	for (t = 0; t < x->rows; t++)
		for (j = 0; j < x->cols; j++) {
			row = kv_row(eng, rs, p, x->cols, j) * h;
			dv = d->v[t * x->cols + j];
			for (i = 0; i < h; i++) {
				rs->din[1].v[t * h + i] = num_add(arith,
				    rs->din[1].v[t * h + i], num_mul(arith, dv,
				    w[row + i]));
				g[row + i] = num_add(arith, g[row + i],
				    num_mul(arith, dv, u->v[t * h + i]));
			}
		}
}

/*
 * The attention sink's stand-in: each local head's features scaled by
 * the head's own value, w holding this rank's heads (its shard, in the
 * order of its features).  A head is columns / heads features wide.
 * Its gradient sums over tokens and over the head's features.
 */
static int64_t
sink_head_width(const struct engine *eng, const struct op *op,
    const struct tensor *x)
{
	int64_t	 heads = eng->model->params[op->param].local_shape[0];

	if (heads <= 0 || x->cols % heads != 0)
		fatalx("numeric: %lld features hold no whole %lld heads",
		    (long long)x->cols, (long long)heads);
	return x->cols / heads;
}

void
fwd_sink(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];

	fwd_feature_scale(eng, rs, op, sink_head_width(eng, op,
	    &act_in(rs, op, 0)->t), p->local_shape[0]);
}

void
bwd_sink(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = engine_op(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];

	bwd_feature_scale(eng, rs, op, sink_head_width(eng, op,
	    &act_in(rs, op, 0)->t), p->local_shape[0],
	    "attention sink gradient");
}

/* Residual add: placements join, Replicate parts masked where needed. */
void
fwd_add(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
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
		out->v[k] = num_add(arith, out->v[k], b.v[k]);
	tensor_free(&b);
}

void
bwd_add(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op	*op = engine_op(eng, stage, opi);

	tensor_copy(&rs->din[0], &rs->grad[op->out]);
	tensor_copy(&rs->din[1], &rs->grad[op->out]);
}

/*
 * Shared-expert gate (Megatron 1fa9464e7c): out[t] = y[t] * s(x[t] . w)
 * with x the block input and y the reduced shared-expert output.  The
 * score s is the identity in the field (to keep gradients polynomial) and
 * the sigmoid of SharedExpertMLP.forward in floats.
 */
static union num
gate_score(enum arith arith, union num u)
{
	if (arith != ARITH_EXACT)
		u.d = num_round(arith, 1.0 / (1.0 + exp(-u.d)));
	return u;
}

static union num
gate_score_derivative(enum arith arith, union num s)
{
	union num	 r;

	if (arith == ARITH_EXACT) {
		r.f = 1;
		return r;
	}
	r.d = num_round(arith, s.d * num_round(arith, 1.0 - s.d));
	return r;
}

void
fwd_gate(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
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
		s = gate_score(arith, num_dot(arith, x->v + t * h, 1, w, 1, h));
		for (k = 0; k < h; k++)
			out->v[t * h + k] = num_mul(arith, y->v[t * h + k], s);
	}
}

void
bwd_gate(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
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
		s = gate_score(arith, num_dot(arith, x->v + t * h, 1, w, 1, h));
		du = num_mul(arith, num_dot(arith, d->v + t * h, 1, y->v + t *
		    h, 1, h), gate_score_derivative(arith, s));
		for (k = 0; k < h; k++) {
			rs->din[1].v[t * h + k] = num_mul(arith, d->v[t * h +
			    k], s);
			rs->din[0].v[t * h + k] = num_mul(arith, du, w[k]);
			g[k] = num_add(arith, g[k], num_mul(arith, du, x->v[t *
			    h + k]));
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
void
bwd_loss(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	enum arith		 arith = eng->arith;
	const struct op		*op = engine_op(eng, stage, opi);
	const struct tensor	*l = &act_in(rs, op, 0)->t;
	struct tensor		*d = &rs->din[0];
	const struct loss_norm	*ln = eng->loss;
	int64_t			 t, u, c, lo = (int64_t)rs->coord.tp * l->cols;
	int64_t			 counted = 0, want;
	int			 from;
	union num		 slot = num_from_rational(arith, q_make(1,
	    l->rows));

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
			d->v[t * l->cols + c] = num_mul(arith, slot,
			    num_sub(arith, l->v[t * l->cols + c], target_value(
			    eng->weights, from, u, lo + c)));
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
