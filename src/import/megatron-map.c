/*
 * gradaudit import megatron, the values (megatron-map.h): each argument's
 * value read, checked against the others, and mapped onto the keys of
 * gradaudit.yaml(5), with the comment that says where it came from.  The
 * release --framework names decides where Megatron's defaults changed.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/framework.h"
#include "import/megatron-map.h"
#include "import/megatron-pattern.h"
#include "import/megatron-state.h"

/*
 * The values read, before any is checked against another: so that one bad
 * number is reported once, not again through everything derived from it.
 */
struct megatron_values {
	long	 tp, pp, ep, etp, layers, hidden, ffn, heads, kv_channels;
	long	 gtp_shards, egtp_shards;	/* 0: not given */
	long	 seq, micro_batch, vocab, padded, divisible, experts, topk;
	long	 moe_ffn, shared, bucket, first_stage, last_stage;
	long	 vpp_layers, vpp_stages, split_extra, mtp;
	enum mapped_arg layers_arg, seq_arg;
	bool	 split_embedding, split_loss;
	bool	 swiglu, untie, qk_layernorm, probs_on_input, distopt, overlap;
	bool	 mla;
	bool	 sink;		/* --softmax-type learnable */
	bool	 shared_gate;
	bool	 sp, average, pad, mfsdp;
	long	 cp;
	bool	 eod_mask, per_token;
};

/* An argument read for its value's sake only: listed as ignored. */
static void
set_aside(struct import_state *st, enum mapped_arg k)
{
	st->use[k].used = false;
}

/*
 * validate_args: a size given by its old name (--encoder-num-layers for
 * --num-layers, --encoder-seq-length for --seq-length) when the new one is
 * not; Megatron asserts that not both are.
 */
static enum mapped_arg
size_argument(struct import_state *st, enum mapped_arg name, enum mapped_arg old)
{
	if (!st->use[old].given)
		return name;
	if (st->use[name].given) {
		mg_refuse(st, "--%s and --%s: Megatron's validate_args asserts "
		    "that only one is given", megatron_args[name].name,
		    megatron_args[old].name);
		return name;
	}
	return old;
}

/*
 * --softmax-type (arguments.py, choices learnable, vanilla and
 * off-by-one): only a learnable offset is a parameter.
 */
static bool
learnable_sink(struct import_state *st)
{
	const char	*type = st->use[MA_SOFTMAX_TYPE].value;
	struct shown	 sh;

	if (type == NULL)
		return false;
	st->use[MA_SOFTMAX_TYPE].used = true;
	if (strcmp(type, "learnable") == 0)
		return true;
	if (strcmp(type, "vanilla") != 0 && strcmp(type, "off-by-one") != 0)
		mg_refuse(st, "--softmax-type \"%s\": Megatron's parser "
		    "accepts learnable, vanilla and off-by-one",
		    mg_shown(&sh, type));
	return false;
}

/*
 * Generalized tensor parallelism (core_v0.19.0 model_parallel_config.py
 * resolve_tensor_parallel_weight_shards): the weight shards over tp (etp)
 * and gtp, so gtp is the shards over tp; Megatron refuses fewer shards
 * than tp or a number tp does not divide.  Its data_parallel_size leaves
 * the gtp ranks out; mesh.dp counts them, world / (tp*pp*cp) as before.
 */
static bool
weight_shards(struct import_state *st, long shards, long tp,
    const char *flag, const char *tp_name, enum cfg_key key, int *gtp)
{
	if (shards == 0)
		return true;
	if (shards < tp || shards % tp != 0) {
		mg_refuse(st, "%s %ld must be a multiple of %s %ld (Megatron's "
		    "resolve_tensor_parallel_weight_shards raises ValueError)",
		    flag, shards, tp_name, tp);
		return false;
	}
	*gtp = (int)(shards / tp);
	if (*gtp > 1)
		mg_explain(st, key, "%s %ld / %s %ld", flag, shards, tp_name,
		    tp);
	return true;
}

static void
read_values(struct import_state *st, struct megatron_values *v)
{
	const long	 mesh = CFG_MAX_MESH_DIM, dim = CFG_MAX_MODEL_DIM;
	struct shown	 sh;
	bool		 no_pad, disable_pad;

	v->tp = mg_int_arg(st, MA_TP, 1, mesh, 1);
	v->cp = mg_int_arg(st, MA_CP, 1, mesh, 1);
	v->gtp_shards = mg_int_arg(st, MA_GTP_SHARDS, 1, mesh, 0);
	v->egtp_shards = mg_int_arg(st, MA_EGTP_SHARDS, 1, mesh, 0);
	v->eod_mask = mg_flag_arg(st, MA_EOD_MASK);
	v->per_token = mg_flag_arg(st, MA_PER_TOKEN);
	v->pp = mg_int_arg(st, MA_PP, 1, mesh, 1);
	v->layers_arg = size_argument(st, MA_LAYERS, MA_ENCODER_LAYERS);
	v->layers = mg_int_arg(st, v->layers_arg, 1, CFG_MAX_LAYERS, 0);
	v->first_stage = mg_int_arg(st, MA_FIRST_STAGE, 1, CFG_MAX_LAYERS, 0);
	v->last_stage = mg_int_arg(st, MA_LAST_STAGE, 1, CFG_MAX_LAYERS, 0);
	v->vpp_layers = mg_int_arg(st, MA_VPP_LAYERS, 1, CFG_MAX_LAYERS, 0);
	v->vpp_stages = mg_int_arg(st, MA_VPP_STAGES, 1, CFG_MAX_LAYERS, 0);
	v->split_embedding = mg_flag_arg(st, MA_SPLIT_EMBEDDING);
	v->split_loss = mg_flag_arg(st, MA_SPLIT_LOSS);
	v->split_extra = v->split_embedding + v->split_loss;
	v->hidden = mg_int_arg(st, MA_HIDDEN, 1, dim, 0);
	v->ffn = mg_int_arg(st, MA_FFN, 1, dim, 0);
	v->seq_arg = size_argument(st, MA_SEQ, MA_ENCODER_SEQ);
	v->seq = mg_int_arg(st, v->seq_arg, 1, dim, 0);
	v->micro_batch = mg_int_arg(st, MA_MICRO_BATCH, 1, dim, 0);
	v->vocab = mg_int_arg(st, MA_VOCAB, 1, dim, 0);
	v->padded = mg_int_arg(st, MA_PADDED, 1, dim, 0);
	/* megatron/training/arguments.py: default 128. */
	v->divisible = mg_int_arg(st, MA_DIVISIBLE, 1, dim, 128);
	/* TransformerConfig: num_moe_experts None; Megatron reads 0 as None. */
	v->experts = mg_int_arg(st, MA_EXPERTS, 0, CFG_MAX_EXPERTS, 0);
	v->swiglu = mg_flag_arg(st, MA_SWIGLU);
	v->untie = mg_flag_arg(st, MA_UNTIE);
	v->mla = mg_flag_arg(st, MA_MLA);
	/*
	 * With multi-latent attention --qk-layernorm normalizes the latents
	 * (check_mla), not each head: no model.qk_norm.
	 */
	v->qk_layernorm = !v->mla && mg_flag_arg(st, MA_QK_LAYERNORM);
	v->distopt = mg_flag_arg(st, MA_DISTOPT);
	v->overlap = mg_flag_arg(st, MA_OVERLAP);
	v->sp = mg_flag_arg(st, MA_SP);
	v->average = mg_flag_arg(st, MA_AVERAGE);
	v->mfsdp = mg_flag_arg(st, MA_MFSDP);
	/* TokenizerConfig.pad_vocab_size: true unless --no-/--disable-. */
	no_pad = mg_flag_arg(st, MA_NO_PAD);
	disable_pad = mg_flag_arg(st, MA_DISABLE_PAD);
	v->pad = !no_pad && !disable_pad;
	v->sink = learnable_sink(st);
	/*
	 * The numbers that only some launches use are checked all the same
	 * and set aside (listed as ignored): a malformed one is refused by
	 * name, as Megatron's type=int refuses it, rather than ignored; but
	 * only what type=int refuses, since Megatron never reads them.
	 */
	if (v->qk_layernorm || v->sink) {
		v->heads = mg_int_arg(st, MA_HEADS, 1, dim, 0);
		v->kv_channels = mg_int_arg(st, MA_KV_CHANNELS, 1, dim, 0);
	} else {
		mg_int_aside(st, MA_HEADS);
		mg_int_aside(st, MA_KV_CHANNELS);
	}
	v->ep = mg_int_arg(st, MA_EP, 1, mesh, 1);
	if (v->experts > 0) {
		v->etp = mg_int_arg(st, MA_ETP, 1, mesh, 0);
		/* core_v0.4.0's SwitchMLP routes each token to one expert. */
		v->topk = mg_int_arg(st, MA_TOPK, 1, CFG_MAX_EXPERTS,
		    mg_older_than(st, "0.5.0") ? 1 : 2);
		v->moe_ffn = mg_int_arg(st, MA_MOE_FFN, 1, dim, 0);
		v->shared = mg_int_arg(st, MA_SHARED, 0, dim, 0);
		v->probs_on_input = mg_flag_arg(st, MA_PROBS_ON_INPUT);
		v->shared_gate = mg_flag_arg(st, MA_SHARED_GATE);
	} else {
		/* megatron/training/arguments.py, validate_args. */
		if (v->ep > 1)
			mg_refuse(st, "--expert-model-parallel-size %s needs "
			    "--num-experts (Megatron asserts it)",
			    mg_shown(&sh, st->use[MA_EP].value));
		v->ep = 0;
		set_aside(st, MA_EP);
		mg_int_aside(st, MA_ETP);
		mg_int_aside(st, MA_TOPK);
		mg_int_aside(st, MA_MOE_FFN);
		mg_int_aside(st, MA_SHARED);
	}
	if (v->overlap)
		v->bucket = mg_int_arg(st, MA_BUCKET, 1, LONG_MAX, 0);
	else
		mg_int_aside(st, MA_BUCKET);
	v->mtp = mg_int_arg(st, MA_MTP, 0, 8, 0);
}

