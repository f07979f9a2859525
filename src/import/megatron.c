/*
 * gradaudit import megatron (megatron.h): Megatron-LM's arguments mapped
 * onto gradaudit.yaml(5).
 *
 * The argument names, their arity and Megatron's defaults were read from
 * NVIDIA/Megatron-LM main at d98e8a6 (2026-08-22): the explicit ones in
 * megatron/training/arguments.py, and those that ArgumentGroupFactory
 * (megatron/training/argument_utils.py) derives from the fields of
 * TransformerConfig (megatron/core/transformer/transformer_config.py, with
 * ModelParallelConfig, megatron/core/model_parallel_config.py) and of the
 * configs of megatron/training/config/: a field foo_bar is --foo-bar, a
 * boolean that defaults to true is --no-foo-bar or --disable-foo-bar.
 * Megatron parses them with allow_abbrev=False, so only whole names are
 * matched here too.  Where a default changed across releases, the release
 * that --framework names decides; without it, main's does.
 *
 * This file reads the launch words (the launcher's, the program's, then
 * Megatron's arguments) and decides each argument's fate; the table of
 * arguments is megatron-args.c, the mapping of their values onto keys
 * megatron-map.c, --moe-layer-freq's expressions megatron-pattern.c, and
 * what they share megatron-state.c.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/suggest.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "import/megatron-args.h"
#include "import/megatron-map.h"
#include "import/megatron-state.h"
#include "import/megatron.h"

/*
 * A word that starts an option rather than being a value.  Megatron's
 * parser has no option that looks like a negative number, so argparse reads
 * "-1" and "-.5" as values, as here.
 */
static bool
is_option(const char *w)
{
	return w[0] == '-' && w[1] != '\0' &&
	    !isdigit((unsigned char)w[1]) && w[1] != '.';
}

static bool
ends_with(const char *s, const char *suffix)
{
	size_t	 n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/*
 * A launcher option's value ("--nnodes 2", "--nnodes=2", and for a short
 * option "-n 8" or "-n8"): digits only, else 0.
 */
static long
launcher_number(char *const *words, size_t *i, size_t end, size_t len)
{
	const char	*v = words[*i] + len;
	char		*stop;
	long		 n;

	if (*v == '=')
		v++;
	else if (*v == '\0' && *i + 1 < end)
		v = words[++*i];
	else if (*v == '\0' || len != 2)
		return 0;
	if (!isdigit((unsigned char)*v))
		return 0;
	errno = 0;
	n = strtol(v, &stop, 10);
	if (*stop != '\0' || errno != 0 || n < 1 || n > CFG_MAX_WORLD)
		return 0;
	return n;
}

/*
 * The launchers' options that say how many processes they start: per
 * node, nodes, or all of them.  The launchers' other options (addresses,
 * ports, ranks, rendezvous, containers) are theirs alone, and skipped with
 * the rest of what runs Megatron.
 */
enum launch_size { SIZE_PER_NODE, SIZE_NODES, SIZE_TASKS };

static const struct launcher_size {
	const char		*launcher;
	const char		*option;
	enum launch_size	 size;
} launcher_sizes[] = {
	{ "torchrun", "--nproc_per_node", SIZE_PER_NODE },
	{ "torchrun", "--nproc-per-node", SIZE_PER_NODE },
	{ "torchrun", "--nnodes", SIZE_NODES },
	{ "deepspeed", "--num_gpus", SIZE_PER_NODE },
	{ "deepspeed", "--num-gpus", SIZE_PER_NODE },
	{ "deepspeed", "--num_nodes", SIZE_NODES },
	{ "deepspeed", "--num-nodes", SIZE_NODES },
	{ "srun", "--ntasks-per-node", SIZE_PER_NODE },
	{ "srun", "--nodes", SIZE_NODES },
	{ "srun", "-N", SIZE_NODES },
	{ "srun", "--ntasks", SIZE_TASKS },
	{ "srun", "-n", SIZE_TASKS },
	{ "mpirun", "-np", SIZE_TASKS },
	{ "mpirun", "-n", SIZE_TASKS },
	{ "mpirun", "--np", SIZE_TASKS },
	{ "mpirun", "--n", SIZE_TASKS },
};

/*
 * The launcher a word of the launch line names, by the name its sizes are
 * filed under: `python -m torch.distributed.run` (or .launch) is torchrun,
 * mpiexec is mpirun.  NULL for any other word.
 */
static const char *
launcher_of(const char *w)
{
	static const struct {
		const char	*word, *launcher;
	} names[] = {
		{ "torchrun", "torchrun" },
		{ "torch.distributed.run", "torchrun" },
		{ "torch.distributed.launch", "torchrun" },
		{ "deepspeed", "deepspeed" },
		{ "srun", "srun" },
		{ "mpirun", "mpirun" },
		{ "mpiexec", "mpirun" },
	};
	const char	*base = strrchr(w, '/') != NULL ? strrchr(w, '/') + 1 : w;
	size_t		 i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(base, names[i].word) == 0)
			return names[i].launcher;
	return NULL;
}

