/*
 * The gradient synchronization rules of SPEC section 6, as a table.  Each
 * row emits the steps of one rule for this config: the knobs decide whether
 * a step runs, where it sits in the order, which group it uses, how it
 * scales and which placement it declares.  Whether the result is right is
 * never decided here: the engines execute the plan and compare.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/suggest.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/plan.h"
#include "model/lossterm.h"
#include "model/model.h"
#include "model/syncplan.h"

struct sync_rule;

typedef void emit_fn(struct sync_plan *, const struct model *,
    const struct placement *, const struct sync_rule *);

struct sync_rule {
	const char	*label;
	enum cfg_key	 key;		/* the setting that decides it */
	enum sync_cite	 cite;
	enum sync_fix	 fix;
	emit_fn		*emit;
};

/*
 * CFG_MAX_MICRO_BATCHES bounds training.micro_batches and the indexes of
 * micro-batches:, so a schedule is a word of bits.
 */
_Static_assert(CFG_MAX_MICRO_BATCHES <= 32, "a schedule is 32 bits");

/* The schedule of a step after the last micro-batch: today's. */
static uint32_t
last_micro_batch(const struct model *m)
{
	return (uint32_t)1 << (m->loss.micro_batches - 1);
}

static struct sync_step *
new_step(struct sync_plan *plan, const struct model *m,
    const struct sync_rule *rule, enum sync_op op, enum group_kind group)
{
	struct sync_step *s;

	plan->steps = xreallocarray(plan->steps, plan->nsteps + 1,
	    sizeof *plan->steps);
	s = &plan->steps[plan->nsteps++];
	memset(s, 0, sizeof *s);
	s->op = op;
	s->group = group;
	s->target = TARGET_PARAMS;
	s->params = xcalloc(m->nparams, sizeof *s->params);
	s->scale = q_make(1, 1);
	s->label = rule->label;
	s->key = rule->key;
	s->cite = rule->cite;
	s->fix = rule->fix;
	s->plan_item = -1;
	s->dtype = -1;
	s->term = -1;
	s->micro_batches = last_micro_batch(m);
	return s;
}

/*
 * A factor's name among the plan's sizes (planexpr.h): what a data size
 * of the config, or a group's size, reads as; NULL where no name says it.
 */
static const char *
data_size_text(enum data_size d)
{
	static const char *const names[] = {
		[SIZE_DP_CP] = "(dp*cp)", [SIZE_DP] = "dp", [SIZE_CP] = "cp",
		[SIZE_ONE] = "1",
	};

	return names[d];
}

static const char *
group_size_text(enum group_kind g)
{
	static const char *const names[GROUP__COUNT] = {
		[GROUP_DP] = "(dp*cp)", [GROUP_TP] = "tp", [GROUP_EP] = "ep",
		[GROUP_ETP] = "etp", [GROUP_EDP] = "edp", [GROUP_CP] = "cp",
		[GROUP_PURE_DP] = "dp", [GROUP_DP_SHARD] = "(dp_shard*cp)",
		[GROUP_DP_REPLICATE] = "dp_replicate", [GROUP_GTP] = "gtp",
		[GROUP_GTP_REPLICATE] = "(dp*cp/gtp)", [GROUP_EGTP] = "egtp",
		[GROUP_EGTP_REPLICATE] = "(edp/egtp)",
	};

	return names[g];
}

/*
 * Scale s by num/den, each with its name (NULL: none); the text is kept
 * only when both have one.  planwrite checks it against the value.
 */
static void
set_scale(struct sync_step *s, int num, const char *num_text, int den,
    const char *den_text)
{
	s->scale = q_make(num, den);
	s->scale_text[0] = '\0';
	if (num_text != NULL && den_text != NULL)
		snprintf(s->scale_text, sizeof s->scale_text, "%s/%s",
		    num_text, den_text);
}

static void
note_skipped(struct sync_plan *plan, const struct model *m,
    const struct sync_rule *rule, const bool *params, struct placement truth,
    struct placement declared)
{
	struct sync_step *s;

	plan->skipped = xreallocarray(plan->skipped, plan->nskipped + 1,
	    sizeof *plan->skipped);
	s = &plan->skipped[plan->nskipped++];
	memset(s, 0, sizeof *s);
	s->group = GROUP_TP;
	s->params = xcalloc(m->nparams, sizeof *s->params);
	memcpy(s->params, params, m->nparams * sizeof *params);
	s->label = rule->label;
	s->key = rule->key;
	s->cite = rule->cite;
	s->fix = rule->fix;
	s->plan_item = -1;
	s->dtype = -1;
	s->term = -1;
	s->micro_batches = last_micro_batch(m);
	s->has_placement = true;
	s->truth = truth;
	s->declared = declared;
}

/*
 * Reduce the selected gradients over tp as their declared placement says:
 * nothing if declared Replicate; a tp all-reduce if declared Partial over
 * the whole group; if Partial over the token slices only, Replicate parts
 * are first kept on one rank each so the all-reduce counts them once.
 */
static void
emit_tp_reduction(struct sync_plan *plan, const struct model *m,
    const struct sync_rule *rule, const bool *params, struct placement truth,
    struct placement declared)
{
	struct sync_step *s;

	if (!pl_any(declared, PLACE_PARTIAL)) {
		note_skipped(plan, m, rule, params, truth, declared);
		return;
	}
	/* Only a Replicate sub-dimension with more than one rank needs it. */
	if ((declared.slice == PLACE_REPLICATE && m->mesh.slices > 1) ||
	    (declared.etp == PLACE_REPLICATE && m->mesh.etp > 1)) {
		s = new_step(plan, m, rule, SYNC_MASK_REPLICAS, GROUP_TP);
		memcpy(s->params, params, m->nparams * sizeof *params);
		s->replicate = declared;
		s->has_placement = true;
		s->truth = truth;
		s->declared = declared;
	}
	s = new_step(plan, m, rule, SYNC_ALL_REDUCE, GROUP_TP);
	memcpy(s->params, params, m->nparams * sizeof *params);
	s->has_placement = true;
	s->truth = truth;
	s->declared = declared;
}

/*
 * Router (SPEC 6.2): `auto` declares what the placement rules found (a
 * framework with correct DTensor gradient placements, torchtitan after
 * #2416), `none` declares Replicate (before #2416), `tp-all-reduce`
 * declares Partial.  Routers with the same true placement share one step.
 */
static void
emit_router(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule)
{
	bool	*handled = xcalloc(m->nparams, sizeof *handled);
	bool	*sel = xcalloc(m->nparams, sizeof *sel);
	int	 i, j;

	for (i = 0; i < m->nparams; i++) {
		struct placement truth = grad[i], declared;

		if (m->params[i].role != ROLE_ROUTER || handled[i])
			continue;
		for (j = 0; j < m->nparams; j++) {
			sel[j] = m->params[j].role == ROLE_ROUTER &&
			    pl_equal(grad[j], truth);
			handled[j] = handled[j] || sel[j];
		}
		switch (cfg_router_sync(m->config)) {
		case ROUTER_AUTO:
			declared = truth;
			break;
		case ROUTER_TP_ALL_REDUCE:
			declared = pl_uniform(PLACE_PARTIAL);
			break;
		case ROUTER_NONE:
		default:
			declared = pl_uniform(PLACE_REPLICATE);
			break;
		}
		declared = pl_normalize(&m->mesh, declared);
		emit_tp_reduction(plan, m, rule, sel, truth, declared);
	}
	free(sel);
	free(handled);
}

/*
 * Whether the distributed optimizer shards this buffer.  Megatron 0.4 and
 * 0.5 kept expert gradients out of the buffers, all-reduced them and gave
 * experts a non-distributed optimizer (layout.expert_buffer: all-reduce).
 */
static bool
buffer_is_sharded(const struct model *m, enum buffer_kind k)
{
	if (m->config->layout.dp_engine != DP_ENGINE_MEGATRON)
		return true;
	return m->config->training.distributed_optimizer &&
	    !(k == BUFFER_EXPERT &&
	    m->config->layout.expert_buffer == EXPERT_BUFFER_ALL_REDUCE);
}

/*
 * The group whose members own buffer k's shards: dp or edp, or with the
 * FSDP engines their shard groups (layout_buffer_shards is its size).
 */
static enum group_kind
shard_group(const struct model *m, enum buffer_kind k)
{
	if (m->config->layout.dp_engine != DP_ENGINE_MEGATRON)
		return k == BUFFER_EXPERT ? GROUP_EFSDP : GROUP_DP_SHARD;
	/* DDP's groups without gtp_remat and egtp_remat (emit_dp). */
	if (k == BUFFER_EXPERT)
		return m->mesh.egtp > 1 ? GROUP_EGTP_REPLICATE : GROUP_EDP;
	return m->mesh.gtp > 1 ? GROUP_GTP_REPLICATE : GROUP_DP;
}

/* One step of the FSDP reduction of buffer k, with its setting and fix. */
static struct sync_step *
fsdp_step(struct sync_plan *plan, const struct model *m,
    const struct sync_rule *rule, enum sync_op op, enum group_kind group,
    enum buffer_kind k, enum cfg_key key, enum sync_fix fix)
{
	struct sync_step *s = new_step(plan, m, rule, op, group);

	s->target = TARGET_BUFFER;
	s->buffer = k;
	s->key = key;
	s->fix = fix;
	return s;
}

/*
 * The FSDP engines (layout.dp_engine fsdp2, fsdp1): a reduce-scatter of
 * every parameter over its shard group, then with HSDP an all-reduce of
 * the shards over the replicate group.  FSDP2's divide factor
 * (_get_gradient_divide_factors in _fsdp_collectives.py, pytorch
 * 8fc2039dec and, after PR #167178, 010ae4a895): without a custom factor,
 * or one equal to the product of both group sizes, AVG in both
 * collectives; a custom factor f is PREMUL_SUM(1/f) in the reduce-scatter
 * and SUM in the all-reduce.  torchtitan sets f to the dense data-parallel
 * size on the routed experts since #1551 (before, they averaged over
 * efsdp * dp_replicate alone: EXPERT_DIVISOR_EDP), and to 1 on
 * every module with its global-token loss (#2206: KEY_DP_DIVISOR none).
 *
 * Before pytorch PR #155915 the custom factor was the reduce-scatter's
 * alone (set_reduce_scatter_divide_factor made it the PREMUL_SUM of the
 * reduce-scatter, and foreach_reduce at v2.7.1 still all-reduced the
 * shards with AVG when no pre-divide factor was needed, fp32 or bf16):
 * on an HSDP mesh the replicas' average divided once more by
 * dp_replicate, so the same factor gave other gradients than on the 1-D
 * mesh of the same ranks (pytorch #155903; KEY_FSDP_DIVIDE_FACTOR).
 *
 * A reduce-scatter group of one member runs no collective, so whatever it
 * carries depends on the version (KEY_FSDP_ONE_MEMBER): before PR
 * #167178 FSDP2 copied the input and so dropped a custom factor
 * (torchtitan with ep = world: expert gradients times the world size);
 * FSDP1 divides by the whole data-parallel size
 * (_init_process_group_state in _init_utils.py), clamps HYBRID_SHARD with
 * one shard member to NO_SHARD, and all-reduces over that one-member
 * group, so the replicas never meet (verl #7493).
 */
