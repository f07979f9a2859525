/*
 * The symbolic audit: every rank's gradient of every parameter as a list of
 * segments (element ranges) each holding an exact linear combination of
 * atoms, pushed through the sync plan, then compared with the expected
 * combination.  Collectives over a group compute their result once and
 * share it between the members, so a 16,384-rank mesh costs a few
 * combinations per group, not one per pair of ranks.
 *
 * Each segment also carries the set of steps that have combined it.  A
 * collective that adds up segments whose sets differ is combining values in
 * different states of synchronization (one already reduced over dp, the
 * other not): that is how the wrong order of Megatron-LM #844 shows up,
 * found by the simulation rather than by a rule about the knob.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "config.h"
#include "framework.h"
#include "layout.h"
#include "lincomb.h"
#include "symbolic.h"
#include "xmalloc.h"

struct seglist {
	struct segment	*v;
	int		 n;
};

/* A collective that combined segments in different states. */
struct order_issue {
	int	step;
	int	logical;
};

struct sym_run {
	const struct sym_context *ctx;
	const struct model	*model;
	struct arena		*arena;
	int			 stage_ranks;	/* dp * tp */
	struct seglist		**vals;		/* [param][rank - stage base] */
	const struct lincomb	***expected;	/* [param][rank - stage base] */
	struct order_issue	*issues;
	int			 nissues;
	int			 step;		/* step being executed */
	/*
	 * The last comparison of a value with its expected one: all members
	 * of a group share both, and comparing a dp-term sum on every one of
	 * dp ranks would cost dp squared.
	 */
	const struct lincomb	*cmp_value, *cmp_expected;
	bool			 cmp_equal;
};

static bool
same_value(struct sym_run *run, const struct lincomb *a,
    const struct lincomb *b)
{
	if (a == b)
		return true;
	if (a != run->cmp_value || b != run->cmp_expected) {
		run->cmp_value = a;
		run->cmp_expected = b;
		run->cmp_equal = lc_equal(a, b);
	}
	return run->cmp_equal;
}

/* ---- set-up ---------------------------------------------------------- */

void
sym_context_build(struct sym_context *ctx, const struct config *cfg)
{
	memset(ctx, 0, sizeof *ctx);
	model_build(&ctx->model, cfg);
	ctx->grad_placement = xcalloc(ctx->model.nparams,
	    sizeof *ctx->grad_placement);
	pl_walk(&ctx->model, ctx->grad_placement, &ctx->reductions,
	    &ctx->nreductions);
	layout_build(&ctx->layout, &ctx->model);
	syncplan_build(&ctx->plan, &ctx->model, ctx->grad_placement);
}

/* Parameter copies (parameters times the ranks holding each) audited. */
#define SYM_MAX_COPIES	((int64_t)1 << 22)

const char *
sym_unauditable(const struct config *cfg, enum cfg_key *blame)
{
	static char	 why[512];
	struct model	 m;
	struct layout	 lay;
	int64_t		 copies, fit;
	const char	*r = NULL;
	int		 n;

	model_build(&m, cfg);
	copies = (int64_t)m.nparams * m.mesh.dp * m.mesh.tp;
	if (copies > SYM_MAX_COPIES) {
		/*
		 * The mesh multiplies the copies: point at it, and say what
		 * to audit instead (issue 10: the refusal left the user with
		 * nothing to do).  Layers and dp replicas repeat the same
		 * synchronization, so a smaller copy shows the same bugs.
		 */
		n = snprintf(why, sizeof why, "the audit would hold %lld "
		    "parameter copies (parameters x ranks holding them); at "
		    "most %lld are supported: audit the same shape smaller, "
		    "with fewer layers (--set model.layers=N)",
		    (long long)copies, (long long)SYM_MAX_COPIES);
		fit = SYM_MAX_COPIES / ((int64_t)m.nparams * m.mesh.tp);
		if (fit >= 2 && n > 0 && (size_t)n < sizeof why)
			snprintf(why + n, sizeof why - (size_t)n, " or a "
			    "smaller dp (--set mesh.dp=%lld fits)",
			    (long long)fit);
		*blame = KEY_MESH;
		model_free(&m);
		return why;
	}
	layout_build(&lay, &m);
	if (lay.refusal != NULL) {
		if (cfg->profile != NULL)
			snprintf(why, sizeof why, "%s (profile %s) stops at "
			    "start-up: %s", cfg->framework,
			    cfg->profile->label, lay.refusal);
		else
			snprintf(why, sizeof why, "the layout: rules stop "
			    "training at start-up: %s", lay.refusal);
		*blame = cfg->profile != NULL ? KEY_FRAMEWORK : KEY_LAYOUT;
		r = why;
	}
	layout_free(&lay);
	model_free(&m);
	return r;
}