/* The ranks a launcher starts by the sizes its options gave, or 0. */
static long
launcher_world(long sizes[3])
{
	/* A size given but not a number ("--nnodes 1:4") leaves it unknown. */
	if (sizes[SIZE_PER_NODE] < 0 || sizes[SIZE_NODES] < 0 ||
	    sizes[SIZE_TASKS] < 0)
		return 0;
	if (sizes[SIZE_TASKS] > 0)
		return sizes[SIZE_TASKS];
	if (sizes[SIZE_PER_NODE] == 0)
		return 0;
	if (sizes[SIZE_NODES] == 0)
		return sizes[SIZE_PER_NODE];
	if (sizes[SIZE_PER_NODE] > CFG_MAX_WORLD / sizes[SIZE_NODES])
		return 0;
	return sizes[SIZE_PER_NODE] * sizes[SIZE_NODES];
}

/*
 * The world size the launchers before the script give: torchrun's
 * --nproc_per_node times its --nnodes (one node by default), deepspeed's
 * --num_gpus times --num_nodes, srun's --ntasks or --ntasks-per-node
 * times --nodes, mpirun's -n.  When launchers nest (srun running
 * torchrun), the innermost that says a size starts the ranks.  Other
 * spellings of the sizes (auto, gpu, a range of nodes) say nothing
 * certain.
 */
static void
read_launcher(struct import_state *st, size_t end)
{
	const struct launcher_size	*ls;
	const char			*current = NULL, *name, *w;
	long				 sizes[3] = { 0, 0, 0 }, n;
	size_t				 i, k, len;

	for (i = 0; i < end; i++) {
		w = st->words[i];
		if ((name = launcher_of(w)) != NULL) {
			current = name;
			memset(sizes, 0, sizeof(sizes));
			continue;
		}
		for (k = 0; current != NULL &&
		    k < sizeof(launcher_sizes) / sizeof(launcher_sizes[0]); k++) {
			ls = &launcher_sizes[k];
			len = strlen(ls->option);
			if (strcmp(ls->launcher, current) != 0 ||
			    strncmp(w, ls->option, len) != 0 ||
			    (w[len] != '\0' && w[len] != '=' && !(len == 2 &&
			    isdigit((unsigned char)w[len]))))
				continue;
			n = launcher_number(st->words, &i, end, len);
			sizes[ls->size] = n > 0 ? n : -1;
			n = launcher_world(sizes);
			st->launch_world = n;
			st->launcher = n > 0 ? current : NULL;
			break;
		}
	}
}

/*
 * Megatron-LM's programs that build another model than GPTModel, which
 * gradaudit's model stands for (pretrain_gpt.py; a script gradaudit does
 * not know is taken to build it).  The examples under examples/ at
 * core_v0.19.0 run them (issue 28); a path ending in the name matches.
 */
