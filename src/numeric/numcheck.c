/*
 * What process 0 of the numeric audit (numeric.c) does with the results:
 * gathers every rank's atoms and synced values, hashes them, compares them
 * with the reference and holds them against their symbolic expressions
 * (the self-check), replicas and the gradient norm included.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/hash.h"
#include "base/xmalloc.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/syncplan.h"
#include "numeric/collective.h"
#include "numeric/interpret.h"
#include "numeric/numcheck.h"
#include "numeric/numengine.h"
#include "numeric/numvalue.h"
#include "numeric/reference.h"
#include "numeric/transport.h"
#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/context.h"
#include "symbolic/gradnorm.h"
#include "symbolic/lincomb.h"

/* Self-check failures printed before the rest are only counted. */
#define NUM_MAX_MESSAGES	10

void
gather_values(struct engine *eng, union num ***atoms, struct gathered *gv)
{
	const struct model	*m = eng->model;
	struct outbox		 ob = { 0 };
	struct rank_state	*rs;
	union num		*p;
	const union num		*q;
	int64_t			 n, off, a;
	size_t			 j;
	int			 i, k, r, root = 0;
	bool			 here;

	here = eng->comm.transport->proc ==
	    transport_host_of(eng->comm.transport, root);
	for (i = 0; i < eng->nranks && !here; i++) {
		rs = &eng->ranks[i];
		for (n = 0, k = 0; k < m->nparams; k++)
			if (rs->pgrad[k] != NULL)
				n += (model_atoms_per_rank(m, &m->params[k]) +
				    1) * m->params[k].local_elems;
		p = xcalloc((size_t)n, sizeof(*p));
		for (off = 0, k = 0; k < m->nparams; k++) {
			if (rs->pgrad[k] == NULL)
				continue;
			n = m->params[k].local_elems;
			a = model_atoms_per_rank(m, &m->params[k]) * n;
			memcpy(p + off, atoms[i][k], (size_t)a * sizeof(*p));
			memcpy(p + off + a, rs->pgrad[k], (size_t)n *
			    sizeof(*p));
			off += a + n;
		}
		outbox_add(&ob, rs->rank, root, TAG_COLLECT, p, (size_t)off *
		    sizeof(*p));
	}
	coll_exchange(&eng->comm, &ob, &gv->in);
	if (!here)
		return;
	gv->atom = xcalloc((size_t)m->mesh.world, sizeof(*gv->atom));
	gv->synced = xcalloc((size_t)m->mesh.world, sizeof(*gv->synced));
	for (r = 0; r < m->mesh.world; r++) {
		gv->atom[r] = xcalloc((size_t)m->nparams, sizeof(**gv->atom));
		gv->synced[r] = xcalloc((size_t)m->nparams,
		    sizeof(**gv->synced));
	}
	for (i = 0; i < eng->nranks; i++)
		for (k = 0; k < m->nparams; k++) {
			gv->atom[eng->ranks[i].rank][k] = atoms[i][k];
			gv->synced[eng->ranks[i].rank][k] =
			    eng->ranks[i].pgrad[k];
		}
	for (j = 0; j < gv->in.n; j++) {
		r = gv->in.v[j].src;
		q = gv->in.v[j].data;
		n = (int64_t)(gv->in.v[j].len / sizeof(*q));
		for (off = 0, k = 0; k < m->nparams; k++) {
			if (!model_rank_holds(m, &m->params[k], r))
				continue;
			a = model_atoms_per_rank(m, &m->params[k]) *
			    m->params[k].local_elems;
			if (off + a + m->params[k].local_elems > n)
				fatalx("numeric: short gradients from rank %d",
				    r);
			gv->atom[r][k] = (union num *)(q + off);
			gv->synced[r][k] = (union num *)(q + off + a);
			off += a + m->params[k].local_elems;
		}
	}
}

void
gathered_free(struct engine *eng, struct gathered *gv, int world)
{
	int	 r;

	if (gv->atom != NULL)
		for (r = 0; r < world; r++) {
			free(gv->atom[r]);
			free(gv->synced[r]);
		}
	free(gv->atom);
	free(gv->synced);
	coll_release(&eng->comm, &gv->in);
}

