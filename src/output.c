/*
 * Loading configs and printing reports for the commands that audit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exitcode.h"
#include "json.h"
#include "junit.h"
#include "output.h"
#include "report.h"
#include "symbolic.h"
#include "xmalloc.h"

/*
 * Nothing was audited: with --junit, every operand becomes an error case,
 * so that CI never reads an old report, or none, as a pass.
 */
void
output_junit_not_audited(const struct options *o, const char *why)
{
	struct audited	*v;
	int		 i;

	if (o->junit == NULL)
		return;
	v = xcalloc((size_t)o->nargs + 1, sizeof *v);
	for (i = 0; i < o->nargs; i++) {
		v[i].label = o->args[i];
		v[i].why_not = why;
	}
	output_junit(o->junit, v, (size_t)o->nargs, "gradaudit");
	free(v);
}

int
output_load_configs(const struct options *o, struct config_list *list)
{
	const char	*why;
	enum cfg_key	 blame;
	size_t		 k;
	int		 i;

	memset(list, 0, sizeof *list);
	for (i = 0; i < o->nargs; i++)
		if (cfg_load(o->args[i], o->sets, o->nsets, list) < 0)
			goto fail;
	for (k = 0; k < list->n; k++) {
		if ((why = sym_unauditable(&list->v[k], &blame)) != NULL) {
			cfg_error(&list->v[k], blame, "%s", why);
			goto fail;
		}
	}
	return 0;
fail:
	config_list_free(list);
	output_junit_not_audited(o, "configuration error, see stderr");
	return -1;
}

bool
output_as_array(const struct config_list *list)
{
	size_t	i;

	for (i = 0; i < list->n; i++)
		if (list->v[i].in_list)
			return true;
	return list->n > 1;
}

double
output_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The JUnit test case of one entry, with copies of its strings: a stream
 * keeps the case after the audit is freed.
 */
static void
case_of(const struct audited *v, struct junit_case *c)
{
	const struct audit	*a = v->audit;

	memset(c, 0, sizeof *c);
	c->name = xstrdup(v->label);
	c->seconds = v->seconds;
	if (a == NULL) {
		c->error = true;
		c->failure_message = xstrdup(v->why_not ? v->why_not :
		    "not audited");
		return;
	}
	if (a->consistent && a->correct)
		return;
	c->failed = true;
	c->failure_text = junit_failure_text(a);
	c->failure_message = xstrdup(a->nfindings > 0 ?
	    a->findings[0].message : "gradients differ from the reference");
}

static void
cases_free(struct junit_case *cases, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		free((char *)cases[i].name);
		free((char *)cases[i].failure_message);
		free((char *)cases[i].failure_text);
	}
	free(cases);
}

void
output_junit_write(FILE *fp, const struct audited *v, size_t n,
    const char *suite)
{
	struct junit_case *cases = xcalloc(n + 1, sizeof *cases);
	size_t	 i;

	for (i = 0; i < n; i++)
		case_of(&v[i], &cases[i]);
	junit_write(fp, suite, cases, n);
	cases_free(cases, n);
}

/*
 * Write a JUnit file: the given test cases, or (cases NULL) bytes already
 * rendered by the MPI job.  EXIT_OK or EXIT_RUNTIME.
 */
static int
write_junit_file(const char *path, const struct junit_case *cases, size_t n,
    const char *suite, const char *bytes, size_t len)
{
	FILE	*fp;

	if ((fp = fopen(path, "w")) == NULL) {
		fprintf(stderr, "%s: %s: cannot write JUnit report: %s\n",
		    progname, path, strerror(errno));
		return EXIT_RUNTIME;
	}
	if (cases != NULL)
		junit_write(fp, suite, cases, n);
	else
		fwrite(bytes, 1, len, fp);
	if (ferror(fp) | (fclose(fp) != 0)) {
		fprintf(stderr, "%s: %s: write error\n", progname, path);
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

int
output_junit(const char *path, const struct audited *v, size_t n,
    const char *suite)
{
	struct junit_case *cases = xcalloc(n + 1, sizeof *cases);
	size_t	 i;
	int	 status;

	for (i = 0; i < n; i++)
		case_of(&v[i], &cases[i]);
	status = write_junit_file(path, cases, n, suite, NULL, 0);
	cases_free(cases, n);
	return status;
}

int
output_junit_bytes(const char *path, const char *xml, size_t len)
{
	return write_junit_file(path, NULL, 0, NULL, xml, len);
}

void
output_begin(struct output_stream *s, const struct options *o, bool array,
    size_t n)
{
	memset(s, 0, sizeof *s);
	s->options = o;
	s->array = array;
	s->status = EXIT_OK;
	s->report.verbose = o->verbose;
	s->report.quiet = o->quiet;
	s->report.color = options_use_color(o, stdout);
	s->report.name_summary = n > 1;
	s->report.expand = o->expand;
	s->report.param = o->param;
	s->report.select_rank = o->select_rank;
	s->report.rank = o->rank;
	if (o->format == FORMAT_JSON) {
		json_init(&s->json, stdout, false);
		if (array)
			json_begin_array(&s->json);
	}
}

void
output_add(struct output_stream *s, const struct audited *v)
{
	const struct options	*o = s->options;
	const struct audit	*a = v->audit;

	if (a != NULL && o->format == FORMAT_JSON)
		report_json(&s->json, a, &s->report);
	else if (a != NULL && o->format == FORMAT_JSONL) {
		/* A line per config: the same shape for one config or many. */
		json_init(&s->json, stdout, true);
		report_json_summary(&s->json, a);
	}
	else if (a != NULL) {
		if (s->count > 0 && !o->quiet)
			fputc('\n', stdout);
		report_text(stdout, a, &s->report);
	}
	s->count++;
	if (a != NULL && !(a->consistent && a->correct))
		s->status = EXIT_WRONG;
	if (o->junit == NULL)
		return;
	if (s->ncases == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->cases = xreallocarray(s->cases, s->cap, sizeof *s->cases);
	}
	case_of(v, &s->cases[s->ncases++]);
}

int
output_end(struct output_stream *s, const char *suite)
{
	const struct options	*o = s->options;
	int			 status = s->status;

	if (o->format == FORMAT_JSON && s->array)
		json_end_array(&s->json);
	if (o->junit != NULL && write_junit_file(o->junit, s->cases,
	    s->ncases, suite, NULL, 0) != EXIT_OK)
		status = EXIT_RUNTIME;
	cases_free(s->cases, s->ncases);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: error writing the report to stdout\n",
		    progname);
		status = EXIT_RUNTIME;
	}
	memset(s, 0, sizeof *s);
	return status;
}

int
output_audits(const struct options *o, const struct audited *v, size_t n,
    bool array, const char *suite)
{
	struct output_stream	 s;
	size_t			 i;

	output_begin(&s, o, array, n);
	for (i = 0; i < n; i++)
		output_add(&s, &v[i]);
	return output_end(&s, suite);
}
