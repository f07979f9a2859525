/*
 * The symbolic audit: every rank's gradient of every parameter as a list of
 * segments (element ranges) each holding an exact linear combination of
 * atoms, pushed through the sync plan, then compared with the expected
 * combination.  Collectives over a group compute their result once and
 * share it between the members, so a 16,384-rank mesh costs a few
 * combinations per group, not one per pair of ranks.
 *
 * Each segment also carries the set of steps that have combined it.  A
 * collective that adds up segments whose sets differ is combining values in
 * different states of synchronization (one already reduced over dp, the
 * other not): that is how the wrong order of Megatron-LM #844 shows up,
 * found by the simulation rather than by a rule about the knob.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "symbolic/cells.h"
#include "symbolic/diagnose.h"
#include "symbolic/gradnorm.h"
#include "symbolic/measure.h"
#include "symbolic/run.h"
#include "symbolic/stalerows.h"
#include "symbolic/steps.h"
#include "symbolic/symbolic.h"

/* What the run holds besides the audit's arena. */
static void
run_free(struct sym_run *run)
{
	run_free_derived(run);
	free(run->vals);
	free(run->expected);
	free(run->issues);
	free(run->coords);
	free(run->seg_arenas);
}

/*
 * A run that went past the memory limit where its context returns there
 * (over_limit_returns): everything it took freed, and *a left an empty
 * audit, which the caller frees as any other.
 */
static bool
stopped(const struct sym_context *ctx, struct audit *a, struct sym_run *run)
{
	int	 l;

	run_free_caches(run);
	if (run->seg_arenas != NULL)
		for (l = 0; l < run->model->nlogical; l++)
			arena_free(&run->seg_arenas[l]);
	run_free(run);
	audit_free(a);
	memset(a, 0, sizeof *a);
	arena_init_cached(&a->arena, ctx->blocks);
	a->config = ctx->model.config;
	return false;
}

/*
 * The audit of logical parameter only, or of all (-1), with the findings
 * of the parameters audited; the gradient norm, the stale rows and the
 * effects only of all.  False, *a empty, when it went past the memory
 * limit and the context returns there.
 */
static bool
audit_some(const struct sym_context *ctx, struct audit *a, int only,
    sym_step_hook *hook, void *hook_arg)
{
	struct sym_run	 run;
	struct finding_list fl = { a, 0 };
	const struct model *m = &ctx->model;
	int		 l, k, n;

	memset(a, 0, sizeof *a);
	arena_init_cached(&a->arena, ctx->blocks);
	a->config = m->config;
	a->mesh = m->mesh;
	atom_space_copy(&a->atoms, &ctx->atoms, &a->arena);

	memset(&run, 0, sizeof run);
	run.ctx = ctx;
	run.model = m;
	run.arena = &a->arena;
	run.stage_ranks = m->mesh.dp * m->mesh.tp;
	run.only = only;
	run_init_values(&run);
	run_init_expected(&run);
	run_plan(&run, hook, hook_arg);
	if (run.stopped)
		return stopped(ctx, a, &run);
	run_free_caches(&run);

	a->nparams = only < 0 ? m->nlogical : 1;
	a->params = arena_alloc(&a->arena, a->nparams * sizeof *a->params);
	a->consistent = a->correct = true;
	for (l = n = 0; l < m->nlogical; l++) {
		if (only >= 0 && l != only)
			continue;
		cells_fill_param(&run, a, l, &a->params[n]);
		a->consistent = a->consistent && a->params[n].consistent;
		a->correct = a->correct && a->params[n].correct;
		for (k = 0; k < m->logical[l].ninstances; k++) {
			run.vals[m->logical[l].instance[k]] = NULL;
			run.expected[m->logical[l].instance[k]] = NULL;
		}
		arena_free(&run.seg_arenas[l]);
		n++;
	}
	for (l = n = 0; l < m->nlogical; l++) {
		if (only >= 0 && l != only)
			continue;
		if (!a->params[n].correct || !a->params[n].consistent) {
			struct param_result dw;

			diag_distinct_wrong(&a->params[n], &dw);
			diag_explain_param(&fl, &run, l, &a->params[n], &dw);
			free(dw.cells);
		}
		n++;
	}
	if (only < 0) {
		/* The norm clipping divides by, from the cells just made. */
		if (!gn_audit(ctx, a))
			return stopped(ctx, a, &run);
		/*
		 * Rows no update reaches: a layout fact, not a value
		 * (stale.h).
		 */
		sym_stale_rows(m, &ctx->layout, a);
		/*
		 * How much each finding matters, from the same cells
		 * (issue 23).
		 */
		if (!ctx->no_effects)
			measure_effects(a);
	}
	run_free(&run);
	return true;
}

bool
sym_audit(const struct sym_context *ctx, struct audit *a,
    sym_step_hook *hook, void *hook_arg)
{
	return audit_some(ctx, a, -1, hook, hook_arg);
}

int
sym_audit_param(const struct sym_context *ctx, struct audit *a,
    const char *const *names, size_t n)
{
	const struct model *m = &ctx->model;
	size_t	 i;
	int	 l, best = -1, at = -1;

	/*
	 * A weight of two instances (a tied one) runs on two stages and
	 * over the embedding group: three times the cost of another.
	 */
	for (i = 0; i < n; i++)
		for (l = 0; l < m->nlogical; l++)
			if (strcmp(m->logical[l].name, names[i]) == 0 &&
			    (best < 0 || m->logical[l].ninstances <
			    m->logical[best].ninstances)) {
				best = l;
				at = (int)i;
			}
	if (best >= 0 && !audit_some(ctx, a, best, NULL, NULL))
		return -2;
	return at;
}
