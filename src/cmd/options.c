/*
 * Option parsing for every subcommand, driven by one table so that the
 * parser, --help and the man page test all see the same list.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/suggest.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/options.h"
#include "report/baseline.h"

enum option_id {
	OPT_FORMAT = 256, OPT_JUNIT, OPT_SET, OPT_NUMERICS, OPT_SEED,
	OPT_PROCS, OPT_LAUNCHER, OPT_TIMEOUT, OPT_COLOR, OPT_WORLD, OPT_VARY,
	OPT_NUMERIC, OPT_NUMERIC_MAX, OPT_FRAMEWORK, OPT_ARGS_FILE, OPT_EXPAND,
	OPT_FORCE_EXPAND, OPT_FORCE_SWEEP,
	OPT_PARAM, OPT_RANK, OPT_SUMMARY, OPT_REFERENCE, OPT_KEEP, OPT_FIX,
	OPT_MIN, OPT_MAX, OPT_BASELINE, OPT_STRICT_BASELINE,
	OPT_WRITE_BASELINE, OPT_EOD_DOCUMENT_TOKENS, OPT_SCRIPT, OPT_SHRINK,
	OPT_PLAN,
	OPT_QUIET = 'q', OPT_VERBOSE = 'v',
	OPT_HELP = 'h'
};

#define SCOPE_ALL (SCOPE_RUN | SCOPE_CHECK | SCOPE_EXPLAIN | SCOPE_SWEEP)

struct option_spec {
	const char	*name;
	int		 id;
	const char	*arg;		/* NULL: no argument */
	unsigned	 scope;
	unsigned	 required;	/* SCOPE_* bits of the commands needing it */
	const char	*help;
};

