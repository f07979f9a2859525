/*
 * gradaudit help [COMMAND]: the command list, or one command's usage and
 * options.  Without arguments (or from --help) it prints everything on
 * stdout; main() also calls it with NULL to print the list on stderr after
 * a usage error.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "exitcode.h"
#include "options.h"
#include "xmalloc.h"

/*
 * Print "  NAME USAGE" folded before a bracket or operand so that no line
 * passes 79 columns; continuation lines are indented under the usage.
 */
static void
print_usage_folded(FILE *fp, const struct command *c)
{
	const char	*p = c->usage, *space;
	size_t		 col, indent = 4 + strlen(c->name);

	col = (size_t)fprintf(fp, "  %s", c->name);
	while (*p != '\0') {
		size_t word;

		int depth = 0;

		/* A word runs to the next space outside brackets. */
		for (space = p; *space != '\0'; space++) {
			if (*space == '[')
				depth++;
			else if (*space == ']')
				depth--;
			else if (*space == ' ' && depth == 0)
				break;
		}
		word = (size_t)(space - p);
		if (col + 1 + word > 79 && col > indent) {
			fprintf(fp, "\n%*s", (int)indent - 1, "");
			col = indent - 1;
		}
		col += (size_t)fprintf(fp, " %.*s", (int)word, p);
		p = *space == ' ' ? space + 1 : space;
	}
	fputc('\n', fp);
}

static void
print_overview(FILE *fp)
{
	int	i;

	fprintf(fp, "usage: %s COMMAND [options] ...\n\n", progname);
	fprintf(fp, "Audit the gradient synchronization of distributed "
	    "training configurations.\n\ncommands:\n");
	for (i = 0; commands[i] != NULL; i++) {
		print_usage_folded(fp, commands[i]);
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
		fprintf(stderr, "%s: help: unknown command \"%s\"\n", progname,
		    o->args[0]);
		return EXIT_USAGE;
	}
	command_usage(stdout, c);
	printf("%s\n", c->summary);
	if (c->scope != 0) {
		printf("\noptions:\n");
		options_print_help(stdout, c->scope);
	}
	return EXIT_OK;
}

const struct command cmd_help_entry = {
	.name = "help",
	.usage = "[COMMAND]",
	.summary = "show the commands, or one command's usage and options",
	.scope = 0,
	.min_args = 0,
	.max_args = 1,
	.exec = cmd_help_exec
};
