/*
 * Workers that audit a text sweep's meshes on the other cores and send
 * back each verdict (sweep-workers.c).
 */
#ifndef GRADAUDIT_SWEEP_WORKERS_H
#define GRADAUDIT_SWEEP_WORKERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cmd/options.h"
#include "cmd/sweep-points.h"

struct verdict;

struct workers {
	int		 n;		/* 0: no workers */
	pid_t		*pid;
	int		*fd;		/* read end of worker w's pipe, or -1 */
	/* The next mesh to hand out, shared with the workers (mmap). */
	atomic_size_t	*next;
	/* The verdicts arrived so far, by mesh; got[i] once verdict[i] is. */
	struct verdict	*verdict;
	bool		*got;
};

/* Workers for the cores there are, when the sweep is worth them. */
void	 sweep_workers_start(struct workers *wk, struct sweep *sw,
	    const struct options *o);
void	 sweep_workers_stop(struct workers *wk);
/*
 * The verdict of mesh i, if a worker found it correct; false when the
 * sweep must audit it itself (then, if the workers failed, they are gone).
 */
bool	 sweep_worker_says_ok(struct workers *wk, size_t i, size_t npoints,
	    double *seconds);

#endif