static void
emit_fsdp_buffer(struct sync_plan *plan, const struct model *m,
    const struct sync_rule *rule, enum buffer_kind k)
{
	const struct config *cfg = m->config;
	enum group_kind	 shard = k == BUFFER_EXPERT ? GROUP_EFSDP :
			    GROUP_DP_SHARD;
	enum group_kind	 replicate = k == BUFFER_EXPERT ?
			    GROUP_EDP_REPLICATE : GROUP_DP_REPLICATE;
	int		 ns = mesh_group_size(&m->mesh, shard);
	int		 nr = mesh_group_size(&m->mesh, replicate);
	int		 f = lossnorm_size(&m->mesh, cfg->sync.dp_divisor);
	const char	*f_text = data_size_text(cfg->sync.dp_divisor);
	enum fsdp_one_member one = cfg->sync.fsdp_one_member;
	enum cfg_key	 key = KEY_DP_ENGINE;
	enum sync_fix	 fix = rule->fix;
	bool		 avg, rs_factor;
	struct sync_step *s;

	/*
	 * torchtitan's apply_ddp (until e1847f439): with nothing to shard
	 * over, DDP all-reduces every gradient over the replicas and
	 * divides by their number, whatever the loss normalization did
	 * (torchtitan #2318).
	 */
	if (cfg_ddp_path(cfg)) {
		s = fsdp_step(plan, m, rule, SYNC_ALL_REDUCE, replicate, k,
		    KEY_REPLICATE_ONLY, SYNC_FIX_REPLICATE_ONLY);
		s->average = true;
		s->cite = SYNC_CITE_DDP_AVERAGE;
		return;
	}
	if (k == BUFFER_EXPERT &&
	    cfg->sync.expert_grad_divisor == EXPERT_DIVISOR_EDP) {
		f = ns * nr;
		f_text = "edp";
		key = KEY_EXPERT_GRAD_DIVISOR;
	} else if (cfg->sync.dp_divisor != SIZE_DP_CP) {
		key = KEY_DP_DIVISOR;
		fix = SYNC_FIX_FSDP_DIVISOR;
	}
	/* FSDP1 always pre- and post-divides and sums. */
	avg = cfg->layout.dp_engine == DP_ENGINE_FSDP2 && f == ns * nr;
	if (ns == 1 && nr > 1 && one == FSDP_ONE_MEMBER_DROP_REPLICATE) {
		/* NO_SHARD's all-reduce over the one-member shard group. */
		if (f != 1)
			set_scale(fsdp_step(plan, m, rule, SYNC_SCALE, shard,
			    k, key, fix), 1, "1", f, f_text);
		s = fsdp_step(plan, m, rule, SYNC_ALL_REDUCE, shard, k,
		    KEY_FSDP_ONE_MEMBER, SYNC_FIX_FSDP_ONE_MEMBER_REPLICATE);
		s->cite = SYNC_CITE_ONE_MEMBER_REPLICATE;
		return;
	}
	if (ns == 1 && !avg && f != 1 &&
	    one == FSDP_ONE_MEMBER_DROP_FACTOR) {
		/* The copy on the one-member path: the factor is lost. */
		key = KEY_FSDP_ONE_MEMBER;
		fix = SYNC_FIX_FSDP_ONE_MEMBER_FACTOR;
	} else if (!avg && f != 1)
		set_scale(fsdp_step(plan, m, rule, SYNC_SCALE, shard, k, key,
		    fix), 1, "1", f, f_text);
	s = fsdp_step(plan, m, rule, SYNC_REDUCE_SCATTER, shard, k, key, fix);
	s->average = avg;
	if (key == KEY_FSDP_ONE_MEMBER)
		s->cite = SYNC_CITE_ONE_MEMBER_FACTOR;
	if (nr == 1)
		return;
	/* A custom factor that the replicas' all-reduce averages after. */
	rs_factor = cfg->layout.dp_engine == DP_ENGINE_FSDP2 && !avg &&
	    cfg->sync.fsdp_divide_factor == FSDP_DIVIDE_FACTOR_REDUCE_SCATTER;
	if (rs_factor) {
		s = fsdp_step(plan, m, rule, SYNC_ALL_REDUCE, replicate, k,
		    KEY_FSDP_DIVIDE_FACTOR, SYNC_FIX_FSDP_DIVIDE_FACTOR);
		s->average = true;
		s->cite = SYNC_CITE_RS_DIVIDE_FACTOR;
		return;
	}
	s = fsdp_step(plan, m, rule, SYNC_ALL_REDUCE, replicate, k, key, fix);
	s->average = avg;
	s->cite = plan->steps[plan->nsteps - 2].cite;
}

static void
emit_fsdp(struct sync_plan *plan, const struct model *m,
    const struct sync_rule *rule)
{
	int	 k, i;

	for (k = 0; k < BUFFER__COUNT; k++)
		for (i = 0; i < m->nparams; i++)
			if (layout_buffer_of(m, i) == (enum buffer_kind)k) {
				emit_fsdp_buffer(plan, m, rule, k);
				break;
			}
}

/*
 * The expert buffer's prescale divides by gtp where egtp differs
 * (Megatron-LM PR #7165): the step that makes it, and the egtp steps
 * that complete the experts' mean after it, carry the setting that
 * decides it, so that a finding on either names it.  Not where
 * expert_grad_divisor: edp replaced the divisor.
 */
static bool
expert_gtp_divisor_off(const struct model *m)
{
	const struct config *cfg = m->config;

	return cfg->sync.expert_gtp_divisor != EXPERT_GTP_DIVISOR_EGTP &&
	    m->mesh.gtp != m->mesh.egtp &&
	    cfg->sync.expert_grad_divisor != EXPERT_DIVISOR_EDP;
}

/*
 * Data parallel (SPEC 6.3): scale by 1/dp, then all-reduce (or, with the
 * distributed optimizer, reduce-scatter) every gradient buffer over its
 * group.  Expert buffers reduce over edp but still scale by 1/dp, since the
 * loss averages over the dp micro-batches; expert_grad_divisor: edp is the
 * bug of torchtitan #1551 / pytorch #160285.  With average_in_collective the
 * division happens inside the collective (AVG over the group), expert
 * buffers pre-scaled so that the net factor is unchanged.
 */
