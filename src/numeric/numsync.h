/*
 * The sync plan executed on the real local gradients of an engine
 * (numsync.c).
 */
#ifndef GRADAUDIT_NUMSYNC_H
#define GRADAUDIT_NUMSYNC_H

#include <stdbool.h>

struct engine;
struct layout;
struct progress_count;
struct sync_plan;

/*
 * The plan's steps that run at micro-batch mb: its resets (before true,
 * ahead of mb's backward) or its other steps (after it), in plan order.
 */
void	 run_sync(struct engine *, const struct layout *,
	    const struct sync_plan *, int mb, bool before,
	    struct progress_count *);

#endif
