/*
 * The context of one audit (context.h): built once, read by both engines,
 * and the reasons a valid config cannot be audited at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "framework.h"
#include "xmalloc.h"

void
sym_context_build(struct sym_context *ctx, const struct config *cfg)
{
	memset(ctx, 0, sizeof *ctx);
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
 * Parameter copies (parameters times the ranks holding each) audited, and
 * the memory each takes at most, measured: 1.75 GB for the 7,733,248 of
 * the 1,048,576-rank MoE config of scripts/bench (issue 10: the limit was
 * 4,194,304, which refused the config's own world limit).
 */
#define SYM_MAX_COPIES		((int64_t)1 << 24)
#define SYM_BYTES_PER_COPY	240

/* The copies of a model's parameters, if too many to audit. */
static const char *
too_many_copies(const struct model *m, enum cfg_key *blame, char *why,
    size_t len)
{
	int64_t	 copies, dp_max;

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
	copies = (int64_t)m->nparams * m->mesh.dp * m->mesh.tp;
	if (copies <= SYM_MAX_COPIES)
		return NULL;
	/*
	 * The mesh multiplies the copies: point at it, and at the smaller
	 * dp that would fit with the same layers.
	 */
	*blame = KEY_MESH;
	dp_max = SYM_MAX_COPIES / ((int64_t)m->nparams * m->mesh.tp);
	if (dp_max < 1)
		snprintf(why, len, "the audit would hold %lld parameter copies "
		    "(parameters x ranks holding them); at most %lld are "
		    "supported: audit the recipe with fewer model.layers "
		    "(--set)", (long long)copies, (long long)SYM_MAX_COPIES);
	else
		snprintf(why, len, "the audit would hold %lld parameter copies "
		    "(parameters x ranks holding them, about %lld GiB); at "
		    "most %lld are supported: audit the recipe on a smaller "
		    "mesh, with --set mesh.dp=N (N at most %lld) or fewer "
		    "model.layers", (long long)copies,
		    (long long)((copies * SYM_BYTES_PER_COPY >> 30) + 1),
		    (long long)SYM_MAX_COPIES, (long long)dp_max);
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
		snprintf(why, len, "%s (profile %s) stops at start-up: %s",
		    cfg->framework, cfg->profile->label, lay->refusal);
	else
		snprintf(why, len, "the layout: rules stop training at "
		    "start-up: %s", lay->refusal);
	*blame = cfg->profile != NULL ? KEY_FRAMEWORK : KEY_LAYOUT;
	return why;
}

const char *
sym_unauditable(const struct config *cfg, enum cfg_key *blame, char *why,
    size_t len)
{
	struct model	 m;
	struct layout	 lay;
	const char	*r;

	model_build(&m, cfg);
	if ((r = too_many_copies(&m, blame, why, len)) == NULL) {
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

	if ((r = too_many_copies(&ctx->model, blame, why, len)) == NULL)
		r = refused_layout(cfg, &ctx->layout, blame, why, len);
	return r;
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
