/*
 * gradaudit help [COMMAND]: the command list, or one command's usage and
 * options.  Without arguments (or from --help) it prints everything on
 * stdout; main() also calls it with NULL to print the list on stderr after
 * a usage error.
 */
#include <stdio.h>
#include <string.h>

#include "base/exitcode.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/options.h"

static void
print_overview(FILE *fp)
{
	char	lead[32];
	int	i;

	fprintf(fp, "usage: %s COMMAND [options] ...\n\n", progname);
	fprintf(fp, "Audit the gradient synchronization of distributed "
	    "training configurations.\n\ncommands:\n");
	for (i = 0; commands[i] != NULL; i++) {
		snprintf(lead, sizeof lead, "  %s", commands[i]->name);
		options_print_synopsis(fp, lead, commands[i]->scope,
		    commands[i]->operands);
		fprintf(fp, "      %s\n", commands[i]->summary);
	}
	fprintf(fp, "  --help | --version\n\noptions:\n");
	options_print_help(fp, 0);
	fprintf(fp, "\nexit status: 0 all correct, 1 a gradient is wrong, "
	    "2 usage or configuration\nerror, 3 runtime failure (MPI, "
	    "timeout, self-check).  See gradaudit(1).\n");
}

static int
cmd_help_exec(struct options *o)
{
	const struct command *c;

	if (o == NULL) {
		print_overview(stderr);
		return EXIT_USAGE;
	}
	if (o->nargs == 0) {
		print_overview(stdout);
		return EXIT_OK;
	}
	if ((c = command_find(o->args[0])) == NULL) {
		command_unknown("help: ", o->args[0]);
		return EXIT_USAGE;
	}
	command_help(stdout, c);
	return EXIT_OK;
}

const struct command cmd_help_entry = {
	.name = "help",
	.operands = "[COMMAND]",
	.summary = "show the commands, or one command's usage and options",
	.scope = 0,
	.min_args = 0,
	.max_args = 1,
	.exec = cmd_help_exec
};
