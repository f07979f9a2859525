/*
 * gradaudit check CONFIG...: the symbolic audit only.  No MPI, no launch:
 * milliseconds per config even on production meshes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "exitcode.h"
#include "output.h"
#include "symbolic.h"
#include "xmalloc.h"

/*
 * Each config is audited, printed and freed in turn: only the configs,
 * a few hundred bytes each, are held for the whole list (they are all
 * loaded first, so that a bad one exits 2 before anything is printed).
 */
static int
cmd_check_exec(struct options *o)
{
	struct config_list	 list;
	struct output_stream	 out;
	struct sym_context	 ctx;
	struct audit		 a;
	struct audited		 v;
	size_t			 i;

	if (output_load_configs(o, &list) < 0)
		return EXIT_USAGE;
	output_begin(&out, o, output_as_array(&list), list.n);
	for (i = 0; i < list.n; i++) {
		double t0 = output_now();

		sym_context_build(&ctx, &list.v[i]);
		sym_audit(&ctx, &a, NULL, NULL);
		/* The audit outlives the model: it points only at its arena. */
		sym_context_free(&ctx);
		memset(&v, 0, sizeof v);
		v.audit = &a;
		v.label = list.v[i].name;
		v.seconds = output_now() - t0;
		output_add(&out, &v);
		audit_free(&a);
	}
	config_list_free(&list);
	return output_end(&out, "gradaudit.check");
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
