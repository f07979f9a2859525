/*
 * The diagnosis of a symbolic audit: why a parameter's used values are
 * wrong, told from the plan's steps and the shape of the wrong values
 * (a placement declared otherwise, a collective mixing states, a factor,
 * the auxiliary or multi-token prediction losses' part, unequal weights,
 * too small a group).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/framework.h"
#include "model/layout.h"
#include "model/syncplan.h"
#include "symbolic/diagnose.h"
#include "symbolic/findings.h"
#include "symbolic/lincomb.h"
#include "symbolic/run.h"

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
    enum cfg_key cause, const struct param_result *pr, const char *op,
    const char *dim, const char *message, const char *fix)
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
	f->cause = cause;
}

/* Add the finding the catalogue tells for fact (findings.c). */
static void
tell(struct finding_list *fl, const struct param_result *pr, enum fact fact,
    const struct fact_args *args)
{
	const struct config *c = fl->audit->config;
	struct finding_words w;
	struct fact_args a = *args;

	a.framework = c->profile != NULL ? c->profile->framework->name : NULL;
	finding_tell(fact, &a, &fl->audit->arena, &w);
	add_finding(fl, w.kind, w.cause, pr, w.op, w.dim, w.message, w.fix);
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
 * Does step s sum logical parameter l over its data-parallel replicas?
 * A sum over tp (a sequence-parallel norm's partial gradients) or over
 * the tied copies' embedding group adds what must be added: no divisor
 * was left out of it, and naming it for a wrong factor sent the user to
 * the one step that was right.
 */
static bool
sums_replicas(const struct sync_step *s, const struct model *m, int l)
{
	int	k, p;

	for (k = 0; k < m->logical[l].ninstances; k++) {
		p = m->logical[l].instance[k];
		if (syncplan_touches(s, m, p) &&
		    syncplan_group_meets_replicas(m, s->group, p))
			return true;
	}
	return false;
}

/* Does loss term t (-1: every term) reach logical parameter l? */
static bool
term_reaches(const struct model *m, int t, int l)
{
	const struct param *p = &m->params[m->logical[l].instance[0]];

	switch (t) {
	case PLAN_TERM_AUX:
		return model_has_aux(m, p);
	case PLAN_TERM_MTP:
		return model_has_mtp(m, p);
	default:
		return true;
	}
}

/*
 * Does a step of plan: all-reduce logical parameter l over the group of a
 * preset's declined reduction s?  Then the user's plan does the reduction
 * the preset declares unneeded (gpt-neox reduces its norms itself), and
 * whatever is wrong is in that step, not in the declaration.  A plan's
 * own declare: replicate is answered by any such all-reduce, the
 * preset's too: the sum it says never runs does run.
 */
static bool
plan_reduces(const struct sym_context *ctx, const struct model *m,
    const struct sync_step *s, int l)
{
	int	i;

	for (i = 0; i < ctx->plan.nsteps; i++)
		if ((ctx->plan.steps[i].plan_item >= 0 || s->plan_item >= 0) &&
		    ctx->plan.steps[i].op == SYNC_ALL_REDUCE &&
		    ctx->plan.steps[i].group == s->group &&
		    touches_logical(&ctx->plan.steps[i], m, l))
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
	struct fact_args args = { .mesh = mesh, .step = s, .fix_step = s,
			    .cause = s->key };
	bool		 missing, doubled;

	missing = (s->truth.slice == PLACE_PARTIAL &&
	    s->declared.slice == PLACE_REPLICATE) ||
	    (s->truth.etp == PLACE_PARTIAL &&
	    s->declared.etp == PLACE_REPLICATE);
	doubled = (s->truth.slice == PLACE_REPLICATE &&
	    s->declared.slice == PLACE_PARTIAL) ||
	    (s->truth.etp == PLACE_REPLICATE &&
	    s->declared.etp == PLACE_PARTIAL);
	/* A declaration partly Partial ran its sum: it did not skip it. */
	if (missing && pl_any(s->declared, PLACE_PARTIAL))
		tell(fl, pr, FACT_PARTIAL_MASKED_REPLICATE, &args);
	else if (missing)
		tell(fl, pr, FACT_PARTIAL_DECLARED_REPLICATE, &args);
	else if (doubled)
		tell(fl, pr, FACT_REPLICATE_DECLARED_PARTIAL, &args);
	return missing || doubled;
}

/*
 * A step that selects logical parameter l but ran on a buffer of another
 * dtype than the one holding its gradient (syncplan.h, missed): the
 * reduction never reached it (NeMo PR #6958).
 */
static bool
explain_buffer(struct finding_list *fl, const struct model *m,
    const struct sync_step *s, int l, const struct param_result *pr)
{
	struct fact_args args = { .mesh = &m->mesh, .step = s,
			    .cause = s->key };
	int	 k, p;

	/*
	 * A reduction's miss is a missing reduction; a scale's a factor
	 * that never reached the gradient.  A missed reset or accumulate
	 * leaves it to the other explanations: one that clears nothing
	 * (before micro-batch 0) changes no value, and a finding that
	 * blamed it hid the step that did (review).
	 */
	if (s->missed == NULL || pr->correct || s->op == SYNC_RESET ||
	    s->op == SYNC_ACCUMULATE || s->op == SYNC_MASK_REPLICAS ||
	    (s->op == SYNC_SCALE && q_equal(s->scale, q_make(1, 1))))
		return false;
	for (k = 0; k < m->logical[l].ninstances; k++) {
		p = m->logical[l].instance[k];
		if (s->missed[p] < 0)
			continue;
		args.held = cfg_plan_dtype_words[s->missed[p]];
		tell(fl, pr, s->op == SYNC_SCALE ? FACT_BUFFER_SCALE_NOT_HELD :
		    FACT_BUFFER_NOT_HELD, &args);
		return true;
	}
	return false;
}

/*
 * The experts' input gradient (torchtitan #1878) feeds the router's score
 * gradient: when its etp all-reduce is skipped, say so next to the router.
 */
static void
explain_backward_reductions(struct finding_list *fl, const struct model *m,
    const struct sym_context *ctx, const struct param_result *pr, int stage)
{
	int	i;

	for (i = 0; i < ctx->nreductions; i++) {
		const struct backward_reduction *r = &ctx->reductions[i];
		struct fact_args args = { .mesh = &m->mesh, .reduction = r };

		if (r->stage != stage || r->boundary ||
		    pl_equal(r->truth, r->declared))
			continue;
		tell(fl, pr, FACT_EXPERT_INPUT_SKIPPED, &args);
	}
}

/*
 * The used wrong cells of pr with distinct (value, expected) pairs, in
 * *dw (its cells xmalloc'd, for the caller to free): the tests below
 * depend on those pairs alone, and values are interned (lc_intern), so
 * each distinct pair is classified once instead of once per rank (issue
 * 24: at 2,048 ranks the same 24,000-term pair was read per rank).
 */
void
diag_distinct_wrong(const struct param_result *pr, struct param_result *dw)
{
	const struct cell **slot;
	struct cell	*out;
	size_t		 i, k, cap = 16, n = 0;

	while (cap < 2 * pr->ncells)
		cap *= 2;
	slot = xcalloc(cap, sizeof *slot);
	out = xreallocarray(NULL, pr->ncells + 1, sizeof *out);
	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];
		uintptr_t h;

		if (!ce->used || ce->ok)
			continue;
		h = ((uintptr_t)ce->value >> 4) * 31 +
		    ((uintptr_t)ce->expected >> 4);
		for (k = (h * 0x9e3779b97f4a7c15u) & (cap - 1); slot[k] != NULL;
		    k = (k + 1) & (cap - 1))
			if (slot[k]->value == ce->value &&
			    slot[k]->expected == ce->expected)
				break;
		if (slot[k] != NULL)
			continue;
		slot[k] = ce;
		out[n++] = *ce;
	}
	free(slot);
	*dw = *pr;
	dw->cells = out;
	dw->ncells = n;
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
 * True when every wrong used cell's value stands in relation `rel` to its
 * expected value, and there is one.
 */
static bool
all_wrong(const struct param_result *pr,
    bool (*rel)(const struct lincomb *, const struct lincomb *))
{
	size_t	i;
	bool	have = false;

	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];

		if (!ce->used || ce->ok)
			continue;
		if (!rel(ce->value, ce->expected))
			return false;
		have = true;
	}
	return have;
}

