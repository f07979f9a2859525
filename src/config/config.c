/*
 * The configuration as data (config.h): the schema of SPEC section 3, one
 * table of keys (cfg_keys[] below) that drives everything depending on it
 * (which key may appear under which mapping, how its value is parsed and
 * range-checked, what --set may name, the defaults, sweep's variables),
 * the accessors on it, and the quantities every layer derives from a
 * config (the world, a stage's layers, the padded vocabulary, a token
 * mask).  Reading YAML is reader.c, documents and profiles load.c, the
 * constraints of SPEC section 5 constraints.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "config/config.h"

/* Enumerations are stored through an int pointer by the key table. */
_Static_assert(sizeof(enum embedding_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum router_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum expert_input_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum moe_input_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum router_input_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum sp_param_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum expert_divisor) == sizeof(int), "enum size");
_Static_assert(sizeof(enum qk_norm_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum kv_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum expert_avg_scale) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_tp_duplicates) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_tied_copies) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_expert_filter) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_sink_filter) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_expert_norm) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_shard_group) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_pp_reduce) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_clip_ranks) == sizeof(int), "enum size");
_Static_assert(sizeof(enum score_func) == sizeof(int), "enum size");
_Static_assert(sizeof(enum moe_ep_on) == sizeof(int), "enum size");
_Static_assert(sizeof(enum aux_scale) == sizeof(int), "enum size");
_Static_assert(sizeof(enum aux_type) == sizeof(int), "enum size");
_Static_assert(sizeof(enum aux_objective) == sizeof(int), "enum size");
_Static_assert(sizeof(enum mtp_scale) == sizeof(int), "enum size");
_Static_assert(sizeof(enum bucket_stages) == sizeof(int), "enum size");
_Static_assert(sizeof(enum bucket_padding) == sizeof(int), "enum size");
_Static_assert(sizeof(enum expert_buffer) == sizeof(int), "enum size");
_Static_assert(sizeof(enum tied_bucket) == sizeof(int), "enum size");
_Static_assert(sizeof(enum tied_bucket_start) == sizeof(int), "enum size");
_Static_assert(sizeof(enum dp_engine) == sizeof(int), "enum size");
_Static_assert(sizeof(enum fsdp_one_member) == sizeof(int), "enum size");
_Static_assert(sizeof(enum fsdp_flatten) == sizeof(int), "enum size");
_Static_assert(sizeof(enum loss_objective) == sizeof(int), "enum size");
_Static_assert(sizeof(enum mtp_objective) == sizeof(int), "enum size");
_Static_assert(sizeof(enum replicate_only) == sizeof(int), "enum size");
_Static_assert(sizeof(enum fsdp_divide_factor) == sizeof(int), "enum size");
_Static_assert(sizeof(enum expert_tp_divisor) == sizeof(int), "enum size");
_Static_assert(sizeof(enum pp_normalize) == sizeof(int), "enum size");
_Static_assert(sizeof(enum seq_divisor) == sizeof(int), "enum size");
_Static_assert(sizeof(enum tied_fsdp_groups) == sizeof(int), "enum size");

static const char *const embedding_words[] = {
	"before-dp", "after-dp", "separate-bucket", "full-after-dp", NULL
};
static const char *const router_words[] = {
	"auto", "tp-all-reduce", "none", "none-without-ep", NULL
};
static const char *const expert_input_words[] = {
	"etp-all-reduce", "none", NULL
};
static const char *const moe_input_words[] = {
	"auto", "replicate", "partial", "replicate-without-ep", NULL
};
static const char *const router_input_words[] = {
	"none", "tp-all-reduce", NULL
};
static const char *const sp_param_words[] = {
	"tp-all-reduce", "none", "skip-standalone", NULL
};
static const char *const divisor_words[] = { "dp", "edp", NULL };
static const char *const qk_norm_words[] = {
	"tp-all-reduce", "none", "with-sp", NULL
};
static const char *const kv_words[] = { "tp-all-reduce", "none", NULL };
static const char *const gtp_sharded_words[] = { "linear", "none", NULL };
static const char *const expert_gtp_words[] = { "egtp", "gtp", NULL };
static const char *const expert_tp_words[] = { "none", "tp", NULL };
static const char *const score_words[] = { "softmax", "sigmoid", NULL };
static const char *const ep_on_words[] = { "all-to-all", "tp-mask",
    "tp-replicated", NULL };
static const char *const bucket_stages_words[] = {
	"all", "first", "none", NULL
};
static const char *const expert_avg_words[] = {
	"edp-over-dp", "one-over-ep", NULL
};
static const char *const per_token_avg_words[] = { "net", "avg", NULL };
static const char *const bucket_chunks_words[] = { "all", "first", NULL };
static const char *const bucket_padding_words[] = {
	"group", "lcm-128", NULL
};
static const char *const expert_buffer_words[] = {
	"always", "if-expert-mesh", "if-ep", "all-reduce", NULL
};
static const char *const tied_start_words[] = {
	"padded", "param-start", "pad-if-unaligned", NULL
};
static const char *const tied_bucket_words[] = {
	"shared", "own", "own-if-distopt-pp", NULL
};
static const char *const gn_tp_dup_words[] = {
	"once", "every-tp-rank", NULL
};
static const char *const gn_tied_words[] = { "once", "both", NULL };
static const char *const gn_expert_filter_words[] = {
	"expert-tp", "dense-tp", NULL
};
static const char *const gn_sink_filter_words[] = {
	"tp-sharded", "tp-rank-0", NULL
};
static const char *const gn_expert_norm_words[] = {
	"sum", "average", "local", "omit", NULL
};
static const char *const gn_shard_words[] = {
	"if-sharded", "always", "never", NULL
};
static const char *const gn_pp_words[] = { "all-reduce", "none", NULL };
static const char *const gn_clip_words[] = { "all", "tp-rank-0", NULL };

static const char *const normalize_words[] = {
	"global", "global-without-cp", "global-cp-duplicated", "rank",
	"micro-batch", "micro-batch-cp", "micro-batch-own", "none", NULL
};
/* In enum data_size order, so that the default (dp-cp) comes first. */
static const char *const data_size_words[] = {
	"dp-cp", "dp", "cp", "none", NULL
};
static const char *const dp_group_words[] = { "dp-cp", "dp", NULL };
static const char *const dp_engine_words[] = {
	"megatron", "fsdp2", "fsdp1", NULL
};
static const char *const fsdp_one_member_words[] = {
	"full", "drop-factor", "drop-replicate", NULL
};
static const char *const tied_fsdp_words[] = { "one", "two", NULL };
static const char *const fsdp_flatten_words[] = { "parameter", "unit",
    "group", NULL };
static const char *const expert_dim_words[] = {
	"efsdp", "replicate-efsdp", NULL
};
static const char *const replicate_only_words[] = {
	"fsdp", "ddp-average", NULL
};
static const char *const fsdp_divide_factor_words[] = {
	"gradient", "reduce-scatter", NULL
};
static const char *const pp_normalize_words[] = { "same", "none", NULL };
static const char *const seq_divisor_words[] = { "cp-tp", "2-cp-tp",
    "2-cp-tp-if-cp", "tokens-2-cp-tp-if-cp", NULL };
/* In enum mtp_scale order: Megatron's schedule without per-token loss. */
/* In enum loss_objective order: the default (token-mean) first. */
static const char *const objective_words[] = {
	"token-mean", "micro-batch-mean", "sample-mean", "sum", NULL
};
/* In enum mtp_objective order: the default (rolled-mean) first. */
static const char *const mtp_objective_words[] = {
	"rolled-mean", "main-count", NULL
};
static const char *const mtp_scale_words[] = {
	"micro-batches", "micro-batches-cp", "tokens", "tokens-local",
	"tokens-global", "micro-batches-cp-group", NULL
};
/* In enum aux_type and aux_objective order. */
static const char *const aux_type_words[] = {
	"aux-loss", "global-aux-loss", NULL
};
static const char *const aux_objective_words[] = {
	"as-type", "sequence", "global", NULL
};
/* In enum aux_scale order: Megatron's (after PR #2217) comes first. */
static const char *const aux_scale_words[] = {
	"micro-batches-cp", "micro-batches", "tokens-tp-cp", "tokens-local",
	"none", NULL
};

#define F(member)	offsetof(struct config, member)
#define SECTION(p, parent, presence) \
	{ p, parent, CFG_TYPE_MAP, presence, 0, 0, 0, NULL }
#define INTEGER(p, parent, member, min, max, def) \
	{ p, parent, CFG_TYPE_INT, F(member), min, max, def, NULL }
#define FLAG(p, parent, member) \
	{ p, parent, CFG_TYPE_BOOL, F(member), 0, 1, 0, NULL }
#define WORD(p, parent, member, words) \
	{ p, parent, CFG_TYPE_ENUM, F(member), 0, 0, 0, words }

