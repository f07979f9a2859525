/*
 * gradaudit import torchtitan (torchtitan.h): a torchtitan train config's
 * keys mapped onto gradaudit.yaml(5).
 *
 * The sections and keys are those of torchtitan's JobConfig
 * (torchtitan/config/job_config.py at v0.2.2; torchtitan/config_manager.py
 * at v0.1.0), and the keys its train_configs use from v0.1.0 to v0.2.2.
 * torchtitan's defaults are v0.2.2's; the mesh is ParallelDims's
 * (torchtitan/distributed/parallel_dims.py), the gradient accumulation
 * Trainer.__init__'s (torchtitan/train.py), the sizes the flavour tables'
 * (torchtitan-flavors.c).
 */
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/suggest.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "import/torchtitan-flavors.h"
#include "import/torchtitan.h"

enum tt_fate {
	TT_MAPPED,		/* read into configuration keys */
	TT_IGNORED,		/* cannot change gradient synchronization */
	TT_REFUSED,		/* changes it in a way gradaudit cannot model */
	TT_PIPELINE		/* ignored without a pipeline, else import_pipeline's */
};

struct tt_key {
	const char	*section;	/* "parallelism" */
	const char	*name;		/* NULL: every key of the section */
	enum tt_fate	 fate;
	/* TT_REFUSED: the value with which it changes nothing, or NULL. */
	const char	*inert;
	const char	*why;		/* TT_IGNORED, TT_REFUSED: why */
	/* The config systems that have it: TT_TOML, TT_REGISTRY. */
	unsigned	 systems;
};

/*
 * v0.1.0 to v0.2.2's JobConfig (the TOML files), main's Trainer.Config
 * (its registry and command line, torchtitan/config/configs.py and
 * torchtitan/trainer.py read at ecae62f15).  A key main's Trainer.Config
 * lacks is unknown there, as tyro would refuse it.
 */
#define TT_TOML		1u
#define TT_REGISTRY	2u
#define TT_BOTH		(TT_TOML | TT_REGISTRY)

/* The mapped keys, as indices into keys[]. */
enum mapped_key {
	TK_NAME, TK_FLAVOR, TK_LOCAL_BATCH, TK_GLOBAL_BATCH, TK_SEQ,
	TK_DP_REPLICATE, TK_DP_SHARD, TK_TP, TK_PP, TK_CP, TK_EP, TK_ETP,
	TK_TOKENS, TK_STEP_TOKENS, TK_CONTEXT, TK__COUNT
};

#define MAPPED(s, n)		{ s, n, TT_MAPPED, NULL, NULL, TT_BOTH }
#define MAPPED_IN(sys, s, n)	{ s, n, TT_MAPPED, NULL, NULL, sys }
#define IGNORED(s, n, why)	{ s, n, TT_IGNORED, NULL, why, TT_BOTH }
#define IGNORED_IN(sys, s, n, why) { s, n, TT_IGNORED, NULL, why, sys }
#define REFUSED(s, n, inert, why) { s, n, TT_REFUSED, inert, why, TT_BOTH }
#define REFUSED_IN(sys, s, n, inert, why) { s, n, TT_REFUSED, inert, why, \
				  sys }
#define PIPELINE_IN(sys, n)	{ "parallelism", n, TT_PIPELINE, NULL, \
				  "no pipeline (pipeline_parallel_degree 1)", \
				  sys }
#define PIPELINE(n)		PIPELINE_IN(TT_BOTH, n)

#define WHY_COMPILE	"compiles the same computation (torch.compile)"
#define WHY_ASYNC_TP	"overlaps tp's collectives with the matmuls: the same " \
			"reductions"
#define WHY_LOWP	"low-precision matmuls and all-gathers (float8, MX): " \
			"values, not which reductions run"