/* lc_select's test: is the atom of micro-batch a->mb? */
struct mb_arg {
	const struct atom_space	*sp;
	int			 mb;
};

static bool
of_micro_batch(uint32_t atom, const void *arg)
{
	const struct mb_arg *a = arg;

	return atom_micro_batch(a->sp, atom) == a->mb;
}

/*
 * Do the micro-batches fare differently in a wrong used cell: is one's
 * part of the value its part of the expected value times some factor,
 * and another's times another factor, or not proportional at all?  A
 * wrong factor or group common to every micro-batch is not a schedule's.
 */
static bool
micro_batches_unequal(const struct sym_run *run, const struct param_result *pr)
{
	const struct atom_space *sp = &run->ctx->atoms;
	struct arena	*arena = run->arena;
	struct mb_arg	 a = { sp, 0 };
	struct rational	 c, c0 = q_make(1, 1);
	bool		 prop, prop0 = false;
	size_t		 i;
	int		 K = run->model->loss.micro_batches;

	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];

		if (!ce->used || ce->ok)
			continue;
		for (a.mb = 0; a.mb < K; a.mb++) {
			prop = lc_proportional(lc_select(arena, ce->value,
			    of_micro_batch, &a), lc_select(arena, ce->expected,
			    of_micro_batch, &a), &c);
			if (a.mb == 0) {
				prop0 = prop;
				c0 = c;
			} else if (prop != prop0 || (prop && !q_equal(c, c0)))
				return true;
		}
	}
	return false;
}