/*
 * Comparison (process 0).
 */

/* Hash of n values in the audit's numerics (float32 hashed as floats). */
static uint64_t
hash_nums(enum arith arith, const union num *v, int64_t n)
{
	float		*f;
	uint64_t	 h;
	int64_t		 i;

	if (arith == ARITH_EXACT)
		return hash_u64s(&v->f, (size_t)n);
	if (arith == ARITH_FLOAT64)
		return hash_doubles(&v->d, (size_t)n);
	f = xcalloc((size_t)n, sizeof(*f));
	for (i = 0; i < n; i++)
		f[i] = (float)v[i].d;
	h = hash_floats(f, (size_t)n);
	free(f);
	return h;
}

/* Distance in units in the last place of the audit's float type. */
static double
ulp_distance(enum arith arith, double a, double b)
{
	uint64_t	 ua, ub;
	uint32_t	 fa, fb;
	float		 xa = (float)a, xb = (float)b;

	if (arith == ARITH_FLOAT32) {
		memcpy(&fa, &xa, 4);
		memcpy(&fb, &xb, 4);
		fa = (fa >> 31) ? ~fa : fa | UINT32_C(0x80000000);
		fb = (fb >> 31) ? ~fb : fb | UINT32_C(0x80000000);
		return fa > fb ? (double)(fa - fb) : (double)(fb - fa);
	}
	memcpy(&ua, &a, 8);
	memcpy(&ub, &b, 8);
	ua = (ua >> 63) ? ~ua : ua | (UINT64_C(1) << 63);
	ub = (ub >> 63) ? ~ub : ub | (UINT64_C(1) << 63);
	return ua > ub ? (double)(ua - ub) : (double)(ub - ua);
}

/*
 * Float tolerances.  Against the reference: the model runs in a different
 * order on one rank, so relative error grows with depth; wrong gradients
 * differ by whole atoms.  Against a symbolic expression: only the last
 * few sums and scalings differ.
 */
static double
reference_tolerance(enum arith arith)
{
	return arith == ARITH_FLOAT32 ? 1e-4 : 1e-10;
}

static double
expression_tolerance(enum arith arith)
{
	return arith == ARITH_FLOAT32 ? 1e-5 : 1e-13;
}

/* Compare a region with the reference; fills the cell's numeric fields. */
static void
compare_region(enum arith arith, struct cell *cell, const union num *v, const
    union num *ref, int64_t n, double ref_max)
{
	double		 diff, rel;
	int64_t		 i;

	cell->numeric_ok = true;
	cell->max_ulps = 0;
	cell->max_rel_error = 0;
	for (i = 0; i < n; i++) {
		if (arith == ARITH_EXACT) {
			if (v[i].f != ref[i].f)
				cell->numeric_ok = false;
			continue;
		}
		diff = fabs(v[i].d - ref[i].d);
		if (ref[i].d != 0)
			rel = diff / fabs(ref[i].d);
		else
			rel = ref_max > 0 ? diff / ref_max : diff;
		if (rel > cell->max_rel_error)
			cell->max_rel_error = rel;
		if (ulp_distance(arith, v[i].d, ref[i].d) > cell->max_ulps)
			cell->max_ulps = ulp_distance(arith, v[i].d, ref[i].d);
		if (diff > reference_tolerance(arith) * (fabs(ref[i].d) +
		    ref_max))
			cell->numeric_ok = false;
	}
}

/* The instance of logical parameter lp that `rank` holds, or NULL. */
static const struct param *
instance_held(const struct model *m, int lp, int rank)
{
	int	inst = model_instance_on(m, m->logical[lp].instance[0], rank);

	return inst >= 0 ? &m->params[inst] : NULL;
}

/*
 * Evaluate a symbolic expression on the numeric atoms at local elements
 * [lo, hi): exact in the field, in double (with the sum of the absolute
 * terms, the scale of its rounding error) in floats.  Atom a is rank a's
 * local gradient of the instance of the logical parameter on a's stage.
 */
