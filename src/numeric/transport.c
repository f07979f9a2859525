/*
 * Rounds of messages between virtual mesh ranks, carried by MPI between
 * processes (see transport.h).  A round is two collectives over
 * MPI_COMM_WORLD: an MPI_Alltoall of byte counts, then an MPI_Alltoallv of
 * the packed messages.  Messages between two ranks of the same process take
 * the same path (MPI copies them to itself), so a run on one process moves
 * exactly the bytes a run on many processes moves, in the same order.
 *
 * On the wire, each message is a fixed header followed by its payload,
 * padded to 8 bytes: every record starts 8-byte aligned in the receive
 * buffer, so a payload of uint64_t field elements can be read in place.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "base/exitcode.h"
#include "base/xmalloc.h"
#include "numeric/transport.h"

struct wire_header {
	int32_t		 src;
	int32_t		 dst;
	int32_t		 tag;
	int32_t		 pad;
	uint64_t	 len;
};

#define WIRE_ALIGN	8

/* An inbox entry with its arrival order, so equal keys sort stably. */
struct arrival {
	struct message	 m;
	size_t		 seq;
};

static size_t
wire_record_size(size_t len)
{
	size_t	 padded;

	if (len > SIZE_MAX - sizeof(struct wire_header) - WIRE_ALIGN)
		fatalx("transport: message of %zu bytes is too large", len);
	padded = (len + WIRE_ALIGN - 1) / WIRE_ALIGN * WIRE_ALIGN;
	return sizeof(struct wire_header) + padded;
}

/*
 * An MPI failure means the job can no longer agree on anything: say which
 * call failed and abort every process with EXIT_RUNTIME, rather than let
 * some ranks wait forever for a partner that is gone.
 */
static void
mpi_check(int rc, const char *call)
{
	char	 text[MPI_MAX_ERROR_STRING];
	int	 len = 0;

	if (rc == MPI_SUCCESS)
		return;
	if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS || len < 0 ||
	    len >= MPI_MAX_ERROR_STRING)
		snprintf(text, sizeof(text), "error code %d", rc);
	else
		text[len] = '\0';
	fprintf(stderr, "%s: MPI error in %s: %s\n", progname, call, text);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, EXIT_RUNTIME);
	_exit(EXIT_RUNTIME);
}

void
transport_init(struct transport *t, int world)
{
	int	 v;

	if (world < 1)
		fatalx("transport_init: world %d < 1", world);
	/*
	 * The default handler aborts with MPICH's own text and status; with
	 * errors returned we report them ourselves and exit 3 (SPEC section 2).
	 */
	mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
	    "MPI_Comm_set_errhandler");
	mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &t->nprocs), "MPI_Comm_size");
	mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &t->proc), "MPI_Comm_rank");
	t->world = world;
	t->local = xcalloc((size_t)world, sizeof(*t->local));
	t->nlocal = 0;
	for (v = t->proc; v < world; v += t->nprocs)
		t->local[t->nlocal++] = v;
}

void
transport_free(struct transport *t)
{
	free(t->local);
	t->local = NULL;
	t->nlocal = 0;
}

int
transport_host_of(const struct transport *t, int rank)
{
	if (rank < 0 || rank >= t->world)
		fatalx("transport: rank %d outside a world of %d", rank,
		    t->world);
	return rank % t->nprocs;
}

static int
count_to_int(size_t n, const char *what)
{
	if (n > INT_MAX)
		fatalx("transport: %s of %zu bytes exceeds what one MPI "
		    "round can carry", what, n);
	return (int)n;
}

/* Lay out the outbox per destination process, in outbox order. */
static char *
pack_outbox(struct transport *t, const struct message *out, size_t nout,
    int *sendcounts, int *sdispls)
{
	size_t			*bytes, *offset, total = 0, i;
	struct wire_header	 h;
	char			*buf;
	int			 q;

	bytes = xcalloc((size_t)t->nprocs, sizeof(*bytes));
	offset = xcalloc((size_t)t->nprocs, sizeof(*offset));
	for (i = 0; i < nout; i++) {
		if (out[i].src < 0 || out[i].src >= t->world ||
		    transport_host_of(t, out[i].src) != t->proc)
			fatalx("transport: rank %d does not live on process %d",
			    out[i].src, t->proc);
		if (out[i].len > 0 && out[i].data == NULL)
			fatalx("transport: message %d->%d has no data",
			    out[i].src, out[i].dst);
		q = transport_host_of(t, out[i].dst);
		bytes[q] += wire_record_size(out[i].len);
	}
	for (q = 0; q < t->nprocs; q++) {
		sendcounts[q] = count_to_int(bytes[q], "a process's messages");
		sdispls[q] = count_to_int(total, "one round");
		offset[q] = total;
		total += bytes[q];
	}
	count_to_int(total, "one round");
	buf = xmalloc(total);
	for (i = 0; i < nout; i++) {
		q = transport_host_of(t, out[i].dst);
		memset(&h, 0, sizeof(h));
		h.src = out[i].src;
		h.dst = out[i].dst;
		h.tag = out[i].tag;
		h.len = out[i].len;
		memcpy(buf + offset[q], &h, sizeof(h));
		if (out[i].len > 0)
			memcpy(buf + offset[q] + sizeof(h), out[i].data,
			    out[i].len);
		/* Zero the padding: no uninitialized bytes cross MPI. */
		memset(buf + offset[q] + sizeof(h) + out[i].len, 0,
		    wire_record_size(out[i].len) - sizeof(h) - out[i].len);
		offset[q] += wire_record_size(out[i].len);
	}
	free(offset);
	free(bytes);
	return buf;
}