/*
 * Can step s, off its default schedule, weigh the micro-batches
 * unequally?  Not a projection that also runs after the last one: an
 * average over a group, an all-gather of owned shards and a mask give
 * the same result applied once or again to a growing buffer, so they
 * are right at every micro-batch (gradaudit.yaml(5)); a sum, a
 * reduce-scatter (whose unowned elements stay in the buffer), a scale
 * other than 1 and a reset are not.
 */
static bool
schedule_matters(const struct sync_step *s, uint32_t last)
{
	bool	 projection;

	switch (s->op) {
	case SYNC_ALL_REDUCE:
		projection = s->average;
		break;
	case SYNC_ALL_GATHER:
	case SYNC_MASK_REPLICAS:
	case SYNC_ACCUMULATE:
	case SYNC_LOSS_TERM:
		projection = true;
		break;
	case SYNC_SCALE:
		projection = q_equal(s->scale, q_make(1, 1));
		break;
	case SYNC_REDUCE_SCATTER:
	case SYNC_RESET:
	default:
		projection = false;
		break;
	}
	return !projection || (s->micro_batches & last) == 0;
}

/*
 * A step of plan: whose schedule is not today's (after the last
 * micro-batch; a reset before the first) and that touches logical
 * parameter l, when the micro-batches fare differently in its values:
 * the finding names the step and when it runs.
 */
static bool
explain_schedule(struct finding_list *fl, const struct sym_run *run, int l,
    const struct param_result *pr, const struct param_result *dw)
{
	const struct sync_plan *plan = &run->ctx->plan;
	const struct model *m = run->model;
	struct fact_args args = { .mesh = &m->mesh };
	uint32_t last = (uint32_t)1 << (m->loss.micro_batches - 1);
	char	 when[160], *text;
	int	 i;

	if (!plan->per_micro_batch || !micro_batches_unequal(run, dw))
		return false;
	/*
	 * The first pass looks only at steps that can weigh micro-batches
	 * unequally where they run (schedule_matters); among them a
	 * collective or a reset says more than a scale beside it.  The last
	 * pass takes any step off its default schedule.
	 */
	for (i = 0; i < 3 * plan->nsteps; i++) {
		const struct sync_step *s = &plan->steps[i % plan->nsteps];

		if (!touches_logical(s, m, l) || (s->op == SYNC_RESET ?
		    (s->micro_batches & ~(uint32_t)1) == 0 :
		    s->micro_batches == last) ||
		    (i < 2 * plan->nsteps && !schedule_matters(s, last)) ||
		    (i < plan->nsteps && s->op == SYNC_SCALE))
			continue;
		syncplan_schedule_text(s, m->loss.micro_batches, when,
		    sizeof when);
		text = arena_alloc(run->arena, sizeof when + 32);
		snprintf(text, sizeof when + 32, "%s %s", s->op == SYNC_RESET ?
		    "before the backward of" : "after the backward of", when);
		/* The step is its own cause: plan, which no setting writes. */
		args.step = s;
		args.cause = s->key;
		args.schedule = text;
		tell(fl, pr, FACT_SCHEDULE_UNEQUAL, &args);
		return true;
	}
	return false;
}

/*
 * A parameter before a lossy MoE block boundary: name the boundary, as
 * its gradient went wrong there and not in any step of the plan.
 */
