/*
 * Messages and collectives of the numeric engine.  A collective over a
 * mesh group is one round in which every member sends what each other
 * member needs (two rounds for an all-reduce); each element of a sum is
 * added up once, in group order, so that float replicas are bitwise equal.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "model/layout.h"
#include "model/mesh.h"
#include "numeric/collective.h"
#include "numeric/numvalue.h"
#include "numeric/transport.h"

/*
 * Messages.
 */

void
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

/* Through the transport, or in the loopback straight from outbox to inbox. */
void
coll_exchange(struct coll_comm *comm, struct outbox *ob, struct inbox *in)
{
	size_t		 i;

	memset(in, 0, sizeof(*in));
	if (comm->transport != NULL) {
		transport_round(comm->transport, ob->v, ob->n, in);
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

void
coll_release(struct coll_comm *comm, struct inbox *in)
{
	size_t		 i;

	if (comm->transport != NULL)
		inbox_free(in);
	else {
		for (i = 0; i < in->n; i++)
			free(in->v[i].data);
		free(in->v);
	}
	memset(in, 0, sizeof(*in));
}

const union num *
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

void
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

void
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
 * Collectives over mesh groups.  vec[i] is the contribution of hosted rank
 * i, comm->rank[i] (NULL when that rank takes no part).  Every member
 * sends what each other member needs; the contributions to an element are
 * summed in group order, starting from member 0's, so all receivers of a
 * sum hold bitwise equal floats.  A group of one needs no round, and since
 * group sizes are the same on every process, all processes skip it
 * together.
 */

static void
sum_in_group_order(enum arith arith, union num *dst,
    const union num *const *parts, int n, int64_t len, bool average)
{
	struct num_divisor	 div = num_divisor(arith, average ? n : 1);
	int64_t			 k;
	int			 j;

	for (k = 0; k < len; k++) {
		union num acc = parts[0][k];

		for (j = 1; j < n; j++)
			acc = num_add(arith, acc, parts[j][k]);
		dst[k] = average ? num_div_int(arith, acc, &div) : acc;
	}
}

/* Chunk k of n of a vector of len values: [len*k/n, len*(k+1)/n). */
static void
chunk_of(int64_t len, int n, int k, int64_t *lo, int64_t *hi)
{
	*lo = len * k / n;
	*hi = len * (k + 1) / n;
}

/*
 * An all-reduce is a reduce-scatter and an all-gather, two rounds: member
 * k sums chunk k of every member's vector in group order, then sends the
 * sum to the others.  Sending every member the whole vector instead took
 * group-size copies of it per rank, so a run with dp=512 needed 1.6 GB a
 * process and dp=1024 was killed for memory (issue 8); now a rank sends
 * and receives about twice its vector.  Each element is still summed once,
 * from member 0 on, so every member holds the same bits as before.
 */
void
coll_all_reduce(struct coll_comm *comm, enum group_kind kind,
    union num **vec, const int64_t *len, bool average)
{
	const struct mesh	*m = comm->mesh;
	const union num		**parts;
	const union num		*p;
	struct outbox		 ob = { 0 };
	struct inbox		 in;
	int64_t			 lo, hi;
	int			*members, n, i, j, me;

	n = mesh_group_size(m, kind);
	if (n == 1)
		return;
	members = xcalloc((size_t)n, sizeof(*members));
	parts = xcalloc((size_t)n, sizeof(*parts));

	/* Reduce-scatter: chunk j of every vector goes to member j. */
	for (i = 0; i < comm->nranks; i++) {
		if (vec[i] == NULL)
			continue;
		if ((me = mesh_group(m, kind, comm->rank[i],
		    members)) < 0)
			fatalx("numeric: rank %d is in no %s group",
			    comm->rank[i], mesh_group_name(kind));
		for (j = 0; j < n; j++) {
			chunk_of(len[i], n, j, &lo, &hi);
			if (j != me && hi > lo)
				outbox_add_nums(&ob, comm->rank[i],
				    members[j], TAG_ALL_REDUCE, vec[i] + lo,
				    hi - lo);
		}
	}
	coll_exchange(comm, &ob, &in);
	for (i = 0; i < comm->nranks; i++) {
		if (vec[i] == NULL)
			continue;
		me = mesh_group(m, kind, comm->rank[i], members);
		chunk_of(len[i], n, me, &lo, &hi);
		if (hi == lo)
			continue;
		for (j = 0; j < n; j++)
			parts[j] = j == me ? vec[i] + lo : inbox_nums_exact(&in,
			    members[j], comm->rank[i], TAG_ALL_REDUCE,
			    hi - lo);
		/* In place: element k is written after all its parts are read. */
		sum_in_group_order(comm->arith, vec[i] + lo, parts, n, hi - lo,
		    average);
	}
	coll_release(comm, &in);

	/* All-gather: member j's summed chunk goes to every other member. */
	for (i = 0; i < comm->nranks; i++) {
		if (vec[i] == NULL)
			continue;
		me = mesh_group(m, kind, comm->rank[i], members);
		chunk_of(len[i], n, me, &lo, &hi);
		for (j = 0; j < n && hi > lo; j++)
			if (j != me)
				outbox_add_nums(&ob, comm->rank[i],
				    members[j], TAG_ALL_GATHER, vec[i] + lo,
				    hi - lo);
	}
	coll_exchange(comm, &ob, &in);
	for (i = 0; i < comm->nranks; i++) {
		if (vec[i] == NULL)
			continue;
		me = mesh_group(m, kind, comm->rank[i], members);
		for (j = 0; j < n; j++) {
			chunk_of(len[i], n, j, &lo, &hi);
			if (j == me || hi == lo)
				continue;
			p = inbox_nums_exact(&in, members[j], comm->rank[i],
			    TAG_ALL_GATHER, hi - lo);
			memcpy(vec[i] + lo, p, (size_t)(hi - lo) * sizeof(*p));
		}
	}
	coll_release(comm, &in);
	free(parts);
	free(members);
}

/* Shard k of every bucket, concatenated. */
static int64_t
gather_shards(const struct buffer_layout *bl, int k, const union num *buf,
    union num *out)
{
	int64_t		 lo, hi, n = 0;
	int		 b;

	for (b = 0; b < bl->nbuckets; b++) {
		layout_bucket_shard(&bl->buckets[b], k, &lo, &hi);
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
		layout_bucket_shard(&bl->buckets[b], k, &lo, &hi);
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
void
coll_reduce_scatter(struct coll_comm *comm, enum group_kind kind,
    union num **buf, const struct buffer_layout **bl, bool average)
{
	const struct mesh	*m = comm->mesh;
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
	for (i = 0; i < comm->nranks; i++) {
		if (buf[i] == NULL)
			continue;
		for (b = 0; b < bl[i]->nbuckets; b++)
			if (bl[i]->buckets[b].group_size != size)
				fatalx("numeric: bucket for %d members reduced "
				    "over a %s group of %d", bl[i]->buckets[b].
				    group_size, mesh_group_name(kind), size);
		me = mesh_group(m, kind, comm->rank[i], members);
		for (j = 0; j < size; j++) {
			if (j == me)
				continue;
			n = gather_shards(bl[i], j, buf[i], NULL);
			mine = xcalloc((size_t)n, sizeof(*mine));
			gather_shards(bl[i], j, buf[i], mine);
			outbox_add(&ob, comm->rank[i], members[j],
			    TAG_REDUCE_SCATTER, mine, (size_t)n *
			    sizeof(*mine));
		}
	}
	coll_exchange(comm, &ob, &in);
	for (i = 0; i < comm->nranks; i++) {
		if (buf[i] == NULL)
			continue;
		me = mesh_group(m, kind, comm->rank[i], members);
		n = gather_shards(bl[i], me, buf[i], NULL);
		mine = xcalloc((size_t)n, sizeof(*mine));
		gather_shards(bl[i], me, buf[i], mine);
		for (j = 0; j < size; j++)
			parts[j] = j == me ? mine : inbox_nums_exact(&in,
			    members[j], comm->rank[i],
			    TAG_REDUCE_SCATTER, n);
		sum = xcalloc((size_t)n, sizeof(*sum));
		sum_in_group_order(comm->arith, sum, parts, size, n, average);
		scatter_shards(bl[i], me, sum, buf[i]);
		free(sum);
		free(mine);
	}
	coll_release(comm, &in);
	free(parts);
	free(members);
}

void
coll_all_gather(struct coll_comm *comm, enum group_kind kind,
    union num **buf, const struct buffer_layout **bl)
{
	const struct mesh	*m = comm->mesh;
	const union num		*p;
	struct outbox		 ob = { 0 };
	struct inbox		 in;
	union num		*mine;
	int64_t			 n;
	int			*members, size, i, j, me;

	size = mesh_group_size(m, kind);
	if (size == 1)
		return;
	members = xcalloc((size_t)size, sizeof(*members));
	for (i = 0; i < comm->nranks; i++) {
		if (buf[i] == NULL)
			continue;
		me = mesh_group(m, kind, comm->rank[i], members);
		n = gather_shards(bl[i], me, buf[i], NULL);
		for (j = 0; j < size; j++) {
			if (j == me)
				continue;
			mine = xcalloc((size_t)n, sizeof(*mine));
			gather_shards(bl[i], me, buf[i], mine);
			outbox_add(&ob, comm->rank[i], members[j],
			    TAG_ALL_GATHER, mine, (size_t)n * sizeof(*mine));
		}
	}
	coll_exchange(comm, &ob, &in);
	for (i = 0; i < comm->nranks; i++) {
		if (buf[i] == NULL)
			continue;
		me = mesh_group(m, kind, comm->rank[i], members);
		for (j = 0; j < size; j++) {
			if (j == me)
				continue;
			n = gather_shards(bl[i], j, buf[i], NULL);
			p = inbox_nums_exact(&in, members[j], comm->rank[i],
			    TAG_ALL_GATHER, n);
			scatter_shards(bl[i], j, p, buf[i]);
		}
	}
	coll_release(comm, &in);
	free(members);
}

/*
 * Sequence parallelism splits the tokens of each sample over tp: member i
 * holds, of sample b, the tokens b*seq + [i*seq/tp, (i+1)*seq/tp).  The
 * full-tensor row of member i's local row j:
 */
static int64_t
sp_row(const struct coll_comm *comm, int64_t seq, int member, int64_t j)
{
	int64_t		 per = seq / comm->mesh->tp;

	return (j / per) * seq + (int64_t)member * per + j % per;
}

/* Tensor collectives over the tp group of every rank of a stage. */
void
coll_all_gather_tokens(struct coll_comm *comm, int64_t seq,
    struct tensor **in, struct tensor *out)
{
	const struct mesh	*m = comm->mesh;
	const struct tensor	*x;
	const union num		*p;
	struct outbox		 ob = { 0 };
	struct inbox		 in_box;
	int64_t			 rows, j;
	int			*members, i, k, me;

	members = xcalloc((size_t)m->tp, sizeof(*members));
	for (i = 0; i < comm->nranks; i++) {
		if (in[i] == NULL)
			continue;
		me = mesh_group(m, GROUP_TP, comm->rank[i], members);
		for (k = 0; k < m->tp; k++)
			if (k != me)
				outbox_add_nums(&ob, comm->rank[i],
				    members[k], TAG_ALL_GATHER, in[i]->v,
				    in[i]->rows * in[i]->cols);
	}
	coll_exchange(comm, &ob, &in_box);
	for (i = 0; i < comm->nranks; i++) {
		if ((x = in[i]) == NULL)
			continue;
		me = mesh_group(m, GROUP_TP, comm->rank[i], members);
		rows = x->rows;
		tensor_alloc(&out[i], rows * m->tp, x->cols);
		for (k = 0; k < m->tp; k++) {
			p = k == me ? x->v : inbox_nums_exact(&in_box,
			    members[k], comm->rank[i], TAG_ALL_GATHER,
			    rows * x->cols);
			for (j = 0; j < rows; j++)
				memcpy(out[i].v + sp_row(comm, seq, k, j) *
				    x->cols, p + j * x->cols, (size_t)x->cols *
				    sizeof(*p));
		}
	}
	coll_release(comm, &in_box);
	free(members);
}

/*
 * What a rank keeps of a gradient declared Replicate over tp under
 * sequence parallelism: the rows of its own sequence shard, summed with
 * nothing (DTensor's Replicate -> Shard(1), a local slice).
 */
void
coll_keep_tokens(struct coll_comm *comm, int64_t seq, struct tensor **in,
    struct tensor *out)
{
	const struct mesh	*m = comm->mesh;
	const struct tensor	*x;
	int64_t			 rows, j;
	int			 i, me;

	for (i = 0; i < comm->nranks; i++) {
		if ((x = in[i]) == NULL)
			continue;
		rows = x->rows / m->tp;
		me = mesh_group_index(m, GROUP_TP, comm->rank[i]);
		tensor_alloc(&out[i], rows, x->cols);
		for (j = 0; j < rows; j++)
			memcpy(out[i].v + j * x->cols, x->v + sp_row(comm, seq,
			    me, j) * x->cols, (size_t)x->cols *
			    sizeof(*x->v));
	}
}

void
coll_reduce_scatter_tokens(struct coll_comm *comm, int64_t seq,
    struct tensor **in, struct tensor *out)
{
	const struct mesh	*m = comm->mesh;
	const union num		**parts;
	const struct tensor	*x;
	struct outbox		 ob = { 0 };
	struct inbox		 in_box;
	union num		*rows_of;
	int64_t			 rows, cols, j;
	int			*members, i, k, me;

	members = xcalloc((size_t)m->tp, sizeof(*members));
	parts = xcalloc((size_t)m->tp, sizeof(*parts));
	for (i = 0; i < comm->nranks; i++) {
		if ((x = in[i]) == NULL)
			continue;
		rows = x->rows / m->tp;
		cols = x->cols;
		me = mesh_group(m, GROUP_TP, comm->rank[i], members);
		for (k = 0; k < m->tp; k++) {
			if (k == me)
				continue;
			rows_of = xcalloc((size_t)(rows * cols),
			    sizeof(*rows_of));
			for (j = 0; j < rows; j++)
				memcpy(rows_of + j * cols, x->v +
				    sp_row(comm, seq, k, j) * cols,
				    (size_t)cols * sizeof(*rows_of));
			outbox_add(&ob, comm->rank[i], members[k],
			    TAG_REDUCE_SCATTER, rows_of, (size_t)(rows *
			    cols) * sizeof(*rows_of));
		}
	}
	coll_exchange(comm, &ob, &in_box);
	for (i = 0; i < comm->nranks; i++) {
		if ((x = in[i]) == NULL)
			continue;
		rows = x->rows / m->tp;
		cols = x->cols;
		me = mesh_group(m, GROUP_TP, comm->rank[i], members);
		rows_of = xcalloc((size_t)(rows * cols), sizeof(*rows_of));
		for (j = 0; j < rows; j++)
			memcpy(rows_of + j * cols, x->v + sp_row(comm, seq,
			    me, j) * cols, (size_t)cols * sizeof(*rows_of));
		for (k = 0; k < m->tp; k++)
			parts[k] = k == me ? rows_of : inbox_nums_exact(
			    &in_box, members[k], comm->rank[i],
			    TAG_REDUCE_SCATTER, rows * cols);
		tensor_alloc(&out[i], rows, cols);
		sum_in_group_order(comm->arith, out[i].v, parts, m->tp,
		    rows * cols, false);
		free(rows_of);
	}
	coll_release(comm, &in_box);
	free(parts);
	free(members);
}

void
coll_all_reduce_tensors(struct coll_comm *comm, struct tensor **t)
{
	union num	**vec;
	int64_t		*len;
	int		 i;

	vec = xcalloc((size_t)comm->nranks, sizeof(*vec));
	len = xcalloc((size_t)comm->nranks, sizeof(*len));
	for (i = 0; i < comm->nranks; i++)
		if (t[i] != NULL) {
			vec[i] = t[i]->v;
			len[i] = t[i]->rows * t[i]->cols;
		}
	coll_all_reduce(comm, GROUP_TP, vec, len, false);
	free(len);
	free(vec);
}