static const struct other_model {
	const char	*program;
	const char	*model;
} other_models[] = {
	{ "pretrain_bert.py", "BertModel (megatron/core/models/bert): a "
	    "pooler, a binary head and the LM head's dense layer and norm" },
	{ "pretrain_t5.py", "T5Model (megatron/core/models/T5): an encoder "
	    "and a decoder with cross-attention" },
	{ "pretrain_hybrid.py", "HybridModel (megatron/core/models/hybrid): "
	    "Mamba mixers with their own parameters" },
	{ "pretrain_mamba.py", "MambaModel (megatron/core/models/mamba): "
	    "Mamba mixers with their own parameters" },
	{ "pretrain_vlm.py", "LLaVAModel (megatron/core/models/multimodal): "
	    "a vision encoder and a projection besides the language model" },
	{ "multimodal/train.py", "LLaVAModel (megatron/core/models/multimodal): "
	    "a vision encoder and a projection besides the language model" },
	{ "mimo/train.py", "MimoModel (megatron/core/models/mimo): modality "
	    "encoders and projections besides the language model" },
	{ "mimo.pretrain_mimo", "MimoModel (megatron/core/models/mimo): "
	    "modality encoders and projections besides the language model" },
	{ "modelopt/finetune.py", "ModelOpt's model and loss "
	    "(megatron/post_training/model_builder.py, loss_func.py: quantized, "
	    "distilled or with speculative-decoding heads)" },
};

/* Refuse a program that builds a model gradaudit's does not stand for. */
static void
check_program(struct import_state *st, const char *program)
{
	size_t		 k, n = sizeof(other_models) / sizeof(other_models[0]);
	const char	*name;

	for (k = 0; k < n; k++) {
		name = other_models[k].program;
		if (!ends_with(program, name))
			continue;
		/* A whole name: "x_pretrain_t5.py" is not pretrain_t5.py. */
		if (strlen(program) > strlen(name) &&
		    program[strlen(program) - strlen(name) - 1] != '/' &&
		    program[strlen(program) - strlen(name) - 1] != '.')
			continue;
		/* The name matched, which a long path would cut short. */
		mg_refuse(st, "%s: it builds %s, which gradaudit's model (a "
		    "GPT decoder, pretrain_gpt.py's GPTModel) does not stand "
		    "for", name, other_models[k].model);
		return;
	}
}

/*
 * Where Megatron's own arguments start.  A launch line may begin with what
 * runs Megatron: environment assignments, python or torchrun with its
 * options, and the script (pretrain_gpt.py).  When the first word is not
 * an option, Megatron's arguments follow the first word that names a
 * Python script, or else start at the first option.
 */
static size_t
skip_program(struct import_state *st)
{
	size_t	 i, start;
	char	*program = NULL, *more, *word;

	if (st->nwords == 0 || is_option(st->words[0]))
		return 0;
	/*
	 * The script, or a module that python -m runs other than a
	 * launcher's (the MIMO example's -m examples.mimo.pretrain_mimo).
	 */
	for (i = 0; i < st->nwords; i++)
		if (ends_with(st->words[i], ".py") || (i > 0 &&
		    strcmp(st->words[i - 1], "-m") == 0 &&
		    launcher_of(st->words[i]) == NULL))
			break;
	if (i < st->nwords) {
		read_launcher(st, i);
		check_program(st, st->words[i]);
		start = i + 1;
	} else
		for (start = 0; start < st->nwords &&
		    strncmp(st->words[start], "--", 2) != 0; start++)
			;
	/* Whole words, escaped: a quoted newline split the note (issue 26). */
	for (i = 0; i < start; i++) {
		word = text_visible(st->words[i]);
		xasprintf(&more, "%s%s%s", program != NULL ? program : "",
		    program != NULL ? " " : "", word);
		free(word);
		free(program);
		program = more;
	}
	mg_note(st, "not Megatron's arguments but what runs it: %s", program);
	free(program);
	return start;
}

