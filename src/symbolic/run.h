/*
 * The state of one symbolic audit while its sync plan runs (symbolic.c):
 * every rank's segments of every parameter, the expected values, and the
 * caches that let a collective build its result once per group.  The
 * engine's files (run.c, steps.c, cells.c, diagnose.c) share it; explain
 * reads it through the accessors below.
 */
#ifndef GRADAUDIT_RUN_H
#define GRADAUDIT_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "model/mesh.h"
#include "model/model.h"
#include "model/placement.h"
#include "symbolic/context.h"
#include "symbolic/lincomb.h"

/* A value over the element range [lo, hi) of one rank's parameter shard. */
struct segment {
	int64_t			 lo, hi;
	const struct lincomb	*value;
	uint64_t		 state;	/* bit s: sync step s has combined it */
};

/*
 * A rank's segments.  Most lists hold one segment, kept in the list
 * itself (v == &one): a 131,072-rank audit allocated a segment per rank
 * for every step that touched it, a third of its memory (issue 10).
 * Lists of several segments share immutable arrays in the arena.
 */
struct seglist {
	struct segment	*v;
	int		 n;
	struct segment	 one;
};

/*
 * What a step did wrong to a parameter, seen while it ran: a collective
 * that combined segments in different states, or a sum of a plan: step
 * over members that already held one value (each then holds the group's
 * size times it), which is the step to blame for the factor, not the
 * preset's divisor before it (issue 25).
 */
enum step_issue {
	ISSUE_MIXED_STATES,
	ISSUE_REPEATED_SUM
};

struct order_issue {
	enum step_issue	kind;
	int		step;
	int		logical;
};

/*
 * The products of one scaling step by their inputs: the params of a rank
 * scale the same local value, and building its product for each of them
 * was 31 MB and a tenth of the time of a 131,072-rank audit, whose
 * values before the sync carry the loss factor, so are no plain atoms
 * (issue 24).  An open-addressing table by address, emptied when the
 * factor changes.
 */
struct scale_memo {
	const struct lincomb	**in, **out;
	size_t			  cap, n;
	struct rational		  by;
};

/*
 * The sums of the collectives, by the values they added up: every
 * parameter of a stage holds the same atoms, so a group's sum over dp of
 * 2,048 members was rebuilt, term by term, for each of the 58 parameters,
 * and then compared term by term with the equal one interned before: 6 s
 * of a 131,072-rank audit without the distributed optimizer (issue 24).
 * Member values are shared (run_share, run_atom_value), so equal pointers
 * in equal order mean an equal sum.  Open addressing by a hash of the
 * pointers.  The keys it keeps are bounded, so that a run whose sums
 * never repeat (the pieces of a reduce-scatter, each its own) does not
 * keep a copy of every member list: past the bound a sum is built as if
 * there were no memo, which changes the time, never a value.
 */
#define SUM_MEMO_BYTES		((size_t)32 << 20)
struct sum_memo_entry {
	uint64_t		  hash;
	const struct lincomb	**in;	/* NULL: an empty slot */
	size_t			  n;
	struct rational		  scale;
	const struct lincomb	 *out;
};

struct sum_memo {
	struct sum_memo_entry	*v;
	size_t			 cap, n;	/* cap: a power of two */
	size_t			 key_bytes;
};

#define SAME_VALUE_SLOTS	1024
struct same_value_slot {
	const struct lincomb	*a, *b;		/* NULL: empty */
	bool			 equal;
};

/* Open addressing by (value, derivation); an empty slot's in is NULL. */
struct derived_memo {
	const struct lincomb	**in, **out;
	uint64_t		 *how;
	size_t			  cap, n;	/* cap: a power of two */
};