static void
emit_dp(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule)
{
	const struct config *cfg = m->config;
	int	 k, i, n, divisor;
	bool	 any;
	const char *divisor_text;
	struct sync_step *s;

	(void)grad;
	if (cfg->layout.dp_engine != DP_ENGINE_MEGATRON) {
		emit_fsdp(plan, m, rule);
		return;
	}
	for (k = 0; k < BUFFER__COUNT; k++) {
		enum group_kind group = k == BUFFER_EXPERT ? GROUP_EDP : GROUP_DP;
		/*
		 * VeOmni #1115: a DDP over the dp group alone leaves the cp
		 * ranks' partial gradients apart (nothing at all with dp 1).
		 */
		bool	 pure = k != BUFFER_EXPERT &&
		    cfg->sync.dp_group == DP_GROUP_DP;

		if (pure)
			group = GROUP_PURE_DP;
		/*
		 * With generalized tensor parallelism DDP reduces over dp_cp
		 * without gtp_remat (process_groups_config.py
		 * setup_process_groups_for_ddp, core_v0.19.0), the experts
		 * over the expert data-parallel group without egtp_remat;
		 * the gtp axes follow in emit_gtp.
		 */
		else if (k != BUFFER_EXPERT && m->mesh.gtp > 1)
			group = GROUP_GTP_REPLICATE;
		if (k == BUFFER_EXPERT && m->mesh.egtp > 1)
			group = GROUP_EGTP_REPLICATE;
		any = false;
		for (i = 0; i < m->nparams; i++)
			if (layout_buffer_of(m, i) == (enum buffer_kind)k)
				any = true;
		if (!any)
			continue;
		n = mesh_group_size(&m->mesh, group);
		divisor = lossnorm_size(&m->mesh, cfg->sync.dp_divisor);
		divisor_text = data_size_text(cfg->sync.dp_divisor);
		/*
		 * DistributedDataParallel.__init__ (core_v0.19.0, main
		 * d98e8a64dd) prescales the dense and the expert buffers
		 * alike by 1/dp_cp_group.size(), a group without gtp_remat:
		 * gtp/(dp*cp) of the whole data-parallel axis.  The dense
		 * gradients get the 1/gtp back over gtp (emit_gtp); the
		 * experts over egtp only, gtp/egtp too large when the two
		 * differ (Megatron-LM PR #7165).
		 */
		bool	 by_egtp = k == BUFFER_EXPERT &&
		    cfg->sync.expert_gtp_divisor == EXPERT_GTP_DIVISOR_EGTP;
		int	 gtp = by_egtp ? m->mesh.egtp : m->mesh.gtp;

		if (gtp > 1 && (cfg->sync.dp_divisor == SIZE_DP_CP ||
		    cfg->sync.dp_divisor == SIZE_DP)) {
			divisor /= gtp;
			divisor_text = cfg->sync.dp_divisor == SIZE_DP_CP ?
			    (by_egtp ? "(dp*cp/egtp)" : "(dp*cp/gtp)") :
			    (by_egtp ? "(dp/egtp)" : "(dp/gtp)");
		}
		if (k == BUFFER_EXPERT &&
		    cfg->sync.expert_grad_divisor == EXPERT_DIVISOR_EDP) {
			divisor = m->mesh.edp;
			divisor_text = "edp";
		}
		/* Net factor 1/divisor: pre-scale by n/divisor under AVG. */
		int pre_num = cfg->training.average_in_collective ? n : 1;
		int pre_den = divisor;
		const char *pre_num_text =
		    cfg->training.average_in_collective ?
		    group_size_text(group) : "1";
		const char *pre_den_text = divisor_text;
		/*
		 * Megatron 0.8.0 to 0.11: a per-token loss sets both
		 * gradient_scaling_factors to 1.0, and the buffers still
		 * reduce with AVG: a net 1/n where the loss wants a sum
		 * (core_v0.8.0 DDP __init__, ParamAndGradBuffer's reduce_op).
		 */
		bool per_token_avg = cfg->training.average_in_collective &&
		    cfg->sync.dp_divisor == SIZE_ONE &&
		    cfg->sync.per_token_avg == PER_TOKEN_AVG_AVG;

		if (per_token_avg) {
			pre_num = pre_den = 1;
			pre_num_text = pre_den_text = "1";
		}
		/*
		 * Megatron 0.8 to 0.11 pre-scaled expert buffers by 1/ep
		 * before the AVG over edp: 1/dp only when etp == tp.
		 */
		if (k == BUFFER_EXPERT && cfg->training.average_in_collective &&
		    cfg->sync.expert_avg_scale == EXPERT_AVG_ONE_OVER_EP &&
		    !per_token_avg) {
			pre_num = 1;
			pre_den = m->mesh.ep;
			pre_num_text = "1";
			pre_den_text = "ep";
		}
		if (!q_equal(q_make(pre_num, pre_den), q_make(1, 1))) {
			s = new_step(plan, m, rule, SYNC_SCALE, group);
			s->target = TARGET_BUFFER;
			s->buffer = k;
			set_scale(s, pre_num, pre_num_text, pre_den,
			    pre_den_text);
			/*
			 * The gtp divisor decides the experts' prescale
			 * unless expert_grad_divisor: edp replaced it (a
			 * divisor equal to edp by chance, dp 4 ep 2 gtp 2,
			 * is still gtp's).
			 */
			if (k == BUFFER_EXPERT && expert_gtp_divisor_off(m)) {
				s->key = KEY_EXPERT_GTP_DIVISOR;
				s->fix = SYNC_FIX_EXPERT_GTP_DIVISOR;
			}
			else if (divisor != lossnorm_size(&m->mesh,
			    cfg->sync.dp_divisor) && gtp == 1)
				s->key = KEY_EXPERT_GRAD_DIVISOR;
			else if (cfg->sync.dp_divisor != SIZE_DP_CP) {
				s->key = KEY_DP_DIVISOR;
				s->fix = SYNC_FIX_DP_DIVISOR;
			}
			else if (k == BUFFER_EXPERT &&
			    cfg->training.average_in_collective) {
				s->key = KEY_EXPERT_AVG_SCALE;
				s->fix = SYNC_FIX_EXPERT_AVG_SCALE;
			}
			else if (cfg->training.average_in_collective)
				s->key = KEY_AVERAGE_IN_COLLECTIVE;
		}
		s = new_step(plan, m, rule, buffer_is_sharded(m, k) ?
		    SYNC_REDUCE_SCATTER : SYNC_ALL_REDUCE, group);
		if (pure) {
			s->key = KEY_DP_GROUP;
			s->fix = SYNC_FIX_DP_GROUP;
		}
		if (k == BUFFER_EXPERT &&
		    cfg->layout.expert_buffer == EXPERT_BUFFER_ALL_REDUCE)
			s->key = KEY_EXPERT_BUFFER;
		if (k == BUFFER_EXPERT && cfg->training.average_in_collective)
			s->fix = SYNC_FIX_EXPERT_AVG_SCALE;
		s->target = TARGET_BUFFER;
		s->buffer = k;
		s->average = cfg->training.average_in_collective;
		/*
		 * The user's flag is what a 0.8 to 0.11 job can change; the
		 * profile's KEY_PER_TOKEN_AVG is the release's code.
		 */
		if (per_token_avg) {
			s->key = KEY_AVERAGE_IN_COLLECTIVE;
			s->fix = SYNC_FIX_PER_TOKEN_AVG;
		}
	}
}

/*
 * Does generalized tensor parallelism shard parameter p?  Over the group
 * its module's kind names, egtp_remat for an expert's, gtp_remat for
 * another's, and only when that group has peers
 * (transformer_engine.py _init_gtp_remat_context, core_v0.19.0): an
 * expert with egtp 1 is a replicated weight.
 */
static bool
gtp_sharded(const struct model *m, const struct param *p)
{
	if (m->config->model.gtp_sharded == GTP_SHARDED_NONE ||
	    mesh_group_size(&m->mesh, p->expert ? GROUP_EGTP : GROUP_GTP) == 1)
		return false;
	switch (p->role) {
	case ROLE_COLUMN:
	case ROLE_ROW:
	case ROLE_EXPERT_FC1:
	case ROLE_EXPERT_FC2:
		return true;
	default:
		break;
	}
	return false;
}

/*
 * Generalized tensor parallelism (Megatron c5ff22b7f1, #4967, as in
 * core_v0.19.0 and main d98e8a64dd): each gtp_remat peer holds distinct
 * tokens, and DDP has reduced over the others only (emit_dp).  A weight
 * gtp shards (model.gtp_sharded) has its wgrad prescaled by 1/gtp and
 * reduce-scattered with a sum over gtp
 * (generalized_tensor_parallelism.py
 * GTPShardedParam._prescale_wgrads_for_mean_rs): here an all-reduce over
 * gtp after the same prescale, of which each shard's owner keeps its
 * part, the values it uses.  A replicated one is all-reduced over gtp in
 * finalize_model_grads.py _allreduce_replicated_grads_over_gtp_remat_group,
 * AVG; under a per-token loss (sync.dp_divisor none, DDP's
 * calculate_per_token_loss) neither divides, the prescale is skipped and
 * the all-reduce is a SUM, as the divisor counts the gtp peers' tokens.
 * Experts do the same over egtp.  A sharded weight's side is its
 * module's (the group it was sharded over); a replicated one's is its
 * buffer's, as finalize_model_grads picks it by param.allreduce, which
 * also puts a parameter in DDP's expert buffer: an expert with ep 1 and
 * etp = tp has allreduce True (transformer_engine.py TELinear,
 * use_expert_pgs, core_v0.19.0), so it is dense to both and averaged
 * over gtp_remat, not over egtp_remat.
 */
/* Select the parameters of one side (dense or expert) and one kind. */
static bool
select_gtp_params(struct sync_step *s, const struct model *m, bool expert,
    bool sharded)
{
	const struct param *p;
	bool	 any = false, side;
	int	 i;

	for (i = 0; i < m->nparams; i++) {
		p = &m->params[i];
		side = sharded ? p->expert :
		    layout_buffer_of(m, i) == BUFFER_EXPERT;
		s->params[i] = side == expert && gtp_sharded(m, p) == sharded;
		any |= s->params[i];
	}
	return any;
}

/*
 * sync.expert_tp_divisor: tp: the experts' gradients scaled by 1/tp after
 * their data-parallel reduction, as NeMo Automodel's
 * scale_grads_and_clip_grad_norm does (expert_tp_replication_factor,
 * PR #2995 at 57921452b3) for the tp copies of every token that
 * model.moe.ep_on: tp-replicated dispatches.  Linear, so where it runs
 * after the backward changes nothing.  The expert parameters, whichever
 * buffer holds them: those in the dense one (ep 1 and etp = tp under
 * FSDP, or layout.expert_buffer: if-ep) were left undivided without a
 * word.
 */
static void
emit_expert_tp_divisor(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule)
{
	struct sync_step *s;
	bool	 any = false;
	int	 i;

	(void)grad;
	if (m->config->sync.expert_tp_divisor != EXPERT_TP_DIVISOR_TP ||
	    m->mesh.tp == 1)
		return;
	for (i = 0; i < m->nparams; i++)
		any |= m->params[i].expert;
	if (!any)
		return;
	s = new_step(plan, m, rule, SYNC_SCALE, GROUP_TP);
	for (i = 0; i < m->nparams; i++)
		s->params[i] = m->params[i].expert;
	set_scale(s, 1, "1", m->mesh.tp, "tp");
}

static void
blame_expert_gtp_divisor(struct sync_step *s, const struct model *m)
{
	if (expert_gtp_divisor_off(m)) {
		s->key = KEY_EXPERT_GTP_DIVISOR;
		s->fix = SYNC_FIX_EXPERT_GTP_DIVISOR;
	}
}

static void
emit_gtp(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule)
{
	bool	 per_token = m->config->sync.dp_divisor == SIZE_ONE;
	struct sync_step *s;
	int	 side, kind, n;

	(void)grad;
	for (side = 0; side < 2; side++) {
		bool	 expert = side == 1;
		enum group_kind g = expert ? GROUP_EGTP : GROUP_GTP;

		if ((n = mesh_group_size(&m->mesh, g)) == 1)
			continue;
		/* The sharded weights first, as their backward runs first. */
		for (kind = 0; kind < 2; kind++) {
			bool	 sharded = kind == 0;

			s = new_step(plan, m, rule, SYNC_ALL_REDUCE, g);
			if (!select_gtp_params(s, m, expert, sharded)) {
				plan->nsteps--;
				free(s->params);
				continue;
			}
			if (expert)
				blame_expert_gtp_divisor(s, m);
			if (!sharded) {
				s->average = !per_token;
				continue;
			}
			if (per_token)
				continue;
			/* The prescale before the sum: one step before it. */
			s->op = SYNC_SCALE;
			set_scale(s, 1, "1", n, expert ? "egtp" : "gtp");
			s = new_step(plan, m, rule, SYNC_ALL_REDUCE, g);
			select_gtp_params(s, m, expert, true);
			if (expert)
				blame_expert_gtp_divisor(s, m);
		}
	}
}

/*
 * What a rule does with one parameter's gradient over tp: nothing (not
 * its parameter), sum it (declared Partial), or leave it (declared
 * Replicate, so that a Partial truth is a missing reduction).
 */
enum tp_decision { TP_NOT_MINE, TP_SUMMED, TP_LEFT };

/*
 * Emit a rule's decisions: the summed parameters in one reduction, the
 * left ones as one declared-Replicate note, each with the true placement.
 */
