/*
 * Unit tests of the numeric kernels (kernels.c and the kernels-*.c it
 * tables), table-driven, on an engine of one rank built by hand: the
 * forward and backward of the linear maps, the activation, qk-norm, the
 * grouped-query key/value op, the attention sink and the residual add,
 * in exact numerics (values of GF(2^61-1), with expectations worked out
 * by hand) and in float64, the router with the auxiliary losses' seed
 * (exact), and the op table's gradient inputs.  A wrong
 * kernel is a wrong gradient in both the audited run and its single-rank
 * reference, so the numeric audit can pass it: a transposed weight
 * gradient agrees with a transposed reference.  Only a test against
 * numbers known in advance catches it.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/lossnorm.h"
#include "model/model.h"
#include "model/placement.h"
#include "numeric/field.h"
#include "numeric/kernels-internal.h"
#include "numeric/kernels.h"
#include "numeric/numengine.h"
#include "numeric/numvalue.h"
#include "tap.h"

/* The largest tensor of a case: 2 tokens x 4 features. */
#define MAXV	8

/* A case of one op on one rank: [tokens, nin] in, weight [nout, nin]. */
struct kernel_case {
	const char	*name;
	enum op_kind	 kind;
	int		 tokens, nin, nout;
	int64_t		 x[MAXV], x2[MAXV];	/* inputs in[0], in[1] */
	int64_t		 w[MAXV];		/* weight, row-major */
	int64_t		 dout[MAXV];		/* gradient of the output */
	/* Expected: the output, the input gradient(s), the weight's. */
	int64_t		 out[MAXV], din[MAXV], din2[MAXV], dw[MAXV];
	bool		 exact_only;	/* floats compute another function */
};

static const struct kernel_case cases[] = {
	/* out = x W^T; dx = d W; dW = d^T x. */
	{ "linear", OP_LINEAR_COL, 2, 3, 2,
	    { 1, 2, 3, 4, 5, 6 }, { 0 },
	    { 1, 0, 2, 0, 1, 1 },
	    { 1, 2, 3, 4 },
	    { 7, 5, 16, 11 },
	    { 1, 2, 4, 3, 4, 10 }, { 0 },
	    { 13, 17, 21, 18, 24, 30 }, false },
	/* Row-parallel: the same map on the local shard. */
	{ "linear row", OP_LINEAR_ROW, 1, 2, 2,
	    { 3, 4 }, { 0 },
	    { 2, 1, 0, 5 },
	    { 1, 1 },
	    { 10, 20 },
	    { 2, 6 }, { 0 },
	    { 3, 4, 3, 4 }, false },
	/* a(u) = u^2 + u in the field; a'(u) = 2u + 1. */
	{ "activation", OP_ACT, 1, 3, 0,
	    { 0, 1, 5 }, { 0 },
	    { 0 },
	    { 1, 2, 3 },
	    { 0, 2, 30 },
	    { 1, 6, 33 }, { 0 },
	    { 0 }, true },
	/*
	 * qk-norm: a [head_dim 2] weight on every head of 4 features;
	 * its gradient sums over tokens and heads.
	 */
	{ "head norm", OP_HEAD_NORM, 1, 4, 2,
	    { 1, 2, 3, 4 }, { 0 },
	    { 2, 3 },
	    { 1, 1, 2, 2 },
	    { 2, 6, 6, 12 },
	    { 2, 3, 4, 6 }, { 0 },
	    { 7, 10 }, false },
	/*
	 * Attention sink: 2 local heads of 2 features, each scaled by its
	 * own value, (2, 5); the gradient of a head's value sums over the
	 * tokens and the head's features: 1 + 2 + 5 = 8 and 6 + 8 + 24 = 38.
	 */
	{ "sink", OP_SINK, 2, 4, 2,
	    { 1, 2, 3, 4, 5, 6, 7, 8 }, { 0 },
	    { 2, 5 },
	    { 1, 1, 2, 2, 1, 0, 0, 3 },
	    { 2, 4, 15, 20, 10, 12, 35, 40 },
	    { 2, 2, 10, 10, 2, 0, 0, 15 }, { 0 },
	    { 8, 38 }, false },
	/* Residual add of two Replicate inputs: both get dout. */
	{ "add", OP_ADD, 1, 2, 0,
	    { 1, 2 }, { 10, 20 },
	    { 0 },
	    { 5, 7 },
	    { 11, 22 },
	    { 5, 7 }, { 5, 7 },
	    { 0 }, false },
};