void
sym_context_free(struct sym_context *ctx)
{
	syncplan_free(&ctx->plan);
	layout_free(&ctx->layout);
	free(ctx->reductions);
	free(ctx->grad_placement);
	model_free(&ctx->model);
	memset(ctx, 0, sizeof *ctx);
}

/*
 * Ranks of one tp group that compute identical local gradients share an
 * atom: they differ only along tp sub-dimensions where the gradient is
 * Replicate.  Along Partial or Shard sub-dimensions each rank has its own.
 */
uint32_t
sym_atom_of(const struct sym_context *ctx, int param, int rank)
{
	const struct mesh	*mesh = &ctx->model.mesh;
	struct placement	 g = ctx->grad_placement[param];
	struct coord		 c;
	int			 slice, etp_i;

	mesh_coord_of(mesh, rank, &c);
	slice = c.tp / mesh->etp;
	etp_i = c.tp % mesh->etp;
	if (g.slice == PLACE_REPLICATE)
		slice = 0;
	if (g.etp == PLACE_REPLICATE)
		etp_i = 0;
	return (uint32_t)mesh_rank_of(mesh, c.pp, c.dp, slice * mesh->etp +
	    etp_i);
}

static int
stage_base(const struct sym_run *run, int param)
{
	return run->model->params[param].stage * run->stage_ranks;
}

static struct seglist *
values_of(const struct sym_run *run, int param, int rank)
{
	int	i = rank - stage_base(run, param);

	if (i < 0 || i >= run->stage_ranks)
		return NULL;
	return &run->vals[param][i];
}

const struct segment *
sym_segments(const struct sym_run *run, int param, int rank, int *nsegs)
{
	struct seglist *sl = values_of(run, param, rank);

	*nsegs = sl ? sl->n : 0;
	return sl ? sl->v : NULL;
}

const struct lincomb *
sym_expected(const struct sym_run *run, int param, int rank)
{
	int	i = rank - stage_base(run, param);

	if (i < 0 || i >= run->stage_ranks)
		return NULL;
	return run->expected[param][i];
}

const struct sym_context *
sym_run_context(const struct sym_run *run)
{
	return run->ctx;
}

struct arena *
sym_run_arena(const struct sym_run *run)
{
	return run->arena;
}

static void
init_values(struct sym_run *run)
{
	const struct model *m = run->model;
	int	p, i;

	run->vals = xcalloc(m->nparams, sizeof *run->vals);
	for (p = 0; p < m->nparams; p++) {
		int base = m->params[p].stage * run->stage_ranks;

		run->vals[p] = arena_alloc(run->arena,
		    run->stage_ranks * sizeof **run->vals);
		for (i = 0; i < run->stage_ranks; i++) {
			struct seglist *sl = &run->vals[p][i];

			sl->v = arena_alloc(run->arena, sizeof *sl->v);
			sl->n = 1;
			sl->v[0].lo = 0;
			sl->v[0].hi = m->params[p].local_elems;
			sl->v[0].value = lc_atom(run->arena,
			    sym_atom_of(run->ctx, p, base + i));
		}
	}
}

/* ---- expected values ------------------------------------------------- */

/*
 * Ranks that hold the same part of a logical parameter share a shard key:
 * the tp coordinate for tp-sharded weights, the expert coordinates for
 * expert weights, nothing for replicated ones.
 */
static int
shard_key(const struct model *m, const struct param *p, int rank)
{
	struct coord	c;

	mesh_coord_of(&m->mesh, rank, &c);
	switch (p->role) {
	case ROLE_EMBEDDING:
	case ROLE_OUTPUT:
	case ROLE_COLUMN:
	case ROLE_ROW:
		return c.tp;
	case ROLE_EXPERT_FC1:
	case ROLE_EXPERT_FC2:
		return c.ep * m->mesh.etp + c.etp;
	case ROLE_NORM:
	case ROLE_HEAD_NORM:
	case ROLE_ROUTER:
		break;
	}
	return 0;
}

struct keyed_atom {
	int		key;
	uint32_t	atom;
};

static int
cmp_keyed_atom(const void *a, const void *b)
{
	const struct keyed_atom *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->atom < y->atom ? -1 : x->atom > y->atom;
}

/*
 * Expected: (1/dp) times the sum of the complete local gradients over all
 * micro-batches and both uses of a tied weight, which is the sum of the
 * distinct atoms of all ranks holding the same shard.  The holders' atoms
 * are sorted by shard key, so each shard's sum is built from one run.
 */
