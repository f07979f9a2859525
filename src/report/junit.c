/*
 * The JUnit XML writer of junit.h.  CI servers reject a malformed report
 * as a whole, so every string goes through one escaping function that
 * knows what XML 1.0 cannot hold, whatever a config name or message holds.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L		/* open_memstream */
#endif

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/xmalloc.h"
#include "report/junit.h"
#include "report/report.h"
#include "symbolic/audit.h"

/* How much of the findings a one-line failure message names. */
#define JUNIT_MESSAGE_FINDINGS	3
#define JUNIT_MESSAGE_PARAMS	3

#define UTF8_REPLACEMENT	"\xef\xbf\xbd"	/* U+FFFD */

/*
 * The code point of the well-formed UTF-8 sequence at s and its length in
 * *len, or -1 if there is none (overlong forms, surrogates, beyond
 * U+10FFFF, truncated).  Only called on a byte >= 0x80.
 */
static long
utf8_decode(const unsigned char *s, size_t *len)
{
	long	 cp, min;
	size_t	 n, i;

	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		cp = s[0] & 0x1f;
		min = 0x80;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		cp = s[0] & 0x0f;
		min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		cp = s[0] & 0x07;
		min = 0x10000;
	} else
		return -1;
	/* A NUL fails the continuation test, so there is no overrun. */
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	*len = n;
	return cp;
}

/*
 * Write a non-ASCII sequence: kept if XML may hold it, otherwise U+FFFD.
 * Returns the number of input bytes consumed.
 */
static size_t
put_utf8(FILE *fp, const unsigned char *s)
{
	size_t	 len = 1;
	long	 cp = utf8_decode(s, &len);

	if (cp < 0 || cp == 0xfffe || cp == 0xffff) {
		fputs(UTF8_REPLACEMENT, fp);
		return len;
	}
	fwrite(s, 1, len, fp);
	return len;
}

/*
 * Escape text for an attribute value (attr) or element content.  In
 * attributes, tab and newlines become character references, since a parser
 * would otherwise normalise them to spaces; other control characters have
 * no XML 1.0 form at all and are dropped.
 */
static void
put_escaped(FILE *fp, const char *str, bool attr)
{
	const unsigned char	*s = (const unsigned char *)str;

	if (str == NULL)
		return;
	while (*s != '\0') {
		switch (*s) {
		case '&':
			fputs("&amp;", fp);
			break;
		case '<':
			fputs("&lt;", fp);
			break;
		case '>':
			fputs("&gt;", fp);
			break;
		case '"':
			fputs("&quot;", fp);
			break;
		case '\'':
			fputs("&apos;", fp);
			break;
		case '\t':
			fputs(attr ? "&#9;" : "\t", fp);
			break;
		case '\n':
			fputs(attr ? "&#10;" : "\n", fp);
			break;
		case '\r':
			fputs("&#13;", fp);
			break;
		default:
			if (*s >= 0x80) {
				s += put_utf8(fp, s);
				continue;
			}
			if (*s >= 0x20)
				putc(*s, fp);
			break;
		}
		s++;
	}
}

static void
put_attr(FILE *fp, const char *name, const char *value)
{
	fprintf(fp, " %s=\"", name);
	put_escaped(fp, value != NULL ? value : "", true);
	putc('"', fp);
}

static double
case_seconds(const struct junit_case *c)
{
	return isfinite(c->seconds) && c->seconds > 0 ? c->seconds : 0;
}

struct junit_counts {
	size_t	 failures;
	size_t	 errors;
	size_t	 skipped;
	double	 seconds;
};

static void
count_cases(const struct junit_case *cases, size_t n, struct junit_counts *k)
{
	size_t	 i;

	k->failures = k->errors = k->skipped = 0;
	k->seconds = 0;
	for (i = 0; i < n; i++) {
		if (cases[i].error)
			k->errors++;
		else if (cases[i].failed)
			k->failures++;
		else if (cases[i].skipped)
			k->skipped++;
		k->seconds += case_seconds(&cases[i]);
	}
}

/*
 * "skipped" only when some are: a report without a baseline stays as it
 * was, and readers take a missing count as 0.
 */
static void
put_suite_attrs(FILE *fp, const char *name, size_t n,
    const struct junit_counts *k)
{
	put_attr(fp, "name", name);
	fprintf(fp, " tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" ", n,
	    k->failures, k->errors);
	if (k->skipped > 0)
		fprintf(fp, "skipped=\"%zu\" ", k->skipped);
	fprintf(fp, "time=\"%.3f\"", k->seconds);
}

/*
 * A case: its <error>, <failure> or <skipped>, then <system-out>, as the
 * schema orders.
 */