static void
emit_tp_decisions(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule,
    const enum tp_decision *d)
{
	static const enum tp_decision groups[] = { TP_SUMMED, TP_LEFT };
	struct placement truth;
	bool	*sel = xcalloc(m->nparams, sizeof *sel);
	bool	 any;
	size_t	 g;
	int	 i;

	for (g = 0; g < sizeof groups / sizeof groups[0]; g++) {
		any = false;
		truth = pl_uniform(PLACE_REPLICATE);
		for (i = 0; i < m->nparams; i++) {
			sel[i] = d[i] == groups[g];
			if (sel[i]) {
				truth = grad[i];
				any = true;
			}
		}
		if (any)
			emit_tp_reduction(plan, m, rule, sel, truth,
			    pl_normalize(&m->mesh, pl_uniform(groups[g] ==
			    TP_SUMMED ? PLACE_PARTIAL : PLACE_REPLICATE)));
	}
	free(sel);
}

/*
 * Sequence-parallel parameters (SPEC 6.4): Megatron's
 * _allreduce_layernorm_grads sums the gradients of the parameters marked
 * sequence_parallel over tp when sequence parallelism is on: the norms,
 * and the shared-expert gate (1fa9464e7c).  `none` marks none of them
 * (NeMo PR #7184: NeMo read the attribute `sequence_parallel`, apex set
 * `sequence_parallel_enabled`); `skip-standalone` misses the norms outside
 * the layers, final_norm, as Megatron-LM #1446 did: TransformerEngine 1.13
 * to 2.1 stopped setting the attribute on its standalone LayerNorm and
 * RMSNorm (TE 77c37d49f, fixed by TE 4b523d298).  Each wrong value has its
 * own report, so the step cites the one that applies.
 */
static const enum sync_cite sp_param_cites[] = {
	[SP_PARAM_TP_ALL_REDUCE] = SYNC_CITE_NONE,
	[SP_PARAM_NONE] = SYNC_CITE_SP_PARAM_NONE,
	[SP_PARAM_SKIP_STANDALONE] = SYNC_CITE_SP_PARAM_STANDALONE,
};

static void
emit_sp_params(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule)
{
	enum sp_param_sync how = m->config->sync.sp_param_grad;
	struct sync_rule cited = *rule;
	enum tp_decision *d;
	int	 i;

	if (!m->config->training.sequence_parallel)
		return;
	cited.cite = sp_param_cites[how];
	d = xcalloc(m->nparams, sizeof *d);
	for (i = 0; i < m->nparams; i++) {
		if (!m->params[i].sequence_parallel)
			continue;
		d[i] = how == SP_PARAM_TP_ALL_REDUCE ||
		    (how == SP_PARAM_SKIP_STANDALONE &&
		    !m->params[i].standalone) ? TP_SUMMED : TP_LEFT;
	}
	emit_tp_decisions(plan, m, grad, &cited, d);
	free(d);
}

/*
 * qk-norm weights: one weight shared by every head, the heads split over
 * tp, so each tp rank holds part of the gradient whether or not sequence
 * parallelism is on.  Megatron sums them over tp in
 * _allreduce_non_tensor_model_parallel_grads; QK_NORM_NONE
 * declares them Replicate, and with-sp sums them only with sequence
 * parallelism, as a framework that treats them as sequence-parallel norms
 * does.
 */
static void
emit_qk_norms(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule)
{
	enum qk_norm_sync how = m->config->sync.qk_norm_grad;
	bool	 summed = how == QK_NORM_TP_ALL_REDUCE ||
		    (how == QK_NORM_WITH_SP &&
		    m->config->training.sequence_parallel);
	enum tp_decision *d = xcalloc(m->nparams, sizeof *d);
	int	 i;

	for (i = 0; i < m->nparams; i++)
		if (m->params[i].role == ROLE_HEAD_NORM)
			d[i] = summed ? TP_SUMMED : TP_LEFT;
	emit_tp_decisions(plan, m, grad, rule, d);
	free(d);
}

/*
 * Key/value projections replicated over tp (model.kv_heads below tp):
 * every tp rank holds the whole weight and adds to the gradient of the
 * rows its own query heads read, so the weight gradient is a sum over
 * tp, as the qk-norm weight's.  A framework that supports it sums it;
 * KV_NONE declares it Replicate.  A projection split over tp with the
 * heads (ROLE_COLUMN) is complete on its rank and needs nothing.
 */
static void
emit_kv(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule)
{
	bool	 summed = m->config->sync.kv_grad == KV_TP_ALL_REDUCE;
	enum tp_decision *d = xcalloc(m->nparams, sizeof *d);
	int	 i;

	for (i = 0; i < m->nparams; i++)
		if (m->params[i].role == ROLE_KV)
			d[i] = summed ? TP_SUMMED : TP_LEFT;
	emit_tp_decisions(plan, m, grad, rule, d);
	free(d);
}

/*
 * Gated DeltaNet's out_norm (model.out_norm): one [head_dim] weight that
 * every value head's output shares, the heads split over tp, so that
 * each tp rank holds part of its gradient with or without sequence
 * parallelism, as the qk-norm weight's.  Megatron builds it as a TENorm,
 * marked sequence_parallel only when sequence parallelism is on, and
 * sums no other way by name as it does q_layernorm and k_layernorm
 * (finalize_model_grads.py _allreduce_non_tensor_model_parallel_grads,
 * core_v0.16.0 to d98e8a64dd): OUT_NORM (QK_NORM_WITH_SP) leaves each
 * rank its own heads' share without it (Megatron-LM #7452, finding 11).
 */
static void
emit_out_norms(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule)
{
	enum qk_norm_sync how = m->config->sync.out_norm_grad;
	bool	 sp = m->config->training.sequence_parallel;
	struct sync_rule cited = *rule;
	enum tp_decision *d = xcalloc(m->nparams, sizeof *d);
	int	 i;

	if (how == QK_NORM_WITH_SP)
		cited.cite = SYNC_CITE_OUT_NORM;
	for (i = 0; i < m->nparams; i++)
		if (m->params[i].role == ROLE_OUT_NORM)
			d[i] = how == QK_NORM_TP_ALL_REDUCE ||
			    (how == QK_NORM_WITH_SP && sp) ? TP_SUMMED :
			    TP_LEFT;
	emit_tp_decisions(plan, m, grad, &cited, d);
	free(d);
}

/*
 * Tied embedding (SPEC 6.5): sum the two copies' gradients over the
 * embedding group.  Where it sits relative to the data-parallel step is the
 * knob: after it, with the distributed optimizer, the two stages have
 * reduce-scattered the weight at different element ranges (Megatron-LM
 * #844) unless it sits in a bucket of its own (daf0006, see layout.c).
 */
static void
emit_embedding(struct sync_plan *plan, const struct model *m,
    const struct sync_rule *rule)
{
	const struct config *c = m->config;
	struct sync_step *s = NULL;
	int	 l, k;

	for (l = 0; l < m->nlogical; l++) {
		if (m->logical[l].ninstances != 2)
			continue;
		if (s == NULL)
			s = new_step(plan, m, rule, SYNC_ALL_REDUCE,
			    GROUP_EMBEDDING);
		/*
		 * With buckets of its own, shards can still differ where the
		 * first stage's bucket starts after the weight (Megatron 0.7
		 * to 0.12, see layout.c): name that rule, not #844's order.
		 */
		if (c->sync.embedding_grad != EMBEDDING_BEFORE_DP &&
		    c->sync.embedding_grad != EMBEDDING_FULL_AFTER_DP &&
		    c->layout.dp_engine == DP_ENGINE_MEGATRON &&
		    c->training.distributed_optimizer &&
		    c->layout.tied_bucket_start != TIED_START_PADDED &&
		    (c->layout.tied_embedding_bucket != TIED_BUCKET_SHARED ||
		    c->sync.embedding_grad == EMBEDDING_SEPARATE_BUCKET)) {
			s->key = KEY_TIED_BUCKET_START;
			s->cite = SYNC_CITE_TIED_BUCKET_START;
			s->fix = SYNC_FIX_TIED_BUCKET_START;
		}
		/*
		 * Megatron-FSDP v2's flat units cut the weight at different
		 * rows on the two stages whatever its bucket: only gathering
		 * the full gradient first helps (Megatron PR #6500).
		 */
		if (c->sync.embedding_grad != EMBEDDING_BEFORE_DP &&
		    c->sync.embedding_grad != EMBEDDING_FULL_AFTER_DP &&
		    c->layout.fsdp_flatten == FSDP_FLATTEN_UNIT) {
			s->cite = SYNC_CITE_TIED_FLAT_UNITS;
			s->fix = SYNC_FIX_TIED_FLAT_UNITS;
		}
		for (k = 0; k < 2; k++)
			s->params[m->logical[l].instance[k]] = true;
	}
}

static void
emit_embedding_before_dp(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule)
{
	(void)grad;
	if (m->config->sync.embedding_grad == EMBEDDING_BEFORE_DP)
		emit_embedding(plan, m, rule);
}

/*
 * Megatron PR #6500's fix for Megatron-FSDP v2, whose stages flatten the
 * tied weight at different offsets (layout.fsdp_flatten: unit): gather
 * each stage's reduced shards into the full logical gradient
 * (uneven_dtensor_to_full_tensor) before the all-reduce over the embedding
 * group, after which each rank keeps the slice it owns.
 */
static void
emit_embedding_gather(struct sync_plan *plan, const struct model *m,
    const struct sync_rule *rule)
{
	struct sync_step *s = NULL;
	int	 l, k;

	if (!buffer_is_sharded(m, BUFFER_DENSE))
		return;
	for (l = 0; l < m->nlogical; l++) {
		if (m->logical[l].ninstances != 2)
			continue;
		if (s == NULL)
			s = new_step(plan, m, rule, SYNC_ALL_GATHER,
			    m->config->layout.dp_engine == DP_ENGINE_MEGATRON ?
			    GROUP_DP : GROUP_DP_SHARD);
		for (k = 0; k < 2; k++)
			s->params[m->logical[l].instance[k]] = true;
	}
}

static void
emit_embedding_after_dp(struct sync_plan *plan, const struct model *m,
    const struct placement *grad, const struct sync_rule *rule)
{
	(void)grad;
	if (m->config->sync.embedding_grad == EMBEDDING_FULL_AFTER_DP)
		emit_embedding_gather(plan, m, rule);
	if (m->config->sync.embedding_grad != EMBEDDING_BEFORE_DP)
		emit_embedding(plan, m, rule);
}