/* dp = world / (tp * pp), as validate_args derives it (cp is 1 here). */
static bool
import_mesh(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	long		 world;
	char		*from;

	if (st->mi->world > 0) {
		world = st->mi->world;
		xasprintf(&from, "--world %ld", world);
		if (st->launch_world > 0 && world != st->launch_world)
			mg_note(st, "--world %ld, not %s's %ld ranks", world,
			    st->launcher, st->launch_world);
	} else if (st->launch_world > 0) {
		world = st->launch_world;
		xasprintf(&from, "%ld ranks (%s)", world, st->launcher);
	} else {
		mg_refuse(st, "the world size is unknown: give --world N (Megatron "
		    "reads it from WORLD_SIZE)");
		return false;
	}
	if (world % (v->tp * v->pp * v->cp) != 0) {
		mg_refuse(st, "the world size %ld is not a multiple of tp*pp*cp = "
		    "%ld (Megatron asserts it)", world, v->tp * v->pp * v->cp);
		free(from);
		return false;
	}
	c->mesh.dp = (int)(world / (v->tp * v->pp * v->cp));
	mg_explain(st, KEY_DP, "%s / (tp %ld * pp %ld * cp %ld)", from, v->tp,
	    v->pp, v->cp);
	free(from);
	c->mesh.cp = (int)v->cp;
	mg_explain(st, KEY_CP, "%s", mg_given_or(st, MA_CP,
	    "--context-parallel-size", "Megatron's default"));
	c->mesh.pp = (int)v->pp;
	mg_explain(st, KEY_PP, "%s", mg_given_or(st, MA_PP,
	    "--pipeline-model-parallel-size", "Megatron's default"));
	c->mesh.tp = (int)v->tp;
	mg_explain(st, KEY_TP, "%s", mg_given_or(st, MA_TP,
	    "--tensor-model-parallel-size", "Megatron's default"));
	if (!weight_shards(st, v->gtp_shards, v->tp,
	    "--tensor-parallel-num-weight-shards", "tp", KEY_GTP, &c->mesh.gtp))
		return false;
	if (v->experts == 0)
		return true;
	c->mesh.ep = (int)v->ep;
	mg_explain(st, KEY_EP, "%s", mg_given_or(st, MA_EP,
	    "--expert-model-parallel-size", "Megatron's default"));
	/* validate_args: expert_tensor_parallel_size None means tp. */
	c->mesh.etp = (int)(v->etp > 0 ? v->etp : v->tp);
	mg_explain(st, KEY_ETP, "%s", mg_given_or(st, MA_ETP,
	    "--expert-tensor-parallel-size", "Megatron's default, tp"));
	return weight_shards(st, v->egtp_shards, c->mesh.etp,
	    "--expert-tensor-parallel-num-weight-shards", "etp", KEY_EGTP,
	    &c->mesh.egtp);
}

/*
 * The vocabulary: --padded-vocab-size as it is, or the tokenizer's size
 * with the divisor gradaudit pads it by, as Megatron does, to a multiple
 * of --make-vocab-size-divisible-by times tp (vocab_size_with_padding in
 * megatron/core/tokenizers/utils/build_tokenizer.py).  For the tokenizers
 * that read --vocab-size (NullTokenizer, TikTokenizer) it is that size;
 * for the others it is the tokenizer's, which only --vocab-size can tell.
 */
static void
import_vocab(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	long		 multiple = v->divisible * v->tp, padded;

	if (v->padded > 0) {
		c->model.vocab = (int)v->padded;
		mg_explain(st, KEY_VOCAB, "--padded-vocab-size");
		c->model.vocab_divisible_by = 1;
		mg_explain(st, KEY_VOCAB_DIVISIBLE_BY, "--padded-vocab-size is "
		    "not padded again");
		st->use[MA_VOCAB].used = st->use[MA_DIVISIBLE].used = false;
		st->use[MA_NO_PAD].used = st->use[MA_DISABLE_PAD].used = false;
		return;
	}
	if (v->vocab == 0) {
		mg_note(st, "no --vocab-size: model.vocab is left to gradaudit's "
		    "default; give the tokenizer's size with --vocab-size");
		st->use[MA_DIVISIBLE].used = false;
		st->use[MA_NO_PAD].used = st->use[MA_DISABLE_PAD].used = false;
		return;
	}
	c->model.vocab = (int)v->vocab;
	if (!v->pad) {
		mg_explain(st, KEY_VOCAB, "--vocab-size");
		c->model.vocab_divisible_by = 1;
		mg_explain(st, KEY_VOCAB_DIVISIBLE_BY, "not padded");
		st->use[MA_DIVISIBLE].used = false;
		return;
	}
	padded = (v->vocab + multiple - 1) / multiple * multiple;
	if (padded > CFG_MAX_MODEL_DIM) {
		mg_refuse(st, "--vocab-size %ld padded to %ld is larger than "
		    "gradaudit's limit of %d", v->vocab, padded,
		    CFG_MAX_MODEL_DIM);
		return;
	}
	mg_explain(st, KEY_VOCAB, "--vocab-size; padded to %ld, a multiple of "
	    "%ld", padded, multiple);
	c->model.vocab_divisible_by = (int)v->divisible;
	mg_explain(st, KEY_VOCAB_DIVISIBLE_BY, "%s", mg_given_or(st, MA_DIVISIBLE,
	    "--make-vocab-size-divisible-by", "Megatron's default"));
	st->use[MA_DIVISIBLE].used = true;
}

/*
 * The model chunks a stage (validate_args, core_v0.13.0): given, or the
 * layers of a stage divided by --num-layers-per-virtual-pipeline-stage,
 * which Megatron takes only for an even split.
 */
static void
import_vpp(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	long		 per_stage;

	if (v->vpp_stages > 0 && v->vpp_layers > 0) {
		mg_refuse(st, "--num-layers-per-virtual-pipeline-stage and "
		    "--num-virtual-stages-per-pipeline-rank cannot be set at "
		    "the same time (Megatron's validate_args asserts it)");
		return;
	}
	if (v->vpp_stages > 0) {
		c->mesh.vpp = (int)v->vpp_stages;
		mg_explain(st, KEY_VPP, "--num-virtual-stages-per-pipeline-rank");
		return;
	}
	if (v->vpp_layers == 0)
		return;
	if (v->first_stage > 0 || v->last_stage > 0) {
		mg_refuse(st, "--num-layers-per-virtual-pipeline-stage with an "
		    "uneven pipeline: Megatron asserts it and asks for "
		    "--num-virtual-stages-per-pipeline-rank");
		return;
	}
	/* validate_args counts the embedding and the loss as layers here. */
	per_stage = (v->layers + v->split_extra) / v->pp;
	if ((v->layers + v->split_extra) % v->pp != 0 ||
	    per_stage % v->vpp_layers != 0) {
		mg_refuse(st, "--num-layers-per-virtual-pipeline-stage %ld does "
		    "not divide the %ld layers of a stage evenly (Megatron "
		    "asserts it)", v->vpp_layers, per_stage);
		return;
	}
	c->mesh.vpp = (int)(per_stage / v->vpp_layers);
	mg_explain(st, KEY_VPP, "%ld layers a stage / "
	    "--num-layers-per-virtual-pipeline-stage %ld", per_stage,
	    v->vpp_layers);
}

