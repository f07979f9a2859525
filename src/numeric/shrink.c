/*
 * run --shrink (issue 24): search for a smaller configuration whose
 * symbolic verdict has the same signature as the audited one, so that the
 * numeric audit, which holds every value of every rank, can prove the
 * verdict on it when the real size is out of its reach.
 *
 * The signature is built from what the symbolic engine reports, never from
 * config values:
 *   - the verdict before any baseline (audit_correct: a baseline accepts
 *     findings of the full config only), whether every parameter is
 *     correct and consistent, and the gradient norm's verdict (present, correct, the
 *     same on every clipping rank, miscounted, wrong only through wrong
 *     gradients);
 *   - which groups of the audited mesh (dp, tp, edp, efsdp, ... and the
 *     micro-batches) have a single member, over which a collective does
 *     nothing;
 *   - the set of findings, each as its kind, mesh dimension, operation and
 *     the roles of the parameters it names;
 *   - the set of rank classes: for each rank, the set of what it holds
 *     and shows (the roles of the parameters it holds, the findings that name it, the parameters it holds wrongly,
 *     whether it clips and by a correct norm), and the signature keeps the
 *     distinct sets.  A shrink that leaves no rank clean where some were clean, or
 *     merges the first stage's class with the last's, changes it.
 * A parameter's role is its name with every run of digits read as one
 * symbol ("layers.#.mlp.experts.#.weight"), so that dropping layers or
 * experts that repeat a role keeps the signature, and dropping the last
 * layer of a kind does not.  Divisibility, group-size-1, bucket and
 * padding relations are kept because breaking them changes what the
 * engine finds, not because the search knows of them.
 *
 * The search is greedy: knob by knob, the smallest candidate value the
 * constraint table accepts (cfg_check_constraints, the loader's own) and
 * whose audit keeps the signature replaces the current one; passes repeat
 * until none changes anything or the time budget is spent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/sorted.h"
#include "base/xmalloc.h"
#include "config/constraints.h"
#include "model/mesh.h"
#include "symbolic/context.h"
#include "symbolic/symbolic.h"
#include "numeric/numeric.h"
#include "numeric/shrink.h"

/*
 * The keys moved, largest savings first: the mesh (each rank fewer is a
 * process's values fewer), then the counts that repeat structure, then
 * the widths.  Model sizes outside this list (head counts hidden in
 * head_dim, coefficients) stay as written.
 */
static const enum cfg_key knobs[] = {
	KEY_DP, KEY_DP_REPLICATE, KEY_CP, KEY_PP, KEY_VPP, KEY_TP, KEY_EP,
	KEY_ETP, KEY_GTP, KEY_EGTP, KEY_MICRO_BATCHES, KEY_LAYERS, KEY_FIRST_STAGE_LAYERS,
	KEY_LAST_STAGE_LAYERS, KEY_MTP, KEY_EXPERTS, KEY_TOP_K,
	KEY_SHARED_EXPERTS, KEY_EVERY, KEY_HIDDEN, KEY_FFN, KEY_EXPERT_FFN,
	KEY_SHARED_EXPERT_FFN, KEY_VOCAB, KEY_VOCAB_DIVISIBLE_BY, KEY_SEQ,
	KEY_MICRO_BATCH, KEY_HEAD_DIM, KEY_BUCKET_ELEMS,
	KEY_BUCKET_ELEMS_PER_DP
};
_Static_assert(sizeof knobs / sizeof knobs[0] == SHRINK_KNOBS,
    "shrink.h's SHRINK_KNOBS counts the knobs");

/* Mesh axes only take divisors: a new prime factor is a new mesh. */
static bool
is_mesh_axis(enum cfg_key k)
{
	return k == KEY_DP || k == KEY_DP_REPLICATE || k == KEY_CP ||
	    k == KEY_PP || k == KEY_VPP || k == KEY_TP || k == KEY_EP ||
	    k == KEY_ETP || k == KEY_GTP || k == KEY_EGTP;
}

/*
 * Knobs that may have to move together with a mesh axis, by the same
 * factor: a group of one (dp = ep, pytorch #167178) survives dividing
 * both, not either; experts and layers follow ep and pp.
 */
