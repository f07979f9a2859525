/*
 * The result of auditing one configuration: what the symbolic engine derived
 * for every parameter, rank and element region, what the numeric engine
 * measured (when it ran), and the findings.  The report writers (text,
 * JSON, JUnit) only read this structure; the engines only fill it.
 */
#ifndef GRADAUDIT_AUDIT_H
#define GRADAUDIT_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "config/config.h"
#include "model/mesh.h"
#include "symbolic/atom.h"
#include "symbolic/effect.h"
#include "symbolic/lincomb.h"

struct baseline_entry;
struct config;
struct lincomb;

enum finding_kind {
	FINDING_MISSING_REDUCTION,	/* Partial declared Replicate: never reduced */
	FINDING_DOUBLE_COUNT,		/* Replicate reduced as if Partial */
	FINDING_WRONG_ORDER,		/* a collective combined unlike states */
	FINDING_WRONG_SCALE,		/* right atoms, wrong factor */
	FINDING_WRONG_GROUP,		/* reduced over the wrong ranks */
	FINDING_REPLICA_MISMATCH,	/* replicas disagree, no other cause */
	FINDING_WRONG_WEIGHTS,		/* right atoms, unequal token weights */
	FINDING_OVER_COUNT,		/* grad norm counts elements twice */
	FINDING_UNDER_COUNT,		/* grad norm misses elements */
	FINDING_INCONSISTENT_CLIP,	/* ranks clip by different norms */
	FINDING_WRONG_VALUE,		/* compare: differs, no expression */
	FINDING_STALE_ROWS,		/* rows no update reaches (no value) */
	FINDING__COUNT
};

enum arith {
	ARITH_EXACT,		/* GF(2^61-1) */
	ARITH_FLOAT64,
	ARITH_FLOAT32
};

/*
 * One rank's view of one contiguous element region of a parameter.  A
 * 131,072-rank audit holds a million of them, so a cell keeps no more
 * than it must (issue 24): the rank's coordinates are
 * mesh_coord_of(&audit->mesh, rank), not a copy, and no padding falls
 * between the members.  72 bytes, where it was 128.
 */
struct cell {
	int		 rank;
	bool		 used;		/* the rank's optimizer uses these elements */
	bool		 ok;		/* used value == expected (meaningful iff used) */
	bool		 has_hash;	/* a numeric audit measured it */
	bool		 numeric_ok;		/* numeric value matches reference */
	int64_t		 lo, hi;	/* region in the rank's local shard, [lo, hi) */
	const struct lincomb *value;	/* symbolic: what the rank holds */
	const struct lincomb *expected;	/* symbolic: (1/dp) sum of complete grads */
	/* Numeric audit (has_hash): XXH3-64 of the values the rank holds. */
	uint64_t	 hash;
	uint64_t	 reference_hash;	/* same region of the reference */
	double		 max_ulps;		/* float numerics only */
	double		 max_rel_error;		/* float numerics only */
};

/*
 * Rows of a weight on one rank that no optimizer step reaches
 * (model/stale.h): a fact of the layout, not of a gradient value.
 */
struct stale_rows_cell {
	const char	*param;		/* "embedding.weight" */
	int		 rank;
	int64_t		 lo, hi;	/* elements of the rank's local weight */
	int64_t		 row_lo, row_hi; /* rows of the logical weight */
};

struct param_result {
	const char	*name;		/* "embedding.weight" */
	const char	*tied_with;	/* "output.weight" or NULL */
	/*
	 * With a virtual pipeline (has_chunk): the model chunk of the stage
	 * holding it (mesh.vpp), and of its tied copy.
	 */
	bool		 has_chunk;
	int		 chunk, tied_chunk;
	int64_t		 elems;		/* logical element count */
	bool		 is_expert;	/* columns of its table are edp, not dp */
	bool		 consistent;	/* all replicas that must agree do */
	bool		 correct;	/* every used cell is ok */
	bool		 has_hash;
	uint64_t	 reference_hash;	/* of the whole reference gradient */
	struct cell	*cells;		/* sorted by rank, then region */
	size_t		 ncells;
	/* compare: what the inference could not say, or NULL (lines). */
	const char	*note;
};

/* One --set KEY=VALUE of a finding's fix (fix.h). */
struct fix_setting {
	const char	*key;		/* "loss.scale" */
	const char	*value;		/* "dp-cp" */
};