static bool
explain_boundary(struct finding_list *fl, const struct model *m,
    const struct sym_context *ctx, const struct param_result *pr, int p)
{
	struct fact_args args = { .mesh = &m->mesh };

	if (m->params[p].boundary < 0 || pr->correct)
		return false;
	args.reduction = &ctx->reductions[m->params[p].boundary];
	if (args.reduction->cite == REDUCTION_CITE_OUTPUT_BOUNDARY ||
	    args.reduction->cite == REDUCTION_CITE_MIXER_INPUT) {
		const struct config *c = fl->audit->config;
		const struct plan_item *it;
		struct backward_reduction *named;
		char	 step[256], what[512];

		bool	 mixer = args.reduction->cite ==
		    REDUCTION_CITE_MIXER_INPUT;

		if (!(mixer ? args.reduction->summed_whole :
		    args.reduction->missing))
			return true;
		/*
		 * No setting decides it: the finding's op names the step
		 * of plan: that declared it, as a declare: of parameters
		 * does (syncplan.c).
		 */
		it = &c->plan[args.reduction->plan_item];
		snprintf(step, sizeof step, "plan[%d] (%s:%d:%d)",
		    args.reduction->plan_item, c->file, it->mark.line,
		    it->mark.col);
		snprintf(what, sizeof what, "%s that %s declares %s",
		    args.reduction->what, step, mixer ? "Partial" :
		    "Replicate");
		named = arena_alloc(&fl->audit->arena, sizeof *named);
		*named = *args.reduction;
		named->what = arena_strdup(&fl->audit->arena, what);
		args.reduction = named;
		args.declared_by = arena_strdup(&fl->audit->arena, step);
		tell(fl, pr, mixer ? FACT_MIXER_SUMMED_WHOLE :
		    FACT_OUTPUT_NOT_SUMMED, &args);
		return true;
	}
	/*
	 * The router's scores declared detached: the finding names the
	 * plan's step, as the output layer's does above.
	 */
	if (args.reduction->cite == REDUCTION_CITE_SCORES_DETACHED) {
		const struct config *c = fl->audit->config;
		const struct plan_item *it;
		struct backward_reduction *named;
		char	 step[256], what[512];

		it = &c->plan[args.reduction->plan_item];
		snprintf(step, sizeof step, "plan[%d] (%s:%d:%d)",
		    args.reduction->plan_item, c->file, it->mark.line,
		    it->mark.col);
		snprintf(what, sizeof what, "%s that %s declares detached",
		    args.reduction->what, step);
		named = arena_alloc(&fl->audit->arena, sizeof *named);
		*named = *args.reduction;
		named->what = arena_strdup(&fl->audit->arena, what);
		args.reduction = named;
		args.declared_by = arena_strdup(&fl->audit->arena, step);
		tell(fl, pr, FACT_SCORES_DETACHED, &args);
		return true;
	}
	if (args.reduction->router_twice)
		tell(fl, pr, FACT_ROUTER_INPUT_TWICE, &args);
	if (args.reduction->summed_whole)
		tell(fl, pr, FACT_BOUNDARY_SUMMED_WHOLE, &args);
	if (!args.reduction->missing)
		return true;
	tell(fl, pr, args.reduction->cite == REDUCTION_CITE_ROUTER_SHARE ?
	    FACT_ROUTER_SHARE_NOT_SUMMED : FACT_BOUNDARY_NOT_SUMMED, &args);
	return true;
}

/*
 * The main loss's atoms of v as expected, and its auxiliary losses' atoms
 * (lossnorm.h) q times the expected ones, q the same for all (0 when they
 * are missing)?
 */
static bool
aux_proportional(const struct atom_space *sp, const struct lincomb *v,
    const struct lincomb *e, struct rational *q, bool *have)
{
	int	 aux = atom_space_aux_source(sp);
	uint32_t i = 0, j = 0;

	while (i < v->nterms || j < e->nterms) {
		const struct term *a = i < v->nterms ? &v->terms[i] : NULL;
		const struct term *b = j < e->nterms ? &e->terms[j] : NULL;
		struct rational	 r;

		if (a != NULL && (b == NULL || a->atom < b->atom))
			return false;	/* an atom nobody expects */
		if (a == NULL || b->atom < a->atom) {
			if (atom_source(sp, b->atom) != aux)
				return false;
			r = q_make(0, 1);
			j++;
		} else {
			if (atom_source(sp, a->atom) != aux) {
				if (!q_equal(a->coef, b->coef))
					return false;
				i++, j++;
				continue;
			}
			r = q_div(a->coef, b->coef);
			i++, j++;
		}
		if (*have && !q_equal(r, *q))
			return false;
		*q = r;
		*have = true;
	}
	return true;
}

