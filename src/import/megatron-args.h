/*
 * Megatron-LM's arguments as gradaudit import megatron knows them: the
 * table of megatron-args.c, read by the importer (megatron.c) and by the
 * mapping of their values (megatron-map.c).
 */
#ifndef GRADAUDIT_MEGATRON_ARGS_H
#define GRADAUDIT_MEGATRON_ARGS_H

#include <stdbool.h>
#include <stddef.h>

enum arg_kind {
	ARG_FLAG,		/* store_true or store_false: no value */
	ARG_VALUE,		/* one value */
	ARG_LIST		/* nargs='+' or '*': the words up to the next option */
};

enum arg_fate {
	ARG_MAPPED,		/* read into configuration keys */
	ARG_HARMLESS,		/* cannot change gradient synchronization */
	ARG_REFUSED		/* changes it in a way gradaudit cannot model */
};

struct arg_def {
	const char	*name;		/* without the leading "--" */
	enum arg_kind	 kind;
	enum arg_fate	 fate;
	/* ARG_MAPPED: the first megatron-core release that has it, or NULL. */
	const char	*since;
	/*
	 * ARG_REFUSED: the values that change nothing ("1", or words such as
	 * "adam sgd"), with which it is ignored; NULL when any use is refused.
	 */
	const char	*inert;
	/*
	 * ARG_REFUSED: what gradaudit lacks.  ARG_HARMLESS: NULL, or why an
	 * argument that does act in Megatron changes no gradient that
	 * gradaudit audits, printed as a note when it is given.
	 */
	const char	*why;
};

/*
 * The arguments that set configuration keys, as indices into megatron_args[].  The
 * releases that introduced them are the first core_v tag whose arguments.py
 * (or, from the dataclass era on, its TransformerConfig) has them:
 * core_v0.5.0 (0acc240), core_v0.6.0 (cac60ce), core_v0.7.0 (a645f89),
 * core_v0.8.0 (baf94af), core_v0.10.0 (7ee599a), core_v0.11.0 (aa6207e),
 * core_v0.13.0 (c550cf6), core_v0.15.0 (0d7e02b).
 */
enum mapped_arg {
	MA_TP, MA_PP, MA_EP, MA_ETP, MA_LAYERS, MA_HIDDEN, MA_FFN, MA_HEADS,
	MA_KV_CHANNELS, MA_SWIGLU, MA_SEQ, MA_MICRO_BATCH, MA_VOCAB, MA_PADDED,
	MA_DIVISIBLE, MA_NO_PAD, MA_DISABLE_PAD, MA_UNTIE, MA_QK_LAYERNORM,
	MA_EXPERTS, MA_TOPK, MA_MOE_FFN, MA_SHARED, MA_LAYER_FREQ, MA_SCORE,
	MA_PROBS_ON_INPUT, MA_DISTOPT, MA_OVERLAP, MA_SP, MA_BUCKET, MA_AVERAGE,
	MA_SHARED_GATE, MA_FIRST_STAGE, MA_LAST_STAGE, MA_CP, MA_EOD_MASK,
	MA_PER_TOKEN, MA_VPP_LAYERS, MA_VPP_STAGES, MA_AUX_COEFF, MA_Z_COEFF,
	MA_LB_TYPE, MA_MTP, MA_MTP_FACTOR, MA_MLA, MA_SPLIT_EMBEDDING,
	MA_SPLIT_LOSS, MA_ENCODER_LAYERS, MA_ENCODER_SEQ, MA_MFSDP,
	MA_SHARDING, MA_FP8_PARAM_GATHER, MA_TRANSFORMER_IMPL,
	MA_GROUPED_GEMM, MA_SOFTMAX_TYPE, MA_GTP_SHARDS, MA_EGTP_SHARDS,
	MA__COUNT
};

/* Every argument: the mapped ones first, at their enum mapped_arg index. */
extern const struct arg_def megatron_args[];
extern const size_t megatron_nargs;

/* The argument spelt name[0..len) (no "--"), its index in *index; or NULL. */
const struct arg_def *megatron_find_arg(const char *name, size_t len,
	    size_t *index);

#endif
