/*
 * gradaudit: catch silent gradient-synchronization bugs in distributed
 * training configurations.  main() only finds the subcommand; the table
 * and everything a command goes through are in the library (cmd.c).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/exitcode.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/options.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.1.0"
#endif

int
main(int argc, char **argv)
{
	const struct command	*c;
	struct options		 o;

	/*
	 * A reader of stdout that goes away (`| head -c 10`) is a write error
	 * like a full disk: exit 3 with a message, not death by SIGPIPE with
	 * status 141 and no word (issue 8).  The MPI job gets the default
	 * disposition back (launch.c).
	 */
	signal(SIGPIPE, SIG_IGN);
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
		command_unknown("", argv[1]);
		return EXIT_USAGE;
	}
	return command_exec(c, argc, argv);
}
