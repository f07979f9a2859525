/*
 * The constraints of SPEC section 5 (constraints.h): one table of rules a
 * loaded config must keep, each naming the key it is about, and what the
 * framework profile's limits: say its release runs.  The loader and sweep
 * check configs through it, and the fix search its candidates.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "config/config.h"
#include "config/constraints.h"
#include "config/framework.h"
#include "config/plan.h"

/*
 * One constraint of SPEC section 5: holds() returns false and describes the
 * failure in buf, naming values, not positions, since sweep uses the same
 * text for meshes it built itself.  Integer ranges are checked before any of
 * these, so the products below cannot overflow (each factor is at most
 * 2^20, experts at most 2^12).
 */
/*
 * loss.objective sample-mean weighs each sample's tokens by that sample's
 * own count, but an atom is the summed loss of a whole micro-batch on one
 * rank (lossnorm.h): the objective is only a combination of atoms when
 * every sample of a micro-batch weighs alike, that is with one sample per
 * micro-batch or every token valid (where it is the micro-batch mean).
 */
/*
 * A plan's stages and factors with this mesh (plan.h): sweep and run
 * --shrink try meshes the file never wrote.
 */
static bool
plan_fits(const struct config *c, char *buf, size_t size)
{
	struct cfg_mark	 m;

	return plan_violation(c, &m, buf, size);
}

static bool
sample_mean_expressible(const struct config *c, char *buf, size_t size)
{
	if (c->loss.objective != OBJECTIVE_SAMPLE_MEAN ||
	    c->model.micro_batch == 1 || (c->loss.valid_tokens != NULL &&
	    strcmp(c->loss.valid_tokens, "all") == 0))
		return true;
	snprintf(buf, size, "objective sample-mean needs model.micro_batch 1 "
	    "(it is %d) or loss.valid_tokens: all: an atom sums a whole "
	    "micro-batch's tokens, so samples of unequal counts in one "
	    "micro-batch cannot be weighed apart", c->model.micro_batch);
	return false;
}

struct constraint {
	enum cfg_key	  key;		/* the key the message is about */
	bool		  moe_only;	/* only when model.moe is present */
	bool		(*holds)(const struct config *, char *, size_t);
};

static bool
must_divide(char *buf, size_t size, const char *an, int64_t a,
    const char *bn, int64_t b)
{
	if (a > 0 && b % a == 0)
		return true;
	snprintf(buf, size, "%s (%" PRId64 ") must divide %s (%" PRId64 ")",
	    an, a, bn, b);
	return false;
}

static bool
must_be_divisible(char *buf, size_t size, const char *an, int64_t a,
    const char *bn, int64_t b)
{
	if (b > 0 && a % b == 0)
		return true;
	snprintf(buf, size,
	    "%s (%" PRId64 ") must be divisible by %s (%" PRId64 ")",
	    an, a, bn, b);
	return false;
}

static bool
must_fit_param(char *buf, size_t size, const char *what, int64_t elems)
{
	if (elems <= CFG_MAX_PARAM_ELEMS)
		return true;
	snprintf(buf, size, "%s (%" PRId64 ") exceeds the limit of %" PRId64
	    " elements per parameter", what, elems, CFG_MAX_PARAM_ELEMS);
	return false;
}

static bool
world_fits(const struct config *c, char *buf, size_t size)
{
	int64_t	 world = cfg_world(c);

	if (world <= CFG_MAX_WORLD)
		return true;
	snprintf(buf, size, "world size dp*cp*pp*tp (%" PRId64
	    ") must be at most %d", world, CFG_MAX_WORLD);
	return false;
}

static bool
etp_divides_tp(const struct config *c, char *buf, size_t size)
{
	return must_divide(buf, size, "etp", c->mesh.etp, "tp", c->mesh.tp);
}

static bool
expert_mesh_fits(const struct config *c, char *buf, size_t size)
{
	if (c->mesh.cp > 1)
		return must_divide(buf, size, "ep*etp",
		    (int64_t)c->mesh.ep * c->mesh.etp, "dp*cp*tp",
		    (int64_t)c->mesh.dp * c->mesh.cp * c->mesh.tp);
	return must_divide(buf, size, "ep*etp",
	    (int64_t)c->mesh.ep * c->mesh.etp, "dp*tp",
	    (int64_t)c->mesh.dp * c->mesh.tp);
}

/*
 * Megatron's get_num_layers_to_build (fa8bb5921b, core 0.9.0): the first
 * and last stages take the layers given, and the stages between split the
 * rest evenly; without them every stage takes layers / pp.
 */
static bool
layers_split_over_pp(const struct config *c, char *buf, size_t size)
{
	int	 f = c->model.first_stage_layers, l = c->model.last_stage_layers;
	int	 rest = c->model.layers - f - l, left;

	/*
	 * With a virtual pipeline every one of the pp*vpp chunks takes
	 * layers / (pp*vpp), so that is the divisor to name: "divisible by
	 * pp" sent the user to a pp that was not the problem (issue 28).
	 */
	if (f == 0 && l == 0 && c->mesh.vpp > 1 && c->mesh.pp > 1)
		return must_be_divisible(buf, size, "layers", c->model.layers,
		    "pp*vpp", (int64_t)c->mesh.pp * c->mesh.vpp);
	if (f == 0 && l == 0)
		return must_be_divisible(buf, size, "layers", c->model.layers,
		    "pp", c->mesh.pp);
	left = c->mesh.pp - (f > 0) - (l > 0);
	if (c->mesh.pp < 2)
		snprintf(buf, size, "an uneven pipeline needs pp > 1");
	else if (rest < 0)
		snprintf(buf, size, "first_stage_layers + last_stage_layers "
		    "(%d) exceed layers (%d)", f + l, c->model.layers);
	else if (left == 0 && rest > 0)
		snprintf(buf, size, "first_stage_layers + last_stage_layers "
		    "(%d) must be layers (%d) with pp 2", f + l,
		    c->model.layers);
	else if (left > 0 && (rest == 0 || rest % left != 0))
		snprintf(buf, size, "the layers of the other stages, layers - "
		    "first_stage_layers - last_stage_layers (%d), must be a "
		    "positive multiple of their number (%d)", rest, left);
	else
		return true;
	return false;
}

/*
 * A virtual pipeline: every stage's layers split evenly over its chunks
 * (get_num_layers_to_build asserts num_layers_per_pipeline_rank %
 * vp_size == 0).
 */
static bool
vpp_fits(const struct config *c, char *buf, size_t size)
{
	int	 s, first, count;

	if (c->mesh.vpp == 1)
		return true;
	if (c->mesh.pp < 2) {
		snprintf(buf, size, "a virtual pipeline (vpp %d) needs pp > 1",
		    c->mesh.vpp);
		return false;
	}
	for (s = 0; s < c->mesh.pp; s++) {
		cfg_stage_layers(c, s, &first, &count);
		if (count % c->mesh.vpp != 0) {
			snprintf(buf, size, "the layers of stage %d (%d) must "
			    "be divisible by vpp (%d)", s, count, c->mesh.vpp);
			return false;
		}
	}
	return true;
}

static bool
coeff_fits(const char *what, const char *v, char *buf, size_t size)
{
	int64_t	 n, d;

	if (cfg_decimal(v, &n, &d))
		return true;
	snprintf(buf, size, "%s is a decimal like 0.01 or a fraction like "
	    "1/100, not \"%s\"", what, v);
	return false;
}

static bool
aux_coeff_fits(const struct config *c, char *buf, size_t size)
{
	return coeff_fits("aux_loss_coeff", c->model.moe.aux_loss_coeff, buf,
	    size);
}

static bool
z_coeff_fits(const struct config *c, char *buf, size_t size)
{
	return coeff_fits("z_loss_coeff", c->model.moe.z_loss_coeff, buf,
	    size);
}

/*
 * The auxiliary atoms of a global-aux-loss count the dp group (lossnorm.h):
 * an objective with the sequence's counts weighs other atoms, which the
 * audit has no value for, and so does Megatron's z-loss, which stays on
 * the sequence's token count beside a global load-balancing loss.
 */
