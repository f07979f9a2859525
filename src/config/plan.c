/*
 * The plan: section (plan.h): the sizes its factors name and the checks
 * that need the config's mesh (config.c copies and frees it with its
 * config).  Reading it is plan-read.c's; which parameters a glob names is
 * the model's to say (syncplan.c), for the loader does not know the
 * parameters.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/plan.h"
#include "config/planexpr.h"

bool
plan_given(const struct config *c)
{
	return keyset_has(&c->given, KEY_PLAN);
}

void
plan_sizes(const struct config *c, int64_t v[PLAN_NAME__COUNT])
{
	int64_t	 dp = c->mesh.dp, cp = c->mesh.cp, tp = c->mesh.tp;
	int64_t	 expert = (int64_t)c->mesh.ep * c->mesh.etp;

	v[PLAN_NAME_DP] = dp;
	v[PLAN_NAME_CP] = cp;
	v[PLAN_NAME_PP] = c->mesh.pp;
	v[PLAN_NAME_TP] = tp;
	v[PLAN_NAME_EP] = c->mesh.ep;
	v[PLAN_NAME_ETP] = c->mesh.etp;
	/* The constraints have the expert mesh divide dp * cp * tp. */
	v[PLAN_NAME_EDP] = expert > 0 && dp * cp * tp % expert == 0 ?
	    dp * cp * tp / expert : 1;
	v[PLAN_NAME_VPP] = c->mesh.vpp > 0 ? c->mesh.vpp : 1;
	v[PLAN_NAME_DP_REPLICATE] = c->mesh.dp_replicate > 0 ?
	    c->mesh.dp_replicate : 1;
	v[PLAN_NAME_DP_SHARD] = dp % v[PLAN_NAME_DP_REPLICATE] == 0 ?
	    dp / v[PLAN_NAME_DP_REPLICATE] : 1;
	v[PLAN_NAME_MICRO_BATCHES] = c->training.micro_batches;
	v[PLAN_NAME_GTP] = c->mesh.gtp > 0 ? c->mesh.gtp : 1;
	v[PLAN_NAME_EGTP] = c->mesh.egtp > 0 ? c->mesh.egtp : 1;
}

/*
 * A step over gtp or egtp (or what they leave of dp and edp) on a mesh
 * without that axis: the group of one member, or all of dp, is not what
 * a plan that names it means, and Megatron builds no such group
 * (parallel_state.py: singleton gtp_remat groups at size 1).
 */
static bool
plan_names_missing_gtp(const struct config *c, const struct plan_item *it,
    const char **axis)
{
	const char	*g;

	if (it->op == PLAN_SCALE || it->op == PLAN_PRESET)
		return false;
	/* A word or a product: its name says which axis it has. */
	g = cfg_plan_group_name(it->group);
	if (strstr(g, "egtp") != NULL) {
		*axis = "egtp";
		return c->mesh.egtp <= 1;
	}
	if (strstr(g, "gtp") != NULL) {
		*axis = "gtp";
		return c->mesh.gtp <= 1;
	}
	return false;
}

int
plan_factor(const struct config *c, const struct plan_item *it,
    struct rational *q)
{
	int64_t	 v[PLAN_NAME__COUNT];
	char	 why[CFG_WHY_SIZE];
	size_t	 at;

	plan_sizes(c, v);
	return plan_expr_eval(it->expr, strlen(it->expr), v, q, &at, why,
	    sizeof why);
}

/* "[j]" after a list's key, nothing after a value written alone. */
static const char *
list_index(char *buf, size_t size, bool scalar, int j)
{
	if (scalar)
		buf[0] = '\0';
	else
		snprintf(buf, size, "[%d]", j);
	return buf;
}

bool
plan_has_term(const struct config *c, enum plan_term t)
{
	int64_t	 an, ad, zn, zd;

	switch (t) {
	case PLAN_TERM_AUX:
		/* aux_build's test: a coefficient that is not zero. */
		if (!c->model.has_moe ||
		    !cfg_decimal(c->model.moe.aux_loss_coeff, &an, &ad) ||
		    !cfg_decimal(c->model.moe.z_loss_coeff, &zn, &zd))
			return false;
		return an != 0 || zn != 0;
	case PLAN_TERM_MTP:
		return c->model.mtp > 0;
	case PLAN_TERM_MAIN:
	case PLAN_TERM__COUNT:
		break;
	}
	return true;
}

