/*
 * compare (compare.h): a traced step against its one-process reference.
 *
 * For every parameter, every rank's final gradient is split into regions
 * at every boundary any rank's final or contribution has there (a rank
 * whose owned shard starts inside another's region makes two regions of
 * it, issue 29).  On a region, the columns are the contributions that
 * cover it, one per rank and micro-batch; columns that are zero there are
 * absent, and identical columns (tp copies of one computation) only
 * determine their sum, so they are merged into the lowest.  The rank's
 * values and the reference's are each fitted over the columns by least
 * squares on a sample of rows, the coefficients snapped to small
 * rationals, and the snapped expression kept only when it reproduces every
 * element of the region to rounding level.  The verdict comes from the
 * values alone (held against reference, within the dtype's tolerance);
 * the expressions explain it.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "compare/compare.h"
#include "compare/region.h"
#include "compare/tracepair.h"
#include "model/mesh.h"
#include "symbolic/findings.h"
#include "symbolic/measure.h"

/* Notes kept per parameter (undetermined and merged regions). */
#define NOTES_MAX	4

/* An xmalloc'd printf. */
static char *
fmt(const char *format, ...) __attribute__((format(printf, 1, 2)));

static char *
fmt(const char *format, ...)
{
	char	*s;
	va_list	 ap;

	va_start(ap, format);
	xvasprintf(&s, format, ap);
	va_end(ap);
	return s;
}

static void
gather_add(struct cmp *c, enum finding_kind kind, const char *param,
    int rank, char *detail)
{
	struct gather	*g = &c->found[kind];
	size_t		 i;

	g->any = true;
	for (i = 0; i < g->nparams && strcmp(g->params[i], param) != 0; i++)
		;
	if (i == g->nparams) {
		g->params = xreallocarray(g->params, g->nparams + 1,
		    sizeof(*g->params));
		g->params[g->nparams++] = param;
	}
	for (i = 0; i < g->nranks && g->ranks[i] != rank; i++)
		;
	if (i == g->nranks) {
		g->ranks = xreallocarray(g->ranks, g->nranks + 1,
		    sizeof(*g->ranks));
		g->ranks[g->nranks++] = rank;
	}
	if (g->detail == NULL)
		g->detail = detail;
	else
		free(detail);
}

/*
 * What the inferred expression that rank `rank` holds says went wrong,
 * from the two coefficient vectors alone: atoms missing, atoms extra, the
 * ratios of the rest, and whether the rest are the rank's own (an atom
 * is rank * K + micro-batch).
 */
static enum finding_kind
classify(const struct lincomb *v, const struct lincomb *e, int rank, int K,
    struct rational *lo, struct rational *hi)
{
	size_t	 i = 0, j = 0;
	bool	 missing = false, extra = false, first = true, own = true;
	struct rational r;
	/*
	 * The expected weights held and in all, in doubles: the fitted
	 * denominators (a chunk's tokens) of a long step have a common
	 * multiple past int64, and this only chooses the finding's words.
	 */
	double	 held = 0, all = 0, w;

	*lo = *hi = q_make(1, 1);
	while (i < v->nterms || j < e->nterms) {
		if (j == e->nterms || (i < v->nterms &&
		    v->terms[i].atom < e->terms[j].atom)) {
			extra = true;
			i++;
			continue;
		}
		w = (double)e->terms[j].coef.num / e->terms[j].coef.den;
		all += w;
		if (i == v->nterms || e->terms[j].atom < v->terms[i].atom) {
			missing = true;
			j++;
			continue;
		}
		held += w;
		own = own && v->terms[i].atom / (uint32_t)K == (uint32_t)rank;
		r = q_div(v->terms[i].coef, e->terms[j].coef);
		if (first || (double)r.num / r.den < (double)lo->num / lo->den)
			*lo = r;
		if (first || (double)r.num / r.den > (double)hi->num / hi->den)
			*hi = r;
		first = false;
		i++;
		j++;
	}
	if (extra)
		return FINDING_WRONG_GROUP;
	/*
	 * Atoms missing and the rest at their own weight is a reduction
	 * that never ran.  So is the rank's own atoms at one factor that
	 * makes them the whole's weight: a rank that averages its own
	 * tokens alone holds g0 where the reference holds (g0+g1+g2+g3)/4,
	 * the mean no all-reduce ever took (kohya-ss/sd-scripts #924).
	 * Other factors mix states, as a sum of reduced and unreduced
	 * values does (Megatron-LM #844), and so does another rank's atom
	 * at such a factor: #844's tied embedding all-reduce leaves the
	 * first stage's rank 1 holding 2*g3 of the last stage's rank 3
	 * where the reference holds g2+g3, on rows only the output layer's
	 * tokens touch (tests/compare-own-mean.test).
	 */
	if (missing)
		return first || (q_equal(*lo, *hi) && (lo->num == lo->den ||
		    (own && fabs((double)lo->num / lo->den * held - all) <=
		    1e-9 * fabs(all)))) ?
		    FINDING_MISSING_REDUCTION : FINDING_WRONG_ORDER;
	/*
	 * One factor: a sum where a mean was meant and a value counted
	 * twice look alike in the numbers, so both are a wrong scale (with
	 * the factor), never a guess at double-count.
	 */
	if (!q_equal(*lo, *hi))
		return FINDING_WRONG_WEIGHTS;
	return FINDING_WRONG_SCALE;
}

