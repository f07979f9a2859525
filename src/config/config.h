/*
 * A parallel configuration as read from YAML (SPEC section 3), with the
 * defaults filled in and every constraint of SPEC section 5 checked.
 *
 * The loader is strict: unknown keys, wrong types, out-of-range integers,
 * unknown enum values and impossible meshes are errors that name
 * file:line:col and the key, and make the command exit 2 before anything is
 * audited.
 */
#ifndef GRADAUDIT_CONFIG_H
#define GRADAUDIT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/text.h"

/* Upper bounds that make "absurd sizes" a configuration error, not a crash. */
#define CFG_MAX_MESH_DIM	(1 << 20)	/* any one of dp, pp, tp, ep, etp */
#define CFG_MAX_WORLD		(1 << 20)	/* dp * cp * pp * tp */
#define CFG_MAX_MICRO_BATCHES	32		/* training.micro_batches */
#define CFG_MAX_MODEL_DIM	(1 << 20)	/* vocab, hidden, ffn, seq, ... */
#define CFG_MAX_LAYERS		4096
#define CFG_MAX_EXPERTS		4096
#define CFG_MAX_PARAM_ELEMS	((int64_t)1 << 40)	/* elements of one parameter */
#define CFG_MAX_FILE_BYTES	(16 << 20)		/* a config file */

enum embedding_sync {		/* sync.embedding_grad */
	EMBEDDING_BEFORE_DP,	/* "before-dp" */
	EMBEDDING_AFTER_DP,	/* "after-dp" */
	EMBEDDING_SEPARATE_BUCKET, /* "separate-bucket" */
	EMBEDDING_FULL_AFTER_DP	/* "full-after-dp": Megatron PR #6500 */
};

enum router_sync {		/* sync.router_grad */
	ROUTER_AUTO,		/* "auto" */
	ROUTER_TP_ALL_REDUCE,	/* "tp-all-reduce" */
	ROUTER_NONE,		/* "none" */
	ROUTER_NONE_WITHOUT_EP	/* "none-without-ep": none with ep 1, else auto */
};

enum expert_input_sync {	/* sync.expert_input_grad */
	EXPERT_INPUT_ETP_ALL_REDUCE,	/* "etp-all-reduce" */
	EXPERT_INPUT_NONE		/* "none" */
};

/*
 * sync.moe_input_grad: how the framework declares the gradient of the MoE
 * block's input at the block boundary.  "auto" reduces it over tp as its
 * true placement says (torchtitan from #2416, Megatron's "f");
 * "replicate" declares it Replicate, so each tp rank keeps its own share
 * (torchtitan before #2416: PrepareModuleInputOutput(use_local_input=True));
 * "partial" declares it Partial whatever it holds, so the local tensors are
 * summed over tp as they are (torchtitan de329200b, MoE.forward's
 * to_local(grad_placements=(Partial(),))): a part already complete on
 * every tp rank is counted tp times.
 */
enum moe_input_sync {
	MOE_INPUT_AUTO,		/* "auto" */
	MOE_INPUT_REPLICATE,	/* "replicate" */
	MOE_INPUT_PARTIAL,	/* "partial" */
	/*
	 * "replicate-without-ep": replicate with ep 1, else partial.
	 * torchtitan b052f36fe (PR #3654) passes the routed experts'
	 * local_map its in_grad_placements only "if enable_ep".
	 */
	MOE_INPUT_REPLICATE_WITHOUT_EP
};

/*
 * sync.router_input_grad: whether the router's input gradient is
 * all-reduced over tp inside the block.  torchtitan de329200b (PR #2416)
 * declares the gate's output gradient Partial, and NoParallel's
 * from_local(Replicate) of the gate's plain-tensor input all-reduces the
 * Partial input gradient in backward; 963c20cba (PR #3386) no longer
 * wraps it.
 */
enum router_input_sync {
	ROUTER_INPUT_NONE,		/* "none" */
	ROUTER_INPUT_TP_ALL_REDUCE	/* "tp-all-reduce" */
};

enum sp_param_sync {		/* sync.sp_param_grad */
	SP_PARAM_TP_ALL_REDUCE,	/* "tp-all-reduce" */
	SP_PARAM_NONE,		/* "none" */
	SP_PARAM_SKIP_STANDALONE /* "skip-standalone": Megatron #1446 */
};

enum qk_norm_sync {		/* sync.qk_norm_grad, sync.out_norm_grad */
	QK_NORM_TP_ALL_REDUCE,	/* "tp-all-reduce" */
	QK_NORM_NONE,		/* "none" */
	QK_NORM_WITH_SP		/* "with-sp": only with sequence parallelism */
};

/*
 * model.gtp_sharded: which weights generalized tensor parallelism shards
 * over mesh.gtp (Megatron marks them is_gtp_weight_remat: the weights of
 * TransformerEngine's Linear and GroupedLinear, transformer_engine.py
 * _gtp_attach_post_init, core_v0.19.0); the others are replicated over it.
 */
enum gtp_sharded {
	GTP_SHARDED_LINEAR,	/* "linear": column, row and expert weights */
	GTP_SHARDED_NONE	/* "none": every parameter replicated */
};

/*
 * sync.expert_gtp_divisor: what DDP's prescale of the expert buffer
 * leaves out of dp*cp.  Megatron core_v0.19.0 (and main d98e8a64dd)
 * prescales it by 1/dp_cp_group.size(), a group without gtp_remat, as
 * the dense buffer (gtp, Megatron-LM PR #7165); its fix multiplies by
 * egtp/gtp, for the egtp mean that follows (egtp).
 */
enum expert_gtp_divisor {
	EXPERT_GTP_DIVISOR_EGTP,	/* "egtp": 1/(dp*cp/egtp) */
	EXPERT_GTP_DIVISOR_GTP		/* "gtp": 1/(dp*cp/gtp), PR #7165 */
};

/*
 * sync.expert_tp_divisor: what expert gradients are divided by besides
 * the data-parallel divisor, for the tp copies of their tokens.  NeMo
 * Automodel's scale_grads_and_clip_grad_norm divides them by
 * expert_tp_replication_factor (tp, get_expert_tp_replication_factor,
 * PR #2995 at 57921452b3): with the router and the token path
 * replicated over tp every tp rank dispatches the same tokens
 * (model.moe.ep_on: tp-replicated), so the experts see each token tp
 * times.
 */
enum expert_tp_divisor {
	EXPERT_TP_DIVISOR_NONE,		/* "none" */
	EXPERT_TP_DIVISOR_TP		/* "tp" */
};

enum kv_sync {			/* sync.kv_grad */
	KV_TP_ALL_REDUCE,	/* "tp-all-reduce" */
	KV_NONE			/* "none" */
};

enum expert_avg_scale {		/* sync.expert_avg_scale */
	EXPERT_AVG_EDP_OVER_DP,	/* "edp-over-dp" */
	EXPERT_AVG_ONE_OVER_EP	/* "one-over-ep" */
};

enum per_token_avg {		/* sync.per_token_avg */
	PER_TOKEN_AVG_NET,	/* "net": pre-scaled to a sum */
	PER_TOKEN_AVG_AVG	/* "avg": factor 1, then AVG */
};

enum expert_divisor {		/* sync.expert_grad_divisor */
	EXPERT_DIVISOR_DP,	/* "dp" */
	EXPERT_DIVISOR_EDP	/* "edp" */
};

/*
 * grad_norm: which elements each rank puts into its gradient norm and over
 * which groups the partial sums are all-reduced (gradnorm.h).  The first
 * spelling of each is correct; the others model real bugs.
 */
enum gn_tp_duplicates {		/* grad_norm.tp_duplicates */
	GN_TP_DUP_ONCE,		/* "once": tp rank 0 only (Megatron's filter) */
	GN_TP_DUP_EVERY_RANK	/* "every-tp-rank": TE PR #715, NeMo-RL #3788 */
};