/*
 * --account-for-embedding-in-pipeline-split and
 * --account-for-loss-in-pipeline-split, NeMo's way of splitting a pipeline:
 * the embedding and the loss count as a layer each, every stage takes
 * (layers + those) / pp, and get_num_layers_to_build then builds one layer
 * fewer on the first stage's first chunk and the last stage's last one.
 * Without a virtual pipeline that is an uneven pipeline of
 * model.first_stage_layers and model.last_stage_layers.  With one, only
 * the first (last) of the stage's chunks is one layer short, and
 * gradaudit's chunks of a stage are all alike.
 */
static void
import_split_accounting(struct import_state *st,
    const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	const char	*which;
	long		 layers = v->layers + v->split_extra, per_stage;
	int		 vpp = c->mesh.vpp > 1 ? c->mesh.vpp : 1;

	if (v->split_extra == 0)
		return;
	which = v->split_embedding && v->split_loss ? "the embedding and "
	    "the loss" : v->split_embedding ? "the embedding" : "the loss";
	if (v->first_stage > 0 || v->last_stage > 0) {
		mg_refuse(st, "--account-for-%s-in-pipeline-split with "
		    "--decoder-first/last-pipeline-num-layers: Megatron's "
		    "TransformerConfig refuses them together",
		    v->split_embedding ? "embedding" : "loss");
		return;
	}
	if (v->pp == 1) {
		mg_note(st, "--account-for-%s-in-pipeline-split: with pp 1 "
		    "the one stage builds all --num-layers",
		    v->split_embedding ? "embedding" : "loss");
		return;
	}
	if (layers % (v->pp * vpp) != 0) {
		mg_refuse(st, "--num-layers %ld and %s, %ld layers, must be "
		    "divisible by %s %ld (Megatron's TransformerConfig "
		    "asserts it)", v->layers, which, layers,
		    vpp > 1 ? "pp*vpp" : "pp", v->pp * vpp);
		return;
	}
	if (vpp > 1) {
		mg_refuse(st, "--account-for-%s-in-pipeline-split with a "
		    "virtual pipeline: of the pp*vpp = %ld model chunks, "
		    "%s one layer fewer than the other chunks of %s stage; "
		    "gradaudit's chunks of a stage are alike",
		    v->split_embedding ? "embedding" : "loss", v->pp * vpp,
		    v->split_extra == 2 ? "the first and the last hold" :
		    v->split_embedding ? "the first holds" : "the last holds",
		    v->split_extra == 2 ? "their" : "its");
		return;
	}
	per_stage = layers / v->pp;
	if (per_stage < 2) {
		mg_refuse(st, "--num-layers %ld and %s over pp %ld leave the "
		    "first or last stage no layer, which gradaudit cannot "
		    "model", v->layers, which, v->pp);
		return;
	}
	if (v->split_embedding) {
		c->model.first_stage_layers = (int)(per_stage - 1);
		mg_explain(st, KEY_FIRST_STAGE_LAYERS, "(--num-layers %ld + "
		    "%ld) / pp %ld - 1: --account-for-embedding-in-pipeline-"
		    "split", v->layers, v->split_extra, v->pp);
	}
	if (v->split_loss) {
		c->model.last_stage_layers = (int)(per_stage - 1);
		mg_explain(st, KEY_LAST_STAGE_LAYERS, "(--num-layers %ld + "
		    "%ld) / pp %ld - 1: --account-for-loss-in-pipeline-split",
		    v->layers, v->split_extra, v->pp);
	}
}

/*
 * Multi-latent attention, which check_mla let through: the mixer's
 * classes stand for its parameters, and a note says which for which.
 */
static void
import_mla(struct import_state *st, const struct megatron_values *v)
{
	if (!v->mla)
		return;
	/* Read here: the latent norms are the mixer's norms' class. */
	st->use[MA_QK_LAYERNORM].used = st->use[MA_QK_LAYERNORM].given;
	mg_note(st, "--multi-latent-attention: the mixer stands for MLA's "
	    "parameters by how they are reduced: the layer's norms for "
	    "input_layernorm, the duplicated linear_q_down_proj and "
	    "linear_kv_down_proj%s (replicated over tp, summed over tp with "
	    "sequence parallelism), mixer.fc1 for the column-parallel "
	    "linear_q_up_proj and linear_kv_up_proj, mixer.fc2 for the "
	    "row-parallel linear_proj; MLA's sizes are not the stand-in's",
	    st->use[MA_QK_LAYERNORM].given ? " and the latent norms of "
	    "--qk-layernorm (not model.qk_norm, which is per head)" : "");
}

static void
import_dense(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;

	c->model.hidden = (int)v->hidden;
	mg_explain(st, KEY_HIDDEN, "--hidden-size");
	/*
	 * validate_args: 4 * hidden, or with --swiglu
	 * int((4 * hidden * 2 / 3) / 64) * 64, which is hidden / 24 * 64 in
	 * integers.
	 */
	if (v->ffn > 0) {
		c->model.ffn = (int)v->ffn;
		mg_explain(st, KEY_FFN, "--ffn-hidden-size");
		st->use[MA_SWIGLU].used = false;
	} else if (v->swiglu) {
		c->model.ffn = (int)(v->hidden / 24 * 64);
		mg_explain(st, KEY_FFN, "Megatron's default with --swiglu");
	} else {
		c->model.ffn = (int)(4 * v->hidden);
		mg_explain(st, KEY_FFN, "Megatron's default, 4*hidden");
	}
	c->model.layers = (int)v->layers;
	mg_explain(st, KEY_LAYERS, "--%s", megatron_args[v->layers_arg].name);
	/* TransformerConfig.{first,last}_pipeline_num_layers (fa8bb5921b). */
	if (v->first_stage > 0) {
		c->model.first_stage_layers = (int)v->first_stage;
		mg_explain(st, KEY_FIRST_STAGE_LAYERS,
		    "--decoder-first-pipeline-num-layers");
	}
	if (v->last_stage > 0) {
		c->model.last_stage_layers = (int)v->last_stage;
		mg_explain(st, KEY_LAST_STAGE_LAYERS,
		    "--decoder-last-pipeline-num-layers");
	}
	import_vpp(st, v);
	import_split_accounting(st, v);
	if (v->seq > 0) {
		c->model.seq = (int)v->seq;
		mg_explain(st, KEY_SEQ, "--%s", megatron_args[v->seq_arg].name);
	} else
		mg_note(st, "no --seq-length: model.seq is left to gradaudit's "
		    "default");
	if (v->micro_batch > 0) {
		c->model.micro_batch = (int)v->micro_batch;
		mg_explain(st, KEY_MICRO_BATCH, "--micro-batch-size");
	} else
		mg_note(st, "no --micro-batch-size: model.micro_batch is left to "
		    "gradaudit's default");
	/* GPTModel: share_embeddings_and_output_weights = not untie. */
	c->model.tie_embeddings = !v->untie;
	mg_explain(st, KEY_TIE_EMBEDDINGS, "%s--untie-embeddings-and-output-weights",
	    v->untie ? "" : "no ");
	if (!v->qk_layernorm && !v->sink)
		return;
	/* q_layernorm and k_layernorm normalize each head: kv_channels. */
	if (v->qk_layernorm) {
		c->model.qk_norm = true;
		mg_explain(st, KEY_QK_NORM, "--qk-layernorm");
	}
	/*
	 * DotProductAttention's softmax_offset: one value a head, split over
	 * tp with the heads; the stand-in's heads are head_dim wide.
	 */
	if (v->sink) {
		c->model.attention_sink = true;
		mg_explain(st, KEY_ATTENTION_SINK, "--softmax-type learnable");
	}
	if (v->kv_channels > 0) {
		c->model.head_dim = (int)v->kv_channels;
		mg_explain(st, KEY_HEAD_DIM, "--kv-channels");
		st->use[MA_HEADS].used = false;
	} else if (v->heads > 0 && v->hidden % v->heads == 0) {
		/* validate_args: kv_channels = hidden_size // heads. */
		c->model.head_dim = (int)(v->hidden / v->heads);
		mg_explain(st, KEY_HEAD_DIM, "hidden / --num-attention-heads");
	} else
		mg_refuse(st, "%s needs the head size: give "
		    "--kv-channels or --num-attention-heads dividing "
		    "--hidden-size", v->qk_layernorm ? "--qk-layernorm" :
		    "--softmax-type learnable");
}

