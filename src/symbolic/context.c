/*
 * The context of one audit (context.h): built once, read by both engines,
 * and the reasons a valid config cannot be audited at all.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitcode.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "config/framework.h"
#include "symbolic/context.h"

static int64_t	memory_limit(void);

void
sym_context_build(struct sym_context *ctx, const struct config *cfg)
{
	memset(ctx, 0, sizeof *ctx);
	ctx->memory_limit = memory_limit();
	model_build(&ctx->model, cfg);
	ctx->grad_placement = xcalloc(ctx->model.nparams,
	    sizeof *ctx->grad_placement);
	pl_walk(&ctx->model, ctx->grad_placement, &ctx->reductions,
	    &ctx->nreductions);
	pl_mark_boundaries(&ctx->model, ctx->reductions, ctx->nreductions);
	layout_build(&ctx->layout, &ctx->model);
	syncplan_build(&ctx->plan, &ctx->model, ctx->grad_placement);
	atom_space_build(&ctx->atoms, &ctx->model.loss, &ctx->model.mesh);
}

/*
 * What the symbolic audit takes: a value per parameter copy (a parameter,
 * experts and multi-token prediction layers among them, on a rank holding
 * it: cp, tp and dp multiply them) of about 240 bytes, and in it a term
 * per gradient atom it sums, each micro-batch of each of its sources (the
 * rank's own loss; the auxiliary losses, each multi-token prediction
 * layer, the ranks of an ep group whose expert gradients are kept apart;
 * twice past a lossy MoE boundary).  Measured as the peak resident size
 * over meshes of 256 to 1,048,576 ranks: up to 80 bytes a term and copy,
 * with multi-token prediction (dense micro-batches took 15 to 50).  The
 * limit counted the copies alone, so mesh: {dp: 32768, cp: 32} with 32
 * micro-batches was accepted and took 7.6 to 9 GB (issue 26).  The
 * default, 2^24 copies of one term, is what the 1,048,576-rank MoE config
 * of scripts/bench needs (1.75 GB for its 7,733,248 copies); a machine
 * with more or less memory says so in GRADAUDIT_MAX_MEMORY.
 */
#define SYM_BYTES_PER_COPY	240
#define SYM_BYTES_PER_TERM	80
#define SYM_MAX_MIB		((int64_t)240 << 4)	/* 2^24 copies, 3840 MiB */
#define SYM_MAX_MIB_ENV		"GRADAUDIT_MAX_MEMORY"

/* The memory the audit may take, in bytes, or -1 after *why. */
static int64_t
memory_budget(char *why, size_t len)
{
	const char	*env = getenv(SYM_MAX_MIB_ENV);
	char		*end, q[TEXT_QUOTE_SIZE];
	long long	 mib;

	if (env == NULL || *env == '\0')
		return SYM_MAX_MIB << 20;
	errno = 0;
	mib = strtoll(env, &end, 10);
	if (!isdigit((unsigned char)*env) || *end != '\0' || errno != 0 ||
	    mib < 1 || mib > ((int64_t)1 << 30)) {
		text_escape(q, sizeof q, env, strlen(env));
		snprintf(why, len, "%s=\"%s\": expected the MiB the symbolic "
		    "audit may take, from 1 to %lld", SYM_MAX_MIB_ENV, q,
		    (long long)1 << 30);
		return -1;
	}
	return (int64_t)mib << 20;
}

/* The budget; a bad value was refused before any config (cmd.c). */
static int64_t
memory_limit(void)
{
	char	 why[SYM_WHY_SIZE];
	int64_t	 b = memory_budget(why, sizeof why);

	return b < 0 ? SYM_MAX_MIB << 20 : b;
}

const char *
sym_memory_limit_invalid(char *why, size_t len)
{
	return memory_budget(why, len) < 0 ? why : NULL;
}

/*
 * The size of an audit: its parameter copies, and the terms of each,
 * micro-batches x sources (atom.h); at_least when the sources are those
 * of one micro-batch, which more micro-batches may split (lossnorm.h).
 */
struct audit_size {
	int64_t	 copies;
	int	 nparams, cp, tp;
	int	 micro_batches;
	int64_t	 sources;
	bool	 at_least;
};

