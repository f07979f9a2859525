/*
 * gradaudit check CONFIG...: the symbolic audit only.  No MPI, no launch:
 * milliseconds per config even on production meshes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "exitcode.h"
#include "output.h"
#include "symbolic.h"
#include "xmalloc.h"

static int
cmd_check_exec(struct options *o)
{
	struct config_list	 list;
	struct audited		*v;
	struct sym_context	 ctx;
	size_t			 i;
	int			 status;

	if (output_load_configs(o, &list) < 0)
		return EXIT_USAGE;
	v = xcalloc(list.n, sizeof *v);
	for (i = 0; i < list.n; i++) {
		double t0 = output_now();

		v[i].audit = xcalloc(1, sizeof *v[i].audit);
		v[i].label = list.v[i].name;
		sym_context_build(&ctx, &list.v[i]);
		sym_audit(&ctx, v[i].audit, NULL, NULL);
		/* The audit outlives the model: it points only at its arena. */
		sym_context_free(&ctx);
		v[i].seconds = output_now() - t0;
	}
	status = output_audits(o, v, list.n, output_as_array(&list),
	    "gradaudit.check");
	for (i = 0; i < list.n; i++) {
		audit_free(v[i].audit);
		free(v[i].audit);
	}
	free(v);
	config_list_free(&list);
	return status;
}

const struct command cmd_check_entry = {
	.name = "check",
	.usage = "[-qv] [--format text|json] [--junit FILE] [--set KEY=VALUE] "
	    "CONFIG ...",
	.summary = "symbolic audit only (no MPI): per-rank expressions and "
	    "findings",
	.scope = SCOPE_CHECK,
	.min_args = 1,
	.max_args = -1,
	.exec = cmd_check_exec
};