/*
 * gradaudit's model.moe.every puts experts in layers i with
 * i % every == every - 1; the smallest every that gives Megatron's pattern,
 * or 0 when none does.
 */
static int
every_of(const bool *moe, int layers)
{
	int	 every, i;

	for (every = 1; every <= layers; every++) {
		for (i = 0; i < layers; i++)
			if (moe[i] != (i % every == every - 1))
				break;
		if (i == layers)
			return every;
	}
	return 0;
}

/*
 * The MoE layers of --moe-layer-freq: model.moe.every when one gives them,
 * else model.moe.pattern, one '0' or '1' per layer (a DeepSeek-V3-like
 * "([0]*3+[1]*58)" has dense first layers that no every gives).
 */
static bool
import_layer_freq(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	const char	*freq = st->use[MA_LAYER_FREQ].value, *error;
	struct shown	 sh;
	bool		*moe;
	int		 every, layers = (int)v->layers, i, n;

	if (!st->use[MA_LAYER_FREQ].given) {
		/* TransformerConfig.moe_layer_freq: 1, every layer. */
		c->model.moe.every = 1;
		mg_explain(st, KEY_EVERY, "Megatron's default");
		return true;
	}
	st->use[MA_LAYER_FREQ].used = true;
	moe = xcalloc((size_t)layers, sizeof(*moe));
	if ((error = megatron_layer_pattern(freq, layers, moe)) != NULL) {
		mg_refuse(st, "--moe-layer-freq \"%s\": %s", mg_shown(&sh, freq),
		    error);
		free(moe);
		return false;
	}
	for (i = 0, n = 0; i < layers; i++)
		n += moe[i];
	if (n == 0) {
		mg_refuse(st, "--moe-layer-freq %s: no layer has experts",
		    mg_shown(&sh, freq));
		free(moe);
		return false;
	}
	if ((every = every_of(moe, layers)) > 0) {
		c->model.moe.every = every;
		mg_explain(st, KEY_EVERY, "--moe-layer-freq %s", mg_shown(&sh, freq));
	} else {
		c->model.moe.every = 1;
		c->model.moe.pattern = xmalloc((size_t)layers + 1);
		for (i = 0; i < layers; i++)
			c->model.moe.pattern[i] = moe[i] ? '1' : '0';
		c->model.moe.pattern[layers] = '\0';
		mg_explain(st, KEY_PATTERN, "--moe-layer-freq %s",
		    mg_shown(&sh, freq));
	}
	free(moe);
	return true;
}

/*
 * MoE: megatron/training/arguments.py (_add_moe_args, validate_args) and
 * TransformerConfig.  Experts are as wide as --moe-ffn-hidden-size, which
 * defaults to --ffn-hidden-size; the shared experts are one MLP of
 * --moe-shared-expert-intermediate-size (SharedExpertMLP), gradaudit's one
 * shared expert; the routing scores weight the experts' outputs unless
 * --moe-apply-probs-on-input.
 */
static void
import_moe(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	struct shown	 sh;
	const char	*score = st->use[MA_SCORE].value;

	if (v->experts == 0) {
		if (st->use[MA_EXPERTS].given)
			st->use[MA_EXPERTS].used = false;
		return;
	}
	c->model.has_moe = true;
	keyset_add(&c->given, KEY_MOE);
	c->model.moe.experts = (int)v->experts;
	mg_explain(st, KEY_EXPERTS, "--num-experts");
	c->model.moe.top_k = (int)v->topk;
	mg_explain(st, KEY_TOP_K, "%s", mg_given_or(st, MA_TOPK, "--moe-router-topk",
	    mg_older_than(st, "0.5.0") ? "SwitchMLP's top-1" :
	    "Megatron's default"));
	c->model.moe.expert_ffn = (int)(v->moe_ffn > 0 ? v->moe_ffn :
	    c->model.ffn);
	mg_explain(st, KEY_EXPERT_FFN, "%s", v->moe_ffn > 0 ?
	    "--moe-ffn-hidden-size" : "Megatron's default, model.ffn");
	c->model.moe.score_before_experts = v->probs_on_input;
	mg_explain(st, KEY_SCORE_BEFORE_EXPERTS, "%s--moe-apply-probs-on-input",
	    v->probs_on_input ? "" : "no ");
	c->model.moe.shared_experts = v->shared > 0;
	mg_explain(st, KEY_SHARED_EXPERTS, "%s", v->shared > 0 ?
	    "--moe-shared-expert-intermediate-size" : "no "
	    "--moe-shared-expert-intermediate-size");
	/*
	 * TransformerConfig.moe_shared_expert_gate (bddd0a8ed7): "only
	 * effective when moe-shared-expert-intermediate-size is set".
	 */
	c->model.moe.shared_expert_gate = v->shared > 0 && v->shared_gate;
	if (v->shared > 0)
		mg_explain(st, KEY_SHARED_EXPERT_GATE, "%s--moe-shared-expert-gate",
		    v->shared_gate ? "" : "no ");
	else if (v->shared_gate)
		mg_note(st, "--moe-shared-expert-gate without "
		    "--moe-shared-expert-intermediate-size: Megatron has no "
		    "shared expert to gate");
	/*
	 * SharedExpertMLP (1fa9464e7c, 0.10.0): one MLP whose ffn_hidden_size
	 * is moe_shared_expert_intermediate_size.
	 */
	if (v->shared > 0 && v->shared != c->model.ffn) {
		c->model.moe.shared_expert_ffn = (int)v->shared;
		mg_explain(st, KEY_SHARED_EXPERT_FFN,
		    "--moe-shared-expert-intermediate-size");
	}
	if (score == NULL || strcmp(score, "softmax") == 0)
		c->model.moe.score_func = SCORE_SOFTMAX;
	else if (strcmp(score, "sigmoid") == 0)
		c->model.moe.score_func = SCORE_SIGMOID;
	else
		mg_refuse(st, "--moe-router-score-function \"%s\": gradaudit "
		    "knows softmax and sigmoid", mg_shown(&sh, score));
	st->use[MA_SCORE].used = score != NULL;
	mg_explain(st, KEY_SCORE_FUNC, "%s", mg_given_or(st, MA_SCORE,
	    "--moe-router-score-function", "Megatron's default"));
	import_layer_freq(st, v);
}

/*
 * --calculate-per-token-loss: loss_func's sum is not divided in the
 * schedule, DistributedDataParallel's gradient_scaling_factor is 1.0, and
 * finalize_model_grads scales every gradient by 1/num_tokens all-reduced
 * over the dp group: by linearity, the loss divided by that count, summed
 * over dp*cp.  Before 5946e24b37 (0.12.0) loss_func multiplied the loss by
 * cp and its count was the micro-batch's, summed over cp, reduced over dp
 * only: the global count, with the loss cp times too large.
 */
static void
import_per_token_loss(struct import_state *st)
{
	struct config	*c = &st->mi->cfg;

	c->loss.normalize_by = LOSS_GLOBAL;
	c->sync.dp_divisor = SIZE_ONE;
	mg_explain(st, KEY_NORMALIZE_BY, "--calculate-per-token-loss");
	mg_explain(st, KEY_DP_DIVISOR, "--calculate-per-token-loss");
	if (mg_older_than(st, "0.12.0")) {
		c->loss.scale = SIZE_CP;
		mg_explain(st, KEY_SCALE, "--calculate-per-token-loss before "
		    "5946e24b37: loss_func's loss times cp");
	} else {
		c->loss.scale = SIZE_ONE;
		mg_explain(st, KEY_SCALE, "--calculate-per-token-loss");
	}
}

/*
 * A Python float as a launch line writes it ("1e-2", "0.001", "1E-3") as
 * the decimal cfg_decimal reads, exactly: the digits, the point moved by
 * the exponent.  False for anything else, or more than nine places.
 */
