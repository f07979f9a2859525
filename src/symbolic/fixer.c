/*
 * The search of the fix of a finding (fix.h): which settings bear on it
 * (the families below, the launch flags of the frameworks that change a
 * profile's settings), the candidates they make, and the audit of the
 * config with each, memoized, judged against the findings it had.
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
#include "symbolic/fixer.h"
#include "symbolic/symbolic.h"

/* Fixes that remove a finding but add another, to be completed. */
#define FIX_MAX_PARTIALS	4
/* The most audits one finding's search may run. */
#define FIX_MAX_TRIES		400


/*
 * The settings that bear on a finding, in the order they are tried after
 * its cause.  Each ends with KEY__COUNT.  A finding's family is that of
 * its cause, else that of its kind (kind_families).
 */
static const enum cfg_key loss_family[] = {
	KEY_NORMALIZE_BY, KEY_SCALE, KEY_DP_DIVISOR, KEY_EXPERT_GRAD_DIVISOR,
	KEY_EXPERT_TP_DIVISOR, KEY_EXPERT_GTP_DIVISOR, KEY_EXPERT_AVG_SCALE,
	KEY_AVERAGE_IN_COLLECTIVE, KEY_FSDP_ONE_MEMBER,
	KEY_REPLICATE_ONLY, KEY_FSDP_DIVIDE_FACTOR, KEY_PP_NORMALIZE_BY,
	KEY_DP_GROUP, KEY_EXPERT_BUFFER, KEY__COUNT
};
static const enum cfg_key aux_family[] = { KEY_AUX_SCALE, KEY__COUNT };
static const enum cfg_key mtp_family[] = { KEY_MTP_SCALE, KEY__COUNT };
static const enum cfg_key tp_family[] = {
	KEY_ROUTER_GRAD, KEY_EXPERT_INPUT_GRAD, KEY_MOE_INPUT_GRAD,
	KEY_ROUTER_INPUT_GRAD, KEY_SP_PARAM_GRAD, KEY_QK_NORM_GRAD, KEY_KV_GRAD,
	KEY_OUT_NORM_GRAD, KEY__COUNT
};
static const enum cfg_key tied_family[] = {
	KEY_EMBEDDING_GRAD, KEY_TIED_BUCKET_START, KEY_TIED_EMBEDDING_BUCKET,
	KEY__COUNT
};
static const enum cfg_key group_family[] = {
	KEY_DP_GROUP, KEY_FSDP_ONE_MEMBER, KEY_EXPERT_BUFFER, KEY_DP_DIVISOR,
	KEY_EXPERT_GRAD_DIVISOR, KEY_EXPERT_GTP_DIVISOR, KEY_NORMALIZE_BY, KEY_SCALE, KEY_AUX_SCALE,
	KEY_MTP_SCALE, KEY__COUNT
};
static const enum cfg_key norm_family[] = {
	KEY_TP_DUPLICATES, KEY_TIED_COPIES, KEY_EXPERT_FILTER, KEY_SINK_FILTER,
	KEY_EXPERT_NORM, KEY_SHARD_GROUP, KEY_PP_REDUCE, KEY_CLIP_RANKS,
	KEY_DP_GROUP, KEY_FSDP_ONE_MEMBER, KEY__COUNT
};

/*
 * The loss's own weighing of its atoms: what the step minimizes, the
 * user's intent.  A step whose own setting (a sync: key) is the cause
 * of a finding is fixed by settings that leave these alone before any
 * that change them, a framework's flag included (Megatron-LM PR #7165:
 * the experts' gtp prescale is sync.expert_gtp_divisor's, while
 * --calculate-per-token-loss, which happens to drop that prescale too,
 * turns a mean of micro-batch means into a per-token loss).
 */
static const enum cfg_key objective_keys[] = {
	KEY_NORMALIZE_BY, KEY_SCALE, KEY_PP_NORMALIZE_BY, KEY_AUX_SCALE,
	KEY_MTP_SCALE, KEY_OBJECTIVE, KEY_MTP_OBJECTIVE, KEY__COUNT
};