static void
size_of(const struct model *m, struct audit_size *z)
{
	int	 p;

	memset(z, 0, sizeof *z);
	z->nparams = m->nparams;
	z->cp = m->mesh.cp;
	z->tp = m->mesh.tp;
	z->copies = (int64_t)m->nparams * m->mesh.dp * m->mesh.tp;
	z->micro_batches = m->loss.micro_batches;
	z->sources = m->loss.sources;
	/* Held atoms double every term (atom.h). */
	for (p = 0; p < m->nparams; p++)
		if (m->params[p].boundary >= 0) {
			z->sources *= 2;
			break;
		}
}

static int64_t
bytes_per_copy(int64_t terms)
{
	return SYM_BYTES_PER_COPY + SYM_BYTES_PER_TERM * (terms - 1);
}

/*
 * The audit too large for the budget: the product, and the largest
 * training.micro_batches that fits, else the largest mesh.dp.
 */
static const char *
too_large(const struct audit_size *z, int64_t budget, enum cfg_key *blame,
    char *why, size_t len)
{
	int64_t	 terms = z->sources * z->micro_batches, k_max, dp_max, gib;
	const char *least = z->at_least ? "at least " : "";
	int	 n;

	if (z->copies <= budget / bytes_per_copy(terms))
		return NULL;
	/* Rounded up: "up to 0 GiB" is no reason to refuse. */
	gib = (int64_t)(((double)z->copies * (double)bytes_per_copy(terms) +
	    (1 << 30) - 1) / (1 << 30));
	n = snprintf(why, len, "the audit would hold %lld parameter copies "
	    "(parameters x ranks holding them) of %s%lld gradient term%s each "
	    "(%d micro-batch%s x %s%lld source%s), %s%lld GiB; at most "
	    "%lld MiB is supported (%s): ", (long long)z->copies, least,
	    (long long)terms, terms == 1 ? "" : "s", z->micro_batches,
	    z->micro_batches == 1 ? "" : "es", least, (long long)z->sources,
	    z->sources == 1 ? "" : "s", z->at_least ? "over " : "up to ",
	    (long long)gib, (long long)(budget >> 20), SYM_MAX_MIB_ENV);
	if (n < 0 || (size_t)n >= len)
		return why;
	k_max = budget / z->copies < SYM_BYTES_PER_COPY ? 0 :
	    ((budget / z->copies - SYM_BYTES_PER_COPY) / SYM_BYTES_PER_TERM +
	    1) / z->sources;
	if (z->micro_batches > 1 && k_max >= 1) {
		*blame = KEY_MICRO_BATCHES;
		snprintf(why + n, len - (size_t)n, "audit fewer micro-batches, "
		    "with --set training.micro_batches=N (N at most %lld)",
		    (long long)k_max);
		return why;
	}
	/* The mesh multiplies the copies: the config's dp, cp counted. */
	*blame = KEY_MESH;
	dp_max = budget / bytes_per_copy(terms) / ((int64_t)z->nparams *
	    z->cp * z->tp);
	if (dp_max < 1)
		snprintf(why + n, len - (size_t)n, "audit the recipe with "
		    "fewer model.layers%s (--set)", z->micro_batches > 1 ?
		    " and training.micro_batches" : "");
	else
		snprintf(why + n, len - (size_t)n, "audit the recipe on a "
		    "smaller mesh, with --set mesh.dp=N (N at most %lld) or "
		    "fewer model.layers", (long long)dp_max);
	return why;
}

/* The copies of a model's parameters, if too many to audit. */
static const char *
too_many_copies(const struct model *m, enum cfg_key *blame, char *why,
    size_t len)
{
	struct audit_size z;
	int64_t		 budget;

	if ((int64_t)m->mesh.world * m->loss.sources *
	    m->loss.micro_batches > (int64_t)UINT32_MAX) {
		*blame = KEY_MICRO_BATCHES;
		snprintf(why, len, "the audit would name %lld gradient atoms "
		    "(ranks x micro-batches x expert sources); at most %lld "
		    "are supported: audit fewer training.micro_batches",
		    (long long)m->mesh.world * m->loss.sources *
		    m->loss.micro_batches, (long long)UINT32_MAX);
		return why;
	}
	if ((budget = memory_budget(why, len)) < 0) {
		*blame = KEY_MESH;
		return why;
	}
	size_of(m, &z);
	return too_large(&z, budget, blame, why, len);
}

/*
 * The model's loss holds numbers per chunk (micro-batch x dp x cp) and
 * per multi-token prediction layer: refusing 32 micro-batches of 1,048,576
 * ranks with 4 such layers first took 3.3 GB to build them (issue 26).  So
 * a model of one micro-batch, whose loss is that many times smaller, says
 * first whether the audit would be too large even with its sources, which
 * more micro-batches can only split further.
 */
