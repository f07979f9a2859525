/*
 * The sync plan executed on a symbolic audit's values: every step scales,
 * masks or combines the segments of the ranks it touches.  A collective
 * that adds up segments in different states of synchronization notes an
 * order issue (Megatron-LM #844), which diagnose.c reports.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "model/syncplan.h"
#include "symbolic/lincomb.h"
#include "symbolic/run.h"
#include "symbolic/steps.h"

/* Groups up to this size sum without a scratch allocation. */
#define SEG_STACK_MEMBERS	64

/* ---- segment arithmetic ---------------------------------------------- */

/*
 * The state bit of the step being run.  A preset builds at most about 32
 * steps and a plan adds at most PLAN_MAX_ITEMS, so 64 bits hold one for
 * each; a 32-bit state shifted past its width once a plan made the list
 * longer (undefined behaviour, and a lost order finding).
 */
static uint64_t
step_bit(const struct sym_run *run)
{
	return (uint64_t)1 << (run->step % 64);
}

static void
seg_push(struct segment *out, int *n, int64_t lo, int64_t hi,
    const struct lincomb *v, uint64_t state)
{
	struct segment *last = *n > 0 ? &out[*n - 1] : NULL;

	if (lo >= hi)
		return;
	/* Neighbours with the same value and state merge into one. */
	if (last != NULL && last->hi == lo && last->state == state &&
	    (last->value == v || lc_equal(last->value, v))) {
		last->hi = hi;
		return;
	}
	out[*n].lo = lo;
	out[*n].hi = hi;
	out[*n].value = v;
	out[*n].state = state;
	(*n)++;
}

/* Cut points of a few segments, sorted without qsort's set-up. */
#define FEW_CUTS	32

static void
sort_cuts(int64_t *cuts, int n)
{
	int64_t	 v;
	int	 i, j;

	if (n > FEW_CUTS) {
		qsort(cuts, n, sizeof *cuts, run_cmp_i64);
		return;
	}
	for (i = 1; i < n; i++) {
		v = cuts[i];
		for (j = i; j > 0 && cuts[j - 1] > v; j--)
			cuts[j] = cuts[j - 1];
		cuts[j] = v;
	}
}

/*
 * *outp = the nout segments built in v: a single one is kept in the list
 * itself, several are copied into the arena.  A reduce-scatter leaves most
 * ranks one segment, and an array sized for every cut, allocated for each
 * member of each group whatever came out, was 60 MB of the arenas of a
 * 131,072-rank audit (issue 24).  outp may be an input of the step that
 * built v: it is written last.
 */
static void
seg_finish(struct arena *sa, struct seglist *outp, const struct segment *v,
    int nout)
{
	if (nout == 1) {
		outp->one = v[0];
		outp->v = &outp->one;
	} else {
		outp->v = arena_alloc(sa, (nout > 0 ? nout : 1) *
		    sizeof *outp->v);
		memcpy(outp->v, v, nout * sizeof *outp->v);
	}
	outp->n = nout;
}

/*
 * The sum of the members' segment lists, times scale: one piece per range
 * where every member's value is constant.  Flags *mixed when two members
 * contribute to a piece in different synchronization states.
 */
