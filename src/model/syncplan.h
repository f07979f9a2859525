/*
 * The gradient synchronization of SPEC section 6 as data: an ordered list
 * of steps, each one collective (or a scaling) over one kind of group on one
 * set of gradients.  The knobs of the config's sync: section only choose
 * which steps exist, in which order, over which group, with which scale and
 * declared placement; syncplan.c holds the table.  The symbolic engine
 * (symbolic.c) and the numeric engine (numeric.c) both execute the same
 * plan, so a wrong plan gives wrong values in both and nothing is decided
 * by looking at a knob.
 */
#ifndef GRADAUDIT_SYNCPLAN_H
#define GRADAUDIT_SYNCPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rational.h"
#include "config/config.h"
#include "model/layout.h"
#include "model/mesh.h"
#include "model/placement.h"

struct model;

enum sync_op {
	/* Multiply the selected gradients by `scale`. */
	SYNC_SCALE,
	/*
	 * Keep the value on member 0 of every sub-group that `replicate`
	 * marks Replicate and zero it elsewhere: DTensor's conversion of a
	 * Replicate part to Partial before a sum, so a correct reduction of a
	 * mixed placement counts each replica once.
	 */
	SYNC_MASK_REPLICAS,
	/* Sum (or average, if `average`) over the group; every member gets it. */
	SYNC_ALL_REDUCE,
	/*
	 * Bucketed reduce-scatter of a whole gradient buffer: member i of the
	 * group gets the sum (or average) of shard i of every bucket; the other
	 * elements keep their local value (distributed optimizer).
	 */
	SYNC_REDUCE_SCATTER,
	/*
	 * The inverse of a reduce-scatter on the selected parameters: member
	 * i's owned elements (its shard of every bucket) go to every member,
	 * so each holds the whole reduced gradient (Megatron PR #6500's
	 * uneven_dtensor_to_full_tensor).
	 */
	SYNC_ALL_GATHER,
	/*
	 * Mixed precision (NeMo PR #6340, #6958): the selected gradients are
	 * accumulated into their `dtype` buffer, which holds them from here
	 * on.  A buffer that does not hold a gradient holds zeros (nothing
	 * was accumulated into it, or what was has moved on), so the sum is
	 * the gradient itself: no value changes, and the engines do nothing.
	 * What changes is which steps reach the gradient, which syncplan.c
	 * decides (`missed`).
	 */
	SYNC_ACCUMULATE,
	/*
	 * Zero the selected gradients accumulated so far, before the backward
	 * of each micro-batch of its schedule: a framework's zero_grad, or
	 * param.grad = None, between micro-batches (plan: reset).
	 */
	SYNC_RESET,
	/*
	 * A step of plan: on a loss term (a scale with term:, a
	 * gather-loss): it acts at the backward, through the term's loss
	 * factor (model/lossterm.h), wherever it stands, so here it changes
	 * no gradient and the engines do nothing.  `scale` is its factor on
	 * the term (`term`, -1: every term), for explain.
	 */
	SYNC_LOSS_TERM
};

enum sync_target {
	TARGET_PARAMS,		/* the parameters flagged in `params` */
	TARGET_BUFFER		/* a whole gradient buffer of every stage */
};

/*
 * The report a step's rule models and the change that fixes what goes
 * wrong in it, by name: the finding catalogue (symbolic/findings.c) says
 * them in words and alone names the settings, so that the rules here say
 * what happens and not how to tell the user.
 */
enum sync_cite {
	SYNC_CITE_NONE,
	SYNC_CITE_ROUTER_GRAD,		/* torchtitan #2416 */
	SYNC_CITE_TIED_ORDER,		/* Megatron-LM #844 */
	SYNC_CITE_DDP_AVERAGE,		/* torchtitan #2318 */
	SYNC_CITE_ONE_MEMBER_REPLICATE,	/* verl #7493 */
	SYNC_CITE_ONE_MEMBER_FACTOR,	/* pytorch PR #167178 */
	SYNC_CITE_SP_PARAM_NONE,	/* NeMo PR #7184 */
	SYNC_CITE_SP_PARAM_STANDALONE,	/* Megatron #1446 */
	SYNC_CITE_TIED_BUCKET_START,	/* Megatron ba8f2de */
	SYNC_CITE_TIED_FLAT_UNITS,	/* Megatron PR #6500 */
	SYNC_CITE_OUT_NORM,		/* Megatron-LM #7452 (finding 11) */
	SYNC_CITE_RS_DIVIDE_FACTOR,	/* pytorch #155903 */
	SYNC_CITE__COUNT
};

