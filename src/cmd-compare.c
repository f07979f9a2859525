/*
 * gradaudit compare TRACE_DIR --reference REF_DIR: one real training step,
 * recorded on every rank by python/gradaudit_trace.py, against the same
 * code run on one process (gradaudit-trace(5)).  Nothing is simulated:
 * the verdict is measured, and each rank's expression is inferred from
 * what it really held (compare.h).  The report is check's and run's.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "compare.h"
#include "exitcode.h"
#include "output.h"
#include "trace.h"
#include "xmalloc.h"

static int
cmd_compare_exec(struct options *o)
{
	struct trace		 t, ref;
	struct output_stream	 out;
	struct audit		 a;
	struct audited		 v;
	char			 err[TRACE_ERROR_SIZE];
	double			 t0 = output_now();
	int			 status;

	if (o->reference == NULL) {
		fprintf(stderr, "%s: compare: --reference DIR is required: "
		    "the trace of the same step on one process "
		    "(gradaudit-trace(5))\n", progname);
		command_usage(stderr, command_find("compare"));
		return EXIT_USAGE;
	}
	if (output_check_paths(o) != EXIT_OK)
		return EXIT_USAGE;
	if (trace_open(&t, o->args[0], err, sizeof err) != 0) {
		fprintf(stderr, "%s: compare: %s\n", progname, err);
		output_junit_not_audited(o, "trace error, see stderr");
		return EXIT_USAGE;
	}
	if (trace_open(&ref, o->reference, err, sizeof err) != 0) {
		fprintf(stderr, "%s: compare: %s\n", progname, err);
		output_junit_not_audited(o, "trace error, see stderr");
		trace_close(&t);
		return EXIT_USAGE;
	}
	if (compare_traces(&t, &ref, &a, err, sizeof err) != 0) {
		fprintf(stderr, "%s: compare: %s\n", progname, err);
		output_junit_not_audited(o, "trace error, see stderr");
		trace_close(&ref);
		trace_close(&t);
		return EXIT_USAGE;
	}
	memset(&v, 0, sizeof v);
	v.audit = &a;
	v.label = t.dir;
	v.file = t.dir;
	v.seconds = output_now() - t0;
	output_begin(&out, o, false, 1);
	output_add(&out, &v);
	status = output_end(&out, "gradaudit.compare");
	audit_free(&a);
	trace_close(&ref);
	trace_close(&t);
	return status;
}

const struct command cmd_compare_entry = {
	.name = "compare",
	.operands = "TRACE_DIR",
	.summary = "audit a traced training step against its one-process "
	    "reference",
	.scope = SCOPE_COMPARE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_compare_exec
};