static bool
aux_objective_fits(const struct config *c, char *buf, size_t size)
{
	bool	 global = c->loss.aux_type == AUX_TYPE_GLOBAL;

	if (c->loss.aux_objective != AUX_OBJECTIVE_TYPE &&
	    (c->loss.aux_objective == AUX_OBJECTIVE_GLOBAL) != global) {
		snprintf(buf, size, "loss.aux_objective %s with loss.aux_type "
		    "%s is not modelled: a load-balancing gradient with the "
		    "%s's counts is another atom than one with the %s's",
		    global ? "sequence" : "global", global ? "global-aux-loss" :
		    "aux-loss", global ? "dp group" : "sequence", global ?
		    "sequence" : "dp group");
		return false;
	}
	return true;
}

static bool
aux_type_fits(const struct config *c, char *buf, size_t size)
{
	int64_t	 n, d;

	/*
	 * Without a load-balancing loss (aux_loss_coeff 0) Megatron's
	 * _apply_global_aux_loss returns early and the z-loss is alone.
	 */
	if (c->loss.aux_type != AUX_TYPE_GLOBAL ||
	    !cfg_decimal(c->model.moe.z_loss_coeff, &n, &d) || n == 0 ||
	    !cfg_decimal(c->model.moe.aux_loss_coeff, &n, &d) || n == 0)
		return true;
	snprintf(buf, size, "loss.aux_type global-aux-loss with "
	    "model.moe.z_loss_coeff is not modelled: the z-loss keeps the "
	    "sequence's token count, a factor apart from the global "
	    "load-balancing loss's in their one atom");
	return false;
}

static bool
mtp_factor_fits(const struct config *c, char *buf, size_t size)
{
	return coeff_fits("mtp_loss_scaling_factor",
	    c->model.mtp_loss_scaling_factor, buf, size);
}

/*
 * Multi-token prediction rolls every sequence across the cp ranks, which
 * hold it in 2 cp pieces (lossnorm.h); Megatron's validate_args asserts
 * the same whenever cp > 1 (bba6eeb7de, core_v0.8.0 on).
 */
static bool
mtp_pieces_fit(const struct config *c, char *buf, size_t size)
{
	if (c->model.mtp == 0 || c->mesh.cp == 1)
		return true;
	return must_be_divisible(buf, size, "seq with model.mtp and cp > 1",
	    c->model.seq, "2*cp", 2 * (int64_t)c->mesh.cp);
}

/*
 * A lossy boundary keeps a second atom per chunk (atom.h), which the
 * multi-token prediction losses' atoms do not have yet: an MoE block's
 * declared Replicate or Partial, or behind a router's all-reduce, can be
 * lossy, and so is the output layer's input declared Replicate.
 */
static bool
mtp_without_boundary(const struct config *c, char *buf, size_t size)
{
	if (c->model.mtp == 0 || (c->sync.moe_input_grad == MOE_INPUT_AUTO &&
	    c->sync.router_input_grad == ROUTER_INPUT_NONE))
		return true;
	snprintf(buf, size, "model.mtp is not modelled with an MoE block "
	    "boundary other than sync.moe_input_grad: auto and "
	    "sync.router_input_grad: none");
	return false;
}

/*
 * The output layer's input declared Replicate is lossy alike, and so is
 * the router's score gradient detached: the declarations that multi-token
 * prediction is not modelled with.
 */
static const struct {
	int			 declare;	/* PLAN_DECLARE_* */
	int			 activation;	/* PLAN_ACTIVATION_* */
	const char		*what;		/* the gradient, as declared */
	const char		*item;		/* the plan item's words */
} mtp_lossy_declares[] = {
	{ PLAN_DECLARE_DETACHED, PLAN_ACTIVATION_ROUTER_SCORES,
	    "the router's score gradient detached",
	    "declare: detached, activation: router-scores" },
	{ PLAN_DECLARE_REPLICATE, PLAN_ACTIVATION_OUTPUT,
	    "the output layer's input gradient declared Replicate",
	    "declare: replicate, activation: output" },
};

static bool
mtp_without_output_boundary(const struct config *c, char *buf, size_t size)
{
	size_t	 k;
	int	 i;

	for (i = 0; c->model.mtp > 0 && i < c->nplan; i++)
		for (k = 0; k < sizeof mtp_lossy_declares /
		    sizeof mtp_lossy_declares[0]; k++) {
			if (c->plan[i].op != PLAN_DECLARE ||
			    c->plan[i].declare !=
			    mtp_lossy_declares[k].declare ||
			    c->plan[i].activation !=
			    mtp_lossy_declares[k].activation)
				continue;
			snprintf(buf, size, "model.mtp is not modelled with "
			    "%s (plan[%d]: %s)", mtp_lossy_declares[k].what,
			    i, mtp_lossy_declares[k].item);
			return false;
		}
	return true;
}

/* model.moe.pattern: one '0' or '1' per layer. */
static bool
pattern_fits(const struct config *c, char *buf, size_t size)
{
	const char	*p = c->model.moe.pattern;
	size_t		 i, n;

	if (p == NULL)
		return true;
	n = strlen(p);
	for (i = 0; i < n; i++)
		if (p[i] != '0' && p[i] != '1') {
			snprintf(buf, size, "pattern holds '0' (dense) or '1' "
			    "(MoE) for each layer: character %zu is neither",
			    i + 1);
			return false;
		}
	if (n != (size_t)c->model.layers) {
		snprintf(buf, size, "pattern has %zu layers, layers is %d", n,
		    c->model.layers);
		return false;
	}
	if (c->model.moe.every != 1) {
		snprintf(buf, size, "give pattern or every (%d), not both",
		    c->model.moe.every);
		return false;
	}
	if (strchr(p, '1') == NULL) {
		snprintf(buf, size, "pattern puts experts in no layer");
		return false;
	}
	return true;
}

static bool
padded_vocab_fits(const struct config *c, char *buf, size_t size)
{
	int64_t	 padded = cfg_padded_vocab(c);

	if (padded <= CFG_MAX_MODEL_DIM)
		return true;
	snprintf(buf, size, "vocab (%d) padded to a multiple of "
	    "vocab_divisible_by*tp (%" PRId64 ") is %" PRId64 ", more than "
	    "%d", c->model.vocab, (int64_t)c->model.vocab_divisible_by *
	    c->mesh.tp, padded, CFG_MAX_MODEL_DIM);
	return false;
}

static bool
ffn_split_over_tp(const struct config *c, char *buf, size_t size)
{
	return must_be_divisible(buf, size, "ffn", c->model.ffn, "tp",
	    c->mesh.tp);
}

static bool
shared_ffn_split_over_tp(const struct config *c, char *buf, size_t size)
{
	return must_be_divisible(buf, size, "shared_expert_ffn",
	    cfg_shared_expert_ffn(c), "tp", c->mesh.tp);
}

static bool
shared_ffn_fits(const struct config *c, char *buf, size_t size)
{
	return must_fit_param(buf, size, "shared_expert_ffn*hidden",
	    (int64_t)cfg_shared_expert_ffn(c) * c->model.hidden);
}

static bool
seq_split_over_tp(const struct config *c, char *buf, size_t size)
{
	if (c->mesh.cp > 1)
		return must_be_divisible(buf, size, "seq", c->model.seq,
		    "cp*tp", (int64_t)c->mesh.cp * c->mesh.tp);
	return must_be_divisible(buf, size, "seq", c->model.seq, "tp",
	    c->mesh.tp);
}

/*
 * loss.valid_tokens: "uneven", "all", "eod:N", "fraction:F", or one count
 * per (micro-batch, dp rank, cp rank), in that order (the cp rank
 * fastest), each between 1 and the tokens a cp rank holds (micro_batch *
 * seq / cp).  A mask must leave every chunk a valid token: a chunk with
 * none would divide by zero where a framework divides by its count.
 */