static void
eval_expression(enum arith arith, const struct model *m, const struct atom_space
    *sp, const struct gathered *gv, int lp, const struct lincomb *lc, int64_t
    lo, int64_t hi, union num *out, double *magnitude)
{
	const struct param		*p;
	const union num			*atom;
	union num			 coef;
	double				 cd;
	int64_t				 i;
	uint32_t			 t;
	int				 a;

	memset(out, 0, (size_t)(hi - lo) * sizeof(*out));
	memset(magnitude, 0, (size_t)(hi - lo) * sizeof(*magnitude));
	for (t = 0; t < lc->nterms; t++) {
		a = atom_rank(sp, lc->terms[t].atom);
		if (a < 0 || a >= m->mesh.world)
			fatalx("numeric: atom g%d outside the mesh", a);
		if ((p = instance_held(m, lp, a)) == NULL ||
		    (atom = gv->atom[a][p->index]) == NULL)
			fatalx("numeric: atom g%d of %s is on a rank without "
			    "the parameter", a, m->logical[lp].name);
		/* The rank's atoms: per (source,) micro-batch, lossnorm.h. */
		atom += (int64_t)(model_atom_slot(m, p,
		    atom_source(sp, lc->terms[t].atom)) *
		    m->loss.micro_batches + atom_micro_batch(sp,
		    lc->terms[t].atom)) * p->local_elems;
		/* Held atoms follow the plain ones (run_step). */
		if (atom_is_held(sp, lc->terms[t].atom))
			atom += (int64_t)model_atoms_per_rank(m, p) / 2 *
			    p->local_elems;
		if (hi > p->local_elems)
			fatalx("numeric: region of %s beyond its shard",
			    m->logical[lp].name);
		coef = num_from_rational(arith, lc->terms[t].coef);
		cd = (double)lc->terms[t].coef.num /
		    (double)lc->terms[t].coef.den;
		for (i = lo; i < hi; i++) {
			if (arith == ARITH_EXACT) {
				out[i - lo] = num_add(arith, out[i - lo],
				    num_mul(arith, coef, atom[i]));
				continue;
			}
			out[i - lo].d += cd * atom[i].d;
			magnitude[i - lo] += fabs(cd * atom[i].d);
		}
	}
}

/* Does v equal the evaluated expression e (within rounding, in floats)? */
static bool
matches_expression(enum arith arith, const union num *v, const union num *e,
    const double *magnitude, int64_t n, int nterms, double scale)
{
	double		 tol;
	int64_t		 i;

	for (i = 0; i < n; i++) {
		if (arith == ARITH_EXACT) {
			if (v[i].f != e[i].f)
				return false;
			continue;
		}
		tol = expression_tolerance(arith) * (nterms + 1) *
		    (magnitude[i] + fabs(v[i].d)) + 1e-300;
		if (fabs(v[i].d - e[i].d) > tol + scale)
			return false;
	}
	return true;
}

/*
 * An expression evaluated on the atoms, kept for the next cell: replicas
 * (every dp rank of an averaged parameter) share one expression, and
 * evaluating its dp terms again on each of them made the self-check
 * quadratic in dp (dp=512 took 100 s on 16 processes).
 */
struct evaluated {
	const struct lincomb	*lc;	/* NULL: nothing kept yet */
	int			 lp;
	int64_t			 lo, hi;
	union num		*v;
	double			*magnitude;
};

struct self_check {
	const struct atom_space *atoms;	/* the audit's (atom.h) */
	int		 failures;
	struct arena	 arena;
	struct evaluated value, expected;
};

/* eval_expression(arith), unless ev holds the same evaluation already. */
static const union num *
evaluate(enum arith arith, const struct model *m, const struct atom_space *sp,
    const struct gathered *gv, int lp, const struct lincomb *lc, int64_t lo,
    int64_t hi, struct evaluated *ev, const double **magnitude)
{
	if (ev->lc == NULL || ev->lp != lp || ev->lo != lo || ev->hi != hi ||
	    !lc_equal(ev->lc, lc)) {
		free(ev->v);
		free(ev->magnitude);
		ev->v = xcalloc((size_t)(hi - lo), sizeof(*ev->v));
		ev->magnitude = xcalloc((size_t)(hi - lo),
		    sizeof(*ev->magnitude));
		eval_expression(arith, m, sp, gv, lp, lc, lo, hi, ev->v,
		    ev->magnitude);
		ev->lc = lc;
		ev->lp = lp;
		ev->lo = lo;
		ev->hi = hi;
	}
	*magnitude = ev->magnitude;
	return ev->v;
}

