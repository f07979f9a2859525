/*
 * The numeric audit (SPEC section 8): the model of model.h run for real on
 * the mesh ranks this process hosts, every collective and every pipeline
 * transfer a round of messages between MPI processes (transport.h), then
 * the sync plan executed on real gradient buffers, then every rank's values
 * hashed and compared with a single-rank reference on process 0.
 *
 * The file is layered:
 *
 *   arithmetic	one number type for the three numerics: a field element
 *		of GF(2^61-1) or a double (float32 is a double rounded to
 *		float after every operation, which is exactly IEEE float32
 *		arithmetic since a double holds more than twice float's
 *		precision), so every kernel is written once;
 *   data	weights and inputs as pure functions of (seed, indices), so
 *		shards, replicas, both instances of a tied weight and the
 *		reference all agree without exchanging anything;
 *   messages	rounds of the transport, or a loopback for the reference;
 *   collectives all-reduce, reduce-scatter, all-gather over mesh groups,
 *		each receiver summing in group order so that float replicas
 *		are bitwise equal;
 *   kernels	forward and backward of every op kind, in a table;
 *   interpreter every process walks the same global sequence of ops
 *		(forward over stages 0..pp-1, backward over pp-1..0), so the
 *		rounds of all processes line up: a process with no rank on the
 *		active stage takes part with an empty outbox;
 *   sync	the steps of the sync plan, as syncplan.h defines them and
 *		symbolic.c executes them on expressions;
 *   reference	the same interpreter on the single-rank model, once per dp
 *		micro-batch;
 *   comparison	hashes, reference verdicts and the self-check against the
 *		symbolic audit (process 0).
 *
 * Test hooks, environment variables the test suite sets to exercise the
 * failure paths of `gradaudit run` (never set them otherwise); r is a mesh
 * rank and the process hosting it acts:
 *   GRADAUDIT_TEST_KILL_RANK=r	 raise SIGKILL at the start of backward;
 *   GRADAUDIT_TEST_HANG_RANK=r	 sleep forever there;
 *   GRADAUDIT_TEST_CORRUPT_RANK=r add 1 to the first element of the rank's
 *				 first synced gradient, which the self-check
 *				 must report (exit 3).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "audit.h"
#include "config.h"
#include "exitcode.h"
#include "field.h"
#include "hash.h"
#include "layout.h"
#include "lincomb.h"
#include "mesh.h"
#include "model.h"
#include "numeric.h"
#include "placement.h"
#include "progress.h"
#include "symbolic.h"
#include "syncplan.h"
#include "transport.h"
#include "xmalloc.h"

/* Self-check failures printed before the rest are only counted. */
#define NUM_MAX_MESSAGES	10

/* The RMSNorm epsilon of the float numerics. */
#define NUM_NORM_EPS		1e-6

/*
 * Arithmetic.
 */

union num {
	uint64_t	f;	/* exact: an element of GF(2^61-1) */
	double		d;	/* float64, or a float32 value held in a double */
};

/*
 * The numerics of the audit in progress.  One audit runs at a time, and
 * threading the mode through every kernel would only add noise.
 */
static enum arith	num_arith = ARITH_EXACT;

static double
num_round(double x)
{
	return num_arith == ARITH_FLOAT32 ? (double)(float)x : x;
}

static union num
num_add(union num a, union num b)
{
	union num	 r;

	if (num_arith == ARITH_EXACT)
		r.f = f_add(a.f, b.f);
	else
		r.d = num_round(a.d + b.d);
	return r;
}

static union num
num_sub(union num a, union num b)
{
	union num	 r;

	if (num_arith == ARITH_EXACT)
		r.f = f_sub(a.f, b.f);
	else
		r.d = num_round(a.d - b.d);
	return r;
}

static union num
num_mul(union num a, union num b)
{
	union num	 r;

	if (num_arith == ARITH_EXACT)
		r.f = f_mul(a.f, b.f);
	else
		r.d = num_round(a.d * b.d);
	return r;
}

/* All bits zero is 0 in the field and +0.0 as a double. */
static union num
num_zero(void)
{
	union num	 r = { 0 };

	return r;
}

static union num
num_from_rational(struct rational q)
{
	union num	 r;

	if (num_arith == ARITH_EXACT)
		r.f = f_from_rational(q.num, q.den);
	else
		r.d = num_round((double)q.num / (double)q.den);
	return r;
}

/*
 * a / n, the AVG of a collective: a real division, or a multiplication by
 * the field inverse of n, which is remembered since one collective divides
 * every element by the same group size.
 */
static union num
num_div_int(union num a, int n)
{
	static int	 inverse_of;
	static uint64_t	 inverse;
	union num	 r;

	if (num_arith != ARITH_EXACT) {
		r.d = num_round(a.d / n);
		return r;
	}
	if (n != inverse_of) {
		inverse = f_inv(f_from_int(n));
		inverse_of = n;
	}
	r.f = f_mul(a.f, inverse);
	return r;
}

/* Ordering for top-k: canonical field value, or the real value. */
static int
num_greater(union num a, union num b)
{
	if (num_arith == ARITH_EXACT)
		return a.f > b.f;
	return a.d > b.d;
}

static union num
num_dot(const union num *a, int64_t astride, const union num *b,
    int64_t bstride, int64_t n)
{
	union num	 acc = num_zero();
	int64_t		 i;

	for (i = 0; i < n; i++)
		acc = num_add(acc, num_mul(a[i * astride], b[i * bstride]));
	return acc;
}

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

/*
 * Tensors: row-major [tokens, features] activations and gradients.
 */

struct tensor {
	int64_t		 rows, cols;
	union num	*v;
};

static void
tensor_alloc(struct tensor *t, int64_t rows, int64_t cols)
{
	t->rows = rows;
	t->cols = cols;
	t->v = xcalloc((size_t)(rows * cols), sizeof(*t->v));
}

static void
tensor_free(struct tensor *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}

static void
tensor_copy(struct tensor *dst, const struct tensor *src)
{
	tensor_alloc(dst, src->rows, src->cols);
	memcpy(dst->v, src->v, (size_t)(src->rows * src->cols) *
	    sizeof(*src->v));
}

static void
tensor_check(const struct tensor *t, int64_t rows, int64_t cols,
    const char *what)
{
	if (t->v == NULL || t->rows != rows || t->cols != cols)
		fatalx("numeric: %s is %lldx%lld, expected %lldx%lld", what,
		    (long long)t->rows, (long long)t->cols, (long long)rows,
		    (long long)cols);
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
 * Deterministic data.  Every value is drawn from a generator state mixed
 * from the seed and the value's indices, never from a running stream, so
 * any rank can compute any element on its own.
 */

enum draw_kind {
	DRAW_WEIGHT = 1,
	DRAW_TOKEN,
	DRAW_TARGET
};

static uint64_t
draw_state(uint64_t seed, enum draw_kind kind, uint64_t a, uint64_t b,
    uint64_t c)
{
	uint64_t	 s = seed, parts[4] = { (uint64_t)kind, a, b, c };
	int		 i;

	for (i = 0; i < 4; i++) {
		s ^= parts[i];
		s = rng_next(&s);
	}
	return s;
}

static union num
draw_value(uint64_t state, double scale)
{
	union num	 r;

	if (num_arith == ARITH_EXACT)
		r.f = f_random(&state);
	else
		r.d = num_round(d_random(&state) * scale);
	return r;
}

/*
 * Weights are keyed by the logical parameter of the audited model, so both
 * instances of a tied weight, and the reference's single copy, get the
 * same values; scale[key] keeps float activations near 1 (1/sqrt(fan_in)).
 */
struct weight_source {
	uint64_t	 seed;
	double		*scale;		/* per logical parameter */
};

static double
weight_scale(const struct param *p)
{
	switch (p->role) {
	case ROLE_EMBEDDING:
	case ROLE_NORM:
		return 1.0;
	case ROLE_COLUMN:
	case ROLE_ROW:
	case ROLE_ROUTER:
	case ROLE_OUTPUT:
		return 1.0 / sqrt((double)p->shape[1]);
	case ROLE_EXPERT_FC1:
	case ROLE_EXPERT_FC2:
		return 1.0 / sqrt((double)p->shape[2]);
	}
	return 1.0;
}

static union num
weight_value(const struct weight_source *ws, int key, int64_t global)
{
	return draw_value(draw_state(ws->seed, DRAW_WEIGHT, (uint64_t)key,
	    (uint64_t)global, 0), ws->scale[key]);
}

static int64_t
token_id(uint64_t seed, int batch, int64_t t, int vocab)
{
	uint64_t	 s;

	s = draw_state(seed, DRAW_TOKEN, (uint64_t)batch, (uint64_t)t, 0);
	return (int64_t)(rng_next(&s) % (uint64_t)vocab);
}

static union num
target_value(uint64_t seed, int batch, int64_t t, int64_t column)
{
	return draw_value(draw_state(seed, DRAW_TARGET, (uint64_t)batch,
	    (uint64_t)t, (uint64_t)column), 1.0);
}

/*
 * Per-rank state and the engine.
 */

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
	struct moe_state *moe;		/* per op of the stage program */
};

struct engine {
	const struct model		*model;
	const struct config		*cfg;
	struct transport		*transport;	/* NULL: loopback */
	struct rank_state		*ranks;
	int				 nranks;
	const struct weight_source	*weights;
	int				*key;		/* per param */

	/* Placements, the same on every rank: per stage, per slot. */
	struct placement		**act_place;
	struct placement		**grad_place;
	bool				**grad_set;

	/* The pipeline transfer in flight between two stages. */
	struct inbox			 pipe;
	bool				 pipe_full;
	struct placement		 pipe_place;
};

static const struct op *
op_at(const struct engine *eng, int stage, int opi)
{
	return &eng->model->stages[stage].ops[opi];
}

static int
rank_at(const struct engine *eng, int pp, int dp, int tp)
{
	return mesh_rank_of(&eng->model->mesh, pp, dp, tp);
}

