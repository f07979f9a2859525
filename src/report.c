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

#include "arena.h"
#include "audit.h"
#include "config.h"
#include "hash.h"
#include "json.h"
#include "lincomb.h"
#include "report.h"
#include "framework.h"
#include "text.h"
#include "xmalloc.h"

#ifdef PACKAGE_VERSION
#define REPORT_VERSION	PACKAGE_VERSION
#else
#define REPORT_VERSION	"0.1.0"
#endif

/* Longer expressions are cut in text mode (JSON always has them whole). */
#define EXPR_MAX		100
/* Wrong regions listed per parameter without -v. */
#define REGION_LINES_MAX	16
/* Parameter names listed in one finding line before "and N more". */
#define FINDING_PARAMS_MAX	3

#define ANSI_RED	"\033[31m"
#define ANSI_GREEN	"\033[32m"
#define ANSI_BOLD	"\033[1m"
#define ANSI_RESET	"\033[0m"

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
	const char	*name[3];
	int		 size[3];
	const char	*col_name;
	int		 ncols;
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
	if (ax->ncols < 1)
		ax->ncols = 1;
}

static int
coord_on_axis(const struct coord *c, const char *name)
{
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
	int	 digit[3], i;
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
		v = coord_on_axis(&c->coord, ax.name[i]);
		if (v < 0 || v >= ax.size[i])
			fatalx("report_cell_position: rank %d has %s %d of %d",
			    c->rank, ax.name[i], v, ax.size[i]);
		r = r * ax.size[i] + v;
	}
	*row = r;
	*col = p->is_expert ? c->coord.edp : c->coord.dp;
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

static void
put_finding(FILE *fp, const struct finding *f)
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
	fprintf(fp, ": %s", f->message != NULL ? f->message : "");
	if (f->op != NULL && f->dim != NULL)
		fprintf(fp, " [op: %s, dim: %s]", f->op, f->dim);
	else if (f->op != NULL)
		fprintf(fp, " [op: %s]", f->op);
	else if (f->dim != NULL)
		fprintf(fp, " [dim: %s]", f->dim);
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

	put_finding(fp, f);
	if (f->fix != NULL)
		fprintf(fp, " Fix: %s", f->fix);
	return memstream_close(fp, &buf);
}

/* The plural of the report's nouns: "1 rank", "2 ranks", "0 ranks". */
static const char *
plural(int64_t n)
{
	return n == 1 ? "" : "s";
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
	return s;
}

/*
 * The text report.
 */

struct text {
	FILE				*fp;
	const struct audit		*audit;
	const struct report_options	*opt;
	struct arena			 scratch; /* one param's strings */
};

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

/*
 * "framework: megatron-core@0.5.0, profile core_v0.4.0 (read at ...)",
 * and the keys the config writes over the profile's.
 */
