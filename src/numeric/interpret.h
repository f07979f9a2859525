/*
 * The interpreter of the numeric engine (interpret.c): the model's ops run
 * on the ranks of an engine (numengine.h), forward then backward, for one
 * micro-batch or for the whole step.
 */
#ifndef GRADAUDIT_INTERPRET_H
#define GRADAUDIT_INTERPRET_H

#include <stdbool.h>
#include <stdint.h>

#include "numeric/numvalue.h"

struct engine;

/* Progress, on process 0 only; units are ops, sync steps and params. */
struct progress_count {
	bool	 on;
	int64_t	 done;
};

/* One more unit done; pc may be NULL. */
void		 progress_tick(struct progress_count *pc);
/* Forward then backward of the current micro-batch on every hosted rank. */
void		 run_model(struct engine *, struct progress_count *);
/*
 * Called around each micro-batch's backward, with each hosted rank's
 * pgrad holding its gradient buffer (the micro-batches so far, as the
 * calls before left it): before the backward of micro-batch mb (`before`)
 * and after it.  numeric.c runs the plan's steps of mb there when the
 * plan runs per micro-batch (syncplan.h).
 */
typedef void	 buffer_hook(struct engine *, int mb, bool before, void *arg);

/*
 * The step: returns the atoms, [local rank][param], and leaves each rank's
 * local gradients in its pgrad (what the hook made of them, with one).
 */
union num	***run_step(struct engine *, struct progress_count *,
		    buffer_hook *hook, void *arg);
/* The test hooks GRADAUDIT_TEST_CORRUPT_RANK and _NUDGE_RANK (numeric.c). */
void		 test_corruption(struct engine *);

#endif
