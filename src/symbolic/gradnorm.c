/*
 * The gradient norm audit (gradnorm.h): the plan of the norm as two tables,
 * the filters that choose which elements a rank squares and the steps that
 * all-reduce the partial sums, and its symbolic execution on the values the
 * symbolic audit left in the cells of an audit.
 *
 * A norm squared is a list of pieces, each `mult` times the squares of one
 * value over one element range of one shard of a logical parameter.  An
 * all-reduce gives every member of a group the sum of the members' lists;
 * the lists are immutable and a group whose members hold the same lists as
 * a group before shares its result, so a mesh of thousands of ranks costs a
 * few merges per distinct norm, not one per rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/hash.h"
#include "base/sorted.h"
#include "base/xmalloc.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/syncplan.h"
#include "symbolic/audit.h"
#include "symbolic/context.h"
#include "symbolic/findings.h"
#include "symbolic/gradnorm.h"
#include "symbolic/lincomb.h"

/* ---- the plan ---------------------------------------------------------- */

/* The group of the sync plan's reduce-scatter of a buffer, or -1. */
static int
shard_group_of(const struct sym_context *ctx, enum buffer_kind b)
{
	int	i;

	for (i = 0; i < ctx->plan.nsteps; i++) {
		const struct sync_step *s = &ctx->plan.steps[i];

		if (s->op == SYNC_REDUCE_SCATTER && s->target ==
		    TARGET_BUFFER && s->buffer == b)
			return (int)s->group;
	}
	return -1;
}

/*
 * Does a shard step run over `group` for a buffer its sync plan shards
 * over `sharded_by` (-1: not at all)?  Over the sharding group only: the
 * replicas of a gradient each hold all of it.
 */
static bool
shard_step_runs(const struct config *c, int sharded_by)
{
	switch (c->grad_norm.shard_group) {
	case GN_SHARD_IF_SHARDED:
		return sharded_by >= 0;
	case GN_SHARD_ALWAYS:
		/* VeOmni PR #862: the replicas' norms are summed too. */
		return true;
	case GN_SHARD_NEVER:
		/* SpecForge PR #663: each rank clips by its own shard. */
		return false;
	}
	return false;
}

/*
 * The group a shard step runs over: the sharding group, or with
 * grad_norm.shard_group: always, that group with the replicas that hold
 * the same shards (HSDP's replicate dimension, FSDP2 and torchtitan's
 * dp_replicate): VeOmni before PR #862 all-reduced over the whole FSDP
 * group, so each shard's norm counted once per replica (issue 30: the
 * step ran over dp_shard alone, and the bug passed).
 */
static enum group_kind
shard_step_group(const struct config *c, int sharded_by,
    enum group_kind unsharded)
{
	if (sharded_by < 0)
		return unsharded;
	if (c->grad_norm.shard_group == GN_SHARD_ALWAYS) {
		if (sharded_by == GROUP_DP_SHARD)
			return GROUP_DP;
		if (sharded_by == GROUP_EFSDP)
			return GROUP_EDP;
	}
	return (enum group_kind)sharded_by;
}

static void
add_step(struct gn_plan *plan, enum gn_part part, enum group_kind group,
    bool average, enum cfg_key key, const char *label)
{
	struct gn_step	*s;

	if (plan->nsteps == GN_MAX_STEPS)
		fatalx("gradnorm: too many steps");
	s = &plan->steps[plan->nsteps++];
	s->part = part;
	s->group = group;
	s->average = average;
	s->key = key;
	s->label = label;
}

/*
 * Megatron (clip_grads.get_grad_norm_fp32) all-reduces the norm squared of
 * each optimizer over its grad-stats group: the dense one over the model
 * parallel group (tp, pp) and, with the distributed optimizer, the data
 * parallel shards too; the expert one over the expert model parallel
 * group (ep, etp, pp) and its edp shards; ChainedOptimizer then adds the
 * two.  The steps below do that in that order, pp last on the total.
 */
static void
plan_build(struct gn_plan *plan, const struct sym_context *ctx,
    const struct config *c)
{
	const struct model	*m = &ctx->model;
	int			 dense_by, expert_by, k;

	memset(plan, 0, sizeof *plan);
	for (k = 0; k < m->nparams; k++)
		if (m->params[k].expert &&
		    layout_buffer_of(m, k) == BUFFER_EXPERT)
			plan->expert_part = true;
	dense_by = shard_group_of(ctx, BUFFER_DENSE);
	expert_by = shard_group_of(ctx, BUFFER_EXPERT);

	if (shard_step_runs(c, dense_by))
		add_step(plan, GN_PART_DENSE, shard_step_group(c, dense_by,
		    GROUP_DP), false, KEY_SHARD_GROUP, "all-reduce of the "
		    "dense norm squared over its shard group");
	add_step(plan, GN_PART_DENSE, GROUP_TP, false, KEY_GRAD_NORM,
	    "all-reduce of the dense norm squared over tp");
	if (plan->expert_part) {
		if (shard_step_runs(c, expert_by))
			add_step(plan, GN_PART_EXPERT, shard_step_group(c,
			    expert_by, GROUP_EDP), false, KEY_SHARD_GROUP,
			    "all-reduce of the expert norm squared over its "
			    "shard group");
		/* Colossal-AI #2192: never summed over ep. */
		if (c->grad_norm.expert_norm != GN_EXPERT_LOCAL)
			add_step(plan, GN_PART_EXPERT, GROUP_EP,
			    c->grad_norm.expert_norm == GN_EXPERT_AVERAGE,
			    KEY_EXPERT_NORM, "all-reduce of the expert norm "
			    "squared over ep");
		add_step(plan, GN_PART_EXPERT, GROUP_ETP, false,
		    KEY_GRAD_NORM, "all-reduce of the expert norm squared "
		    "over etp");
	}
	if (c->grad_norm.pp_reduce == GN_PP_ALL_REDUCE)
		add_step(plan, GN_PART_TOTAL, GROUP_PP, false, KEY_PP_REDUCE,
		    "all-reduce of the norm squared over pp");
}

void
gn_plan_build(struct gn_plan *plan, const struct sym_context *ctx)
{
	plan_build(plan, ctx, ctx->model.config);
}

void
gn_step_describe(const struct gn_step *s, char *buf, size_t len)
{
	static const char *const part[GN_PART__COUNT] = {
		"dense", "expert", "total"
	};

	snprintf(buf, len, "all-reduce (%s) over %s of the %s norm squared",
	    s->average ? "average" : "sum", mesh_group_name(s->group),
	    part[s->part]);
}

/*
 * Is another rank of the tp group of the rank at c, with a lower tp
 * coordinate, holding the same shard of param?  Then the rank holds a tp
 * duplicate of it.  A dense parameter's shards are all one (replicated)
 * or all different (sharded over tp), so tp rank 0 tells; only an expert
 * parameter in the dense buffer needs every lower rank.
 */
static bool
tp_duplicate(const struct model *m, const struct param *p,
    const struct coord *c)
{
	struct coord	 o;
	int		 t, key = model_shard_key(m, p, c);

	for (t = 0; t < c->tp; t++) {
		mesh_coord_of(&m->mesh, mesh_rank_of(&m->mesh, c->pp, c->dp, t),
		    &o);
		if (model_shard_key(m, p, &o) == key)
			return true;
		if (!p->expert)
			break;
	}
	return false;
}