static void
init_expected(struct sym_run *run)
{
	const struct model *m = run->model;
	int	 nkeys = m->mesh.tp > m->mesh.ep * m->mesh.etp ? m->mesh.tp :
		    m->mesh.ep * m->mesh.etp;
	struct keyed_atom *ka = xcalloc(2 * (size_t)run->stage_ranks,
	    sizeof *ka);
	const struct lincomb **by_key = xcalloc(nkeys, sizeof *by_key);
	const struct lincomb **terms = xcalloc(2 * (size_t)run->stage_ranks,
	    sizeof *terms);
	struct rational inv_dp = q_make(1, m->mesh.dp);
	int	 l, k, i, j, n, nka;

	run->expected = xcalloc(m->nparams, sizeof *run->expected);
	for (l = 0; l < m->nlogical; l++) {
		const struct logical_param *lp = &m->logical[l];

		nka = 0;
		for (k = 0; k < lp->ninstances; k++) {
			int pi = lp->instance[k];
			int base = m->params[pi].stage * run->stage_ranks;

			for (i = 0; i < run->stage_ranks; i++) {
				ka[nka].key = shard_key(m, &m->params[pi],
				    base + i);
				ka[nka++].atom = sym_atom_of(run->ctx, pi,
				    base + i);
			}
		}
		qsort(ka, nka, sizeof *ka, cmp_keyed_atom);
		for (i = 0; i < nka; i = j) {
			for (j = i, n = 0; j < nka && ka[j].key == ka[i].key;
			    j++)
				if (j == i || ka[j].atom != ka[j - 1].atom)
					terms[n++] = lc_atom(run->arena,
					    ka[j].atom);
			by_key[ka[i].key] = lc_sum(run->arena, terms, n,
			    inv_dp);
		}
		for (k = 0; k < lp->ninstances; k++) {
			int pi = lp->instance[k];
			int base = m->params[pi].stage * run->stage_ranks;

			run->expected[pi] = arena_alloc(run->arena,
			    run->stage_ranks * sizeof **run->expected);
			for (i = 0; i < run->stage_ranks; i++)
				run->expected[pi][i] = by_key[shard_key(m,
				    &m->params[pi], base + i)];
		}
	}
	free(ka);
	free(by_key);
	free(terms);
}

/* ---- segment arithmetic ---------------------------------------------- */

static void
seg_push(struct segment *out, int *n, int64_t lo, int64_t hi,
    const struct lincomb *v, uint32_t state)
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

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The sum of the members' segment lists, times scale: one piece per range
 * where every member's value is constant.  Flags *mixed when two members
 * contribute to a piece in different synchronization states.
 */
static struct seglist
seg_sum(struct sym_run *run, struct seglist *const *members, int n,
    struct rational scale, bool *mixed)
{
	struct seglist	 out;
	int64_t		*cuts;
	int		 ncuts = 0, i, j, nout = 0;
	int		*pos = xcalloc(n, sizeof *pos);
	const struct lincomb **vals = xcalloc(n, sizeof *vals);
	bool		 single = true;

	for (i = 0; i < n; i++)
		if (members[i]->n != 1)
			single = false;
	if (single) {
		/* The common case: one segment per member, one piece. */
		uint32_t state = 0;

		out.v = arena_alloc(run->arena, sizeof *out.v);
		for (i = 0; i < n; i++) {
			vals[i] = members[i]->v[0].value;
			state |= members[i]->v[0].state;
			if (members[i]->v[0].state != members[0]->v[0].state)
				*mixed = true;
		}
		out.v[0].lo = members[0]->v[0].lo;
		out.v[0].hi = members[0]->v[0].hi;
		out.v[0].value = lc_sum(run->arena, vals, n, scale);
		out.v[0].state = state | (1u << run->step);
		out.n = 1;
		free(pos);
		free(vals);
		return out;
	}
	for (i = 0; i < n; i++)
		ncuts += members[i]->n + 1;
	cuts = xcalloc(ncuts, sizeof *cuts);
	ncuts = 0;
	for (i = 0; i < n; i++) {
		for (j = 0; j < members[i]->n; j++)
			cuts[ncuts++] = members[i]->v[j].lo;
		cuts[ncuts++] = members[i]->v[members[i]->n - 1].hi;
	}
	qsort(cuts, ncuts, sizeof *cuts, cmp_i64);
	out.v = arena_alloc(run->arena, ncuts * sizeof *out.v);
	for (j = 0; j + 1 < ncuts; j++) {
		int64_t lo = cuts[j], hi = cuts[j + 1];
		uint32_t state = 0, first = 0;

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
		seg_push(out.v, &nout, lo, hi, lc_sum(run->arena, vals, n,
		    scale), state | (1u << run->step));
	}
	out.n = nout;
	free(cuts);
	free(pos);
	free(vals);
	return out;
}

/*
 * Member `mine` after a reduce-scatter: the combined value inside the
 * ranges it owns, its own value elsewhere.
 */
