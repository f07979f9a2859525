/*
 * The fix of each finding as settings, checked by auditing the config
 * again (fix.h).  Which settings bear on which finding is data: the
 * families below, the launch flags of the frameworks that change a
 * profile's settings, and one sentence per setting for the prose.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/constraints.h"
#include "config/framework.h"
#include "model/lossnorm.h"
#include "model/mesh.h"
#include "symbolic/audit.h"
#include "symbolic/context.h"
#include "symbolic/fix.h"
#include "symbolic/symbolic.h"

/* The most settings one fix changes (a flag's, or two of a family). */
#define FIX_MAX_SETTINGS	8
/* Fixes that remove a finding but add another, to be completed. */
#define FIX_MAX_PARTIALS	4
/* The most settings a completed fix has, besides a flag's. */
#define FIX_DEPTH		3
/* The most audits one finding's search may run. */
#define FIX_MAX_TRIES		400
/* The most loss recipes kept (lossnorm's checks pass for them). */
#define FIX_MAX_RECIPES		64
#define FIX_TEXT_SIZE		2048
/*
 * An audit larger than this is freed while its fixes are audited, and
 * audited again after: a second audit held beside it doubled the memory
 * of check on 32,768 ranks (tests/memory.test).
 */
#define FIX_FRUGAL_BYTES	((size_t)8 << 20)

/*
 * The settings that bear on a finding, in the order they are tried after
 * its cause.  Each ends with KEY__COUNT.  A finding's family is that of
 * its cause, else that of its kind (kind_families).
 */
static const enum cfg_key loss_family[] = {
	KEY_NORMALIZE_BY, KEY_SCALE, KEY_DP_DIVISOR, KEY_EXPERT_GRAD_DIVISOR,
	KEY_EXPERT_AVG_SCALE, KEY_AVERAGE_IN_COLLECTIVE, KEY_FSDP_ONE_MEMBER,
	KEY_REPLICATE_ONLY, KEY_PP_NORMALIZE_BY, KEY_DP_GROUP,
	KEY_EXPERT_BUFFER, KEY__COUNT
};
static const enum cfg_key aux_family[] = { KEY_AUX_SCALE, KEY__COUNT };
static const enum cfg_key mtp_family[] = { KEY_MTP_SCALE, KEY__COUNT };
static const enum cfg_key tp_family[] = {
	KEY_ROUTER_GRAD, KEY_EXPERT_INPUT_GRAD, KEY_MOE_INPUT_GRAD,
	KEY_ROUTER_INPUT_GRAD, KEY_SP_PARAM_GRAD, KEY_QK_NORM_GRAD, KEY__COUNT
};
static const enum cfg_key tied_family[] = {
	KEY_EMBEDDING_GRAD, KEY_TIED_BUCKET_START, KEY_TIED_EMBEDDING_BUCKET,
	KEY__COUNT
};
static const enum cfg_key group_family[] = {
	KEY_DP_GROUP, KEY_FSDP_ONE_MEMBER, KEY_EXPERT_BUFFER, KEY_DP_DIVISOR,
	KEY_EXPERT_GRAD_DIVISOR, KEY_NORMALIZE_BY, KEY_SCALE, KEY_AUX_SCALE,
	KEY_MTP_SCALE, KEY__COUNT
};
static const enum cfg_key norm_family[] = {
	KEY_TP_DUPLICATES, KEY_TIED_COPIES, KEY_EXPERT_FILTER, KEY_EXPERT_NORM,
	KEY_SHARD_GROUP, KEY_PP_REDUCE, KEY_CLIP_RANKS, KEY_DP_GROUP,
	KEY_FSDP_ONE_MEMBER, KEY__COUNT
};

static const struct {
	enum cfg_key		 cause;
	const enum cfg_key	*family;
} cause_families[] = {
	{ KEY_NORMALIZE_BY, loss_family },
	{ KEY_SCALE, loss_family },
	{ KEY_DP_DIVISOR, loss_family },
	{ KEY_EXPERT_GRAD_DIVISOR, loss_family },
	{ KEY_EXPERT_AVG_SCALE, loss_family },
	{ KEY_AVERAGE_IN_COLLECTIVE, loss_family },
	{ KEY_REPLICATE_ONLY, loss_family },
	{ KEY_PP_NORMALIZE_BY, loss_family },
	{ KEY_AUX_SCALE, aux_family },
	{ KEY_MTP_SCALE, mtp_family },
	{ KEY_ROUTER_GRAD, tp_family },
	{ KEY_EXPERT_INPUT_GRAD, tp_family },
	{ KEY_MOE_INPUT_GRAD, tp_family },
	{ KEY_ROUTER_INPUT_GRAD, tp_family },
	{ KEY_SP_PARAM_GRAD, tp_family },
	{ KEY_QK_NORM_GRAD, tp_family },
	{ KEY_EMBEDDING_GRAD, tied_family },
	{ KEY_TIED_BUCKET_START, tied_family },
	{ KEY_TIED_EMBEDDING_BUCKET, tied_family },
	{ KEY_DP_GROUP, group_family },
	{ KEY_FSDP_ONE_MEMBER, group_family },
	{ KEY_EXPERT_BUFFER, group_family },
	{ KEY_TP_DUPLICATES, norm_family },
	{ KEY_TIED_COPIES, norm_family },
	{ KEY_EXPERT_FILTER, norm_family },
	{ KEY_EXPERT_NORM, norm_family },
	{ KEY_SHARD_GROUP, norm_family },
	{ KEY_PP_REDUCE, norm_family },
	{ KEY_CLIP_RANKS, norm_family },
};

/* Indexed by enum finding_kind: the family of a finding with no cause. */
static const enum cfg_key *const kind_families[FINDING__COUNT] = {
	[FINDING_MISSING_REDUCTION] = tp_family,
	[FINDING_DOUBLE_COUNT] = tp_family,
	[FINDING_WRONG_ORDER] = tied_family,
	[FINDING_WRONG_SCALE] = loss_family,
	[FINDING_WRONG_GROUP] = group_family,
	[FINDING_REPLICA_MISMATCH] = group_family,
	[FINDING_WRONG_WEIGHTS] = loss_family,
	[FINDING_OVER_COUNT] = norm_family,
	[FINDING_UNDER_COUNT] = norm_family,
	[FINDING_INCONSISTENT_CLIP] = norm_family,
	[FINDING_WRONG_VALUE] = NULL,
};

/*
 * What a framework's launch flag does to its profile's settings, in the
 * releases [since, until) (NULL: unbounded), as `gradaudit import
 * megatron` maps it (megatron.c, import_per_token_loss,
 * import_aux_losses, import_mtp): a profile's setting the flag changes is
 * fixed by passing the flag, and the flag's settings are what gradaudit
 * checks.
 */
static const struct flag_setting {
	const char	*framework;
	const char	*flag;
	enum cfg_key	 key;
	const char	*value;
	const char	*since, *until;
} flag_settings[] = {
	{ "megatron-core", "--calculate-per-token-loss", KEY_NORMALIZE_BY,
	  "global", "0.8.0", NULL },
	{ "megatron-core", "--calculate-per-token-loss", KEY_DP_DIVISOR,
	  "none", "0.8.0", NULL },
	/* 5946e24b37: loss_func multiplied the per-token sum by cp before. */
	{ "megatron-core", "--calculate-per-token-loss", KEY_SCALE,
	  "cp", "0.8.0", "0.12.0" },
	{ "megatron-core", "--calculate-per-token-loss", KEY_SCALE,
	  "none", "0.12.0", NULL },
	{ "megatron-core", "--calculate-per-token-loss", KEY_AUX_SCALE,
	  "tokens-local", "0.12.0", "0.19.0" },
	/* 9ef8a2a420 (PR #5047). */
	{ "megatron-core", "--calculate-per-token-loss", KEY_AUX_SCALE,
	  "tokens-tp-cp", "0.19.0", NULL },
	{ "megatron-core", "--calculate-per-token-loss", KEY_MTP_SCALE,
	  "tokens", "0.12.0", "0.17.0" },
	/* a22c40e8d6 (PR #3159). */
	{ "megatron-core", "--calculate-per-token-loss", KEY_MTP_SCALE,
	  "tokens-local", "0.17.0", NULL },
	{ "megatron-core", "--ddp-average-in-collective",
	  KEY_AVERAGE_IN_COLLECTIVE, "true", "0.8.0", NULL },
	{ "megatron-core", "--use-distributed-optimizer",
	  KEY_DISTRIBUTED_OPTIMIZER, "true", NULL, NULL },
};