static bool
float_as_decimal(const char *v, char *out, size_t size)
{
	char	 digits[32], *end;
	size_t	 n = 0, point, i, len;
	long	 e = 0;
	int	 o = 0;

	for (; isdigit((unsigned char)*v) && n < 20; v++)
		digits[n++] = *v;
	point = n;
	if (*v == '.')
		for (v++; isdigit((unsigned char)*v) && n < 20; v++)
			digits[n++] = *v;
	if (n == 0)
		return false;
	if (*v == 'e' || *v == 'E') {
		errno = 0;
		e = strtol(v + 1, &end, 10);
		if (end == v + 1 || errno != 0 || e < -20 || e > 20)
			return false;
		v = end;
	}
	if (*v != '\0')
		return false;
	/* The value is 0.digits times 10^(point + e). */
	if ((long)point + e <= 0) {
		o = snprintf(out, size, "0.");
		for (i = 0; (long)i < -((long)point + e) && o < (int)size;
		    i++)
			out[o++] = '0';
		for (i = 0; i < n && o < (int)size; i++)
			out[o++] = digits[i];
	} else {
		for (i = 0; (long)i < (long)point + e && o < (int)size; i++)
			out[o++] = i < n ? digits[i] : '0';
		if (i < n && o < (int)size)
			out[o++] = '.';
		for (; i < n && o < (int)size; i++)
			out[o++] = digits[i];
	}
	if (o >= (int)size)
		return false;
	out[o] = '\0';
	/* Leading zeros of the integer part, trailing ones of the fraction. */
	len = strlen(out);
	if (strchr(out, '.') != NULL) {
		while (len > 0 && out[len - 1] == '0')
			out[--len] = '\0';
		if (len > 0 && out[len - 1] == '.')
			out[--len] = '\0';
	}
	while (out[0] == '0' && out[1] != '\0' && out[1] != '.')
		memmove(out, out + 1, strlen(out));
	{
		int64_t num, den;

		return cfg_decimal(out, &num, &den);
	}
}

/*
 * A decimal argument the mapping reads that is no decimal number, which
 * gradaudit cannot take: refused here when Megatron takes it ("inf",
 * "1_0.5"), else check_decimals refused it already.
 */
static void
refuse_decimal(struct import_state *st, const char *value, const char *flag)
{
	struct shown	 sh;

	if (mg_python_float(value))
		mg_refuse(st, "%s \"%s\": expected a decimal number", flag,
		    mg_shown(&sh, value));
}

/*
 * A loss coefficient as an exact decimal into *dst, unless it is 0 (which
 * changes nothing); false, refused, when it is no decimal number.
 */
static bool
import_coeff(struct import_state *st, const char *value, const char *flag,
    enum cfg_key key, char **dst, bool *any)
{
	char		 dec[64];

	if (!float_as_decimal(value, dec, sizeof dec)) {
		refuse_decimal(st, value, flag);
		return false;
	}
	if (strcmp(dec, "0") != 0) {
		free(*dst);
		*dst = xstrdup(dec);
		mg_explain(st, key, "%s", flag);
		*any = true;
	}
	return true;
}

/*
 * --moe-aux-loss-coeff and --moe-z-loss-coeff.  The load-balancing loss
 * of the "aux_loss" type (the default) is the one gradaudit models, from
 * 0.8.0 on, where each rank's loss counts the tokens of the tp_cp group
 * (sequence_partition_group): before, a rank's loss counts its own tokens
 * only.  Under --calculate-per-token-loss the router pre-multiplies it by
 * its local tokens from 0.12.0 (router.py apply_load_balancing_loss) and
 * by local tokens times the tp_cp size from 0.19.0 (9ef8a2a420, PR
 * #5047); 0.8 to 0.11 do neither, and the gradient is divided by the
 * step's valid tokens, which loss.aux_scale has no value for.
 */
/*
 * The load-balancing type and its coefficient, "aux_loss" when not given;
 * NULL for the coefficient when none is given or every one is zero (zeros
 * change nothing, and are then listed as ignored).  *several when more
 * types, or more nonzero coefficients, than one are given.
 */
static const char *
aux_loss_type(struct import_state *st, const char **coeff, bool *several)
{
	struct arg_use	*a = &st->use[MA_AUX_COEFF], *t = &st->use[MA_LB_TYPE];
	const char	*type = "aux_loss";
	char		 dec[64];
	size_t		 j, n, nonzero = 0;

	*coeff = NULL;
	*several = false;
	if (t->given) {
		*several = t->count > 1 || (t->value == NULL && t->count == 0);
		if (!*several)
			type = mg_list_value(st, t, 0);
	}
	if (!a->given)
		return type;
	n = a->value != NULL ? 1 : a->count;
	for (j = 0; j < n; j++)
		if (!float_as_decimal(mg_list_value(st, a, j), dec, sizeof dec) ||
		    strcmp(dec, "0") != 0)
			nonzero++;
	*several = *several || (nonzero > 0 && n > 1);
	if (nonzero > 0)
		*coeff = mg_list_value(st, a, 0);
	return type;
}

/*
 * --multi-latent-attention (megatron/core/transformer/
 * multi_latent_attention.py at core_v0.19.0, MLASelfAttention with the
 * Transformer Engine layer spec of gpt_layer_specs.py).  Its parameters
 * fall in the classes of gradaudit's mixer:
 *
 *   input_layernorm, a norm replicated over tp on the sequence shard;
 *   linear_q_down_proj and linear_kv_down_proj, TELinear with
 *   parallel_mode "duplicated": replicated over tp, computed on the
 *   sequence shard, and marked sequence_parallel when it is on
 *   (transformer_engine.py TELinear.__init__), so that
 *   finalize_model_grads._allreduce_non_tensor_model_parallel_grads sums
 *   them over tp as it sums the norms;
 *   the latent norms, which --qk-layernorm fuses into linear_q_up_proj
 *   and linear_kv_up_proj as TELayerNormColumnParallelLinear
 *   (mla_qk_norm_config.py _resolve_mla_qk_layernorm): a norm on the
 *   sequence shard before the gather, like input_layernorm, and not
 *   named q_layernorm or k_layernorm, so not summed over tp otherwise;
 *   linear_q_up_proj, linear_kv_up_proj, column-parallel (mixer.fc1);
 *   linear_proj, row-parallel (mixer.fc2).
 *
 * With tp 1 none of this is reduced over tp.  With tp > 1 one tensor is
 * not in any of these classes: k_pos_emb, the rotary key that every head
 * shares, split from the kv down projection's output.  Each tp rank uses
 * it for its own heads, so its gradient is Partial over tp;
 * get_query_key_value_tensors sums it only through the sequence-parallel
 * gather (gather_from_sequence_parallel_region, whose backward
 * reduce-scatters).  Without sequence parallelism nothing sums it
 * (Megatron-LM issue #1699, PR #6839 open), and the partial gradient
 * flows on into linear_kv_down_proj and the layer's input: a wrong
 * activation gradient that the mixer, whose head-shared norm leaves its
 * input's gradient alone, cannot represent.  Before 0.14.0 (720c8b40d8)
 * the down projections were column-parallel from 0.12.0 (1c425a8313),
 * where k_pos_emb is not summed either (#1699), and before 0.17.0
 * (e3ae6e492b) Transformer Engine's tensor_model_parallel mark on the
 * duplicated TELinears made the gradient norm count them on every tp
 * rank while the norms count once, which grad_norm.tp_duplicates cannot
 * say of some replicated parameters only.
 */
static void
check_mla(struct import_state *st)
{
	long	 tp = mg_raw_long(st, MA_TP, 1);

	if (!st->use[MA_MLA].given || tp <= 1)
		return;
	if (!st->use[MA_SP].given)
		mg_refuse(st, "--multi-latent-attention with tp %ld and no "
		    "--sequence-parallel: k_pos_emb, the rotary key all heads "
		    "share, gets each tp rank's heads' gradient and no "
		    "collective sums it (multi_latent_attention.py "
		    "get_query_key_value_tensors gathers it over tp only with "
		    "sequence parallelism; Megatron-LM issue #1699, PR #6839); "
		    "the partial gradient reaches linear_kv_down_proj and the "
		    "layer's input, which gradaudit's mixer cannot represent",
		    tp);
	else if (mg_older_than(st, "0.14.0"))
		mg_refuse(st, "--multi-latent-attention with tp %ld before "
		    "megatron-core 0.14.0: the down projections were "
		    "column-parallel from 0.12.0 (1c425a8313) until 720c8b40d8, "
		    "and k_pos_emb's gradient is not summed over tp "
		    "(Megatron-LM issue #1699); gradaudit models 0.14.0's "
		    "duplicated down projections", tp);
	else if (mg_older_than(st, "0.17.0"))
		mg_refuse(st, "--multi-latent-attention with tp %ld before "
		    "megatron-core 0.17.0: Transformer Engine marks the "
		    "duplicated down projections tensor-parallel until "
		    "e3ae6e492b, so the gradient norm counts them on every tp "
		    "rank but the norms once, which grad_norm.tp_duplicates "
		    "cannot express", tp);
}

