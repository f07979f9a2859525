/*
 * gradaudit import megatron (megatron.h): Megatron-LM's arguments mapped
 * onto gradaudit.yaml(5).
 *
 * The argument names, their arity and Megatron's defaults were read from
 * NVIDIA/Megatron-LM main at d98e8a6 (2026-08-22): the explicit ones in
 * megatron/training/arguments.py, and those that ArgumentGroupFactory
 * (megatron/training/argument_utils.py) derives from the fields of
 * TransformerConfig (megatron/core/transformer/transformer_config.py, with
 * ModelParallelConfig, megatron/core/model_parallel_config.py) and of the
 * configs of megatron/training/config/: a field foo_bar is --foo-bar, a
 * boolean that defaults to true is --no-foo-bar or --disable-foo-bar.
 * Megatron parses them with allow_abbrev=False, so only whole names are
 * matched here too.  Where a default changed across releases, the release
 * that --framework names decides; without it, main's does.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "base/xmalloc.h"
#include "import/megatron.h"

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

#define MAPPED(n, k, since)	{ n, k, ARG_MAPPED, since, NULL, NULL }
#define HARMLESS(n, k)		{ n, k, ARG_HARMLESS, NULL, NULL, NULL }
#define NOTED(n, k, why)	{ n, k, ARG_HARMLESS, NULL, NULL, why }
#define REFUSED(n, k, inert, why) { n, k, ARG_REFUSED, NULL, inert, why }

/*
 * The arguments that set configuration keys, as indices into args[].  The
 * releases that introduced them are the first core_v tag whose arguments.py
 * (or, from the dataclass era on, its TransformerConfig) has them:
 * core_v0.5.0 (0acc240), core_v0.6.0 (cac60ce), core_v0.7.0 (a645f89),
 * core_v0.8.0 (baf94af), core_v0.10.0 (7ee599a), core_v0.11.0 (aa6207e),
 * core_v0.13.0 (c550cf6).
 */
enum mapped_arg {
	MA_TP, MA_PP, MA_EP, MA_ETP, MA_LAYERS, MA_HIDDEN, MA_FFN, MA_HEADS,
	MA_KV_CHANNELS, MA_SWIGLU, MA_SEQ, MA_MICRO_BATCH, MA_VOCAB, MA_PADDED,
	MA_DIVISIBLE, MA_NO_PAD, MA_DISABLE_PAD, MA_UNTIE, MA_QK_LAYERNORM,
	MA_EXPERTS, MA_TOPK, MA_MOE_FFN, MA_SHARED, MA_LAYER_FREQ, MA_SCORE,
	MA_PROBS_ON_INPUT, MA_DISTOPT, MA_OVERLAP, MA_SP, MA_BUCKET, MA_AVERAGE,
	MA_SHARED_GATE, MA_FIRST_STAGE, MA_LAST_STAGE, MA_CP, MA_EOD_MASK,
	MA_PER_TOKEN, MA_VPP_LAYERS, MA_VPP_STAGES, MA_AUX_COEFF, MA_Z_COEFF,
	MA_LB_TYPE, MA_MTP, MA_MTP_FACTOR, MA_MLA, MA__COUNT
};