/*
 * The filters of Megatron's norm (get_main_grads_for_grad_norm, renamed
 * _filter_grads_for_norm in core_v0.19.0), one rule each: a parameter
 * instance a rule leaves out contributes nothing to the rank's norm.
 * Under the grad_norm: settings of c, the model's or one set right
 * (settings_in_effect).
 */
static int
part_of(const struct gn_plan *plan, const struct model *m,
    const struct config *c, int param, const struct coord *co)
{
	const struct param	*p = &m->params[param];
	const struct logical_param *l = &m->logical[p->logical];

	if (plan->expert_part && p->expert &&
	    layout_buffer_of(m, param) == BUFFER_EXPERT) {
		/* DeepSpeed PR #8613: the expert norm was discarded. */
		if (c->grad_norm.expert_norm == GN_EXPERT_OMIT)
			return -1;
		/*
		 * Megatron PR #5916: expert weights are not marked tensor
		 * parallel when etp is 1, so the dense filter kept them on
		 * tp rank 0 only, though each tp rank holds other experts.
		 */
		if (c->grad_norm.expert_filter == GN_EXPERT_FILTER_DENSE_TP &&
		    m->mesh.etp == 1 && co->tp != 0)
			return -1;
		return GN_PART_EXPERT;
	}
	/*
	 * Megatron-LM #7452 finding 8: the learnable softmax_offset holds
	 * one value for each of the rank's own heads, but nothing marks it
	 * tensor_model_parallel (DotProductAttention, core_v0.15.0 to
	 * d98e8a64dd), so param_is_not_tensor_parallel_duplicate takes it
	 * for a replica and keeps tp rank 0's heads only; PR #7530 marks it.
	 * The mark matters only to that filter: a norm that counts every tp
	 * rank's parameters (tp_duplicates: every-tp-rank) keeps the sinks
	 * whether they are marked or not.
	 */
	if (p->role == ROLE_SINK &&
	    c->grad_norm.sink_filter == GN_SINK_FILTER_TP_RANK_0 &&
	    c->grad_norm.tp_duplicates == GN_TP_DUP_ONCE && co->tp != 0)
		return -1;
	/* param_is_not_shared: the last stage's copy of a tied weight. */
	if (l->ninstances == 2 && l->instance[1] == param &&
	    c->grad_norm.tied_copies == GN_TIED_ONCE)
		return -1;
	/* param_is_not_tensor_parallel_duplicate */
	if (c->grad_norm.tp_duplicates == GN_TP_DUP_ONCE &&
	    tp_duplicate(m, p, co))
		return -1;
	return GN_PART_DENSE;
}

int
gn_part_of(const struct gn_plan *plan, const struct model *m, int param,
    const struct coord *co)
{
	return part_of(plan, m, m->config, param, co);
}

/* BLOOM-176B: the BF16 optimizer clipped on tp rank 0 only. */
static bool
clips(const struct model *m, const struct config *c, int rank)
{
	struct coord	co;

	if (c->grad_norm.clip_ranks == GN_CLIP_ALL)
		return true;
	mesh_coord_of(&m->mesh, rank, &co);
	return co.tp == 0;
}

bool
gn_clips(const struct model *m, int rank)
{
	return clips(m, m->config, rank);
}

/* ---- lists of pieces ------------------------------------------------- */

struct plist {
	struct gn_piece	*v;
	size_t		 n;
};

static int
cmp_i64(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

/*
 * Any total order on the values of pieces in which equal ones are
 * adjacent: by their hashes, then term by term where two hashes agree.
 */
static int
value_order(const struct gn_piece *pa, const struct gn_piece *pb)
{
	const struct lincomb *a = pa->value, *b = pb->value;
	uint32_t	 i;
	int		 c;

	if (a == b)
		return 0;
	if (pa->vhash != pb->vhash)
		return pa->vhash < pb->vhash ? -1 : 1;
	if (a->nterms != b->nterms)
		return a->nterms < b->nterms ? -1 : 1;
	for (i = 0; i < a->nterms; i++)
		if ((c = cmp_i64(a->terms[i].atom, b->terms[i].atom)) != 0 ||
		    (c = cmp_i64(a->terms[i].coef.num,
		    b->terms[i].coef.num)) != 0 ||
		    (c = cmp_i64(a->terms[i].coef.den,
		    b->terms[i].coef.den)) != 0)
			return c;
	return 0;
}

static int
piece_order(const void *x, const void *y)
{
	const struct gn_piece *a = x, *b = y;
	int	c;

	if ((c = cmp_i64(a->param, b->param)) != 0 ||
	    (c = cmp_i64(a->shard, b->shard)) != 0 ||
	    (c = cmp_i64(a->lo, b->lo)) != 0 ||
	    (c = cmp_i64(a->hi, b->hi)) != 0)
		return c;
	return value_order(a, b);
}

static int
cmp_cut(const void *x, const void *y)
{
	return cmp_i64(*(const int64_t *)x, *(const int64_t *)y);
}

static bool
same_place(const struct gn_piece *a, const struct gn_piece *b)
{
	return a->param == b->param && a->shard == b->shard &&
	    a->lo == b->lo && a->hi == b->hi;
}

/* Sort v and add up the multiplicities of equal pieces; drop zeros. */
static size_t
pieces_merge(struct gn_piece *v, size_t n)
{
	size_t	 i, k = 0;

	/* A rank's own pieces come in order: no sort needed then. */
	for (i = 1; i < n && piece_order(&v[i - 1], &v[i]) <= 0; i++)
		;
	if (i < n)
		qsort(v, n, sizeof *v, piece_order);
	for (i = 0; i < n; i++) {
		if (k > 0 && same_place(&v[k - 1], &v[i]) &&
		    value_order(&v[k - 1], &v[i]) == 0) {
			v[k - 1].mult = q_add(v[k - 1].mult, v[i].mult);
			continue;
		}
		v[k++] = v[i];
	}
	for (i = n = 0; i < k; i++)
		if (!q_is_zero(v[i].mult))
			v[n++] = v[i];
	return n;
}

/*
 * The list in arena a holding the sum of lists in[0..n), scaled by q; in
 * is sorted, so the copies of one list are neighbours.  The replicas of a
 * group hold one interned list, and a list taken c times is added once
 * with c times its multiplicities: merging c copies of it cost a sort of
 * c times its pieces (a dp group of 2,048 ranks, issue 24).
 */
static struct plist *
plist_sum(struct arena *a, struct plist *const *in, size_t n,
    struct rational q)
{
	struct plist	*out;
	struct rational	 w;
	size_t		 i, j, k, len = 0;
	bool		 one;

	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && in[j] == in[i]; j++)
			;
		len += in[i]->n;
	}
	/* Lists are kept sorted and merged: one of them is its own sum. */
	if (n > 0 && in[n - 1] == in[0] && q_equal(q_mul(q,
	    q_make((int64_t)n, 1)), q_make(1, 1)))
		return in[0];
	out = arena_alloc(a, sizeof *out);
	out->v = len > 0 ? arena_alloc(a, len * sizeof *out->v) : NULL;
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && in[j] == in[i]; j++)
			;
		w = q_mul(q, q_make((int64_t)(j - i), 1));
		one = q_equal(w, q_make(1, 1));
		for (k = 0; k < in[i]->n; k++) {
			out->v[out->n] = in[i]->v[k];
			if (!one)
				out->v[out->n].mult = q_mul(in[i]->v[k].mult,
				    w);
			out->n++;
		}
	}
	out->n = pieces_merge(out->v, out->n);
	return out;
}

