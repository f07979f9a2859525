/*
 * Effect sizes of findings, measured (measure.h).  A finding names
 * parameters and ranks; its effect is read off their wrong cells: one factor when every
 * wrong value is the expected one times the same number, the range of the
 * contributions' weights against the objective when all of them are there
 * but weighed unequally, and otherwise the largest relative difference
 * (of the coefficients, or of the numbers where a numeric audit measured
 * them).  A norm finding's effect is the fraction of the norm squared
 * counted too often or missing.  Past a lossy boundary only a float
 * numeric audit's numbers measure it (measure_effects_numeric).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/xmalloc.h"
#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/effect.h"
#include "symbolic/measure.h"

/* Distinct (value, expected) pairs read per finding: a bound on time. */
#define EFFECT_PAIRS_MAX	4096
/* Slots of the table of pairs read: a power of two, twice the bound. */
#define EFFECT_PAIR_SLOTS	(2 * EFFECT_PAIRS_MAX)

/*
 * The (value, expected) pairs a finding's cells have shown, by address:
 * values of more than a few terms are interned (run.c), so the thousands
 * of ranks of one class hold the same pair, and reading each pair once
 * makes the measure cost the classes, not the ranks (issue 24: reading
 * every rank's pair was 40% of a wrong 131,072-rank check).  Reading a
 * pair again changes nothing: every reading below is idempotent.  A slot
 * is taken when its generation is the current finding's.
 */
struct pair_slot {
	const struct lincomb	*value, *expected;
	unsigned		 gen;
};

struct pair_set {
	struct pair_slot	*slot;
	unsigned		 gen;
};

/* Add the pair; false when it was there already. */
static bool
pair_set_add(struct pair_set *ps, const struct lincomb *v,
    const struct lincomb *e)
{
	uintptr_t	 key[2] = { (uintptr_t)v, (uintptr_t)e };
	size_t		 i;

	i = (size_t)hash_bytes(key, sizeof key) & (EFFECT_PAIR_SLOTS - 1);
	for (;; i = (i + 1) & (EFFECT_PAIR_SLOTS - 1)) {
		struct pair_slot *s = &ps->slot[i];

		if (s->gen != ps->gen) {
			s->value = v;
			s->expected = e;
			s->gen = ps->gen;
			return true;
		}
		if (s->value == v && s->expected == e)
			return false;
	}
}

static double
q_value(struct rational q)
{
	return (double)q.num / (double)q.den;
}

/* What the cells of one finding showed so far. */
struct reading {
	bool		 any;
	bool		 proportional;	/* every pair so far */
	bool		 complete;	/* no atom missing or extra */
	struct rational	 factor;	/* of the first proportional pair */
	bool		 one_factor;
	struct rational	 lo, hi;	/* ratios of the common atoms */
	bool		 have_range;
	double		 difference;	/* largest relative, coefficients */
	double		 measured;	/* largest relative, numbers */
	/*
	 * Some value holds held atoms where the expected one holds plain
	 * ones (atom.h): what a rank accumulates past a lossy boundary is
	 * no combination of the plain atoms, so no coefficient says how far
	 * it is.  Read as independent, every such pair gave "relative
	 * difference 2", whatever the model.
	 */
	bool		 opaque;
};

static void
read_ratio(struct reading *r, struct rational q)
{
	if (!r->have_range || q_value(q) < q_value(r->lo))
		r->lo = q;
	if (!r->have_range || q_value(q) > q_value(r->hi))
		r->hi = q;
	r->have_range = true;
}