static bool
is_count(enum cfg_key k)
{
	return is_mesh_axis(k) || k == KEY_EXPERTS || k == KEY_LAYERS ||
	    k == KEY_FIRST_STAGE_LAYERS || k == KEY_LAST_STAGE_LAYERS ||
	    k == KEY_MICRO_BATCHES;
}

/* The most candidates of one knob audited in one pass. */
#define MAX_CANDIDATES	48

struct signature {
	uint64_t	 global;
	uint64_t	*classes;	/* sorted, distinct */
	size_t		 nclasses;
};

struct rank_item {
	int		 rank;
	uint64_t	 item;
};

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_rank_item(const void *a, const void *b)
{
	const struct rank_item *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->item < y->item ? -1 : x->item > y->item;
}

/* A name's role: digit runs read as one '#' (the file comment says why). */
static uint64_t
role_hash(const char *name)
{
	char	*buf;
	size_t	 i, n = 0;
	uint64_t h;

	if (name == NULL)
		return 0;
	buf = xmalloc(strlen(name) + 1);
	for (i = 0; name[i] != '\0'; i++) {
		if (name[i] >= '0' && name[i] <= '9') {
			if (n == 0 || buf[n - 1] != '#')
				buf[n++] = '#';
			continue;
		}
		buf[n++] = name[i];
	}
	h = hash_bytes(buf, n);
	free(buf);
	return h;
}

static uint64_t
mix(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	uint64_t	w[4] = { a, b, c, d };

	return hash_u64s(w, 4);
}

/* A finding as its kind, dimension, operation and parameter roles. */
static uint64_t
finding_item(const struct finding *f)
{
	uint64_t	*roles, h;
	size_t		 i, n = f->nparams;

	roles = xcalloc(n + 1, sizeof *roles);
	for (i = 0; i < n; i++)
		roles[i] = role_hash(f->params[i]);
	if (n == 0)
		roles[n++] = role_hash(f->param);
	n = sort_unique(roles, n, sizeof *roles, cmp_u64);
	h = mix((uint64_t)f->kind, role_hash(f->dim), role_hash(f->op),
	    hash_u64s(roles, n));
	free(roles);
	return h;
}

struct items {
	struct rank_item *v;
	size_t		  n, cap;
};

static void
push(struct items *it, int rank, uint64_t item)
{
	/* Cells of one rank come in a row: skip the obvious repeats. */
	if (it->n > 0 && it->v[it->n - 1].rank == rank &&
	    it->v[it->n - 1].item == item)
		return;
	if (it->n == it->cap) {
		it->cap = it->cap ? 2 * it->cap : 1024;
		it->v = xreallocarray(it->v, it->cap, sizeof *it->v);
	}
	it->v[it->n].rank = rank;
	it->v[it->n++].item = item;
}

/* What each rank shows, as (rank, item) pairs. */
static void
rank_items(const struct audit *a, struct items *it)
{
	const struct grad_norm_result *g = &a->grad_norm;
	const struct param_result *p;
	size_t		 i, j;
	uint64_t	 role, item;
	int		 r, c;

	for (i = 0; i < a->nfindings; i++) {
		item = mix(1, finding_item(&a->findings[i]), 0, 0);
		for (j = 0; j < a->findings[i].nranks; j++)
			push(it, a->findings[i].ranks[j], item);
	}
	for (i = 0; i < a->nparams; i++) {
		p = &a->params[i];
		role = role_hash(p->name);
		for (j = 0; j < p->ncells; j++) {
			/*
			 * What a rank holds is part of its class: without
			 * it, a correct config would shrink to one without
			 * the MTP layer or the shared experts whose
			 * synchronization it had to prove.  Which shard it
			 * uses is not: that moves with dp, and a wrong shard
			 * shows as a wrong cell.
			 */
			push(it, p->cells[j].rank, mix(4, role, 0, 0));
			if (p->cells[j].used && !p->cells[j].ok)
				push(it, p->cells[j].rank, mix(2, role, 0, 0));
		}
	}
	if (!g->present || g->class_of == NULL)
		return;
	for (r = 0; r < a->mesh.world; r++) {
		c = g->class_of[r];
		push(it, r, mix(3, c < 0 ? 2 : g->classes[c].correct, 0, 0));
	}
}