/* The first of the n ascending cuts at or after lo, or n. */
static size_t
first_cut(const int64_t *cuts, size_t n, int64_t lo)
{
	size_t	 l = 0, h = n, m;

	while (l < h) {
		m = l + (h - l) / 2;
		if (cuts[m] < lo)
			l = m + 1;
		else
			h = m;
	}
	return l;
}

/*
 * The canonical form of a norm squared: pieces cut at every boundary of
 * their shard, equal ones added up, then neighbouring ranges that hold the
 * same values with the same multiplicities joined again.  Two norms are
 * the same exactly when their canonical forms are.
 */
static void
canonical(struct arena *a, const struct plist *in, struct gn_piece **out,
    size_t *nout)
{
	struct gn_piece	*cut = NULL, *v;
	int64_t		*cuts;
	size_t		 i, j, k, n = 0, ncuts, start, cap = 0, prev, cur;

	cuts = xcalloc(2 * in->n + 1, sizeof *cuts);
	for (i = 0; i < in->n; i = j) {
		for (j = i; j < in->n && in->v[j].param == in->v[i].param &&
		    in->v[j].shard == in->v[i].shard; j++)
			;
		for (ncuts = 0, k = i; k < j; k++) {
			cuts[ncuts++] = in->v[k].lo;
			cuts[ncuts++] = in->v[k].hi;
		}
		/*
		 * Each once: a norm summed over ranks whose values are
		 * their own (no dp reduction, its norm squared all-reduced)
		 * holds dp pieces of one range, and with the cut repeated
		 * for each, every piece stepped over all of them, dp
		 * squared per parameter in each of the fix search's audits
		 * (hf-48205-ep-router-partial-fixed at dp 4,096: 15 s).
		 */
		ncuts = sort_unique(cuts, ncuts, sizeof *cuts, cmp_cut);
		for (k = i; k < j; k++) {
			const struct gn_piece *p = &in->v[k];
			size_t	 c;

			for (c = first_cut(cuts, ncuts, p->lo);
			    c + 1 < ncuts && cuts[c] < p->hi; c++) {
				if (n == cap) {
					cap = cap ? 2 * cap : 64;
					cut = xreallocarray(cut, cap,
					    sizeof *cut);
				}
				cut[n] = *p;
				cut[n].lo = cuts[c];
				cut[n].hi = cuts[c + 1];
				n++;
			}
		}
	}
	n = pieces_merge(cut, n);
	/* Join a run of pieces into the previous run when they match. */
	v = arena_alloc(a, (n + 1) * sizeof *v);
	k = 0;
	prev = SIZE_MAX;
	for (i = 0; i < n; i = j) {
		for (j = i; j < n && same_place(&cut[j], &cut[i]); j++)
			;
		cur = k;
		if (prev != SIZE_MAX && cur - prev == j - i &&
		    v[prev].param == cut[i].param &&
		    v[prev].shard == cut[i].shard && v[prev].hi == cut[i].lo) {
			for (start = 0; start < j - i; start++)
				if (value_order(&v[prev + start],
				    &cut[i + start]) != 0 ||
				    !q_equal(v[prev + start].mult,
				    cut[i + start].mult))
					break;
			if (start == j - i) {
				for (start = 0; start < j - i; start++)
					v[prev + start].hi = cut[i].hi;
				continue;
			}
		}
		memcpy(&v[k], &cut[i], (j - i) * sizeof *v);
		k += j - i;
		prev = cur;
	}
	free(cuts);
	free(cut);
	*out = v;
	*nout = k;
}

static bool
same_form(const struct gn_piece *a, size_t na, const struct gn_piece *b,
    size_t nb)
{
	size_t	i;

	if (na != nb)
		return false;
	for (i = 0; i < na; i++)
		if (!same_place(&a[i], &b[i]) || !q_equal(a[i].mult,
		    b[i].mult) || (a[i].value != b[i].value &&
		    (a[i].vhash != b[i].vhash ||
		    !lc_equal(a[i].value, b[i].value))))
			return false;
	return true;
}

/* ---- group sums, shared ------------------------------------------------ */

/* A sum already built, by the lists it added up (sorted pointers). */
struct memo_entry {
	uint64_t	 hash;
	struct plist	**in;
	size_t		 n;
	bool		 average;
	struct plist	*out;
};

struct memo {
	struct memo_entry *v;
	size_t		 n, cap;	/* cap: a power of two */
};

static int
cmp_ptr(const void *x, const void *y)
{
	uintptr_t a = (uintptr_t)*(void *const *)x;
	uintptr_t b = (uintptr_t)*(void *const *)y;

	return a < b ? -1 : a > b;
}

static struct plist *
memo_sum(struct memo *mo, struct arena *a, struct plist **in, size_t n,
    bool average)
{
	struct memo_entry *e;
	uint64_t	 h;
	size_t		 i;

	qsort(in, n, sizeof *in, cmp_ptr);
	h = hash_bytes(in, n * sizeof *in) ^ (uint64_t)average;
	if (2 * (mo->n + 1) > mo->cap) {
		struct memo	 bigger;

		bigger.cap = mo->cap ? 2 * mo->cap : 64;
		bigger.n = mo->n;
		bigger.v = xcalloc(bigger.cap, sizeof *bigger.v);
		for (i = 0; i < mo->cap; i++) {
			size_t z;

			if (mo->v[i].in == NULL)
				continue;
			for (z = mo->v[i].hash & (bigger.cap - 1);
			    bigger.v[z].in != NULL; z = (z + 1) &
			    (bigger.cap - 1))
				;
			bigger.v[z] = mo->v[i];
		}
		free(mo->v);
		*mo = bigger;
	}
	for (i = h & (mo->cap - 1); mo->v[i].in != NULL;
	    i = (i + 1) & (mo->cap - 1)) {
		e = &mo->v[i];
		if (e->hash == h && e->n == n && e->average == average &&
		    memcmp(e->in, in, n * sizeof *in) == 0)
			return e->out;
	}
	e = &mo->v[i];
	e->hash = h;
	e->n = n;
	e->average = average;
	e->in = arena_alloc(a, n * sizeof *in);
	memcpy(e->in, in, n * sizeof *in);
	e->out = plist_sum(a, in, n, average ? q_make(1, (int64_t)n) :
	    q_make(1, 1));
	mo->n++;
	return e->out;
}

/* ---- the audit ------------------------------------------------------- */

/*
 * A grad_norm: setting that is not the correct norm's, with the model's
 * config but that setting set right, and the part of the instance the
 * cells being read belong to under it (settings_in_effect).
 */
struct gn_variant {
	enum cfg_key	 key;
	struct config	 config;	/* a shallow copy, never freed */
	int		 part;
};