/*
 * The schema of SPEC section 3.  Entries follow enum cfg_key, so parents come
 * before their children and mesh.pp is defaulted before model.layers, whose
 * default it is.
 *
 * A present "moe: {}" means a MoE model with 4 experts, top_k 2 and an
 * expert_ffn of 8: the smallest sizes for which top-k routing, ep sharding
 * up to 4 and etp sharding up to 8 are all meaningful, like the dense
 * defaults (ffn 16 = 2 * expert_ffn).
 */
const struct cfg_key_def cfg_keys[KEY__COUNT] = {
	[KEY_NAME] = { "name", CFG_ROOT, CFG_TYPE_STRING, F(name), 0, 0, 0, NULL },
	[KEY_MESH] = SECTION("mesh", CFG_ROOT, CFG_NO_FIELD),
	[KEY_DP] = INTEGER("mesh.dp", KEY_MESH, mesh.dp, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_PP] = INTEGER("mesh.pp", KEY_MESH, mesh.pp, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_TP] = INTEGER("mesh.tp", KEY_MESH, mesh.tp, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_EP] = INTEGER("mesh.ep", KEY_MESH, mesh.ep, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_ETP] = INTEGER("mesh.etp", KEY_MESH, mesh.etp, 1,
	    CFG_MAX_MESH_DIM, 1),
	[KEY_MODEL] = SECTION("model", CFG_ROOT, CFG_NO_FIELD),
	[KEY_VOCAB] = INTEGER("model.vocab", KEY_MODEL, model.vocab, 1,
	    CFG_MAX_MODEL_DIM, 32),
	[KEY_HIDDEN] = INTEGER("model.hidden", KEY_MODEL, model.hidden, 1,
	    CFG_MAX_MODEL_DIM, 8),
	[KEY_FFN] = INTEGER("model.ffn", KEY_MODEL, model.ffn, 1,
	    CFG_MAX_MODEL_DIM, 16),
	[KEY_LAYERS] = INTEGER("model.layers", KEY_MODEL, model.layers, 1,
	    CFG_MAX_LAYERS, CFG_DEFAULT_PP),
	[KEY_SEQ] = INTEGER("model.seq", KEY_MODEL, model.seq, 1,
	    CFG_MAX_MODEL_DIM, 8),
	[KEY_MICRO_BATCH] = INTEGER("model.micro_batch", KEY_MODEL,
	    model.micro_batch, 1, CFG_MAX_MODEL_DIM, 2),
	[KEY_TIE_EMBEDDINGS] = FLAG("model.tie_embeddings", KEY_MODEL,
	    model.tie_embeddings),
	[KEY_MOE] = SECTION("model.moe", KEY_MODEL, F(model.has_moe)),
	[KEY_EXPERTS] = INTEGER("model.moe.experts", KEY_MOE,
	    model.moe.experts, 1, CFG_MAX_EXPERTS, 4),
	[KEY_TOP_K] = INTEGER("model.moe.top_k", KEY_MOE, model.moe.top_k, 1,
	    CFG_MAX_EXPERTS, 2),
	[KEY_EXPERT_FFN] = INTEGER("model.moe.expert_ffn", KEY_MOE,
	    model.moe.expert_ffn, 1, CFG_MAX_MODEL_DIM, 8),
	[KEY_SCORE_BEFORE_EXPERTS] = FLAG("model.moe.score_before_experts",
	    KEY_MOE, model.moe.score_before_experts),
	[KEY_SHARED_EXPERTS] = INTEGER("model.moe.shared_experts", KEY_MOE,
	    model.moe.shared_experts, 0, CFG_MAX_EXPERTS, 0),
	[KEY_SCORE_FUNC] = WORD("model.moe.score_func", KEY_MOE,
	    model.moe.score_func, score_words),
	[KEY_EVERY] = INTEGER("model.moe.every", KEY_MOE, model.moe.every, 1,
	    CFG_MAX_LAYERS, 1),
	[KEY_TRAINING] = SECTION("training", CFG_ROOT, CFG_NO_FIELD),
	[KEY_DISTRIBUTED_OPTIMIZER] = FLAG("training.distributed_optimizer",
	    KEY_TRAINING, training.distributed_optimizer),
	[KEY_SEQUENCE_PARALLEL] = FLAG("training.sequence_parallel",
	    KEY_TRAINING, training.sequence_parallel),
	[KEY_AVERAGE_IN_COLLECTIVE] = FLAG("training.average_in_collective",
	    KEY_TRAINING, training.average_in_collective),
	[KEY_BUCKET_ELEMS] = { "training.bucket_elems", KEY_TRAINING,
	    CFG_TYPE_INT64, F(training.bucket_elems), 0, INT64_MAX, 0, NULL },
	[KEY_SYNC] = SECTION("sync", CFG_ROOT, CFG_NO_FIELD),
	[KEY_EMBEDDING_GRAD] = WORD("sync.embedding_grad", KEY_SYNC,
	    sync.embedding_grad, embedding_words),
	[KEY_ROUTER_GRAD] = WORD("sync.router_grad", KEY_SYNC,
	    sync.router_grad, router_words),
	[KEY_EXPERT_INPUT_GRAD] = WORD("sync.expert_input_grad", KEY_SYNC,
	    sync.expert_input_grad, expert_input_words),
	[KEY_MOE_INPUT_GRAD] = WORD("sync.moe_input_grad", KEY_SYNC,
	    sync.moe_input_grad, moe_input_words),
	[KEY_SP_PARAM_GRAD] = WORD("sync.sp_param_grad", KEY_SYNC,
	    sync.sp_param_grad, sp_param_words),
	[KEY_EXPERT_GRAD_DIVISOR] = WORD("sync.expert_grad_divisor", KEY_SYNC,
	    sync.expert_grad_divisor, divisor_words),
	[KEY_FRAMEWORK] = { "framework", CFG_ROOT, CFG_TYPE_STRING, F(framework), 0, 0,
	    0, NULL },
	[KEY_OVERLAP_GRAD_REDUCE] = FLAG("training.overlap_grad_reduce",
	    KEY_TRAINING, training.overlap_grad_reduce),
	[KEY_LAYOUT] = SECTION("layout", CFG_ROOT, CFG_NO_FIELD),
	[KEY_BUCKET_STAGES] = WORD("layout.bucket_stages", KEY_LAYOUT,
	    layout.bucket_stages, bucket_stages_words),
	[KEY_BUCKET_NEEDS_OVERLAP] = FLAG("layout.bucket_needs_overlap",
	    KEY_LAYOUT, layout.bucket_needs_overlap),
	[KEY_BUCKET_MIN_PARAMS] = INTEGER("layout.bucket_min_params",
	    KEY_LAYOUT, layout.bucket_min_params, 1, CFG_MAX_LAYERS, 1),
	[KEY_BUCKET_PADDING] = WORD("layout.bucket_padding", KEY_LAYOUT,
	    layout.bucket_padding, bucket_padding_words),
	[KEY_PARAM_ALIGNMENT] = INTEGER("layout.param_alignment", KEY_LAYOUT,
	    layout.param_alignment, 1, 1 << 16, 1),
	[KEY_EXPERT_BUFFER] = WORD("layout.expert_buffer", KEY_LAYOUT,
	    layout.expert_buffer, expert_buffer_words),
	[KEY_TIED_EMBEDDING_BUCKET] = WORD("layout.tied_embedding_bucket",
	    KEY_LAYOUT, layout.tied_embedding_bucket, tied_bucket_words),
	[KEY_QK_NORM] = FLAG("model.qk_norm", KEY_MODEL, model.qk_norm),
	[KEY_HEAD_DIM] = INTEGER("model.head_dim", KEY_MODEL, model.head_dim,
	    1, CFG_MAX_MODEL_DIM, 2),
	[KEY_QK_NORM_GRAD] = WORD("sync.qk_norm_grad", KEY_SYNC,
	    sync.qk_norm_grad, qk_norm_words),
	[KEY_EXPERT_AVG_SCALE] = WORD("sync.expert_avg_scale", KEY_SYNC,
	    sync.expert_avg_scale, expert_avg_words),
	[KEY_LIMITS] = SECTION("limits", CFG_ROOT, CFG_NO_FIELD),
	[KEY_MOE_SUPPORTED] = { "limits.moe_supported", KEY_LIMITS, CFG_TYPE_BOOL,
	    F(limits.moe), 0, 1, 1, NULL },
	[KEY_QK_NORM_SUPPORTED] = { "limits.qk_norm_supported", KEY_LIMITS,
	    CFG_TYPE_BOOL, F(limits.qk_norm), 0, 1, 1, NULL },
	[KEY_ETP_SUPPORTED] = { "limits.etp_supported", KEY_LIMITS, CFG_TYPE_BOOL,
	    F(limits.etp), 0, 1, 1, NULL },
	[KEY_MOE_TP_NEEDS_SP] = FLAG("limits.moe_tp_needs_sp", KEY_LIMITS,
	    limits.moe_tp_needs_sp),
	[KEY_TIED_BUCKET_START] = WORD("layout.tied_bucket_start", KEY_LAYOUT,
	    layout.tied_bucket_start, tied_start_words),
	[KEY_TIED_START_ASSERTED] = FLAG("layout.tied_start_asserted",
	    KEY_LAYOUT, layout.tied_start_asserted),
	[KEY_BUCKET_ELEMS_PER_DP] = { "layout.bucket_elems_per_dp", KEY_LAYOUT,
	    CFG_TYPE_INT64, F(layout.bucket_elems_per_dp), 0, INT64_MAX / (1 << 20),
	    0, NULL },
	[KEY_AVG_SUPPORTED] = { "limits.avg_supported", KEY_LIMITS, CFG_TYPE_BOOL,
	    F(limits.avg), 0, 1, 1, NULL },
	[KEY_AVG_NEEDS_ETP_EQ_TP] = FLAG("limits.avg_needs_etp_eq_tp",
	    KEY_LIMITS, limits.avg_needs_etp_eq_tp),
	[KEY_SHARED_EXPERT_GATE] = FLAG("model.moe.shared_expert_gate", KEY_MOE,
	    model.moe.shared_expert_gate),
	[KEY_SHARED_EXPERTS_SUPPORTED] = { "limits.shared_experts_supported",
	    KEY_LIMITS, CFG_TYPE_BOOL, F(limits.shared_experts), 0, 1, 1, NULL },
	[KEY_EP_TP_NEEDS_SP] = FLAG("limits.ep_tp_needs_sp", KEY_LIMITS,
	    limits.ep_tp_needs_sp),
	[KEY_EP_SUPPORTED] = { "limits.ep_supported", KEY_LIMITS, CFG_TYPE_BOOL,
	    F(limits.ep), 0, 1, 1, NULL },
	[KEY_ETP_ONE_OR_TP] = FLAG("limits.etp_one_or_tp", KEY_LIMITS,
	    limits.etp_one_or_tp),
	[KEY_EP_DISTOPT_SUPPORTED] = { "limits.ep_distopt_supported",
	    KEY_LIMITS, CFG_TYPE_BOOL, F(limits.ep_distopt), 0, 1, 1, NULL },
	[KEY_MAX_TOP_K] = INTEGER("limits.max_top_k", KEY_LIMITS,
	    limits.max_top_k, 0, CFG_MAX_EXPERTS, 0),
	[KEY_MOE_EVERY_SUPPORTED] = { "limits.moe_every_supported",
	    KEY_LIMITS, CFG_TYPE_BOOL, F(limits.moe_every), 0, 1, 1, NULL },
	[KEY_FIRST_STAGE_LAYERS] = INTEGER("model.first_stage_layers",
	    KEY_MODEL, model.first_stage_layers, 0, CFG_MAX_LAYERS, 0),
	[KEY_LAST_STAGE_LAYERS] = INTEGER("model.last_stage_layers",
	    KEY_MODEL, model.last_stage_layers, 0, CFG_MAX_LAYERS, 0),
	[KEY_PATTERN] = { "model.moe.pattern", KEY_MOE, CFG_TYPE_STRING,
	    F(model.moe.pattern), 0, 0, 0, NULL },
	[KEY_UNEVEN_PP_SUPPORTED] = { "limits.uneven_pp_supported",
	    KEY_LIMITS, CFG_TYPE_BOOL, F(limits.uneven_pp), 0, 1, 1, NULL },
	[KEY_CP] = INTEGER("mesh.cp", KEY_MESH, mesh.cp, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_MICRO_BATCHES] = INTEGER("training.micro_batches", KEY_TRAINING,
	    training.micro_batches, 1, CFG_MAX_MICRO_BATCHES, 1),
	[KEY_LOSS] = SECTION("loss", CFG_ROOT, CFG_NO_FIELD),
	[KEY_VALID_TOKENS] = { "loss.valid_tokens", KEY_LOSS, CFG_TYPE_STRING,
	    F(loss.valid_tokens), 0, 0, 0, NULL },
	[KEY_NORMALIZE_BY] = WORD("loss.normalize_by", KEY_LOSS,
	    loss.normalize_by, normalize_words),
	[KEY_SCALE] = WORD("loss.scale", KEY_LOSS, loss.scale,
	    data_size_words),
	[KEY_DP_DIVISOR] = WORD("sync.dp_divisor", KEY_SYNC, sync.dp_divisor,
	    data_size_words),
	[KEY_DP_GROUP] = WORD("sync.dp_group", KEY_SYNC, sync.dp_group,
	    dp_group_words),
	[KEY_GRAD_NORM] = SECTION("grad_norm", CFG_ROOT, CFG_NO_FIELD),
	[KEY_TP_DUPLICATES] = WORD("grad_norm.tp_duplicates", KEY_GRAD_NORM,
	    grad_norm.tp_duplicates, gn_tp_dup_words),
	[KEY_TIED_COPIES] = WORD("grad_norm.tied_copies", KEY_GRAD_NORM,
	    grad_norm.tied_copies, gn_tied_words),
	[KEY_EXPERT_FILTER] = WORD("grad_norm.expert_filter", KEY_GRAD_NORM,
	    grad_norm.expert_filter, gn_expert_filter_words),
	[KEY_EXPERT_NORM] = WORD("grad_norm.expert_norm", KEY_GRAD_NORM,
	    grad_norm.expert_norm, gn_expert_norm_words),
	[KEY_SHARD_GROUP] = WORD("grad_norm.shard_group", KEY_GRAD_NORM,
	    grad_norm.shard_group, gn_shard_words),
	[KEY_PP_REDUCE] = WORD("grad_norm.pp_reduce", KEY_GRAD_NORM,
	    grad_norm.pp_reduce, gn_pp_words),
	[KEY_CLIP_RANKS] = WORD("grad_norm.clip_ranks", KEY_GRAD_NORM,
	    grad_norm.clip_ranks, gn_clip_words),
	[KEY_VOCAB_DIVISIBLE_BY] = INTEGER("model.vocab_divisible_by",
	    KEY_MODEL, model.vocab_divisible_by, 1, CFG_MAX_MODEL_DIM, 1),
	[KEY_VPP] = INTEGER("mesh.vpp", KEY_MESH, mesh.vpp, 1, CFG_MAX_LAYERS,
	    1),
	[KEY_BUCKET_CHUNKS] = WORD("layout.bucket_chunks", KEY_LAYOUT,
	    layout.bucket_chunks, bucket_chunks_words),
	[KEY_VPP_MIN_PP] = INTEGER("limits.vpp_min_pp", KEY_LIMITS,
	    limits.vpp_min_pp, 2, CFG_MAX_MESH_DIM, 2),
	[KEY_UNEVEN_VPP_SUPPORTED] = { "limits.uneven_vpp_supported",
	    KEY_LIMITS, CFG_TYPE_BOOL, F(limits.uneven_vpp), 0, 1, 1, NULL },
	[KEY_AVG_CP_SUPPORTED] = { "limits.avg_cp_supported", KEY_LIMITS,
	    CFG_TYPE_BOOL, F(limits.avg_cp), 0, 1, 1, NULL },
	[KEY_PER_TOKEN_AVG] = WORD("sync.per_token_avg", KEY_SYNC,
	    sync.per_token_avg, per_token_avg_words),
	[KEY_AVG_PER_TOKEN_SUPPORTED] = { "limits.avg_per_token_supported",
	    KEY_LIMITS, CFG_TYPE_BOOL, F(limits.avg_per_token), 0, 1, 1, NULL },
	[KEY_DP_REPLICATE] = INTEGER("mesh.dp_replicate", KEY_MESH,
	    mesh.dp_replicate, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_DP_ENGINE] = WORD("layout.dp_engine", KEY_LAYOUT,
	    layout.dp_engine, dp_engine_words),
	[KEY_FSDP_ONE_MEMBER] = WORD("sync.fsdp_one_member", KEY_SYNC,
	    sync.fsdp_one_member, fsdp_one_member_words),
	[KEY_FSDP_FLATTEN] = WORD("layout.fsdp_flatten", KEY_LAYOUT,
	    layout.fsdp_flatten, fsdp_flatten_words),
	[KEY_AUX_LOSS_COEFF] = { "model.moe.aux_loss_coeff", KEY_MOE,
	    CFG_TYPE_STRING, F(model.moe.aux_loss_coeff), 0, 0, 0, NULL },
	[KEY_Z_LOSS_COEFF] = { "model.moe.z_loss_coeff", KEY_MOE,
	    CFG_TYPE_STRING, F(model.moe.z_loss_coeff), 0, 0, 0, NULL },
	[KEY_AUX_SCALE] = WORD("loss.aux_scale", KEY_LOSS, loss.aux_scale,
	    aux_scale_words),
	[KEY_AUX_TYPE] = WORD("loss.aux_type", KEY_LOSS, loss.aux_type,
	    aux_type_words),
	[KEY_AUX_OBJECTIVE] = WORD("loss.aux_objective", KEY_LOSS,
	    loss.aux_objective, aux_objective_words),
	[KEY_SHARED_EXPERT_FFN] = INTEGER("model.moe.shared_expert_ffn",
	    KEY_MOE, model.moe.shared_expert_ffn, 0, CFG_MAX_MODEL_DIM, 0),
	[KEY_EXPERT_FFN_SUPPORTED] = { "limits.expert_ffn_supported",
	    KEY_LIMITS, CFG_TYPE_BOOL, F(limits.expert_ffn), 0, 1, 1, NULL },
	[KEY_SIGMOID_SUPPORTED] = { "limits.sigmoid_supported", KEY_LIMITS,
	    CFG_TYPE_BOOL, F(limits.sigmoid), 0, 1, 1, NULL },
	[KEY_SCORE_AFTER_EXPERTS_SUPPORTED] = {
	    "limits.score_after_experts_supported", KEY_LIMITS, CFG_TYPE_BOOL,
	    F(limits.score_after), 0, 1, 1, NULL },
	[KEY_ROUTER_INPUT_GRAD] = WORD("sync.router_input_grad", KEY_SYNC,
	    sync.router_input_grad, router_input_words),
	[KEY_MTP] = INTEGER("model.mtp", KEY_MODEL, model.mtp, 0, 8, 0),
	[KEY_MTP_LOSS_SCALING_FACTOR] = { "model.mtp_loss_scaling_factor",
	    KEY_MODEL, CFG_TYPE_STRING, F(model.mtp_loss_scaling_factor), 0, 0, 0,
	    NULL },
	[KEY_MTP_SCALE] = WORD("loss.mtp_scale", KEY_LOSS, loss.mtp_scale,
	    mtp_scale_words),
	[KEY_OBJECTIVE] = WORD("loss.objective", KEY_LOSS, loss.objective,
	    objective_words),
	[KEY_MTP_OBJECTIVE] = WORD("loss.mtp_objective", KEY_LOSS,
	    loss.mtp_objective, mtp_objective_words),
	[KEY_MTP_SUPPORTED] = { "limits.mtp_supported", KEY_LIMITS,
	    CFG_TYPE_BOOL, F(limits.mtp), 0, 1, 1, NULL },
	[KEY_MTP_CP_SUPPORTED] = { "limits.mtp_cp_supported", KEY_LIMITS,
	    CFG_TYPE_BOOL, F(limits.mtp_cp), 0, 1, 1, NULL },
	[KEY_MTP_PP_SUPPORTED] = { "limits.mtp_pp_supported", KEY_LIMITS,
	    CFG_TYPE_BOOL, F(limits.mtp_pp), 0, 1, 1, NULL },
	[KEY_REPLICATE_ONLY] = WORD("sync.replicate_only", KEY_SYNC,
	    sync.replicate_only, replicate_only_words),
	[KEY_DDP_NEEDS_ONE_DIM] = FLAG("limits.ddp_needs_one_dim",
	    KEY_LIMITS, limits.ddp_needs_one_dim),
	[KEY_PP_NORMALIZE_BY] = WORD("loss.pp_normalize_by", KEY_LOSS,
	    loss.pp_normalize_by, pp_normalize_words),
	[KEY_EP_BORROWS_ALL_CP_TP] = FLAG("limits.ep_borrows_all_cp_tp",
	    KEY_LIMITS, limits.ep_borrows_all_cp_tp),
	[KEY_SEQ_DIVISOR] = WORD("limits.seq_divisor", KEY_LIMITS,
	    limits.seq_divisor, seq_divisor_words),
	[KEY_EXPERT_DIM_MESH] = WORD("layout.expert_dim_mesh", KEY_LAYOUT,
	    layout.expert_dim_mesh, expert_dim_words),
	[KEY_TIED_FSDP_GROUPS] = WORD("layout.tied_fsdp_groups", KEY_LAYOUT,
	    layout.tied_fsdp_groups, tied_fsdp_words),
	[KEY_SHARED_PARAM_REFUSED] = FLAG("limits.shared_param_refused",
	    KEY_LIMITS, limits.shared_param_refused),
	/* struct config's plan and nplan (plan.c reads them). */
	[KEY_PLAN] = { "plan", CFG_ROOT, CFG_TYPE_PLAN, CFG_NO_FIELD, 0, 0, 0,
	    NULL },
	[KEY_ETP_ONE_WITH_EP] = FLAG("limits.etp_one_with_ep", KEY_LIMITS,
	    limits.etp_one_with_ep),
	[KEY_SCORE_BEFORE_EXPERTS_SUPPORTED] = {
	    "limits.score_before_experts_supported", KEY_LIMITS, CFG_TYPE_BOOL,
	    F(limits.score_before), 0, 1, 1, NULL },
	[KEY_KV_HEADS] = INTEGER("model.kv_heads", KEY_MODEL, model.kv_heads,
	    0, CFG_MAX_MODEL_DIM, 0),
	[KEY_KV_GRAD] = WORD("sync.kv_grad", KEY_SYNC, sync.kv_grad,
	    kv_words),
	[KEY_ATTENTION_SINK] = FLAG("model.attention_sink", KEY_MODEL,
	    model.attention_sink),
	[KEY_SINK_FILTER] = WORD("grad_norm.sink_filter", KEY_GRAD_NORM,
	    grad_norm.sink_filter, gn_sink_filter_words),
	[KEY_OUT_NORM] = FLAG("model.out_norm", KEY_MODEL, model.out_norm),
	[KEY_DUPLICATED_MIXER] = FLAG("model.duplicated_mixer", KEY_MODEL,
	    model.duplicated_mixer),
	[KEY_OUT_NORM_GRAD] = WORD("sync.out_norm_grad", KEY_SYNC,
	    sync.out_norm_grad, qk_norm_words),
	[KEY_ATTENTION_SINK_SUPPORTED] = { "limits.attention_sink_supported",
	    KEY_LIMITS, CFG_TYPE_BOOL, F(limits.attention_sink), 0, 1, 1,
	    NULL },
	[KEY_OUT_NORM_SUPPORTED] = { "limits.out_norm_supported", KEY_LIMITS,
	    CFG_TYPE_BOOL, F(limits.out_norm), 0, 1, 1, NULL },
	[KEY_EP_ON] = WORD("model.moe.ep_on", KEY_MOE, model.moe.ep_on,
	    ep_on_words),
	[KEY_TP_MASK_SUPPORTED] = { "limits.tp_mask_supported", KEY_LIMITS,
	    CFG_TYPE_BOOL, F(limits.tp_mask), 0, 1, 1, NULL },
	[KEY_TP_REPLICATED_SUPPORTED] = { "limits.tp_replicated_supported",
	    KEY_LIMITS, CFG_TYPE_BOOL, F(limits.tp_replicated), 0, 1, 1,
	    NULL },
	[KEY_GLOBAL_AUX_SUPPORTED] = { "limits.global_aux_supported",
	    KEY_LIMITS, CFG_TYPE_BOOL, F(limits.global_aux), 0, 1, 1, NULL },
	[KEY_GTP] = INTEGER("mesh.gtp", KEY_MESH, mesh.gtp, 1,
	    CFG_MAX_MESH_DIM, 1),
	[KEY_EGTP] = INTEGER("mesh.egtp", KEY_MESH, mesh.egtp, 1,
	    CFG_MAX_MESH_DIM, 1),
	[KEY_GTP_SHARDED] = WORD("model.gtp_sharded", KEY_MODEL,
	    model.gtp_sharded, gtp_sharded_words),
	[KEY_GTP_SUPPORTED] = { "limits.gtp_supported", KEY_LIMITS,
	    CFG_TYPE_BOOL, F(limits.gtp), 0, 1, 1, NULL },
	[KEY_EXPERT_GTP_DIVISOR] = WORD("sync.expert_gtp_divisor", KEY_SYNC,
	    sync.expert_gtp_divisor, expert_gtp_words),
	[KEY_FSDP_DIVIDE_FACTOR] = WORD("sync.fsdp_divide_factor", KEY_SYNC,
	    sync.fsdp_divide_factor, fsdp_divide_factor_words),
	[KEY_EXPERT_TP_DIVISOR] = WORD("sync.expert_tp_divisor", KEY_SYNC,
	    sync.expert_tp_divisor, expert_tp_words),
};


