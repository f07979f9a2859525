/*
 * gradaudit compare TRACE_DIR --reference REF_DIR: one real training step,
 * recorded on every rank by python/gradaudit_trace.py, against the same
 * code run on one process (gradaudit-trace(5)).  Nothing is simulated:
 * the verdict is measured, and each rank's expression is inferred from
 * what it really held (compare.h).  The report is check's and run's.
 *
 * gradaudit compare TRACE_DIR CONFIG: the same step against what the
 * config's symbolic audit says each rank holds, so that a profile or a
 * hand-written config is checked against the real code.
 */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/exitcode.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/output.h"
#include "compare/compare.h"
#include "compare/trace.h"
#include "symbolic/context.h"
#include "symbolic/symbolic.h"

/* The config's symbolic audit, for compare_config; -1 after a message. */
static int
audit_config(struct options *o, struct config_list *list, struct audit *cfg)
{
	struct options		 one = *o;
	struct sym_context	 ctx;

	one.args = &o->args[1];
	one.nargs = 1;
	if (output_load_configs(&one, NULL, list) != 0)
		return -1;
	sym_context_build(&ctx, &list->v[0]);
	sym_audit(&ctx, cfg, NULL, NULL);
	sym_context_free(&ctx);
	return 0;
}

static int
cmd_compare_exec(struct options *o)
{
	struct trace		 t, ref;
	struct output_stream	 out;
	struct config_list	 list;
	struct audit		 a, cfg;
	struct audited		 v;
	char			 err[TRACE_ERROR_SIZE];
	double			 t0 = clock_seconds();
	int			 status;

	if ((o->reference == NULL) == (o->nargs == 1)) {
		fprintf(stderr, "%s: compare: give either --reference DIR, the "
		    "trace of the same step on one process, or a CONFIG "
		    "(gradaudit-trace(7))\n", progname);
		command_usage(stderr, command_find("compare"));
		return EXIT_USAGE;
	}
	/*
	 * --set and --framework change a configuration, and two traces
	 * have none: taken and dropped, even a key that does not exist, a
	 * CI job's --set looked applied and exited 0.
	 */
	if (o->reference != NULL && o->nsets > 0) {
		fprintf(stderr, "%s: compare: --set and --framework change a "
		    "CONFIG, and --reference compares two traces without one\n",
		    progname);
		command_usage(stderr, command_find("compare"));
		return EXIT_USAGE;
	}
	if (output_check_paths(o) != EXIT_OK ||
	    output_read_baseline(o, true) != EXIT_OK)
		return EXIT_USAGE;
	if (trace_open(&t, o->args[0], err, sizeof err) != 0) {
		fprintf(stderr, "%s: compare: %s\n", progname, err);
		output_junit_not_audited(o, "trace error, see stderr");
		return EXIT_USAGE;
	}
	if (o->nargs == 2) {
		if (audit_config(o, &list, &cfg) != 0) {
			trace_close(&t);
			return EXIT_USAGE;
		}
		status = compare_config(&t, &cfg, o->args[1], &a, err,
		    sizeof err);
		audit_free(&cfg);
		if (status != 0) {
			fprintf(stderr, "%s: compare: %s\n", progname, err);
			output_junit_not_audited(o, "trace error, see stderr");
			config_list_free(&list);
			trace_close(&t);
			return EXIT_USAGE;
		}
		config_list_free(&list);
	} else if (trace_open(&ref, o->reference, err, sizeof err) != 0) {
		fprintf(stderr, "%s: compare: %s\n", progname, err);
		output_junit_not_audited(o, "trace error, see stderr");
		trace_close(&t);
		return EXIT_USAGE;
	} else if (compare_traces(&t, &ref, &a, err, sizeof err) != 0) {
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
	v.seconds = clock_seconds() - t0;
	output_begin(&out, o, false, 1);
	output_add(&out, &v);
	status = output_end(&out, "gradaudit.compare");
	audit_free(&a);
	if (o->nargs == 1)
		trace_close(&ref);
	trace_close(&t);
	return status;
}

const struct command cmd_compare_entry = {
	.name = "compare",
	.operands = "TRACE_DIR [CONFIG]",
	.summary = "audit a traced training step against its one-process "
	    "reference",
	.scope = SCOPE_COMPARE,
	.min_args = 1,
	.max_args = 2,
	.exec = cmd_compare_exec
};
