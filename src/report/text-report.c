/*
 * The text report of one audit (text-report.h): the findings first, then
 * each parameter's table and wrong regions, the gradient norm and the
 * summary.  Expressions are printed with lc_format() into a scratch arena
 * that lives for one parameter, so a report of a huge mesh does not hold
 * every expression string at once.
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
#include "report/cells.h"
#include "report/grid.h"
#include "report/parts.h"
#include "report/report.h"
#include "report/text-report.h"
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

/*
 * The text report.
 */

struct text {
	FILE				*fp;
	const struct audit		*audit;
	const struct report_options	*opt;
	struct arena			 scratch; /* one param's strings */
	struct arena_cache		 blocks;  /* scratch's, param to param */
};

/*
 * What "wsum" weights each atom by: the chunks' loss factors, the first
 * few, then how many more (explain lists them all); those of each
 * multi-token prediction layer for its atoms, when they differ.
 */
static void
put_factor_line(FILE *fp, const struct atom_space *sp, int layer)
{
	const struct mesh *m = &sp->mesh;
	char	 q[48];
	int	 c, n = atom_space_chunks(sp);

	if (layer == 0)
		fputs("loss factors (wsum weights):", fp);
	else
		fprintf(fp, "loss factors of layer %d's atoms (t%d):", layer,
		    layer);
	/* By the tables' dp column, which counts the cp ranks too. */
	for (c = 0; c < n && c < LOSS_FACTORS_MAX; c++) {
		q_format(layer == 0 ? atom_chunk_factor(sp, c) :
		    atom_mtp_chunk_factor(sp, layer, c), q, sizeof q);
		fprintf(fp, "%s m%d dp%d %s", c > 0 ? "," : "", c / m->dp,
		    c % m->dp, q);
	}
	if (n > LOSS_FACTORS_MAX)
		fprintf(fp, " and %d more (gradaudit explain lists every "
		    "chunk)", n - LOSS_FACTORS_MAX);
	putc('\n', fp);
}

static void
put_loss_factors(FILE *fp, const struct atom_space *sp)
{
	int	 k;

	if (atom_space_main_weighted(sp))
		put_factor_line(fp, sp, 0);
	for (k = 1; atom_space_mtp_weighted(sp) && k <= sp->mtp; k++)
		put_factor_line(fp, sp, k);
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

/*
 * run --shrink: which config the numeric audit proved, as the --set
 * options that give it, so that the user can audit it again.
 */
static void
put_shrunk(FILE *fp, const struct audit *a)
{
	size_t	i;

	if (a->shrunk) {
		fprintf(fp, "numeric: proven on a shrunk config with the same "
		    "symbolic verdict, world %lld:",
		    (long long)a->shrunk_world);
		for (i = 0; i < a->nshrunk_sets; i++)
			fprintf(fp, " --set %s", a->shrunk_sets[i]);
		putc('\n', fp);
		if (a->shrunk_world == a->mesh.world)
			fputs("numeric: no smaller mesh keeps the symbolic "
			    "verdict: only model sizes shrunk\n", fp);
	} else if (a->shrink_note != NULL)
		fprintf(fp, "numeric: %s; %s\n", a->shrink_note,
		    a->numeric ? "the full config is proven" :
		    "nothing proven numerically");
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
	put_shrunk(t->fp, a);
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
		if (!rp_cell_wrong(&p->cells[i]))
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
		rp_put_rank_list(t->fp, ranks, n);
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
		if (rp_cell_wrong(&cells[i]) && !wrong) {
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
		rp_row_label(ax, first, a, sizeof a);
		rp_row_label(ax, last, b, sizeof b);
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

	rp_row_axes_of(a, p, &ax);
	*nrows = rp_row_count(&ax);
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
	report_print_table(t->fp, t->audit, p, cell, !t->opt->verbose, ncols);
}

void
report_print_table(FILE *fp, const struct audit *a,
    const struct param_result *p, char **cell, bool fold, int shown)
{
	struct row_axes	 ax;
	struct grid	*g, *full;
	char		 buf[160];
	size_t		 i;
	int		 nrows, ncols, width, r, c, k, nr, nc;
	int		*cfirst, *clast, *rfirst, *rlast;

	rp_row_axes_of(a, p, &ax);
	nrows = rp_row_count(&ax);
	ncols = ax.ncols;		/* the cells' stride */
	width = shown < ncols ? shown : ncols;
	/* Column runs: [cfirst[k], clast[k]]. */
	cfirst = xcalloc((size_t)ncols, sizeof *cfirst);
	clast = xcalloc((size_t)ncols, sizeof *clast);
	for (nc = 0, c = 0; c < width; c = clast[nc++] + 1) {
		cfirst[nc] = clast[nc] = c;
		while (fold && clast[nc] + 1 < width) {
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
			for (c = 0; c < width; c++)
				if (!same_text(cell[(size_t)r * ncols + c],
				    cell[(size_t)(rlast[nr] + 1) * ncols + c]))
					break;
			if (c < width)
				break;
			rlast[nr]++;
		}
	}
	full = report_param_grid(a, p);
	g = grid_new(nr, nc, grid_corner(full));
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
	/* Named as the column labels name them: "dp8", or a run "dp8-127". */
	if (width == ncols - 1)
		fprintf(fp, "(%s%d not shown: its values differ from the "
		    "columns before it; -v shows every column)\n", ax.col_name,
		    width);
	else if (width < ncols)
		fprintf(fp, "(%s%d-%d not shown: their values differ from "
		    "column to column; -v shows every column)\n", ax.col_name,
		    width, ncols - 1);
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
	pv = cells_pieces_of(pc, sp, v);
	pe = cells_pieces_of(pc, sp, e);
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
	rp_put_rank_list(t->fp, ranks, n);
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
			if (!rp_cell_wrong(c) || (want >= 0 && c->rank != want))
				continue;
			put_region_head(t, &c->rank, 1, c);
			put_value_vs_expected(t, &pc, c, c->rank, true);
			put_numeric_error(t, c);
			putc('\n', t->fp);
		}
		cells_piece_cache_free(&pc);
		return;
	}
	g = cells_group(&t->audit->atoms, p, &pc, true, &ng);
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
		    rp_plural((int64_t)(total - shown)));
	for (i = 0; i < ng; i++)
		free(g[i].ranks);
	free(g);
	cells_piece_cache_free(&pc);
}