static const struct {
	enum cfg_key		 cause;
	const enum cfg_key	*family;
} cause_families[] = {
	{ KEY_NORMALIZE_BY, loss_family },
	{ KEY_SCALE, loss_family },
	{ KEY_DP_DIVISOR, loss_family },
	{ KEY_EXPERT_GRAD_DIVISOR, loss_family },
	{ KEY_EXPERT_GTP_DIVISOR, loss_family },
	{ KEY_EXPERT_TP_DIVISOR, loss_family },
	{ KEY_EXPERT_AVG_SCALE, loss_family },
	{ KEY_AVERAGE_IN_COLLECTIVE, loss_family },
	{ KEY_REPLICATE_ONLY, loss_family },
	{ KEY_FSDP_DIVIDE_FACTOR, loss_family },
	{ KEY_PP_NORMALIZE_BY, loss_family },
	{ KEY_AUX_SCALE, aux_family },
	{ KEY_MTP_SCALE, mtp_family },
	{ KEY_ROUTER_GRAD, tp_family },
	{ KEY_EXPERT_INPUT_GRAD, tp_family },
	{ KEY_MOE_INPUT_GRAD, tp_family },
	{ KEY_ROUTER_INPUT_GRAD, tp_family },
	{ KEY_SP_PARAM_GRAD, tp_family },
	{ KEY_QK_NORM_GRAD, tp_family },
	{ KEY_KV_GRAD, tp_family },
	{ KEY_OUT_NORM_GRAD, tp_family },
	{ KEY_EMBEDDING_GRAD, tied_family },
	{ KEY_TIED_BUCKET_START, tied_family },
	{ KEY_TIED_EMBEDDING_BUCKET, tied_family },
	{ KEY_DP_GROUP, group_family },
	{ KEY_FSDP_ONE_MEMBER, group_family },
	{ KEY_EXPERT_BUFFER, group_family },
	{ KEY_TP_DUPLICATES, norm_family },
	{ KEY_TIED_COPIES, norm_family },
	{ KEY_EXPERT_FILTER, norm_family },
	{ KEY_SINK_FILTER, norm_family },
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

void
fixer_collect_seen(const struct audit *a, struct seen **out, size_t *n)
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

void
fixer_free_seen(struct seen *s, size_t n)
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
 * *cfg: all of it, or with of, one of its parameters alone, in *probed
 * its index in of->params (sym_audit_param; -1, *a holding nothing, when
 * the model has none of them).  False when that config does not load or
 * cannot be audited, which is known before either audit runs, or when
 * its audit went past GRADAUDIT_MAX_MEMORY (counted in fx->over_limit):
 * a candidate, not the config, it is then no fix, and the search goes
 * on with the others.  The caller frees both (audit_free, cfg_free)
 * either way.
 */
static bool
audit_with(struct fixer *fx, const struct candidate *c,
    const struct finding *of, int *probed, struct config *cfg,
    struct audit *a)
{
	struct sym_context ctx;
	enum cfg_key	 blame;
	char		 why[SYM_WHY_SIZE];
	bool		 valid = false;
	int		 k;

	memset(a, 0, sizeof *a);
	/* A candidate's audit takes the blocks of the audit being fixed. */
	arena_init_cached(&a->arena, fx->audit->arena.cache);
	cfg_copy(cfg, fx->config);
	for (k = 0; k < c->n; k++)
		if (cfg_key_set(cfg, c->key[k], c->value[k]) == -1)
			return false;
	if (cfg_check_constraints(cfg, why, sizeof why) != NULL)
		return false;
	sym_context_build(&ctx, cfg);
	ctx.no_effects = true;
	ctx.over_limit_returns = true;
	ctx.blocks = fx->audit->arena.cache;
	if (sym_context_unauditable(&ctx, cfg, &blame, why,
	    sizeof why) == NULL) {
		audit_free(a);
		if (of == NULL)
			valid = sym_audit(&ctx, a, NULL, NULL);
		else {
			*probed = sym_audit_param(&ctx, a, of->params,
			    of->nparams);
			if (*probed == -1)
				arena_init_cached(&a->arena, ctx.blocks);
			valid = *probed != -2;
		}
		if (!valid)
			fx->over_limit++;
	}
	sym_context_free(&ctx);
	return valid;
}

bool
fixer_audit_candidate(struct fixer *fx, const struct candidate *c,
    struct config *cfg, struct audit *a)
{
	return audit_with(fx, c, NULL, NULL, cfg, a);
}

/* The memo's entry of candidate c, new (not audited) when c is. */
static struct outcome *
memo_entry(struct fixer *fx, const struct candidate *c)
{
	struct outcome	*o;
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
	return o;
}

const struct outcome *
fixer_audited(const struct fixer *fx, const struct candidate *c)
{
	char	 id[1024];
	size_t	 i;

	candidate_id(c, id, sizeof id);
	for (i = 0; i < fx->nmemo; i++)
		if (strcmp(fx->memo[i].id, id) == 0)
			return fx->memo[i].audited ? &fx->memo[i] : NULL;
	return NULL;
}

/* Audit the config with candidate c applied, once per candidate. */
const struct outcome *
fixer_evaluate(struct fixer *fx, const struct candidate *c)
{
	struct outcome	*o = memo_entry(fx, c);
	struct config	 cfg;
	struct audit	 a;

	if (o->audited)
		return o;
	o->audited = true;
	if (fixer_audit_candidate(fx, c, &cfg, &a)) {
		o->valid = true;
		o->passes = audit_passes(&a);
		fixer_collect_seen(&a, &o->seen, &o->nseen);
	}
	audit_free(&a);
	cfg_free(&cfg);
	return o;
}

/*
 * Audit one of f's parameters alone with candidate c applied (the one
 * sym_audit_param finds cheapest) and add what it found there to
 * o->probed.  A config that cannot be audited is known whole by that:
 * fixer_evaluate would find it so before auditing.
 */
static void
probe(struct fixer *fx, struct outcome *o, const struct candidate *c,
    const struct finding *f)
{
	struct config	 cfg;
	struct audit	 a;
	struct seen	*s;
	size_t		 n;
	int		 at = -1;

	if (audit_with(fx, c, f, &at, &cfg, &a)) {
		fixer_collect_seen(&a, &s, &n);
		o->probed = xreallocarray(o->probed, o->nprobed + n + 1,
		    sizeof *o->probed);
		memcpy(o->probed + o->nprobed, s, n * sizeof *s);
		while (n-- > 0)
			o->probed[o->nprobed++].probed = true;
		free(s);
	} else
		o->audited = true;
	/* None of them in the model: f's first stands for them. */
	o->probes = xreallocarray(o->probes, o->nprobes + 1,
	    sizeof *o->probes);
	o->probes[o->nprobes++] = xstrdup(f->params[at >= 0 ? at : 0]);
	audit_free(&a);
	cfg_free(&cfg);
}

void
fixer_free_memo(struct fixer *fx)
{
	size_t	i, k;

	for (i = 0; i < fx->nmemo; i++) {
		free(fx->memo[i].id);
		fixer_free_seen(fx->memo[i].seen, fx->memo[i].nseen);
		fixer_free_seen(fx->memo[i].probed, fx->memo[i].nprobed);
		for (k = 0; k < fx->memo[i].nprobes; k++)
			free(fx->memo[i].probes[k]);
		free(fx->memo[i].probes);
	}
	free(fx->memo);
	fx->memo = NULL;
	fx->nmemo = fx->capmemo = 0;
}

/* Is f's kind and op on s's parameter, one of f's? */
bool
fixer_still_there(const struct finding *f, const struct seen *s)
{
	return s->kind == f->kind && fixer_holds(f, s->param) &&
	    strcmp(s->op, f->op != NULL ? f->op : "") == 0;
}

bool
fixer_holds(const struct finding *f, const char *param)
{
	size_t	i;

	for (i = 0; i < f->nparams; i++)
		if (strcmp(f->params[i], param) == 0)
			return true;
	return false;
}

static const enum cfg_key *family_of(enum cfg_key, enum finding_kind);

static bool
weighs_objective(enum cfg_key k)
{
	int	i;

	for (i = 0; objective_keys[i] != KEY__COUNT; i++)
		if (objective_keys[i] == k)
			return true;
	return false;
}

/* Does candidate c change how the loss weighs its atoms? */
static bool
changes_objective(const struct candidate *c)
{
	int	i;

	for (i = 0; i < c->n; i++)
		if (weighs_objective(c->key[i]))
			return true;
	return false;
}

/* Did the config have s: its kind and op on its parameter? */
bool
fixer_had(const struct fixer *fx, const struct seen *s)
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

	if (fixer_had(fx, s))
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
	/*
	 * A probe's cause may not be the whole audit's, where a finding of
	 * several parameters keeps its first one's: unknown, it counts as
	 * resolved, so that a probe's verdict is never worse (judge_seens).
	 */
	if (fixer_holds(f, s->param))
		return !kind || (!s->probed && family_of(s->cause, s->kind) ==
		    family_of(f->cause, f->kind));
	return !kind || !param;
}