enum gn_tied_copies {		/* grad_norm.tied_copies */
	GN_TIED_ONCE,		/* "once": the first stage's copy */
	GN_TIED_BOTH		/* "both": Megatron PR #7227 */
};

enum gn_expert_filter {		/* grad_norm.expert_filter */
	GN_EXPERT_FILTER_EXPERT_TP,	/* "expert-tp" */
	GN_EXPERT_FILTER_DENSE_TP	/* "dense-tp": Megatron PR #5916 */
};

/*
 * grad_norm.sink_filter: whether the attention sinks, one value a head
 * split over tp, are marked tensor parallel, so that the duplicate filter
 * keeps every tp rank's (Megatron-LM #7452 finding 8, PR #7530).
 */
enum gn_sink_filter {		/* grad_norm.sink_filter */
	GN_SINK_FILTER_TP_SHARDED,	/* "tp-sharded" */
	GN_SINK_FILTER_TP_RANK_0	/* "tp-rank-0": unmarked */
};

enum gn_expert_norm {		/* grad_norm.expert_norm */
	GN_EXPERT_SUM,		/* "sum": summed over ep */
	GN_EXPERT_AVERAGE,	/* "average": DeepSpeed #8469, #5259 */
	GN_EXPERT_LOCAL,	/* "local": Colossal-AI #2192 */
	GN_EXPERT_OMIT		/* "omit": DeepSpeed PR #8613 */
};

enum gn_shard_group {		/* grad_norm.shard_group */
	GN_SHARD_IF_SHARDED,	/* "if-sharded" */
	GN_SHARD_ALWAYS,	/* "always": VeOmni PR #862 */
	GN_SHARD_NEVER		/* "never": SpecForge PR #663 */
};

enum gn_pp_reduce {		/* grad_norm.pp_reduce */
	GN_PP_ALL_REDUCE,	/* "all-reduce" */
	GN_PP_NONE		/* "none": torchtitan #596 */
};

enum gn_clip_ranks {		/* grad_norm.clip_ranks */
	GN_CLIP_ALL,		/* "all" */
	GN_CLIP_TP_RANK_0	/* "tp-rank-0": BLOOM-176B */
};

/* layout.bucket_stages: which pipeline stages split a buffer into buckets */
enum bucket_stages {
	BUCKET_STAGES_ALL,	/* "all" */
	BUCKET_STAGES_FIRST,	/* "first": only the first stage */
	BUCKET_STAGES_NONE	/* "none": one bucket per buffer everywhere */
};

/* layout.bucket_padding: what a bucket's end is padded to */
enum bucket_padding {
	PAD_GROUP,		/* "group": a multiple of the group size */
	PAD_GROUP_LCM_128	/* "lcm-128": a multiple of lcm(group, 128) */
};

/* layout.expert_buffer: when expert parameters get a buffer of their own */
enum expert_buffer {
	EXPERT_BUFFER_ALWAYS,		/* "always" */
	EXPERT_BUFFER_IF_EXPERT_MESH,	/* "if-expert-mesh": ep > 1 or etp != tp */
	EXPERT_BUFFER_IF_EP,		/* "if-ep": ep > 1 */
	EXPERT_BUFFER_ALL_REDUCE	/* "all-reduce": own, never sharded */
};

/* layout.tied_bucket_start: where a tied weight's own bucket starts */
enum tied_bucket_start {
	TIED_START_PADDED,		/* "padded": at the padded end before */
	TIED_START_PARAM,		/* "param-start": the weight does not move */
	TIED_START_PAD_IF_UNALIGNED	/* "pad-if-unaligned": ba8f2de */
};

/* layout.tied_embedding_bucket: whether the tied weight has its own bucket */
enum tied_bucket {
	TIED_BUCKET_SHARED,		/* "shared": like any parameter */
	TIED_BUCKET_OWN,		/* "own": always */
	TIED_BUCKET_OWN_DISTOPT_PP	/* "own-if-distopt-pp" */
};

/*
 * loss.normalize_by: what divides the summed loss of a micro-batch's valid
 * tokens on one rank (lossnorm.c computes it per micro-batch).
 */
enum loss_divisor {
	LOSS_GLOBAL,		/* "global": valid tokens of the whole step */
	LOSS_GLOBAL_WITHOUT_CP,	/* "global-without-cp": verl #5993 */
	LOSS_GLOBAL_CP_DUPLICATED, /* "global-cp-duplicated": prime-rl #2562 */
	LOSS_RANK,		/* "rank": the rank's own over its micro-batches */
	LOSS_MICRO_BATCH,	/* "micro-batch": K times the micro-batch's own */
	LOSS_MICRO_BATCH_CP,	/* "micro-batch-cp": K times its sum over cp */
	LOSS_MICRO_BATCH_OWN,	/* "micro-batch-own": the micro-batch's own */
	LOSS_NONE		/* "none": a plain sum */
};

/*
 * loss.objective: what the step means to minimize, the reference every
 * gradient is compared with (issue 23).  A framework's normalization that
 * matches the stated objective is correct; lossnorm.c turns it into each
 * chunk's expected weight, which both engines read.
 */
enum loss_objective {
	OBJECTIVE_TOKEN_MEAN,		/* "token-mean": over the step's tokens */
	OBJECTIVE_MICRO_BATCH_MEAN,	/* "micro-batch-mean": of their means */
	OBJECTIVE_SAMPLE_MEAN,		/* "sample-mean": of each sample's */
	OBJECTIVE_SUM			/* "sum": the summed token losses */
};

/*
 * loss.mtp_objective: what a multi-token prediction layer's term means,
 * stated by the user.  "rolled-mean" is the mean over the tokens whose
 * label its roll keeps (Megatron since PR #3159); "main-count" divides
 * the same summed losses by the main labels' count, the 1/T of the
 * DeepSeek-V3 report's MTP loss, as torchtitan's MTPLoss does from
 * f59c215e8.  Neither is a bug: the objective says which one is meant.
 */
enum mtp_objective {
	MTP_OBJECTIVE_ROLLED_MEAN,	/* "rolled-mean" */
	MTP_OBJECTIVE_MAIN_COUNT	/* "main-count" */
};

/* loss.scale and sync.dp_divisor: a size that multiplies or divides */
enum data_size {
	SIZE_DP_CP,		/* "dp-cp": dp * cp */
	SIZE_DP,		/* "dp" */
	SIZE_CP,		/* "cp" */
	SIZE_ONE		/* "none": 1 */
};

enum dp_group_choice {		/* sync.dp_group */
	DP_GROUP_DP_CP,		/* "dp-cp": Megatron's dp_cp group */
	DP_GROUP_DP		/* "dp": VeOmni #1115 */
};

/* layout.dp_engine: who shards and reduces the data-parallel gradients */
enum dp_engine {
	DP_ENGINE_MEGATRON,	/* "megatron": bucketed flat buffers */
	DP_ENGINE_FSDP2,	/* "fsdp2": fully_shard, per-parameter dim-0 */
	DP_ENGINE_FSDP1		/* "fsdp1": FlatParameter per parameter */
};

/*
 * layout.tied_fsdp_groups: how many fully_shard groups the FSDP2 engine
 * puts the two uses of a tied weight in (the embedding lookup and the
 * output projection of one stage).
 */
enum tied_fsdp_groups {
	/* "one": fully_shard([tok_embeddings, norm, output]), torchtitan 29e27d038 */
	TIED_FSDP_ONE,
	/* "two": fully_shard(tok_embeddings), then [norm, output], re-tied after */
	TIED_FSDP_TWO
};

/*
 * layout.fsdp_flatten: what the FSDP2 engine lays out as one flat sharded
 * buffer.
 */