static void
note_add(struct arena *ar, const char **notes, size_t *n, size_t *more,
    char *s)
{
	if (*n < NOTES_MAX)
		notes[(*n)++] = arena_strdup(ar, s);
	else
		(*more)++;
	free(s);
}

static const char *
expr(struct cmp *c, const struct lincomb *x)
{
	return x == NULL ? "undetermined" :
	    lc_format(&c->a->arena, &c->a->atoms, x, "g");
}

/*
 * What the config says rank `rank` holds on the region [lo, hi) of its
 * local shard, in the trace's atoms, or NULL (why says it).  The config's
 * atoms are 1/tokens times a chunk's summed-loss gradient and a rank's
 * local gradient of micro-batch m is its chunk's loss factor times that
 * atom (lossnorm.h), which is what the hook recorded: so the config's
 * coefficient over the trace's contribution is its own divided by that
 * factor.  Atoms whose contribution is zero on the region are unseen and
 * dropped; identical contributions count on the lowest, as measured.
 */
static const struct lincomb *
predicted(struct cmp *c, int rank, int64_t lo, int64_t hi,
    const struct column *cols, size_t ncols, const char **why)
{
	const struct atom_space	*sp = &c->cfg->atoms;
	const struct param_result *cp = c->cfgp;
	const struct lincomb	*v = NULL;
	struct rational		*sum;
	struct lincomb		*out;
	size_t			 i, j;
	uint32_t		 k;

	for (i = 0; i < cp->ncells; i++) {
		const struct cell *x = &cp->cells[i];

		if (x->rank != rank || !x->used || x->hi <= lo || x->lo >= hi)
			continue;
		if (x->lo > lo || x->hi < hi) {
			*why = "the config splits these elements into "
			    "regions of other bounds: compared with the one "
			    "that starts first";
		}
		v = x->value;
		break;
	}
	if (v == NULL) {
		*why = "the config says this rank does not use these elements";
		return NULL;
	}
	sum = xcalloc(ncols + 1, sizeof(*sum));
	for (j = 0; j < ncols; j++)
		sum[j] = q_make(0, 1);
	for (k = 0; k < v->nterms; k++) {
		uint32_t a = v->terms[k].atom, ta;
		struct rational f;

		if (atom_is_held(sp, a) || atom_source(sp, a) != 0) {
			*why = "the config keeps expert, auxiliary-loss or "
			    "multi-token atoms apart, which one contribution "
			    "per rank and micro-batch cannot show";
			free(sum);
			return NULL;
		}
		f = sp->nfactors > 0 ? atom_loss_factor(sp, a) : q_make(1, 1);
		if (q_is_zero(f))
			continue;	/* a chunk without valid tokens */
		ta = (uint32_t)(atom_rank(sp, a) * c->K +
		    atom_micro_batch(sp, a));
		for (j = 0; j < ncols; j++)
			if (cols[j].atom == ta)
				break;
		if (j == ncols || (cols[j].kept < 0 && cols[j].same_as < 0))
			continue;	/* zero here: unseen */
		if (cols[j].kept < 0)
			j = (size_t)cols[j].same_as;
		sum[j] = q_add(sum[j], q_div(v->terms[k].coef, f));
	}
	for (i = 0, j = 0; j < ncols; j++)
		i += !q_is_zero(sum[j]);
	out = arena_alloc(&c->a->arena, sizeof(*out) + i *
	    sizeof(out->terms[0]));
	for (j = 0; j < ncols; j++)
		if (!q_is_zero(sum[j])) {
			out->terms[out->nterms].atom = cols[j].atom;
			out->terms[out->nterms++].coef = sum[j];
		}
	free(sum);
	return out;
}