static void
evaluated_free(struct evaluated *ev)
{
	free(ev->v);
	free(ev->magnitude);
	memset(ev, 0, sizeof(*ev));
}

static void
self_check_fail(struct self_check *sc, const char *param, int rank,
    int64_t lo, int64_t hi, const char *what, const struct lincomb *lc)
{
	if (sc->failures++ < NUM_MAX_MESSAGES)
		fprintf(stderr, "%s: self-check failed: %s on rank %d "
		    "[%lld,%lld): %s %s\n", progname, param, rank,
		    (long long)lo, (long long)hi, what,
		    lc_format(&sc->arena, sc->atoms, lc, "g"));
}

/* Per logical parameter: the reference, its size and largest value. */
struct reference_view {
	const union num	*grad;
	int64_t		 elems;
	double		 max;
};

static void
check_cell(enum arith arith, const struct model *m, const struct gathered *gv,
    int lp, const struct reference_view *ref, struct cell *cell, struct
    self_check *sc)
{
	const struct logical_param	*l = &m->logical[lp];
	const struct param		*p;
	const union num			*e;
	union num			*rv;
	const double			*mag;
	int64_t				 n = cell->hi - cell->lo, i;

	if ((p = instance_held(m, lp, cell->rank)) == NULL ||
	    gv->synced[cell->rank][p->index] == NULL || cell->lo < 0 ||
	    cell->hi > p->local_elems || n < 0)
		fatalx("numeric: cell of %s on rank %d has no values",
		    l->name, cell->rank);

	rv = xcalloc((size_t)n, sizeof(*rv));
	for (i = 0; i < n; i++)
		rv[i] = ref->grad[model_global_index(m, p, cell->rank,
		    cell->lo + i)];
	cell->has_hash = true;
	cell->hash = hash_nums(arith, gv->synced[cell->rank][p->index] +
	    cell->lo, n);
	cell->reference_hash = hash_nums(arith, rv, n);
	compare_region(arith, cell, gv->synced[cell->rank][p->index] + cell->lo,
	    rv, n, ref->max);

	/* The value must be its expression evaluated on the atoms... */
	e = evaluate(arith, m, sc->atoms, gv, lp, cell->value, cell->lo,
	    cell->hi, &sc->value, &mag);
	if (!matches_expression(arith, gv->synced[cell->rank][p->index] +
	    cell->lo, e, mag, n, (int)cell->value->nterms, 0))
		self_check_fail(sc, l->name, cell->rank, cell->lo, cell->hi,
		    "numeric value differs from its symbolic expression",
		    cell->value);

	/* ...and the reference the expected expression. */
	e = evaluate(arith, m, sc->atoms, gv, lp, cell->expected, cell->lo,
	    cell->hi, &sc->expected, &mag);
	if (!matches_expression(arith, rv, e, mag, n,
	    (int)cell->expected->nterms, arith == ARITH_EXACT ? 0 :
	    reference_tolerance(arith) * ref->max))
		self_check_fail(sc, l->name, cell->rank, cell->lo, cell->hi,
		    "reference differs from the expected expression",
		    cell->expected);

	/*
	 * In exact numerics, with both checks passed, a symbolically correct
	 * cell is numerically correct.  The converse can fail without any
	 * inconsistency: where the atoms that make a value wrong are zero over
	 * the whole region (embedding rows no token of a batch uses, an expert
	 * no token chose), a wrong expression has right numbers, a blind spot
	 * of any numeric test.  So only one direction is an internal error.
	 */
	if (arith == ARITH_EXACT && cell->used && cell->ok &&
	    !cell->numeric_ok)
		self_check_fail(sc, l->name, cell->rank, cell->lo, cell->hi,
		    "differs from the reference although its expression is the "
		    "expected one,", cell->value);
	free(rv);
}