/*
 * Messages.  The reference runs on one rank without MPI: its "rounds" are a
 * loopback that turns the outbox into the inbox.
 */

enum tag {
	TAG_ALL_REDUCE = 1,
	TAG_REDUCE_SCATTER,
	TAG_ALL_GATHER,
	TAG_PIPE,
	TAG_DISPATCH,
	TAG_COMBINE,
	TAG_COLLECT
};

struct outbox {
	struct message	*v;
	size_t		 n, cap;
};

/* Queue a message; the outbox owns data until the round. */
static void
outbox_add(struct outbox *ob, int src, int dst, int tag, void *data,
    size_t len)
{
	if (ob->n == ob->cap) {
		ob->cap = ob->cap == 0 ? 16 : 2 * ob->cap;
		ob->v = xreallocarray(ob->v, ob->cap, sizeof(*ob->v));
	}
	ob->v[ob->n].src = src;
	ob->v[ob->n].dst = dst;
	ob->v[ob->n].tag = tag;
	ob->v[ob->n].len = len;
	ob->v[ob->n].data = data;
	ob->n++;
}

static void
outbox_add_nums(struct outbox *ob, int src, int dst, int tag,
    const union num *v, int64_t n)
{
	union num	*copy;

	copy = xcalloc((size_t)n, sizeof(*copy));
	memcpy(copy, v, (size_t)n * sizeof(*v));
	outbox_add(ob, src, dst, tag, copy, (size_t)n * sizeof(*v));
}

/* One round: every process calls this the same number of times. */
static void
exchange(struct engine *eng, struct outbox *ob, struct inbox *in)
{
	size_t		 i;

	memset(in, 0, sizeof(*in));
	if (eng->transport != NULL) {
		transport_round(eng->transport, ob->v, ob->n, in);
		for (i = 0; i < ob->n; i++)
			free(ob->v[i].data);
		free(ob->v);
	} else {
		qsort(ob->v, ob->n, sizeof(*ob->v), message_compare);
		in->v = ob->v;
		in->n = ob->n;
	}
	memset(ob, 0, sizeof(*ob));
}

static void
inbox_release(struct engine *eng, struct inbox *in)
{
	size_t		 i;

	if (eng->transport != NULL)
		inbox_free(in);
	else {
		for (i = 0; i < in->n; i++)
			free(in->v[i].data);
		free(in->v);
	}
	memset(in, 0, sizeof(*in));
}

/* The payload of (src, dst, tag) as numbers; a missing message is fatal. */
static const union num *
inbox_nums(const struct inbox *in, int src, int dst, int tag, int64_t *n)
{
	const struct message	*m;

	if ((m = inbox_find(in, src, dst, tag)) == NULL)
		fatalx("numeric: no message from rank %d to rank %d (tag %d)",
		    src, dst, tag);
	*n = (int64_t)(m->len / sizeof(union num));
	return m->data;
}

static const union num *
inbox_nums_exact(const struct inbox *in, int src, int dst, int tag,
    int64_t n)
{
	const union num	*v;
	int64_t		 got;

	v = inbox_nums(in, src, dst, tag, &got);
	if (got != n)
		fatalx("numeric: message from rank %d to rank %d has %lld "
		    "values, expected %lld", src, dst, (long long)got,
		    (long long)n);
	return v;
}

/* A tensor travels as its two dimensions followed by its values. */
static void
outbox_add_tensor(struct outbox *ob, int src, int dst, int tag,
    const struct tensor *t)
{
	union num	*p;
	int64_t		 n = t->rows * t->cols;

	p = xcalloc((size_t)(n + 2), sizeof(*p));
	p[0].f = (uint64_t)t->rows;
	p[1].f = (uint64_t)t->cols;
	memcpy(p + 2, t->v, (size_t)n * sizeof(*p));
	outbox_add(ob, src, dst, tag, p, (size_t)(n + 2) * sizeof(*p));
}

static void
inbox_tensor(const struct inbox *in, int src, int dst, int tag,
    struct tensor *t)
{
	const union num	*p;
	int64_t		 n;

	p = inbox_nums(in, src, dst, tag, &n);
	if (n < 2 || (int64_t)(p[0].f * p[1].f) != n - 2)
		fatalx("numeric: malformed tensor from rank %d", src);
	tensor_alloc(t, (int64_t)p[0].f, (int64_t)p[1].f);
	memcpy(t->v, p + 2, (size_t)(n - 2) * sizeof(*p));
}

/*
 * Collectives over mesh groups.  vec[i] is the contribution of
 * eng->ranks[i] (NULL when that rank takes no part).  Every member sends
 * what each other member needs; each receiver sums the contributions in
 * group order, starting from member 0's, so all receivers of a sum hold
 * bitwise equal floats.  A group of one needs no round, and since group
 * sizes are the same on every process, all processes skip it together.
 */

static void
sum_in_group_order(union num *dst, const union num *const *parts, int n,
    int64_t len, bool average)
{
	int64_t		 k;
	int		 j;

	for (k = 0; k < len; k++) {
		union num acc = parts[0][k];

		for (j = 1; j < n; j++)
			acc = num_add(acc, parts[j][k]);
		dst[k] = average ? num_div_int(acc, n) : acc;
	}
}

static void
coll_all_reduce(struct engine *eng, enum group_kind kind, union num **vec,
    const int64_t *len, bool average)
{
	const struct mesh	*m = &eng->model->mesh;
	const union num		**parts;
	struct outbox		 ob = { 0 };
	struct inbox		 in;
	union num		*sum;
	int			*members, n, i, j, me;

	n = mesh_group_size(m, kind);
	if (n == 1)
		return;
	members = xcalloc((size_t)n, sizeof(*members));
	parts = xcalloc((size_t)n, sizeof(*parts));
	for (i = 0; i < eng->nranks; i++) {
		if (vec[i] == NULL)
			continue;
		if ((me = mesh_group(m, kind, eng->ranks[i].rank,
		    members)) < 0)
			fatalx("numeric: rank %d is in no %s group",
			    eng->ranks[i].rank, mesh_group_name(kind));
		for (j = 0; j < n; j++)
			if (j != me)
				outbox_add_nums(&ob, eng->ranks[i].rank,
				    members[j], TAG_ALL_REDUCE, vec[i], len[i]);
	}
	exchange(eng, &ob, &in);
	for (i = 0; i < eng->nranks; i++) {
		if (vec[i] == NULL)
			continue;
		me = mesh_group(m, kind, eng->ranks[i].rank, members);
		for (j = 0; j < n; j++)
			parts[j] = j == me ? vec[i] : inbox_nums_exact(&in,
			    members[j], eng->ranks[i].rank, TAG_ALL_REDUCE,
			    len[i]);
		sum = xcalloc((size_t)len[i], sizeof(*sum));
		sum_in_group_order(sum, parts, n, len[i], average);
		memcpy(vec[i], sum, (size_t)len[i] * sizeof(*sum));
		free(sum);
	}
	inbox_release(eng, &in);
	free(parts);
	free(members);
}

/* Shard k of a bucket, clipped to the bucket's real (unpadded) data. */
static void
bucket_shard(const struct bucket *b, int k, int64_t *lo, int64_t *hi)
{
	*lo = b->lo + (int64_t)k * b->shard;
	*hi = *lo + b->shard;
	if (*hi > b->hi)
		*hi = b->hi;
	if (*lo > *hi)
		*lo = *hi;
}

/* Shard k of every bucket, concatenated. */
static int64_t
gather_shards(const struct buffer_layout *bl, int k, const union num *buf,
    union num *out)
{
	int64_t		 lo, hi, n = 0;
	int		 b;

	for (b = 0; b < bl->nbuckets; b++) {
		bucket_shard(&bl->buckets[b], k, &lo, &hi);
		if (out != NULL)
			memcpy(out + n, buf + lo, (size_t)(hi - lo) *
			    sizeof(*buf));
		n += hi - lo;
	}
	return n;
}

static void
scatter_shards(const struct buffer_layout *bl, int k, const union num *in,
    union num *buf)
{
	int64_t		 lo, hi, n = 0;
	int		 b;

	for (b = 0; b < bl->nbuckets; b++) {
		bucket_shard(&bl->buckets[b], k, &lo, &hi);
		memcpy(buf + lo, in + n, (size_t)(hi - lo) * sizeof(*buf));
		n += hi - lo;
	}
}

/*
 * The distributed optimizer's bucketed reduce-scatter: member k of the
 * group receives the sum (average) of shard k of every bucket; all other
 * elements keep their local value.  buf[i] is rank i's whole buffer laid
 * out by bl[i].
 */
static void
coll_reduce_scatter(struct engine *eng, enum group_kind kind,
    union num **buf, const struct buffer_layout **bl, bool average)
{
	const struct mesh	*m = &eng->model->mesh;
	const union num		**parts;
	struct outbox		 ob = { 0 };
	struct inbox		 in;
	union num		*mine, *sum;
	int64_t			 n;
	int			*members, size, i, j, b, me;

	size = mesh_group_size(m, kind);
	if (size == 1)
		return;
	members = xcalloc((size_t)size, sizeof(*members));
	parts = xcalloc((size_t)size, sizeof(*parts));
	for (i = 0; i < eng->nranks; i++) {
		if (buf[i] == NULL)
			continue;
		for (b = 0; b < bl[i]->nbuckets; b++)
			if (bl[i]->buckets[b].group_size != size)
				fatalx("numeric: bucket for %d members reduced "
				    "over a %s group of %d", bl[i]->buckets[b].
				    group_size, mesh_group_name(kind), size);
		me = mesh_group(m, kind, eng->ranks[i].rank, members);
		for (j = 0; j < size; j++) {
			if (j == me)
				continue;
			n = gather_shards(bl[i], j, buf[i], NULL);
			mine = xcalloc((size_t)n, sizeof(*mine));
			gather_shards(bl[i], j, buf[i], mine);
			outbox_add(&ob, eng->ranks[i].rank, members[j],
			    TAG_REDUCE_SCATTER, mine, (size_t)n *
			    sizeof(*mine));
		}
	}
	exchange(eng, &ob, &in);
	for (i = 0; i < eng->nranks; i++) {
		if (buf[i] == NULL)
			continue;
		me = mesh_group(m, kind, eng->ranks[i].rank, members);
		n = gather_shards(bl[i], me, buf[i], NULL);
		mine = xcalloc((size_t)n, sizeof(*mine));
		gather_shards(bl[i], me, buf[i], mine);
		for (j = 0; j < size; j++)
			parts[j] = j == me ? mine : inbox_nums_exact(&in,
			    members[j], eng->ranks[i].rank,
			    TAG_REDUCE_SCATTER, n);
		sum = xcalloc((size_t)n, sizeof(*sum));
		sum_in_group_order(sum, parts, size, n, average);
		scatter_shards(bl[i], me, sum, buf[i]);
		free(sum);
		free(mine);
	}
	inbox_release(eng, &in);
	free(parts);
	free(members);
}