static const char *
too_large_at_once(const struct config *cfg, enum cfg_key *blame, char *why,
    size_t len)
{
	struct config	 one;
	struct model	 m;
	struct audit_size z;
	const char	*r = NULL;
	int64_t		 budget;

	if (cfg->training.micro_batches == 1 || (budget = memory_budget(why,
	    len)) < 0)
		return NULL;
	cfg_copy(&one, cfg);
	one.training.micro_batches = 1;
	model_build(&m, &one);
	size_of(&m, &z);
	z.micro_batches = cfg->training.micro_batches;
	z.at_least = cfg->model.has_moe && cfg->mesh.ep > 1 && !m.loss.split;
	r = too_large(&z, budget, blame, why, len);
	model_free(&m);
	cfg_free(&one);
	return r;
}

/* What the model's loss normalization cannot express (lossnorm.h). */
static const char *
unmodelled_loss(const struct model *m, enum cfg_key *blame, char *why,
    size_t len)
{
	if (m->loss.unmodelled == NULL)
		return NULL;
	snprintf(why, len, "%s", m->loss.unmodelled);
	*blame = KEY_MTP;
	return why;
}

/* A layout the framework would stop at start-up on. */
static const char *
refused_layout(const struct config *cfg, const struct layout *lay,
    enum cfg_key *blame, char *why, size_t len)
{
	if (lay->refusal == NULL)
		return NULL;
	if (cfg->profile != NULL)
		snprintf(why, len, "%s (profile %s) stops %s",
		    cfg->framework, cfg->profile->label, lay->refusal);
	else
		snprintf(why, len, "the layout: rules stop training %s",
		    lay->refusal);
	*blame = cfg->profile != NULL ? KEY_FRAMEWORK : KEY_LAYOUT;
	return why;
}

/* A plan: that cannot run on this model (syncplan.h). */
static const char *
refused_plan(const char *refusal, enum cfg_key *blame, char *why,
    size_t len)
{
	if (refusal == NULL)
		return NULL;
	*blame = KEY_PLAN;
	if (refusal != why)
		snprintf(why, len, "%s", refusal);
	return why;
}

const char *
sym_unauditable(const struct config *cfg, enum cfg_key *blame, char *why,
    size_t len)
{
	struct cfg_mark	 at;

	return sym_unauditable_at(cfg, blame, &at, why, len);
}

const char *
sym_unauditable_at(const struct config *cfg, enum cfg_key *blame,
    struct cfg_mark *at, char *why, size_t len)
{
	struct model	 m;
	struct layout	 lay;
	const char	*r;

	at->line = at->col = 0;
	if ((r = too_large_at_once(cfg, blame, why, len)) != NULL)
		return r;
	model_build(&m, cfg);
	if ((r = refused_plan(syncplan_refusal(&m, at, why, len), blame, why,
	    len)) == NULL &&
	    (r = unmodelled_loss(&m, blame, why, len)) == NULL &&
	    (r = too_many_copies(&m, blame, why, len)) == NULL) {
		layout_build(&lay, &m);
		r = refused_layout(cfg, &lay, blame, why, len);
		layout_free(&lay);
	}
	model_free(&m);
	return r;
}

const char *
sym_context_unauditable(const struct sym_context *ctx,
    const struct config *cfg, enum cfg_key *blame, char *why, size_t len)
{
	const char	*r;

	if ((r = refused_plan(ctx->plan.refusal, blame, why, len)) == NULL &&
	    (r = unmodelled_loss(&ctx->model, blame, why, len)) == NULL &&
	    (r = too_many_copies(&ctx->model, blame, why, len)) == NULL)
		r = refused_layout(cfg, &ctx->layout, blame, why, len);
	return r;
}

void
sym_context_over_limit(const struct sym_context *ctx, const char *why)
{
	if (ctx->over_limit_returns)
		return;
	if (ctx->over_limit != NULL)
		ctx->over_limit(why, ctx->over_limit_arg);
	fprintf(stderr, "%s: %s\n", progname, why);
	exit(EXIT_USAGE);
}

void
sym_context_free(struct sym_context *ctx)
{
	atom_space_free(&ctx->atoms);
	syncplan_free(&ctx->plan);
	layout_free(&ctx->layout);
	free(ctx->reductions);
	free(ctx->grad_placement);
	model_free(&ctx->model);
	memset(ctx, 0, sizeof *ctx);
}