static struct seglist
seg_overlay(struct sym_run *run, const struct seglist *mine,
    const struct seglist *combined, int64_t (*owned)[2], int nowned)
{
	struct seglist	 out;
	int64_t		*cuts;
	int		 ncuts = 0, i, j, r, nout = 0, pm = 0, pc = 0;

	cuts = xcalloc(mine->n + combined->n + 2 * nowned + 2, sizeof *cuts);
	for (i = 0; i < mine->n; i++)
		cuts[ncuts++] = mine->v[i].lo;
	for (i = 0; i < combined->n; i++)
		cuts[ncuts++] = combined->v[i].lo;
	for (r = 0; r < nowned; r++) {
		cuts[ncuts++] = owned[r][0];
		cuts[ncuts++] = owned[r][1];
	}
	cuts[ncuts++] = mine->v[mine->n - 1].hi;
	qsort(cuts, ncuts, sizeof *cuts, cmp_i64);
	out.v = arena_alloc(run->arena, ncuts * sizeof *out.v);
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
			seg_push(out.v, &nout, lo, hi, combined->v[pc].value,
			    combined->v[pc].state);
		} else {
			while (mine->v[pm].hi <= lo)
				pm++;
			seg_push(out.v, &nout, lo, hi, mine->v[pm].value,
			    mine->v[pm].state);
		}
	}
	out.n = nout;
	free(cuts);
	return out;
}

/* ---- executing the steps --------------------------------------------- */

static void
note_order_issue(struct sym_run *run, int param)
{
	int	l = run->model->params[param].logical, i;

	for (i = 0; i < run->nissues; i++)
		if (run->issues[i].step == run->step &&
		    run->issues[i].logical == l)
			return;
	run->issues = xreallocarray(run->issues, run->nissues + 1,
	    sizeof *run->issues);
	run->issues[run->nissues].step = run->step;
	run->issues[run->nissues].logical = l;
	run->nissues++;
}

static void
scale_values(struct sym_run *run, struct seglist *sl, struct rational q)
{
	struct segment	*v = arena_alloc(run->arena, sl->n * sizeof *v);
	int		 i;

	for (i = 0; i < sl->n; i++) {
		v[i] = sl->v[i];
		v[i].value = lc_scale(run->arena, sl->v[i].value, q);
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
		if (!syncplan_touches(s, m, p))
			continue;
		for (i = 0; i < run->stage_ranks; i++) {
			struct seglist *sl = &run->vals[p][i];

			/* Replicas share values: remember the last result. */
			if (sl->n == 1 && sl->v[0].value == last_in) {
				struct segment *v = arena_alloc(run->arena,
				    sizeof *v);

				*v = sl->v[0];
				v->value = last_out;
				sl->v = v;
				continue;
			}
			k = sl->n == 1;
			if (k)
				last_in = sl->v[0].value;
			scale_values(run, sl, s->scale);
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
		if (!syncplan_touches(s, m, p))
			continue;
		for (i = 0; i < run->stage_ranks; i++) {
			struct coord c;
			struct seglist *sl = &run->vals[p][i];
			struct segment *v;

			mesh_coord_of(&m->mesh, stage_base(run, p) + i, &c);
			if (!((s->replicate.slice == PLACE_REPLICATE &&
			    c.tp / m->mesh.etp != 0) ||
			    (s->replicate.etp == PLACE_REPLICATE &&
			    c.tp % m->mesh.etp != 0)))
				continue;
			v = arena_alloc(run->arena, sl->n * sizeof *v);
			for (j = 0; j < sl->n; j++) {
				v[j] = sl->v[j];
				v[j].value = &lincomb_zero;
			}
			sl->v = v;
		}
	}
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
		inst = model_instance_on(m, param, members[i]);
		lists[i] = values_of(run, inst, members[i]);
	}
	if (s->average)
		scale = q_make(1, n);
	combined = seg_sum(run, lists, n, scale, &mixed);
	if (mixed)
		note_order_issue(run, param);
	for (i = 0; i < n; i++) {
		if (s->op == SYNC_REDUCE_SCATTER) {
			int64_t owned[16][2];
			int no;

			inst = model_instance_on(m, param, members[i]);
			no = layout_owned_ranges(&run->ctx->layout, m, inst, i,
			    owned, 16);
			*lists[i] = seg_overlay(run, lists[i], &combined,
			    owned, no);
		} else
			*lists[i] = combined;
	}
}

static void
run_collective(struct sym_run *run, const struct sync_step *s)
{
	const struct model *m = run->model;
	int	 size = mesh_group_size(&m->mesh, s->group);
	int	*members = xcalloc(size, sizeof *members);
	struct seglist **lists = xcalloc(size, sizeof *lists);
	int	 p, i, rank;

	for (p = 0; p < m->nparams; p++) {
		if (!syncplan_touches(s, m, p))
			continue;
		for (i = 0; i < run->stage_ranks; i++) {
			rank = stage_base(run, p) + i;
			/* The lowest member runs the group's collective. */
			if (mesh_group_id(&m->mesh, s->group, rank) != rank)
				continue;
			reduce_group(run, s, p, rank, members, lists);
		}
	}
	free(members);
	free(lists);
}

