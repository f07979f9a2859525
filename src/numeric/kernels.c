/*
 * The kernels of the numeric engine: forward and backward of every op kind,
 * on real values in the numerics of the audit, and the op table.  The
 * kernels themselves live by kind: kernels-dense.c (one rank at a time),
 * kernels-comm.c (tp collectives and pipeline transfers, whose rounds come
 * from collective.h) and kernels-moe.c (the router and the routed
 * experts); this file holds what several of them compute and the table.
 */
#include <math.h>

#include "base/xmalloc.h"
#include "model/model.h"
#include "numeric/field.h"
#include "numeric/kernels-internal.h"
#include "numeric/kernels.h"
#include "numeric/numengine.h"
#include "numeric/numvalue.h"

/*
 * What several kernels compute: the activation and the products of a
 * linear map.
 */

/* The activation: polynomial a(u) = u^2 + u in the field, SiLU in floats. */
union num
act_value(enum arith arith, union num u)
{
	union num	 r;
	double		 s;

	if (arith == ARITH_EXACT) {
		r.f = f_add(f_mul(u.f, u.f), u.f);
		return r;
	}
	s = 1.0 / (1.0 + exp(-u.d));
	r.d = num_round(arith, u.d * s);
	return r;
}

union num
act_derivative(enum arith arith, union num u)
{
	union num	 r;
	double		 s;

	if (arith == ARITH_EXACT) {
		r.f = f_add(f_add(u.f, u.f), 1);
		return r;
	}
	s = 1.0 / (1.0 + exp(-u.d));
	r.d = num_round(arith, s * (1.0 + u.d * (1.0 - s)));
	return r;
}

/* out = x W^T with W [nout, nin]. */
void
mm_x_wt(enum arith arith, struct tensor *out, const struct tensor *x, const
    union num *w, int64_t nout, int64_t nin)
{
	int64_t		 t, o;

	tensor_check(x, x->rows, nin, "linear input");
	tensor_alloc(out, x->rows, nout);
	for (t = 0; t < x->rows; t++)
		for (o = 0; o < nout; o++)
			out->v[t * nout + o] = num_dot(arith, x->v + t * nin, 1,
			    w + o * nin, 1, nin);
}

/* dx = d W with W [nout, nin]. */
void
mm_d_w(enum arith arith, struct tensor *dx, const struct tensor *d, const union
    num *w, int64_t nout, int64_t nin)
{
	int64_t		 t, i;

	tensor_check(d, d->rows, nout, "linear output gradient");
	tensor_alloc(dx, d->rows, nin);
	for (t = 0; t < d->rows; t++)
		for (i = 0; i < nin; i++)
			dx->v[t * nin + i] = num_dot(arith, d->v + t * nout, 1,
			    w + i, nin, nout);
}

/* g += d^T x: the weight gradient of a linear map, summed over tokens. */
void
mm_acc_dt_x(enum arith arith, union num *g, const struct tensor *d, const struct
    tensor *x)
{
	int64_t		 o, i;

	if (d->rows != x->rows)
		fatalx("numeric: weight gradient over %lld and %lld tokens",
		    (long long)d->rows, (long long)x->rows);
	for (o = 0; o < d->cols; o++)
		for (i = 0; i < x->cols; i++)
			g[o * x->cols + i] = num_add(arith, g[o * x->cols + i],
			    num_dot(arith, d->v + o, d->cols, x->v + i, x->cols,
			    d->rows));
}

/* The slot of input j of op, which must have one. */
struct slot *
act_in(struct rank_state *rs, const struct op *op, int j)
{
	if (op->in[j] < 0)
		fatalx("numeric: %s has no input %d", op_kind_name(op->kind), j);
	return &rs->act[op->in[j]];
}

void
kernel_none(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	(void)eng;
	(void)rs;
	(void)stage;
	(void)opi;
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
	[OP_KV] =	  { fwd_kv, NULL, bwd_kv, NULL, 3 },
	[OP_SINK] =	  { fwd_sink, NULL, bwd_sink, NULL, 1 },
	[OP_LINEAR_ROW] = { fwd_linear, NULL, bwd_linear, NULL, 1 },
	[OP_ADD] =	  { fwd_add, NULL, bwd_add, NULL, 3 },
	[OP_ROUTE] =	  { NULL, fwd_route_stage, NULL, bwd_route_stage, 1 },
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
