/*
 * The few functions of audit.h that every report writer needs: the
 * spellings of finding kinds and arithmetics, the counts of the summary
 * line, the gate, and freeing an audit (all of it lives in its arena).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "symbolic/audit.h"

/* Indexed by enum finding_kind; the names are stable JSON values. */
static const char *const finding_kind_names[FINDING__COUNT] = {
	[FINDING_MISSING_REDUCTION] = "missing-reduction",
	[FINDING_DOUBLE_COUNT] = "double-count",
	[FINDING_WRONG_ORDER] = "wrong-order",
	[FINDING_WRONG_SCALE] = "wrong-scale",
	[FINDING_WRONG_GROUP] = "wrong-group",
	[FINDING_REPLICA_MISMATCH] = "replica-mismatch",
	[FINDING_WRONG_WEIGHTS] = "wrong-weights",
	[FINDING_OVER_COUNT] = "over-count",
	[FINDING_UNDER_COUNT] = "under-count",
	[FINDING_INCONSISTENT_CLIP] = "inconsistent-clip",
	[FINDING_WRONG_VALUE] = "wrong-value",
	[FINDING_STALE_ROWS] = "stale-rows",
};

const char *
finding_kind_name(enum finding_kind kind)
{
	if ((unsigned)kind >= FINDING__COUNT)
		fatalx("finding_kind_name: bad kind %d", (int)kind);
	return finding_kind_names[kind];
}

const char *
arith_name(enum arith arith)
{
	switch (arith) {
	case ARITH_EXACT:
		return "exact";
	case ARITH_FLOAT64:
		return "float64";
	case ARITH_FLOAT32:
		return "float32";
	}
	fatalx("arith_name: bad arithmetic %d", (int)arith);
}

static bool
cell_wrong(const struct cell *c)
{
	return c->used && !c->ok;
}

/*
 * A rank can be wrong for several parameters; a bitmap over the world
 * counts it once, in time linear in the number of cells.
 */
int
audit_wrong_ranks(const struct audit *a)
{
	bool	*wrong;
	size_t	 i, k;
	int	 n = 0;

	if (a->mesh.world <= 0)
		return 0;
	wrong = xcalloc((size_t)a->mesh.world, sizeof(*wrong));
	for (i = 0; i < a->nparams; i++) {
		const struct param_result *p = &a->params[i];

		for (k = 0; k < p->ncells; k++) {
			const struct cell *c = &p->cells[k];

			if (!cell_wrong(c) || c->rank < 0 ||
			    c->rank >= a->mesh.world || wrong[c->rank])
				continue;
			wrong[c->rank] = true;
			n++;
		}
	}
	free(wrong);
	return n;
}

/* A parameter is wrong when it is inconsistent or incorrect. */
int
audit_wrong_params(const struct audit *a)
{
	size_t	 i;
	int	 n = 0;

	for (i = 0; i < a->nparams; i++)
		if (!a->params[i].consistent || !a->params[i].correct)
			n++;
	return n;
}

bool
audit_correct(const struct audit *a)
{
	return a->consistent && a->correct && a->nstale_rows == 0 &&
	    (!a->grad_norm.present || (a->grad_norm.correct &&
	    a->grad_norm.consistent));
}

size_t
audit_accepted_findings(const struct audit *a)
{
	size_t	 i, n = 0;

	for (i = 0; i < a->nfindings; i++)
		n += a->findings[i].accepted;
	return n;
}

/*
 * Findings name a parameter by its name, a tied pair by its first
 * instance; the symbolic engine passes the parameter's own string, so
 * the pointers are compared before the text.
 */
static bool
finding_names(const struct finding *f, const char *name)
{
	size_t	 k;

	if (name == NULL)
		return false;
	for (k = 0; k < f->nparams; k++)
		if (f->params[k] == name || strcmp(f->params[k], name) == 0)
			return true;
	return f->nparams == 0 && f->param != NULL &&
	    strcmp(f->param, name) == 0;
}

/*
 * A finding about the gradient norm itself: the symbolic engine's kinds
 * (gradnorm.c), or compare's measured norm, which it names as if it were
 * a parameter (compare.c).
 */
static bool
finding_on_norm(const struct finding *f)
{
	return f->kind == FINDING_OVER_COUNT ||
	    f->kind == FINDING_UNDER_COUNT ||
	    f->kind == FINDING_INCONSISTENT_CLIP ||
	    finding_names(f, "gradient norm");
}

static bool
param_explained(const struct audit *a, const struct param_result *p)
{
	size_t	 i;

	for (i = 0; i < a->nfindings; i++)
		if (finding_names(&a->findings[i], p->name) ||
		    finding_names(&a->findings[i], p->tied_with))
			return true;
	return false;
}

/*
 * A wrong norm needs a finding of its own, unless it counts every element
 * once and is wrong only because the gradients it sums are: then the
 * findings on those gradients explain it (gradaudit(1), The gradient
 * norm).  A norm wrong for a reason no finding names, such as no rank
 * clipping at all, is not explained.
 */
static bool
norm_explained(const struct audit *a)
{
	const struct grad_norm_result *g = &a->grad_norm;
	size_t	 i;

	if (!g->present || (g->correct && g->consistent))
		return true;
	for (i = 0; i < a->nfindings; i++)
		if (finding_on_norm(&a->findings[i]))
			return true;
	return g->gradients_wrong && !g->miscounted && g->consistent;
}

bool
audit_accepted(const struct audit *a)
{
	size_t	 i;

	if (!a->baselined || a->nfindings == 0 || audit_correct(a))
		return false;
	for (i = 0; i < a->nfindings; i++)
		if (!a->findings[i].accepted)
			return false;
	for (i = 0; i < a->nparams; i++)
		if ((!a->params[i].consistent || !a->params[i].correct) &&
		    !param_explained(a, &a->params[i]))
			return false;
	return norm_explained(a);
}

bool
audit_passes(const struct audit *a)
{
	return audit_correct(a) || audit_accepted(a);
}

bool
audit_numeric_passes(const struct audit *a)
{
	return a->numeric_correct && (!a->grad_norm.present ||
	    !a->grad_norm.numeric || a->grad_norm.numeric_correct);
}

void
audit_free(struct audit *a)
{
	arena_free(&a->arena);
	/* Nothing may point into the freed arena afterwards. */
	a->params = NULL;
	a->nparams = 0;
	a->findings = NULL;
	a->nfindings = 0;
}