static void
run_plan(struct sym_run *run, sym_step_hook *hook, void *hook_arg)
{
	const struct sync_plan *plan = &run->ctx->plan;
	int	k;

	if (hook != NULL)
		hook(hook_arg, run, -1);
	for (k = 0; k < plan->nsteps; k++) {
		const struct sync_step *s = &plan->steps[k];

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
			run_collective(run, s);
			break;
		}
		if (hook != NULL)
			hook(hook_arg, run, k);
	}
}

/* ---- verdicts -------------------------------------------------------- */

struct cell_list {
	struct cell	*v;
	int		*key;	/* shard key of each cell */
	size_t		 n, cap;
};

static struct cell *
cell_add(struct cell_list *cl)
{
	if (cl->n == cl->cap) {
		cl->cap = cl->cap ? 2 * cl->cap : 64;
		cl->v = xreallocarray(cl->v, cl->cap, sizeof *cl->v);
		cl->key = xreallocarray(cl->key, cl->cap, sizeof *cl->key);
	}
	memset(&cl->v[cl->n], 0, sizeof cl->v[cl->n]);
	return &cl->v[cl->n++];
}

/* Split a rank's segments at the boundaries of the ranges it uses. */
static void
emit_cells(struct sym_run *run, struct cell_list *cl, int param, int rank)
{
	const struct model *m = run->model;
	const struct seglist *sl = values_of(run, param, rank);
	const struct lincomb *expected = sym_expected(run, param, rank);
	int64_t	 used[16][2];
	int	 nused, i, r, key = shard_key(m, &m->params[param], rank);
	struct coord c;

	nused = syncplan_used_ranges(m, &run->ctx->layout, param, rank, used,
	    16);
	mesh_coord_of(&m->mesh, rank, &c);
	for (i = 0; i < sl->n; i++) {
		int64_t lo = sl->v[i].lo, hi = sl->v[i].hi;

		while (lo < hi) {
			int64_t end = hi;
			bool inside = false;

			for (r = 0; r < nused; r++) {
				if (used[r][0] <= lo && lo < used[r][1]) {
					inside = true;
					if (used[r][1] < end)
						end = used[r][1];
				} else if (used[r][0] > lo && used[r][0] < end)
					end = used[r][0];
			}
			struct cell *ce = cell_add(cl);

			cl->key[cl->n - 1] = key;
			ce->rank = rank;
			ce->coord = c;
			ce->lo = lo;
			ce->hi = end;
			ce->used = inside;
			ce->value = sl->v[i].value;
			ce->expected = expected;
			ce->ok = inside && same_value(run, ce->value, expected);
			lo = end;
		}
	}
}

/*
 * Consistent: for every element, every used copy holds the same value.
 * Cells of one shard key are cut at all their boundaries; each piece keeps
 * the first used value seen and every other used cell covering it must
 * match.  Only needed when some used cell is wrong.
 */
static bool
cells_consistent(const struct cell_list *cl)
{
	int64_t	*cuts = xcalloc(2 * cl->n + 1, sizeof *cuts);
	const struct lincomb **piece = xcalloc(2 * cl->n + 1, sizeof *piece);
	size_t	 i, j, ncuts, lo;
	int	 key, maxkey = 0;
	bool	 ok = true;

	for (i = 0; i < cl->n; i++)
		if (cl->key[i] > maxkey)
			maxkey = cl->key[i];
	for (key = 0; key <= maxkey && ok; key++) {
		ncuts = 0;
		for (i = 0; i < cl->n; i++)
			if (cl->v[i].used && cl->key[i] == key) {
				cuts[ncuts++] = cl->v[i].lo;
				cuts[ncuts++] = cl->v[i].hi;
			}
		if (ncuts == 0)
			continue;
		qsort(cuts, ncuts, sizeof *cuts, cmp_i64);
		for (i = j = 1; i < ncuts; i++)
			if (cuts[i] != cuts[j - 1])
				cuts[j++] = cuts[i];
		ncuts = j;
		memset(piece, 0, ncuts * sizeof *piece);
		for (i = 0; i < cl->n && ok; i++) {
			const struct cell *c = &cl->v[i];
			size_t a = 0, b = ncuts;

			if (!c->used || cl->key[i] != key)
				continue;
			while (a < b) {		/* first cut >= c->lo */
				size_t mid = (a + b) / 2;

				if (cuts[mid] < c->lo)
					a = mid + 1;
				else
					b = mid;
			}
			for (lo = a; lo + 1 < ncuts && cuts[lo] < c->hi; lo++) {
				if (piece[lo] == NULL)
					piece[lo] = c->value;
				else if (piece[lo] != c->value &&
				    !lc_equal(piece[lo], c->value))
					ok = false;
			}
		}
	}
	free(cuts);
	free(piece);
	return ok;
}