/* Read the words into st->use[]; unknown and malformed ones are refused. */
static void
read_args(struct import_state *st, size_t i)
{
	const struct arg_def	*def, *valued = NULL;
	struct arg_use		*u;
	struct shown		 sh;
	const char		*w, *name, *eq;
	size_t			 len, k, first;

	while (i < st->nwords) {
		w = st->words[i++];
		if (!is_option(w) && valued != NULL && *w != '$') {
			/*
			 * Words after an argument's value: a value with blanks
			 * that an unquoted ${ARGS[@]} split into words, as the
			 * GPT-3 example's --step-batch-size-schedule "0:16
			 * 2.4B:320 ..." at core_v0.19.0.
			 */
			for (first = i - 1; i < st->nwords &&
			    !is_option(st->words[i]) && *st->words[i] != '$';
			    i++)
				continue;
			mg_refuse(st, "\"%s\"%s: Megatron takes no operands: the "
			    "value of --%s, split into words? (an unquoted "
			    "${ARGS[@]} splits a value with blanks, and "
			    "Megatron's parser refuses the words after its "
			    "first too)", mg_shown(&sh, st->words[first]),
			    i - first > 1 ? " and the words after it" : "",
			    valued->name);
			valued = NULL;
			continue;
		}
		valued = NULL;
		if (!is_option(w)) {
			mg_refuse(st, "\"%s\": Megatron takes no operands (%s)",
			    mg_shown(&sh, w), *w == '$' ? "a shell variable that "
			    "was not expanded: give its value" : "the value of "
			    "an argument that takes none?");
			continue;
		}
		name = w + 2;
		eq = strchr(name, '=');
		len = eq != NULL ? (size_t)(eq - name) : strlen(name);
		if (w[1] != '-' || (def = megatron_find_arg(name, len, &k)) == NULL) {
			struct suggestion	 sg;
			char			 hint[SUGGEST_MAX_LEN + 32] = "";
			size_t			 a;

			/* As a misspelt YAML key or option is answered. */
			suggest_init(&sg, name, len);
			for (a = 0; w[1] == '-' && a < megatron_nargs; a++)
				suggest_consider(&sg, megatron_args[a].name);
			if (suggest_best(&sg) != NULL)
				snprintf(hint, sizeof hint, " (did you mean "
				    "--%s?)", suggest_best(&sg));
			mg_refuse(st, "%s: not an argument gradaudit knows; it "
			    "could change gradient synchronization, so nothing "
			    "was imported (remove it if it cannot)%s",
			    mg_shown_len(&sh, w, eq != NULL ? (size_t)(eq - w) :
			    strlen(w)), hint);
			while (i < st->nwords && !is_option(st->words[i]))
				i++;
			continue;
		}
		u = &st->use[k];
		memset(u, 0, sizeof(*u));
		u->given = true;
		u->at = i - 1;
		switch (def->kind) {
		case ARG_FLAG:
			if (eq != NULL)
				mg_refuse(st, "--%s takes no value", def->name);
			break;
		case ARG_VALUE:
			if (eq != NULL)
				u->value = eq + 1;
			else if (i < st->nwords && !is_option(st->words[i])) {
				u->value = st->words[i++];
				valued = def;
			} else {
				/*
				 * Refused, and without a value it maps to
				 * nothing: the importers read the value of
				 * what was given (a fuzzed "--moe-layer-freq
				 * -x" reached the pattern parser with NULL).
				 */
				mg_refuse(st, "--%s needs a value", def->name);
				u->given = false;
			}
			break;
		case ARG_LIST:
			if (eq != NULL) {
				u->value = eq + 1;
				u->count = 1;
				break;
			}
			for (u->first = i; i < st->nwords &&
			    !is_option(st->words[i]); i++)
				u->count++;
			if (u->count == 0 && def->fate != ARG_HARMLESS)
				mg_refuse(st, "--%s needs a value", def->name);
			break;
		}
	}
}

/*
 * Refuse what cannot be imported: arguments used with a value that
 * changes the synchronization, and arguments the release --framework
 * names does not have.
 */