/*
 * Small helpers on the key table.
 */

const char *
cfg_key_leaf(enum cfg_key k)
{
	const char	*dot = strrchr(cfg_keys[k].path, '.');

	return dot != NULL ? dot + 1 : cfg_keys[k].path;
}

/*
 * The field of key k in c, or NULL for a section that has no presence
 * flag.  CFG_NO_FIELD must be tested before the addition: c + SIZE_MAX is
 * undefined behaviour even if never dereferenced, and clang's UBSan aborts
 * on it (gcc's does not look).
 */
const void *
cfg_key_cfield(const struct config *c, enum cfg_key k)
{
	if (cfg_keys[k].offset == CFG_NO_FIELD)
		return NULL;
	return (const char *)c + cfg_keys[k].offset;
}

void *
cfg_key_field(struct config *c, enum cfg_key k)
{
	return (void *)cfg_key_cfield(c, k);
}

int64_t
cfg_key_get(const struct config *c, enum cfg_key k)
{
	const void	*p = cfg_key_cfield(c, k);

	switch (cfg_keys[k].type) {
	case CFG_TYPE_INT:
	case CFG_TYPE_ENUM:
		return *(const int *)p;
	case CFG_TYPE_INT64:
		return *(const int64_t *)p;
	case CFG_TYPE_BOOL:
		return *(const bool *)p;
	case CFG_TYPE_MAP:
		return p == NULL || *(const bool *)p;
	case CFG_TYPE_STRING:
	case CFG_TYPE_PLAN:
		break;
	}
	fatalx("key_get on %s", cfg_keys[k].path);
}

