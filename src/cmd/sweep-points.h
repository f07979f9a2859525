/*
 * The meshes and flag combinations of a sweep, and the config of each
 * (sweep-points.c); the sweep's state, which the command (cmd-sweep.c) and
 * its workers (sweep-workers.c) share.
 */
#ifndef GRADAUDIT_SWEEP_POINTS_H
#define GRADAUDIT_SWEEP_POINTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/options.h"
#include "config/config.h"
#include "report/baseline.h"

/* The mesh dimensions a sweep enumerates, in the order of its labels. */
enum sweep_dim {
	DIM_DP, DIM_PP, DIM_TP, DIM_EP, DIM_ETP, DIM_GTP, DIM_EGTP, NDIMS
};

/*
 * The most configurations times ranks a sweep audits without
 * --force-sweep: each configuration's audit grows with the ranks of its
 * world, and the meshes of a world with many divisors multiply.  "sweep
 * --world 720720" was 7,290 meshes of a dense model, 2,721,600 of a MoE
 * one, at about 2 s each: hours.  2^25 keeps a sweep to minutes (at 2,048
 * ranks 16,384 configurations, 2 to 4 minutes on 2 shared cores) and allows
 * every sweep the tests and scripts/bench run: 10,752 configurations of
 * 64 ranks, 2,366 of a DeepSeek-V3-like model at 2,048.
 */
#define SWEEP_MAX_WORK		((uint64_t)1 << 25)

/* The flags --vary may name (sweep-points.c's vary_keys[]). */
#define SWEEP_NVARY_FLAGS	5

/* The keys of the mesh dimensions, in the order of enum sweep_dim. */
extern const enum cfg_key sweep_dim_keys[NDIMS];
/* Model sizes that follow the mesh when the config leaves them defaulted. */
extern const enum cfg_key sweep_size_keys[];
extern const size_t sweep_nsize_keys;

/*
 * What a sweep keeps of each audited mesh: a sweep of thousands of meshes
 * cannot hold thousands of audits, so each one is printed (JSON) and
 * summarized as soon as it is done, then freed.
 */
struct sweep_point {
	int		 dp, pp, tp, ep, etp, gtp, egtp;
	unsigned	 flags;		/* bit k: vary flag k set */
	char		*label;
	bool		 failed;
	/*
	 * --baseline: wrong, but accepted (not failed); and the verdict
	 * before the baseline, which --numeric's run, without it, must
	 * reach.
	 */
	bool		 accepted;
	bool		 correct;
	int		*families;	/* failing parameter families */
	int		 nfamilies;
	char		*failure_text;	/* JUnit: failed or accepted */
	char		*failure_message;	/* or the skipped one's */
	const char	*numeric;	/* --numeric outcome, or NULL */
	double		 seconds;
};

struct sweep {
	const struct config	*base;
	enum cfg_key		*vary;		/* --vary, vary_keys[] */
	int			 nvary;
	struct sweep_point	*points;
	size_t			 npoints, cap;
	int			 skipped;	/* meshes whose constraints fail */
	int			 too_big;	/* meshes too large to run */
	int			 shrunk;	/* ... run on a shrunk config */
	char			**families;	/* "layers.*.moe.router.weight" */
	int			 nfamilies;
	int			 lo[NDIMS], hi[NDIMS];	/* --keep ... --max */
	/* gtp and egtp enumerated (sweep_enumerate), else the config's. */
	bool			 gtp_axis, egtp_axis;

	/* The streamed text table. */
	const struct options	*options;
	bool			 rows;		/* print a row per mesh */
	int			 label_width;
	bool			 color;		/* --color: the verdicts */
	char			**seen;		/* findings printed in full */
	int			 nseen;
	struct baseline_draft	 draft;	/* --write-baseline */
};

/*
 * The config of a point: the base with the mesh and flags set and the
 * defaulted sizes adjusted.  NULL when it is valid, else why not, in
 * whybuf (and *c freed).
 */
const char *sweep_point_config(const struct sweep *sw, struct sweep_point *pt,
	    struct config *c, char *whybuf, size_t whylen);
/*
 * Every (dp, pp, tp, ep, etp) with dp*cp*pp*tp = world within the bounds,
 * and gtp, egtp where the sweep varies them (sweep-points.c), times every
 * flag set; cp is the config's.  Experts regroup the dp*cp*tp ranks of a
 * stage.
 */
void	 sweep_enumerate(struct sweep *sw, int world);
/*
 * The meshes and points sweep_enumerate would build, counted without
 * building them, after sweep_parse_bounds and sweep_drop_inapplicable.
 */
void	 sweep_count(struct sweep *sw, int world, uint64_t *meshes,
	    uint64_t *points);
bool	 sweep_within(const struct sweep *sw, enum sweep_dim d, int v);
/*
 * --keep DIM (the config's own size), --fix DIM=N, --min DIM=N and
 * --max DIM=N: each narrows the range of one dimension, and enumerate
 * only builds the meshes inside every range.
 */
int	 sweep_parse_bounds(struct sweep *sw, const struct options *o);
int	 sweep_parse_vary(struct sweep *sw, const struct options *o);
/*
 * A flag of the MoE block changes nothing in a dense model: varying it
 * would only audit every mesh twice (and --numeric would build an MoE
 * model from the --set), so it is dropped with a note.
 */
void	 sweep_drop_inapplicable(struct sweep *sw);
void	 sweep_free(struct sweep *sw, struct config_list *list);

#endif