static void
fill_param(struct sym_run *run, struct audit *a, int l,
    struct param_result *pr)
{
	const struct model *m = run->model;
	const struct logical_param *lp = &m->logical[l];
	const struct param *first = &m->params[lp->instance[0]];
	struct cell_list cl = { 0 };
	int	 inst, rank, k, base;
	size_t	 c;

	/* The audit outlives the model: copy the names into its arena. */
	pr->name = arena_strdup(&a->arena, lp->name);
	pr->tied_with = lp->tied_with ? arena_strdup(&a->arena, lp->tied_with) :
	    NULL;
	pr->elems = first->elems;
	pr->is_expert = first->expert;
	/* Instances are in stage order, so cells come out sorted by rank. */
	for (k = 0; k < lp->ninstances; k++) {
		inst = lp->instance[k];
		base = m->params[inst].stage * run->stage_ranks;
		for (rank = base; rank < base + run->stage_ranks; rank++)
			emit_cells(run, &cl, inst, rank);
	}
	pr->correct = true;
	for (c = 0; c < cl.n; c++)
		if (cl.v[c].used && !cl.v[c].ok)
			pr->correct = false;
	pr->consistent = pr->correct || cells_consistent(&cl);
	pr->cells = arena_alloc(&a->arena, cl.n * sizeof *pr->cells);
	memcpy(pr->cells, cl.v, cl.n * sizeof *pr->cells);
	pr->ncells = cl.n;
	free(cl.v);
	free(cl.key);
}

/* ---- findings -------------------------------------------------------- */

struct finding_list {
	struct audit	*audit;
	size_t		 cap;
};

static int *
wrong_ranks(struct audit *a, const struct param_result *pr, size_t *n)
{
	int	*r = arena_alloc(&a->arena, (pr->ncells + 1) * sizeof *r);
	size_t	 i;

	*n = 0;
	for (i = 0; i < pr->ncells; i++) {
		const struct cell *c = &pr->cells[i];

		if (!c->used || c->ok)
			continue;
		if (*n > 0 && r[*n - 1] == c->rank)
			continue;
		r[(*n)++] = c->rank;
	}
	return r;
}

/*
 * Merge into an existing finding of the same kind and op (one finding for
 * all routers of a model), or add a new one.
 */
static void
add_finding(struct finding_list *fl, enum finding_kind kind,
    const struct param_result *pr, const char *op, const char *dim,
    const char *message, const char *fix)
{
	struct audit	*a = fl->audit;
	struct finding	*f;
	size_t		 i, nr, j, k, n;
	int		*ranks = wrong_ranks(a, pr, &nr);

	for (i = 0; i < a->nfindings; i++) {
		f = &a->findings[i];
		if (f->kind != kind || strcmp(f->op, op) != 0 ||
		    strcmp(f->message, message) != 0)
			continue;
		const char **params = arena_alloc(&a->arena,
		    (f->nparams + 1) * sizeof *params);
		memcpy(params, f->params, f->nparams * sizeof *params);
		params[f->nparams] = pr->name;
		f->params = params;
		f->nparams++;
		/* Union of two ascending rank lists. */
		int *u = arena_alloc(&a->arena, (f->nranks + nr + 1) *
		    sizeof *u);
		for (j = k = n = 0; j < f->nranks || k < nr;) {
			int x;

			if (k >= nr || (j < f->nranks && f->ranks[j] < ranks[k]))
				x = f->ranks[j++];
			else if (j >= f->nranks || ranks[k] < f->ranks[j])
				x = ranks[k++];
			else {
				x = ranks[k++];
				j++;
			}
			u[n++] = x;
		}
		f->ranks = u;
		f->nranks = n;
		return;
	}
	if (a->nfindings == fl->cap) {
		struct finding *nf;

		fl->cap = fl->cap ? 2 * fl->cap : 8;
		nf = arena_alloc(&a->arena, fl->cap * sizeof *nf);
		if (a->nfindings > 0)
			memcpy(nf, a->findings, a->nfindings * sizeof *nf);
		a->findings = nf;
	}
	f = &a->findings[a->nfindings++];
	memset(f, 0, sizeof *f);
	f->kind = kind;
	f->param = pr->name;
	f->params = arena_alloc(&a->arena, sizeof *f->params);
	f->params[0] = pr->name;
	f->nparams = 1;
	f->ranks = ranks;
	f->nranks = nr;
	f->op = op;
	f->dim = dim;
	f->message = message;
	f->fix = fix;
}

