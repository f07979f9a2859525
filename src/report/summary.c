/*
 * The Markdown summary of summary.h.  A cell holds any config name or
 * loader message, so every one goes through one escaping function: a `|`
 * would split the row, a newline end the table, and `<` start HTML.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L		/* open_memstream */
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "report/summary.h"
#include "symbolic/audit.h"

/* How many wrong parameters a cell names before "and N more". */
#define SUMMARY_PARAMS	5

static void
put_cell(FILE *fp, const char *s)
{
	putc(' ', fp);
	for (; *s != '\0'; s++)
		switch (*s) {
		case '|':
			fputs("\\|", fp);
			break;
		case '\\':
		case '`':
		case '*':
		case '_':
		case '[':
		case ']':
			putc('\\', fp);
			putc(*s, fp);
			break;
		case '<':
			fputs("&lt;", fp);
			break;
		case '>':
			fputs("&gt;", fp);
			break;
		case '&':
			fputs("&amp;", fp);
			break;
		case '\n':
		case '\r':
		case '\t':
			putc(' ', fp);
			break;
		default:
			if ((unsigned char)*s >= 0x20 && *s != 0x7f)
				putc(*s, fp);
			break;
		}
	putc(' ', fp);
	putc('|', fp);
}

static char *
wrong_params(const struct audit *a)
{
	char	*buf = NULL;
	size_t	 len, i, shown = 0;
	int	 nwrong = audit_wrong_params(a);
	FILE	*fp;

	/* Rows no update reaches (pytorch #176076): right gradients. */
	if (nwrong == 0 && a->nstale_rows > 0) {
		xasprintf(&buf, "rows of %s never updated",
		    a->stale_rows[0].param);
		return buf;
	}
	if (nwrong == 0)
		return xstrdup("-");
	if ((fp = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	for (i = 0; i < a->nparams && shown < SUMMARY_PARAMS; i++) {
		if (a->params[i].consistent && a->params[i].correct)
			continue;
		fprintf(fp, "%s%s", shown > 0 ? ", " : "", a->params[i].name);
		shown++;
	}
	if ((size_t)nwrong > shown)
		fprintf(fp, " and %zu more", (size_t)nwrong - shown);
	if (fclose(fp) != 0)
		fatal("memory stream");
	return buf;
}

/* "x1/8; norm^2 -50%": each finding's effect, at most SUMMARY_PARAMS. */
static char *
effect_cell(const struct audit *a)
{
	char	*buf = NULL, one[128];
	size_t	 len, i, shown = 0;
	FILE	*fp;

	if ((fp = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	for (i = 0; i < a->nfindings && shown < SUMMARY_PARAMS; i++) {
		if (a->findings[i].effect.kind == EFFECT_NONE)
			continue;
		effect_format(&a->findings[i].effect, one, sizeof one);
		fprintf(fp, "%s%s", shown++ > 0 ? "; " : "", one);
	}
	if (shown == 0)
		fputs("-", fp);
	if (fclose(fp) != 0)
		fatal("memory stream");
	return buf;
}

static char *
numeric_cell(const struct audit *a)
{
	char	*s;

	if (a->numeric_skipped != NULL)
		xasprintf(&s, "skipped (%s)", a->numeric_skipped);
	else if (a->numeric && a->shrunk)
		xasprintf(&s, "%s: %s (shrunk to world %lld)",
		    arith_name(a->arith),
		    audit_numeric_passes(a) ? "correct" : "wrong",
		    (long long)a->shrunk_world);
	else if (a->numeric)
		xasprintf(&s, "%s: %s", arith_name(a->arith),
		    audit_numeric_passes(a) ? "correct" : "wrong");
	else
		s = xstrdup("-");
	return s;
}

void
summary_row_of(struct summary_row *r, const char *name,
    const struct audit *a, const char *why_not)
{
	/* The row may be fresh from realloc: every field is set. */
	memset(r, 0, sizeof *r);
	r->name = xstrdup(name != NULL ? name : "");
	if (a == NULL) {
		r->verdict = xstrdup("error");
		r->wrong = xstrdup(why_not != NULL ? why_not : "not audited");
		r->numeric = xstrdup("-");
		r->effect = xstrdup("-");
		return;
	}
	r->verdict = xstrdup(audit_accepted(a) ? "accepted" :
	    audit_passes(a) ? "pass" : "wrong");
	r->wrong = wrong_params(a);
	r->numeric = numeric_cell(a);
	r->effect = effect_cell(a);
	r->accepted = audit_accepted_findings(a);
}

void
summary_rows_free(struct summary_row *rows, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		free(rows[i].name);
		free(rows[i].verdict);
		free(rows[i].wrong);
		free(rows[i].numeric);
		free(rows[i].effect);
	}
	free(rows);
}

void
summary_write(FILE *fp, const char *title, const struct summary_row *rows,
    size_t n)
{
	size_t	 i, pass = 0, accepted = 0, wrong = 0, error = 0;
	size_t	 findings = 0;
	bool	 passes;

	fprintf(fp, "### %s\n\n", title);
	fputs("| config | verdict | wrong parameters | effect | numeric |\n"
	    "|---|---|---|---|---|\n", fp);
	for (i = 0; i < n; i++) {
		passes = strcmp(rows[i].verdict, "pass") == 0 ||
		    strcmp(rows[i].verdict, "accepted") == 0;
		putc('|', fp);
		put_cell(fp, rows[i].name);
		/* The verdict is bold when the gate fails on it. */
		fprintf(fp, passes ? " %s |" : " **%s** |", rows[i].verdict);
		put_cell(fp, rows[i].wrong);
		put_cell(fp, rows[i].effect);
		put_cell(fp, rows[i].numeric);
		putc('\n', fp);
		if (strcmp(rows[i].verdict, "pass") == 0)
			pass++;
		else if (strcmp(rows[i].verdict, "accepted") == 0)
			accepted++;
		else if (strcmp(rows[i].verdict, "wrong") == 0)
			wrong++;
		else
			error++;
		findings += rows[i].accepted;
	}
	fprintf(fp, "\n%zu config%s: %zu pass, ", n, n == 1 ? "" : "s", pass);
	if (accepted > 0)
		fprintf(fp, "%zu accepted, ", accepted);
	fprintf(fp, "%zu wrong, %zu not audited", wrong, error);
	if (findings > 0)
		fprintf(fp, "; %zu finding%s accepted by the baseline",
		    findings, findings == 1 ? "" : "s");
	fputs("\n\n", fp);
}
