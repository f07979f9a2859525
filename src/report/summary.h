/*
 * The Markdown summary of --summary FILE: one table row per config
 * (config, verdict, wrong parameters, numeric audit), appended to FILE,
 * which may be GitHub's $GITHUB_STEP_SUMMARY: GitHub shows that file on
 * the job's page, where a JUnit file needs a third-party action to show.
 */
#ifndef GRADAUDIT_SUMMARY_H
#define GRADAUDIT_SUMMARY_H

#include <stddef.h>
#include <stdio.h>

struct audit;

struct summary_row {
	char	*name;		/* config name (test case name) */
	char	*verdict;	/* "pass", "accepted", "wrong", "error" */
	char	*wrong;		/* the wrong parameters, or the error */
	char	*numeric;	/* "exact: agrees", "skipped (...)", "-" */
	char	*effect;	/* the findings' effects (effect.h), or "-" */
	size_t	 accepted;	/* findings the baseline accepts */
};

/* The row of an audit, or (audit NULL) of a config not audited: why. */
void	 summary_row_of(struct summary_row *, const char *name,
	    const struct audit *, const char *why_not);
void	 summary_rows_free(struct summary_row *, size_t n);

/*
 * A heading, the table and a line of counts, in GitHub-flavoured Markdown;
 * the configs and findings a baseline accepts are counted when there are
 * any.
 */
void	 summary_write(FILE *, const char *title, const struct summary_row *,
	    size_t n);

#endif