static const struct option_spec specs[] = {
	{ "format", OPT_FORMAT, "text|json|jsonl",
	  SCOPE_ALL | SCOPE_FRAMEWORKS | SCOPE_COMPARE,
	  0, "output format on stdout (default text)" },
	{ "junit", OPT_JUNIT, "FILE",
	  SCOPE_RUN | SCOPE_CHECK | SCOPE_SWEEP | SCOPE_COMPARE,
	  false, "also write JUnit XML, a testcase per config" },
	{ "summary", OPT_SUMMARY, "FILE",
	  SCOPE_RUN | SCOPE_CHECK | SCOPE_COMPARE, 0,
	  "append a Markdown table (a CI job summary)" },
	{ "baseline", OPT_BASELINE, "FILE",
	  SCOPE_RUN | SCOPE_CHECK | SCOPE_SWEEP | SCOPE_COMPARE, 0,
	  "accept the findings FILE lists, with their reasons" },
	{ "strict-baseline", OPT_STRICT_BASELINE, NULL,
	  SCOPE_RUN | SCOPE_CHECK | SCOPE_SWEEP | SCOPE_COMPARE, 0,
	  "exit 1 when a baseline entry matches nothing" },
	{ "write-baseline", OPT_WRITE_BASELINE, "FILE",
	  SCOPE_RUN | SCOPE_CHECK | SCOPE_SWEEP | SCOPE_COMPARE, 0,
	  "write the findings as a baseline to start from" },
	{ "set", OPT_SET, "KEY=VALUE", SCOPE_ALL | SCOPE_COMPARE, 0,
	  "override a config key by dotted path; repeatable" },
	{ "numerics", OPT_NUMERICS, "exact|float64|float32",
	  SCOPE_RUN | SCOPE_SWEEP, 0, "numeric arithmetic (default exact)" },
	{ "seed", OPT_SEED, "N", SCOPE_RUN | SCOPE_SWEEP, 0,
	  "seed for weights and inputs (default 1)" },
	{ "procs", OPT_PROCS, "N", SCOPE_RUN | SCOPE_SWEEP, 0,
	  "MPI processes (default one per core)" },
	{ "launcher", OPT_LAUNCHER, "CMD", SCOPE_RUN | SCOPE_SWEEP, 0,
	  "MPI launcher ($GRADAUDIT_MPIEXEC, else mpiexec)" },
	{ "timeout", OPT_TIMEOUT, "SECONDS", SCOPE_RUN | SCOPE_SWEEP |
	  SCOPE_IMPORT, 0,
	  "give up a numeric audit (120) or a --script (30)" },
	{ "world", OPT_WORLD, "N", SCOPE_SWEEP | SCOPE_IMPORT, SCOPE_SWEEP,
	  "sweep: every mesh of N ranks; import: world size" },
	{ "framework", OPT_FRAMEWORK, "NAME@VERSION",
	  SCOPE_ALL | SCOPE_IMPORT | SCOPE_COMPARE,
	  0, "the framework: key (--set framework=NAME@VERSION)" },
	{ "reference", OPT_REFERENCE, "DIR", SCOPE_COMPARE, 0,
	  "the one-process reference trace of the same step" },
	{ "args-file", OPT_ARGS_FILE, "FILE", SCOPE_IMPORT, 0,
	  "import: read the arguments from FILE (- for stdin)" },
	{ "script", OPT_SCRIPT, "FILE", SCOPE_IMPORT, 0,
	  "import: run this launch script, launchers replaced" },
	{ "eod-document-tokens", OPT_EOD_DOCUMENT_TOKENS, "N", SCOPE_IMPORT, 0,
	  "import: document length, for eod-mask-loss (513)" },
	{ "vary", OPT_VARY, "FLAG,...", SCOPE_SWEEP, 0,
	  "sweep: try both values of these flags" },
	{ "keep", OPT_KEEP, "DIM,...", SCOPE_SWEEP, 0,
	  "sweep: keep the config's size of these dimensions" },
	{ "fix", OPT_FIX, "DIM=N,...", SCOPE_SWEEP, 0,
	  "sweep: only meshes where DIM is N" },
	{ "min", OPT_MIN, "DIM=N,...", SCOPE_SWEEP, 0,
	  "sweep: only meshes where DIM is at least N" },
	{ "max", OPT_MAX, "DIM=N,...", SCOPE_SWEEP, 0,
	  "sweep: only meshes where DIM is at most N" },
	{ "numeric", OPT_NUMERIC, NULL, SCOPE_SWEEP, 0,
	  "sweep: also audit small meshes on MPI" },
	{ "force-sweep", OPT_FORCE_SWEEP, NULL, SCOPE_SWEEP, 0,
	  "sweep: audit every mesh past its size bound" },
	{ "shrink", OPT_SHRINK, NULL, SCOPE_RUN, 0,
	  "numeric audit on a smaller config, same verdict" },
	{ "numeric-max", OPT_NUMERIC_MAX, "N", SCOPE_SWEEP, 0,
	  "sweep: largest numeric world (default 16)" },
	{ "plan", OPT_PLAN, NULL, SCOPE_EXPLAIN, 0,
	  "print the sync plan as steps, the preset expanded" },
	{ "expand", OPT_EXPAND, NULL,
	  SCOPE_RUN | SCOPE_CHECK | SCOPE_SWEEP | SCOPE_COMPARE, 0,
	  "JSON: a cell per rank, terms atom by atom" },
	{ "force-expand", OPT_FORCE_EXPAND, NULL,
	  SCOPE_RUN | SCOPE_CHECK | SCOPE_SWEEP | SCOPE_COMPARE, 0,
	  "JSON: --expand past its size bound" },
	{ "param", OPT_PARAM, "NAME",
	  SCOPE_RUN | SCOPE_CHECK | SCOPE_COMPARE, 0,
	  "text: show this parameter only, with its table" },
	{ "rank", OPT_RANK, "N",
	  SCOPE_RUN | SCOPE_CHECK | SCOPE_COMPARE, 0,
	  "text: show only where rank N is wrong" },
	{ "color", OPT_COLOR, "auto|always|never",
	  SCOPE_ALL | SCOPE_COMPARE, 0,
	  "colour (default auto: only on a terminal)" },
	{ "quiet", OPT_QUIET, NULL, SCOPE_ALL | SCOPE_COMPARE, 0,
	  "print only the summary line of each config" },
	{ "verbose", OPT_VERBOSE, NULL,
	  SCOPE_ALL | SCOPE_FRAMEWORKS | SCOPE_COMPARE, 0,
	  "also list the consistent parameters" },
	{ "help", OPT_HELP, NULL,
	  SCOPE_ALL | SCOPE_FRAMEWORKS | SCOPE_IMPORT | SCOPE_COMPARE, 0,
	  "show this help and exit" },
};

#define NSPECS (sizeof specs / sizeof specs[0])

/* Lines of the help end before this column. */
#define HELP_COLUMNS	80