/*
 * Sequence parallelism splits the tokens of each sample over tp: member i
 * holds, of sample b, the tokens b*seq + [i*seq/tp, (i+1)*seq/tp).  The
 * full-tensor row of member i's local row j:
 */
static int64_t
sp_row(const struct engine *eng, int member, int64_t j)
{
	int64_t		 seq = eng->cfg->model.seq;
	int64_t		 per = seq / eng->model->mesh.tp;

	return (j / per) * seq + (int64_t)member * per + j % per;
}

/*
 * Tensor collectives over the tp group of every rank of a stage:
 * in[i] / out[i] belong to eng->ranks[i] (in[i] NULL for ranks elsewhere).
 */
static void
coll_all_gather_tokens(struct engine *eng, struct tensor **in,
    struct tensor *out)
{
	const struct mesh	*m = &eng->model->mesh;
	const struct tensor	*x;
	const union num		*p;
	struct outbox		 ob = { 0 };
	struct inbox		 in_box;
	int64_t			 rows, j;
	int			*members, i, k, me;

	members = xcalloc((size_t)m->tp, sizeof(*members));
	for (i = 0; i < eng->nranks; i++) {
		if (in[i] == NULL)
			continue;
		me = mesh_group(m, GROUP_TP, eng->ranks[i].rank, members);
		for (k = 0; k < m->tp; k++)
			if (k != me)
				outbox_add_nums(&ob, eng->ranks[i].rank,
				    members[k], TAG_ALL_GATHER, in[i]->v,
				    in[i]->rows * in[i]->cols);
	}
	exchange(eng, &ob, &in_box);
	for (i = 0; i < eng->nranks; i++) {
		if ((x = in[i]) == NULL)
			continue;
		me = mesh_group(m, GROUP_TP, eng->ranks[i].rank, members);
		rows = x->rows;
		tensor_alloc(&out[i], rows * m->tp, x->cols);
		for (k = 0; k < m->tp; k++) {
			p = k == me ? x->v : inbox_nums_exact(&in_box,
			    members[k], eng->ranks[i].rank, TAG_ALL_GATHER,
			    rows * x->cols);
			for (j = 0; j < rows; j++)
				memcpy(out[i].v + sp_row(eng, k, j) * x->cols,
				    p + j * x->cols, (size_t)x->cols *
				    sizeof(*p));
		}
	}
	inbox_release(eng, &in_box);
	free(members);
}

static void
coll_reduce_scatter_tokens(struct engine *eng, struct tensor **in,
    struct tensor *out)
{
	const struct mesh	*m = &eng->model->mesh;
	const union num		**parts;
	const struct tensor	*x;
	struct outbox		 ob = { 0 };
	struct inbox		 in_box;
	union num		*rows_of;
	int64_t			 rows, cols, j;
	int			*members, i, k, me;

	members = xcalloc((size_t)m->tp, sizeof(*members));
	parts = xcalloc((size_t)m->tp, sizeof(*parts));
	for (i = 0; i < eng->nranks; i++) {
		if ((x = in[i]) == NULL)
			continue;
		rows = x->rows / m->tp;
		cols = x->cols;
		me = mesh_group(m, GROUP_TP, eng->ranks[i].rank, members);
		for (k = 0; k < m->tp; k++) {
			if (k == me)
				continue;
			rows_of = xcalloc((size_t)(rows * cols),
			    sizeof(*rows_of));
			for (j = 0; j < rows; j++)
				memcpy(rows_of + j * cols, x->v +
				    sp_row(eng, k, j) * cols, (size_t)cols *
				    sizeof(*rows_of));
			outbox_add(&ob, eng->ranks[i].rank, members[k],
			    TAG_REDUCE_SCATTER, rows_of, (size_t)(rows *
			    cols) * sizeof(*rows_of));
		}
	}
	exchange(eng, &ob, &in_box);
	for (i = 0; i < eng->nranks; i++) {
		if ((x = in[i]) == NULL)
			continue;
		rows = x->rows / m->tp;
		cols = x->cols;
		me = mesh_group(m, GROUP_TP, eng->ranks[i].rank, members);
		rows_of = xcalloc((size_t)(rows * cols), sizeof(*rows_of));
		for (j = 0; j < rows; j++)
			memcpy(rows_of + j * cols, x->v + sp_row(eng, me, j) *
			    cols, (size_t)cols * sizeof(*rows_of));
		for (k = 0; k < m->tp; k++)
			parts[k] = k == me ? rows_of : inbox_nums_exact(
			    &in_box, members[k], eng->ranks[i].rank,
			    TAG_REDUCE_SCATTER, rows * cols);
		tensor_alloc(&out[i], rows, cols);
		sum_in_group_order(out[i].v, parts, m->tp, rows * cols,
		    false);
		free(rows_of);
	}
	inbox_release(eng, &in_box);
	free(parts);
	free(members);
}

/* In-place all-reduce (sum) of tensors over tp. */
static void
coll_all_reduce_tensors(struct engine *eng, struct tensor **t)
{
	union num	**vec;
	int64_t		*len;
	int		 i;

	vec = xcalloc((size_t)eng->nranks, sizeof(*vec));
	len = xcalloc((size_t)eng->nranks, sizeof(*len));
	for (i = 0; i < eng->nranks; i++)
		if (t[i] != NULL) {
			vec[i] = t[i]->v;
			len[i] = t[i]->rows * t[i]->cols;
		}
	coll_all_reduce(eng, GROUP_TP, vec, len, false);
	free(len);
	free(vec);
}

/*
 * Placements.  A tp group inside an MoE layer is tp/etp token slices times
 * etp (placement.h); rank tp_i sits in slice tp_i / etp at etp coordinate
 * tp_i % etp.  Adding a Replicate part to a Partial one (DTensor's
 * Replicate -> Partial conversion) keeps the value on coordinate 0 of that
 * sub-dimension and zero elsewhere, so the eventual sum counts it once.
 */
static bool
keeps_value(const struct engine *eng, const struct coord *c,
    struct placement from, struct placement to)
{
	int	 etp = eng->model->mesh.etp;

	if (from.slice == PLACE_REPLICATE && to.slice == PLACE_PARTIAL &&
	    c->tp / etp != 0)
		return false;
	if (from.etp == PLACE_REPLICATE && to.etp == PLACE_PARTIAL &&
	    c->tp % etp != 0)
		return false;
	return true;
}

static void
mask_to(const struct engine *eng, const struct coord *c, struct tensor *t,
    struct placement from, struct placement to)
{
	if (!keeps_value(eng, c, from, to))
		memset(t->v, 0, (size_t)(t->rows * t->cols) * sizeof(*t->v));
}

static struct placement
place_of(struct placement *place, int slot)
{
	return slot >= 0 ? place[slot] : pl_uniform(PLACE_REPLICATE);
}

/*
 * The kernels: forward and backward of every op kind.  Rank kernels work on
 * one rank; stage kernels on every local rank of the stage at once, around
 * the rounds of their collective.  Backward kernels read the gradient of
 * the op's output from grad[out] and leave the gradients of its inputs in
 * din[]; the interpreter adds those to the input slots.
 */

static struct slot *
act_in(struct rank_state *rs, const struct op *op, int j)
{
	if (op->in[j] < 0)
		fatalx("numeric: %s has no input %d", op_kind_name(op->kind), j);
	return &rs->act[op->in[j]];
}

static void
fwd_tokens(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op	*op = op_at(eng, stage, opi);
	struct tensor	*out = &rs->act[op->out].t;
	int64_t		 t;

	tensor_alloc(out, eng->model->tokens, 1);
	for (t = 0; t < out->rows; t++)
		out->v[t].f = (uint64_t)token_id(eng->weights->seed, rs->batch,
		    t, eng->cfg->model.vocab);
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
	const struct op		*op = op_at(eng, stage, opi);
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
	const struct op		*op = op_at(eng, stage, opi);
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
	const struct op		*op = op_at(eng, stage, opi);
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
	const struct op		*op = op_at(eng, stage, opi);
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
	const struct op		*op = op_at(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];

	mm_x_wt(&rs->act[op->out].t, &act_in(rs, op, 0)->t,
	    rs->weight[op->param], p->local_shape[0], p->local_shape[1]);
}

static void
bwd_linear(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = op_at(eng, stage, opi);
	const struct param	*p = &eng->model->params[op->param];
	const struct tensor	*d = &rs->grad[op->out];

	mm_acc_dt_x(rs->pgrad[op->param], d, &act_in(rs, op, 0)->t);
	mm_d_w(&rs->din[0], d, rs->weight[op->param], p->local_shape[0],
	    p->local_shape[1]);
}

static void
fwd_act(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = op_at(eng, stage, opi);
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
	const struct op		*op = op_at(eng, stage, opi);
	const struct tensor	*x = &act_in(rs, op, 0)->t;
	const struct tensor	*d = &rs->grad[op->out];
	int64_t			 k;

	tensor_check(d, x->rows, x->cols, "activation gradient");
	tensor_alloc(&rs->din[0], x->rows, x->cols);
	for (k = 0; k < x->rows * x->cols; k++)
		rs->din[0].v[k] = num_mul(d->v[k], act_derivative(x->v[k]));
}