static void
config_finding(struct cmp *c, const char *param, int rank, int64_t lo,
    int64_t hi, const struct lincomb *held, const struct lincomb *said)
{
	struct rational		lo_q, hi_q;
	enum finding_kind	kind = FINDING_WRONG_VALUE;

	if (held != NULL && said != NULL)
		kind = classify(held, said, rank, c->K, &lo_q, &hi_q);
	gather_add(c, kind, param, rank, fmt("the config says %s on rank %d "
	    "[%" PRId64 ",%" PRId64 ") holds %s; the traced job held %s",
	    param, rank, lo, hi, said == NULL ? "nothing it can compare" :
	    expr(c, said), expr(c, held)));
}

/*
 * Whether the replicas of parameter p agree: cells of the same box and
 * region on two ranks must hold the same values (their hashes).  This is
 * the one place a traced parameter's consistency is decided, against a
 * reference and against a config alike: what a config says each rank
 * holds is not whether the ranks agree, and taking it for that called a
 * DDP step's replicas consistent when no_sync() on the wrong micro-batch
 * left each rank its own gradient (b40a4fe skipped this loop for
 * configs).
 *
 * The finding names the ranks that disagree with a replica and hold a
 * wrong value (not the reference's, or not what the config says), as
 * check's names the ranks whose values are wrong; when none of them
 * does, every rank that disagrees.  It named the second rank of the
 * first pair that differed: rank 1 alone of four ranks that each kept
 * their own gradient, and of a wrong rank 0 and a right rank 2, the
 * right one.
 */
static void
check_replicas(struct cmp *c, const struct trace_param *p,
    struct param_result *pr, const struct trace_tensor *const *keyof)
{
	bool	*party;
	char	*detail = NULL;
	size_t	 i, j, n = pr->ncells;
	bool	 wrong = false;

	party = xcalloc(n + 1, sizeof(*party));
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++) {
			const struct cell *x = &pr->cells[i], *y = &pr->cells[j];

			if (x->rank == y->rank || x->lo != y->lo ||
			    x->hi != y->hi || !same_box(p, keyof[i],
			    keyof[j]) || x->hash == y->hash)
				continue;
			if (detail == NULL)
				detail = fmt("%s [%" PRId64 ",%" PRId64 "): "
				    "rank %d and rank %d hold different values "
				    "of the same elements", p->name, x->lo,
				    x->hi, x->rank, y->rank);
			party[i] = party[j] = true;
			pr->consistent = false;
		}
	for (i = 0; i < n; i++)
		wrong |= party[i] && !pr->cells[i].ok;
	for (i = 0; i < n; i++)
		if (party[i] && (!wrong || !pr->cells[i].ok)) {
			/* The first rank's call keeps the detail. */
			gather_add(c, FINDING_REPLICA_MISMATCH, p->name,
			    pr->cells[i].rank, detail);
			detail = NULL;
		}
	free(party);
}