#define NFLAG_SETTINGS	(sizeof flag_settings / sizeof flag_settings[0])

/*
 * What changing a setting does, for the prose of a fix whose own sentence
 * (the step's) does not name it; value NULL: any value, which stands
 * for "%s" in the text.
 */
static const struct {
	enum cfg_key	 key;
	const char	*value;
	const char	*text;
} key_texts[] = {
	{ KEY_NORMALIZE_BY, "global", "divide the summed token losses by "
	  "the valid tokens of the whole step, counted over dp, cp and the "
	  "micro-batches (loss.normalize_by: global; HF #34191, torchtitan "
	  "#2206)" },
	{ KEY_NORMALIZE_BY, NULL, "divide each rank's summed loss by the "
	  "token count that matches the stated objective "
	  "(loss.normalize_by: %s)" },
	{ KEY_SCALE, NULL, "multiply the loss by the size its gradients are "
	  "divided by in the data-parallel reduction, so that the two cancel "
	  "(loss.scale: %s)" },
	{ KEY_DP_DIVISOR, "none", "do not divide the gradients in the "
	  "data-parallel reduction, as the loss is divided by the valid "
	  "tokens of the whole step (sync.dp_divisor: none; torchtitan PR "
	  "#2206)" },
	{ KEY_DP_DIVISOR, NULL, "divide the gradients in the data-parallel "
	  "reduction by the size the loss's factor assumes "
	  "(sync.dp_divisor: %s; Megatron 3bdcbbbe5d for #906)" },
	{ KEY_EXPERT_GRAD_DIVISOR, NULL, "scale every gradient, expert "
	  "buffers included, by the dense divisor (sync.expert_grad_divisor: "
	  "%s; torchtitan #1551, pytorch #160285)" },
	{ KEY_EXPERT_AVG_SCALE, NULL, "pre-scale the expert buffers so that "
	  "the net factor after the AVG over edp is the dense one "
	  "(sync.expert_avg_scale: %s; Megatron 4f8974a400)" },
	{ KEY_AVERAGE_IN_COLLECTIVE, "true", "divide by the data-parallel "
	  "size inside the collective (training.average_in_collective: "
	  "true)" },
	{ KEY_AVERAGE_IN_COLLECTIVE, "false", "divide by the data-parallel "
	  "size before a summing collective (training.average_in_collective: "
	  "false)" },
	{ KEY_FSDP_ONE_MEMBER, NULL, "apply the divide factor and reduce "
	  "over the replicas when a reduce-scatter group has one member "
	  "(sync.fsdp_one_member: %s; pytorch PR #167178, verl PR #7494)" },
	{ KEY_REPLICATE_ONLY, "fsdp", "sum over the replicas when the loss is "
	  "divided by the valid tokens of the whole step: replicate with the "
	  "gradient division off (sync.replicate_only: fsdp; torchtitan "
	  "e1847f439, PR #2458)" },
	{ KEY_PP_NORMALIZE_BY, "same", "divide the loss the pipeline "
	  "schedule back-propagates as without pp, by the valid tokens of "
	  "the whole step (loss.pp_normalize_by: same; torchtitan "
	  "786e26f8e, #2972)" },
	{ KEY_DP_GROUP, NULL, "reduce the data-parallel gradients over every "
	  "rank that holds the same weights, the cp ranks included "
	  "(sync.dp_group: %s; VeOmni #1115)" },
	{ KEY_EXPERT_BUFFER, NULL, "give expert parameters their own buffer, "
	  "reduced over edp, whenever the expert mesh differs "
	  "(layout.expert_buffer: %s; Megatron cd4afffa64)" },
	{ KEY_AUX_SCALE, NULL, "scale the auxiliary losses' gradient so that "
	  "each micro-batch's term weighs 1/(micro-batches x dp) after the "
	  "data-parallel reduction (loss.aux_scale: %s)" },
	{ KEY_MTP_SCALE, NULL, "scale the MTP losses' gradient so that layer "
	  "k's term weighs mtp_loss_scaling_factor / depth over the step's "
	  "valid tokens of its rolled mask (loss.mtp_scale: %s)" },
	{ KEY_OBJECTIVE, NULL, "state what the step means to minimize "
	  "(loss.objective: %s)" },
	{ KEY_SP_PARAM_GRAD, "tp-all-reduce", "all-reduce the gradients of "
	  "the norm weights and shared-expert gates over tp when sequence "
	  "parallelism is on (sync.sp_param_grad: tp-all-reduce)" },
	{ KEY_ROUTER_GRAD, "auto", "reduce the router weight gradient over tp "
	  "exactly where it is Partial (sync.router_grad: auto, as torchtitan "
	  "does since #2416)" },
	{ KEY_EMBEDDING_GRAD, NULL, "all-reduce the tied embedding gradient "
	  "where its two copies are in one state (sync.embedding_grad: %s; "
	  "Megatron-LM #844)" },
	{ KEY_QK_NORM_GRAD, "tp-all-reduce", "all-reduce the qk-norm weight "
	  "gradients over tp (sync.qk_norm_grad: tp-all-reduce)" },
};

#define NKEY_TEXTS	(sizeof key_texts / sizeof key_texts[0])

struct candidate {
	enum cfg_key	 key[FIX_MAX_SETTINGS];
	const char	*value[FIX_MAX_SETTINGS];	/* cfg_key_words' */
	int		 n;
	const char	*flag;	/* the framework flag it stands for, or NULL */
};

/* A finding as the judgement of a fix sees it: its kind on a parameter. */
struct seen {
	enum finding_kind kind;
	enum cfg_key	 cause;
	char		*op;
	char		*param;
};

/* What an audit of the config with a candidate applied found. */
struct outcome {
	char		*id;		/* "k=v;k=v", the memo's key */
	bool		 valid;		/* loads and can be audited */
	bool		 passes;
	struct seen	*seen;
	size_t		 nseen;
};

struct fixer {
	struct audit	*audit;
	const struct config *config;
	struct seen	*orig;		/* the findings being fixed */
	size_t		 norig;
	/* The fixes of the findings before this one. */
	struct candidate *chosen;
	size_t		 nchosen;
	int		 tries;		/* audits of this finding's search */
	/*
	 * What the fixes found at first left when applied together and
	 * could not fix on top (its kind and op), to be left to fix by each
	 * fix on its own even where another finding explained its parameter
	 * first; with strict, anything the config did not have.
	 */
	struct seen	*avoid;
	size_t		 navoid;
	bool		 strict;
	struct candidate failed;	/* those fixes together */
	/* The loss's own fixes (loss_recipes), once; -1: not yet. */
	struct candidate recipes[FIX_MAX_RECIPES];
	int		 nrecipes;
	struct outcome	*memo;
	size_t		 nmemo, capmemo;
};

enum verdict { FIX_NO, FIX_PARTIAL, FIX_YES };

static void
collect_seen(const struct audit *a, struct seen **out, size_t *n)
{
	size_t	 i, k, m = 0;

	for (i = 0; i < a->nfindings; i++)
		m += a->findings[i].nparams;
	*out = xcalloc(m + 1, sizeof **out);
	*n = 0;
	for (i = 0; i < a->nfindings; i++)
		for (k = 0; k < a->findings[i].nparams; k++) {
			(*out)[*n].kind = a->findings[i].kind;
			(*out)[*n].cause = a->findings[i].cause;
			(*out)[*n].op = xstrdup(a->findings[i].op != NULL ?
			    a->findings[i].op : "");
			(*out)[*n].param = xstrdup(a->findings[i].params[k]);
			(*n)++;
		}
}

static void
free_seen(struct seen *s, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		free(s[i].param);
		free(s[i].op);
	}
	free(s);
}

static void
candidate_id(const struct candidate *c, char *buf, size_t len)
{
	bool	 done[FIX_MAX_SETTINGS] = { false };
	int	 i, j, best;

	/* In key order, so that one set has one id whatever its order. */
	buf[0] = '\0';
	for (i = 0; i < c->n; i++) {
		best = -1;
		for (j = 0; j < c->n; j++)
			if (!done[j] && (best < 0 || c->key[j] < c->key[best]))
				best = j;
		done[best] = true;
		snprintf(buf + strlen(buf), len - strlen(buf), "%s=%s;",
		    cfg_key_path(c->key[best]), c->value[best]);
	}
}

