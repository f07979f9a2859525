/*
 * The few functions of audit.h that every report writer needs: the
 * spellings of finding kinds and arithmetics, the counts of the summary
 * line, and freeing an audit (all of it lives in its arena).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "arena.h"
#include "audit.h"
#include "xmalloc.h"

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
audit_passes(const struct audit *a)
{
	return a->consistent && a->correct && (!a->grad_norm.present ||
	    (a->grad_norm.correct && a->grad_norm.consistent));
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