struct finding {
	enum finding_kind kind;
	const char	*param;		/* first affected parameter */
	const char	**params;	/* every affected parameter */
	size_t		 nparams;
	int		*ranks;		/* affected ranks, ascending */
	size_t		 nranks;
	const char	*op;		/* "router weight gradient", "dp reduce-scatter" */
	const char	*dim;		/* mesh dimension: "tp", "dp", "edp", "pp" */
	const char	*message;	/* one or two sentences: what went wrong */
	const char	*fix;		/* one sentence: what to change */
	struct effect	 effect;	/* how much (effect.h) */
	/*
	 * --baseline (baseline.h): whether an entry of the file accepts this
	 * finding, and the entry that matched it: its reason, where it is
	 * ("accepted.yaml:3:3") and its expiry date.  An entry past its date
	 * still matches but no longer accepts: reason set, accepted false.
	 * All NULL and false when no entry matched.
	 */
	bool		 accepted;
	const char	*reason;
	const char	*baseline_at;
	const char	*expires;	/* "2026-12-31", or NULL */
	/*
	 * The setting that decided the step, loss factor or norm that went
	 * wrong (KEY__COUNT: none), as the engines saw it; fix.c may find
	 * that another one is the cause.
	 */
	enum cfg_key	 cause;
	/*
	 * The fix as settings (fix.c): the --set options that make this
	 * finding disappear from this config without adding another, checked
	 * by auditing it again with them; none when no change of the
	 * settings that bear on it does, and the fix is prose only.  The
	 * alternative, when there is one, changes what the config states
	 * rather than what the framework does (loss.objective).
	 */
	const struct fix_setting *fix_set;
	size_t		 nfix_set;
	const struct fix_setting *fix_alternative;
	size_t		 nfix_alternative;
};

/*
 * One term of a norm squared: `mult` times the sum of the squares of
 * `value` over elements [lo, hi) of shard `shard` of logical parameter
 * `param` (gradnorm.c).
 */
struct gn_piece {
	int			 param;		/* logical index */
	int			 shard;		/* shard key (tp or expert coords) */
	int64_t			 lo, hi;
	const struct lincomb	*value;
	/*
	 * lc_hash32(value), the one the run interned it with: pieces are
	 * sorted and classed by value, and values that hold every rank's
	 * own atom besides a dp sum (nanoGPT #30) differ only deep inside,
	 * so comparing or hashing them term by term in every sort cost dp
	 * squared per audit, in each of the fix search's (issue 24).
	 */
	uint64_t		 vhash;		/* 64 bits: no padding to hash */
	struct rational		 mult;
};

/* How one logical parameter enters a wrong norm. */
struct gn_mult {
	const char	*param;
	struct rational	 min, max;	/* multiplicity of its elements */
	bool		 values_ok;	/* with its expected gradient */
	/*
	 * Its elements counted less and more than once, each weighed by
	 * how much less or more: a norm that leaves out one tp rank's
	 * experts of two has min 0 but misses half of them, and effects
	 * read off min alone said all (measure.c).
	 */
	double		 missing, extra;
};

/* The ranks that compute one norm squared. */
struct gn_class {
	int		*ranks;		/* ascending */
	size_t		 nranks;
	bool		 correct;
	struct gn_piece	*pieces;	/* canonical: sorted, coalesced */
	size_t		 npieces;
	struct gn_mult	*mults;		/* the parameters counted wrongly */
	size_t		 nmults;
};

/* The gradient norm audit of one config (absent when `present` is false). */
struct grad_norm_result {
	bool		 present;
	bool		 correct;	/* every clipping rank's norm is expected */
	bool		 consistent;	/* every rank clips by one norm */
	bool		 gradients_wrong; /* a wrong norm only holds wrong grads */
	bool		 miscounted;	/* some norm counts elements wrongly */
	int		*class_of;	/* per rank; -1: it never clips */
	struct gn_class	*classes;
	size_t		 nclasses;

	/* Numeric audit (run), per rank. */
	bool		 numeric;
	bool		 numeric_correct;
	uint64_t	*hash;		/* of the norm squared */
	bool		*numeric_ok;	/* equals the reference's */
	double		*norm;		/* float numerics: the norm */
	double		*coefficient;	/* float numerics: the clip factor */
	double		*ulps;		/* float numerics: coefficient's error */
	uint64_t	 reference_hash;
	double		 reference_norm;
	double		 reference_coefficient;
};

/* The clip_grad every rank clips to (Megatron, NeMo, HF's default). */
#define GN_CLIP_GRAD	1.0
#define GN_CLIP_EPS	1e-6

/* sweep: one mesh size or flag of the point an audit is for. */
struct varied_value {
	const char	*name;		/* "dp", "tie_embeddings" */
	int		 value;
	bool		 flag;		/* a boolean: 0 or 1 */
};

/*
 * compare: what was measured, in place of a config (cmd-compare.c).
 */