/*
 * Audit the config with candidate c applied into *a, whose config is
 * *cfg: false when that config does not load or cannot be audited.  The
 * caller frees both (audit_free, cfg_free) either way.
 */
static bool
audit_candidate(const struct fixer *fx, const struct candidate *c,
    struct config *cfg, struct audit *a)
{
	struct sym_context ctx;
	enum cfg_key	 blame;
	char		 why[SYM_WHY_SIZE];
	bool		 valid = false;
	int		 k;

	memset(a, 0, sizeof *a);
	arena_init(&a->arena);
	cfg_copy(cfg, fx->config);
	for (k = 0; k < c->n; k++)
		if (cfg_key_set(cfg, c->key[k], c->value[k]) == -1)
			return false;
	if (cfg_check_constraints(cfg, why, sizeof why) != NULL)
		return false;
	sym_context_build(&ctx, cfg);
	ctx.no_effects = true;
	if (sym_context_unauditable(&ctx, cfg, &blame, why,
	    sizeof why) == NULL) {
		audit_free(a);
		sym_audit(&ctx, a, NULL, NULL);
		valid = true;
	}
	sym_context_free(&ctx);
	return valid;
}

/* Audit the config with candidate c applied, once per candidate. */
static const struct outcome *
evaluate(struct fixer *fx, const struct candidate *c)
{
	struct outcome	*o;
	struct config	 cfg;
	struct audit	 a;
	char		 id[1024];
	size_t		 i;

	candidate_id(c, id, sizeof id);
	for (i = 0; i < fx->nmemo; i++)
		if (strcmp(fx->memo[i].id, id) == 0)
			return &fx->memo[i];
	if (fx->nmemo == fx->capmemo) {
		fx->capmemo = fx->capmemo ? 2 * fx->capmemo : 16;
		fx->memo = xreallocarray(fx->memo, fx->capmemo,
		    sizeof *fx->memo);
	}
	o = &fx->memo[fx->nmemo++];
	memset(o, 0, sizeof *o);
	o->id = xstrdup(id);
	if (audit_candidate(fx, c, &cfg, &a)) {
		o->valid = true;
		o->passes = audit_passes(&a);
		collect_seen(&a, &o->seen, &o->nseen);
	}
	audit_free(&a);
	cfg_free(&cfg);
	return o;
}

static bool
holds(const struct finding *f, const char *param)
{
	size_t	i;

	for (i = 0; i < f->nparams; i++)
		if (strcmp(f->params[i], param) == 0)
			return true;
	return false;
}

static const enum cfg_key *family_of(enum cfg_key, enum finding_kind);

/* Did the config have s: its kind and op on its parameter? */
static bool
had(const struct fixer *fx, const struct seen *s)
{
	size_t	i;

	for (i = 0; i < fx->norig; i++)
		if (fx->orig[i].kind == s->kind &&
		    strcmp(fx->orig[i].op, s->op) == 0 &&
		    strcmp(fx->orig[i].param, s->param) == 0)
			return true;
	return false;
}

/*
 * Is s, found with a fix of f applied, something left to fix?  Not when
 * the config had it (its kind and op on its parameter).  On f's own parameters
 * it is, when it is of f's family (the fix changed what f's step does
 * rather than fixing it: a wrong factor turned into wrong weights) or of
 * a kind the config did not have; elsewhere, unless the config had its
 * kind and the parameter was wrong already (another finding explained it
 * first, and that finding's fix is for it).
 */
static bool
unresolved(const struct fixer *fx, const struct finding *f,
    const struct seen *s)
{
	bool	 kind = false, param = false;
	size_t	 i;

	if (had(fx, s))
		return false;
	if (fx->strict)
		return true;
	for (i = 0; i < fx->navoid; i++)
		if (fx->avoid[i].kind == s->kind &&
		    strcmp(fx->avoid[i].op, s->op) == 0)
			return true;
	for (i = 0; i < fx->norig; i++) {
		kind = kind || fx->orig[i].kind == s->kind;
		param = param || strcmp(fx->orig[i].param, s->param) == 0;
	}
	if (holds(f, s->param))
		return !kind || family_of(s->cause, s->kind) ==
		    family_of(f->cause, f->kind);
	return !kind || !param;
}

/*
 * Is finding f gone (its kind and op on none of its parameters) with
 * nothing unresolved in its place (FIX_YES); gone, something left to fix
 * (FIX_PARTIAL); or still there (FIX_NO)?  A finding is its kind and op:
 * the main loss's wrong weights and the MTP losses' are two.
 */
static enum verdict
judge(const struct fixer *fx, const struct finding *f,
    const struct outcome *o)
{
	enum verdict	 v = FIX_YES;
	size_t		 i;

	if (!o->valid)
		return FIX_NO;
	for (i = 0; i < o->nseen; i++) {
		if (o->seen[i].kind == f->kind && holds(f, o->seen[i].param)) {
			if (strcmp(o->seen[i].op, f->op != NULL ? f->op :
			    "") == 0)
				return FIX_NO;
			/* Its kind there from another step, new here. */
			if (!had(fx, &o->seen[i]))
				v = FIX_PARTIAL;
		} else if (unresolved(fx, f, &o->seen[i]))
			v = FIX_PARTIAL;
	}
	return v;
}

static bool
candidate_has(const struct candidate *c, enum cfg_key k)
{
	int	i;

	for (i = 0; i < c->n; i++)
		if (c->key[i] == k)
			return true;
	return false;
}

/* Add k=v to c unless c sets k already; false when it cannot. */
static bool
candidate_add(struct candidate *c, enum cfg_key k, const char *v)
{
	if (candidate_has(c, k) || c->n == FIX_MAX_SETTINGS)
		return false;
	c->key[c->n] = k;
	c->value[c->n++] = v;
	return true;
}

/* The spelling of one of k's words equal to s (a static string), or NULL. */
static const char *
word_of(enum cfg_key k, const char *s)
{
	const char *const *w = cfg_key_words(k);
	int	 i;

	for (i = 0; w != NULL && w[i] != NULL; i++)
		if (strcmp(w[i], s) == 0)
			return w[i];
	return NULL;
}

static bool
current_is(const struct config *c, enum cfg_key k, const char *v)
{
	char	cur[64];

	cfg_key_value(c, k, cur, sizeof cur);
	return strcmp(cur, v) == 0;
}

static bool
from_profile(const struct config *c, enum cfg_key k)
{
	return c->profile != NULL && keyset_has(&c->from_profile, k) &&
	    !keyset_has(&c->given, k);
}

/*
 * The first later profile of the config's framework that sets k to
 * another value than the config has: the release that changes it.
 */
static const struct fw_profile *
later_profile(const struct config *c, enum cfg_key k)
{
	const struct framework *fw;
	const struct fw_profile *p;
	char	 v[64];
	int	 i;

	if (c->profile == NULL)
		return NULL;
	fw = c->profile->framework;
	for (i = (int)(c->profile - fw->profiles) + 1; i < fw->nprofiles;
	    i++) {
		p = &fw->profiles[i];
		if (!keyset_has(&p->settings.given, k))
			continue;
		cfg_key_value(&p->settings, k, v, sizeof v);
		if (!current_is(c, k, v))
			return p;
	}
	return NULL;
}

static int
add_value(const char **out, int n, int max, const char *v)
{
	int	j;

	for (j = 0; j < n && out[j] != v; j++)
		;
	if (v != NULL && j == n && n < max)
		out[n++] = v;
	return n;
}

/*
 * The size a loss.scale or sync.dp_divisor spelling names on the
 * config's mesh (its index is its enum data_size), or -1 for other keys.
 */
static int
size_of(const struct config *c, enum cfg_key k, const char *v)
{
	const char *const *w = cfg_key_words(k);
	struct mesh	 mesh;
	int		 i;

	if (k != KEY_SCALE && k != KEY_DP_DIVISOR)
		return -1;
	for (i = 0; w[i] != NULL && strcmp(w[i], v) != 0; i++)
		;
	mesh_from_config(&mesh, c);
	return lossnorm_size(&mesh, (enum data_size)i);
}

