/*
 * What check, run and sweep share around the engines: loading every config
 * named on the command line, and printing a list of audits as text or one
 * JSON value, with the optional JUnit file.
 */
#ifndef GRADAUDIT_OUTPUT_H
#define GRADAUDIT_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

#include "base/json.h"
#include "cmd/options.h"
#include "config/config.h"
#include "report/baseline.h"
#include "report/junit.h"
#include "report/report.h"
#include "report/summary.h"
#include "symbolic/audit.h"

/*
 * Load all operands with the --set overrides; -1 after an error message.
 * varying: the keys sweep sets itself (cfg_load_varying), or NULL.
 */
int	 output_load_configs(const struct options *, const struct keyset *varying,
	    struct config_list *);

struct audited {
	struct audit	*audit;		/* NULL when this config was not audited */
	const char	*label;		/* test case name (config name, or mesh) */
	double		 seconds;
	const char	*why_not;	/* with audit NULL: why, for JUnit */
	const char	*file;		/* the config file, or NULL */
};

/*
 * The operands of check or run as a batch (issue 10): every config that
 * loaded, and in operand order each config or the error that stopped it.
 * A bad config is an error case of its own; the others are audited.
 */
struct batch_item {
	long		 config;	/* index in list, or -1: not loaded */
	char		*file;		/* with config -1: the file */
	char		*name;		/* with config -1: the test case name */
	char		*error;		/* with config -1: the loader's message */
};

struct batch {
	struct config_list	 list;
	struct batch_item	*items;
	size_t			 n, cap, listcap;
	size_t			 nerrors;
};

/*
 * Load every operand with the --set overrides, each on its own: a file
 * that fails (its message printed) becomes an error item, and so does a
 * config too large to audit at all.  Returns the number of errors.
 */
size_t	 output_load_batch(const struct options *, struct batch *);
void	 batch_free(struct batch *);
/* The entry of item i for a report: its audit is for the caller to set. */
void	 batch_entry(const struct batch *, size_t i, struct audited *);
/*
 * batch_entry for a config after one that went past GRADAUDIT_MAX_MEMORY
 * (run_check_memory): one not refused already is not audited, the run
 * holding the memory it took, and, when loud, stderr says so.  check's
 * and run's ends of such a batch.
 */
void	 batch_entry_unaudited(const struct batch *, size_t i,
	    struct audited *, bool loud);

/*
 * Before anything is audited: --junit, --summary and --write-baseline can
 * be written.  EXIT_OK, or EXIT_USAGE after a message.  No file is
 * changed.
 */
int	 output_check_paths(const struct options *);

/*
 * Before anything is audited, with --baseline or --write-baseline: today's
 * date, and the baseline file read into o->baseline (an empty one for
 * --write-baseline alone).  EXIT_OK, or EXIT_USAGE after the error at
 * file:line:col; then, when `reports` is set, every operand is an error
 * case of --junit and --summary, so that CI never reads an old report.
 */
int	 output_read_baseline(struct options *, bool reports);

/*
 * Mark the findings of v's audit that --baseline accepts (baseline.h),
 * once.  output_add does it for every command that prints through it,
 * so that check, run and compare get the baseline alike; run's other MPI
 * processes, which print nothing, call it to reach process 0's verdict.
 */
void	 output_accept(const struct options *, const struct audited *);

/*
 * --write-baseline: the findings of entries as a baseline file, on a
 * stream (run's job renders it there), and saving such bytes; EXIT_OK or
 * EXIT_RUNTIME.  A baseline is written only when every config was
 * audited: one made without some config's findings would replace a good
 * file with a poorer one.  output_baseline_complete says so on stderr
 * when it is not.
 */
bool	 output_baseline_complete(const struct options *,
	    const struct audited *, size_t n);
void	 output_baseline_write(FILE *, const struct options *,
	    const struct audited *, size_t n);
int	 output_baseline_bytes(const char *path, const char *yaml,
	    size_t len);

/*
 * A report file (JUnit, summary) opened with mode "w" or "a", or NULL after
 * "cannot write WHAT" on stderr; closed with EXIT_OK, or EXIT_RUNTIME after
 * "write error" on stderr.
 */
FILE	*output_open(const char *path, const char *mode, const char *what);
int	 output_close(FILE *, const char *path);

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
	struct summary_row	*rows;		/* with --summary */
	size_t			 ncases, cap;
	/*
	 * --write-baseline: the findings so far, and whether a config was
	 * not audited, which keeps the file from being written.
	 */
	struct baseline_draft	 draft;
	bool			 unaudited;
};

/* Begin a report of n audits. */
void	 output_begin(struct output_stream *, const struct options *,
	    bool array, size_t n);
/*
 * Print one audit, or (audit NULL) a config not audited: an error object
 * in a JSON array, an error case in JUnit and the summary, exit status 2.
 */
void	 output_add(struct output_stream *, const struct audited *);
/*
 * Close the report, write --junit, --summary and --write-baseline if
 * asked, say on stderr which --baseline entries are stale, free the
 * stream.  Returns the most severe status of the entries (EXIT_OK,
 * EXIT_WRONG, EXIT_USAGE when one was not audited), at least EXIT_WRONG
 * for a stale entry under --strict-baseline, or EXIT_RUNTIME when stdout
 * or a file could not be written.
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
 * With --junit and --summary, write every operand as an error case
 * ("configuration error", "runtime failure"): nothing was audited.
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

/* The --summary Markdown of entries on a stream, and appending it. */
void	 output_summary_write(FILE *, const struct audited *, size_t n,
	    const char *suite);
int	 output_summary_bytes(const char *path, const char *md, size_t len);


/* A config not audited, in a JSON array: its file, name and why_not. */
void	 jsonw_not_audited(struct json *, const struct audited *);
/* Whether a report asked for shows findings' fixes (fix_derive). */
bool	 output_wants_fixes(const struct options *);
/*
 * --expand of audit a, unforced, past REPORT_EXPAND_MAX (report.h): said on
 * stderr with the size and what (a file, a mesh); its report is not
 * written, and the caller exits 2.
 */
bool	 output_expand_refused(const struct options *, const struct audit *,
	    const char *what);

#endif
