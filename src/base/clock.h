/*
 * Seconds on the monotonic clock, for durations and deadlines: it never
 * steps back when the wall clock is set.  Async-signal-safe (the run's
 * watchdog reads it from its signal handler).  Linux's CLOCK_MONOTONIC
 * cannot fail; if it did, 0 comes back and a deadline is never due.
 */
#ifndef GRADAUDIT_CLOCK_H
#define GRADAUDIT_CLOCK_H

double	 clock_seconds(void);

#endif
