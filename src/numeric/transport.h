/*
 * Virtual ranks over MPI processes.  A mesh of `world` ranks runs on P MPI
 * processes (P <= world): process q hosts the ranks v with v % P == q.  All
 * communication between mesh ranks goes through rounds of messages: in one
 * round every process hands over the messages its ranks send and gets the
 * messages addressed to its ranks.  Collectives (all-reduce, reduce-scatter,
 * all-to-all, pipeline send/recv) are built from rounds by the numeric
 * engine; a round is itself a real MPI exchange between processes
 * (MPI_Alltoall of sizes, then MPI_Alltoallv of payloads), so every byte a
 * collective moves between two processes crosses MPI.
 *
 * A round is collective over all processes: every process calls it the same
 * number of times, with an empty outbox if its ranks send nothing.
 */
#ifndef GRADAUDIT_TRANSPORT_H
#define GRADAUDIT_TRANSPORT_H

#include <stddef.h>

struct message {
	int	 src;		/* sending mesh rank */
	int	 dst;		/* receiving mesh rank */
	int	 tag;		/* what this is, so the receiver can sort */
	size_t	 len;		/* bytes */
	void	*data;		/* owned by the sender until the round returns */
};

struct inbox {
	struct message	*v;	/* sorted by (dst, tag, src); data owned by inbox */
	size_t		 n;
	void		*storage;
};

struct transport {
	int	 world;		/* mesh ranks */
	int	 nprocs;	/* MPI processes */
	int	 proc;		/* this process's MPI rank */
	int	*local;		/* mesh ranks hosted here, ascending */
	int	 nlocal;
};

/* MPI_Init must have been called.  world >= 1. */
void	 transport_init(struct transport *, int world);
void	 transport_free(struct transport *);
int	 transport_host_of(const struct transport *, int rank);	/* process */

/* One round.  Errors from MPI are fatal (exit 3, message on stderr). */
void	 transport_round(struct transport *, const struct message *out,
	    size_t nout, struct inbox *in);
void	 inbox_free(struct inbox *);
/* The inbox order, (dst, tag, src), as a qsort comparator of messages. */
int	 message_compare(const void *, const void *);

/* Find the message (src, dst, tag) in an inbox, or NULL. */
const struct message *inbox_find(const struct inbox *, int src, int dst,
	    int tag);

/* Combine one int per process with MAX over all processes (exit statuses). */
int	 transport_max_int(struct transport *, int);

#endif