enum sync_fix {
	SYNC_FIX_NONE,
	SYNC_FIX_ROUTER_GRAD,
	SYNC_FIX_EMBEDDING_BEFORE_DP,
	SYNC_FIX_EXPERT_GRAD_DIVISOR,
	SYNC_FIX_SP_PARAM_GRAD,
	SYNC_FIX_QK_NORM_GRAD,
	SYNC_FIX_EMBEDDING_AFTER_DP,
	SYNC_FIX_FSDP_DIVISOR,
	SYNC_FIX_FSDP_ONE_MEMBER_FACTOR,
	SYNC_FIX_FSDP_ONE_MEMBER_REPLICATE,
	SYNC_FIX_REPLICATE_ONLY,
	SYNC_FIX_DP_DIVISOR,
	SYNC_FIX_DP_GROUP,
	SYNC_FIX_PER_TOKEN_AVG,
	SYNC_FIX_EXPERT_AVG_SCALE,
	SYNC_FIX_TIED_BUCKET_START,
	SYNC_FIX_TIED_FLAT_UNITS,
	SYNC_FIX_PLAN,		/* a step of plan: as the user wrote it */
	SYNC_FIX_KV_GRAD,
	SYNC_FIX_OUT_NORM_GRAD,
	SYNC_FIX_EXPERT_GTP_DIVISOR,
	SYNC_FIX_FSDP_DIVIDE_FACTOR,
	SYNC_FIX_EXPERT_TP_DIVISOR,
	SYNC_FIX__COUNT
};

struct sync_step {
	enum sync_op		 op;
	enum group_kind		 group;
	enum sync_target	 target;
	bool			*params;	/* TARGET_PARAMS: per model param */
	enum buffer_kind	 buffer;	/* TARGET_BUFFER */
	struct rational		 scale;		/* SYNC_SCALE */
	/*
	 * The scale as a factor over the mesh's sizes ("1/(dp*cp)"), as the
	 * rule that built it names them, or "" where it names none: explain
	 * --plan writes it so that a written plan follows --set and sweep.
	 */
	char			 scale_text[48];
	bool			 average;	/* AVG inside the collective */
	struct placement	 replicate;	/* SYNC_MASK_REPLICAS */
	const char		*label;		/* "data-parallel reduce-scatter" */
	/*
	 * The setting that decides whether, where and how this step runs:
	 * explain says where its value came from (profile, config, default).
	 */
	enum cfg_key		 key;
	enum sync_cite		 cite;		/* the report it models */
	enum sync_fix		 fix;		/* what to change, for findings */
	/*
	 * For steps that exist because a gradient is declared Partial (or that
	 * are missing because it is declared Replicate): what was declared and
	 * what the placement rules found, so that findings can name the op.
	 */
	bool			 has_placement;
	struct placement	 declared;
	struct placement	 truth;
	/*
	 * The plan: step this one expands (key KEY_PLAN, label owned by the
	 * plan), or -1 for a step of the preset: its setting is `key`.
	 */
	int			 plan_item;
	/*
	 * The gradient buffer the step runs on, an index of
	 * cfg_plan_dtype_words[] (SYNC_ACCUMULATE: the one it accumulates
	 * into), or -1: wherever each gradient is (every preset step).
	 * missed, when not NULL, has per model parameter the buffer that
	 * held the gradient of a parameter the step selects but whose
	 * `dtype` buffer held only zeros, or -1: `params` leaves those out,
	 * so the step does not reach them, and findings say why.
	 */
	int			 dtype;
	int			*missed;
	/*
	 * Its schedule: bit m set when it runs at micro-batch m (after its
	 * backward; a reset, before).  A preset step runs after the last.
	 */
	uint32_t		 micro_batches;
	/* SYNC_LOSS_TERM: its enum plan_term, or -1 (every term). */
	int			 term;
};