static void
seg_sum(struct sym_run *run, struct arena *sa,
    struct seglist *const *members, int n, struct rational scale,
    bool *mixed, struct seglist *outp)
{
	struct segment	*out, out_stack[FEW_CUTS];
	int64_t		*cuts, cuts_stack[FEW_CUTS];
	int		 ncuts = 0, i, j, nout = 0;
	int		 pos_stack[SEG_STACK_MEMBERS];
	const struct lincomb *vals_stack[SEG_STACK_MEMBERS];
	int		*pos = n <= SEG_STACK_MEMBERS ? pos_stack :
			    xcalloc(n, sizeof *pos);
	const struct lincomb **vals = n <= SEG_STACK_MEMBERS ? vals_stack :
			    xcalloc(n, sizeof *vals);
	bool		 single = true;

	for (i = 0; i < n; i++)
		if (members[i]->n != 1)
			single = false;
	if (single) {
		/* The common case: one segment per member, one piece. */
		uint64_t state = 0;

		for (i = 0; i < n; i++) {
			vals[i] = members[i]->v[0].value;
			state |= members[i]->v[0].state;
			if (members[i]->v[0].state != members[0]->v[0].state)
				*mixed = true;
		}
		outp->one.lo = members[0]->v[0].lo;
		outp->one.hi = members[0]->v[0].hi;
		outp->one.value = run_sum(run, vals, n, scale);
		outp->one.state = state | step_bit(run);
		outp->v = &outp->one;
		outp->n = 1;
		if (pos != pos_stack) {
			free(pos);
			free(vals);
		}
		return;
	}
	memset(pos, 0, n * sizeof *pos);
	for (i = 0; i < n; i++)
		ncuts += members[i]->n + 1;
	cuts = ncuts <= FEW_CUTS ? cuts_stack : xcalloc(ncuts, sizeof *cuts);
	ncuts = 0;
	for (i = 0; i < n; i++) {
		for (j = 0; j < members[i]->n; j++)
			cuts[ncuts++] = members[i]->v[j].lo;
		cuts[ncuts++] = members[i]->v[members[i]->n - 1].hi;
	}
	sort_cuts(cuts, ncuts);
	out = ncuts <= FEW_CUTS ? out_stack : xcalloc(ncuts, sizeof *out);
	for (j = 0; j + 1 < ncuts; j++) {
		int64_t lo = cuts[j], hi = cuts[j + 1];
		uint64_t state = 0, first = 0;

		if (lo == hi)
			continue;
		for (i = 0; i < n; i++) {
			const struct seglist *sl = members[i];

			while (sl->v[pos[i]].hi <= lo)
				pos[i]++;
			vals[i] = sl->v[pos[i]].value;
			if (i == 0)
				first = sl->v[pos[i]].state;
			else if (sl->v[pos[i]].state != first)
				*mixed = true;
			state |= sl->v[pos[i]].state;
		}
		seg_push(out, &nout, lo, hi, run_sum(run, vals, n, scale),
		    state | step_bit(run));
	}
	seg_finish(sa, outp, out, nout);
	if (out != out_stack)
		free(out);
	if (cuts != cuts_stack)
		free(cuts);
	if (pos != pos_stack) {
		free(pos);
		free(vals);
	}
}

/*
 * Member `mine` after a reduce-scatter, into *outp (which may be mine):
 * the combined value inside the ranges it owns, its own value elsewhere.
 */
static void
seg_overlay(struct arena *sa, const struct seglist *mine,
    const struct seglist *combined, int64_t (*owned)[2], int nowned,
    struct seglist *outp)
{
	struct segment	*out, out_stack[FEW_CUTS];
	int64_t		*cuts, cuts_stack[FEW_CUTS];
	int		 ncuts = 0, i, j, r, nout = 0, pm = 0, pc = 0;

	ncuts = mine->n + combined->n + 2 * nowned + 2;
	cuts = ncuts <= FEW_CUTS ? cuts_stack : xcalloc(ncuts, sizeof *cuts);
	ncuts = 0;
	for (i = 0; i < mine->n; i++)
		cuts[ncuts++] = mine->v[i].lo;
	for (i = 0; i < combined->n; i++)
		cuts[ncuts++] = combined->v[i].lo;
	for (r = 0; r < nowned; r++) {
		cuts[ncuts++] = owned[r][0];
		cuts[ncuts++] = owned[r][1];
	}
	cuts[ncuts++] = mine->v[mine->n - 1].hi;
	sort_cuts(cuts, ncuts);
	out = ncuts <= FEW_CUTS ? out_stack : xcalloc(ncuts, sizeof *out);
	for (j = 0; j + 1 < ncuts; j++) {
		int64_t lo = cuts[j], hi = cuts[j + 1];
		bool owns = false;

		if (lo == hi)
			continue;
		for (r = 0; r < nowned; r++)
			if (owned[r][0] <= lo && hi <= owned[r][1])
				owns = true;
		if (owns) {
			while (combined->v[pc].hi <= lo)
				pc++;
			seg_push(out, &nout, lo, hi, combined->v[pc].value,
			    combined->v[pc].state);
		} else {
			while (mine->v[pm].hi <= lo)
				pm++;
			seg_push(out, &nout, lo, hi, mine->v[pm].value,
			    mine->v[pm].state);
		}
	}
	seg_finish(sa, outp, out, nout);
	if (out != out_stack)
		free(out);
	if (cuts != cuts_stack)
		free(cuts);
}

