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
#include "json.h"
#include "junit.h"
#include "options.h"
#include "report.h"

/* Load all operands with the --set overrides; -1 after an error message. */
int	 output_load_configs(const struct options *, struct config_list *);

struct audited {
	struct audit	*audit;		/* NULL when this config was not audited */
	const char	*label;		/* test case name (config name, or mesh) */
	double		 seconds;
	const char	*why_not;	/* with audit NULL: why, for JUnit */
};

/*
 * A report written as the audits come, so that a command can free each
 * audit once it is printed: check held every audit of a list until the
 * end, and 100,000 small configs took 10 GB (issue 8).  Text is one report
 * per audit, JSON an object or, when `array`, one array of them; for
 * --junit only each audit's test case is kept, and the file is written at
 * the end.
 */
struct output_stream {
	const struct options	*options;
	struct report_options	 report;
	struct json		 json;
	bool			 array;
	size_t			 count;		/* audits added so far */
	int			 status;
	struct junit_case	*cases;		/* with --junit */
	size_t			 ncases, cap;
};

/* Begin a report of n audits. */
void	 output_begin(struct output_stream *, const struct options *,
	    bool array, size_t n);
/* Print one audit (or, audit NULL, only count it for JUnit). */
void	 output_add(struct output_stream *, const struct audited *);
/*
 * Close the report, write --junit if asked, free the stream.  Returns
 * EXIT_OK, EXIT_WRONG, or EXIT_RUNTIME when stdout or the JUnit file could
 * not be written.
 */
int	 output_end(struct output_stream *, const char *suite);

/* The whole report of audits held together: begin, add each, end. */
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
