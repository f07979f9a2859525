/*
 * The subcommands: one file each (cmd-*.c), each exporting one descriptor;
 * cmd.c holds the table and runs a command, so that main() only finds the
 * command and the library does not depend on the program.
 */
#ifndef GRADAUDIT_COMMANDS_H
#define GRADAUDIT_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

struct options;

struct command {
	const char	*name;
	const char	*operands;	/* after the options in the usage */
	const char	*summary;	/* one line for --help */
	unsigned	 scope;		/* SCOPE_* bit of options.h, 0: none */
	int		 min_args;
	int		 max_args;	/* -1: any number */
	/*
	 * Operands are another program's arguments, options included:
	 * parse only the command's own options (options_parse_own).
	 */
	bool		 foreign_args;
	int		(*exec)(struct options *);
};

extern const struct command cmd_run_entry;
extern const struct command cmd_check_entry;
extern const struct command cmd_explain_entry;
extern const struct command cmd_sweep_entry;
extern const struct command cmd_frameworks_entry;
extern const struct command cmd_import_entry;
extern const struct command cmd_compare_entry;
extern const struct command cmd_help_entry;

/* The table, NULL-terminated, in the order help lists them. */
extern const struct command *const commands[];

const struct command *command_find(const char *name);
/* Report an unknown command, and the nearest one; who: "" or "help: ". */
void	 command_unknown(const char *who, const char *name);
/* "usage: gradaudit NAME [-qv] ... OPERANDS", generated and folded. */
void	 command_usage(FILE *, const struct command *);
/* The usage, the summary and the options: `gradaudit help NAME`. */
void	 command_help(FILE *, const struct command *);
/*
 * Run command c on argv (argv[1] is its name): parse its options, check
 * its operands, execute it.  Returns its exit status.
 */
int	 command_exec(const struct command *, int argc, char **argv);
/*
 * The exit status once stdout is flushed: EXIT_RUNTIME, with a message,
 * when it cannot be written (STYLE item 4), else status.
 */
int	 command_flush(int status);

#endif