static bool
valid_tokens_fit(const struct config *c, char *buf, size_t size)
{
	const char	*v = c->loss.valid_tokens, *p;
	char		*end;
	long		 n;
	int64_t		 want, got = 0, num, den, most;
	int64_t		 tokens = (int64_t)c->model.micro_batch * c->model.seq /
	    c->mesh.cp;

	if (v == NULL || strcmp(v, "uneven") == 0 || strcmp(v, "all") == 0)
		return true;
	switch (cfg_token_mask(v, &num, &den, buf, size)) {
	case -1:
		return false;
	case 1:
		/* lossnorm_masked_count masks at most ceil(tokens*num/den). */
		most = tokens / den * num + (tokens % den * num + den - 1) /
		    den;
		if (most < tokens)
			return true;
		snprintf(buf, size, "%s masks up to %" PRId64 " of the %"
		    PRId64 " token slots of a chunk (micro_batch*seq/cp), "
		    "leaving none valid: every chunk needs a valid token", v,
		    most, tokens);
		return false;
	}
	want = (int64_t)c->training.micro_batches * c->mesh.dp * c->mesh.cp;
	/* Counts separated by spaces, or by one comma and spaces. */
	for (p = v; *p == ' '; p++)
		continue;
	while (*p != '\0') {
		size_t	 digits = strspn(p, "0123456789");

		if (digits == 0 || digits > 9) {
			snprintf(buf, size, digits == 0 ? "valid_tokens is "
			    "\"uneven\", \"all\", \"eod:N\", \"fraction:F\" or a "
			    "list of token counts separated by spaces or "
			    "commas" : "valid token count "
			    "%.*s (item %" PRId64 ") is too large", (int)digits,
			    p, got + 1);
			return false;
		}
		n = strtol(p, &end, 10);
		if (n < 1 || n > tokens) {
			snprintf(buf, size, "valid token count %ld (item %"
			    PRId64 ") must be between 1 and the tokens of "
			    "a cp rank, micro_batch*seq/cp (%" PRId64 ")", n,
			    got + 1, tokens);
			return false;
		}
		got++;
		for (p = end; *p == ' '; p++)
			continue;
		if (*p == ',') {
			for (p++; *p == ' '; p++)
				continue;
			if (*p == '\0' || *p == ',') {
				snprintf(buf, size, "a comma "
				    "without a count after it (item %" PRId64
				    ")", got + 1);
				return false;
			}
		}
	}
	if (got == want)
		return true;
	snprintf(buf, size, "valid_tokens lists %" PRId64 " counts; it needs "
	    "one per micro-batch, dp rank and cp rank (micro_batches*dp*cp = %"
	    PRId64 ")", got, want);
	return false;
}

/*
 * qk_norm, kv_heads, attention_sink and out_norm: every tp rank holds
 * whole heads of the mixer's features.
 */
static bool
heads_split_over_tp(const struct config *c, char *buf, size_t size)
{
	if (!c->model.qk_norm && c->model.kv_heads == 0 &&
	    !c->model.attention_sink && !c->model.out_norm)
		return true;
	return must_be_divisible(buf, size, "ffn", c->model.ffn,
	    "tp*head_dim", (int64_t)c->mesh.tp * c->model.head_dim);
}

/*
 * model.duplicated_mixer: every tp rank computes the whole mixer, so
 * there are no heads split over tp for a head parameter to follow, and
 * generalized tensor parallelism, which shards the linears over gtp, has
 * no such module.  Modelled: the plain fc1, activation, fc2 of the
 * layers (the multi-token prediction layers keep theirs split).
 */
static bool
duplicated_mixer_fits(const struct config *c, char *buf, size_t size)
{
	const char	*with = NULL;

	if (!c->model.duplicated_mixer)
		return true;
	if (c->model.qk_norm)
		with = "model.qk_norm";
	else if (c->model.kv_heads > 0)
		with = "model.kv_heads";
	else if (c->model.attention_sink)
		with = "model.attention_sink";
	else if (c->model.out_norm)
		with = "model.out_norm";
	else if (c->mesh.gtp > 1)
		with = "mesh.gtp";
	else if (c->model.mtp > 0)
		with = "model.mtp";
	if (with == NULL)
		return true;
	snprintf(buf, size, "not modelled with %s: "
	    "a duplicated mixer is the plain fc1, activation and fc2 held "
	    "whole by every tp rank", with);
	return false;
}

/*
 * kv_heads: the query heads (ffn / head_dim) fall into kv_heads equal
 * groups, and the groups split over tp (kv_heads a multiple of tp, each
 * rank holding its own key/value heads) or tp over the groups (kv_heads
 * dividing tp, every rank holding all of them): a rank whose heads used
 * two key/value heads held by two other ranks has no layout.
 */
static bool
kv_heads_group_queries(const struct config *c, char *buf, size_t size)
{
	int	 kv = c->model.kv_heads, tp = c->mesh.tp;
	int64_t	 heads;

	if (kv == 0)
		return true;
	heads = c->model.ffn / c->model.head_dim;
	if (!must_be_divisible(buf, size, "query heads ffn/head_dim", heads,
	    "kv_heads", kv))
		return false;
	if (kv % tp == 0 || tp % kv == 0)
		return true;
	snprintf(buf, size, "kv_heads (%d) must divide or be a multiple of "
	    "tp (%d)", kv, tp);
	return false;
}

static bool
kv_fits(const struct config *c, char *buf, size_t size)
{
	return must_fit_param(buf, size, "kv_heads*head_dim*hidden",
	    (int64_t)c->model.kv_heads * c->model.head_dim * c->model.hidden);
}

/*
 * The model code counts the tokens of a micro-batch in an int; each factor
 * alone fits, but their product must too.
 */
static bool
tokens_fit(const struct config *c, char *buf, size_t size)
{
	int64_t	 tokens = (int64_t)c->model.micro_batch * c->model.seq;

	if (tokens <= CFG_MAX_MODEL_DIM)
		return true;
	snprintf(buf, size, "tokens per micro-batch micro_batch*seq (%" PRId64
	    ") must be at most %d", tokens, CFG_MAX_MODEL_DIM);
	return false;
}

static bool
embedding_fits(const struct config *c, char *buf, size_t size)
{
	return must_fit_param(buf, size, "padded vocab*hidden",
	    cfg_padded_vocab(c) * c->model.hidden);
}

static bool
ffn_fits(const struct config *c, char *buf, size_t size)
{
	return must_fit_param(buf, size, "ffn*hidden",
	    (int64_t)c->model.ffn * c->model.hidden);
}

static bool
experts_split_over_ep(const struct config *c, char *buf, size_t size)
{
	return must_be_divisible(buf, size, "experts", c->model.moe.experts,
	    "ep", c->mesh.ep);
}

/*
 * transformers' tensor-parallel plans give the experts to the tp ranks
 * (GroupedGemmParallel takes mesh.get_group("tp") as its ep group, each
 * rank E/tp experts whole): the ep group must be the tp group, with no
 * expert tensor parallelism inside it.
 */
static bool
ep_on_tp_mask_fits(const struct config *c, char *buf, size_t size)
{
	if (c->model.moe.ep_on != MOE_EP_TP_MASK ||
	    (c->mesh.ep == c->mesh.tp && c->mesh.etp == 1))
		return true;
	snprintf(buf, size, "ep_on tp-mask gives the experts to the tp "
	    "ranks: the ep group is the tp group, so mesh.ep must equal "
	    "mesh.tp (%d) and mesh.etp be 1 (they are %d and %d)",
	    c->mesh.tp, c->mesh.ep, c->mesh.etp);
	return false;
}

/*
 * tp-replicated (NeMo Automodel's custom MoE tensor parallelism, 41ccabac4):
 * every tp rank dispatches all of its tokens, and gradaudit follows them
 * where the ep group holds whole tp groups (mesh.ep a multiple of
 * mesh.tp, etp 1), so that the ranks sending the same tokens are in one
 * ep group; Automodel's moe mesh, ep the fastest factor of the
 * flattened (dp, cp, tp), is then the same.  The custom MoE path
 * refuses sequence parallelism (parallelize_model at 8a83fdcee).
 */
static bool
ep_on_tp_replicated_fits(const struct config *c, char *buf, size_t size)
{
	if (c->model.moe.ep_on != MOE_EP_TP_REPLICATED)
		return true;
	if (c->mesh.etp != 1 || c->mesh.ep % c->mesh.tp != 0) {
		snprintf(buf, size, "ep_on tp-replicated is modelled where "
		    "each ep group holds whole tp groups: mesh.ep must be a "
		    "multiple of mesh.tp (%d) and mesh.etp be 1 (they are %d "
		    "and %d)", c->mesh.tp, c->mesh.ep, c->mesh.etp);
		return false;
	}
	if (c->training.sequence_parallel) {
		snprintf(buf, size, "ep_on tp-replicated with "
		    "training.sequence_parallel is not modelled: the tokens "
		    "each tp rank dispatches are its whole replicated batch");
		return false;
	}
	return true;
}

/*
 * Under tp-replicated the experts' atoms keep one copy of a token per
 * tp group (symbolic/run.c twin_source): right while every tp rank's
 * copy carries the same gradient back.  The output layer's input
 * declared Replicate leaves each tp rank its own share of it, so the
 * copies differ (agree-random found run's self-check failing there).
 */