void
cfg_key_put(struct config *c, enum cfg_key k, int64_t v)
{
	void	*p = cfg_key_field(c, k);

	switch (cfg_keys[k].type) {
	case CFG_TYPE_INT:
	case CFG_TYPE_ENUM:
		*(int *)p = (int)v;
		return;
	case CFG_TYPE_INT64:
		*(int64_t *)p = v;
		return;
	case CFG_TYPE_BOOL:
		*(bool *)p = v != 0;
		return;
	case CFG_TYPE_MAP:
		if (p != NULL)
			*(bool *)p = v != 0;
		return;
	case CFG_TYPE_STRING:
	case CFG_TYPE_PLAN:
		break;
	}
	fatalx("key_set on %s", cfg_keys[k].path);
}

/* The child of parent spelt s[0..len), or KEY__COUNT. */
enum cfg_key
cfg_key_child(enum cfg_key parent, const char *s, size_t len)
{
	const char	*leaf;
	int		 k;

	for (k = 0; k < KEY__COUNT; k++) {
		if (cfg_keys[k].parent != parent)
			continue;
		leaf = cfg_key_leaf((enum cfg_key)k);
		if (strlen(leaf) == len && memcmp(leaf, s, len) == 0)
			return (enum cfg_key)k;
	}
	return KEY__COUNT;
}