static void
read_pair(struct reading *r, const struct atom_space *sp,
    const struct lincomb *v, const struct lincomb *e)
{
	struct rational	 q, last_v = { 0, 1 }, last_e = { 0, 1 };
	uint32_t	 i = 0, j = 0;
	double		 diff = 0, norm = 0;

	if (lc_proportional(v, e, &q)) {
		if (!r->any || (r->proportional && r->one_factor &&
		    q_equal(q, r->factor))) {
			r->factor = q;
			r->one_factor = true;
		} else
			r->one_factor = false;
		read_ratio(r, q);
	} else
		r->proportional = false;
	r->any = true;
	while (i < v->nterms || j < e->nterms) {
		if (j == e->nterms || (i < v->nterms &&
		    v->terms[i].atom < e->terms[j].atom)) {
			diff += fabs(q_value(v->terms[i].coef));
			r->complete = false;
			if (atom_is_held(sp, v->terms[i].atom))
				r->opaque = true;
			i++;
		} else if (i == v->nterms ||
		    e->terms[j].atom < v->terms[i].atom) {
			diff += fabs(q_value(e->terms[j].coef));
			norm += fabs(q_value(e->terms[j].coef));
			r->complete = false;
			if (atom_is_held(sp, e->terms[j].atom))
				r->opaque = true;
			j++;
		} else {
			double x = q_value(v->terms[i].coef);
			double y = q_value(e->terms[j].coef);

			diff += fabs(x - y);
			norm += fabs(y);
			/*
			 * The exact ratio only when it may widen the range:
			 * reducing every one took a quarter of a wrong
			 * 512-rank MoE check (issue 24).  A ratio equal to
			 * an end passes the test, and a pair of group sums
			 * has the same two coefficients on every atom: the
			 * pair just read is not read again (reading is
			 * idempotent), which was 10% of a wrong
			 * 131,072-rank check.
			 */
			if ((!r->have_range || x / y <= q_value(r->lo) ||
			    x / y >= q_value(r->hi)) &&
			    (!q_equal(v->terms[i].coef, last_v) ||
			    !q_equal(e->terms[j].coef, last_e))) {
				last_v = v->terms[i].coef;
				last_e = e->terms[j].coef;
				read_ratio(r, q_div(last_v, last_e));
			}
			i++;
			j++;
		}
	}
	if (norm > 0 && diff / norm > r->difference)
		r->difference = diff / norm;
}