static bool
tp_replicated_output_modelled(const struct config *c, char *buf,
    size_t size)
{
	int	 i;

	if (c->model.moe.ep_on != MOE_EP_TP_REPLICATED || c->mesh.tp == 1)
		return true;
	for (i = 0; i < c->nplan; i++)
		if (c->plan[i].op == PLAN_DECLARE &&
		    c->plan[i].declare == PLAN_DECLARE_REPLICATE &&
		    c->plan[i].activation == PLAN_ACTIVATION_OUTPUT) {
			snprintf(buf, size, "ep_on tp-replicated with the "
			    "output layer's input gradient declared Replicate "
			    "(plan[%d]: declare: replicate, activation: "
			    "output) is not modelled: each tp rank's copy of "
			    "a token then carries its own share of the "
			    "gradient back to the experts", i);
			return false;
		}
	return true;
}

/* An auxiliary or z-loss coefficient other than zero. */
static bool
aux_losses_on(const struct config *c)
{
	int64_t	 n, d;

	return (cfg_decimal(c->model.moe.aux_loss_coeff, &n, &d) && n != 0) ||
	    (cfg_decimal(c->model.moe.z_loss_coeff, &n, &d) && n != 0);
}

/*
 * Under tp-replicated the auxiliary losses' gradient reaches the experts
 * of later layers through every tp rank's copy of the tokens, which the
 * atoms of the auxiliary losses (one sum per expert owner) do not follow.
 */
static bool
tp_replicated_aux_modelled(const struct config *c, char *buf, size_t size)
{
	if (c->model.moe.ep_on != MOE_EP_TP_REPLICATED || !aux_losses_on(c))
		return true;
	snprintf(buf, size, "ep_on tp-replicated with auxiliary losses "
	    "(aux_loss_coeff, z_loss_coeff) is not modelled");
	return false;
}

static bool
expert_ffn_split_over_etp(const struct config *c, char *buf, size_t size)
{
	return must_be_divisible(buf, size, "expert_ffn",
	    c->model.moe.expert_ffn, "etp", c->mesh.etp);
}

static bool
top_k_fits(const struct config *c, char *buf, size_t size)
{
	if (c->model.moe.top_k <= c->model.moe.experts)
		return true;
	snprintf(buf, size, "top_k (%d) must be at most experts (%d)",
	    c->model.moe.top_k, c->model.moe.experts);
	return false;
}

static bool
experts_fit(const struct config *c, char *buf, size_t size)
{
	return must_fit_param(buf, size, "experts*expert_ffn*hidden",
	    (int64_t)c->model.moe.experts * c->model.moe.expert_ffn *
	    c->model.hidden);
}

/*
 * What the framework can run (limits:, set by its profile).  The message
 * names the profile, since the config alone would be fine.
 */
static bool
framework_runs(const struct config *c, bool ok, const char *what,
    char *buf, size_t size)
{
	if (ok)
		return true;
	if (c->profile != NULL)
		snprintf(buf, size, "%s (profile %s) %s", c->framework,
		    c->profile->label, what);
	else
		snprintf(buf, size, "the limits: section says the framework "
		    "%s", what);
	return false;
}

static bool
framework_has_moe(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.moe, "has no mixture of experts",
	    buf, size);
}

static bool
framework_has_qk_norm(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, !c->model.qk_norm || c->limits.qk_norm,
	    "has no qk-norm", buf, size);
}

static bool
framework_has_attention_sink(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, !c->model.attention_sink ||
	    c->limits.attention_sink, "has no learnable attention sink",
	    buf, size);
}

static bool
framework_has_out_norm(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, !c->model.out_norm || c->limits.out_norm,
	    "has no mixer with an output norm (Gated DeltaNet)", buf, size);
}

static bool
framework_has_tp_mask(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->model.moe.ep_on != MOE_EP_TP_MASK ||
	    c->limits.tp_mask, "has no experts masked on the tp group "
	    "(model.moe.ep_on: tp-mask, transformers' expert parallelism): "
	    "it sends tokens to the experts' ranks", buf, size);
}

static bool
framework_has_tp_replicated(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->model.moe.ep_on != MOE_EP_TP_REPLICATED ||
	    c->limits.tp_replicated, "has no experts fed every tp rank's "
	    "copy of the tokens (model.moe.ep_on: tp-replicated, NeMo "
	    "Automodel's custom MoE tensor parallelism): each tp rank "
	    "dispatches tokens of its own", buf, size);
}

static bool
framework_has_global_aux(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->loss.aux_type != AUX_TYPE_GLOBAL ||
	    c->limits.global_aux, "has no load-balancing loss over the dp "
	    "group's counts (loss.aux_type: global-aux-loss)", buf, size);
}

/*
 * Under tp-mask every tp rank holds every token and the router's unmasked
 * logits, from which transformers computes the auxiliary losses whole on
 * each rank; the model seeds each rank's share of the tokens, as Megatron's
 * sequence parallelism does, so the two are not the same gradient.
 */
static bool
tp_mask_aux_modelled(const struct config *c, char *buf, size_t size)
{
	if (c->model.moe.ep_on != MOE_EP_TP_MASK || !aux_losses_on(c))
		return true;
	snprintf(buf, size, "ep_on tp-mask with auxiliary losses "
	    "(aux_loss_coeff, z_loss_coeff) is not modelled: each tp rank "
	    "computes them whole from the router's unmasked logits, which "
	    "the model does not follow");
	return false;
}

static bool
framework_has_etp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.etp || c->mesh.etp == c->mesh.tp,
	    "shards experts over tp like dense layers: etp must equal tp",
	    buf, size);
}

static bool
framework_moe_tp_sp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, !c->limits.moe_tp_needs_sp ||
	    c->mesh.tp == 1 || c->training.sequence_parallel,
	    "refuses to train a mixture of experts with tp > 1 without "
	    "sequence_parallel", buf, size);
}

static bool
framework_has_avg(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, !c->training.average_in_collective ||
	    c->limits.avg, "has no average_in_collective (Megatron a4b31f2, "
	    "0.8.0)", buf, size);
}

/*
 * Megatron 0.10 and 0.11 check the expert buffers' scaling factor under
 * average_in_collective in DistributedDataParallel.__init__: with etp
 * other than tp the assert fails (or dp // edp is 0), and training never
 * starts (fixed by 4f8974a400 in 0.12).
 */
static bool
framework_avg_etp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, !c->limits.avg_needs_etp_eq_tp ||
	    !c->training.average_in_collective || c->mesh.etp == c->mesh.tp,
	    "stops at start-up with average_in_collective and etp other "
	    "than tp: DistributedDataParallel asserts the expert gradient "
	    "scaling factor", buf, size);
}

/*
 * Megatron's shared experts and their gate arrived together (1fa9464e7c,
 * 0.10.0): an earlier release has neither.
 */
static bool
framework_has_shared_experts(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->model.moe.shared_experts == 0 ||
	    c->limits.shared_experts, "has no shared experts", buf, size);
}

/* The gate scales a shared expert's output: there must be one. */
static bool
gate_has_shared_expert(const struct config *c, char *buf, size_t size)
{
	if (!c->model.moe.shared_expert_gate || c->model.moe.shared_experts > 0)
		return true;
	snprintf(buf, size, "shared_expert_gate needs shared_experts (0) to "
	    "be at least 1");
	return false;
}

/*
 * Megatron core 0.4.0 (megatron/arguments.py validate_args): with expert
 * parallelism, tp > 1 needs sequence parallelism and the distributed
 * optimizer is refused; its SwitchMLP routes each token to one expert.
 */
static bool
framework_ep_tp_sp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, !c->limits.ep_tp_needs_sp || c->mesh.ep == 1 ||
	    c->mesh.tp == 1 || c->training.sequence_parallel,
	    "refuses expert parallelism with tp > 1 without sequence_parallel",
	    buf, size);
}

static bool
framework_ep_distopt(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.ep_distopt || c->mesh.ep == 1 ||
	    !c->training.distributed_optimizer, "refuses expert parallelism "
	    "with the distributed optimizer", buf, size);
}

static bool
framework_has_ep(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.ep || c->mesh.ep == 1,
	    "has no expert parallelism: ep must be 1", buf, size);
}

/*
 * torchtitan's ParallelDims (v0.2.0 on): with ep > 1, etp is 1 (ep
 * borrows tp, which needs ep % (cp * tp) == 0) or tp; with ep = 1 the
 * experts are sharded over tp by TensorParallel like dense layers.
 */