static const struct arg_def args[] = {
	[MA_TP] = MAPPED("tensor-model-parallel-size", ARG_VALUE, NULL),
	[MA_PP] = MAPPED("pipeline-model-parallel-size", ARG_VALUE, NULL),
	[MA_EP] = MAPPED("expert-model-parallel-size", ARG_VALUE, NULL),
	[MA_ETP] = MAPPED("expert-tensor-parallel-size", ARG_VALUE, "0.10.0"),
	[MA_LAYERS] = MAPPED("num-layers", ARG_VALUE, NULL),
	[MA_HIDDEN] = MAPPED("hidden-size", ARG_VALUE, NULL),
	[MA_FFN] = MAPPED("ffn-hidden-size", ARG_VALUE, NULL),
	[MA_HEADS] = MAPPED("num-attention-heads", ARG_VALUE, NULL),
	[MA_KV_CHANNELS] = MAPPED("kv-channels", ARG_VALUE, NULL),
	[MA_SWIGLU] = MAPPED("swiglu", ARG_FLAG, NULL),
	[MA_SEQ] = MAPPED("seq-length", ARG_VALUE, NULL),
	[MA_MICRO_BATCH] = MAPPED("micro-batch-size", ARG_VALUE, NULL),
	[MA_VOCAB] = MAPPED("vocab-size", ARG_VALUE, NULL),
	[MA_PADDED] = MAPPED("padded-vocab-size", ARG_VALUE, NULL),
	[MA_DIVISIBLE] = MAPPED("make-vocab-size-divisible-by", ARG_VALUE, NULL),
	[MA_NO_PAD] = MAPPED("no-pad-vocab-size", ARG_FLAG, NULL),
	[MA_DISABLE_PAD] = MAPPED("disable-pad-vocab-size", ARG_FLAG, NULL),
	[MA_UNTIE] = MAPPED("untie-embeddings-and-output-weights", ARG_FLAG,
	    NULL),
	[MA_QK_LAYERNORM] = MAPPED("qk-layernorm", ARG_FLAG, "0.6.0"),
	[MA_EXPERTS] = MAPPED("num-experts", ARG_VALUE, NULL),
	[MA_TOPK] = MAPPED("moe-router-topk", ARG_VALUE, "0.5.0"),
	[MA_MOE_FFN] = MAPPED("moe-ffn-hidden-size", ARG_VALUE, "0.10.0"),
	[MA_SHARED] = MAPPED("moe-shared-expert-intermediate-size", ARG_VALUE,
	    "0.10.0"),
	[MA_LAYER_FREQ] = MAPPED("moe-layer-freq", ARG_VALUE, "0.10.0"),
	[MA_SCORE] = MAPPED("moe-router-score-function", ARG_VALUE, "0.11.0"),
	[MA_PROBS_ON_INPUT] = MAPPED("moe-apply-probs-on-input", ARG_FLAG,
	    "0.13.0"),
	[MA_DISTOPT] = MAPPED("use-distributed-optimizer", ARG_FLAG, NULL),
	[MA_OVERLAP] = MAPPED("overlap-grad-reduce", ARG_FLAG, NULL),
	[MA_SP] = MAPPED("sequence-parallel", ARG_FLAG, NULL),
	[MA_BUCKET] = MAPPED("ddp-bucket-size", ARG_VALUE, "0.7.0"),
	[MA_AVERAGE] = MAPPED("ddp-average-in-collective", ARG_FLAG, "0.8.0"),
	[MA_SHARED_GATE] = MAPPED("moe-shared-expert-gate", ARG_FLAG, "0.16.0"),
	[MA_FIRST_STAGE] = MAPPED("decoder-first-pipeline-num-layers",
	    ARG_VALUE, "0.9.0"),
	[MA_LAST_STAGE] = MAPPED("decoder-last-pipeline-num-layers",
	    ARG_VALUE, "0.9.0"),
	/* 796ac33d1e: context parallelism in megatron/core (0.4.0). */
	[MA_CP] = MAPPED("context-parallel-size", ARG_VALUE, NULL),
	[MA_EOD_MASK] = MAPPED("eod-mask-loss", ARG_FLAG, NULL),
	/* 0.8.0's schedules.py is the first to read it. */
	[MA_PER_TOKEN] = MAPPED("calculate-per-token-loss", ARG_FLAG, "0.8.0"),
	[MA_VPP_LAYERS] = MAPPED("num-layers-per-virtual-pipeline-stage",
	    ARG_VALUE, NULL),
	[MA_VPP_STAGES] = MAPPED("num-virtual-stages-per-pipeline-rank",
	    ARG_VALUE, "0.11.0"),
	/* moe/router.py and its arguments arrive with 0.5.0 (0acc240). */
	[MA_AUX_COEFF] = MAPPED("moe-aux-loss-coeff", ARG_LIST, "0.5.0"),
	[MA_Z_COEFF] = MAPPED("moe-z-loss-coeff", ARG_VALUE, "0.5.0"),
	[MA_LB_TYPE] = MAPPED("moe-router-load-balancing-type", ARG_LIST,
	    "0.5.0"),
	/* multi_token_prediction.py arrives with 09ebca716d (0.12.0). */
	[MA_MTP] = MAPPED("mtp-num-layers", ARG_VALUE, "0.12.0"),
	[MA_MTP_FACTOR] = MAPPED("mtp-loss-scaling-factor", ARG_VALUE,
	    "0.12.0"),
	/*
	 * Multi-latent attention, from 32eac88714 (0.10.0): imported onto
	 * the mixer's classes of parameters, or refused, by check_mla.
	 */
	[MA_MLA] = MAPPED("multi-latent-attention", ARG_FLAG, "0.10.0"),

	/*
	 * Refused: each changes which collective reduces which gradient,
	 * when, or by how much, and gradaudit has no key for it yet.
	 */
	REFUSED("hierarchical-context-parallel-sizes", ARG_LIST, NULL,
	    "hierarchical context parallelism splits the cp group in levels; "
	    "gradaudit's cp is one group"),
	REFUSED("virtual-pipeline-model-parallel-size", ARG_VALUE, NULL,
	    "Megatron-LM's launch gives the model chunks as "
	    "--num-virtual-stages-per-pipeline-rank or "
	    "--num-layers-per-virtual-pipeline-stage; give one of those"),
	REFUSED("pipeline-model-parallel-layout", ARG_VALUE, NULL,
	    "a custom pipeline layout; gradaudit splits the layers evenly or "
	    "as --decoder-first/last-pipeline-num-layers do"),
	REFUSED("account-for-embedding-in-pipeline-split", ARG_FLAG, NULL,
	    "an uneven pipeline split; gradaudit splits the layers evenly"),
	REFUSED("account-for-loss-in-pipeline-split", ARG_FLAG, NULL,
	    "an uneven pipeline split; gradaudit splits the layers evenly"),
	REFUSED("use-torch-fsdp2", ARG_FLAG, NULL,
	    "FSDP shards parameters and gradients in a way gradaudit does not "
	    "model"),
	/*
	 * Megatron-FSDP as Megatron core runs it up to core_v0.19.0 (and on
	 * main d98e8a64dd without --megatron-fsdp-version 2): version 1,
	 * MegatronFSDP over megatron_fsdp/param_and_grad_buffer.py.  Its
	 * _get_parameter_groups splits each FSDP unit's parameters by dtype
	 * and expert, sorts each group by row size (largest first) and
	 * buckets what is outside the units by 40M elements;
	 * build_data_parallel_buffer_index then packs a group in that order,
	 * fills the gaps with small tensors unaligned, pads to dp times the
	 * lcm of the row sizes and cuts it in dp shards.  gradaudit's
	 * layout.fsdp_flatten: unit is version 2's GlobalLayout.build
	 * (experimental/layout.py): registration order, fragments aligned to
	 * their rows, one buffer a unit.  The shards differ, and with them
	 * what each rank owns, so --use-megatron-fsdp is refused;
	 * --use-custom-fsdp is its old name (validate_args sets it).
	 */
	REFUSED("use-megatron-fsdp", ARG_FLAG, NULL,
	    "Megatron-FSDP version 1 (param_and_grad_buffer.py "
	    "_get_parameter_groups, build_data_parallel_buffer_index) sorts "
	    "each unit's parameters by row size and packs small ones "
	    "unaligned into its shards, a layout gradaudit does not model "
	    "(layout.fsdp_flatten: unit is version 2's, which megatron-core "
	    "0.19.0 does not have)"),
	REFUSED("use-custom-fsdp", ARG_FLAG, NULL,
	    "Megatron-FSDP version 1 (param_and_grad_buffer.py "
	    "_get_parameter_groups, build_data_parallel_buffer_index) sorts "
	    "each unit's parameters by row size and packs small ones "
	    "unaligned into its shards, a layout gradaudit does not model "
	    "(layout.fsdp_flatten: unit is version 2's, which megatron-core "
	    "0.19.0 does not have)"),
	REFUSED("num-distributed-optimizer-instances", ARG_VALUE, "1",
	    "several distributed-optimizer instances reduce gradients in two "
	    "levels; gradaudit models one"),
	REFUSED("ddp-num-buckets", ARG_VALUE, NULL,
	    "gradaudit does not derive bucket sizes from a number of buckets: "
	    "give --ddp-bucket-size"),
	REFUSED("ddp-pad-buckets-for-high-nccl-busbw", ARG_FLAG, NULL,
	    "buckets padded to multiples of 2^16, a layout gradaudit does not "
	    "model"),
	REFUSED("tensor-parallel-num-weight-shards", ARG_VALUE, NULL,
	    "weights sharded within tp add a reduction gradaudit does not "
	    "model"),
	REFUSED("expert-tensor-parallel-num-weight-shards", ARG_VALUE, NULL,
	    "weights sharded within etp add a reduction gradaudit does not "
	    "model"),
	REFUSED("use-tp-pp-dp-mapping", ARG_FLAG, NULL,
	    "gradaudit numbers ranks in Megatron's default tp-dp-pp order"),
	REFUSED("delay-wgrad-compute", ARG_FLAG, NULL,
	    "weight gradients computed after the backward pass, outside the "
	    "order of synchronization that gradaudit models"),
	REFUSED("overlap-moe-expert-parallel-comm", ARG_FLAG, NULL,
	    "weight gradients computed after the backward pass, outside the "
	    "order of synchronization that gradaudit models"),
	REFUSED("overlap-dispatch-backward-with-experts-wgrad", ARG_FLAG, NULL,
	    "weight gradients computed after the backward pass, outside the "
	    "order of synchronization that gradaudit models"),
	REFUSED("defer-embedding-wgrad-compute", ARG_FLAG, NULL,
	    "the embedding's weight gradient is computed after the backward "
	    "pass, outside the order of synchronization that gradaudit models"),
	REFUSED("optimizer", ARG_VALUE, "adam sgd",
	    "with optimizers other than adam and sgd Megatron uses a "
	    "layer-wise distributed optimizer, which gradaudit does not model"),
	REFUSED("cuda-graph-impl", ARG_VALUE, "none",
	    "CUDA graphs capture the backward pass with its gradient hooks, "
	    "which gradaudit does not model"),
	REFUSED("transformer-impl", ARG_VALUE, "transformer_engine",
	    "gradaudit has only been checked against Megatron's default "
	    "Transformer Engine layers"),
	REFUSED("spec", ARG_LIST, NULL,
	    "a custom layer spec, which gradaudit cannot read"),
	REFUSED("yaml-cfg", ARG_VALUE, NULL,
	    "the arguments come from a YAML file, which gradaudit does not "
	    "read: give them on the command line"),
	REFUSED("use-checkpoint-args", ARG_FLAG, NULL,
	    "the sizes come from the checkpoint, which gradaudit does not "
	    "read: give them on the command line"),
	REFUSED("use-mp-args-from-checkpoint-args", ARG_FLAG, NULL,
	    "the parallel sizes come from the checkpoint, which gradaudit does "
	    "not read: give them on the command line"),
	REFUSED("heterogeneous-layers-config-path", ARG_VALUE, NULL,
	    "heterogeneous layers; gradaudit's layers are all alike"),
	REFUSED("heterogeneous-layers-config-encoded-json", ARG_VALUE, NULL,
	    "heterogeneous layers; gradaudit's layers are all alike"),
	REFUSED("data-parallel-size", ARG_VALUE, NULL,
	    "not a Megatron-LM argument: Megatron's dp is WORLD_SIZE / "
	    "(tp*pp*cp); give gradaudit's --world N"),
	REFUSED("model-parallel-size", ARG_VALUE, NULL,
	    "no longer valid in Megatron: use --tensor-model-parallel-size"),

	/*
	 * Optimizer hyper-parameters and the learning-rate schedule act after
	 * the gradients are synchronized.
	 */
	HARMLESS("adam-beta1", ARG_VALUE),
	HARMLESS("adam-beta2", ARG_VALUE),
	HARMLESS("adam-eps", ARG_VALUE),
	HARMLESS("sgd-momentum", ARG_VALUE),
	HARMLESS("lion-beta1", ARG_VALUE),
	HARMLESS("lion-beta2", ARG_VALUE),
	HARMLESS("clip-grad", ARG_VALUE),
	HARMLESS("weight-decay", ARG_VALUE),
	HARMLESS("start-weight-decay", ARG_VALUE),
	HARMLESS("end-weight-decay", ARG_VALUE),
	HARMLESS("weight-decay-incr-style", ARG_VALUE),
	HARMLESS("apply-wd-to-qk-layernorm", ARG_FLAG),
	HARMLESS("no-weight-decay-cond-type", ARG_VALUE),
	HARMLESS("lr", ARG_VALUE),
	HARMLESS("min-lr", ARG_VALUE),
	HARMLESS("lr-decay-iters", ARG_VALUE),
	HARMLESS("lr-decay-samples", ARG_VALUE),
	HARMLESS("lr-decay-style", ARG_VALUE),
	HARMLESS("lr-warmup-fraction", ARG_VALUE),
	HARMLESS("lr-warmup-init", ARG_VALUE),
	HARMLESS("lr-warmup-iters", ARG_VALUE),
	HARMLESS("lr-warmup-samples", ARG_VALUE),
	HARMLESS("lr-wsd-decay-iters", ARG_VALUE),
	HARMLESS("lr-wsd-decay-samples", ARG_VALUE),
	HARMLESS("lr-wsd-decay-style", ARG_VALUE),
	HARMLESS("decoupled-lr", ARG_VALUE),
	HARMLESS("decoupled-min-lr", ARG_VALUE),
	HARMLESS("override-opt-param-scheduler", ARG_FLAG),
	HARMLESS("override-opt_param-scheduler", ARG_FLAG),
	HARMLESS("use-checkpoint-opt-param-scheduler", ARG_FLAG),
	HARMLESS("use-checkpoint-opt_param-scheduler", ARG_FLAG),
	HARMLESS("optimizer-cpu-offload", ARG_FLAG),
	HARMLESS("optimizer-offload-fraction", ARG_VALUE),
	HARMLESS("overlap-cpu-optimizer-d2h-h2d", ARG_FLAG),
	HARMLESS("use-torch-optimizer-for-cpu-offload", ARG_FLAG),
	HARMLESS("no-pin-cpu-grads", ARG_FLAG),
	HARMLESS("no-pin-cpu-params", ARG_FLAG),
	HARMLESS("optimizer-cuda-graph", ARG_FLAG),
	HARMLESS("use-precision-aware-optimizer", ARG_FLAG),
	HARMLESS("main-grads-dtype", ARG_VALUE),
	HARMLESS("main-params-dtype", ARG_VALUE),
	HARMLESS("exp-avg-dtype", ARG_VALUE),
	HARMLESS("exp-avg-sq-dtype", ARG_VALUE),
	HARMLESS("dump-param-to-param-group-map", ARG_VALUE),
	/* Precision: the same collectives in another number format. */
	HARMLESS("bf16", ARG_FLAG),
	HARMLESS("fp16", ARG_FLAG),
	HARMLESS("fp16-lm-cross-entropy", ARG_FLAG),
	HARMLESS("loss-scale", ARG_VALUE),
	HARMLESS("loss-scale-window", ARG_VALUE),
	HARMLESS("initial-loss-scale", ARG_VALUE),
	HARMLESS("min-loss-scale", ARG_VALUE),
	HARMLESS("hysteresis", ARG_VALUE),
	HARMLESS("fp8-format", ARG_VALUE),
	HARMLESS("fp8-recipe", ARG_VALUE),
	HARMLESS("fp8-margin", ARG_VALUE),
	HARMLESS("fp8-interval", ARG_VALUE),
	HARMLESS("fp8-amax-history-len", ARG_VALUE),
	HARMLESS("fp8-amax-compute-algo", ARG_VALUE),
	HARMLESS("fp8-param-gather", ARG_FLAG),
	HARMLESS("fp8-output-proj", ARG_FLAG),
	HARMLESS("no-fp8-wgrad", ARG_FLAG),
	HARMLESS("disable-fp8-wgrad", ARG_FLAG),
	HARMLESS("fp4-format", ARG_VALUE),
	HARMLESS("fp4-recipe", ARG_VALUE),
	HARMLESS("fp4-param-gather", ARG_FLAG),
	HARMLESS("first-last-layers-bf16", ARG_FLAG),
	HARMLESS("num-layers-at-start-in-bf16", ARG_VALUE),
	HARMLESS("num-layers-at-end-in-bf16", ARG_VALUE),
	HARMLESS("grad-reduce-in-bf16", ARG_FLAG),
	HARMLESS("accumulate-allreduce-grads-in-fp32", ARG_FLAG),
	HARMLESS("attention-softmax-in-fp32", ARG_FLAG),
	HARMLESS("apply-query-key-layer-scaling", ARG_FLAG),
	HARMLESS("fp32-residual-connection", ARG_FLAG),
	HARMLESS("ddp-reduce-scatter-with-fp32-accumulation", ARG_FLAG),
	/*
	 * How long and on how many samples: more micro-batches are summed
	 * locally before the same synchronization.
	 */
	HARMLESS("global-batch-size", ARG_VALUE),
	HARMLESS("rampup-batch-size", ARG_LIST),
	HARMLESS("step-batch-size-schedule", ARG_VALUE),
	HARMLESS("train-iters", ARG_VALUE),
	HARMLESS("train-samples", ARG_VALUE),
	HARMLESS("exit-interval", ARG_VALUE),
	HARMLESS("exit-duration-in-mins", ARG_VALUE),
	HARMLESS("exit-signal-handler", ARG_FLAG),
	HARMLESS("exit-signal", ARG_VALUE),
	HARMLESS("exit-on-missing-checkpoint", ARG_FLAG),
	HARMLESS("skip-train", ARG_FLAG),
	/* Initialization, checkpoints and their formats. */
	HARMLESS("seed", ARG_VALUE),
	HARMLESS("init-method-std", ARG_VALUE),
	HARMLESS("init-method-xavier-uniform", ARG_FLAG),
	HARMLESS("embedding-init-method-std", ARG_VALUE),
	HARMLESS("use-cpu-initialization", ARG_FLAG),
	HARMLESS("init-model-with-meta-device", ARG_FLAG),
	HARMLESS("no-initialization", ARG_FLAG),
	HARMLESS("data-parallel-random-init", ARG_FLAG),
	HARMLESS("te-rng-tracker", ARG_FLAG),
	HARMLESS("save", ARG_VALUE),
	HARMLESS("load", ARG_VALUE),
	HARMLESS("save-interval", ARG_VALUE),
	HARMLESS("save-retain-interval", ARG_VALUE),
	HARMLESS("no-save-optim", ARG_FLAG),
	HARMLESS("no-save-rng", ARG_FLAG),
	HARMLESS("no-load-optim", ARG_FLAG),
	HARMLESS("no-load-rng", ARG_FLAG),
	HARMLESS("finetune", ARG_FLAG),
	HARMLESS("pretrained-checkpoint", ARG_VALUE),
	HARMLESS("ckpt-format", ARG_VALUE),
	HARMLESS("ckpt-step", ARG_VALUE),
	HARMLESS("ckpt-assume-constant-structure", ARG_FLAG),
	HARMLESS("ckpt-fully-parallel-save", ARG_FLAG),
	HARMLESS("no-ckpt-fully-parallel-save", ARG_FLAG),
	HARMLESS("ckpt-fully-parallel-load", ARG_FLAG),
	HARMLESS("ckpt-fully-parallel-load-per-rank-objects", ARG_FLAG),
	HARMLESS("ckpt-drop-redundant-extra-state", ARG_FLAG),
	HARMLESS("ckpt-convert-format", ARG_VALUE),
	HARMLESS("ckpt-convert-save", ARG_VALUE),
	HARMLESS("dist-ckpt-strictness", ARG_VALUE),
	HARMLESS("dist-ckpt-format", ARG_VALUE),
	HARMLESS("dist-ckpt-optim-fully-reshardable", ARG_FLAG),
	HARMLESS("dist-ckpt-workers", ARG_VALUE),
	HARMLESS("distrib-optim-fully-reshardable-mem-efficient", ARG_FLAG),
	HARMLESS("async-save", ARG_FLAG),
	HARMLESS("async-strategy", ARG_VALUE),
	HARMLESS("async-ckpt-use-cpu-shm", ARG_FLAG),
	HARMLESS("use-dist-ckpt", ARG_FLAG),
	HARMLESS("auto-detect-ckpt-format", ARG_FLAG),
	HARMLESS("use-persistent-ckpt-worker", ARG_FLAG),
	HARMLESS("non-persistent-ckpt-type", ARG_VALUE),
	HARMLESS("non-persistent-save-interval", ARG_VALUE),
	HARMLESS("non-persistent-global-ckpt-dir", ARG_VALUE),
	HARMLESS("non-persistent-local-ckpt-dir", ARG_VALUE),
	HARMLESS("non-persistent-local-ckpt-algo", ARG_VALUE),
	HARMLESS("verify-integrity", ARG_FLAG),
	HARMLESS("no-use-tokenizer-model-from-checkpoint-args", ARG_FLAG),
	HARMLESS("disable-use-tokenizer-model-from-checkpoint-args", ARG_FLAG),
	HARMLESS("no-ckpt-load-validate-sharding-integrity", ARG_FLAG),
	HARMLESS("disable-ckpt-load-validate-sharding-integrity", ARG_FLAG),
	/* Logging, profiling and monitoring. */
	HARMLESS("log-interval", ARG_VALUE),
	HARMLESS("log-params-norm", ARG_FLAG),
	HARMLESS("log-num-zeros-in-grad", ARG_FLAG),
	HARMLESS("log-throughput", ARG_FLAG),
	HARMLESS("log-progress", ARG_FLAG),
	HARMLESS("log-timers-to-tensorboard", ARG_FLAG),
	HARMLESS("log-memory-to-tensorboard", ARG_FLAG),
	HARMLESS("log-validation-ppl-to-tensorboard", ARG_FLAG),
	HARMLESS("log-world-size-to-tensorboard", ARG_FLAG),
	HARMLESS("no-log-loss-scale-to-tensorboard", ARG_FLAG),
	HARMLESS("disable-log-loss-scale-to-tensorboard", ARG_FLAG),
	HARMLESS("log-straggler", ARG_FLAG),
	HARMLESS("log-energy", ARG_FLAG),
	HARMLESS("log-memory-interval", ARG_VALUE),
	HARMLESS("log-device-memory-used", ARG_FLAG),
	HARMLESS("logging-level", ARG_VALUE),
	HARMLESS("timing-log-level", ARG_VALUE),
	HARMLESS("timing-log-option", ARG_VALUE),
	HARMLESS("tensorboard-dir", ARG_VALUE),
	HARMLESS("tensorboard-log-interval", ARG_VALUE),
	HARMLESS("tensorboard-queue-size", ARG_VALUE),
	HARMLESS("wandb-project", ARG_VALUE),
	HARMLESS("wandb-exp-name", ARG_VALUE),
	HARMLESS("wandb-save-dir", ARG_VALUE),
	HARMLESS("wandb-entity", ARG_VALUE),
	HARMLESS("no-one-logger", ARG_FLAG),
	HARMLESS("one-logger-project", ARG_VALUE),
	HARMLESS("one-logger-run-name", ARG_VALUE),
	HARMLESS("one-logger-async", ARG_FLAG),
	HARMLESS("app-tag-run-name", ARG_VALUE),
	HARMLESS("app-tag-run-version", ARG_VALUE),
	HARMLESS("profile", ARG_FLAG),
	HARMLESS("profile-step-start", ARG_VALUE),
	HARMLESS("profile-step-end", ARG_VALUE),
	HARMLESS("profile-ranks", ARG_LIST),
	HARMLESS("use-pytorch-profiler", ARG_FLAG),
	HARMLESS("pytorch-profiler-collect-shapes", ARG_FLAG),
	HARMLESS("pytorch-profiler-collect-callstack", ARG_FLAG),
	HARMLESS("record-memory-history", ARG_FLAG),
	HARMLESS("memory-snapshot-path", ARG_VALUE),
	HARMLESS("nvtx-ranges", ARG_FLAG),
	HARMLESS("straggler-ctrlr-port", ARG_VALUE),
	HARMLESS("straggler-minmax-count", ARG_VALUE),
	HARMLESS("disable-straggler-on-startup", ARG_FLAG),
	HARMLESS("config-logger-dir", ARG_VALUE),
	/* Evaluation, data and tokenizer (the vocabulary size is read apart). */
	HARMLESS("eval-iters", ARG_VALUE),
	HARMLESS("eval-interval", ARG_VALUE),
	HARMLESS("eval-micro-batch-size", ARG_VALUE),
	HARMLESS("eval-global-batch-size", ARG_VALUE),
	HARMLESS("start-eval-at-iter", ARG_VALUE),
	HARMLESS("full-validation", ARG_FLAG),
	HARMLESS("multiple-validation-sets", ARG_FLAG),
	HARMLESS("data-path", ARG_LIST),
	HARMLESS("split", ARG_VALUE),
	HARMLESS("train-data-path", ARG_LIST),
	HARMLESS("valid-data-path", ARG_LIST),
	HARMLESS("test-data-path", ARG_LIST),
	HARMLESS("data-cache-path", ARG_VALUE),
	HARMLESS("data-args-path", ARG_VALUE),
	HARMLESS("per-split-data-args-path", ARG_VALUE),
	HARMLESS("mock-data", ARG_FLAG),
	HARMLESS("num-workers", ARG_VALUE),
	HARMLESS("no-mmap-bin-files", ARG_FLAG),
	HARMLESS("no-create-attention-mask-in-dataloader", ARG_FLAG),
	HARMLESS("dataloader-type", ARG_VALUE),
	HARMLESS("reset-position-ids", ARG_FLAG),
	HARMLESS("reset-attention-mask", ARG_FLAG),
	HARMLESS("num-dataset-builder-threads", ARG_VALUE),
	HARMLESS("mid-level-dataset-surplus", ARG_VALUE),
	HARMLESS("no-data-sharding", ARG_FLAG),
	HARMLESS("dataloader-fast-cache-load", ARG_FLAG),
	HARMLESS("dataloader-defer-npy-index-mmap", ARG_FLAG),
	HARMLESS("object-storage-cache-path", ARG_VALUE),
	HARMLESS("tokenizer-type", ARG_VALUE),
	HARMLESS("tokenizer-model", ARG_VALUE),
	HARMLESS("vocab-file", ARG_VALUE),
	HARMLESS("merge-file", ARG_VALUE),
	HARMLESS("vocab-extra-ids", ARG_VALUE),
	HARMLESS("tiktoken-pattern", ARG_VALUE),
	HARMLESS("tiktoken-num-special-tokens", ARG_VALUE),
	HARMLESS("tokenizer-special-tokens", ARG_LIST),
	HARMLESS("tokenizer-metadata", ARG_VALUE),
	HARMLESS("tokenizer-hf-no-use-fast", ARG_FLAG),
	HARMLESS("null-tokenizer-eod-id", ARG_VALUE),
	HARMLESS("null-tokenizer-pad-id", ARG_VALUE),
	/*
	 * Details of the layers that gradaudit's stand-in model leaves out:
	 * attention heads, positions, activations, norms' kind, biases,
	 * dropout, fusions.  None changes which collective reduces which
	 * parameter.
	 */
	HARMLESS("group-query-attention", ARG_FLAG),
	HARMLESS("num-query-groups", ARG_VALUE),
	HARMLESS("max-position-embeddings", ARG_VALUE),
	HARMLESS("position-embedding-type", ARG_VALUE),
	HARMLESS("rotary-base", ARG_VALUE),
	HARMLESS("rotary-percent", ARG_VALUE),
	HARMLESS("rotary-interleaved", ARG_FLAG),
	HARMLESS("rotary-seq-len-interpolation-factor", ARG_VALUE),
	HARMLESS("use-rotary-position-embeddings", ARG_FLAG),
	HARMLESS("use-rope-scaling", ARG_FLAG),
	HARMLESS("rope-scaling-factor", ARG_VALUE),
	HARMLESS("rope-type", ARG_VALUE),
	HARMLESS("no-rope-freq", ARG_VALUE),
	HARMLESS("no-position-embedding", ARG_FLAG),
	HARMLESS("no-rope-fusion", ARG_FLAG),
	HARMLESS("yarn-original-max-position-embeddings", ARG_VALUE),
	/*
	 * The sizes and rotary scaling of multi-latent attention: the
	 * DeepSeek-V3 example's (issue 27).  gradaudit's mixer stands in for
	 * MLA's projections by their synchronization classes (check_mla),
	 * not their shapes, as it does for attention's.
	 */
	HARMLESS("q-lora-rank", ARG_VALUE),
	HARMLESS("kv-lora-rank", ARG_VALUE),
	HARMLESS("qk-head-dim", ARG_VALUE),
	HARMLESS("qk-pos-emb-head-dim", ARG_VALUE),
	HARMLESS("v-head-dim", ARG_VALUE),
	HARMLESS("rotary-scaling-factor", ARG_VALUE),
	HARMLESS("mscale", ARG_VALUE),
	HARMLESS("mscale-all-dim", ARG_VALUE),
	/*
	 * It only permits the features marked experimental (core/utils.py
	 * experimental_fn and experimental_cls, the dispatcher's permute
	 * fusion): what selects one is another argument, judged on its own.
	 */
	HARMLESS("enable-experimental", ARG_FLAG),
	HARMLESS("yarn-beta-fast", ARG_VALUE),
	HARMLESS("yarn-beta-slow", ARG_VALUE),
	HARMLESS("attention-dropout", ARG_VALUE),
	HARMLESS("hidden-dropout", ARG_VALUE),
	HARMLESS("squared-relu", ARG_FLAG),
	HARMLESS("openai-gelu", ARG_FLAG),
	HARMLESS("quick-geglu", ARG_FLAG),
	HARMLESS("normalization", ARG_VALUE),
	HARMLESS("norm-epsilon", ARG_VALUE),
	HARMLESS("apply-layernorm-1p", ARG_FLAG),
	HARMLESS("apply-residual-connection-post-layernorm", ARG_FLAG),
	HARMLESS("disable-bias-linear", ARG_FLAG),
	HARMLESS("add-qkv-bias", ARG_FLAG),
	HARMLESS("attention-backend", ARG_VALUE),
	HARMLESS("use-flash-attn", ARG_FLAG),
	HARMLESS("no-masked-softmax-fusion", ARG_FLAG),
	HARMLESS("no-bias-gelu-fusion", ARG_FLAG),
	HARMLESS("no-bias-swiglu-fusion", ARG_FLAG),
	HARMLESS("no-bias-dropout-fusion", ARG_FLAG),
	HARMLESS("no-persist-layer-norm", ARG_FLAG),
	HARMLESS("no-gradient-accumulation-fusion", ARG_FLAG),
	HARMLESS("cross-entropy-loss-fusion", ARG_FLAG),
	HARMLESS("cross-entropy-fusion-impl", ARG_VALUE),
	HARMLESS("use-mcore-models", ARG_FLAG),
	HARMLESS("window-size", ARG_VALUE),
	HARMLESS("window-attn-skip-freq", ARG_VALUE),
	/* Recomputation repeats the forward pass; the gradients are the same. */
	HARMLESS("recompute-activations", ARG_FLAG),
	HARMLESS("recompute-granularity", ARG_VALUE),
	HARMLESS("recompute-method", ARG_VALUE),
	HARMLESS("recompute-num-layers", ARG_VALUE),
	HARMLESS("recompute-modules", ARG_LIST),
	HARMLESS("checkpoint-activations", ARG_FLAG),
	HARMLESS("distribute-saved-activations", ARG_FLAG),
	HARMLESS("moe-layer-recompute", ARG_FLAG),
	/*
	 * The process groups' set-up and timeouts, memory management, and
	 * checks of the results.
	 */
	HARMLESS("distributed-backend", ARG_VALUE),
	HARMLESS("distributed-timeout-minutes", ARG_VALUE),
	HARMLESS("distributed-timeout-seconds-after-init", ARG_VALUE),
	HARMLESS("nccl-communicator-config-path", ARG_VALUE),
	HARMLESS("high-priority-stream-groups", ARG_LIST),
	HARMLESS("disable-gloo-process-groups", ARG_FLAG),
	HARMLESS("create-all-gather-group", ARG_FLAG),
	HARMLESS("use-sharp", ARG_FLAG),
	HARMLESS("sharp-enabled-group", ARG_VALUE),
	HARMLESS("use-nccl-ub", ARG_FLAG),
	HARMLESS("disable-symmetric-registration", ARG_FLAG),
	HARMLESS("manual-gc", ARG_FLAG),
	HARMLESS("manual-gc-interval", ARG_VALUE),
	HARMLESS("no-manual-gc-eval", ARG_FLAG),
	HARMLESS("disable-manual-gc-eval", ARG_FLAG),
	HARMLESS("empty-unused-memory-level", ARG_VALUE),
	HARMLESS("deterministic-mode", ARG_FLAG),
	HARMLESS("no-check-for-nan-in-loss-and-grad", ARG_FLAG),
	HARMLESS("check-for-spiky-loss", ARG_FLAG),
	HARMLESS("check-for-large-grads", ARG_FLAG),
	HARMLESS("rerun-mode", ARG_VALUE),
	HARMLESS("result-rejected-tracker-filename", ARG_VALUE),
	HARMLESS("check-weight-hash-across-dp-replicas-interval", ARG_VALUE),
	/*
	 * Overlapping communication with computation: the tensor-parallel
	 * activation collectives (which gradaudit takes as correct), the
	 * pipeline's point-to-point transfers and the distributed optimizer's
	 * parameter all-gather.  When the gradient reduction overlaps,
	 * --overlap-grad-reduce is read apart.
	 */
	HARMLESS("tp-comm-overlap", ARG_FLAG),
	HARMLESS("tp-comm-overlap-cfg", ARG_VALUE),
	HARMLESS("tp-comm-bootstrap-backend", ARG_VALUE),
	HARMLESS("tp-comm-overlap-rs-dgrad", ARG_FLAG),
	HARMLESS("no-tp-comm-bulk-dgrad", ARG_FLAG),
	HARMLESS("disable-tp-comm-bulk-dgrad", ARG_FLAG),
	HARMLESS("no-tp-comm-bulk-wgrad", ARG_FLAG),
	HARMLESS("disable-tp-comm-bulk-wgrad", ARG_FLAG),
	HARMLESS("no-tp-comm-overlap-ag", ARG_FLAG),
	HARMLESS("disable-tp-comm-overlap-ag", ARG_FLAG),
	HARMLESS("no-tp-comm-overlap-rs", ARG_FLAG),
	HARMLESS("disable-tp-comm-overlap-rs", ARG_FLAG),
	HARMLESS("no-tp-comm-split-ag", ARG_FLAG),
	HARMLESS("disable-tp-comm-split-ag", ARG_FLAG),
	HARMLESS("no-tp-comm-split-rs", ARG_FLAG),
	HARMLESS("disable-tp-comm-split-rs", ARG_FLAG),
	HARMLESS("overlap-param-gather", ARG_FLAG),
	HARMLESS("overlap-param-gather-with-optimizer-step", ARG_FLAG),
	HARMLESS("no-align-param-gather", ARG_FLAG),
	HARMLESS("no-align-grad-reduce", ARG_FLAG),
	HARMLESS("disable-align-grad-reduce", ARG_FLAG),
	HARMLESS("no-overlap-p2p-communication", ARG_FLAG),
	HARMLESS("overlap-p2p-communication-warmup-flush", ARG_FLAG),
	HARMLESS("use-ring-exchange-p2p", ARG_FLAG),
	/*
	 * Options of FSDP, which does nothing without them (and is refused),
	 * and how context parallelism exchanges keys and values, which
	 * changes no gradient's synchronization (cp-comm-type).
	 */
	HARMLESS("data-parallel-sharding-strategy", ARG_VALUE),
	HARMLESS("outer-dp-sharding-strategy", ARG_VALUE),
	HARMLESS("no-gradient-reduce-div-fusion", ARG_FLAG),
	HARMLESS("suggested-communication-unit-size", ARG_VALUE),
	HARMLESS("keep-fp8-transpose-cache", ARG_FLAG),
	HARMLESS("fsdp-double-buffer", ARG_FLAG),
	HARMLESS("enable-full-sharding-in-hsdp", ARG_FLAG),
	/* Main's choice of Megatron-FSDP (after 0.19.0): 1 is the default. */
	REFUSED("megatron-fsdp-version", ARG_VALUE, "1",
	    "Megatron-FSDP version 2 (experimental/layout.py), whose layout "
	    "is layout.fsdp_flatten: unit, is not imported yet"),
	HARMLESS("megatron-fsdp-grad-comm-dtype", ARG_VALUE),
	HARMLESS("megatron-fsdp-main-grads-dtype", ARG_VALUE),
	HARMLESS("torch-fsdp2-no-reshard-after-forward", ARG_FLAG),
	HARMLESS("cp-comm-type", ARG_LIST),
	/*
	 * How tokens are routed and moved to the experts: the gradients follow
	 * the same placements whatever the kernels, capacity or dispatcher.
	 */
	HARMLESS("moe-grouped-gemm", ARG_FLAG),
	HARMLESS("moe-token-dispatcher-type", ARG_VALUE),
	HARMLESS("moe-permute-fusion", ARG_FLAG),
	HARMLESS("moe-router-fusion", ARG_FLAG),
	HARMLESS("moe-router-dtype", ARG_VALUE),
	HARMLESS("moe-router-pre-softmax", ARG_FLAG),
	HARMLESS("moe-router-num-groups", ARG_VALUE),
	HARMLESS("moe-router-group-topk", ARG_VALUE),
	HARMLESS("moe-router-topk-scaling-factor", ARG_VALUE),
	HARMLESS("moe-expert-capacity-factor", ARG_VALUE),
	HARMLESS("moe-pad-expert-input-to-capacity", ARG_FLAG),
	HARMLESS("moe-token-drop-policy", ARG_VALUE),
	HARMLESS("moe-input-jitter-eps", ARG_VALUE),
	HARMLESS("moe-per-layer-logging", ARG_FLAG),
	HARMLESS("moe-router-padding-for-fp8", ARG_FLAG),
	HARMLESS("moe-router-padding-for-quantization", ARG_FLAG),
	HARMLESS("moe-enable-deepep", ARG_FLAG),
	HARMLESS("moe-flex-dispatcher-backend", ARG_VALUE),
	HARMLESS("moe-deepep-num-sms", ARG_VALUE),
	HARMLESS("moe-hybridep-num-sms", ARG_VALUE),
	HARMLESS("moe-shared-expert-overlap", ARG_FLAG),
	/*
	 * Aux-loss-free balancing (core_v0.19.0): TopKRouter.__init__
	 * registers expert_bias as a buffer, not a parameter, and
	 * moe_utils.topk_routing_with_score_function adds it to the scores
	 * only to choose the top k, the probabilities being gathered from
	 * the unbiased scores; _apply_expert_bias counts the tokens under
	 * torch.no_grad().  finalize_model_grads._update_router_expert_bias
	 * then moves the bias by the sign of the counts' offset from their
	 * mean (moe_utils.get_updated_expert_bias), after all-reducing them
	 * over the tp_dp_cp group.  No gradient passes through the bias, and
	 * which experts a token goes to changes no synchronization
	 * (--moe-router-force-load-balancing above replaces the logits
	 * themselves).  That all-reduce is a collective gradaudit does not
	 * audit: a wrong group would let the replicas' biases drift apart.
	 */
	NOTED("moe-router-enable-expert-bias", ARG_FLAG,
	    "the expert bias is a buffer outside autograd that only chooses "
	    "the top-k experts (router.py TopKRouter, "
	    "moe_utils.topk_routing_with_score_function): it changes no "
	    "gradient gradaudit audits; gradaudit does not check the "
	    "all-reduce of its token counts over tp*dp*cp "
	    "(finalize_model_grads._update_router_expert_bias), which keeps "
	    "the replicas' biases equal"),
	HARMLESS("moe-router-bias-update-rate", ARG_VALUE),
	HARMLESS("moe-router-force-load-balancing", ARG_FLAG),
	HARMLESS("moe-use-upcycling", ARG_FLAG),
	HARMLESS("moe-upcycling-granularity", ARG_VALUE),
};