/* The rules in the order they run; SPEC section 6. */
static const struct sync_rule rules[] = {
	{ "router weight gradient reduction over tp", KEY_ROUTER_GRAD,
	  SYNC_CITE_ROUTER_GRAD, SYNC_FIX_ROUTER_GRAD,
	  emit_router },
	{ "tied embedding all-reduce over first and last stage",
	  KEY_EMBEDDING_GRAD, SYNC_CITE_TIED_ORDER,
	  SYNC_FIX_EMBEDDING_BEFORE_DP,
	  emit_embedding_before_dp },
	{ "data-parallel gradient reduction", KEY_DISTRIBUTED_OPTIMIZER,
	  SYNC_CITE_NONE, SYNC_FIX_EXPERT_GRAD_DIVISOR,
	  emit_dp },
	{ "expert gradient scale for the tp copies of their tokens",
	  KEY_EXPERT_TP_DIVISOR, SYNC_CITE_NONE, SYNC_FIX_EXPERT_TP_DIVISOR,
	  emit_expert_tp_divisor },
	{ "generalized tensor parallel gradient reduction over gtp", KEY_GTP,
	  SYNC_CITE_NONE, SYNC_FIX_NONE,
	  emit_gtp },
	{ "sequence-parallel parameter gradient all-reduce over tp",
	  KEY_SP_PARAM_GRAD, SYNC_CITE_NONE, SYNC_FIX_SP_PARAM_GRAD,
	  emit_sp_params },
	{ "qk-norm weight gradient all-reduce over tp", KEY_QK_NORM_GRAD,
	  SYNC_CITE_NONE, SYNC_FIX_QK_NORM_GRAD,
	  emit_qk_norms },
	{ "replicated key/value weight gradient all-reduce over tp",
	  KEY_KV_GRAD, SYNC_CITE_NONE, SYNC_FIX_KV_GRAD,
	  emit_kv },
	{ "out-norm weight gradient all-reduce over tp", KEY_OUT_NORM_GRAD,
	  SYNC_CITE_NONE, SYNC_FIX_OUT_NORM_GRAD,
	  emit_out_norms },
	{ "tied embedding all-reduce over first and last stage",
	  KEY_EMBEDDING_GRAD, SYNC_CITE_TIED_ORDER,
	  SYNC_FIX_EMBEDDING_AFTER_DP,
	  emit_embedding_after_dp },
};

/*
 * The plan: section (issue 25).  "preset" runs the rules above where it
 * stands; every other step is the user's, one sync step each, over the
 * parameters its globs and stages select, with its factor evaluated from
 * this config's sizes.  Its label says which step of the file it is, for
 * findings and explain; its setting is KEY_PLAN, which no fix search can
 * flip.
 */

/* Does step it select parameter instance p (its globs and stages)? */
static bool
plan_selects(const struct plan_item *it, const struct param *p)
{
	bool	 glob = it->nglobs == 0, stage = it->nstages == 0;
	int	 j;

	for (j = 0; j < it->nglobs && !glob; j++)
		glob = plan_glob_match(it->globs[j], p->name);
	for (j = 0; j < it->nstages && !stage; j++)
		stage = it->stages[j] == p->stage;
	return glob && stage;
}

/*
 * The micro-batches step it runs at, from its micro-batches: (the
 * constraints keep a list's indexes below K).  Unwritten, a step runs
 * after the last micro-batch, as every preset step does; a reset before
 * every micro-batch, as a zero_grad inside the loop does (before the
 * first it finds nothing to clear).
 */
static uint32_t
plan_schedule(const struct model *m, const struct plan_item *it)
{
	int		 K = m->loss.micro_batches, j;
	uint32_t	 all = K == 32 ? UINT32_MAX : ((uint32_t)1 << K) - 1;
	uint32_t	 w = 0;

	switch (it->when) {
	case PLAN_WHEN_DEFAULT:
		return it->op == PLAN_RESET ? all : last_micro_batch(m);
	case PLAN_WHEN_LAST:
		return last_micro_batch(m);
	case PLAN_WHEN_FIRST:
		return 1;
	case PLAN_WHEN_EVERY:
		return all;
	case PLAN_WHEN_NONE:
		return 0;
	case PLAN_WHEN_LIST:
		for (j = 0; j < it->nmicro_batches; j++)
			if (it->micro_batches[j] < K)
				w |= (uint32_t)1 << it->micro_batches[j];
		return w;
	}
	return 0;
}

/* The buffer a step names (cfg_plan_buffer_words). */
static enum buffer_kind
plan_buffer(const struct plan_item *it)
{
	const char	*w = cfg_plan_buffer_words[it->buffer];
	int		 k;

	for (k = 0; k < BUFFER__COUNT; k++)
		if (strcmp(syncplan_buffer_name((enum buffer_kind)k), w) == 0)
			return (enum buffer_kind)k;
	fatalx("plan buffer %s has no buffer kind", w);
}

/*
 * The steps that only the preset used to build: a step over a whole
 * buffer (buffer:), the bucketed reduce-scatter, the all-gather of its
 * shards and the mask of a Replicate part before a sum over tp (the
 * preset's emit_tp_reduction).  Each fills what the preset's step of
 * the same kind holds, so that the engines cannot tell them apart.
 */
static void
plan_layout_step(struct sync_step *s, const struct model *m,
    const struct plan_item *it)
{
	int	 p;

	switch (it->op) {
	case PLAN_REDUCE_SCATTER:
		s->op = SYNC_REDUCE_SCATTER;
		s->average = it->average;
		break;
	case PLAN_ALL_GATHER:
		s->op = SYNC_ALL_GATHER;
		break;
	case PLAN_TO_PARTIAL:
		s->op = SYNC_MASK_REPLICAS;
		s->replicate.slice = it->replicate & PLAN_REPLICATE_SLICES ?
		    PLACE_REPLICATE : PLACE_PARTIAL;
		s->replicate.etp = it->replicate & PLAN_REPLICATE_ETP ?
		    PLACE_REPLICATE : PLACE_PARTIAL;
		s->replicate = pl_normalize(&m->mesh, s->replicate);
		s->declared = s->replicate;
		break;
	default:
		break;
	}
	if (it->buffer_mark.line == 0)
		return;
	s->target = TARGET_BUFFER;
	s->buffer = plan_buffer(it);
	for (p = 0; p < m->nparams; p++)
		s->params[p] = false;
}

/*
 * Mixed-precision gradient buffers (NeMo PR #6340, #6958): each
 * parameter's gradient is in one buffer of one dtype at a time, held[p],
 * which a step of accumulate: changes.  A step with buffer: runs on that
 * buffer alone; a selected parameter whose gradient is in another has
 * only zeros there, so the step does not reach its gradient: it is
 * noted in missed (for findings) and left out of params.  NeMo before
 * #6958 all-reduced the tied embedding's main_grad, a zeroed fp32 buffer,
 * while its gradient sat in param.grad, bf16, and copied it over only
 * for the data-parallel all-reduce.
 */
static void
plan_item_buffers(struct sync_step *s, const struct model *m, int *held)
{
	int	 p;

	for (p = 0; p < m->nparams; p++) {
		if (!s->params[p])
			continue;
		if (s->op == SYNC_ACCUMULATE) {
			held[p] = s->dtype;
			continue;
		}
		if (s->dtype < 0 || held[p] == s->dtype)
			continue;
		if (s->missed == NULL) {
			s->missed = xcalloc(m->nparams, sizeof *s->missed);
			memset(s->missed, -1, m->nparams * sizeof *s->missed);
		}
		s->missed[p] = held[p];
		s->params[p] = false;
	}
}

static enum sync_op
plan_sync_op(enum plan_op op)
{
	switch (op) {
	case PLAN_SCALE:
		return SYNC_SCALE;
	case PLAN_ACCUMULATE:
		return SYNC_ACCUMULATE;
	case PLAN_RESET:
		return SYNC_RESET;
	case PLAN_REDUCE_SCATTER:
		return SYNC_REDUCE_SCATTER;
	case PLAN_ALL_GATHER:
		return SYNC_ALL_GATHER;
	case PLAN_TO_PARTIAL:
		return SYNC_MASK_REPLICAS;
	case PLAN_GATHER_LOSS:
		return SYNC_LOSS_TERM;
	case PLAN_ALL_REDUCE:
	case PLAN_PRESET:
	case PLAN_DECLARE:
		break;
	}
	return SYNC_ALL_REDUCE;
}

/*
 * A step on a loss term: its factor went into the term's loss factor
 * (lossnorm_build, lossterm.c), at the backward, so the step selects no
 * gradient and runs where a preset step does, which keeps the engines on
 * their single pass.
 */
static void
emit_loss_term(struct sync_step *s, const struct model *m,
    const struct plan_item *it)
{
	int	 p;

	s->op = SYNC_LOSS_TERM;
	s->term = it->term;
	s->scale = lossterm_item_factor(m->config, &m->mesh, it,
	    it->term >= 0 ? (enum plan_term)it->term : PLAN_TERM_MAIN);
	if (it->op == PLAN_GATHER_LOSS)
		s->group = lossterm_group(it);
	for (p = 0; p < m->nparams; p++)
		s->params[p] = false;
}