/* What s, found with a fix of f applied, says of it (fixer_judge). */
static enum verdict
judge_seen(const struct fixer *fx, const struct finding *f,
    const struct seen *s)
{
	if (s->kind == f->kind && fixer_holds(f, s->param)) {
		if (fixer_still_there(f, s))
			return FIX_NO;
		/* Its kind there from another step, new here. */
		return fixer_had(fx, s) ? FIX_YES : FIX_PARTIAL;
	}
	return unresolved(fx, f, s) ? FIX_PARTIAL : FIX_YES;
}

/*
 * The worst of what s[0..n) say of a fix of f: each is judged alone, so
 * that of some of the findings is never worse than that of all.
 */
static enum verdict
judge_seens(const struct fixer *fx, const struct finding *f,
    const struct seen *s, size_t n)
{
	enum verdict	 v = FIX_YES, w;
	size_t		 i;

	for (i = 0; i < n; i++) {
		if ((w = judge_seen(fx, f, &s[i])) == FIX_NO)
			return FIX_NO;
		if (w == FIX_PARTIAL)
			v = FIX_PARTIAL;
	}
	return v;
}

/*
 * Is finding f gone (its kind and op on none of its parameters) with
 * nothing unresolved in its place (FIX_YES); gone, something left to fix
 * (FIX_PARTIAL); or still there (FIX_NO)?  A finding is its kind and op:
 * the main loss's wrong weights and the MTP losses' are two.
 */
