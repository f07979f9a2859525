/*
 * Unit tests for the JUnit XML writer (TAP): the exact document for three
 * cases, one failed, with every character XML must escape or cannot hold;
 * well-formedness checked by xmllint when it is installed; and the failure
 * text of an audit.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L		/* open_memstream, mkstemp */
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/arena.h"
#include "model/mesh.h"
#include "report/junit.h"
#include "symbolic/audit.h"
#include "tap.h"

static const struct junit_case cases[] = {
	{ .name = "megatron-844-fixed", .classname = "gradaudit.run",
	    .seconds = 0.25 },
	{ .name = "megatron-844 <dp=2 & pp=2>", .classname = "gradaudit.run",
	    .seconds = 1.5, .failed = true,
	    .failure_message = "1 of 1 parameters wrong: \"it's\" <&>",
	    .failure_text = "wrong-order: a < b && c > d \"q\" 'a'\x01\n"
	    "1 of 1 parameters wrong\n" },
	{ .name = "tab\there\x02, bell\x07, caf\xc3\xa9, bad \xff",
	    .seconds = 0.0004 },
};
#define NCASES	(sizeof(cases) / sizeof(cases[0]))

static const char golden[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<testsuites name=\"gradaudit &amp; co\" tests=\"3\" failures=\"1\" "
    "errors=\"0\" time=\"1.750\">\n"
    "  <testsuite name=\"gradaudit &amp; co\" tests=\"3\" failures=\"1\" "
    "errors=\"0\" time=\"1.750\" timestamp=\"2026-11-24T01:00:00\" "
    "hostname=\"ci &lt;1&gt;\">\n"
    "    <testcase name=\"megatron-844-fixed\" classname=\"gradaudit.run\" "
    "time=\"0.250\"/>\n"
    "    <testcase name=\"megatron-844 &lt;dp=2 &amp; pp=2&gt;\" "
    "classname=\"gradaudit.run\" time=\"1.500\">\n"
    "      <failure message=\"1 of 1 parameters wrong: &quot;it&apos;s&quot; "
    "&lt;&amp;&gt;\">wrong-order: a &lt; b &amp;&amp; c &gt; d "
    "&quot;q&quot; &apos;a&apos;\n"
    "1 of 1 parameters wrong\n</failure>\n"
    "    </testcase>\n"
    "    <testcase name=\"tab&#9;here, bell, caf\xc3\xa9, bad \xef\xbf\xbd\" "
    "classname=\"gradaudit &amp; co\" time=\"0.000\"/>\n"
    "  </testsuite>\n"
    "</testsuites>\n";

static char *
render(const struct junit_case *c, size_t n)
{
	char	*buf = NULL;
	size_t	 len;
	FILE	*fp = open_memstream(&buf, &len);

	junit_write_suite(fp, "gradaudit & co", "2026-11-24T01:00:00", "ci <1>",
	    c, n);
	fclose(fp);
	return buf;
}

/* 1: well-formed, 0: not, -1: no xmllint to ask. */
static int
xmllint_accepts(const char *xml)
{
	char	 path[] = "/tmp/unit-junit-XXXXXX", cmd[128];
	FILE	*fp;
	int	 fd, status;

	if (system("command -v xmllint >/dev/null 2>&1") != 0)
		return -1;
	if ((fd = mkstemp(path)) == -1 || (fp = fdopen(fd, "w")) == NULL)
		return 0;
	fputs(xml, fp);
	fclose(fp);
	snprintf(cmd, sizeof(cmd), "xmllint --noout %s", path);
	status = system(cmd);
	unlink(path);
	return status == 0;
}

static void
test_document(void)
{
	struct junit_case	 err[2];
	char			*xml;
	int			 lint;

	xml = render(cases, NCASES);
	tap_ok_str_eq(xml, golden, "document matches, escaped");
	lint = xmllint_accepts(xml);
	if (lint < 0)
		tap_skip("no xmllint", "xmllint accepts the document");
	else
		tap_ok(lint, "xmllint accepts the document");
	free(xml);

	/* An error wins over a failure and is counted as an error. */
	memcpy(err, cases, sizeof(err));
	err[0].error = true;
	err[0].failure_message = "mpiexec not found";
	xml = render(err, 2);
	tap_ok(strstr(xml, "tests=\"2\" failures=\"1\" errors=\"1\"") != NULL,
	    "errors and failures counted apart");
	tap_ok(strstr(xml, "<error message=\"mpiexec not found\"/>\n") != NULL,
	    "an error without text is an empty element");
	if (lint >= 0)
		tap_ok(xmllint_accepts(xml), "xmllint accepts errors");
	else
		tap_skip("no xmllint", "xmllint accepts errors");
	free(xml);

	xml = render(NULL, 0);
	tap_ok(strstr(xml, "tests=\"0\" failures=\"0\" errors=\"0\" "
	    "time=\"0.000\" timestamp=\"2026-11-24T01:00:00\" "
	    "hostname=\"ci &lt;1&gt;\">\n  </testsuite>") != NULL, "no cases");
	free(xml);

	/*
	 * A case's file, and its <system-out> after its <failure>, as the
	 * schema orders them (issue 10).
	 */
	memcpy(err, cases, sizeof(err));
	err[1].file = "testdata/a&b.yaml";
	err[1].system_out = "numeric: skipped (needs 9 values per rank, "
	    "limit 8)";
	xml = render(err, 2);
	tap_ok(strstr(xml, "classname=\"gradaudit.run\" "
	    "file=\"testdata/a&amp;b.yaml\" time=\"1.500\">") != NULL,
	    "a case names its file");
	tap_ok(strstr(xml, "</failure>\n      <system-out>numeric: skipped "
	    "(needs 9 values per rank, limit 8)</system-out>\n    "
	    "</testcase>") != NULL, "system-out follows the failure");
	if (lint >= 0)
		tap_ok(xmllint_accepts(xml), "xmllint accepts system-out");
	else
		tap_skip("no xmllint", "xmllint accepts system-out");
	free(xml);

	/*
	 * A case the baseline accepts is skipped, with the reasons as the
	 * message, and counted as such; a failure wins over it.
	 */
	memcpy(err, cases, sizeof(err));
	err[0].skipped = true;
	err[0].failure_message = "accepted by the baseline: a: wrong-scale: "
	    "on purpose";
	err[0].failure_text = "accepted: wrong-scale: a: on purpose\n";
	err[1].skipped = true;
	xml = render(err, 2);
	tap_ok(strstr(xml, "tests=\"2\" failures=\"1\" errors=\"0\" "
	    "skipped=\"1\" time=") != NULL,
	    "skipped cases counted apart from the failures");
	tap_ok(strstr(xml, "      <skipped message=\"accepted by the baseline: "
	    "a: wrong-scale: on purpose\">accepted: wrong-scale: a: on "
	    "purpose\n</skipped>\n") != NULL,
	    "a skipped case, with its reason");
	tap_ok(strstr(xml, "<failure message=\"1 of 1") != NULL,
	    "a failure wins over skipped");
	if (lint >= 0)
		tap_ok(xmllint_accepts(xml), "xmllint accepts skipped cases");
	else
		tap_skip("no xmllint", "xmllint accepts skipped cases");
	free(xml);

	/* A time stamp and host name of now: the pattern of the schema. */
	{
		char	*buf = NULL, *ts;
		size_t	 len;
		FILE	*fp = open_memstream(&buf, &len);

		junit_write(fp, "s", NULL, 0);
		fclose(fp);
		ts = strstr(buf, "timestamp=\"");
		tap_ok(ts != NULL && strlen(ts) > 30 && ts[15] == '-' &&
		    ts[18] == '-' && ts[21] == 'T' && ts[24] == ':' &&
		    ts[27] == ':' && ts[30] == '"', "junit_write stamps the time");
		tap_ok(strstr(buf, "hostname=\"") != NULL,
		    "and the host");
		free(buf);
	}
}

static void
test_failure_text(void)
{
	static const char	*params[] = { "layers.0.moe.router.weight",
				    "layers.1.moe.router.weight" };
	static int		 ranks[] = { 0, 1, 2, 3 };
	struct audit		 a;
	struct finding		*f;
	struct param_result	*p;
	char			*text;

	memset(&a, 0, sizeof(a));
	arena_init(&a.arena);
	mesh_init(&a.mesh, 1, 1, 1, 4, 1, 1);
	p = a.params = arena_alloc(&a.arena, 2 * sizeof(*p));
	a.nparams = 2;
	p[0].name = params[0];
	p[1].name = params[1];
	p[1].consistent = p[1].correct = true;
	f = a.findings = arena_alloc(&a.arena, sizeof(*f));
	a.nfindings = 1;
	f->kind = FINDING_MISSING_REDUCTION;
	f->param = params[0];
	f->params = params;
	f->nparams = 2;
	f->ranks = ranks;
	f->nranks = 4;
	f->op = "router weight gradient";
	f->dim = "tp";
	f->message = "Partial over tp but declared Replicate.";
	f->fix = "set sync.router_grad: auto";
	text = junit_failure_message(&a);
	tap_ok_str_eq(text, "layers.0.moe.router.weight, "
	    "layers.1.moe.router.weight: missing-reduction over tp",
	    "failure message: the parameters, the kind and the dimension");
	free(text);
	text = junit_failure_text(&a);
	tap_ok_str_eq(text, "missing-reduction: layers.0.moe.router.weight, "
	    "layers.1.moe.router.weight (ranks 0-3): Partial over tp but "
	    "declared Replicate. [op: router weight gradient, dim: tp] "
	    "Fix: set sync.router_grad: auto\n"
	    "1 of 2 parameters wrong on 0 of 4 ranks\n",
	    "failure text: one line per finding, then the summary");
	free(text);

	/*
	 * Accepted by a baseline: the gate passes when the finding names
	 * every wrong parameter, the failure message has nothing left to
	 * name, and the skipped message gives the reason.
	 */
	a.consistent = a.correct = false;
	a.baselined = true;
	f->accepted = true;
	f->reason = "the router is replicated on purpose";
	f->baseline_at = "accepted.yaml:2:3";
	tap_ok(audit_accepted(&a) && audit_passes(&a) && !audit_correct(&a),
	    "an accepted finding that names the wrong parameter passes");
	text = junit_skipped_message(&a);
	tap_ok_str_eq(text, "accepted by the baseline: "
	    "layers.0.moe.router.weight, layers.1.moe.router.weight: "
	    "missing-reduction: the router is replicated on purpose",
	    "skipped message: the parameters, the kind and the reason");
	free(text);
	text = junit_failure_text(&a);
	tap_ok_str_eq(text, "accepted: missing-reduction: "
	    "layers.0.moe.router.weight, layers.1.moe.router.weight (ranks "
	    "0-3): the router is replicated on purpose (accepted.yaml:2:3)\n"
	    "1 of 2 parameters wrong on 0 of 4 ranks; its finding accepted "
	    "by the baseline\n", "failure text: the accepted finding");
	free(text);
	f->params = &params[1];
	f->nparams = 1;
	tap_ok(!audit_passes(&a), "a wrong parameter no finding names fails");
	f->params = params;
	f->nparams = 2;
	f->accepted = false;
	tap_ok(!audit_passes(&a), "an expired entry does not accept");
	audit_free(&a);
}

int
main(void)
{
	test_document();
	test_failure_text();
	return tap_done();
}
