/*
 * What check, run and sweep share around the engines: loading every config
 * named on the command line, and printing a list of audits as text or one
 * JSON value, with the optional JUnit file.
 */
#ifndef GRADAUDIT_OUTPUT_H
#define GRADAUDIT_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

#include "audit.h"
#include "config.h"
#include "options.h"

/* Load all operands with the --set overrides; -1 after an error message. */
int	 output_load_configs(const struct options *, struct config_list *);

struct audited {
	struct audit	*audit;		/* NULL when this config was not audited */
	const char	*label;		/* test case name (config name, or mesh) */
	double		 seconds;
	const char	*why_not;	/* with audit NULL: why, for JUnit */
};

/*
 * Print every audit (text: one report each; JSON: an object, or an array
 * when `array`), write --junit if asked.  Returns EXIT_OK, EXIT_WRONG, or
 * EXIT_RUNTIME when stdout or the JUnit file could not be written.
 */
int	 output_audits(const struct options *, const struct audited *,
	    size_t n, bool array, const char *suite);

/*
 * JSON is an array for several configs, or for a file holding a list even
 * of one (SPEC section 9); an object for one plain document.
 */
bool	 output_as_array(const struct config_list *);

/*
 * With --junit, write every operand as an error case ("configuration
 * error", "runtime failure"): nothing was audited.
 */
void	 output_junit_not_audited(const struct options *, const char *why);

/* Write only the JUnit file; EXIT_OK or EXIT_RUNTIME. */
int	 output_junit(const char *path, const struct audited *, size_t n,
	    const char *suite);
/* The same JUnit document on a stream (run's job renders it there). */
void	 output_junit_write(FILE *, const struct audited *, size_t n,
	    const char *suite);
/* Save JUnit bytes rendered elsewhere (by run's MPI job). */
int	 output_junit_bytes(const char *path, const char *xml, size_t len);

double	 output_now(void);	/* monotonic seconds */

#endif