static const char *
fmt(struct audit *a, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static const char *
fmt(struct audit *a, const char *format, ...)
{
	char	 buf[1024];
	va_list	 ap;

	va_start(ap, format);
	vsnprintf(buf, sizeof buf, format, ap);
	va_end(ap);
	return arena_strdup(&a->arena, buf);
}

static bool
touches_logical(const struct sync_step *s, const struct model *m, int l)
{
	int	k;

	for (k = 0; k < m->logical[l].ninstances; k++)
		if (syncplan_touches(s, m, m->logical[l].instance[k]))
			return true;
	return false;
}

/*
 * A gradient whose true placement (from the placement rules) and declared
 * placement (what the framework does) disagree: Partial declared Replicate
 * is a missing reduction, Replicate declared Partial a double count.
 */
static bool
explain_placement(struct finding_list *fl, const struct mesh *mesh,
    const struct sync_step *s, const struct param_result *pr)
{
	struct audit	*a = fl->audit;
	bool		 missing, doubled;
	char		 truth[96], declared[96];

	missing = (s->truth.slice == PLACE_PARTIAL &&
	    s->declared.slice == PLACE_REPLICATE) ||
	    (s->truth.etp == PLACE_PARTIAL &&
	    s->declared.etp == PLACE_REPLICATE);
	doubled = (s->truth.slice == PLACE_REPLICATE &&
	    s->declared.slice == PLACE_PARTIAL) ||
	    (s->truth.etp == PLACE_REPLICATE &&
	    s->declared.etp == PLACE_PARTIAL);
	if (missing)
		add_finding(fl, FINDING_MISSING_REDUCTION, pr, s->label, "tp",
		    fmt(a, "over tp the gradient is %s (each tp rank holds "
		    "only its share) but is declared %s, so the %s never "
		    "runs%s%s%s", pl_format(mesh, s->truth, truth, sizeof truth),
		    pl_format(mesh, s->declared, declared, sizeof declared),
		    s->label, s->cite ? " (" : "", s->cite ? s->cite : "",
		    s->cite ? ")" : ""), s->fix);
	else if (doubled)
		add_finding(fl, FINDING_DOUBLE_COUNT, pr, s->label, "tp",
		    fmt(a, "over tp the gradient is %s but is declared %s "
		    "and reduced over tp, which counts its replicated part "
		    "once per replica", pl_format(mesh, s->truth, truth,
		    sizeof truth), pl_format(mesh, s->declared, declared,
		    sizeof declared)), s->fix);
	return missing || doubled;
}

/*
 * The experts' input gradient (torchtitan #1878) feeds the router's score
 * gradient: when its etp all-reduce is skipped, say so next to the router.
 */
static void
explain_backward_reductions(struct finding_list *fl, const struct model *m,
    const struct sym_context *ctx, const struct param_result *pr, int stage)
{
	char	truth[96], declared[96];
	int	i;

	for (i = 0; i < ctx->nreductions; i++) {
		const struct backward_reduction *r = &ctx->reductions[i];

		if (r->stage != stage || pl_equal(r->truth, r->declared))
			continue;
		add_finding(fl, FINDING_MISSING_REDUCTION, pr, r->what, r->dim,
		    fmt(fl->audit, "the %s is %s over %s but declared %s, so "
		    "its all-reduce over %s (%s) is skipped and the router's "
		    "score gradient stays Partial", r->what, pl_format(&m->mesh,
		    r->truth, truth, sizeof truth), r->dim, pl_format(&m->mesh,
		    r->declared, declared, sizeof declared), r->dim, r->cite),
		    "all-reduce the routed expert input gradient over etp in "
		    "backward (sync.expert_input_grad: etp-all-reduce)");
	}
}

static bool
all_wrong_proportional(const struct param_result *pr, struct rational *c)
{
	size_t	i;
	bool	have = false;

	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];
		struct rational	 q;

		if (!ce->used || ce->ok)
			continue;
		if (!lc_proportional(ce->value, ce->expected, &q))
			return false;
		if (have && !q_equal(q, *c))
			return false;
		*c = q;
		have = true;
	}
	return have;
}

/*
 * True when every wrong used cell holds part of its expected sum with the
 * right coefficients: some contributing ranks never reached it, so the
 * reduction ran over too small a group.
 */
static bool
all_wrong_partial(const struct param_result *pr)
{
	size_t	i;
	bool	have = false;

	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];

		if (!ce->used || ce->ok)
			continue;
		if (!lc_strict_part(ce->value, ce->expected))
			return false;
		have = true;
	}
	return have;
}