/* Residual add: placements join, Replicate parts masked where needed. */
static void
fwd_add(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = op_at(eng, stage, opi);
	struct placement	*place = eng->act_place[stage];
	struct tensor		*out = &rs->act[op->out].t, b;
	int64_t			 k;

	tensor_copy(out, &act_in(rs, op, 0)->t);
	tensor_copy(&b, &act_in(rs, op, 1)->t);
	tensor_check(&b, out->rows, out->cols, "residual input");
	mask_to(eng, &rs->coord, out, place[op->in[0]], place[op->out]);
	mask_to(eng, &rs->coord, &b, place[op->in[1]], place[op->out]);
	for (k = 0; k < out->rows * out->cols; k++)
		out->v[k] = num_add(out->v[k], b.v[k]);
	tensor_free(&b);
}

static void
bwd_add(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op	*op = op_at(eng, stage, opi);

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
	const struct op		*op = op_at(eng, stage, opi);
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

static void
bwd_route(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = op_at(eng, stage, opi);
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
}

/* Loss 1/2 sum (logit - target)^2: dlogits = logits - target, my vocab. */
static void
bwd_loss(struct engine *eng, struct rank_state *rs, int stage, int opi)
{
	const struct op		*op = op_at(eng, stage, opi);
	const struct tensor	*l = &act_in(rs, op, 0)->t;
	struct tensor		*d = &rs->din[0];
	int64_t			 t, c, lo = (int64_t)rs->coord.tp * l->cols;

	tensor_alloc(d, l->rows, l->cols);
	for (t = 0; t < l->rows; t++)
		for (c = 0; c < l->cols; c++)
			d->v[t * l->cols + c] = num_sub(l->v[t * l->cols + c],
			    target_value(eng->weights->seed, rs->batch, t,
			    lo + c));
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

static bool
on_stage(const struct rank_state *rs, int stage)
{
	return rs->coord.pp == stage;
}

/* in[i]: the tensor in slot `slot` of local rank i, NULL off the stage. */
static struct tensor **
stage_tensors(struct engine *eng, int stage, int slot, bool grad)
{
	struct tensor	**t;
	int		  i;

	t = xcalloc((size_t)eng->nranks, sizeof(*t));
	for (i = 0; i < eng->nranks; i++)
		if (on_stage(&eng->ranks[i], stage))
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

	if (eng->model->mesh.tp == 1 && kind != TP_IDENTITY)
		kind = TP_IDENTITY;
	switch (kind) {
	case TP_REDUCE_SCATTER:
		coll_reduce_scatter_tokens(eng, src, dst);
		return;
	case TP_ALL_GATHER:
		coll_all_gather_tokens(eng, src, dst);
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
		coll_all_reduce_tensors(eng, t);
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
		if (!on_stage(&eng->ranks[i], stage))
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
	const struct op	*op = op_at(eng, stage, opi);

	stage_tp_apply(eng, stage, op->in[0], false,
	    eng->cfg->training.sequence_parallel ? TP_REDUCE_SCATTER :
	    TP_ALL_REDUCE, op->out);
}

static void
bwd_tp_reduce(struct engine *eng, int stage, int opi)
{
	const struct op	*op = op_at(eng, stage, opi);

	stage_tp_apply(eng, stage, op->out, true,
	    eng->cfg->training.sequence_parallel ? TP_ALL_GATHER :
	    TP_IDENTITY, -1);
}

/* Megatron "f": identity, all-gather on tokens with SP. */
static void
fwd_tp_gather(struct engine *eng, int stage, int opi)
{
	const struct op	*op = op_at(eng, stage, opi);

	stage_tp_apply(eng, stage, op->in[0], false,
	    eng->cfg->training.sequence_parallel ? TP_ALL_GATHER :
	    TP_IDENTITY, op->out);
}

/*
 * Backward of "f": the incoming gradient can be a sum of contributions of
 * different placements (router, routed and shared experts of an MoE
 * block).  Every Replicate sub-dimension becomes Partial first, so the sum
 * over tp counts each replica once: the block input's gradient is always
 * summed correctly (SPEC section 6.2).
 */
static void
bwd_tp_gather(struct engine *eng, int stage, int opi)
{
	const struct op		*op = op_at(eng, stage, opi);
	struct placement	 from = eng->grad_place[stage][op->out];
	struct rank_state	*rs;
	int			 i;

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (on_stage(rs, stage))
			mask_to(eng, &rs->coord, &rs->grad[op->out], from,
			    pl_uniform(PLACE_PARTIAL));
	}
	stage_tp_apply(eng, stage, op->out, true,
	    eng->cfg->training.sequence_parallel ? TP_REDUCE_SCATTER :
	    TP_ALL_REDUCE, -1);
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
		if (on_stage(rs, stage))
			outbox_add_tensor(&ob, rs->rank, rank_at(eng, to_stage,
			    rs->coord.dp, rs->coord.tp), TAG_PIPE, grad ?
			    &rs->grad[slot] : &rs->act[slot].t);
	}
	exchange(eng, &ob, &eng->pipe);
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
		if (on_stage(rs, stage))
			inbox_tensor(&eng->pipe, rank_at(eng, from_stage,
			    rs->coord.dp, rs->coord.tp), rs->rank, TAG_PIPE,
			    grad ? &rs->din[0] : &rs->act[slot].t);
	}
	inbox_release(eng, &eng->pipe);
	eng->pipe_full = false;
}

static void
fwd_send(struct engine *eng, int stage, int opi)
{
	pipe_send(eng, stage, op_at(eng, stage, opi)->in[0], false, stage + 1);
}

static void
fwd_recv(struct engine *eng, int stage, int opi)
{
	pipe_receive(eng, stage, stage - 1, false,
	    op_at(eng, stage, opi)->out);
}

static void
bwd_recv(struct engine *eng, int stage, int opi)
{
	const struct op	*op = op_at(eng, stage, opi);

	pipe_send(eng, stage, op->out, true, stage - 1);
	eng->pipe_place = eng->grad_place[stage][op->out];
}

static void
bwd_send(struct engine *eng, int stage, int opi)
{
	(void)opi;
	pipe_receive(eng, stage, stage + 1, true, -1);
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

static void
moe_state_free(struct moe_state *st)
{
	free(st->items);
	free(st->o);
	free(st->work);
	free(st->u);
	free(st->h);
	free(st->a);
	memset(st, 0, sizeof(*st));
}

/* My (token, expert) pairs in (token, expert) order, with their owners. */
static void
moe_items(const struct engine *eng, struct rank_state *rs, int stage,
    const struct slot *scores, const struct moe_dims *d, struct moe_state *st)
{
	const struct mesh	*m = &eng->model->mesh;
	int64_t			 tokens = scores->t.rows;
	int64_t			 per = tokens / (m->tp / m->etp), t0, t;
	int			 j, n = 0;

	t0 = (int64_t)(rs->coord.tp / m->etp) * per;
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
	const union num		*u, *h, *a;
	union num		*dh;

	if (index >= st->nwork || st->work[index].owner != src ||
	    st->work[index].token != token ||
	    st->work[index].expert != expert)
		fatalx("numeric: expert backward pair (%d, %d) from rank %d "
		    "does not match forward", token, expert, src);
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
	const struct op		*op = op_at(eng, stage, opi);
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
		if (!on_stage(rs, stage))
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
	exchange(eng, &ob, &in);

	/* The experts, on their owners. */
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!on_stage(rs, stage))
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
	inbox_release(eng, &in);
	exchange(eng, &ob, &in);

	/* Combine: out_t = sum over my pairs of (score after ? s o : o). */
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!on_stage(rs, stage))
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
	inbox_release(eng, &in);
}

static void
bwd_experts(struct engine *eng, int stage, int opi)
{
	const struct op		*op = op_at(eng, stage, opi);
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
		if (!on_stage(rs, stage))
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
	exchange(eng, &ob, &in);

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!on_stage(rs, stage))
			continue;
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
	inbox_release(eng, &in);
	exchange(eng, &ob, &in);

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!on_stage(rs, stage))
			continue;
		st = &rs->moe[opi];
		len[i] = st->nitems * d.hidden;
		du[i] = xcalloc((size_t)len[i], sizeof(*du[i]));
		moe_collect(&in, rs->rank, st, du[i], d.hidden, TAG_COMBINE);
	}
	inbox_release(eng, &in);

	/*
	 * torchtitan #1878: the routed input's gradient is Partial over etp
	 * and must be all-reduced there; "none" skips it.  The members of an
	 * etp group share one token slice and one routing, so their pairs
	 * line up one to one.
	 */
	if (eng->cfg->sync.expert_input_grad == EXPERT_INPUT_ETP_ALL_REDUCE)
		coll_all_reduce(eng, GROUP_ETP, du, len, false);

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!on_stage(rs, stage))
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
 * The op table.  grad_inputs: bit j set when backward yields the gradient
 * of in[j] (token ids have none).
 */
typedef void rank_kernel(struct engine *, struct rank_state *, int, int);
typedef void stage_kernel(struct engine *, int, int);

struct op_rule {
	rank_kernel	*forward;
	stage_kernel	*forward_stage;
	rank_kernel	*backward;
	stage_kernel	*backward_stage;
	unsigned	 grad_inputs;
};