static void
emit_plan_item(struct sync_plan *plan, const struct model *m, int i,
    int *held)
{
	const struct plan_item *it = &m->config->plan[i];
	struct sync_step *s;
	char		 text[256], *label;
	int		 p;

	plan->steps = xreallocarray(plan->steps, plan->nsteps + 1,
	    sizeof *plan->steps);
	s = &plan->steps[plan->nsteps++];
	memset(s, 0, sizeof *s);
	s->op = plan_sync_op(it->op);
	s->group = it->op == PLAN_SCALE || it->op == PLAN_RESET ||
	    it->op == PLAN_ACCUMULATE ? GROUP_DP : lossterm_group(it);
	s->target = TARGET_PARAMS;
	s->params = xcalloc(m->nparams, sizeof *s->params);
	for (p = 0; p < m->nparams; p++)
		s->params[p] = plan_selects(it, &m->params[p]);
	s->scale = q_make(1, 1);
	/* The constraints evaluated it with these sizes already. */
	if (it->op == PLAN_SCALE && plan_factor(m->config, it, &s->scale) == -1)
		fatalx("plan[%d]: factor %s cannot be evaluated", i, it->expr);
	if (it->op == PLAN_SCALE && strlen(it->expr) < sizeof s->scale_text)
		memcpy(s->scale_text, it->expr, strlen(it->expr) + 1);
	s->average = it->op == PLAN_ALL_REDUCE && it->average;
	plan_layout_step(s, m, it);
	s->key = KEY_PLAN;
	s->cite = SYNC_CITE_NONE;
	s->fix = SYNC_FIX_PLAN;
	s->plan_item = i;
	s->dtype = it->dtype;
	plan_item_buffers(s, m, held);
	s->micro_batches = plan_schedule(m, it);
	s->term = -1;
	if (it->op == PLAN_GATHER_LOSS || it->term >= 0)
		emit_loss_term(s, m, it);
	cfg_plan_item_text(it, text, sizeof text);
	xasprintf(&label, "plan[%d] (%s:%d:%d): %s", i, m->config->file,
	    it->mark.line, it->mark.col, text);
	s->label = label;
}

/*
 * declare: -- the placement over tp the framework takes the selected
 * gradients to have, and what it does with it, as the preset's rules do
 * (emit_tp_reduction): declared Replicate, nothing runs and a record is
 * kept for findings to weigh against the truth; declared Partial (over
 * what replicate: leaves), the Replicate part is kept on one rank and
 * the whole summed over tp.  One group per true placement among them;
 * each step and record owns a copy of the label.
 */
static void
emit_plan_declare(struct sync_plan *plan, const struct model *m, int i,
    const struct placement *grad)
{
	const struct plan_item *it = &m->config->plan[i];
	struct sync_rule rule = { .key = KEY_PLAN, .cite = SYNC_CITE_NONE,
			    .fix = SYNC_FIX_PLAN };
	struct placement declared;
	bool		*sel, *done;
	char		*label;
	int		 p, q, steps = plan->nsteps, records = plan->nskipped;

	/*
	 * An activation's gradient is declared inside the backward, where
	 * the placement rules read the declaration (pl_activation_declare,
	 * placement.h): no step after it.
	 */
	if (it->activation >= 0)
		return;
	sel = xcalloc(m->nparams, sizeof *sel);
	done = xcalloc(m->nparams, sizeof *done);
	declared = pl_uniform(PLACE_REPLICATE);
	if (it->declare == PLAN_DECLARE_PARTIAL) {
		declared.slice = it->replicate & PLAN_REPLICATE_SLICES ?
		    PLACE_REPLICATE : PLACE_PARTIAL;
		declared.etp = it->replicate & PLAN_REPLICATE_ETP ?
		    PLACE_REPLICATE : PLACE_PARTIAL;
	}
	declared = pl_normalize(&m->mesh, declared);
	/*
	 * What it declares on this mesh: Partial over sub-dimensions of one
	 * rank each is Replicate.
	 */
	xasprintf(&label, "tp all-reduce of what plan[%d] (%s:%d:%d) "
	    "declares %s", i, m->config->file, it->mark.line, it->mark.col,
	    pl_any(declared, PLACE_PARTIAL) ? "Partial" : "Replicate");
	rule.label = label;
	for (p = 0; p < m->nparams; p++) {
		if (done[p] || !plan_selects(it, &m->params[p]))
			continue;
		for (q = 0; q < m->nparams; q++) {
			sel[q] = !done[q] && plan_selects(it, &m->params[q]) &&
			    pl_equal(grad[q], grad[p]);
			done[q] = done[q] || sel[q];
		}
		emit_tp_reduction(plan, m, &rule, sel, grad[p], declared);
	}
	for (; steps < plan->nsteps; steps++) {
		plan->steps[steps].plan_item = i;
		plan->steps[steps].label = xstrdup(label);
	}
	for (; records < plan->nskipped; records++) {
		plan->skipped[records].plan_item = i;
		plan->skipped[records].label = xstrdup(label);
	}
	free(label);
	free(done);
	free(sel);
}

static void
emit_preset(struct sync_plan *plan, const struct model *m,
    const struct placement *grad)
{
	size_t	i;

	for (i = 0; i < sizeof rules / sizeof rules[0]; i++)
		rules[i].emit(plan, m, grad, &rules[i]);
}

/* Step it's glob j, when it names no parameter: the nearest name. */
static const char *
nearest_param(const struct model *m, const char *glob)
{
	struct suggestion sg;
	int		 p;

	suggest_init(&sg, glob, strlen(glob));
	for (p = 0; p < m->nparams; p++)
		suggest_consider(&sg, m->params[p].name);
	return suggest_best(&sg);
}

/*
 * A step over pp or embedding must select both copies of a tied weight:
 * the numeric engine packs on each rank the copy that rank's step
 * selects, so a member with none sends nothing and the collective waits
 * for it (exit 3), while the symbolic engine reduces both copies when
 * the first stage's is selected and neither when only the last stage's
 * is.  With both selected the two engines run the same collective.
 */
static const char *
plan_item_half_tie(const struct model *m, int i, struct cfg_mark *at,
    char *why, size_t len)
{
	const struct plan_item *it = &m->config->plan[i];
	const struct logical_param *l;
	const struct param *peer;
	int		 p;

	for (p = 0; p < m->nparams; p++) {
		l = &m->logical[m->params[p].logical];
		if (!plan_selects(it, &m->params[p]) || l->ninstances < 2)
			continue;
		peer = &m->params[l->instance[l->instance[0] == p ? 1 : 0]];
		if (plan_selects(it, peer))
			continue;
		*at = it->mark;
		snprintf(why, len, "plan[%d]: selects %s on stage %d but not "
		    "its tied copy %s on stage %d: an all-reduce over %s "
		    "needs both (params and stages)", i, m->params[p].name,
		    m->params[p].stage, peer->name, peer->stage,
		    mesh_group_name(lossterm_group(it)));
		return why;
	}
	return NULL;
}

/*
 * Which dtype's buffer holds each parameter's gradient before plan item
 * i: fp32 at first, then where each accumulate: before it moves those it
 * selects (plan_item_buffers follows the same moves as it emits).
 */
static void
plan_held_before(const struct model *m, int i, int *held)
{
	const struct plan_item *it;
	int	 j, p;

	for (p = 0; p < m->nparams; p++)
		held[p] = PLAN_DTYPE_DEFAULT;
	for (j = 0; j < i; j++) {
		it = &m->config->plan[j];
		if (it->op != PLAN_ACCUMULATE)
			continue;
		for (p = 0; p < m->nparams; p++)
			if (plan_selects(it, &m->params[p]))
				held[p] = it->dtype;
	}
}

/*
 * plan_item_half_tie for dtype: a step that selects both copies of a
 * tied weight but runs on a buffer that holds one copy's gradient and
 * not the other's reaches half the tie, and the engines part as they
 * do for a half selection (a wait in the numeric one, a silent verdict
 * in the symbolic one).
 */
static const char *
plan_item_dtype_half_tie(const struct model *m, int i, struct cfg_mark *at,
    char *why, size_t len)
{
	const struct plan_item *it = &m->config->plan[i];
	const struct logical_param *l;
	const struct param *peer;
	const char *const *w = cfg_plan_dtype_words;
	int	*held, p, q;

	if (it->op == PLAN_ACCUMULATE || it->dtype < 0)
		return NULL;
	held = xcalloc(m->nparams, sizeof *held);
	plan_held_before(m, i, held);
	for (p = 0; p < m->nparams; p++) {
		l = &m->logical[m->params[p].logical];
		if (l->ninstances < 2 || !plan_selects(it, &m->params[p]) ||
		    held[p] != it->dtype)
			continue;
		q = l->instance[l->instance[0] == p ? 1 : 0];
		peer = &m->params[q];
		if (!plan_selects(it, peer) || held[q] == it->dtype)
			continue;
		*at = it->dtype_mark;
		snprintf(why, len, "plan[%d].dtype: reaches %s on stage %d (in "
		    "%s) but not its tied copy %s on stage %d (in %s): a step "
		    "over a tied weight needs both copies in its buffer", i,
		    m->params[p].name, m->params[p].stage, w[held[p]],
		    peer->name, peer->stage, w[held[q]]);
		free(held);
		return why;
	}
	free(held);
	return NULL;
}

/* |x|^n into *acc, false past PLAN_MAX_SCALE. */
static bool
grow(int64_t *acc, int64_t x, int n)
{
	if (x < 0)
		x = -x;
	while (n-- > 0)
		if (__builtin_mul_overflow(*acc, x, acc) ||
		    *acc > PLAN_MAX_SCALE)
			return false;
	return true;
}

/*
 * A step that runs at n micro-batches meets micro-batch 0 n times: a
 * scale multiplies it by the factor to the n, a sum (not an average)
 * by up to the group's size to the n.  plan_violation bounds each
 * factor once; here the schedule counts, so that every mesh sweep and
 * --shrink try keeps the engines' exact coefficients inside 64 bits
 * (a scale of 1000 at every one of 8 micro-batches, or a sum over dp 4
 * at every one of 32, overflowed: an internal error, exit 3).
 */
static const char *
plan_growth_refusal(const struct model *m, struct cfg_mark *at, char *why,
    size_t len)
{
	const struct config *c = m->config;
	const struct plan_item *it;
	struct rational	 q;
	int64_t		 num = 1, den = 1;
	int		 i, n;

	for (i = 0; i < c->nplan; i++) {
		it = &c->plan[i];
		n = __builtin_popcount(plan_schedule(m, it));
		if (it->op == PLAN_SCALE) {
			if (plan_factor(c, it, &q) == -1)
				continue;	/* plan_violation says why */
			if (grow(&num, q.num, n) && grow(&den, q.den, n))
				continue;
		} else if ((it->op == PLAN_ALL_REDUCE ||
		    it->op == PLAN_REDUCE_SCATTER) && !it->average) {
			if (grow(&num, mesh_group_size(&m->mesh,
			    lossterm_group(it)), n))
				continue;
		} else if (it->op == PLAN_GATHER_LOSS) {
			/*
			 * Once, at the backward (lossterm.c), on the term it
			 * gathers: an aux gather multiplies the aux factor.
			 */
			q = lossterm_item_factor(c, &m->mesh, it,
			    it->term >= 0 ? it->term : PLAN_TERM_MAIN);
			if (grow(&num, q.num, 1))
				continue;
		} else
			continue;
		*at = it->mark;
		snprintf(why, len, "plan[%d]: the plan's factors and the group "
		    "sizes of its sums, each to the power of the micro-batches "
		    "its step runs at, multiply past %lld with this mesh",
		    i, (long long)PLAN_MAX_SCALE);
		return why;
	}
	return NULL;
}