struct sym_run {
	const struct sym_context *ctx;
	const struct model	*model;
	struct arena		*arena;
	int			 stage_ranks;	/* dp * tp */
	struct seglist		**vals;		/* [param][rank - stage base] */
	/*
	 * [param][shard key]: the ranks holding one shard share its value,
	 * so a pointer for each (param, rank) was work and memory for
	 * nothing (7.6 MB of a 131,072-rank audit, issue 24).
	 */
	const struct lincomb	***expected;
	struct order_issue	*issues;
	int			 nissues;
	int			 step;		/* step being executed */
	/*
	 * The micro-batch whose backward the plan follows when it runs per
	 * micro-batch (syncplan.h), else -1: the local values then hold
	 * every micro-batch's.
	 */
	int			 micro_batch;
	/*
	 * Coordinates of the ranks of stage 0 (another stage's differ only in
	 * pp): the loops over params and ranks asked mesh_coord_of, six
	 * divisions, millions of times.
	 */
	struct coord		*coords;
	/*
	 * Atom r as a combination, one per rank and shared by every param:
	 * values are immutable, so equal ones need not be built twice.
	 */
	const struct lincomb	**atoms;
	size_t			 natoms;	/* world * sources * K */
	struct scale_memo	 scaled;
	struct sum_memo		 sums;
	/*
	 * A rank's local gradient before the sync, the sum over its
	 * micro-batches (and, for experts kept per source, its sources) of
	 * the loss factor times the atom: one per atom base, [0] for own
	 * chunks, [1] for experts per source.
	 */
	/*
	 * [held][kind]: 0 dense, 1 experts per source, +2 where the
	 * auxiliary losses reach (kind 3 only with an aux loss).
	 */
	const struct lincomb	**local[2][4];
	/*
	 * Every value the run builds, by value: the dp sums of the 58
	 * parameters of a stage hold the same atoms and were built 58 times
	 * (issue 10: half the memory of a 131,072-rank audit).
	 */
	struct lc_table		 table;
	/*
	 * The segments and expected values of each logical parameter (its
	 * instances share collectives) in an arena of their own, freed once
	 * its cells are made: only the combinations outlive the run.
	 */
	struct arena		*seg_arenas;
	/*
	 * Comparisons of a value with its expected one, by address: all
	 * members of a group share both, and comparing a dp-term sum on
	 * every one of dp ranks would cost dp squared.  Keeping the last
	 * pair alone was that again where two pairs alternate, as the rows
	 * before a word embedding's padded ones and those rows do (the fix
	 * search's audits of Megatron-LM #5047 at dp 2,048: 40% of the
	 * JSON report's time).  Direct-mapped; a collision only compares
	 * again.  Allocated on first use, freed with the derived values.
	 */
	struct same_value_slot	*same;
	/*
	 * The values cells.c derived for a word embedding's padded rows (the
	 * lookups' atoms, held or auxiliary, taken out), by the value and
	 * the derivation they came from: the members of a group share both,
	 * and deriving a dp-term sum again on every one of dp ranks cost dp
	 * squared, and new values that no comparison or grouping could share
	 * (issue 25: 72 s and 4 GB at 4,096 ranks).  Freed with the run.
	 */
	struct derived_memo	 derived;
	/*
	 * The logical parameter audited alone (sym_audit_param), or -1 for
	 * all.  No step combines the values of two logical parameters (a
	 * collective runs per parameter; the embedding group joins the
	 * instances of one), so the one's values are the same as in the
	 * audit of all.
	 */
	int			 only;
	/*
	 * The run went past GRADAUDIT_MAX_MEMORY and its context returns
	 * there (over_limit_returns): the steps left are not run, and what
	 * it holds is no audit.
	 */
	bool			 stopped;
};

/*
 * Atom of rank r's local gradient for param p: r itself, or the lowest rank
 * that computes an identical local gradient.
 */
uint32_t sym_atom_of(const struct sym_context *, int param, int rank);

/*
 * Called once before the first step (step -1) and after every step of the
 * plan; explain uses it to print the per-rank tables.
 */
typedef void	 sym_step_hook(void *arg, const struct sym_run *, int step);

/* A rank's current segments for a param (NULL, 0 if it does not hold it). */
const struct segment *sym_segments(const struct sym_run *, int param,
		    int rank, int *nsegs);
/* The expected value of a param on a rank (its shard). */
const struct lincomb *sym_expected(const struct sym_run *, int param,
		    int rank);
const struct sym_context *sym_run_context(const struct sym_run *);
/* The micro-batch the plan runs after, or -1 when it runs once. */
int		 sym_run_micro_batch(const struct sym_run *);
struct arena	*sym_run_arena(const struct sym_run *);

/* *dst = src, a single segment copied into dst itself. */
void	 run_seglist_set(struct seglist *dst, const struct seglist *src);
void	 run_coord(const struct sym_run *, int rank, struct coord *);
/* x, or the equal value built before (x, just built, is then given back). */
const struct lincomb *run_share(struct sym_run *, const struct lincomb *x);
/* lc_sum(xs, n, scale), shared, built once for equal inputs (sum_memo). */
const struct lincomb *run_sum(struct sym_run *, const struct lincomb **xs,
	    size_t n, struct rational scale);
const struct lincomb *run_atom_value(struct sym_run *, uint32_t atom);
bool	 run_same_value(struct sym_run *, const struct lincomb *a,
	    const struct lincomb *b);
/* sym_atom_of from the coordinate table. */
uint32_t run_atom_of(const struct sym_run *, int param, int rank);
struct arena *run_seg_arena(const struct sym_run *, int param);
int	 run_stage_base(const struct sym_run *, int param);
struct seglist *run_values_of(const struct sym_run *, int param, int rank);
/* Is param (an instance) among those the run audits (run.only)? */
bool	 run_selected(const struct sym_run *, int param);
int	 run_shard_key(const struct sym_run *, const struct param *, int rank);
int	 run_cmp_i64(const void *, const void *);

/*
 * Every rank's local gradient before the sync (zero when the plan runs
 * per micro-batch), and the expected values.
 */
void	 run_init_values(struct sym_run *);
/* Add micro-batch mb's local gradients to every rank's (its backward). */
void	 run_add_micro_batch(struct sym_run *, int mb);
void	 run_init_expected(struct sym_run *);
/*
 * Free what only the plan's steps look up (the atoms, the local values,
 * the table of shared values), before the cells are made.
 */
void	 run_free_caches(struct sym_run *);
/* The memos of the cells (derived values, comparisons), after them. */
void	 run_free_derived(struct sym_run *);
/*
 * Does the run hold, with `more` bytes it is about to build, no more
 * than GRADAUDIT_MAX_MEMORY (sym_context's memory_limit)?  Sums ask
 * before they are built, the steps as they go.  Past it the program
 * stops, exit 2 (sym_context_over_limit), or, where the context returns
 * there, the run stops (run.stopped) and this is false from then on.
 */
bool	 run_check_memory(struct sym_run *, size_t more);

#endif