static const struct tt_key keys[] = {
	[TK_NAME] = MAPPED("model", "name"),
	[TK_FLAVOR] = MAPPED("model", "flavor"),
	[TK_LOCAL_BATCH] = MAPPED("training", "local_batch_size"),
	[TK_GLOBAL_BATCH] = MAPPED("training", "global_batch_size"),
	[TK_SEQ] = MAPPED("training", "seq_len"),
	[TK_DP_REPLICATE] = MAPPED("parallelism",
	    "data_parallel_replicate_degree"),
	[TK_DP_SHARD] = MAPPED("parallelism", "data_parallel_shard_degree"),
	[TK_TP] = MAPPED("parallelism", "tensor_parallel_degree"),
	[TK_PP] = MAPPED("parallelism", "pipeline_parallel_degree"),
	[TK_CP] = MAPPED("parallelism", "context_parallel_degree"),
	[TK_EP] = MAPPED("parallelism", "expert_parallel_degree"),
	[TK_ETP] = MAPPED("parallelism", "expert_tensor_parallel_degree"),
	/*
	 * 73aed7f6c (PR #4121) on main: the batch folded into the tokens.
	 * Which commits have which of these keys is the registry's
	 * (tt_registry_absent).
	 */
	[TK_TOKENS] = MAPPED_IN(TT_REGISTRY, "training",
	    "num_tokens_per_microbatch_per_dp_rank"),
	[TK_STEP_TOKENS] = MAPPED_IN(TT_REGISTRY, "training",
	    "num_tokens_per_train_step"),
	[TK_CONTEXT] = MAPPED_IN(TT_REGISTRY, "training",
	    "max_context_length"),

	IGNORED_IN(TT_TOML, "model", "hf_assets_path", "where the tokenizer and weights "
	    "are read from"),
	IGNORED_IN(TT_TOML, "model", "tokenizer_path", "where the tokenizer and weights "
	    "are read from"),
	IGNORED("model", "converters", "swaps linear layers for float8 or MX "
	    "ones: values, not which reductions run"),
	IGNORED_IN(TT_TOML, "model", "print_after_conversion", "printing"),
	IGNORED("training", "max_norm", "the clipping threshold: gradaudit "
	    "audits the gradient norm itself"),
	IGNORED_IN(TT_TOML, "training", "dataset", "the data read: torchtitan's text "
	    "datasets pack tokens into whole sequences, every label valid"),
	IGNORED_IN(TT_TOML, "training", "dataset_path", "the data read: torchtitan's text "
	    "datasets pack tokens into whole sequences, every label valid"),
	IGNORED("training", "steps", "how long the run is"),
	IGNORED("training", "gc_freq", "garbage collection"),
	IGNORED("training", "gc_debug", "garbage collection"),
	IGNORED("training", "enable_cpu_offload", "where values live and "
	    "their precision"),
	IGNORED("training", "dtype", "where values live and their precision"),
	IGNORED("training", "mixed_precision_param", "where values live and "
	    "their precision"),
	IGNORED("training", "mixed_precision_reduce", "where values live and "
	    "their precision"),
	IGNORED_IN(TT_TOML, "training", "compile", WHY_COMPILE),
	IGNORED_IN(TT_TOML, "training", "dataloader", "the data loader's "
	    "workers"),
	IGNORED("parallelism", "fsdp_reshard_after_forward", "when FSDP frees "
	    "gathered parameters: the same reduce-scatter"),
	IGNORED_IN(TT_TOML, "parallelism", "disable_loss_parallel", "where the "
	    "cross-entropy of tp-sharded logits runs: the same gradients"),
	IGNORED("parallelism", "enable_async_tensor_parallel", WHY_ASYNC_TP),
	IGNORED_IN(TT_TOML, "parallelism", "enable_compiled_autograd",
	    WHY_COMPILE),
	IGNORED("parallelism", "context_parallel_load_balancer", "how the cp "
	    "ranks share out the tokens: each token's loss is the same"),
	IGNORED_IN(TT_TOML, "parallelism", "context_parallel_rotate_method", "how the cp "
	    "ranks exchange keys and values: the same gradients"),
	IGNORED("parallelism", "expert_parallel_comm_backend", "the "
	    "all-to-all's implementation (standard or DeepEP)"),
	PIPELINE("pipeline_parallel_schedule"),
	PIPELINE("pipeline_parallel_schedule_csv"),
	PIPELINE("pipeline_parallel_microbatch_size"),
	PIPELINE_IN(TT_REGISTRY, "num_pp_microbatches"),
	PIPELINE("pipeline_parallel_layers_per_stage"),
	PIPELINE("pipeline_parallel_first_stage_less_layers"),
	PIPELINE("pipeline_parallel_last_stage_less_layers"),
	PIPELINE("pipeline_parallel_split_points"),
	PIPELINE("pipeline_parallel_expert_parallel_overlap"),
	PIPELINE("module_fqns_per_model_part"),
	/*
	 * torchft (torchtitan/components/ft): replica groups that average
	 * their gradients among themselves (or, with semi_sync_method, their
	 * parameters every sync_steps), over a dimension gradaudit's mesh
	 * does not have.
	 */
	REFUSED_IN(TT_TOML, "fault_tolerance", "enable", "false", "torchft averages over "
	    "replica groups outside torchtitan's mesh, a reduction gradaudit "
	    "does not model"),
	IGNORED_IN(TT_TOML, "fault_tolerance", NULL, "fault tolerance's settings, inert "
	    "while fault_tolerance.enable is false"),

	IGNORED_IN(TT_TOML, "job", NULL, "names the run and its output folders"),
	IGNORED_IN(TT_TOML, "profiling", NULL, "profiler traces and memory snapshots"),
	IGNORED("metrics", NULL, "logging"),
	IGNORED("optimizer", NULL, "the update that follows the synchronized "
	    "gradients"),
	IGNORED("lr_scheduler", NULL, "the learning-rate schedule"),
	IGNORED("checkpoint", NULL, "saves and loads state"),
	IGNORED("activation_checkpoint", NULL, "recomputes activations in "
	    "backward: the same gradients"),
	/* Before compile's other keys: 737594746 (PR #4045) moved it here. */
	IGNORED_IN(TT_REGISTRY, "compile", "enable_async_tensor_parallel",
	    WHY_ASYNC_TP),
	IGNORED("compile", NULL, WHY_COMPILE),
	IGNORED_IN(TT_TOML, "quantize", NULL, WHY_LOWP),
	IGNORED_IN(TT_TOML, "float8", NULL, WHY_LOWP),
	IGNORED_IN(TT_TOML, "mx", NULL, WHY_LOWP),
	IGNORED("comm", NULL, "timeouts and traces of the collectives"),
	IGNORED_IN(TT_TOML, "memory_estimation", NULL, "estimates memory without "
	    "training"),
	IGNORED_IN(TT_TOML, "validation", NULL, "evaluation, without a backward"),
	IGNORED("debug", NULL, "seeds, determinism and forced routing: no "
	    "reduction changes"),
	IGNORED_IN(TT_TOML, "experimental", NULL, "extra config classes, "
	    "whose own keys would be refused here"),

	/*
	 * Main's Trainer.Config (9810191bb on; read at ecae62f15): the
	 * sections and keys the JobConfig did not have.
	 */
	IGNORED_IN(TT_REGISTRY, "hf_assets_path", NULL, "where the tokenizer "
	    "and weights are read from"),
	IGNORED_IN(TT_REGISTRY, "dump_folder", NULL, "names the run's output "
	    "folder"),
	IGNORED_IN(TT_REGISTRY, "profiler", NULL, "profiler traces and "
	    "memory snapshots"),
	IGNORED_IN(TT_REGISTRY, "tokenizer", NULL, "the tokenizer"),
	IGNORED_IN(TT_REGISTRY, "dataloader", NULL, "the data read: "
	    "torchtitan's text datasets pack tokens into whole sequences, "
	    "every label valid"),
	IGNORED_IN(TT_REGISTRY, "validator", NULL, "evaluation, without a "
	    "backward"),
	IGNORED_IN(TT_REGISTRY, "model_converters", NULL, WHY_LOWP),
	/* 786e26f8e (PR #2937): every loss class scales by the step's
	 * valid tokens, chunked or not. */
	IGNORED_IN(TT_REGISTRY, "loss", NULL, "the loss class's "
	    "implementation (chunked or not), each divided by the step's "
	    "valid tokens"),
	IGNORED_IN(TT_REGISTRY, "training", "disable_cuda_graphs", "whether "
	    "the forward and backward are captured and replayed as CUDA "
	    "graphs: the same computation"),
	IGNORED_IN(TT_REGISTRY, "parallelism", "enable_fsdp_symm_mem",
	    "FSDP's collectives in symmetric memory: the same "
	    "reduce-scatter"),
	IGNORED_IN(TT_REGISTRY, "parallelism", "context_parallel_ptrr_mask_key",
	    "how the cp ranks share out the tokens: each token's loss is the "
	    "same"),
	/*
	 * Sequence parallelism off (integration tests pass
	 * --parallelism.no-enable-sequence-parallel) and the spmd_types
	 * backends change tp's placements in code not read.
	 */
	REFUSED_IN(TT_REGISTRY, "parallelism", "enable_sequence_parallel",
	    "true", "tensor parallelism without sequence parallelism places "
	    "the norms and activations in a way gradaudit's profiles of main "
	    "were not read for"),
	REFUSED_IN(TT_REGISTRY, "parallelism", "spmd_backend", "default",
	    "another backend of tp's placements, whose gradients gradaudit's "
	    "profiles of main were not read for"),
	REFUSED_IN(TT_REGISTRY, "override", NULL, NULL, "swaps modules for "
	    "other implementations (torchtitan/overrides), which gradaudit "
	    "cannot follow"),
};

#define NKEYS	(sizeof(keys) / sizeof(keys[0]))

