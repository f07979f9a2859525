/*
 * The transport over real MPI (TAP, printed by process 0): run it as
 * `mpiexec -n 3 tests/mpi-transport` and `mpiexec -n 1 tests/mpi-transport`.
 * Seven virtual ranks exchange messages whose payloads spell out their own
 * (src, dst, tag), so a message delivered to the wrong rank, under the wrong
 * header, truncated or out of order is caught.  Each check is agreed on by
 * every process with a plain MPI_Allreduce, independent of the code under
 * test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "base/xmalloc.h"
#include "numeric/transport.h"
#include "tap.h"

#define WORLD		7
#define PLAN		15
#define BIG_LEN		(1024 * 1024 + 3)

static struct transport	 t;

static void
check(int cond, const char *name)
{
	int	 all;

	cond = cond != 0;
	MPI_Allreduce(&cond, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	tap_ok(all, "%s (%d processes)", name, t.nprocs);
}

static unsigned char
pattern(int src, int dst, int tag, size_t i)
{
	return (unsigned char)(src * 31 + dst * 7 + tag * 3 + (int)i);
}

static size_t
payload_len(int src, int dst, int tag)
{
	/* Lengths 12..22: most are not multiples of the wire alignment. */
	return 3 * sizeof(int32_t) + (size_t)((src * 3 + dst + tag) % 11);
}

static void *
make_payload(int src, int dst, int tag, size_t len)
{
	unsigned char	*p = xmalloc(len);
	int32_t		 head[3] = { src, dst, tag };
	size_t		 i;

	memcpy(p, head, sizeof(head));
	for (i = sizeof(head); i < len; i++)
		p[i] = pattern(src, dst, tag, i);
	return p;
}

static int
payload_ok(const struct message *m)
{
	const unsigned char	*p = m->data;
	int32_t			 head[3];
	size_t			 i;

	if (m->len != payload_len(m->src, m->dst, m->tag))
		return 0;
	memcpy(head, p, sizeof(head));
	if (head[0] != m->src || head[1] != m->dst || head[2] != m->tag)
		return 0;
	for (i = sizeof(head); i < m->len; i++)
		if (p[i] != pattern(m->src, m->dst, m->tag, i))
			return 0;
	return 1;
}

static int
is_local(int rank)
{
	int	 i;

	for (i = 0; i < t.nlocal; i++)
		if (t.local[i] == rank)
			return 1;
	return 0;
}

static void
test_layout(void)
{
	int	 v, expect = 0, good = 1;

	for (v = 0; v < WORLD; v++) {
		if (transport_host_of(&t, v) != v % t.nprocs)
			good = 0;
		if (v % t.nprocs == t.proc) {
			if (expect >= t.nlocal || t.local[expect] != v)
				good = 0;
			expect++;
		}
	}
	check(good && expect == t.nlocal && t.world == WORLD,
	    "ranks v with v % P == q live on process q, ascending");
}

/*
 * Every rank sends tags 2 and 1 to every other rank, and an empty tag-3
 * message to its right neighbour; the outbox is built in descending order
 * so that the sort is really exercised.
 */
static void
test_all_to_all(void)
{
	struct message	*out;
	struct inbox	 in;
	size_t		 nout = 0, i, expected;
	int		 li, dst, tag, src, u, sorted = 1, content = 1;
	int		 found = 1, aligned = 1, local_dst = 1, empty_ok = 1;
	const struct message *m;

	out = xcalloc((size_t)t.nlocal * (2 * WORLD + 1), sizeof(*out));
	for (li = t.nlocal - 1; li >= 0; li--) {
		src = t.local[li];
		for (dst = WORLD - 1; dst >= 0; dst--) {
			if (dst == src)
				continue;
			for (tag = 2; tag >= 1; tag--) {
				out[nout].src = src;
				out[nout].dst = dst;
				out[nout].tag = tag;
				out[nout].len = payload_len(src, dst, tag);
				out[nout].data = make_payload(src, dst, tag,
				    out[nout].len);
				nout++;
			}
		}
		out[nout].src = src;
		out[nout].dst = (src + 1) % WORLD;
		out[nout].tag = 3;
		out[nout].len = 0;
		out[nout].data = NULL;
		nout++;
	}
	transport_round(&t, out, nout, &in);
	/* The round copied everything: the sender may reuse its buffers. */
	for (i = 0; i < nout; i++) {
		if (out[i].data != NULL)
			memset(out[i].data, 0xee, out[i].len);
		free(out[i].data);
	}
	free(out);

	expected = (size_t)t.nlocal * (2 * (WORLD - 1) + 1);
	check(in.n == expected, "each rank receives exactly what was sent");
	for (i = 0; i < in.n; i++) {
		m = &in.v[i];
		if (i > 0 && (in.v[i - 1].dst > m->dst ||
		    (in.v[i - 1].dst == m->dst && (in.v[i - 1].tag > m->tag ||
		    (in.v[i - 1].tag == m->tag && in.v[i - 1].src >= m->src)))))
			sorted = 0;
		if (!is_local(m->dst))
			local_dst = 0;
		if (m->tag == 3) {
			if (m->len != 0 ||
			    m->src != (m->dst + WORLD - 1) % WORLD)
				empty_ok = 0;
		} else if (!payload_ok(m))
			content = 0;
		if ((uintptr_t)m->data % 8 != 0)
			aligned = 0;
	}
	check(sorted, "inbox is strictly sorted by (dst, tag, src)");
	check(local_dst, "every message is for a rank of this process");
	check(content, "every payload encodes its own (src, dst, tag)");
	check(empty_ok, "empty messages arrive empty, from the neighbour");
	check(aligned, "payloads are 8-byte aligned");
	for (li = 0; li < t.nlocal; li++) {
		u = t.local[li];
		for (src = 0; src < WORLD; src++)
			for (tag = 1; tag <= 2; tag++) {
				m = inbox_find(&in, src, u, tag);
				if (src == u ? m != NULL : (m == NULL ||
				    m->src != src || m->dst != u ||
				    m->tag != tag || !payload_ok(m)))
					found = 0;
			}
		if (inbox_find(&in, u, u, 3) != NULL ||
		    inbox_find(&in, (u + WORLD - 1) % WORLD, u, 3) == NULL ||
		    inbox_find(&in, 0, u, 99) != NULL)
			found = 0;
	}
	check(found, "inbox_find finds each sent triple and nothing else");
	inbox_free(&in);
	check(in.v == NULL && in.n == 0 && in.storage == NULL,
	    "inbox_free empties the inbox");
}

