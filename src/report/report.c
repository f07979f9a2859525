/*
 * The text and JSON reports of one audit (SPEC section 9), and the grid
 * that lays out one parameter's ranks like the pp x dp matrices of the
 * Megatron-LM #844 report: a user who filed that report should recognise
 * their own tables in ours.
 *
 * Both writers only read the audit.  Expressions are printed with
 * lc_format() into a scratch arena that lives for one parameter, so a
 * report of a huge mesh does not hold every expression string at once.
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
#include "report/report.h"
#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/lincomb.h"
#include "symbolic/meshsum.h"


/* Longer expressions are cut in text mode (JSON always has them whole). */
#define EXPR_MAX		100
/* Wrong regions (groups of ranks) listed per parameter without -v. */
#define REGION_LINES_MAX	6
/* Parameters shown with their table without -v; the others by title. */
#define TABLES_MAX		4
/* Chunks whose loss factor the header lists before "and N more". */
#define LOSS_FACTORS_MAX	8
/* Parameter names listed in one finding line before "and N more". */
#define FINDING_PARAMS_MAX	3

/*
 * The grid.
 */

struct grid {
	int	  nrows, ncols;
	char	 *corner;
	char	**row_labels;		/* nrows */
	char	**col_labels;		/* ncols */
	char	**cells;		/* nrows * ncols, NULL = empty */
};

struct grid *
grid_new(int nrows, int ncols, const char *corner)
{
	struct grid	*g;

	if (nrows < 0 || ncols < 0)
		fatalx("grid_new: %d x %d", nrows, ncols);
	g = xcalloc(1, sizeof(*g));
	g->nrows = nrows;
	g->ncols = ncols;
	g->corner = xstrdup(corner != NULL ? corner : "");
	g->row_labels = xcalloc((size_t)nrows, sizeof(*g->row_labels));
	g->col_labels = xcalloc((size_t)ncols, sizeof(*g->col_labels));
	g->cells = xcalloc((size_t)nrows * (size_t)ncols, sizeof(*g->cells));
	return g;
}

static void
replace_string(char **slot, const char *text)
{
	free(*slot);
	*slot = (text != NULL && *text != '\0') ? xstrdup(text) : NULL;
}

void
grid_row_label(struct grid *g, int row, const char *text)
{
	if (row < 0 || row >= g->nrows)
		fatalx("grid_row_label: row %d of %d", row, g->nrows);
	replace_string(&g->row_labels[row], text);
}

void
grid_col_label(struct grid *g, int col, const char *text)
{
	if (col < 0 || col >= g->ncols)
		fatalx("grid_col_label: column %d of %d", col, g->ncols);
	replace_string(&g->col_labels[col], text);
}

void
grid_set(struct grid *g, int row, int col, const char *text)
{
	if (row < 0 || row >= g->nrows || col < 0 || col >= g->ncols)
		fatalx("grid_set: cell %d,%d of %d x %d", row, col, g->nrows,
		    g->ncols);
	replace_string(&g->cells[(size_t)row * g->ncols + col], text);
}

static bool
row_is_empty(const struct grid *g, int row)
{
	int	 col;

	for (col = 0; col < g->ncols; col++)
		if (g->cells[(size_t)row * g->ncols + col] != NULL)
			return false;
	return true;
}

void
grid_drop_empty_rows(struct grid *g)
{
	int	 row, kept = 0, col;

	for (row = 0; row < g->nrows; row++) {
		if (row_is_empty(g, row)) {
			free(g->row_labels[row]);
			continue;
		}
		g->row_labels[kept] = g->row_labels[row];
		for (col = 0; col < g->ncols; col++)
			g->cells[(size_t)kept * g->ncols + col] =
			    g->cells[(size_t)row * g->ncols + col];
		kept++;
	}
	g->nrows = kept;
}

void
grid_free(struct grid *g)
{
	size_t	 i, n;

	if (g == NULL)
		return;
	n = (size_t)g->nrows * (size_t)g->ncols;
	for (i = 0; i < n; i++)
		free(g->cells[i]);
	for (i = 0; i < (size_t)g->nrows; i++)
		free(g->row_labels[i]);
	for (i = 0; i < (size_t)g->ncols; i++)
		free(g->col_labels[i]);
	free(g->cells);
	free(g->row_labels);
	free(g->col_labels);
	free(g->corner);
	free(g);
}

/*
 * The width a string takes on a terminal: ANSI escape sequences (colours)
 * take none, and a UTF-8 character takes one column.
 */
static size_t
display_width(const char *s)
{
	const unsigned char	*p = (const unsigned char *)s;
	size_t			 w = 0;

	if (s == NULL)
		return 0;
	while (*p != '\0') {
		if (p[0] == 0x1b && p[1] == '[') {
			p += 2;
			while (*p != '\0' && (*p < 0x40 || *p > 0x7e))
				p++;
			if (*p != '\0')
				p++;
			continue;
		}
		if ((*p & 0xc0) != 0x80)
			w++;
		p++;
	}
	return w;
}

/*
 * Print one line of texts in columns of the given widths, two spaces
 * apart.  Padding is only written before a later non-empty text, so lines
 * never end in blanks.
 */
static void
print_columns(FILE *fp, const char *const *texts, const size_t *widths,
    int n)
{
	size_t	 pending = 0, i;
	int	 col;

	for (col = 0; col < n; col++) {
		if (texts[col] != NULL && *texts[col] != '\0') {
			for (i = 0; i < pending; i++)
				putc(' ', fp);
			fputs(texts[col], fp);
			pending = widths[col] - display_width(texts[col]);
		} else
			pending += widths[col];
		pending += 2;
	}
	putc('\n', fp);
}

/* Column 0 holds the row labels; column c+1 holds grid column c. */
static size_t *
grid_widths(const struct grid *g)
{
	size_t	*w;
	size_t	 x;
	int	 row, col;

	w = xcalloc((size_t)g->ncols + 1, sizeof(*w));
	w[0] = display_width(g->corner);
	for (row = 0; row < g->nrows; row++)
		if ((x = display_width(g->row_labels[row])) > w[0])
			w[0] = x;
	for (col = 0; col < g->ncols; col++) {
		w[col + 1] = display_width(g->col_labels[col]);
		for (row = 0; row < g->nrows; row++) {
			x = display_width(g->cells[(size_t)row * g->ncols +
			    col]);
			if (x > w[col + 1])
				w[col + 1] = x;
		}
	}
	return w;
}

static void
print_rule(FILE *fp, const size_t *widths, int n)
{
	size_t	 i;
	int	 col;

	for (col = 0; col < n; col++) {
		if (col > 0)
			fputs("  ", fp);
		for (i = 0; i < widths[col]; i++)
			putc('-', fp);
	}
	putc('\n', fp);
}

void
grid_print(FILE *fp, const struct grid *g)
{
	const char	**line;
	size_t		 *widths;
	int		  row, col, n = g->ncols + 1;

	widths = grid_widths(g);
	line = xcalloc((size_t)n, sizeof(*line));
	line[0] = g->corner;
	for (col = 0; col < g->ncols; col++)
		line[col + 1] = g->col_labels[col];
	print_columns(fp, line, widths, n);
	print_rule(fp, widths, n);
	for (row = 0; row < g->nrows; row++) {
		line[0] = g->row_labels[row];
		for (col = 0; col < g->ncols; col++)
			line[col + 1] = g->cells[(size_t)row * g->ncols + col];
		print_columns(fp, line, widths, n);
	}
	free(line);
	free(widths);
}

/*
 * The layout of a parameter's table (see report.h for the rule).  Rows are
 * a mixed-radix number over up to three axes, the first one always pp.
 */

struct row_axes {
	int		 naxes;
	const char	*name[4];
	int		 size[4];
	const char	*col_name;
	int		 ncols;
	int		 col_div;	/* column: the dp (edp) index % it */
};

static void
add_axis(struct row_axes *ax, const char *name, int size, bool always)
{
	if (!always && size <= 1)
		return;
	ax->name[ax->naxes] = name;
	ax->size[ax->naxes] = size > 0 ? size : 1;
	ax->naxes++;
}

static void
row_axes_of(const struct audit *a, const struct param_result *p,
    struct row_axes *ax)
{
	memset(ax, 0, sizeof(*ax));
	add_axis(ax, "pp", a->mesh.pp, true);
	if (p->is_expert) {
		add_axis(ax, "ep", a->mesh.ep, false);
		add_axis(ax, "etp", a->mesh.etp, false);
		ax->col_name = "edp";
		ax->ncols = a->mesh.edp;
	} else {
		add_axis(ax, "tp", a->mesh.tp, false);
		ax->col_name = "dp";
		ax->ncols = a->mesh.dp;
	}
	/*
	 * HSDP: the replicas are rows and the columns the shard group
	 * (dp_shard*cp, or efsdp for experts), in torchtitan's names.
	 */
	ax->col_div = ax->ncols;
	if (a->mesh.dp_replicate > 1 && ax->ncols >= a->mesh.dp_replicate) {
		add_axis(ax, "dp_replicate", a->mesh.dp_replicate, true);
		ax->ncols /= a->mesh.dp_replicate;
		ax->col_div = ax->ncols;
		ax->col_name = p->is_expert ? "efsdp" : "dp_shard";
	}
	if (ax->ncols < 1)
		ax->ncols = 1;
}

static int
coord_on_axis(const struct row_axes *ax, const struct param_result *p,
    const struct coord *c, const char *name)
{
	if (strcmp(name, "dp_replicate") == 0)
		return (p->is_expert ? c->edp : c->dp) / ax->col_div;
	if (strcmp(name, "pp") == 0)
		return c->pp;
	if (strcmp(name, "tp") == 0)
		return c->tp;
	if (strcmp(name, "ep") == 0)
		return c->ep;
	return c->etp;
}

static int
row_count(const struct row_axes *ax)
{
	int	 i, n = 1;

	for (i = 0; i < ax->naxes; i++)
		n *= ax->size[i];
	return n;
}

/* "pp1 tp0" for a row index: the digits of the mixed-radix number. */
static void
row_label(const struct row_axes *ax, int row, char *buf, size_t len)
{
	int	 digit[4], i;
	size_t	 off = 0;

	for (i = ax->naxes - 1; i >= 0; i--) {
		digit[i] = row % ax->size[i];
		row /= ax->size[i];
	}
	if (len > 0)
		buf[0] = '\0';
	for (i = 0; i < ax->naxes && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s%d",
		    i > 0 ? " " : "", ax->name[i], digit[i]);
}

void
report_cell_position(const struct audit *a, const struct param_result *p,
    const struct cell *c, int *row, int *col, int *nrows, int *ncols,
    char *rowlabel, size_t rowlabel_len)
{
	struct row_axes	 ax;
	int		 i, r = 0, v;

	row_axes_of(a, p, &ax);
	for (i = 0; i < ax.naxes; i++) {
		v = coord_on_axis(&ax, p, &c->coord, ax.name[i]);
		if (v < 0 || v >= ax.size[i])
			fatalx("report_cell_position: rank %d has %s %d of %d",
			    c->rank, ax.name[i], v, ax.size[i]);
		r = r * ax.size[i] + v;
	}
	*row = r;
	*col = (p->is_expert ? c->coord.edp : c->coord.dp) % ax.col_div;
	if (*col < 0 || *col >= ax.ncols)
		fatalx("report_cell_position: rank %d has %s %d of %d",
		    c->rank, ax.col_name, *col, ax.ncols);
	*nrows = row_count(&ax);
	*ncols = ax.ncols;
	if (rowlabel != NULL)
		row_label(&ax, r, rowlabel, rowlabel_len);
}