/*
 * Replicas (SPEC section 8): cells whose values have one expression over
 * one region of one parameter instance must hold the same bits in every
 * arithmetic, floats included, because every collective hands all members
 * of a group the one result its receivers summed in group order.  Sorting
 * the cells by (instance, region, expression) puts each set of replicas in
 * one run, so the check takes n log n comparisons, not n^2.
 */
struct replica {
	const struct cell	*cell;
	int			 instance;
};

static int
cmp_int64(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

/* Any total order on expressions in which equal ones are adjacent. */
static int
lincomb_order(const struct lincomb *a, const struct lincomb *b)
{
	const struct term	*s, *t;
	uint32_t		 i;
	int			 c;

	if (a->nterms != b->nterms)
		return a->nterms < b->nterms ? -1 : 1;
	for (i = 0; i < a->nterms; i++) {
		s = &a->terms[i];
		t = &b->terms[i];
		if ((c = cmp_int64(s->atom, t->atom)) != 0 ||
		    (c = cmp_int64(s->coef.num, t->coef.num)) != 0 ||
		    (c = cmp_int64(s->coef.den, t->coef.den)) != 0)
			return c;
	}
	return 0;
}

static int
replica_order(const void *x, const void *y)
{
	const struct replica	*a = x, *b = y;
	int			 c;

	if ((c = cmp_int64(a->instance, b->instance)) != 0 ||
	    (c = cmp_int64(a->cell->lo, b->cell->lo)) != 0 ||
	    (c = cmp_int64(a->cell->hi, b->cell->hi)) != 0 ||
	    (c = lincomb_order(a->cell->value, b->cell->value)) != 0)
		return c;
	return cmp_int64(a->cell->rank, b->cell->rank);
}

static bool
same_replica_set(const struct replica *a, const struct replica *b)
{
	return a->instance == b->instance && a->cell->lo == b->cell->lo &&
	    a->cell->hi == b->cell->hi && lc_equal(a->cell->value,
	    b->cell->value);
}

static void
check_replicas(const struct model *m, int lp, const struct param_result *pr,
    struct self_check *sc)
{
	struct replica		*v;
	const struct param	*p;
	const struct cell	*a, *b;
	size_t			 i, j, n = 0;

	v = xcalloc(pr->ncells, sizeof(*v));
	for (i = 0; i < pr->ncells; i++) {
		if (!pr->cells[i].has_hash)
			continue;
		if ((p = instance_held(m, lp, pr->cells[i].rank)) == NULL)
			fatalx("numeric: cell of %s on rank %d has no instance",
			    pr->name, pr->cells[i].rank);
		v[n].cell = &pr->cells[i];
		v[n++].instance = p->index;
	}
	qsort(v, n, sizeof(*v), replica_order);
	for (i = 0; i < n; i = j)
		for (j = i + 1; j < n && same_replica_set(&v[i], &v[j]); j++) {
			a = v[i].cell;
			b = v[j].cell;
			if (a->hash != b->hash && sc->failures++ <
			    NUM_MAX_MESSAGES)
				fprintf(stderr, "%s: self-check failed: %s: "
				    "replicas ranks %d and %d hold the same "
				    "expression but different bits "
				    "[%lld,%lld)\n", progname, pr->name,
				    a->rank, b->rank, (long long)a->lo,
				    (long long)a->hi);
		}
	free(v);
}

static void
compare_all(enum arith arith, const struct model *m, const struct gathered *gv,
    union num **ref, struct audit *audit, struct self_check *sc,
    struct progress_count *pc)
{
	struct param_result	*pr;
	struct reference_view	 rv;
	const struct param	*p;
	size_t			 i, j;
	int64_t			 k;
	int			 lp;

	for (i = 0; i < audit->nparams; i++) {
		pr = &audit->params[i];
		if ((lp = logical_by_name(m, pr->name)) < 0)
			fatalx("numeric: audited parameter %s not in the model",
			    pr->name);
		p = &m->params[m->logical[lp].instance[0]];
		rv.grad = ref[lp];
		rv.elems = p->elems;
		rv.max = 0;
		if (arith != ARITH_EXACT)
			for (k = 0; k < rv.elems; k++)
				if (fabs(rv.grad[k].d) > rv.max)
					rv.max = fabs(rv.grad[k].d);
		pr->has_hash = true;
		pr->reference_hash = hash_nums(arith, rv.grad, rv.elems);
		for (j = 0; j < pr->ncells; j++)
			check_cell(arith, m, gv, lp, &rv, &pr->cells[j], sc);
		check_replicas(m, lp, pr, sc);
		progress_tick(pc);
	}
}

/*
 * The gradient norm (gradnorm.h) on the real gradients: every hosted rank
 * squares the used elements its filters keep into a dense and an expert
 * partial sum, in the audit's numerics, the plan's all-reduces run as real
 * collectives, and process 0 gathers every rank's norm squared.  Returns
 * the world's norms squared on process 0, NULL elsewhere.
 */
union num *
norm_on_ranks(struct engine *eng, const struct sym_context *ctx)
{
	enum arith		 arith = eng->arith;
	const struct model	*m = eng->model;
	struct gn_plan		 plan;
	struct outbox		 ob = { 0 };
	struct inbox		 in;
	union num		*val, **vec, *all = NULL, *p, *sum;
	int64_t			*len, used[16][2], k;
	size_t			 j;
	int			 i, q, n, r, s, part, root = 0;
	bool			 added = false;

	gn_plan_build(&plan, ctx);
	val = xcalloc((size_t)eng->nranks * GN_PART__COUNT, sizeof(*val));
	vec = xcalloc((size_t)eng->nranks, sizeof(*vec));
	len = xcalloc((size_t)eng->nranks, sizeof(*len));
	for (i = 0; i < eng->nranks; i++) {
		struct rank_state *rs = &eng->ranks[i];

		len[i] = 1;
		for (q = 0; q < m->nparams; q++) {
			if (rs->pgrad[q] == NULL || (part = gn_part_of(&plan,
			    m, q, &rs->coord)) < 0)
				continue;
			n = syncplan_used_ranges(m, &ctx->layout, q, rs->rank,
			    used, 16);
			sum = &val[i * GN_PART__COUNT + part];
			for (r = 0; r < n; r++)
				for (k = used[r][0]; k < used[r][1]; k++)
					*sum = num_add(arith, *sum,
					    num_mul(arith, rs->pgrad[q][k],
					    rs->pgrad[q][k]));
		}
	}
	for (s = 0; s <= plan.nsteps; s++) {
		if (!added && (s == plan.nsteps ||
		    plan.steps[s].part == GN_PART_TOTAL)) {
			/* ChainedOptimizer: the parts' squares add up. */
			for (i = 0; i < eng->nranks; i++)
				val[i * GN_PART__COUNT + GN_PART_TOTAL] =
				    num_add(arith, val[i * GN_PART__COUNT +
				    GN_PART_DENSE], val[i * GN_PART__COUNT +
				    GN_PART_EXPERT]);
			added = true;
		}
		if (s == plan.nsteps)
			break;
		for (i = 0; i < eng->nranks; i++)
			vec[i] = &val[i * GN_PART__COUNT + plan.steps[s].part];
		coll_all_reduce(&eng->comm, plan.steps[s].group, vec, len,
		    plan.steps[s].average);
	}
	for (i = 0; i < eng->nranks; i++) {
		p = xcalloc(1, sizeof(*p));
		*p = val[i * GN_PART__COUNT + GN_PART_TOTAL];
		outbox_add(&ob, eng->ranks[i].rank, root, TAG_COLLECT, p,
		    sizeof(*p));
	}
	coll_exchange(&eng->comm, &ob, &in);
	if (eng->comm.transport->proc == transport_host_of(eng->comm.transport,
	    root)) {
		all = xcalloc((size_t)m->mesh.world, sizeof(*all));
		for (j = 0; j < in.n; j++) {
			if (in.v[j].len != sizeof(*all) || in.v[j].src < 0 ||
			    in.v[j].src >= m->mesh.world)
				fatalx("numeric: bad norm from rank %d",
				    in.v[j].src);
			memcpy(&all[in.v[j].src], in.v[j].data, sizeof(*all));
		}
	}
	coll_release(&eng->comm, &in);
	free(val);
	free(vec);
	free(len);
	return all;
}

/* The norm squared of the reference: every logical element once. */
static union num
reference_norm(enum arith arith, const struct model *m, union num **ref)
{
	union num	 sum;
	int64_t		 e;
	int		 l;

	memset(&sum, 0, sizeof(sum));
	for (l = 0; l < m->nlogical; l++)
		for (e = 0; e < m->params[m->logical[l].instance[0]].elems;
		    e++)
			sum = num_add(arith, sum, num_mul(arith, ref[l][e],
			    ref[l][e]));
	return sum;
}

/* The symbolic norm squared of a class evaluated on the numeric atoms. */
static union num
class_norm(enum arith arith, const struct model *m, const struct gathered *gv,
    const struct audit *audit, const struct gn_class *cl, int64_t *nelems)
{
	union num	 sum, part, *v;
	double		*mag;
	size_t		 i;
	int64_t		 e, n;
	int		 lp;

	memset(&sum, 0, sizeof(sum));
	*nelems = 0;
	for (i = 0; i < cl->npieces; i++) {
		const struct gn_piece *pc = &cl->pieces[i];

		if ((lp = logical_by_name(m, audit->params[pc->param].name)) <
		    0)
			fatalx("numeric: norm of an unknown parameter");
		n = pc->hi - pc->lo;
		v = xcalloc((size_t)n, sizeof(*v));
		mag = xcalloc((size_t)n, sizeof(*mag));
		eval_expression(arith, m, &audit->atoms, gv, lp, pc->value,
		    pc->lo, pc->hi, v, mag);
		memset(&part, 0, sizeof(part));
		for (e = 0; e < n; e++)
			part = num_add(arith, part, num_mul(arith, v[e], v[e]));
		sum = num_add(arith, sum, num_mul(arith,
		    num_from_rational(arith, pc->mult), part));
		*nelems += n;
		free(v);
		free(mag);
	}
	return sum;
}

static double
clip_coefficient(enum arith arith, double norm2)
{
	double	c = GN_CLIP_GRAD / (sqrt(norm2) + GN_CLIP_EPS);

	return num_round(arith, c < 1 ? c : 1);
}

/*
 * The clip coefficient's tolerance in ulps: the reference tolerance of a
 * norm squared, relative, in units of the float type's epsilon (the
 * coefficient's relative error is at most half the norm squared's).
 */
static double
clip_ulps_tolerance(enum arith arith)
{
	return ceil(reference_tolerance(arith) / (arith == ARITH_FLOAT32 ?
	    (double)FLT_EPSILON : DBL_EPSILON));
}

/*
 * Process 0: every rank's norm squared against the reference's (the
 * verdict) and against its symbolic value evaluated on the atoms (the
 * self-check).  In floats the verdict needs both the norms squared within
 * the reference tolerance and the clip coefficients min(1, clip / (norm +
 * eps)) within clip_ulps_tolerance(arith) ulps: the coefficient alone would
 * pass a wrong norm below the clip value, where it is 1 either way.
 */
static bool
compare_norms(enum arith arith, const struct model *m, const struct gathered
    *gv, union num **ref, const union num *norm2, struct audit *audit, struct
    self_check *sc)
{
	struct grad_norm_result	*g = &audit->grad_norm;
	union num		 rn = reference_norm(arith, m, ref), *sym;
	bool			*have, all_ok = true;
	int64_t			*nel;
	double			 tol;
	int			 r, c, world = m->mesh.world;

	g->hash = arena_alloc(&audit->arena, world * sizeof(*g->hash));
	g->numeric_ok = arena_alloc(&audit->arena, world *
	    sizeof(*g->numeric_ok));
	g->norm = arena_alloc(&audit->arena, world * sizeof(*g->norm));
	g->coefficient = arena_alloc(&audit->arena, world *
	    sizeof(*g->coefficient));
	g->ulps = arena_alloc(&audit->arena, world * sizeof(*g->ulps));
	g->reference_hash = hash_nums(arith, &rn, 1);
	if (arith != ARITH_EXACT) {
		g->reference_norm = sqrt(rn.d);
		g->reference_coefficient = clip_coefficient(arith, rn.d);
	}
	sym = xcalloc(g->nclasses + 1, sizeof(*sym));
	have = xcalloc(g->nclasses + 1, sizeof(*have));
	nel = xcalloc(g->nclasses + 1, sizeof(*nel));
	for (r = 0; r < world; r++) {
		/* A rank that never clips acts as if its norm were 0. */
		if (!gn_clips(m, r)) {
			union num zero;

			memset(&zero, 0, sizeof(zero));
			g->hash[r] = hash_nums(arith, &zero, 1);
			g->numeric_ok[r] = false;
			g->coefficient[r] = 1;
			g->ulps[r] = arith == ARITH_EXACT ? 0 :
			    ulp_distance(arith, 1, g->reference_coefficient);
			all_ok = false;
			continue;
		}
		g->hash[r] = hash_nums(arith, &norm2[r], 1);
		if (arith == ARITH_EXACT)
			g->numeric_ok[r] = norm2[r].f == rn.f;
		else {
			g->norm[r] = sqrt(norm2[r].d);
			g->coefficient[r] = clip_coefficient(arith, norm2[r].d);
			g->ulps[r] = ulp_distance(arith, g->coefficient[r],
			    g->reference_coefficient);
			g->numeric_ok[r] = fabs(norm2[r].d - rn.d) <=
			    reference_tolerance(arith) * fabs(rn.d) &&
			    g->ulps[r] <= clip_ulps_tolerance(arith);
		}
		all_ok = all_ok && g->numeric_ok[r];
		if ((c = g->class_of[r]) < 0)
			continue;
		if (!have[c]) {
			sym[c] = class_norm(arith, m, gv, audit, &g->classes[c],
			    &nel[c]);
			have[c] = true;
		}
		tol = expression_tolerance(arith) * (double)(nel[c] + 1) *
		    fabs(sym[c].d);
		if (arith == ARITH_EXACT ? sym[c].f != norm2[r].f :
		    fabs(sym[c].d - norm2[r].d) > tol) {
			if (sc->failures++ < NUM_MAX_MESSAGES)
				fprintf(stderr, "%s: self-check failed: the "
				    "gradient norm of rank %d differs from "
				    "its symbolic value\n", progname, r);
		}
		/* Exact, symbolically right: numerically right too. */
		if (arith == ARITH_EXACT && g->classes[c].correct &&
		    !g->numeric_ok[r] && sc->failures++ < NUM_MAX_MESSAGES)
			fprintf(stderr, "%s: self-check failed: the gradient "
			    "norm of rank %d differs from the reference's "
			    "although it counts every element once\n",
			    progname, r);
	}
	free(sym);
	free(have);
	free(nel);
	g->numeric = true;
	g->numeric_correct = all_ok;
	return all_ok;
}

/*
 * The numeric verdict of the audit: correct iff every used cell holds its
 * region of the reference.  It reads only what compare_region measured
 * (numeric_ok), never the symbolic ok, so that the tests can hold the two
 * verdicts against each other (issue 8: an agreement test that compared the
 * exit status of run with that of check compared the symbolic verdict with
 * itself).
 */
bool
numeric_verdict(const struct audit *audit)
{
	const struct param_result	*pr;
	size_t				 i, j;

	for (i = 0; i < audit->nparams; i++) {
		pr = &audit->params[i];
		for (j = 0; j < pr->ncells; j++)
			if (pr->cells[j].used && !pr->cells[j].numeric_ok)
				return false;
	}
	return true;
}

int
numeric_check(enum arith arith, const struct model *m, const struct gathered
    *gv, union num **ref, const union num *norm2, struct audit *audit, struct
    progress_count *pc)
{
	struct self_check	 sc;

	memset(&sc, 0, sizeof(sc));
	sc.atoms = &audit->atoms;
	arena_init(&sc.arena);
	compare_all(arith, m, gv, ref, audit, &sc, pc);
	if (audit->grad_norm.present)
		compare_norms(arith, m, gv, ref, norm2, audit, &sc);
	if (sc.failures > NUM_MAX_MESSAGES)
		fprintf(stderr, "%s: self-check failed on %d more "
		    "regions\n", progname, sc.failures -
		    NUM_MAX_MESSAGES);
	arena_free(&sc.arena);
	evaluated_free(&sc.value);
	evaluated_free(&sc.expected);
	return sc.failures;
}