/*
 * A key is active unless it lies under an absent optional mapping: the
 * fields of model.moe mean nothing in a dense model.
 */
int64_t
cfg_key_number(const struct config *c, enum cfg_key k)
{
	if (cfg_keys[k].type == CFG_TYPE_STRING ||
	    cfg_keys[k].type == CFG_TYPE_MAP ||
	    cfg_keys[k].type == CFG_TYPE_PLAN)
		fatalx("cfg_key_number on %s", cfg_keys[k].path);
	return cfg_key_get(c, k);
}

int
cfg_key_set_number(struct config *c, enum cfg_key k, int64_t value)
{
	if ((cfg_keys[k].type != CFG_TYPE_INT &&
	    cfg_keys[k].type != CFG_TYPE_INT64) || !cfg_key_is_active(c, k) ||
	    value < cfg_keys[k].min || value > cfg_keys[k].max)
		return -1;
	cfg_key_put(c, k, value);
	/* As a --set of it, like cfg_key_set. */
	keyset_add(&c->given, k);
	c->from_profile.w[k / 64] &= ~((uint64_t)1 << (k % 64));
	cfg_set_key_mark(c, k, (struct cfg_mark){ 0, 0 });
	return 0;
}

bool
cfg_key_is_section(enum cfg_key k)
{
	int	 j;

	for (j = 0; j < KEY__COUNT; j++)
		if (cfg_keys[j].parent == k)
			return true;
	return false;
}

bool
cfg_key_is_active(const struct config *c, enum cfg_key k)
{
	for (k = cfg_keys[k].parent; k != CFG_ROOT; k = cfg_keys[k].parent)
		if (!cfg_key_get(c, k))
			return false;
	return true;
}

int64_t
cfg_world(const struct config *c)
{
	return (int64_t)c->mesh.dp * c->mesh.cp * c->mesh.pp * c->mesh.tp;
}

void
cfg_stage_layers(const struct config *c, int stage, int *first, int *count)
{
	int	 f = c->model.first_stage_layers, l = c->model.last_stage_layers;
	int	 pp = c->mesh.pp, left = pp - (f > 0) - (l > 0), per;

	/* One stage (the numeric reference's model) builds every layer. */
	if ((f == 0 && l == 0) || pp == 1) {
		*count = c->model.layers / pp;
		*first = stage * *count;
		return;
	}
	per = left > 0 ? (c->model.layers - f - l) / left : 0;
	if (f > 0 && stage == 0) {
		*first = 0;
		*count = f;
	} else if (l > 0 && stage == pp - 1) {
		*first = c->model.layers - l;
		*count = l;
	} else {
		*first = f + (stage - (f > 0)) * per;
		*count = per;
	}
}

void
cfg_chunk_layers(const struct config *c, int stage, int chunk, int *first,
    int *count)
{
	int	 vpp = c->mesh.vpp > 0 ? c->mesh.vpp : 1, f, n;

	/*
	 * vpp divides every stage's layers, so the stages before this one
	 * hold f / vpp layers in each pass over the chunks.
	 */
	cfg_stage_layers(c, stage, &f, &n);
	*count = n / vpp;
	*first = chunk * (c->model.layers / vpp) + f / vpp;
}

/*
 * Coefficients are exact rationals in both engines: a decimal of at most
 * nine places after the point and nine before, or p/q, both at most 10^9.
 */
bool
cfg_decimal(const char *s, int64_t *num, int64_t *den)
{
	size_t	 a, b;
	int64_t	 n = 0, d = 1;

	*num = 0;
	*den = 1;
	if (s == NULL)
		return true;
	a = strspn(s, "0123456789");
	if (a == 0 || a > 9)
		return false;
	n = strtoll(s, NULL, 10);
	s += a;
	if (*s == '.') {
		b = strspn(++s, "0123456789");
		if (b == 0 || b > 9)
			return false;
		for (; b > 0; b--, s++) {
			n = 10 * n + (*s - '0');
			d *= 10;
		}
	} else if (*s == '/') {
		b = strspn(++s, "0123456789");
		if (b == 0 || b > 9)
			return false;
		d = strtoll(s, NULL, 10);
		s += b;
		if (d == 0)
			return false;
	}
	if (*s != '\0')
		return false;
	*num = n;
	*den = d;
	return true;
}

