/*
 * A grid of strings with row and column labels (grid.c): the small table
 * type of the reports and of `explain`, laid out like the pp x dp
 * matrices of the Megatron-LM #844 report.  grid_print sizes every column
 * first (ANSI colour sequences take no width), then prints the header, a
 * rule of dashes and the rows, left-aligned, two spaces between columns
 * and no trailing blanks.
 */
#ifndef GRADAUDIT_GRID_H
#define GRADAUDIT_GRID_H

#include <stdio.h>

struct grid;

struct grid	*grid_new(int nrows, int ncols, const char *corner);
void		 grid_row_label(struct grid *, int row, const char *);
void		 grid_col_label(struct grid *, int col, const char *);
void		 grid_set(struct grid *, int row, int col,
		    const char *text);
/* Remove the rows whose cells are all empty (stages that lack the param). */
void		 grid_drop_empty_rows(struct grid *);
void		 grid_print(FILE *, const struct grid *);
void		 grid_free(struct grid *);
/* The text of the top-left cell, as grid_new got it. */
const char	*grid_corner(const struct grid *);

#endif