static void
put_case(FILE *fp, const char *suite_name, const struct junit_case *c)
{
	bool		 marked = c->failed || c->error || c->skipped;
	const char	*element = c->error ? "error" : c->failed ?
			    "failure" : "skipped";

	fputs("    <testcase", fp);
	put_attr(fp, "name", c->name);
	put_attr(fp, "classname", c->classname != NULL ? c->classname :
	    suite_name);
	if (c->file != NULL)
		put_attr(fp, "file", c->file);
	fprintf(fp, " time=\"%.3f\"", case_seconds(c));
	if (!marked && c->system_out == NULL) {
		fputs("/>\n", fp);
		return;
	}
	fputs(">\n", fp);
	if (marked) {
		fprintf(fp, "      <%s", element);
		put_attr(fp, "message", c->failure_message);
		if (c->failure_text == NULL || *c->failure_text == '\0')
			fputs("/>\n", fp);
		else {
			putc('>', fp);
			put_escaped(fp, c->failure_text, false);
			fprintf(fp, "</%s>\n", element);
		}
	}
	if (c->system_out != NULL) {
		fputs("      <system-out>", fp);
		put_escaped(fp, c->system_out, false);
		fputs("</system-out>\n", fp);
	}
	fputs("    </testcase>\n", fp);
}

void
junit_write_suite(FILE *fp, const char *suite_name, const char *timestamp,
    const char *hostname, const struct junit_case *cases, size_t n)
{
	struct junit_counts	 k;
	size_t			 i;

	count_cases(cases, n, &k);
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", fp);
	put_suite_attrs(fp, suite_name, n, &k);
	fputs(">\n  <testsuite", fp);
	put_suite_attrs(fp, suite_name, n, &k);
	put_attr(fp, "timestamp", timestamp);
	put_attr(fp, "hostname", hostname);
	fputs(">\n", fp);
	for (i = 0; i < n; i++)
		put_case(fp, suite_name, &cases[i]);
	fputs("  </testsuite>\n</testsuites>\n", fp);
}

/*
 * The schema's timestamp has no time zone; it is UTC here, as CI runners
 * in several zones then agree.
 */
void
junit_write(FILE *fp, const char *suite_name, const struct junit_case *cases,
    size_t n)
{
	char		 stamp[32], host[HOST_NAME_MAX + 1];
	time_t		 now = time(NULL);
	struct tm	 tm;

	if (gmtime_r(&now, &tm) == NULL ||
	    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
		stamp[0] = '\0';
	if (gethostname(host, sizeof host) != 0)
		host[0] = '\0';
	host[sizeof host - 1] = '\0';
	junit_write_suite(fp, suite_name, stamp, host, cases, n);
}

char *
junit_failure_text(const struct audit *a)
{
	char	*buf = NULL, *line;
	size_t	 len, i;
	FILE	*fp;

	if ((fp = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	for (i = 0; i < a->nfindings; i++) {
		line = report_finding_line(&a->findings[i]);
		fprintf(fp, "%s\n", line);
		free(line);
	}
	line = report_summary(a);
	fprintf(fp, "%s\n", line);
	free(line);
	if (fclose(fp) != 0)
		fatal("memory stream");
	return buf;
}

char *
junit_failure_message(const struct audit *a)
{
	const struct finding	*f;
	char			*buf = NULL;
	size_t			 len, i, k, shown = 0, failing;
	FILE			*fp;

	if (a->nfindings == audit_accepted_findings(a))
		return report_summary(a);
	if ((fp = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	for (i = 0; i < a->nfindings && shown < JUNIT_MESSAGE_FINDINGS;
	    i++) {
		f = &a->findings[i];
		if (f->accepted)
			continue;
		if (shown++ > 0)
			fputs("; ", fp);
		for (k = 0; k < f->nparams && k < JUNIT_MESSAGE_PARAMS; k++)
			fprintf(fp, "%s%s", k > 0 ? ", " : "", f->params[k]);
		if (f->nparams == 0 && f->param != NULL)
			fputs(f->param, fp);
		if (f->nparams > JUNIT_MESSAGE_PARAMS)
			fprintf(fp, " and %zu more", f->nparams -
			    JUNIT_MESSAGE_PARAMS);
		fprintf(fp, ": %s", finding_kind_name(f->kind));
		if (f->dim != NULL)
			fprintf(fp, " over %s", f->dim);
		if (f->effect.kind != EFFECT_NONE) {
			char effect[128];

			effect_format(&f->effect, effect, sizeof effect);
			fprintf(fp, " (%s)", effect);
		}
	}
	failing = a->nfindings - audit_accepted_findings(a);
	if (failing > shown)
		fprintf(fp, "; %zu more findings", failing - shown);
	if (fclose(fp) != 0)
		fatal("memory stream");
	return buf;
}

char *
junit_skipped_message(const struct audit *a)
{
	const struct finding	*f;
	char			*buf = NULL;
	size_t			 len, i, k;
	FILE			*fp;

	if ((fp = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	fputs("accepted by the baseline: ", fp);
	for (i = 0; i < a->nfindings; i++) {
		f = &a->findings[i];
		if (i > 0)
			fputs("; ", fp);
		for (k = 0; k < f->nparams && k < JUNIT_MESSAGE_PARAMS; k++)
			fprintf(fp, "%s%s", k > 0 ? ", " : "", f->params[k]);
		if (f->nparams == 0 && f->param != NULL)
			fputs(f->param, fp);
		if (f->nparams > JUNIT_MESSAGE_PARAMS)
			fprintf(fp, " and %zu more", f->nparams -
			    JUNIT_MESSAGE_PARAMS);
		fprintf(fp, ": %s: %s", finding_kind_name(f->kind),
		    f->reason != NULL ? f->reason : "");
	}
	if (fclose(fp) != 0)
		fatal("memory stream");
	return buf;
}