enum fsdp_flatten {
	/* "parameter": each parameter on its own (torch fully_shard) */
	FSDP_FLATTEN_PARAMETER,
	/* "unit": every parameter of a fully_shard unit (Megatron-FSDP v2) */
	FSDP_FLATTEN_UNIT,
	/* "group": Megatron-FSDP v1's parameter groups, each its own buffer */
	FSDP_FLATTEN_GROUP
};

/*
 * layout.expert_dim_mesh: which mesh's size, times ep, decides that
 * FSDP2 shards the routed experts on dim 1 (when it exceeds the experts):
 * the experts' shard group (torchtitan from 183a0d2e7, v0.2.1), or that
 * group with the HSDP replicas (v0.2.0's dp_mod_ep_mesh).
 */
enum expert_dim_mesh {
	/* "efsdp": efsdp * ep > experts */
	EXPERT_DIM_EFSDP,
	/* "replicate-efsdp": dp_replicate * efsdp * ep > experts */
	EXPERT_DIM_REPLICATE_EFSDP
};

/*
 * sync.fsdp_one_member: what the FSDP engine does when a parameter's
 * reduce-scatter group has one member.
 */
enum fsdp_one_member {
	/* "full": the factor applied, the replicas reduced */
	FSDP_ONE_MEMBER_FULL,
	/* "drop-factor": pytorch before PR #167178 */
	FSDP_ONE_MEMBER_DROP_FACTOR,
	/* "drop-replicate": FSDP1's clamped HYBRID_SHARD, verl #7493 */
	FSDP_ONE_MEMBER_DROP_REPLICATE
};

/*
 * sync.fsdp_divide_factor: what FSDP2's custom gradient divide factor
 * divides on an HSDP mesh (pytorch #155903).
 */
enum fsdp_divide_factor {
	/*
	 * "gradient": the whole reduction, PREMUL_SUM(1/f) in the
	 * reduce-scatter and a summing all-reduce over the replicas
	 * (set_gradient_divide_factor, pytorch after PR #155915)
	 */
	FSDP_DIVIDE_FACTOR_GRADIENT,
	/*
	 * "reduce-scatter": the reduce-scatter alone, the all-reduce over
	 * the replicas still averaging (set_reduce_scatter_divide_factor
	 * before PR #155915)
	 */
	FSDP_DIVIDE_FACTOR_REDUCE_SCATTER
};

/*
 * sync.replicate_only: the data-parallel reduction of an FSDP engine's
 * mesh that has replicas and nothing to shard over (dp_replicate > 1,
 * dp_shard * cp = 1).
 */
enum replicate_only {
	/* "fsdp": the FSDP engine's collectives, as on any mesh */
	REPLICATE_ONLY_FSDP,
	/* "ddp-average": DDP's all-reduce, averaged over the replicas */
	REPLICATE_ONLY_DDP_AVERAGE
};

/*
 * loss.pp_normalize_by: what divides the loss that is back-propagated
 * with pp > 1, where a pipeline schedule calls the loss function.
 */
enum pp_normalize {
	PP_NORMALIZE_SAME,	/* "same": loss.normalize_by */
	PP_NORMALIZE_NONE	/* "none": the summed token losses */
};

/* limits.seq_divisor: what model.seq must be a multiple of */
enum seq_divisor {
	SEQ_DIVISOR_CP_TP,	/* "cp-tp": cp * tp */
	SEQ_DIVISOR_2_CP_TP,	/* "2-cp-tp": 2 * cp * tp, even with cp 1 */
	SEQ_DIVISOR_2_CP_TP_IF_CP, /* "2-cp-tp-if-cp": tp with cp 1 */
	/* "tokens-2-cp-tp-if-cp": the same of micro_batch * seq */
	SEQ_DIVISOR_TOKENS_2_CP_TP_IF_CP
};

/*
 * loss.aux_scale: what multiplies the gradient of a micro-batch's MoE
 * auxiliary losses (load balancing and z-loss) on one rank, besides their
 * coefficients (lossnorm.c has the table).
 */
enum aux_scale {
	AUX_SCALE_MICRO_BATCHES_CP,	/* "micro-batches-cp": cp / K */
	AUX_SCALE_MICRO_BATCHES,	/* "micro-batches": 1 / K */
	AUX_SCALE_TOKENS_TP_CP,		/* "tokens-tp-cp": T_r tp cp / N */
	AUX_SCALE_TOKENS_LOCAL,		/* "tokens-local": T_r / N */
	AUX_SCALE_NONE			/* "none": no gradient at all */
};

/*
 * loss.aux_type: over which group a rank's load-balancing loss counts
 * the tokens routed to each expert, and loss.aux_objective: which counts
 * the user's objective means (lossnorm.h).  Megatron's aux_loss counts
 * the sequence (the tp_cp group); its global_aux_loss (router.py
 * _apply_global_aux_loss) counts the tp_dp_cp group and keeps a running
 * mean of those counts over the micro-batches of the step.
 */
enum aux_type {
	AUX_TYPE_SEQUENCE,		/* "aux-loss" */
	AUX_TYPE_GLOBAL			/* "global-aux-loss" */
};
enum aux_objective {
	AUX_OBJECTIVE_TYPE,		/* "as-type": what aux_type counts */
	AUX_OBJECTIVE_SEQUENCE,		/* "sequence" */
	AUX_OBJECTIVE_GLOBAL		/* "global": running dp-group counts */
};

/*
 * loss.mtp_scale: what multiplies the summed loss of a micro-batch's
 * multi-token prediction layer k on one rank, besides its weight
 * mtp_loss_scaling_factor / depth (lossnorm.c has the table).  v is the
 * chunk's valid tokens, v_k its rolled mask's, N and N_k the step's.
 */
enum mtp_scale {
	MTP_SCALE_MICRO_BATCHES,	/* "micro-batches": 1 / (K v_k) */
	MTP_SCALE_MICRO_BATCHES_CP,	/* "micro-batches-cp": cp/(K v_k) */
	MTP_SCALE_TOKENS,		/* "tokens": 1 / N */
	MTP_SCALE_TOKENS_LOCAL,		/* "tokens-local": v / (v_k N) */
	MTP_SCALE_TOKENS_GLOBAL,	/* "tokens-global": 1 / N_k */
	/* "micro-batches-cp-group": cp / (K sum of v_k over the cp group) */
	MTP_SCALE_MICRO_BATCHES_CP_GROUP
};

enum score_func {		/* model.moe.score_func */
	SCORE_SOFTMAX,		/* "softmax" */
	SCORE_SIGMOID		/* "sigmoid" */
};

/*
 * model.moe.ep_on: how the routed experts are parallelized.  "all-to-all"
 * (Megatron, torchtitan): the tp group's tokens are cut into tp/etp
 * slices and each slice's tokens are dispatched to the experts' owners in
 * the ep group.  "tp-mask" (Hugging Face transformers' tensor-parallel
 * plans, the "ep_router" and grouped_gemm entries, issue 25): the ep
 * group is the tp group itself, every tp rank routes all of its tokens,
 * computes only the pairs of the experts it holds (the others masked) and
 * the tp reduction of the block's output sums the experts' shares.
 * "tp-replicated" (NeMo Automodel's custom MoE tensor parallelism, from
 * 41ccabac4, PR #2995): the tokens are sent to the experts' owners as
 * under all-to-all, but the tp group's tokens are not cut: every tp rank
 * dispatches all of its tokens, the same as its tp peers', so each
 * expert computes every token once per tp rank of its source.
 */
enum moe_ep_on {
	MOE_EP_ALL_TO_ALL,	/* "all-to-all" */
	MOE_EP_TP_MASK,		/* "tp-mask" */
	MOE_EP_TP_REPLICATED	/* "tp-replicated" */
};

/* Where a key was written: libyaml marks, 1-based.  line 0 = not written. */
struct cfg_mark {
	int	line;
	int	col;
};

/*
 * Which keys the user wrote (or set with --set), as bits, so that sweep can
 * adjust only the model sizes a config leaves to their defaults.
 */
