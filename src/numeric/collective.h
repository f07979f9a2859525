/*
 * The communication layer of the numeric engine: messages between the mesh
 * ranks of SPEC section 8 and the collectives built from them.  Every
 * collective, pipeline transfer and expert dispatch is a round of the
 * transport (transport.h), a real exchange between MPI processes.  The
 * reference runs on one rank without MPI: its "rounds" are a loopback that
 * turns the outbox into the inbox.
 */
#ifndef GRADAUDIT_COLLECTIVE_H
#define GRADAUDIT_COLLECTIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/mesh.h"
#include "numeric/numvalue.h"
#include "numeric/transport.h"

struct buffer_layout;

/* What a message is, so that a receiver can find it in its inbox. */
enum coll_tag {
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

/*
 * The mesh ranks one process hosts, and how their rounds travel: over the
 * transport, or through the loopback when transport is NULL.  Collectives
 * take one contribution per hosted rank, indexed like rank[].
 */
struct coll_comm {
	const struct mesh	*mesh;
	struct transport	*transport;	/* NULL: loopback */
	const int		*rank;		/* borrowed */
	int			 nranks;
	enum arith		 arith;		/* of the sums (numvalue.h) */
};

/* Queue a message; the outbox owns data (malloc'd) until the round. */
void		 outbox_add(struct outbox *, int src, int dst, int tag,
		    void *data, size_t len);
/* Queue a tensor, as its two dimensions followed by its values. */
void		 outbox_add_tensor(struct outbox *, int src, int dst, int tag,
		    const struct tensor *);
/* One round: every process calls this the same number of times. */
void		 coll_exchange(struct coll_comm *, struct outbox *,
		    struct inbox *);
/* Free an inbox that coll_exchange() filled. */
void		 coll_release(struct coll_comm *, struct inbox *);
/* The payload of (src, dst, tag) as numbers; a missing message is fatal. */
const union num	*inbox_nums(const struct inbox *, int src, int dst, int tag,
		    int64_t *n);
/* The tensor outbox_add_tensor() sent as (src, dst, tag), allocated. */
void		 inbox_tensor(const struct inbox *, int src, int dst, int tag,
		    struct tensor *);

/*
 * Collectives over the mesh groups of `kind`.  vec[i] (len[i] values) is
 * the contribution of hosted rank i, NULL when that rank takes no part;
 * the result replaces it.  average divides the sum by the group size.
 */
void		 coll_all_reduce(struct coll_comm *, enum group_kind,
		    union num **vec, const int64_t *len, bool average);
/* The bucketed reduce-scatter: buf[i] is laid out by bl[i] (layout.h). */
void		 coll_reduce_scatter(struct coll_comm *, enum group_kind,
		    union num **buf, const struct buffer_layout **bl,
		    bool average);
/* Its inverse: member k's shard of every bucket goes to every member. */
void		 coll_all_gather(struct coll_comm *, enum group_kind,
		    union num **buf, const struct buffer_layout **bl);

/*
 * Tensor collectives over the tp group, for sequence parallelism over
 * samples of seq tokens: in[i] / out[i] belong to hosted rank i (in[i]
 * NULL for ranks that take no part); out[i] is allocated here.
 */
void		 coll_all_gather_tokens(struct coll_comm *, int64_t seq,
		    struct tensor **in, struct tensor *out);
void		 coll_keep_tokens(struct coll_comm *, int64_t seq,
		    struct tensor **in, struct tensor *out);
void		 coll_reduce_scatter_tokens(struct coll_comm *, int64_t seq,
		    struct tensor **in, struct tensor *out);
/* In-place all-reduce (sum) of tensors over tp. */
void		 coll_all_reduce_tensors(struct coll_comm *, struct tensor **);

#endif