static union num
num_of(enum arith arith, int64_t v)
{
	union num	 n;

	if (arith == ARITH_EXACT)
		n.f = f_from_int(v);
	else
		n.d = (double)v;
	return n;
}

static bool
same(enum arith arith, const union num *got, const int64_t *want, int64_t n)
{
	int64_t	 i;

	for (i = 0; i < n; i++)
		if (arith == ARITH_EXACT ? got[i].f != f_from_int(want[i]) :
		    got[i].d != (double)want[i])
			return false;
	return true;
}

static void
fill(enum arith arith, struct tensor *t, int64_t rows, int64_t cols,
    const int64_t *v)
{
	int64_t	 i;

	tensor_alloc(t, rows, cols);
	for (i = 0; i < rows * cols; i++)
		t->v[i] = num_of(arith, v[i]);
}

/*
 * A model of one op with one parameter on an engine of one rank, laid out
 * the way the interpreter lays them: every test below builds its op on
 * it.  Its pointers point into itself, so it is initialized in place and
 * never copied.
 */
struct one_op {
	struct config		 cfg;
	struct loss_norm	 ln;
	struct param		 p;
	struct op		 op;
	struct stage_program	 sp;
	struct model		 m;
	struct engine		 eng;
	struct rank_state	 rs;
	struct slot		 act[3];
	struct tensor		 grad[3];
	struct placement	 place[3], *places;
	union num		 w[MAXV], g[MAXV], *weight, *pgrad;
};

/*
 * Op `kind` reading slots in0 and in1 (-1: none) into slot out, of the
 * parameter (param 0) or of none (-1), with the weight w (n values, the
 * rest zero) and a zero weight gradient.
 */
static void
one_op_init(struct one_op *f, enum arith arith, enum op_kind kind,
    int param, int in0, int in1, int out, const int64_t *w, int64_t n)
{
	int64_t	 i;

	memset(f, 0, sizeof *f);
	f->op.kind = kind;
	f->op.param = param;
	f->op.param2 = -1;
	f->op.in[0] = in0;
	f->op.in[1] = in1;
	f->op.out = out;
	f->sp.ops = &f->op;
	f->sp.nops = 1;
	f->sp.nslots = out + 1;
	f->sp.chunk_start = NULL;
	f->m.config = &f->cfg;
	f->m.params = &f->p;
	f->m.nparams = 1;
	f->m.stages = &f->sp;
	f->eng.model = &f->m;
	f->eng.cfg = &f->cfg;
	f->eng.loss = &f->ln;
	f->eng.arith = arith;
	f->eng.ranks = &f->rs;
	f->eng.nranks = 1;
	f->places = f->place;
	f->eng.act_place = &f->places;
	f->eng.grad_place = &f->places;
	for (i = 0; i < 3; i++)
		f->place[i] = pl_uniform(PLACE_REPLICATE);
	f->weight = f->w;
	f->pgrad = f->g;
	f->rs.act = f->act;
	f->rs.grad = f->grad;
	f->rs.weight = &f->weight;
	f->rs.pgrad = &f->pgrad;
	for (i = 0; i < MAXV; i++) {
		f->w[i] = num_of(arith, i < n ? w[i] : 0);
		f->g[i] = num_of(arith, 0);
	}
}