static bool
all_wrong_aux(const struct atom_space *sp, const struct param_result *pr,
    struct rational *q)
{
	size_t	 i;
	bool	 have = false, any = false;

	if (atom_space_aux_source(sp) < 0)
		return false;
	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];

		if (!ce->used || ce->ok)
			continue;
		if (!aux_proportional(sp, ce->value, ce->expected, q, &have))
			return false;
		any = true;
	}
	return any && have;
}

/*
 * The other atoms of v as expected, and its multi-token prediction
 * losses' atoms (lossnorm.h) the expected ones with other coefficients:
 * *uniform stays true while all of them are q times the expected.
 */
static bool
mtp_off(const struct atom_space *sp, const struct lincomb *v,
    const struct lincomb *e, struct rational *q, bool *have, bool *uniform)
{
	uint32_t i = 0, j = 0;

	while (i < v->nterms || j < e->nterms) {
		const struct term *a = i < v->nterms ? &v->terms[i] : NULL;
		const struct term *b = j < e->nterms ? &e->terms[j] : NULL;
		struct rational	 r;

		if (a != NULL && (b == NULL || a->atom < b->atom))
			return false;	/* an atom nobody expects */
		if (a == NULL || b->atom < a->atom) {
			if (atom_mtp_layer(sp, b->atom) == 0)
				return false;
			r = q_make(0, 1);
			j++;
		} else {
			if (atom_mtp_layer(sp, a->atom) == 0) {
				if (!q_equal(a->coef, b->coef))
					return false;
				i++, j++;
				continue;
			}
			r = q_div(a->coef, b->coef);
			i++, j++;
		}
		if (*have && !q_equal(r, *q))
			*uniform = false;
		*q = r;
		*have = true;
	}
	return true;
}

/*
 * The atom of the same layer and micro-batch holding the tokens of the cp
 * rank 0 sibling of the chunk whose tokens atom a holds, in *sib; false
 * where a's chunk is on cp rank 0 or no such atom exists.  An expert's
 * atom kept per source holds its source's tokens (lossnorm.h): its
 * sibling is the atom of that source's sibling, on the owner of a's
 * experts in the sibling's ep group.  Held against the same source on
 * the owner's cp sibling, as the owner's own chunk's atoms are, each
 * per-source atom met its own factor, and the experts of Megatron-LM
 * #3943's cp roll read as unequal over dp.
 */
static bool
mtp_cp_sibling(const struct atom_space *sp, uint32_t a, uint32_t *sib)
{
	const struct mesh *mesh = &sp->mesh;
	struct coord	 o, c;
	int		 src = atom_expert_source(sp, a), r0;

	mesh_coord_of(mesh, atom_rank(sp, a), &o);
	c = o;
	if (src >= 0)
		mesh_coord_of(mesh, mesh_rank_of_expert(mesh, o.pp, src, o.etp,
		    o.edp), &c);
	if (c.cp == 0)
		return false;
	r0 = mesh_rank_of(mesh, c.pp, c.dp - c.cp, c.tp);
	if (src < 0) {
		*sib = atom_id(sp, r0, atom_source(sp, a),
		    atom_micro_batch(sp, a));
		return true;
	}
	mesh_coord_of(mesh, r0, &c);
	if (c.etp != o.etp)
		return false;
	*sib = atom_id(sp, mesh_rank_of_expert(mesh, o.pp, o.ep, o.etp, c.edp),
	    atom_source(sp, a) - src + c.ep, atom_micro_batch(sp, a));
	return true;
}

/*
 * Are the multi-token prediction atoms of one micro-batch weighed
 * differently against the expected on its cp ranks?  Each atom is
 * compared with its cp rank 0 sibling's (mtp_cp_sibling): what a rolled
 * count of the cp rank's own makes of a roll across the cp ranks, which
 * leaves the one holding a sequence's end fewer tokens (Megatron core
 * 0.14 on).
 */
static bool
mtp_unequal_over_cp(const struct atom_space *sp,
    const struct param_result *pr)
{
	const struct term *b;
	struct rational	 e0;
	uint32_t	 sib, j;
	size_t		 i;

	if (sp->mesh.cp == 1)
		return false;
	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];

		if (!ce->used || ce->ok)
			continue;
		for (j = 0; j < ce->expected->nterms; j++) {
			b = &ce->expected->terms[j];
			if (atom_mtp_layer(sp, b->atom) == 0 ||
			    atom_is_held(sp, b->atom) ||
			    !mtp_cp_sibling(sp, b->atom, &sib))
				continue;
			e0 = lc_coef(ce->expected, sib);
			if (q_is_zero(e0))
				continue;
			if (!q_equal(q_div(lc_coef(ce->value, b->atom),
			    b->coef), q_div(lc_coef(ce->value, sib), e0)))
				return true;
		}
	}
	return false;
}