/*
 * The sequence-level load-balancing loss (router.py at core_v0.19.0,
 * TopKRouter._apply_seq_aux_loss): the routing map and the scores are
 * reshaped so that each sequence of the micro-batch has experts of its
 * own, the counts all-reduced over the tp_cp group and the total the
 * sequence's tokens over that group (moe_utils.
 * get_tokens_per_expert_and_token_count), the same
 * switch_load_balancing_loss_func divided by the micro-batch size, and
 * the same attach_and_log_load_balancing_loss as aux_loss: the same
 * MoEAuxLossAutoScaler, and under --calculate-per-token-loss the same
 * pre-multiplication by the micro-batch's local tokens times the tp_cp
 * size.  Its gradient takes aux_loss's path, with aux_loss's reductions
 * and scales, and only the loss differs: the mean of each sequence's
 * Switch loss where aux_loss is the micro-batch's, the same with one
 * sequence a micro-batch, which import_aux_losses notes as the stand-in's
 * approximation.  Refused where the path differs: before 0.14.0
 * (c08d89bea0, MR !3809) sequence_load_balancing_loss_func counted each
 * rank's own tokens and all-gathered the scores over the tp_cp group,
 * whose backward reduce-scatters; from 0.16.0 (71c49b56da) to 0.18
 * --calculate-per-token-loss pre-multiplied by one sequence's tokens, the
 * gradient 1/micro_batch too small until e3fe5508c9 (PR #5798, 0.19.0).
 */
static void
check_seq_aux_loss(struct import_state *st)
{
	if (mg_older_than(st, "0.14.0"))
		mg_refuse(st, "--moe-router-load-balancing-type seq_aux_loss "
		    "before megatron-core 0.14.0: sequence_load_balancing_loss_"
		    "func counts each rank's own tokens and all-gathers the "
		    "scores over the tp_cp group, a gradient path gradaudit "
		    "does not model (0.14.0's c08d89bea0 gives it aux_loss's)");
	else if (st->use[MA_PER_TOKEN].given && mg_older_than(st, "0.19.0") &&
	    !mg_older_than(st, "0.16.0") && mg_raw_long(st, MA_MICRO_BATCH, 0) != 1)
		mg_refuse(st, "--moe-router-load-balancing-type seq_aux_loss with "
		    "--calculate-per-token-loss and a micro-batch other than "
		    "1 before megatron-core 0.19.0: _apply_seq_aux_loss "
		    "pre-multiplies by one sequence's tokens, so the gradient "
		    "is 1/micro-batch-size too small (e3fe5508c9, PR #5798), "
		    "which loss.aux_scale has no value for");
}

/*
 * The global load-balancing loss (router.py _apply_global_aux_loss, from
 * 72d23540d0, core 0.15.0): its counts over tp_dp_cp are loss.aux_type
 * global-aux-loss.  Beside it the z-loss keeps the sequence's count,
 * which the one auxiliary atom cannot carry.  Like aux_loss it counts
 * every token slot, as Megatron does without a padding mask (with one,
 * the token count is the current micro-batch's valid tokens: #7197).
 */
static bool
check_global_aux_loss(struct import_state *st, bool say)
{
	struct arg_use	*z = &st->use[MA_Z_COEFF];
	const char	*why = NULL;
	char		 dec[64];

	if (mg_older_than(st, "0.15.0"))
		why = "before megatron-core 0.15.0, which has no such type";
	else if (z->given && z->value != NULL && (!float_as_decimal(z->value,
	    dec, sizeof dec) || strcmp(dec, "0") != 0))
		why = "with --moe-z-loss-coeff: the z-loss keeps the "
		    "sequence's token count, which gradaudit does not model "
		    "beside a global load-balancing loss";
	if (why != NULL && say)
		mg_refuse(st, "--moe-router-load-balancing-type global_aux_loss "
		    "%s", why);
	return why == NULL;
}

/*
 * The auxiliary losses gradaudit cannot model, refused with the other
 * refused arguments (check_fates) so that one run names them all.
 */
static void
check_aux_losses(struct import_state *st)
{
	struct shown	 sh;
	const char	*type, *coeff;
	bool		 several;

	type = aux_loss_type(st, &coeff, &several);
	/* Without a type, read_args said that it needs one. */
	if (st->use[MA_LB_TYPE].given && st->use[MA_LB_TYPE].value == NULL &&
	    st->use[MA_LB_TYPE].count == 0)
		return;
	if (st->use[MA_LB_TYPE].count > 1)
		mg_refuse(st, "--moe-router-load-balancing-type with several "
		    "types: gradaudit models one, aux_loss");
	else if (several)
		mg_refuse(st, "--moe-aux-loss-coeff with several values: "
		    "gradaudit models one, for aux_loss");
	else if (coeff != NULL && strcmp(type, "seq_aux_loss") == 0)
		check_seq_aux_loss(st);
	else if (coeff != NULL && strcmp(type, "global_aux_loss") == 0)
		(void)check_global_aux_loss(st, true);
	else if (coeff != NULL && strcmp(type, "aux_loss") != 0 &&
	    strcmp(type, "none") != 0 && strcmp(type, "sinkhorn") != 0)
		mg_refuse(st, "--moe-router-load-balancing-type %s: gradaudit "
		    "models the normalization of aux_loss, seq_aux_loss and "
		    "global_aux_loss only", mg_shown(&sh, type));
}

static void
import_aux_losses(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	struct arg_use	*z = &st->use[MA_Z_COEFF];
	const char	*av, *type;
	char		 dec[64];
	bool		 any = false, several;

	/* check_aux_losses refused what this cannot import. */
	type = aux_loss_type(st, &av, &several);
	st->use[MA_LB_TYPE].used = st->use[MA_LB_TYPE].given;
	st->use[MA_AUX_COEFF].used = av != NULL;
	if (!c->model.has_moe)
		return;
	/*
	 * Sinkhorn and "none" apply no load-balancing loss (router.py);
	 * seq_aux_loss takes aux_loss's path (check_seq_aux_loss).
	 */
	if (av != NULL && (strcmp(type, "aux_loss") == 0 ||
	    strcmp(type, "seq_aux_loss") == 0 ||
	    strcmp(type, "global_aux_loss") == 0) &&
	    !import_coeff(st, av, "--moe-aux-loss-coeff", KEY_AUX_LOSS_COEFF,
	    &c->model.moe.aux_loss_coeff, &any))
		return;
	if (av != NULL && strcmp(type, "seq_aux_loss") == 0)
		mg_note(st, "--moe-router-load-balancing-type seq_aux_loss: "
		    "imported as aux_loss, whose reductions and scales its "
		    "gradient takes (router.py _apply_seq_aux_loss); the "
		    "stand-in's loss is the micro-batch's, Megatron's the mean "
		    "of each sequence's, the same with --micro-batch-size 1");
	if (av != NULL && strcmp(type, "global_aux_loss") == 0 &&
	    check_global_aux_loss(st, false)) {
		c->loss.aux_type = AUX_TYPE_GLOBAL;
		mg_explain(st, KEY_AUX_TYPE, "--moe-router-load-balancing-type "
		    "global_aux_loss: tokens per expert over tp_dp_cp, their "
		    "running mean over the micro-batches");
	}
	if (z->given && z->value != NULL && (!float_as_decimal(z->value, dec,
	    sizeof dec) || strcmp(dec, "0") != 0)) {
		z->used = true;
		if (!import_coeff(st, z->value, "--moe-z-loss-coeff",
		    KEY_Z_LOSS_COEFF, &c->model.moe.z_loss_coeff, &any))
			return;
	}
	if (!any)
		return;
	if (mg_older_than(st, "0.8.0")) {
		mg_refuse(st, "--moe-aux-loss-coeff or --moe-z-loss-coeff before "
		    "megatron-core 0.8.0: each rank's load-balancing loss "
		    "counts its own tokens, which gradaudit does not model");
		return;
	}
	if (!v->per_token)
		return;
	if (mg_older_than(st, "0.12.0")) {
		mg_refuse(st, "--moe-aux-loss-coeff with --calculate-per-token-loss "
		    "before megatron-core 0.12.0: the auxiliary losses' "
		    "gradient is divided by the step's valid tokens, which "
		    "gradaudit does not model");
		return;
	}
	c->loss.aux_scale = mg_older_than(st, "0.19.0") ? AUX_SCALE_TOKENS_LOCAL :
	    AUX_SCALE_TOKENS_TP_CP;
	mg_explain(st, KEY_AUX_SCALE, "--calculate-per-token-loss%s",
	    mg_older_than(st, "0.19.0") ? " before 9ef8a2a420 (PR #5047): "
	    "the router's local tokens only" : "");
}

