/*
 * The subcommands: one file each (cmd-*.c), each exporting one descriptor;
 * gradaudit.c holds the table.
 */
#ifndef GRADAUDIT_COMMANDS_H
#define GRADAUDIT_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

struct options;

struct command {
	const char	*name;
	const char	*usage;		/* after "usage: gradaudit NAME " */
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
extern const struct command cmd_help_entry;

/* The table, NULL-terminated, in the order help lists them. */
extern const struct command *const commands[];

const struct command *command_find(const char *name);
void	 command_usage(FILE *, const struct command *);

#endif