/*
 * A plan without "preset" that no step of reduces the parameter over its
 * data-parallel replicas, or sums a tied weight's copies: that is the
 * cause, whatever else its values show, and the finding names the plan
 * (kohya-ss/sd-scripts #924).
 */
static bool
explain_unreduced(struct finding_list *fl, const struct model *m,
    const struct sync_plan *sp, int l, const struct param_result *pr)
{
	const struct config *c = m->config;
	struct fact_args args = { .mesh = &m->mesh, .cause = KEY_PLAN };
	struct cfg_mark at = cfg_key_mark(c, KEY_PLAN);
	char	 plan[256];
	int	 i, p = -1, never;
	bool	 untied = false;

	untied = syncplan_untied(m, l);
	for (i = 0; i < m->logical[l].ninstances && p < 0; i++)
		if (syncplan_unreduced(m, m->logical[l].instance[i]))
			p = m->logical[l].instance[i];
	if (!untied && p < 0)
		return false;
	/* The op names the plan where the step is missing, as a step's does. */
	snprintf(plan, sizeof plan, "plan (%s:%d:%d)", c->file, at.line,
	    at.col);
	args.op = arena_strdup(&fl->audit->arena, plan);
	if (untied)
		tell(fl, pr, FACT_PLAN_UNTIED, &args);
	if (p < 0)
		return true;
	/* A step scheduled at no micro-batch: name it, as a step's finding. */
	never = syncplan_unreduced_never_runs(m, p);
	for (i = 0; never >= 0 && i < sp->nsteps; i++) {
		const struct sync_step *s = &sp->steps[i];

		if (s->plan_item != never || !touches_logical(s, m, l))
			continue;
		args.step = s;
		args.group = m->params[p].expert ? "edp" : "dp";
		tell(fl, pr, FACT_PLAN_NEVER_RUNS, &args);
		return true;
	}
	args.group = m->params[p].expert ? "edp" : "dp";
	tell(fl, pr, FACT_PLAN_UNREDUCED, &args);
	return true;
}

static bool
all_wrong_mtp(const struct atom_space *sp, const struct param_result *pr,
    struct rational *q, bool *uniform)
{
	size_t	 i;
	bool	 have = false, any = false;

	*uniform = true;
	for (i = 0; i < pr->ncells; i++) {
		const struct cell *ce = &pr->cells[i];

		if (!ce->used || ce->ok)
			continue;
		if (!mtp_off(sp, ce->value, ce->expected, q, &have, uniform))
			return false;
		any = true;
	}
	return have && any;
}