/*
 * Which of the audited mesh's groups have one member, as bits.  A
 * collective over a group of one does nothing: a shrink that leaves dp or
 * tp with one rank would prove a correct config without running the
 * reduction it is about, and one that gives a group of one (efsdp, pytorch
 * #167178) more members would prove another code path.  The accumulation
 * over micro-batches is such a group too.
 */
static uint64_t
groups_of_one(const struct audit *a)
{
	const struct mesh *m = &a->mesh;
	/*
	 * gtp and egtp (Megatron's gtp_remat, expert_gtp_remat) and their
	 * complements, DDP's groups: a gtp config proven on a mesh without
	 * gtp, or whose dense buffer's reduction over gtp_replicate has one
	 * member, proves another code path.
	 */
	const int	 sizes[] = {
		m->dp, m->pp, m->tp, m->ep, m->etp, m->pure_dp, m->cp, m->edp,
		m->slices, m->dp_replicate, m->dp_shard, m->efsdp,
		a->config != NULL ? a->config->mesh.vpp : 1,
		a->config != NULL ? a->config->training.micro_batches : 1,
		m->gtp, mesh_group_size(m, GROUP_GTP_REPLICATE),
		m->egtp, mesh_group_size(m, GROUP_EGTP_REPLICATE)
	};
	uint64_t	 bits = 0;
	size_t		 i;

	for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		bits |= (uint64_t)(sizes[i] == 1) << i;
	return bits;
}

static void
signature_of(const struct audit *a, struct signature *s)
{
	const struct grad_norm_result *g = &a->grad_norm;
	struct items	 it = { NULL, 0, 0 };
	struct hash_state hs;
	uint64_t	*found, flags, profile;
	size_t		 i, j, n;
	int		 r, world = a->mesh.world;

	found = xcalloc(a->nfindings + 1, sizeof *found);
	for (i = 0; i < a->nfindings; i++)
		found[i] = finding_item(&a->findings[i]);
	n = sort_unique(found, a->nfindings, sizeof *found, cmp_u64);
	flags = (uint64_t)audit_correct(a) | (uint64_t)a->correct << 1 |
	    (uint64_t)a->consistent << 2 | (uint64_t)g->present << 3 |
	    (uint64_t)g->correct << 4 | (uint64_t)g->consistent << 5 |
	    (uint64_t)g->miscounted << 6 | (uint64_t)g->gradients_wrong << 7;
	s->global = mix(flags, hash_u64s(found, n), n, groups_of_one(a));
	free(found);

	rank_items(a, &it);
	if (it.n > 0)
		qsort(it.v, it.n, sizeof *it.v, cmp_rank_item);
	s->classes = xcalloc((size_t)world + 1, sizeof *s->classes);
	s->nclasses = 0;
	/* Ranks are 0..world-1; one with no item shows nothing: clean. */
	for (r = 0, i = 0; r < world; r++) {
		hash_begin(&hs);
		for (j = i; j < it.n && it.v[j].rank == r; j++)
			if (j == i || it.v[j].item != it.v[j - 1].item)
				hash_update_u64s(&hs, &it.v[j].item, 1);
		profile = hash_end(&hs);
		i = j;
		s->classes[s->nclasses++] = profile;
	}
	s->nclasses = sort_unique(s->classes, s->nclasses,
	    sizeof *s->classes, cmp_u64);
	free(it.v);
}

static bool
same_signature(const struct signature *x, const struct signature *y)
{
	return x->global == y->global && x->nclasses == y->nclasses &&
	    memcmp(x->classes, y->classes, x->nclasses * sizeof *x->classes) ==
	    0;
}

/*
 * The values a knob at v may take, ascending, at most MAX_CANDIDATES:
 * v's quotients by its divisors, and for a size the powers of two below
 * it and 0 (which the key's range refuses where it means nothing).
 */