/* One parameter: its cells, consistency and findings. */
static void
compare_param(struct cmp *c, int pi, struct param_result *pr)
{
	const struct trace	*t = c->t;
	const struct trace_param *p = &t->params[pi];
	size_t			 f0, nf, c0, nc, r0, nr, i, j, k, ncuts, cap;
	size_t			 ncells = 0, nnotes = 0, more = 0;
	int64_t			*cuts = NULL, e;
	const struct trace_tensor **keyof = NULL;
	struct cell		*cells = NULL;
	const char		*notes[NOTES_MAX];
	struct column		*cols;
	struct region_result	 res;
	struct rational		 lo, hi;
	char			 a[32], b[32];

	memset(pr, 0, sizeof *pr);
	pr->name = p->name;
	pr->elems = p->elems;
	pr->has_hash = true;
	pr->consistent = pr->correct = true;

	/* The reference, dense: memory grows with the largest parameter. */
	c->refv = xreallocarray(c->refv, (size_t)p->elems + 1,
	    sizeof(double));
	memset(c->refv, 0, ((size_t)p->elems + 1) * sizeof(double));
	r0 = 0;
	nr = c->ref == NULL ? 0 : trace_tensors_of(c->ref,
	    trace_param_index(c->ref, p->name), TRACE_FINAL, &r0);
	for (i = r0; i < r0 + nr; i++) {
		const struct trace_tensor *x = &c->ref->tensors[i];

		for (e = x->lo; e < x->hi; e++)
			c->refv[logical_index(p, x, e)] = trace_value(x,
			    e - x->lo);
	}
	pr->reference_hash = hash_doubles(c->refv, (size_t)p->elems);

	nf = trace_tensors_of(t, pi, TRACE_FINAL, &f0);
	nc = trace_tensors_of(t, pi, TRACE_CONTRIB, &c0);
	cols = xcalloc(nc + 1, sizeof(*cols));
	/* Rows of at most MAX_COLUMNS columns are ever loaded (the bound). */
	if (c->bufcols < (nc < MAX_COLUMNS ? nc : MAX_COLUMNS) + 2) {
		c->bufcols = (nc < MAX_COLUMNS ? nc : MAX_COLUMNS) + 2;
		c->buf = xreallocarray(c->buf, c->bufcols * CHUNK,
		    sizeof(double));
	}
	for (i = f0; i < f0 + nf; i++) {
		const struct trace_tensor *f = &t->tensors[i];
		size_t n = 0;

		/* The columns that meet this final's box and range. */
		ncuts = 0;
		cap = 0;
		for (j = c0; j < c0 + nc; j++) {
			const struct trace_tensor *x = &t->tensors[j];

			if (!boxes_meet(p, f, x))
				continue;
			cols[n].x = x;
			cols[n].atom = (uint32_t)(x->rank * c->K + x->mb);
			cols[n].same_box = same_box(p, f, x);
			if (cols[n].same_box) {
				if (x->hi <= f->lo || x->lo >= f->hi)
					continue;
				add_cut(&cuts, &ncuts, &cap, x->lo, f);
				add_cut(&cuts, &ncuts, &cap, x->hi, f);
			} else {
				/* Cut wherever its coverage changes. */
				bool in = column_index(p, f, x, f->lo) >= 0;

				for (e = f->lo + 1; e < f->hi; e++)
					if ((column_index(p, f, x, e) >= 0) !=
					    in) {
						in = !in;
						add_cut(&cuts, &ncuts, &cap, e,
						    f);
					}
			}
			n++;
		}
		for (j = f0; j < f0 + nf; j++) {
			const struct trace_tensor *g = &t->tensors[j];

			if (j != i && same_box(p, f, g)) {
				add_cut(&cuts, &ncuts, &cap, g->lo, f);
				add_cut(&cuts, &ncuts, &cap, g->hi, f);
			}
		}
		if (ncuts > 1)
			qsort(cuts, ncuts, sizeof(*cuts), cmp_i64);
		for (k = 0; k <= ncuts; k++) {
			int64_t rlo = k == 0 ? f->lo : cuts[k - 1];
			int64_t rhi = k == ncuts ? f->hi : cuts[k];
			struct cell *cl;
			bool ok;

			if (rlo == rhi)
				continue;
			/*
			 * More contributions than MAX_COLUMNS on one final:
			 * its values are still compared, but no expression
			 * is inferred (gradaudit-trace(5), LIMITS).
			 */
			audit_region(c, p, f, cols, n <= MAX_COLUMNS ? n : 0,
			    rlo, rhi, &res);
			if (n > MAX_COLUMNS) {
				res.value = res.expected = NULL;
				res.ref_determined = false;
				res.determined = true;	/* no note per region */
			}
			if (n > MAX_COLUMNS && k == 0)
				note_add(&c->a->arena, notes, &nnotes, &more,
				    fmt("rank %d: %zu contributions, more than "
				    "the %d fitted: values compared, no "
				    "expressions", f->rank, n, MAX_COLUMNS));
			cells = xreallocarray(cells, ncells + 1,
			    sizeof(*cells));
			keyof = xreallocarray(keyof, ncells + 1,
			    sizeof(*keyof));
			keyof[ncells] = f;
			cl = &cells[ncells++];
			memset(cl, 0, sizeof *cl);
			cl->rank = f->rank;
			cl->lo = rlo;
			cl->hi = rhi;
			cl->used = true;
			cl->value = res.value;
			cl->expected = res.expected;
			cl->has_hash = true;
			cl->hash = res.hash;
			cl->reference_hash = res.ref_hash;
			if (c->cfg != NULL) {
				/* The config's word against the job's. */
				const char *why = NULL;

				cl->expected = predicted(c, f->rank, rlo, rhi,
				    cols, n, &why);
				cl->reference_hash = res.hash;
				ok = res.value != NULL && cl->expected != NULL &&
				    lc_equal(res.value, cl->expected);
				cl->ok = cl->numeric_ok = ok;
				if (why != NULL)
					note_add(&c->a->arena, notes, &nnotes,
					    &more, fmt("rank %d [%" PRId64 ",%"
					    PRId64 "): %s", f->rank, rlo, rhi,
					    why));
				if (!ok)
					config_finding(c, p->name, f->rank,
					    rlo, rhi, res.value, cl->expected);
				goto next;
			}
			cl->max_rel_error = res.max_ref > 0 ?
			    res.max_abs_diff / res.max_ref : res.max_abs_diff;
			ok = res.max_abs_diff <= c->tol.value *
			    (res.max_ref > 0 ? res.max_ref : 1);
			cl->ok = cl->numeric_ok = ok;
			cl->max_ulps = cl->max_rel_error /
			    (f->dtype == TRACE_F64 ? 0x1p-52 : 0x1p-23);
			if (res.merged > 0)
				note_add(&c->a->arena, notes, &nnotes, &more,
				    fmt("rank %d [%" PRId64 ",%" PRId64 "): "
				    "%d contribution%s identical to another "
				    "(a replicated computation): only their "
				    "sum is determined, shown on the lowest",
				    f->rank, rlo, rhi, res.merged,
				    res.merged == 1 ? " is" : "s are"));
		next:
			if (!res.determined && c->tol.infer &&
			    res.rows < (size_t)res.fitted)
				note_add(&c->a->arena, notes, &nnotes, &more,
				    fmt("rank %d [%" PRId64 ",%" PRId64 "): "
				    "%d contributions on %zu nonzero elements "
				    "cannot be told apart: undetermined",
				    f->rank, rlo, rhi, res.fitted, res.rows));
			else if (!res.determined && c->tol.infer &&
			    res.dependent)
				note_add(&c->a->arena, notes, &nnotes, &more,
				    fmt("rank %d [%" PRId64 ",%" PRId64 "): "
				    "%d contributions are not independent on "
				    "the %zu elements fitted (copies that "
				    "differ only in rounding, or contributions "
				    "nonzero on few elements): undetermined",
				    f->rank, rlo, rhi, res.fitted, res.rows));
			else if (!res.determined && c->tol.infer)
				note_add(&c->a->arena, notes, &nnotes, &more,
				    res.has_residual ? fmt("rank %d [%" PRId64
				    ",%" PRId64 "): no expression over the "
				    "contributions fits the held values "
				    "(relative residual %.2g): undetermined",
				    f->rank, rlo, rhi, res.residual) :
				    fmt("rank %d [%" PRId64 ",%" PRId64 "): "
				    "no expression over the contributions "
				    "fits the held values: undetermined",
				    f->rank, rlo, rhi));
			if (ok || c->cfg != NULL) {
				if (!ok)
					pr->correct = false;
				continue;
			}
			pr->correct = false;
			if (res.value != NULL && res.expected != NULL &&
			    !lc_equal(res.value, res.expected)) {
				enum finding_kind kind = classify(res.value,
				    res.expected, f->rank, c->K, &lo, &hi);

				q_format(lo, a, sizeof a);
				q_format(hi, b, sizeof b);
				gather_add(c, kind, p->name, f->rank,
				    fmt("%s on rank %d [%" PRId64 ",%" PRId64
				    ") holds %s where the reference holds %s"
				    "%s%s%s%s", p->name, f->rank, rlo, rhi,
				    expr(c, res.value), expr(c, res.expected),
				    kind == FINDING_WRONG_WEIGHTS ? ": weights "
				    "from " : kind == FINDING_WRONG_SCALE ?
				    ": " : "",
				    kind == FINDING_WRONG_WEIGHTS ||
				    kind == FINDING_WRONG_SCALE ? a : "",
				    kind == FINDING_WRONG_WEIGHTS ? " to " :
				    kind == FINDING_WRONG_SCALE ?
				    " times the reference" : "",
				    kind == FINDING_WRONG_WEIGHTS ? b : ""));
			} else
				gather_add(c, FINDING_WRONG_VALUE, p->name,
				    f->rank, fmt("%s on rank %d [%" PRId64
				    ",%" PRId64 ") differs from the reference "
				    "by up to %.3g of its largest value%s%s%s"
				    "%s", p->name, f->rank, rlo, rhi,
				    cl->max_rel_error, res.value == NULL &&
				    res.expected == NULL ? "" : ", and holds ",
				    res.value == NULL && res.expected == NULL ?
				    "" : expr(c, res.value),
				    res.value == NULL && res.expected == NULL ?
				    "" : " where the reference holds ",
				    res.value == NULL && res.expected == NULL ?
				    "" : expr(c, res.expected)));
		}
	}
	pr->cells = arena_alloc(&c->a->arena, (ncells + 1) *
	    sizeof(*cells));
	if (ncells > 0)
		memcpy(pr->cells, cells, ncells * sizeof(*cells));
	pr->ncells = ncells;
	free(cells);
	check_replicas(c, p, pr, keyof);
	if (nnotes > 0) {
		char *s = NULL, *u;

		for (i = 0; i < nnotes; i++) {
			u = s;
			xasprintf(&s, "%s%s%s", u ? u : "", u ? "\n" : "",
			    notes[i]);
			free(u);
		}
		if (more > 0) {
			u = s;
			xasprintf(&s, "%s\n(%zu more such regions)", u, more);
			free(u);
		}
		pr->note = arena_strdup(&c->a->arena, s);
		free(s);
	}
	for (i = f0; i < f0 + nf; i++)
		trace_release(&t->tensors[i]);
	for (i = c0; i < c0 + nc; i++)
		trace_release(&t->tensors[i]);
	for (i = r0; i < r0 + nr; i++)
		trace_release(&c->ref->tensors[i]);
	free(keyof);
	free(cuts);
	free(cols);
}