struct gn_run {
	const struct sym_context *ctx;
	const struct model	*m;
	struct audit		*audit;
	struct arena		 arena;		/* the lists, freed at the end */
	struct memo		 memo;
	struct plist		**part[GN_PART__COUNT];	/* [part][rank] */
	struct gn_variant	 variant[NORM_SETTINGS_MAX];
	int			 nvariants;
	/* The variants' settings seen to change what the audit ran. */
	struct keyset		 in_effect;
	bool			 stopped;	/* past the memory limit */
};

/*
 * Do two plans all-reduce alike?  Steps over groups of one sum nothing
 * and are skipped (run_step), and two kinds of group that split the mesh
 * alike are one (dp_shard is dp without replicas).
 */
static bool
same_steps(const struct mesh *mesh, const struct gn_plan *a,
    const struct gn_plan *b)
{
	int	 i = 0, j = 0, r;

	for (;;) {
		while (i < a->nsteps && mesh_group_size(mesh,
		    a->steps[i].group) == 1)
			i++;
		while (j < b->nsteps && mesh_group_size(mesh,
		    b->steps[j].group) == 1)
			j++;
		if (i == a->nsteps || j == b->nsteps)
			return i == a->nsteps && j == b->nsteps;
		if (a->steps[i].part != b->steps[j].part ||
		    a->steps[i].average != b->steps[j].average)
			return false;
		if (a->steps[i].group != b->steps[j].group)
			for (r = 0; r < mesh->world; r++)
				if (mesh_group_id(mesh, a->steps[i].group, r) !=
				    mesh_group_id(mesh, b->steps[j].group, r))
					return false;
		i++;
		j++;
	}
}

/*
 * The grad_norm: settings that change what this audit runs, so that a
 * finding names no setting without effect on the model (gradaudit(1)):
 * a user's review found the attention sinks' mark (sink_filter, which
 * Megatron's profiles set) cited, with its fix, on a model without
 * sinks.  Each setting that is not the correct norm's is set right in a
 * copy of the config, and is in effect when the steps or the ranks that
 * clip differ under the copy; the filters are compared on the cells as
 * the lists are built (variant_parts, variant_compare).
 */
static void
settings_in_effect(struct gn_run *run, const struct sym_context *ctx,
    const struct gn_plan *plan)
{
	const struct model	*m = run->m;
	enum cfg_key		 keys[NORM_SETTINGS_MAX];
	int			 good[NORM_SETTINGS_MAX], r;
	size_t			 i, n;
	struct gn_plan		 other;

	memset(&run->in_effect, 0, sizeof run->in_effect);
	n = norm_settings_wrong(m->config, keys, good);
	for (i = 0; i < n; i++) {
		struct gn_variant *v = &run->variant[i];

		v->key = keys[i];
		v->config = *m->config;
		cfg_key_put(&v->config, keys[i], good[i]);
		plan_build(&other, ctx, &v->config);
		if (!same_steps(&m->mesh, plan, &other))
			keyset_add(&run->in_effect, v->key);
		for (r = 0; r < m->mesh.world &&
		    !keyset_has(&run->in_effect, v->key); r++)
			if (clips(m, m->config, r) != clips(m, &v->config, r))
				keyset_add(&run->in_effect, v->key);
	}
	run->nvariants = (int)n;
}

/* The part of instance inst on the rank at co under each variant. */
static void
variant_parts(struct gn_run *run, const struct gn_plan *plan, int inst,
    const struct coord *co)
{
	int	 i;

	for (i = 0; i < run->nvariants; i++) {
		struct gn_variant *v = &run->variant[i];

		if (!keyset_has(&run->in_effect, v->key))
			v->part = inst < 0 ? -1 : part_of(plan, run->m,
			    &v->config, inst, co);
	}
}

/* A used cell goes to part: the variants that put it elsewhere matter. */
static void
variant_compare(struct gn_run *run, int part)
{
	int	 i;

	for (i = 0; i < run->nvariants; i++)
		if (run->variant[i].part != part)
			keyset_add(&run->in_effect, run->variant[i].key);
}

/*
 * Do the norm's lists and forms, with the audit whose cells they read,
 * fit GRADAUDIT_MAX_MEMORY?  The run's count (run_check_memory) ends with
 * the steps, and the norm holds a list per distinct sum and a form per
 * class of ranks: where the ranks clip by norms of their own, a list and
 * a form per rank, each of every piece its groups summed.  At dp 1,024
 * (hf-48205-ep-router-partial-fixed) that is 2.9 MB beside the audit's
 * 3.5, and 9.3 MB in all for a setting its fix search tries, which no
 * count saw.  Past the limit, as the run (sym_context_over_limit), and
 * where that returns the norm stops (run->stopped).
 */
static bool
within_limit(struct gn_run *run)
{
	const struct sym_context *ctx = run->ctx;
	char	 why[SYM_WHY_SIZE];

	if (run->stopped)
		return false;
	if ((int64_t)(run->audit->arena.used_bytes + run->arena.used_bytes) <=
	    ctx->memory_limit)
		return true;
	snprintf(why, sizeof why, "%s: the gradient norm of the symbolic "
	    "audit of %d ranks took over %lld MiB, the most supported "
	    "(GRADAUDIT_MAX_MEMORY), though its size estimate fit: its ranks "
	    "clip by norms of their own, each summing other ranks' values; "
	    "audit the recipe on a smaller mesh (--set mesh.dp=N)",
	    run->m->config->file, run->m->mesh.world,
	    (long long)(ctx->memory_limit >> 20));
	sym_context_over_limit(ctx, why);
	run->stopped = true;
	return false;
}

/*
 * Lists already built, by their pieces: the replicas of an unsharded
 * gradient square the same values over the same ranges, and a mesh of
 * 131,072 ranks keeps one list for each set of them.
 */
struct list_table {
	struct plist	**v;
	uint64_t	*hash;
	size_t		 n, cap;	/* cap: a power of two */
};

static struct plist *
list_intern(struct list_table *t, struct arena *a, struct gn_piece *v,
    size_t n)
{
	struct plist	*pl;
	uint64_t	 h;
	size_t		 i;

	n = pieces_merge(v, n);
	h = hash_bytes(v, n * sizeof *v);
	if (2 * (t->n + 1) > t->cap) {
		struct list_table b;

		b.cap = t->cap ? 2 * t->cap : 64;
		b.n = t->n;
		b.v = xcalloc(b.cap, sizeof *b.v);
		b.hash = xcalloc(b.cap, sizeof *b.hash);
		for (i = 0; i < t->cap; i++) {
			size_t z;

			if (t->v[i] == NULL)
				continue;
			for (z = t->hash[i] & (b.cap - 1); b.v[z] != NULL;
			    z = (z + 1) & (b.cap - 1))
				;
			b.v[z] = t->v[i];
			b.hash[z] = t->hash[i];
		}
		free(t->v);
		free(t->hash);
		*t = b;
	}
	for (i = h & (t->cap - 1); t->v[i] != NULL; i = (i + 1) & (t->cap - 1))
		if (t->hash[i] == h && t->v[i]->n == n && (n == 0 ||
		    memcmp(t->v[i]->v, v, n * sizeof *v) == 0))
			return t->v[i];
	pl = arena_alloc(a, sizeof *pl);
	pl->v = n > 0 ? arena_alloc(a, n * sizeof *v) : NULL;
	if (n > 0)
		memcpy(pl->v, v, n * sizeof *v);
	pl->n = n;
	t->v[i] = pl;
	t->hash[i] = h;
	t->n++;
	return pl;
}