struct grid *
report_param_grid(const struct audit *a, const struct param_result *p)
{
	struct row_axes	 ax;
	struct grid	*g;
	char		 buf[64];
	size_t		 off = 0;
	int		 i;

	row_axes_of(a, p, &ax);
	for (i = 0; i < ax.naxes; i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s ",
		    ax.name[i]);
	snprintf(buf + off, sizeof(buf) - off, "\\ %s", ax.col_name);
	g = grid_new(row_count(&ax), ax.ncols, buf);
	for (i = 0; i < g->nrows; i++) {
		row_label(&ax, i, buf, sizeof(buf));
		grid_row_label(g, i, buf);
	}
	for (i = 0; i < g->ncols; i++) {
		snprintf(buf, sizeof(buf), "%s%d", ax.col_name, i);
		grid_col_label(g, i, buf);
	}
	return g;
}

/*
 * Pieces shared by the text report and the JUnit failure text.
 */

static bool
cell_wrong(const struct cell *c)
{
	return c->used && !c->ok;
}

/*
 * Ranks as a short list: runs of three or more consecutive ranks become
 * "a-b", so a stage of 512 wrong ranks takes one line ("ranks 0-511").
 */
static void
put_rank_list(FILE *fp, const int *ranks, size_t n)
{
	size_t	 i, j;

	fputs(n == 1 ? "rank " : "ranks ", fp);
	for (i = 0; i < n; i = j + 1) {
		for (j = i; j + 1 < n && ranks[j + 1] == ranks[j] + 1; j++)
			continue;
		if (i > 0)
			fputs(", ", fp);
		if (j - i >= 2)
			fprintf(fp, "%d-%d", ranks[i], ranks[j]);
		else if (j > i)
			fprintf(fp, "%d, %d", ranks[i], ranks[j]);
		else
			fprintf(fp, "%d", ranks[i]);
	}
}

/* "wrong-order: embedding.weight (ranks 1, 2)" */
static void
put_finding_subject(FILE *fp, const struct finding *f)
{
	size_t	 i, n = f->nparams;

	fprintf(fp, "%s: ", finding_kind_name(f->kind));
	if (n == 0)
		fputs(f->param != NULL ? f->param : "(no parameter)", fp);
	for (i = 0; i < n && i < FINDING_PARAMS_MAX; i++)
		fprintf(fp, "%s%s", i > 0 ? ", " : "", f->params[i]);
	if (n > FINDING_PARAMS_MAX)
		fprintf(fp, " and %zu more", n - FINDING_PARAMS_MAX);
	if (f->nranks > 0) {
		fputs(" (", fp);
		put_rank_list(fp, f->ranks, f->nranks);
		putc(')', fp);
	}
}

/* The baseline entry that accepted it: "(accepted.yaml:3:3, until ...)". */
static void
put_acceptance(FILE *fp, const struct finding *f)
{
	fprintf(fp, ": %s (%s", f->reason, f->baseline_at);
	if (f->expires != NULL)
		fprintf(fp, ", expires %s", f->expires);
	putc(')', fp);
}

static void
put_finding(FILE *fp, const struct finding *f)
{
	put_finding_subject(fp, f);
	fprintf(fp, ": %s", f->message != NULL ? f->message : "");
	if (f->op != NULL && f->dim != NULL)
		fprintf(fp, " [op: %s, dim: %s]", f->op, f->dim);
	else if (f->op != NULL)
		fprintf(fp, " [op: %s]", f->op);
	else if (f->dim != NULL)
		fprintf(fp, " [dim: %s]", f->dim);
	if (f->effect.kind != EFFECT_NONE) {
		char effect[128];

		effect_format(&f->effect, effect, sizeof effect);
		fprintf(fp, " (effect: %s)", effect);
	}
}

static FILE *
memstream(char **buf, size_t *len)
{
	FILE	*fp;

	if ((fp = open_memstream(buf, len)) == NULL)
		fatal("open_memstream");
	return fp;
}

static char *
memstream_close(FILE *fp, char **buf)
{
	if (fclose(fp) != 0)
		fatal("memory stream");
	return *buf;
}

char *
report_finding_line(const struct finding *f)
{
	char	*buf = NULL;
	size_t	 len;
	FILE	*fp = memstream(&buf, &len);

	if (f->accepted) {
		fputs("accepted: ", fp);
		put_finding_subject(fp, f);
		put_acceptance(fp, f);
		return memstream_close(fp, &buf);
	}
	put_finding(fp, f);
	if (f->fix != NULL)
		fprintf(fp, " Fix: %s", f->fix);
	if (f->reason != NULL)
		fprintf(fp, " Expired on %s: %s accepted it (%s).", f->expires,
		    f->baseline_at, f->reason);
	return memstream_close(fp, &buf);
}

/* The plural of the report's nouns: "1 rank", "2 ranks", "0 ranks". */
static const char *
plural(int64_t n)
{
	return n == 1 ? "" : "s";
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

	if (wrong == 0 && a->nparams == 1)
		xasprintf(&s, "1 parameter consistent and correct on %d rank%s",
		    world, plural(world));
	else if (wrong == 0)
		xasprintf(&s, "all %zu parameters consistent and correct on "
		    "%d rank%s", a->nparams, world, plural(world));
	else
		xasprintf(&s, "%d of %zu parameter%s wrong on %d of %d rank%s",
		    wrong, a->nparams, plural((int64_t)a->nparams),
		    audit_wrong_ranks(a), world, plural(world));
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
		    plural(world));
		free(s);
		s = t;
	}
	return summary_accepted(a, s);
}

/*
 * The text report.
 */

/*
 * Grouped cells (the default): one object per set of ranks holding the
 * same thing, found with a hash table over everything a cell object says
 * but its rank and coordinates.  A 4,096-rank report listed 44,880 cells
 * of up to 4,096 atoms each, 415 MB (issue 10); grouped, a value shared
 * by a dp group is written once, by mesh groups (meshsum.h), and terms
 * relative to the rank ("self") let the ranks whose values differ only by
 * their own atom, such as the unused shards of a distributed optimizer,
 * share one object too.
 */

static uint64_t
mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdULL;
}

/* The pieces of each lincomb, by pointer: lincombs are shared. */
struct piece_memo {
	const struct lincomb	*x;
	struct ms_piece		*p;
	size_t			 n;
};

struct piece_cache {
	struct piece_memo	**slot;	/* memos stay put when it grows */
	size_t			  cap, used;
};

static size_t
memo_home(const struct piece_cache *pc, const struct lincomb *x)
{
	return (size_t)(mix(0, (uintptr_t)x) & (pc->cap - 1));
}

static const struct piece_memo *
pieces_of(struct piece_cache *pc, const struct atom_space *sp,
    const struct lincomb *x)
{
	struct piece_memo	**old, *pm;
	size_t			  k, i, oldcap;

	if (x == NULL)
		return NULL;
	if (pc->used * 2 >= pc->cap) {
		old = pc->slot;
		oldcap = pc->cap;
		pc->cap = oldcap ? 2 * oldcap : 64;
		pc->slot = xcalloc(pc->cap, sizeof *pc->slot);
		for (i = 0; i < oldcap; i++)
			if (old[i] != NULL) {
				for (k = memo_home(pc, old[i]->x);
				    pc->slot[k] != NULL;
				    k = (k + 1) & (pc->cap - 1))
					continue;
				pc->slot[k] = old[i];
			}
		free(old);
	}
	for (k = memo_home(pc, x); pc->slot[k] != NULL;
	    k = (k + 1) & (pc->cap - 1))
		if (pc->slot[k]->x == x)
			return pc->slot[k];
	pm = pc->slot[k] = xcalloc(1, sizeof *pm);
	pm->x = x;
	pm->p = ms_pieces(sp, x, &pm->n);
	pc->used++;
	return pm;
}

static void
piece_cache_free(struct piece_cache *pc)
{
	size_t	 i;

	for (i = 0; i < pc->cap; i++)
		if (pc->slot[i] != NULL) {
			free(pc->slot[i]->p);
			free(pc->slot[i]);
		}
	free(pc->slot);
}

/*
 * A cell with its pieces, as its group compares it: relative to rank
 * self ("self" terms), or as they are when self is -1.
 */
struct cell_key {
	const struct cell		*c;
	const struct piece_memo		*v, *e;
	int				 self;
};

static uint64_t
relative_hash(const struct atom_space *sp, const struct piece_memo *pm,
    int rank)
{
	const struct ms_piece	*p;
	uint64_t		 h = 0x5bd1e995;
	size_t			 i;

	if (pm == NULL)
		return 1;
	for (i = 0; i < pm->n; i++) {
		p = &pm->p[i];
		h = mix(h, (uint64_t)p->coef.num);
		h = mix(h, (uint64_t)p->coef.den);
		h = mix(h, (uint64_t)p->weighted << 32 |
		    (uint64_t)p->varied << 16 | p->fixed);
		h = mix(h, (uint64_t)p->source << 1 | p->held);
		h = mix(h, ms_piece_is_self(sp, p, rank) ?
		    UINT64_MAX - (uint64_t)atom_micro_batch(sp, p->atom) :
		    p->atom);
	}
	return mix(h, pm->n);
}

static bool
same_relative(const struct atom_space *sp, const struct piece_memo *x, int rx,
    const struct piece_memo *y, int ry)
{
	const struct ms_piece	*p, *q;
	bool			 selfp, selfq;
	size_t			 i;

	if (x == NULL || y == NULL)
		return x == y;
	if (x == y && rx == ry)
		return true;
	if (x->n != y->n)
		return false;
	for (i = 0; i < x->n; i++) {
		p = &x->p[i];
		q = &y->p[i];
		if (!q_equal(p->coef, q->coef) || p->varied != q->varied ||
		    p->fixed != q->fixed || p->n != q->n ||
		    p->weighted != q->weighted || p->source != q->source ||
		    p->held != q->held)
			return false;
		selfp = ms_piece_is_self(sp, p, rx);
		selfq = ms_piece_is_self(sp, q, ry);
		if (selfp != selfq || (!selfp && p->atom != q->atom))
			return false;
		/* Each rank's own atom of the same micro-batch (and class). */
		if (selfp && atom_micro_batch(sp, p->atom) !=
		    atom_micro_batch(sp, q->atom))
			return false;
	}
	return true;
}

static bool
same_bits(double x, double y)
{
	return memcmp(&x, &y, sizeof x) == 0;
}

/* Two cells print the same object, rank and coordinates aside. */
static bool
same_cell(const struct atom_space *sp, const struct cell_key *kx,
    const struct cell_key *ky)
{
	const struct cell	*x = kx->c, *y = ky->c;

	return x->lo == y->lo && x->hi == y->hi && x->used == y->used &&
	    (!x->used || x->ok == y->ok) && x->has_hash == y->has_hash &&
	    (!x->has_hash || (x->hash == y->hash &&
	    x->reference_hash == y->reference_hash &&
	    x->numeric_ok == y->numeric_ok &&
	    same_bits(x->max_ulps, y->max_ulps) &&
	    same_bits(x->max_rel_error, y->max_rel_error))) &&
	    (kx->self >= 0) == (ky->self >= 0) &&
	    same_relative(sp, kx->v, kx->self, ky->v, ky->self) &&
	    same_relative(sp, kx->e, kx->self, ky->e, ky->self);
}

struct cell_group {
	struct cell_key	 key;		/* of its first cell */
	int		*ranks;		/* ascending */
	size_t		 nranks;
};