enum cfg_key {
	KEY_NAME, KEY_MESH, KEY_DP, KEY_PP, KEY_TP, KEY_EP, KEY_ETP,
	KEY_MODEL, KEY_VOCAB, KEY_HIDDEN, KEY_FFN, KEY_LAYERS, KEY_SEQ,
	KEY_MICRO_BATCH, KEY_TIE_EMBEDDINGS, KEY_MOE, KEY_EXPERTS, KEY_TOP_K,
	KEY_EXPERT_FFN, KEY_SCORE_BEFORE_EXPERTS, KEY_SHARED_EXPERTS,
	KEY_SCORE_FUNC, KEY_EVERY, KEY_TRAINING, KEY_DISTRIBUTED_OPTIMIZER,
	KEY_SEQUENCE_PARALLEL, KEY_AVERAGE_IN_COLLECTIVE, KEY_BUCKET_ELEMS,
	KEY_SYNC, KEY_EMBEDDING_GRAD, KEY_ROUTER_GRAD, KEY_EXPERT_INPUT_GRAD,
	KEY_SP_PARAM_GRAD, KEY_EXPERT_GRAD_DIVISOR,
	KEY_FRAMEWORK, KEY_OVERLAP_GRAD_REDUCE,
	KEY_LAYOUT, KEY_BUCKET_STAGES, KEY_BUCKET_NEEDS_OVERLAP,
	KEY_BUCKET_MIN_PARAMS, KEY_BUCKET_PADDING, KEY_PARAM_ALIGNMENT,
	KEY_EXPERT_BUFFER, KEY_TIED_EMBEDDING_BUCKET,
	KEY_QK_NORM, KEY_HEAD_DIM, KEY_QK_NORM_GRAD, KEY_EXPERT_AVG_SCALE,
	KEY_LIMITS, KEY_MOE_SUPPORTED, KEY_QK_NORM_SUPPORTED, KEY_ETP_SUPPORTED,
	KEY_MOE_TP_NEEDS_SP, KEY_TIED_BUCKET_START, KEY_TIED_START_ASSERTED,
	KEY_AVG_SUPPORTED, KEY_AVG_NEEDS_ETP_EQ_TP, KEY_BUCKET_ELEMS_PER_DP,
	KEY_SHARED_EXPERT_GATE, KEY_SHARED_EXPERTS_SUPPORTED,
	KEY_EP_TP_NEEDS_SP, KEY_EP_DISTOPT_SUPPORTED, KEY_MAX_TOP_K,
	KEY_MOE_EVERY_SUPPORTED, KEY_FIRST_STAGE_LAYERS, KEY_LAST_STAGE_LAYERS,
	KEY_PATTERN, KEY_UNEVEN_PP_SUPPORTED,
	KEY_CP, KEY_MICRO_BATCHES, KEY_LOSS, KEY_VALID_TOKENS,
	KEY_NORMALIZE_BY, KEY_SCALE, KEY_DP_DIVISOR, KEY_DP_GROUP,
	KEY_GRAD_NORM, KEY_TP_DUPLICATES, KEY_TIED_COPIES, KEY_EXPERT_FILTER,
	KEY_EXPERT_NORM, KEY_SHARD_GROUP, KEY_PP_REDUCE, KEY_CLIP_RANKS,
	KEY_VOCAB_DIVISIBLE_BY,
	KEY_VPP, KEY_BUCKET_CHUNKS, KEY_VPP_MIN_PP, KEY_UNEVEN_VPP_SUPPORTED,
	KEY_AVG_CP_SUPPORTED,
	KEY_DP_REPLICATE, KEY_DP_ENGINE, KEY_FSDP_ONE_MEMBER,
	KEY_FSDP_FLATTEN,
	KEY_MOE_INPUT_GRAD, KEY_EP_SUPPORTED,
	KEY_ETP_ONE_OR_TP,
	KEY_AUX_LOSS_COEFF, KEY_Z_LOSS_COEFF,
	KEY_AUX_SCALE, KEY_SHARED_EXPERT_FFN,
	KEY_EXPERT_FFN_SUPPORTED, KEY_SIGMOID_SUPPORTED,
	KEY_SCORE_AFTER_EXPERTS_SUPPORTED, KEY_ROUTER_INPUT_GRAD,
	KEY_MTP, KEY_MTP_LOSS_SCALING_FACTOR, KEY_MTP_SCALE,
	KEY_MTP_SUPPORTED, KEY_MTP_CP_SUPPORTED,
	KEY_OBJECTIVE,
	KEY_PER_TOKEN_AVG, KEY_AVG_PER_TOKEN_SUPPORTED,
	KEY_REPLICATE_ONLY, KEY_DDP_NEEDS_ONE_DIM, KEY_PP_NORMALIZE_BY,
	KEY_EP_BORROWS_ALL_CP_TP, KEY_SEQ_DIVISOR,
	KEY_EXPERT_DIM_MESH, KEY_MTP_PP_SUPPORTED, KEY_MTP_OBJECTIVE,
	KEY_TIED_FSDP_GROUPS, KEY_SHARED_PARAM_REFUSED,
	KEY_PLAN,
	KEY_ETP_ONE_WITH_EP, KEY_SCORE_BEFORE_EXPERTS_SUPPORTED,
	KEY_KV_HEADS, KEY_KV_GRAD,
	KEY_ATTENTION_SINK, KEY_SINK_FILTER, KEY_OUT_NORM, KEY_OUT_NORM_GRAD,
	KEY_ATTENTION_SINK_SUPPORTED, KEY_OUT_NORM_SUPPORTED,
	KEY_AUX_TYPE, KEY_AUX_OBJECTIVE,
	KEY_EP_ON, KEY_TP_MASK_SUPPORTED, KEY_GLOBAL_AUX_SUPPORTED,
	KEY_GTP, KEY_EGTP, KEY_GTP_SHARDED, KEY_GTP_SUPPORTED,
	KEY_EXPERT_GTP_DIVISOR,
	KEY_DUPLICATED_MIXER,
	KEY_TP_REPLICATED_SUPPORTED,
	KEY_FSDP_DIVIDE_FACTOR,
	KEY_EXPERT_TP_DIVISOR,
	KEY__COUNT
};

/* A set of keys, as bits. */
#define KEYSET_WORDS	((KEY__COUNT + 63) / 64)
struct keyset {
	uint64_t	w[KEYSET_WORDS];
};

static inline bool
keyset_has(const struct keyset *s, int k)
{
	return (s->w[k / 64] >> (k % 64)) & 1;
}

static inline void
keyset_add(struct keyset *s, int k)
{
	s->w[k / 64] |= (uint64_t)1 << (k % 64);
}

struct fw_profile;
struct fw_registry;

/*
 * One step of the plan: section (issue 25), as written.  The model layer
 * (syncplan.c) expands it into sync steps; nothing else reads it.
 */
enum plan_op {
	PLAN_PRESET,		/* the steps sync: and the profile build */
	PLAN_SCALE,		/* scale: EXPR */
	PLAN_ALL_REDUCE,	/* all-reduce: GROUP */
	PLAN_ACCUMULATE,	/* accumulate: DTYPE (mixed precision) */
	PLAN_RESET,		/* reset: grads */
	PLAN_REDUCE_SCATTER,	/* reduce-scatter: GROUP, with buffer: */
	PLAN_ALL_GATHER,	/* all-gather: GROUP */
	PLAN_TO_PARTIAL,	/* to-partial: tp, with replicate: */
	PLAN_DECLARE,		/* declare: replicate | partial */
	PLAN_GATHER_LOSS	/* gather-loss: GROUP, with autograd: */
};

/*
 * term: the loss term a scale: or gather-loss: step acts on, an index of
 * cfg_plan_term_words[]: the main loss, the MoE auxiliary losses
 * (load-balancing and z-loss), the multi-token prediction losses.  Such
 * a step acts at the backward, on the term's loss factor
 * (model/lossterm.c), wherever it stands in the plan.
 */
