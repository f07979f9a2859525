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
	for (i = 0; i < b.n; i++) {
		double t0 = clock_seconds();

		batch_entry(&b, i, &v);
		if (b.items[i].config < 0) {
			output_add(&out, &v);
			continue;
		}
		sym_context_build(&ctx, &b.list.v[b.items[i].config]);
		ctx.blocks = &blocks;
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
