/*
 * One region of compare (compare.c): the geometry of traced boxes, and the
 * fit of a region's held values and reference over the columns that cover
 * it, snapped to small rationals and kept only when they reproduce every
 * element (region.h).
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
#include "compare/fit.h"
#include "compare/region.h"
#include "model/mesh.h"
#include "symbolic/measure.h"

bool
same_box(const struct trace_param *p, const struct trace_tensor *x,
    const struct trace_tensor *y)
{
	int	d;

	for (d = 0; d < p->ndim; d++)
		if (x->offset[d] != y->offset[d] || x->box[d] != y->box[d])
			return false;
	return true;
}

bool
boxes_meet(const struct trace_param *p, const struct trace_tensor *x,
    const struct trace_tensor *y)
{
	int	d;

	for (d = 0; d < p->ndim; d++)
		if (x->offset[d] >= y->offset[d] + y->box[d] ||
		    y->offset[d] >= x->offset[d] + x->box[d])
			return false;
	return true;
}

/* The logical (row-major) index of element i of final f's box. */
int64_t
logical_index(const struct trace_param *p, const struct trace_tensor *f,
    int64_t i)
{
	int64_t	idx[TRACE_MAX_DIMS], li = 0;
	int	d;

	for (d = p->ndim - 1; d >= 0; d--) {
		idx[d] = i % f->box[d] + f->offset[d];
		i /= f->box[d];
	}
	for (d = 0; d < p->ndim; d++)
		li = li * p->shape[d] + idx[d];
	return li;
}

/*
 * The index in column tensor x of element i of final f's box, or -1 when
 * x does not hold it.
 */
int64_t
column_index(const struct trace_param *p, const struct trace_tensor *f,
    const struct trace_tensor *x, int64_t i)
{
	int64_t	idx[TRACE_MAX_DIMS], j = 0;
	int	d;

	for (d = p->ndim - 1; d >= 0; d--) {
		idx[d] = i % f->box[d] + f->offset[d] - x->offset[d];
		i /= f->box[d];
		if (idx[d] < 0 || idx[d] >= x->box[d])
			return -1;
	}
	for (d = 0; d < p->ndim; d++)
		j = j * x->box[d] + idx[d];
	return j >= x->lo && j < x->hi ? j - x->lo : -1;
}

static double
column_value(const struct trace_param *p, const struct trace_tensor *f,
    const struct column *c, int64_t i)
{
	int64_t	j;

	if (c->same_box)
		return i >= c->x->lo && i < c->x->hi ?
		    trace_value(c->x, i - c->x->lo) : 0;
	j = column_index(p, f, c->x, i);
	return j < 0 ? 0 : trace_value(c->x, j);
}

int
cmp_i64(const void *a, const void *b)
{
	int64_t	x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

void
add_cut(int64_t **cuts, size_t *n, size_t *cap, int64_t v,
    const struct trace_tensor *f)
{
	if (v <= f->lo || v >= f->hi)
		return;
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 16;
		*cuts = xreallocarray(*cuts, *cap, sizeof(**cuts));
	}
	(*cuts)[(*n)++] = v;
}


static const struct lincomb *
make_lincomb(struct arena *ar, const struct column *cols, size_t ncols,
    const struct rational *q)
{
	struct lincomb	*lc;
	size_t		 i, n = 0;

	for (i = 0; i < ncols; i++)
		if (cols[i].kept >= 0 && !q_is_zero(q[cols[i].kept]))
			n++;
	lc = arena_alloc(ar, sizeof(*lc) + n * sizeof(lc->terms[0]));
	for (i = 0; i < ncols; i++)
		if (cols[i].kept >= 0 && !q_is_zero(q[cols[i].kept])) {
			lc->terms[lc->nterms].atom = cols[i].atom;
			lc->terms[lc->nterms++].coef = q[cols[i].kept];
		}
	return lc;
}

/*
 * Fit v (m sampled rows) over the kept columns and snap; false:
 * undetermined, with *dependent set when the columns themselves are (a
 * combination of the others on these rows).
 */
static bool
fit_snap(struct cmp *c, const double *rows, size_t m, size_t width,
    int vcol, const int *keptcol, int nk, struct rational *q, double *coef,
    bool *dependent)
{
	double	*x, *y;
	size_t	 i;
	int	 j;
	bool	 ok;

	x = xcalloc((size_t)nk * m + 1, sizeof(*x));
	y = xcalloc(m + 1, sizeof(*y));
	for (i = 0; i < m; i++) {
		y[i] = rows[i * width + vcol];
		for (j = 0; j < nk; j++)
			x[j * m + i] = rows[i * width + keptcol[j]];
	}
	ok = fit_least_squares(x, (int)m, nk, y, coef, c->tol.rank);
	*dependent = !ok;
	for (j = 0; ok && j < nk; j++)
		ok = fit_rational(coef[j], c->tol.snap, &q[j]);
	free(x);
	free(y);
	return ok;
}