static int
cmp_int(const void *a, const void *b)
{
	int	x = *(const int *)a, y = *(const int *)b;

	return x < y ? -1 : x > y;
}

static void
emit_findings(struct cmp *c)
{
	struct audit	*a = c->a;
	const struct measured_text *texts;
	size_t		 i, k, n = 0, ntexts;

	texts = measured_texts(&ntexts);
	for (i = 0; i < ntexts; i++)
		n += c->found[texts[i].kind].any;
	a->findings = arena_alloc(&a->arena, (n + 1) * sizeof(*a->findings));
	for (i = 0; i < ntexts; i++) {
		struct gather	*g = &c->found[texts[i].kind];
		struct finding	*fd;
		/*
		 * Against a config the fault of a difference is the
		 * config's or the code's; replicas that disagree are
		 * measured on the trace alone, whatever the config says.
		 */
		const struct measured_text *w = c->cfg != NULL &&
		    texts[i].kind != FINDING_REPLICA_MISMATCH ?
		    &measured_against_config : &texts[i];

		if (!g->any)
			continue;
		fd = &a->findings[a->nfindings++];
		fd->kind = texts[i].kind;
		/* Measured, not derived: no setting is known to cause it. */
		fd->cause = KEY__COUNT;
		fd->params = arena_alloc(&a->arena, (g->nparams + 1) *
		    sizeof(*fd->params));
		for (k = 0; k < g->nparams; k++)
			fd->params[k] = g->params[k];
		fd->nparams = g->nparams;
		fd->param = g->nparams > 0 ? g->params[0] : NULL;
		qsort(g->ranks, g->nranks, sizeof(*g->ranks), cmp_int);
		fd->ranks = arena_alloc(&a->arena, (g->nranks + 1) *
		    sizeof(*fd->ranks));
		memcpy(fd->ranks, g->ranks, g->nranks * sizeof(*fd->ranks));
		fd->nranks = g->nranks;
		fd->op = "traced step";
		fd->dim = NULL;	/* measured: no mesh dimension is known */
		{
			char *s;

			xasprintf(&s, "%s: %s", w->what, g->detail);
			fd->message = arena_strdup(&a->arena, s);
			free(s);
		}
		/* A wrong norm alone: its effect is the norm's, not a cell's. */
		if (fd->kind == FINDING_WRONG_VALUE && g->nparams == 1 &&
		    strcmp(g->params[0], "gradient norm") == 0) {
			fd->effect.kind = EFFECT_NORM;
			fd->effect.fraction = c->norm_fraction;
		}
		fd->fix = w->fix;
	}
	for (k = 0; k < FINDING__COUNT; k++) {
		free(c->found[k].params);
		free(c->found[k].ranks);
		free(c->found[k].detail);
	}
}