enum plan_term {
	PLAN_TERM_MAIN,
	PLAN_TERM_AUX,
	PLAN_TERM_MTP,
	PLAN_TERM__COUNT
};

/*
 * micro-batches: the micro-batches after whose backward a step runs (a
 * reset: before whose backward), as written; syncplan.c resolves it
 * against training.micro_batches.
 */
enum plan_when {
	PLAN_WHEN_DEFAULT,	/* not written: last, and every for a reset */
	PLAN_WHEN_LAST,
	PLAN_WHEN_FIRST,
	PLAN_WHEN_EVERY,
	PLAN_WHEN_NONE,
	PLAN_WHEN_LIST		/* the indexes in micro_batches[] */
};

/* plan_item.replicate: the tp sub-dimensions a to-partial step names. */
#define PLAN_REPLICATE_SLICES	0x1
#define PLAN_REPLICATE_ETP	0x2

struct plan_item {
	enum plan_op	 op;
	struct cfg_mark	 mark;		/* the item */
	struct cfg_mark	 value_mark;	/* its operation's value */
	char		*expr;		/* PLAN_SCALE: the factor as written */
	int		 group;		/* cfg_plan_group_name() */
	bool		 average;	/* all-reduce, reduce-scatter: AVG */
	struct cfg_mark	 average_mark;	/* line 0: not written */
	/*
	 * PLAN_ACCUMULATE: the dtype's gradient buffer it accumulates into;
	 * another step with dtype: runs on that dtype's buffer alone.
	 * Indices of cfg_plan_dtype_words[]; -1: dtype: not written (the
	 * step runs wherever each gradient is).
	 */
	int		 dtype;
	struct cfg_mark	 dtype_mark;	/* dtype:'s value */
	/* params: globs over parameter names; none: every parameter. */
	char		**globs;
	struct cfg_mark	*glob_marks;
	int		 nglobs;
	/* stages: pipeline stages (0-based); none: every stage. */
	int		*stages;
	struct cfg_mark	*stage_marks;
	int		 nstages;
	bool		 stages_scalar;	/* one value, not a list */
	/* micro-batches: a keyword, or a list of 0-based indexes. */
	enum plan_when	 when;
	int		*micro_batches;
	struct cfg_mark	*micro_batch_marks;
	int		 nmicro_batches;
	bool		 micro_batches_scalar;	/* one index, not a list */
	/*
	 * buffer: a whole gradient buffer of every stage, instead of
	 * parameters (cfg_plan_buffer_words[]); buffer_mark.line 0: none.
	 */
	int		 buffer;
	struct cfg_mark	 buffer_mark;
	/*
	 * to-partial: PLAN_REPLICATE_* bits; 0 until read (then both).
	 * declare: partial: the sub-dimensions declared Replicate; 0: none.
	 */
	unsigned	 replicate;
	struct cfg_mark	 replicate_mark;
	/* declare: cfg_plan_declare_words[] (PLAN_DECLARE_*). */
	int		 declare;
	/*
	 * term: an enum plan_term, or -1: not written (a scale acts on the
	 * gradients where it stands, a gather-loss on every term).
	 */
	int		 term;
	struct cfg_mark	 term_mark;
	/* gather-loss: is the gather differentiable (default true)? */
	bool		 autograd;
	struct cfg_mark	 autograd_mark;	/* line 0: not written */
	/*
	 * declare: instead of parameters, the gradient of an activation
	 * inside the backward (cfg_plan_activation_words[]), or -1: not
	 * written.
	 */
	int		 activation;
	struct cfg_mark	 activation_mark;
};

/* Where one key was written (struct config's marks). */
struct cfg_key_mark {
	int		 key;	/* enum cfg_key */
	struct cfg_mark	 mark;
};

struct config {
	char	*file;		/* path as given on the command line */
	char	*name;		/* name:, or the file's base name without .yaml */
	int	 doc_index;	/* position in a list of documents, 0-based */

	struct {
		int	dp, pp, tp, ep, etp;
		int	cp;	/* context parallel: tokens split, weights not */
		int	vpp;	/* model chunks per pipeline stage */
		int	dp_replicate;	/* HSDP replicas; dp_shard = dp / it */
		/*
		 * Generalized tensor parallelism (Megatron's gtp_remat and
		 * egtp_remat): factors of dp and of edp whose ranks hold
		 * distinct tokens, as dp's do, and shards of the weights
		 * model.gtp_sharded names (model/mesh.h).
		 */
		int	gtp, egtp;
	} mesh;

	struct {
		int	vocab, hidden, ffn, layers, seq, micro_batch;
		/* Megatron's uneven pipeline split (fa8bb5921b); 0: even. */
		int	first_stage_layers, last_stage_layers;
		/* vocab is padded to a multiple of this times tp. */
		int	vocab_divisible_by;
		bool	tie_embeddings;
		bool	qk_norm;	/* a norm shared by the heads */
		int	head_dim;
		/*
		 * Key/value heads of grouped-query attention, 0 when the
		 * mixer has no K/V projection of its own.  Fewer than tp:
		 * every tp rank holds all of them.
		 */
		int	kv_heads;
		/*
		 * A learnable attention sink: one value a head, the heads
		 * split over tp (Megatron's softmax_offset).
		 */
		bool	attention_sink;
		/*
		 * A norm of each head's output shared by every head, the
		 * heads split over tp (Gated DeltaNet's out_norm).
		 */
		bool	out_norm;
		/*
		 * The mixer not split over tp: every tp rank holds its whole
		 * weights and computes it on the gathered sequence, its
		 * output then cut back to the rank's shard (slime's
		 * HuggingfaceAttention on Megatron, the linear attention of
		 * Qwen3-Next and Qwen3.5).
		 */
		bool	duplicated_mixer;
		enum gtp_sharded gtp_sharded;
		bool	has_moe;	/* model.moe present */
		struct {
			int		experts, top_k, expert_ffn;
			bool		score_before_experts;
			int		shared_experts;
			/* Each shared expert's width; 0: model.ffn. */
			int		shared_expert_ffn;
			bool		shared_expert_gate;
			enum score_func	score_func;
			enum moe_ep_on	ep_on;
			int		every;
			char		*pattern;	/* "0011...": MoE where '1' */
			/*
			 * Megatron's --moe-aux-loss-coeff and
			 * --moe-z-loss-coeff as decimals ("0.01"); NULL: 0.
			 */
			char		*aux_loss_coeff;
			char		*z_loss_coeff;
		} moe;
		/* Multi-token prediction layers (Megatron --mtp-num-layers). */
		int	mtp;
		/* --mtp-loss-scaling-factor as a decimal; NULL: "0.1". */
		char	*mtp_loss_scaling_factor;
	} model;

	struct {
		bool	distributed_optimizer;
		bool	sequence_parallel;
		bool	average_in_collective;
		int64_t	bucket_elems;	/* 0 = one bucket per stage buffer */
		bool	overlap_grad_reduce;
		int	micro_batches;	/* gradient accumulation steps */
	} training;

	/* The per-token loss and its normalization (lossnorm.c). */
	struct {
		char			*valid_tokens;	/* NULL: "uneven" */
		enum loss_divisor	 normalize_by;
		enum data_size		 scale;
		enum aux_scale		 aux_scale;
		enum aux_type		 aux_type;
		enum aux_objective	 aux_objective;
		enum mtp_scale		 mtp_scale;
		enum loss_objective	 objective;
		enum mtp_objective	 mtp_objective;
		enum pp_normalize	 pp_normalize_by;
	} loss;

