/*
 * gradaudit import megatron [--framework NAME@VERSION] [--world N]
 * [--args-file FILE] ARG...: a training framework's own launch arguments,
 * printed as the gradaudit configuration that audits them.  The command's
 * operands are the framework's arguments, options included, so main()
 * parses only import's own options (options_parse_own); megatron.c knows
 * what each of Megatron's means.  With --script FILE the operands are the
 * script's, and the arguments are those the script would launch training
 * with (capture.h).
 */
#include <sys/wait.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exitcode.h"
#include "base/shellwords.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/options.h"
#include "config/constraints.h"
#include "config/framework.h"
#include "config/load.h"
#include "import/megatron.h"
#include "import/toml.h"
#include "import/torchtitan-args.h"
#include "import/torchtitan-registry.h"
#include "import/torchtitan.h"
#include "launch/capture.h"
#include "launch/launch.h"

/*
 * How long a launch script may run, --timeout aside: with its launchers
 * replaced it runs in milliseconds, unless it waits for something.
 */
#define SCRIPT_TIMEOUT	30.0

/* A launch script's arguments are a few KiB; this is a generous bound. */
#define ARGS_FILE_MAX	(1 << 20)

/* One line of the YAML document: a key, and a value with its comment. */
struct yaml_line {
	int		 depth;
	const char	*key;		/* the leaf: "dp" */
	char		 value[CFG_MAX_LAYERS + 1]; /* "" for a mapping */
	const char	*why;
};

/* Comments line up after values up to this width. */
#define COMMENT_COLUMN_MAX	48

struct yaml_doc {
	struct yaml_line	*lines;
	size_t			 n;
};

/* What an importer made: the keys set, and why each has its value. */
struct import_result {
	struct config	*cfg;
	char		**why;
	struct fw_registry *frameworks;	/* the command's, for the check */
};

/*
 * The text of FILE ("-": standard input), or NULL after a message.  what
 * says what the file should be; with nul_ok a NUL byte is left to the
 * caller's parser, which says where it is (*lenp: the length read).
 */
static char *
read_text(const char *path, const char *what, bool nul_ok, size_t *lenp)
{
	FILE	*fp;
	char	*text;
	size_t	 len;

	fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	if (fp == NULL) {
		fprintf(stderr, "%s: import: %s: %s\n", progname, path,
		    strerror(errno));
		return NULL;
	}
	text = xmalloc(ARGS_FILE_MAX + 1);
	len = fread(text, 1, ARGS_FILE_MAX + 1, fp);
	if (ferror(fp) || len > ARGS_FILE_MAX ||
	    (!nul_ok && memchr(text, '\0', len))) {
		fprintf(stderr, "%s: import: %s: %s%s\n", progname, path,
		    ferror(fp) ? strerror(errno) : len > ARGS_FILE_MAX ?
		    "larger than 1 MiB: not " : "holds a NUL byte: not ",
		    ferror(fp) ? "" : what);
		free(text);
		text = NULL;
	} else {
		text[len] = '\0';
		*lenp = len;
	}
	if (fp != stdin)
		fclose(fp);
	return text;
}

/*
 * The words to import: those of --args-file (split as sh would, with its
 * comments and continued lines), then those given after `megatron`.
 */
static char **
collect_words(const struct options *o, size_t *nwords)
{
	char	**words = NULL, *text;
	size_t	 n = 0, len;
	int	 i;

	if (o->args_file != NULL) {
		if ((text = read_text(o->args_file, "a launch script's "
		    "arguments", false, &len)) == NULL)
			return NULL;
		words = shellwords_split(text, SHELLWORDS_COMMENTS, &n);
		free(text);
		if (words == NULL) {
			fprintf(stderr, "%s: import: %s: a quote is not "
			    "closed\n", progname, o->args_file);
			return NULL;
		}
	} else
		words = xcalloc(1, sizeof(*words));
	words = xreallocarray(words, n + (size_t)o->nargs, sizeof(*words));
	for (i = 1; i < o->nargs; i++)
		words[n++] = xstrdup(o->args[i]);
	words[n] = NULL;
	*nwords = n;
	return words;
}

static void	script_note(const char *, ...)
		    __attribute__((format(printf, 1, 2)));