static bool
framework_etp_one_or_tp(const struct config *c, char *buf, size_t size)
{
	int	 ep = c->mesh.ep, etp = c->mesh.etp, tp = c->mesh.tp;

	if (!c->limits.etp_one_or_tp)
		return true;
	if (ep == 1)
		return framework_runs(c, etp == tp, "shards the experts "
		    "over tp like dense layers when ep is 1: etp must equal tp",
		    buf, size);
	return framework_runs(c, etp == 1 || etp == tp, "supports only etp "
	    "= 1 or etp = tp with ep > 1 (ParallelDims: \"Currently we only "
	    "support ETP=TP or ETP=1\")", buf, size);
}

/*
 * torchtitan main from c4b409af2 (PR #3167) has no expert tensor
 * parallelism: ParallelDims loses etp, the sparse mesh is (pp,
 * dp_replicate, efsdp, ep) with efsdp = dp_shard * cp * tp // ep, and
 * apply_moe_ep_tp shards the routed experts over ep alone
 * (ExpertParallel; ExpertTensorParallel is deleted), the tp group's
 * tokens split over tp: with ep > 1 the experts' tp is 1, and etp = tp
 * describes a run torchtitan can no longer start.
 */
static bool
framework_etp_one_with_ep(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, !c->limits.etp_one_with_ep ||
	    c->mesh.ep == 1 || c->mesh.etp == 1, "has no expert tensor "
	    "parallelism: with ep > 1 the routed experts are sharded over ep "
	    "alone (ExpertParallel on the sparse mesh (pp, dp_replicate, "
	    "efsdp, ep), efsdp = dp_shard*cp*tp/ep), so etp must be 1 "
	    "(ETP removed by c4b409af2, PR #3167)", buf, size);
}

/*
 * torchtitan v0.2.0's ParallelDims._validate: ep borrows all of cp, and
 * with etp = 1 all of tp too ("EP would borrow all cp and tp and some
 * dp_shard degree"), asserting ep % cp == 0 or ep % (cp * tp) == 0.
 * v0.2.1's mesh (183a0d2e7, PR #1660) asks only that ep * etp divide
 * dp_shard * cp * tp.
 */
static bool
framework_ep_borrows_all_cp_tp(const struct config *c, char *buf,
    size_t size)
{
	int	 ep = c->mesh.ep, cp = c->mesh.cp, tp = c->mesh.tp;
	bool	 tp_too = c->mesh.etp == 1;

	if (!c->limits.ep_borrows_all_cp_tp || ep == 1)
		return true;
	return framework_runs(c, ep % (tp_too ? cp * tp : cp) == 0, tp_too ?
	    "borrows all of cp and tp for ep with etp = 1: ep must be a "
	    "multiple of cp*tp (ParallelDims asserts ep % (cp * tp) == 0)" :
	    "borrows all of cp for ep with etp = tp: ep must be a multiple "
	    "of cp (ParallelDims asserts ep % cp == 0)", buf, size);
}

/*
 * torchtitan's parallelize (llama3 and llama4 at every release): on the
 * DDP path, raise RuntimeError when the world is more than the
 * dp_replicate mesh.
 */
static bool
framework_ddp_one_dim(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, !c->limits.ddp_needs_one_dim ||
	    !cfg_ddp_path(c) || (c->mesh.tp == 1 && c->mesh.pp == 1),
	    "wraps the model in DDP when dp_shard and cp are 1 and refuses "
	    "it with tp or pp > 1 (parallelize: \"DDP has not supported "
	    "> 1D parallelism\")", buf, size);
}

/*
 * torchtitan's seq_len_divisor (v0.2.0 on), asserted by every model's
 * parallelize: tp * (cp * 2), even with cp = 1.  From 565cb810c (PR #3664)
 * on main the trainer checks tp * (2 * cp if cp > 1 else 1) instead, tp
 * counting only with sequence parallelism ("parallel_dims.tp if
 * config.parallelism.enable_sequence_parallel else 1"; optional on main
 * since aa68af18e), and from 73aed7f6c (PR #4121), which folds the batch
 * into the token dimension, of the micro-batch's tokens, micro_batch *
 * seq, not of seq.
 */
static bool
framework_seq_divisor(const struct config *c, char *buf, size_t size)
{
	enum seq_divisor	 sd = c->limits.seq_divisor;
	bool			 sp = sd == SEQ_DIVISOR_2_CP_TP ||
				    c->training.sequence_parallel;
	int64_t			 tp = sp ? c->mesh.tp : 1;
	int64_t			 d = 2 * c->mesh.cp * tp;
	int64_t			 n = c->model.seq;
	const char		*dw;
	char			 what[320];

	if (sd == SEQ_DIVISOR_CP_TP)
		return true;
	if (sd == SEQ_DIVISOR_TOKENS_2_CP_TP_IF_CP)
		n *= c->model.micro_batch;
	if (sd != SEQ_DIVISOR_2_CP_TP && c->mesh.cp == 1)
		d = tp;
	if (n % d == 0)
		return true;
	/* Without sequence parallelism tp does not count. */
	dw = c->mesh.cp == 1 ? "tp" : sp ? "2*cp*tp" : "2*cp";
	if (sd == SEQ_DIVISOR_TOKENS_2_CP_TP_IF_CP)
		snprintf(what, sizeof what, "needs micro_batch*seq (%" PRId64
		    ") divisible by %s (%" PRId64 "): \"The number of tokens "
		    "per pipeline microbatch (%" PRId64 ") must be divisible "
		    "by %" PRId64 " for the configured sequence/context "
		    "parallelism\"", n, dw, d, n, d);
	else if (sd == SEQ_DIVISOR_2_CP_TP_IF_CP)
		snprintf(what, sizeof what, "needs seq (%d) divisible by %s "
		    "(%" PRId64 "): \"Training sequence length must be "
		    "divisible by %" PRId64 " for the configured "
		    "sequence/context parallelism\"", c->model.seq, dw, d, d);
	else
		snprintf(what, sizeof what, "needs seq (%d) divisible by "
		    "2*cp*tp (%" PRId64 "): \"Sequence length must be "
		    "divisible by the product of TP degree and 2 * CP "
		    "degree\"", c->model.seq, d);
	return framework_runs(c, false, what, buf, size);
}

static bool
framework_top_k(const struct config *c, char *buf, size_t size)
{
	char	what[64];

	snprintf(what, sizeof what, "routes each token to at most %d "
	    "expert%s", c->limits.max_top_k, c->limits.max_top_k == 1 ?
	    "" : "s");
	return framework_runs(c, c->limits.max_top_k == 0 ||
	    c->model.moe.top_k <= c->limits.max_top_k, what, buf, size);
}

/* Before 47ab878ae7 (0.10.0) every layer of a Megatron MoE is a MoE layer. */
static bool
framework_moe_every(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.moe_every || c->model.moe.every == 1,
	    "puts experts in every layer: every must be 1", buf, size);
}

/*
 * Before 47ab878ae7 (0.10.0) Megatron's experts are ffn_hidden_size wide:
 * a config that writes another expert_ffn describes no such release.  An
 * unwritten expert_ffn keeps gradaudit's small default, whose width no
 * synchronization depends on.
 */
static bool
framework_expert_ffn(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.expert_ffn ||
	    !keyset_has(&c->given, KEY_EXPERT_FFN) ||
	    c->model.moe.expert_ffn == c->model.ffn, "makes experts as wide "
	    "as ffn: expert_ffn must equal it (--moe-ffn-hidden-size arrives "
	    "with 47ab878ae7, 0.10.0)", buf, size);
}

/* Before c6e3b0c5bb (0.11.0) Megatron's router scores are a softmax. */
static bool
framework_sigmoid(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.sigmoid ||
	    c->model.moe.score_func != SCORE_SIGMOID, "scores experts with a "
	    "softmax only (the sigmoid arrives with c6e3b0c5bb, 0.11.0)",
	    buf, size);
}

/*
 * Where the scores multiply decides which gradients are Partial (torchtitan
 * #2387): a release that scales the routed input before the experts only
 * must not be audited as if it scaled their output.
 */
static bool
framework_score_after(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.score_after ||
	    c->model.moe.score_before_experts, "scales the routed input by "
	    "its scores before the experts: score_before_experts must be true",
	    buf, size);
}