	struct {
		enum embedding_sync	embedding_grad;
		enum router_sync	router_grad;
		enum expert_input_sync	expert_input_grad;
		enum moe_input_sync	moe_input_grad;
		enum router_input_sync	router_input_grad;
		enum sp_param_sync	sp_param_grad;
		enum expert_divisor	expert_grad_divisor;
		enum qk_norm_sync	qk_norm_grad;
		enum kv_sync		kv_grad;
		enum qk_norm_sync	out_norm_grad;
		enum expert_avg_scale	expert_avg_scale;
		enum per_token_avg	per_token_avg;
		enum data_size		dp_divisor;
		enum dp_group_choice	dp_group;
		enum fsdp_one_member		fsdp_one_member;
		enum replicate_only	replicate_only;
		enum fsdp_divide_factor	fsdp_divide_factor;
		enum expert_tp_divisor	expert_tp_divisor;
		enum expert_gtp_divisor expert_gtp_divisor;
	} sync;

	/* How the gradient norm for clipping is computed (gradnorm.h). */
	struct {
		enum gn_tp_duplicates	tp_duplicates;
		enum gn_tied_copies	tied_copies;
		enum gn_expert_filter	expert_filter;
		enum gn_sink_filter	sink_filter;
		enum gn_expert_norm	expert_norm;
		enum gn_shard_group	shard_group;
		enum gn_pp_reduce	pp_reduce;
		enum gn_clip_ranks	clip_ranks;
	} grad_norm;

	/*
	 * What the framework can run at all: a config that needs more is a
	 * configuration error under its profile, as the framework itself
	 * refuses it (or cannot express it) at start-up.
	 */
	struct {
		bool	moe;
		bool	qk_norm;
		bool	etp;		/* etp may differ from tp */
		bool	moe_tp_needs_sp;
		bool	avg;		/* average_in_collective exists */
		bool	avg_needs_etp_eq_tp;
		bool	shared_experts;	/* shared experts and their gate exist */
		bool	ep_tp_needs_sp;	/* ep > 1 with tp > 1 needs SP */
		bool	ep_distopt;	/* ep > 1 with the distributed optimizer */
		int	max_top_k;	/* 0: any */
		bool	moe_every;	/* MoE in some layers only */
		bool	expert_ffn;	/* experts narrower than ffn */
		bool	sigmoid;	/* the sigmoid score function */
		bool	score_after;	/* scores applied after the experts */
		bool	score_before;	/* scores applied before the experts */
		bool	uneven_pp;	/* first/last stage layer counts */
		int	vpp_min_pp;	/* the fewest stages with vpp > 1 */
		bool	uneven_vpp;	/* uneven stages with vpp > 1 */
		bool	avg_cp;		/* average_in_collective with cp > 1 */
		bool	avg_per_token;	/* ... with sync.dp_divisor: none */
		bool	mtp;		/* multi-token prediction */
		bool	mtp_cp;		/* MTP with cp > 1 */
		bool	mtp_pp;		/* MTP with pp > 1 */
		bool	ep;		/* expert parallelism exists */
		bool	etp_one_or_tp;	/* torchtitan's ParallelDims rules */
		bool	etp_one_with_ep;	/* torchtitan without ETP */
		bool	ddp_needs_one_dim;	/* the DDP path alone on the mesh */
		bool	ep_borrows_all_cp_tp;	/* torchtitan v0.2.0 */
		enum seq_divisor seq_divisor;
		bool	shared_param_refused;	/* pytorch #176257 on */
		bool	attention_sink;	/* learnable softmax offsets */
		bool	out_norm;	/* a mixer with a head norm */
		bool	tp_mask;	/* experts masked on the tp group */
		bool	tp_replicated;	/* every tp rank dispatches all */
		bool	global_aux;	/* loss.aux_type global-aux-loss */
		bool	gtp;		/* mesh.gtp and mesh.egtp above 1 */
	} limits;

	/* How gradient buffers are cut into buckets and shards (layout.c). */
	struct {
		enum bucket_stages	bucket_stages;
		enum bucket_stages	bucket_chunks;	/* all or first */
		bool			bucket_needs_overlap;
		int			bucket_min_params;
		enum bucket_padding	bucket_padding;
		int			param_alignment;
		enum expert_buffer	expert_buffer;
		enum tied_bucket	tied_embedding_bucket;
		enum tied_bucket_start	tied_bucket_start;
		bool			tied_start_asserted;
		int64_t			bucket_elems_per_dp;
		enum dp_engine		dp_engine;
		enum fsdp_flatten	fsdp_flatten;
		enum expert_dim_mesh	expert_dim_mesh;
		enum tied_fsdp_groups	tied_fsdp_groups;
	} layout;

	/*
	 * framework: as written ("megatron-core@0.5.0"), and the profile it
	 * resolved to (NULL: the reference synchronization).  The profile
	 * lives as long as the process.
	 */
	char			*framework;
	const struct fw_profile	*profile;

	/*
	 * plan: (issue 25), nplan items; used when `given` has KEY_PLAN,
	 * else the plan is the preset alone.
	 */
	struct plan_item	*plan;
	int			 nplan;

	/*
	 * Where each written key was written (line 0: by --set), one pair
	 * per key of `given`, read through cfg_key_mark().  A mark for
	 * every key was two thirds of a config, and a list of 932,000
	 * configs took 2.6 GB (issue 26).
	 */
	struct cfg_key_mark	*marks;
	int			 nmarks;
	/*
	 * The --set list the config was loaded with: a key's mark of line 0
	 * and column i + 1 says sets[i] wrote it, so that an error about it
	 * names that --set, as gradaudit(1) promises, not the file's first
	 * line.  The caller's, which outlives its configs.
	 */
	const struct cfg_override *sets;
	/* The keys written in the file or by --set. */
	struct keyset	 given;
	/* The keys whose value came from the framework profile. */
	struct keyset	 from_profile;
	/* The mark of the document itself (used for whole-config errors). */
	struct cfg_mark	 doc_mark;
	bool		 in_list; /* came from a sequence or a multi-document file */
	/*
	 * XXH3-64 of the bytes of the file, as read: run's MPI job checks
	 * that it read what its parent checked (issue 8).
	 */
	uint64_t	 source_digest;
};

/* One --set KEY=VALUE, in command-line order. */
struct cfg_override {
	const char	*key;	/* dotted path, e.g. "mesh.dp" */
	const char	*value;	/* parsed as a YAML scalar */
};

struct config_list {
	struct config	*v;
	size_t		 n;
	/*
	 * The last message cfg_load printed for it, without the program name
	 * ("bad.yaml:7:9: mesh.tp: expected ..."), or NULL: a batch puts it
	 * in the reports of the file that failed.  config_list_free frees
	 * it.
	 */
	char		*error;
	/*
	 * With cfg_load_quietly, the key that message is about
	 * ("model.ffn"), or NULL.
	 */
	char		*error_key;
};

/*
 * cfg_load of path ("-": the standard input), whose bytes are read from
 * the file copy instead when it is not NULL: the copy that run made of
 * an operand that cannot be read twice (jobdir.h).  Messages and reports
 * name path.
 */
int	 cfg_load_as(struct fw_registry *, const char *path, const char *copy,
	    const struct cfg_override *, size_t,
	    struct config_list *out);

/*
 * The schema (SPEC section 3): one entry per key, in enum cfg_key order,
 * parents before their children.  Everything that depends on it reads
 * this table: the YAML reader (reader.c), the constraints, --set, sweep's
 * variables and the documentation checks.
 */
enum cfg_key_type {
	CFG_TYPE_MAP,		/* a mapping of further keys */
	CFG_TYPE_STRING,		/* a one-line label */
	CFG_TYPE_INT,		/* a decimal int within [min, max] */
	CFG_TYPE_INT64,		/* a decimal int64_t within [min, max] */
	CFG_TYPE_BOOL,		/* true/false, yes/no, on/off */
	CFG_TYPE_ENUM,		/* one of words[], stored as its index */
	CFG_TYPE_PLAN		/* plan:, a sequence of steps (plan.h) */
};