static void
one_op_free(struct one_op *f)
{
	int	 i;

	for (i = 0; i < 3; i++) {
		tensor_free(&f->act[i].t);
		free(f->act[i].choice);
		tensor_free(&f->grad[i]);
	}
	tensor_free(&f->rs.din[0]);
	tensor_free(&f->rs.din[1]);
}

/*
 * Run one case: the forward of the op, then its backward with dout, on a
 * model of one op and one parameter, the way the interpreter runs it.
 */
static void
run_case(const struct kernel_case *kc, enum arith arith)
{
	struct one_op		 f;
	struct rank_state	*rs = &f.rs;
	const struct op_rule	*rule;
	const char		*an = arith_name(arith);
	int64_t			 outcols, wn;
	bool			 linear, two;

	if (kc->exact_only && arith != ARITH_EXACT)
		return;
	linear = kc->kind == OP_LINEAR_COL || kc->kind == OP_LINEAR_ROW;
	two = kc->kind == OP_ADD;
	outcols = linear ? kc->nout : kc->nin;
	wn = kc->kind == OP_HEAD_NORM || kc->kind == OP_SINK ? kc->nout :
	    kc->nout * kc->nin;

	one_op_init(&f, arith, kc->kind, linear || kc->kind == OP_HEAD_NORM ||
	    kc->kind == OP_SINK ? 0 : -1, 0, two ? 1 : -1, 2, kc->w, MAXV);
	f.p.shape[0] = f.p.local_shape[0] = kc->nout;
	f.p.shape[1] = f.p.local_shape[1] = kc->nin;
	fill(arith, &f.act[0].t, kc->tokens, kc->nin, kc->x);
	if (two)
		fill(arith, &f.act[1].t, kc->tokens, kc->nin, kc->x2);

	rule = kernel_rule(&f.op);
	tap_ok(rule->forward != NULL && rule->backward != NULL,
	    "%s: a rank kernel each way", kc->name);
	rule->forward(&f.eng, rs, 0, 0);
	tap_ok(f.act[2].t.rows == kc->tokens && f.act[2].t.cols == outcols &&
	    same(arith, f.act[2].t.v, kc->out, kc->tokens * outcols),
	    "%s, %s: forward", kc->name, an);
	fill(arith, &f.grad[2], kc->tokens, outcols, kc->dout);
	rule->backward(&f.eng, rs, 0, 0);
	tap_ok(rs->din[0].rows == kc->tokens && rs->din[0].cols == kc->nin &&
	    same(arith, rs->din[0].v, kc->din, kc->tokens * kc->nin),
	    "%s, %s: input gradient", kc->name, an);
	if (two)
		tap_ok(same(arith, rs->din[1].v, kc->din2,
		    kc->tokens * kc->nin), "%s, %s: second input gradient",
		    kc->name, an);
	if (f.op.param >= 0)
		tap_ok(same(arith, f.g, kc->dw, wn), "%s, %s: weight gradient",
		    kc->name, an);
	one_op_free(&f);
}

/*
 * The activation in floats is SiLU, u / (1 + e^-u), and its derivative
 * s (1 + u (1 - s)); float32 rounds each result to float.
 */
static void
test_float_activation(void)
{
	static const double	 us[] = { 0.0, 1.0, -2.0, 0.5 };
	union num		 u, a, d;
	double			 s;
	size_t			 i;

	for (i = 0; i < sizeof us / sizeof us[0]; i++) {
		u.d = us[i];
		s = 1.0 / (1.0 + exp(-us[i]));
		a = act_value(ARITH_FLOAT64, u);
		d = act_derivative(ARITH_FLOAT64, u);
		tap_ok(fabs(a.d - us[i] * s) < 1e-15 &&
		    fabs(d.d - s * (1.0 + us[i] * (1.0 - s))) < 1e-15,
		    "SiLU and its derivative at %g", us[i]);
		a = act_value(ARITH_FLOAT32, u);
		tap_ok(a.d == (double)(float)(us[i] * s),
		    "float32 SiLU at %g is a float", us[i]);
	}
}