/*
 * The values to try for k: the reference default (the ideal
 * synchronization), the one a later release of the config's framework
 * moves to, then the others in their order; never the current one.  A
 * size that is another's on this mesh (cp with cp 1) is the same
 * setting: the first spelling stands for it, none before the sizes of
 * one dimension.
 */
static int
values_of(const struct config *c, enum cfg_key k, const char **out, int max)
{
	const char *const *w = cfg_key_words(k);
	const struct fw_profile *p;
	char	 v[64];
	int	 i, j, n = 0, sz, cur;

	if (w == NULL)
		return 0;
	cfg_key_default(k, v, sizeof v);
	n = add_value(out, n, max, word_of(k, v));
	if (from_profile(c, k) && (p = later_profile(c, k)) != NULL) {
		cfg_key_value(&p->settings, k, v, sizeof v);
		n = add_value(out, n, max, word_of(k, v));
	}
	if (k == KEY_SCALE || k == KEY_DP_DIVISOR)
		n = add_value(out, n, max, word_of(k, "none"));
	for (i = 0; w[i] != NULL; i++)
		n = add_value(out, n, max, w[i]);
	cfg_key_value(c, k, v, sizeof v);
	cur = size_of(c, k, v);
	for (i = j = 0; i < n; i++) {
		if (current_is(c, k, out[i]))
			continue;
		if ((sz = size_of(c, k, out[i])) >= 0) {
			int	 e;

			for (e = 0; e < j && size_of(c, k, out[e]) != sz; e++)
				;
			if (sz == cur || e < j)
				continue;
		}
		out[j++] = out[i];
	}
	return j;
}

static const enum cfg_key *
family_of(enum cfg_key cause, enum finding_kind kind)
{
	size_t	i;

	for (i = 0; i < sizeof cause_families / sizeof cause_families[0];
	    i++)
		if (cause_families[i].cause == cause)
			return cause_families[i].family;
	return kind_families[kind];
}

static bool
differs_from_default(const struct config *c, enum cfg_key k)
{
	char	d[64];

	cfg_key_default(k, d, sizeof d);
	return !current_is(c, k, d);
}

static bool
settable(const struct config *c, enum cfg_key k)
{
	return k < KEY__COUNT && cfg_key_words(k) != NULL &&
	    cfg_key_is_active(c, k);
}

static int
add_key(enum cfg_key *out, int n, int max, enum cfg_key k)
{
	int	j;

	for (j = 0; j < n && out[j] != k; j++)
		;
	if (j == n && n < max)
		out[n++] = k;
	return n;
}

/*
 * The settings to try for a finding of this cause and kind, after those
 * already in out[0..n): the cause, the family's settings that differ
 * from the reference, then the rest of the family.  Returns the new n.
 */
static int
keys_to_try(const struct config *c, enum cfg_key cause,
    enum finding_kind kind, enum cfg_key *out, int n, int max)
{
	const enum cfg_key *fam = family_of(cause, kind);
	int	 pass, i;

	if (settable(c, cause))
		n = add_key(out, n, max, cause);
	for (pass = 0; pass < 2 && fam != NULL; pass++)
		for (i = 0; fam[i] != KEY__COUNT; i++)
			if (settable(c, fam[i]) &&
			    differs_from_default(c, fam[i]) == (pass == 0))
				n = add_key(out, n, max, fam[i]);
	return n;
}

/* Does the config's framework release fall in [since, until)? */
static bool
release_in(const struct config *c, const char *since, const char *until)
{
	const char	*at = c->framework != NULL ?
			    strchr(c->framework, '@') : NULL;
	struct fw_version v, b;

	if (at == NULL || fw_version_parse(at + 1, &v) == -1)
		return false;
	if (since != NULL && (fw_version_parse(since, &b) == -1 ||
	    fw_version_cmp(&v, &b) < 0))
		return false;
	if (until != NULL && (fw_version_parse(until, &b) == -1 ||
	    fw_version_cmp(&v, &b) >= 0))
		return false;
	return true;
}

/*
 * The candidate that passing `flag` makes of the config: every setting
 * it changes that the profile decided and the config does not write.
 * False when it changes none of the family's.
 */
static bool
flag_candidate(const struct config *c, const char *flag,
    const enum cfg_key *keys, int nkeys, struct candidate *out)
{
	const struct flag_setting *fs;
	bool	 touches = false;
	size_t	 i;
	int	 j;

	memset(out, 0, sizeof *out);
	out->flag = flag;
	for (i = 0; i < NFLAG_SETTINGS; i++) {
		fs = &flag_settings[i];
		if (strcmp(fs->flag, flag) != 0 ||
		    strcmp(fs->framework, c->profile->framework->name) != 0 ||
		    !release_in(c, fs->since, fs->until) ||
		    !settable(c, fs->key) || !from_profile(c, fs->key) ||
		    current_is(c, fs->key, fs->value))
			continue;
		(void)candidate_add(out, fs->key, word_of(fs->key, fs->value));
		for (j = 0; j < nkeys; j++)
			if (keys[j] == fs->key)
				touches = true;
	}
	return touches && out->n > 0;
}

/* Drop every setting the fix still works without. */
static void
minimize(struct fixer *fx, const struct finding *f, struct candidate *c)
{
	struct candidate t;
	int	 i, j;

	for (i = 0; i < c->n && c->n > 1;) {
		t = *c;
		t.n = 0;
		for (j = 0; j < c->n; j++)
			if (j != i) {
				t.key[t.n] = c->key[j];
				t.value[t.n++] = c->value[j];
			}
		if (judge(fx, f, evaluate(fx, &t)) == FIX_YES)
			*c = t;
		else
			i++;
	}
}

/* The values of k to try, the current one first. */
static int
values_from_current(const struct config *c, enum cfg_key k,
    const char **out, int max)
{
	char	 cur[64];

	cfg_key_value(c, k, cur, sizeof cur);
	if ((out[0] = word_of(k, cur)) == NULL)
		return 0;
	return 1 + values_of(c, k, out + 1, max - 1);
}

/*
 * Does the loss of config t, divided by its dp_divisor, weigh its atoms
 * as the objective does (which: lossnorm_main_matches, ...)?  False for
 * a config the loader would refuse, which lossnorm does not model (MTP
 * with expert gradients kept per source).
 */
static bool
loss_matches(const struct config *t, const struct mesh *mesh,
    bool (*which)(const struct loss_norm *, int))
{
	struct loss_norm ln;
	char		 why[CFG_WHY_SIZE];
	bool		 ok;

	if (cfg_check_constraints(t, why, sizeof why) != NULL)
		return false;
	lossnorm_build(&ln, t, mesh);
	ok = which(&ln, lossnorm_size(mesh, t->sync.dp_divisor));
	lossnorm_free(&ln);
	return ok;
}

/*
 * The first value of k (the current one first) with which lossnorm says
 * the loss of config t weighs its atoms right, divisor d; set in t.
 */
static const char *
matching_value(struct config *t, const struct mesh *mesh, enum cfg_key k,
    bool (*matches)(const struct loss_norm *, int))
{
	const char	*vals[16];
	int		 n, v;

	n = values_from_current(t, k, vals, 16);
	for (v = 0; v < n; v++) {
		(void)cfg_key_set(t, k, vals[v]);
		if (loss_matches(t, mesh, matches))
			return vals[v];
	}
	return NULL;
}

/*
 * The loss's own fixes, derived from the factors the loss keys give each
 * chunk: every loss.normalize_by, loss.scale and sync.dp_divisor whose
 * factors weigh the main loss's atoms as the stated objective does, with
 * the loss.mtp_scale and loss.aux_scale that weigh the other losses' at
 * that divisor (lossnorm.h), fewest changes first.  Candidates only:
 * each is audited like any other, as the engines decide what a setting
 * really does (an expert buffer's divisor, a one-member FSDP group).
 */