static size_t
candidates(enum cfg_key k, int64_t v, int64_t *out)
{
	int64_t	*all, d, p;
	size_t	 n = 0, cap = 256, m, i;

	all = xcalloc(cap, sizeof *all);
	for (d = 1; d * d <= v && n + 2 < cap; d++) {
		if (v % d != 0)
			continue;
		all[n++] = d;
		all[n++] = v / d;
	}
	if (!is_mesh_axis(k)) {
		all[n++] = 0;
		for (p = 1; p < v && n < cap; p *= 2)
			all[n++] = p;
	}
	qsort(all, n, sizeof *all, cmp_i64);
	for (i = 0, m = 0; i < n; i++)
		if (all[i] < v && (m == 0 || all[m - 1] != all[i]))
			all[m++] = all[i];
	/* Too many: an even spread, the largest kept. */
	if (m <= MAX_CANDIDATES)
		n = m;
	else
		for (n = 0; n < MAX_CANDIDATES; n++)
			all[n] = all[(n + 1) * (m - 1) / MAX_CANDIDATES];
	memcpy(out, all, n * sizeof *out);
	free(all);
	return n;
}

/*
 * Audit a candidate: true when it is valid and keeps the signature.  The
 * constraint table and the symbolic engine's own limits decide validity:
 * a candidate whose audit goes past GRADAUDIT_MAX_MEMORY (counted in
 * r->over_limit) keeps nothing, and the search goes on; it exited 2 on
 * run's process 0 alone, the others waiting for its result.
 */
static bool
keeps_verdict(const struct config *c, const struct signature *want,
    struct arena_cache *blocks, struct shrink_result *r)
{
	struct sym_context	 ctx;
	struct audit		 a;
	struct signature	 got;
	enum cfg_key		 blame;
	char			 why[CFG_WHY_SIZE > SYM_WHY_SIZE ? CFG_WHY_SIZE :
				     SYM_WHY_SIZE];
	bool			 same;

	if (cfg_check_constraints(c, why, sizeof why) != NULL)
		return false;
	sym_context_build(&ctx, c);
	if (sym_context_unauditable(&ctx, c, &blame, why, sizeof why) !=
	    NULL) {
		sym_context_free(&ctx);
		return false;
	}
	memset(&a, 0, sizeof a);
	ctx.blocks = blocks;
	ctx.over_limit_returns = true;
	r->tried++;
	if (!sym_audit(&ctx, &a, NULL, NULL)) {
		r->over_limit++;
		audit_free(&a);
		sym_context_free(&ctx);
		return false;
	}
	sym_context_free(&ctx);
	signature_of(&a, &got);
	same = same_signature(&got, want);
	free(got.classes);
	audit_free(&a);
	return same;
}

struct search {
	struct config		 cur;
	int64_t			 cost;
	const struct signature	*want;
	struct shrink_result	*r;
	double			 t0, budget;
	struct arena_cache	 blocks;	/* the candidates' audits' */
};

static bool
out_of_time(struct search *s)
{
	if (clock_seconds() - s->t0 > s->budget)
		s->r->timed_out = true;
	return s->r->timed_out;
}

/* Keep cand (consumed either way) when it is no dearer and keeps the verdict. */
static bool
try_candidate(struct search *s, struct config *cand)
{
	char	 why[CFG_WHY_SIZE];
	int64_t	 cost;

	/*
	 * The constraints first: numeric_values builds the model, which
	 * assumes them (MTP with cp and a sequence shorter than 2 x cp
	 * pieces divided by zero in the rolled counts).
	 */
	if (cfg_check_constraints(cand, why, sizeof why) != NULL ||
	    (cost = numeric_values(cand)) > s->cost ||
	    !keeps_verdict(cand, s->want, &s->blocks, s->r)) {
		cfg_free(cand);
		return false;
	}
	cfg_free(&s->cur);
	s->cur = *cand;
	s->cost = cost;
	return true;
}

/* One knob at a time, the smallest value that keeps the verdict. */
static bool
single_pass(struct search *s)
{
	struct config	 cand;
	int64_t		 cs[MAX_CANDIDATES];
	size_t		 k, i, n;
	bool		 changed = false;

	for (k = 0; k < SHRINK_KNOBS && !s->r->timed_out; k++) {
		if (!cfg_key_is_active(&s->cur, knobs[k]))
			continue;
		n = candidates(knobs[k], cfg_key_number(&s->cur, knobs[k]),
		    cs);
		for (i = 0; i < n && !out_of_time(s); i++) {
			cfg_copy(&cand, &s->cur);
			if (cfg_key_set_number(&cand, knobs[k], cs[i]) != 0) {
				cfg_free(&cand);
				continue;
			}
			if (try_candidate(s, &cand)) {
				changed = true;
				break;
			}
		}
	}
	return changed;
}