struct import_state {
	struct torchtitan_import	*ti;
	const struct toml_doc		*doc;
	const struct toml_entry		*use[TK__COUNT];
	/* Each entry's key in keys[], or -1. */
	long				*fate;
	int				 errors;
	char				*notes;
	long				 pp;
	/* Pipeline keys read into the configuration, by entry. */
	bool				*read;
	/* pipeline_parallel_microbatch_size with pp > 1, else 0. */
	long				 pp_microbatch;
	/* num_pp_microbatches with pp > 1 (folded), else 0. */
	long				 pp_count;
};

static void	refuse_at(struct import_state *, const struct toml_entry *,
		    const char *, ...) __attribute__((format(printf, 3, 4)));
static void	refuse_value(struct import_state *,
		    const struct toml_entry *, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static void	refuse(struct import_state *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	note(struct import_state *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	explain(struct import_state *, enum cfg_key, const char *,
		    ...) __attribute__((format(printf, 3, 4)));

static void	vrefuse(struct import_state *, const struct toml_entry *, int,
		    int, const char *, va_list)
		    __attribute__((format(printf, 5, 0)));

static void
vrefuse(struct import_state *st, const struct toml_entry *e, int line,
    int col, const char *fmt, va_list ap)
{
	char	*q, *msg, *shown, *file;

	/*
	 * Whole, and visible: the message quotes the file's keys and
	 * values, and a string holding a newline split it in two (the
	 * libFuzzer harness's model.name "llama\\...\n...").
	 */
	xvasprintf(&msg, fmt, ap);
	shown = text_visible(msg);
	file = text_visible(st->doc->name);
	if (e != NULL && e->origin != NULL) {
		/* The registry's entries and the command line's overrides. */
		q = text_visible(e->origin);
		fprintf(stderr, "%s: import: %s: %s\n", progname, q, shown);
		free(q);
	} else if (e != NULL) {
		q = text_visible(e->path);
		fprintf(stderr, "%s: import: %s:%d:%d: %s: %s\n", progname,
		    file, line, col, q, shown);
		free(q);
	} else
		fprintf(stderr, "%s: import: %s: %s\n", progname, file, shown);
	free(file);
	free(shown);
	free(msg);
	st->errors++;
}

/*
 * A key that stops the import: FILE:LINE:COL: KEY: the message, at the
 * key; a default that does (e NULL): FILE: the message.
 */
static void
refuse_at(struct import_state *st, const struct toml_entry *e,
    const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	vrefuse(st, e, e != NULL ? e->line : 0, e != NULL ? e->col : 0, fmt,
	    ap);
	va_end(ap);
}

/* A value that stops the import: as refuse_at, at the value. */
static void
refuse_value(struct import_state *st, const struct toml_entry *e,
    const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	vrefuse(st, e, e != NULL ? e->value.line : 0, e != NULL ?
	    e->value.col : 0, fmt, ap);
	va_end(ap);
}

/* A refusal that no one key is the place of. */
static void
refuse(struct import_state *st, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	vrefuse(st, NULL, 0, 0, fmt, ap);
	va_end(ap);
}

/* Kept until the import succeeds: a refusal makes it moot. */
static void
note(struct import_state *st, const char *fmt, ...)
{
	va_list	 ap;
	char	*line, *more;

	char	*shown;

	va_start(ap, fmt);
	xvasprintf(&line, fmt, ap);
	va_end(ap);
	shown = text_visible(line);
	xasprintf(&more, "%s%s: import: note: %s\n", st->notes != NULL ?
	    st->notes : "", progname, shown);
	free(shown);
	free(line);
	free(st->notes);
	st->notes = more;
}

/* Key k is set; why it has its value, for its comment. */
static void
explain(struct import_state *st, enum cfg_key k, const char *fmt, ...)
{
	va_list	 ap;

	char	*why;

	keyset_add(&st->ti->cfg.given, k);
	free(st->ti->why[k]);
	va_start(ap, fmt);
	xvasprintf(&why, fmt, ap);
	va_end(ap);
	/* A comment of the YAML written: one line, whatever a value held. */
	st->ti->why[k] = text_visible(why);
	free(why);
}

/* The entry in keys[] for e in config system sys, or -1. */
static long
key_of(const struct toml_entry *e, unsigned sys)
{
	size_t	 i;

	for (i = 0; i < NKEYS; i++) {
		if ((keys[i].systems & sys) == 0 ||
		    strcmp(keys[i].section, e->keys[0]) != 0)
			continue;
		/* A JobConfig key is in a table; main has top-level ones. */
		if (e->nkeys < 2 && (keys[i].name != NULL ||
		    sys != TT_REGISTRY))
			continue;
		if (keys[i].name == NULL)
			return (long)i;
		if (strcmp(keys[i].name, e->keys[1]) != 0)
			continue;
		/* A mapped key is a value, not a table of them. */
		if (keys[i].fate == TT_MAPPED && e->nkeys != 2)
			return -1;
		return (long)i;
	}
	return -1;
}

/* A scalar as TOML wrote it, for comparing with inert values. */
static bool
is_inert(const struct toml_value *v, const char *inert)
{
	if (inert == NULL)
		return false;
	if (v->type == TOML_BOOLEAN)
		return strcmp(inert, v->boolean ? "true" : "false") == 0;
	if (v->type == TOML_STRING)
		return strcmp(inert, v->string) == 0;
	return false;
}

/*
 * The value with which refused key k changes nothing: the table's, but
 * for spmd_backend the default of the commit read, which 5ab3a0fd1 (PR
 * #4085) made spmd_types.
 */
static const char *
inert_of(const struct import_state *st, long k)
{
	if (st->ti->spmd_default != NULL &&
	    strcmp(keys[k].section, "parallelism") == 0 &&
	    keys[k].name != NULL && strcmp(keys[k].name, "spmd_backend") == 0)
		return st->ti->spmd_default;
	return keys[k].inert;
}

/*
 * The name of table section nearest name, in config system sys; NULL
 * when none is near.
 */
static const char *
nearest_name(const char *section, const char *name, unsigned sys)
{
	struct suggestion	 sg;
	size_t			 i;

	suggest_init(&sg, name, strlen(name));
	for (i = 0; i < NKEYS; i++)
		if ((keys[i].systems & sys) != 0 && keys[i].name != NULL &&
		    strcmp(keys[i].section, section) == 0)
			suggest_consider(&sg, keys[i].name);
	return suggest_best(&sg);
}

/*
 * The known key nearest e's, as "did you mean" says it for YAML keys and
 * options: a name of e's table when its table is known, else a table
 * (in a TOML file, its header).  Main's command line is answered with an
 * option, --TABLE.NAME or a top-level --NAME, never a bare table name.
 * Never the word given: a table written as a key ("parallelism = 3", or
 * --parallelism 3) is answered "did you mean [parallelism]?" by nothing
 * useful.  Into buf; false when none is near.
 */
static bool
nearest_key(const struct toml_entry *e, unsigned sys, char *buf,
    size_t len)
{
	struct suggestion	 sg;
	const char		*section = NULL, *name;
	bool			 top = false;
	size_t			 i;

	for (i = 0; i < NKEYS && section == NULL; i++)
		if ((keys[i].systems & sys) != 0 &&
		    strcmp(keys[i].section, e->keys[0]) == 0)
			section = keys[i].section;
	if (section != NULL) {
		if (e->nkeys < 2 ||
		    (name = nearest_name(section, e->keys[1], sys)) == NULL)
			return false;
		snprintf(buf, len, " (did you mean %s%s.%s?)", sys ==
		    TT_TOML ? "" : "--", section, name);
		return true;
	}
	suggest_init(&sg, e->keys[0], strlen(e->keys[0]));
	for (i = 0; i < NKEYS; i++)
		if ((keys[i].systems & sys) != 0)
			suggest_consider(&sg, keys[i].section);
	if ((section = suggest_best(&sg)) == NULL)
		return false;
	if (sys == TT_TOML) {
		snprintf(buf, len, " (did you mean [%s]?)", section);
		return true;
	}
	for (i = 0; i < NKEYS && !top; i++)
		top = (keys[i].systems & sys) != 0 && keys[i].name == NULL &&
		    strcmp(keys[i].section, section) == 0;
	/*
	 * A section main takes whole (a top-level option, or a table
	 * every key of which is known) takes the key as given, if no
	 * longer than a word suggest weighs (the hint's buffer).
	 */
	if (top && e->nkeys < 2)
		snprintf(buf, len, " (did you mean --%s?)", section);
	else if (top && e->nkeys == 2 &&
	    strlen(e->keys[1]) <= SUGGEST_MAX_LEN)
		snprintf(buf, len, " (did you mean --%s.%s?)", section,
		    e->keys[1]);
	else if (!top && e->nkeys >= 2 &&
	    (name = nearest_name(section, e->keys[1], sys)) != NULL)
		snprintf(buf, len, " (did you mean --%s.%s?)", section, name);
	else
		return false;
	return true;
}

/* Sort every key of the file by its fate; refuse the unknown ones. */
static void
sort_keys(struct import_state *st)
{
	const struct toml_entry	*e;
	size_t			 i;
	long			 k;
	char			 hint[2 * SUGGEST_MAX_LEN + 32];
	unsigned		 sys = st->ti->registry ? TT_REGISTRY : TT_TOML;

	st->fate = xcalloc(st->doc->n + 1, sizeof(*st->fate));
	for (i = 0; i < st->doc->n; i++) {
		e = &st->doc->entries[i];
		st->fate[i] = k = key_of(e, sys);
		if (k < 0) {
			if (!nearest_key(e, sys, hint, sizeof hint))
				hint[0] = '\0';
			refuse_at(st, e, "not a key of torchtitan's %s that "
			    "gradaudit knows: an unknown key could change "
			    "anything%s", st->ti->registry ? "Trainer.Config "
			    "(main)" : "JobConfig", hint);
		}
		else if (keys[k].fate == TT_MAPPED)
			st->use[k] = e;
		else if (keys[k].fate == TT_REFUSED &&
		    !is_inert(&e->value, inert_of(st, k)))
			refuse_value(st, e, "%s", keys[k].why);
	}
}

/*
 * An integer key's value that is no 64-bit integer, refused.  A command
 * line's word of digits past 64 bits is a string (torchtitan-args.c
 * scalar), and "expected an integer, not a string" said of a 900,000-digit
 * number misled: it is an integer out of range.
 */
static void
refuse_not_int(struct import_state *st, const struct toml_entry *e, long lo,
    long hi)
{
	const char	*w = e->value.string;
	char		 q[TEXT_QUOTE_SIZE];

	if (e->value.type == TOML_STRING && w != NULL &&
	    w[*w == '-' || *w == '+'] != '\0' &&
	    strspn(w + (*w == '-' || *w == '+'), "0123456789") ==
	    strlen(w + (*w == '-' || *w == '+'))) {
		text_escape(q, sizeof q, w, strlen(w));
		refuse_value(st, e, "%s is out of range (%ld to %ld)", q, lo,
		    hi);
		return;
	}
	refuse_value(st, e, "expected an integer, not %s",
	    toml_type_name(e->value.type));
}

/*
 * An integer key: its value, from lo to hi, or def when not given.  A
 * value of the wrong type or range is refused, and def returned.
 */
static long
int_key(struct import_state *st, enum mapped_key k, long def, long lo,
    long hi)
{
	const struct toml_entry	*e = st->use[k];

	if (e == NULL)
		return def;
	if (e->value.type != TOML_INTEGER) {
		refuse_not_int(st, e, lo, hi);
		return def;
	}
	if (e->value.integer < lo || e->value.integer > hi) {
		refuse_value(st, e, "%lld is out of range (%ld to %ld)",
		    e->value.integer, lo, hi);
		return def;
	}
	return (long)e->value.integer;
}

static const char *
string_key(struct import_state *st, enum mapped_key k, const char *def)
{
	const struct toml_entry	*e = st->use[k];

	if (e == NULL)
		return def;
	if (e->value.type != TOML_STRING) {
		refuse_value(st, e, "expected a string, not %s",
		    toml_type_name(e->value.type));
		return def;
	}
	return e->value.string;
}

/* "parallelism.tensor_parallel_degree" or "torchtitan's default". */
static const char *
source_of(const struct import_state *st, enum mapped_key k)
{
	if (st->use[k] == NULL)
		return "torchtitan's default";
	return st->use[k]->origin != NULL ? st->use[k]->origin :
	    st->use[k]->path;
}

/* The degrees ParallelDims takes, as read. */
struct degrees {
	long	 dp_replicate, dp_shard, tp, pp, cp, ep, etp;
};

/*
 * The mesh, as ParallelDims._validate makes it: dp_shard -1 is what the
 * world leaves, and the product of the degrees must be the world.
 */
static bool
import_mesh(struct import_state *st, struct degrees *d)
{
	struct config	*c = &st->ti->cfg;
	const long	 max = 1L << 20;
	long		 rest, world = st->ti->world;
	int		 errors = st->errors;

	d->dp_replicate = int_key(st, TK_DP_REPLICATE, 1, 1, max);
	d->dp_shard = int_key(st, TK_DP_SHARD, -1, -1, max);
	d->tp = int_key(st, TK_TP, 1, 1, max);
	d->pp = int_key(st, TK_PP, 1, 1, max);
	d->cp = int_key(st, TK_CP, 1, 1, max);
	d->ep = int_key(st, TK_EP, 1, 1, max);
	d->etp = int_key(st, TK_ETP, 1, 1, max);
	if (d->dp_shard == 0)
		refuse_value(st, st->use[TK_DP_SHARD], "0: torchtitan asserts "
		    "\"dp_shard must -1 or >=1.\"");
	if (st->errors > errors)
		return false;
	rest = d->dp_replicate * d->cp * d->tp * d->pp;
	if (d->dp_shard == -1 && world == 0) {
		refuse(st, "%s is -1, the ranks the others leave: give "
		    "--world", keys[TK_DP_SHARD].name);
		return false;
	}
	if (d->dp_shard == -1)
		d->dp_shard = world / rest;
	if (world == 0)
		world = rest * d->dp_shard;
	if (d->dp_shard < 1 || rest * d->dp_shard != world) {
		refuse(st, "--world %ld is impossible: torchtitan asserts "
		    "\"Invalid parallel dims: dp_replicate(%ld) * dp_shard(%ld)"
		    " * cp(%ld) * tp(%ld) * pp(%ld) != WORLD_SIZE(%ld)\" "
		    "(ParallelDims._validate)", world, d->dp_replicate,
		    d->dp_shard, d->cp, d->tp, d->pp, world);
		return false;
	}
	if (world > max) {
		refuse(st, "a world of %ld ranks: gradaudit's mesh holds at "
		    "most %ld", world, max);
		return false;
	}
	if (d->ep > 1 && d->etp != d->tp && d->etp != 1) {
		refuse_value(st, st->use[TK_ETP], "%ld with tp %ld: torchtitan "
		    "asserts \"Currently we only support ETP=TP or ETP=1\" "
		    "(ParallelDims._validate)", d->etp, d->tp);
		return false;
	}
	st->pp = d->pp;
	c->mesh.dp = (int)(d->dp_replicate * d->dp_shard);
	if (st->use[TK_DP_SHARD] != NULL &&
	    st->use[TK_DP_SHARD]->value.integer == -1)
		explain(st, KEY_DP, "data_parallel_shard_degree -1: --world "
		    "%ld / (tp %ld * cp %ld * pp %ld), dp_replicate %ld * "
		    "dp_shard %ld", world, d->tp, d->cp, d->pp,
		    d->dp_replicate, d->dp_shard);
	else
		explain(st, KEY_DP, "dp_replicate %ld * dp_shard %ld",
		    d->dp_replicate, d->dp_shard);
	if (d->dp_replicate > 1) {
		c->mesh.dp_replicate = (int)d->dp_replicate;
		explain(st, KEY_DP_REPLICATE, "%s",
		    source_of(st, TK_DP_REPLICATE));
	}
	c->mesh.tp = (int)d->tp;
	explain(st, KEY_TP, "%s", source_of(st, TK_TP));
	c->mesh.pp = (int)d->pp;
	explain(st, KEY_PP, "%s", source_of(st, TK_PP));
	c->mesh.cp = (int)d->cp;
	explain(st, KEY_CP, "%s", source_of(st, TK_CP));
	return true;
}

/* The entry of [parallelism] key name, or NULL. */
static const struct toml_entry *
pipeline_key(struct import_state *st, const char *name, size_t *at)
{
	const struct toml_entry	*e;
	size_t			 i;

	for (i = 0; i < st->doc->n; i++) {
		e = &st->doc->entries[i];
		if (e->nkeys == 2 && strcmp(e->keys[0], "parallelism") == 0 &&
		    strcmp(e->keys[1], name) == 0) {
			if (at != NULL)
				*at = i;
			return e;
		}
	}
	return NULL;
}

/* An integer pipeline key, from lo, or def; read, so not "ignored". */
static long
pipeline_int(struct import_state *st, const char *name, long def, long lo)
{
	const struct toml_entry	*e;
	size_t			 at;

	if ((e = pipeline_key(st, name, &at)) == NULL)
		return def;
	st->read[at] = true;
	if (e->value.type != TOML_INTEGER) {
		refuse_not_int(st, e, lo, CFG_MAX_LAYERS);
		return def;
	}
	if (e->value.integer < lo || e->value.integer > CFG_MAX_LAYERS) {
		refuse_value(st, e, "%lld is out of range (%ld to %d)",
		    e->value.integer, lo, CFG_MAX_LAYERS);
		return def;
	}
	return (long)e->value.integer;
}

/*
 * With pp > 1, torchtitan's own split of the layers over the stages
 * (torchtitan/distributed/pipeline_parallel.py at v0.2.2): pipeline_llm
 * takes one stage a rank for a single-stage schedule (1F1B, GPipe), and
 * generate_llm_fqn_per_model_part cuts n_layers plus the embedding and
 * the output, weighing pipeline_parallel_first_stage_less_layers and
 * _last_stage_less_layers layers (1 each by default), into stages of
 * effective // stages layers, the first effective % stages stages one
 * more; the first stage's embedding and the last's output take their
 * weight out of those.  gradaudit's first_stage_layers and
 * last_stage_layers hold that split when the stages between are equal.
 * Multi-stage schedules (several stages a rank, in loop or V order) and
 * hand-made splits are refused.
 */
static void
import_pipeline(struct import_state *st, const struct tt_flavor *f)
{
	static const char *const single[] = { "1F1B", "GPipe" };
	static const char *const handmade[] = { "module_fqns_per_model_part",
	    "pipeline_parallel_schedule_csv", "pipeline_parallel_split_points" };
	struct config		*c = &st->ti->cfg;
	const struct toml_entry	*e;
	const char		*schedule = "1F1B";
	long			 in, out, lps, effective, per, extra, pp = st->pp;
	long			 count[2], n, left = f->layers, k, stage, middle = -1;
	size_t			 i, at;
	int			 errors = st->errors;

	if (pp <= 1)
		return;
	for (i = 0; i < sizeof(handmade) / sizeof(handmade[0]); i++)
		if ((e = pipeline_key(st, handmade[i], &at)) != NULL &&
		    !(e->value.type == TOML_STRING && *e->value.string ==
		    '\0')) {
			st->read[at] = true;
			refuse_at(st, e, "a split of the stages by hand; the "
			    "importer computes torchtitan's own");
		}
	errors = st->errors;
	if ((e = pipeline_key(st, "pipeline_parallel_schedule", &at)) !=
	    NULL) {
		st->read[at] = true;
		if (e->value.type != TOML_STRING)
			refuse_value(st, e, "expected a string, not %s",
			    toml_type_name(e->value.type));
		else
			schedule = e->value.string;
	}
	/* torch.distributed.pipelining get_schedule_class: any case. */
	for (i = 0; i < 2 && strcasecmp(schedule, single[i]) != 0; i++)
		;
	if (i == 2 && e != NULL && st->errors == errors)
		refuse_value(st, e, "%s: a multi-stage schedule holds several "
		    "stages a rank, which the importer does not map yet (1F1B "
		    "and GPipe hold one)", schedule);
	if ((e = pipeline_key(st, "pipeline_parallel_expert_parallel_overlap",
	    &at)) != NULL)
		st->read[at] = true;
	if (st->ti->folded)
		st->pp_count = pipeline_int(st, "num_pp_microbatches", 1, 1);
	else
		st->pp_microbatch = pipeline_int(st,
		    "pipeline_parallel_microbatch_size", 1, 1);
	in = pipeline_int(st, "pipeline_parallel_first_stage_less_layers", 1,
	    0);
	out = pipeline_int(st, "pipeline_parallel_last_stage_less_layers", 1,
	    0);
	lps = pipeline_int(st, "pipeline_parallel_layers_per_stage", 0, 1);
	if (st->errors > errors)
		return;
	effective = f->layers + in + out;
	if (lps > 0 && (effective + lps - 1) / lps != pp) {
		refuse_value(st, pipeline_key(st,
		    "pipeline_parallel_layers_per_stage", NULL), "%ld: %ld "
		    "stages of %ld effective layers over pp %ld, not one a "
		    "rank as a single-stage schedule needs (pipeline_llm)",
		    lps, (effective + lps - 1) / lps, effective, pp);
		return;
	}
	per = effective / pp;
	extra = effective % pp;
	if (pp > effective || per == 0 || in > per || out > per) {
		refuse_value(st, st->use[TK_PP], "%ld stages for %ld effective "
		    "layers (n_layers %d + %ld + %ld): torchtitan raises "
		    "ValueError (generate_llm_fqn_per_model_part)", pp,
		    effective, f->layers, in, out);
		return;
	}
	/* Each stage's transformer layers, as the loop hands them out. */
	for (stage = 0; stage < pp; stage++) {
		k = per + (stage < extra) - (stage == 0 ? in : 0) -
		    (stage == pp - 1 ? out : 0);
		n = k < left ? k : left;
		left -= n;
		if (stage == 0)
			count[0] = n;
		else if (stage == pp - 1)
			count[1] = n;
		else if (middle >= 0 && n != middle) {
			refuse_value(st, st->use[TK_PP], "%ld: torchtitan's "
			    "split gives the stages between the first and the "
			    "last unequal layer counts (%ld and %ld), which "
			    "gradaudit's model.first_stage_layers and "
			    "last_stage_layers cannot express", pp, middle, n);
			return;
		} else
			middle = n;
	}
	if (count[0] == 0 || count[1] == 0 || middle == 0) {
		refuse_value(st, st->use[TK_PP], "%ld: torchtitan's split "
		    "leaves a stage without a transformer layer, which "
		    "gradaudit's stages cannot be", pp);
		return;
	}
	c->model.first_stage_layers = (int)count[0];
	explain(st, KEY_FIRST_STAGE_LAYERS, "torchtitan's split of %d layers "
	    "+ %ld + %ld over %ld stages (generate_llm_fqn_per_model_part)",
	    f->layers, in, out, pp);
	c->model.last_stage_layers = (int)count[1];
	explain(st, KEY_LAST_STAGE_LAYERS, "the same split");
}

/*
 * "0111...": DeepSeek-V3's dense first layers, then experts; "0101...":
 * llama4's experts in every step-th layer.
 */
static char *
moe_pattern(int layers, int dense, int step)
{
	char	*s = xmalloc((size_t)layers + 1);
	int	 i;

	for (i = 0; i < layers; i++)
		s[i] = i >= dense && (step <= 1 || (i + 1) % step == 0) ?
		    '1' : '0';
	s[layers] = '\0';
	return s;
}

static void
import_moe(struct import_state *st, const struct tt_flavor *f,
    const struct degrees *d, const char *what)
{
	struct config	*c = &st->ti->cfg;

	c->model.has_moe = true;
	c->model.moe.experts = f->experts;
	explain(st, KEY_EXPERTS, "%s num_experts", what);
	c->model.moe.top_k = f->top_k;
	explain(st, KEY_TOP_K, "%s top_k", what);
	c->model.moe.expert_ffn = f->expert_ffn;
	explain(st, KEY_EXPERT_FFN, "%s: each routed expert's width", what);
	c->model.moe.score_before_experts = f->score_before_experts;
	explain(st, KEY_SCORE_BEFORE_EXPERTS, "%s score_before_experts", what);
	c->model.moe.score_func = f->sigmoid ? SCORE_SIGMOID : SCORE_SOFTMAX;
	explain(st, KEY_SCORE_FUNC, "%s score_func", what);
	c->model.moe.shared_experts = f->shared_ffn > 0 ? 1 : 0;
	explain(st, KEY_SHARED_EXPERTS, "%s: the shared experts are one "
	    "FeedForward", what);
	if (f->shared_ffn > 0) {
		c->model.moe.shared_expert_ffn = f->shared_ffn;
		explain(st, KEY_SHARED_EXPERT_FFN, "%s: the shared experts' "
		    "width", what);
	}
	if (f->dense_first > 0) {
		c->model.moe.pattern = moe_pattern(f->layers, f->dense_first,
		    f->moe_step);
		explain(st, KEY_PATTERN, "%s n_dense_layers %d", what,
		    f->dense_first);
	} else if (f->moe_step > 1) {
		c->model.moe.pattern = moe_pattern(f->layers, 0, f->moe_step);
		explain(st, KEY_PATTERN, "%s interleave_moe_layer_step %d",
		    what, f->moe_step);
	}
	/*
	 * apply_moe_ep_tp (models/llama4/infra/parallelize.py, v0.2.2):
	 * without an ep mesh the experts take the tp mesh (TensorParallel),
	 * so their tensor parallelism is tp whatever the etp key says.
	 */
	c->mesh.ep = (int)d->ep;
	explain(st, KEY_EP, "%s", source_of(st, TK_EP));
	c->mesh.etp = (int)(d->ep > 1 ? d->etp : d->tp);
	if (d->ep > 1)
		explain(st, KEY_ETP, "%s", source_of(st, TK_ETP));
	else
		explain(st, KEY_ETP, "tp: with ep 1 the experts are sharded "
		    "over tp (apply_moe_ep_tp)");
	note(st, "%s: load_balance_coeff moves expert_bias, a buffer no "
	    "gradient reaches; torchtitan has no auxiliary loss to audit",
	    what);
}

/* [model] name and flavor: the sizes of the flavour tables, or NULL. */
static const struct tt_flavor *
import_model(struct import_state *st, const struct degrees *d)
{
	struct config		*c = &st->ti->cfg;
	const struct tt_flavor	*f;
	const char		*name, *flavor;
	char			*what, names[512];
	bool			 known;
	int			 errors = st->errors;

	/* torchtitan's Model defaults: llama3, debugmodel. */
	name = string_key(st, TK_NAME, "llama3");
	flavor = string_key(st, TK_FLAVOR, "debugmodel");
	if (st->errors > errors)
		return NULL;
	if ((f = tt_flavor_find(name, flavor, st->ti->version, &known)) ==
	    NULL) {
		tt_flavor_names(name, names, sizeof(names));
		refuse_value(st, st->use[TK_FLAVOR] != NULL ? st->use[TK_FLAVOR] :
		    st->use[TK_NAME], "%s %s is not in the flavour tables "
		    "gradaudit read%s%s (%s)", name, flavor,
		    known ? " for torchtitan " : "",
		    known ? st->ti->version : "", names);
		return NULL;
	}
	xasprintf(&what, "%s %s", name, flavor);
	c->model.vocab = f->vocab;
	explain(st, KEY_VOCAB, "%s vocab_size", what);
	c->model.hidden = f->dim;
	explain(st, KEY_HIDDEN, "%s dim", what);
	c->model.ffn = f->ffn;
	explain(st, KEY_FFN, "%s FeedForward's width", what);
	c->model.layers = f->layers;
	explain(st, KEY_LAYERS, "%s n_layers", what);
	c->model.tie_embeddings = f->tied;
	explain(st, KEY_TIE_EMBEDDINGS, "%s%s", what, f->tied ?
	    " enable_weight_tying" : ": output not tied");
	if (f->qk_norm) {
		c->model.qk_norm = true;
		explain(st, KEY_QK_NORM, "%s qk_norm", what);
		c->model.head_dim = f->head_dim;
		explain(st, KEY_HEAD_DIM, "%s head_dim", what);
	}
	if (f->mla && d->tp > 1)
		refuse_at(st, st->use[TK_TP], "%ld with %s's multi-latent "
		    "attention: its tensor-parallel plan (wkv_a and kv_norm "
		    "replicated over tp) is not one gradaudit's mixer stands "
		    "for", d->tp, what);
	else if (f->mla)
		note(st, "%s: the mixer stands for multi-latent attention's "
		    "parameters, all replicated over dp and sharded by FSDP "
		    "alike; MLA's sizes are not the stand-in's", what);
	if (f->experts > 0)
		import_moe(st, f, d, what);
	else if (d->ep > 1)
		note(st, "expert_parallel_degree %ld: %s has no experts", d->ep,
		    what);
	note(st, "the sizes of %s are from %s", what, st->ti->version !=
	    NULL && strcmp(st->ti->version, "main") == 0 ? f->main :
	    f->source);
	free(what);
	return f;
}

/*
 * main from 73aed7f6c (PR #4121), which folds the batch into the tokens:
 * a micro-batch is one stream of num_tokens_per_microbatch_per_dp_rank
 * tokens, packed from documents whose positions restart every
 * max_context_length, and cp and sequence parallelism shard that stream
 * (the trainer checks its divisor, limits.seq_divisor).  gradaudit's
 * micro-batch is then one sample of that many tokens: model.seq is the
 * stream, model.micro_batch 1.  Any other split (max_context_length
 * tokens a sample) would shard each sample where torchtitan shards the
 * stream; with the loss divided by the step's tokens either gives the
 * same gradients, and this one keeps torchtitan's divisibility.
 * Gradient accumulation is Trainer.__init__'s: num_tokens_per_train_step
 * over the tokens one iteration takes, num_tokens_per_microbatch_per_dp
 * _rank * num_pp_microbatches (pp > 1, else 1) * the data-parallel degree.
 */
static void
import_tokens(struct import_state *st, const struct degrees *d, bool mesh)
{
	struct config		*c = &st->ti->cfg;
	const struct toml_entry	*e;
	const long		 max = 1L << 20;
	long			 tokens, step, context, iteration, steps;
	long			 pp = st->pp_count > 0 ? st->pp_count : 1;
	int			 errors = st->errors;

	/* 73aed7f6c configs.py TrainingConfig: 16384, -1, 2048. */
	tokens = int_key(st, TK_TOKENS, 16384, 1, max);
	step = int_key(st, TK_STEP_TOKENS, -1, -1, (long)1 << 40);
	context = int_key(st, TK_CONTEXT, 2048, (long)INT_MIN, max);
	if (st->use[TK_STEP_TOKENS] != NULL && (step == 0 || step < -1))
		refuse_value(st, st->use[TK_STEP_TOKENS], "%ld: torchtitan "
		    "raises \"num_tokens_per_train_step must be -1 or greater "
		    "than 0.\" (TrainingConfig.__post_init__)", step);
	/*
	 * 56bbb5202 (PR #4260) raises at once; before it the packing's
	 * positions, arange % max_context_length, fail or go wrong later.
	 */
	if (context <= 0)
		refuse_value(st, st->use[TK_CONTEXT], "%ld: torchtitan raises "
		    "\"max_context_length must be greater than 0.\" "
		    "(TrainingConfig.__post_init__ from 56bbb5202; before it "
		    "the packing divides positions by it)", context);
	/* Trainer.Config.__post_init__ checks it with or without pp. */
	if (st->pp_count == 0 && (e = pipeline_key(st, "num_pp_microbatches",
	    NULL)) != NULL && e->value.type == TOML_INTEGER &&
	    e->value.integer <= 0)
		refuse_value(st, e, "%lld: torchtitan raises \"parallelism."
		    "num_pp_microbatches must be greater than 0.\" "
		    "(Trainer.Config.__post_init__)", e->value.integer);
	if (st->errors > errors || !mesh)
		return;
	c->model.seq = (int)tokens;
	explain(st, KEY_SEQ, "%s: one stream a micro-batch, positions "
	    "restarting every %ld", source_of(st, TK_TOKENS), context);
	c->model.micro_batch = 1;
	explain(st, KEY_MICRO_BATCH, "73aed7f6c folds the batch into the "
	    "stream");
	iteration = tokens * pp * d->dp_replicate * d->dp_shard;
	if (step > 0 && step % iteration != 0) {
		refuse_value(st, st->use[TK_STEP_TOKENS], "%ld: torchtitan "
		    "raises ValueError: it must be divisible by the number of "
		    "tokens processed globally in one gradient accumulation "
		    "iteration (%ld: %ld tokens * %ld pipeline micro-batches * "
		    "dp %ld, Trainer.__init__)", step, iteration, tokens, pp,
		    d->dp_replicate * d->dp_shard);
		return;
	}
	steps = step > 0 ? step / iteration : 1;
	if (steps * pp > 32) {
		refuse_value(st, st->use[TK_STEP_TOKENS] != NULL ?
		    st->use[TK_STEP_TOKENS] : st->use[TK_TOKENS], "%ld "
		    "micro-batches a step: gradaudit's training.micro_batches "
		    "holds at most 32", steps * pp);
		return;
	}
	c->training.micro_batches = (int)(steps * pp);
	if (step > 0)
		explain(st, KEY_MICRO_BATCHES, "num_tokens_per_train_step %ld / "
		    "%ld tokens an iteration%s", step, iteration, pp > 1 ?
		    ", times num_pp_microbatches" : "");
	else if (pp > 1)
		explain(st, KEY_MICRO_BATCHES, "parallelism.num_pp_microbatches");
	else
		explain(st, KEY_MICRO_BATCHES, "no num_tokens_per_train_step: "
		    "one micro-batch a rank and step");
	c->loss.valid_tokens = xstrdup("all");
	explain(st, KEY_VALID_TOKENS, "the text datasets' packing fills "
	    "every stream with labelled tokens");
}

/*
 * [training]: the micro-batch, the sequence, gradient accumulation, which
 * takes the mesh (without one, the values are only checked).
 */
static void
import_training(struct import_state *st, const struct degrees *d,
    bool mesh)
{
	struct config	*c = &st->ti->cfg;
	const long	 max = 1L << 20;
	long		 local, global, batch, steps, micro;
	int		 errors = st->errors;

	/* v0.2.2 job_config.py Training: 8, -1, 2048. */
	local = int_key(st, TK_LOCAL_BATCH, 8, 1, max);
	global = int_key(st, TK_GLOBAL_BATCH, -1, -1, (long)1 << 40);
	c->model.seq = (int)int_key(st, TK_SEQ, 2048, 1, max);
	if (st->errors > errors || !mesh)
		return;
	explain(st, KEY_SEQ, "%s", source_of(st, TK_SEQ));
	/*
	 * build_pipeline_schedule (distributed/pipeline_parallel.py): with
	 * pp > 1 a rank's local batch runs as local_batch_size //
	 * pipeline_parallel_microbatch_size micro-batches, each its own
	 * forward and backward.
	 */
	if (st->pp_microbatch > 0 && local % st->pp_microbatch != 0) {
		refuse_value(st, st->use[TK_LOCAL_BATCH], "%ld%s is no "
		    "multiple of pipeline_parallel_microbatch_size %ld: the "
		    "pipeline's micro-batches would be unequal", local,
		    st->use[TK_LOCAL_BATCH] == NULL ? " (local_batch_size, "
		    "torchtitan's default)" : "", st->pp_microbatch);
		return;
	}
	micro = st->pp_microbatch > 0 ? local / st->pp_microbatch : 1;
	c->model.micro_batch = (int)(local / micro);
	if (micro > 1)
		explain(st, KEY_MICRO_BATCH, "parallelism.pipeline_parallel_"
		    "microbatch_size");
	else
		explain(st, KEY_MICRO_BATCH, "%s", source_of(st,
		    TK_LOCAL_BATCH));
	/*
	 * Trainer.__init__ (train.py): global_batch_size -1 is local *
	 * dp_replicate * dp_shard, which it must be a multiple of; the
	 * quotient is the gradient accumulation steps.
	 */
	batch = local * d->dp_replicate * d->dp_shard;
	if (global == 0 || global < -1)
		refuse_value(st, st->use[TK_GLOBAL_BATCH], "%ld: torchtitan "
		    "asserts \"global_batch_size > 0\" (-1: local_batch_size "
		    "times the data-parallel degree)", global);
	else if (global > 0 && global % batch != 0)
		refuse_value(st, st->use[TK_GLOBAL_BATCH], "%ld: torchtitan "
		    "asserts that it divides by local_batch_size %ld * the "
		    "data-parallel degree %ld (Trainer.__init__)", global,
		    local, d->dp_replicate * d->dp_shard);
	else {
		steps = global > 0 ? global / batch : 1;
		if (steps * micro > 32) {
			refuse_value(st, st->use[TK_GLOBAL_BATCH] != NULL ?
			    st->use[TK_GLOBAL_BATCH] : st->use[TK_LOCAL_BATCH],
			    "%ld micro-batches a step: gradaudit's "
			    "training.micro_batches holds at most 32",
			    steps * micro);
			return;
		}
		c->training.micro_batches = (int)(steps * micro);
		if (global > 0)
			explain(st, KEY_MICRO_BATCHES, "global_batch_size %ld "
			    "/ (local_batch_size %ld * dp %ld)%s", global, local,
			    d->dp_replicate * d->dp_shard, micro > 1 ?
			    ", times the pipeline's micro-batches" : "");
		else if (micro > 1)
			explain(st, KEY_MICRO_BATCHES, "local_batch_size %ld / "
			    "pipeline_parallel_microbatch_size %ld", local,
			    local / micro);
		else
			explain(st, KEY_MICRO_BATCHES, "no global_batch_size: "
			    "one step of local_batch_size a rank");
	}
	c->loss.valid_tokens = xstrdup("all");
	explain(st, KEY_VALID_TOKENS, "torchtitan's text datasets pack "
	    "tokens into whole sequences");
}

/*
 * The ignored keys, one line a reason, in the order the file gives
 * them: "ignored job.dump_folder, job.description: names the run ...".
 */
static void
list_ignored(struct import_state *st)
{
	const char	*why;
	size_t		 i, j;
	long		 k;
	bool		*done;

	done = xcalloc(st->doc->n + 1, sizeof(*done));
	for (i = 0; i < st->doc->n; i++) {
		if (done[i] || st->read[i] || (k = st->fate[i]) < 0 ||
		    keys[k].fate == TT_MAPPED)
			continue;
		why = keys[k].why;
		if (keys[k].fate == TT_REFUSED)
			why = "set to the value that changes nothing";
		fprintf(stderr, "%s: import: ignored", progname);
		for (j = i; j < st->doc->n; j++) {
			k = st->fate[j];
			if (done[j] || st->read[j] || k < 0 ||
			    keys[k].fate == TT_MAPPED ||
			    strcmp(keys[k].fate == TT_REFUSED ? "set to the "
			    "value that changes nothing" : keys[k].why,
			    why) != 0)
				continue;
			done[j] = true;
			fprintf(stderr, "%s %s", j == i ? "" : ",",
			    st->doc->entries[j].path);
		}
		fprintf(stderr, ": %s\n", why);
	}
	free(done);
}

int
torchtitan_import(struct torchtitan_import *ti, const struct toml_doc *doc)
{
	struct import_state	*st;
	struct degrees		 d;
	const struct tt_flavor	*f;
	bool			 mesh;
	int			 rc = -1;

	st = xcalloc(1, sizeof(*st));
	st->ti = ti;
	st->doc = doc;
	memset(&d, 0, sizeof(d));
	/* Every refused key is named in one run, unknown ones included. */
	sort_keys(st);
	st->read = xcalloc(doc->n + 1, sizeof(*st->read));
	mesh = import_mesh(st, &d);
	f = import_model(st, &d);
	if (mesh && f != NULL)
		import_pipeline(st, f);
	if (ti->folded)
		import_tokens(st, &d, mesh);
	else
		import_training(st, &d, mesh);
	if (st->errors == 0 && ti->prior_errors == 0) {
		fputs(st->notes != NULL ? st->notes : "", stderr);
		list_ignored(st);
		rc = 0;
	}
	free(st->notes);
	free(st->read);
	free(st->fate);
	free(st);
	return rc;
}

void
torchtitan_import_free(struct torchtitan_import *ti)
{
	int	 k;

	for (k = 0; k < KEY__COUNT; k++) {
		free(ti->why[k]);
		ti->why[k] = NULL;
	}
	cfg_free(&ti->cfg);
}