/*
 * Every rank's dense and expert lists, from the cells of the audit, in one
 * pass over the cells: a parameter lives on the ranks of its stage only,
 * and a loop over ranks x parameters looked at every pair (a quarter of a
 * 2,048-rank sweep's time, issue 24).  The cells of a parameter are
 * sorted by rank; a rank's pieces keep the order of the parameters, then
 * of their cells, as the lists are interned by their bytes.
 */
static void
initial_lists(struct gn_run *run, const struct gn_plan *plan)
{
	const struct model	*m = run->m;
	const struct audit	*a = run->audit;
	struct list_table	 table = { NULL, NULL, 0, 0 };
	struct gn_piece		*pieces;
	signed char		*part_of;
	size_t			*at[2], *next[2], ncells = 0, total, i, j, k;
	int			 r;

	for (i = 0; i < a->nparams; i++)
		ncells += a->params[i].ncells;
	part_of = xcalloc(ncells + 1, sizeof *part_of);
	for (k = 0; k < 2; k++) {
		run->part[k] = xcalloc(m->mesh.world, sizeof *run->part[k]);
		at[k] = xcalloc((size_t)m->mesh.world + 1, sizeof *at[k]);
		next[k] = xcalloc(m->mesh.world, sizeof *next[k]);
	}
	/* Which part each cell goes to, and how many pieces each list has. */
	for (i = 0, j = 0; i < a->nparams; i++) {
		const struct param_result *pr = &a->params[i];
		size_t c;
		int part = -1;

		for (c = 0; c < pr->ncells; c++, j++) {
			const struct cell *cl = &pr->cells[c];

			if (c == 0 || pr->cells[c - 1].rank != cl->rank) {
				int inst = model_instance_on(m,
				    m->logical[i].instance[0], cl->rank);
				struct coord co;

				mesh_coord_of(&m->mesh, cl->rank, &co);
				part = inst < 0 ? -1 : gn_part_of(plan, m,
				    inst, &co);
				variant_parts(run, plan, inst, &co);
			}
			if (cl->used)
				variant_compare(run, part);
			part_of[j] = (signed char)(cl->used ? part : -1);
			if (part_of[j] >= 0)
				at[part][cl->rank]++;
		}
	}
	/* at[k][r]: where rank r's list of part k starts in pieces. */
	total = 0;
	for (k = 0; k < 2; k++) {
		for (r = 0; r < m->mesh.world; r++) {
			size_t n = at[k][r];

			at[k][r] = next[k][r] = total;
			total += n;
		}
		at[k][r] = total;
	}
	/* Zeroed: the lists are hashed and compared by their bytes. */
	pieces = xcalloc(total + 1, sizeof *pieces);
	for (i = 0, j = 0; i < a->nparams; i++) {
		const struct param_result *pr = &a->params[i];
		size_t c;
		int inst = -1, inst_rank = -1;
		struct coord co;

		for (c = 0; c < pr->ncells; c++, j++) {
			const struct cell *cl = &pr->cells[c];
			struct gn_piece *pc;

			if (part_of[j] < 0)
				continue;
			if (inst_rank != cl->rank) {
				inst = model_instance_on(m,
				    m->logical[i].instance[0], cl->rank);
				inst_rank = cl->rank;
				mesh_coord_of(&m->mesh, cl->rank, &co);
			}
			pc = &pieces[next[part_of[j]][cl->rank]++];
			pc->param = (int)i;
			pc->shard = model_shard_key(m, &m->params[inst], &co);
			pc->lo = cl->lo;
			pc->hi = cl->hi;
			pc->value = cl->value;
			pc->vhash = lc_hash32(cl->value);
			pc->mult = q_make(1, 1);
		}
	}
	for (r = 0; r < m->mesh.world; r++)
		for (k = 0; k < 2; k++)
			run->part[k][r] = list_intern(&table, &run->arena,
			    pieces + at[k][r], at[k][r + 1] - at[k][r]);
	free(pieces);
	free(part_of);
	for (k = 0; k < 2; k++) {
		free(at[k]);
		free(next[k]);
	}
	free(table.v);
	free(table.hash);
}

static void
run_step(struct gn_run *run, const struct gn_step *s)
{
	const struct model	*m = run->m;
	struct plist		**v = run->part[s->part];
	struct plist		**out, **in;
	int			*members, n = mesh_group_size(&m->mesh, s->group);
	int			 r, i;

	if (n == 1)
		return;		/* a group of one sums nothing */
	out = xcalloc(m->mesh.world, sizeof *out);
	in = xcalloc(n, sizeof *in);
	members = xcalloc(n, sizeof *members);
	for (r = 0; r < m->mesh.world; r++) {
		struct plist *sum;

		if (out[r] != NULL)
			continue;
		mesh_group(&m->mesh, s->group, r, members);
		for (i = 0; i < n; i++)
			in[i] = v[members[i]];
		sum = memo_sum(&run->memo, &run->arena, in, n, s->average);
		for (i = 0; i < n; i++)
			out[members[i]] = sum;
		if (!within_limit(run))
			break;
	}
	memcpy(v, out, m->mesh.world * sizeof *v);
	free(out);
	free(in);
	free(members);
}

/* total = dense + expert, on every rank. */
static void
add_parts(struct gn_run *run)
{
	const struct model	*m = run->m;
	struct plist		*in[2];
	int			 r;

	run->part[GN_PART_TOTAL] = xcalloc(m->mesh.world,
	    sizeof *run->part[GN_PART_TOTAL]);
	for (r = 0; r < m->mesh.world && within_limit(run); r++) {
		in[0] = run->part[GN_PART_DENSE][r];
		in[1] = run->part[GN_PART_EXPERT][r];
		run->part[GN_PART_TOTAL][r] = memo_sum(&run->memo, &run->arena,
		    in, 2, false);
	}
}

/*
 * The expected norm squared: every shard of every logical parameter once,
 * its whole local range, with its expected gradient.
 */
static void
expected_form(struct gn_run *run, struct gn_piece **out, size_t *nout)
{
	const struct model	*m = run->m;
	const struct audit	*a = run->audit;
	struct plist		 pl = { NULL, 0 };
	size_t			 i, j, cap = 0;
	int			 nkeys = m->mesh.tp > m->mesh.ep * m->mesh.etp ?
				    m->mesh.tp : m->mesh.ep * m->mesh.etp;
	int			*first = xcalloc(nkeys, sizeof *first);

	for (i = 0; i < a->nparams; i++) {
		const struct param_result *pr = &a->params[i];
		int k, key, rank;

		for (k = 0; k < nkeys; k++)
			first[k] = -1;
		/* A rank's cells are neighbours: its shard is looked up once. */
		for (j = 0, key = -1, rank = -1; j < pr->ncells; j++) {
			const struct cell *c = &pr->cells[j];

			if (c->rank != rank) {
				int inst = model_instance_on(m,
				    m->logical[i].instance[0], c->rank);
				struct coord co;

				rank = c->rank;
				mesh_coord_of(&m->mesh, rank, &co);
				key = inst < 0 ? -1 : model_shard_key(m,
				    &m->params[inst], &co);
			}
			if (key < 0 || key >= nkeys)
				continue;
			/*
			 * Every region of the first rank holding the shard:
			 * the regions differ (a padded vocabulary's rows have
			 * no lookup atoms), so one value would not do.
			 */
			if (first[key] < 0)
				first[key] = c->rank;
			if (first[key] != c->rank)
				continue;
			if (pl.n == cap) {
				cap = cap ? 2 * cap : 64;
				pl.v = xreallocarray(pl.v, cap, sizeof *pl.v);
			}
			memset(&pl.v[pl.n], 0, sizeof pl.v[pl.n]);
			pl.v[pl.n].param = (int)i;
			pl.v[pl.n].shard = key;
			pl.v[pl.n].lo = c->lo;
			pl.v[pl.n].hi = c->hi;
			pl.v[pl.n].value = c->expected;
			pl.v[pl.n].vhash = lc_hash32(c->expected);
			pl.v[pl.n].mult = q_make(1, 1);
			pl.n++;
		}
	}
	free(first);
	/* Cut where the regions' values change and joined where they agree. */
	canonical(&run->arena, &pl, out, nout);
	free(pl.v);
}

