/*
 * The sync plan executed on the real local gradients of an engine
 * (numsync.c).
 */
#ifndef GRADAUDIT_NUMSYNC_H
#define GRADAUDIT_NUMSYNC_H

struct engine;
struct layout;
struct progress_count;
struct sync_plan;

void	 run_sync(struct engine *, const struct layout *,
	    const struct sync_plan *, struct progress_count *);

#endif