/* Which inputs each op's backward yields a gradient for. */
static void
test_grad_inputs(void)
{
	static const struct {
		enum op_kind	 kind;
		unsigned	 inputs;
	} want[] = {
		{ OP_TOKENS, 0 }, { OP_EMBED, 0 }, { OP_NORM, 1 },
		{ OP_LINEAR_COL, 1 }, { OP_ADD, 3 }, { OP_EXPERTS, 3 },
		{ OP_GATE, 3 }, { OP_ROUTE, 1 }, { OP_LOSS, 1 }, { OP_KV, 3 },
		{ OP_SINK, 1 },
	};
	struct op	 op;
	size_t		 i;

	memset(&op, 0, sizeof op);
	for (i = 0; i < sizeof want / sizeof want[0]; i++) {
		op.kind = want[i].kind;
		tap_ok(kernel_rule(&op)->grad_inputs == want[i].inputs,
		    "%s: gradient inputs %u", op_kind_name(op.kind),
		    want[i].inputs);
	}
}

/*
 * The grouped-query key/value op on tp rank 1 of 2: ffn 8 and head_dim 2
 * make 4 query heads, kv_heads 2 groups of 2, so the rank's 2 heads (the
 * model's heads 2 and 3) both read key/value head 1, rows 2 and 3 of the
 * weight [4, hidden 2].  Replicated, the rank holds all 4 rows; split
 * over tp (column-parallel), only those 2.  With u = (3, 5), rows
 * (1, 1) and (2, 1) give u w^T = (8, 11) for the head's two features:
 * out = x + (8, 11, 8, 11); for dout = (1, 2, 3, 4) the input gradient
 * of u sums dout_j w_row(j) = (16, 10), and the weight's rows get
 * (1 + 3) u = (12, 20) and (2 + 4) u = (18, 30).
 */
static void
test_kv(enum arith arith, bool column)
{
	static const int64_t	 x[] = { 1, 2, 3, 4 }, u[] = { 3, 5 };
	static const int64_t	 rows[] = { 1, 0, 0, 1, 1, 1, 2, 1 };
	static const int64_t	 out[] = { 9, 13, 11, 15 };
	static const int64_t	 dout[] = { 1, 2, 3, 4 }, du[] = { 16, 10 };
	static const int64_t	 dw[] = { 0, 0, 0, 0, 12, 20, 18, 30 };
	struct one_op		 f;
	const char		*an = arith_name(arith);
	int64_t			 off = column ? 4 : 0;

	one_op_init(&f, arith, OP_KV, 0, 0, 1, 2, rows + off, 8 - off);
	f.cfg.model.ffn = 8;
	f.cfg.model.head_dim = 2;
	f.cfg.model.kv_heads = 2;
	f.p.shape[0] = 4;
	f.p.local_shape[0] = column ? 2 : 4;
	f.p.shape[1] = f.p.local_shape[1] = 2;
	f.rs.coord.tp = 1;
	fill(arith, &f.act[0].t, 1, 4, x);
	fill(arith, &f.act[1].t, 1, 2, u);
	kernel_rule(&f.op)->forward(&f.eng, &f.rs, 0, 0);
	tap_ok(same(arith, f.act[2].t.v, out, 4), "kv%s, %s: forward",
	    column ? " column" : "", an);
	fill(arith, &f.grad[2], 1, 4, dout);
	kernel_rule(&f.op)->backward(&f.eng, &f.rs, 0, 0);
	tap_ok(same(arith, f.rs.din[0].v, dout, 4) &&
	    same(arith, f.rs.din[1].v, du, 2), "kv%s, %s: input gradients",
	    column ? " column" : "", an);
	tap_ok(same(arith, f.g, dw + off, 8 - off),
	    "kv%s, %s: weight gradient", column ? " column" : "", an);
	one_op_free(&f);
}

