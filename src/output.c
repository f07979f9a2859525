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
	size_t		 k;
	int		 i;

	memset(list, 0, sizeof *list);
	for (i = 0; i < o->nargs; i++)
		if (cfg_load(o->args[i], o->sets, o->nsets, list) < 0)
			goto fail;
	for (k = 0; k < list->n; k++)
		if ((why = sym_too_big(&list->v[k])) != NULL) {
			fprintf(stderr, "%s: %s: %s: %s\n", progname,
			    list->v[k].file, list->v[k].name, why);
			goto fail;
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

void
output_junit_write(FILE *fp, const struct audited *v, size_t n,
    const char *suite)
{
	struct junit_case *cases = xcalloc(n + 1, sizeof *cases);
	char	**texts = xcalloc(n + 1, sizeof *texts);
	size_t	 i;

	for (i = 0; i < n; i++) {
		const struct audit *a = v[i].audit;

		cases[i].name = v[i].label;
		cases[i].seconds = v[i].seconds;
		if (a == NULL) {
			cases[i].error = true;
			cases[i].failure_message = v[i].why_not ? v[i].why_not :
			    "not audited";
			continue;
		}
		if (a->consistent && a->correct)
			continue;
		cases[i].failed = true;
		texts[i] = junit_failure_text(a);
		cases[i].failure_message = a->nfindings > 0 ?
		    a->findings[0].message : "gradients differ from the reference";
		cases[i].failure_text = texts[i];
	}
	junit_write(fp, suite, cases, n);
	for (i = 0; i < n; i++)
		free(texts[i]);
	free(texts);
	free(cases);
}

/*
 * Write a JUnit file: the report of the audits, or (audits NULL) bytes
 * already rendered by the MPI job.  EXIT_OK or EXIT_RUNTIME.
 */
static int
write_junit_file(const char *path, const struct audited *v, size_t n,
    const char *suite, const char *bytes, size_t len)
{
	FILE	*fp;

	if ((fp = fopen(path, "w")) == NULL) {
		fprintf(stderr, "%s: %s: cannot write JUnit report: %s\n",
		    progname, path, strerror(errno));
		return EXIT_RUNTIME;
	}
	if (v != NULL)
		output_junit_write(fp, v, n, suite);
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
	return write_junit_file(path, v, n, suite, NULL, 0);
}

int
output_junit_bytes(const char *path, const char *xml, size_t len)
{
	return write_junit_file(path, NULL, 0, NULL, xml, len);
}

int
output_audits(const struct options *o, const struct audited *v, size_t n,
    bool array, const char *suite)
{
	struct report_options ro;
	struct json	 js;
	size_t		 i;
	int		 status = EXIT_OK;

	ro.verbose = o->verbose;
	ro.quiet = o->quiet;
	ro.color = options_use_color(o, stdout);
	ro.name_summary = n > 1;
	if (o->format == FORMAT_JSON) {
		json_init(&js, stdout, false);
		if (array)
			json_begin_array(&js);
		for (i = 0; i < n; i++)
			if (v[i].audit != NULL)
				report_json(&js, v[i].audit);
		if (array)
			json_end_array(&js);
	} else
		for (i = 0; i < n; i++) {
			if (v[i].audit == NULL)
				continue;
			if (i > 0 && !o->quiet)
				fputc('\n', stdout);
			report_text(stdout, v[i].audit, &ro);
		}
	for (i = 0; i < n; i++)
		if (v[i].audit != NULL &&
		    !(v[i].audit->consistent && v[i].audit->correct))
			status = EXIT_WRONG;
	if (o->junit != NULL && output_junit(o->junit, v, n, suite) != EXIT_OK)
		status = EXIT_RUNTIME;
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: error writing the report to stdout\n",
		    progname);
		status = EXIT_RUNTIME;
	}
	return status;
}
