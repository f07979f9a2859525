/*
 * A progress bar on stderr for long work (numeric runs, sweeps), shown only
 * when stderr is a terminal: a log file or a CI job gets no output at all.
 * One bar at a time; updates are throttled to about ten a second, and the
 * line is erased at the end so the report that follows starts clean.
 */
#ifndef GRADAUDIT_PROGRESS_H
#define GRADAUDIT_PROGRESS_H

#include <stdint.h>

/* Begin a bar for `total` steps (total <= 0: a count without a bar). */
void	 progress_start(const char *label, int64_t total);
/* `done` steps of total are finished. */
void	 progress_update(int64_t done);
/* Erase the bar. */
void	 progress_end(void);

#endif