struct cfg_key_def {
	const char		*path;	/* dotted path, "mesh.tp" */
	enum cfg_key		 parent; /* CFG_ROOT for the top level */
	enum cfg_key_type		 type;
	size_t			 offset; /* the field; for a mapping its presence flag */
	int64_t			 min, max;
	int64_t			 def;	/* default (CFG_DEFAULT_PP: the value of mesh.pp) */
	const char *const	*words;	/* spellings of an enum, NULL-terminated */
};

/* The parent of the top-level keys; a mapping with no presence flag. */
#define CFG_ROOT		KEY__COUNT
#define CFG_NO_FIELD	SIZE_MAX
#define CFG_DEFAULT_PP	(-1)

extern const struct cfg_key_def cfg_keys[KEY__COUNT];

/* The last component of a key's path ("tp" of "mesh.tp"). */
const char *cfg_key_leaf(enum cfg_key);
/* The child of parent spelt s[0..len), or KEY__COUNT. */
enum cfg_key cfg_key_child(enum cfg_key parent, const char *s, size_t len);
/*
 * The field of key k in a config, or NULL for a section without a
 * presence flag.
 */
const void *cfg_key_cfield(const struct config *, enum cfg_key);
void	*cfg_key_field(struct config *, enum cfg_key);
/* The value of an integer, boolean, enumeration or section key. */
int64_t	 cfg_key_get(const struct config *, enum cfg_key);
/* Store v into such a key (no mark, no `given` bit: the caller's). */
void	 cfg_key_put(struct config *, enum cfg_key, int64_t v);
/* words[i], the spelling of enumeration value i. */
const char *cfg_spelling(const char *const *words, int i);

/* Room for any message about a config: a loader's or a constraint's. */
#define CFG_WHY_SIZE	1024

/* Deep copy and free; config_list_free frees the configs and the array. */
void	 cfg_copy(struct config *dst, const struct config *src);
/*
 * The plan: of a config (plan.h): deep copies and frees, as cfg_copy and
 * cfg_free make them; each step as one line ("scale: 1/micro_batches,
 * params: [*norm*]"), and the whole plan as one for dumps ("preset;
 * scale: 1/2", "(preset)" when the config writes none).
 */
void	 cfg_plan_copy(struct config *dst, const struct config *src);
void	 cfg_plan_free(struct config *);
void	 cfg_plan_item_text(const struct plan_item *, char *buf, size_t len);
void	 cfg_plan_text(const struct config *, char *buf, size_t len);
/*
 * The groups a collective step may name, plan_item.group's words:
 * mesh_group_name's spellings, which the model layer resolves to its
 * group kinds.
 */
extern const char *const cfg_plan_group_words[];
/*
 * A product of mesh axes (all-reduce: [cp, tp]): one group whose members
 * vary along every axis named, as Megatron's tp_cp and tp_dp_cp groups
 * (parallel_state.py) and torchtitan's flattened meshes do.  The axes are
 * one layout's, dense (pure-dp, cp, tp) or expert (edp, ep, etp); pp is in
 * none, since a parameter lives on one stage.  plan_item.group
 * CFG_PLAN_PRODUCT + j names cfg_plan_products[j], whose name is how the
 * model layer spells it too (mesh_group_name); a list that names a single
 * group's axes ([tp], [pure-dp, cp]) is that group.
 */
/*
 * gtp splits pure-dp and egtp edp (model/mesh.h), so each of those two is
 * two bits: the gtp axis and what it leaves (gtp_replicate is that and
 * cp, egtp_replicate that alone); an axis named twice shares a bit.
 */
enum plan_axis {
	PLAN_AXIS_TP = 1 << 0,
	PLAN_AXIS_CP = 1 << 1,
	PLAN_AXIS_GTP_REPLICA = 1 << 2,	/* pure-dp / gtp */
	PLAN_AXIS_ETP = 1 << 3,
	PLAN_AXIS_EP = 1 << 4,
	PLAN_AXIS_EGTP_REPLICA = 1 << 5,	/* edp / egtp */
	PLAN_AXIS_GTP = 1 << 6,
	PLAN_AXIS_EGTP = 1 << 7
};
#define PLAN_AXIS_PURE_DP (PLAN_AXIS_GTP_REPLICA | PLAN_AXIS_GTP)
#define PLAN_AXIS_EDP	(PLAN_AXIS_EGTP_REPLICA | PLAN_AXIS_EGTP)
#define PLAN_AXES_DENSE	(PLAN_AXIS_TP | PLAN_AXIS_CP | PLAN_AXIS_PURE_DP)
#define PLAN_AXES_EXPERT (PLAN_AXIS_ETP | PLAN_AXIS_EP | PLAN_AXIS_EDP)
struct cfg_plan_product {
	unsigned	 axes;		/* enum plan_axis bits */
	const char	*name;		/* "[cp, tp]" */
};
#define CFG_PLAN_PRODUCT	17	/* cfg_plan_group_words' count */
#define CFG_PLAN_NPRODUCTS	17
extern const struct cfg_plan_product cfg_plan_products[CFG_PLAN_NPRODUCTS];
/* The axes of each of cfg_plan_group_words (0: no axis of a product). */
extern const unsigned cfg_plan_group_axes[CFG_PLAN_PRODUCT];
/* plan_item.group's spelling, a word or a product's name. */
const char *cfg_plan_group_name(int group);
/*
 * The dtypes of the gradient buffers accumulate: and dtype: name
 * (plan_item.dtype's words), and the one every gradient is in until a
 * step of accumulate: moves it: fp32, as Megatron's main_grad.
 */
extern const char *const cfg_plan_dtype_words[];
#define PLAN_DTYPE_DEFAULT	0
/* The keywords of micro-batches:, by enum plan_when (NULL where none). */
extern const char *const cfg_plan_when_words[];
/*
 * The gradient buffers a step may name, plan_item.buffer's words, in
 * enum buffer_kind's order (model/layout.h); and the tp sub-dimensions
 * of replicate:, PLAN_REPLICATE_*'s bits in order.
 */
extern const char *const cfg_plan_buffer_words[];
extern const char *const cfg_plan_replicate_words[];
/*
 * What declare: may say of a gradient over tp: Replicate, so that no
 * reduction runs, or Partial (over what replicate: leaves), so that it
 * is summed over tp as the preset sums such a gradient.
 */
extern const char *const cfg_plan_declare_words[];
#define PLAN_DECLARE_REPLICATE	0
#define PLAN_DECLARE_PARTIAL	1
/*
 * detached: the framework passes the activation through an op whose
 * backward yields no gradient (a plain dist.all_gather), so nothing of
 * the main loss's gradient reaches what produced it.  Of router-scores
 * only: NeMo Automodel's GroupedExperts before PR #2995 gathered the
 * routing weights over ep with one.
 */
#define PLAN_DECLARE_DETACHED	2
/*
 * The activations whose gradient a declare: may name (activation:):
 * output, the output layer's input, whose gradient a vocab-parallel
 * output layer leaves Partial over tp.
 */
extern const char *const cfg_plan_activation_words[];
#define PLAN_ACTIVATION_OUTPUT	0
/*
 * Under model.moe.ep_on: tp-mask, two gradients inside the MoE block that
 * the framework may declare Partial, so that their backward sums them over
 * tp before they leave the block: router-scores, the router's score
 * gradient, which each rank fills for its own experts' slots only
 * (transformers PR #48205's _AllReduceBackward on the ep_router's
 * scores); experts-input, the routed experts' input gradient, each rank's
 * share from its own experts (MoEExpertsParallel's _AllReduceBackward on
 * the hidden states).  Undeclared, neither is summed inside the block.
 */
