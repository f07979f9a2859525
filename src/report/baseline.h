/*
 * A baseline of accepted findings (--baseline FILE, gradaudit-baseline(5)):
 * the findings a team chose to live with, each with its reason and, if it
 * is to be looked at again, the date it stops being accepted.  A CI gate
 * then stays green on what was chosen on purpose and still fails on
 * anything new (issue 23: Megatron's mean of micro-batch means showed 578
 * of 578 parameters wrong, with no way to say that it was meant).
 *
 * baseline_load reads the file.  baseline_apply marks the findings of one
 * audit that an entry accepts (struct finding's accepted, reason, ...)
 * and counts, for each entry, the configs it names and the findings it
 * matches, so that an entry that matches nothing can be called stale;
 * audit_passes() (audit.c) then decides the gate from the marks alone.
 * A baseline_draft collects findings for --write-baseline.
 */
#ifndef GRADAUDIT_BASELINE_H
#define GRADAUDIT_BASELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "symbolic/audit.h"

/* "YYYY-MM-DD" and its NUL. */
#define BASELINE_DATE_SIZE	11

struct baseline_entry {
	char		*config;	/* glob: config name or file */
	enum finding_kind kind;
	char		**params;	/* globs, at least one */
	size_t		 nparams;
	char		*mechanism;	/* glob: the finding's op, or NULL */
	char		*reason;	/* one line, never empty */
	char		 expires[BASELINE_DATE_SIZE];	/* or "" */
	bool		 expired;	/* expires is today or before */
	char		*at;		/* "FILE:LINE:COL" */

	/* Counted by baseline_apply over the whole command. */
	size_t		 configs;	/* audited configs it names */
	size_t		 matched;	/* findings it matched */
};

struct baseline {
	char			*path;
	char			 today[BASELINE_DATE_SIZE];
	struct baseline_entry	*entries;
	size_t			 n;
};

/*
 * Today's date in UTC, from SOURCE_DATE_EPOCH when it is set (the
 * reproducible-builds convention, which lets a test or a rebuild fix the
 * day), else from the clock.  -1 after "gradaudit: SOURCE_DATE_EPOCH..."
 * on stderr when that variable is no number of seconds.
 */
int	 baseline_today(char today[BASELINE_DATE_SIZE]);

/*
 * Read the baseline at path, "-" being the standard input; entries whose
 * expiry date is today or before are marked expired.  0, or -1 after one
 * line "gradaudit: FILE:LINE:COL: ..." on stderr, with *b then empty.
 */
int	 baseline_load(struct baseline *, const char *path,
	    const char *today);
void	 baseline_free(struct baseline *);

/*
 * Mark the findings of a that the entries accept, for the config of that
 * name and file (either may be NULL): an entry matches a finding when its
 * config glob matches the name or the file, its kind is the finding's,
 * every parameter the finding names matches one of its globs and, if it
 * has one, its mechanism glob matches the finding's op.  Of the entries
 * that match, the first one in the file that has not expired accepts the
 * finding; when all have, the first one is kept to say so.  Counts the
 * entries' configs and matches, and lists in a->stale the entries that
 * name this config and match none of its findings.  An audit is marked
 * once: a second call does nothing.
 */
void	 baseline_apply(struct baseline *, struct audit *, const char *name,
	    const char *file);

/*
 * The entries that name some audited config and matched no finding of
 * any, one line each on fp ("gradaudit: FILE:LINE:COL: stale baseline
 * entry: ..."); returns their number.
 */
size_t	 baseline_report_stale(const struct baseline *, FILE *);

/*
 * --write-baseline: the findings of every audit, one entry each, that
 * make a starting file.  An entry names its config and parameters
 * exactly (the glob characters escaped) and its kind; a finding that a
 * baseline accepted keeps that entry's reason and expiry date, the others
 * get a reason that asks for one.  The same finding of several configs,
 * or of one config twice (sweep), is written once per config.
 */
struct baseline_draft_entry {
	char		*config;
	enum finding_kind kind;
	char		**params;
	size_t		 nparams;
	char		*reason;	/* NULL: to be written */
	char		*expires;	/* NULL: never */
	char		*about;		/* the finding's message */
};

struct baseline_draft {
	struct baseline_draft_entry *entries;
	size_t			 n, cap;
};

void	 baseline_draft_add(struct baseline_draft *, const struct audit *,
	    const char *config);
/* The file, in YAML that baseline_load reads back, on fp. */
void	 baseline_draft_write(FILE *, const struct baseline_draft *,
	    const char *today);
void	 baseline_draft_free(struct baseline_draft *);

#endif