#define NARGS	(sizeof(args) / sizeof(args[0]))

/* What the words said about one argument of args[]: its last use. */
struct arg_use {
	bool		 given;
	size_t		 at;		/* words[at] is the option */
	const char	*value;		/* the value, or a list's one "--x=v" */
	size_t		 first, count;	/* a list: words[first..first+count) */
	bool		 used;		/* read into a key */
};

struct import_state {
	struct megatron_import	*mi;
	char *const		*words;
	size_t			 nwords;
	struct arg_use		 use[NARGS];
	int			 errors;
	/* The ranks the launcher starts (read_launcher), 0: unknown. */
	long			 launch_world;
	const char		*launcher;	/* "torchrun", "srun" ... */
	char			*notes;		/* lines for stderr */
};

static void	refuse(struct import_state *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	note(struct import_state *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	explain(struct import_state *, enum cfg_key, const char *, ...)
		    __attribute__((format(printf, 3, 4)));

/* An argument that stops the import: the message, and exit status 2. */
static void
refuse(struct import_state *st, const char *fmt, ...)
{
	va_list	 ap;

	fprintf(stderr, "%s: import: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	st->errors++;
}

/*
 * Something the user should know about the configuration printed: kept
 * until the import succeeds, since a refusal makes it moot.
 */
static void
note(struct import_state *st, const char *fmt, ...)
{
	va_list	 ap;
	char	*line, *more;

	va_start(ap, fmt);
	xvasprintf(&line, fmt, ap);
	va_end(ap);
	xasprintf(&more, "%s%s: import: note: %s\n", st->notes != NULL ?
	    st->notes : "", progname, line);
	free(line);
	free(st->notes);
	st->notes = more;
}

/*
 * A word of the launch as messages quote it (text.h): cut after
 * TEXT_QUOTE_MAX characters, with control characters and bytes that are
 * no UTF-8 as \xNN, so that a message stays one line whatever a launch
 * script quoted.  Control characters were '?', which hid what the word
 * held (issue 26).
 */
struct shown {
	char	 s[TEXT_QUOTE_SIZE];
};

static const char *
shown_len(struct shown *buf, const char *word, size_t len)
{
	text_escape(buf->s, sizeof(buf->s), word, len);
	return buf->s;
}

static const char *
shown(struct shown *buf, const char *word)
{
	return shown_len(buf, word, strlen(word));
}

/* Set key k as written, with where its value came from. */
static void
explain(struct import_state *st, enum cfg_key k, const char *fmt, ...)
{
	va_list	 ap;

	keyset_add(&st->mi->cfg.given, k);
	free(st->mi->why[k]);
	va_start(ap, fmt);
	xvasprintf(&st->mi->why[k], fmt, ap);
	va_end(ap);
}

static const struct arg_def *
find_arg(const char *name, size_t len, size_t *index)
{
	size_t	 k;

	for (k = 0; k < NARGS; k++)
		if (strlen(args[k].name) == len &&
		    strncmp(args[k].name, name, len) == 0) {
			*index = k;
			return &args[k];
		}
	return NULL;
}

/*
 * A word that starts an option rather than being a value.  Megatron's
 * parser has no option that looks like a negative number, so argparse reads
 * "-1" and "-.5" as values, as here.
 */
static bool
is_option(const char *w)
{
	return w[0] == '-' && w[1] != '\0' &&
	    !isdigit((unsigned char)w[1]) && w[1] != '.';
}

static bool
ends_with(const char *s, const char *suffix)
{
	size_t	 n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Value j of a list argument. */
static const char *
list_value(const struct import_state *st, const struct arg_use *u, size_t j)
{
	return u->value != NULL ? u->value : st->words[u->first + j];
}

/*
 * A launcher option's value ("--nnodes 2", "--nnodes=2", and for a short
 * option "-n 8" or "-n8"): digits only, else 0.
 */
static long
launcher_number(char *const *words, size_t *i, size_t end, size_t len)
{
	const char	*v = words[*i] + len;
	char		*stop;
	long		 n;

	if (*v == '=')
		v++;
	else if (*v == '\0' && *i + 1 < end)
		v = words[++*i];
	else if (*v == '\0' || len != 2)
		return 0;
	if (!isdigit((unsigned char)*v))
		return 0;
	errno = 0;
	n = strtol(v, &stop, 10);
	if (*stop != '\0' || errno != 0 || n < 1 || n > CFG_MAX_WORLD)
		return 0;
	return n;
}

/*
 * The launchers' options that say how many processes they start: per
 * node, nodes, or all of them.  The launchers' other options (addresses,
 * ports, ranks, rendezvous, containers) are theirs alone, and skipped with
 * the rest of what runs Megatron.
 */
enum launch_size { SIZE_PER_NODE, SIZE_NODES, SIZE_TASKS };

static const struct launcher_size {
	const char		*launcher;
	const char		*option;
	enum launch_size	 size;
} launcher_sizes[] = {
	{ "torchrun", "--nproc_per_node", SIZE_PER_NODE },
	{ "torchrun", "--nproc-per-node", SIZE_PER_NODE },
	{ "torchrun", "--nnodes", SIZE_NODES },
	{ "deepspeed", "--num_gpus", SIZE_PER_NODE },
	{ "deepspeed", "--num-gpus", SIZE_PER_NODE },
	{ "deepspeed", "--num_nodes", SIZE_NODES },
	{ "deepspeed", "--num-nodes", SIZE_NODES },
	{ "srun", "--ntasks-per-node", SIZE_PER_NODE },
	{ "srun", "--nodes", SIZE_NODES },
	{ "srun", "-N", SIZE_NODES },
	{ "srun", "--ntasks", SIZE_TASKS },
	{ "srun", "-n", SIZE_TASKS },
	{ "mpirun", "-np", SIZE_TASKS },
	{ "mpirun", "-n", SIZE_TASKS },
	{ "mpirun", "--np", SIZE_TASKS },
	{ "mpirun", "--n", SIZE_TASKS },
};

/*
 * The launcher a word of the launch line names, by the name its sizes are
 * filed under: `python -m torch.distributed.run` (or .launch) is torchrun,
 * mpiexec is mpirun.  NULL for any other word.
 */
static const char *
launcher_of(const char *w)
{
	static const struct {
		const char	*word, *launcher;
	} names[] = {
		{ "torchrun", "torchrun" },
		{ "torch.distributed.run", "torchrun" },
		{ "torch.distributed.launch", "torchrun" },
		{ "deepspeed", "deepspeed" },
		{ "srun", "srun" },
		{ "mpirun", "mpirun" },
		{ "mpiexec", "mpirun" },
	};
	const char	*base = strrchr(w, '/') != NULL ? strrchr(w, '/') + 1 : w;
	size_t		 i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(base, names[i].word) == 0)
			return names[i].launcher;
	return NULL;
}

/* The ranks a launcher starts by the sizes its options gave, or 0. */
static long
launcher_world(long sizes[3])
{
	/* A size given but not a number ("--nnodes 1:4") leaves it unknown. */
	if (sizes[SIZE_PER_NODE] < 0 || sizes[SIZE_NODES] < 0 ||
	    sizes[SIZE_TASKS] < 0)
		return 0;
	if (sizes[SIZE_TASKS] > 0)
		return sizes[SIZE_TASKS];
	if (sizes[SIZE_PER_NODE] == 0)
		return 0;
	if (sizes[SIZE_NODES] == 0)
		return sizes[SIZE_PER_NODE];
	if (sizes[SIZE_PER_NODE] > CFG_MAX_WORLD / sizes[SIZE_NODES])
		return 0;
	return sizes[SIZE_PER_NODE] * sizes[SIZE_NODES];
}

/*
 * The world size the launchers before the script give: torchrun's
 * --nproc_per_node times its --nnodes (one node by default), deepspeed's
 * --num_gpus times --num_nodes, srun's --ntasks or --ntasks-per-node
 * times --nodes, mpirun's -n.  When launchers nest (srun running
 * torchrun), the innermost that says a size starts the ranks.  Other
 * spellings of the sizes (auto, gpu, a range of nodes) say nothing
 * certain.
 */
static void
read_launcher(struct import_state *st, size_t end)
{
	const struct launcher_size	*ls;
	const char			*current = NULL, *name, *w;
	long				 sizes[3] = { 0, 0, 0 }, n;
	size_t				 i, k, len;

	for (i = 0; i < end; i++) {
		w = st->words[i];
		if ((name = launcher_of(w)) != NULL) {
			current = name;
			memset(sizes, 0, sizeof(sizes));
			continue;
		}
		for (k = 0; current != NULL &&
		    k < sizeof(launcher_sizes) / sizeof(launcher_sizes[0]); k++) {
			ls = &launcher_sizes[k];
			len = strlen(ls->option);
			if (strcmp(ls->launcher, current) != 0 ||
			    strncmp(w, ls->option, len) != 0 ||
			    (w[len] != '\0' && w[len] != '=' && !(len == 2 &&
			    isdigit((unsigned char)w[len]))))
				continue;
			n = launcher_number(st->words, &i, end, len);
			sizes[ls->size] = n > 0 ? n : -1;
			n = launcher_world(sizes);
			st->launch_world = n;
			st->launcher = n > 0 ? current : NULL;
			break;
		}
	}
}

/*
 * Where Megatron's own arguments start.  A launch line may begin with what
 * runs Megatron: environment assignments, python or torchrun with its
 * options, and the script (pretrain_gpt.py).  When the first word is not
 * an option, Megatron's arguments follow the first word that names a
 * Python script, or else start at the first option.
 */
static size_t
skip_program(struct import_state *st)
{
	size_t	 i, start;
	char	*program = NULL, *more, *word;

	if (st->nwords == 0 || is_option(st->words[0]))
		return 0;
	for (i = 0; i < st->nwords; i++)
		if (ends_with(st->words[i], ".py"))
			break;
	if (i < st->nwords) {
		read_launcher(st, i);
		start = i + 1;
	} else
		for (start = 0; start < st->nwords &&
		    strncmp(st->words[start], "--", 2) != 0; start++)
			;
	/* Whole words, escaped: a quoted newline split the note (issue 26). */
	for (i = 0; i < start; i++) {
		word = text_visible(st->words[i]);
		xasprintf(&more, "%s%s%s", program != NULL ? program : "",
		    program != NULL ? " " : "", word);
		free(word);
		free(program);
		program = more;
	}
	note(st, "not Megatron's arguments but what runs it: %s", program);
	free(program);
	return start;
}

/* Read the words into st->use[]; unknown and malformed ones are refused. */
static void
read_args(struct import_state *st, size_t i)
{
	const struct arg_def	*def, *valued = NULL;
	struct arg_use		*u;
	struct shown		 sh;
	const char		*w, *name, *eq;
	size_t			 len, k, first;

	while (i < st->nwords) {
		w = st->words[i++];
		if (!is_option(w) && valued != NULL && *w != '$') {
			/*
			 * Words after an argument's value: a value with blanks
			 * that an unquoted ${ARGS[@]} split into words, as the
			 * GPT-3 example's --step-batch-size-schedule "0:16
			 * 2.4B:320 ..." at core_v0.19.0.
			 */
			for (first = i - 1; i < st->nwords &&
			    !is_option(st->words[i]) && *st->words[i] != '$';
			    i++)
				continue;
			refuse(st, "\"%s\"%s: Megatron takes no operands: the "
			    "value of --%s, split into words? (an unquoted "
			    "${ARGS[@]} splits a value with blanks, and "
			    "Megatron's parser refuses the words after its "
			    "first too)", shown(&sh, st->words[first]),
			    i - first > 1 ? " and the words after it" : "",
			    valued->name);
			valued = NULL;
			continue;
		}
		valued = NULL;
		if (!is_option(w)) {
			refuse(st, "\"%s\": Megatron takes no operands (%s)",
			    shown(&sh, w), *w == '$' ? "a shell variable that "
			    "was not expanded: give its value" : "the value of "
			    "an argument that takes none?");
			continue;
		}
		name = w + 2;
		eq = strchr(name, '=');
		len = eq != NULL ? (size_t)(eq - name) : strlen(name);
		if (w[1] != '-' || (def = find_arg(name, len, &k)) == NULL) {
			refuse(st, "%s: not an argument gradaudit knows; it "
			    "could change gradient synchronization, so nothing "
			    "was imported (remove it if it cannot)",
			    shown_len(&sh, w, eq != NULL ? (size_t)(eq - w) :
			    strlen(w)));
			while (i < st->nwords && !is_option(st->words[i]))
				i++;
			continue;
		}
		u = &st->use[k];
		memset(u, 0, sizeof(*u));
		u->given = true;
		u->at = i - 1;
		switch (def->kind) {
		case ARG_FLAG:
			if (eq != NULL)
				refuse(st, "--%s takes no value", def->name);
			break;
		case ARG_VALUE:
			if (eq != NULL)
				u->value = eq + 1;
			else if (i < st->nwords && !is_option(st->words[i])) {
				u->value = st->words[i++];
				valued = def;
			} else
				refuse(st, "--%s needs a value", def->name);
			break;
		case ARG_LIST:
			if (eq != NULL) {
				u->value = eq + 1;
				u->count = 1;
				break;
			}
			for (u->first = i; i < st->nwords &&
			    !is_option(st->words[i]); i++)
				u->count++;
			if (u->count == 0 && def->fate != ARG_HARMLESS)
				refuse(st, "--%s needs a value", def->name);
			break;
		}
	}
}

/* True when value is one of the inert words of def (numerically, if a number). */
static bool
is_inert(const struct arg_def *def, const char *value)
{
	char		*copy, *word, *save = NULL, *end;
	double		 a, b;
	bool		 found = false;

	if (def->inert == NULL)
		return false;
	copy = xstrdup(def->inert);
	for (word = strtok_r(copy, " ", &save); word != NULL && !found;
	    word = strtok_r(NULL, " ", &save)) {
		a = strtod(word, &end);
		if (*end == '\0' && isdigit((unsigned char)*word)) {
			b = strtod(value, &end);
			found = *value != '\0' && *end == '\0' && a == b;
		} else
			found = strcmp(word, value) == 0;
	}
	free(copy);
	return found;
}

/* The words of a use, for messages: " 2", " 0.01 0.001", or "". */
static char *
use_values(const struct import_state *st, const struct arg_def *def,
    const struct arg_use *u)
{
	struct shown	 sh;
	char		*s = xstrdup(""), *more;
	size_t		 j;

	if (def->kind == ARG_VALUE && u->value != NULL) {
		free(s);
		xasprintf(&s, " %s", shown(&sh, u->value));
	} else if (def->kind == ARG_LIST)
		for (j = 0; j < u->count; j++) {
			xasprintf(&more, "%s %s", s,
			    shown(&sh, list_value(st, u, j)));
			free(s);
			s = more;
		}
	return s;
}

/* Whether the release --framework names is older than release. */
static bool
older_than(const struct import_state *st, const char *release)
{
	struct fw_version	 v;

	if (!st->mi->have_version || fw_version_parse(release, &v) == -1)
		return false;
	return fw_version_cmp(&st->mi->version, &v) < 0;
}

/*
 * Refuse what cannot be imported: arguments used with a value that
 * changes the synchronization, and arguments the release --framework
 * names does not have.
 */
static void
check_fates(struct import_state *st)
{
	const struct arg_def	*def;
	const struct arg_use	*u;
	char			 release[32], *values;
	size_t			 k, j;
	bool			 inert;

	for (k = 0; k < NARGS; k++) {
		def = &args[k];
		u = &st->use[k];
		if (!u->given)
			continue;
		if (def->fate == ARG_REFUSED) {
			inert = def->kind != ARG_FLAG;
			if (def->kind == ARG_VALUE)
				inert = u->value != NULL &&
				    is_inert(def, u->value);
			for (j = 0; def->kind == ARG_LIST && j < u->count; j++)
				inert = inert &&
				    is_inert(def, list_value(st, u, j));
			if (inert)
				continue;
			values = use_values(st, def, u);
			refuse(st, "--%s%s: %s", def->name, values, def->why);
			free(values);
		} else if (def->fate == ARG_MAPPED && def->since != NULL &&
		    older_than(st, def->since)) {
			fw_version_format(&st->mi->version, release,
			    sizeof(release));
			refuse(st, "--%s: not an argument of megatron-core %s "
			    "(it came in %s)", def->name, release, def->since);
		}
	}
}

/*
 * The notes of the ignored arguments that do act in Megatron, outside
 * every gradient (NOTED in args[]), in the launch's order.
 */
static void
note_harmless(struct import_state *st)
{
	size_t	 k, j, n = 0, noted[NARGS];

	for (k = 0; k < NARGS; k++) {
		if (!st->use[k].given || args[k].fate != ARG_HARMLESS ||
		    args[k].why == NULL)
			continue;
		for (j = n++; j > 0 && st->use[noted[j - 1]].at >
		    st->use[k].at; j--)
			noted[j] = noted[j - 1];
		noted[j] = k;
	}
	for (j = 0; j < n; j++)
		note(st, "--%s is ignored: %s", args[noted[j]].name,
		    args[noted[j]].why);
}

/* One line: every argument given that set no key, in the launch's order. */
static void
list_ignored(const struct import_state *st)
{
	char	*line = xstrdup(""), *more;
	size_t	 k, n = 0, j, ignored[NARGS];

	for (k = 0; k < NARGS; k++) {
		if (!st->use[k].given || st->use[k].used)
			continue;
		for (j = n++; j > 0 && st->use[ignored[j - 1]].at >
		    st->use[k].at; j--)
			ignored[j] = ignored[j - 1];
		ignored[j] = k;
	}
	for (j = 0; j < n; j++) {
		xasprintf(&more, "%s --%s", line, args[ignored[j]].name);
		free(line);
		line = more;
	}
	if (n > 0)
		fprintf(stderr, "%s: import: ignored %zu argument%s that "
		    "cannot change gradient synchronization:%s\n", progname,
		    n, n == 1 ? "" : "s", line);
	free(line);
}

/*
 * Integer values.  Megatron's type=int takes what Python's int() does; a
 * launch line writes plain decimal numbers, and anything else (a shell
 * variable that was never expanded, a float) is refused with the name.
 */
static long
int_arg(struct import_state *st, enum mapped_arg k, long min, long max,
    long def)
{
	struct arg_use	*u = &st->use[k];
	struct shown	 sh;
	const char	*v = u->value;
	char		*end;
	long		 n;

	if (!u->given || v == NULL)
		return def;
	u->used = true;
	errno = 0;
	n = strtol(v, &end, 10);
	if (!isdigit((unsigned char)*v) || *end != '\0' || errno != 0 ||
	    n < min || n > max) {
		refuse(st, "--%s \"%s\": expected an integer from %ld to %ld%s",
		    args[k].name, shown(&sh, v), min, max, *v == '$' ? " (a shell variable "
		    "that was not expanded: give its value)" : "");
		return def;
	}
	return n;
}

static bool
flag_arg(struct import_state *st, enum mapped_arg k)
{
	if (!st->use[k].given)
		return false;
	st->use[k].used = true;
	return true;
}

/*
 * --moe-layer-freq (megatron/training/arguments.py moe_freq_type): an
 * integer N puts experts in layers i with i % N == 0
 * (megatron/core/models/gpt/gpt_layer_specs.py); a string with a '[' is a
 * Python list expression of 0s and 1s, one per layer, built from lists,
 * integers, +, * and parentheses (_eval_pattern allows nothing else).
 */
struct py_value {
	bool	 is_list;
	long	 n;		/* an integer */
	long	*items;		/* a list of integers */
	size_t	 len;
};

struct py_parser {
	const char	*s;
	const char	*error;	/* what went wrong, once it has */
	int		 depth;	/* of brackets and parentheses */
};

/* Deeper nesting is no layer pattern, and would only use up the stack. */
#define PY_MAX_DEPTH	32

/* Longest list and largest integer an expression may build. */
#define PY_MAX_LEN	CFG_MAX_LAYERS
#define PY_MAX_INT	(1L << 24)

static bool	py_expr(struct py_parser *, struct py_value *);

static void
py_free(struct py_value *v)
{
	free(v->items);
	memset(v, 0, sizeof(*v));
}

static bool
py_fail(struct py_parser *pp, const char *error)
{
	if (pp->error == NULL)
		pp->error = error;
	return false;
}

static bool
py_append(struct py_parser *pp, struct py_value *list, long item)
{
	if (list->len >= PY_MAX_LEN)
		return py_fail(pp, "the list is longer than any model's layers");
	list->items = xreallocarray(list->items, list->len + 1,
	    sizeof(*list->items));
	list->items[list->len++] = item;
	return true;
}

static bool
py_atom(struct py_parser *pp, struct py_value *v)
{
	struct py_value	 item;
	char		*end;

	memset(v, 0, sizeof(*v));
	if ((*pp->s == '(' || *pp->s == '[') && pp->depth >= PY_MAX_DEPTH)
		return py_fail(pp, "brackets nested too deep");
	if (isdigit((unsigned char)*pp->s)) {
		errno = 0;
		v->n = strtol(pp->s, &end, 10);
		pp->s = end;
		if (errno != 0 || v->n > PY_MAX_INT)
			return py_fail(pp, "an integer is too large");
		return true;
	}
	if (*pp->s == '(') {
		pp->s++;
		pp->depth++;
		if (!py_expr(pp, v))
			return false;
		if (*pp->s != ')') {
			py_free(v);
			return py_fail(pp, "expected ')'");
		}
		pp->s++;
		pp->depth--;
		return true;
	}
	if (*pp->s != '[')
		return py_fail(pp, "expected a number, '[' or '('");
	pp->s++;
	pp->depth++;
	v->is_list = true;
	while (*pp->s != ']') {
		if (!py_expr(pp, &item))
			break;
		if (item.is_list) {
			py_free(&item);
			py_fail(pp, "a list inside a list");
			break;
		}
		if (!py_append(pp, v, item.n))
			break;
		if (*pp->s == ',')
			pp->s++;
		else if (*pp->s != ']') {
			py_fail(pp, "expected ',' or ']'");
			break;
		}
	}
	if (pp->error != NULL) {
		py_free(v);
		return false;
	}
	pp->s++;
	pp->depth--;
	return true;
}

/* a * b: integers multiply, a list repeats (Python's semantics). */
static bool
py_mul(struct py_parser *pp, struct py_value *a, struct py_value *b)
{
	struct py_value	*list, *times, out;
	long		 i;
	size_t		 j;

	if (!a->is_list && !b->is_list) {
		if (a->n != 0 && b->n > PY_MAX_INT / a->n)
			return py_fail(pp, "an integer is too large");
		a->n *= b->n;
		return true;
	}
	if (a->is_list && b->is_list)
		return py_fail(pp, "a list times a list");
	list = a->is_list ? a : b;
	times = a->is_list ? b : a;
	memset(&out, 0, sizeof(out));
	out.is_list = true;
	for (i = 0; i < times->n; i++)
		for (j = 0; j < list->len; j++)
			if (!py_append(pp, &out, list->items[j])) {
				py_free(&out);
				return false;
			}
	py_free(a);
	*a = out;
	return true;
}

/* a + b: integers add, lists concatenate. */
static bool
py_add(struct py_parser *pp, struct py_value *a, struct py_value *b)
{
	size_t	 j;

	if (a->is_list != b->is_list)
		return py_fail(pp, "a list plus an integer");
	if (!a->is_list) {
		if (a->n > PY_MAX_INT - b->n)
			return py_fail(pp, "an integer is too large");
		a->n += b->n;
		return true;
	}
	for (j = 0; j < b->len; j++)
		if (!py_append(pp, a, b->items[j]))
			return false;
	return true;
}

/*
 * expr := term ('+' term)*; term := atom ('*' atom)*.  On failure each
 * function has freed its value and pp->error says why.
 */
static bool
py_term(struct py_parser *pp, struct py_value *v)
{
	struct py_value	 b;
	bool		 ok;

	if (!py_atom(pp, v))
		return false;
	while (*pp->s == '*') {
		pp->s++;
		if (!py_atom(pp, &b)) {
			py_free(v);
			return false;
		}
		ok = py_mul(pp, v, &b);
		py_free(&b);
		if (!ok) {
			py_free(v);
			return false;
		}
	}
	return true;
}

static bool
py_expr(struct py_parser *pp, struct py_value *v)
{
	struct py_value	 b;
	bool		 ok;

	if (!py_term(pp, v))
		return false;
	while (*pp->s == '+') {
		pp->s++;
		if (!py_term(pp, &b)) {
			py_free(v);
			return false;
		}
		ok = py_add(pp, v, &b);
		py_free(&b);
		if (!ok) {
			py_free(v);
			return false;
		}
	}
	return true;
}

/*
 * The MoE layers that --moe-layer-freq s gives a model of `layers` layers,
 * into moe[]; returns NULL or what is wrong with s.
 */
static const char *
layer_pattern(const char *s, int layers, bool *moe)
{
	struct py_parser	 pp = { s, NULL, 0 };
	struct py_value		 v;
	char			*end;
	long			 n;
	int			 i;

	if (strchr(s, '[') == NULL) {
		errno = 0;
		n = strtol(s, &end, 10);
		if (!isdigit((unsigned char)*s) || *end != '\0' || errno != 0 ||
		    n < 1)
			return "expected a positive integer or a Python list "
			    "expression";
		for (i = 0; i < layers; i++)
			moe[i] = i % n == 0;
		return NULL;
	}
	if (!py_expr(&pp, &v) || (*pp.s != '\0' && !py_fail(&pp, "expected "
	    "'+', '*' or the end"))) {
		py_free(&v);
		return pp.error;
	}
	if (!v.is_list || v.len != (size_t)layers) {
		py_free(&v);
		return "the pattern must be a list with one 0 or 1 per layer "
		    "(--num-layers)";
	}
	for (i = 0; i < layers; i++) {
		if (v.items[i] != 0 && v.items[i] != 1) {
			py_free(&v);
			return "the pattern's items must be 0 or 1";
		}
		moe[i] = v.items[i] == 1;
	}
	py_free(&v);
	return NULL;
}

/*
 * The values read, before any is checked against another: so that one bad
 * number is reported once, not again through everything derived from it.
 */
struct megatron_values {
	long	 tp, pp, ep, etp, layers, hidden, ffn, heads, kv_channels;
	long	 seq, micro_batch, vocab, padded, divisible, experts, topk;
	long	 moe_ffn, shared, bucket, first_stage, last_stage;
	long	 vpp_layers, vpp_stages;
	bool	 swiglu, untie, qk_layernorm, probs_on_input, distopt, overlap;
	bool	 mla;
	bool	 shared_gate;
	bool	 sp, average, pad;
	long	 cp;
	bool	 eod_mask, per_token;
};

static void
read_values(struct import_state *st, struct megatron_values *v)
{
	const long	 mesh = CFG_MAX_MESH_DIM, dim = CFG_MAX_MODEL_DIM;
	struct shown	 sh;
	bool		 no_pad, disable_pad;

	v->tp = int_arg(st, MA_TP, 1, mesh, 1);
	v->cp = int_arg(st, MA_CP, 1, mesh, 1);
	v->eod_mask = flag_arg(st, MA_EOD_MASK);
	v->per_token = flag_arg(st, MA_PER_TOKEN);
	v->pp = int_arg(st, MA_PP, 1, mesh, 1);
	v->layers = int_arg(st, MA_LAYERS, 1, CFG_MAX_LAYERS, 0);
	v->first_stage = int_arg(st, MA_FIRST_STAGE, 1, CFG_MAX_LAYERS, 0);
	v->last_stage = int_arg(st, MA_LAST_STAGE, 1, CFG_MAX_LAYERS, 0);
	v->vpp_layers = int_arg(st, MA_VPP_LAYERS, 1, CFG_MAX_LAYERS, 0);
	v->vpp_stages = int_arg(st, MA_VPP_STAGES, 1, CFG_MAX_LAYERS, 0);
	v->hidden = int_arg(st, MA_HIDDEN, 1, dim, 0);
	v->ffn = int_arg(st, MA_FFN, 1, dim, 0);
	v->seq = int_arg(st, MA_SEQ, 1, dim, 0);
	v->micro_batch = int_arg(st, MA_MICRO_BATCH, 1, dim, 0);
	v->vocab = int_arg(st, MA_VOCAB, 1, dim, 0);
	v->padded = int_arg(st, MA_PADDED, 1, dim, 0);
	/* megatron/training/arguments.py: default 128. */
	v->divisible = int_arg(st, MA_DIVISIBLE, 1, dim, 128);
	/* TransformerConfig: num_moe_experts None; Megatron reads 0 as None. */
	v->experts = int_arg(st, MA_EXPERTS, 0, CFG_MAX_EXPERTS, 0);
	v->swiglu = flag_arg(st, MA_SWIGLU);
	v->untie = flag_arg(st, MA_UNTIE);
	v->mla = flag_arg(st, MA_MLA);
	/*
	 * With multi-latent attention --qk-layernorm normalizes the latents
	 * (check_mla), not each head: no model.qk_norm.
	 */
	v->qk_layernorm = !v->mla && flag_arg(st, MA_QK_LAYERNORM);
	v->distopt = flag_arg(st, MA_DISTOPT);
	v->overlap = flag_arg(st, MA_OVERLAP);
	v->sp = flag_arg(st, MA_SP);
	v->average = flag_arg(st, MA_AVERAGE);
	/* TokenizerConfig.pad_vocab_size: true unless --no-/--disable-. */
	no_pad = flag_arg(st, MA_NO_PAD);
	disable_pad = flag_arg(st, MA_DISABLE_PAD);
	v->pad = !no_pad && !disable_pad;
	if (v->qk_layernorm) {
		v->heads = int_arg(st, MA_HEADS, 1, dim, 0);
		v->kv_channels = int_arg(st, MA_KV_CHANNELS, 1, dim, 0);
	}
	if (v->experts > 0) {
		v->ep = int_arg(st, MA_EP, 1, mesh, 1);
		v->etp = int_arg(st, MA_ETP, 1, mesh, 0);
		/* core_v0.4.0's SwitchMLP routes each token to one expert. */
		v->topk = int_arg(st, MA_TOPK, 1, CFG_MAX_EXPERTS,
		    older_than(st, "0.5.0") ? 1 : 2);
		v->moe_ffn = int_arg(st, MA_MOE_FFN, 1, dim, 0);
		v->shared = int_arg(st, MA_SHARED, 0, dim, 0);
		v->probs_on_input = flag_arg(st, MA_PROBS_ON_INPUT);
		v->shared_gate = flag_arg(st, MA_SHARED_GATE);
	} else if (st->use[MA_EP].given) {
		/* megatron/training/arguments.py, validate_args. */
		if (int_arg(st, MA_EP, 1, mesh, 1) > 1)
			refuse(st, "--expert-model-parallel-size %s needs "
			    "--num-experts (Megatron asserts it)",
			    shown(&sh, st->use[MA_EP].value));
		st->use[MA_EP].used = false;
	}
	if (v->overlap)
		v->bucket = int_arg(st, MA_BUCKET, 1, LONG_MAX, 0);
}

/* Where a value came from, for the comments: the argument or a default. */
static const char *
given_or(const struct import_state *st, enum mapped_arg k, const char *arg,
    const char *dflt)
{
	return st->use[k].given ? arg : dflt;
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
			note(st, "--world %ld, not %s's %ld ranks", world,
			    st->launcher, st->launch_world);
	} else if (st->launch_world > 0) {
		world = st->launch_world;
		xasprintf(&from, "%ld ranks (%s)", world, st->launcher);
	} else {
		refuse(st, "the world size is unknown: give --world N (Megatron "
		    "reads it from WORLD_SIZE)");
		return false;
	}
	if (world % (v->tp * v->pp * v->cp) != 0) {
		refuse(st, "the world size %ld is not a multiple of tp*pp*cp = "
		    "%ld (Megatron asserts it)", world, v->tp * v->pp * v->cp);
		free(from);
		return false;
	}
	c->mesh.dp = (int)(world / (v->tp * v->pp * v->cp));
	explain(st, KEY_DP, "%s / (tp %ld * pp %ld * cp %ld)", from, v->tp,
	    v->pp, v->cp);
	free(from);
	c->mesh.cp = (int)v->cp;
	explain(st, KEY_CP, "%s", given_or(st, MA_CP,
	    "--context-parallel-size", "Megatron's default"));
	c->mesh.pp = (int)v->pp;
	explain(st, KEY_PP, "%s", given_or(st, MA_PP,
	    "--pipeline-model-parallel-size", "Megatron's default"));
	c->mesh.tp = (int)v->tp;
	explain(st, KEY_TP, "%s", given_or(st, MA_TP,
	    "--tensor-model-parallel-size", "Megatron's default"));
	if (v->experts == 0)
		return true;
	c->mesh.ep = (int)v->ep;
	explain(st, KEY_EP, "%s", given_or(st, MA_EP,
	    "--expert-model-parallel-size", "Megatron's default"));
	/* validate_args: expert_tensor_parallel_size None means tp. */
	c->mesh.etp = (int)(v->etp > 0 ? v->etp : v->tp);
	explain(st, KEY_ETP, "%s", given_or(st, MA_ETP,
	    "--expert-tensor-parallel-size", "Megatron's default, tp"));
	return true;
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
		explain(st, KEY_VOCAB, "--padded-vocab-size");
		c->model.vocab_divisible_by = 1;
		explain(st, KEY_VOCAB_DIVISIBLE_BY, "--padded-vocab-size is "
		    "not padded again");
		st->use[MA_VOCAB].used = st->use[MA_DIVISIBLE].used = false;
		st->use[MA_NO_PAD].used = st->use[MA_DISABLE_PAD].used = false;
		return;
	}
	if (v->vocab == 0) {
		note(st, "no --vocab-size: model.vocab is left to gradaudit's "
		    "default; give the tokenizer's size with --vocab-size");
		st->use[MA_DIVISIBLE].used = false;
		st->use[MA_NO_PAD].used = st->use[MA_DISABLE_PAD].used = false;
		return;
	}
	c->model.vocab = (int)v->vocab;
	if (!v->pad) {
		explain(st, KEY_VOCAB, "--vocab-size");
		c->model.vocab_divisible_by = 1;
		explain(st, KEY_VOCAB_DIVISIBLE_BY, "not padded");
		st->use[MA_DIVISIBLE].used = false;
		return;
	}
	padded = (v->vocab + multiple - 1) / multiple * multiple;
	if (padded > CFG_MAX_MODEL_DIM) {
		refuse(st, "--vocab-size %ld padded to %ld is larger than "
		    "gradaudit's limit of %d", v->vocab, padded,
		    CFG_MAX_MODEL_DIM);
		return;
	}
	explain(st, KEY_VOCAB, "--vocab-size; padded to %ld, a multiple of "
	    "%ld", padded, multiple);
	c->model.vocab_divisible_by = (int)v->divisible;
	explain(st, KEY_VOCAB_DIVISIBLE_BY, "%s", given_or(st, MA_DIVISIBLE,
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
		refuse(st, "--num-layers-per-virtual-pipeline-stage and "
		    "--num-virtual-stages-per-pipeline-rank cannot be set at "
		    "the same time (Megatron's validate_args asserts it)");
		return;
	}
	if (v->vpp_stages > 0) {
		c->mesh.vpp = (int)v->vpp_stages;
		explain(st, KEY_VPP, "--num-virtual-stages-per-pipeline-rank");
		return;
	}
	if (v->vpp_layers == 0)
		return;
	if (v->first_stage > 0 || v->last_stage > 0) {
		refuse(st, "--num-layers-per-virtual-pipeline-stage with an "
		    "uneven pipeline: Megatron asserts it and asks for "
		    "--num-virtual-stages-per-pipeline-rank");
		return;
	}
	per_stage = v->layers / v->pp;
	if (v->layers % v->pp != 0 || per_stage % v->vpp_layers != 0) {
		refuse(st, "--num-layers-per-virtual-pipeline-stage %ld does "
		    "not divide the %ld layers of a stage evenly (Megatron "
		    "asserts it)", v->vpp_layers, v->layers / v->pp);
		return;
	}
	c->mesh.vpp = (int)(per_stage / v->vpp_layers);
	explain(st, KEY_VPP, "%ld layers a stage / "
	    "--num-layers-per-virtual-pipeline-stage %ld", per_stage,
	    v->vpp_layers);
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
	note(st, "--multi-latent-attention: the mixer stands for MLA's "
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
	explain(st, KEY_HIDDEN, "--hidden-size");
	/*
	 * validate_args: 4 * hidden, or with --swiglu
	 * int((4 * hidden * 2 / 3) / 64) * 64, which is hidden / 24 * 64 in
	 * integers.
	 */
	if (v->ffn > 0) {
		c->model.ffn = (int)v->ffn;
		explain(st, KEY_FFN, "--ffn-hidden-size");
		st->use[MA_SWIGLU].used = false;
	} else if (v->swiglu) {
		c->model.ffn = (int)(v->hidden / 24 * 64);
		explain(st, KEY_FFN, "Megatron's default with --swiglu");
	} else {
		c->model.ffn = (int)(4 * v->hidden);
		explain(st, KEY_FFN, "Megatron's default, 4*hidden");
	}
	c->model.layers = (int)v->layers;
	explain(st, KEY_LAYERS, "--num-layers");
	/* TransformerConfig.{first,last}_pipeline_num_layers (fa8bb5921b). */
	if (v->first_stage > 0) {
		c->model.first_stage_layers = (int)v->first_stage;
		explain(st, KEY_FIRST_STAGE_LAYERS,
		    "--decoder-first-pipeline-num-layers");
	}
	if (v->last_stage > 0) {
		c->model.last_stage_layers = (int)v->last_stage;
		explain(st, KEY_LAST_STAGE_LAYERS,
		    "--decoder-last-pipeline-num-layers");
	}
	import_vpp(st, v);
	if (v->seq > 0) {
		c->model.seq = (int)v->seq;
		explain(st, KEY_SEQ, "--seq-length");
	} else
		note(st, "no --seq-length: model.seq is left to gradaudit's "
		    "default");
	if (v->micro_batch > 0) {
		c->model.micro_batch = (int)v->micro_batch;
		explain(st, KEY_MICRO_BATCH, "--micro-batch-size");
	} else
		note(st, "no --micro-batch-size: model.micro_batch is left to "
		    "gradaudit's default");
	/* GPTModel: share_embeddings_and_output_weights = not untie. */
	c->model.tie_embeddings = !v->untie;
	explain(st, KEY_TIE_EMBEDDINGS, "%s--untie-embeddings-and-output-weights",
	    v->untie ? "" : "no ");
	if (!v->qk_layernorm)
		return;
	/* q_layernorm and k_layernorm normalize each head: kv_channels. */
	c->model.qk_norm = true;
	explain(st, KEY_QK_NORM, "--qk-layernorm");
	if (v->kv_channels > 0) {
		c->model.head_dim = (int)v->kv_channels;
		explain(st, KEY_HEAD_DIM, "--kv-channels");
		st->use[MA_HEADS].used = false;
	} else if (v->heads > 0 && v->hidden % v->heads == 0) {
		/* validate_args: kv_channels = hidden_size // heads. */
		c->model.head_dim = (int)(v->hidden / v->heads);
		explain(st, KEY_HEAD_DIM, "hidden / --num-attention-heads");
	} else
		refuse(st, "--qk-layernorm needs the head size: give "
		    "--kv-channels or --num-attention-heads dividing "
		    "--hidden-size");
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
		explain(st, KEY_EVERY, "Megatron's default");
		return true;
	}
	st->use[MA_LAYER_FREQ].used = true;
	moe = xcalloc((size_t)layers, sizeof(*moe));
	if ((error = layer_pattern(freq, layers, moe)) != NULL) {
		refuse(st, "--moe-layer-freq \"%s\": %s", shown(&sh, freq),
		    error);
		free(moe);
		return false;
	}
	for (i = 0, n = 0; i < layers; i++)
		n += moe[i];
	if (n == 0) {
		refuse(st, "--moe-layer-freq %s: no layer has experts",
		    shown(&sh, freq));
		free(moe);
		return false;
	}
	if ((every = every_of(moe, layers)) > 0) {
		c->model.moe.every = every;
		explain(st, KEY_EVERY, "--moe-layer-freq %s", shown(&sh, freq));
	} else {
		c->model.moe.every = 1;
		c->model.moe.pattern = xmalloc((size_t)layers + 1);
		for (i = 0; i < layers; i++)
			c->model.moe.pattern[i] = moe[i] ? '1' : '0';
		c->model.moe.pattern[layers] = '\0';
		explain(st, KEY_PATTERN, "--moe-layer-freq %s",
		    shown(&sh, freq));
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
	explain(st, KEY_EXPERTS, "--num-experts");
	c->model.moe.top_k = (int)v->topk;
	explain(st, KEY_TOP_K, "%s", given_or(st, MA_TOPK, "--moe-router-topk",
	    older_than(st, "0.5.0") ? "SwitchMLP's top-1" :
	    "Megatron's default"));
	c->model.moe.expert_ffn = (int)(v->moe_ffn > 0 ? v->moe_ffn :
	    c->model.ffn);
	explain(st, KEY_EXPERT_FFN, "%s", v->moe_ffn > 0 ?
	    "--moe-ffn-hidden-size" : "Megatron's default, model.ffn");
	c->model.moe.score_before_experts = v->probs_on_input;
	explain(st, KEY_SCORE_BEFORE_EXPERTS, "%s--moe-apply-probs-on-input",
	    v->probs_on_input ? "" : "no ");
	c->model.moe.shared_experts = v->shared > 0;
	explain(st, KEY_SHARED_EXPERTS, "%s", v->shared > 0 ?
	    "--moe-shared-expert-intermediate-size" : "no "
	    "--moe-shared-expert-intermediate-size");
	/*
	 * TransformerConfig.moe_shared_expert_gate (bddd0a8ed7): "only
	 * effective when moe-shared-expert-intermediate-size is set".
	 */
	c->model.moe.shared_expert_gate = v->shared > 0 && v->shared_gate;
	if (v->shared > 0)
		explain(st, KEY_SHARED_EXPERT_GATE, "%s--moe-shared-expert-gate",
		    v->shared_gate ? "" : "no ");
	else if (v->shared_gate)
		note(st, "--moe-shared-expert-gate without "
		    "--moe-shared-expert-intermediate-size: Megatron has no "
		    "shared expert to gate");
	/*
	 * SharedExpertMLP (1fa9464e7c, 0.10.0): one MLP whose ffn_hidden_size
	 * is moe_shared_expert_intermediate_size.
	 */
	if (v->shared > 0 && v->shared != c->model.ffn) {
		c->model.moe.shared_expert_ffn = (int)v->shared;
		explain(st, KEY_SHARED_EXPERT_FFN,
		    "--moe-shared-expert-intermediate-size");
	}
	if (score == NULL || strcmp(score, "softmax") == 0)
		c->model.moe.score_func = SCORE_SOFTMAX;
	else if (strcmp(score, "sigmoid") == 0)
		c->model.moe.score_func = SCORE_SIGMOID;
	else
		refuse(st, "--moe-router-score-function \"%s\": gradaudit "
		    "knows softmax and sigmoid", shown(&sh, score));
	st->use[MA_SCORE].used = score != NULL;
	explain(st, KEY_SCORE_FUNC, "%s", given_or(st, MA_SCORE,
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
	explain(st, KEY_NORMALIZE_BY, "--calculate-per-token-loss");
	explain(st, KEY_DP_DIVISOR, "--calculate-per-token-loss");
	if (older_than(st, "0.12.0")) {
		c->loss.scale = SIZE_CP;
		explain(st, KEY_SCALE, "--calculate-per-token-loss before "
		    "5946e24b37: loss_func's loss times cp");
	} else {
		c->loss.scale = SIZE_ONE;
		explain(st, KEY_SCALE, "--calculate-per-token-loss");
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
 * A loss coefficient as an exact decimal into *dst, unless it is 0 (which
 * changes nothing); false, refused, when it is no decimal number.
 */
static bool
import_coeff(struct import_state *st, const char *value, const char *flag,
    enum cfg_key key, char **dst, bool *any)
{
	struct shown	 sh;
	char		 dec[64];

	if (!float_as_decimal(value, dec, sizeof dec)) {
		refuse(st, "%s \"%s\": expected a decimal number", flag,
		    shown(&sh, value));
		return false;
	}
	if (strcmp(dec, "0") != 0) {
		free(*dst);
		*dst = xstrdup(dec);
		explain(st, key, "%s", flag);
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
			type = list_value(st, t, 0);
	}
	if (!a->given)
		return type;
	n = a->value != NULL ? 1 : a->count;
	for (j = 0; j < n; j++)
		if (!float_as_decimal(list_value(st, a, j), dec, sizeof dec) ||
		    strcmp(dec, "0") != 0)
			nonzero++;
	*several = *several || (nonzero > 0 && n > 1);
	if (nonzero > 0)
		*coeff = list_value(st, a, 0);
	return type;
}

/*
 * An integer argument as written, for the checks that run before the
 * values are read (check_mla, check_aux_losses): def when it is not given
 * or not a plain number, which int_arg refuses later.
 */
static long
raw_long(const struct import_state *st, enum mapped_arg k, long def)
{
	const char	*v = st->use[k].value;
	char		*end;
	long		 n;

	if (!st->use[k].given || v == NULL || !isdigit((unsigned char)*v))
		return def;
	errno = 0;
	n = strtol(v, &end, 10);
	return *end != '\0' || errno != 0 ? def : n;
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
	long	 tp = raw_long(st, MA_TP, 1);

	if (!st->use[MA_MLA].given || tp <= 1)
		return;
	if (!st->use[MA_SP].given)
		refuse(st, "--multi-latent-attention with tp %ld and no "
		    "--sequence-parallel: k_pos_emb, the rotary key all heads "
		    "share, gets each tp rank's heads' gradient and no "
		    "collective sums it (multi_latent_attention.py "
		    "get_query_key_value_tensors gathers it over tp only with "
		    "sequence parallelism; Megatron-LM issue #1699, PR #6839); "
		    "the partial gradient reaches linear_kv_down_proj and the "
		    "layer's input, which gradaudit's mixer cannot represent",
		    tp);
	else if (older_than(st, "0.14.0"))
		refuse(st, "--multi-latent-attention with tp %ld before "
		    "megatron-core 0.14.0: the down projections were "
		    "column-parallel from 0.12.0 (1c425a8313) until 720c8b40d8, "
		    "and k_pos_emb's gradient is not summed over tp "
		    "(Megatron-LM issue #1699); gradaudit models 0.14.0's "
		    "duplicated down projections", tp);
	else if (older_than(st, "0.17.0"))
		refuse(st, "--multi-latent-attention with tp %ld before "
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
	if (older_than(st, "0.14.0"))
		refuse(st, "--moe-router-load-balancing-type seq_aux_loss "
		    "before megatron-core 0.14.0: sequence_load_balancing_loss_"
		    "func counts each rank's own tokens and all-gathers the "
		    "scores over the tp_cp group, a gradient path gradaudit "
		    "does not model (0.14.0's c08d89bea0 gives it aux_loss's)");
	else if (st->use[MA_PER_TOKEN].given && older_than(st, "0.19.0") &&
	    !older_than(st, "0.16.0") && raw_long(st, MA_MICRO_BATCH, 0) != 1)
		refuse(st, "--moe-router-load-balancing-type seq_aux_loss with "
		    "--calculate-per-token-loss and a micro-batch other than "
		    "1 before megatron-core 0.19.0: _apply_seq_aux_loss "
		    "pre-multiplies by one sequence's tokens, so the gradient "
		    "is 1/micro-batch-size too small (e3fe5508c9, PR #5798), "
		    "which loss.aux_scale has no value for");
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
		refuse(st, "--moe-router-load-balancing-type with several "
		    "types: gradaudit models one, aux_loss");
	else if (several)
		refuse(st, "--moe-aux-loss-coeff with several values: "
		    "gradaudit models one, for aux_loss");
	else if (coeff != NULL && strcmp(type, "seq_aux_loss") == 0)
		check_seq_aux_loss(st);
	else if (coeff != NULL && strcmp(type, "aux_loss") != 0 &&
	    strcmp(type, "none") != 0 && strcmp(type, "sinkhorn") != 0)
		refuse(st, "--moe-router-load-balancing-type %s: gradaudit "
		    "models the normalization of aux_loss and seq_aux_loss "
		    "only", shown(&sh, type));
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
	    strcmp(type, "seq_aux_loss") == 0) &&
	    !import_coeff(st, av, "--moe-aux-loss-coeff", KEY_AUX_LOSS_COEFF,
	    &c->model.moe.aux_loss_coeff, &any))
		return;
	if (av != NULL && strcmp(type, "seq_aux_loss") == 0)
		note(st, "--moe-router-load-balancing-type seq_aux_loss: "
		    "imported as aux_loss, whose reductions and scales its "
		    "gradient takes (router.py _apply_seq_aux_loss); the "
		    "stand-in's loss is the micro-batch's, Megatron's the mean "
		    "of each sequence's, the same with --micro-batch-size 1");
	if (z->given && z->value != NULL && (!float_as_decimal(z->value, dec,
	    sizeof dec) || strcmp(dec, "0") != 0)) {
		z->used = true;
		if (!import_coeff(st, z->value, "--moe-z-loss-coeff",
		    KEY_Z_LOSS_COEFF, &c->model.moe.z_loss_coeff, &any))
			return;
	}
	if (!any)
		return;
	if (older_than(st, "0.8.0")) {
		refuse(st, "--moe-aux-loss-coeff or --moe-z-loss-coeff before "
		    "megatron-core 0.8.0: each rank's load-balancing loss "
		    "counts its own tokens, which gradaudit does not model");
		return;
	}
	if (!v->per_token)
		return;
	if (older_than(st, "0.12.0")) {
		refuse(st, "--moe-aux-loss-coeff with --calculate-per-token-loss "
		    "before megatron-core 0.12.0: the auxiliary losses' "
		    "gradient is divided by the step's valid tokens, which "
		    "gradaudit does not model");
		return;
	}
	c->loss.aux_scale = older_than(st, "0.19.0") ? AUX_SCALE_TOKENS_LOCAL :
	    AUX_SCALE_TOKENS_TP_CP;
	explain(st, KEY_AUX_SCALE, "--calculate-per-token-loss%s",
	    older_than(st, "0.19.0") ? " before 9ef8a2a420 (PR #5047): "
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
	struct shown	 sh;
	char		 dec[64];
	long		 n = int_arg(st, MA_MTP, 0, 8, 0);

	if (n == 0) {
		/* No MTP layer: nothing it changes (listed as ignored). */
		st->use[MA_MTP].used = false;
		return;
	}
	c->model.mtp = (int)n;
	explain(st, KEY_MTP, "--mtp-num-layers");
	if (f->given && f->value != NULL) {
		f->used = true;
		if (!float_as_decimal(f->value, dec, sizeof dec)) {
			refuse(st, "--mtp-loss-scaling-factor \"%s\": expected "
			    "a decimal number", shown(&sh, f->value));
			return;
		}
		free(c->model.mtp_loss_scaling_factor);
		c->model.mtp_loss_scaling_factor = xstrdup(dec);
		explain(st, KEY_MTP_LOSS_SCALING_FACTOR,
		    "--mtp-loss-scaling-factor");
	}
	if (!v->per_token)
		return;
	c->loss.mtp_scale = older_than(st, "0.17.0") ? MTP_SCALE_TOKENS :
	    MTP_SCALE_TOKENS_LOCAL;
	explain(st, KEY_MTP_SCALE, "--calculate-per-token-loss%s",
	    older_than(st, "0.17.0") ? " before a22c40e8d6 (PR #3159): the "
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
	explain(st, KEY_DISTRIBUTED_OPTIMIZER, "%s--use-distributed-optimizer",
	    v->distopt ? "" : "no ");
	/* validate_args turns sequence parallelism off when tp is 1. */
	c->training.sequence_parallel = v->sp && v->tp > 1;
	explain(st, KEY_SEQUENCE_PARALLEL, "%s", !v->sp ?
	    "no --sequence-parallel" : v->tp > 1 ? "--sequence-parallel" :
	    "--sequence-parallel, which Megatron turns off with tp 1");
	c->training.average_in_collective = v->average;
	explain(st, KEY_AVERAGE_IN_COLLECTIVE, "%s--ddp-average-in-collective",
	    v->average ? "" : "no ");
	c->training.overlap_grad_reduce = v->overlap;
	explain(st, KEY_OVERLAP_GRAD_REDUCE, "%s--overlap-grad-reduce",
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
		explain(st, KEY_VALID_TOKENS, "no --eod-mask-loss");
		if (st->mi->eod_document_tokens > 0)
			note(st, "--eod-document-tokens %ld changes nothing "
			    "without --eod-mask-loss",
			    st->mi->eod_document_tokens);
	} else if (st->mi->eod_document_tokens > 0) {
		xasprintf(&c->loss.valid_tokens, "eod:%ld",
		    st->mi->eod_document_tokens);
		explain(st, KEY_VALID_TOKENS, "--eod-mask-loss, "
		    "--eod-document-tokens");
	} else {
		xasprintf(&c->loss.valid_tokens, "eod:%d",
		    MEGATRON_EOD_DOCUMENT_TOKENS);
		explain(st, KEY_VALID_TOKENS, "--eod-mask-loss; documents of "
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
	explain(st, KEY_OBJECTIVE, v->per_token ? "--calculate-per-token-loss" :
	    "no --calculate-per-token-loss: Megatron's choice");
	if (v->per_token)
		import_per_token_loss(st);
	import_aux_losses(st, v);
	import_mtp(st, v);
	if (!v->overlap) {
		c->training.bucket_elems = 0;
		explain(st, KEY_BUCKET_ELEMS, "one bucket without "
		    "--overlap-grad-reduce");
	} else if (v->bucket > 0) {
		c->training.bucket_elems = v->bucket;
		explain(st, KEY_BUCKET_ELEMS, "--ddp-bucket-size");
	} else if (older_than(st, "0.7.0")) {
		c->training.bucket_elems = 40000000;
		explain(st, KEY_BUCKET_ELEMS, "Megatron's default before "
		    "0.7.0");
	} else {
		c->training.bucket_elems = dp * 1000000 > 40000000 ?
		    dp * 1000000 : 40000000;
		explain(st, KEY_BUCKET_ELEMS, "Megatron's default, "
		    "max(40000000, 1000000*dp)");
	}
}

int
megatron_import(struct megatron_import *mi, char *const *words,
    size_t nwords)
{
	struct import_state	*st;
	struct megatron_values	 v;
	int			 rc = -1;

	st = xcalloc(1, sizeof(*st));
	st->mi = mi;
	st->words = words;
	st->nwords = nwords;
	memset(&v, 0, sizeof(v));
	read_args(st, skip_program(st));
	/*
	 * Every refused argument is named in one run, unknown ones included,
	 * so that a launch is not fixed one refusal at a time.
	 */
	check_fates(st);
	check_mla(st);
	check_aux_losses(st);
	if (st->errors == 0)
		read_values(st, &v);
	if (st->errors == 0 && (!st->use[MA_LAYERS].given ||
	    !st->use[MA_HIDDEN].given))
		refuse(st, "--%s is missing (Megatron requires it)",
		    args[st->use[MA_LAYERS].given ? MA_HIDDEN : MA_LAYERS].name);
	if (st->errors == 0 && import_mesh(st, &v)) {
		import_vocab(st, &v);
		import_dense(st, &v);
		import_mla(st, &v);
		import_moe(st, &v);
		import_training(st, &v);
	}
	if (st->errors == 0) {
		note_harmless(st);
		fputs(st->notes != NULL ? st->notes : "", stderr);
		list_ignored(st);
		rc = 0;
	}
	free(st->notes);
	free(st);
	return rc;
}

void
megatron_import_free(struct megatron_import *mi)
{
	int	 k;

	for (k = 0; k < KEY__COUNT; k++) {
		free(mi->why[k]);
		mi->why[k] = NULL;
	}
	cfg_free(&mi->cfg);
}