enum verdict
fixer_judge(const struct fixer *fx, const struct finding *f,
    const struct outcome *o)
{
	if (!o->valid)
		return FIX_NO;
	return judge_seens(fx, f, o->seen, o->nseen);
}

/*
 * At best, fixer_judge of f on the audit of candidate c, without
 * auditing it whole where possible (issue 24: the fix search of a wrong
 * MTP + cp config of 4,096 ranks ran 32 whole audits, 2 s, most of them
 * to see the finding still there).  The audit of one of f's parameters
 * alone (sym_audit_param) finds on it just what the whole audit finds
 * there (no step mixes two parameters' values), and judge_seens of some
 * of the findings is never worse than of all: FIX_NO from it is the
 * whole audit's verdict, and FIX_PARTIAL says it cannot be FIX_YES.  FIX_YES
 * says nothing: f gone from one parameter may stay on another, or
 * something new appear elsewhere.
 */
/* The memo's entry of c, with a probe of one of f's parameters. */
static struct outcome *
probed(struct fixer *fx, const struct finding *f, const struct candidate *c)
{
	struct outcome	*o = memo_entry(fx, c);
	size_t		 i;

	for (i = 0; i < o->nprobes && !fixer_holds(f, o->probes[i]); i++)
		;
	if (i == o->nprobes)
		probe(fx, o, c, f);
	return o;
}

/*
 * Does the probe of the config itself find f, as it must for a probe to
 * reject anything?  Not for a finding of the gradient norm, which no
 * parameter audited alone has: probing each candidate for it would only
 * add to the whole audits (testdata/nanogpt-30-ddp-sync-first.yaml's
 * clip finding, 57 of them).
 */
static bool
probe_finds(struct fixer *fx, const struct finding *f)
{
	struct candidate none;
	const struct outcome *o;
	size_t		 i;

	memset(&none, 0, sizeof none);
	o = probed(fx, f, &none);
	for (i = 0; i < o->nprobed; i++)
		if (fixer_still_there(f, &o->probed[i]))
			return true;
	return false;
}

