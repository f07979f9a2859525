/*
 * What the reports of one audit (SPEC section 9) share: their options,
 * the summary line, a finding on one line, and where a cell goes in its
 * parameter's table (a grid, grid.h).  The text report is text-report.h,
 * the JSON report json-report.h.
 */
#ifndef GRADAUDIT_REPORT_H
#define GRADAUDIT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct audit;
struct cell;
struct finding;
struct json;
struct param_result;
struct grid;

/* The version every JSON object names. */
#ifdef PACKAGE_VERSION
#define REPORT_VERSION	PACKAGE_VERSION
#else
#define REPORT_VERSION	"0.1.0"
#endif

/* The colours of a text report (--color), each reset on its own line. */
#define ANSI_RED	"\033[31m"
#define ANSI_GREEN	"\033[32m"
#define ANSI_BOLD	"\033[1m"
#define ANSI_RESET	"\033[0m"

struct report_options {
	bool	verbose;	/* -v: one line per consistent parameter */
	bool	quiet;		/* -q: the summary line only */
	bool	color;		/* ANSI colours: the caller decides */
	/*
	 * Several configs in one report: with quiet, the summary line starts
	 * with the config's name, or nobody could tell the lines apart.
	 */
	bool	name_summary;
	/* JSON: one cell per rank and region, terms atom by atom (--expand). */
	bool	expand;
	/* Text: --param NAME shows that parameter only; NULL for all. */
	const char *param;
	/* Text: --rank N shows that rank's wrong regions only. */
	bool	select_rank;
	int	rank;
};

/*
 * The summary line without its newline, xmalloc'd:
 * "2 of 14 parameters wrong on 2 of 4 ranks" or
 * "all 14 parameters consistent and correct on 4 ranks".
 */
char	*report_summary(const struct audit *);
/* One finding on one line, without newline or "finding: " prefix, xmalloc'd. */
char	*report_finding_line(const struct finding *);

/*
 * Where a cell of a parameter goes in that parameter's table.  The rule:
 *
 *  - dense parameters: columns are dp; rows are pipeline stages, split by
 *    the tp coordinate when tp > 1 (whether the param is replicated over tp,
 *    where the tp rows must agree, or sharded, where each tp row holds its
 *    own shard: either way every rank gets a position of its own);
 *  - expert parameters: columns are edp; rows are pipeline stages, split by
 *    the ep coordinate when ep > 1 and then by etp when etp > 1.
 *
 * The layout covers every stage of the mesh (nrows x ncols), whatever
 * stages hold the param, so that the position is a pure function of the
 * rank's coordinates; drop the empty rows before printing.  rowlabel gets
 * "pp0", "pp0 tp1" or "pp1 ep0 etp1".
 */
void	 report_cell_position(const struct audit *,
	    const struct param_result *, const struct cell *, int *row,
	    int *col, int *nrows, int *ncols, char *rowlabel,
	    size_t rowlabel_len);
/*
 * An empty grid for param's table with every row and column labelled
 * ("pp \ dp" corner, "dp0".."dpN" or "edp0"..): fill it with grid_set at
 * the positions of report_cell_position.
 */
struct grid	*report_param_grid(const struct audit *,
		    const struct param_result *);

#endif