/* The norm each rank used against the reference's, and the clip. */
static void
compare_norms(struct cmp *c)
{
	struct audit		*a = c->a;
	struct grad_norm_result	*g = &a->grad_norm;
	const struct trace_rank	*rr = &c->ref->ranks[0];
	int			 r, k, W = c->t->world;
	double			 clip = NAN;
	bool			 any = false;

	for (r = 0; r < W; r++)
		any |= c->t->ranks[r].has_norm;
	if (!any || !rr->has_norm)
		return;
	g->present = g->numeric = true;
	g->correct = g->consistent = true;
	g->class_of = arena_alloc(&a->arena, W * sizeof(*g->class_of));
	g->classes = arena_alloc(&a->arena, W * sizeof(*g->classes));
	g->norm = arena_alloc(&a->arena, W * sizeof(*g->norm));
	g->coefficient = arena_alloc(&a->arena, W * sizeof(*g->coefficient));
	g->ulps = arena_alloc(&a->arena, W * sizeof(*g->ulps));
	g->numeric_ok = arena_alloc(&a->arena, W * sizeof(*g->numeric_ok));
	g->hash = arena_alloc(&a->arena, W * sizeof(*g->hash));
	g->reference_norm = rr->grad_norm;
	g->reference_coefficient = rr->has_clip ? rr->clip_coef : NAN;
	for (r = 0; r < W; r++) {
		const struct trace_rank *tr = &c->t->ranks[r];
		struct gn_class *cl;

		g->class_of[r] = -1;
		if (!tr->has_norm)
			continue;
		g->norm[r] = tr->grad_norm;
		g->coefficient[r] = tr->has_clip ? tr->clip_coef : NAN;
		g->numeric_ok[r] = fabs(tr->grad_norm - rr->grad_norm) <=
		    c->tol.value * (rr->grad_norm > 0 ? rr->grad_norm : 1);
		g->ulps[r] = fabs(tr->grad_norm - rr->grad_norm) /
		    ((rr->grad_norm > 0 ? rr->grad_norm : 1) * 0x1p-23);
		if (tr->has_clip) {
			if (isnan(clip))
				clip = tr->clip_coef;
			else if (fabs(tr->clip_coef - clip) > c->tol.value *
			    (fabs(clip) > 0 ? fabs(clip) : 1))
				g->consistent = false;
		}
		for (k = 0; k < (int)g->nclasses; k++)
			if (g->norm[g->classes[k].ranks[0]] == tr->grad_norm)
				break;
		if (k == (int)g->nclasses) {
			cl = &g->classes[g->nclasses++];
			cl->ranks = arena_alloc(&a->arena, W *
			    sizeof(*cl->ranks));
			cl->correct = g->numeric_ok[r];
		}
		cl = &g->classes[k];
		cl->ranks[cl->nranks++] = r;
		g->class_of[r] = k;
		if (!g->numeric_ok[r])
			g->correct = false;
	}
	g->numeric_correct = g->correct;
	g->miscounted = !g->correct;
	g->gradients_wrong = !g->correct && !a->correct;
	if (!g->correct)
		c->norm_fraction = (g->norm[g->classes[0].ranks[0]] *
		    g->norm[g->classes[0].ranks[0]] - g->reference_norm *
		    g->reference_norm) / (g->reference_norm > 0 ?
		    g->reference_norm * g->reference_norm : 1);
	if (!g->correct)
		gather_add(c, FINDING_WRONG_VALUE, "gradient norm",
		    g->classes[0].ranks[0], fmt("rank %d used %.9g, the "
		    "reference %.9g", g->classes[0].ranks[0],
		    g->norm[g->classes[0].ranks[0]], g->reference_norm));
	if (!g->consistent)
		gather_add(c, FINDING_INCONSISTENT_CLIP, "gradient norm", 0,
		    fmt("the clip coefficients differ between ranks"));
}