static enum verdict
probed_verdict(struct fixer *fx, const struct finding *f,
    const struct candidate *c)
{
	struct outcome	*o;

	if (f->nparams == 0 || fx->whole || memo_entry(fx, c)->audited ||
	    !probe_finds(fx, f))
		return FIX_YES;
	o = probed(fx, f, c);
	if (o->audited)
		return o->valid ? FIX_YES : FIX_NO;
	return judge_seens(fx, f, o->probed, o->nprobed);
}

/* fixer_judge of f on the audit of candidate c. */
enum verdict
fixer_verdict(struct fixer *fx, const struct finding *f,
    const struct candidate *c)
{
	if (probed_verdict(fx, f, c) == FIX_NO)
		return FIX_NO;
	return fixer_judge(fx, f, fixer_evaluate(fx, c));
}

/* Is fixer_verdict FIX_YES? */
bool
fixer_fixes(struct fixer *fx, const struct finding *f,
    const struct candidate *c)
{
	if (probed_verdict(fx, f, c) != FIX_YES)
		return false;
	return fixer_judge(fx, f, fixer_evaluate(fx, c)) == FIX_YES;
}

bool
fixer_candidate_has(const struct candidate *c, enum cfg_key k)
{
	int	i;

	for (i = 0; i < c->n; i++)
		if (c->key[i] == k)
			return true;
	return false;
}

/* Add k=v to c unless c sets k already; false when it cannot. */
bool
fixer_candidate_add(struct candidate *c, enum cfg_key k, const char *v)
{
	if (fixer_candidate_has(c, k) || c->n == FIX_MAX_SETTINGS)
		return false;
	c->key[c->n] = k;
	c->value[c->n++] = v;
	return true;
}

/* The spelling of one of k's words equal to s (a static string), or NULL. */
const char *
fixer_word_of(enum cfg_key k, const char *s)
{
	const char *const *w = cfg_key_words(k);
	int	 i;

	for (i = 0; w != NULL && w[i] != NULL; i++)
		if (strcmp(w[i], s) == 0)
			return w[i];
	return NULL;
}

bool
fixer_current_is(const struct config *c, enum cfg_key k, const char *v)
{
	char	cur[64];

	cfg_key_value(c, k, cur, sizeof cur);
	return strcmp(cur, v) == 0;
}

bool
fixer_from_profile(const struct config *c, enum cfg_key k)
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
		if (!fixer_current_is(c, k, v))
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
int
fixer_values_of(const struct config *c, enum cfg_key k, const char **out, int max)
{
	const char *const *w = cfg_key_words(k);
	const struct fw_profile *p;
	char	 v[64];
	int	 i, j, n = 0, sz, cur;

	if (w == NULL)
		return 0;
	cfg_key_default(k, v, sizeof v);
	n = add_value(out, n, max, fixer_word_of(k, v));
	if (fixer_from_profile(c, k) && (p = later_profile(c, k)) != NULL) {
		cfg_key_value(&p->settings, k, v, sizeof v);
		n = add_value(out, n, max, fixer_word_of(k, v));
	}
	if (k == KEY_SCALE || k == KEY_DP_DIVISOR)
		n = add_value(out, n, max, fixer_word_of(k, "none"));
	for (i = 0; w[i] != NULL; i++)
		n = add_value(out, n, max, w[i]);
	cfg_key_value(c, k, v, sizeof v);
	cur = size_of(c, k, v);
	for (i = j = 0; i < n; i++) {
		if (fixer_current_is(c, k, out[i]))
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
	return !fixer_current_is(c, k, d);
}

bool
fixer_settable(const struct config *c, enum cfg_key k)
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
int
fixer_keys_to_try(const struct config *c, enum cfg_key cause,
    enum finding_kind kind, enum cfg_key *out, int n, int max)
{
	const enum cfg_key *fam = family_of(cause, kind);
	int	 pass, i;

	/*
	 * A step of plan: is the user's own (issue 25): no setting decides
	 * it, and another one that happened to cancel its factor would hide
	 * the step rather than fix it.
	 */
	if (cause == KEY_PLAN)
		return n;
	if (fixer_settable(c, cause))
		n = add_key(out, n, max, cause);
	for (pass = 0; pass < 2 && fam != NULL; pass++)
		for (i = 0; fam[i] != KEY__COUNT; i++)
			if (fixer_settable(c, fam[i]) &&
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
		    !fixer_settable(c, fs->key) || !fixer_from_profile(c, fs->key) ||
		    fixer_current_is(c, fs->key, fs->value))
			continue;
		(void)fixer_candidate_add(out, fs->key, fixer_word_of(fs->key, fs->value));
		for (j = 0; j < nkeys; j++)
			if (keys[j] == fs->key)
				touches = true;
	}
	return touches && out->n > 0;
}

