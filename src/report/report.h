/*
 * The text and JSON reports of one audit (SPEC section 9), and the small
 * table type they share with `explain`: a grid of per-rank strings laid out
 * like the pp x dp matrices of the Megatron-LM #844 report.
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

void	 report_text(FILE *, const struct audit *,
	    const struct report_options *);
/* One JSON object (SPEC section 9); the caller wraps several in an array. */
void	 report_json(struct json *, const struct audit *,
	    const struct report_options *);
/*
 * --expand writes a cell per rank and region and every atom of its terms:
 * its size grows with the square of the world.  Above this many bytes, as
 * report_expand_size estimates them, it is refused unless forced
 * (--force-expand), since one such report of a 4,096-rank mesh was 11.6
 * GB (issue 26).
 */
#define REPORT_EXPAND_MAX	((uint64_t)256 << 20)
uint64_t report_expand_size(const struct audit *);
/*
 * The same object without "params": verdicts, counts, settings and
 * findings, for --format jsonl and explain.
 */
void	 report_json_summary(struct json *, const struct audit *);

/*
 * The summary line without its newline, xmalloc'd:
 * "2 of 14 parameters wrong on 2 of 4 ranks" or
 * "all 14 parameters consistent and correct on 4 ranks".
 */
char	*report_summary(const struct audit *);
/*
 * The header line naming the framework profile applied ("framework:
 * megatron-core@0.5.0, profile core_v0.4.0 (read at ...)") and, on a line
 * of its own, the keys the config overrides it with.
 */
struct config;
void	 report_framework(FILE *, const struct config *);
/* One finding on one line, without newline or "finding: " prefix, xmalloc'd. */
char	*report_finding_line(const struct finding *);

/*
 * A grid of strings with row and column labels.  grid_print sizes every
 * column first (ANSI colour sequences take no width), then prints the
 * header, a rule of dashes and the rows, left-aligned, two spaces between
 * columns and no trailing blanks.
 */
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
/*
 * The cells of param's table, nrows x ncols, all NULL: put xmalloc'd texts
 * at the positions of report_cell_position, and report_print_table prints
 * the table (without the stages that lack the param), folding identical
 * neighbours when fold is set (see report.c), and frees the cells.
 */
char		**report_table_cells(const struct audit *,
		    const struct param_result *, int *nrows, int *ncols);
void		 report_print_table(FILE *, const struct audit *,
		    const struct param_result *, char **cell, bool fold);

#endif