/*
 * --mtp-num-layers and --mtp-loss-scaling-factor (model.mtp).  Without
 * --calculate-per-token-loss every release divides each layer's loss by
 * the rank's rolled count and the schedule by the micro-batches (the
 * profiles' loss.mtp_scale); with it, the summed loss is divided by the
 * main loss's tokens in finalize_model_grads until a22c40e8d6 (PR #3159,
 * 0.17.0) re-scales it by the rank's own counts.
 */
static void
import_mtp(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	struct arg_use	*f = &st->use[MA_MTP_FACTOR];
	char		 dec[64];
	long		 n = v->mtp;

	if (n == 0) {
		/* No MTP layer: nothing it changes (listed as ignored). */
		st->use[MA_MTP].used = false;
		return;
	}
	c->model.mtp = (int)n;
	mg_explain(st, KEY_MTP, "--mtp-num-layers");
	if (f->given && f->value != NULL) {
		f->used = true;
		if (!float_as_decimal(f->value, dec, sizeof dec)) {
			refuse_decimal(st, f->value,
			    "--mtp-loss-scaling-factor");
			return;
		}
		free(c->model.mtp_loss_scaling_factor);
		c->model.mtp_loss_scaling_factor = xstrdup(dec);
		mg_explain(st, KEY_MTP_LOSS_SCALING_FACTOR,
		    "--mtp-loss-scaling-factor");
	}
	if (!v->per_token)
		return;
	c->loss.mtp_scale = mg_older_than(st, "0.17.0") ? MTP_SCALE_TOKENS :
	    MTP_SCALE_TOKENS_LOCAL;
	mg_explain(st, KEY_MTP_SCALE, "--calculate-per-token-loss%s",
	    mg_older_than(st, "0.17.0") ? " before a22c40e8d6 (PR #3159): the "
	    "MTP losses' sums over the main loss's tokens" : ", with PR "
	    "#3159's re-scaling by the rank's own counts");
}

/*
 * The data-parallel synchronization.  megatron/core/distributed/
 * distributed_data_parallel.py: without --overlap-grad-reduce the bucket
 * size is None, one bucket per buffer; with it, --ddp-bucket-size or
 * max(40000000, 1000000 * dp) (from 0fda386, core_v0.7.0; a fixed 40000000
 * before).
 */
static void
import_training(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	int64_t		 dp = c->mesh.dp;

	c->training.distributed_optimizer = v->distopt;
	mg_explain(st, KEY_DISTRIBUTED_OPTIMIZER, "%s--use-distributed-optimizer",
	    v->distopt ? "" : "no ");
	/* validate_args turns sequence parallelism off when tp is 1. */
	c->training.sequence_parallel = v->sp && v->tp > 1;
	mg_explain(st, KEY_SEQUENCE_PARALLEL, "%s", !v->sp ?
	    "no --sequence-parallel" : v->tp > 1 ? "--sequence-parallel" :
	    "--sequence-parallel, which Megatron turns off with tp 1");
	c->training.average_in_collective = v->average;
	mg_explain(st, KEY_AVERAGE_IN_COLLECTIVE, "%s--ddp-average-in-collective",
	    v->average ? "" : "no ");
	c->training.overlap_grad_reduce = v->overlap;
	mg_explain(st, KEY_OVERLAP_GRAD_REDUCE, "%s--overlap-grad-reduce",
	    v->overlap ? "" : "no ");
	/*
	 * The loss mask of GPTDataset (megatron/core/datasets/gpt_dataset.py):
	 * all ones, unless --eod-mask-loss zeroes the end-of-document tokens,
	 * one a document, whose number differs between micro-batches as the
	 * documents' ends fall.  How long the documents are is the data's,
	 * which no argument says.
	 */
	free(c->loss.valid_tokens);
	if (!v->eod_mask) {
		c->loss.valid_tokens = xstrdup("all");
		mg_explain(st, KEY_VALID_TOKENS, "no --eod-mask-loss");
		if (st->mi->eod_document_tokens > 0)
			mg_note(st, "--eod-document-tokens %ld changes nothing "
			    "without --eod-mask-loss",
			    st->mi->eod_document_tokens);
	} else if (st->mi->eod_document_tokens > 0) {
		xasprintf(&c->loss.valid_tokens, "eod:%ld",
		    st->mi->eod_document_tokens);
		mg_explain(st, KEY_VALID_TOKENS, "--eod-mask-loss, "
		    "--eod-document-tokens");
	} else {
		xasprintf(&c->loss.valid_tokens, "eod:%d",
		    MEGATRON_EOD_DOCUMENT_TOKENS);
		mg_explain(st, KEY_VALID_TOKENS, "--eod-mask-loss; documents of "
		    "%d tokens assumed (--eod-document-tokens)",
		    MEGATRON_EOD_DOCUMENT_TOKENS);
	}
	/*
	 * The objective is the user's to state (loss.objective); Megatron's
	 * documented choice without --calculate-per-token-loss is the mean
	 * of micro-batch means (loss_func divides each micro-batch's sum by
	 * its own count), which an audit against the per-token mean would
	 * call wrong on every parameter with --eod-mask-loss (issue 23).
	 */
	c->loss.objective = v->per_token ? OBJECTIVE_TOKEN_MEAN :
	    OBJECTIVE_MICRO_BATCH_MEAN;
	mg_explain(st, KEY_OBJECTIVE, v->per_token ? "--calculate-per-token-loss" :
	    "no --calculate-per-token-loss: Megatron's choice");
	if (v->per_token)
		import_per_token_loss(st);
	import_aux_losses(st, v);
	import_mtp(st, v);
	if (!v->overlap) {
		c->training.bucket_elems = 0;
		mg_explain(st, KEY_BUCKET_ELEMS, "one bucket without "
		    "--overlap-grad-reduce");
	} else if (v->bucket > 0) {
		c->training.bucket_elems = v->bucket;
		mg_explain(st, KEY_BUCKET_ELEMS, "--ddp-bucket-size");
	} else if (mg_older_than(st, "0.7.0")) {
		c->training.bucket_elems = 40000000;
		mg_explain(st, KEY_BUCKET_ELEMS, "Megatron's default before "
		    "0.7.0");
	} else {
		c->training.bucket_elems = dp * 1000000 > 40000000 ?
		    dp * 1000000 : 40000000;
		mg_explain(st, KEY_BUCKET_ELEMS, "Megatron's default, "
		    "max(40000000, 1000000*dp)");
	}
}

/*
 * --use-megatron-fsdp, Megatron-FSDP version 1 as core_v0.19.0
 * (5be9626709) runs it: megatron/core/distributed/fsdp/
 * mcore_fsdp_adapter.py FullyShardedDataParallel wraps each model chunk in
 * a MegatronFSDP (megatron_fsdp/megatron_fsdp.py), whose
 * ParamAndGradBuffer (param_and_grad_buffer.py) is layout.fsdp_flatten:
 * group under the FSDP engine: every bucket reduce-scattered over the
 * dp*cp group, or the expert data-parallel group for the routed experts.
 * MegatronFSDP._init_fsdp_param_and_grad_buffer scales by 1/dp before
 * summing, as DistributedDataParallel does, or by nothing with a per-token
 * loss; with --ddp-average-in-collective gradient_reduce_preprocessing
 * averages every bucket over its own group, so the experts' factor
 * edp/dp it computes is never applied: they are divided by edp.
 */