/*
 * The other way round: torchtitan main from cd8950ba7 (PR #3663) drops
 * the token dispatchers' score_before_experts and multiplies the scores
 * into the experts' outputs in combine, always.
 */
static bool
framework_score_before(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.score_before ||
	    !c->model.moe.score_before_experts, "scales the experts' outputs "
	    "by their scores, never the routed input: score_before_experts "
	    "must be false", buf, size);
}

static bool
framework_moe_pattern(const struct config *c, char *buf, size_t size)
{
	const char *p = c->model.moe.pattern;

	return framework_runs(c, c->limits.moe_every || p == NULL ||
	    strchr(p, '0') == NULL, "puts experts in every layer: a pattern "
	    "can only be all 1", buf, size);
}

static bool
framework_uneven_pp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.uneven_pp ||
	    (c->model.first_stage_layers == 0 &&
	    c->model.last_stage_layers == 0), "splits the layers evenly over "
	    "the stages (uneven pipelines arrive with fa8bb5921b, 0.9.0)",
	    buf, size);
}

/*
 * sync.dp_group: dp models a DDP all-reduce (VeOmni #1115); the
 * distributed optimizer shards its buffers over the whole dp_cp group.
 */
static bool
dp_group_without_distopt(const struct config *c, char *buf, size_t size)
{
	if (c->sync.dp_group != DP_GROUP_DP ||
	    !c->training.distributed_optimizer)
		return true;
	snprintf(buf, size, "dp_group dp models a DDP all-reduce over dp "
	    "alone; the distributed optimizer shards over dp*cp");
	return false;
}

static bool
framework_vpp_pp(const struct config *c, char *buf, size_t size)
{
	char	 what[96];

	snprintf(what, sizeof what, "needs pp >= %d with an interleaved "
	    "pipeline (vpp > 1)", c->limits.vpp_min_pp);
	return framework_runs(c, c->mesh.vpp == 1 ||
	    c->mesh.pp >= c->limits.vpp_min_pp, what, buf, size);
}

static bool
framework_uneven_vpp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.uneven_vpp || c->mesh.vpp == 1 ||
	    (c->model.first_stage_layers == 0 &&
	    c->model.last_stage_layers == 0), "refuses an uneven pipeline "
	    "with an interleaved one (get_num_layers_to_build asserts it "
	    "until 0.11.0)", buf, size);
}

/*
 * Megatron core 0.8.0 asserts under average_in_collective that the
 * scaling factor over the dp group is 1/dp_cp, which fails with cp > 1
 * (distributed_data_parallel.py, fixed by 3bdcbbbe5d in 0.9.0).
 */
/*
 * HSDP splits the data-parallel ranks into dp_replicate groups of
 * dp_shard (torchtitan's ParallelDims asserts dp_replicate * dp_shard *
 * cp * tp * pp == world); only the FSDP engines have a replicate dimension.
 */
static bool
replicate_fits(const struct config *c, char *buf, size_t size)
{
	if (c->mesh.dp_replicate > 1 &&
	    c->layout.dp_engine == DP_ENGINE_MEGATRON) {
		snprintf(buf, size, "dp_replicate (%d) needs layout.dp_engine "
		    "fsdp2 or fsdp1: Megatron's buffers have no replicate "
		    "dimension", c->mesh.dp_replicate);
		return false;
	}
	return must_divide(buf, size, "dp_replicate", c->mesh.dp_replicate,
	    "dp", c->mesh.dp);
}

/*
 * Experts shard over what ep leaves of a replica, dp_shard*cp*tp/(ep*etp)
 * (torchtitan's dp_shard_mod_ep): ep*etp must divide it.
 */
static bool
expert_shard_fits(const struct config *c, char *buf, size_t size)
{
	if (c->mesh.dp_replicate == 1)
		return true;
	return must_divide(buf, size, "ep*etp", (int64_t)c->mesh.ep *
	    c->mesh.etp, "dp_shard*cp*tp", (int64_t)c->mesh.dp /
	    c->mesh.dp_replicate * c->mesh.cp * c->mesh.tp);
}

/*
 * Generalized tensor parallelism (Megatron c5ff22b7f1, #4967, in
 * core_v0.19.0): gtp_remat is a factor of the data-parallel ranks
 * (parallel_state.py initialize_model_parallel counts it in the world and
 * builds dp_cp without it), and egtp_remat one of the expert
 * data-parallel ranks.  The mesh puts gtp fastest within dp (after cp)
 * and egtp fastest within edp (model/mesh.h), so each must divide its
 * axis.  Megatron's DDP is the only engine with it, and its mean over
 * gtp is modelled without average_in_collective only.
 */
static bool
gtp_fits(const struct config *c, char *buf, size_t size)
{
	if (c->mesh.gtp == 1)
		return true;
	if (c->layout.dp_engine != DP_ENGINE_MEGATRON) {
		snprintf(buf, size, "gtp (%d) needs layout.dp_engine megatron: "
		    "generalized tensor parallelism is Megatron's DDP's",
		    c->mesh.gtp);
		return false;
	}
	if (c->training.average_in_collective) {
		snprintf(buf, size, "gtp (%d) with "
		    "training.average_in_collective is not modelled: the "
		    "gtp mean is the prescale of a sum (Megatron's "
		    "GTPShardedParam._prescale_wgrads_for_mean_rs)",
		    c->mesh.gtp);
		return false;
	}
	return must_divide(buf, size, "gtp", c->mesh.gtp, "dp", c->mesh.dp);
}

static bool
egtp_fits(const struct config *c, char *buf, size_t size)
{
	int64_t	 expert = (int64_t)c->mesh.ep * c->mesh.etp;

	if (c->mesh.egtp == 1)
		return true;
	if (c->layout.dp_engine != DP_ENGINE_MEGATRON ||
	    c->training.average_in_collective) {
		snprintf(buf, size, "egtp (%d) needs layout.dp_engine megatron "
		    "without training.average_in_collective, as gtp does",
		    c->mesh.egtp);
		return false;
	}
	return must_divide(buf, size, "egtp", c->mesh.egtp, "edp",
	    (int64_t)c->mesh.dp * c->mesh.cp *
	    c->mesh.tp / expert);
}

static bool
framework_has_gtp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->mesh.gtp == 1 || c->limits.gtp,
	    "has no generalized tensor parallelism (mesh.gtp, mesh.egtp)",
	    buf, size);
}

/* The same, for the experts' axis: its own key and place. */
static bool
framework_has_egtp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->mesh.egtp == 1 || c->limits.gtp,
	    "has no generalized tensor parallelism (mesh.gtp, mesh.egtp)",
	    buf, size);
}

/* Only the FSDP2 engine flattens a unit's parameters (layout.fsdp_flatten). */
static bool
flatten_fits(const struct config *c, char *buf, size_t size)
{
	if (c->layout.fsdp_flatten == FSDP_FLATTEN_PARAMETER ||
	    c->layout.dp_engine == DP_ENGINE_FSDP2)
		return true;
	snprintf(buf, size, "%s needs layout.dp_engine fsdp2",
	    c->layout.fsdp_flatten == FSDP_FLATTEN_UNIT ? "unit" : "group");
	return false;
}

/*
 * Megatron 0.8.0 asserts the AVG's scaling factor against the dp size
 * without cp only when the loss is not per token (core_v0.8.0 DDP
 * __init__: "if not config.calculate_per_token_loss"), a per-token loss
 * being sync.dp_divisor: none.
 */
static bool
framework_avg_cp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.avg_cp ||
	    !c->training.average_in_collective || c->mesh.cp == 1 ||
	    c->sync.dp_divisor == SIZE_ONE,
	    "stops at start-up with average_in_collective and cp > 1: "
	    "DistributedDataParallel asserts its scaling factor",
	    buf, size);
}

/*
 * Megatron from 5946e24b37 (core_v0.12.0) refuses average_in_collective
 * with a per-token loss (calculate_per_token_loss: sync.dp_divisor none).
 */
static bool
framework_avg_per_token(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.avg_per_token ||
	    !c->training.average_in_collective ||
	    c->sync.dp_divisor != SIZE_ONE,
	    "stops at start-up with average_in_collective and a per-token "
	    "loss (sync.dp_divisor: none): DistributedDataParallel asserts "
	    "\"Cannot average in collective when calculating per-token "
	    "loss!\"", buf, size);
}

static bool
framework_mtp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.mtp || c->model.mtp == 0,
	    "has no multi-token prediction", buf, size);
}

