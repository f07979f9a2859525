/*
 * The command table and what every command goes through: its options, its
 * usage and help, its operand count, and the final flush of stdout.  It
 * lived beside main() in gradaudit.c, so the library's help command needed
 * the program's object and the library could not be linked alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitcode.h"
#include "base/suggest.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/options.h"
#include "config/framework.h"
#include "symbolic/context.h"

const struct command *const commands[] = {
	&cmd_run_entry,
	&cmd_check_entry,
	&cmd_explain_entry,
	&cmd_sweep_entry,
	&cmd_compare_entry,
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

/*
 * "unknown command", with the nearest command if one is close: "chek"
 * was answered with the bare list of commands (issue 10).
 */
void
command_unknown(const char *who, const char *name)
{
	struct suggestion	 s;
	char			 q[TEXT_QUOTE_SIZE];
	int			 i;

	suggest_init(&s, name, strlen(name));
	for (i = 0; commands[i] != NULL; i++)
		suggest_consider(&s, commands[i]->name);
	text_escape(q, sizeof q, name, strlen(name));
	fprintf(stderr, "%s: %sunknown command \"%s\"", progname, who, q);
	if (suggest_best(&s) != NULL)
		fprintf(stderr, " (did you mean \"%s\"?)", suggest_best(&s));
	fprintf(stderr, "; try \"%s help\"\n", progname);
}

void
command_usage(FILE *fp, const struct command *c)
{
	char	*lead;

	xasprintf(&lead, "usage: %s %s", progname, c->name);
	options_print_synopsis(fp, lead, c->scope, c->operands);
	free(lead);
}

void
command_help(FILE *fp, const struct command *c)
{
	command_usage(fp, c);
	fprintf(fp, "%s\n", c->summary);
	if (c->scope != 0) {
		fprintf(fp, "\noptions:\n");
		options_print_help(fp, c->scope);
	}
}

int
command_flush(int status)
{
	int	 flushed = fflush(stdout);

	if (flushed == 0 && !ferror(stdout))
		return status;
	/*
	 * A command that already failed at runtime has said why, and is not
	 * told twice.
	 */
	if (status == EXIT_RUNTIME)
		return status;
	if (flushed != 0)
		fprintf(stderr, "%s: error writing to stdout: %s\n", progname,
		    strerror(errno));
	else
		fprintf(stderr, "%s: error writing to stdout\n", progname);
	return EXIT_RUNTIME;
}

int
command_exec(const struct command *c, int argc, char **argv)
{
	struct options	 o;
	char		 why[SYM_WHY_SIZE];
	int		 rc;

	if (c->foreign_args)
		rc = options_parse_own(&o, c->name, c->scope, c->operands,
		    argc, argv);
	else
		rc = options_parse(&o, c->name, c->scope, c->operands, argc,
		    argv);
	if (rc < 0)
		return EXIT_USAGE;
	if (rc > 0) {
		/* gradaudit CMD --help */
		command_help(stdout, c);
		return command_flush(EXIT_OK);
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
	if ((c->scope & SCOPE_AUDITS) != 0 &&
	    sym_memory_limit_invalid(why, sizeof why) != NULL) {
		fprintf(stderr, "%s: %s\n", progname, why);
		options_free(&o);
		return EXIT_USAGE;
	}
	o.frameworks = fw_registry_open();
	rc = c->exec(&o);
	fw_registry_close(o.frameworks);
	options_free(&o);
	return command_flush(rc);
}