/* ---- executing the steps --------------------------------------------- */

static void
note_issue(struct sym_run *run, enum step_issue kind, int param)
{
	int	l = run->model->params[param].logical, i;

	for (i = 0; i < run->nissues; i++)
		if (run->issues[i].kind == kind &&
		    run->issues[i].step == run->step &&
		    run->issues[i].logical == l)
			return;
	run->issues = xreallocarray(run->issues, run->nissues + 1,
	    sizeof *run->issues);
	run->issues[run->nissues].kind = kind;
	run->issues[run->nissues].step = run->step;
	run->issues[run->nissues].logical = l;
	run->nissues++;
}

/*
 * Do the n members hold one value, segment for segment, and not zero?
 * Equal pointers are the common case of a replica (run_share); small
 * values are not shared, so others are compared term by term: a blame
 * that changed with the mesh's size (dp 2 against dp 16) is no blame.
 */
static bool
same_values(struct seglist **lists, int n)
{
	int	i, j;

	for (i = 1; i < n; i++) {
		if (lists[i]->n != lists[0]->n)
			return false;
		for (j = 0; j < lists[0]->n; j++)
			if (lists[i]->v[j].lo != lists[0]->v[j].lo ||
			    lists[i]->v[j].hi != lists[0]->v[j].hi ||
			    (lists[i]->v[j].value != lists[0]->v[j].value &&
			    !lc_equal(lists[i]->v[j].value,
			    lists[0]->v[j].value)))
				return false;
	}
	for (j = 0; j < lists[0]->n; j++)
		if (lists[0]->v[j].value->nterms > 0)
			return true;
	return false;
}

static size_t
scale_slot(const struct scale_memo *sm, const struct lincomb *x)
{
	uint64_t h = (uint64_t)(uintptr_t)x * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (sm->cap - 1);
}

static void
scale_memo_grow(struct scale_memo *sm)
{
	struct scale_memo bigger = *sm;
	size_t	 i, j;

	bigger.cap = sm->cap ? 2 * sm->cap : 1024;
	bigger.in = xcalloc(bigger.cap, sizeof *bigger.in);
	bigger.out = xcalloc(bigger.cap, sizeof *bigger.out);
	for (i = 0; i < sm->cap; i++) {
		if (sm->in[i] == NULL)
			continue;
		for (j = scale_slot(&bigger, sm->in[i]); bigger.in[j] != NULL;
		    j = (j + 1) & (bigger.cap - 1))
			;
		bigger.in[j] = sm->in[i];
		bigger.out[j] = sm->out[i];
	}
	free(sm->in);
	free(sm->out);
	*sm = bigger;
}

/* q * x, built once per step for all the params that hold x. */
static const struct lincomb *
scale_value(struct sym_run *run, const struct lincomb *x, struct rational q)
{
	struct scale_memo *sm = &run->scaled;
	size_t	 j;

	if (sm->cap > 0 && !q_equal(sm->by, q)) {
		memset(sm->in, 0, sm->cap * sizeof *sm->in);
		sm->n = 0;
	}
	sm->by = q;
	if (2 * (sm->n + 1) > sm->cap)
		scale_memo_grow(sm);
	for (j = scale_slot(sm, x); sm->in[j] != NULL;
	    j = (j + 1) & (sm->cap - 1))
		if (sm->in[j] == x)
			return sm->out[j];
	sm->in[j] = x;
	sm->out[j] = run_share(run, lc_scale(run->arena, x, q));
	sm->n++;
	return sm->out[j];
}