static uint64_t
cell_hash(const struct atom_space *sp, const struct cell_key *key)
{
	const struct cell	*c = key->c;
	uint64_t		 h;

	h = mix(relative_hash(sp, key->v, key->self),
	    relative_hash(sp, key->e, key->self));
	h = mix(mix(h, (uint64_t)c->lo), (uint64_t)c->hi);
	h = mix(h, (uint64_t)c->used << 1 | (uint64_t)(c->used && c->ok));
	if (c->has_hash)
		h = mix(h, c->hash);
	return h;
}

/*
 * Add key to the groups g[0..*ng) through the hash table: to the group
 * of an equal key, or as a new group; return its index.
 */
static size_t
group_add(const struct atom_space *sp, struct cell_group **g, size_t *ng,
    size_t *table, size_t cap, const struct cell_key *key)
{
	size_t	 k;

	for (k = cell_hash(sp, key) & (cap - 1); table[k] != SIZE_MAX;
	    k = (k + 1) & (cap - 1))
		if (same_cell(sp, &(*g)[table[k]].key, key))
			break;
	if (table[k] == SIZE_MAX) {
		*g = xreallocarray(*g, *ng + 1, sizeof **g);
		(*g)[*ng].key = *key;
		(*g)[*ng].ranks = NULL;
		(*g)[*ng].nranks = 0;
		table[k] = (*ng)++;
	}
	(*g)[table[k]].ranks = xreallocarray((*g)[table[k]].ranks,
	    (*g)[table[k]].nranks + 1, sizeof(int));
	(*g)[table[k]].ranks[(*g)[table[k]].nranks++] = key->c->rank;
	return table[k];
}