static const struct op_rule op_rules[] = {
	[OP_TOKENS] =	  { fwd_tokens, NULL, kernel_none, NULL, 0 },
	[OP_RECV] =	  { NULL, fwd_recv, NULL, bwd_recv, 0 },
	[OP_EMBED] =	  { fwd_embed, NULL, bwd_embed, NULL, 0 },
	[OP_TP_REDUCE] =  { NULL, fwd_tp_reduce, NULL, bwd_tp_reduce, 1 },
	[OP_TP_GATHER] =  { NULL, fwd_tp_gather, NULL, bwd_tp_gather, 1 },
	[OP_NORM] =	  { fwd_norm, NULL, bwd_norm, NULL, 1 },
	[OP_LINEAR_COL] = { fwd_linear, NULL, bwd_linear, NULL, 1 },
	[OP_ACT] =	  { fwd_act, NULL, bwd_act, NULL, 1 },
	[OP_LINEAR_ROW] = { fwd_linear, NULL, bwd_linear, NULL, 1 },
	[OP_ADD] =	  { fwd_add, NULL, bwd_add, NULL, 3 },
	[OP_ROUTE] =	  { fwd_route, NULL, bwd_route, NULL, 1 },
	[OP_EXPERTS] =	  { NULL, fwd_experts, NULL, bwd_experts, 3 },
	[OP_OUTPUT] =	  { fwd_linear, NULL, bwd_linear, NULL, 1 },
	[OP_LOSS] =	  { kernel_none, NULL, bwd_loss, NULL, 1 },
	[OP_SEND] =	  { NULL, fwd_send, NULL, bwd_send, 1 },
};

static const struct op_rule *
rule_of(const struct op *op)
{
	if ((size_t)op->kind >= sizeof(op_rules) / sizeof(op_rules[0]))
		fatalx("numeric: unknown op kind %d", (int)op->kind);
	return &op_rules[op->kind];
}

/*
 * The interpreter.
 */

static void
run_rank_kernel(struct engine *eng, rank_kernel *fn, int stage, int opi)
{
	int	 i;

	for (i = 0; i < eng->nranks; i++)
		if (on_stage(&eng->ranks[i], stage))
			fn(eng, &eng->ranks[i], stage, opi);
}

static void
forward_op(struct engine *eng, int stage, int opi)
{
	const struct op		*op = op_at(eng, stage, opi);
	const struct op_rule	*rule = rule_of(op);
	struct placement	 in[2], *place = eng->act_place[stage];

	in[0] = place_of(place, op->in[0]);
	in[1] = place_of(place, op->in[1]);
	if (op->out >= 0)
		place[op->out] = pl_forward(eng->model, op, in);
	if (rule->forward_stage != NULL)
		rule->forward_stage(eng, stage, opi);
	else
		run_rank_kernel(eng, rule->forward, stage, opi);
}

/*
 * Add din[j] of every rank of the stage to the gradient of input slot
 * `slot`, joining placements: a Replicate part that meets a Partial one is
 * masked to member 0 first.
 */
static void
accumulate(struct engine *eng, int stage, int slot, int j,
    struct placement incoming)
{
	struct placement	 old = eng->grad_place[stage][slot], joined;
	bool			 had = eng->grad_set[stage][slot];
	struct rank_state	*rs;
	struct tensor		*g, *d;
	int64_t			 k;
	int			 i;

	joined = had ? pl_join(old, incoming) : incoming;
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (!on_stage(rs, stage))
			continue;
		g = &rs->grad[slot];
		d = &rs->din[j];
		if (d->v == NULL)
			fatalx("numeric: no gradient for input %d", j);
		mask_to(eng, &rs->coord, d, incoming, joined);
		if (!had) {
			tensor_free(g);
			*g = *d;
			memset(d, 0, sizeof(*d));
			continue;
		}
		tensor_check(d, g->rows, g->cols, "gradient contribution");
		mask_to(eng, &rs->coord, g, old, joined);
		for (k = 0; k < g->rows * g->cols; k++)
			g->v[k] = num_add(g->v[k], d->v[k]);
		tensor_free(d);
	}
	eng->grad_place[stage][slot] = joined;
	eng->grad_set[stage][slot] = true;
}

static void
backward_op(struct engine *eng, int stage, int opi)
{
	const struct op		*op = op_at(eng, stage, opi);
	const struct op_rule	*rule = rule_of(op);
	struct placement	 fwd_in[2], din[2], dparam[2], dout;
	struct placement	*place = eng->act_place[stage];
	struct backward_reduction red;
	struct rank_state	*rs;
	int			 i, j;

	fwd_in[0] = place_of(place, op->in[0]);
	fwd_in[1] = place_of(place, op->in[1]);
	if (op->kind == OP_SEND)
		dout = eng->pipe_place;
	else if (op->out >= 0 && eng->grad_set[stage][op->out])
		dout = eng->grad_place[stage][op->out];
	else
		dout = pl_uniform(PLACE_REPLICATE);
	/*
	 * As pl_walk() does: the loss seeds a gradient placed like the
	 * logits, and a stage's last activation gets what the next stage's
	 * first op sent back.
	 */
	if (op->kind == OP_LOSS || op->kind == OP_SEND)
		din[0] = din[1] = pl_normalize(&eng->model->mesh,
		    op->kind == OP_LOSS ? fwd_in[0] : dout);
	else
		pl_backward(eng->model, op, fwd_in, dout, din, dparam, &red);

	/* An output nothing read back has a zero gradient. */
	if (op->out >= 0 && !eng->grad_set[stage][op->out]) {
		for (i = 0; i < eng->nranks; i++) {
			rs = &eng->ranks[i];
			if (on_stage(rs, stage))
				tensor_alloc(&rs->grad[op->out],
				    rs->act[op->out].t.rows,
				    rs->act[op->out].t.cols);
		}
		eng->grad_place[stage][op->out] = dout;
		eng->grad_set[stage][op->out] = true;
	}
	if (rule->backward_stage != NULL)
		rule->backward_stage(eng, stage, opi);
	else
		run_rank_kernel(eng, rule->backward, stage, opi);
	for (j = 0; j < 2; j++)
		if ((rule->grad_inputs & (1u << j)) && op->in[j] >= 0)
			accumulate(eng, stage, op->in[j], j, din[j]);
	for (i = 0; i < eng->nranks; i++) {
		tensor_free(&eng->ranks[i].din[0]);
		tensor_free(&eng->ranks[i].din[1]);
	}
}

/*
 * Fault injection for the test suite (see the top of the file): the local
 * index of the mesh rank that environment variable `var` names, or -1.
 */
static int
local_rank_from_env(const struct engine *eng, const char *var)
{
	const char	*s = getenv(var);
	char		*end;
	long		 r;
	int		 i;

	if (eng->transport == NULL || s == NULL || *s == '\0')
		return -1;
	r = strtol(s, &end, 10);
	if (*end != '\0')
		return -1;
	for (i = 0; i < eng->nranks; i++)
		if (eng->ranks[i].rank == r)
			return i;
	return -1;
}

static void
test_faults(const struct engine *eng)
{
	if (local_rank_from_env(eng, "GRADAUDIT_TEST_KILL_RANK") >= 0)
		raise(SIGKILL);
	if (local_rank_from_env(eng, "GRADAUDIT_TEST_HANG_RANK") >= 0)
		for (;;)
			pause();
}

/* Add 1 to the first synced gradient element of the rank, if it is here. */
static void
test_corruption(struct engine *eng)
{
	struct rank_state	*rs;
	int			 i, p;

	if ((i = local_rank_from_env(eng, "GRADAUDIT_TEST_CORRUPT_RANK")) < 0)
		return;
	rs = &eng->ranks[i];
	for (p = 0; p < eng->model->nparams; p++)
		if (rs->pgrad[p] != NULL) {
			rs->pgrad[p][0] = num_add(rs->pgrad[p][0],
			    num_from_rational(q_make(1, 1)));
			return;
		}
}

/* Progress, on process 0 only; units are ops, sync steps and params. */
struct progress_count {
	bool	 on;
	int64_t	 done;
};

static void
progress_tick(struct progress_count *pc)
{
	if (pc != NULL && pc->on)
		progress_update(++pc->done);
}

static void
run_model(struct engine *eng, struct progress_count *pc)
{
	const struct model	*m = eng->model;
	int			 s, k;

	for (s = 0; s < m->mesh.pp; s++)
		for (k = 0; k < m->stages[s].nops; k++) {
			forward_op(eng, s, k);
			progress_tick(pc);
		}
	test_faults(eng);
	for (s = m->mesh.pp - 1; s >= 0; s--) {
		memset(eng->grad_set[s], 0, (size_t)m->stages[s].nslots *
		    sizeof(bool));
		for (k = m->stages[s].nops - 1; k >= 0; k--) {
			backward_op(eng, s, k);
			progress_tick(pc);
		}
	}
}

/*
 * Engine set-up: the ranks hosted here with their weights drawn from the
 * seed, zero gradients and empty slots.
 */
static void
rank_clear(struct engine *eng, struct rank_state *rs)
{
	const struct stage_program	*sp = &eng->model->stages[rs->coord.pp];
	int				 k;

	for (k = 0; k < sp->nslots; k++) {
		tensor_free(&rs->act[k].t);
		free(rs->act[k].choice);
		rs->act[k].choice = NULL;
		tensor_free(&rs->grad[k]);
	}
	for (k = 0; k < sp->nops; k++)
		moe_state_free(&rs->moe[k]);
}

static void
rank_init(struct engine *eng, struct rank_state *rs, int rank)
{
	const struct model		*m = eng->model;
	const struct stage_program	*sp;
	const struct param		*p;
	int64_t				 i;
	int				 k;

	memset(rs, 0, sizeof(*rs));
	rs->rank = rank;
	mesh_coord_of(&m->mesh, rank, &rs->coord);
	rs->batch = rs->coord.dp;
	sp = &m->stages[rs->coord.pp];
	rs->act = xcalloc((size_t)sp->nslots, sizeof(*rs->act));
	rs->grad = xcalloc((size_t)sp->nslots, sizeof(*rs->grad));
	rs->moe = xcalloc((size_t)sp->nops, sizeof(*rs->moe));
	rs->weight = xcalloc((size_t)m->nparams, sizeof(*rs->weight));
	rs->pgrad = xcalloc((size_t)m->nparams, sizeof(*rs->pgrad));
	for (k = 0; k < m->nparams; k++) {
		p = &m->params[k];
		if (!model_rank_holds(m, p, rank))
			continue;
		rs->weight[k] = xcalloc((size_t)p->local_elems,
		    sizeof(*rs->weight[k]));
		rs->pgrad[k] = xcalloc((size_t)p->local_elems,
		    sizeof(*rs->pgrad[k]));
		for (i = 0; i < p->local_elems; i++)
			rs->weight[k][i] = weight_value(eng->weights,
			    eng->key[k], model_global_index(m, p, rank, i));
	}
}