static void
scale_values(struct sym_run *run, int param, struct seglist *sl,
    struct rational q)
{
	struct segment	*v;
	int		 i;

	if (sl->n == 1) {
		sl->one.value = scale_value(run, sl->one.value, q);
		return;
	}
	v = arena_alloc(run_seg_arena(run, param), sl->n * sizeof *v);
	for (i = 0; i < sl->n; i++) {
		v[i] = sl->v[i];
		v[i].value = scale_value(run, sl->v[i].value, q);
	}
	sl->v = v;
}

static void
run_scale(struct sym_run *run, const struct sync_step *s)
{
	const struct model *m = run->model;
	const struct lincomb *last_in = NULL, *last_out = NULL;
	int	p, i, k;

	for (p = 0; p < m->nparams; p++) {
		if (!syncplan_touches(s, m, p) || !run_selected(run, p))
			continue;
		for (i = 0; i < run->stage_ranks; i++) {
			struct seglist *sl = &run->vals[p][i];

			/* Replicas share values: remember the last result. */
			if (sl->n == 1 && sl->one.value == last_in) {
				sl->one.value = last_out;
				continue;
			}
			k = sl->n == 1;
			if (k)
				last_in = sl->v[0].value;
			scale_values(run, p, sl, s->scale);
			if (k)
				last_out = sl->v[0].value;
		}
	}
}

static void
run_mask(struct sym_run *run, const struct sync_step *s)
{
	const struct model *m = run->model;
	int	p, i, j;

	for (p = 0; p < m->nparams; p++) {
		if (!syncplan_touches(s, m, p) || !run_selected(run, p))
			continue;
		for (i = 0; i < run->stage_ranks; i++) {
			struct coord c;
			struct seglist *sl = &run->vals[p][i];
			struct segment *v;

			run_coord(run, run_stage_base(run, p) + i, &c);
			if (pl_keeps_value(&c, s->replicate,
			    pl_uniform(PLACE_PARTIAL)))
				continue;
			if (sl->n == 1) {
				sl->one.value = &lincomb_zero;
				continue;
			}
			v = arena_alloc(run_seg_arena(run, p), sl->n * sizeof *v);
			for (j = 0; j < sl->n; j++) {
				v[j] = sl->v[j];
				v[j].value = &lincomb_zero;
			}
			sl->v = v;
		}
	}
}

/* model_instance_on, at once for a parameter with one instance. */
static int
instance_on(const struct sym_run *run, int param, int rank)
{
	const struct model *m = run->model;

	if (m->logical[m->params[param].logical].ninstances == 1)
		return param;
	return model_instance_on(m, param, rank);
}

/*
 * An all-gather over a reduce-scatter's group: every member's owned ranges
 * go to every member, so all hold what the owners hold.
 */
static void
gather_group(struct sym_run *run, int param, const int *members,
    struct seglist **lists, int n)
{
	const struct model *m = run->model;
	struct seglist	 gathered = *lists[0];
	int64_t		 owned[16][2];
	int		 i, no;

	for (i = 0; i < n; i++) {
		no = layout_owned_ranges(&run->ctx->layout, m,
		    instance_on(run, param, members[i]), i, owned, 16);
		seg_overlay(run_seg_arena(run, param), &gathered, lists[i],
		    owned, no, &gathered);
	}
	for (i = 0; i < n; i++)
		run_seglist_set(lists[i], &gathered);
}

/*
 * One collective over the group of `leader` on the parameter `param` (or,
 * for the embedding group, on whichever instance each member holds).
 */
