/*
 * gradaudit: catch silent gradient-synchronization bugs in distributed
 * training configurations.  This file is only the dispatcher: it finds the
 * subcommand in the table and hands it the parsed options.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "exitcode.h"
#include "options.h"
#include "xmalloc.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.1.0"
#endif

const struct command *const commands[] = {
	&cmd_run_entry,
	&cmd_check_entry,
	&cmd_explain_entry,
	&cmd_sweep_entry,
	&cmd_frameworks_entry,
	&cmd_import_entry,
	&cmd_help_entry,
	NULL
};

const struct command *
command_find(const char *name)
{
	int	i;

	for (i = 0; commands[i] != NULL; i++)
		if (strcmp(commands[i]->name, name) == 0)
			return commands[i];
	return NULL;
}

void
command_usage(FILE *fp, const struct command *c)
{
	fprintf(fp, "usage: %s %s %s\n", progname, c->name, c->usage);
}

static int
check_output(int status)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: error writing to stdout\n", progname);
		return EXIT_RUNTIME;
	}
	return status;
}

int
main(int argc, char **argv)
{
	const struct command	*c;
	struct options		 o;
	int			 rc;

	if (argc < 2) {
		fprintf(stderr, "%s: no command given\n", progname);
		cmd_help_entry.exec(NULL);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		o.nargs = 0;
		return check_output(cmd_help_entry.exec(&o));
	}
	if (strcmp(argv[1], "--version") == 0) {
		if (argc > 2) {
			fprintf(stderr, "%s: --version takes no operand\n",
			    progname);
			return EXIT_USAGE;
		}
		printf("%s %s\n", progname, PACKAGE_VERSION);
		return check_output(EXIT_OK);
	}
	if ((c = command_find(argv[1])) == NULL) {
		fprintf(stderr, "%s: unknown command \"%s\"; try \"%s help\"\n",
		    progname, argv[1], progname);
		return EXIT_USAGE;
	}
	if (c->foreign_args)
		rc = options_parse_own(&o, c->name, c->scope, c->usage, argc,
		    argv);
	else
		rc = options_parse(&o, c->name, c->scope, c->usage, argc, argv);
	if (rc < 0)
		return EXIT_USAGE;
	if (rc > 0) {
		/* gradaudit CMD --help */
		command_usage(stdout, c);
		printf("%s\n", c->summary);
		if (c->scope != 0) {
			printf("\noptions:\n");
			options_print_help(stdout, c->scope);
		}
		return check_output(EXIT_OK);
	}
	if (o.nargs < c->min_args ||
	    (c->max_args >= 0 && o.nargs > c->max_args)) {
		fprintf(stderr, "%s: %s: %s\n", progname, c->name,
		    o.nargs < c->min_args ? "missing operand" :
		    "too many operands");
		command_usage(stderr, c);
		options_free(&o);
		return EXIT_USAGE;
	}
	rc = c->exec(&o);
	options_free(&o);
	return check_output(rc);
}