int
message_compare(const void *pa, const void *pb)
{
	const struct message	*a = pa, *b = pb;

	if (a->dst != b->dst)
		return a->dst < b->dst ? -1 : 1;
	if (a->tag != b->tag)
		return a->tag < b->tag ? -1 : 1;
	if (a->src != b->src)
		return a->src < b->src ? -1 : 1;
	return 0;
}

static int
arrival_cmp(const void *va, const void *vb)
{
	const struct arrival	*a = va, *b = vb;
	int			 c;

	if ((c = message_compare(&a->m, &b->m)) != 0)
		return c;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	return 0;
}

/* Walk the received records; the payloads stay where they landed. */
static void
unpack_inbox(struct transport *t, char *buf, size_t total, struct inbox *in)
{
	struct wire_header	 h;
	struct arrival		*arr = NULL;
	size_t			 pos, n = 0, cap = 0, i;

	for (pos = 0; pos < total; pos += wire_record_size(h.len)) {
		if (total - pos < sizeof(h))
			fatalx("transport: truncated message header");
		memcpy(&h, buf + pos, sizeof(h));
		if (h.len > total - pos - sizeof(h) || h.dst < 0 ||
		    h.dst >= t->world || h.src < 0 || h.src >= t->world ||
		    transport_host_of(t, h.dst) != t->proc)
			fatalx("transport: malformed message at byte %zu", pos);
		if (n == cap) {
			cap = cap == 0 ? 16 : cap * 2;
			arr = xreallocarray(arr, cap, sizeof(*arr));
		}
		arr[n].m.src = h.src;
		arr[n].m.dst = h.dst;
		arr[n].m.tag = h.tag;
		arr[n].m.len = (size_t)h.len;
		arr[n].m.data = buf + pos + sizeof(h);
		arr[n].seq = n;
		n++;
	}
	if (n > 0)
		qsort(arr, n, sizeof(*arr), arrival_cmp);
	in->n = n;
	in->v = n > 0 ? xreallocarray(NULL, n, sizeof(*in->v)) : NULL;
	for (i = 0; i < n; i++)
		in->v[i] = arr[i].m;
	in->storage = buf;
	free(arr);
}

void
transport_round(struct transport *t, const struct message *out, size_t nout,
    struct inbox *in)
{
	int	*sendcounts, *sdispls, *recvcounts, *rdispls, q;
	size_t	 total = 0;
	char	*sendbuf, *recvbuf;

	sendcounts = xcalloc((size_t)t->nprocs, sizeof(int));
	sdispls = xcalloc((size_t)t->nprocs, sizeof(int));
	recvcounts = xcalloc((size_t)t->nprocs, sizeof(int));
	rdispls = xcalloc((size_t)t->nprocs, sizeof(int));
	sendbuf = pack_outbox(t, out, nout, sendcounts, sdispls);

	mpi_check(MPI_Alltoall(sendcounts, 1, MPI_INT, recvcounts, 1, MPI_INT,
	    MPI_COMM_WORLD), "MPI_Alltoall");
	for (q = 0; q < t->nprocs; q++) {
		rdispls[q] = count_to_int(total, "one round");
		total += (size_t)recvcounts[q];
	}
	count_to_int(total, "one round");
	/* xmalloc never returns NULL, even for 0 bytes: MPI wants a buffer. */
	recvbuf = xmalloc(total);
	mpi_check(MPI_Alltoallv(sendbuf, sendcounts, sdispls, MPI_BYTE,
	    recvbuf, recvcounts, rdispls, MPI_BYTE, MPI_COMM_WORLD),
	    "MPI_Alltoallv");
	free(sendbuf);
	free(sendcounts);
	free(sdispls);
	free(recvcounts);
	free(rdispls);
	unpack_inbox(t, recvbuf, total, in);
}

void
inbox_free(struct inbox *in)
{
	free(in->v);
	free(in->storage);
	in->v = NULL;
	in->storage = NULL;
	in->n = 0;
}

const struct message *
inbox_find(const struct inbox *in, int src, int dst, int tag)
{
	struct message	 key;
	size_t		 lo = 0, hi = in->n, mid;

	/*
	 * Lower bound on (dst, tag, src): if one rank sent the same key twice,
	 * this is the first of them in sending order.
	 */
	memset(&key, 0, sizeof(key));
	key.src = src;
	key.dst = dst;
	key.tag = tag;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (message_compare(&in->v[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < in->n && message_compare(&in->v[lo], &key) == 0)
		return &in->v[lo];
	return NULL;
}

int
transport_max_int(struct transport *t, int value)
{
	int	 result;

	(void)t;
	mpi_check(MPI_Allreduce(&value, &result, 1, MPI_INT, MPI_MAX,
	    MPI_COMM_WORLD), "MPI_Allreduce");
	return result;
}