static void
check_fates(struct import_state *st)
{
	const struct arg_def	*def;
	const struct arg_use	*u;
	char			 release[32], *values;
	size_t			 k, j;
	bool			 inert;

	for (k = 0; k < megatron_nargs; k++) {
		def = &megatron_args[k];
		u = &st->use[k];
		if (!u->given)
			continue;
		if (def->fate == ARG_REFUSED) {
			inert = def->kind != ARG_FLAG;
			if (def->kind == ARG_VALUE)
				inert = u->value != NULL &&
				    mg_is_inert(def, u->value);
			for (j = 0; def->kind == ARG_LIST && j < u->count; j++)
				inert = inert &&
				    mg_is_inert(def, mg_list_value(st, u, j));
			if (inert)
				continue;
			values = mg_use_values(st, def, u);
			mg_refuse(st, "--%s%s: %s", def->name, values, def->why);
			free(values);
		} else if (def->fate == ARG_MAPPED && def->since != NULL &&
		    mg_older_than(st, def->since)) {
			fw_version_format(&st->mi->version, release,
			    sizeof(release));
			mg_refuse(st, "--%s: not an argument of megatron-core %s "
			    "(it came in %s)", def->name, release, def->since);
		}
	}
}

/*
 * The notes of the ignored arguments that do act in Megatron, outside
 * every gradient (NOTED in megatron_args[]), in the launch's order.
 */
static void
note_harmless(struct import_state *st)
{
	size_t	 k, j, n = 0, *noted;

	noted = xcalloc(megatron_nargs, sizeof(*noted));
	for (k = 0; k < megatron_nargs; k++) {
		if (!st->use[k].given || megatron_args[k].fate != ARG_HARMLESS ||
		    megatron_args[k].why == NULL)
			continue;
		for (j = n++; j > 0 && st->use[noted[j - 1]].at >
		    st->use[k].at; j--)
			noted[j] = noted[j - 1];
		noted[j] = k;
	}
	for (j = 0; j < n; j++)
		mg_note(st, "--%s is ignored: %s", megatron_args[noted[j]].name,
		    megatron_args[noted[j]].why);
	free(noted);
}

/* One line: every argument given that set no key, in the launch's order. */
static void
list_ignored(const struct import_state *st)
{
	char	*line = xstrdup(""), *more;
	size_t	 k, n = 0, j, *ignored;

	ignored = xcalloc(megatron_nargs, sizeof(*ignored));
	for (k = 0; k < megatron_nargs; k++) {
		if (!st->use[k].given || st->use[k].used)
			continue;
		for (j = n++; j > 0 && st->use[ignored[j - 1]].at >
		    st->use[k].at; j--)
			ignored[j] = ignored[j - 1];
		ignored[j] = k;
	}
	for (j = 0; j < n; j++) {
		xasprintf(&more, "%s --%s", line, megatron_args[ignored[j]].name);
		free(line);
		line = more;
	}
	if (n > 0)
		fprintf(stderr, "%s: import: ignored %zu argument%s that "
		    "cannot change gradient synchronization:%s\n", progname,
		    n, n == 1 ? "" : "s", line);
	free(line);
	free(ignored);
}

int
megatron_import(struct megatron_import *mi, char *const *words,
    size_t nwords)
{
	struct import_state	*st;
	int			 rc = -1;

	st = xcalloc(1, sizeof(*st));
	st->use = xcalloc(megatron_nargs, sizeof(*st->use));
	st->mi = mi;
	st->words = words;
	st->nwords = nwords;
	read_args(st, skip_program(st));
	/*
	 * Every refused argument is named in one run, unknown ones included,
	 * so that a launch is not fixed one refusal at a time.
	 */
	check_fates(st);
	megatron_map_check(st);
	megatron_map(st);
	if (st->errors == 0) {
		note_harmless(st);
		fputs(st->notes != NULL ? st->notes : "", stderr);
		list_ignored(st);
		rc = 0;
	}
	free(st->notes);
	free(st->use);
	free(st);
	return rc;
}

void
megatron_import_free(struct megatron_import *mi)
{
	int	 k;

	for (k = 0; k < KEY__COUNT; k++) {
		free(mi->why[k]);
		mi->why[k] = NULL;
	}
	cfg_free(&mi->cfg);
}