/* Load rows [i0, i0 + n) of the region into c->buf: y, reference, columns. */
static void
load_chunk(struct cmp *c, const struct trace_param *p,
    const struct trace_tensor *f, const struct column *cols, size_t ncols,
    int64_t i0, size_t n)
{
	double	*y = c->buf, *r = c->buf + CHUNK, *x;
	size_t	 i, j;

	for (i = 0; i < n; i++) {
		y[i] = trace_value(f, i0 + (int64_t)i - f->lo);
		r[i] = c->refv[logical_index(p, f, i0 + (int64_t)i)];
	}
	for (j = 0; j < ncols; j++) {
		if (cols[j].kept == -2)
			continue;	/* not on this region */
		x = c->buf + (j + 2) * CHUNK;
		for (i = 0; i < n; i++)
			x[i] = column_value(p, f, &cols[j], i0 + (int64_t)i);
	}
}

/* Row i of the chunk in c->buf as a sample row: y, reference, columns. */
static void
sample_row(const struct cmp *c, const struct column *cols, size_t ncols,
    size_t i, double y, double r, double *row)
{
	size_t	j;

	row[0] = y;
	row[1] = r;
	for (j = 0; j < ncols; j++)
		row[2 + j] = cols[j].kept == -2 ? 0 :
		    c->buf[(j + 2) * CHUNK + i];
}

/* The relative residual: sqrt(e / s), or sqrt(e) for values all zero. */
static double
relative_residual(double e, double s)
{
	return s > 0 ? sqrt(e / s) : sqrt(e);
}

