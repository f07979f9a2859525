/*
 * Pieces shared by the reports of one audit (parts.c).
 */
#ifndef GRADAUDIT_REPORT_PARTS_H
#define GRADAUDIT_REPORT_PARTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct audit;
struct cell;
struct coord;
struct finding;
struct param_result;

struct row_axes {
	int		 naxes;
	const char	*name[4];
	int		 size[4];
	const char	*col_name;
	int		 ncols;
	int		 col_div;	/* column: the dp (edp) index % it */
};

bool	 rp_cell_wrong(const struct cell *c);
int	 rp_coord_on_axis(const struct row_axes *ax,
	    const struct param_result *p, const struct coord *c,
	    const char *name);
FILE *rp_memstream(char **buf, size_t *len);
char *rp_memstream_close(FILE *fp, char **buf);
/* The plural of the report's nouns: "1 rank", "2 ranks", "0 ranks". */
const char *rp_plural(int64_t n);
/* The baseline entry that accepted it: "(accepted.yaml:3:3, until ...)". */
void	 rp_put_acceptance(FILE *fp, const struct finding *f);
void	 rp_put_finding(FILE *fp, const struct finding *f);
/* "wrong-order: embedding.weight (ranks 1, 2)" */
void	 rp_put_finding_subject(FILE *fp, const struct finding *f);
/*
 * Ranks as a short list: runs of three or more consecutive ranks become
 * "a-b", so a stage of 512 wrong ranks takes one line ("ranks 0-511").
 */
void	 rp_put_rank_list(FILE *fp, const int *ranks, size_t n);
void	 rp_row_axes_of(const struct audit *a, const struct param_result *p,
	    struct row_axes *ax);
int	 rp_row_count(const struct row_axes *ax);
/* "pp1 tp0" for a row index: the digits of the mixed-radix number. */
void	 rp_row_label(const struct row_axes *ax, int row, char *buf,
	    size_t len);

#endif