static int
loss_recipes(const struct config *c, struct candidate *out, int max)
{
	static const enum cfg_key extra[] = { KEY_MTP_SCALE, KEY_AUX_SCALE };
	bool		(*const extra_matches[])(const struct loss_norm *,
			    int) = { lossnorm_mtp_matches,
			    lossnorm_aux_matches };
	const char	*dv[8], *nv[16], *sv[8], *ev[2];
	struct config	 t;
	struct mesh	 mesh;
	struct candidate r;
	int		 nd, nn, ns, d, i, j, e, n = 0, size, k;

	cfg_copy(&t, c);
	mesh_from_config(&mesh, c);
	nd = values_from_current(c, KEY_DP_DIVISOR, dv, 8);
	nn = values_from_current(c, KEY_NORMALIZE_BY, nv, 16);
	ns = values_from_current(c, KEY_SCALE, sv, 8);
	for (d = 0; d < nd && n < max; d++) {
		(void)cfg_key_set(&t, KEY_DP_DIVISOR, dv[d]);
		for (e = 0; e < 2; e++) {
			(void)cfg_key_set(&t, KEY_NORMALIZE_BY, nv[0]);
			(void)cfg_key_set(&t, KEY_SCALE, sv[0]);
			ev[e] = matching_value(&t, &mesh, extra[e],
			    extra_matches[e]);
		}
		if (ev[0] == NULL || ev[1] == NULL)
			continue;
		for (i = 0; i < nn && n < max; i++)
			for (j = 0; j < ns && n < max; j++) {
				(void)cfg_key_set(&t, KEY_NORMALIZE_BY, nv[i]);
				(void)cfg_key_set(&t, KEY_SCALE, sv[j]);
				if (!loss_matches(&t, &mesh,
				    lossnorm_main_matches))
					continue;
				memset(&r, 0, sizeof r);
				if (i > 0)
					(void)candidate_add(&r,
					    KEY_NORMALIZE_BY, nv[i]);
				if (j > 0)
					(void)candidate_add(&r, KEY_SCALE,
					    sv[j]);
				if (d > 0)
					(void)candidate_add(&r,
					    KEY_DP_DIVISOR, dv[d]);
				for (e = 0; e < 2; e++)
					if (!current_is(c, extra[e], ev[e]))
						(void)candidate_add(&r,
						    extra[e], ev[e]);
				if (r.n > 0)
					out[n++] = r;
			}
	}
	cfg_free(&t);
	/* Fewest changes first, in the order found otherwise. */
	for (size = 1, k = 0; size <= FIX_MAX_SETTINGS; size++)
		for (i = k; i < n; i++)
			if (out[i].n == size) {
				r = out[i];
				memmove(&out[k + 1], &out[k],
				    (size_t)(i - k) * sizeof *out);
				out[k++] = r;
			}
	return n;
}

/* Is a finding of this cause and kind about the loss's factors? */
static bool
loss_finding(enum cfg_key cause, enum finding_kind kind)
{
	const enum cfg_key *fam = family_of(cause, kind);

	return fam == loss_family || fam == aux_family || fam == mtp_family;
}

/* t = a and b, unless they set one key to two values. */
static bool
merge(struct candidate *t, const struct candidate *a,
    const struct candidate *b)
{
	int	i, j;

	*t = *a;
	t->flag = NULL;
	for (i = 0; i < b->n; i++) {
		for (j = 0; j < a->n && a->key[j] != b->key[i]; j++)
			;
		if (j < a->n) {
			if (strcmp(a->value[j], b->value[i]) != 0)
				return false;
			continue;
		}
		if (!candidate_add(t, b->key[i], b->value[i]))
			return false;
	}
	return true;
}

/*
 * Try base and t: true with *best when they fix f; a partial fix joins
 * next[] (up to FIX_MAX_PARTIALS) to be completed.  The flag of t stays
 * its name when there is no base.
 */
static bool
try(struct fixer *fx, const struct finding *f, const struct candidate *base,
    const struct candidate *t, struct candidate *next, int *nnext,
    struct candidate *best)
{
	struct candidate m;
	enum verdict	 r;

	if (fx->tries++ >= FIX_MAX_TRIES || !merge(&m, base, t))
		return false;
	if (base->n == 0)
		m.flag = t->flag;
	r = judge(fx, f, evaluate(fx, &m));
	if (r == FIX_PARTIAL && *nnext < FIX_MAX_PARTIALS)
		next[(*nnext)++] = m;
	if (r == FIX_YES)
		*best = m;
	return r == FIX_YES;
}

/*
 * Try the loss's own fixes (loss_recipes) on top of base, those of fewer
 * settings first and, among them, those whose settings come first in
 * keys[] (the finding's cause, then what differs from the reference).
 */
static bool
try_recipes(struct fixer *fx, const struct finding *f,
    const struct candidate *base, const enum cfg_key *keys, int nkeys,
    struct candidate *next, int *nnext, struct candidate *best)
{
	bool	 done[FIX_MAX_RECIPES] = { false };
	int	 i, j, k, pick, rank, best_rank, left;

	if (fx->nrecipes < 0)
		fx->nrecipes = loss_recipes(fx->config, fx->recipes,
		    FIX_MAX_RECIPES);
	for (left = fx->nrecipes; left > 0; left--) {
		pick = -1;
		best_rank = 0;
		for (i = 0; i < fx->nrecipes; i++) {
			if (done[i])
				continue;
			rank = nkeys;
			for (j = 0; j < fx->recipes[i].n; j++)
				for (k = 0; k < rank; k++)
					if (keys[k] == fx->recipes[i].key[j])
						rank = k;
			rank += fx->recipes[i].n * (nkeys + 1);
			if (pick < 0 || rank < best_rank) {
				pick = i;
				best_rank = rank;
			}
		}
		done[pick] = true;
		if (try(fx, f, base, &fx->recipes[pick], next, nnext, best))
			return true;
	}
	return false;
}

/*
 * The fix of finding f: true with *best, or false when none is found.
 * The fixes of earlier findings first, then the framework's flags, then
 * one setting at a time; a change that removes the finding but leaves
 * something else to fix (the loss divided by the step's tokens, still
 * averaged over dp; a bucket that unmasks the norm's filter) is completed
 * by settings of what it left, up to FIX_DEPTH settings.  Every
 * candidate is tried with base's settings too (the fixes already made).
 */
static bool
search(struct fixer *fx, const struct finding *f,
    const struct candidate *base, struct candidate *best)
{
	const struct config *c = fx->config;
	struct candidate cur[FIX_MAX_PARTIALS], next[FIX_MAX_PARTIALS], t;
	const struct outcome *o;
	enum cfg_key	 keys[KEY__COUNT];
	const char	*vals[16];
	size_t		 i;
	int		 nkeys, nvals, ncur, nnext = 0, k, v, p, depth;
	bool		 loss;

	fx->tries = 0;
	nkeys = keys_to_try(c, f->cause, f->kind, keys, 0, KEY__COUNT);
	/*
	 * The fix of an earlier finding first: findings of one cause get one
	 * fix, and fixes that agree can be applied together.
	 */
	for (i = 0; i < fx->nchosen; i++)
		if (try(fx, f, base, &fx->chosen[i], next, &nnext, best))
			return true;
	nnext = 0;
	/* A framework's own flag first, where its profile decided it. */
	for (i = 0; c->profile != NULL && i < NFLAG_SETTINGS; i++) {
		if (i > 0 && strcmp(flag_settings[i].flag,
		    flag_settings[i - 1].flag) == 0)
			continue;
		if (flag_candidate(c, flag_settings[i].flag, keys, nkeys, &t) &&
		    try(fx, f, base, &t, next, &nnext, best))
			return true;
	}
	for (k = 0; k < nkeys; k++) {
		nvals = values_of(c, keys[k], vals, 16);
		for (v = 0; v < nvals; v++) {
			memset(&t, 0, sizeof t);
			(void)candidate_add(&t, keys[k], vals[v]);
			if (try(fx, f, base, &t, next, &nnext, best))
				return true;
		}
	}
	/* A loss's fix, derived from its factors (loss_recipes). */
	if (loss_finding(f->cause, f->kind) && try_recipes(fx, f, base, keys,
	    nkeys, next, &nnext, best))
		return true;
	/*
	 * An earlier finding's fix and one setting more: a factor that
	 * both the dense and the expert gradients carry is fixed once.
	 */
	for (i = 0; i < fx->nchosen; i++)
		for (k = 0; k < nkeys; k++) {
			if (candidate_has(&fx->chosen[i], keys[k]))
				continue;
			nvals = values_of(c, keys[k], vals, 16);
			for (v = 0; v < nvals; v++) {
				t = fx->chosen[i];
				t.flag = NULL;
				if (candidate_add(&t, keys[k], vals[v]) &&
				    try(fx, f, base, &t, next, &nnext, best))
					return true;
			}
		}
	for (depth = 1; depth < FIX_DEPTH && nnext > 0; depth++) {
		memcpy(cur, next, nnext * sizeof *next);
		ncur = nnext;
		nnext = 0;
		for (p = 0; p < ncur; p++) {
			nkeys = 0;
			loss = false;
			o = evaluate(fx, &cur[p]);
			for (i = 0; i < o->nseen; i++)
				if (unresolved(fx, f, &o->seen[i])) {
					nkeys = keys_to_try(c, o->seen[i].cause,
					    o->seen[i].kind, keys, nkeys,
					    KEY__COUNT);
					loss = loss || loss_finding(
					    o->seen[i].cause, o->seen[i].kind);
				}
			for (k = 0; k < nkeys; k++) {
				if (candidate_has(&cur[p], keys[k]))
					continue;
				nvals = values_of(c, keys[k], vals, 16);
				for (v = 0; v < nvals; v++) {
					memset(&t, 0, sizeof t);
					(void)candidate_add(&t, keys[k],
					    vals[v]);
					if (try(fx, f, &cur[p], &t, next,
					    &nnext, best))
						return true;
				}
			}
			if (loss && try_recipes(fx, f, &cur[p], keys, nkeys,
			    next, &nnext, best))
				return true;
		}
	}
	return false;
}