/* Drop every setting the fix still works without. */
void
fixer_minimize(struct fixer *fx, const struct finding *f, struct candidate *c)
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
		if (fixer_fixes(fx, f, &t))
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
	if ((out[0] = fixer_word_of(k, cur)) == NULL)
		return 0;
	return 1 + fixer_values_of(c, k, out + 1, max - 1);
}

/*
 * Does the loss of config t, divided by its dp_divisor, weigh its atoms
 * as the objective does (which: lossnorm_main_matches, ...)?  False for
 * a config the loader would refuse.
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
 * Order the values of loss.mtp_scale to try alone so that those
 * lossnorm says weigh the MTP terms right with the default
 * uneven valid tokens come first, the others after in their order.
 * With every token valid, PR #3159's division by a rank's own rolled
 * count (loss.mtp_scale: tokens-local) weighs the MTP terms as the step's
 * count does (tokens-global), and the audit of this step cannot tell them
 * apart; but only the step's count is right whatever the ranks hold
 * (Megatron #7452 finding 3), and a fix should not hang on the batch.
 */
static void
robust_first(const struct config *c, enum cfg_key k, const char **vals,
    int n)
{
	const char	*rest[16];
	struct config	 uneven;
	struct mesh	 mesh;
	int		 i, j = 0, m = 0;

	if (k != KEY_MTP_SCALE)
		return;
	cfg_copy(&uneven, c);
	free(uneven.loss.valid_tokens);
	uneven.loss.valid_tokens = NULL;
	mesh_from_config(&mesh, c);
	for (i = 0; i < n && i < 16; i++) {
		(void)cfg_key_set(&uneven, k, vals[i]);
		if (loss_matches(&uneven, &mesh, lossnorm_mtp_matches))
			vals[j++] = vals[i];
		else
			rest[m++] = vals[i];
	}
	memcpy(vals + j, rest, (size_t)m * sizeof *vals);
	cfg_free(&uneven);
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
					(void)fixer_candidate_add(&r,
					    KEY_NORMALIZE_BY, nv[i]);
				if (j > 0)
					(void)fixer_candidate_add(&r, KEY_SCALE,
					    sv[j]);
				if (d > 0)
					(void)fixer_candidate_add(&r,
					    KEY_DP_DIVISOR, dv[d]);
				for (e = 0; e < 2; e++)
					if (!fixer_current_is(c, extra[e], ev[e]))
						(void)fixer_candidate_add(&r,
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

	/* A step of plan: is the user's own (fixer_keys_to_try). */
	if (cause == KEY_PLAN)
		return false;
	return fam == loss_family || fam == aux_family || fam == mtp_family;
}

/* t = a and b, unless they set one key to two values. */
bool
fixer_merge(struct candidate *t, const struct candidate *a,
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
		if (!fixer_candidate_add(t, b->key[i], b->value[i]))
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

	if (fx->tries++ >= FIX_MAX_TRIES || !fixer_merge(&m, base, t))
		return false;
	if (base->n == 0)
		m.flag = t->flag;
	r = fixer_verdict(fx, f, &m);
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

/* Try each value of k alone on top of base (try). */
static bool
try_key(struct fixer *fx, const struct finding *f,
    const struct candidate *base, enum cfg_key k, struct candidate *next,
    int *nnext, struct candidate *best)
{
	struct candidate t;
	const char	*vals[16];
	int		 nvals, v;

	nvals = fixer_values_of(fx->config, k, vals, 16);
	robust_first(fx->config, k, vals, nvals);
	for (v = 0; v < nvals; v++) {
		memset(&t, 0, sizeof t);
		(void)fixer_candidate_add(&t, k, vals[v]);
		if (try(fx, f, base, &t, next, nnext, best))
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
bool
fixer_search(struct fixer *fx, const struct finding *f,
    const struct candidate *base, struct candidate *best)
{
	const struct config *c = fx->config;
	struct candidate cur[FIX_MAX_PARTIALS], next[FIX_MAX_PARTIALS], t;
	const struct outcome *o;
	enum cfg_key	 keys[KEY__COUNT];
	const char	*vals[16];
	size_t		 i;
	int		 nkeys, nvals, ncur, nnext = 0, k, v, p, depth, pass;
	bool		 loss, step_first;

	fx->tries = 0;
	nkeys = fixer_keys_to_try(c, f->cause, f->kind, keys, 0, KEY__COUNT);
	/*
	 * The fix of an earlier finding first: findings of one cause get one
	 * fix, and fixes that agree can be applied together.
	 */
	for (i = 0; i < fx->nchosen; i++)
		if (try(fx, f, base, &fx->chosen[i], next, &nnext, best))
			return true;
	nnext = 0;
	/*
	 * A framework's own flag first, where its profile decided it, then
	 * the settings one at a time.  When the step's own setting is the
	 * cause, the flags and settings that leave the objective alone go
	 * first (objective_keys), the others after, in the same order.
	 */
	step_first = fixer_settable(c, f->cause) &&
	    !weighs_objective(f->cause);
	for (pass = 0; pass < (step_first ? 2 : 1); pass++) {
		for (i = 0; c->profile != NULL && i < NFLAG_SETTINGS; i++) {
			if (i > 0 && strcmp(flag_settings[i].flag,
			    flag_settings[i - 1].flag) == 0)
				continue;
			if (flag_candidate(c, flag_settings[i].flag, keys,
			    nkeys, &t) && (!step_first ||
			    changes_objective(&t) == (pass == 1)) &&
			    try(fx, f, base, &t, next, &nnext, best))
				return true;
		}
		for (k = 0; k < nkeys; k++)
			if ((!step_first ||
			    weighs_objective(keys[k]) == (pass == 1)) &&
			    try_key(fx, f, base, keys[k], next, &nnext, best))
				return true;
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
			if (fixer_candidate_has(&fx->chosen[i], keys[k]))
				continue;
			nvals = fixer_values_of(c, keys[k], vals, 16);
			for (v = 0; v < nvals; v++) {
				t = fx->chosen[i];
				t.flag = NULL;
				if (fixer_candidate_add(&t, keys[k], vals[v]) &&
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
			o = fixer_evaluate(fx, &cur[p]);
			for (i = 0; i < o->nseen; i++)
				if (unresolved(fx, f, &o->seen[i])) {
					nkeys = fixer_keys_to_try(c, o->seen[i].cause,
					    o->seen[i].kind, keys, nkeys,
					    KEY__COUNT);
					loss = loss || loss_finding(
					    o->seen[i].cause, o->seen[i].kind);
				}
			for (k = 0; k < nkeys; k++) {
				if (fixer_candidate_has(&cur[p], keys[k]))
					continue;
				nvals = fixer_values_of(c, keys[k], vals, 16);
				for (v = 0; v < nvals; v++) {
					memset(&t, 0, sizeof t);
					(void)fixer_candidate_add(&t, keys[k],
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
 * means without --calculate-per-token-loss; for the MTP terms, the main
 * labels' count that torchtitan's MTPLoss divides by from f59c215e8,
 * loss.mtp_objective).
 */
bool
fixer_search_objective(struct fixer *fx, const struct finding *f,
    struct candidate *best)
{
	const enum cfg_key *fam = family_of(f->cause, f->kind);
	enum cfg_key	 key;
	const char	*vals[8];
	int		 n, v;

	if (fam == loss_family)
		key = KEY_OBJECTIVE;
	else if (fam == mtp_family)
		key = KEY_MTP_OBJECTIVE;
	else
		return false;
	if (!fixer_settable(fx->config, key))
		return false;
	n = fixer_values_of(fx->config, key, vals, 8);
	for (v = 0; v < n; v++) {
		memset(best, 0, sizeof *best);
		(void)fixer_candidate_add(best, key, vals[v]);
		if (fixer_fixes(fx, f, best))
			return true;
	}
	return false;
}