void
report_framework(FILE *fp, const struct config *c)
{
	const struct fw_profile	*p = c->profile;
	struct keyset		 over;
	bool			 any = false;
	int			 k;

	if (p == NULL) {
		fputs("framework: reference (the ideal synchronization)\n", fp);
		return;
	}
	fprintf(fp, "framework: %s, profile %s (read at %s)\n", c->framework,
	    p->label, p->read_at);
	over = cfg_profile_overridden(c);
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

	if (a->config != NULL) {
		fputs("config: ", t->fp);
		put_visible(t->fp, a->config->file);
		fputs(" (", t->fp);
		put_visible(t->fp, a->config->name);
		fputs(")\n", t->fp);
	}
	fprintf(t->fp, "mesh: dp=%d pp=%d tp=%d ep=%d etp=%d edp=%d "
	    "world=%d\n", m->dp, m->pp, m->tp, m->ep, m->etp, m->edp,
	    m->world);
	if (a->config != NULL)
		report_framework(t->fp, a->config);
	if (!a->numeric)
		fputs("arithmetic: symbolic only\n", t->fp);
	else
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
	if (p->tied_with != NULL)
		fprintf(t->fp, " (tied with %s)", p->tied_with);
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
	} else if (n == 1) {
		const char *e = lc_format(&t->scratch, shown->value, "g");

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

static void
print_param_table(struct text *t, const struct param_result *p)
{
	struct grid	*g;
	char		 buf[96];
	size_t		 i, j;
	int		 row, col, nrows, ncols;

	g = report_param_grid(t->audit, p);
	for (i = 0; i < p->ncells; i = j) {
		for (j = i + 1; j < p->ncells &&
		    p->cells[j].rank == p->cells[i].rank; j++)
			continue;
		rank_cell_text(t, &p->cells[i], j - i, buf, sizeof(buf));
		report_cell_position(t->audit, p, &p->cells[i], &row, &col,
		    &nrows, &ncols, NULL, 0);
		grid_set(g, row, col, buf);
	}
	grid_drop_empty_rows(g);
	grid_print(t->fp, g);
	grid_free(g);
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

static void
put_lincomb(struct text *t, const struct lincomb *x)
{
	if (x == NULL) {
		fputs("?", t->fp);
		return;
	}
	put_expr(t->fp, lc_format(&t->scratch, x, "g"), x->nterms);
}

static void
print_region_line(struct text *t, const struct cell *c)
{
	const struct audit	*a = t->audit;

	fprintf(t->fp, "rank %d [%" PRId64 ",%" PRId64 "): ", c->rank, c->lo,
	    c->hi);
	put_lincomb(t, c->value);
	fputs("  expected ", t->fp);
	put_lincomb(t, c->expected);
	if (a->numeric && a->arith != ARITH_EXACT && c->has_hash)
		fprintf(t->fp, "  (max %.3g ulps, relative error %.3g)",
		    c->max_ulps, c->max_rel_error);
	putc('\n', t->fp);
}

static void
print_wrong_regions(struct text *t, const struct param_result *p)
{
	size_t	 i, shown = 0, total = 0;

	for (i = 0; i < p->ncells; i++) {
		if (!cell_wrong(&p->cells[i]))
			continue;
		total++;
		if (shown == REGION_LINES_MAX && !t->opt->verbose)
			continue;
		print_region_line(t, &p->cells[i]);
		shown++;
	}
	if (shown < total)
		fprintf(t->fp, "... and %zu more wrong region%s (-v lists "
		    "them all)\n", total - shown,
		    plural((int64_t)(total - shown)));
}

static void
print_param(struct text *t, const struct param_result *p)
{
	print_title(t, p);
	print_param_table(t, p);
	print_wrong_regions(t, p);
	putc('\n', t->fp);
	/* The expressions of one parameter are not needed any more. */
	arena_free(&t->scratch);
	arena_init(&t->scratch);
}

static void
print_findings(struct text *t)
{
	const struct finding	*f;
	size_t			 i;

	for (i = 0; i < t->audit->nfindings; i++) {
		f = &t->audit->findings[i];
		fprintf(t->fp, "%sfinding:%s ", paint(t, ANSI_BOLD),
		    paint(t, ANSI_RESET));
		put_finding(t->fp, f);
		putc('\n', t->fp);
		if (f->fix != NULL)
			fprintf(t->fp, "  fix: %s\n", f->fix);
	}
	if (t->audit->nfindings > 0)
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
	bool	 good = audit_wrong_params(t->audit) == 0;

	if (t->opt->quiet && t->opt->name_summary &&
	    t->audit->config != NULL) {
		put_visible(t->fp, t->audit->config->name);
		fputs(": ", t->fp);
	}
	fprintf(t->fp, "%s%s%s\n", paint(t, good ? ANSI_GREEN : ANSI_RED), s,
	    paint(t, ANSI_RESET));
	free(s);
}

void
report_text(FILE *fp, const struct audit *a, const struct report_options *opt)
{
	struct text	 t;
	size_t		 i;

	t.fp = fp;
	t.audit = a;
	t.opt = opt;
	arena_init(&t.scratch);
	if (!opt->quiet) {
		print_header(&t);
		for (i = 0; i < a->nparams; i++)
			if (!a->params[i].consistent || !a->params[i].correct)
				print_param(&t, &a->params[i]);
		print_findings(&t);
		print_consistent(&t);
	}
	print_summary(&t);
	arena_free(&t.scratch);
}

/*
 * The JSON report: the field names of SPEC section 9, which are stable.
 */

static void
json_key_hash(struct json *j, const char *key, uint64_t h)
{
	char	 hex[17];

	hash_hex(h, hex);
	json_key_string(j, key, hex);
}

static void
json_key_string_or_null(struct json *j, const char *key, const char *s)
{
	if (s != NULL)
		json_key_string(j, key, s);
	else
		json_key_null(j, key);
}

/* NaN and infinities have no JSON form. */
static void
json_key_double(struct json *j, const char *key, double v)
{
	char	 buf[32];

	if (!isfinite(v)) {
		json_key_null(j, key);
		return;
	}
	snprintf(buf, sizeof(buf), "%.17g", v);
	json_key(j, key);
	json_raw_number(j, buf);
}

static void
json_mesh(struct json *j, const struct mesh *m)
{
	json_key(j, "mesh");
	json_begin_object(j);
	json_key_int(j, "dp", m->dp);
	json_key_int(j, "pp", m->pp);
	json_key_int(j, "tp", m->tp);
	json_key_int(j, "ep", m->ep);
	json_key_int(j, "etp", m->etp);
	json_key_int(j, "edp", m->edp);
	json_key_int(j, "world", m->world);
	json_end_object(j);
}

/*
 * "framework": the profile applied and the keys the config wrote over it;
 * "settings": every setting in effect, whatever its origin.
 */
static void
json_settings(struct json *j, const struct config *c)
{
	const struct fw_profile	*p = c->profile;
	struct keyset		 over;
	char			 v[64];
	int			 k;

	json_key(j, "framework");
	json_begin_object(j);
	if (p == NULL)
		json_key_string(j, "name", "reference");
	else {
		json_key_string(j, "name", p->framework->name);
		json_key_string(j, "spec", c->framework);
		json_key_string(j, "profile", p->label);
		json_key_string(j, "read_at", p->read_at);
		over = cfg_profile_overridden(c);
		json_key(j, "overridden");
		json_begin_array(j);
		for (k = 0; k < KEY__COUNT; k++)
			if (keyset_has(&over, k))
				json_string(j, cfg_key_path(k));
		json_end_array(j);
	}
	json_end_object(j);
	json_key(j, "settings");
	json_begin_object(j);
	for (k = 0; k < KEY__COUNT; k++) {
		if (!cfg_key_is_setting(k) || !cfg_key_is_active(c, k) ||
		    cfg_key_is_job(k))
			continue;
		cfg_key_value(c, k, v, sizeof(v));
		json_key_string(j, cfg_key_path(k), v);
	}
	json_end_object(j);
}

/* {"g0": "1/2", ...}: atom names to reduced fractions. */
static void
json_terms(struct json *j, const char *key, const struct lincomb *x)
{
	char		 atom[16], coef[48];
	uint32_t	 i;

	json_key(j, key);
	if (x == NULL) {
		json_null(j);
		return;
	}
	json_begin_object(j);
	for (i = 0; i < x->nterms; i++) {
		snprintf(atom, sizeof(atom), "g%" PRIu32, x->terms[i].atom);
		q_format(x->terms[i].coef, coef, sizeof(coef));
		json_key_string(j, atom, coef);
	}
	json_end_object(j);
}

static void
json_expr(struct json *j, struct arena *scratch, const char *key,
    const struct lincomb *x)
{
	json_key_string_or_null(j, key, x != NULL ?
	    lc_format(scratch, x, "g") : NULL);
}

static void
json_cell_numeric(struct json *j, const struct audit *a, const struct cell *c)
{
	if (!c->has_hash)
		return;
	json_key_hash(j, "hash", c->hash);
	json_key_hash(j, "reference_hash", c->reference_hash);
	json_key_bool(j, "numeric_ok", c->numeric_ok);
	if (a->arith != ARITH_EXACT) {
		json_key_double(j, "max_ulps", c->max_ulps);
		json_key_double(j, "max_rel_error", c->max_rel_error);
	}
}

static void
json_cell(struct json *j, const struct audit *a, const struct cell *c,
    struct arena *scratch)
{
	json_begin_object(j);
	json_key_int(j, "rank", c->rank);
	json_key_int(j, "pp", c->coord.pp);
	json_key_int(j, "dp", c->coord.dp);
	json_key_int(j, "tp", c->coord.tp);
	json_key_int(j, "ep", c->coord.ep);
	json_key_int(j, "etp", c->coord.etp);
	json_key_int(j, "edp", c->coord.edp);
	json_key(j, "region");
	json_begin_array(j);
	json_int(j, c->lo);
	json_int(j, c->hi);
	json_end_array(j);
	json_key_bool(j, "used", c->used);
	if (c->used)
		json_key_bool(j, "ok", c->ok);
	else
		json_key_null(j, "ok");
	json_cell_numeric(j, a, c);
	json_terms(j, "terms", c->value);
	json_terms(j, "expected", c->expected);
	json_expr(j, scratch, "expr", c->value);
	json_expr(j, scratch, "expected_expr", c->expected);
	json_end_object(j);
}

static void
json_param(struct json *j, const struct audit *a, const struct param_result *p)
{
	struct arena	 scratch;
	size_t		 i;

	arena_init(&scratch);
	json_begin_object(j);
	json_key_string(j, "name", p->name);
	json_key_string_or_null(j, "tied_with", p->tied_with);
	json_key_bool(j, "consistent", p->consistent);
	json_key_bool(j, "correct", p->correct);
	if (p->has_hash)
		json_key_hash(j, "reference_hash", p->reference_hash);
	json_key(j, "cells");
	json_begin_array(j);
	for (i = 0; i < p->ncells; i++)
		json_cell(j, a, &p->cells[i], &scratch);
	json_end_array(j);
	json_end_object(j);
	arena_free(&scratch);
}

static void
json_finding(struct json *j, const struct finding *f)
{
	size_t	 i;

	json_begin_object(j);
	json_key_string(j, "kind", finding_kind_name(f->kind));
	json_key_string_or_null(j, "param", f->param);
	json_key(j, "params");
	json_begin_array(j);
	for (i = 0; i < f->nparams; i++)
		json_string(j, f->params[i]);
	json_end_array(j);
	json_key(j, "ranks");
	json_begin_array(j);
	for (i = 0; i < f->nranks; i++)
		json_int(j, f->ranks[i]);
	json_end_array(j);
	json_key_string_or_null(j, "op", f->op);
	json_key_string_or_null(j, "dim", f->dim);
	json_key_string_or_null(j, "message", f->message);
	json_key_string_or_null(j, "fix", f->fix);
	json_end_object(j);
}

static void
json_numerics(struct json *j, const struct audit *a)
{
	if (!a->numeric)
		return;
	json_key(j, "numerics");
	json_begin_object(j);
	json_key_string(j, "arith", arith_name(a->arith));
	json_key_int(j, "procs", a->procs);
	json_key_bool(j, "correct", a->numeric_correct);
	json_end_object(j);
}

/* sweep: "varied": {"dp": 4, ..., "tie_embeddings": true}. */
static void
json_varied(struct json *j, const struct audit *a)
{
	size_t	i;

	if (a->nvaried == 0)
		return;
	json_key(j, "varied");
	json_begin_object(j);
	for (i = 0; i < a->nvaried; i++) {
		if (a->varied[i].flag)
			json_key_bool(j, a->varied[i].name, a->varied[i].value);
		else
			json_key_int(j, a->varied[i].name, a->varied[i].value);
	}
	json_end_object(j);
}

void
report_json(struct json *j, const struct audit *a)
{
	size_t	 i;

	json_begin_object(j);
	json_key_string(j, "tool", "gradaudit");
	json_key_string(j, "version", REPORT_VERSION);
	json_key_string_or_null(j, "config",
	    a->config != NULL ? a->config->file : NULL);
	json_key_string_or_null(j, "name",
	    a->config != NULL ? a->config->name : NULL);
	json_mesh(j, &a->mesh);
	if (a->config != NULL)
		json_settings(j, a->config);
	json_numerics(j, a);
	json_key_bool(j, "consistent", a->consistent);
	json_key_bool(j, "correct", a->correct);
	if (a->numeric_verdict != NULL)
		json_key_string(j, "numeric_verdict", a->numeric_verdict);
	json_varied(j, a);
	json_key(j, "params");
	json_begin_array(j);
	for (i = 0; i < a->nparams; i++)
		json_param(j, a, &a->params[i]);
	json_end_array(j);
	json_key(j, "findings");
	json_begin_array(j);
	for (i = 0; i < a->nfindings; i++)
		json_finding(j, &a->findings[i]);
	json_end_array(j);
	json_end_object(j);
}