static bool
q_less(struct rational a, struct rational b)
{
	/* Denominators are positive; products stay small (group sizes). */
	return a.num * b.den < b.num * a.den;
}

static bool
mult_is_one(const struct gn_mult *m)
{
	return q_equal(m->min, q_make(1, 1)) && q_equal(m->max,
	    q_make(1, 1)) && m->values_ok;
}

/*
 * Elements [lo, hi) of a parameter counted m times: what they add to its
 * elements missing or counted too often.
 */
static void
weigh(struct gn_mult *cur, struct rational m, int64_t lo, int64_t hi)
{
	double	 d = (double)m.num / (double)m.den - 1;

	if (hi <= lo)
		return;
	if (d < 0)
		cur->missing -= d * (double)(hi - lo);
	else
		cur->extra += d * (double)(hi - lo);
}

/*
 * For a wrong norm: how many times each logical parameter's elements
 * enter it, against the expected form, for the parameters where that is
 * not once with the expected value.
 */
static void
multiplicities(struct gn_run *run, struct gn_class *cl,
    const struct gn_piece *ex, size_t nex)
{
	struct audit	*a = run->audit;
	size_t		 e, i = 0, j, n = 0;
	struct gn_mult	*mults = arena_alloc(&a->arena,
			    (a->nparams + 1) * sizeof *mults);
	struct gn_mult	*cur = NULL;
	bool		 fresh = false;

	for (e = 0; e < nex; e++) {
		const struct gn_piece *x = &ex[e];
		int64_t pos = x->lo;

		if (cur == NULL || cur->param != a->params[x->param].name) {
			if (cur != NULL && !mult_is_one(cur))
				n++;
			cur = &mults[n];
			cur->param = a->params[x->param].name;
			cur->values_ok = true;
			cur->missing = cur->extra = 0;
			fresh = true;
		}
		/*
		 * Skip the class's pieces before this expected piece: a shard
		 * can have several (a padded vocabulary's rows differ).
		 */
		while (i < cl->npieces && (cl->pieces[i].param < x->param ||
		    (cl->pieces[i].param == x->param &&
		    (cl->pieces[i].shard < x->shard ||
		    (cl->pieces[i].shard == x->shard &&
		    cl->pieces[i].hi <= x->lo)))))
			i++;
		while (i < cl->npieces && cl->pieces[i].param == x->param &&
		    cl->pieces[i].shard == x->shard &&
		    cl->pieces[i].lo < x->hi) {
			struct rational sum = q_make(0, 1);

			if (cl->pieces[i].lo > pos) {
				/* A gap: elements counted 0 times. */
				if (fresh || q_less(q_make(0, 1), cur->min))
					cur->min = q_make(0, 1);
				if (fresh)
					cur->max = q_make(0, 1);
				fresh = false;
				weigh(cur, q_make(0, 1), pos, cl->pieces[i].lo);
			}
			for (j = i; j < cl->npieces &&
			    same_place(&cl->pieces[j], &cl->pieces[i]); j++) {
				sum = q_add(sum, cl->pieces[j].mult);
				if (cl->pieces[j].value != x->value &&
				    !lc_equal(cl->pieces[j].value, x->value))
					cur->values_ok = false;
			}
			if (fresh || q_less(sum, cur->min))
				cur->min = sum;
			if (fresh || q_less(cur->max, sum))
				cur->max = sum;
			fresh = false;
			weigh(cur, sum, cl->pieces[i].lo > x->lo ?
			    cl->pieces[i].lo : x->lo, cl->pieces[i].hi < x->hi ?
			    cl->pieces[i].hi : x->hi);
			pos = cl->pieces[i].hi;
			i = j;
		}
		if (pos < x->hi) {
			if (fresh)
				cur->max = q_make(0, 1);
			cur->min = q_make(0, 1);
			fresh = false;
			weigh(cur, q_make(0, 1), pos, x->hi);
		}
	}
	if (cur != NULL && !mult_is_one(cur))
		n++;
	cl->mults = mults;
	cl->nmults = n;
}

/* A finding's ranks as the norm's classes add them, in no order. */
struct rank_buffer {
	int	*v;
	size_t	 n, cap;
};

/*
 * The norm's findings while the classes add them: each finding's ranks
 * are gathered in a buffer and written into it once, sorted, at the end
 * (norm_findings_end).  Merging each class's ranks into a new copy of
 * the finding's list in the audit's arena kept every copy: where the
 * ranks clip by norms of their own, a class of a rank or two each, that
 * was world squared ints (hf-48205-ep-router-partial-fixed at dp 8,192,
 * grad_norm.expert_norm: local, one of its fix search's candidates: 584
 * MB of an audit of 28 MB, and 8.7 GB at dp 32,768), and the time to
 * copy them.
 */
struct norm_findings {
	struct audit		*audit;
	size_t			 first;	/* the audit's findings before */
	struct rank_buffer	*ranks;	/* [finding - first] */
	size_t			 nranks;
	/*
	 * A class's words (message, fix, parameters) until add_finding
	 * knows whether they start a finding, emptied for each class: told
	 * in the audit's arena, those of every class that joined a finding
	 * were kept: 540 bytes a class, 36 MB of an audit of 201 where
	 * 65,536 ranks clip by norms of their own (tests/unit-footprint).
	 */
	struct arena		 scratch;
};

static void
norm_findings_begin(struct norm_findings *nf, struct audit *a)
{
	memset(nf, 0, sizeof *nf);
	nf->audit = a;
	nf->first = a->nfindings;
	arena_init_cached(&nf->scratch, a->arena.cache);
}

static int
cmp_int(const void *x, const void *y)
{
	int	 a = *(const int *)x, b = *(const int *)y;

	return a < b ? -1 : a > b;
}

static void
norm_findings_end(struct norm_findings *nf)
{
	struct audit	*a = nf->audit;
	struct finding	*f;
	size_t		 i, j, n;

	for (i = 0; i < nf->nranks; i++) {
		struct rank_buffer *b = &nf->ranks[i];

		qsort(b->v, b->n, sizeof *b->v, cmp_int);
		for (j = n = 0; j < b->n; j++)
			if (n == 0 || b->v[n - 1] != b->v[j])
				b->v[n++] = b->v[j];
		f = &a->findings[nf->first + i];
		f->ranks = arena_alloc(&a->arena, (n + 1) * sizeof *f->ranks);
		if (n > 0)
			memcpy(f->ranks, b->v, n * sizeof *b->v);
		f->nranks = n;
		free(b->v);
	}
	free(nf->ranks);
	arena_free(&nf->scratch);
}