/*
 * Another objective under which the framework's normalization is right:
 * the fix when the choice is deliberate (Megatron's mean of micro-batch
 * means without --calculate-per-token-loss).
 */
static bool
search_objective(struct fixer *fx, const struct finding *f,
    struct candidate *best)
{
	const enum cfg_key *fam = family_of(f->cause, f->kind);
	const char	*vals[8];
	int		 n, v;

	if (fam != loss_family || !settable(fx->config, KEY_OBJECTIVE))
		return false;
	n = values_of(fx->config, KEY_OBJECTIVE, vals, 8);
	for (v = 0; v < n; v++) {
		memset(best, 0, sizeof *best);
		(void)candidate_add(best, KEY_OBJECTIVE, vals[v]);
		if (judge(fx, f, evaluate(fx, best)) == FIX_YES)
			return true;
	}
	return false;
}

static const struct fix_setting *
settings_of(struct audit *a, const struct candidate *c)
{
	struct fix_setting *s;
	int	 i;

	s = arena_alloc(&a->arena, (c->n + 1) * sizeof *s);
	for (i = 0; i < c->n; i++) {
		s[i].key = cfg_key_path(c->key[i]);
		s[i].value = c->value[i];
	}
	return s;
}

static void
append(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
append(char *buf, size_t len, const char *fmt, ...)
{
	size_t	 n = strlen(buf);
	va_list	 ap;

	if (n + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

/* Where a profile's setting was read: its source up to the first colon. */
static void
source_head(const char *source, char *buf, size_t len)
{
	const char	*colon = source != NULL ? strchr(source, ':') : NULL;
	size_t		 n = source == NULL ? 0 : colon != NULL ?
			    (size_t)(colon - source) : strlen(source);

	if (n >= len)
		n = len - 1;
	memcpy(buf, source != NULL ? source : "", n);
	buf[n] = '\0';
}

/* One setting's sentence, from key_texts, the value in place of "%s". */
static void
key_text(enum cfg_key k, const char *value, char *buf, size_t len)
{
	const char	*t, *mark;
	size_t		 i;

	for (i = 0; i < NKEY_TEXTS; i++) {
		if (key_texts[i].key != k || (key_texts[i].value != NULL &&
		    strcmp(key_texts[i].value, value) != 0))
			continue;
		for (t = key_texts[i].text; (mark = strstr(t, "%s")) != NULL;
		    t = mark + 2)
			append(buf, len, "%.*s%s", (int)(mark - t), t, value);
		append(buf, len, "%s", t);
		return;
	}
	append(buf, len, "set %s to %s", cfg_key_path(k), value);
}

/* Does text name key with value ("sync.embedding_grad: before-dp, ...")? */
static bool
names_value(const char *text, const char *key, const char *value)
{
	const char	*p, *q, *end;
	char		 k[128];
	size_t		 n = strlen(value);

	snprintf(k, sizeof k, "%s: ", key);
	for (p = text; (p = strstr(p, k)) != NULL; p = end) {
		p += strlen(k);
		end = p + strcspn(p, ";)");
		for (q = p; (q = strstr(q, value)) != NULL && q < end; q += n)
			if ((q == p || q[-1] == ' ') && q[n] != '-' &&
			    !(q[n] >= 'a' && q[n] <= 'z'))
				return true;
	}
	return false;
}

/*
 * The first release after the config's own that sets the fix's setting i
 * to a value with which the fix still removes f (that value in place of
 * the fix's), or NULL; *value is that value.
 */
static const struct fw_profile *
fixing_release(struct fixer *fx, const struct finding *f,
    const struct candidate *fix, int i, const char **value)
{
	const struct config *c = fx->config;
	const struct framework *fw = c->profile->framework;
	const struct fw_profile *p;
	struct candidate t;
	char	 v[64];
	int	 j;

	for (j = (int)(c->profile - fw->profiles) + 1; j < fw->nprofiles;
	    j++) {
		p = &fw->profiles[j];
		if (!keyset_has(&p->settings.given, fix->key[i]))
			continue;
		cfg_key_value(&p->settings, fix->key[i], v, sizeof v);
		if (current_is(c, fix->key[i], v))
			continue;
		t = *fix;
		if ((t.value[i] = word_of(fix->key[i], v)) != NULL &&
		    judge(fx, f, evaluate(fx, &t)) == FIX_YES) {
			*value = t.value[i];
			return p;
		}
	}
	return NULL;
}

/* "k: v (where the profile read it)", of setting k of the config. */
static void
profile_setting(const struct config *c, enum cfg_key k, char *buf,
    size_t len)
{
	char	 cur[64], head[256];

	cfg_key_value(c, k, cur, sizeof cur);
	source_head(c->profile->source[k], head, sizeof head);
	append(buf, len, "%s: %s (%s)", cfg_key_path(k), cur, head);
}

/*
 * Under a profile, what the framework decided of the fix's settings,
 * where that was read, and what changes it: a later release, or the
 * framework's code.
 */
static void
profile_text(struct fixer *fx, const struct finding *f,
    const struct candidate *fix, char *buf, size_t len)
{
	const struct config *c = fx->config;
	const struct fw_profile *later;
	const char	*value;
	char		 head[256], version[32];
	int		 i;

	for (i = 0; i < fix->n; i++) {
		if (!from_profile(c, fix->key[i]))
			continue;
		append(buf, len, ". %s sets ", c->framework);
		profile_setting(c, fix->key[i], buf, len);
		if ((later = fixing_release(fx, f, fix, i, &value)) != NULL) {
			fw_version_format(&later->since, version,
			    sizeof version);
			source_head(later->source[fix->key[i]], head,
			    sizeof head);
			append(buf, len, ", which %s %s changes to %s (%s)",
			    c->profile->framework->name, version, value, head);
		} else
			append(buf, len, ", which no later release with a "
			    "profile changes to a value that fixes this");
	}
}

/* Pass the flag: what the profile does without it. */
static void
flag_text(const struct config *c, const struct candidate *fix, char *buf,
    size_t len)
{
	int	 i, n = 0;

	append(buf, len, "pass %s", fix->flag);
	for (i = 0; i < fix->n; i++) {
		if (!from_profile(c, fix->key[i]))
			continue;
		append(buf, len, "%s", n == 0 ? ": without it, " : " and ");
		if (n++ == 0)
			append(buf, len, "%s sets ", c->framework);
		profile_setting(c, fix->key[i], buf, len);
	}
}

static void
options_text(const struct candidate *c, char *buf, size_t len)
{
	int	i;

	for (i = 0; i < c->n; i++)
		append(buf, len, "%s--set %s=%s", i > 0 ? " " : "",
		    cfg_key_path(c->key[i]), c->value[i]);
}

/*
 * The sentence of a fix: the framework's flag, or the step's own sentence
 * for the settings it names and each other setting's; what the profile
 * decided; the alternative; and the options that check it.
 */
static const char *
fix_text(struct fixer *fx, const struct finding *f,
    const struct candidate *fix, const struct candidate *alt)
{
	char	 buf[FIX_TEXT_SIZE];
	int	 i, own = 0;

	buf[0] = '\0';
	if (fix->flag != NULL)
		flag_text(fx->config, fix, buf, sizeof buf);
	else {
		for (i = 0; i < fix->n; i++) {
			if (names_value(f->fix, cfg_key_path(fix->key[i]),
			    fix->value[i])) {
				if (own++ > 0)
					continue;
				append(buf, sizeof buf, "%s%s", i > 0 ? "; " :
				    "", f->fix);
				continue;
			}
			if (i > 0)
				append(buf, sizeof buf, "; ");
			key_text(fix->key[i], fix->value[i], buf, sizeof buf);
		}
		profile_text(fx, f, fix, buf, sizeof buf);
	}
	if (alt != NULL) {
		append(buf, sizeof buf, "; or, if %s is what the step means "
		    "to minimize, state it (", alt->value[0]);
		options_text(alt, buf, sizeof buf);
		append(buf, sizeof buf, ")");
	}
	append(buf, sizeof buf, "; check it with ");
	options_text(fix, buf, sizeof buf);
	return arena_strdup(&fx->audit->arena, buf);
}

/* A finding no setting fixes: its prose, and the setting that bears on it. */
static const char *
prose_text(struct audit *a, const struct finding *f)
{
	char	 buf[FIX_TEXT_SIZE];

	buf[0] = '\0';
	append(buf, sizeof buf, "%s", f->fix != NULL ? f->fix : "");
	if (f->cause < KEY__COUNT)
		append(buf, sizeof buf, "; no setting gradaudit models "
		    "removes it without leaving another finding (%s bears on "
		    "it)", cfg_key_path(f->cause));
	return arena_strdup(&a->arena, buf);
}

/* The alternative alone, when no framework setting fixes the finding. */
static const char *
alternative_text(struct audit *a, const struct finding *f,
    const struct candidate *alt)
{
	char	 buf[FIX_TEXT_SIZE];

	buf[0] = '\0';
	if (f->fix != NULL)
		append(buf, sizeof buf, "%s; ", f->fix);
	append(buf, sizeof buf, "or, if %s is what the step means to "
	    "minimize, state it: ", alt->value[0]);
	options_text(alt, buf, sizeof buf);
	return arena_strdup(&a->arena, buf);
}

/*
 * The finding of the config that owns r, a finding the fixes together
 * left: the first whose parameters r is on (it masked r), else the
 * first with a fix.
 */
static size_t
owner_of(const struct audit *a, const struct finding *r, const bool *have)
{
	size_t	 i, k, first = a->nfindings;

	for (i = 0; i < a->nfindings; i++) {
		if (!have[i])
			continue;
		if (first == a->nfindings)
			first = i;
		for (k = 0; k < r->nparams; k++)
			if (holds(&a->findings[i], r->params[k]))
				return i;
	}
	return first;
}

/* Is f gone from outcome o: its kind and op on none of its parameters? */
static bool
gone(const struct finding *f, const struct outcome *o)
{
	size_t	i;

	if (!o->valid)
		return false;
	for (i = 0; i < o->nseen; i++)
		if (o->seen[i].kind == f->kind && holds(f, o->seen[i].param) &&
		    strcmp(o->seen[i].op, f->op != NULL ? f->op : "") == 0)
			return false;
	return true;
}

static bool
passes(struct fixer *fx, const struct candidate *c)
{
	const struct outcome *o = evaluate(fx, c);

	return o->valid && o->passes;
}

/*
 * The fix of f on top of base (f's own, when base already removes it),
 * judged against what base leaves rather than the config: what base
 * fixed must stay fixed.
 */
static bool
search_after(struct fixer *fx, const struct finding *f,
    const struct candidate *base, struct candidate *x)
{
	const struct outcome *o = evaluate(fx, base);
	struct seen	*orig = fx->orig, *left;
	size_t		 norig = fx->norig, nleft, i;
	bool		 found;

	if (!o->valid)
		return false;
	if (gone(f, o)) {
		*x = *base;
		return true;
	}
	nleft = o->nseen;
	left = xcalloc(nleft + 1, sizeof *left);
	for (i = 0; i < nleft; i++) {
		left[i] = o->seen[i];
		left[i].op = xstrdup(o->seen[i].op);
		left[i].param = xstrdup(o->seen[i].param);
	}
	fx->orig = left;
	fx->norig = nleft;
	found = search(fx, f, base, x);
	fx->orig = orig;
	fx->norig = norig;
	free_seen(left, nleft);
	return found;
}

/*
 * Fix, on top of all, what all still leaves: a finding one of the fixes
 * masked (the auxiliary losses' part of a router whose whole gradient
 * was weighted wrongly).  Its settings go to the finding that masked it.
 */
static void
close_over(struct fixer *fx, struct candidate *all, struct candidate *fixes,
    const bool *have)
{
	struct audit	*a = fx->audit, b;
	struct candidate m, x;
	struct config	 cfg;
	size_t		 i, o;
	int		 round;
	bool		 valid, progress;

	for (round = 0; round < FIX_DEPTH && all->n > 0; round++) {
		valid = audit_candidate(fx, all, &cfg, &b);
		progress = false;
		for (i = 0; valid && !audit_passes(&b) && !progress &&
		    i < b.nfindings; i++) {
			if (!search_after(fx, &b.findings[i], all, &x) ||
			    (o = owner_of(a, &b.findings[i], have)) ==
			    a->nfindings || !merge(&m, &fixes[o], &x))
				continue;
			m.flag = fixes[o].flag;
			fixes[o] = m;
			*all = x;
			progress = true;
		}
		audit_free(&b);
		cfg_free(&cfg);
		if (!progress)
			break;
	}
}

/* all = every fix that has one, at once; false when two disagree. */
static bool
union_of(const struct audit *a, const struct candidate *fixes,
    const bool *have, struct candidate *all)
{
	struct candidate m;
	size_t	 i;

	memset(all, 0, sizeof *all);
	for (i = 0; i < a->nfindings; i++) {
		if (!have[i])
			continue;
		if (!merge(&m, all, &fixes[i]))
			return false;
		*all = m;
	}
	return true;
}

/*
 * Make the fixes agree, so that every fix applied at once makes the
 * config pass.  When the fixes each finding has alone do not (two set one
 * key, or the expert gradients' fix changes a factor the dense ones
 * carry too), the findings are fixed one after the other, each on top of
 * the fixes before it, and each finding's fix is then its share of the
 * whole: the fewest of those settings that remove it alone.
 */
static bool
agree(struct fixer *fx, struct candidate *fixes, bool *have)
{
	struct audit	*a = fx->audit;
	struct candidate all, x, u, *scratch;
	size_t		 i, n = a->nfindings;
	int		 k, j;
	bool		 ok = false;

	/* What close_over adds is kept only when the whole passes. */
	scratch = xcalloc(n, sizeof *scratch);
	memcpy(scratch, fixes, n * sizeof *fixes);
	if (union_of(a, scratch, have, &all)) {
		close_over(fx, &all, scratch, have);
		if (passes(fx, &all)) {
			memcpy(fixes, scratch, n * sizeof *fixes);
			free(scratch);
			return true;
		}
	}
	memset(&all, 0, sizeof all);
	for (i = 0; i < n; i++)
		if (have[i] && search_after(fx, &a->findings[i], &all, &x))
			all = x;
	memcpy(scratch, fixes, n * sizeof *fixes);
	close_over(fx, &all, scratch, have);
	if (all.n == 0 || !passes(fx, &all)) {
		fx->failed = all;
		free(scratch);
		return false;	/* each finding keeps the fix it has alone */
	}
	for (i = 0; i < n; i++) {
		if (!have[i])
			continue;
		x = all;
		x.flag = NULL;
		if (judge(fx, &a->findings[i], evaluate(fx, &x)) != FIX_YES)
			continue;
		minimize(fx, &a->findings[i], &x);
		/* A flag's settings, or some of them, are still the flag. */
		for (k = 0; k < x.n && fixes[i].flag != NULL; k++)
			if (!candidate_has(&fixes[i], x.key[k]))
				break;
		if (k == x.n)
			x.flag = fixes[i].flag;
		fixes[i] = x;
	}
	/*
	 * What no finding needs alone but the whole does goes to the first
	 * finding whose fix still removes it with them.
	 */
	if (union_of(a, fixes, have, &u) && !(ok = passes(fx, &u)))
		for (i = 0; i < n && !ok; i++) {
			if (!have[i])
				continue;
			x = fixes[i];
			for (j = 0; j < all.n; j++)
				if (!candidate_has(&u, all.key[j]))
					(void)candidate_add(&x, all.key[j],
					    all.value[j]);
			if (judge(fx, &a->findings[i], evaluate(fx, &x)) ==
			    FIX_YES) {
				fixes[i] = x;
				ok = true;
			}
		}
	free(scratch);
	return ok;
}

/*
 * For a finding no setting fixes: the first of the settings that bear
 * on it (keys_to_try) with an effect on what the audit finds, which its
 * prose then names; KEY__COUNT when none has.
 */
static enum cfg_key
bearing_key(struct fixer *fx, const struct finding *f)
{
	const struct outcome *o;
	struct candidate t;
	enum cfg_key	 keys[KEY__COUNT];
	const char	*vals[16];
	size_t		 i;
	int		 nkeys, nvals, k, v;

	nkeys = keys_to_try(fx->config, f->cause, f->kind, keys, 0,
	    KEY__COUNT);
	for (k = 0; k < nkeys; k++) {
		nvals = values_of(fx->config, keys[k], vals, 16);
		for (v = 0; v < nvals; v++) {
			memset(&t, 0, sizeof t);
			(void)candidate_add(&t, keys[k], vals[v]);
			o = evaluate(fx, &t);
			if (!o->valid)
				continue;
			for (i = 0; i < o->nseen && had(fx, &o->seen[i]); i++)
				;
			if (i < o->nseen || o->nseen != fx->norig)
				return keys[k];
		}
	}
	return KEY__COUNT;
}

/* Each finding's own fix, the earlier ones' first (fix_derive). */
static void
search_all(struct fixer *fx, struct candidate *fixes, bool *have)
{
	struct candidate none;
	size_t		 i;

	memset(&none, 0, sizeof none);
	fx->nchosen = 0;
	for (i = 0; i < fx->audit->nfindings; i++) {
		const struct finding *f = &fx->audit->findings[i];

		if ((have[i] = search(fx, f, &none, &fixes[i]))) {
			minimize(fx, f, &fixes[i]);
			fx->chosen[fx->nchosen++] = fixes[i];
		}
	}
}

/* Derive the fixes of a's findings into a (fix_derive). */
static void
derive(struct audit *a)
{
	struct fixer	 fx;
	struct candidate *fixes, alt, none;
	const struct outcome *o;
	struct finding	*f;
	bool		*have, have_alt;
	size_t		 i;

	memset(&fx, 0, sizeof fx);
	memset(&none, 0, sizeof none);
	fx.audit = a;
	fx.config = a->config;
	fx.nrecipes = -1;
	collect_seen(a, &fx.orig, &fx.norig);
	fx.chosen = xcalloc(a->nfindings, sizeof *fx.chosen);
	fixes = xcalloc(a->nfindings, sizeof *fixes);
	have = xcalloc(a->nfindings, sizeof *have);
	search_all(&fx, fixes, have);
	/*
	 * A fix may leave, on its finding's parameters, what another step
	 * got wrong (masked until then); when the fixes together do not
	 * pass for that, each is sought again leaving nothing new at all.
	 */
	for (i = 0; i < a->nfindings && have[i]; i++)
		;
	/* A finding without a fix keeps every union from passing. */
	if (!agree(&fx, fixes, have) && i == a->nfindings &&
	    a->nfindings > 1) {
		o = evaluate(&fx, &fx.failed);
		fx.strict = fx.failed.n == 0 || !o->valid;
		fx.navoid = o->nseen;
		fx.avoid = xcalloc(fx.navoid + 1, sizeof *fx.avoid);
		for (i = 0; i < fx.navoid; i++) {
			fx.avoid[i] = o->seen[i];
			fx.avoid[i].op = xstrdup(o->seen[i].op);
			fx.avoid[i].param = xstrdup(o->seen[i].param);
		}
		search_all(&fx, fixes, have);
		if (!agree(&fx, fixes, have) && !fx.strict) {
			fx.strict = true;
			search_all(&fx, fixes, have);
			(void)agree(&fx, fixes, have);
		}
	}
	for (i = 0; i < a->nfindings; i++) {
		f = &a->findings[i];
		have_alt = search_objective(&fx, f, &alt) &&
		    !(have[i] && candidate_has(&fixes[i], KEY_OBJECTIVE));
		if (have[i]) {
			f->fix_set = settings_of(a, &fixes[i]);
			f->nfix_set = (size_t)fixes[i].n;
			f->cause = fixes[i].key[0];
			f->fix = fix_text(&fx, f, &fixes[i], have_alt ? &alt :
			    NULL);
		} else {
			if (!settable(a->config, f->cause))
				f->cause = bearing_key(&fx, f);
			f->fix = have_alt ? alternative_text(a, f, &alt) :
			    prose_text(a, f);
		}
		if (have_alt) {
			f->fix_alternative = settings_of(a, &alt);
			f->nfix_alternative = (size_t)alt.n;
		}
	}
	for (i = 0; i < fx.nmemo; i++) {
		free(fx.memo[i].id);
		free_seen(fx.memo[i].seen, fx.memo[i].nseen);
	}
	free(fx.memo);
	free(fx.chosen);
	free(fixes);
	free(have);
	if (fx.avoid != NULL)
		free_seen(fx.avoid, fx.navoid);
	free_seen(fx.orig, fx.norig);
}

static const struct fix_setting *
copy_settings(struct arena *ar, const struct fix_setting *s, size_t n)
{
	struct fix_setting *c = arena_alloc(ar, (n + 1) * sizeof *c);
	size_t		 i;

	for (i = 0; i < n; i++) {
		c[i].key = s[i].key;		/* cfg_key_path's */
		c[i].value = s[i].value;	/* cfg_key_words' */
	}
	return c;
}

static const char *
copy_string(struct arena *ar, const char *s)
{
	return s != NULL ? arena_strdup(ar, s) : NULL;
}

/*
 * The fixes of a large audit: its findings copied, the audit freed, the
 * fixes derived from the copy, and the config audited again, the fixes
 * then given to its findings, which are the same.
 */
static void
derive_frugally(struct audit *a)
{
	const struct config *cfg = a->config;
	struct sym_context ctx;
	struct audit	 view;
	struct finding	*f, *v;
	size_t		 i, k;

	memset(&view, 0, sizeof view);
	arena_init(&view.arena);
	view.config = cfg;
	view.nfindings = a->nfindings;
	view.findings = arena_alloc(&view.arena, (a->nfindings + 1) *
	    sizeof *view.findings);
	for (i = 0; i < a->nfindings; i++) {
		f = &a->findings[i];
		v = &view.findings[i];
		v->kind = f->kind;
		v->cause = f->cause;
		v->op = copy_string(&view.arena, f->op);
		v->fix = copy_string(&view.arena, f->fix);
		v->nparams = f->nparams;
		v->params = arena_alloc(&view.arena, (f->nparams + 1) *
		    sizeof *v->params);
		for (k = 0; k < f->nparams; k++)
			v->params[k] = arena_strdup(&view.arena, f->params[k]);
	}
	audit_free(a);
	derive(&view);
	sym_context_build(&ctx, cfg);
	sym_audit(&ctx, a, NULL, NULL);
	sym_context_free(&ctx);
	for (i = 0; i < a->nfindings && a->nfindings == view.nfindings; i++) {
		f = &a->findings[i];
		v = &view.findings[i];
		if (f->kind != v->kind)
			continue;
		f->cause = v->cause;
		f->fix = copy_string(&a->arena, v->fix);
		f->fix_set = copy_settings(&a->arena, v->fix_set, v->nfix_set);
		f->nfix_set = v->nfix_set;
		f->fix_alternative = copy_settings(&a->arena,
		    v->fix_alternative, v->nfix_alternative);
		f->nfix_alternative = v->nfix_alternative;
	}
	arena_free(&view.arena);
}

void
fix_derive(struct audit *a)
{
	if (a->config == NULL || a->trace != NULL || a->nfindings == 0)
		return;
	if (!a->numeric && a->arena.used_bytes > FIX_FRUGAL_BYTES)
		derive_frugally(a);
	else
		derive(a);
}
