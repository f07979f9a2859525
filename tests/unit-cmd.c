/*
 * TAP unit test of the command table (cmd.c), linked from libgradaudit.a
 * alone: the table lived in gradaudit.c beside main(), so the library's
 * help command needed the program's object and no test could link it.
 * Every command is found by its name, and its usage, generated from the
 * option table, ends in its operands, names every option of its scope
 * (--color too, which every hand-written usage lacked) and fits in 79
 * columns.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L		/* open_memstream */
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "cmd/options.h"
#include "tap.h"

/* What command_usage() prints for c, malloc'd. */
static char *
usage_of(const struct command *c)
{
	char	*buf = NULL;
	size_t	 len = 0;
	FILE	*fp;

	if ((fp = open_memstream(&buf, &len)) == NULL) {
		perror("open_memstream");
		exit(1);
	}
	command_usage(fp, c);
	fclose(fp);
	return buf;
}

static size_t
widest_line(const char *s)
{
	size_t	 n, most = 0;

	while (*s != '\0') {
		n = strcspn(s, "\n");
		if (n > most)
			most = n;
		s += n + (s[n] == '\n');
	}
	return most;
}

static void
test_table(void)
{
	int	 i, j;

	for (i = 0; commands[i] != NULL; i++) {
		tap_ok(command_find(commands[i]->name) == commands[i],
		    "command_find(\"%s\") finds it", commands[i]->name);
		for (j = 0; j < i; j++)
			if (strcmp(commands[i]->name, commands[j]->name) == 0)
				break;
		tap_ok(j == i, "%s is in the table once", commands[i]->name);
		tap_ok(commands[i]->max_args < 0 ||
		    commands[i]->max_args >= commands[i]->min_args,
		    "%s takes %d to %d operands", commands[i]->name,
		    commands[i]->min_args, commands[i]->max_args);
	}
	tap_ok(i == 8, "eight commands (%d)", i);
	tap_ok(command_find("frobnicate") == NULL, "no command frobnicate");
}

static void
test_usage(void)
{
	const struct command *c;
	char	*u, lead[64];
	size_t	 n;
	int	 i;

	for (i = 0; (c = commands[i]) != NULL; i++) {
		u = usage_of(c);
		snprintf(lead, sizeof lead, "usage: gradaudit %s ", c->name);
		tap_ok(strncmp(u, lead, strlen(lead)) == 0,
		    "%s: the usage starts \"%s\"", c->name, lead);
		/* The operands end the last line. */
		n = strlen(c->operands);
		tap_ok(strlen(u) > n + 1 && u[strlen(u) - n - 2] == ' ' &&
		    strncmp(u + strlen(u) - n - 1, c->operands, n) == 0 &&
		    u[strlen(u) - 1] == '\n',
		    "%s: the usage ends in %s", c->name, c->operands);
		tap_ok(widest_line(u) < 80, "%s: the usage fits in 79 "
		    "columns (widest %zu)", c->name, widest_line(u));
		if (c->scope & (SCOPE_RUN | SCOPE_CHECK | SCOPE_EXPLAIN |
		    SCOPE_SWEEP))
			/* explain writes no JSON Lines (f52b87b). */
			tap_ok(strstr(u, "[--color auto|always|never]") != NULL &&
			    strstr(u, c->scope & SCOPE_EXPLAIN ?
			    "[--format text|json]" :
			    "[--format text|json|jsonl]") != NULL &&
			    strstr(u, "[-qv]") != NULL,
			    "%s: the usage names -q, -v, --color and --format",
			    c->name);
		free(u);
	}
	u = usage_of(command_find("sweep"));
	/* The usage wraps: --world N may end a line. */
	tap_ok((strstr(u, " --world N ") != NULL ||
	    strstr(u, " --world N\n") != NULL) &&
	    strstr(u, "[--world") == NULL, "sweep: --world N is required");
	free(u);
	u = usage_of(command_find("import"));
	tap_ok(strstr(u, "[--world N]") != NULL, "import: --world N is optional");
	free(u);
}

int
main(void)
{
	test_table();
	test_usage();
	return tap_done();
}