static void
rank_free(struct engine *eng, struct rank_state *rs)
{
	int	 k;

	rank_clear(eng, rs);
	for (k = 0; k < eng->model->nparams; k++) {
		free(rs->weight[k]);
		free(rs->pgrad[k]);
	}
	free(rs->weight);
	free(rs->pgrad);
	free(rs->act);
	free(rs->grad);
	free(rs->moe);
}

static void
engine_init(struct engine *eng, const struct model *m,
    struct transport *transport, const int *ranks, int nranks,
    const struct weight_source *ws, int *key)
{
	int	 s, i;

	memset(eng, 0, sizeof(*eng));
	eng->model = m;
	eng->cfg = m->config;
	eng->transport = transport;
	eng->weights = ws;
	eng->key = key;
	eng->nranks = nranks;
	eng->ranks = xcalloc((size_t)nranks, sizeof(*eng->ranks));
	for (i = 0; i < nranks; i++)
		rank_init(eng, &eng->ranks[i], ranks[i]);
	eng->act_place = xcalloc((size_t)m->mesh.pp, sizeof(*eng->act_place));
	eng->grad_place = xcalloc((size_t)m->mesh.pp,
	    sizeof(*eng->grad_place));
	eng->grad_set = xcalloc((size_t)m->mesh.pp, sizeof(*eng->grad_set));
	for (s = 0; s < m->mesh.pp; s++) {
		eng->act_place[s] = xcalloc((size_t)m->stages[s].nslots,
		    sizeof(**eng->act_place));
		eng->grad_place[s] = xcalloc((size_t)m->stages[s].nslots,
		    sizeof(**eng->grad_place));
		eng->grad_set[s] = xcalloc((size_t)m->stages[s].nslots,
		    sizeof(**eng->grad_set));
	}
}

static void
engine_free(struct engine *eng)
{
	int	 s, i;

	for (i = 0; i < eng->nranks; i++)
		rank_free(eng, &eng->ranks[i]);
	free(eng->ranks);
	for (s = 0; s < eng->model->mesh.pp; s++) {
		free(eng->act_place[s]);
		free(eng->grad_place[s]);
		free(eng->grad_set[s]);
	}
	free(eng->act_place);
	free(eng->grad_place);
	free(eng->grad_set);
	if (eng->pipe_full)
		inbox_release(eng, &eng->pipe);
	memset(eng, 0, sizeof(*eng));
}

/*
 * The sync plan (syncplan.h), executed on the real local gradients.
 */

/*
 * SYNC_MASK_REPLICAS (the plan emits it over tp only): keep the value on
 * coordinate 0 of every sub-dimension `replicate` marks Replicate.
 */
static bool
mask_keeps(const struct engine *eng, const struct sync_step *st,
    const struct rank_state *rs)
{
	return keeps_value(eng, &rs->coord, st->replicate,
	    pl_uniform(PLACE_PARTIAL));
}

/* The stage buffer of `kind` on a rank, gathered from its parameters. */
static union num *
buffer_pack(const struct engine *eng, const struct layout *layout,
    const struct rank_state *rs, enum buffer_kind kind)
{
	const struct stage_layout	*sl = &layout->stages[rs->coord.pp];
	const struct model		*m = eng->model;
	union num			*buf;
	int				 p;

	if (sl->buffer[kind].size == 0)
		return NULL;
	buf = xcalloc((size_t)sl->buffer[kind].size, sizeof(*buf));
	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && sl->offset[p] >= 0 &&
		    layout_buffer_of(m, p) == kind)
			memcpy(buf + sl->offset[p], rs->pgrad[p],
			    (size_t)m->params[p].local_elems * sizeof(*buf));
	return buf;
}

static void
buffer_unpack(const struct engine *eng, const struct layout *layout,
    struct rank_state *rs, enum buffer_kind kind, const union num *buf)
{
	const struct stage_layout	*sl = &layout->stages[rs->coord.pp];
	const struct model		*m = eng->model;
	int				 p;

	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && sl->offset[p] >= 0 &&
		    layout_buffer_of(m, p) == kind)
			memcpy(rs->pgrad[p], buf + sl->offset[p],
			    (size_t)m->params[p].local_elems * sizeof(*buf));
}

/* The parameters a TARGET_PARAMS step selects on a rank, concatenated. */
static union num *
params_pack(const struct engine *eng, const struct sync_step *st,
    const struct rank_state *rs, int64_t *len)
{
	const struct model	*m = eng->model;
	union num		*v = NULL;
	int64_t			 n = 0;
	int			 p;

	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && syncplan_touches(st, m, p))
			n += m->params[p].local_elems;
	*len = n;
	if (n == 0)
		return NULL;
	v = xcalloc((size_t)n, sizeof(*v));
	for (n = 0, p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && syncplan_touches(st, m, p)) {
			memcpy(v + n, rs->pgrad[p],
			    (size_t)m->params[p].local_elems * sizeof(*v));
			n += m->params[p].local_elems;
		}
	return v;
}

static void
params_unpack(const struct engine *eng, const struct sync_step *st,
    struct rank_state *rs, const union num *v)
{
	const struct model	*m = eng->model;
	int64_t			 n = 0;
	int			 p;

	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && syncplan_touches(st, m, p)) {
			memcpy(rs->pgrad[p], v + n,
			    (size_t)m->params[p].local_elems * sizeof(*v));
			n += m->params[p].local_elems;
		}
}

static void
sync_local(struct engine *eng, const struct sync_step *st)
{
	const struct model	*m = eng->model;
	struct rank_state	*rs;
	union num		 scale = num_from_rational(st->scale);
	int64_t			 k;
	int			 i, p;

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		for (p = 0; p < m->nparams; p++) {
			if (rs->pgrad[p] == NULL || !syncplan_touches(st, m, p))
				continue;
			if (st->op == SYNC_MASK_REPLICAS) {
				if (!mask_keeps(eng, st, rs))
					memset(rs->pgrad[p], 0, (size_t)m->
					    params[p].local_elems *
					    sizeof(*rs->pgrad[p]));
				continue;
			}
			for (k = 0; k < m->params[p].local_elems; k++)
				rs->pgrad[p][k] = num_mul(rs->pgrad[p][k],
				    scale);
		}
	}
}

static void
sync_collective(struct engine *eng, const struct layout *layout,
    const struct sync_step *st)
{
	const struct buffer_layout	**bl;
	struct rank_state		*rs;
	union num			**vec;
	int64_t				*len;
	int				 i;

	vec = xcalloc((size_t)eng->nranks, sizeof(*vec));
	len = xcalloc((size_t)eng->nranks, sizeof(*len));
	bl = xcalloc((size_t)eng->nranks, sizeof(*bl));
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (st->target == TARGET_BUFFER) {
			vec[i] = buffer_pack(eng, layout, rs, st->buffer);
			bl[i] = &layout->stages[rs->coord.pp].buffer[st->buffer];
			len[i] = bl[i]->size;
		} else
			vec[i] = params_pack(eng, st, rs, &len[i]);
	}
	if (st->op == SYNC_REDUCE_SCATTER) {
		if (st->target != TARGET_BUFFER)
			fatalx("numeric: reduce-scatter of loose parameters");
		coll_reduce_scatter(eng, st->group, vec, bl, st->average);
	} else
		coll_all_reduce(eng, st->group, vec, len, st->average);
	for (i = 0; i < eng->nranks; i++) {
		if (vec[i] == NULL)
			continue;
		if (st->target == TARGET_BUFFER)
			buffer_unpack(eng, layout, &eng->ranks[i], st->buffer,
			    vec[i]);
		else
			params_unpack(eng, st, &eng->ranks[i], vec[i]);
		free(vec[i]);
	}
	free(bl);
	free(len);
	free(vec);
}

static void
run_sync(struct engine *eng, const struct layout *layout,
    const struct sync_plan *plan, struct progress_count *pc)
{
	const struct sync_step	*st;
	int			 s;

	for (s = 0; s < plan->nsteps; s++) {
		st = &plan->steps[s];
		switch (st->op) {
		case SYNC_SCALE:
		case SYNC_MASK_REPLICAS:
			sync_local(eng, st);
			break;
		case SYNC_ALL_REDUCE:
		case SYNC_REDUCE_SCATTER:
			sync_collective(eng, layout, st);
			break;
		}
		progress_tick(pc);
	}
}

/*
 * The reference: the same interpreter on the single-rank model (mesh
 * 1x1x1), once per dp micro-batch with that batch's inputs, summed and
 * scaled by 1/dp.  The result is one global gradient per logical
 * parameter of the audited model, matched by name.
 */
static int64_t
param_elems(const struct param *p)
{
	int64_t	 n = 1;
	int	 d;

	for (d = 0; d < p->ndims; d++)
		n *= p->shape[d];
	return n;
}

static int
logical_by_name(const struct model *m, const char *name)
{
	int	 i;

	for (i = 0; i < m->nlogical; i++)
		if (strcmp(m->logical[i].name, name) == 0)
			return i;
	return -1;
}

static union num **
reference_gradients(const struct model *audited, const struct weight_source *ws,
    struct progress_count *pc)
{
	struct config		 cfg;
	struct model		 ref;
	struct engine		 eng;
	const struct param	*p;
	union num		**out, factor;
	int64_t			 i, g, elems;
	int			*key, k, d, rank0 = 0;

