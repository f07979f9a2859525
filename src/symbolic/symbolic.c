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

void
sym_audit(const struct sym_context *ctx, struct audit *a,
    sym_step_hook *hook, void *hook_arg)
{
	struct sym_run	 run;
	struct finding_list fl = { a, 0 };
	const struct model *m = &ctx->model;
	int		 l, k;

	memset(a, 0, sizeof *a);
	arena_init(&a->arena);
	a->config = m->config;
	a->mesh = m->mesh;
	atom_space_copy(&a->atoms, &ctx->atoms, &a->arena);

	memset(&run, 0, sizeof run);
	run.ctx = ctx;
	run.model = m;
	run.arena = &a->arena;
	run.stage_ranks = m->mesh.dp * m->mesh.tp;
	run_init_values(&run);
	run_init_expected(&run);
	run_plan(&run, hook, hook_arg);

	a->nparams = m->nlogical;
	a->params = arena_alloc(&a->arena, m->nlogical * sizeof *a->params);
	a->consistent = a->correct = true;
	for (l = 0; l < m->nlogical; l++) {
		cells_fill_param(&run, a, l, &a->params[l]);
		a->consistent = a->consistent && a->params[l].consistent;
		a->correct = a->correct && a->params[l].correct;
		for (k = 0; k < m->logical[l].ninstances; k++) {
			run.vals[m->logical[l].instance[k]] = NULL;
			run.expected[m->logical[l].instance[k]] = NULL;
		}
		arena_free(&run.seg_arenas[l]);
	}
	for (l = 0; l < m->nlogical; l++)
		if (!a->params[l].correct || !a->params[l].consistent) {
			struct param_result dw;

			diag_distinct_wrong(&a->params[l], &dw);
			diag_explain_param(&fl, &run, l, &a->params[l], &dw);
			free(dw.cells);
		}
	/* The norm clipping divides by, from the cells just made. */
	gn_audit(ctx, a);
	/* Rows no update reaches: a layout fact, not a value (stale.h). */
	sym_stale_rows(m, &ctx->layout, a);
	/* How much each finding matters, from the same cells (issue 23). */
	if (!ctx->no_effects)
		measure_effects(a);
	free(run.vals);
	free(run.expected);
	free(run.issues);
	free(run.coords);
	free(run.atoms);
	free(run.scaled);
	for (k = 0; k < 6; k++)
		free(run.local[k / 3][k % 3]);
	lc_table_free(&run.table);
	free(run.seg_arenas);
}
