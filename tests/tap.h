/*
 * The Test Anything Protocol as the C test programs print it on stdout:
 * numbered "ok N - description" and "not ok N - description" lines, the
 * plan "1..N", skips and "# " diagnostics.  automake's tap-driver.sh reads
 * it; a program's exit status (tap_done()) says whether every check passed.
 */
#ifndef GRADAUDIT_TAP_H
#define GRADAUDIT_TAP_H

#include <stdbool.h>

/*
 * Print the plan now, before any check; tap_done() then fails the program
 * if a different number of checks ran.  Without it tap_done() prints the
 * plan after the last check.
 */
void	 tap_plan(int count);

/*
 * Count checks but print nothing: for the MPI processes other than the one
 * that reports, which still need the same exit status.
 */
void	 tap_quiet(bool quiet);

/* One check; returns the condition so that a caller can add diagnostics. */
bool	 tap_ok(bool cond, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/*
 * A check that two strings are equal; on failure both are shown line by
 * line, each line end marked with '|' so that trailing blanks show.
 */
bool	 tap_ok_str_eq(const char *got, const char *want, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/* A check that could not run here: "ok N - description # SKIP why". */
void	 tap_skip(const char *why, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/* A diagnostic; every line of it becomes a "# " comment. */
void	 tap_diag(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));

/*
 * After the last check: print the plan if tap_plan() did not, and return
 * the exit status, 0 if every check passed (and as many ran as planned),
 * else 1.
 */
int	 tap_done(void);

#endif /* GRADAUDIT_TAP_H */