static void
add_ranks(struct rank_buffer *b, const int *ranks, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = b->n + n > 2 * b->cap ? b->n + n : 2 * b->cap;
		b->v = xreallocarray(b->v, b->cap, sizeof *b->v);
	}
	if (n > 0)
		memcpy(b->v + b->n, ranks, n * sizeof *ranks);
	b->n += n;
}

static void
add_finding(struct norm_findings *nfs, enum finding_kind kind,
    enum cfg_key cause, const char **params, size_t nparams,
    const int *ranks, size_t nranks, const char *dim, const char *message,
    const char *fix)
{
	struct audit	*a = nfs->audit;
	struct finding	*nf, *f;
	size_t		 i;

	/* One finding for every norm wrong the same way (each ep group's). */
	for (i = nfs->first; i < a->nfindings; i++) {
		f = &a->findings[i];
		if (f->kind != kind || strcmp(f->op, "gradient norm") != 0 ||
		    strcmp(f->message, message) != 0)
			continue;
		add_ranks(&nfs->ranks[i - nfs->first], ranks, nranks);
		return;
	}
	nf = arena_alloc(&a->arena, (a->nfindings + 1) * sizeof *nf);
	if (a->nfindings > 0)
		memcpy(nf, a->findings, a->nfindings * sizeof *nf);
	a->findings = nf;
	f = &a->findings[a->nfindings++];
	f->kind = kind;
	/* The words were the class's, in the scratch arena: now kept. */
	f->params = arena_alloc(&a->arena, (nparams + 1) * sizeof *f->params);
	if (nparams > 0)
		memcpy(f->params, params, nparams * sizeof *params);
	f->param = nparams > 0 ? f->params[0] : NULL;
	f->nparams = nparams;
	f->op = "gradient norm";
	f->dim = dim;
	f->message = arena_strdup(&a->arena, message);
	f->fix = fix != NULL ? arena_strdup(&a->arena, fix) : NULL;
	f->cause = cause;
	nfs->ranks = xreallocarray(nfs->ranks, nfs->nranks + 1,
	    sizeof *nfs->ranks);
	memset(&nfs->ranks[nfs->nranks], 0, sizeof *nfs->ranks);
	add_ranks(&nfs->ranks[nfs->nranks++], ranks, nranks);
}

/* One finding per direction of a wrong class: over- and under-count. */
static void
explain_class(struct norm_findings *nf, const struct keyset *in_effect,
    const struct gn_class *cl)
{
	struct audit	*a = nf->audit;
	char		 names[512], fixes[2048];
	const char	*dim, **params, *message, *fix;
	size_t		 i, n;
	int		 over;
	enum cfg_key	 cause;

	for (over = 1; over >= 0; over--) {
		enum finding_kind kind = over ? FINDING_OVER_COUNT :
		    FINDING_UNDER_COUNT;

		arena_free(&nf->scratch);
		cause = norm_wrong_settings(a->config, in_effect, kind, names,
		    sizeof names, fixes, sizeof fixes, &dim);
		params = arena_alloc(&nf->scratch, (cl->nmults + 1) *
		    sizeof *params);
		for (i = n = 0; i < cl->nmults; i++)
			if (over ? q_less(q_make(1, 1), cl->mults[i].max) :
			    q_less(cl->mults[i].min, q_make(1, 1)))
				params[n++] = cl->mults[i].param;
		if (n == 0)
			continue;
		norm_miscount_tell(&nf->scratch, n, over, names, fixes,
		    &message, &fix);
		add_finding(nf, kind, cause, params, n, cl->ranks, cl->nranks,
		    dim, message, fix);
	}
}

static void
explain_inconsistent(struct norm_findings *nf, const struct keyset *in_effect,
    const struct grad_norm_result *g)
{
	struct audit	*a = nf->audit;
	int		*ranks = xcalloc((size_t)a->mesh.world + 1,
			    sizeof *ranks);
	char		 names[512], fixes[2048];
	const char	*dim, **params, *message, *fix;
	size_t		 n = 0, np = 0, c, i, k;
	int		 r, first = g->class_of[0];
	size_t		 norms = g->nclasses;
	bool		 idle = false;
	enum cfg_key	 cause;

	for (r = 0; r < a->mesh.world; r++)
		if (g->class_of[r] != first)
			ranks[n++] = r;
	for (r = 0; r < a->mesh.world; r++)
		if (g->class_of[r] < 0) {
			norms++;	/* never clipping: a norm of 0 */
			idle = true;
			break;
		}
	cause = norm_wrong_settings(a->config, in_effect,
	    FINDING_INCONSISTENT_CLIP, names, sizeof names, fixes,
	    sizeof fixes, &dim);
	/*
	 * The parameters the norms disagree on; where they count the same
	 * elements (a rank that never clips), every parameter, since each
	 * one's update is scaled differently.
	 */
	arena_free(&nf->scratch);
	params = arena_alloc(&nf->scratch, (a->nparams + 1) * sizeof *params);
	for (c = 0; c < g->nclasses; c++)
		for (i = 0; i < g->classes[c].nmults; i++) {
			for (k = 0; k < np; k++)
				if (params[k] == g->classes[c].mults[i].param)
					break;
			if (k == np)
				params[np++] = g->classes[c].mults[i].param;
		}
	if (np == 0)
		for (i = 0; i < a->nparams; i++)
			params[np++] = a->params[i].name;
	norm_drift_tell(&nf->scratch, norms, idle, names, fixes, &message,
	    &fix);
	add_finding(nf, FINDING_INCONSISTENT_CLIP, cause, params, np, ranks, n,
	    dim, message, fix);
	free(ranks);
}

/*
 * The norm classes by what they sum, and the ranks' final lists by
 * address: every clipping rank looked for its list among those seen and
 * its form among the classes one by one, which was world squared where
 * ranks' norms differ (the second micro-batch's own atoms, nanoGPT #30:
 * two thirds of a 1,024-rank check).  Open addressing; a slot's class is
 * -1 when empty.
 */
struct class_index {
	uint64_t	*hash;	/* of the form, or the list's address */
	const void	**list;	/* the list, for the table by address */
	int		*cls;
	size_t		 cap;	/* a power of two, over twice the entries */
};

static void
class_index_init(struct class_index *ix, size_t entries)
{
	size_t	 i;

	for (ix->cap = 16; ix->cap < 2 * entries + 1; ix->cap *= 2)
		;
	ix->hash = xcalloc(ix->cap, sizeof *ix->hash);
	ix->list = xcalloc(ix->cap, sizeof *ix->list);
	ix->cls = xcalloc(ix->cap, sizeof *ix->cls);
	for (i = 0; i < ix->cap; i++)
		ix->cls[i] = -1;
}

static void
class_index_free(struct class_index *ix)
{
	free(ix->hash);
	free(ix->list);
	free(ix->cls);
}