/* Whether rank has a wrong cell in p. */
static bool
rank_wrong_in(const struct param_result *p, int rank)
{
	size_t	 i;

	for (i = 0; i < p->ncells; i++)
		if (p->cells[i].rank == rank && rp_cell_wrong(&p->cells[i]))
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
	/*
	 * The expressions of one parameter are not needed any more: their
	 * blocks go to t->blocks, for the next parameter's.
	 */
	arena_free(&t->scratch);
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
	rp_put_finding_subject(t->fp, f);
	rp_put_acceptance(t->fp, f);
	putc('\n', t->fp);
	if (t->opt->verbose) {
		fputs("  finding: ", t->fp);
		rp_put_finding(t->fp, f);
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
		rp_put_finding(t->fp, f);
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
	rp_put_rank_list(t->fp, ranks, n);
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
		rp_put_rank_list(t->fp, cl->ranks, cl->nranks);
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

/*
 * The rows no update reaches (model/stale.h): a rank, the rows of the
 * logical weight and the elements of its own shard they are.
 */
static void
print_stale_rows(struct text *t)
{
	const struct stale_rows_cell	*c;
	size_t				 i;

	if (t->audit->nstale_rows == 0)
		return;
	fprintf(t->fp, "rows no optimizer step updates (the gradients are "
	    "right):\n");
	for (i = 0; i < t->audit->nstale_rows; i++) {
		c = &t->audit->stale_rows[i];
		fprintf(t->fp, "  %s rank %d: rows [%lld,%lld), elements "
		    "[%lld,%lld) of the weight it holds\n", c->param, c->rank,
		    (long long)c->row_lo, (long long)c->row_hi,
		    (long long)c->lo, (long long)c->hi);
	}
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
		    rp_plural((int64_t)n));
}

static void
print_summary(struct text *t)
{
	char	*s = report_summary(t->audit);
	bool	 good = (audit_wrong_params(t->audit) == 0 &&
		    t->audit->nstale_rows == 0) || audit_accepted(t->audit);

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
	if (t->opt->quiet && t->audit->shrunk)
		fprintf(t->fp, "; numeric: shrunk to world %lld",
		    (long long)t->audit->shrunk_world);
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
	arena_cache_init(&t.blocks);
	arena_init_cached(&t.scratch, &t.blocks);
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
			    rp_plural((int64_t)titles));
		print_grad_norm(&t);
		print_stale_rows(&t);
		print_consistent(&t);
	}
	print_summary(&t);
	arena_free(&t.scratch);
	arena_cache_free(&t.blocks);
}
