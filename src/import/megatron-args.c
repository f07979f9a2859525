/*
 * The arguments of Megatron-LM that gradaudit import megatron knows
 * (megatron-args.h): each one's arity, and whether it is read into
 * configuration keys, changes no gradient gradaudit audits, or changes one
 * in a way gradaudit cannot model.  Data, read as megatron.c's opening
 * comment says.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "import/megatron-args.h"

#define MAPPED(n, k, since)	{ n, k, ARG_MAPPED, since, NULL, NULL }
#define HARMLESS(n, k)		{ n, k, ARG_HARMLESS, NULL, NULL, NULL }
#define NOTED(n, k, why)	{ n, k, ARG_HARMLESS, NULL, NULL, why }
#define REFUSED(n, k, inert, why) { n, k, ARG_REFUSED, NULL, inert, why }


const struct arg_def megatron_args[] = {
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
	 * NeMo's recipes split the pipeline this way (TransformerConfig
	 * account_for_{embedding,loss}_in_pipeline_split, ef490839e8 in
	 * 0.11.0): the embedding and the loss count as a layer each, and
	 * get_num_layers_to_build gives the first and last stages one layer
	 * fewer; import_split_accounting maps it onto the first and last
	 * stages' layers.
	 */
	[MA_SPLIT_EMBEDDING] = MAPPED("account-for-embedding-in-pipeline-split",
	    ARG_FLAG, "0.11.0"),
	[MA_SPLIT_LOSS] = MAPPED("account-for-loss-in-pipeline-split", ARG_FLAG,
	    "0.11.0"),
	/*
	 * validate_args: without --num-layers (--seq-length) the model's
	 * layers (sequence) are --encoder-num-layers (--encoder-seq-length),
	 * the old names the MIMO examples still use; T5's decoder is refused
	 * with its program and --decoder-num-layers.
	 */
	[MA_ENCODER_LAYERS] = MAPPED("encoder-num-layers", ARG_VALUE, NULL),
	[MA_ENCODER_SEQ] = MAPPED("encoder-seq-length", ARG_VALUE, NULL),
	/*
	 * Megatron-FSDP version 1 (import_megatron_fsdp): its buffers are
	 * layout.fsdp_flatten: group.
	 */
	[MA_MFSDP] = MAPPED("use-megatron-fsdp", ARG_FLAG, NULL),
	[MA_SHARDING] = MAPPED("data-parallel-sharding-strategy", ARG_VALUE,
	    NULL),
	/* Read only to refuse it with Megatron-FSDP: it changes no reduction. */
	[MA_FP8_PARAM_GATHER] = MAPPED("fp8-param-gather", ARG_FLAG, NULL),
	/* Which layers mark the experts' weights (megatron-map.c). */
	[MA_TRANSFORMER_IMPL] = MAPPED("transformer-impl", ARG_VALUE, NULL),
	[MA_GROUPED_GEMM] = MAPPED("moe-grouped-gemm", ARG_FLAG, NULL),
	/*
	 * dot_product_attention.py (dbc4129d18): "learnable" registers
	 * softmax_offset, a parameter of one value for each of the rank's
	 * heads (model.attention_sink); "off-by-one" keeps a tensor of
	 * zeros that is no parameter, as "vanilla" keeps none.
	 */
	[MA_SOFTMAX_TYPE] = MAPPED("softmax-type", ARG_VALUE, "0.15.0"),
	/* Generalized tensor parallelism: mesh.gtp, mesh.egtp. */
	[MA_GTP_SHARDS] = MAPPED("tensor-parallel-num-weight-shards", ARG_VALUE,
	    "0.19.0"),
	[MA_EGTP_SHARDS] = MAPPED("expert-tensor-parallel-num-weight-shards",
	    ARG_VALUE, "0.19.0"),

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
	REFUSED("use-torch-fsdp2", ARG_FLAG, NULL,
	    "FSDP shards parameters and gradients in a way gradaudit does not "
	    "model"),
	/*
	 * Megatron-FSDP version 1, the only one megatron-core 0.19.0 has
	 * (main d98e8a64dd runs it without --megatron-fsdp-version 2):
	 * MegatronFSDP over megatron_fsdp/param_and_grad_buffer.py, mapped
	 * above.  --use-custom-fsdp, its old name, is refused: validate_args
	 * sets it from --use-megatron-fsdp, and the custom FSDP of core 0.11
	 * to 0.13 that it once selected was not read.
	 */
	REFUSED("use-custom-fsdp", ARG_FLAG, NULL,
	    "the old name of Megatron-FSDP, whose buffers gradaudit read "
	    "only as --use-megatron-fsdp at core_v0.19.0: give that"),
	REFUSED("num-distributed-optimizer-instances", ARG_VALUE, "1",
	    "several distributed-optimizer instances reduce gradients in two "
	    "levels; gradaudit models one"),
	REFUSED("ddp-num-buckets", ARG_VALUE, NULL,
	    "gradaudit does not derive bucket sizes from a number of buckets: "
	    "give --ddp-bucket-size"),
	REFUSED("ddp-pad-buckets-for-high-nccl-busbw", ARG_FLAG, NULL,
	    "buckets padded to multiples of 2^16, a layout gradaudit does not "
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
	/*
	 * Other models than a GPT decoder: T5's encoder and decoder
	 * (pretrain_t5.py, examples/t5 at core_v0.19.0) and the Mamba layers
	 * of a hybrid model (pretrain_hybrid.py, examples/mamba).
	 */
	REFUSED("decoder-num-layers", ARG_VALUE, NULL,
	    "the layers of a decoder apart from an encoder's (T5Model); "
	    "gradaudit's model is one stack: give --num-layers"),
	REFUSED("decoder-seq-length", ARG_VALUE, NULL,
	    "the decoder's own sequence length, which T5 and the multimodal "
	    "models (LLaVA's language model) set apart from --seq-length; "
	    "gradaudit's model has one: give --seq-length"),
	REFUSED("hybrid-layer-pattern", ARG_VALUE, NULL,
	    "Mamba layers (megatron/core/ssm: the mixer's own parameters, "
	    "conv1d, A_log, D and dt_bias, split over tp), which gradaudit's "
	    "transformer layers do not stand for"),
	REFUSED("hybrid-override-pattern", ARG_VALUE, NULL,
	    "Mamba layers (megatron/core/ssm: the mixer's own parameters, "
	    "conv1d, A_log, D and dt_bias, split over tp), which gradaudit's "
	    "transformer layers do not stand for"),
	REFUSED("mamba-num-heads", ARG_VALUE, NULL,
	    "a Mamba mixer's size (TransformerConfig.mamba_num_heads): Mamba "
	    "layers, which gradaudit's transformer layers do not stand for"),
	REFUSED("mamba-head-dim", ARG_VALUE, NULL,
	    "a Mamba mixer's size (TransformerConfig.mamba_head_dim): Mamba "
	    "layers, which gradaudit's transformer layers do not stand for"),
	REFUSED("mamba-num-groups", ARG_VALUE, NULL,
	    "a Mamba mixer's size (TransformerConfig.mamba_num_groups): Mamba "
	    "layers, which gradaudit's transformer layers do not stand for"),
	REFUSED("mamba-state-dim", ARG_VALUE, NULL,
	    "a Mamba mixer's size (TransformerConfig.mamba_state_dim): Mamba "
	    "layers, which gradaudit's transformer layers do not stand for"),
	REFUSED("linear-conv-kernel-dim", ARG_VALUE, NULL,
	    "a Mamba mixer's size (TransformerConfig.linear_conv_kernel_dim): Mamba "
	    "layers, which gradaudit's transformer layers do not stand for"),
	/*
	 * A vision encoder's sizes (arguments.py's vision group), which the
	 * multimodal examples pass to their train.py.
	 */
	REFUSED("patch-dim", ARG_VALUE, NULL,
	    "a vision encoder's size: a model gradaudit's does not stand for"),
	REFUSED("img-h", ARG_VALUE, NULL,
	    "a vision encoder's size: a model gradaudit's does not stand for"),
	REFUSED("img-w", ARG_VALUE, NULL,
	    "a vision encoder's size: a model gradaudit's does not stand for"),
	/*
	 * Arguments that Megatron-LM's parser no longer has, which the
	 * academic_paper_scripts examples still pass: Megatron refuses the
	 * launch (arguments.py parse_args, allow_abbrev=False).
	 */
	REFUSED("DDP-impl", ARG_VALUE, NULL,
	    "not an argument of Megatron-LM since 3fb3e95ec6 (2023, "
	    "\"Deprecate torchDDP and get rid of args.DDP_impl\"): Megatron's "
	    "parser refuses it; remove it (its DDP is the local one)"),
	REFUSED("activations-checkpoint-method", ARG_VALUE, NULL,
	    "not an argument of Megatron-LM since cfd2e21607 (2022): "
	    "Megatron's parser refuses it; its name is now --recompute-method"),
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
	/* The inference KV cache's length, which training does not use. */
	HARMLESS("inference-max-seq-length", ARG_VALUE),
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
	/*
	 * SFTDataset masks each conversation's prompt out of the loss, so a
	 * micro-batch's valid tokens follow the data, which gradaudit's
	 * loss.valid_tokens can describe but the import cannot know.
	 */
	REFUSED("sft", ARG_FLAG, NULL,
	    "supervised fine-tuning masks each prompt out of the loss "
	    "(SFTDataset), so the valid tokens of a micro-batch depend on the "
	    "data: give loss.valid_tokens in the configuration instead"),
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
	/*
	 * The activation's shape (gpt-oss's clamped GLU with a linear
	 * offset, examples/gptoss at core_v0.19.0) and a matmul's precision.
	 */
	HARMLESS("use-fused-weighted-squared-relu", ARG_FLAG),
	HARMLESS("glu-linear-offset", ARG_VALUE),
	HARMLESS("activation-func-clamp-value", ARG_VALUE),
	HARMLESS("disable-bf16-reduced-precision-matmul", ARG_FLAG),
	/*
	 * ModelOpt's arguments (megatron/post_training/arguments.py, added
	 * by pretrain_gpt.py when nvidia-modelopt is installed), which the
	 * gptoss example passes.
	 */
	REFUSED("modelopt-enabled", ARG_FLAG, NULL,
	    "ModelOpt's model and loss (megatron/post_training/"
	    "model_builder.py and loss_func.py: quantized and distilled "
	    "models), which gradaudit has not been checked against"),
	NOTED("finetune-hf-dataset", ARG_VALUE,
	    "a ModelOpt argument: the Hugging Face data set to fine-tune on"),
	NOTED("export-te-mcore-model", ARG_FLAG,
	    "a ModelOpt argument: the ModelOpt model's layers are Transformer "
	    "Engine's, Megatron's default"),
	NOTED("enable-gpt-oss", ARG_FLAG,
	    "a ModelOpt argument: model_builder.py sets YaRN's rotary "
	    "scaling from it, which is no parameter"),
	NOTED("export-force-local-attention", ARG_FLAG,
	    "a ModelOpt argument: Megatron's own core attention instead of "
	    "Transformer Engine's, neither of which holds a parameter unless "
	    "--softmax-type learnable"),
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
	HARMLESS("outer-dp-sharding-strategy", ARG_VALUE),
	HARMLESS("no-gradient-reduce-div-fusion", ARG_FLAG),
	HARMLESS("suggested-communication-unit-size", ARG_VALUE),
	HARMLESS("keep-fp8-transpose-cache", ARG_FLAG),
	HARMLESS("fsdp-double-buffer", ARG_FLAG),
	HARMLESS("fsdp-manual-registration", ARG_FLAG),
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

const size_t megatron_nargs = sizeof(megatron_args) / sizeof(megatron_args[0]);

const struct arg_def *
megatron_find_arg(const char *name, size_t len, size_t *index)
{
	size_t	 k;

	for (k = 0; k < megatron_nargs; k++)
		if (strlen(megatron_args[k].name) == len &&
		    strncmp(megatron_args[k].name, name, len) == 0) {
			*index = k;
			return &megatron_args[k];
		}
	return NULL;
}