static uint64_t
form_hash(const struct gn_piece *v, size_t n)
{
	uint64_t	 h = 0x9e3779b97f4a7c15ULL ^ n;
	size_t		 i;

	for (i = 0; i < n; i++) {
		int64_t key[7] = { v[i].param, v[i].shard, v[i].lo, v[i].hi,
			v[i].mult.num, v[i].mult.den, (int64_t)v[i].vhash };

		h = (h ^ hash_bytes(key, sizeof key)) * 0x100000001b3ULL;
	}
	return h;
}

/* The class of a form, or -1; *slot is where a new one goes. */
static int
class_of_form(const struct class_index *ix, const struct grad_norm_result *g,
    const struct gn_piece *form, size_t nform, uint64_t h, size_t *slot)
{
	size_t	 j;

	for (j = h & (ix->cap - 1); ix->cls[j] >= 0; j = (j + 1) &
	    (ix->cap - 1))
		if (ix->hash[j] == h && same_form(form, nform,
		    g->classes[ix->cls[j]].pieces,
		    g->classes[ix->cls[j]].npieces))
			return ix->cls[j];
	*slot = j;
	return -1;
}

/* The class of a rank's final list seen before, or -1 (*slot: where). */
static int
class_of_list(const struct class_index *ix, const void *list, size_t *slot)
{
	uint64_t h = hash_bytes(&list, sizeof list);
	size_t	 j;

	for (j = h & (ix->cap - 1); ix->cls[j] >= 0; j = (j + 1) &
	    (ix->cap - 1))
		if (ix->list[j] == list)
			return ix->cls[j];
	*slot = j;
	return -1;
}

/* What the norm's run holds: its lists, the sums' memo. */
static void
gn_run_free(struct gn_run *run)
{
	int	 k;

	for (k = 0; k < GN_PART__COUNT; k++)
		free(run->part[k]);
	free(run->memo.v);
	arena_free(&run->arena);
}

bool
gn_audit(const struct sym_context *ctx, struct audit *a)
{
	const struct model	*m = &ctx->model;
	struct grad_norm_result	*g = &a->grad_norm;
	struct gn_plan		 plan;
	struct gn_run		 run;
	struct gn_piece		*ex;
	size_t			 nex, c;
	int			 i, r, k, clipping = 0;
	struct plist		**final;
	struct class_index	 by_list, by_form;
	struct norm_findings	 nf;

	memset(g, 0, sizeof *g);
	memset(&run, 0, sizeof run);
	run.ctx = ctx;
	run.m = m;
	run.audit = a;
	arena_init_cached(&run.arena, ctx->blocks);
	gn_plan_build(&plan, ctx);
	settings_in_effect(&run, ctx, &plan);
	initial_lists(&run, &plan);
	for (i = 0; i < plan.nsteps && plan.steps[i].part != GN_PART_TOTAL &&
	    !run.stopped; i++)
		run_step(&run, &plan.steps[i]);
	if (!run.stopped)
		add_parts(&run);
	for (; i < plan.nsteps && !run.stopped; i++)
		run_step(&run, &plan.steps[i]);
	if (run.stopped) {
		gn_run_free(&run);
		return false;
	}
	final = run.part[GN_PART_TOTAL];

	expected_form(&run, &ex, &nex);
	g->present = true;
	g->correct = g->consistent = true;
	g->class_of = arena_alloc(&a->arena, m->mesh.world *
	    sizeof *g->class_of);
	g->classes = arena_alloc(&a->arena, (m->mesh.world + 1) *
	    sizeof *g->classes);
	class_index_init(&by_list, (size_t)m->mesh.world);
	class_index_init(&by_form, (size_t)m->mesh.world);
	for (r = 0; r < m->mesh.world; r++) {
		struct gn_piece	*form;
		size_t		 nform, list_slot = 0, form_slot = 0;
		uint64_t	 h;
		int		 known;

		g->class_of[r] = -1;
		if (!gn_clips(m, r))
			continue;
		clipping++;
		known = class_of_list(&by_list, final[r], &list_slot);
		if (known >= 0) {
			g->class_of[r] = known;
			continue;
		}
		canonical(&a->arena, final[r], &form, &nform);
		if (!within_limit(&run))
			break;
		h = form_hash(form, nform);
		known = class_of_form(&by_form, g, form, nform, h, &form_slot);
		if (known < 0) {
			known = (int)g->nclasses++;
			g->classes[known].pieces = form;
			g->classes[known].npieces = nform;
			g->classes[known].correct = same_form(form, nform, ex,
			    nex);
			by_form.hash[form_slot] = h;
			by_form.cls[form_slot] = known;
		}
		by_list.list[list_slot] = final[r];
		by_list.cls[list_slot] = known;
		g->class_of[r] = known;
	}
	class_index_free(&by_list);
	class_index_free(&by_form);
	if (run.stopped) {
		gn_run_free(&run);
		return false;
	}
	/*
	 * Each class's ranks, sized by a count first: a class took room for
	 * the whole world and scanned it, world x classes, and when the
	 * ranks clip by norms of their own (hf-48205-ep-router-partial-fixed
	 * at dp 32,768, 65,536 ranks) that was 4.6 GB and most of a minute
	 * in an arena the memory limit (run_check_memory) never sees.
	 */
	for (r = 0; r < m->mesh.world; r++)
		if (g->class_of[r] >= 0)
			g->classes[g->class_of[r]].nranks++;
	for (c = 0; c < g->nclasses; c++) {
		g->classes[c].ranks = arena_alloc(&a->arena,
		    (g->classes[c].nranks + 1) * sizeof *g->classes[c].ranks);
		g->classes[c].nranks = 0;
	}
	for (r = 0; r < m->mesh.world; r++)
		if (g->class_of[r] >= 0) {
			struct gn_class *cl = &g->classes[g->class_of[r]];

			cl->ranks[cl->nranks++] = r;
		}
	norm_findings_begin(&nf, a);
	for (c = 0; c < g->nclasses; c++) {
		struct gn_class *cl = &g->classes[c];

		if (cl->correct)
			continue;
		g->correct = false;
		multiplicities(&run, cl, ex, nex);
		for (k = 0; k < (int)cl->nmults; k++)
			if (!q_equal(cl->mults[k].min, q_make(1, 1)) ||
			    !q_equal(cl->mults[k].max, q_make(1, 1)))
				break;
		if (k == (int)cl->nmults)
			g->gradients_wrong = true;
		else {
			g->miscounted = true;
			explain_class(&nf, &run.in_effect, cl);
		}
	}
	/*
	 * A rank that never clips (grad_norm.clip_ranks: tp-rank-0) does not
	 * scale its gradients by the expected coefficient: the norm is not
	 * correct on it, as the numeric engine, which takes its norm as 0,
	 * finds (issue 23: the two verdicts disagreed on BLOOM's case).
	 */
	if (clipping < m->mesh.world)
		g->correct = false;
	if (g->nclasses > 1 || (clipping > 0 && clipping < m->mesh.world)) {
		g->consistent = false;
		explain_inconsistent(&nf, &run.in_effect, g);
	}
	norm_findings_end(&nf);
	/*
	 * The norm's verdicts stay its own (grad_norm.correct, consistent):
	 * the audit's are about the parameters' values (gradaudit(1)), and
	 * audit_passes() joins them for the exit status.
	 */

	gn_run_free(&run);
	return true;
}
