/*
 * Command-line options shared by the subcommands (SPEC section 2).  One
 * table describes every option once: its spelling, its argument and which
 * commands accept it; --help and the parser both read it.
 */
#ifndef GRADAUDIT_OPTIONS_H
#define GRADAUDIT_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/config.h"
#include "symbolic/audit.h"

/*
 * FORMAT_JSONL: one summary object (report_json_summary) per config on a
 * line of its own, for scripts reading one config or many alike.
 */
enum output_format { FORMAT_TEXT, FORMAT_JSON, FORMAT_JSONL };
enum color_mode { COLOR_AUTO, COLOR_ALWAYS, COLOR_NEVER };

/* Which commands accept an option: bits of enum option_scope. */
#define SCOPE_RUN	0x01
#define SCOPE_CHECK	0x02
#define SCOPE_EXPLAIN	0x04
#define SCOPE_SWEEP	0x08
#define SCOPE_FRAMEWORKS 0x10
#define SCOPE_IMPORT	0x20
#define SCOPE_COMPARE	0x40
/* The commands that run a symbolic audit (GRADAUDIT_MAX_MEMORY). */
#define SCOPE_AUDITS	(SCOPE_RUN | SCOPE_CHECK | SCOPE_EXPLAIN | \
			    SCOPE_SWEEP | SCOPE_COMPARE)

/* sweep --keep, --fix, --min, --max: a bound on one mesh dimension. */
enum bound_kind { BOUND_KEEP, BOUND_FIX, BOUND_MIN, BOUND_MAX };

struct baseline;

struct sweep_bound {
	enum bound_kind	 kind;
	char		*item;		/* "tp" (--keep) or "tp=8" */
};

struct options {
	/*
	 * The framework profiles, which command_exec opens for the command
	 * and closes after it: the command's configs point into them
	 * (framework.h), and they are read only if one names a framework.
	 */
	struct fw_registry	*frameworks;
	enum output_format	 format;
	const char		*junit;		/* --junit FILE */
	const char		*summary;	/* --summary FILE, appended to */
	/*
	 * --baseline FILE, --strict-baseline, --write-baseline FILE; and the
	 * baseline read by output_read_baseline before anything is audited
	 * (with --write-baseline alone an empty one, for today's date),
	 * freed by options_free.
	 */
	const char		*baseline_file;
	bool			 strict_baseline;
	const char		*write_baseline;
	struct baseline		*baseline;
	struct cfg_override	*sets;		/* --set KEY=VALUE, in order */
	size_t			 nsets;
	enum arith		 arith;		/* --numerics */
	uint64_t		 seed;		/* --seed */
	int			 procs;		/* --procs, 0 = default */
	const char		*launcher;	/* --launcher */
	double			 timeout;	/* --timeout seconds */
	bool			 timeout_given;
	enum color_mode		 color;
	bool			 quiet, verbose;
	bool			 expand;	/* --expand: JSON cell per rank */
	bool			 force_expand;	/* past REPORT_EXPAND_MAX */
	const char		*param;		/* --param NAME: text */
	bool			 select_rank;	/* --rank N given: text */
	int			 rank;
	int			 world;		/* sweep, import --world */
	char			**vary;		/* sweep --vary, split on commas */
	int			 nvary;
	bool			 numeric;	/* sweep --numeric */
	bool			 force_sweep;	/* past SWEEP_MAX_WORK */
	bool			 shrink;	/* run --shrink (shrink.h) */
	bool			 plan;		/* explain --plan */
	struct sweep_bound	*bounds;	/* sweep, split on commas */
	int			 nbounds;
	const char		*framework;	/* import --framework */
	const char		*args_file;	/* import --args-file */
	const char		*script;	/* import --script */
	long			 eod_document_tokens; /* import; 0: default */
	const char		*reference;	/* compare --reference DIR */
	int			 numeric_max;	/* sweep: largest mesh run numerically */
	char			**args;		/* operands */
	int			 nargs;
	/*
	 * run: per operand, the copy to read in its place (jobdir.h), or
	 * NULL; the reports still name the operand.  NULL: none.
	 */
	char			**read_from;
	/* The original argument vector, for relaunching under MPI. */
	int			 argc;
	char			**argv;
};

/*
 * Parse argv[optind...] for the command `name` with scope bits `scope`,
 * whose operands are `operands` ("CONFIG ...").  On a usage error prints a
 * message and the command's usage to stderr and returns -1; returns 1 for
 * --help, 0 otherwise.
 */
int	 options_parse(struct options *, const char *name, unsigned scope,
	    const char *operands, int argc, char **argv);
/*
 * Print "LEAD [-qv] [--color auto|always|never] ... OPERANDS": the options
 * of `scope` from the option table, folded before an option or the
 * operands so that no line reaches column 80, continuation lines starting
 * under the first option.
 */
void	 options_print_synopsis(FILE *, const char *lead, unsigned scope,
	    const char *operands);
/*
 * options_parse for a command whose operands are another program's
 * arguments (foreign_args in commands.h): only the command's own options,
 * spelt exactly, are taken from argv, anywhere before a "--"; every other
 * word, whether or not it looks like an option, is an operand, in order.
 */
int	 options_parse_own(struct options *, const char *name, unsigned scope,
	    const char *operands, int argc, char **argv);
void	 options_free(struct options *);
/* Print the option list for --help (the options of `scope`, or all if 0). */
void	 options_print_help(FILE *, unsigned scope);
/* Colour decided: --color, NO_COLOR, and whether stdout is a terminal. */
bool	 options_use_color(const struct options *, FILE *);

#endif