bool
plan_violation(const struct config *c, struct cfg_mark *m, char *buf,
    size_t size)
{
	const struct plan_item *it;
	int64_t		 v[PLAN_NAME__COUNT], num = 1, den = 1;
	struct rational	 q;
	char		 why[CFG_WHY_SIZE], idx[16];
	size_t		 at;
	const char	*axis;
	int		 i, j;

	if (!plan_given(c))
		return true;
	plan_sizes(c, v);
	for (i = 0; i < c->nplan; i++) {
		it = &c->plan[i];
		for (j = 0; j < it->nstages; j++) {
			if (it->stages[j] < c->mesh.pp)
				continue;
			*m = it->stage_marks[j];
			snprintf(buf, size, "plan[%d].stages%s: stage %d is "
			    "past the last, %d (mesh.pp is %d)", i,
			    list_index(idx, sizeof idx, it->stages_scalar, j),
			    it->stages[j], c->mesh.pp - 1, c->mesh.pp);
			return false;
		}
		for (j = 0; j < it->nmicro_batches; j++) {
			if (it->micro_batches[j] < c->training.micro_batches)
				continue;
			*m = it->micro_batch_marks[j];
			snprintf(buf, size, "plan[%d].micro-batches%s: "
			    "micro-batch %d is past the last, %d "
			    "(training.micro_batches is %d)", i,
			    list_index(idx, sizeof idx,
			    it->micro_batches_scalar, j), it->micro_batches[j],
			    c->training.micro_batches - 1,
			    c->training.micro_batches);
			return false;
		}
		/*
		 * The block's own gradients: only the experts that tp-mask
		 * gives to the tp ranks leave them Partial inside the block,
		 * and what summing them means is a declared Partial; a
		 * Replicate one sums nothing, as no declare.
		 */
		/*
		 * A gradient that never reaches its producer: the routing
		 * weights gathered with a plain all_gather (NeMo Automodel
		 * before PR #2995), whatever parallelizes the experts.
		 */
		if (it->op == PLAN_DECLARE &&
		    it->declare == PLAN_DECLARE_DETACHED &&
		    it->activation != PLAN_ACTIVATION_ROUTER_SCORES) {
			*m = it->value_mark;
			snprintf(buf, size, "plan[%d].declare: detached is "
			    "said of the router's score gradient only "
			    "(activation: router-scores)", i);
			return false;
		}
		if (it->op == PLAN_DECLARE &&
		    it->declare == PLAN_DECLARE_DETACHED &&
		    !c->model.has_moe) {
			*m = it->activation_mark;
			snprintf(buf, size, "plan[%d].activation: "
			    "router-scores is a gradient of an MoE block, and "
			    "the model has none (model.moe)", i);
			return false;
		}
		if ((it->activation == PLAN_ACTIVATION_ROUTER_SCORES ||
		    it->activation == PLAN_ACTIVATION_EXPERTS_INPUT) &&
		    it->declare != PLAN_DECLARE_DETACHED &&
		    (!c->model.has_moe ||
		    c->model.moe.ep_on != MOE_EP_TP_MASK)) {
			*m = it->activation_mark;
			snprintf(buf, size, "plan[%d].activation: %s is a "
			    "gradient of experts parallelized by masking on "
			    "the tp group (model.moe.ep_on: tp-mask)", i,
			    cfg_plan_activation_words[it->activation]);
			return false;
		}
		if ((it->activation == PLAN_ACTIVATION_ROUTER_SCORES ||
		    it->activation == PLAN_ACTIVATION_EXPERTS_INPUT) &&
		    it->declare == PLAN_DECLARE_REPLICATE) {
			*m = it->value_mark;
			snprintf(buf, size, "plan[%d].declare: %s declared "
			    "replicate is what the block does when nothing "
			    "is declared (each rank keeps its own share): "
			    "declare it partial to sum it over tp, or leave "
			    "the step out", i,
			    cfg_plan_activation_words[it->activation]);
			return false;
		}
		/*
		 * Only a duplicated mixer's input has a gather of its own
		 * to declare: a split mixer's input gradient is each tp
		 * rank's share, summed by the gather "f" as its rules say.
		 */
		if (it->activation == PLAN_ACTIVATION_MIXER_INPUT &&
		    !c->model.duplicated_mixer) {
			*m = it->activation_mark;
			snprintf(buf, size, "plan[%d].activation: mixer-input "
			    "is the gradient of a mixer computed whole on "
			    "every tp rank (model.duplicated_mixer)", i);
			return false;
		}
		if (plan_names_missing_gtp(c, it, &axis)) {
			*m = it->value_mark;
			snprintf(buf, size, "plan[%d]: %s is a group of mesh.%s, "
			    "which is 1 here: set mesh.%s or name another "
			    "group", i, cfg_plan_group_name(it->group), axis,
			    axis);
			return false;
		}
		if (it->term >= 0 && !plan_has_term(c, it->term)) {
			*m = it->term_mark;
			snprintf(buf, size, "plan[%d].term: the model has no "
			    "%s loss (%s)", i, cfg_plan_term_words[it->term],
			    it->term == PLAN_TERM_AUX ? "model.moe with a "
			    "non-zero aux_loss_coeff or z_loss_coeff" :
			    "model.mtp");
			return false;
		}
		/*
		 * A gather with autograd multiplies its term's loss factor
		 * by its group's size when the model is built, before the
		 * sync plan's bound (syncplan.c) is asked: bound it here,
		 * by the world, which no group passes.
		 */
		if (it->op == PLAN_GATHER_LOSS && it->autograd &&
		    (__builtin_mul_overflow(num, cfg_world(c), &num) ||
		    num > PLAN_MAX_SCALE)) {
			*m = it->value_mark;
			snprintf(buf, size, "plan[%d].gather-loss: the plan's "
			    "factors multiply past %lld with this mesh (a "
			    "gather with autograd counts the world's size, "
			    "%lld)", i, (long long)PLAN_MAX_SCALE,
			    (long long)cfg_world(c));
			return false;
		}
		if (it->op != PLAN_SCALE)
			continue;
		if (plan_expr_eval(it->expr, strlen(it->expr), v, &q, &at,
		    why, sizeof why) == -1) {
			*m = it->value_mark;
			snprintf(buf, size, "plan[%d].scale: %s with this mesh",
			    i, why);
			return false;
		}
		/* The product so far, both parts bounded (PLAN_MAX_SCALE). */
		if (__builtin_mul_overflow(num, q.num < 0 ? -q.num : q.num,
		    &num) || __builtin_mul_overflow(den, q.den, &den) ||
		    num > PLAN_MAX_SCALE || den > PLAN_MAX_SCALE) {
			*m = it->value_mark;
			snprintf(buf, size, "plan[%d].scale: the plan's scale "
			    "factors multiply past %lld in numerator or "
			    "denominator with this mesh", i,
			    (long long)PLAN_MAX_SCALE);
			return false;
		}
	}
	return true;
}

bool
plan_glob_match(const char *glob, const char *name)
{
	return fnmatch(glob, name, 0) == 0;
}

