/*
 * The JUnit XML report of --junit (SPEC section 2): one testcase per
 * audited configuration (and per mesh in sweep), so that a CI server shows
 * a gradient bug as a failed test with the findings as its text.
 */
#ifndef GRADAUDIT_JUNIT_H
#define GRADAUDIT_JUNIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct audit;

struct junit_case {
	const char	*name;		/* config name (and mesh) */
	const char	*classname;	/* NULL: the suite name */
	double		 seconds;
	bool		 failed;	/* gradients wrong: <failure> */
	bool		 error;		/* not audited: <error>, wins */
	/*
	 * Wrong, but the baseline accepts all of it: <skipped>, with the
	 * reasons as its message.  A failure or an error wins.
	 */
	bool		 skipped;
	const char	*failure_message;	/* one line, or skipped's */
	const char	*failure_text;	/* element body, may be NULL */
	const char	*file;		/* the config file, or NULL */
	const char	*system_out;	/* <system-out>, or NULL */
};

/*
 * Write a whole document: <testsuites> holding one <testsuite> with the
 * counts of tests, failures and errors (and of skipped cases, when
 * there are any).  Every string is escaped (&, <, >,
 * quotes); characters XML cannot hold (control characters, invalid UTF-8)
 * are dropped or replaced, so the document is always well-formed.
 */
void	 junit_write(FILE *, const char *suite_name,
	    const struct junit_case *, size_t n);
/*
 * The same with the <testsuite>'s timestamp (UTC, "2026-11-24T01:00:00")
 * and hostname given; junit_write takes the time and host of the call.
 */
void	 junit_write_suite(FILE *, const char *suite_name,
	    const char *timestamp, const char *hostname,
	    const struct junit_case *, size_t n);

/*
 * The <failure> message of a wrong audit: its findings as "parameter:
 * kind over dimension", so that a CI server's one-line view names what
 * is wrong; the findings a baseline accepts are left out, as they do
 * not fail.  xmalloc'd.
 */
char	*junit_failure_message(const struct audit *);

/*
 * The <skipped> message of an audit the baseline accepts: each finding
 * as "parameter: kind: reason"; xmalloc'd.
 */
char	*junit_skipped_message(const struct audit *);

/*
 * The findings of an audit as plain text, one per line, then the summary
 * line; xmalloc'd, for the caller to free.
 */
char	*junit_failure_text(const struct audit *);

#endif