static bool
has_rank(const struct finding *f, int rank)
{
	size_t	 lo = 0, hi = f->nranks;

	if (f->nranks == 0)
		return true;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->ranks[mid] == rank)
			return true;
		if (f->ranks[mid] < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static const struct param_result *
find_param(const struct audit *a, const char *name)
{
	size_t	i;

	for (i = 0; i < a->nparams; i++)
		if (strcmp(a->params[i].name, name) == 0)
			return &a->params[i];
	return NULL;
}

static void
measure_cells(const struct audit *a, struct finding *f, struct pair_set *ps)
{
	struct reading	 r;
	size_t		 i, k, pairs = 0;

	ps->gen++;
	memset(&r, 0, sizeof r);
	r.proportional = r.complete = true;
	for (k = 0; k < (f->nparams > 0 ? f->nparams : 1); k++) {
		const char *name = f->nparams > 0 ? f->params[k] : f->param;
		const struct param_result *p = name != NULL ?
		    find_param(a, name) : NULL;

		for (i = 0; p != NULL && i < p->ncells; i++) {
			const struct cell *c = &p->cells[i];

			if (!c->used || (c->ok && (!c->has_hash ||
			    c->numeric_ok)) || !has_rank(f, c->rank))
				continue;
			if (c->has_hash && a->numeric &&
			    a->arith != ARITH_EXACT &&
			    c->max_rel_error > r.measured)
				r.measured = c->max_rel_error;
			if (c->value == NULL || c->expected == NULL ||
			    pairs >= EFFECT_PAIRS_MAX ||
			    !pair_set_add(ps, c->value, c->expected))
				continue;
			read_pair(&r, &a->atoms, c->value, c->expected);
			pairs++;
		}
	}
	/*
	 * Past a lossy boundary only numbers measure the effect (a float
	 * numeric audit's); the plain pairs of the finding would give a
	 * figure for part of it only.
	 */
	if (r.opaque && r.measured > 0) {
		f->effect.kind = EFFECT_DIFFERENCE;
		f->effect.difference = r.measured;
	} else if (r.opaque)
		f->effect.kind = EFFECT_UNMEASURED;
	else if (r.any && r.proportional && r.one_factor) {
		f->effect.kind = EFFECT_FACTOR;
		f->effect.lo = f->effect.hi = r.factor;
	} else if (r.any && r.complete && r.have_range) {
		f->effect.kind = EFFECT_WEIGHTS;
		f->effect.lo = r.lo;
		f->effect.hi = r.hi;
	} else if (r.any || r.measured > 0) {
		f->effect.kind = EFFECT_DIFFERENCE;
		f->effect.difference = r.measured > r.difference ?
		    r.measured : r.difference;
	}
}

/*
 * Is the norm of rank one a norm finding is about?  A miscount is about
 * its own ranks, whose classes count alike: torchtitan #596's second
 * stage said the first stage's figure, the worst of all ranks.  Ranks
 * that clip by different norms are about all of them.
 */
static bool
own_rank(const struct finding *f, int rank)
{
	return f->kind == FINDING_INCONSISTENT_CLIP || has_rank(f, rank);
}

/*
 * A norm finding: measured norms against the reference's where a numeric
 * audit has them, else the elements each wrong class counts less (an
 * under-count) or more (an over-count) than once, weighed by how much,
 * over the model's elements (every element taken as weighing alike; for
 * ranks that clip by different norms, both).  A parameter's
 * multiplicities 0..1 are not all of it missing: with
 * grad_norm.expert_filter: dense-tp only the experts of tp ranks other
 * than 0 are, and taking every element at the least multiplicity said
 * "norm^2 -38.3%" where the norm missed 19.2% (a user's review).
 */
static void
measure_norm(const struct audit *a, struct finding *f)
{
	const struct grad_norm_result *g = &a->grad_norm;
	double	 total = 0, worst = 0, x;
	size_t	 c, i;
	int	 r;

	if (!g->present)
		return;
	if (g->numeric && a->arith != ARITH_EXACT && g->norm != NULL &&
	    g->reference_norm > 0) {
		for (r = 0; r < a->mesh.world; r++) {
			if (g->class_of[r] < 0 || !own_rank(f, r))
				continue;
			x = (g->norm[r] * g->norm[r] - g->reference_norm *
			    g->reference_norm) / (g->reference_norm *
			    g->reference_norm);
			if (fabs(x) > fabs(worst))
				worst = x;
		}
	} else {
		for (i = 0; i < a->nparams; i++)
			total += (double)a->params[i].elems;
		for (c = 0; total > 0 && c < g->nclasses; c++) {
			const struct gn_class *cl = &g->classes[c];
			double extra = 0;

			if (!own_rank(f, cl->ranks[0]))
				continue;

			for (i = 0; i < cl->nmults; i++) {
				if (f->kind != FINDING_OVER_COUNT)
					extra -= cl->mults[i].missing;
				if (f->kind != FINDING_UNDER_COUNT)
					extra += cl->mults[i].extra;
			}
			if (fabs(extra / total) > fabs(worst))
				worst = extra / total;
		}
	}
	if (worst != 0) {
		f->effect.kind = EFFECT_NORM;
		f->effect.fraction = worst;
	}
}

void
measure_effects(struct audit *a)
{
	struct pair_set	 ps = { NULL, 0 };
	size_t		 i;

	for (i = 0; i < a->nfindings; i++) {
		struct finding *f = &a->findings[i];

		if (f->effect.kind != EFFECT_NONE)
			continue;	/* set by whoever made the finding */
		switch (f->kind) {
		case FINDING_OVER_COUNT:
		case FINDING_UNDER_COUNT:
		case FINDING_INCONSISTENT_CLIP:
			measure_norm(a, f);
			break;
		default:
			if (ps.slot == NULL)
				ps.slot = xcalloc(EFFECT_PAIR_SLOTS,
				    sizeof *ps.slot);
			measure_cells(a, f, &ps);
			break;
		}
	}
	free(ps.slot);
}

void
measure_effects_numeric(struct audit *a)
{
	size_t	 i;
	bool	 any = false;

	if (!a->numeric || a->arith == ARITH_EXACT)
		return;		/* field elements have no magnitude */
	for (i = 0; i < a->nfindings; i++)
		if (a->findings[i].effect.kind == EFFECT_UNMEASURED) {
			a->findings[i].effect.kind = EFFECT_NONE;
			any = true;
		}
	if (any)
		measure_effects(a);
}