static bool
framework_mtp_cp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.mtp_cp || c->model.mtp == 0 ||
	    c->mesh.cp == 1, "stops at start-up with multi-token prediction "
	    "and cp > 1 (Megatron's arguments assert context_parallel_size "
	    "== 1; torchtitan's MTPDecoder raises \"MTP does not support "
	    "context parallelism yet.\")", buf, size);
}

/* torchtitan f59c215e8 on: MTPDecoder refuses pp > 1 (no stage split). */
static bool
framework_mtp_pp(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, c->limits.mtp_pp || c->model.mtp == 0 ||
	    c->mesh.pp == 1, "stops at start-up with multi-token prediction "
	    "and pp > 1: \"MTP does not support pipeline parallelism yet.\"",
	    buf, size);
}

/*
 * PyTorch's FSDP2 from #176225/#176257 (squashed, 2026-03): the root's
 * lazy init, at the first forward, walks every fully_shard group and
 * raises when two of them were built from one parameter
 * (_fsdp_state.py _validate_no_duplicate_params, read at pytorch
 * 01c9f4fcc3).  Before it that setup trained, with stale rows
 * (model/stale.h, pytorch #176076).
 */
static bool
framework_shared_param(const struct config *c, char *buf, size_t size)
{
	return framework_runs(c, !c->limits.shared_param_refused ||
	    !cfg_tied_split(c), "wraps the tied embedding and output weight "
	    "in two fully_shard groups, which PyTorch's FSDP2 refuses at the "
	    "first forward (pytorch #176257): \"ValueError: Parameter '...' "
	    "is shared with a parameter already managed by another FSDP "
	    "group. For shared/tied parameters, use fully_shard([module_a, "
	    "module_b]) to place them in the same FSDP group.\"", buf, size);
}

static const struct constraint constraints[] = {
	{ KEY_ETP, false, etp_divides_tp },
	{ KEY_EP, false, expert_mesh_fits },
	{ KEY_LAYERS, false, layers_split_over_pp },
	{ KEY_VOCAB, false, padded_vocab_fits },
	{ KEY_FFN, false, ffn_split_over_tp },
	{ KEY_HEAD_DIM, false, heads_split_over_tp },
	{ KEY_KV_HEADS, false, kv_heads_group_queries },
	{ KEY_DUPLICATED_MIXER, false, duplicated_mixer_fits },
	{ KEY_KV_HEADS, false, kv_fits },
	{ KEY_SEQ, false, seq_split_over_tp },
	{ KEY_SEQ, false, tokens_fit },
	{ KEY_VALID_TOKENS, false, valid_tokens_fit },
	{ KEY_AUX_LOSS_COEFF, true, aux_coeff_fits },
	{ KEY_SHARED_EXPERT_FFN, true, shared_ffn_split_over_tp },
	{ KEY_SHARED_EXPERT_FFN, true, shared_ffn_fits },
	{ KEY_Z_LOSS_COEFF, true, z_coeff_fits },
	{ KEY_AUX_OBJECTIVE, true, aux_objective_fits },
	{ KEY_AUX_TYPE, true, aux_type_fits },
	{ KEY_MTP_LOSS_SCALING_FACTOR, false, mtp_factor_fits },
	/*
	 * What the framework itself refuses comes before what gradaudit
	 * does not model, here and for ep_on below: the user's run would
	 * stop there first, and a torchtitan release without multi-token
	 * prediction was told that its MoE boundary was not modelled with
	 * MTP.
	 */
	{ KEY_MTP, false, framework_mtp },
	{ KEY_MTP, false, framework_mtp_cp },
	{ KEY_MTP, false, framework_mtp_pp },
	{ KEY_MTP, true, mtp_without_boundary },
	{ KEY_MTP, false, mtp_without_output_boundary },
	{ KEY_SEQ, false, mtp_pieces_fit },
	{ KEY_DP_GROUP, false, dp_group_without_distopt },
	{ KEY_VOCAB, false, embedding_fits },
	{ KEY_FFN, false, ffn_fits },
	{ KEY_EXPERTS, true, experts_split_over_ep },
	{ KEY_EXPERT_FFN, true, expert_ffn_split_over_etp },
	{ KEY_TOP_K, true, top_k_fits },
	{ KEY_EXPERTS, true, experts_fit },
	{ KEY_MOE, true, framework_has_moe },
	{ KEY_QK_NORM, false, framework_has_qk_norm },
	{ KEY_ATTENTION_SINK, false, framework_has_attention_sink },
	{ KEY_OUT_NORM, false, framework_has_out_norm },
	{ KEY_EP_ON, false, framework_has_tp_mask },
	{ KEY_EP_ON, false, framework_has_tp_replicated },
	{ KEY_EP_ON, true, ep_on_tp_mask_fits },
	{ KEY_EP_ON, true, ep_on_tp_replicated_fits },
	{ KEY_EP_ON, true, tp_replicated_aux_modelled },
	{ KEY_EP_ON, true, tp_replicated_output_modelled },
	{ KEY_EP_ON, true, tp_mask_aux_modelled },
	{ KEY_AUX_TYPE, false, framework_has_global_aux },
	{ KEY_ETP, true, framework_has_etp },
	{ KEY_SEQUENCE_PARALLEL, true, framework_moe_tp_sp },
	{ KEY_AVERAGE_IN_COLLECTIVE, false, framework_has_avg },
	{ KEY_AVERAGE_IN_COLLECTIVE, true, framework_avg_etp },
	{ KEY_SHARED_EXPERT_GATE, true, gate_has_shared_expert },
	{ KEY_SHARED_EXPERTS, true, framework_has_shared_experts },
	{ KEY_SEQUENCE_PARALLEL, true, framework_ep_tp_sp },
	{ KEY_DISTRIBUTED_OPTIMIZER, true, framework_ep_distopt },
	{ KEY_EP, true, framework_has_ep },
	{ KEY_ETP, true, framework_etp_one_with_ep },
	{ KEY_ETP, true, framework_etp_one_or_tp },
	{ KEY_EP, true, framework_ep_borrows_all_cp_tp },
	{ KEY_TOP_K, true, framework_top_k },
	{ KEY_EVERY, true, framework_moe_every },
	{ KEY_EXPERT_FFN, true, framework_expert_ffn },
	{ KEY_SCORE_FUNC, true, framework_sigmoid },
	{ KEY_SCORE_BEFORE_EXPERTS, true, framework_score_after },
	{ KEY_SCORE_BEFORE_EXPERTS, true, framework_score_before },
	{ KEY_PATTERN, true, pattern_fits },
	{ KEY_PATTERN, true, framework_moe_pattern },
	{ KEY_FIRST_STAGE_LAYERS, false, framework_uneven_pp },
	{ KEY_VPP, false, vpp_fits },
	{ KEY_VPP, false, framework_vpp_pp },
	{ KEY_VPP, false, framework_uneven_vpp },
	{ KEY_AVERAGE_IN_COLLECTIVE, false, framework_avg_cp },
	{ KEY_AVERAGE_IN_COLLECTIVE, false, framework_avg_per_token },
	{ KEY_DP_REPLICATE, false, replicate_fits },
	{ KEY_DP_REPLICATE, true, expert_shard_fits },
	{ KEY_DP_REPLICATE, false, framework_ddp_one_dim },
	{ KEY_SEQ, false, framework_seq_divisor },
	{ KEY_FSDP_FLATTEN, false, flatten_fits },
	{ KEY_SHARED_PARAM_REFUSED, false, framework_shared_param },
	{ KEY_OBJECTIVE, false, sample_mean_expressible },
	{ KEY_GTP, false, framework_has_gtp },
	{ KEY_EGTP, false, framework_has_egtp },
	{ KEY_GTP, false, gtp_fits },
	{ KEY_EGTP, true, egtp_fits },
	{ KEY_PLAN, false, plan_fits },
};

/*
 * The first violated rule, described in buf, with the key it concerns; or
 * KEY__COUNT when the config is valid.  After the world size, the integer
 * ranges of the key table come first: they are checked on parsing already, but a default (layers =
 * pp) or a mesh built by sweep can still break them.
 */