/*
 * A buffer step's buffer must hold a parameter, and a reduce-scatter or
 * an all-gather must run over as many members as the model's layout
 * cuts the buffer into (layout_buffer_shards): the shards are the
 * layout's, which a plan does not choose, and the engines' collectives
 * hand member i shard i of every bucket.
 */
static const char *
plan_layout_refusal(const struct model *m, int i, struct cfg_mark *at,
    char *why, size_t len)
{
	const struct plan_item *it = &m->config->plan[i];
	const char	*op;
	char		 holds[96];
	enum buffer_kind k;
	int		 p, n, shards;

	if (it->buffer_mark.line > 0) {
		k = plan_buffer(it);
		for (p = 0; p < m->nparams; p++)
			if (layout_buffer_of(m, p) == k)
				break;
		if (p == m->nparams) {
			*at = it->buffer_mark;
			snprintf(why, len, "plan[%d].buffer: no parameter is in "
			    "the %s gradient buffer", i,
			    syncplan_buffer_name(k));
			return why;
		}
	}
	if (it->op != PLAN_REDUCE_SCATTER && it->op != PLAN_ALL_GATHER)
		return NULL;
	n = mesh_group_size(&m->mesh, lossterm_group(it));
	for (p = 0; p < m->nparams; p++) {
		k = it->buffer_mark.line > 0 ? plan_buffer(it) :
		    layout_buffer_of(m, p);
		if ((it->buffer_mark.line == 0 && !plan_selects(it,
		    &m->params[p])) || layout_buffer_of(m, p) != k)
			continue;
		shards = layout_buffer_shards(m, k);
		if (shards == n)
			continue;
		op = it->op == PLAN_REDUCE_SCATTER ? "reduce-scatter" :
		    "all-gather";
		holds[0] = '\0';
		if (it->buffer_mark.line == 0)
			snprintf(holds, sizeof holds, " (%s's)",
			    m->params[p].name);
		*at = it->value_mark;
		snprintf(why, len, "plan[%d].%s: the model's layout cuts the "
		    "%s gradient buffer%s into %d shards, one per member of "
		    "%s, and %s has %d: a%s %s runs over the group the buffer "
		    "is sharded for", i, op, syncplan_buffer_name(k), holds,
		    shards, mesh_group_name(shard_group(m, k)),
		    mesh_group_name(lossterm_group(it)), n, it->op ==
		    PLAN_ALL_GATHER ? "n" : "", op);
		return why;
	}
	return NULL;
}

/* A fault of step i alone: a glob, its selection, its group. */
static const char *
plan_item_refusal(const struct model *m, int i, struct cfg_mark *at,
    char *why, size_t len)
{
	const struct plan_item *it = &m->config->plan[i];
	const char	*near;
	char		 q[TEXT_QUOTE_SIZE];
	enum group_kind	 g;
	bool		 any = false;
	int		 j, p;

	for (j = 0; j < it->nglobs; j++) {
		for (p = 0; p < m->nparams; p++)
			if (plan_glob_match(it->globs[j], m->params[p].name))
				break;
		if (p < m->nparams)
			continue;
		*at = it->glob_marks[j];
		near = nearest_param(m, it->globs[j]);
		/*
		 * Quoted as every message quotes input: "%.64s" cut a
		 * character of several bytes in two, which then showed as
		 * a byte that is no UTF-8, and a long glob without "...".
		 */
		text_escape(q, sizeof q, it->globs[j], strlen(it->globs[j]));
		snprintf(why, len, "plan[%d].params[%d]: \"%s\" matches no "
		    "parameter (%s%s%s)", i, j, q, near != NULL ?
		    "did you mean \"" : "names are like ", near != NULL ? near :
		    m->params[m->nparams - 1].name, near != NULL ? "\"?" : "");
		return why;
	}
	for (p = 0; p < m->nparams; p++)
		any = any || plan_selects(it, &m->params[p]);
	if (!any) {
		*at = it->mark;
		snprintf(why, len, "plan[%d]: no parameter is both in params "
		    "and on stages", i);
		return why;
	}
	if (plan_layout_refusal(m, i, at, why, len) != NULL)
		return why;
	if (it->op != PLAN_ALL_REDUCE)
		return NULL;
	g = lossterm_group(it);
	if (g != GROUP_PP && g != GROUP_EMBEDDING)
		return NULL;
	/*
	 * Only a tied weight's two copies, on the first and the last stage,
	 * meet over these groups: a parameter of one stage has no peer.
	 */
	for (p = 0; p < m->nparams; p++) {
		if (!plan_selects(it, &m->params[p]) ||
		    (m->logical[m->params[p].logical].ninstances == 2 &&
		    (g == GROUP_EMBEDDING || m->mesh.pp <= 2)))
			continue;
		*at = it->value_mark;
		snprintf(why, len, "plan[%d].all-reduce: over %s only the two "
		    "copies of a tied weight meet%s, and %s is on stage %d "
		    "alone", i, mesh_group_name(g), g == GROUP_PP ?
		    " (with pp at most 2)" : "", m->params[p].name,
		    m->params[p].stage);
		return why;
	}
	return plan_item_half_tie(m, i, at, why, len);
}

/*
 * Does step it reduce parameter p over some group: an all-reduce that
 * selects it, or one of its buffer, or a reduce-scatter of its buffer?
 */
static bool
plan_reduces(const struct model *m, const struct plan_item *it, int p)
{
	if (it->op != PLAN_ALL_REDUCE && it->op != PLAN_REDUCE_SCATTER)
		return false;
	if (it->buffer_mark.line > 0)
		return layout_buffer_of(m, p) == plan_buffer(it);
	return plan_selects(it, &m->params[p]);
}

/*
 * The groups along no data-parallel axis: a sum over one of them meets
 * another replica of a parameter's elements only where the expert layout
 * folds tp into edp (plan_meets_replicas).  Every other group has a dp
 * axis (pure-dp, cp, an FSDP split, gtp, edp, ...), and reduces over dp
 * even when that axis has one member here: over too small a group, which
 * the values show (wrong-group, as the preset's own such step is told).
 */
static const bool group_off_dp[GROUP__COUNT] = {
	[GROUP_TP] = true,
	[GROUP_PP] = true,
	[GROUP_EMBEDDING] = true,
	[GROUP_EP] = true,
	[GROUP_ETP] = true,
	[GROUP_EP_ETP] = true,
};

bool
syncplan_group_meets_replicas(const struct model *m, enum group_kind g,
    int p)
{
	const struct param *pr = &m->params[p];
	enum group_kind replicas = pr->expert ? GROUP_EDP : GROUP_DP;
	int	*members, rank, n, i, id;
	bool	 meets = false;

	if (!group_off_dp[g])
		return true;
	rank = mesh_rank_of(&m->mesh, pr->stage, 0, 0);
	id = mesh_group_id(&m->mesh, replicas, rank);
	n = mesh_group_size(&m->mesh, g);
	members = xreallocarray(NULL, n, sizeof *members);
	mesh_group(&m->mesh, g, rank, members);
	for (i = 0; i < n && !meets; i++)
		meets = members[i] != rank &&
		    mesh_group_id(&m->mesh, replicas, members[i]) == id;
	free(members);
	return meets;
}

/*
 * Does step it reduce over parameter p's data-parallel replicas (dp,
 * edp for experts)?  A sum over tp, over the tied copies' embedding or
 * pp group, or over ep adds other elements or another copy's, and leaves
 * the replicas as unreduced as no step does.
 */
static bool
plan_meets_replicas(const struct model *m, const struct plan_item *it,
    int p)
{
	return syncplan_group_meets_replicas(m, lossterm_group(it), p);
}

/*
 * A plan without "preset" is exactly its steps: a parameter with
 * data-parallel replicas that none of them reduces keeps each rank's own
 * contributions.  That is a bug the plan describes, not one in the plan
 * (kohya-ss/sd-scripts #924: a training script that unwrapped its DDP
 * module ran no collective at all), so both engines run it and the
 * diagnosis names the missing reduction (FACT_PLAN_UNREDUCED).
 */
bool
syncplan_unreduced(const struct model *m, int p)
{
	const struct config *c = m->config;
	const struct param *pr = &m->params[p];
	int	 i;

	if (!plan_given(c))
		return false;
	for (i = 0; i < c->nplan; i++)
		if (c->plan[i].op == PLAN_PRESET)
			return false;
	if (mesh_group_size(&m->mesh, pr->expert ? GROUP_EDP : GROUP_DP) < 2)
		return false;
	/* A reduction that never runs (micro-batches: none) is none. */
	for (i = 0; i < c->nplan; i++)
		if (plan_schedule(m, &c->plan[i]) != 0 &&
		    plan_reduces(m, &c->plan[i], p) &&
		    plan_meets_replicas(m, &c->plan[i], p))
			return false;
	return true;
}

/*
 * The two copies of a tied weight on different stages meet only in a sum
 * over embedding or pp (a plan item over pp or embedding must select
 * both, plan_item_refusal): without one, each stage steps with its own
 * use's gradient.
 */
bool
syncplan_untied(const struct model *m, int lp)
{
	const struct config *c = m->config;
	const struct logical_param *l = &m->logical[lp];
	enum group_kind g;
	int	 i;

	if (!plan_given(c) || l->ninstances < 2 ||
	    m->params[l->instance[0]].stage == m->params[l->instance[1]].stage)
		return false;
	for (i = 0; i < c->nplan; i++)
		if (c->plan[i].op == PLAN_PRESET)
			return false;
	for (i = 0; i < c->nplan; i++) {
		if (c->plan[i].op != PLAN_ALL_REDUCE ||
		    plan_schedule(m, &c->plan[i]) == 0)
			continue;
		g = lossterm_group(&c->plan[i]);
		if ((g == GROUP_EMBEDDING || g == GROUP_PP) &&
		    plan_reduces(m, &c->plan[i], l->instance[0]))
			return false;
	}
	return true;
}