static void
test_empty(void)
{
	struct inbox	 in;

	transport_round(&t, NULL, 0, &in);
	check(in.n == 0, "a round with every outbox empty delivers nothing");
	inbox_free(&in);
}

static unsigned char
big_pattern(size_t i)
{
	return (unsigned char)(i * 2654435761u >> 13);
}

/* Only rank 0 sends, a payload far larger than the others, to WORLD-1. */
static void
test_one_sender(void)
{
	struct message	 msg;
	struct inbox	 in;
	unsigned char	*p = NULL;
	const unsigned char *q;
	size_t		 i;
	int		 good = 1;

	memset(&msg, 0, sizeof(msg));
	if (t.proc == transport_host_of(&t, 0)) {
		p = xmalloc(BIG_LEN);
		for (i = 0; i < BIG_LEN; i++)
			p[i] = big_pattern(i);
		msg.src = 0;
		msg.dst = WORLD - 1;
		msg.tag = 5;
		msg.len = BIG_LEN;
		msg.data = p;
	}
	transport_round(&t, &msg, p != NULL ? 1 : 0, &in);
	free(p);
	if (is_local(WORLD - 1)) {
		if (in.n != 1 || in.v[0].len != BIG_LEN || in.v[0].src != 0)
			good = 0;
		else {
			q = in.v[0].data;
			for (i = 0; i < BIG_LEN; i++)
				if (q[i] != big_pattern(i))
					good = 0;
		}
	} else if (in.n != 0)
		good = 0;
	check(good, "a single large message reaches only its receiver intact");
	inbox_free(&in);
}

/* Many small rounds around a ring: rounds stay matched across processes. */
static void
test_ring(void)
{
	struct message	*out;
	struct inbox	 in;
	int		 round, li, good = 1, value;
	const struct message *m;

	out = xcalloc((size_t)t.nlocal, sizeof(*out));
	for (round = 0; round < 50; round++) {
		int32_t	*vals = xcalloc((size_t)t.nlocal, sizeof(*vals));

		for (li = 0; li < t.nlocal; li++) {
			vals[li] = t.local[li] * 1000 + round;
			out[li].src = t.local[li];
			out[li].dst = (t.local[li] + 1) % WORLD;
			out[li].tag = round;
			out[li].len = sizeof(vals[li]);
			out[li].data = &vals[li];
		}
		transport_round(&t, out, (size_t)t.nlocal, &in);
		free(vals);
		for (li = 0; li < t.nlocal; li++) {
			int left = (t.local[li] + WORLD - 1) % WORLD;

			m = inbox_find(&in, left, t.local[li], round);
			if (m == NULL || m->len != sizeof(int32_t))
				good = 0;
			else {
				memcpy(&value, m->data, sizeof(value));
				if (value != left * 1000 + round)
					good = 0;
			}
		}
		if (in.n != (size_t)t.nlocal)
			good = 0;
		inbox_free(&in);
	}
	free(out);
	check(good, "50 ring rounds each deliver the left neighbour's value");
}

static void
test_max_int(void)
{
	check(transport_max_int(&t, t.proc * 10 + 5) == (t.nprocs - 1) * 10 + 5,
	    "transport_max_int returns the largest value");
	check(transport_max_int(&t, -t.proc - 1) == -1,
	    "transport_max_int handles negative values");
	check(transport_max_int(&t, t.proc == t.nprocs - 1 ? 3 : 0) == 3,
	    "transport_max_int spreads one process's status to all");
}

int
main(int argc, char **argv)
{
	int	 status;

	MPI_Init(&argc, &argv);
	transport_init(&t, WORLD);
	/* Every process counts the agreed checks; process 0 prints them. */
	tap_quiet(t.proc != 0);
	tap_plan(PLAN);
	fflush(stdout);
	test_layout();
	test_all_to_all();
	test_empty();
	test_one_sender();
	test_ring();
	test_max_int();
	status = tap_done();
	transport_free(&t);
	MPI_Finalize();
	return status;
}