static void
reduce_group(struct sym_run *run, const struct sync_step *s, int param,
    int leader, int *members, struct seglist **lists)
{
	const struct model *m = run->model;
	int	n, i, inst;
	struct rational scale = q_make(1, 1);
	struct seglist combined;
	bool	mixed = false;

	n = mesh_group_size(&m->mesh, s->group);
	mesh_group(&m->mesh, s->group, leader, members);
	if (n < 2)
		return;
	for (i = 0; i < n; i++) {
		inst = instance_on(run, param, members[i]);
		lists[i] = run_values_of(run, inst, members[i]);
	}
	if (s->op == SYNC_ALL_GATHER) {
		gather_group(run, param, members, lists, n);
		return;
	}
	if (s->average)
		scale = q_make(1, n);
	else if (s->plan_item >= 0 && s->op == SYNC_ALL_REDUCE &&
	    same_values(lists, n))
		note_issue(run, ISSUE_REPEATED_SUM, param);
	seg_sum(run, run_seg_arena(run, param), lists, n, scale, &mixed,
	    &combined);
	if (mixed)
		note_issue(run, ISSUE_MIXED_STATES, param);
	for (i = 0; i < n; i++) {
		if (s->op == SYNC_REDUCE_SCATTER) {
			int64_t owned[16][2];
			int no;

			inst = instance_on(run, param, members[i]);
			no = layout_owned_ranges(&run->ctx->layout, m, inst, i,
			    owned, 16);
			seg_overlay(run_seg_arena(run, param), lists[i],
			    &combined, owned, no, lists[i]);
		} else
			run_seglist_set(lists[i], &combined);
	}
}

/* mesh_group_index from the coordinate table. */
static int
group_index(const struct sym_run *run, enum group_kind kind, int rank)
{
	struct coord	c;

	run_coord(run, rank, &c);
	switch (kind) {
	case GROUP_DP:
		return c.dp;
	case GROUP_TP:
		return c.tp;
	case GROUP_PP:
		return c.pp;
	case GROUP_EP:
		return c.ep;
	case GROUP_ETP:
		return c.etp;
	case GROUP_EDP:
		return c.edp;
	case GROUP_CP:
		return c.cp;
	case GROUP_PURE_DP:
		return c.pure_dp;
	case GROUP_EMBEDDING:
	case GROUP_DP_SHARD:
	case GROUP_DP_REPLICATE:
	case GROUP_EFSDP:
	case GROUP_EDP_REPLICATE:
	case GROUP_GTP:
	case GROUP_GTP_REPLICATE:
	case GROUP_EGTP:
	case GROUP_EGTP_REPLICATE:
	case GROUP_CP_TP:
	case GROUP_PURE_DP_TP:
	case GROUP_DP_TP:
	case GROUP_EP_ETP:
	case GROUP_EDP_ETP:
	case GROUP_EDP_EP:
	case GROUP_EDP_EP_ETP:
	case GROUP_GTP_TP:
	case GROUP_GTP_CP:
	case GROUP_GTP_CP_TP:
	case GROUP_GTP_REPLICATE_TP:
	case GROUP_EGTP_ETP:
	case GROUP_EGTP_EP:
	case GROUP_EGTP_EP_ETP:
	case GROUP_EGTP_REPLICATE_ETP:
	case GROUP_EGTP_REPLICATE_EP:
	case GROUP_EGTP_REPLICATE_EP_ETP:
	case GROUP__COUNT:
		break;
	}
	return mesh_group_index(&run->model->mesh, kind, rank);
}

static void
run_collective(struct sym_run *run, const struct sync_step *s)
{
	const struct model *m = run->model;
	int	 size = mesh_group_size(&m->mesh, s->group);
	int	*members = xcalloc(size, sizeof *members);
	struct seglist **lists = xcalloc(size, sizeof *lists);
	int	 p, i, rank;

	for (p = 0; p < m->nparams && !run->stopped; p++) {
		if (!syncplan_touches(s, m, p) || !run_selected(run, p))
			continue;
		for (i = 0; i < run->stage_ranks && !run->stopped; i++) {
			rank = run_stage_base(run, p) + i;
			/* Member 0, the lowest, runs the group's collective. */
			if (group_index(run, s->group, rank) != 0)
				continue;
			reduce_group(run, s, p, rank, members, lists);
		}
		(void)run_check_memory(run, 0);
	}
	free(members);
	free(lists);
}

