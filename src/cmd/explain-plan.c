/*
 * gradaudit explain --plan CONFIG: the sync plan as the steps of a plan:
 * section (issue 25), the preset written out, each step under a comment
 * that says which rule built it and which setting decided it, from where
 * (as explain's step list says it).  Pasted into the configuration in
 * place of its plan:, it gives the same steps, so the same values;
 * tests/plan-preset.test holds every testdata case to that.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitcode.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "cmd/explain-plan.h"
#include "config/framework.h"
#include "config/plan.h"
#include "model/placement.h"
#include "model/planwrite.h"
#include "model/syncplan.h"

/* One comment line, control characters made visible (a name, a path). */
static void
comment(FILE *fp, const char *indent, const char *text)
{
	char	*v = text_visible(text);

	fprintf(fp, "%s# %s\n", indent, v);
	free(v);
}

/*
 * Which rule built a preset step, and the setting that decided it; and
 * where the rule declared the gradient's placement over tp otherwise
 * than it is (a Replicate gradient summed as Partial), that it did:
 * findings name such a declaration as a double count.
 */
static void
preset_comment(FILE *fp, const struct config *c, const struct model *m,
    const struct sync_step *s)
{
	char	 value[256], origin[512], line[1024], declared[96], truth[96];

	cfg_key_value(c, s->key, value, sizeof value);
	fw_key_origin(c, s->key, origin, sizeof origin);
	snprintf(line, sizeof line, "%s (%s: %s, from %s)", s->label,
	    cfg_key_path(s->key), value, origin);
	comment(fp, "  ", line);
	if (!s->has_placement || pl_equal(s->declared, s->truth))
		return;
	snprintf(line, sizeof line, "  which declares the gradient %s over "
	    "tp, where it is %s", pl_format(&m->mesh, s->declared, declared,
	    sizeof declared), pl_format(&m->mesh, s->truth, truth,
	    sizeof truth));
	comment(fp, "  ", line);
}

/*
 * Is step k the sum over tp that follows its own mask, both the preset's
 * decision on one declared placement (emit_tp_reduction)?  The declare:
 * written at the mask says both.
 */
static bool
declared_sum(const struct sync_plan *plan, const struct model *m, int k)
{
	const struct sync_step *s = &plan->steps[k], *prev;

	if (k == 0 || s->op != SYNC_ALL_REDUCE)
		return false;
	prev = &plan->steps[k - 1];
	return prev->has_placement && prev->op == SYNC_MASK_REPLICAS &&
	    prev->plan_item < 0 && prev->params != NULL && s->params != NULL &&
	    memcmp(prev->params, s->params, (size_t)m->nparams *
	    sizeof *s->params) == 0;
}

static void
item_comment(FILE *fp, const struct config *c, int i)
{
	const struct plan_item *it = &c->plan[i];
	char	 text[512], line[1024];

	cfg_plan_item_text(it, text, sizeof text);
	snprintf(line, sizeof line, "plan[%d] (%s, from %s:%d:%d)", i, text,
	    c->file, it->mark.line, it->mark.col);
	comment(fp, "  ", line);
}

/*
 * A reduction the preset decided not to run (the gradient declared
 * Replicate): no collective, but a declaration, which findings weigh
 * against the truth (Partial declared Replicate is a missing reduction),
 * so it is written as a declare: step under the rule that decided it.
 */
static void
skipped_comment(FILE *fp, const struct config *c, const struct model *m,
    const struct sync_step *s)
{
	char	 value[256], origin[512], line[2048];
	char	 declared[96], truth[96];

	cfg_key_value(c, s->key, value, sizeof value);
	fw_key_origin(c, s->key, origin, sizeof origin);
	snprintf(line, sizeof line, "no step: %s declares the gradient %s "
	    "over tp, where it is %s (%s: %s, from %s)", s->label,
	    pl_format(&m->mesh, s->declared, declared, sizeof declared),
	    pl_format(&m->mesh, s->truth, truth, sizeof truth),
	    cfg_key_path(s->key), value, origin);
	comment(fp, "  ", line);
}