	cfg_copy(&cfg, audited->config);
	cfg.mesh.dp = cfg.mesh.pp = cfg.mesh.tp = 1;
	cfg.mesh.ep = cfg.mesh.etp = 1;
	model_build(&ref, &cfg);
	key = xcalloc((size_t)ref.nparams, sizeof(*key));
	for (k = 0; k < ref.nparams; k++) {
		key[k] = logical_by_name(audited,
		    ref.logical[ref.params[k].logical].name);
		if (key[k] < 0)
			fatalx("numeric: reference parameter %s is not in the "
			    "audited model", ref.params[k].name);
	}
	out = xcalloc((size_t)audited->nlogical, sizeof(*out));
	for (k = 0; k < audited->nlogical; k++) {
		p = &audited->params[audited->logical[k].instance[0]];
		elems = param_elems(p);
		out[k] = xcalloc((size_t)elems, sizeof(*out[k]));
	}
	engine_init(&eng, &ref, NULL, &rank0, 1, ws, key);
	for (d = 0; d < audited->mesh.dp; d++) {
		rank_clear(&eng, &eng.ranks[0]);
		eng.ranks[0].batch = d;
		for (k = 0; k < ref.nparams; k++)
			memset(eng.ranks[0].pgrad[k], 0,
			    (size_t)ref.params[k].local_elems *
			    sizeof(union num));
		run_model(&eng, NULL);
		for (k = 0; k < ref.nparams; k++)
			for (i = 0; i < ref.params[k].local_elems; i++) {
				g = model_global_index(&ref, &ref.params[k], 0,
				    i);
				out[key[k]][g] = num_add(out[key[k]][g],
				    eng.ranks[0].pgrad[k][i]);
			}
		progress_tick(pc);
	}
	factor = num_from_rational(q_make(1, audited->mesh.dp));
	for (k = 0; k < audited->nlogical; k++) {
		p = &audited->params[audited->logical[k].instance[0]];
		elems = param_elems(p);
		for (i = 0; i < elems; i++)
			out[k][i] = num_mul(out[k][i], factor);
	}
	engine_free(&eng);
	free(key);
	model_free(&ref);
	cfg_free(&cfg);
	return out;
}

/*
 * Gathering on process 0: every rank's atoms (local gradients before the
 * sync) and synced values of every parameter it holds.  Ranks hosted on
 * process 0 need no message.
 */
struct gathered {
	union num	***atom;	/* [rank][param], NULL if not held */
	union num	***synced;
	struct inbox	 in;
};

static void
gather_values(struct engine *eng, union num ***atoms, struct gathered *gv)
{
	const struct model	*m = eng->model;
	struct outbox		 ob = { 0 };
	struct rank_state	*rs;
	union num		*p;
	const union num		*q;
	int64_t			 n, off;
	size_t			 j;
	int			 i, k, r, root = 0;
	bool			 here;

	here = eng->transport->proc == transport_host_of(eng->transport, root);
	for (i = 0; i < eng->nranks && !here; i++) {
		rs = &eng->ranks[i];
		for (n = 0, k = 0; k < m->nparams; k++)
			if (rs->pgrad[k] != NULL)
				n += 2 * m->params[k].local_elems;
		p = xcalloc((size_t)n, sizeof(*p));
		for (off = 0, k = 0; k < m->nparams; k++) {
			if (rs->pgrad[k] == NULL)
				continue;
			n = m->params[k].local_elems;
			memcpy(p + off, atoms[i][k], (size_t)n * sizeof(*p));
			memcpy(p + off + n, rs->pgrad[k], (size_t)n *
			    sizeof(*p));
			off += 2 * n;
		}
		outbox_add(&ob, rs->rank, root, TAG_COLLECT, p, (size_t)off *
		    sizeof(*p));
	}
	exchange(eng, &ob, &gv->in);
	if (!here)
		return;
	gv->atom = xcalloc((size_t)m->mesh.world, sizeof(*gv->atom));
	gv->synced = xcalloc((size_t)m->mesh.world, sizeof(*gv->synced));
	for (r = 0; r < m->mesh.world; r++) {
		gv->atom[r] = xcalloc((size_t)m->nparams, sizeof(**gv->atom));
		gv->synced[r] = xcalloc((size_t)m->nparams,
		    sizeof(**gv->synced));
	}
	for (i = 0; i < eng->nranks; i++)
		for (k = 0; k < m->nparams; k++) {
			gv->atom[eng->ranks[i].rank][k] = atoms[i][k];
			gv->synced[eng->ranks[i].rank][k] =
			    eng->ranks[i].pgrad[k];
		}
	for (j = 0; j < gv->in.n; j++) {
		r = gv->in.v[j].src;
		q = gv->in.v[j].data;
		n = (int64_t)(gv->in.v[j].len / sizeof(*q));
		for (off = 0, k = 0; k < m->nparams; k++) {
			if (!model_rank_holds(m, &m->params[k], r))
				continue;
			if (off + 2 * m->params[k].local_elems > n)
				fatalx("numeric: short gradients from rank %d",
				    r);
			gv->atom[r][k] = (union num *)(q + off);
			gv->synced[r][k] = (union num *)(q + off +
			    m->params[k].local_elems);
			off += 2 * m->params[k].local_elems;
		}
	}
}

static void
gathered_free(struct engine *eng, struct gathered *gv, int world)
{
	int	 r;

	if (gv->atom != NULL)
		for (r = 0; r < world; r++) {
			free(gv->atom[r]);
			free(gv->synced[r]);
		}
	free(gv->atom);
	free(gv->synced);
	inbox_release(eng, &gv->in);
}

/*
 * Comparison (process 0).
 */

/* Hash of n values in the audit's numerics (float32 hashed as floats). */
static uint64_t
hash_nums(const union num *v, int64_t n)
{
	float		*f;
	uint64_t	 h;
	int64_t		 i;

	if (num_arith == ARITH_EXACT)
		return hash_u64s(&v->f, (size_t)n);
	if (num_arith == ARITH_FLOAT64)
		return hash_doubles(&v->d, (size_t)n);
	f = xcalloc((size_t)n, sizeof(*f));
	for (i = 0; i < n; i++)
		f[i] = (float)v[i].d;
	h = hash_floats(f, (size_t)n);
	free(f);
	return h;
}

/* Distance in units in the last place of the audit's float type. */
static double
ulp_distance(double a, double b)
{
	uint64_t	 ua, ub;
	uint32_t	 fa, fb;
	float		 xa = (float)a, xb = (float)b;

	if (num_arith == ARITH_FLOAT32) {
		memcpy(&fa, &xa, 4);
		memcpy(&fb, &xb, 4);
		fa = (fa >> 31) ? ~fa : fa | UINT32_C(0x80000000);
		fb = (fb >> 31) ? ~fb : fb | UINT32_C(0x80000000);
		return fa > fb ? (double)(fa - fb) : (double)(fb - fa);
	}
	memcpy(&ua, &a, 8);
	memcpy(&ub, &b, 8);
	ua = (ua >> 63) ? ~ua : ua | (UINT64_C(1) << 63);
	ub = (ub >> 63) ? ~ub : ub | (UINT64_C(1) << 63);
	return ua > ub ? (double)(ua - ub) : (double)(ub - ua);
}

/*
 * Float tolerances.  Against the reference: the model runs in a different
 * order on one rank, so relative error grows with depth; wrong gradients
 * differ by whole atoms.  Against a symbolic expression: only the last
 * few sums and scalings differ.
 */
static double
reference_tolerance(void)
{
	return num_arith == ARITH_FLOAT32 ? 1e-4 : 1e-10;
}

static double
expression_tolerance(void)
{
	return num_arith == ARITH_FLOAT32 ? 1e-5 : 1e-13;
}

/* Compare a region with the reference; fills the cell's numeric fields. */
static void
compare_region(struct cell *cell, const union num *v, const union num *ref,
    int64_t n, double ref_max)
{
	double		 diff, rel;
	int64_t		 i;

	cell->numeric_ok = true;
	cell->max_ulps = 0;
	cell->max_rel_error = 0;
	for (i = 0; i < n; i++) {
		if (num_arith == ARITH_EXACT) {
			if (v[i].f != ref[i].f)
				cell->numeric_ok = false;
			continue;
		}
		diff = fabs(v[i].d - ref[i].d);
		if (ref[i].d != 0)
			rel = diff / fabs(ref[i].d);
		else
			rel = ref_max > 0 ? diff / ref_max : diff;
		if (rel > cell->max_rel_error)
			cell->max_rel_error = rel;
		if (ulp_distance(v[i].d, ref[i].d) > cell->max_ulps)
			cell->max_ulps = ulp_distance(v[i].d, ref[i].d);
		if (diff > reference_tolerance() * (fabs(ref[i].d) + ref_max))
			cell->numeric_ok = false;
	}
}

/* The instance of logical parameter lp that ranks of `stage` hold, or NULL. */
static const struct param *
instance_on_stage(const struct model *m, int lp, int stage)
{
	const struct logical_param	*l = &m->logical[lp];
	int				 j;

	for (j = 0; j < l->ninstances; j++)
		if (m->params[l->instance[j]].stage == stage)
			return &m->params[l->instance[j]];
	return NULL;
}

/*
 * Evaluate a symbolic expression on the numeric atoms at local elements
 * [lo, hi): exact in the field, in double (with the sum of the absolute
 * terms, the scale of its rounding error) in floats.  Atom a is rank a's
 * local gradient of the instance of the logical parameter on a's stage.
 */
