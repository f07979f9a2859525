/*
 * What every report of one audit says alike (SPEC section 9): where a
 * cell sits in its parameter's grid, a finding on one line, and the
 * summary line.  The text report is text-report.c, the JSON one
 * json-report.c; both only read the audit.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L		/* open_memstream */
#endif

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/framework.h"
#include "model/lossnorm.h"
#include "report/baseline.h"
#include "report/grid.h"
#include "report/parts.h"
#include "report/report.h"
#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/lincomb.h"
#include "symbolic/meshsum.h"

void
report_cell_position(const struct audit *a, const struct param_result *p,
    const struct cell *c, int *row, int *col, int *nrows, int *ncols,
    char *rowlabel, size_t rowlabel_len)
{
	struct row_axes	 ax;
	struct coord	 co;
	int		 i, r = 0, v;

	rp_row_axes_of(a, p, &ax);
	mesh_coord_of(&a->mesh, c->rank, &co);
	for (i = 0; i < ax.naxes; i++) {
		v = rp_coord_on_axis(&ax, p, &co, ax.name[i]);
		if (v < 0 || v >= ax.size[i])
			fatalx("report_cell_position: rank %d has %s %d of %d",
			    c->rank, ax.name[i], v, ax.size[i]);
		r = r * ax.size[i] + v;
	}
	*row = r;
	*col = (p->is_expert ? co.edp : co.dp) % ax.col_div;
	if (*col < 0 || *col >= ax.ncols)
		fatalx("report_cell_position: rank %d has %s %d of %d",
		    c->rank, ax.col_name, *col, ax.ncols);
	*nrows = rp_row_count(&ax);
	*ncols = ax.ncols;
	if (rowlabel != NULL)
		rp_row_label(&ax, r, rowlabel, rowlabel_len);
}

struct grid *
report_param_grid(const struct audit *a, const struct param_result *p)
{
	struct row_axes	 ax;
	struct grid	*g;
	char		 buf[64];
	size_t		 off = 0;
	int		 i;

	rp_row_axes_of(a, p, &ax);
	for (i = 0; i < ax.naxes; i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s ",
		    ax.name[i]);
	snprintf(buf + off, sizeof(buf) - off, "\\ %s", ax.col_name);
	g = grid_new(rp_row_count(&ax), ax.ncols, buf);
	for (i = 0; i < rp_row_count(&ax); i++) {
		rp_row_label(&ax, i, buf, sizeof(buf));
		grid_row_label(g, i, buf);
	}
	for (i = 0; i < ax.ncols; i++) {
		snprintf(buf, sizeof(buf), "%s%d", ax.col_name, i);
		grid_col_label(g, i, buf);
	}
	return g;
}

char *
report_finding_line(const struct finding *f)
{
	char	*buf = NULL;
	size_t	 len;
	FILE	*fp = rp_memstream(&buf, &len);

	if (f->accepted) {
		fputs("accepted: ", fp);
		rp_put_finding_subject(fp, f);
		rp_put_acceptance(fp, f);
		return rp_memstream_close(fp, &buf);
	}
	rp_put_finding(fp, f);
	if (f->fix != NULL)
		fprintf(fp, " Fix: %s", f->fix);
	if (f->reason != NULL)
		fprintf(fp, " Expired on %s: %s accepted it (%s).", f->expires,
		    f->baseline_at, f->reason);
	return rp_memstream_close(fp, &buf);
}

static int	grad_norm_wrong_ranks(const struct grad_norm_result *, int);

/*
 * The summary line, s, followed by what the baseline accepted of the
 * findings, if anything: "; all 2 findings accepted by the baseline".
 */
static char *
summary_accepted(const struct audit *a, char *s)
{
	size_t	 n = audit_accepted_findings(a);
	char	*t;

	if (n == 0)
		return s;
	if (n == a->nfindings && n == 1)
		xasprintf(&t, "%s; its finding accepted by the baseline", s);
	else if (n == a->nfindings)
		xasprintf(&t, "%s; all %zu findings accepted by the baseline",
		    s, n);
	else
		xasprintf(&t, "%s; %zu of %zu findings accepted by the "
		    "baseline", s, n, a->nfindings);
	free(s);
	return t;
}

/*
 * "N of M" takes the noun of M: "1 of 1 parameter wrong on 1 of 4
 * ranks".  A single correct parameter is not "all 1".
 */
char *
report_summary(const struct audit *a)
{
	char	*s;
	int	 wrong = audit_wrong_params(a), world = a->mesh.world;
	int	 split = 0;	/* wrong only as replicas that disagree */
	size_t	 i;

	for (i = 0; i < a->nparams; i++)
		if (!a->params[i].consistent && a->params[i].correct)
			split++;
	if (wrong > 0 && split == wrong)
		/*
		 * compare against a configuration that says so: every rank
		 * holds what it should, and "wrong on 0 ranks" read as if
		 * nothing were.
		 */
		xasprintf(&s, "%d of %zu parameter%s inconsistent on %d "
		    "rank%s: replicas disagree, each rank as expected",
		    wrong, a->nparams, rp_plural((int64_t)a->nparams), world,
		    rp_plural(world));
	else if (wrong == 0 && a->nparams == 1)
		xasprintf(&s, "1 parameter consistent and correct on %d rank%s",
		    world, rp_plural(world));
	else if (wrong == 0)
		xasprintf(&s, "all %zu parameters consistent and correct on "
		    "%d rank%s", a->nparams, world, rp_plural(world));
	else
		xasprintf(&s, "%d of %zu parameter%s wrong on %d of %d rank%s",
		    wrong, a->nparams, rp_plural((int64_t)a->nparams),
		    audit_wrong_ranks(a), world, rp_plural(world));
	if (a->grad_norm.present && !a->grad_norm.consistent) {
		char *t;

		xasprintf(&t, "%s; the ranks clip by different gradient norms",
		    s);
		free(s);
		s = t;
	} else if (a->grad_norm.present && a->grad_norm.miscounted) {
		char *t;

		xasprintf(&t, "%s; gradient norm wrong on %d of %d rank%s", s,
		    grad_norm_wrong_ranks(&a->grad_norm, world), world,
		    rp_plural(world));
		free(s);
		s = t;
	}
	if (a->nstale_rows > 0) {
		char *t;

		xasprintf(&t, "%s; rows of %s never updated on %zu of %d "
		    "rank%s", s, a->stale_rows[0].param, a->nstale_rows, world,
		    rp_plural(world));
		free(s);
		s = t;
	}
	return summary_accepted(a, s);
}

/* Ranks whose norm is wrong: in a wrong class, or never clipping. */
static int
grad_norm_wrong_ranks(const struct grad_norm_result *g, int world)
{
	int	r, n = 0;

	for (r = 0; r < world; r++)
		if (g->class_of[r] < 0 || !g->classes[g->class_of[r]].correct)
			n++;
	return n;
}