int
explain_plan(FILE *fp, const struct config *c, const struct sym_context *ctx)
{
	const struct sync_plan *plan = &ctx->plan;
	const struct sync_step *s;
	char	 why[128], head[1024];
	int	 k, n;
	bool	 preset = !plan_given(c), own = false;

	for (k = 0; k < c->nplan; k++) {
		preset = preset || c->plan[k].op == PLAN_PRESET;
		own = own || c->plan[k].op != PLAN_PRESET;
	}
	snprintf(head, sizeof head, "The sync plan of %s (%s).", c->name,
	    c->file);
	comment(fp, "", head);
	if (preset && own) {
		/* The plan's own steps come out among the preset's, marked. */
		comment(fp, "", "The preset written out as steps, with the "
		    "plan's own: as that");
		comment(fp, "", "configuration's plan: they run what it runs.  "
		    "Factors name the mesh's");
		comment(fp, "", "sizes where the preset does; parameter names "
		    "are this model's.");
	} else if (preset) {
		comment(fp, "", "The preset written out as steps: as that "
		    "configuration's plan: they run");
		comment(fp, "", "what it runs.  Factors name the mesh's sizes "
		    "where the preset does;");
		comment(fp, "", "parameter names are this model's.");
	} else {
		/*
		 * Without "preset" there is none to write out: the steps
		 * are the user's.
		 */
		comment(fp, "", "The plan's own steps, with no preset: as that "
		    "configuration's plan: they");
		comment(fp, "", "run what it runs; parameter names are this "
		    "model's.");
	}
	/*
	 * A plan of declarations alone has items: not an empty list.  A
	 * declaration of an activation's gradient has not even a record.
	 */
	for (k = 0, n = 0; k < c->nplan; k++)
		n += c->plan[k].activation >= 0;
	fprintf(fp, "plan:%s\n", plan->nsteps == 0 && plan->nskipped == 0 &&
	    n == 0 ? " []" : "");
	for (k = 0; k < plan->nsteps; k++) {
		s = &plan->steps[k];
		/* A declare: partial is a mask and a sum: one item. */
		if (k > 0 && s->plan_item >= 0 &&
		    plan->steps[k - 1].plan_item == s->plan_item)
			continue;
		if (s->plan_item >= 0) {
			item_comment(fp, c, s->plan_item);
			planwrite_item(fp, &c->plan[s->plan_item]);
			continue;
		}
		if (s->has_placement && declared_sum(plan, &ctx->model, k))
			continue;
		preset_comment(fp, c, &ctx->model, s);
		if (s->has_placement ? planwrite_declare(fp, s, &ctx->model,
		    why, sizeof why) == -1 : planwrite_step(fp, s, &ctx->model,
		    why, sizeof why) == -1) {
			fflush(fp);
			fprintf(stderr, "%s: explain --plan: step %d (%s) has "
			    "no plan: spelling: %s\n", progname, k + 1,
			    s->label, why);
			return EXIT_RUNTIME;
		}
	}
	for (k = 0; k < plan->nskipped; k++) {
		s = &plan->skipped[k];
		if (s->plan_item >= 0) {
			/* A declare: of the plan, once for all its records. */
			if (k > 0 && plan->skipped[k - 1].plan_item ==
			    s->plan_item)
				continue;
			item_comment(fp, c, s->plan_item);
			planwrite_item(fp, &c->plan[s->plan_item]);
			continue;
		}
		skipped_comment(fp, c, &ctx->model, s);
		if (planwrite_declare(fp, s, &ctx->model, why, sizeof why) ==
		    -1) {
			fflush(fp);
			fprintf(stderr, "%s: explain --plan: the declaration "
			    "of %s has no plan: spelling: %s\n", progname,
			    s->label, why);
			return EXIT_RUNTIME;
		}
	}
	/*
	 * A declaration of an activation's gradient acts in the backward,
	 * wherever it stands, and runs no step: written as it was.
	 */
	for (k = 0; k < c->nplan; k++)
		if (c->plan[k].activation >= 0) {
			item_comment(fp, c, k);
			planwrite_item(fp, &c->plan[k]);
		}
	return EXIT_OK;
}