static int64_t
gcd64(int64_t a, int64_t b)
{
	int64_t	 t;

	while (b != 0) {
		t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/*
 * The prefixes of the masks that the data has rather than counts given:
 * "eod:" one token a document (its end-of-document token, which Megatron's
 * --eod-mask-loss masks), "fraction:" a share of every token.
 */
#define EOD_PREFIX	"eod:"
#define FRACTION_PREFIX	"fraction:"

int
cfg_token_mask(const char *spec, int64_t *num, int64_t *den, char *buf,
    size_t size)
{
	const char	*v;
	int64_t		 g;
	size_t		 digits;

	if (spec != NULL && strncmp(spec, EOD_PREFIX, strlen(EOD_PREFIX)) ==
	    0) {
		v = spec + strlen(EOD_PREFIX);
		digits = strspn(v, "0123456789");
		/*
		 * A document of one token is its end-of-document token alone:
		 * every token would be masked.
		 */
		if (digits == 0 || digits > 9 || v[digits] != '\0' ||
		    (*den = strtoll(v, NULL, 10)) < 2) {
			snprintf(buf, size, "eod:N needs the tokens of a "
			    "document, a whole number from 2 to 999999999, "
			    "not \"%.*s\"", 40, v);
			return -1;
		}
		*num = 1;
		return 1;
	}
	if (spec == NULL || strncmp(spec, FRACTION_PREFIX,
	    strlen(FRACTION_PREFIX)) != 0)
		return 0;
	v = spec + strlen(FRACTION_PREFIX);
	if (!cfg_decimal(v, num, den) || *num >= *den) {
		snprintf(buf, size, "fraction:F needs the share of the tokens "
		    "masked, a decimal or p/q from 0 up to, not including, 1, "
		    "not \"%.*s\"", 40, v);
		return -1;
	}
	if (*num == 0)
		*den = 1;
	else {
		g = gcd64(*num, *den);
		*num /= g;
		*den /= g;
	}
	return 1;
}

/*
 * Megatron pads the vocabulary (_vocab_size_with_padding, the same rule
 * from megatron/tokenizer/tokenizer.py in 0.4 to vocab_utils.py in 0.19):
 * up to a multiple of --make-vocab-size-divisible-by times tp, so that
 * any vocabulary splits over tp.  Both factors are at most 2^20, and
 * vocab too, so the product fits.
 */
int64_t
cfg_padded_vocab(const struct config *c)
{
	int64_t	 multiple = (int64_t)c->model.vocab_divisible_by * c->mesh.tp;

	return (c->model.vocab + multiple - 1) / multiple * multiple;
}

/*
 * Megatron's --moe-shared-expert-intermediate-size: the shared expert's
 * own width (DeepSeek-V3: 2048 beside a dense ffn of 18432).
 */
int
cfg_shared_expert_ffn(const struct config *c)
{
	return c->model.moe.shared_expert_ffn > 0 ?
	    c->model.moe.shared_expert_ffn : c->model.ffn;
}

enum router_sync
cfg_router_sync(const struct config *c)
{
	if (c->sync.router_grad == ROUTER_NONE_WITHOUT_EP)
		return c->mesh.ep == 1 ? ROUTER_NONE : ROUTER_AUTO;
	return c->sync.router_grad;
}

enum moe_input_sync
cfg_moe_input_sync(const struct config *c)
{
	if (c->sync.moe_input_grad == MOE_INPUT_REPLICATE_WITHOUT_EP)
		return c->mesh.ep == 1 ? MOE_INPUT_REPLICATE :
		    MOE_INPUT_PARTIAL;
	return c->sync.moe_input_grad;
}

bool
cfg_ddp_path(const struct config *c)
{
	return c->sync.replicate_only == REPLICATE_ONLY_DDP_AVERAGE &&
	    c->layout.dp_engine != DP_ENGINE_MEGATRON &&
	    c->mesh.dp_replicate > 1 && c->mesh.dp == c->mesh.dp_replicate &&
	    c->mesh.cp == 1;
}

/*
 * A tied weight on one stage is one parameter with two uses (model.c).
 * FSDP2 wraps it twice when the embedding and the output layer are
 * fully_shard groups of their own (torchtitan v0.2.2's apply_fsdp), and
 * only on the fully_shard path: torchtitan's DDP path wraps no group.
 */
bool
cfg_tied_split(const struct config *c)
{
	return c->model.tie_embeddings && c->mesh.pp == 1 &&
	    c->layout.dp_engine == DP_ENGINE_FSDP2 &&
	    c->layout.fsdp_flatten == FSDP_FLATTEN_PARAMETER &&
	    c->layout.tied_fsdp_groups == TIED_FSDP_TWO && !cfg_ddp_path(c);
}

/*
 * plan: (issue 25).  A config owns its plan: its copies and frees go with
 * the config's; plan.c checks it and plan-read.c reads it.
 */
const char *const cfg_plan_group_words[] = {
	"dp", "tp", "pp", "ep", "etp", "edp", "embedding", "cp", "pure-dp",
	"dp_shard", "dp_replicate", "efsdp", "edp_replicate", "gtp",
	"gtp_replicate", "egtp", "egtp_replicate", NULL
};
_Static_assert(sizeof cfg_plan_group_words / sizeof cfg_plan_group_words[0]
    == CFG_PLAN_PRODUCT + 1, "CFG_PLAN_PRODUCT counts the group words");

/*
 * dp is pure-dp x cp, pure-dp gtp x what gtp leaves of it, gtp_replicate
 * that and cp, edp egtp x egtp_replicate; pp, embedding and FSDP's
 * splits of dp are no axis of a product (config.h).
 */
const unsigned cfg_plan_group_axes[CFG_PLAN_PRODUCT] = {
	[0] = PLAN_AXIS_PURE_DP | PLAN_AXIS_CP,		/* dp */
	[1] = PLAN_AXIS_TP,
	[3] = PLAN_AXIS_EP,
	[4] = PLAN_AXIS_ETP,
	[5] = PLAN_AXIS_EDP,
	[7] = PLAN_AXIS_CP,
	[8] = PLAN_AXIS_PURE_DP,
	[13] = PLAN_AXIS_GTP,
	[14] = PLAN_AXIS_GTP_REPLICA | PLAN_AXIS_CP,	/* gtp_replicate */
	[15] = PLAN_AXIS_EGTP,
	[16] = PLAN_AXIS_EGTP_REPLICA,			/* egtp_replicate */
};

/* Named slowest axis first, as the mesh orders them (mesh.h). */
const struct cfg_plan_product cfg_plan_products[CFG_PLAN_NPRODUCTS] = {
	{ PLAN_AXIS_CP | PLAN_AXIS_TP, "[cp, tp]" },
	{ PLAN_AXIS_PURE_DP | PLAN_AXIS_TP, "[pure-dp, tp]" },
	{ PLAN_AXES_DENSE, "[dp, tp]" },
	{ PLAN_AXIS_EP | PLAN_AXIS_ETP, "[ep, etp]" },
	{ PLAN_AXIS_EDP | PLAN_AXIS_ETP, "[edp, etp]" },
	{ PLAN_AXIS_EDP | PLAN_AXIS_EP, "[edp, ep]" },
	{ PLAN_AXES_EXPERT, "[edp, ep, etp]" },
	{ PLAN_AXIS_GTP | PLAN_AXIS_TP, "[gtp, tp]" },
	{ PLAN_AXIS_GTP | PLAN_AXIS_CP, "[gtp, cp]" },
	{ PLAN_AXIS_GTP | PLAN_AXIS_CP | PLAN_AXIS_TP, "[gtp, cp, tp]" },
	{ PLAN_AXIS_GTP_REPLICA | PLAN_AXIS_CP | PLAN_AXIS_TP,
	    "[gtp_replicate, tp]" },
	{ PLAN_AXIS_EGTP | PLAN_AXIS_ETP, "[egtp, etp]" },
	{ PLAN_AXIS_EGTP | PLAN_AXIS_EP, "[egtp, ep]" },
	{ PLAN_AXIS_EGTP | PLAN_AXIS_EP | PLAN_AXIS_ETP, "[egtp, ep, etp]" },
	{ PLAN_AXIS_EGTP_REPLICA | PLAN_AXIS_ETP, "[egtp_replicate, etp]" },
	{ PLAN_AXIS_EGTP_REPLICA | PLAN_AXIS_EP, "[egtp_replicate, ep]" },
	{ PLAN_AXIS_EGTP_REPLICA | PLAN_AXIS_EP | PLAN_AXIS_ETP,
	    "[egtp_replicate, ep, etp]" },
};

const char *
cfg_plan_group_name(int group)
{
	if (group >= 0 && group < CFG_PLAN_PRODUCT)
		return cfg_plan_group_words[group];
	if (group >= CFG_PLAN_PRODUCT &&
	    group < CFG_PLAN_PRODUCT + CFG_PLAN_NPRODUCTS)
		return cfg_plan_products[group - CFG_PLAN_PRODUCT].name;
	fatalx("plan group %d out of range", group);
}
const char *const cfg_plan_buffer_words[] = { "dense", "expert", NULL };
const char *const cfg_plan_replicate_words[] = { "slices", "etp", NULL };
const char *const cfg_plan_declare_words[] = { "replicate", "partial",
    "detached", NULL };
const char *const cfg_plan_activation_words[] = {
	[PLAN_ACTIVATION_OUTPUT] = "output",
	[PLAN_ACTIVATION_ROUTER_SCORES] = "router-scores",
	[PLAN_ACTIVATION_EXPERTS_INPUT] = "experts-input",
	[PLAN_ACTIVATION_MIXER_INPUT] = "mixer-input",
	NULL
};
const char *const cfg_plan_term_words[] = {
	[PLAN_TERM_MAIN] = "main",
	[PLAN_TERM_AUX] = "aux",
	[PLAN_TERM_MTP] = "mtp",
	[PLAN_TERM__COUNT] = NULL
};

const char *const cfg_plan_dtype_words[] = { "fp32", "bf16", "fp16", NULL };
const char *const cfg_plan_when_words[] = {
	[PLAN_WHEN_DEFAULT] = NULL,
	[PLAN_WHEN_LAST] = "last",
	[PLAN_WHEN_FIRST] = "first",
	[PLAN_WHEN_EVERY] = "every",
	[PLAN_WHEN_NONE] = "none",
	[PLAN_WHEN_LIST] = NULL
};

static void *
dup_array(const void *src, size_t n, size_t size)
{
	void	*p;

	if (n == 0)
		return NULL;
	p = xreallocarray(NULL, n, size);
	memcpy(p, src, n * size);
	return p;
}

void
cfg_plan_copy(struct config *dst, const struct config *src)
{
	struct plan_item	*d;
	const struct plan_item	*s;
	int			 i, j;

	dst->plan = dup_array(src->plan, src->nplan, sizeof *src->plan);
	dst->nplan = src->nplan;
	for (i = 0; i < src->nplan; i++) {
		s = &src->plan[i];
		d = &dst->plan[i];
		d->expr = s->expr != NULL ? xstrdup(s->expr) : NULL;
		d->globs = dup_array(s->globs, s->nglobs, sizeof *s->globs);
		for (j = 0; j < s->nglobs; j++)
			d->globs[j] = xstrdup(s->globs[j]);
		d->glob_marks = dup_array(s->glob_marks, s->nglobs,
		    sizeof *s->glob_marks);
		d->stages = dup_array(s->stages, s->nstages,
		    sizeof *s->stages);
		d->stage_marks = dup_array(s->stage_marks, s->nstages,
		    sizeof *s->stage_marks);
		d->micro_batches = dup_array(s->micro_batches,
		    s->nmicro_batches, sizeof *s->micro_batches);
		d->micro_batch_marks = dup_array(s->micro_batch_marks,
		    s->nmicro_batches, sizeof *s->micro_batch_marks);
	}
}

void
cfg_plan_free(struct config *c)
{
	struct plan_item *it;
	int		 i, j;

	for (i = 0; i < c->nplan; i++) {
		it = &c->plan[i];
		free(it->expr);
		for (j = 0; j < it->nglobs; j++)
			free(it->globs[j]);
		free(it->globs);
		free(it->glob_marks);
		free(it->stages);
		free(it->stage_marks);
		free(it->micro_batches);
		free(it->micro_batch_marks);
	}
	free(c->plan);
	c->plan = NULL;
	c->nplan = 0;
}

static void
plan_append(char *buf, size_t len, const char *s)
{
	size_t	 n = strlen(buf);

	if (n + 1 < len)
		snprintf(buf + n, len - n, "%s", s);
}

/*
 * The steps that move a gradient between placements and layouts, and
 * what they name besides their group: a buffer, a reduce-scatter's
 * AVG, a to-partial's Replicate sub-dimensions.
 */
static void
plan_layout_text(const struct plan_item *it, char *buf, size_t len)
{
	static const char *const ops[] = {
		[PLAN_REDUCE_SCATTER] = "reduce-scatter: ",
		[PLAN_ALL_GATHER] = "all-gather: ",
		[PLAN_TO_PARTIAL] = "to-partial: ",
	};
	int	 j, n = 0;

	plan_append(buf, len, ops[it->op]);
	plan_append(buf, len, cfg_plan_group_name(it->group));
	if (it->op == PLAN_REDUCE_SCATTER)
		plan_append(buf, len, it->average ? ", average: true" :
		    ", average: false");
	for (j = 0; it->op == PLAN_TO_PARTIAL &&
	    cfg_plan_replicate_words[j] != NULL; j++) {
		if ((it->replicate & (1u << j)) == 0)
			continue;
		plan_append(buf, len, n++ == 0 ? ", replicate: [" : ", ");
		plan_append(buf, len, cfg_plan_replicate_words[j]);
	}
	if (n > 0)
		plan_append(buf, len, "]");
}

/* A list of stages or micro-batches after its opening text, if any. */
static void
plan_append_list(char *buf, size_t len, const char *open, const int *v,
    int n)
{
	char	 num[16];
	int	 j;

	for (j = 0; j < n; j++) {
		snprintf(num, sizeof num, "%d", v[j]);
		plan_append(buf, len, j == 0 ? open : ", ");
		plan_append(buf, len, num);
	}
	if (n > 0)
		plan_append(buf, len, "]");
}

void
cfg_plan_item_text(const struct plan_item *it, char *buf, size_t len)
{
	int	 j;

	buf[0] = '\0';
	switch (it->op) {
	case PLAN_PRESET:
		plan_append(buf, len, "preset");
		return;
	case PLAN_SCALE:
		plan_append(buf, len, "scale: ");
		plan_append(buf, len, it->expr);
		break;
	case PLAN_ALL_REDUCE:
		plan_append(buf, len, "all-reduce: ");
		plan_append(buf, len, cfg_plan_group_name(it->group));
		plan_append(buf, len, it->average ? ", average: true" :
		    ", average: false");
		break;
	case PLAN_ACCUMULATE:
		plan_append(buf, len, "accumulate: ");
		plan_append(buf, len, cfg_plan_dtype_words[it->dtype]);
		break;
	case PLAN_RESET:
		plan_append(buf, len, "reset: grads");
		break;
	case PLAN_DECLARE:
		plan_append(buf, len, "declare: ");
		plan_append(buf, len, cfg_plan_declare_words[it->declare]);
		if (it->replicate != 0)
			plan_append(buf, len, it->replicate ==
			    PLAN_REPLICATE_ETP ? ", replicate: etp" :
			    it->replicate == PLAN_REPLICATE_SLICES ?
			    ", replicate: slices" :
			    ", replicate: [slices, etp]");
		if (it->activation >= 0) {
			plan_append(buf, len, ", activation: ");
			plan_append(buf, len,
			    cfg_plan_activation_words[it->activation]);
		}
		break;
	case PLAN_GATHER_LOSS:
		plan_append(buf, len, "gather-loss: ");
		plan_append(buf, len, cfg_plan_group_name(it->group));
		plan_append(buf, len, it->autograd ? ", autograd: true" :
		    ", autograd: false");
		break;
	case PLAN_REDUCE_SCATTER:
	case PLAN_ALL_GATHER:
	case PLAN_TO_PARTIAL:
		plan_layout_text(it, buf, len);
		break;
	}
	if (it->term >= 0) {
		plan_append(buf, len, ", term: ");
		plan_append(buf, len, cfg_plan_term_words[it->term]);
	}
	if (it->op != PLAN_ACCUMULATE && it->dtype >= 0) {
		plan_append(buf, len, ", dtype: ");
		plan_append(buf, len, cfg_plan_dtype_words[it->dtype]);
	}
	for (j = 0; j < it->nglobs; j++) {
		plan_append(buf, len, j == 0 ? ", params: [" : ", ");
		plan_append(buf, len, it->globs[j]);
	}
	if (it->nglobs > 0)
		plan_append(buf, len, "]");
	plan_append_list(buf, len, ", stages: [", it->stages, it->nstages);
	if (it->buffer_mark.line > 0) {
		plan_append(buf, len, ", buffer: ");
		plan_append(buf, len, cfg_plan_buffer_words[it->buffer]);
	}
	/* The schedule only where written: a plan of today's reads as one. */
	if (cfg_plan_when_words[it->when] != NULL) {
		plan_append(buf, len, ", micro-batches: ");
		plan_append(buf, len, cfg_plan_when_words[it->when]);
	}
	plan_append_list(buf, len, ", micro-batches: [", it->micro_batches,
	    it->nmicro_batches);
}

void
cfg_plan_text(const struct config *c, char *buf, size_t len)
{
	char	 one[256];
	int	 i;

	buf[0] = '\0';
	if (!keyset_has(&c->given, KEY_PLAN)) {
		plan_append(buf, len, "(preset)");
		return;
	}
	for (i = 0; i < c->nplan; i++) {
		cfg_plan_item_text(&c->plan[i], one, sizeof one);
		if (i > 0)
			plan_append(buf, len, "; ");
		plan_append(buf, len, one);
	}
	if (c->nplan == 0)
		plan_append(buf, len, "(no steps)");
}

void
cfg_copy(struct config *dst, const struct config *src)
{
	/* The assignment copies every scalar (in_list too); not the strings. */
	*dst = *src;
	dst->file = src->file != NULL ? xstrdup(src->file) : NULL;
	dst->name = src->name != NULL ? xstrdup(src->name) : NULL;
	dst->framework = src->framework != NULL ?
	    xstrdup(src->framework) : NULL;
	dst->model.moe.pattern = src->model.moe.pattern != NULL ?
	    xstrdup(src->model.moe.pattern) : NULL;
	dst->loss.valid_tokens = src->loss.valid_tokens != NULL ?
	    xstrdup(src->loss.valid_tokens) : NULL;
	dst->model.mtp_loss_scaling_factor =
	    src->model.mtp_loss_scaling_factor != NULL ?
	    xstrdup(src->model.mtp_loss_scaling_factor) : NULL;
	dst->model.moe.aux_loss_coeff = src->model.moe.aux_loss_coeff != NULL ?
	    xstrdup(src->model.moe.aux_loss_coeff) : NULL;
	dst->model.moe.z_loss_coeff = src->model.moe.z_loss_coeff != NULL ?
	    xstrdup(src->model.moe.z_loss_coeff) : NULL;
	cfg_plan_copy(dst, src);
	dst->marks = xreallocarray(NULL, (size_t)src->nmarks + 1,
	    sizeof(*dst->marks));
	/* A config with no key written has no marks (NULL): UBSan. */
	if (src->nmarks > 0)
		memcpy(dst->marks, src->marks, (size_t)src->nmarks *
		    sizeof(*dst->marks));
}

void
cfg_one_rank(struct config *dst, const struct config *src)
{
	cfg_copy(dst, src);
	/*
	 * Megatron pads the vocabulary with the audited tp, and so must the
	 * reference, or its padded rows differ.
	 */
	dst->model.vocab_divisible_by *= src->mesh.tp;
	dst->model.seq /= src->mesh.cp;
	dst->mesh.dp = dst->mesh.pp = dst->mesh.tp = dst->mesh.cp = 1;
	dst->mesh.ep = dst->mesh.etp = dst->mesh.vpp = 1;
	/* Issue 22: left at 2, it made the reference's dp_shard 0. */
	dst->mesh.dp_replicate = 1;
	dst->mesh.gtp = dst->mesh.egtp = 1;
	dst->training.micro_batches = 1;
}

void
cfg_free(struct config *c)
{
	free(c->file);
	free(c->name);
	free(c->framework);
	free(c->model.moe.pattern);
	free(c->loss.valid_tokens);
	free(c->model.moe.aux_loss_coeff);
	free(c->model.mtp_loss_scaling_factor);
	c->model.mtp_loss_scaling_factor = NULL;
	free(c->model.moe.z_loss_coeff);
	c->model.moe.aux_loss_coeff = c->model.moe.z_loss_coeff = NULL;
	c->loss.valid_tokens = NULL;
	c->file = NULL;
	c->name = NULL;
	c->framework = NULL;
	c->model.moe.pattern = NULL;
	free(c->marks);
	c->marks = NULL;
	c->nmarks = 0;
	cfg_plan_free(c);
}

const char *
cfg_key_path(enum cfg_key k)
{
	return cfg_keys[k].path;
}

bool
cfg_key_is_setting(enum cfg_key k)
{
	return cfg_keys[k].type != CFG_TYPE_MAP &&
	    cfg_keys[k].type != CFG_TYPE_STRING &&
	    cfg_keys[k].type != CFG_TYPE_PLAN;
}

void
cfg_key_value(const struct config *c, enum cfg_key k, char *buf, size_t len)
{
	int64_t	 v;

	if (cfg_keys[k].type == CFG_TYPE_PLAN) {
		cfg_plan_text(c, buf, len);
		return;
	}
	if (cfg_keys[k].type == CFG_TYPE_STRING) {
		const char *s = *(char *const *)((const char *)c +
		    cfg_keys[k].offset);

		snprintf(buf, len, "%s", s != NULL ? s : "");
		return;
	}
	v = cfg_key_get(c, k);
	switch (cfg_keys[k].type) {
	case CFG_TYPE_BOOL:
		snprintf(buf, len, "%s", v ? "true" : "false");
		break;
	case CFG_TYPE_ENUM:
		snprintf(buf, len, "%s", cfg_spelling(cfg_keys[k].words, (int)v));
		break;
	default:
		snprintf(buf, len, "%" PRId64, v);
		break;
	}
}

enum cfg_value_type
cfg_key_value_type(enum cfg_key k)
{
	switch (cfg_keys[k].type) {
	case CFG_TYPE_INT:
	case CFG_TYPE_INT64:
		return CFG_VALUE_NUMBER;
	case CFG_TYPE_BOOL:
		return CFG_VALUE_BOOL;
	default:
		return CFG_VALUE_STRING;
	}
}

struct cfg_mark
cfg_key_mark(const struct config *c, enum cfg_key k)
{
	int	 i;

	for (i = 0; i < c->nmarks; i++)
		if (c->marks[i].key == (int)k)
			return c->marks[i].mark;
	return (struct cfg_mark){ 0, 0 };
}

bool
cfg_key_set_text(const struct config *c, enum cfg_key k, char *buf,
    size_t len)
{
	struct cfg_mark		 m = cfg_key_mark(c, k);

	if (m.line != 0 || m.col <= 0 || c->sets == NULL ||
	    !keyset_has(&c->given, k))
		return false;
	cfg_override_text(&c->sets[m.col - 1], buf, len);
	return true;
}

void
cfg_override_text(const struct cfg_override *o, char *buf, size_t len)
{
	char	 key[TEXT_QUOTE_SIZE], value[TEXT_QUOTE_SIZE];

	/* A --set value may be a whole file's worth, or binary. */
	text_cut(key, sizeof key, o->key, strlen(o->key));
	text_cut(value, sizeof value, o->value, strlen(o->value));
	snprintf(buf, len, "--set %s=%s", key, value);
}

void
cfg_set_key_mark(struct config *c, enum cfg_key k, struct cfg_mark m)
{
	int	 i;

	for (i = 0; i < c->nmarks; i++)
		if (c->marks[i].key == (int)k) {
			c->marks[i].mark = m;
			return;
		}
	c->marks = xreallocarray(c->marks, (size_t)c->nmarks + 1,
	    sizeof(*c->marks));
	c->marks[c->nmarks].key = (int)k;
	c->marks[c->nmarks++].mark = m;
}

/* The values a boolean may be set to, as report writes them. */
static const char *const bool_words[] = { "false", "true", NULL };

const char *const *
cfg_key_words(enum cfg_key k)
{
	switch (cfg_keys[k].type) {
	case CFG_TYPE_ENUM:
		return cfg_keys[k].words;
	case CFG_TYPE_BOOL:
		return bool_words;
	default:
		return NULL;
	}
}

void
cfg_key_default(enum cfg_key k, char *buf, size_t len)
{
	const char *const *words = cfg_key_words(k);

	if (words == NULL)
		snprintf(buf, len, "%" PRId64, cfg_keys[k].def);
	else
		snprintf(buf, len, "%s", cfg_spelling(words, (int)cfg_keys[k].def));
}

int
cfg_key_set(struct config *c, enum cfg_key k, const char *value)
{
	const char *const *words = cfg_key_words(k);
	int	 i;

	if (words == NULL || !cfg_key_is_active(c, k))
		return -1;
	for (i = 0; words[i] != NULL; i++)
		if (strcmp(words[i], value) == 0)
			break;
	if (words[i] == NULL)
		return -1;
	cfg_key_put(c, k, i);
	/* As a --set of it: written, at no position, over any profile. */
	keyset_add(&c->given, k);
	c->from_profile.w[k / 64] &= ~((uint64_t)1 << (k % 64));
	cfg_set_key_mark(c, k, (struct cfg_mark){ 0, 0 });
	return 0;
}

/* The sections a profile may not set: they describe the user's job. */
bool
cfg_key_is_job(enum cfg_key k)
{
	for (; k != CFG_ROOT; k = cfg_keys[k].parent)
		if (k == KEY_MESH || k == KEY_NAME || k == KEY_FRAMEWORK ||
		    k == KEY_MOE)
			return true;
	return false;
}

struct keyset
cfg_merge_settings(struct config *dst, const struct config *src,
    bool keep_given)
{
	struct keyset	 copied = { { 0 } };
	int		 k;

	for (k = 0; k < KEY__COUNT; k++) {
		if (!keyset_has(&src->given, k) || !cfg_key_is_setting(k) ||
		    (keep_given && keyset_has(&dst->given, k)))
			continue;
		cfg_key_put(dst, (enum cfg_key)k, cfg_key_get(src, (enum cfg_key)k));
		keyset_add(&copied, k);
		if (!keep_given) {
			keyset_add(&dst->given, k);
			cfg_set_key_mark(dst, (enum cfg_key)k,
			    cfg_key_mark(src, (enum cfg_key)k));
		}
	}
	return copied;
}

void
config_list_free(struct config_list *l)
{
	size_t	 i;

	for (i = 0; i < l->n; i++)
		cfg_free(&l->v[i]);
	free(l->v);
	free(l->error);
	free(l->error_key);
	l->v = NULL;
	l->n = 0;
	l->error = NULL;
	l->error_key = NULL;
}

const char *
cfg_spelling(const char *const *words, int v)
{
	int	 i;

	for (i = 0; words[i] != NULL; i++)
		if (i == v)
			return words[i];
	return "?";
}

const char *
cfg_embedding_sync_name(enum embedding_sync v)
{
	return cfg_spelling(embedding_words, (int)v);
}

const char *
cfg_router_sync_name(enum router_sync v)
{
	return cfg_spelling(router_words, (int)v);
}

const char *
cfg_expert_input_sync_name(enum expert_input_sync v)
{
	return cfg_spelling(expert_input_words, (int)v);
}

const char *
cfg_sp_param_sync_name(enum sp_param_sync v)
{
	return cfg_spelling(sp_param_words, (int)v);
}

const char *
cfg_expert_divisor_name(enum expert_divisor v)
{
	return cfg_spelling(divisor_words, (int)v);
}

const char *
cfg_score_func_name(enum score_func v)
{
	return cfg_spelling(score_words, (int)v);
}

bool
cfg_layer_is_moe(const struct config *c, int layer)
{
	int	 every = c->model.moe.every;

	if (!c->model.has_moe || layer < 0)
		return false;
	if (c->model.moe.pattern != NULL)
		return layer < (int)strlen(c->model.moe.pattern) &&
		    c->model.moe.pattern[layer] == '1';
	return every > 0 && layer % every == every - 1;
}