static void
eval_expression(const struct model *m, const struct gathered *gv, int lp,
    const struct lincomb *lc, int64_t lo, int64_t hi, union num *out,
    double *magnitude)
{
	const struct param		*p;
	const union num			*atom;
	struct coord			 c;
	union num			 coef;
	double				 cd;
	int64_t				 i;
	uint32_t			 t;
	int				 a;

	memset(out, 0, (size_t)(hi - lo) * sizeof(*out));
	memset(magnitude, 0, (size_t)(hi - lo) * sizeof(*magnitude));
	for (t = 0; t < lc->nterms; t++) {
		a = (int)lc->terms[t].atom;
		if (a < 0 || a >= m->mesh.world)
			fatalx("numeric: atom g%d outside the mesh", a);
		mesh_coord_of(&m->mesh, a, &c);
		if ((p = instance_on_stage(m, lp, c.pp)) == NULL ||
		    (atom = gv->atom[a][p->index]) == NULL)
			fatalx("numeric: atom g%d of %s is on a rank without "
			    "the parameter", a, m->logical[lp].name);
		if (hi > p->local_elems)
			fatalx("numeric: region of %s beyond its shard",
			    m->logical[lp].name);
		coef = num_from_rational(lc->terms[t].coef);
		cd = (double)lc->terms[t].coef.num /
		    (double)lc->terms[t].coef.den;
		for (i = lo; i < hi; i++) {
			if (num_arith == ARITH_EXACT) {
				out[i - lo] = num_add(out[i - lo],
				    num_mul(coef, atom[i]));
				continue;
			}
			out[i - lo].d += cd * atom[i].d;
			magnitude[i - lo] += fabs(cd * atom[i].d);
		}
	}
}

/* Does v equal the evaluated expression e (within rounding, in floats)? */
static bool
matches_expression(const union num *v, const union num *e,
    const double *magnitude, int64_t n, int nterms, double scale)
{
	double		 tol;
	int64_t		 i;

	for (i = 0; i < n; i++) {
		if (num_arith == ARITH_EXACT) {
			if (v[i].f != e[i].f)
				return false;
			continue;
		}
		tol = expression_tolerance() * (nterms + 1) *
		    (magnitude[i] + fabs(v[i].d)) + 1e-300;
		if (fabs(v[i].d - e[i].d) > tol + scale)
			return false;
	}
	return true;
}

struct self_check {
	int		 failures;
	struct arena	 arena;
};

static void
self_check_fail(struct self_check *sc, const char *param, int rank,
    int64_t lo, int64_t hi, const char *what, const struct lincomb *lc)
{
	if (sc->failures++ < NUM_MAX_MESSAGES)
		fprintf(stderr, "%s: self-check failed: %s on rank %d "
		    "[%lld,%lld): %s %s\n", progname, param, rank,
		    (long long)lo, (long long)hi, what,
		    lc_format(&sc->arena, lc, "g"));
}

/* Per logical parameter: the reference, its size and largest value. */
struct reference_view {
	const union num	*grad;
	int64_t		 elems;
	double		 max;
};

static void
check_cell(const struct model *m, const struct gathered *gv, int lp,
    const struct reference_view *ref, struct cell *cell,
    struct self_check *sc)
{
	const struct logical_param	*l = &m->logical[lp];
	const struct param		*p;
	struct coord			 c;
	union num			*rv, *e;
	double				*mag;
	int64_t				 n = cell->hi - cell->lo, i;

	mesh_coord_of(&m->mesh, cell->rank, &c);
	if ((p = instance_on_stage(m, lp, c.pp)) == NULL ||
	    gv->synced[cell->rank][p->index] == NULL || cell->lo < 0 ||
	    cell->hi > p->local_elems || n < 0)
		fatalx("numeric: cell of %s on rank %d has no values",
		    l->name, cell->rank);

	rv = xcalloc((size_t)n, sizeof(*rv));
	e = xcalloc((size_t)n, sizeof(*e));
	mag = xcalloc((size_t)n, sizeof(*mag));
	for (i = 0; i < n; i++)
		rv[i] = ref->grad[model_global_index(m, p, cell->rank,
		    cell->lo + i)];
	cell->has_hash = true;
	cell->hash = hash_nums(gv->synced[cell->rank][p->index] + cell->lo,
	    n);
	cell->reference_hash = hash_nums(rv, n);
	compare_region(cell, gv->synced[cell->rank][p->index] + cell->lo, rv,
	    n, ref->max);

	/* The value must be its expression evaluated on the atoms... */
	eval_expression(m, gv, lp, cell->value, cell->lo, cell->hi, e, mag);
	if (!matches_expression(gv->synced[cell->rank][p->index] + cell->lo,
	    e, mag, n, (int)cell->value->nterms, 0))
		self_check_fail(sc, l->name, cell->rank, cell->lo, cell->hi,
		    "numeric value differs from its symbolic expression",
		    cell->value);

	/* ...and the reference the expected expression. */
	eval_expression(m, gv, lp, cell->expected, cell->lo, cell->hi, e, mag);
	if (!matches_expression(rv, e, mag, n, (int)cell->expected->nterms,
	    num_arith == ARITH_EXACT ? 0 : reference_tolerance() * ref->max))
		self_check_fail(sc, l->name, cell->rank, cell->lo, cell->hi,
		    "reference differs from the expected expression",
		    cell->expected);

	/*
	 * In exact numerics, with both checks passed, a symbolically correct
	 * cell is numerically correct.  The converse can fail without any
	 * inconsistency: where the atoms that make a value wrong are zero over
	 * the whole region (embedding rows no token of a batch uses, an expert
	 * no token chose), a wrong expression has right numbers, a blind spot
	 * of any numeric test.  So only one direction is an internal error.
	 */
	if (num_arith == ARITH_EXACT && cell->used && cell->ok &&
	    !cell->numeric_ok)
		self_check_fail(sc, l->name, cell->rank, cell->lo, cell->hi,
		    "differs from the reference although its expression is the "
		    "expected one,", cell->value);
	free(mag);
	free(e);
	free(rv);
}

static void
compare_all(const struct model *m, const struct gathered *gv,
    union num **ref, struct audit *audit, struct self_check *sc,
    struct progress_count *pc)
{
	struct param_result	*pr;
	struct reference_view	 rv;
	const struct param	*p;
	size_t			 i, j;
	int64_t			 k;
	int			 lp;

	for (i = 0; i < audit->nparams; i++) {
		pr = &audit->params[i];
		if ((lp = logical_by_name(m, pr->name)) < 0)
			fatalx("numeric: audited parameter %s not in the model",
			    pr->name);
		p = &m->params[m->logical[lp].instance[0]];
		rv.grad = ref[lp];
		rv.elems = param_elems(p);
		rv.max = 0;
		if (num_arith != ARITH_EXACT)
			for (k = 0; k < rv.elems; k++)
				if (fabs(rv.grad[k].d) > rv.max)
					rv.max = fabs(rv.grad[k].d);
		pr->has_hash = true;
		pr->reference_hash = hash_nums(rv.grad, rv.elems);
		for (j = 0; j < pr->ncells; j++)
			check_cell(m, gv, lp, &rv, &pr->cells[j], sc);
		progress_tick(pc);
	}
}

/*
 * The audit.
 */
int
numeric_audit(const struct sym_context *ctx, struct transport *transport,
    const struct numeric_options *options, struct audit *audit)
{
	const struct model		*m = &ctx->model;
	struct weight_source		 ws;
	struct engine			 eng;
	struct gathered			 gv;
	struct self_check		 sc;
	struct progress_count		 pc = { false, 0 };
	union num			***atoms, **ref = NULL;
	int				*key, k, i, status = EXIT_OK;
	int64_t				 total;
	bool				 root;

	if (transport->world != m->mesh.world)
		fatalx("numeric: transport of %d ranks for a mesh of %d",
		    transport->world, m->mesh.world);
	num_arith = options->arith;
	root = transport->proc == transport_host_of(transport, 0);

	ws.seed = options->seed;
	ws.scale = xcalloc((size_t)m->nlogical, sizeof(*ws.scale));
	for (k = 0; k < m->nlogical; k++)
		ws.scale[k] = weight_scale(&m->params[m->logical[k].instance[0]]);
	key = xcalloc((size_t)m->nparams, sizeof(*key));
	for (k = 0; k < m->nparams; k++)
		key[k] = m->params[k].logical;

	if (root && options->progress) {
		for (total = 0, k = 0; k < m->mesh.pp; k++)
			total += 2 * m->stages[k].nops;
		total += ctx->plan.nsteps + m->mesh.dp + (int64_t)audit->nparams;
		progress_start("numeric audit", total);
		pc.on = true;
	}

	engine_init(&eng, m, transport, transport->local, transport->nlocal,
	    &ws, key);
	run_model(&eng, &pc);

	/* The atoms: every local gradient before synchronization. */
	atoms = xcalloc((size_t)eng.nranks, sizeof(*atoms));
	for (i = 0; i < eng.nranks; i++) {
		atoms[i] = xcalloc((size_t)m->nparams, sizeof(**atoms));
		for (k = 0; k < m->nparams; k++) {
			if (eng.ranks[i].pgrad[k] == NULL)
				continue;
			atoms[i][k] = xcalloc((size_t)m->params[k].local_elems,
			    sizeof(union num));
			memcpy(atoms[i][k], eng.ranks[i].pgrad[k],
			    (size_t)m->params[k].local_elems *
			    sizeof(union num));
		}
	}
	run_sync(&eng, &ctx->layout, &ctx->plan, &pc);
	test_corruption(&eng);

	memset(&gv, 0, sizeof(gv));
	gather_values(&eng, atoms, &gv);
	if (root) {
		ref = reference_gradients(m, &ws, &pc);
		sc.failures = 0;
		arena_init(&sc.arena);
		compare_all(m, &gv, ref, audit, &sc, &pc);
		if (sc.failures > NUM_MAX_MESSAGES)
			fprintf(stderr, "%s: self-check failed on %d more "
			    "regions\n", progname, sc.failures -
			    NUM_MAX_MESSAGES);
		if (sc.failures > 0)
			status = EXIT_RUNTIME;
		arena_free(&sc.arena);
		audit->numeric = true;
		audit->arith = options->arith;
		audit->procs = transport->nprocs;
		for (k = 0; k < m->nlogical; k++)
			free(ref[k]);
		free(ref);
	}
	if (pc.on)
		progress_end();

	gathered_free(&eng, &gv, m->mesh.world);
	for (i = 0; i < eng.nranks; i++) {
		for (k = 0; k < m->nparams; k++)
			free(atoms[i][k]);
		free(atoms[i]);
	}
	free(atoms);
	engine_free(&eng);
	free(key);
	free(ws.scale);
	return transport_max_int(transport, status);
}