/*
 * Append the override key=value, the key the first klen bytes of key; the
 * key and value share one allocation, freed with the key.
 */
static void
add_set_len(struct options *o, const char *key, size_t klen,
    const char *value)
{
	char	*s;

	xasprintf(&s, "%.*s=%s", (int)klen, key, value);
	s[klen] = '\0';
	o->sets = xreallocarray(o->sets, o->nsets + 1, sizeof *o->sets);
	o->sets[o->nsets].key = s;
	o->sets[o->nsets].value = s + klen + 1;
	o->nsets++;
}

static void
add_set(struct options *o, const char *key, const char *value)
{
	add_set_len(o, key, strlen(key), value);
}

/*
 * The synopsis, built from the table: the short flags in one bracket, the
 * long options by name, the required ones last.  The usage strings were
 * written by hand per command, and none had --color (issue 8).
 */
struct synopsis_entry {
	const struct option_spec	*spec;
	bool				 required;	/* by this command */
};

static int
synopsis_order(const void *a, const void *b)
{
	const struct synopsis_entry *x = a, *y = b;

	if (x->required != y->required)
		return x->required ? 1 : -1;
	return strcmp(x->spec->name, y->spec->name);
}

/* Print " item", first on a new line under `indent` if it would not fit. */
static void
synopsis_item(FILE *fp, const char *item, size_t *col, size_t indent)
{
	size_t	 w = strlen(item);

	if (*col + 1 + w >= HELP_COLUMNS && *col > indent) {
		fprintf(fp, "\n%*s", (int)indent, "");
		*col = indent;
	}
	fprintf(fp, " %s", item);
	*col += 1 + w;
}

/*
 * The values an option takes under the commands of scope: jsonl is of
 * the audits alone, and explain's and frameworks' usage offered it.
 */
static const char *
spec_arg(const struct option_spec *sp, unsigned scope)
{
	if (sp->id == OPT_FORMAT && (scope & (SCOPE_RUN | SCOPE_CHECK |
	    SCOPE_SWEEP | SCOPE_COMPARE)) == 0)
		return "text|json";
	return sp->arg;
}

void
options_print_synopsis(FILE *fp, const char *lead, unsigned scope,
    const char *operands)
{
	struct synopsis_entry v[NSPECS];
	char		 flags[NSPECS + 4] = "[-", item[96];
	size_t		 i, n = 0, nflags = 2, col = strlen(lead);

	fputs(lead, fp);
	for (i = 0; i < NSPECS; i++) {
		if ((specs[i].scope & scope) == 0 || specs[i].id == OPT_HELP)
			continue;
		if (specs[i].id < 256 && specs[i].arg == NULL)
			flags[nflags++] = (char)specs[i].id;
		else {
			v[n].spec = &specs[i];
			v[n++].required = (specs[i].required & scope) != 0;
		}
	}
	if (nflags > 2) {
		flags[nflags++] = ']';
		flags[nflags] = '\0';
		synopsis_item(fp, flags, &col, strlen(lead));
	}
	qsort(v, n, sizeof v[0], synopsis_order);
	for (i = 0; i < n; i++) {
		snprintf(item, sizeof item, "%s--%s%s%s%s",
		    v[i].required ? "" : "[", v[i].spec->name,
		    v[i].spec->arg ? " " : "", v[i].spec->arg ?
		    spec_arg(v[i].spec, scope) : "", v[i].required ? "" : "]");
		synopsis_item(fp, item, &col, strlen(lead));
	}
	if (operands != NULL && *operands != '\0')
		synopsis_item(fp, operands, &col, strlen(lead));
	fputc('\n', fp);
}

static void usage_error(const char *, unsigned, const char *, const char *,
    ...) __attribute__((format(printf, 4, 5)));

static void
usage_error(const char *name, unsigned scope, const char *operands,
    const char *fmt, ...)
{
	va_list	 ap;
	char	*lead;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	xasprintf(&lead, "usage: %s %s", progname, name);
	options_print_synopsis(stderr, lead, scope, operands);
	free(lead);
}

/*
 * What to add to "unknown option --NAME" (bad is the argument as given,
 * "--NAME" or "--NAME=VALUE"): the commands that have the option, as
 * `check --world` belongs to sweep, or the nearest option of this
 * command, as --formt is --format.  Empty when neither.
 */