enum cfg_key
cfg_find_violation(const struct config *c, char *buf, size_t size)
{
	const struct cfg_key_def	*d;
	size_t			 i;
	int64_t			 v;
	int			 k;

	/*
	 * The world size first: a huge pp makes the defaulted layers (= pp)
	 * out of range too, and the mesh is what the user has to change.
	 */
	if (!world_fits(c, buf, size))
		return KEY_MESH;
	for (k = 0; k < KEY__COUNT; k++) {
		d = &cfg_keys[k];
		if ((d->type != CFG_TYPE_INT && d->type != CFG_TYPE_INT64) ||
		    !cfg_key_is_active(c, (enum cfg_key)k))
			continue;
		v = cfg_key_get(c, (enum cfg_key)k);
		if (v >= d->min && v <= d->max)
			continue;
		if (v < d->min && d->min > 1)
			snprintf(buf, size, "%s (%" PRId64 ") must be at least %"
			    PRId64, cfg_key_leaf((enum cfg_key)k), v, d->min);
		else if (v < d->min)
			snprintf(buf, size, "%s (%" PRId64 ") must be %s",
			    cfg_key_leaf((enum cfg_key)k), v, d->min > 0 ?
			    "positive" : "non-negative");
		else
			snprintf(buf, size, "%s (%" PRId64 ") must be at most %"
			    PRId64, cfg_key_leaf((enum cfg_key)k), v, d->max);
		return (enum cfg_key)k;
	}
	for (i = 0; i < sizeof(constraints) / sizeof(constraints[0]); i++) {
		if (constraints[i].moe_only && !c->model.has_moe)
			continue;
		if (!constraints[i].holds(c, buf, size))
			return constraints[i].key;
	}
	return KEY__COUNT;
}

const char *
cfg_check_constraints(const struct config *c, char *buf, size_t len)
{
	if (cfg_find_violation(c, buf, len) == KEY__COUNT)
		return NULL;
	return buf;
}

/*
 * Keys that have no effect in the config that writes them: loss.aux_type
 * without model.moe is read by nothing that audits a dense model, and a
 * user who wrote it believes it was audited.  One row per key and the
 * condition under which the code reads it, each condition as read from
 * the code that reads the key (cited); the loader warns about a key the
 * file or --set wrote (not a profile, not a default) whose condition is
 * false.  `needs` is the key whose value gives it effect: sweep, which
 * replaces that value with its own, does not warn about it.
 */
static bool
moe_present(const struct config *c)
{
	return c->model.has_moe;
}

/*
 * egtp splits the expert mesh (mesh.c) only; a plan may still name the
 * egtp axis or its size in an expression (plan.c), so a written plan
 * keeps it in effect.
 */
static bool
moe_or_plan_present(const struct config *c)
{
	return c->model.has_moe || keyset_has(&c->given, KEY_PLAN);
}

/*
 * syncplan.c's data-parallel divisor: the expert buffers divide by egtp
 * or gtp only when the one chosen is above 1 (or, for the step's key,
 * when they differ).
 */
static bool
gtp_present(const struct config *c)
{
	return c->mesh.gtp > 1 || c->mesh.egtp > 1;
}

/* gradnorm.c filters the ROLE_SINK parameters, made by model.c alone. */
static bool
sink_present(const struct config *c)
{
	return c->model.attention_sink;
}

/* emit_qk_norms and emit_out_norms act on those norms' parameters only. */
static bool
qk_norm_present(const struct config *c)
{
	return c->model.qk_norm;
}

static bool
out_norm_present(const struct config *c)
{
	return c->model.out_norm;
}

/* lossnorm.c weighs the multi-token prediction losses, with model.mtp. */
static bool
mtp_present(const struct config *c)
{
	return c->model.mtp > 0;
}

/* lossnorm.c, diagnose.c and explain read it only with pp > 1. */
static bool
pipeline_present(const struct config *c)
{
	return c->mesh.pp > 1;
}

/*
 * syncplan.c's emit_fsdp_buffer reads the factor's meaning for FSDP2
 * alone: FSDP1 has no custom factor of its own, Megatron's buffers none.
 */
static bool
fsdp2_present(const struct config *c)
{
	return c->layout.dp_engine == DP_ENGINE_FSDP2;
}

/*
 * placement.c's pl_dispatched_slices: every ep_on dispatches the same
 * tokens with one tp rank (the slices are tp / etp, etp at most tp).
 */
static bool
tp_present(const struct config *c)
{
	return c->mesh.tp > 1;
}

struct no_effect {
	enum cfg_key	  key;		/* the key written */
	enum cfg_key	  needs;	/* the key that gives it effect */
	bool		(*effective)(const struct config *);
	const char	 *without;	/* "has no effect without ..." */
};

static const struct no_effect no_effects[] = {
	{ KEY_AUX_TYPE, KEY_MOE, moe_present, "model.moe" },
	{ KEY_AUX_OBJECTIVE, KEY_MOE, moe_present, "model.moe" },
	{ KEY_AUX_SCALE, KEY_MOE, moe_present, "model.moe" },
	{ KEY_EGTP, KEY_MOE, moe_or_plan_present, "model.moe" },
	{ KEY_ROUTER_GRAD, KEY_MOE, moe_present, "model.moe" },
	{ KEY_EXPERT_INPUT_GRAD, KEY_MOE, moe_present, "model.moe" },
	{ KEY_MOE_INPUT_GRAD, KEY_MOE, moe_present, "model.moe" },
	{ KEY_ROUTER_INPUT_GRAD, KEY_MOE, moe_present, "model.moe" },
	{ KEY_EXPERT_GRAD_DIVISOR, KEY_MOE, moe_present, "model.moe" },
	{ KEY_EXPERT_AVG_SCALE, KEY_MOE, moe_present, "model.moe" },
	{ KEY_EXPERT_GTP_DIVISOR, KEY_MOE, moe_present, "model.moe" },
	{ KEY_EXPERT_GTP_DIVISOR, KEY_GTP, gtp_present,
	  "mesh.gtp or mesh.egtp above 1" },
	{ KEY_EXPERT_TP_DIVISOR, KEY_MOE, moe_present, "model.moe" },
	{ KEY_EXPERT_TP_DIVISOR, KEY_TP, tp_present, "mesh.tp above 1" },
	{ KEY_EXPERT_BUFFER, KEY_MOE, moe_present, "model.moe" },
	{ KEY_EXPERT_DIM_MESH, KEY_MOE, moe_present, "model.moe" },
	{ KEY_EXPERT_FILTER, KEY_MOE, moe_present, "model.moe" },
	{ KEY_EXPERT_NORM, KEY_MOE, moe_present, "model.moe" },
	{ KEY_SINK_FILTER, KEY_ATTENTION_SINK, sink_present,
	  "model.attention_sink: true" },
	{ KEY_QK_NORM_GRAD, KEY_QK_NORM, qk_norm_present,
	  "model.qk_norm: true" },
	{ KEY_OUT_NORM_GRAD, KEY_OUT_NORM, out_norm_present,
	  "model.out_norm: true" },
	{ KEY_MTP_SCALE, KEY_MTP, mtp_present, "model.mtp above 0" },
	{ KEY_MTP_OBJECTIVE, KEY_MTP, mtp_present, "model.mtp above 0" },
	{ KEY_MTP_LOSS_SCALING_FACTOR, KEY_MTP, mtp_present,
	  "model.mtp above 0" },
	{ KEY_PP_NORMALIZE_BY, KEY_PP, pipeline_present, "mesh.pp above 1" },
	{ KEY_FSDP_DIVIDE_FACTOR, KEY_DP_ENGINE, fsdp2_present,
	  "layout.dp_engine: fsdp2" },
	{ KEY_EP_ON, KEY_TP, tp_present, "mesh.tp above 1" },
};

static bool
warns(const struct config *c, const struct keyset *varying,
    const struct no_effect *r)
{
	return keyset_has(&c->given, r->key) && !r->effective(c) &&
	    (varying == NULL || !keyset_has(varying, r->needs));
}

int
cfg_find_no_effect(const struct config *c, const struct keyset *varying,
    int from, enum cfg_key *key, const char **without)
{
	int	 i, n = (int)(sizeof(no_effects) / sizeof(no_effects[0]));

	for (i = from; i < n; i++) {
		if (!warns(c, varying, &no_effects[i]))
			continue;
		/* A key's rows are adjacent: one warning for it, the first. */
		if (i > 0 && no_effects[i - 1].key == no_effects[i].key &&
		    warns(c, varying, &no_effects[i - 1]))
			continue;
		*key = no_effects[i].key;
		*without = no_effects[i].without;
		return i;
	}
	return -1;
}