#define PLAN_ACTIVATION_ROUTER_SCORES	1
#define PLAN_ACTIVATION_EXPERTS_INPUT	2
/*
 * mixer-input, the gradient of the mixer's gathered input, which the
 * backward of the gather sums over tp (reduce-scatters under sequence
 * parallelism) where it is declared Partial and splits where it is
 * declared Replicate: Megatron's gather_from_sequence_parallel_region
 * and its tensor_parallel_output_grad (slime PR #1748).
 */
#define PLAN_ACTIVATION_MIXER_INPUT	3
/* The loss terms term: names, in enum plan_term order. */
extern const char *const cfg_plan_term_words[];
/* The ranks of the config's mesh: dp * cp * pp * tp. */
int64_t	 cfg_world(const struct config *);
/*
 * The same model on one rank, what the numeric engine's reference runs
 * (a copy, cfg_free it): every mesh dimension 1, HSDP replicas included,
 * one micro-batch, a cp rank's share of the sequence, and the vocabulary
 * padded as the audited tp pads it.
 */
void	 cfg_one_rank(struct config *dst, const struct config *src);
void	 cfg_free(struct config *);
void	 config_list_free(struct config_list *);

/* Keyword spellings, for reports ("before-dp", "tp-all-reduce", ...). */
const char *cfg_embedding_sync_name(enum embedding_sync);
const char *cfg_router_sync_name(enum router_sync);
const char *cfg_expert_input_sync_name(enum expert_input_sync);
const char *cfg_sp_param_sync_name(enum sp_param_sync);
const char *cfg_expert_divisor_name(enum expert_divisor);
const char *cfg_score_func_name(enum score_func);

/* Where key k was written: line 0 when it was not, or by --set. */
struct cfg_mark	 cfg_key_mark(const struct config *, enum cfg_key);
/*
 * "--set KEY=VALUE", quoted, into buf when a --set wrote key k last
 * (buf: QUOTE_SIZE * 2 + 8 bytes suffice); false, buf untouched, if not.
 */
#define CFG_SET_TEXT_SIZE	(2 * TEXT_QUOTE_SIZE + 8)
bool		 cfg_key_set_text(const struct config *, enum cfg_key,
		    char *buf, size_t len);
/* "--set KEY=VALUE" of one --set, quoted: where its messages point. */
void		 cfg_override_text(const struct cfg_override *, char *buf,
		    size_t len);
/* Record where key k was written (line 0: by --set). */
void	 cfg_set_key_mark(struct config *, enum cfg_key, struct cfg_mark);

/* The dotted path of a key ("sync.embedding_grad"). */
const char *cfg_key_path(enum cfg_key);
/* The value of a key as it would be written in YAML, into buf. */
void	 cfg_key_value(const struct config *, enum cfg_key, char *buf,
	    size_t len);
/* True for keys that hold a value (not sections, not strings). */
bool	 cfg_key_is_setting(enum cfg_key);
/* What JSON type a key's value is: a number, a boolean or a string. */
enum cfg_value_type { CFG_VALUE_STRING, CFG_VALUE_NUMBER, CFG_VALUE_BOOL };
enum cfg_value_type cfg_key_value_type(enum cfg_key);
/*
 * The values a setting may be set to, as written: an enumeration's
 * spellings in their order, "false" and "true" for a boolean; NULL for
 * numbers, strings and sections.
 */
const char *const *cfg_key_words(enum cfg_key);
/* The reference default of a key, as written, into buf. */
void	 cfg_key_default(enum cfg_key, char *buf, size_t len);
/*
 * Set key k of a loaded config to one of its cfg_key_words, as --set KEY=
 * VALUE would have: the key counts as written, over any profile.  The
 * caller checks the constraints again (cfg_check_constraints).  -1 when
 * value is not one of its words or the key is inactive.
 */
int	 cfg_key_set(struct config *, enum cfg_key, const char *value);
/*
 * The value of a numeric key (an integer, a boolean as 0 or 1), and
 * setting one as --set KEY=VALUE would: the key counts as written, over
 * any profile.  cfg_key_set_number refuses (-1) a key that is not an
 * integer, is inactive, or a value outside the key's range; the caller
 * checks the constraints again (cfg_check_constraints).  run --shrink
 * (shrink.h) moves sizes through these, so that the key table stays the
 * one place that knows where a key lives and what it may hold.
 */
int64_t	 cfg_key_number(const struct config *, enum cfg_key);
int	 cfg_key_set_number(struct config *, enum cfg_key, int64_t value);
/* True when keys lie under k: k is a section ("mesh", "model.moe"). */
bool	 cfg_key_is_section(enum cfg_key);
/* False for keys under an absent optional section (model.moe). */
bool	 cfg_key_is_active(const struct config *, enum cfg_key);
/* True for the keys that describe the job (mesh, model.moe), not a framework. */
bool	 cfg_key_is_job(enum cfg_key);
/*
 * Copy into dst the value of every key src sets; with keep_given, not
 * those dst already has in its `given` set.  Returns the keys copied.
 */
struct keyset cfg_merge_settings(struct config *dst, const struct config *src,
	    bool keep_given);

/* True when layer i (0-based) is a MoE layer (SPEC section 4). */
bool	 cfg_layer_is_moe(const struct config *, int layer);

/*
 * The layers pipeline stage `stage` builds: [*first, *first + *count),
 * an even split or Megatron's uneven one (get_num_layers_to_build).
 */
void	 cfg_stage_layers(const struct config *, int stage, int *first,
	    int *count);
/*
 * The rows of the word embedding and of the output layer: model.vocab
 * padded up to a multiple of vocab_divisible_by * tp, as Megatron's
 * _vocab_size_with_padding does.  Rows from model.vocab on are padding.
 */
int64_t	 cfg_padded_vocab(const struct config *);
/*
 * A coefficient written as a decimal ("0.01", "1e-3" is not one) or a
 * fraction ("1/100") as num/den, den > 0; NULL reads as 0.  False when s
 * is neither or does not fit.
 */
bool	 cfg_decimal(const char *s, int64_t *num, int64_t *den);
/*
 * loss.valid_tokens "eod:N" and "fraction:F": the share num/den of the
 * step's token slots that the data masks, 1/N or F, in lowest terms
 * (lossnorm_masked_count lays it over the chunks).  Returns 1 for either
 * spelling, 0 when spec is neither, and -1 when it starts like one but
 * its value is malformed, saying why in buf.
 */
int	 cfg_token_mask(const char *spec, int64_t *num, int64_t *den,
	    char *buf, size_t size);
/* The width of a shared expert: model.moe.shared_expert_ffn or model.ffn. */
int	 cfg_shared_expert_ffn(const struct config *);
/*
 * sync.router_grad and sync.moe_input_grad as they apply to the config's
 * mesh: the "-without-ep" values resolved by mesh.ep (torchtitan
 * b052f36fe declares the gradients wrong only without expert
 * parallelism), the others as they are.
 */
enum router_sync	cfg_router_sync(const struct config *);
enum moe_input_sync	cfg_moe_input_sync(const struct config *);
/*
 * Whether the data-parallel reduction is DDP's (sync.replicate_only:
 * ddp-average on a mesh of replicas alone, dp_shard and cp 1).
 */
bool	 cfg_ddp_path(const struct config *);
/*
 * Does the FSDP2 engine hold one parameter in two fully_shard groups: a
 * tied weight on one stage, wrapped as layout.tied_fsdp_groups: two, on
 * the fully_shard path (not torchtitan's DDP one)?
 */
bool	 cfg_tied_split(const struct config *);
/*
 * The layers model chunk `chunk` of pipeline stage `stage` builds, with
 * mesh.vpp chunks a stage: Megatron's interleaved assignment
 * (get_transformer_layer_offset), a stage's layers split evenly over its
 * chunks and the chunks taken in the order chunk * pp + stage.
 */
void	 cfg_chunk_layers(const struct config *, int stage, int chunk,
	    int *first, int *count);

#endif