static void
explain_param(struct finding_list *fl, const struct sym_run *run, int l,
    const struct param_result *pr)
{
	const struct sym_context *ctx = run->ctx;
	const struct model *m = run->model;
	struct audit	*a = fl->audit;
	const struct sync_step *scale_step = NULL;
	struct rational	 c;
	char		 q[48];
	bool		 explained = false;
	int		 i;

	for (i = 0; i < ctx->plan.nsteps; i++) {
		const struct sync_step *s = &ctx->plan.steps[i];

		if (!touches_logical(s, m, l))
			continue;
		if (s->op == SYNC_SCALE || s->op == SYNC_REDUCE_SCATTER ||
		    (s->op == SYNC_ALL_REDUCE && s->target == TARGET_BUFFER))
			scale_step = s;
		if (s->has_placement && s->op == SYNC_ALL_REDUCE &&
		    explain_placement(fl, &m->mesh, s, pr))
			explained = true;
	}
	for (i = 0; i < ctx->plan.nskipped; i++)
		if (touches_logical(&ctx->plan.skipped[i], m, l) &&
		    explain_placement(fl, &m->mesh,
		    &ctx->plan.skipped[i], pr))
			explained = true;
	if (explained && m->params[m->logical[l].instance[0]].role ==
	    ROLE_ROUTER)
		explain_backward_reductions(fl, m, ctx, pr,
		    m->params[m->logical[l].instance[0]].stage);
	for (i = 0; i < run->nissues; i++) {
		const struct sync_step *s = &ctx->plan.steps[run->issues[i].step];

		if (run->issues[i].logical != l)
			continue;
		add_finding(fl, FINDING_WRONG_ORDER, pr, s->label,
		    mesh_group_name(s->group), fmt(a, "the %s combined copies "
		    "in different states: parts of one were already reduced "
		    "by an earlier collective and parts of the other were "
		    "not, so the owners' values mix reduced and unreduced "
		    "gradients%s%s%s", s->label, s->cite ? " (" : "",
		    s->cite ? s->cite : "", s->cite ? ")" : ""), s->fix);
		explained = true;
	}
	if (explained || pr->correct)
		return;
	if (all_wrong_proportional(pr, &c)) {
		q_format(c, q, sizeof q);
		add_finding(fl, FINDING_WRONG_SCALE, pr, scale_step ?
		    scale_step->label : "gradient scaling", scale_step ?
		    mesh_group_name(scale_step->group) : "dp",
		    fmt(a, "the used values are %s times the expected "
		    "gradient: the right contributions with the wrong "
		    "factor", q), scale_step ? scale_step->fix :
		    "scale the gradient by 1/dp");
		return;
	}
	if (all_wrong_partial(pr)) {
		int p = m->logical[l].instance[0];
		bool dense_expert = m->params[p].expert &&
		    layout_buffer_of(m, p) == BUFFER_DENSE;

		add_finding(fl, FINDING_WRONG_GROUP, pr, scale_step ?
		    scale_step->label : "gradient synchronization", scale_step ?
		    mesh_group_name(scale_step->group) : "dp", fmt(a, "each "
		    "wrong rank holds a partial sum: contributions computed "
		    "on other ranks never reach it, so the reduction over %s "
		    "runs over too small a group%s", scale_step ?
		    mesh_group_name(scale_step->group) : "dp", dense_expert ?
		    " (expert parameters in the dense buffer are reduced over "
		    "dp, but the tp group's tokens are split over the etp "
		    "groups: they need edp)" : ""), dense_expert ?
		    "give expert parameters their own buffer, reduced over "
		    "edp, whenever etp differs from tp (layout.expert_buffer: "
		    "if-expert-mesh; Megatron cd4afffa64)" :
		    "reduce this gradient over every rank that computes a "
		    "part of it; explain shows which ranks each one misses");
		return;
	}
	if (!pr->consistent)
		add_finding(fl, FINDING_REPLICA_MISMATCH, pr, "gradient "
		    "synchronization", "dp", "replicas that must hold the "
		    "same gradient disagree", "run gradaudit explain on this "
		    "parameter to see which collective separates them");
	else
		add_finding(fl, FINDING_WRONG_GROUP, pr, "gradient "
		    "synchronization", "dp", "the used values combine "
		    "contributions of the wrong set of ranks",
		    "run gradaudit explain on this parameter to see which "
		    "collective gathers the wrong ranks");
}

void
sym_audit(const struct sym_context *ctx, struct audit *a,
    sym_step_hook *hook, void *hook_arg)
{
	struct sym_run	 run;
	struct finding_list fl = { a, 0 };
	const struct model *m = &ctx->model;
	int		 l;

	memset(a, 0, sizeof *a);
	arena_init(&a->arena);
	a->config = m->config;
	a->mesh = m->mesh;

	memset(&run, 0, sizeof run);
	run.ctx = ctx;
	run.model = m;
	run.arena = &a->arena;
	run.stage_ranks = m->mesh.dp * m->mesh.tp;
	init_values(&run);
	init_expected(&run);
	run_plan(&run, hook, hook_arg);

	a->nparams = m->nlogical;
	a->params = arena_alloc(&a->arena, m->nlogical * sizeof *a->params);
	a->consistent = a->correct = true;
	for (l = 0; l < m->nlogical; l++) {
		fill_param(&run, a, l, &a->params[l]);
		a->consistent = a->consistent && a->params[l].consistent;
		a->correct = a->correct && a->params[l].correct;
	}
	for (l = 0; l < m->nlogical; l++)
		if (!a->params[l].correct || !a->params[l].consistent)
			explain_param(&fl, &run, l, &a->params[l]);
	free(run.vals);
	free(run.expected);
	free(run.issues);
}
