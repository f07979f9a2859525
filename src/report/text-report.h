/*
 * The text report of one audit (text-report.c).
 */
#ifndef GRADAUDIT_TEXT_REPORT_H
#define GRADAUDIT_TEXT_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "report/report.h"

struct config;

void	 report_text(FILE *, const struct audit *,
	    const struct report_options *);
/*
 * The header line naming the framework profile applied ("framework:
 * megatron-core@0.5.0, profile core_v0.4.0 (read at ...)") and, on a line
 * of its own, the keys the config overrides it with.
 */
void	 report_framework(FILE *, const struct config *);
/*
 * The cells of param's table, nrows x ncols, all NULL: put xmalloc'd texts
 * at the positions of report_cell_position, and report_print_table prints
 * the table (without the stages that lack the param), folding identical
 * neighbours when fold is set (see text-report.c), and frees the cells.
 * Only the columns before `shown` are printed (ncols: all of them); a
 * line then names the columns left out and how to see them.
 */
char		**report_table_cells(const struct audit *,
		    const struct param_result *, int *nrows, int *ncols);
void		 report_print_table(FILE *, const struct audit *,
		    const struct param_result *, char **cell, bool fold,
		    int shown);

#endif