/*
 * A mesh axis and another count divided by one factor, the largest first:
 * what no single move can keep.
 */
static bool
pair_pass(struct search *s)
{
	struct config	 cand;
	int64_t		 a, b, d;
	size_t		 k, l;
	bool		 changed = false;

	for (k = 0; k < SHRINK_KNOBS && !s->r->timed_out; k++) {
		if (!is_mesh_axis(knobs[k]))
			continue;
		for (l = 0; l < SHRINK_KNOBS && !s->r->timed_out; l++) {
			if (l == k || !is_count(knobs[l]) ||
			    !cfg_key_is_active(&s->cur, knobs[l]))
				continue;
			a = cfg_key_number(&s->cur, knobs[k]);
			b = cfg_key_number(&s->cur, knobs[l]);
			for (d = a; d > 1 && !out_of_time(s); d--) {
				if (a % d != 0 || b % d != 0)
					continue;
				cfg_copy(&cand, &s->cur);
				if (cfg_key_set_number(&cand, knobs[k], a / d)
				    != 0 || cfg_key_set_number(&cand,
				    knobs[l], b / d) != 0) {
					cfg_free(&cand);
					continue;
				}
				if (try_candidate(s, &cand)) {
					changed = true;
					break;
				}
			}
		}
	}
	return changed;
}

void
shrink_search(const struct config *full, const struct audit *audit,
    double budget, struct shrink_result *r)
{
	struct search	 s;
	struct signature want;
	size_t		 k;
	char		 why[NUMERIC_WHY_SIZE];

	memset(r, 0, sizeof *r);
	signature_of(audit, &want);
	cfg_copy(&s.cur, full);
	s.cost = r->full_values = numeric_values(full);
	s.want = &want;
	s.r = r;
	s.t0 = clock_seconds();
	s.budget = budget;
	arena_cache_init(&s.blocks);
	r->full_world = cfg_world(full);
	while (!r->timed_out && (single_pass(&s) || pair_pass(&s)))
		continue;
	arena_cache_free(&s.blocks);
	for (k = 0; k < SHRINK_KNOBS; k++) {
		r->value[k] = cfg_key_number(&s.cur, knobs[k]);
		if (r->value[k] != cfg_key_number(full, knobs[k]))
			r->smaller = true;
	}
	r->values = s.cost;
	r->world = cfg_world(&s.cur);
	r->fits = numeric_skip_reason(&s.cur, why, sizeof why) == NULL;
	r->seconds = clock_seconds() - s.t0;
	cfg_free(&s.cur);
	free(want.classes);
}

void
shrink_apply(struct config *dst, const struct config *full,
    const struct shrink_result *r)
{
	size_t	k;

	cfg_copy(dst, full);
	for (k = 0; k < SHRINK_KNOBS; k++)
		if (r->value[k] != cfg_key_number(full, knobs[k]) &&
		    cfg_key_set_number(dst, knobs[k], r->value[k]) != 0)
			fatalx("shrink: %s=%lld was valid in the search",
			    cfg_key_path(knobs[k]), (long long)r->value[k]);
}

const char **
shrink_sets(const struct config *full, const struct shrink_result *r,
    struct arena *arena, size_t *n)
{
	const char	**sets;
	char		  buf[256];
	size_t		  k;
	bool		  pp_moved = false, show;

	sets = arena_alloc(arena, (SHRINK_KNOBS + 1) * sizeof *sets);
	*n = 0;
	for (k = 0; k < SHRINK_KNOBS; k++)
		if (knobs[k] == KEY_PP &&
		    r->value[k] != cfg_key_number(full, KEY_PP))
			pp_moved = true;
	for (k = 0; k < SHRINK_KNOBS; k++) {
		show = r->value[k] != cfg_key_number(full, knobs[k]);
		/*
		 * model.layers defaults to mesh.pp: a config that leaves it
		 * out would follow a new pp unless it is set as well.
		 */
		if (knobs[k] == KEY_LAYERS && pp_moved &&
		    !keyset_has(&full->given, KEY_LAYERS))
			show = true;
		if (!show)
			continue;
		snprintf(buf, sizeof buf, "%s=%lld", cfg_key_path(knobs[k]),
		    (long long)r->value[k]);
		sets[(*n)++] = arena_strdup(arena, buf);
	}
	return sets;
}