void
audit_region(struct cmp *c, const struct trace_param *p,
    const struct trace_tensor *f, struct column *cols, size_t ncols,
    int64_t lo, int64_t hi, struct region_result *res)
{
	struct hash_state	 hy, hr, *hc;
	size_t			 width = ncols + 2, cap, m = 0, stride = 1;
	size_t			 seen = 0, i, j, n, rcap, nr = 0, *rcount;
	double			*strided;
	int64_t			 i0;
	int			*keptcol, nk = 0;
	double			 yy = 0, rr = 0, ey = 0, er = 0;
	double			*cy, *cr;
	struct rational		*qy, *qr;

	memset(res, 0, sizeof *res);
	/* Which columns are on this region (coverage is constant on it). */
	for (j = 0; j < ncols; j++) {
		cols[j].kept = (cols[j].same_box ? lo >= cols[j].x->lo &&
		    lo < cols[j].x->hi : column_index(p, f, cols[j].x,
		    lo) >= 0) ? -1 : -2;
		cols[j].nonzero = false;
		cols[j].same_as = -1;
	}
	/*
	 * The sample: every stride-th nonzero row, and before those the
	 * first SAMPLE_PER_COLUMN rows where each column is nonzero.  A
	 * column nonzero on a few rows only (an embedding row that one
	 * micro-batch's tokens alone touch) is then never missing from the
	 * fit, which would leave a region undetermined that has an exact
	 * expression.
	 */
	rcap = SAMPLE_PER_COLUMN * ncols;
	cap = 2 * (SAMPLE_PER_COLUMN * ncols + SAMPLE_EXTRA);
	c->sample = xreallocarray(c->sample, (rcap + cap) * width,
	    sizeof(double));
	strided = c->sample + rcap * width;
	rcount = xcalloc(ncols + 1, sizeof(*rcount));
	hc = xcalloc(ncols + 1, sizeof(*hc));
	hash_begin(&hy);
	hash_begin(&hr);
	for (j = 0; j < ncols; j++)
		hash_begin(&hc[j]);
	for (i0 = lo; i0 < hi; i0 += CHUNK) {
		n = (size_t)(hi - i0 < CHUNK ? hi - i0 : CHUNK);
		load_chunk(c, p, f, cols, ncols, i0, n);
		hash_update_doubles(&hy, c->buf, n);
		hash_update_doubles(&hr, c->buf + CHUNK, n);
		for (i = 0; i < n; i++) {
			double y = c->buf[i], r = c->buf[CHUNK + i];
			bool any = y != 0 || r != 0;

			if (fabs(y - r) > res->max_abs_diff)
				res->max_abs_diff = fabs(y - r);
			if (fabs(r) > res->max_ref)
				res->max_ref = fabs(r);
			yy += y * y;
			rr += r * r;
			for (j = 0; j < ncols; j++)
				if (cols[j].kept != -2 &&
				    c->buf[(j + 2) * CHUNK + i] != 0) {
					cols[j].nonzero = true;
					any = true;
				}
			if (!any)
				continue;
			/* A column short of rows: reserved, once. */
			for (j = 0; nr < rcap && j < ncols; j++)
				if (cols[j].kept != -2 && rcount[j] <
				    SAMPLE_PER_COLUMN &&
				    c->buf[(j + 2) * CHUNK + i] != 0)
					break;
			if (nr < rcap && j < ncols) {
				sample_row(c, cols, ncols, i, y, r,
				    &c->sample[nr++ * width]);
				for (j = 0; j < ncols; j++)
					if (cols[j].kept != -2 &&
					    c->buf[(j + 2) * CHUNK + i] != 0)
						rcount[j]++;
				seen++;
				continue;
			}
			/* Keep every stride-th nonzero row; thin when full. */
			if (seen++ % stride != 0)
				continue;
			if (m == cap) {
				size_t k;

				for (k = 0; k < m / 2; k++)
					memcpy(&strided[k * width],
					    &strided[2 * k * width],
					    width * sizeof(double));
				m /= 2;
				stride *= 2;
				if ((seen - 1) % stride != 0)
					continue;
			}
			sample_row(c, cols, ncols, i, y, r,
			    &strided[m++ * width]);
		}
		for (j = 0; j < ncols; j++)
			if (cols[j].kept != -2)
				hash_update_doubles(&hc[j],
				    c->buf + (j + 2) * CHUNK, n);
	}
	res->hash = hash_end(&hy);
	res->ref_hash = hash_end(&hr);
	for (j = 0; j < ncols; j++)
		cols[j].hash = hash_end(&hc[j]);
	free(hc);
	free(rcount);
	/* The reserved rows, then the strided ones: m rows in all. */
	memmove(&c->sample[nr * width], strided, m * width * sizeof(double));
	m += nr;
	if (!c->tol.infer)
		return;

	/* Absent and identical columns; the rest are fitted. */
	keptcol = xcalloc(ncols + 1, sizeof(*keptcol));
	for (j = 0; j < ncols; j++) {
		size_t k;

		if (cols[j].kept == -2 || !cols[j].nonzero) {
			cols[j].kept = -2;
			continue;
		}
		for (k = 0; k < j; k++)
			if (cols[k].kept >= 0 && cols[k].hash == cols[j].hash)
				break;
		if (k < j) {
			cols[j].same_as = (int)k;
			cols[j].kept = -2;
			res->merged++;
			continue;
		}
		cols[j].kept = nk;
		keptcol[nk++] = (int)j + 2;
	}
	res->fitted = nk;
	res->rows = m;
	cy = xcalloc((size_t)nk + 1, sizeof(*cy));
	cr = xcalloc((size_t)nk + 1, sizeof(*cr));
	qy = xcalloc((size_t)nk + 1, sizeof(*qy));
	qr = xcalloc((size_t)nk + 1, sizeof(*qr));
	res->determined = fit_snap(c, c->sample, m, width, 0, keptcol, nk,
	    qy, cy, &res->dependent);
	res->ref_determined = fit_snap(c, c->sample, m, width, 1, keptcol, nk,
	    qr, cr, &res->dependent);
	/* The snapped expressions must reproduce every element. */
	if (res->determined || res->ref_determined) {
		for (i0 = lo; i0 < hi; i0 += CHUNK) {
			n = (size_t)(hi - i0 < CHUNK ? hi - i0 : CHUNK);
			load_chunk(c, p, f, cols, ncols, i0, n);
			for (i = 0; i < n; i++) {
				double sy = c->buf[i], sr = c->buf[CHUNK + i];

				for (j = 0; j < ncols; j++) {
					double x;
					int k = cols[j].kept;

					if (k < 0)
						continue;
					x = c->buf[(j + 2) * CHUNK + i];
					/* A side that did not snap has no q. */
					if (res->determined)
						sy -= (double)qy[k].num /
						    qy[k].den * x;
					if (res->ref_determined)
						sr -= (double)qr[k].num /
						    qr[k].den * x;
				}
				ey += sy * sy;
				er += sr * sr;
			}
		}
		if (res->determined) {
			res->residual = relative_residual(ey, yy);
			res->has_residual = true;
		}
		/*
		 * Not "> tol": values so large that their squares overflow
		 * give a NaN residual, which must not pass as a fit.
		 */
		if (res->determined && !(res->residual <= c->tol.residual))
			res->determined = false;
		if (res->ref_determined && !(relative_residual(er, rr) <=
		    c->tol.residual))
			res->ref_determined = false;
	}
	if (res->determined)
		res->value = make_lincomb(&c->a->arena, cols, ncols, qy);
	if (res->ref_determined)
		res->expected = make_lincomb(&c->a->arena, cols, ncols, qr);
	free(cy);
	free(cr);
	free(qy);
	free(qr);
	free(keptcol);
}

