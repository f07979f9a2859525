/*
 * A grid of text cells with row and column labels (grid.h), printed with
 * every column sized first: the pp x dp matrices of the Megatron-LM #844
 * report, which a user who filed it should recognise in ours.
 */
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
#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/lincomb.h"
#include "symbolic/meshsum.h"

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

const char *
grid_corner(const struct grid *g)
{
	return g->corner;
}