struct audit_trace {
	const char	*dir;		/* the traced step */
	const char	*step;		/* its id */
	const char	*against;	/* the reference trace or the config */
	const char	*dtype;		/* of its finals: "float32" */
	int		 micro_batches;
	double		 tolerance;	/* relative, of a region's values */
	const char	*unmatched;	/* traced, not in the config's model */
};

struct audit {
	const struct config	*config;
	const struct audit_trace *trace;	/* compare only, else NULL */
	struct mesh		 mesh;
	/*
	 * The atoms the values below are written in (atom.h), a copy of
	 * the audit's own: the report of this audit names and weighs its
	 * atoms with it, whatever audit ran since.
	 */
	struct atom_space	 atoms;

	struct param_result	*params;	/* registration order */
	size_t			 nparams;
	struct finding		*findings;
	size_t			 nfindings;

	bool			 consistent;	/* every parameter consistent */
	bool			 correct;	/* every parameter correct */
	/*
	 * Rows no update reaches, ascending by rank (model/stale.h): both
	 * engines' verdicts take them from the one model-layer decision, so
	 * that correct above and numeric_correct below are false with any.
	 */
	struct stale_rows_cell	*stale_rows;
	size_t			 nstale_rows;

	/* Set by the numeric audit (run); absent for check. */
	bool			 numeric;
	/*
	 * The numeric verdict, from the numbers alone: every used cell's
	 * values equal its region of the reference (numeric_ok), and no
	 * rows are stale (the model layer's fact, which no value shows).
	 * Never derived from the symbolic verdict, so that the two can be
	 * compared.
	 */
	bool			 numeric_correct;
	/*
	 * sweep --numeric: the numeric audit ran in a job of its own, and this
	 * says how its verdict compared ("agrees", "DISAGREES", "error").
	 */
	const char		*numeric_verdict;
	/*
	 * run: the numeric audit was skipped, too large to hold ("needs N
	 * values per rank, limit M"); the verdict is the symbolic one.
	 */
	const char		*numeric_skipped;
	/*
	 * run --shrink (shrink.h): the numeric audit ran on a smaller config
	 * with the same symbolic verdict, the audited one with these --set
	 * assignments ("mesh.dp=2"), of shrunk_world ranks.  Its verdict is
	 * numeric_correct; the cells and norms here keep no hashes, being
	 * another mesh's.  shrink_note says what the search found when it
	 * is worth saying ("no smaller config keeps the verdict").
	 */
	bool			 shrunk;
	const char		**shrunk_sets;
	size_t			 nshrunk_sets;
	int64_t			 shrunk_world;
	const char		*shrink_note;
	/* sweep: the mesh sizes and flags of this point, as JSON fields. */
	const struct varied_value *varied;
	size_t			 nvaried;
	enum arith		 arith;
	int			 procs;

	struct grad_norm_result	 grad_norm;	/* gradnorm.c, numeric.c */

	/*
	 * --baseline: the file was applied to this audit (the findings are
	 * marked), and its entries that name this config but match none of
	 * its findings.  These point into the baseline, which outlives every
	 * audit of the command; all the rest lives in the arena.
	 */
	bool			 baselined;
	const struct baseline_entry **stale;
	size_t			 nstale;

	struct arena		 arena;		/* owns everything above */
};

const char	*finding_kind_name(enum finding_kind);	/* "missing-reduction" */
const char	*arith_name(enum arith);		/* "exact", "float64" */

/*
 * The gate, decided here alone: the audit is correct, or a baseline
 * accepts all that is wrong with it.  The exit status, JUnit's failures,
 * the summary's verdict and sweep's rows all follow it.
 *
 * audit_correct: every parameter consistent and correct, the gradient
 * norm (when audited) correct and the same on every clipping rank, and no
 * rows that no update reaches.
 * audit_accepted: not correct, but every finding is accepted (baseline.h)
 * and the findings explain all that is wrong: each wrong parameter is
 * named by one, and a wrong norm is the subject of one or is wrong only
 * through the wrong gradients it sums.  A wrong parameter no finding
 * names, or a new finding, still fails.
 * audit_numeric_passes is the numeric engine's side of audit_correct: its
 * parameter regions and its norms equal the reference's.
 */
bool		 audit_passes(const struct audit *);
bool		 audit_correct(const struct audit *);
bool		 audit_accepted(const struct audit *);
/* The findings a baseline accepts. */
size_t		 audit_accepted_findings(const struct audit *);
bool		 audit_numeric_passes(const struct audit *);
/* Number of ranks with at least one used cell that is not ok. */
int		 audit_wrong_ranks(const struct audit *);
int		 audit_wrong_params(const struct audit *);
void		 audit_free(struct audit *);

#endif