/*
 * What both comparisons share: tolerances, atoms, the header's facts.
 * ref is the reference, or NULL against a config.
 */
static void
compare_begin(struct cmp *c, const struct trace *t, const struct trace *ref,
    struct audit *a, const char *against)
{
	struct audit_trace	*at;
	enum trace_dtype	 dt;

	memset(c, 0, sizeof *c);
	c->t = t;
	c->a = a;
	c->K = t->micro_batches;
	/*
	 * The coarsest dtype of any final, the reference's too, sets the
	 * tolerances: a float32 reference holds a float64 step's values
	 * only to float32's rounding, and held to float64's tolerance every
	 * right parameter would be wrong.
	 */
	dt = coarsest_final(t, TRACE_F64);
	if (ref != NULL)
		dt = coarsest_final(ref, dt);
	compare_tolerance(dt, &c->tol);
	atom_space_init(&a->atoms);
	a->atoms.mesh = a->mesh;
	a->atoms.micro_batches = c->K;
	a->arith = dt == TRACE_F64 ? ARITH_FLOAT64 : ARITH_FLOAT32;
	a->procs = t->world;
	at = arena_alloc(&a->arena, sizeof(*at));
	at->dir = arena_strdup(&a->arena, t->dir);
	at->step = arena_strdup(&a->arena, t->step);
	at->against = arena_strdup(&a->arena, against);
	at->dtype = trace_dtype_name(dt);
	at->micro_batches = c->K;
	at->tolerance = c->tol.value;
	a->trace = at;
	a->correct = a->consistent = true;
}

static void
compare_end(struct cmp *c)
{
	emit_findings(c);
	measure_effects(c->a);
	free(c->refv);
	free(c->buf);
	free(c->sample);
}