static int
cmp_int(const void *a, const void *b)
{
	int	 x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Whether every rank of g reads its value alike relative to itself. */
static bool
uniform(const struct atom_space *sp, const struct cell_group *g)
{
	size_t	 i;
	int	 r0 = g->ranks[0];

	for (i = 1; i < g->nranks; i++)
		if (!same_relative(sp, g->key.v, r0, g->key.v, g->ranks[i]) ||
		    !same_relative(sp, g->key.e, r0, g->key.e, g->ranks[i]))
			return false;
	return true;
}

/*
 * The groups of p's cells (only the wrong ones if wrong_only) in order of
 * their first cell; *n: how many.  First the ranks holding the very same
 * value; then those groups whose ranks all read it alike relative to
 * themselves are merged by that reading, "self": the average over each
 * rank's own dp group is one group for the whole mesh, g0/64 on rank 0
 * and g1/64 on rank 1 share one, while (g0+...+g62)/64 on 64 ranks stays
 * one group written by its atoms (g0 is rank 0's own, not rank 1's).
 */
static struct cell_group *
group_cells(const struct atom_space *sp, const struct param_result *p,
    struct piece_cache *pc, bool wrong_only, size_t *n)
{
	struct cell_group	*g1 = NULL, *g = NULL;
	struct cell_key		 key;
	size_t			*table, cap = 16, i, j, k, ng1 = 0, ng = 0;

	while (cap < 2 * p->ncells)
		cap *= 2;
	table = xreallocarray(NULL, cap, sizeof *table);
	for (i = 0; i < cap; i++)
		table[i] = SIZE_MAX;
	for (i = 0; i < p->ncells; i++) {
		key.c = &p->cells[i];
		if (wrong_only && !cell_wrong(key.c))
			continue;
		key.v = pieces_of(pc, sp, key.c->value);
		key.e = pieces_of(pc, sp, key.c->expected);
		key.self = -1;
		group_add(sp, &g1, &ng1, table, cap, &key);
	}
	for (i = 0; i < cap; i++)
		table[i] = SIZE_MAX;
	for (i = 0; i < ng1; i++) {
		key = g1[i].key;
		if (!uniform(sp, &g1[i])) {
			g = xreallocarray(g, ng + 1, sizeof *g);
			g[ng++] = g1[i];
			continue;
		}
		key.self = key.c->rank;
		k = group_add(sp, &g, &ng, table, cap, &key);
		g[k].ranks = xreallocarray(g[k].ranks, g[k].nranks +
		    g1[i].nranks - 1, sizeof(int));
		for (j = 1; j < g1[i].nranks; j++)
			g[k].ranks[g[k].nranks++] = g1[i].ranks[j];
		free(g1[i].ranks);
	}
	for (i = 0; i < ng; i++)
		qsort(g[i].ranks, g[i].nranks, sizeof(int), cmp_int);
	free(g1);
	free(table);
	*n = ng;
	return g;
}

struct text {
	FILE				*fp;
	const struct audit		*audit;
	const struct report_options	*opt;
	struct arena			 scratch; /* one param's strings */
};

/*
 * What "wsum" weights each atom by: the chunks' loss factors, the first
 * few, then how many more (explain lists them all).
 */
static void
put_loss_factors(FILE *fp, const struct atom_space *sp)
{
	const struct mesh *m = &sp->mesh;
	char	 q[48];
	int	 c, n = atom_space_chunks(sp);

	/* By the tables' dp column, which counts the cp ranks too. */
	fputs("loss factors (wsum weights):", fp);
	for (c = 0; c < n && c < LOSS_FACTORS_MAX; c++) {
		q_format(atom_chunk_factor(sp, c), q, sizeof q);
		fprintf(fp, "%s m%d dp%d %s", c > 0 ? "," : "", c / m->dp,
		    c % m->dp, q);
	}
	if (n > LOSS_FACTORS_MAX)
		fprintf(fp, " and %d more (gradaudit explain lists every "
		    "chunk)", n - LOSS_FACTORS_MAX);
	putc('\n', fp);
}

static const char *
paint(const struct text *t, const char *ansi)
{
	return t->opt->color ? ansi : "";
}

/*
 * A file or config name as the terminal should show it: a file named
 * "\033[2J.yaml" (and the default name taken from it) cleared the screen
 * of whoever read the report.
 */
static void
put_visible(FILE *fp, const char *s)
{
	char	*v;

	if (s == NULL) {
		fputs("-", fp);
		return;
	}
	v = text_visible(s);
	fputs(v, fp);
	free(v);
}

/* Lines of a note, each made visible. */
static void
put_note(FILE *fp, const char *note)
{
	const char	*nl;
	char		*line;

	for (; *note != '\0'; note = *nl ? nl + 1 : nl) {
		nl = strchr(note, '\n');
		if (nl == NULL)
			nl = note + strlen(note);
		line = xmalloc((size_t)(nl - note) + 1);
		memcpy(line, note, (size_t)(nl - note));
		line[nl - note] = '\0';
		put_visible(fp, line);
		putc('\n', fp);
		free(line);
	}
}

/*
 * "framework: megatron-core@0.5.0, profile core_v0.4.0 (read at ...)",
 * and the keys the config writes over the profile's.
 */
void
report_framework(FILE *fp, const struct config *c)
{
	const struct fw_profile	*p = c->profile;
	struct keyset		 over;
	char			 window[160];
	bool			 any = false;
	int			 k;

	if (p == NULL) {
		fputs("framework: reference (the ideal synchronization)\n", fp);
		return;
	}
	fprintf(fp, "framework: %s, profile %s (read at %s)\n", c->framework,
	    p->label, p->read_at);
	/* Which code of main a window audits (issue 28). */
	if (fw_profile_window(p, window, sizeof(window)))
		fprintf(fp, "window of main: %s\n", window);
	over = fw_profile_overridden(c);
	for (k = 0; k < KEY__COUNT; k++)
		if (keyset_has(&over, k)) {
			fprintf(fp, "%s%s", any ? ", " : "overridden by the "
			    "config: ", cfg_key_path(k));
			any = true;
		}
	if (any)
		putc('\n', fp);
}

static void
print_header(struct text *t)
{
	const struct audit	*a = t->audit;
	const struct mesh	*m = &a->mesh;
	char			 meshline[128];

	if (a->config != NULL) {
		fputs("config: ", t->fp);
		put_visible(t->fp, a->config->file);
		fputs(" (", t->fp);
		put_visible(t->fp, a->config->name);
		fputs(")\n", t->fp);
	}
	if (a->trace != NULL) {
		fputs("trace: ", t->fp);
		put_visible(t->fp, a->trace->dir);
		fputs(" (step ", t->fp);
		put_visible(t->fp, a->trace->step);
		fprintf(t->fp, ", %d rank%s, %d micro-batch%s, %s)\n",
		    a->procs, a->procs == 1 ? "" : "s",
		    a->trace->micro_batches, a->trace->micro_batches == 1 ?
		    "" : "es", a->trace->dtype);
		fputs("against: ", t->fp);
		put_visible(t->fp, a->trace->against);
		putc('\n', t->fp);
		if (a->trace->unmatched != NULL) {
			fputs("not in the config's model (not compared): ",
			    t->fp);
			put_visible(t->fp, a->trace->unmatched);
			putc('\n', t->fp);
		}
	}
	mesh_format(m, meshline, sizeof meshline);
	fprintf(t->fp, "mesh: %s\n", meshline);
	if (a->config != NULL && a->config->mesh.vpp > 1)
		fprintf(t->fp, "virtual pipeline: %d model chunks a stage\n",
		    a->config->mesh.vpp);
	if (a->config != NULL)
		report_framework(t->fp, a->config);
	if (a->config != NULL && lossnorm_objective_note(
	    a->config->loss.objective) != NULL) {
		char word[64];

		cfg_key_value(a->config, KEY_OBJECTIVE, word, sizeof word);
		fprintf(t->fp, "objective: %s, %s (loss.objective)\n", word,
		    lossnorm_objective_note(a->config->loss.objective));
	}
	if (atom_space_weighted(&a->atoms))
		put_loss_factors(t->fp, &a->atoms);
	if (a->trace != NULL && a->config == NULL && a->numeric)
		fprintf(t->fp, "measured: values within %g of the reference's "
		    "largest in each region; expressions inferred by least "
		    "squares over the recorded contributions\n",
		    a->trace->tolerance);
	else if (a->trace != NULL)
		fputs("measured: expressions inferred by least squares over "
		    "the recorded contributions, against the config's\n",
		    t->fp);
	else if (!a->numeric) {
		fputs("arithmetic: symbolic only\n", t->fp);
		if (a->numeric_skipped != NULL)
			fprintf(t->fp, "numeric: skipped (%s)\n",
			    a->numeric_skipped);
	} else
		fprintf(t->fp, "arithmetic: %s, %d process%s\n",
		    a->arith == ARITH_EXACT ? "exact GF(2^61-1)" :
		    arith_name(a->arith), a->procs, a->procs == 1 ? "" : "es");
	putc('\n', t->fp);
}

/* The distinct wrong ranks of a parameter (cells are sorted by rank). */
static int *
param_wrong_ranks(const struct param_result *p, size_t *n)
{
	int	*ranks = NULL;
	size_t	 i;

	*n = 0;
	for (i = 0; i < p->ncells; i++) {
		if (!cell_wrong(&p->cells[i]))
			continue;
		if (*n > 0 && ranks[*n - 1] == p->cells[i].rank)
			continue;
		ranks = xreallocarray(ranks, *n + 1, sizeof(*ranks));
		ranks[(*n)++] = p->cells[i].rank;
	}
	return ranks;
}

static void
print_title(struct text *t, const struct param_result *p)
{
	int	*ranks;
	size_t	 n;

	fprintf(t->fp, "%s%s%s", paint(t, ANSI_BOLD), p->name,
	    paint(t, ANSI_RESET));
	if (p->has_chunk)
		fprintf(t->fp, " (chunk %d)", p->chunk);
	if (p->tied_with != NULL)
		fprintf(t->fp, " (tied with %s", p->tied_with);
	if (p->tied_with != NULL && p->has_chunk)
		fprintf(t->fp, ", chunk %d", p->tied_chunk);
	if (p->tied_with != NULL)
		putc(')', t->fp);
	/* --param NAME selects a correct parameter too. */
	if (p->consistent && p->correct) {
		fputs(": consistent and correct\n", t->fp);
		return;
	}
	fputs(p->consistent ? ": consistent but wrong" : ": inconsistent",
	    t->fp);
	ranks = param_wrong_ranks(p, &n);
	if (n > 0) {
		fputs(p->consistent ? " on " : ", wrong on ", t->fp);
		put_rank_list(t->fp, ranks, n);
	}
	putc('\n', t->fp);
	free(ranks);
}

/*
 * The text of one rank's table cell, from its regions first..first+n: the
 * short hash of the region that decides the verdict, then ok or DIFF; "-"
 * when the rank's optimizer uses none of these elements.  Without hashes
 * (check), a rank whose used value is one short expression shows it, as
 * the matrices of the Megatron-LM #844 report do: "g3+(g0+g1)/2 DIFF".
 */
#define CELL_EXPR_MAX	24

/*
 * Whether x may print in CELL_EXPR_MAX characters: lc_format writes each
 * atom, or each run of a rank's micro-batches as "g3m*", in two characters
 * at least, so a longer value is not formatted to find out (a 4,096-term
 * value per cell took half of a 2,048-rank check).
 */
static bool
short_enough(const struct atom_space *sp, const struct lincomb *x)
{
	return x->nterms <= (uint32_t)(CELL_EXPR_MAX *
	    atom_space_micro_batches(sp));
}

static void
rank_cell_text(struct text *t, const struct cell *cells, size_t n,
    char *buf, size_t len)
{
	const struct cell	*shown = NULL;
	char			 hex[17];
	bool			 wrong = false;
	size_t			 i;

	for (i = 0; i < n; i++) {
		if (!cells[i].used)
			continue;
		if (cell_wrong(&cells[i]) && !wrong) {
			wrong = true;
			shown = &cells[i];
		} else if (shown == NULL)
			shown = &cells[i];
	}
	if (shown == NULL) {
		snprintf(buf, len, "-");
		return;
	}
	hex[0] = '\0';
	if (shown->has_hash) {
		hash_hex(shown->hash, hex);
		hex[8] = ' ';
		hex[9] = '\0';
	} else if (n == 1 && short_enough(&t->audit->atoms, shown->value)) {
		const char *e = lc_format(&t->scratch,
		    &t->audit->atoms, shown->value, "g");

		if (strlen(e) <= CELL_EXPR_MAX) {
			snprintf(buf, len, "%s %s%s%s", e,
			    paint(t, wrong ? ANSI_RED : ANSI_GREEN),
			    wrong ? "DIFF" : "ok", paint(t, ANSI_RESET));
			return;
		}
	}
	snprintf(buf, len, "%s%s%s%s", hex,
	    paint(t, wrong ? ANSI_RED : ANSI_GREEN), wrong ? "DIFF" : "ok",
	    paint(t, ANSI_RESET));
}

/*
 * The table of a parameter.  Without -v, identical neighbours fold (issue
 * 10: a 4,096-rank table was 64 columns wide and 64 rows long): columns
 * whose every row holds the same text merge into "dp0-36", then rows
 * whose texts are the same into "pp1-6 tp0-7" (or "pp1 tp3..pp2 tp1" when
 * the run of rows is no box of coordinates).  Rows fold only when they
 * are neighbours in the mesh, never across a stage that lacks the param.
 */

/* "pp1-6 tp0-7" for the rows first..last of the layout, or "a..b". */
static void
fold_row_label(const struct row_axes *ax, int first, int last, char *buf,
    size_t len)
{
	int	 lo[4], hi[4], d[4], r, i, x, box = 1;
	char	 a[64], b[64];

	if (len > 0)
		buf[0] = '\0';
	size_t	 off = 0;

	for (i = 0; i < ax->naxes; i++) {
		lo[i] = INT32_MAX;
		hi[i] = -1;
	}
	for (r = first; r <= last; r++) {
		for (x = r, i = ax->naxes - 1; i >= 0; i--) {
			d[i] = x % ax->size[i];
			x /= ax->size[i];
		}
		for (i = 0; i < ax->naxes; i++) {
			lo[i] = d[i] < lo[i] ? d[i] : lo[i];
			hi[i] = d[i] > hi[i] ? d[i] : hi[i];
		}
	}
	for (i = 0; i < ax->naxes; i++)
		box *= hi[i] - lo[i] + 1;
	if (box != last - first + 1) {
		row_label(ax, first, a, sizeof a);
		row_label(ax, last, b, sizeof b);
		snprintf(buf, len, "%s..%s", a, b);
		return;
	}
	buf[0] = '\0';
	for (i = 0; i < ax->naxes && off < len; i++) {
		if (lo[i] == hi[i])
			off += (size_t)snprintf(buf + off, len - off, "%s%s%d",
			    i > 0 ? " " : "", ax->name[i], lo[i]);
		else
			off += (size_t)snprintf(buf + off, len - off,
			    "%s%s%d-%d", i > 0 ? " " : "", ax->name[i], lo[i],
			    hi[i]);
	}
}

static bool
row_is_blank(char *const *cell, int row, int ncols)
{
	int	 c;

	for (c = 0; c < ncols; c++)
		if (cell[(size_t)row * ncols + c] != NULL)
			return false;
	return true;
}

static bool
same_text(const char *x, const char *y)
{
	if (x == NULL || y == NULL)
		return x == y;
	return strcmp(x, y) == 0;
}

char **
report_table_cells(const struct audit *a, const struct param_result *p,
    int *nrows, int *ncols)
{
	struct row_axes	 ax;

	row_axes_of(a, p, &ax);
	*nrows = row_count(&ax);
	*ncols = ax.ncols;
	return xcalloc((size_t)*nrows * (size_t)*ncols, sizeof(char *));
}

static void
print_param_table(struct text *t, const struct param_result *p)
{
	char		 buf[160], **cell;
	size_t		 i, j;
	int		 row, col, nrows, ncols;

	cell = report_table_cells(t->audit, p, &nrows, &ncols);
	for (i = 0; i < p->ncells; i = j) {
		for (j = i + 1; j < p->ncells &&
		    p->cells[j].rank == p->cells[i].rank; j++)
			continue;
		rank_cell_text(t, &p->cells[i], j - i, buf, sizeof(buf));
		report_cell_position(t->audit, p, &p->cells[i], &row, &col,
		    &nrows, &ncols, NULL, 0);
		free(cell[(size_t)row * ncols + col]);
		cell[(size_t)row * ncols + col] = xstrdup(buf);
	}
	report_print_table(t->fp, t->audit, p, cell, !t->opt->verbose);
}

void
report_print_table(FILE *fp, const struct audit *a,
    const struct param_result *p, char **cell, bool fold)
{
	struct row_axes	 ax;
	struct grid	*g, *full;
	char		 buf[160];
	size_t		 i;
	int		 nrows, ncols, r, c, k, nr, nc;
	int		*cfirst, *clast, *rfirst, *rlast;

	row_axes_of(a, p, &ax);
	nrows = row_count(&ax);
	ncols = ax.ncols;
	/* Column runs: [cfirst[k], clast[k]]. */
	cfirst = xcalloc((size_t)ncols, sizeof *cfirst);
	clast = xcalloc((size_t)ncols, sizeof *clast);
	for (nc = 0, c = 0; c < ncols; c = clast[nc++] + 1) {
		cfirst[nc] = clast[nc] = c;
		while (fold && clast[nc] + 1 < ncols) {
			for (r = 0; r < nrows; r++)
				if (!same_text(cell[(size_t)r * ncols + c],
				    cell[(size_t)r * ncols + clast[nc] + 1]))
					break;
			if (r < nrows)
				break;
			clast[nc]++;
		}
	}
	/* Row runs: [rfirst[k], rlast[k]], skipping stages without p. */
	rfirst = xcalloc((size_t)nrows, sizeof *rfirst);
	rlast = xcalloc((size_t)nrows, sizeof *rlast);
	for (nr = 0, r = 0; r < nrows; r = rlast[nr++] + 1) {
		while (r < nrows && row_is_blank(cell, r, ncols))
			r++;
		if (r == nrows)
			break;
		rfirst[nr] = rlast[nr] = r;
		while (fold && rlast[nr] + 1 < nrows) {
			for (c = 0; c < ncols; c++)
				if (!same_text(cell[(size_t)r * ncols + c],
				    cell[(size_t)(rlast[nr] + 1) * ncols + c]))
					break;
			if (c < ncols)
				break;
			rlast[nr]++;
		}
	}
	full = report_param_grid(a, p);
	g = grid_new(nr, nc, full->corner);
	grid_free(full);
	for (c = 0; c < nc; c++) {
		if (cfirst[c] == clast[c])
			snprintf(buf, sizeof buf, "%s%d", ax.col_name,
			    cfirst[c]);
		else
			snprintf(buf, sizeof buf, "%s%d-%d", ax.col_name,
			    cfirst[c], clast[c]);
		grid_col_label(g, c, buf);
	}
	for (k = 0; k < nr; k++) {
		fold_row_label(&ax, rfirst[k], rlast[k], buf, sizeof buf);
		grid_row_label(g, k, buf);
		for (c = 0; c < nc; c++)
			grid_set(g, k, c, cell[(size_t)rfirst[k] * ncols +
			    cfirst[c]]);
	}
	grid_print(fp, g);
	grid_free(g);
	for (i = 0; i < (size_t)nrows * (size_t)ncols; i++)
		free(cell[i]);
	free(cell);
	free(cfirst);
	free(clast);
	free(rfirst);
	free(rlast);
}

/*
 * An expression, cut after the last operator before EXPR_MAX characters
 * when longer, with its number of terms: a 4,096-atom average would
 * otherwise fill the screen.
 */
static void
put_expr(FILE *fp, const char *s, uint32_t nterms)
{
	size_t	 len = strlen(s), cut;

	if (len <= EXPR_MAX) {
		fputs(s, fp);
		return;
	}
	for (cut = EXPR_MAX; cut > 0 && s[cut] != '+' && s[cut] != '-'; cut--)
		continue;
	if (cut == 0)
		cut = EXPR_MAX;
	fwrite(s, 1, cut + 1, fp);
	fprintf(fp, "... (%" PRIu32 " terms)", nterms);
}

/*
 * Against each term of the expected value (a mesh group or an atom), what
 * the value lacks: "missing sum_dp(pp7,tp0)/64" when all of its atoms are
 * absent, "missing 63 of the 64 terms of sum_dp(pp7,tp0)/64" when some
 * are, "wrong coefficient on 8 of the 64 terms of ..." when present with
 * another factor; then the atoms the value holds and should not, by group.
 */
static void
put_difference(struct text *t, const struct lincomb *v,
    const struct lincomb *e, const struct piece_memo *pe, int self)
{
	const struct atom_space	*sp = &t->audit->atoms;
	struct arena		*ar = &t->scratch;
	struct lincomb		*extra;
	struct ms_piece		*pp;
	size_t			*absent, *off, k, np;
	uint32_t		 i, n;
	struct rational		 c;
	char			 name[160], q[48];
	const char		*sep = ": ", *ps;

	absent = xcalloc(pe->n + 1, sizeof *absent);
	off = xcalloc(pe->n + 1, sizeof *off);
	for (i = 0; i < e->nterms; i++) {
		for (k = 0; k < pe->n; k++)
			if (ms_piece_has(sp, &pe->p[k], e->terms[i].atom))
				break;
		c = lc_coef(v, e->terms[i].atom);
		if (q_is_zero(c))
			absent[k]++;
		else if (!q_equal(c, e->terms[i].coef))
			off[k]++;
	}
	for (k = 0; k < pe->n; k++) {
		ms_piece_name(sp, &pe->p[k], self, name, sizeof name);
		q_format(pe->p[k].coef, q, sizeof q);
		if (absent[k] == pe->p[k].n)
			fprintf(t->fp, "%smissing %s%s%s", sep, name,
			    strcmp(q, "1") == 0 ? "" : "*", strcmp(q, "1") == 0 ?
			    "" : q);
		else if (absent[k] > 0)
			fprintf(t->fp, "%smissing %zu of the %" PRIu32 " terms "
			    "of %s", sep, absent[k], pe->p[k].n, name);
		if (absent[k] > 0)
			sep = ", ";
		if (off[k] > 0) {
			fprintf(t->fp, "%swrong coefficient on %zu of the %"
			    PRIu32 " terms of %s", sep, off[k], pe->p[k].n,
			    name);
			sep = ", ";
		}
	}
	extra = arena_alloc(ar, sizeof(*extra) + (size_t)v->nterms *
	    sizeof(struct term));
	for (i = n = 0; i < v->nterms; i++)
		if (q_is_zero(lc_coef(e, v->terms[i].atom)))
			extra->terms[n++] = v->terms[i];
	extra->nterms = n;
	if (n > 0) {
		pp = ms_pieces(sp, extra, &np);
		ps = ms_format(ar, sp, pp, np, self);
		free(pp);
		fprintf(t->fp, "%sextra ", sep);
		put_expr(t->fp, ps, n);
		if (strlen(ps) <= EXPR_MAX && n > 1)
			fprintf(t->fp, " (%" PRIu32 " terms)", n);
	}
	free(absent);
	free(off);
}

/*
 * What a wrong region holds against what it should.  Short expressions
 * print whole, as the Megatron-LM #844 report does; a long pair prints in
 * mesh-group notation (meshsum.h), cut, and then the factor when the value
 * is a multiple of the expected one, else what is missing and extra:
 * "missing 63 of the 64 terms of sum_dp(pp7,tp0)" says what
 * "(g0+g8+...)/64 ... (65 terms)" hid (issue 10).  With absolute, atoms
 * by rank; else "self" stands for each rank of the line, rank the first.
 */
static void
put_value_vs_expected(struct text *t, struct piece_cache *pc,
    const struct cell *c, int rank, bool absolute)
{
	const struct lincomb	*v = c->value, *e = c->expected;
	const struct piece_memo	*pv, *pe;
	struct arena		*ar = &t->scratch;
	const struct atom_space	*sp = &t->audit->atoms;
	struct rational		 q;
	const char		*vs, *es;
	char			 buf[48];
	int			 self = absolute ? -1 : rank;

	if (v == NULL || e == NULL) {
		/* compare: no expression fits the measured values. */
		const char *unknown = t->audit->trace != NULL ?
		    "undetermined" : "?";

		fputs(v == NULL ? unknown : lc_format(ar, sp, v, "g"), t->fp);
		fprintf(t->fp, "  expected %s", e == NULL ? unknown :
		    lc_format(ar, sp, e, "g"));
		return;
	}
	pv = pieces_of(pc, sp, v);
	pe = pieces_of(pc, sp, e);
	if (absolute && v->nterms <= EXPR_MAX && e->nterms <= EXPR_MAX) {
		vs = lc_format(ar, sp, v, "g");
		es = lc_format(ar, sp, e, "g");
		if (strlen(vs) <= EXPR_MAX && strlen(es) <= EXPR_MAX) {
			fprintf(t->fp, "%s  expected %s", vs, es);
			return;
		}
	}
	vs = ms_format(ar, sp, pv->p, pv->n, self);
	es = ms_format(ar, sp, pe->p, pe->n, self);
	put_expr(t->fp, vs, v->nterms);
	fputs("  expected ", t->fp);
	put_expr(t->fp, es, e->nterms);
	if (strlen(vs) <= EXPR_MAX && strlen(es) <= EXPR_MAX)
		return;
	if (lc_proportional(v, e, &q)) {
		q_format(q, buf, sizeof buf);
		fprintf(t->fp, ": %s times the expected value", buf);
		return;
	}
	put_difference(t, v, e, pe, self);
}

/* "rank 5" or "ranks 0-7, 64" and the region. */
static void
put_region_head(struct text *t, const int *ranks, size_t n,
    const struct cell *c)
{
	put_rank_list(t->fp, ranks, n);
	fprintf(t->fp, " [%" PRId64 ",%" PRId64 "): ", c->lo, c->hi);
}

static void
put_numeric_error(struct text *t, const struct cell *c)
{
	const struct audit	*a = t->audit;

	/* A traced step's errors are differences, not rounding: no ulps. */
	if (a->trace != NULL && a->numeric && c->has_hash)
		fprintf(t->fp, "  (relative error %.3g)", c->max_rel_error);
	else if (a->numeric && a->arith != ARITH_EXACT && c->has_hash)
		fprintf(t->fp, "  (max %.3g ulps, relative error %.3g)",
		    c->max_ulps, c->max_rel_error);
}

/*
 * The wrong regions: with -v one line per rank and region; without, one
 * line per group of ranks holding the same thing (as the JSON cells), at
 * most REGION_LINES_MAX of them.  --rank keeps the lines of that rank.
 */
static void
print_wrong_regions(struct text *t, const struct param_result *p)
{
	struct piece_cache	 pc;
	struct cell_group	*g;
	const struct cell	*c;
	size_t			 i, ng, shown = 0, total = 0;
	int			 want = t->opt->select_rank ? t->opt->rank : -1;

	memset(&pc, 0, sizeof pc);
	if (t->opt->verbose || want >= 0) {
		for (i = 0; i < p->ncells; i++) {
			c = &p->cells[i];
			if (!cell_wrong(c) || (want >= 0 && c->rank != want))
				continue;
			put_region_head(t, &c->rank, 1, c);
			put_value_vs_expected(t, &pc, c, c->rank, true);
			put_numeric_error(t, c);
			putc('\n', t->fp);
		}
		piece_cache_free(&pc);
		return;
	}
	g = group_cells(&t->audit->atoms, p, &pc, true, &ng);
	for (i = 0; i < ng; i++) {
		c = g[i].key.c;
		total++;
		if (shown == REGION_LINES_MAX)
			continue;
		put_region_head(t, g[i].ranks, g[i].nranks, c);
		/* One rank: its own atoms, as they are. */
		put_value_vs_expected(t, &pc, c, g[i].key.self,
		    g[i].nranks == 1 || g[i].key.self < 0);
		put_numeric_error(t, c);
		putc('\n', t->fp);
		shown++;
	}
	if (shown < total)
		fprintf(t->fp, "... and %zu more wrong region%s (-v lists "
		    "them all, rank by rank)\n", total - shown,
		    plural((int64_t)(total - shown)));
	for (i = 0; i < ng; i++)
		free(g[i].ranks);
	free(g);
	piece_cache_free(&pc);
}

/* Whether rank has a wrong cell in p. */
static bool
rank_wrong_in(const struct param_result *p, int rank)
{
	size_t	 i;

	for (i = 0; i < p->ncells; i++)
		if (p->cells[i].rank == rank && cell_wrong(&p->cells[i]))
			return true;
	return false;
}

static void
print_param(struct text *t, const struct param_result *p, bool table)
{
	print_title(t, p);
	if (table) {
		print_param_table(t, p);
		print_wrong_regions(t, p);
		if (p->note != NULL)
			put_note(t->fp, p->note);
		putc('\n', t->fp);
	}
	/* The expressions of one parameter are not needed any more. */
	arena_free(&t->scratch);
	arena_init(&t->scratch);
}

/*
 * --param and --rank select the findings that name them too.  Findings
 * name a tied pair by its first instance, so --param output.weight
 * selects those of embedding.weight.
 */
static bool
finding_selected(const struct audit *a, const struct report_options *o,
    const struct finding *f)
{
	const char	*name = o->param;
	size_t		 k;

	for (k = 0; name != NULL && k < a->nparams; k++)
		if (a->params[k].tied_with != NULL &&
		    strcmp(a->params[k].tied_with, name) == 0)
			name = a->params[k].name;
	if (name != NULL) {
		for (k = 0; k < f->nparams; k++)
			if (strcmp(f->params[k], name) == 0)
				break;
		if (k == f->nparams && (f->param == NULL ||
		    strcmp(f->param, name) != 0))
			return false;
	}
	if (o->select_rank) {
		for (k = 0; k < f->nranks; k++)
			if (f->ranks[k] == o->rank)
				return true;
		return false;
	}
	return true;
}

/*
 * A finding the baseline accepts: its subject and the reason, which is
 * what the reader needs to recall; -v adds what the finding says.
 */
static void
print_accepted(struct text *t, const struct finding *f)
{
	fputs("accepted: ", t->fp);
	put_finding_subject(t->fp, f);
	put_acceptance(t->fp, f);
	putc('\n', t->fp);
	if (t->opt->verbose) {
		fputs("  finding: ", t->fp);
		put_finding(t->fp, f);
		putc('\n', t->fp);
	}
}

static void
print_findings(struct text *t)
{
	const struct finding	*f;
	size_t			 i, shown = 0;

	for (i = 0; i < t->audit->nfindings; i++) {
		f = &t->audit->findings[i];
		if (!finding_selected(t->audit, t->opt, f))
			continue;
		shown++;
		if (f->accepted) {
			print_accepted(t, f);
			continue;
		}
		fprintf(t->fp, "%sfinding:%s ", paint(t, ANSI_BOLD),
		    paint(t, ANSI_RESET));
		put_finding(t->fp, f);
		putc('\n', t->fp);
		if (f->fix != NULL)
			fprintf(t->fp, "  fix: %s\n", f->fix);
		/* Matched by an entry that has expired: it fails again. */
		if (f->reason != NULL)
			fprintf(t->fp, "  expired on %s: %s accepted it: %s\n",
			    f->expires, f->baseline_at, f->reason);
	}
	if (shown > 0)
		putc('\n', t->fp);
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

/* "2", "0..1": how many times a parameter's elements enter a norm. */
static void
put_multiplicity(FILE *fp, const struct gn_mult *m)
{
	char	lo[48], hi[48];

	q_format(m->min, lo, sizeof lo);
	q_format(m->max, hi, sizeof hi);
	if (q_equal(m->min, m->max))
		fputs(lo, fp);
	else
		fprintf(fp, "%s..%s", lo, hi);
}

/* One set of ranks and the norm they compute. */
static void
put_norm_row(struct text *t, const int *ranks, size_t n, int c)
{
	const struct grad_norm_result *g = &t->audit->grad_norm;
	const struct gn_class *cl = c >= 0 ? &g->classes[c] : NULL;
	bool	 ok = cl != NULL && cl->correct;
	char	 hex[17];

	fputs("  ", t->fp);
	put_rank_list(t->fp, ranks, n);
	fputs(": ", t->fp);
	if (t->audit->trace != NULL && c >= 0) {
		/* A traced step: what it used, as recorded. */
		fprintf(t->fp, "norm %.9g ", g->norm[ranks[0]]);
		if (!isnan(g->coefficient[ranks[0]]))
			fprintf(t->fp, "clip coefficient %.9g ",
			    g->coefficient[ranks[0]]);
	} else if (g->numeric && c >= 0 && t->audit->arith == ARITH_EXACT) {
		hash_hex(g->hash[ranks[0]], hex);
		fprintf(t->fp, "norm^2 %.8s ", hex);
	} else if (g->numeric && c >= 0)
		fprintf(t->fp, "norm %.9g, clip coefficient %.9g (%.0f ulps) ",
		    g->norm[ranks[0]], g->coefficient[ranks[0]],
		    g->ulps[ranks[0]]);
	if (g->numeric)
		ok = ok && g->numeric_ok[ranks[0]];
	fprintf(t->fp, "%s%s%s", paint(t, ok ? ANSI_GREEN : ANSI_RED),
	    ok ? "ok" : "DIFF", paint(t, ANSI_RESET));
	if (cl == NULL)
		fputs(" (never clips)", t->fp);
	else if (!cl->correct && cl->nmults == 0 && t->audit->trace == NULL)
		fputs(" (counts other elements)", t->fp);
	putc('\n', t->fp);
}

/*
 * The gradient norm clipping divides by (gradnorm.h): a line per set of
 * ranks computing one norm, its numeric value against the reference's with
 * ok or DIFF, then how many times each wrongly counted parameter enters a
 * wrong norm.  Shown when a norm is wrong or the ranks disagree, or -v.
 */
static void
print_grad_norm(struct text *t)
{
	const struct audit		*a = t->audit;
	const struct grad_norm_result	*g = &a->grad_norm;
	int				*ranks;
	size_t				 c, n, i;
	int				 r;
	char				 hex[17];

	/* A norm wrong only by wrong gradients says nothing new. */
	if (!g->present || (!g->miscounted && g->consistent &&
	    !t->opt->verbose))
		return;
	fprintf(t->fp, "%sgradient norm%s: %s\n", paint(t, ANSI_BOLD),
	    paint(t, ANSI_RESET), g->correct && g->consistent ? "every rank "
	    "counts every element once" : !g->consistent ? "the ranks clip "
	    "by different norms" : "wrong");
	ranks = xcalloc((size_t)a->mesh.world + 1, sizeof(*ranks));
	for (c = 0; c < g->nclasses; c++)
		put_norm_row(t, g->classes[c].ranks, g->classes[c].nranks,
		    (int)c);
	for (n = 0, r = 0; r < a->mesh.world; r++)
		if (g->class_of[r] < 0)
			ranks[n++] = r;
	if (n > 0)
		put_norm_row(t, ranks, n, -1);
	free(ranks);
	if (a->trace != NULL)
		fprintf(t->fp, "  reference: norm %.9g\n", g->reference_norm);
	else if (g->numeric && a->arith == ARITH_EXACT) {
		hash_hex(g->reference_hash, hex);
		fprintf(t->fp, "  reference: norm^2 %.8s\n", hex);
	} else if (g->numeric)
		fprintf(t->fp, "  reference: norm %.9g, clip coefficient %.9g\n",
		    g->reference_norm, g->reference_coefficient);
	for (c = 0; c < g->nclasses; c++) {
		const struct gn_class *cl = &g->classes[c];

		if (cl->correct || cl->nmults == 0)
			continue;
		fputs("  times each element enters the norm of ", t->fp);
		put_rank_list(t->fp, cl->ranks, cl->nranks);
		fputs(" (expected 1):\n", t->fp);
		for (i = 0; i < cl->nmults; i++) {
			fprintf(t->fp, "    %-32s ", cl->mults[i].param);
			put_multiplicity(t->fp, &cl->mults[i]);
			if (!cl->mults[i].values_ok)
				fputs(", with wrong gradients", t->fp);
			putc('\n', t->fp);
		}
	}
	if (g->gradients_wrong)
		fputs("  (a norm that counts every element once is still "
		    "wrong where the gradients are: see the parameters "
		    "above)\n", t->fp);
	putc('\n', t->fp);
}

static void
print_consistent(struct text *t)
{
	const struct param_result	*p;
	size_t				 i, n = 0;

	for (i = 0; i < t->audit->nparams; i++) {
		p = &t->audit->params[i];
		if (!p->consistent || !p->correct)
			continue;
		n++;
		if (t->opt->verbose)
			fprintf(t->fp, "%sok%s  %s\n", paint(t, ANSI_GREEN),
			    paint(t, ANSI_RESET), p->name);
	}
	/* When every parameter is, the summary line says it alone. */
	if (n > 0 && n < t->audit->nparams && !t->opt->verbose)
		fprintf(t->fp, "%zu parameter%s consistent and correct\n", n,
		    plural((int64_t)n));
}

static void
print_summary(struct text *t)
{
	char	*s = report_summary(t->audit);
	bool	 good = audit_wrong_params(t->audit) == 0 ||
		    audit_accepted(t->audit);

	if (t->opt->quiet && t->opt->name_summary &&
	    t->audit->config != NULL) {
		put_visible(t->fp, t->audit->config->name);
		fputs(": ", t->fp);
	}
	fprintf(t->fp, "%s%s%s", paint(t, good ? ANSI_GREEN : ANSI_RED), s,
	    paint(t, ANSI_RESET));
	/* -q has no header to say that the verdict is symbolic only. */
	if (t->opt->quiet && t->audit->numeric_skipped != NULL)
		fprintf(t->fp, "; numeric: skipped (%s)",
		    t->audit->numeric_skipped);
	putc('\n', t->fp);
	free(s);
}

/* The parameters the text report shows: wrong ones, or --param's. */
static bool
param_selected(const struct text *t, const struct param_result *p)
{
	const struct report_options *o = t->opt;

	if (o->param != NULL)
		return strcmp(p->name, o->param) == 0 || (p->tied_with !=
		    NULL && strcmp(p->tied_with, o->param) == 0);
	if (p->consistent && p->correct)
		return false;
	return !o->select_rank || rank_wrong_in(p, o->rank);
}

/*
 * The findings first, then the parameters, then the summary: on a large
 * mesh the answer must not scroll away behind the tables (issue 10).
 * Without -v only the first TABLES_MAX parameters get their table; the
 * others a title line each.
 */
void
report_text(FILE *fp, const struct audit *a, const struct report_options *opt)
{
	struct text	 t;
	size_t		 i, tables = 0, titles = 0;

	t.fp = fp;
	t.audit = a;
	t.opt = opt;
	arena_init(&t.scratch);
	if (!opt->quiet) {
		print_header(&t);
		print_findings(&t);
		for (i = 0; i < a->nparams; i++) {
			if (!param_selected(&t, &a->params[i]))
				continue;
			if (tables < TABLES_MAX || opt->verbose ||
			    opt->param != NULL) {
				print_param(&t, &a->params[i], true);
				tables++;
			} else {
				print_param(&t, &a->params[i], false);
				titles++;
			}
		}
		if (titles > 0)
			fprintf(fp, "(%zu more table%s: -v shows them all, "
			    "--param NAME one)\n\n", titles,
			    plural((int64_t)titles));
		print_grad_norm(&t);
		print_consistent(&t);
	}
	print_summary(&t);
	arena_free(&t.scratch);
}

/*
 * The JSON report: the field names of SPEC section 9, which are stable.
 */

static void
jsonw_key_hash(struct json *j, const char *key, uint64_t h)
{
	char	 hex[17];

	hash_hex(h, hex);
	jsonw_key_string(j, key, hex);
}

static void
jsonw_key_string_or_null(struct json *j, const char *key, const char *s)
{
	if (s != NULL)
		jsonw_key_string(j, key, s);
	else
		jsonw_key_null(j, key);
}

/* NaN and infinities have no JSON form. */
static void
jsonw_key_double(struct json *j, const char *key, double v)
{
	char	 buf[32];

	if (!isfinite(v)) {
		jsonw_key_null(j, key);
		return;
	}
	snprintf(buf, sizeof(buf), "%.17g", v);
	jsonw_key(j, key);
	jsonw_raw_number(j, buf);
}

/*
 * "loss_factors": every chunk's loss factor (micro-batch mb, dp_cp index
 * dp: chunk mb * dp + dp), which a piece with a "wcoef" multiplies each of
 * its atoms by.  Only when such a piece can appear (atom_space_weighted).
 */
static void
jsonw_loss_factors(struct json *j, const struct atom_space *sp)
{
	char	 q[48];
	int	 c;

	jsonw_key(j, "loss_factors");
	jsonw_begin_array(j);
	for (c = 0; c < atom_space_chunks(sp); c++) {
		q_format(atom_chunk_factor(sp, c), q, sizeof q);
		jsonw_string(j, q);
	}
	jsonw_end_array(j);
}

static void
jsonw_mesh(struct json *j, const struct mesh *m, const struct atom_space *sp)
{
	jsonw_key(j, "mesh");
	jsonw_begin_object(j);
	/*
	 * dp is the data-parallel group the cells' "dp" coordinate and
	 * "sum":"dp" terms run over: Megatron's dp_cp, cp of them the
	 * context-parallel ranks of one sequence.
	 */
	jsonw_key_int(j, "dp", m->dp);
	jsonw_key_int(j, "cp", m->cp);
	/* HSDP: dp is dp_replicate * dp_shard * cp, replicate slowest. */
	jsonw_key_int(j, "dp_replicate", m->dp_replicate);
	/* The "mb" coordinate of the atoms (gradaudit.yaml(5), loss). */
	jsonw_key_int(j, "micro_batches", atom_space_micro_batches(sp));
	if (atom_space_weighted(sp))
		jsonw_loss_factors(j, sp);
	jsonw_key_int(j, "pp", m->pp);
	jsonw_key_int(j, "tp", m->tp);
	jsonw_key_int(j, "ep", m->ep);
	jsonw_key_int(j, "etp", m->etp);
	jsonw_key_int(j, "edp", m->edp);
	jsonw_key_int(j, "world", m->world);
	jsonw_end_object(j);
}

/*
 * "framework": the profile applied and the keys the config wrote over it;
 * "settings": every setting in effect, whatever its origin.
 */
static void
jsonw_settings(struct json *j, const struct config *c)
{
	const struct fw_profile	*p = c->profile;
	struct keyset		 over;
	char			 v[64], window[160];
	int			 k;

	jsonw_key(j, "framework");
	jsonw_begin_object(j);
	if (p == NULL)
		jsonw_key_string(j, "name", "reference");
	else {
		jsonw_key_string(j, "name", p->framework->name);
		jsonw_key_string(j, "spec", c->framework);
		jsonw_key_string(j, "profile", p->label);
		jsonw_key_string(j, "read_at", p->read_at);
		if (fw_profile_window(p, window, sizeof(window))) {
			jsonw_key_string(j, "commit", p->commit);
			jsonw_key_string(j, "window", window);
		}
		over = fw_profile_overridden(c);
		jsonw_key(j, "overridden");
		jsonw_begin_array(j);
		for (k = 0; k < KEY__COUNT; k++)
			if (keyset_has(&over, k))
				jsonw_string(j, cfg_key_path(k));
		jsonw_end_array(j);
	}
	jsonw_end_object(j);
	jsonw_key(j, "settings");
	jsonw_begin_object(j);
	for (k = 0; k < KEY__COUNT; k++) {
		if (!cfg_key_is_setting(k) || !cfg_key_is_active(c, k) ||
		    cfg_key_is_job(k))
			continue;
		cfg_key_value(c, k, v, sizeof(v));
		/* Typed for scripts: jq 'select(.settings["x"] == 8)'. */
		switch (cfg_key_value_type(k)) {
		case CFG_VALUE_NUMBER:
			jsonw_key(j, cfg_key_path(k));
			jsonw_raw_number(j, v);
			break;
		case CFG_VALUE_BOOL:
			jsonw_key_bool(j, cfg_key_path(k), strcmp(v, "true") == 0);
			break;
		default:
			jsonw_key_string(j, cfg_key_path(k), v);
			break;
		}
	}
	jsonw_end_object(j);
}

/* {"g0": "1/2", ...}: atom names to reduced fractions. */
static void
jsonw_terms(struct json *j, const struct atom_space *sp, const char *key,
    const struct lincomb *x)
{
	char		 atom[ATOM_NAME_SIZE], coef[48];
	uint32_t	 i;

	jsonw_key(j, key);
	if (x == NULL) {
		jsonw_null(j);
		return;
	}
	jsonw_begin_object(j);
	for (i = 0; i < x->nterms; i++) {
		atom_name(sp, atom, sizeof(atom), "g", x->terms[i].atom);
		q_format(x->terms[i].coef, coef, sizeof(coef));
		jsonw_key_string(j, atom, coef);
	}
	jsonw_end_object(j);
}

static void
jsonw_expr(struct json *j, struct arena *scratch,
    const struct atom_space *sp, const char *key, const struct lincomb *x)
{
	jsonw_key_string_or_null(j, key, x != NULL ?
	    lc_format(scratch, sp, x, "g") : NULL);
}

static void
jsonw_cell_numeric(struct json *j, const struct audit *a, const struct cell *c)
{
	if (!c->has_hash)
		return;
	jsonw_key_hash(j, "hash", c->hash);
	jsonw_key_hash(j, "reference_hash", c->reference_hash);
	jsonw_key_bool(j, "numeric_ok", c->numeric_ok);
	if (a->arith != ARITH_EXACT) {
		jsonw_key_double(j, "max_ulps", c->max_ulps);
		jsonw_key_double(j, "max_rel_error", c->max_rel_error);
	}
}

/* A cell's region and verdicts, per-rank and grouped cells alike. */
static void
jsonw_cell_verdict(struct json *j, const struct audit *a, const struct cell *c)
{
	jsonw_key(j, "region");
	jsonw_begin_array(j);
	jsonw_int(j, c->lo);
	jsonw_int(j, c->hi);
	jsonw_end_array(j);
	jsonw_key_bool(j, "used", c->used);
	if (c->used)
		jsonw_key_bool(j, "ok", c->ok);
	else
		jsonw_key_null(j, "ok");
	jsonw_cell_numeric(j, a, c);
}

static void
jsonw_cell(struct json *j, const struct audit *a, const struct cell *c,
    struct arena *scratch)
{
	jsonw_begin_object(j);
	jsonw_key_int(j, "rank", c->rank);
	jsonw_key_int(j, "pp", c->coord.pp);
	jsonw_key_int(j, "dp", c->coord.dp);
	jsonw_key_int(j, "tp", c->coord.tp);
	jsonw_key_int(j, "ep", c->coord.ep);
	jsonw_key_int(j, "etp", c->coord.etp);
	jsonw_key_int(j, "edp", c->coord.edp);
	jsonw_cell_verdict(j, a, c);
	jsonw_terms(j, &a->atoms, "terms", c->value);
	jsonw_terms(j, &a->atoms, "expected", c->expected);
	jsonw_expr(j, scratch, &a->atoms, "expr", c->value);
	jsonw_expr(j, scratch, &a->atoms, "expected_expr", c->expected);
	jsonw_end_object(j);
}

/* "0-7,64,66-71": ascending ranks, runs of two or more as "a-b". */
static void
jsonw_key_ranges(struct json *j, const char *key, const int *r, size_t n)
{
	char	*buf = NULL;
	size_t	 len = 0, i, k;
	FILE	*fp = memstream(&buf, &len);

	for (i = 0; i < n; i = k + 1) {
		for (k = i; k + 1 < n && r[k + 1] == r[k] + 1; k++)
			continue;
		fprintf(fp, "%s%d", i > 0 ? "," : "", r[i]);
		if (k > i)
			fprintf(fp, "-%d", r[k]);
	}
	if (fclose(fp) != 0)
		fatal("open_memstream");
	jsonw_key_string(j, key, buf);
	free(buf);
}

/*
 * [{"coef": "1/64", "sum": "dp", "of": "pp7 tp0", "n": 64},
 *  {"coef": "1", "sum": "", "of": "g3", "n": 1},
 *  {"coef": "1/2", "sum": "tp", "of": "self", "n": 8}]
 */
static void
jsonw_pieces(struct json *j, const char *key, const struct atom_space *sp,
    const struct piece_memo *pm, int rank)
{
	char	 buf[128];
	size_t	 i;

	jsonw_key(j, key);
	if (pm == NULL) {
		jsonw_null(j);
		return;
	}
	jsonw_begin_array(j);
	for (i = 0; i < pm->n; i++) {
		jsonw_begin_object(j);
		q_format(pm->p[i].coef, buf, sizeof buf);
		/*
		 * Not "coef": a script that knows no weights must not read
		 * this one as every atom's coefficient.
		 */
		jsonw_key_string(j, pm->p[i].weighted ? "wcoef" : "coef", buf);
		ms_piece_sum(&pm->p[i], buf, sizeof buf);
		jsonw_key_string(j, "sum", buf);
		ms_piece_of(sp, &pm->p[i], rank, buf, sizeof buf);
		jsonw_key_string(j, "of", buf);
		jsonw_key_int(j, "n", pm->p[i].n);
		jsonw_end_object(j);
	}
	jsonw_end_array(j);
}

static void
jsonw_pieces_expr(struct json *j, struct arena *scratch, const char *key,
    const struct atom_space *sp, const struct piece_memo *pm, int rank)
{
	jsonw_key_string_or_null(j, key, pm != NULL ?
	    ms_format(scratch, sp, pm->p, pm->n, rank) : NULL);
}

static void
jsonw_cell_group(struct json *j, const struct audit *a,
    const struct cell_group *g, struct arena *scratch)
{
	const struct cell	*c = g->key.c;

	jsonw_begin_object(j);
	jsonw_key_ranges(j, "ranks", g->ranks, g->nranks);
	jsonw_key_int(j, "nranks", (int64_t)g->nranks);
	jsonw_cell_verdict(j, a, c);
	jsonw_pieces(j, "terms", &a->atoms, g->key.v, g->key.self);
	jsonw_pieces(j, "expected", &a->atoms, g->key.e, g->key.self);
	jsonw_pieces_expr(j, scratch, "expr", &a->atoms, g->key.v,
	    g->key.self);
	jsonw_pieces_expr(j, scratch, "expected_expr", &a->atoms, g->key.e,
	    g->key.self);
	jsonw_end_object(j);
}

static void
jsonw_param(struct json *j, const struct audit *a,
    const struct param_result *p, bool expand)
{
	struct arena		 scratch;
	struct piece_cache	 pc;
	struct cell_group	*g;
	size_t			 i, ng;

	arena_init(&scratch);
	jsonw_begin_object(j);
	jsonw_key_string(j, "name", p->name);
	jsonw_key_string_or_null(j, "tied_with", p->tied_with);
	/* Only with a virtual pipeline: other reports keep their shape. */
	if (p->has_chunk)
		jsonw_key_int(j, "chunk", p->chunk);
	if (p->has_chunk && p->tied_with != NULL)
		jsonw_key_int(j, "tied_chunk", p->tied_chunk);
	jsonw_key_bool(j, "consistent", p->consistent);
	jsonw_key_bool(j, "correct", p->correct);
	if (p->note != NULL)
		jsonw_key_string(j, "note", p->note);
	if (p->has_hash)
		jsonw_key_hash(j, "reference_hash", p->reference_hash);
	jsonw_key(j, "cells");
	jsonw_begin_array(j);
	if (expand) {
		for (i = 0; i < p->ncells; i++)
			jsonw_cell(j, a, &p->cells[i], &scratch);
	} else {
		memset(&pc, 0, sizeof pc);
		g = group_cells(&a->atoms, p, &pc, false, &ng);
		for (i = 0; i < ng; i++) {
			jsonw_cell_group(j, a, &g[i], &scratch);
			free(g[i].ranks);
		}
		free(g);
		piece_cache_free(&pc);
	}
	jsonw_end_array(j);
	jsonw_end_object(j);
	arena_free(&scratch);
}

/*
 * "effect": {"kind": "factor", "factor": "1/8", "text": "x1/8"}, with
 * "min" and "max" for weights, "fraction" for a norm, "difference"
 * otherwise; null when there is nothing to measure.
 */
/*
 * A measure of an effect, to six digits, or null when it is no number: a
 * traced step's relative difference overflows a double when a diverged
 * element meets a reference of small gradients, and that was an internal
 * error (exit 3), found by the trace reader's fuzz harness.
 */
static void
jsonw_key_g6(struct json *j, const char *key, double v)
{
	char	 buf[32];

	if (!isfinite(v)) {
		jsonw_key_null(j, key);
		return;
	}
	snprintf(buf, sizeof buf, "%.6g", v);
	jsonw_key(j, key);
	jsonw_raw_number(j, buf);
}

static void
jsonw_effect(struct json *j, const struct effect *e)
{
	char	 buf[128];

	jsonw_key(j, "effect");
	if (e->kind == EFFECT_NONE) {
		jsonw_null(j);
		return;
	}
	jsonw_begin_object(j);
	jsonw_key_string(j, "kind", effect_kind_name(e->kind));
	switch (e->kind) {
	case EFFECT_FACTOR:
		q_format(e->lo, buf, sizeof buf);
		jsonw_key_string(j, "factor", buf);
		break;
	case EFFECT_WEIGHTS:
		q_format(e->lo, buf, sizeof buf);
		jsonw_key_string(j, "min", buf);
		q_format(e->hi, buf, sizeof buf);
		jsonw_key_string(j, "max", buf);
		break;
	case EFFECT_NORM:
		jsonw_key_g6(j, "fraction", e->fraction);
		break;
	case EFFECT_DIFFERENCE:
		jsonw_key_g6(j, "difference", e->difference);
		break;
	case EFFECT_NONE:
		break;
	}
	effect_format(e, buf, sizeof buf);
	jsonw_key_string(j, "text", buf);
	jsonw_end_object(j);
}

/* A fix as the --set options that make it: ["loss.scale=dp-cp", ...]. */
static void
jsonw_fix_settings(struct json *j, const char *key,
    const struct fix_setting *s, size_t n)
{
	char	 buf[256];
	size_t	 i;

	jsonw_key(j, key);
	jsonw_begin_array(j);
	for (i = 0; i < n; i++) {
		snprintf(buf, sizeof buf, "%s=%s", s[i].key, s[i].value);
		jsonw_string(j, buf);
	}
	jsonw_end_array(j);
}

static void
jsonw_finding(struct json *j, const struct finding *f)
{
	size_t	 i;

	jsonw_begin_object(j);
	jsonw_key_string(j, "kind", finding_kind_name(f->kind));
	jsonw_key_string_or_null(j, "param", f->param);
	jsonw_key(j, "params");
	jsonw_begin_array(j);
	for (i = 0; i < f->nparams; i++)
		jsonw_string(j, f->params[i]);
	jsonw_end_array(j);
	jsonw_key(j, "ranks");
	jsonw_begin_array(j);
	for (i = 0; i < f->nranks; i++)
		jsonw_int(j, f->ranks[i]);
	jsonw_end_array(j);
	jsonw_key_string_or_null(j, "op", f->op);
	jsonw_key_string_or_null(j, "dim", f->dim);
	jsonw_key_string_or_null(j, "message", f->message);
	jsonw_key_string_or_null(j, "fix", f->fix);
	jsonw_key_string_or_null(j, "cause", f->cause < KEY__COUNT ?
	    cfg_key_path(f->cause) : NULL);
	jsonw_fix_settings(j, "fix_set", f->fix_set, f->nfix_set);
	jsonw_fix_settings(j, "fix_alternative", f->fix_alternative,
	    f->nfix_alternative);
	jsonw_effect(j, &f->effect);
	jsonw_key_bool(j, "accepted", f->accepted);
	/* The baseline entry that matched, even an expired one. */
	if (f->reason != NULL) {
		jsonw_key_string(j, "reason", f->reason);
		jsonw_key_string(j, "baseline", f->baseline_at);
		jsonw_key_string_or_null(j, "expires", f->expires);
		jsonw_key_bool(j, "expired", !f->accepted);
	}
	jsonw_end_object(j);
}

/*
 * --baseline: the entries that name this config and match none of its
 * findings.  An entry stale for every config it names is also said on
 * stderr (baseline_report_stale).
 */
static void
jsonw_stale(struct json *j, const struct audit *a)
{
	const struct baseline_entry *e;
	size_t	 i;

	if (!a->baselined)
		return;
	jsonw_key(j, "stale_baseline");
	jsonw_begin_array(j);
	for (i = 0; i < a->nstale; i++) {
		e = a->stale[i];
		jsonw_begin_object(j);
		jsonw_key_string(j, "baseline", e->at);
		jsonw_key_string(j, "config", e->config);
		jsonw_key_string(j, "kind", finding_kind_name(e->kind));
		jsonw_key_string(j, "reason", e->reason);
		jsonw_end_object(j);
	}
	jsonw_end_array(j);
}

static void
jsonw_numerics(struct json *j, const struct audit *a)
{
	if (a->numeric_skipped != NULL) {
		jsonw_key(j, "numerics");
		jsonw_begin_object(j);
		jsonw_key_string(j, "skipped", a->numeric_skipped);
		jsonw_end_object(j);
	}
	if (!a->numeric)
		return;
	jsonw_key(j, "numerics");
	jsonw_begin_object(j);
	jsonw_key_string(j, "arith", arith_name(a->arith));
	jsonw_key_int(j, "procs", a->procs);
	jsonw_key_bool(j, "correct", a->numeric_correct);
	jsonw_end_object(j);
}

/* sweep: "varied": {"dp": 4, ..., "tie_embeddings": true}. */
static void
jsonw_varied(struct json *j, const struct audit *a)
{
	size_t	i;

	if (a->nvaried == 0)
		return;
	jsonw_key(j, "varied");
	jsonw_begin_object(j);
	for (i = 0; i < a->nvaried; i++) {
		if (a->varied[i].flag)
			jsonw_key_bool(j, a->varied[i].name, a->varied[i].value);
		else
			jsonw_key_int(j, a->varied[i].name, a->varied[i].value);
	}
	jsonw_end_object(j);
}

/*
 * "counts": what a script would otherwise count from params and findings,
 * every kind of finding present even at 0, so that a script can read
 * .counts.by_kind["double-count"] without a default.
 */
static void
jsonw_counts(struct json *j, const struct audit *a)
{
	size_t	 by_kind[FINDING__COUNT] = { 0 }, i;
	int	 k;

	for (i = 0; i < a->nfindings; i++)
		if ((int)a->findings[i].kind >= 0 &&
		    a->findings[i].kind < FINDING__COUNT)
			by_kind[a->findings[i].kind]++;
	jsonw_key(j, "counts");
	jsonw_begin_object(j);
	jsonw_key_int(j, "params", (int64_t)a->nparams);
	jsonw_key_int(j, "wrong_params", audit_wrong_params(a));
	jsonw_key_int(j, "ranks", a->mesh.world);
	jsonw_key_int(j, "wrong_ranks", audit_wrong_ranks(a));
	jsonw_key_int(j, "findings", (int64_t)a->nfindings);
	jsonw_key_int(j, "accepted", (int64_t)audit_accepted_findings(a));
	jsonw_key(j, "by_kind");
	jsonw_begin_object(j);
	for (k = 0; k < FINDING__COUNT; k++)
		jsonw_key_int(j, finding_kind_name((enum finding_kind)k),
		    (int64_t)by_kind[k]);
	jsonw_end_object(j);
	jsonw_end_object(j);
}

/*
 * "grad_norm": the norms the ranks clip by (gradnorm.h): one class per
 * distinct norm with its ranks and, when wrong, the multiplicity of each
 * wrongly counted parameter; after a numeric audit, every rank's norm
 * squared against the reference's.
 */
static void
jsonw_grad_norm(struct json *j, const struct audit *a)
{
	const struct grad_norm_result	*g = &a->grad_norm;
	size_t				 c, i;
	int				 r;
	char				 q[48];

	if (!g->present)
		return;
	jsonw_key(j, "grad_norm");
	jsonw_begin_object(j);
	jsonw_key_bool(j, "correct", g->correct);
	jsonw_key_bool(j, "consistent", g->consistent);
	jsonw_key_bool(j, "gradients_wrong", g->gradients_wrong);
	jsonw_key_double(j, "clip_grad", GN_CLIP_GRAD);
	jsonw_key(j, "classes");
	jsonw_begin_array(j);
	for (c = 0; c < g->nclasses; c++) {
		const struct gn_class *cl = &g->classes[c];

		jsonw_begin_object(j);
		jsonw_key_ranges(j, "ranks", cl->ranks, cl->nranks);
		jsonw_key_bool(j, "correct", cl->correct);
		jsonw_key(j, "multiplicities");
		jsonw_begin_array(j);
		for (i = 0; i < cl->nmults; i++) {
			jsonw_begin_object(j);
			jsonw_key_string(j, "param", cl->mults[i].param);
			q_format(cl->mults[i].min, q, sizeof q);
			jsonw_key_string(j, "min", q);
			q_format(cl->mults[i].max, q, sizeof q);
			jsonw_key_string(j, "max", q);
			jsonw_key_bool(j, "values_ok", cl->mults[i].values_ok);
			jsonw_end_object(j);
		}
		jsonw_end_array(j);
		jsonw_end_object(j);
	}
	jsonw_end_array(j);
	if (g->numeric) {
		jsonw_key_hash(j, "reference_hash", g->reference_hash);
		if (a->arith != ARITH_EXACT) {
			jsonw_key_double(j, "reference_norm", g->reference_norm);
			jsonw_key_double(j, "reference_coefficient",
			    g->reference_coefficient);
		}
		jsonw_key_bool(j, "numeric_correct", g->numeric_correct);
		jsonw_key(j, "ranks");
		jsonw_begin_array(j);
		for (r = 0; r < a->mesh.world; r++) {
			int k = g->class_of[r];

			jsonw_begin_object(j);
			jsonw_key_int(j, "rank", r);
			jsonw_key_bool(j, "clips", k >= 0);
			jsonw_key_bool(j, "ok", k >= 0 && g->classes[k].correct);
			jsonw_key_hash(j, "hash", g->hash[r]);
			jsonw_key_bool(j, "numeric_ok", g->numeric_ok[r]);
			if (a->arith != ARITH_EXACT) {
				jsonw_key_double(j, "norm", g->norm[r]);
				jsonw_key_double(j, "coefficient",
				    g->coefficient[r]);
				jsonw_key_double(j, "ulps", g->ulps[r]);
			}
			jsonw_end_object(j);
		}
		jsonw_end_array(j);
	}
	jsonw_end_object(j);
}

/* Everything of the object but params and findings, and its opening. */
static void
jsonw_head(struct json *j, const struct audit *a)
{
	jsonw_begin_object(j);
	jsonw_key_string(j, "tool", "gradaudit");
	jsonw_key_string(j, "version", REPORT_VERSION);
	jsonw_key_string_or_null(j, "config",
	    a->config != NULL ? a->config->file : NULL);
	jsonw_key_string_or_null(j, "name",
	    a->config != NULL ? a->config->name : NULL);
	if (a->trace != NULL) {
		jsonw_key(j, "trace");
		jsonw_begin_object(j);
		jsonw_key_string(j, "dir", a->trace->dir);
		jsonw_key_string(j, "step", a->trace->step);
		jsonw_key_string(j, "against", a->trace->against);
		jsonw_key_string(j, "dtype", a->trace->dtype);
		jsonw_key_int(j, "micro_batches", a->trace->micro_batches);
		{
			char num[32];

			snprintf(num, sizeof num, "%.17g", a->trace->tolerance);
			jsonw_key(j, "tolerance");
			jsonw_raw_number(j, num);
		}
		jsonw_end_object(j);
	}
	jsonw_mesh(j, &a->mesh, &a->atoms);
	if (a->config != NULL)
		jsonw_settings(j, a->config);
	jsonw_numerics(j, a);
	jsonw_key_bool(j, "consistent", a->consistent);
	jsonw_key_bool(j, "correct", a->correct);
	/* Wrong, and the baseline accepts all of it: the gate passes. */
	jsonw_key_bool(j, "accepted", audit_accepted(a));
	if (a->numeric_verdict != NULL)
		jsonw_key_string(j, "numeric_verdict", a->numeric_verdict);
	jsonw_counts(j, a);
	jsonw_varied(j, a);
}

static void
jsonw_findings(struct json *j, const struct audit *a)
{
	size_t	 i;

	jsonw_key(j, "findings");
	jsonw_begin_array(j);
	for (i = 0; i < a->nfindings; i++)
		jsonw_finding(j, &a->findings[i]);
	jsonw_end_array(j);
}

/*
 * An --expand cell costs about 400 bytes besides its terms (region,
 * coordinates, flags, expressions' brackets), and a term about 24 twice
 * over: "g1234m3": "1/2048" in the terms and again in the expression.  A
 * lower estimate would let a report far past the bound through.
 */
#define EXPAND_CELL_BYTES	400
#define EXPAND_TERM_BYTES	48

uint64_t
report_expand_size(const struct audit *a)
{
	const struct cell *c;
	uint64_t	 n = 0;
	size_t		 i, k;

	for (i = 0; i < a->nparams; i++)
		for (k = 0; k < a->params[i].ncells; k++) {
			c = &a->params[i].cells[k];
			n += EXPAND_CELL_BYTES;
			if (c->value != NULL)
				n += (uint64_t)c->value->nterms *
				    EXPAND_TERM_BYTES;
			if (c->expected != NULL)
				n += (uint64_t)c->expected->nterms *
				    EXPAND_TERM_BYTES;
		}
	return n;
}

void
report_json(struct json *j, const struct audit *a,
    const struct report_options *opt)
{
	size_t	 i;

	jsonw_head(j, a);
	jsonw_key(j, "params");
	jsonw_begin_array(j);
	for (i = 0; i < a->nparams; i++)
		jsonw_param(j, a, &a->params[i], opt != NULL && opt->expand);
	jsonw_end_array(j);
	jsonw_findings(j, a);
	jsonw_stale(j, a);
	jsonw_grad_norm(j, a);
	jsonw_end_object(j);
}

void
report_json_summary(struct json *j, const struct audit *a)
{
	jsonw_head(j, a);
	jsonw_findings(j, a);
	jsonw_stale(j, a);
	jsonw_grad_norm(j, a);
	jsonw_end_object(j);
}