/*
 * A reset: the selected gradients of every rank back to zero, in no
 * state of synchronization (before the backward of a micro-batch).
 */
static void
run_reset(struct sym_run *run, const struct sync_step *s)
{
	const struct model *m = run->model;
	int	p, i;

	for (p = 0; p < m->nparams; p++) {
		if (!syncplan_touches(s, m, p) || !run_selected(run, p))
			continue;
		for (i = 0; i < run->stage_ranks; i++) {
			struct seglist *sl = &run->vals[p][i];

			sl->one.lo = sl->v[0].lo;
			sl->one.hi = sl->v[sl->n - 1].hi;
			sl->one.value = &lincomb_zero;
			sl->one.state = 0;
			sl->v = &sl->one;
			sl->n = 1;
		}
	}
}

static void
run_one(struct sym_run *run, int k, sym_step_hook *hook, void *hook_arg)
{
	const struct sync_step *s = &run->ctx->plan.steps[k];

	if (run->stopped)
		return;
	run->step = k;
	switch (s->op) {
	case SYNC_SCALE:
		run_scale(run, s);
		break;
	case SYNC_MASK_REPLICAS:
		run_mask(run, s);
		break;
	case SYNC_ALL_REDUCE:
	case SYNC_REDUCE_SCATTER:
	case SYNC_ALL_GATHER:
		run_collective(run, s);
		break;
	case SYNC_RESET:
		run_reset(run, s);
		break;
	case SYNC_ACCUMULATE:
		/* Into zeros: the value stays; syncplan.h. */
		break;
	case SYNC_LOSS_TERM:
		/* At the backward, in the loss factors; syncplan.h. */
		break;
	}
	if (run_check_memory(run, 0) && hook != NULL)
		hook(hook_arg, run, k);
}

/*
 * The plan per micro-batch (syncplan.h): the buffer starts at zero; for
 * each micro-batch, its resets, its backward, then its steps in the
 * plan's order on the buffer as it is.  The hook sees the backward of
 * each micro-batch as step -1.
 */
static void
run_per_micro_batch(struct sym_run *run, sym_step_hook *hook, void *hook_arg)
{
	const struct sync_plan *plan = &run->ctx->plan;
	int	mb, k;

	for (mb = 0; mb < plan->micro_batch_count && !run->stopped; mb++) {
		run->micro_batch = mb;
		for (k = 0; k < plan->nsteps; k++)
			if (plan->steps[k].op == SYNC_RESET &&
			    syncplan_runs_at(&plan->steps[k], mb))
				run_one(run, k, hook, hook_arg);
		if (run->stopped)
			break;
		/*
		 * The backward's sums can stop the run too (over_limit_
		 * returns), and a stopped run's values are no audit for the
		 * hook to show as this micro-batch's.
		 */
		run_add_micro_batch(run, mb);
		if (run->stopped)
			break;
		if (hook != NULL)
			hook(hook_arg, run, -1);
		for (k = 0; k < plan->nsteps; k++)
			if (plan->steps[k].op != SYNC_RESET &&
			    syncplan_runs_at(&plan->steps[k], mb))
				run_one(run, k, hook, hook_arg);
	}
}

void
run_plan(struct sym_run *run, sym_step_hook *hook, void *hook_arg)
{
	const struct sync_plan *plan = &run->ctx->plan;
	int	k;

	if (plan->per_micro_batch) {
		run_per_micro_batch(run, hook, hook_arg);
		return;
	}
	/*
	 * Every step once, after the last micro-batch: today's path.  A
	 * reset here runs before micro-batch 0 alone (needs_loop), where the
	 * gradients are still zero.
	 */
	if (hook != NULL)
		hook(hook_arg, run, -1);
	for (k = 0; k < plan->nsteps; k++)
		if (plan->steps[k].op != SYNC_RESET)
			run_one(run, k, hook, hook_arg);
}