static void
import_megatron_fsdp(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	struct arg_use	*u = &st->use[MA_SHARDING];
	struct shown	 sh;

	if (!v->mfsdp)
		return;
	u->used = u->given;
	/*
	 * _get_parameter_groups keys its groups by dtype too, "float8" for
	 * the TransformerEngine weights that --fp8-param-gather makes FP8
	 * (fp8_model_init): a layer's linear weights and its norms then fall
	 * in different buckets, a split gradaudit's one-dtype model has not.
	 */
	if (st->use[MA_FP8_PARAM_GATHER].given)
		mg_refuse(st, "--fp8-param-gather with --use-megatron-fsdp: its "
		    "FP8 weights form Megatron-FSDP parameter groups of their "
		    "own (dtype float8, param_and_grad_buffer.py "
		    "_get_parameter_groups), a split of the buffers gradaudit "
		    "does not model");
	if (mg_older_than(st, "0.19.0"))
		mg_refuse(st, "--use-megatron-fsdp: gradaudit read Megatron-FSDP's "
		    "buffers (param_and_grad_buffer.py) at core_v0.19.0 only");
	/*
	 * arguments.py's default.  FullyShardedDataParallel makes every
	 * TransformerLayer an FSDP unit only with optim_grads_params; the
	 * other strategies have no units, and no_shard and optim reduce
	 * gradients into unsharded buffers.
	 */
	if (u->given && u->value != NULL &&
	    strcmp(u->value, "optim_grads_params") != 0)
		mg_refuse(st, "--data-parallel-sharding-strategy %s: without "
		    "optim_grads_params Megatron-FSDP has no FSDP units and "
		    "buckets gradients by size alone (no_shard and optim also "
		    "keep them unsharded), a layout gradaudit does not model",
		    mg_shown(&sh, u->value));
	c->layout.dp_engine = DP_ENGINE_FSDP2;
	mg_explain(st, KEY_DP_ENGINE, "--use-megatron-fsdp: MegatronFSDP "
	    "reduce-scatters each buffer over the dp*cp group (the expert "
	    "data-parallel group for experts)");
	c->layout.fsdp_flatten = FSDP_FLATTEN_GROUP;
	mg_explain(st, KEY_FSDP_FLATTEN, "--use-megatron-fsdp%s "
	    "optim_grads_params: version 1's parameter groups, a layer's "
	    "in buckets of their own (param_and_grad_buffer.py)", u->given ?
	    " --data-parallel-sharding-strategy" : ", Megatron's default");
	c->training.distributed_optimizer = true;
	mg_explain(st, KEY_DISTRIBUTED_OPTIMIZER, "--use-megatron-fsdp "
	    "(validate_args turns it on)");
	c->sync.expert_grad_divisor = v->average ? EXPERT_DIVISOR_EDP :
	    EXPERT_DIVISOR_DP;
	mg_explain(st, KEY_EXPERT_GRAD_DIVISOR, "%s", v->average ?
	    "--use-megatron-fsdp, --ddp-average-in-collective: an average "
	    "over the expert data-parallel group" :
	    "--use-megatron-fsdp: 1/dp, as for dense parameters");
}

/*
 * --transformer-impl and --moe-grouped-gemm: the tensor-parallel mark of
 * the experts' weights, which the gradient norm's duplicate filter reads
 * before 0.19.0 (param_is_not_tensor_parallel_duplicate keeps a weight on
 * every tp rank when it is marked, on dense tp rank 0 only when not).
 * Megatron's own linears (local: SequentialMLP's ColumnParallelLinear and
 * RowParallelLinear, or GroupedMLP up to 0.16.x) mark them in
 * _initialize_affine_weight_gpu and _cpu, and TransformerEngine's Linear
 * (SequentialMLP without --moe-grouped-gemm) marks every weight in
 * reset_parameters, at every release: every rank counts its experts
 * (expert_filter: expert-tp).  Only TransformerEngine's GroupedLinear
 * (TEGroupedMLP) lost the mark, with TE ac81c85b5 (2.13), which the
 * profiles say with the TransformerEngine each release pins; for it
 * nothing is mapped.  Before a72c0278e6 (Megatron-LM #4084, after
 * core_v0.16.0) --no-initialization skipped local's marks, dense weights'
 * too, which gradaudit does not model.
 */
static void
import_expert_marks(struct import_state *st, const struct megatron_values *v)
{
	struct config	*c = &st->mi->cfg;
	struct arg_use	*u = &st->use[MA_TRANSFORMER_IMPL];
	struct shown	 sh;
	bool		 local = false;

	if (u->given && u->value != NULL &&
	    strcmp(u->value, "transformer_engine") != 0) {
		if (strcmp(u->value, "local") != 0) {
			mg_refuse(st, "--transformer-impl %s: gradaudit knows "
			    "Megatron's local and transformer_engine layers, "
			    "whose expert weights it read "
			    "(megatron/core/transformer/moe/experts.py)",
			    mg_shown(&sh, u->value));
			return;
		}
		local = true;
	}
	if (v->experts == 0)
		return;
	if (!local && st->use[MA_GROUPED_GEMM].given) {
		/* Consulted, not inert: the profile decides, and says so. */
		st->use[MA_GROUPED_GEMM].used = true;
		mg_note(st, "--moe-grouped-gemm with TransformerEngine: the "
		    "experts are TEGroupedMLP, whose weights carry the "
		    "tensor-parallel mark the gradient norm's filter reads "
		    "only with the TransformerEngine a release pins before "
		    "2.13 (ac81c85b5): the framework profile's "
		    "grad_norm.expert_filter says which");
		return;
	}
	u->used = local;
	c->grad_norm.expert_filter = GN_EXPERT_FILTER_EXPERT_TP;
	mg_explain(st, KEY_EXPERT_FILTER, "%s: the experts' linears mark "
	    "their weights tensor parallel, so every tp rank counts its "
	    "experts in the norm", local ? "--transformer-impl local, "
	    "Megatron's own (tensor_parallel/layers.py "
	    "_initialize_affine_weight_gpu)" : "no --moe-grouped-gemm, "
	    "SequentialMLP's TransformerEngine Linear (reset_parameters)");
}

/*
 * The decimal arguments, each value of which is refused here when it is
 * malformed, whether or not the mapping reads it: it reads them after the
 * sizes and the world, and some only for a MoE model or under some
 * load-balancing types, so that a bad one went unsaid where a size was
 * missing, and "--moe-aux-loss-coeff abc" of a dense model was taken.
 * Malformed is what Megatron's type=float refuses: a value it takes and
 * never reads, "--moe-aux-loss-coeff inf" or "-0.0" of a dense model, is
 * no error (44f16d4 refused them); the mapping refuses the ones it reads
 * and cannot take (refuse_decimal).
 */
static void
check_decimals(struct import_state *st)
{
	static const enum mapped_arg decimal[] = {
		MA_AUX_COEFF, MA_Z_COEFF, MA_MTP_FACTOR
	};
	const struct arg_use	*u;
	struct shown		 sh;
	const char		*value;
	char			 dec[64];
	size_t			 i, j, n;

	for (i = 0; i < sizeof decimal / sizeof decimal[0]; i++) {
		u = &st->use[decimal[i]];
		if (!u->given)
			continue;
		n = u->value != NULL ? 1 : u->count;
		for (j = 0; j < n; j++) {
			value = mg_list_value(st, u, j);
			if (!float_as_decimal(value, dec, sizeof dec) &&
			    !mg_python_float(value))
				mg_refuse(st, "--%s \"%s\": expected a decimal "
				    "number", megatron_args[decimal[i]].name,
				    mg_shown(&sh, value));
		}
	}
}

void
megatron_map_check(struct import_state *st)
{
	check_mla(st);
	check_aux_losses(st);
}

void
megatron_map(struct import_state *st)
{
	struct megatron_values	 v;
	int			 before;
	bool			 layers;

	/*
	 * The values are mapped even after an argument was refused, so that
	 * one run names every problem of a launch (issue 28): the Megatron
	 * examples' took several rounds when each stage stopped the next.
	 * Every value is read, and a bad one refused by name, before a
	 * missing size stops the mapping: a --num-layers of 900,000 digits
	 * was reported only as "--hidden-size is missing".  The missing size
	 * is said only when no argument was refused before the values (an
	 * unknown one may be where the size was).
	 */
	memset(&v, 0, sizeof(v));
	before = st->errors;
	read_values(st, &v);
	check_decimals(st);
	layers = st->use[MA_LAYERS].given || st->use[MA_ENCODER_LAYERS].given;
	if (!layers || !st->use[MA_HIDDEN].given) {
		if (before == 0)
			mg_refuse(st, "--%s is missing (Megatron requires it)",
			    megatron_args[layers ? MA_HIDDEN : MA_LAYERS].name);
		return;
	}
	if (import_mesh(st, &v)) {
		import_vocab(st, &v);
		import_dense(st, &v);
		import_mla(st, &v);
		import_moe(st, &v);
		import_training(st, &v);
		import_megatron_fsdp(st, &v);
		import_expert_marks(st, &v);
		/*
		 * Only values mapped without a refusal of their own are
		 * worth the loader's word: a malformed one left a default.
		 */
		st->mi->mapped = st->errors == before;
	}
}