static void
script_note(const char *fmt, ...)
{
	va_list	 ap;

	fprintf(stderr, "%s: import: note: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* "launch 2 (torchrun ... pretrain_gpt.py)", for the notes. */
static char *
describe_launch(const struct capture *cap, size_t i)
{
	const struct capture_launch	*l = &cap->launches[i];
	char				**words, *text;
	const char			*base;
	size_t				 n, k;

	if ((words = capture_python_command(l, &n, &k)) == NULL) {
		xasprintf(&text, "launch %zu (%s%s, no Python script)", i + 1,
		    l->argv[0], l->argc > 1 ? " ..." : "");
		return text;
	}
	base = strrchr(words[k], '/') != NULL ? strrchr(words[k], '/') + 1 :
	    words[k];
	xasprintf(&text, "launch %zu (%s%s %s)", i + 1, l->argv[0],
	    k > 1 ? " ..." : "", base);
	shellwords_free(words, n);
	return text;
}

/* One of Megatron's entry points: pretrain_gpt.py, pretrain_mamba.py ... */
static bool
is_entry_point(char *const *words, size_t script)
{
	const char	*w = words[script];
	const char	*base = strrchr(w, '/') != NULL ? strrchr(w, '/') + 1 : w;

	return strncmp(base, "pretrain_", strlen("pretrain_")) == 0;
}

/*
 * The launch to import: the first that runs one of Megatron's entry
 * points, else the first that runs any Python script (a training script
 * of the user's own); a data-preparation step before training
 * (tools/preprocess_data.py) is then passed over.  Returns its index and
 * its words, or -1.
 */
static long
choose_launch(const struct capture *cap, char ***chosen, size_t *nchosen)
{
	char	**words;
	size_t	 i, n = 0, k;
	long	 found = -1;
	int	 pass;

	*chosen = NULL;
	for (pass = 0; pass < 2 && *chosen == NULL; pass++)
		for (i = 0; i < cap->n && *chosen == NULL; i++) {
			words = capture_python_command(&cap->launches[i], &n,
			    &k);
			if (words != NULL && (pass == 1 ||
			    is_entry_point(words, k))) {
				*chosen = words;
				*nchosen = n;
				found = (long)i;
			} else
				shellwords_free(words, n);
		}
	return found;
}

/* "exited with status 3" or "was killed by SIGKILL". */
static void
describe_end(const struct capture *cap, char *buf, size_t size)
{
	char	 name[16];

	if (WIFEXITED(cap->status))
		snprintf(buf, size, "exited with status %d",
		    WEXITSTATUS(cap->status));
	else if (WIFSIGNALED(cap->status))
		snprintf(buf, size, "was killed by %s", launch_signal_name(
		    WTERMSIG(cap->status), name, sizeof(name)));
	else
		snprintf(buf, size, "ended with wait status %#x",
		    (unsigned)cap->status);
}

static bool
failed(const struct capture *cap)
{
	return !WIFEXITED(cap->status) || WEXITSTATUS(cap->status) != 0;
}

/* Why nothing of the script can be imported: exit status 2. */
static void
refuse_script(const struct options *o, const struct capture *cap,
    double timeout)
{
	char	 end[64], *what, *more, *one;
	size_t	 i;
	bool	 batch = false;

	fprintf(stderr, "%s: import: %s: ", progname, o->script);
	describe_end(cap, end, sizeof(end));
	if (cap->timed_out)
		fprintf(stderr, "still running after %g s without a launch of "
		    "a Python script: it was killed with its process group "
		    "(--timeout gives it longer)", timeout);
	else if (failed(cap) && cap->n == 0)
		fprintf(stderr, "%s before any launch: nothing was imported "
		    "(its output is above)", end);
	else if (cap->n == 0)
		fprintf(stderr, "%s without running a launcher (torchrun, "
		    "python, python3, srun, deepspeed, mpirun or mpiexec): "
		    "nothing to import", end);
	else {
		what = xstrdup("");
		for (i = 0; i < cap->n; i++) {
			one = describe_launch(cap, i);
			xasprintf(&more, "%s%s%s", what, i > 0 ? ", " : "",
			    one);
			free(one);
			free(what);
			what = more;
			batch = batch || strcmp(cap->launches[i].argv[0],
			    "sbatch") == 0 || strcmp(cap->launches[i].argv[0],
			    "salloc") == 0;
		}
		fprintf(stderr, "%s after %zu launch%s, none of a Python "
		    "script: %s", end, cap->n, cap->n == 1 ? "" : "es", what);
		free(what);
		if (batch)
			fprintf(stderr, "; sbatch and salloc submit nothing "
			    "here, nor run the job's script: give that script "
			    "to --script");
	}
	fputc('\n', stderr);
}

/* What the user should know about the run of a script that launched. */
static void
script_notes(const struct capture *cap, long chosen, double timeout)
{
	char	 end[64], *what, *more, *one;
	size_t	 i;

	if (cap->n > 1) {
		what = xstrdup("");
		for (i = 0; i < cap->n; i++) {
			if ((long)i == chosen)
				continue;
			one = describe_launch(cap, i);
			xasprintf(&more, "%s%s%s", what, *what != '\0' ? ", " :
			    "", one);
			free(one);
			free(what);
			what = more;
		}
		one = describe_launch(cap, (size_t)chosen);
		script_note("the script launched %zu times; imported %s, "
		    "not %s", cap->n, one, what);
		free(one);
		free(what);
	}
	describe_end(cap, end, sizeof(end));
	if (cap->timed_out)
		script_note("the script was still running after %g s, after "
		    "its launch: it was killed with its process group",
		    timeout);
	else if (failed(cap))
		script_note("the script %s after its launch, which ran "
		    "nothing", end);
	if (cap->file_cut)
		script_note("the record of the launches was cut short: "
		    "later ones are lost");
}

/*
 * --script: run the script with its launchers replaced and take the words
 * of the launch to import.  Returns EXIT_OK with *words set, or the exit
 * status after a message.
 */
static int
script_words(const struct options *o, char ***words, size_t *nwords)
{
	struct capture_options	 co;
	struct capture		 cap;
	char			 name[16];
	long			 chosen;
	int			 rc = EXIT_OK;

	if (access(o->script, R_OK) == -1) {
		fprintf(stderr, "%s: import: --script %s: %s\n", progname,
		    o->script, strerror(errno));
		return EXIT_USAGE;
	}
	memset(&co, 0, sizeof(co));
	co.script = o->script;
	co.args = o->args + 1;
	co.nargs = (size_t)o->nargs - 1;
	co.timeout = o->timeout_given ? o->timeout : SCRIPT_TIMEOUT;
	if (capture_script(&co, &cap) == -1)
		return EXIT_RUNTIME;
	if (cap.output_cut > 0)
		script_note("the script's output was cut after %d bytes: %zu "
		    "more were not shown", CAPTURE_OUTPUT_MAX, cap.output_cut);
	if (cap.interrupted != 0) {
		fprintf(stderr, "%s: import: the script was interrupted by "
		    "%s and ended\n", progname,
		    launch_signal_name(cap.interrupted, name, sizeof(name)));
		rc = LAUNCH_INTERRUPTED(cap.interrupted);
	} else if ((chosen = choose_launch(&cap, words, nwords)) < 0) {
		refuse_script(o, &cap, co.timeout);
		rc = EXIT_USAGE;
	} else
		script_notes(&cap, chosen, co.timeout);
	capture_free(&cap);
	return rc;
}

/*
 * --framework: the profile must resolve, and be one of the framework
 * imported (fw_name): the release it names also decides the defaults
 * that changed over time, and which flavour tables apply.  *version is
 * set to that release, *have_version when it is one (not main).
 */
static int
resolve_framework(struct fw_registry *reg, const char *spec,
    const char *fw_name, const char *cmd, bool *have_version,
    struct fw_version *version)
{
	const struct fw_profile	*p;
	char			 err[1024], q[TEXT_QUOTE_SIZE];
	bool			 newer;

	if (strcmp(spec, "reference") == 0)
		return 0;
	text_cut(q, sizeof(q), spec, strlen(spec));
	if ((p = fw_resolve(reg, spec, &newer, err, sizeof(err))) == NULL) {
		fprintf(stderr, "%s: import: --framework %s: %s\n", progname,
		    q, err);
		return -1;
	}
	if (strcmp(p->framework->name, fw_name) != 0) {
		fprintf(stderr, "%s: import: --framework %s: import %s "
		    "takes a %s profile\n", progname, q, cmd, fw_name);
		return -1;
	}
	if (newer)
		fprintf(stderr, "%s: import: %s is newer than the newest "
		    "release checked: the newest profile applies\n", progname,
		    q);
	*have_version = fw_version_parse(strchr(spec, '@') + 1,
	    version) == 0;
	if (newer && *have_version)
		*version = p->framework->latest;
	return 0;
}

/*
 * Without --framework, the newest release of fw_name the profiles were
 * read at: an imported config audits the framework's own synchronization,
 * not the ideal one (issue 28), and says so in a comment.  NULL, said,
 * when the profiles do not load.
 */
static char *
newest_profile(struct fw_registry *reg, const char *fw_name)
{
	const struct framework	*fw;
	char			 v[32], *spec;
	int			 i, n;

	if ((n = fw_all(reg, &fw)) < 0) {
		fprintf(stderr, "%s: import: the framework profiles did not "
		    "load (see gradaudit frameworks); give --framework "
		    "reference to import without one\n", progname);
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (strcmp(fw[i].name, fw_name) == 0)
			break;
	if (i == n)
		return xstrdup("reference");
	fw_version_format(&fw[i].latest, v, sizeof v);
	xasprintf(&spec, "%s@%s", fw_name, v);
	return spec;
}

/* The path of the mapping k is in, as a prefix of length *len. */
static bool
in_mapping(enum cfg_key k, const char *prefix, size_t len)
{
	const char	*path = cfg_key_path(k);

	return strncmp(path, prefix, len) == 0 &&
	    (len == 0 || path[len] == '.');
}

static void
add_line(struct yaml_doc *doc, int depth, const char *key)
{
	doc->lines = xreallocarray(doc->lines, doc->n + 1, sizeof(*doc->lines));
	memset(&doc->lines[doc->n], 0, sizeof(doc->lines[doc->n]));
	doc->lines[doc->n].depth = depth;
	doc->lines[doc->n].key = key;
	doc->n++;
}

/*
 * A key the import set is printed unless it has no effect in the config
 * (cfg_find_no_effect): an argument mapped for every model, such as
 * Megatron-FSDP's expert divisor on a dense one, would have the loader
 * warn about a file the user did not write.
 */
static bool
printed(const struct import_result *mi, enum cfg_key k)
{
	const char	*without;
	enum cfg_key	 inert;
	int		 row = -1;

	if (!keyset_has(&mi->cfg->given, k))
		return false;
	while ((row = cfg_find_no_effect(mi->cfg, NULL, row + 1, &inert,
	    &without)) != -1)
		if (inert == k)
			return false;
	return true;
}

/*
 * The keys under the mapping `prefix` (of length len, "" for the top):
 * its values first, in the order of the schema, then each mapping with
 * what it holds.
 */
static void
collect_keys(struct yaml_doc *doc, const struct import_result *mi,
    const char *prefix, size_t len, int depth)
{
	const char	*path, *leaf, *dot;
	size_t		 skip = len > 0 ? len + 1 : 0;
	int		 k, j;

	for (k = 0; k < KEY__COUNT; k++) {
		path = cfg_key_path(k);
		if (!printed(mi, (enum cfg_key)k) || cfg_key_is_section(k) ||
		    !in_mapping(k, prefix, len) ||
		    strchr(path + skip, '.') != NULL)
			continue;
		add_line(doc, depth, path + skip);
		cfg_key_value(mi->cfg, k, doc->lines[doc->n - 1].value,
		    sizeof(doc->lines[doc->n - 1].value));
		doc->lines[doc->n - 1].why = mi->why[k];
	}
	for (k = 0; k < KEY__COUNT; k++) {
		path = cfg_key_path(k);
		if (!cfg_key_is_section(k) || !in_mapping(k, prefix, len) ||
		    strchr(path + skip, '.') != NULL)
			continue;
		/* A mapping appears when one of its values was set. */
		for (j = 0; j < KEY__COUNT; j++)
			if (printed(mi, (enum cfg_key)j) &&
			    !cfg_key_is_section(j) &&
			    in_mapping(j, path, strlen(path)))
				break;
		if (j == KEY__COUNT)
			continue;
		leaf = (dot = strrchr(path, '.')) != NULL ? dot + 1 : path;
		add_line(doc, depth, leaf);
		collect_keys(doc, mi, path, strlen(path), depth + 1);
	}
}

static void
print_yaml(FILE *fp, const struct yaml_doc *doc, const char *header)
{
	size_t	 i, width, column = 0;

	for (i = 0; i < doc->n; i++) {
		width = 2 * (size_t)doc->lines[i].depth +
		    strlen(doc->lines[i].key) + 2 +
		    strlen(doc->lines[i].value);
		/* A long value (a layer pattern) does not push the others. */
		if (doc->lines[i].why != NULL && width > column &&
		    width <= COMMENT_COLUMN_MAX)
			column = width;
	}
	fputs(header, fp);
	for (i = 0; i < doc->n; i++) {
		const struct yaml_line *l = &doc->lines[i];

		width = (size_t)fprintf(fp, "%*s%s:%s%s", 2 * l->depth, "",
		    l->key, l->value[0] != '\0' ? " " : "", l->value);
		if (l->why != NULL)
			fprintf(fp, "%*s# %s", width < column ?
			    (int)(column + 2 - width) : 2, "", l->why);
		fputc('\n', fp);
	}
}

/*
 * The configuration printed must load: check, run and explain take it as
 * it is.  Megatron asserts most of what the loader checks (layers divisible
 * by pp, top-k at most the experts), and fails on most of the rest (a
 * swiglu ffn of 0 from a hidden size under 24); import printed such
 * configurations with exit 0 (issue 26).  Now it refuses them, with the
 * loader's word on the key and the argument the key came from.
 */
static int
check_loads(const struct import_result *mi, const char *text, size_t len,
    const char *what)
{
	struct config_list	 list;
	const char		*msg, *at;
	char			*from, *key, *at_dp;
	int			 k = KEY__COUNT;

	memset(&list, 0, sizeof(list));
	if (cfg_load_quietly(mi->frameworks, "import", text, len,
	    &list) == 0) {
		config_list_free(&list);
		return 0;
	}
	msg = list.error != NULL ? list.error : "invalid configuration";
	if (list.error_key != NULL)
		for (k = 0; k < KEY__COUNT; k++)
			if (strcmp(cfg_key_path(k), list.error_key) == 0)
				break;
	if (k == KEY__COUNT)
		from = xstrdup("");
	else if (keyset_has(&mi->cfg->given, k) && mi->why[k] != NULL)
		xasprintf(&from, " (%s: %s)", cfg_key_path(k), mi->why[k]);
	else
		xasprintf(&from, " (%s: gradaudit's default)", cfg_key_path(k));
	/*
	 * dp is no argument but what the world leaves: a rule on dp says
	 * where it came from too, as an impossible world is the launch's
	 * own (Mixtral's example on its one node, issue 28).
	 */
	if (k != KEY_DP && k < KEY__COUNT && strstr(msg, "dp") != NULL &&
	    mi->why[KEY_DP] != NULL) {
		xasprintf(&key, "%s; mesh.dp %d: %s)", from[0] != '\0' ?
		    "" : " (", mi->cfg->mesh.dp, mi->why[KEY_DP]);
		if (from[0] != '\0')
			from[strlen(from) - 1] = '\0';
		xasprintf(&at_dp, "%s%s", from, key);
		free(key);
		free(from);
		from = at_dp;
	}
	/* The loader's "import:12:8: " says nothing here: the key does. */
	if (k < KEY__COUNT) {
		xasprintf(&key, ": %s: ", cfg_key_path(k));
		if ((at = strstr(msg, key)) != NULL)
			msg = at + 2;
		free(key);
	}
	fprintf(stderr, "%s: import: gradaudit cannot load %s: %s%s\n",
	    progname, what, msg, from);
	free(from);
	config_list_free(&list);
	return -1;
}

/* The framework the configuration names, and why, unless "reference". */
static void
name_framework(struct import_result *mi, const char *spec, bool defaulted)
{
	if (strcmp(spec, "reference") == 0)
		return;
	mi->cfg->framework = xstrdup(spec);
	keyset_add(&mi->cfg->given, KEY_FRAMEWORK);
	if (defaulted)
		xasprintf(&mi->why[KEY_FRAMEWORK], "the newest release "
		    "checked; give --framework for the job's");
}

/*
 * The configuration as import prints it, after the header, asked of the
 * loader; what names the import's input in a refusal.
 */
static int
print_and_check(struct import_result *mi, const char *header,
    const char *what, char **text, size_t *len)
{
	struct yaml_doc	 doc = { NULL, 0 };
	FILE		*fp;

	collect_keys(&doc, mi, "", 0, 0);
	if ((fp = open_memstream(text, len)) == NULL)
		fatal("open_memstream");
	print_yaml(fp, &doc, header);
	if (fclose(fp) != 0)
		fatal("open_memstream");
	free(doc.lines);
	return check_loads(mi, *text, *len, what);
}

/* A refused import's configuration: only the loader's word on it. */
static void
loads_quietly(struct import_result *mi, const char *header,
    const char *what)
{
	char	*text;
	size_t	 len;

	(void)print_and_check(mi, header, what, &text, &len);
	free(text);
}

#define MEGATRON_HEADER \
	"# gradaudit import megatron: Megatron-LM's arguments as " \
	"gradaudit.yaml(5).\n# The sizes are the launch's: gradaudit run " \
	"needs small ones (--set).\n"
#define MEGATRON_WHAT	"what these arguments give"

static int
import_megatron(struct options *o)
{
	struct megatron_import	 mi;
	struct import_result	 r = { &mi.cfg, mi.why, o->frameworks };
	char			**words = NULL, *text;
	char			*spec = NULL;
	size_t			 nwords = 0, len;
	int			 rc = EXIT_USAGE;

	memset(&mi, 0, sizeof(mi));
	mi.world = o->world;
	mi.eod_document_tokens = o->eod_document_tokens;
	if (o->framework != NULL && resolve_framework(o->frameworks,
	    o->framework, "megatron-core", "megatron", &mi.have_version,
	    &mi.version) < 0)
		return EXIT_USAGE;
	if (o->script != NULL && o->args_file != NULL) {
		fprintf(stderr, "%s: import: --script and --args-file are two "
		    "ways to give the arguments: give one\n", progname);
		return EXIT_USAGE;
	}
	if (o->timeout_given && o->script == NULL) {
		fprintf(stderr, "%s: import: --timeout limits a --script: "
		    "give one, or no --timeout\n", progname);
		return EXIT_USAGE;
	}
	if (o->script != NULL) {
		if ((rc = script_words(o, &words, &nwords)) != EXIT_OK) {
			launch_exit_interrupted(rc);
			return rc;
		}
		rc = EXIT_USAGE;
	} else if ((words = collect_words(o, &nwords)) == NULL)
		return EXIT_USAGE;
	/* --framework was resolved above; the default is resolved here. */
	spec = o->framework != NULL ? xstrdup(o->framework) :
	    newest_profile(o->frameworks, "megatron-core");
	if (spec == NULL || (o->framework == NULL &&
	    resolve_framework(o->frameworks, spec, "megatron-core", "megatron",
	    &mi.have_version, &mi.version) < 0))
		;	/* said */
	else if (nwords == 0)
		fprintf(stderr, "%s: import: no Megatron arguments: give them "
		    "after \"megatron\" or in --args-file\n", progname);
	else if (megatron_import(&mi, words, nwords) != 0) {
		/*
		 * Refused: what the loader would refuse in the rest is said
		 * too, so that one run names every problem (issue 28).
		 */
		if (mi.mapped) {
			name_framework(&r, spec, o->framework == NULL);
			loads_quietly(&r, MEGATRON_HEADER, MEGATRON_WHAT);
		}
	} else {
		name_framework(&r, spec, o->framework == NULL);
		if (print_and_check(&r, MEGATRON_HEADER, MEGATRON_WHAT, &text,
		    &len) == 0) {
			fwrite(text, 1, len, stdout);
			rc = EXIT_OK;
		}
		free(text);
	}
	megatron_import_free(&mi);
	shellwords_free(words, nwords);
	free(spec);
	return rc;
}

/*
 * The options of import megatron that a TOML file has no use for: each is
 * refused rather than silently dropped.
 */
static bool
megatron_only(const struct options *o)
{
	const char	*which = o->script != NULL ? "--script" :
	    o->args_file != NULL ? "--args-file" :
	    o->timeout_given ? "--timeout" :
	    o->eod_document_tokens != 0 ? "--eod-document-tokens" : NULL;

	if (which != NULL)
		fprintf(stderr, "%s: import: %s is an option of import "
		    "megatron; import torchtitan reads one TOML file\n",
		    progname, which);
	return which != NULL;
}

/*
 * --framework for a registry entry: a window of main, torchtitan@main (the
 * newest) without one.  NULL, said, for a release (whose train configs
 * are TOML files) or anything that does not resolve.
 */
static const struct fw_profile *
registry_window(const struct options *o, int *at)
{
	const struct fw_profile	*p;
	const char		*spec = o->framework != NULL ? o->framework :
				    "torchtitan@main";
	char			 err[1024], q[TEXT_QUOTE_SIZE];
	bool			 newer;

	text_cut(q, sizeof(q), spec, strlen(spec));
	if ((p = fw_resolve(o->frameworks, spec, &newer, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "%s: import: --framework %s: %s\n", progname,
		    q, err);
		return NULL;
	}
	if (strcmp(p->framework->name, "torchtitan") != 0) {
		fprintf(stderr, "%s: import: --framework %s: import "
		    "torchtitan takes a torchtitan profile\n", progname, q);
		return NULL;
	}
	if (p->commit == NULL) {
		fprintf(stderr, "%s: import: --framework %s: profile %s is a "
		    "release's, whose train configs are TOML files (import "
		    "torchtitan CONFIG.toml); --module and --config name an "
		    "entry of main's config registry (9810191bb on), read at "
		    "main's windows from de329200b: give torchtitan@main or a "
		    "commit of main\n", progname, q, p->label);
		return NULL;
	}
	if (newer)
		fprintf(stderr, "%s: import: %s is newer than the newest "
		    "commit of main read: the newest window applies\n",
		    progname, q);
	/* The commit inside the window: where a key of the command line
	 * moved within one (737594746's asynchronous tp). */
	*at = fw_history_at(p, spec);
	return p;
}

/*
 * The entry's settings, then the overrides over them, as one document
 * for torchtitan.c; NULL after the problems, all of them, were said.
 */
static const struct tt_entry *
registry_doc(struct tt_args *args, const struct fw_profile *p, int at,
    struct toml_doc *doc, int *problems)
{
	const struct tt_entry	*e;
	struct tt_args		 row;
	const char		*absent, *line, *end;
	char			**words, names[1024], *prefix;
	char			 qm[TEXT_QUOTE_SIZE], qc[TEXT_QUOTE_SIZE];
	size_t			 i, n;
	int			 known;

	memset(doc, 0, sizeof(*doc));
	*problems = args->nproblems;
	for (line = args->problems; line != NULL && *line != '\0';
	    line = end + 1) {
		end = strchr(line, '\n');
		fprintf(stderr, "%s: import: %.*s\n", progname,
		    (int)(end - line), line);
	}
	for (i = 0; i < args->doc.n; i++) {
		absent = tt_registry_absent(args->doc.entries[i].path, p, at);
		if (absent != NULL) {
			fprintf(stderr, "%s: import: %s: %s\n", progname,
			    args->doc.entries[i].origin, absent);
			(*problems)++;
		}
	}
	if (args->module == NULL || args->config == NULL) {
		/* torchtitan's ValueError, with its example. */
		fprintf(stderr, "%s: import: --%s is required. Example: "
		    "--module llama3 --config llama3_debugmodel\n", progname,
		    args->module == NULL ? "module" : "config");
		return NULL;
	}
	if ((e = tt_registry_find(args->module, args->config, p, at,
	    &known)) == NULL) {
		tt_registry_names(args->module, p, at, names, sizeof(names));
		/* Words of the command line: anything, shown as one line. */
		text_cut(qm, sizeof(qm), args->module, strlen(args->module));
		text_cut(qc, sizeof(qc), args->config, strlen(args->config));
		fprintf(stderr, "%s: import: --module %s --config %s: not an "
		    "entry of the registry %s at window %s (entries read: "
		    "%s)\n", progname, qm, qc, known ?
		    "of torchtitan main" : "gradaudit read", p->commit, names);
		return NULL;
	}
	memset(&row, 0, sizeof(row));
	words = shellwords_split(e->settings, 0, &n);
	xasprintf(&prefix, "%s ", e->config);
	if (tt_args_parse(words, n, prefix, true, &row) != 0)
		fatalx("registry entry %s: %s", e->config, row.problems);
	free(prefix);
	shellwords_free(words, n);
	*doc = row.doc;
	memset(&row.doc, 0, sizeof(row.doc));
	tt_args_free(&row);
	for (i = 0; i < args->doc.n; i++)
		tt_args_put(doc, &args->doc.entries[i]);
	free(args->doc.entries);
	memset(&args->doc, 0, sizeof(args->doc));
	doc->name = xstrdup(e->config);
	return e;
}

/*
 * import torchtitan --module M --config C [--SECTION.KEY VALUE ...]: an
 * entry of main's config registry and the command line's overrides, as
 * torchtitan.train takes them (torchtitan-args.h), mapped by torchtitan.c
 * with the TOML files' key table.
 */
static int
import_torchtitan_registry(struct options *o)
{
	struct torchtitan_import ti;
	struct import_result	 r = { &ti.cfg, ti.why, o->frameworks };
	const struct fw_profile	*p;
	const struct tt_entry	*e;
	struct tt_args		 args;
	struct toml_doc		 doc;
	char			*spec, *header, *text_out;
	size_t			 len;
	int			 rc = EXIT_USAGE, problems, at;

	if ((p = registry_window(o, &at)) == NULL)
		return EXIT_USAGE;
	memset(&args, 0, sizeof(args));
	tt_args_parse(o->args + 1, (size_t)o->nargs - 1, NULL, false, &args);
	if ((e = registry_doc(&args, p, at, &doc, &problems)) == NULL) {
		tt_args_free(&args);
		return EXIT_USAGE;
	}
	memset(&ti, 0, sizeof(ti));
	ti.world = o->world;
	ti.version = "main";
	ti.registry = true;
	ti.folded = tt_registry_folded(p, at);
	ti.spmd_default = tt_registry_spmd_default(p, at);
	ti.prior_errors = problems;
	if (torchtitan_import(&ti, &doc) == 0) {
		fprintf(stderr, "%s: import: note: --config %s is %s\n",
		    progname, e->config, e->source);
		xasprintf(&header, "# gradaudit import torchtitan: --module %s "
		    "--config %s (main's config registry) as gradaudit.yaml(5)."
		    "\n# The sizes are the run's: gradaudit run needs small "
		    "ones (--set).\n", args.module, args.config);
		/* The window, by its commit: what the audit applies. */
		xasprintf(&spec, "torchtitan@%s", p->commit);
		name_framework(&r, spec, false);
		xasprintf(&ti.why[KEY_FRAMEWORK], "%s%s%s", o->framework ==
		    NULL ? "torchtitan@main, the newest window of main read; "
		    "give --framework torchtitan@COMMIT for the job's" :
		    "the window of --framework ", o->framework == NULL ? "" :
		    o->framework, "");
		if (print_and_check(&r, header, "what this entry gives",
		    &text_out, &len) == 0) {
			fwrite(text_out, 1, len, stdout);
			rc = EXIT_OK;
		}
		free(text_out);
		free(header);
		free(spec);
	}
	toml_free(&doc);
	torchtitan_import_free(&ti);
	tt_args_free(&args);
	return rc;
}

/*
 * import torchtitan CONFIG.toml: the file is read whole (TOML_MAX_SIZE),
 * parsed by toml.c and mapped by torchtitan.c.
 */
static int
import_torchtitan(struct options *o)
{
	struct torchtitan_import ti;
	struct import_result	 r = { &ti.cfg, ti.why, o->frameworks };
	struct toml_doc		 doc;
	struct fw_version	 version;
	char			*spec = NULL, *text = NULL, *header, *what;
	char			*shown, *text_out;
	const char		*base;
	char			 err[1024], v[32], q[TEXT_QUOTE_SIZE];
	size_t			 len = 0;
	bool			 have_version = false;
	int			 rc = EXIT_USAGE, i;

	if (megatron_only(o))
		return EXIT_USAGE;
	/* torchtitan.train's words: main's registry, not a TOML file. */
	for (i = 1; i < o->nargs; i++)
		if (strncmp(o->args[i], "--", 2) == 0)
			return import_torchtitan_registry(o);
	if (o->nargs != 2) {
		fprintf(stderr, "%s: import: torchtitan takes one train config "
		    "(a TOML file), not %d operands\n", progname, o->nargs - 1);
		return EXIT_USAGE;
	}
	memset(&ti, 0, sizeof(ti));
	ti.world = o->world;
	spec = o->framework != NULL ? xstrdup(o->framework) :
	    newest_profile(o->frameworks, "torchtitan");
	if (spec == NULL || resolve_framework(o->frameworks, spec, "torchtitan",
	    "torchtitan", &have_version, &version) < 0) {
		free(spec);
		return EXIT_USAGE;
	}
	if (have_version && !version.main) {
		fw_version_format(&version, v, sizeof(v));
		ti.version = v;
	}
	if ((text = read_text(o->args[1], "a train config", true,
	    &len)) == NULL) {
		free(spec);
		return EXIT_USAGE;
	}
	/* Messages name the file as text_visible shows it: one line. */
	shown = text_visible(o->args[1]);
	if (toml_parse(shown, text, len, &doc, err, sizeof(err)) < 0)
		fprintf(stderr, "%s: import: %s\n", progname, err);
	else {
		if (torchtitan_import(&ti, &doc) == 0) {
			/* The file's name, not where it was: the same text
			 * wherever the file is read from. */
			base = strrchr(o->args[1], '/') != NULL ?
			    strrchr(o->args[1], '/') + 1 : o->args[1];
			text_cut(q, sizeof(q), base, strlen(base));
			xasprintf(&header, "# gradaudit import torchtitan: %s "
			    "as gradaudit.yaml(5).\n# The sizes are the "
			    "run's: gradaudit run needs small ones (--set).\n",
			    q);
			xasprintf(&what, "what %s gives", q);
			name_framework(&r, spec, o->framework == NULL);
			if (print_and_check(&r, header, what, &text_out,
			    &len) == 0) {
				fwrite(text_out, 1, len, stdout);
				rc = EXIT_OK;
			}
			free(text_out);
			free(header);
			free(what);
		}
		toml_free(&doc);
	}
	torchtitan_import_free(&ti);
	free(shown);
	free(text);
	free(spec);
	return rc;
}

static int
cmd_import_exec(struct options *o)
{
	char	 q[TEXT_QUOTE_SIZE];

	if (strcmp(o->args[0], "megatron") == 0)
		return import_megatron(o);
	if (strcmp(o->args[0], "torchtitan") == 0)
		return import_torchtitan(o);
	text_escape(q, sizeof(q), o->args[0], strlen(o->args[0]));
	fprintf(stderr, "%s: import: cannot import from \"%s\": the "
	    "frameworks known are megatron and torchtitan\n", progname, q);
	return EXIT_USAGE;
}

const struct command cmd_import_entry = {
	.name = "import",
	.operands = "megatron [ARG ...] | torchtitan (CONFIG.toml | ARG ...)",
	.summary = "print the configuration of a Megatron-LM launch or "
	    "torchtitan config",
	.scope = SCOPE_IMPORT,
	.min_args = 1,
	.max_args = -1,
	.foreign_args = true,
	.exec = cmd_import_exec
};
