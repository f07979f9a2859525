/*
 * gradaudit: catch silent gradient-synchronization bugs in distributed
 * training configurations.  main() only finds the subcommand; the table
 * and everything a command goes through are in the library (cmd.c).
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "exitcode.h"
#include "options.h"
#include "text.h"
#include "xmalloc.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.1.0"
#endif

int
main(int argc, char **argv)
{
	const struct command	*c;
	struct options		 o;
	char			 q[TEXT_QUOTE_SIZE];

	if (argc < 2) {
		fprintf(stderr, "%s: no command given\n", progname);
		cmd_help_entry.exec(NULL);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		memset(&o, 0, sizeof o);
		return command_flush(cmd_help_entry.exec(&o));
	}
	if (strcmp(argv[1], "--version") == 0) {
		if (argc > 2) {
			fprintf(stderr, "%s: --version takes no operand\n",
			    progname);
			return EXIT_USAGE;
		}
		printf("%s %s\n", progname, PACKAGE_VERSION);
		return command_flush(EXIT_OK);
	}
	if ((c = command_find(argv[1])) == NULL) {
		text_escape(q, sizeof q, argv[1], strlen(argv[1]));
		fprintf(stderr, "%s: unknown command \"%s\"; try \"%s help\"\n",
		    progname, q, progname);
		return EXIT_USAGE;
	}
	return command_exec(c, argc, argv);
}