/*
 * The router's backward (bwd_route) on one rank, exact, in the main
 * loss's pass and in the auxiliary losses' (SEED_AUX, issue 25).  Two
 * tokens x = ((1, 2), (3, 1)), two experts W = ((1, 1), (2, 0)), top 1:
 * the logits (the scores, in the field) are (3, 2) and (4, 6), so token 0
 * picks expert 0 and token 1 expert 1, c = (1, 1).  The load-balancing
 * seed on every score is a E c_e / (k T^2) = 2 x 2 x 1 / 4 = 1 with
 * aux_loss_coeff a = 2; the z-loss's, 2 b/T lse(l[t]) with lse the sum of
 * the logits in the field, is 5 and 10 with b = 1.  With the scores'
 * gradient ds = ((1, 0), (0, 2)) from downstream, the logits' gradient
 * of the auxiliary pass is ((7, 6), (11, 13)): the input gradient dl W
 * is ((19, 7), (37, 11)) and the weight's dl^T x ((40, 25), (45, 25)).
 * The main pass has ds alone: ((1, 1), (4, 0)) and ((1, 2), (6, 2)).
 * The auxiliary part of the input gradient, ((18, 6), (33, 11)), is what
 * reaches the block's input and every parameter upstream.
 */
static void
test_route_aux(int seed)
{
	static const int64_t	 x[] = { 1, 2, 3, 1 }, rw[] = { 1, 1, 2, 0 };
	static const int64_t	 ds[] = { 1, 0, 0, 2 };
	static const int64_t	 din_aux[] = { 19, 7, 37, 11 };
	static const int64_t	 dw_aux[] = { 40, 25, 45, 25 };
	static const int64_t	 din_main[] = { 1, 1, 4, 0 };
	static const int64_t	 dw_main[] = { 1, 2, 6, 2 };
	struct one_op		 f;
	const char		*what = seed == SEED_AUX ? "auxiliary" : "main";

	one_op_init(&f, ARITH_EXACT, OP_ROUTE, 0, 0, -1, 1, rw, 4);
	f.cfg.model.moe.experts = 2;
	f.cfg.model.moe.top_k = 1;
	f.ln.aux_source = 1;
	f.ln.aux_loss_coeff = q_make(2, 1);
	f.ln.z_loss_coeff = q_make(1, 1);
	f.p.role = ROLE_ROUTER;
	f.p.shape[0] = f.p.local_shape[0] = 2;
	f.p.shape[1] = f.p.local_shape[1] = 2;
	f.eng.seed = seed;
	fill(ARITH_EXACT, &f.act[0].t, 2, 2, x);
	kernel_rule(&f.op)->forward_stage(&f.eng, 0, 0);
	tap_ok(f.act[1].choice != NULL && f.act[1].choice[0] == 0 &&
	    f.act[1].choice[1] == 1, "route, %s pass: top-1 choice", what);
	fill(ARITH_EXACT, &f.grad[1], 2, 2, ds);
	kernel_rule(&f.op)->backward_stage(&f.eng, 0, 0);
	tap_ok(same(ARITH_EXACT, f.rs.din[0].v, seed == SEED_AUX ? din_aux :
	    din_main, 4), "route, %s pass: input gradient", what);
	tap_ok(same(ARITH_EXACT, f.g, seed == SEED_AUX ? dw_aux : dw_main, 4),
	    "route, %s pass: weight gradient", what);
	one_op_free(&f);
}

int
main(void)
{
	static const enum arith	 ariths[] = { ARITH_EXACT, ARITH_FLOAT64 };
	size_t			 i, a;

	for (a = 0; a < sizeof ariths / sizeof ariths[0]; a++)
		for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
			run_case(&cases[i], ariths[a]);
	for (a = 0; a < sizeof ariths / sizeof ariths[0]; a++) {
		test_kv(ariths[a], false);
		test_kv(ariths[a], true);
	}
	test_route_aux(0);
	test_route_aux(SEED_AUX);
	test_float_activation();
	test_grad_inputs();
	return tap_done();
}