static void
unknown_option_hint(char *buf, size_t size, const char *bad, unsigned scope)
{
	struct suggestion	 s;
	const char		*name = strncmp(bad, "--", 2) == 0 ? bad + 2 :
				    bad;
	size_t			 len = strcspn(name, "="), i, n;
	int			 c;
	bool			 first = true;

	buf[0] = '\0';
	for (i = 0; i < NSPECS; i++) {
		if (strlen(specs[i].name) != len ||
		    strncmp(specs[i].name, name, len) != 0)
			continue;
		n = (size_t)snprintf(buf, size, " (an option of ");
		for (c = 0; commands[c] != NULL && n < size; c++) {
			if ((commands[c]->scope & specs[i].scope) == 0)
				continue;
			n += (size_t)snprintf(buf + n, size - n, "%s%s",
			    first ? "" : " and ", commands[c]->name);
			first = false;
		}
		if (n < size)
			snprintf(buf + n, size - n, ")");
		return;
	}
	suggest_init(&s, name, len);
	for (i = 0; i < NSPECS; i++)
		if (specs[i].scope & scope)
			suggest_consider(&s, specs[i].name);
	if (suggest_best(&s) != NULL)
		snprintf(buf, size, " (did you mean --%s?)", suggest_best(&s));
}

static int
parse_int(const char *s, long min, long max, long *out)
{
	char	*end;
	long	 v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int
split_vary(struct options *o, const char *arg)
{
	char	*copy = xstrdup(arg), *tok, *save = NULL;

	for (tok = strtok_r(copy, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		o->vary = xreallocarray(o->vary, o->nvary + 1, sizeof *o->vary);
		o->vary[o->nvary++] = xstrdup(tok);
	}
	free(copy);
	return o->nvary > 0 ? 0 : -1;
}

/* --keep pp,tp or --max tp=8,ep=4: one bound per item. */
static int
split_bounds(struct options *o, enum bound_kind kind, const char *arg)
{
	char	*copy = xstrdup(arg), *tok, *save = NULL;
	int	 n = 0;

	for (tok = strtok_r(copy, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save), n++) {
		o->bounds = xreallocarray(o->bounds, o->nbounds + 1,
		    sizeof *o->bounds);
		o->bounds[o->nbounds].kind = kind;
		o->bounds[o->nbounds++].item = xstrdup(tok);
	}
	free(copy);
	return n > 0 ? 0 : -1;
}

/* Apply one parsed option; returns -1 (after a message) when invalid. */
static int
apply(struct options *o, const struct option_spec *sp, const char *arg,
    const char *cmd, unsigned scope, const char *operands)
{
	long	 v;
	char	*end, q[TEXT_QUOTE_SIZE];

	switch (sp->id) {
	case OPT_FORMAT:
		if (strcmp(arg, "text") == 0)
			o->format = FORMAT_TEXT;
		else if (strcmp(arg, "json") == 0)
			o->format = FORMAT_JSON;
		else if (strcmp(arg, "jsonl") == 0 &&
		    (scope & (SCOPE_RUN | SCOPE_CHECK | SCOPE_SWEEP |
		    SCOPE_COMPARE)) != 0)
			o->format = FORMAT_JSONL;
		else
			goto bad;
		break;
	case OPT_JUNIT:
		o->junit = arg;
		break;
	case OPT_SUMMARY:
		o->summary = arg;
		break;
	case OPT_BASELINE:
		if (*arg == '\0')
			goto bad;
		o->baseline_file = arg;
		break;
	case OPT_STRICT_BASELINE:
		o->strict_baseline = true;
		break;
	case OPT_WRITE_BASELINE:
		if (*arg == '\0')
			goto bad;
		o->write_baseline = arg;
		break;
	case OPT_SET: {
		const char *eq = strchr(arg, '=');

		if (eq == NULL || eq == arg) {
			text_cut(q, sizeof q, arg, strlen(arg));
			usage_error(cmd, scope, operands,
			    "--set %s: expected KEY=VALUE", q);
			return -1;
		}
		add_set_len(o, arg, (size_t)(eq - arg), eq + 1);
		break;
	}
	case OPT_NUMERICS:
		if (strcmp(arg, "exact") == 0)
			o->arith = ARITH_EXACT;
		else if (strcmp(arg, "float64") == 0)
			o->arith = ARITH_FLOAT64;
		else if (strcmp(arg, "float32") == 0)
			o->arith = ARITH_FLOAT32;
		else
			goto bad;
		break;
	case OPT_SEED:
		/*
		 * strtoull() skips blanks and negates after a sign: " -1"
		 * was taken as 18446744073709551615.
		 */
		errno = 0;
		if (!isdigit((unsigned char)*arg))
			goto bad;
		o->seed = strtoull(arg, &end, 10);
		if (*end != '\0' || errno != 0)
			goto bad;
		break;
	case OPT_PROCS:
		if (parse_int(arg, 1, 4096, &v) < 0)
			goto bad;
		o->procs = (int)v;
		break;
	case OPT_LAUNCHER:
		if (*arg == '\0')
			goto bad;
		o->launcher = arg;
		break;
	case OPT_TIMEOUT:
		errno = 0;
		o->timeout = strtod(arg, &end);
		if (*arg == '\0' || *end != '\0' || errno != 0 ||
		    !(o->timeout > 0) || o->timeout > 1e6)
			goto bad;
		o->timeout_given = true;
		break;
	case OPT_WORLD:
		if (parse_int(arg, 1, CFG_MAX_WORLD, &v) < 0)
			goto bad;
		o->world = (int)v;
		break;
	case OPT_VARY:
		if (split_vary(o, arg) < 0)
			goto bad;
		break;
	case OPT_NUMERIC:
		o->numeric = true;
		break;
	case OPT_FORCE_SWEEP:
		o->force_sweep = true;
		break;
	case OPT_SHRINK:
		o->shrink = true;
		break;
	case OPT_EXPAND:
		o->expand = true;
		break;
	case OPT_PLAN:
		o->plan = true;
		break;
	case OPT_FORCE_EXPAND:
		o->expand = o->force_expand = true;
		break;
	case OPT_PARAM:
		if (*arg == '\0')
			goto bad;
		o->param = arg;
		break;
	case OPT_RANK:
		if (parse_int(arg, 0, INT_MAX, &v) < 0)
			goto bad;
		o->rank = (int)v;
		o->select_rank = true;
		break;
	case OPT_KEEP:
	case OPT_FIX:
	case OPT_MIN:
	case OPT_MAX:
		if (split_bounds(o, sp->id == OPT_KEEP ? BOUND_KEEP :
		    sp->id == OPT_FIX ? BOUND_FIX : sp->id == OPT_MIN ?
		    BOUND_MIN : BOUND_MAX, arg) < 0)
			goto bad;
		break;
	case OPT_FRAMEWORK:
		if (*arg == '\0')
			goto bad;
		o->framework = arg;
		/*
		 * Issue 23: users reach for --framework first; on an audit it
		 * is --set framework=ARG, in its place among the --set.
		 */
		if (scope != SCOPE_IMPORT)
			add_set(o, "framework", arg);
		break;
	case OPT_ARGS_FILE:
		if (*arg == '\0')
			goto bad;
		o->args_file = arg;
		break;
	case OPT_SCRIPT:
		if (*arg == '\0')
			goto bad;
		o->script = arg;
		break;
	case OPT_EOD_DOCUMENT_TOKENS:
		/* cfg_token_mask's range: a document ends in its one token. */
		if (parse_int(arg, 2, 999999999, &v) < 0)
			goto bad;
		o->eod_document_tokens = v;
		break;
	case OPT_REFERENCE:
		if (*arg == '\0')
			goto bad;
		o->reference = arg;
		break;
	case OPT_NUMERIC_MAX:
		if (parse_int(arg, 1, 4096, &v) < 0)
			goto bad;
		o->numeric_max = (int)v;
		break;
	case OPT_COLOR:
		if (strcmp(arg, "auto") == 0)
			o->color = COLOR_AUTO;
		else if (strcmp(arg, "always") == 0)
			o->color = COLOR_ALWAYS;
		else if (strcmp(arg, "never") == 0)
			o->color = COLOR_NEVER;
		else
			goto bad;
		break;
	case OPT_QUIET:
		o->quiet = true;
		break;
	case OPT_VERBOSE:
		o->verbose = true;
		break;
	}
	return 0;
bad:
	text_escape(q, sizeof q, arg, strlen(arg));
	usage_error(cmd, scope, operands,
	    "--%s: invalid value \"%s\": expected %s", sp->name, q,
	    spec_arg(sp, scope));
	return -1;
}

/*
 * A configuration "-" is the standard input (config.c), which can be read
 * once: not twice, and not by run or sweep --numeric, whose MPI jobs read
 * every configuration file again.
 */
static int
check_stdin(const struct options *o, const char *cmd, unsigned scope,
    const char *operands)
{
	int	 i, n = 0, nconfigs;

	if ((scope & (SCOPE_RUN | SCOPE_CHECK | SCOPE_EXPLAIN |
	    SCOPE_SWEEP)) == 0)
		return 0;
	/* explain's second operand is a parameter name. */
	nconfigs = scope == SCOPE_EXPLAIN && o->nargs > 1 ? 1 : o->nargs;
	for (i = 0; i < nconfigs; i++)
		n += strcmp(o->args[i], "-") == 0;
	if (n == 0)
		return 0;
	if (n > 1) {
		usage_error(cmd, scope, operands, "the standard input (-) can "
		    "be read only once");
		return -1;
	}
	/* run copies it for its MPI job (cmd-run.c); sweep's runs do not. */
	if (scope == SCOPE_SWEEP && o->numeric) {
		usage_error(cmd, scope, operands, "sweep --numeric: the "
		    "standard input (-) cannot be read again by the MPI job: "
		    "save the configuration to a file");
		return -1;
	}
	return 0;
}

static void
options_init(struct options *o, int argc, char **argv)
{
	memset(o, 0, sizeof *o);
	o->seed = 1;
	o->timeout = 120;
	o->numeric_max = 16;
	o->argc = argc;
	o->argv = argv;
}

int
options_parse(struct options *o, const char *name, unsigned scope,
    const char *operands, int argc, char **argv)
{
	struct option	 longopts[NSPECS + 1];
	char		 shortopts[16] = "";
	size_t		 i, n = 0;
	int		 c, idx;

	options_init(o, argc, argv);
	for (i = 0; i < NSPECS; i++) {
		if ((specs[i].scope & scope) == 0)
			continue;
		longopts[n].name = specs[i].name;
		longopts[n].has_arg = specs[i].arg ? required_argument :
		    no_argument;
		longopts[n].flag = NULL;
		longopts[n].val = specs[i].id;
		if (specs[i].id < 256) {
			size_t len = strlen(shortopts);

			shortopts[len] = (char)specs[i].id;
			shortopts[len + 1] = '\0';
		}
		n++;
	}
	memset(&longopts[n], 0, sizeof longopts[n]);

	opterr = 0;
	optind = 2;	/* argv[0] is the program, argv[1] the command */
	while ((c = getopt_long(argc, argv, shortopts, longopts, &idx)) != -1) {
		const struct option_spec *sp = NULL;

		if (c == '?' || c == ':') {
			const char *bad = argv[optind - 1];
			char q[TEXT_QUOTE_SIZE];

			if (optopt != 0 && optopt < 256 &&
			    !(bad[0] == '-' && bad[1] == '-')) {
				char s[3] = { '-', (char)optopt, '\0' };

				usage_error(name, scope, operands,
				    "unknown option %s", s);
			} else if (optopt != 0) {
				text_cut(q, sizeof q, bad, strlen(bad));
				usage_error(name, scope, operands,
				    "option %s needs a value", q);
			} else {
				char hint[128];

				text_cut(q, sizeof q, bad, strlen(bad));
				unknown_option_hint(hint, sizeof hint, bad,
				    scope);
				usage_error(name, scope, operands,
				    "unknown option %s%s", q, hint);
			}
			options_free(o);
			return -1;
		}
		if (c == OPT_HELP) {
			options_free(o);
			return 1;
		}
		for (i = 0; i < NSPECS; i++)
			if (specs[i].id == c)
				sp = &specs[i];
		if (apply(o, sp, optarg, name, scope, operands) < 0) {
			options_free(o);
			return -1;
		}
	}
	o->args = argv + optind;
	o->nargs = argc - optind;
	if (check_stdin(o, name, scope, operands) < 0) {
		options_free(o);
		return -1;
	}
	if (o->strict_baseline && o->baseline_file == NULL) {
		usage_error(name, scope, operands, "--strict-baseline needs "
		    "--baseline FILE");
		options_free(o);
		return -1;
	}
	return 0;
}

/* The option of scope that word spells ("--world", "--world=8", "-h"). */
static const struct option_spec *
own_option(const char *word, unsigned scope, const char **value)
{
	size_t		 i, len;
	const char	*name, *eq;

	*value = NULL;
	for (i = 0; i < NSPECS; i++) {
		if ((specs[i].scope & scope) == 0)
			continue;
		if (word[0] == '-' && word[1] == specs[i].id && word[2] == '\0')
			return &specs[i];
		if (strncmp(word, "--", 2) != 0)
			continue;
		name = word + 2;
		eq = strchr(name, '=');
		len = eq != NULL ? (size_t)(eq - name) : strlen(name);
		if (strlen(specs[i].name) != len ||
		    strncmp(specs[i].name, name, len) != 0)
			continue;
		if (eq != NULL)
			*value = eq + 1;
		return &specs[i];
	}
	return NULL;
}

int
options_parse_own(struct options *o, const char *name, unsigned scope,
    const char *operands, int argc, char **argv)
{
	const struct option_spec	*sp;
	const char			*value;
	int				 i, n = 0;
	bool				 rest = false;

	options_init(o, argc, argv);
	for (i = 2; i < argc; i++) {
		if (!rest && strcmp(argv[i], "--") == 0) {
			rest = true;
			continue;
		}
		if (rest || (sp = own_option(argv[i], scope, &value)) == NULL) {
			/* Operands move down over the options taken out. */
			argv[2 + n++] = argv[i];
			continue;
		}
		if (sp->id == OPT_HELP && value == NULL) {
			options_free(o);
			return 1;
		}
		if (sp->arg == NULL) {
			usage_error(name, scope, operands, "option --%s takes "
			    "no value", sp->name);
			options_free(o);
			return -1;
		}
		if (value == NULL) {
			if (i + 1 == argc) {
				usage_error(name, scope, operands, "option %s "
				    "needs a value", argv[i]);
				options_free(o);
				return -1;
			}
			value = argv[++i];
		}
		if (apply(o, sp, value, name, scope, operands) < 0) {
			options_free(o);
			return -1;
		}
	}
	o->args = argv + 2;
	o->nargs = n;
	return 0;
}

void
options_free(struct options *o)
{
	size_t	i;
	int	k;

	for (i = 0; i < o->nsets; i++)
		free((char *)o->sets[i].key);
	free(o->sets);
	for (k = 0; k < o->nvary; k++)
		free(o->vary[k]);
	free(o->vary);
	for (k = 0; k < o->nbounds; k++)
		free(o->bounds[k].item);
	free(o->bounds);
	if (o->baseline != NULL) {
		baseline_free(o->baseline);
		free(o->baseline);
		o->baseline = NULL;
	}
	o->bounds = NULL;
	o->nbounds = 0;
	o->sets = NULL;
	o->nsets = 0;
	o->vary = NULL;
	o->nvary = 0;
}

void
options_print_help(FILE *fp, unsigned scope)
{
	size_t	i;
	char	left[64];

	for (i = 0; i < NSPECS; i++) {
		if (scope != 0 && (specs[i].scope & scope) == 0)
			continue;
		if (specs[i].id < 256)
			snprintf(left, sizeof left, "-%c, --%s%s%s",
			    specs[i].id, specs[i].name, specs[i].arg ? " " : "",
			    specs[i].arg ? specs[i].arg : "");
		else
			snprintf(left, sizeof left, "    --%s%s%s",
			    specs[i].name, specs[i].arg ? " " : "",
			    specs[i].arg ? specs[i].arg : "");
		/* A long option name gets its text on the next line. */
		if (strlen(left) > 26)
			fprintf(fp, "  %s\n  %-26s %s\n", left, "", specs[i].help);
		else
			fprintf(fp, "  %-26s %s\n", left, specs[i].help);
	}
}

bool
options_use_color(const struct options *o, FILE *fp)
{
	const char *nc;

	switch (o->color) {
	case COLOR_ALWAYS:
		return true;
	case COLOR_NEVER:
		return false;
	case COLOR_AUTO:
		break;
	}
	nc = getenv("NO_COLOR");
	if (nc != NULL && *nc != '\0')
		return false;
	/*
	 * In the MPI job run starts, stdout is a pipe to run, which says
	 * whether its own stdout is a terminal.
	 */
	if (fp == stdout && getenv("GRADAUDIT_WORKER") != NULL &&
	    (nc = getenv("GRADAUDIT_COLOR")) != NULL)
		return strcmp(nc, "always") == 0;
	return isatty(fileno(fp));
}