int
syncplan_unreduced_never_runs(const struct model *m, int p)
{
	const struct config *c = m->config;
	int	 i;

	if (!syncplan_unreduced(m, p))
		return -1;
	for (i = 0; i < c->nplan; i++)
		if (plan_reduces(m, &c->plan[i], p) &&
		    plan_meets_replicas(m, &c->plan[i], p))
			return i;
	return -1;
}

const char *
syncplan_refusal(const struct model *m, struct cfg_mark *at, char *why,
    size_t len)
{
	const char	*r;
	int		 i;

	if (!plan_given(m->config))
		return NULL;
	for (i = 0; i < m->config->nplan; i++)
		if (m->config->plan[i].op != PLAN_PRESET &&
		    ((r = plan_item_refusal(m, i, at, why, len)) != NULL ||
		    (r = plan_item_dtype_half_tie(m, i, at, why, len)) !=
		    NULL))
			return r;
	return plan_growth_refusal(m, at, why, len);
}

/*
 * Does the plan's schedule need the micro-batch loop (syncplan.h)?  A
 * reset before micro-batch 0 clears what is still zero.  The test suite
 * sets GRADAUDIT_TEST_PER_MICRO_BATCH to run every plan through the loop,
 * which must give what the single pass gives when every step is last.
 */
static bool
needs_loop(const struct sync_plan *plan, const struct model *m)
{
	const char	*e = getenv("GRADAUDIT_TEST_PER_MICRO_BATCH");
	int		 i;

	if (e != NULL && *e != '\0')
		return true;
	for (i = 0; i < plan->nsteps; i++)
		if (plan->steps[i].op == SYNC_RESET ?
		    (plan->steps[i].micro_batches & ~(uint32_t)1) != 0 :
		    plan->steps[i].micro_batches != last_micro_batch(m))
			return true;
	return false;
}

void
syncplan_build(struct sync_plan *plan, const struct model *m,
    const struct placement *grad)
{
	const struct config *c = m->config;
	char		 why[CFG_WHY_SIZE];
	int		*held = xcalloc(m->nparams, sizeof *held);
	int		 i;

	memset(plan, 0, sizeof *plan);
	for (i = 0; i < m->nparams; i++)
		held[i] = PLAN_DTYPE_DEFAULT;
	if (!plan_given(c))
		emit_preset(plan, m, grad);
	for (i = 0; plan_given(c) && i < c->nplan; i++) {
		if (c->plan[i].op == PLAN_PRESET)
			emit_preset(plan, m, grad);
		else if (c->plan[i].op == PLAN_DECLARE)
			emit_plan_declare(plan, m, i, grad);
		else
			emit_plan_item(plan, m, i, held);
	}
	free(held);
	if (syncplan_refusal(m, &plan->refusal_mark, why, sizeof why) != NULL)
		plan->refusal = xstrdup(why);
	plan->micro_batch_count = m->loss.micro_batches;
	plan->per_micro_batch = needs_loop(plan, m);
	/* The rules emit at most 32; a plan adds at most PLAN_MAX_ITEMS. */
	if (plan->nsteps > 32 + PLAN_MAX_ITEMS)
		fatalx("sync plan of %d steps exceeds %d", plan->nsteps,
		    32 + PLAN_MAX_ITEMS);
}

void
syncplan_free(struct sync_plan *plan)
{
	int	i;

	for (i = 0; i < plan->nsteps; i++) {
		free(plan->steps[i].params);
		free(plan->steps[i].missed);
		if (plan->steps[i].plan_item >= 0)
			free((char *)plan->steps[i].label);
	}
	free(plan->refusal);
	for (i = 0; i < plan->nskipped; i++) {
		free(plan->skipped[i].params);
		if (plan->skipped[i].plan_item >= 0)
			free((char *)plan->skipped[i].label);
	}
	free(plan->steps);
	free(plan->skipped);
	memset(plan, 0, sizeof *plan);
}

const char *
syncplan_buffer_name(enum buffer_kind k)
{
	static const char *const names[BUFFER__COUNT] = {
		[BUFFER_DENSE] = "dense",
		[BUFFER_EXPERT] = "expert",
	};

	if ((int)k < 0 || k >= BUFFER__COUNT)
		fatalx("syncplan_buffer_name: bad buffer kind %d", (int)k);
	return names[k];
}

bool
syncplan_runs_at(const struct sync_step *s, int mb)
{
	return (s->micro_batches >> mb & 1) != 0;
}

void
syncplan_schedule_text(const struct sync_step *s, int K, char *buf,
    size_t len)
{
	uint32_t	 all = K == 32 ? UINT32_MAX : ((uint32_t)1 << K) - 1;
	size_t		 n;
	int		 mb, count = 0, seen = 0;

	for (mb = 0; mb < K; mb++)
		count += syncplan_runs_at(s, mb);
	if (count == 0) {
		snprintf(buf, len, "no micro-batch");
		return;
	}
	if (s->micro_batches == all && K > 1) {
		snprintf(buf, len, "every micro-batch");
		return;
	}
	snprintf(buf, len, "micro-batch%s ", count > 1 ? "es" : "");
	for (mb = 0; mb < K; mb++) {
		if (!syncplan_runs_at(s, mb))
			continue;
		n = strlen(buf);
		snprintf(buf + n, len - n, "%s%d", seen == 0 ? "" :
		    seen + 1 == count ? " and " : ", ", mb);
		seen++;
	}
}

bool
syncplan_touches(const struct sync_step *s, const struct model *m, int param)
{
	if (s->target == TARGET_BUFFER)
		return layout_buffer_of(m, param) == s->buffer;
	return s->params[param];
}

int
syncplan_used_ranges(const struct model *m, const struct layout *lay,
    int param, int rank, int64_t (*ranges)[2], int max)
{
	enum group_kind group;
	enum buffer_kind k = layout_buffer_of(m, param);

	if (!buffer_is_sharded(m, k)) {
		if (max < 1)
			fatalx("no room for used ranges");
		ranges[0][0] = 0;
		ranges[0][1] = m->params[param].local_elems;
		return 1;
	}
	group = shard_group(m, k);
	return layout_owned_ranges(lay, m, param,
	    mesh_group_index(&m->mesh, group, rank), ranges, max);
}

/*
 * Does step s name parameter p: select it, reaching its gradient or not
 * (a step on a buffer that did not hold it still ran on p's buffer)?
 */
static bool
step_names(const struct sync_step *s, int p)
{
	return s->params[p] || (s->missed != NULL && s->missed[p] >= 0);
}

/* A step on a loss term: what it multiplies, and that it does so early. */
static void
loss_term_describe(const struct sync_step *s, const struct model *m,
    char *buf, size_t len)
{
	const struct plan_item *it = &m->config->plan[s->plan_item];
	char	 q[48], term[32] = "every loss term";

	q_format(s->scale, q, sizeof q);
	if (s->term >= 0)
		snprintf(term, sizeof term, "the %s loss",
		    cfg_plan_term_words[s->term]);
	if (it->op == PLAN_SCALE)
		snprintf(buf, len, "scale the gradient of %s by %s, at its "
		    "backward (its loss factor)", term, q);
	else
		snprintf(buf, len, "gather %s over %s before the backward, "
		    "%s: its gradient times %s", term,
		    mesh_group_name(s->group), it->autograd ? "with autograd "
		    "(the gather's backward sums every member's gradient)" :
		    "without autograd (only the rank's own copy carries "
		    "gradient)", q);
}

void
syncplan_describe(const struct sync_step *s, const struct model *m,
    char *buf, size_t len)
{
	char		 q[48], what[160], pl[96], when[160], at[200] = "";
	const char	*op = "";
	int		 i, n = 0;

	if (s->target == TARGET_BUFFER)
		snprintf(what, sizeof what, "the %s gradient buffer",
		    syncplan_buffer_name(s->buffer));
	else {
		what[0] = '\0';
		for (i = 0; i < m->nparams; i++)
			if (step_names(s, i))
				n++;
		for (i = 0; i < m->nparams; i++)
			if (step_names(s, i)) {
				if (n == 2 && what[0] != '\0')
					snprintf(what + strlen(what),
					    sizeof what - strlen(what), " and %s",
					    m->params[i].name);
				else if (what[0] == '\0')
					snprintf(what, sizeof what, "%s",
					    m->params[i].name);
			}
		if (n > 2)
			snprintf(what + strlen(what), sizeof what - strlen(what),
			    " and %d more", n - 1);
	}
	/* A schedule other than today's follows what the step does. */
	if (s->micro_batches != last_micro_batch(m) || s->op == SYNC_RESET) {
		syncplan_schedule_text(s, m->loss.micro_batches, when,
		    sizeof when);
		snprintf(at, sizeof at, ", %s %s", s->op == SYNC_RESET ?
		    "before the backward of" : "after the backward of", when);
	}
	switch (s->op) {
	case SYNC_SCALE:
		q_format(s->scale, q, sizeof q);
		snprintf(buf, len, "scale %s by %s%s", what, q, at);
		return;
	case SYNC_RESET:
		snprintf(buf, len, "zero the gradients of %s%s", what, at);
		return;
	case SYNC_MASK_REPLICAS:
		snprintf(buf, len, "keep %s on one rank per replica group "
		    "(declared %s), zero elsewhere%s", what,
		    pl_format(&m->mesh, s->declared, pl, sizeof pl), at);
		return;
	case SYNC_ALL_REDUCE:
		op = "all-reduce";
		break;
	case SYNC_REDUCE_SCATTER:
		op = "reduce-scatter";
		break;
	case SYNC_ALL_GATHER:
		snprintf(buf, len, "all-gather over %s of %s%s",
		    mesh_group_name(s->group), what, at);
		return;
	case SYNC_ACCUMULATE:
		snprintf(buf, len, "accumulate %s into %s %s buffer", what,
		    n > 1 ? "their" : "its", cfg_plan_dtype_words[s->dtype]);
		return;
	case SYNC_LOSS_TERM:
		loss_term_describe(s, m, buf, len);
		return;
	}
	snprintf(buf, len, "%s (%s) over %s of %s%s%s%s%s", op,
	    s->average ? "average" : "sum", mesh_group_name(s->group),
	    s->dtype >= 0 ? "the " : "", s->dtype >= 0 ?
	    cfg_plan_dtype_words[s->dtype] : "", s->dtype >= 0 ?
	    " buffer of " : "", what, at);
}