int
compare_config(const struct trace *t, const struct audit *cfg,
    const char *config_file, struct audit *a, char *err, size_t errlen)
{
	struct compare_tolerance tol;
	enum trace_dtype	 dt = coarsest_final(t, TRACE_F64);

	struct cmp		 c;
	struct audit_trace	*at;
	size_t			 i, k, n = 0;
	char			*unmatched = NULL, *u;

	memset(a, 0, sizeof *a);
	arena_init(&a->arena);
	if (t->reference || t->world != cfg->mesh.world ||
	    t->micro_batches != atom_space_micro_batches(&cfg->atoms)) {
		if (t->reference)
			snprintf(err, errlen, "%s: a reference trace: compare "
			    "the traced step itself with a config", t->dir);
		else
			snprintf(err, errlen, "%s: %d ranks and %d "
			    "micro-batches, but %s has %d and %d", t->dir,
			    t->world, t->micro_batches, config_file,
			    cfg->mesh.world,
			    atom_space_micro_batches(&cfg->atoms));
		arena_free(&a->arena);
		return -1;
	}
	/* Against a config, the expressions are the verdict. */
	memset(&tol, 0, sizeof tol);
	compare_tolerance(dt, &tol);
	if (!tol.infer) {
		snprintf(err, errlen, "%s: the finals are %s, too coarse to "
		    "infer expressions, and against %s the expressions are "
		    "the verdict: trace the step in float32 or float64",
		    t->dir, trace_dtype_name(dt), config_file);
		arena_free(&a->arena);
		return -1;
	}
	if (check_config_mesh(t, &cfg->mesh, config_file, err, errlen) != 0) {
		arena_free(&a->arena);
		return -1;
	}
	a->mesh = cfg->mesh;
	compare_begin(&c, t, NULL, a, config_file);
	c.cfg = cfg;
	a->params = arena_alloc(&a->arena, (t->nparams + 1) *
	    sizeof(*a->params));
	for (i = 0; i < t->nparams; i++) {
		const struct trace_param *p = &t->params[i];

		for (k = 0; k < cfg->nparams; k++)
			if (strcmp(cfg->params[k].name, p->name) == 0)
				break;
		if (k == cfg->nparams) {
			u = unmatched;
			xasprintf(&unmatched, "%s%s%s", u ? u : "", u ? ", " :
			    "", p->name);
			free(u);
			continue;
		}
		if (cfg->params[k].elems != p->elems) {
			snprintf(err, errlen, "%s: parameter %s has %" PRId64
			    " elements, but %" PRId64 " in %s's model: give "
			    "the config the traced model's sizes (model.*)",
			    t->dir, p->name, p->elems, cfg->params[k].elems,
			    config_file);
			free(unmatched);
			compare_end(&c);
			audit_free(a);
			return -1;
		}
		c.cfgp = &cfg->params[k];
		compare_param(&c, (int)i, &a->params[n]);
		a->correct &= a->params[n].correct;
		a->consistent &= a->params[n].consistent;
		n++;
	}
	a->nparams = n;
	if (n == 0) {
		snprintf(err, errlen, "%s: no traced parameter is in %s's "
		    "model: name the traced parameters as gradaudit's model "
		    "does (gradaudit check -v %s lists them)", t->dir,
		    config_file, config_file);
		free(unmatched);
		compare_end(&c);
		audit_free(a);
		return -1;
	}
	at = (struct audit_trace *)a->trace;
	if (unmatched != NULL) {
		at->unmatched = arena_strdup(&a->arena, unmatched);
		free(unmatched);
	}
	a->numeric_correct = a->correct;
	compare_end(&c);
	return 0;
}

int
compare_traces(const struct trace *t, const struct trace *ref,
    struct audit *a, char *err, size_t errlen)
{
	struct cmp		 c;
	size_t			 i;

	memset(a, 0, sizeof *a);
	arena_init(&a->arena);
	if (check_pair(t, ref, err, errlen) != 0) {
		/* Step ids, names and paths from the files, one line. */
		text_make_visible(err, errlen);
		arena_free(&a->arena);
		return -1;
	}
	build_mesh(t, &a->mesh);
	compare_begin(&c, t, ref, a, ref->dir);
	c.ref = ref;
	a->numeric = true;
	a->params = arena_alloc(&a->arena, (t->nparams + 1) *
	    sizeof(*a->params));
	a->nparams = t->nparams;
	for (i = 0; i < t->nparams; i++) {
		compare_param(&c, (int)i, &a->params[i]);
		a->correct &= a->params[i].correct;
		a->consistent &= a->params[i].consistent;
	}
	a->numeric_correct = a->correct;
	compare_norms(&c);
	compare_end(&c);
	return 0;
}
