/*
 * gradaudit check CONFIG...: the symbolic audit only.  No MPI, no launch:
 * milliseconds per config even on production meshes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/exitcode.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/output.h"
#include "symbolic/fix.h"
#include "symbolic/symbolic.h"

/*
 * The batch as check writes it, for a symbolic audit that stops at
 * GRADAUDIT_MAX_MEMORY (run_check_memory) and does not return.
 */
struct check_batch {
	struct output_stream	*out;
	const struct batch	*b;
	size_t			 i;	/* the config being audited */
};

/*
 * Config i of the batch went past GRADAUDIT_MAX_MEMORY: it is an error
 * case like a config the size estimate refuses, and the configs after it
 * are not audited, said each (the run holds the memory it took and cannot
 * give it back).  The output written so far is ended as a whole: exiting
 * in the audit left a JSON array unclosed, the configs after it missing
 * from stdout and no JUnit or summary file.
 */
static void
check_over_limit(const char *why, void *arg)
{
	const struct check_batch *cb = arg;
	struct audited		 v;
	size_t			 i;
	int			 status;

	fprintf(stderr, "%s: %s\n", progname, why);
	batch_entry(cb->b, cb->i, &v);
	v.why_not = why;
	output_add(cb->out, &v);
	for (i = cb->i + 1; i < cb->b->n; i++) {
		batch_entry_unaudited(cb->b, i, &v, true);
		output_add(cb->out, &v);
	}
	status = output_end(cb->out, "gradaudit.check");
	exit(status > EXIT_USAGE ? status : EXIT_USAGE);
}

/*
 * Each config is audited, printed and freed in turn: only the configs,
 * a few hundred bytes each, are held for the whole list.  A config that
 * does not load is an error case of its own and the others are audited
 * (issue 10: one bad file stopped a CI gate's whole batch with exit 2).
 */
static int
cmd_check_exec(struct options *o)
{
	struct batch		 b;
	struct output_stream	 out;
	struct sym_context	 ctx;
	struct arena_cache	 blocks;	/* the audits', in turn */
	struct check_batch	 cb;
	struct audit		 a;
	struct audited		 v;
	size_t			 i;
	int			 status;

	if (output_check_paths(o) != EXIT_OK ||
	    output_read_baseline(o, true) != EXIT_OK)
		return EXIT_USAGE;
	output_load_batch(o, &b);
	arena_cache_init(&blocks);
	output_begin(&out, o, output_as_array(&b.list) || b.n > 1, b.n);
	cb.out = &out;
	cb.b = &b;
	for (i = 0; i < b.n; i++) {
		double t0 = clock_seconds();

		batch_entry(&b, i, &v);
		if (b.items[i].config < 0) {
			output_add(&out, &v);
			continue;
		}
		sym_context_build(&ctx, &b.list.v[b.items[i].config]);
		ctx.blocks = &blocks;
		cb.i = i;
		ctx.over_limit = check_over_limit;
		ctx.over_limit_arg = &cb;
		sym_audit(&ctx, &a, NULL, NULL);
		/* The audit outlives the model: it points only at its arena. */
		sym_context_free(&ctx);
		if (output_wants_fixes(o))
			fix_derive(&a);
		v.audit = &a;
		v.seconds = clock_seconds() - t0;
		output_add(&out, &v);
		audit_free(&a);
	}
	arena_cache_free(&blocks);
	status = output_end(&out, "gradaudit.check");
	batch_free(&b);
	return status;
}

const struct command cmd_check_entry = {
	.name = "check",
	.operands = "CONFIG ...",
	.summary = "symbolic audit only (no MPI): per-rank expressions and "
	    "findings",
	.scope = SCOPE_CHECK,
	.min_args = 1,
	.max_args = -1,
	.exec = cmd_check_exec
};