struct sync_plan {
	struct sync_step	*steps;
	int			 nsteps;
	/*
	 * Placement decisions that produced no step (a reduction declared
	 * unnecessary): kept for findings.  Same struct, op unused.
	 */
	struct sync_step	*skipped;
	int			 nskipped;
	/*
	 * Why the config's plan: cannot run on this model (a glob that
	 * names no parameter, a step over a group it cannot run on), and
	 * where; NULL when it can.  Its steps are built all the same, so
	 * that a sweep may ask (syncplan_refusal) after building.
	 */
	char			*refusal;
	struct cfg_mark		 refusal_mark;
	/*
	 * Must the engines run the plan inside the micro-batch loop?  Only
	 * when a step runs at another micro-batch than the last, or a reset
	 * clears a gradient that holds something: else every step runs once
	 * on the accumulated gradients, as without a schedule, and that path
	 * costs what it always did.
	 */
	bool			 per_micro_batch;
	int			 micro_batch_count;	/* training.micro_batches */
};

/*
 * Build the plan from the config and the true gradient placements found by
 * pl_walk (grad[], one per parameter).
 */
void	 syncplan_build(struct sync_plan *, const struct model *,
	    const struct placement *grad);
void	 syncplan_free(struct sync_plan *);

/*
 * Why the config's plan: cannot run on model m, into why (with the mark
 * of the step at fault in *at), or NULL: what syncplan_build would put in
 * refusal, without the placements it needs for the preset.
 */
const char *syncplan_refusal(const struct model *, struct cfg_mark *at,
	    char *why, size_t len);
/*
 * Does a plan without "preset" leave parameter p's data-parallel replicas
 * (dp, edp for experts) without any step that reduces them: no all-reduce
 * or reduce-scatter that selects p, runs at some micro-batch and goes over
 * a group with a data-parallel axis (a sum over tp or the tied copies'
 * embedding group is none)?
 */
bool	 syncplan_unreduced(const struct model *, int p);
/*
 * Does a sum over group g meet parameter p's data-parallel replicas (dp,
 * edp for experts)?  One over tp, the tied copies' embedding or pp group,
 * or ep adds other elements or another copy's: no data-parallel divisor
 * belongs in it.
 */
bool	 syncplan_group_meets_replicas(const struct model *, enum group_kind g,
	    int p);
/*
 * When it does, the plan: item that would reduce them but runs at no
 * micro-batch (micro-batches: none), or -1: that step, not a missing
 * one, is what to correct.
 */
int	 syncplan_unreduced_never_runs(const struct model *, int p);
/*
 * Does a plan without "preset" leave the copies of tied logical parameter
 * lp, on two stages, without a running all-reduce over embedding or pp
 * that sums them?
 */
bool	 syncplan_untied(const struct model *, int lp);

/*
 * One line saying what the step does: "reduce-scatter (sum) over dp of the
 * dense gradient buffer", "scale by 1/2 the expert gradient buffer".
 */
void	 syncplan_describe(const struct sync_step *, const struct model *,
	    char *buf, size_t len);

/* Does step s run at micro-batch mb (after its backward; a reset, before)? */
bool	 syncplan_runs_at(const struct sync_step *, int mb);

/*
 * The micro-batches of a step's schedule in words, "every micro-batch",
 * "micro-batches 0 and 2"; K is training.micro_batches.
 */
void	 syncplan_schedule_text(const struct sync_step *, int K, char *buf,
	    size_t len);

/* "dense", "expert": a buffer as describe and a plan's buffer: say it. */
const char *syncplan_buffer_name(enum buffer_kind);

/* Does step s touch parameter p? */
bool	 syncplan_touches(const struct sync_step *, const struct model *,
	    int param);

/*
 * Which elements of a parameter does a rank's optimizer use?  With the
 * distributed optimizer, the ranges its dp (edp) rank owns; otherwise all.
 */
int	 syncplan_used_ranges(const struct model *, const struct layout *,
	    int param, int rank, int64_t (*ranges)[2], int max);

#endif
