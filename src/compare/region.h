/*
 * What compare.c, region.c and tracepair.c share: the state of a
 * comparison, the columns of a region, and the geometry and fit of one
 * region (region.c).
 */
#ifndef GRADAUDIT_REGION_H
#define GRADAUDIT_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compare/tolerance.h"
#include "compare/trace.h"
#include "symbolic/audit.h"

/* Rows of a region read at a time. */
#define CHUNK		4096
/* More contributions than this on one region: not inferred (a bound). */
#define MAX_COLUMNS	512
/* Sampled rows per column fitted (plus SAMPLE_EXTRA). */
#define SAMPLE_PER_COLUMN 4
#define SAMPLE_EXTRA	16

struct column {
	const struct trace_tensor *x;
	uint32_t	 atom;		/* rank * micro_batches + mb */
	bool		 same_box;	/* its box is the final's */
	/* On the current region: */
	bool		 nonzero;
	uint64_t	 hash;
	int		 kept;		/* index among the fitted, or -1 */
	int		 same_as;	/* merged into this column, or -1 */
};

/* A finding being gathered: one per kind. */
struct gather {
	bool		 any;
	const char	**params;
	size_t		 nparams;
	int		*ranks;
	size_t		 nranks;
	char		*detail;	/* of the first occurrence */
};

struct cmp {
	const struct trace	*t, *ref;	/* ref NULL: against cfg */
	const struct audit	*cfg;		/* a config's symbolic audit */
	const struct param_result *cfgp;	/* the param's, in cfg */
	struct audit		*a;
	struct compare_tolerance tol;
	int			 K;
	double			*refv;		/* the reference, one param */
	struct gather		 found[FINDING__COUNT];
	double			 norm_fraction;	/* of a wrong measured norm */
	/* Per region scratch. */
	double			*buf;		/* (ncols + 2) x CHUNK */
	double			*sample;	/* rows of (ncols + 2) */
	size_t			 bufcols;
};

struct region_result {
	bool		 determined, ref_determined;
	const struct lincomb *value, *expected;
	uint64_t	 hash, ref_hash;
	double		 max_abs_diff, max_ref;
	int		 merged;	/* columns merged into another */
	int		 fitted;	/* distinct nonzero contributions */
	size_t		 rows;		/* nonzero elements sampled */
	double		 residual;	/* relative, of the held values */
	bool		 has_residual;	/* they snapped: residual is theirs */
	bool		 dependent;	/* columns dependent on the rows fitted */
};

/* x and y cover the same box of p; their boxes meet. */
bool		 same_box(const struct trace_param *p,
		    const struct trace_tensor *x, const struct trace_tensor *y);
bool		 boxes_meet(const struct trace_param *p,
		    const struct trace_tensor *x, const struct trace_tensor *y);
/* The logical (row-major) index of element i of final f's box. */
int64_t		 logical_index(const struct trace_param *p,
		    const struct trace_tensor *f, int64_t i);
/*
 * The index in column tensor x of element i of final f's box, or -1 when
 * x does not hold it.
 */
int64_t		 column_index(const struct trace_param *p,
		    const struct trace_tensor *f, const struct trace_tensor *x,
		    int64_t i);
/* qsort's order of int64_t. */
int		 cmp_i64(const void *, const void *);
/* Add cut v to the region boundaries of f, when it falls inside. */
void		 add_cut(int64_t **cuts, size_t *n, size_t *cap, int64_t v,
		    const struct trace_tensor *f);
/* Fit the region [lo, hi) of final f over its columns into *res. */
void		 audit_region(struct cmp *c, const struct trace_param *p,
		    const struct trace_tensor *f, struct column *cols,
		    size_t ncols, int64_t lo, int64_t hi,
		    struct region_result *res);

#endif