void
diag_explain_param(struct finding_list *fl, const struct sym_run *run, int l,
    const struct param_result *pr, const struct param_result *dw)
{
	const struct sym_context *ctx = run->ctx;
	const struct model *m = run->model;
	const struct sync_step *scale_step = NULL, *factor_step;
	const struct sync_step *sum_step = NULL;
	struct fact_args args = { .mesh = &m->mesh };
	enum cfg_key	 scale_cause;
	struct rational	 c;
	char		 q[48];
	bool		 explained = false, uniform, repeated = false;
	int		 i;

	for (i = 0; i < ctx->plan.nsteps; i++) {
		const struct sync_step *s = &ctx->plan.steps[i];

		if (explain_buffer(fl, m, s, l, pr))
			explained = true;
		/*
		 * A step on a loss term (term:, gather-loss) put its factor
		 * into every gradient the term reaches, at the backward: one
		 * that is not 1 says more about a wrong factor than the
		 * preset's divisor does, as the plan's own scales do.
		 */
		if (s->op == SYNC_LOSS_TERM && !q_equal(s->scale,
		    q_make(1, 1)) && term_reaches(m, s->term, l) &&
		    !(scale_step != NULL && scale_step->plan_item >= 0))
			scale_step = s;
		if (!touches_logical(s, m, l))
			continue;
		/*
		 * A scaling with a fix of its own (not its rule's, which the
		 * collective after it shares) says most about a factor.
		 */
		/*
		 * A plan: step that averages carries a factor as much as a
		 * buffer's reduction does (issue 25, gpt-neox PR #1259), and
		 * a step the user wrote says more about a factor than the
		 * preset's around it, which no setting needs to change.
		 */
		if ((s->op == SYNC_SCALE || s->op == SYNC_REDUCE_SCATTER ||
		    (s->op == SYNC_ALL_REDUCE && s->target == TARGET_BUFFER) ||
		    (s->op == SYNC_ALL_REDUCE && s->plan_item >= 0 &&
		    s->average)) &&
		    !(scale_step != NULL && scale_step->op == SYNC_SCALE &&
		    s->op != SYNC_SCALE && scale_step->fix != SYNC_FIX_NONE &&
		    scale_step->fix != s->fix) &&
		    !(scale_step != NULL && scale_step->plan_item >= 0 &&
		    s->plan_item < 0))
			scale_step = s;
		if (s->has_placement && s->op == SYNC_ALL_REDUCE &&
		    explain_placement(fl, &m->mesh, s, pr))
			explained = true;
	}
	/*
	 * With no step that scales, a sum of the plan's without average
	 * is where its divisor was left out (average: false where the loss
	 * is a mean per rank): the step the user wrote is named, not "the
	 * gradient scaling" that no step of the plan does.
	 */
	for (i = ctx->plan.nsteps - 1; scale_step == NULL && i >= 0; i--) {
		const struct sync_step *s = &ctx->plan.steps[i];

		if (s->plan_item >= 0 && s->op == SYNC_ALL_REDUCE &&
		    !s->average && sums_replicas(s, m, l) &&
		    mesh_group_size(&m->mesh, s->group) > 1)
			scale_step = sum_step = s;
	}
	/*
	 * A sum of the plan's over members that already held one value
	 * multiplied it by the group's size: that step carries the factor,
	 * whatever divisor the preset applied before it.
	 */
	for (i = 0; i < run->nissues; i++)
		if (run->issues[i].kind == ISSUE_REPEATED_SUM &&
		    run->issues[i].logical == l) {
			scale_step = &ctx->plan.steps[run->issues[i].step];
			repeated = true;
			break;
		}
	for (i = 0; i < ctx->plan.nskipped; i++)
		if (touches_logical(&ctx->plan.skipped[i], m, l) &&
		    !plan_reduces(ctx, m, &ctx->plan.skipped[i], l) &&
		    explain_placement(fl, &m->mesh,
		    &ctx->plan.skipped[i], pr))
			explained = true;
	if (explained && m->params[m->logical[l].instance[0]].role ==
	    ROLE_ROUTER)
		explain_backward_reductions(fl, m, ctx, pr,
		    m->params[m->logical[l].instance[0]].stage);
	if (explain_boundary(fl, m, ctx, pr, m->logical[l].instance[0]) ||
	    (m->logical[l].ninstances > 1 && explain_boundary(fl, m, ctx, pr,
	    m->logical[l].instance[1])))
		explained = true;
	for (i = 0; i < run->nissues; i++) {
		const struct sync_step *s =
		    &ctx->plan.steps[run->issues[i].step];
		struct fact_args order = { .mesh = &m->mesh, .step = s,
				    .fix_step = s, .cause = s->key };

		if (run->issues[i].kind != ISSUE_MIXED_STATES ||
		    run->issues[i].logical != l)
			continue;
		tell(fl, pr, FACT_STATES_MIXED, &order);
		explained = true;
	}
	if (explained || pr->correct ||
	    explain_schedule(fl, run, l, pr, dw))
		return;
	if (explain_unreduced(fl, m, &ctx->plan, l, pr))
		return;
	/*
	 * The scaling step's setting is the cause of a wrong factor (or
	 * group) only when it decides one (the data-parallel divisor, its
	 * group, the experts' divisor, ...) and its fix names it: a step
	 * decided by its rule alone (the distributed optimizer's
	 * reduce-scatter) leaves the loss's own factor as the cause (issue
	 * 23: a dense model was told to set the experts' divisor).
	 */
	/*
	 * Nor is a sum without average: averaging in it is one fix, and
	 * the loss's own normalization (loss.normalize_by: global) is
	 * another, which the fix search checks.
	 */
	factor_step = scale_step != NULL && scale_step != sum_step &&
	    sync_fix_names(scale_step->fix, scale_step->key) ? scale_step :
	    NULL;
	/* The group a reduction runs over is no factor. */
	scale_cause = factor_step != NULL && factor_step->key !=
	    KEY_DP_GROUP ? factor_step->key : KEY__COUNT;
	if (all_wrong_proportional(dw, &c)) {
		q_format(c, q, sizeof q);
		args.step = scale_step;
		/*
		 * A sum's missing divisor is its group's size: a factor that
		 * is no multiple of it (x2 where the sum is over 8 ranks, a
		 * loss of global-without-cp at cp 2) came from elsewhere,
		 * and averaging in that step would leave 1/4.
		 */
		if (scale_step != NULL && scale_step == sum_step &&
		    !(c.den == 1 && c.num > 0 && c.num %
		    mesh_group_size(&m->mesh, sum_step->group) == 0))
			args.step = NULL;
		args.fix_step = scale_cause != KEY__COUNT ? factor_step : NULL;
		args.cause = scale_cause;
		args.factor = q;
		tell(fl, pr, repeated ? FACT_REPEATED_SUM : FACT_WRONG_FACTOR,
		    &args);
		return;
	}
	/*
	 * The main loss's part right, the auxiliary losses' part (a router's
	 * load-balancing and z-loss) by another factor or not at all: their
	 * own normalization is wrong (catalogue class AUX).
	 */
	if (all_wrong_aux(&ctx->atoms, dw, &c)) {
		q_format(c, q, sizeof q);
		args.factor = q;
		/*
		 * Only a step whose factor is the whole error: removing it
		 * must leave the term right, or the preset's aux_scale is
		 * (part of) the cause too.
		 */
		if (!q_is_zero(c) && scale_step != NULL &&
		    scale_step->op == SYNC_LOSS_TERM &&
		    scale_step->term == PLAN_TERM_AUX &&
		    q_equal(c, scale_step->scale)) {
			args.step = args.fix_step = scale_step;
			args.cause = scale_step->key;
			tell(fl, pr, FACT_AUX_TERM_FACTOR, &args);
			return;
		}
		/*
		 * #3672 is named only when its 1/dp is the whole error: a
		 * release before PR #2237 also divides by cp, which keeps
		 * its own cause.
		 */
		tell(fl, pr, q_is_zero(c) ? FACT_AUX_ABSENT :
		    ctx->atoms.aux_global && q_equal(c, q_make(1,
		    m->mesh.pure_dp)) ? FACT_AUX_GLOBAL_FACTOR :
		    FACT_AUX_FACTOR, &args);
		return;
	}
	/*
	 * The main loss's part right, the multi-token prediction losses'
	 * part wrong: their scale (Megatron #3943) or their token counts
	 * (#2417, #7452 finding 3) are (catalogue class AUX).
	 */
	if (m->loss.mtp > 0 && all_wrong_mtp(&ctx->atoms, dw, &c, &uniform)) {
		q_format(c, q, sizeof q);
		args.factor = q;
		if (uniform)
			tell(fl, pr, FACT_MTP_FACTOR, &args);
		else if (mtp_unequal_over_cp(&ctx->atoms, dw))
			tell(fl, pr, FACT_MTP_UNEQUAL_OVER_CP, &args);
		else
			tell(fl, pr, FACT_MTP_UNEQUAL, &args);
		return;
	}
	/*
	 * Exactly the expected atoms, not in proportion: every token counts,
	 * with unequal weights, as a loss divided by the wrong token counts
	 * makes them (lossnorm.h).
	 */
	/*
	 * With pp > 1 a pipeline normalization other than "same" decides
	 * the normalization (torchtitan #2972): it is the setting to change.
	 */
	if (all_wrong(dw, lc_same_atoms) && m->mesh.pp > 1 &&
	    m->config->loss.pp_normalize_by != PP_NORMALIZE_SAME) {
		tell(fl, pr, FACT_PP_UNEQUAL_WEIGHTS, &args);
		return;
	}
	if (all_wrong(dw, lc_same_atoms)) {
		args.total = (long long)m->loss.total;
		tell(fl, pr, FACT_UNEQUAL_WEIGHTS, &args);
		return;
	}
	/*
	 * Part of the expected sum with the right coefficients: some
	 * contributing ranks never reached it, so the reduction ran over too
	 * small a group.
	 */
	args.cause = factor_step ? factor_step->key : KEY__COUNT;
	if (all_wrong(dw, lc_strict_part)) {
		int p = m->logical[l].instance[0];
		bool dense_expert = m->params[p].expert &&
		    layout_buffer_of(m, p) == BUFFER_DENSE;

		args.step = scale_step;
		tell(fl, pr, dense_expert ? FACT_PARTIAL_SUM_DENSE_EXPERT :
		    FACT_PARTIAL_SUM, &args);
		return;
	}
	tell(fl, pr, pr->consistent ? FACT_WRONG_RANKS :
	    FACT_REPLICAS_DISAGREE, &args);
}
