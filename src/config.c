/*
 * The configuration loader (SPEC sections 2, 3 and 5): YAML read through
 * libyaml's event API straight into struct config, then the --set overrides,
 * the defaults and the mesh constraints.
 *
 * One table of keys (keys[] below) drives everything that depends on the
 * schema: which key may appear under which mapping, how its value is parsed
 * and range-checked, what --set may name, which spelling a misspelt key was
 * probably meant to be, and the defaults.  One table of constraints
 * (constraints[]) serves both the loader and sweep, through
 * find_violation().
 *
 * The event API lets the loader stop at the first node that does not fit the
 * schema, so hostile input (deep nesting, huge documents, aliases) never gets
 * further than the first wrong event, and every error has the exact mark of
 * the node at fault.  Every error prints exactly one line on stderr.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "config.h"
#include "lossnorm.h"
#include "mesh.h"
#include "suggest.h"
#include "framework.h"
#include "text.h"
#include "hash.h"
#include "xmalloc.h"

/* Enumerations are stored through an int pointer by the key table. */
_Static_assert(sizeof(enum embedding_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum router_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum expert_input_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum moe_input_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum router_input_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum sp_param_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum expert_divisor) == sizeof(int), "enum size");
_Static_assert(sizeof(enum qk_norm_sync) == sizeof(int), "enum size");
_Static_assert(sizeof(enum expert_avg_scale) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_tp_duplicates) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_tied_copies) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_expert_filter) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_expert_norm) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_shard_group) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_pp_reduce) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gn_clip_ranks) == sizeof(int), "enum size");
_Static_assert(sizeof(enum score_func) == sizeof(int), "enum size");
_Static_assert(sizeof(enum aux_scale) == sizeof(int), "enum size");
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
_Static_assert(sizeof(enum replicate_only) == sizeof(int), "enum size");
_Static_assert(sizeof(enum pp_normalize) == sizeof(int), "enum size");
_Static_assert(sizeof(enum seq_divisor) == sizeof(int), "enum size");

enum key_type {
	TYPE_MAP,		/* a mapping of further keys */
	TYPE_STRING,		/* a one-line label */
	TYPE_INT,		/* a decimal int within [min, max] */
	TYPE_INT64,		/* a decimal int64_t within [min, max] */
	TYPE_BOOL,		/* true/false, yes/no, on/off */
	TYPE_ENUM		/* one of words[], stored as its index */
};

struct key_def {
	const char		*path;	/* dotted path, "mesh.tp" */
	enum cfg_key		 parent; /* ROOT for the top level */
	enum key_type		 type;
	size_t			 offset; /* the field; for a mapping its presence flag */
	int64_t			 min, max;
	int64_t			 def;	/* default (DEFAULT_PP: the value of mesh.pp) */
	const char *const	*words;	/* spellings of an enum, NULL-terminated */
};

#define ROOT		KEY__COUNT
#define NO_FIELD	SIZE_MAX
#define DEFAULT_PP	(-1)

/* Room for input quoted back (text.h), and with its quotes. */
#define QUOTE_SIZE	TEXT_QUOTE_SIZE
#define QUOTED_SIZE	(QUOTE_SIZE + 2)
/* Room for describe(): a quoted scalar and a few words. */
#define GOT_SIZE	(QUOTED_SIZE + 48)
/* Room for any message the loader builds. */
#define MSG_SIZE	CFG_WHY_SIZE

/* What a boolean may be spelt as, naming every spelling load_bool takes. */
#define BOOL_WORDS	"true or false (or yes/no, on/off)"

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
static const char *const score_words[] = { "softmax", "sigmoid", NULL };
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
	"micro-batch", "micro-batch-cp", "none", NULL
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
static const char *const fsdp_flatten_words[] = { "parameter", "unit", NULL };
static const char *const replicate_only_words[] = {
	"fsdp", "ddp-average", NULL
};
static const char *const pp_normalize_words[] = { "same", "none", NULL };
static const char *const seq_divisor_words[] = { "cp-tp", "2-cp-tp",
    "2-cp-tp-if-cp", NULL };
/* In enum mtp_scale order: Megatron's schedule without per-token loss. */
/* In enum loss_objective order: the default (token-mean) first. */
static const char *const objective_words[] = {
	"token-mean", "micro-batch-mean", "sample-mean", "sum", NULL
};
static const char *const mtp_scale_words[] = {
	"micro-batches", "micro-batches-cp", "tokens", "tokens-local",
	"tokens-global", "micro-batches-cp-group", NULL
};
/* In enum aux_scale order: Megatron's (after PR #2217) comes first. */
static const char *const aux_scale_words[] = {
	"micro-batches-cp", "micro-batches", "tokens-tp-cp", "tokens-local",
	"none", NULL
};

#define F(member)	offsetof(struct config, member)
#define SECTION(p, parent, presence) \
	{ p, parent, TYPE_MAP, presence, 0, 0, 0, NULL }
#define INTEGER(p, parent, member, min, max, def) \
	{ p, parent, TYPE_INT, F(member), min, max, def, NULL }
#define FLAG(p, parent, member) \
	{ p, parent, TYPE_BOOL, F(member), 0, 1, 0, NULL }
#define WORD(p, parent, member, words) \
	{ p, parent, TYPE_ENUM, F(member), 0, 0, 0, words }

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
static const struct key_def keys[KEY__COUNT] = {
	[KEY_NAME] = { "name", ROOT, TYPE_STRING, F(name), 0, 0, 0, NULL },
	[KEY_MESH] = SECTION("mesh", ROOT, NO_FIELD),
	[KEY_DP] = INTEGER("mesh.dp", KEY_MESH, mesh.dp, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_PP] = INTEGER("mesh.pp", KEY_MESH, mesh.pp, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_TP] = INTEGER("mesh.tp", KEY_MESH, mesh.tp, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_EP] = INTEGER("mesh.ep", KEY_MESH, mesh.ep, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_ETP] = INTEGER("mesh.etp", KEY_MESH, mesh.etp, 1,
	    CFG_MAX_MESH_DIM, 1),
	[KEY_MODEL] = SECTION("model", ROOT, NO_FIELD),
	[KEY_VOCAB] = INTEGER("model.vocab", KEY_MODEL, model.vocab, 1,
	    CFG_MAX_MODEL_DIM, 32),
	[KEY_HIDDEN] = INTEGER("model.hidden", KEY_MODEL, model.hidden, 1,
	    CFG_MAX_MODEL_DIM, 8),
	[KEY_FFN] = INTEGER("model.ffn", KEY_MODEL, model.ffn, 1,
	    CFG_MAX_MODEL_DIM, 16),
	[KEY_LAYERS] = INTEGER("model.layers", KEY_MODEL, model.layers, 1,
	    CFG_MAX_LAYERS, DEFAULT_PP),
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
	[KEY_TRAINING] = SECTION("training", ROOT, NO_FIELD),
	[KEY_DISTRIBUTED_OPTIMIZER] = FLAG("training.distributed_optimizer",
	    KEY_TRAINING, training.distributed_optimizer),
	[KEY_SEQUENCE_PARALLEL] = FLAG("training.sequence_parallel",
	    KEY_TRAINING, training.sequence_parallel),
	[KEY_AVERAGE_IN_COLLECTIVE] = FLAG("training.average_in_collective",
	    KEY_TRAINING, training.average_in_collective),
	[KEY_BUCKET_ELEMS] = { "training.bucket_elems", KEY_TRAINING,
	    TYPE_INT64, F(training.bucket_elems), 0, INT64_MAX, 0, NULL },
	[KEY_SYNC] = SECTION("sync", ROOT, NO_FIELD),
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
	[KEY_FRAMEWORK] = { "framework", ROOT, TYPE_STRING, F(framework), 0, 0,
	    0, NULL },
	[KEY_OVERLAP_GRAD_REDUCE] = FLAG("training.overlap_grad_reduce",
	    KEY_TRAINING, training.overlap_grad_reduce),
	[KEY_LAYOUT] = SECTION("layout", ROOT, NO_FIELD),
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
	[KEY_LIMITS] = SECTION("limits", ROOT, NO_FIELD),
	[KEY_MOE_SUPPORTED] = { "limits.moe_supported", KEY_LIMITS, TYPE_BOOL,
	    F(limits.moe), 0, 1, 1, NULL },
	[KEY_QK_NORM_SUPPORTED] = { "limits.qk_norm_supported", KEY_LIMITS,
	    TYPE_BOOL, F(limits.qk_norm), 0, 1, 1, NULL },
	[KEY_ETP_SUPPORTED] = { "limits.etp_supported", KEY_LIMITS, TYPE_BOOL,
	    F(limits.etp), 0, 1, 1, NULL },
	[KEY_MOE_TP_NEEDS_SP] = FLAG("limits.moe_tp_needs_sp", KEY_LIMITS,
	    limits.moe_tp_needs_sp),
	[KEY_TIED_BUCKET_START] = WORD("layout.tied_bucket_start", KEY_LAYOUT,
	    layout.tied_bucket_start, tied_start_words),
	[KEY_TIED_START_ASSERTED] = FLAG("layout.tied_start_asserted",
	    KEY_LAYOUT, layout.tied_start_asserted),
	[KEY_BUCKET_ELEMS_PER_DP] = { "layout.bucket_elems_per_dp", KEY_LAYOUT,
	    TYPE_INT64, F(layout.bucket_elems_per_dp), 0, INT64_MAX / (1 << 20),
	    0, NULL },
	[KEY_AVG_SUPPORTED] = { "limits.avg_supported", KEY_LIMITS, TYPE_BOOL,
	    F(limits.avg), 0, 1, 1, NULL },
	[KEY_AVG_NEEDS_ETP_EQ_TP] = FLAG("limits.avg_needs_etp_eq_tp",
	    KEY_LIMITS, limits.avg_needs_etp_eq_tp),
	[KEY_SHARED_EXPERT_GATE] = FLAG("model.moe.shared_expert_gate", KEY_MOE,
	    model.moe.shared_expert_gate),
	[KEY_SHARED_EXPERTS_SUPPORTED] = { "limits.shared_experts_supported",
	    KEY_LIMITS, TYPE_BOOL, F(limits.shared_experts), 0, 1, 1, NULL },
	[KEY_EP_TP_NEEDS_SP] = FLAG("limits.ep_tp_needs_sp", KEY_LIMITS,
	    limits.ep_tp_needs_sp),
	[KEY_EP_SUPPORTED] = { "limits.ep_supported", KEY_LIMITS, TYPE_BOOL,
	    F(limits.ep), 0, 1, 1, NULL },
	[KEY_ETP_ONE_OR_TP] = FLAG("limits.etp_one_or_tp", KEY_LIMITS,
	    limits.etp_one_or_tp),
	[KEY_EP_DISTOPT_SUPPORTED] = { "limits.ep_distopt_supported",
	    KEY_LIMITS, TYPE_BOOL, F(limits.ep_distopt), 0, 1, 1, NULL },
	[KEY_MAX_TOP_K] = INTEGER("limits.max_top_k", KEY_LIMITS,
	    limits.max_top_k, 0, CFG_MAX_EXPERTS, 0),
	[KEY_MOE_EVERY_SUPPORTED] = { "limits.moe_every_supported",
	    KEY_LIMITS, TYPE_BOOL, F(limits.moe_every), 0, 1, 1, NULL },
	[KEY_FIRST_STAGE_LAYERS] = INTEGER("model.first_stage_layers",
	    KEY_MODEL, model.first_stage_layers, 0, CFG_MAX_LAYERS, 0),
	[KEY_LAST_STAGE_LAYERS] = INTEGER("model.last_stage_layers",
	    KEY_MODEL, model.last_stage_layers, 0, CFG_MAX_LAYERS, 0),
	[KEY_PATTERN] = { "model.moe.pattern", KEY_MOE, TYPE_STRING,
	    F(model.moe.pattern), 0, 0, 0, NULL },
	[KEY_UNEVEN_PP_SUPPORTED] = { "limits.uneven_pp_supported",
	    KEY_LIMITS, TYPE_BOOL, F(limits.uneven_pp), 0, 1, 1, NULL },
	[KEY_CP] = INTEGER("mesh.cp", KEY_MESH, mesh.cp, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_MICRO_BATCHES] = INTEGER("training.micro_batches", KEY_TRAINING,
	    training.micro_batches, 1, CFG_MAX_MICRO_BATCHES, 1),
	[KEY_LOSS] = SECTION("loss", ROOT, NO_FIELD),
	[KEY_VALID_TOKENS] = { "loss.valid_tokens", KEY_LOSS, TYPE_STRING,
	    F(loss.valid_tokens), 0, 0, 0, NULL },
	[KEY_NORMALIZE_BY] = WORD("loss.normalize_by", KEY_LOSS,
	    loss.normalize_by, normalize_words),
	[KEY_SCALE] = WORD("loss.scale", KEY_LOSS, loss.scale,
	    data_size_words),
	[KEY_DP_DIVISOR] = WORD("sync.dp_divisor", KEY_SYNC, sync.dp_divisor,
	    data_size_words),
	[KEY_DP_GROUP] = WORD("sync.dp_group", KEY_SYNC, sync.dp_group,
	    dp_group_words),
	[KEY_GRAD_NORM] = SECTION("grad_norm", ROOT, NO_FIELD),
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
	    KEY_LIMITS, TYPE_BOOL, F(limits.uneven_vpp), 0, 1, 1, NULL },
	[KEY_AVG_CP_SUPPORTED] = { "limits.avg_cp_supported", KEY_LIMITS,
	    TYPE_BOOL, F(limits.avg_cp), 0, 1, 1, NULL },
	[KEY_PER_TOKEN_AVG] = WORD("sync.per_token_avg", KEY_SYNC,
	    sync.per_token_avg, per_token_avg_words),
	[KEY_AVG_PER_TOKEN_SUPPORTED] = { "limits.avg_per_token_supported",
	    KEY_LIMITS, TYPE_BOOL, F(limits.avg_per_token), 0, 1, 1, NULL },
	[KEY_DP_REPLICATE] = INTEGER("mesh.dp_replicate", KEY_MESH,
	    mesh.dp_replicate, 1, CFG_MAX_MESH_DIM, 1),
	[KEY_DP_ENGINE] = WORD("layout.dp_engine", KEY_LAYOUT,
	    layout.dp_engine, dp_engine_words),
	[KEY_FSDP_ONE_MEMBER] = WORD("sync.fsdp_one_member", KEY_SYNC,
	    sync.fsdp_one_member, fsdp_one_member_words),
	[KEY_FSDP_FLATTEN] = WORD("layout.fsdp_flatten", KEY_LAYOUT,
	    layout.fsdp_flatten, fsdp_flatten_words),
	[KEY_AUX_LOSS_COEFF] = { "model.moe.aux_loss_coeff", KEY_MOE,
	    TYPE_STRING, F(model.moe.aux_loss_coeff), 0, 0, 0, NULL },
	[KEY_Z_LOSS_COEFF] = { "model.moe.z_loss_coeff", KEY_MOE,
	    TYPE_STRING, F(model.moe.z_loss_coeff), 0, 0, 0, NULL },
	[KEY_AUX_SCALE] = WORD("loss.aux_scale", KEY_LOSS, loss.aux_scale,
	    aux_scale_words),
	[KEY_SHARED_EXPERT_FFN] = INTEGER("model.moe.shared_expert_ffn",
	    KEY_MOE, model.moe.shared_expert_ffn, 0, CFG_MAX_MODEL_DIM, 0),
	[KEY_EXPERT_FFN_SUPPORTED] = { "limits.expert_ffn_supported",
	    KEY_LIMITS, TYPE_BOOL, F(limits.expert_ffn), 0, 1, 1, NULL },
	[KEY_SIGMOID_SUPPORTED] = { "limits.sigmoid_supported", KEY_LIMITS,
	    TYPE_BOOL, F(limits.sigmoid), 0, 1, 1, NULL },
	[KEY_SCORE_AFTER_EXPERTS_SUPPORTED] = {
	    "limits.score_after_experts_supported", KEY_LIMITS, TYPE_BOOL,
	    F(limits.score_after), 0, 1, 1, NULL },
	[KEY_ROUTER_INPUT_GRAD] = WORD("sync.router_input_grad", KEY_SYNC,
	    sync.router_input_grad, router_input_words),
	[KEY_MTP] = INTEGER("model.mtp", KEY_MODEL, model.mtp, 0, 8, 0),
	[KEY_MTP_LOSS_SCALING_FACTOR] = { "model.mtp_loss_scaling_factor",
	    KEY_MODEL, TYPE_STRING, F(model.mtp_loss_scaling_factor), 0, 0, 0,
	    NULL },
	[KEY_MTP_SCALE] = WORD("loss.mtp_scale", KEY_LOSS, loss.mtp_scale,
	    mtp_scale_words),
	[KEY_OBJECTIVE] = WORD("loss.objective", KEY_LOSS, loss.objective,
	    objective_words),
	[KEY_MTP_SUPPORTED] = { "limits.mtp_supported", KEY_LIMITS,
	    TYPE_BOOL, F(limits.mtp), 0, 1, 1, NULL },
	[KEY_MTP_CP_SUPPORTED] = { "limits.mtp_cp_supported", KEY_LIMITS,
	    TYPE_BOOL, F(limits.mtp_cp), 0, 1, 1, NULL },
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
};

/* The state of one cfg_load call. */
struct loader {
	const char			*path;	/* as messages show it */
	const char			*open_path; /* the file to read */
	bool				 from_stdin; /* path "-" */
	const unsigned char		*text;	/* the file, for reader errors */
	size_t				 len;
	yaml_parser_t			*parser; /* the file's, or a --set value's */
	const struct cfg_override	*ovr;	/* the --set being applied */
	const struct cfg_override	*ovrs;
	size_t				 novrs;
	enum cfg_key			*ovr_keys; /* ovrs[i].key, resolved */
	struct config_list		 list;	/* configs of this file so far */
	char				**error; /* the caller's last error */
	char				**error_key; /* and its key */
	bool				 quiet;	/* keep errors, print none */
	size_t				 cap;	/* allocated length of list.v */
	struct config			*cfg;	/* the one being filled */
	/* Which --set wrote each key of cfg last (NULL: the file did). */
	const struct cfg_override	*origin[KEY__COUNT];
	bool				 is_list;
};

static const char *spelling(const char *const *, int);

/*
 * Small helpers on the key table.
 */

static const char *
key_leaf(enum cfg_key k)
{
	const char	*dot = strrchr(keys[k].path, '.');

	return dot != NULL ? dot + 1 : keys[k].path;
}

/*
 * The field of key k in c, or NULL for a section that has no presence
 * flag.  NO_FIELD must be tested before the addition: c + SIZE_MAX is
 * undefined behaviour even if never dereferenced, and clang's UBSan aborts
 * on it (gcc's does not look).
 */
static const void *
key_cfield(const struct config *c, enum cfg_key k)
{
	if (keys[k].offset == NO_FIELD)
		return NULL;
	return (const char *)c + keys[k].offset;
}

static void *
key_field(struct config *c, enum cfg_key k)
{
	return (void *)key_cfield(c, k);
}

static int64_t
key_get(const struct config *c, enum cfg_key k)
{
	const void	*p = key_cfield(c, k);

	switch (keys[k].type) {
	case TYPE_INT:
	case TYPE_ENUM:
		return *(const int *)p;
	case TYPE_INT64:
		return *(const int64_t *)p;
	case TYPE_BOOL:
		return *(const bool *)p;
	case TYPE_MAP:
		return p == NULL || *(const bool *)p;
	case TYPE_STRING:
		break;
	}
	fatalx("key_get on %s", keys[k].path);
}

static void
key_set(struct config *c, enum cfg_key k, int64_t v)
{
	void	*p = key_field(c, k);

	switch (keys[k].type) {
	case TYPE_INT:
	case TYPE_ENUM:
		*(int *)p = (int)v;
		return;
	case TYPE_INT64:
		*(int64_t *)p = v;
		return;
	case TYPE_BOOL:
		*(bool *)p = v != 0;
		return;
	case TYPE_MAP:
		if (p != NULL)
			*(bool *)p = v != 0;
		return;
	case TYPE_STRING:
		break;
	}
	fatalx("key_set on %s", keys[k].path);
}

/* The child of parent spelt s[0..len), or KEY__COUNT. */
static enum cfg_key
key_child(enum cfg_key parent, const char *s, size_t len)
{
	const char	*leaf;
	int		 k;

	for (k = 0; k < KEY__COUNT; k++) {
		if (keys[k].parent != parent)
			continue;
		leaf = key_leaf((enum cfg_key)k);
		if (strlen(leaf) == len && memcmp(leaf, s, len) == 0)
			return (enum cfg_key)k;
	}
	return KEY__COUNT;
}

/*
 * A key is active unless it lies under an absent optional mapping: the
 * fields of model.moe mean nothing in a dense model.
 */
static bool
key_active(const struct config *c, enum cfg_key k)
{
	for (k = keys[k].parent; k != ROOT; k = keys[k].parent)
		if (!key_get(c, k))
			return false;
	return true;
}

/*
 * Message building.  Every piece of input quoted back is escaped and cut to
 * TEXT_QUOTE_MAX characters (text.h), so that a message stays one readable
 * line whatever the input holds.
 */

static void
append(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
append(char *buf, size_t size, const char *fmt, ...)
{
	va_list	 ap;
	size_t	 used = strlen(buf);

	if (used + 1 >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, size - used, fmt, ap);
	va_end(ap);
}

static void
quote(char *buf, size_t size, const unsigned char *s, size_t len)
{
	char	 esc[QUOTE_SIZE];

	text_escape(esc, sizeof(esc), s, len);
	snprintf(buf, size, "\"%s\"", esc);
}

/*
 * Whether a scalar is tagged a string (!!str, or the non-specific "!"):
 * YAML reads "!!str 2" as the string "2", as it reads '2'.
 */
static bool
is_str_tagged(const yaml_event_t *ev)
{
	const char	*tag = (const char *)ev->data.scalar.tag;

	return tag != NULL && (strcmp(tag, YAML_STR_TAG) == 0 ||
	    strcmp(tag, "!") == 0);
}

/* A plain scalar, which may be a number, a boolean or null. */
static bool
is_plain(const yaml_event_t *ev)
{
	return ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	    !is_str_tagged(ev);
}

static bool
is_null_scalar(const yaml_event_t *ev)
{
	const char	*s = (const char *)ev->data.scalar.value;
	size_t		 len = ev->data.scalar.length;

	if (!is_plain(ev))
		return false;
	return len == 0 || (len == 1 && s[0] == '~') ||
	    (len == 4 && (memcmp(s, "null", 4) == 0 ||
	    memcmp(s, "Null", 4) == 0 || memcmp(s, "NULL", 4) == 0));
}

/* What a node is, for "expected X, got Y". */
static void
describe(char *buf, size_t size, const yaml_event_t *ev)
{
	char	 q[QUOTED_SIZE];

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if (is_plain(ev) && ev->data.scalar.length == 0) {
			snprintf(buf, size, "an empty value");
			break;
		}
		quote(q, sizeof(q), ev->data.scalar.value,
		    ev->data.scalar.length);
		if (is_plain(ev))
			snprintf(buf, size, "%s", q);
		else if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
			snprintf(buf, size, "the string %s (tagged %s)", q,
			    strcmp((const char *)ev->data.scalar.tag, "!") == 0 ?
			    "!" : "!!str");
		else
			snprintf(buf, size, "the quoted string %s", q);
		break;
	case YAML_MAPPING_START_EVENT:
		snprintf(buf, size, "a mapping");
		break;
	case YAML_SEQUENCE_START_EVENT:
		snprintf(buf, size, "a sequence");
		break;
	case YAML_ALIAS_EVENT:
		snprintf(buf, size, "an alias (aliases are not supported)");
		break;
	default:
		snprintf(buf, size, "nothing");
		break;
	}
}

/* "a, b or c" */
static void
word_list(char *buf, size_t size, const char *const *words)
{
	size_t	 i;

	buf[0] = '\0';
	for (i = 0; words[i] != NULL; i++) {
		if (i > 0)
			append(buf, size, words[i + 1] == NULL ? " or " : ", ");
		append(buf, size, "%s", words[i]);
	}
}

/* "a positive integer", "true or false", ... for key k. */
static void
expectation(char *buf, size_t size, enum cfg_key k)
{
	char	 list[MSG_SIZE / 2];

	switch (keys[k].type) {
	case TYPE_INT:
	case TYPE_INT64:
		/* limits.vpp_min_pp starts at 2: "positive" would admit 1. */
		if (keys[k].min > 1)
			snprintf(buf, size, "an integer of at least %" PRId64,
			    keys[k].min);
		else
			snprintf(buf, size, "%s", keys[k].min > 0 ?
			    "a positive integer" : "a non-negative integer");
		break;
	case TYPE_BOOL:
		snprintf(buf, size, "%s", BOOL_WORDS);
		break;
	case TYPE_ENUM:
		word_list(list, sizeof(list), keys[k].words);
		snprintf(buf, size, "one of %s", list);
		break;
	case TYPE_STRING:
		snprintf(buf, size, "a one-line name");
		break;
	case TYPE_MAP:
		snprintf(buf, size, "a mapping");
		break;
	}
}

/*
 * Diagnostics.  The location is a --set, a file position, or the file
 * alone; the key part is omitted for errors about the whole document.
 */

static struct cfg_mark
to_mark(const yaml_mark_t *m)
{
	struct cfg_mark	 cm;

	cm.line = m->line >= INT_MAX ? INT_MAX : (int)m->line + 1;
	cm.col = m->column >= INT_MAX ? INT_MAX : (int)m->column + 1;
	return cm;
}

/*
 * Write one line, with any control character or byte that is no UTF-8 in
 * it made visible, in one call: stderr is unbuffered, and a line written
 * piecemeal could interleave with another process's (MPI ranks share the
 * terminal).
 */
static void
emit(char **keep, const char *line, bool quiet)
{
	char	*out = text_visible(line);
	size_t	 n = strlen(out), skip = strlen(progname);

	/*
	 * Kept, without "gradaudit: ", where the caller asked: a batch's
	 * reports name each file's error (config_list.error).
	 */
	if (keep != NULL) {
		free(*keep);
		*keep = xstrdup(strncmp(out, progname, skip) == 0 &&
		    strncmp(out + skip, ": ", 2) == 0 ? out + skip + 2 : out);
	}

	out[n] = '\n';
	if (!quiet)
		fwrite(out, 1, n + 1, stderr);
	free(out);
}

static void
report(const struct loader *ld, const struct cfg_override *ovr,
    struct cfg_mark m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void
report(const struct loader *ld, const struct cfg_override *ovr,
    struct cfg_mark m, const char *key, const char *fmt, ...)
{
	char	 msg[MSG_SIZE], *where, *line;
	char	 k[QUOTE_SIZE], v[QUOTE_SIZE];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ovr != NULL) {
		/* A --set value may be a whole file's worth, or binary. */
		text_cut(k, sizeof(k), ovr->key, strlen(ovr->key));
		text_cut(v, sizeof(v), ovr->value, strlen(ovr->value));
		xasprintf(&where, "--set %s=%s", k, v);
	} else if (m.line > 0)
		xasprintf(&where, "%s:%d:%d", ld->path, m.line, m.col);
	else
		where = xstrdup(ld->path);
	if (key != NULL)
		xasprintf(&line, "%s: %s: %s: %s", progname, where, key, msg);
	else
		xasprintf(&line, "%s: %s: %s", progname, where, msg);
	emit(ld->error, line, ld->quiet);
	if (ld->error_key != NULL) {
		free(*ld->error_key);
		*ld->error_key = key != NULL ? xstrdup(key) : NULL;
	}
	free(line);
	free(where);
}

/* An error at a node of the input being read (file or --set value). */
static void
error_at(const struct loader *ld, const yaml_mark_t *m, const char *key,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
error_at(const struct loader *ld, const yaml_mark_t *m, const char *key,
    const char *fmt, ...)
{
	char	 msg[MSG_SIZE];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	report(ld, ld->ovr, to_mark(m), key, "%s", msg);
}

/*
 * libyaml's reader reports a byte offset, not a mark: count the lines of
 * the text up to it, and the characters of its line, as libyaml's marks
 * count them (bytes put the column of "é\xff" at 3, not 2).
 */
struct cfg_mark
cfg_offset_mark(const unsigned char *text, size_t len, size_t offset)
{
	struct cfg_mark	 m = { 1, 1 };
	size_t		 i, bol = 0;

	if (text == NULL)
		return m;
	for (i = 0; i < offset && i < len; i++)
		if (text[i] == '\n') {
			m.line++;
			bol = i + 1;
		}
	m.col = 1 + (int)text_columns(text + bol, i - bol);
	return m;
}

/* libyaml's own description of a syntax or encoding error. */
static void
syntax_error(const struct loader *ld)
{
	const yaml_parser_t	*p = ld->parser;
	const char		*problem;
	struct cfg_mark		 m = { 1, 1 };
	char			 msg[MSG_SIZE];

	if (p->error == YAML_MEMORY_ERROR) {
		errno = ENOMEM;
		fatal("libyaml");
	}
	problem = p->problem != NULL ? p->problem : "invalid YAML";
	snprintf(msg, sizeof(msg), "%s", problem);
	if (p->error == YAML_READER_ERROR) {
		if (p->problem_value != -1)
			append(msg, sizeof(msg), " (#%X)",
			    (unsigned)p->problem_value);
		if (ld->ovr == NULL)
			m = cfg_offset_mark(ld->text, ld->len,
			    p->problem_offset);
	} else {
		m = to_mark(&p->problem_mark);
		if (p->context != NULL)
			append(msg, sizeof(msg), " (%s that started at %d:%d)",
			    p->context, to_mark(&p->context_mark).line,
			    to_mark(&p->context_mark).col);
	}
	report(ld, ld->ovr, m, NULL, "%s", msg);
}

static int
next_event(struct loader *ld, yaml_event_t *ev)
{
	if (yaml_parser_parse(ld->parser, ev))
		return 0;
	syntax_error(ld);
	return -1;
}

/*
 * Suggestions for unknown keys.
 */

/*
 * The hint after 'unknown key "..."': the nearest key at the same level
 * (within two edits, and not a complete rewrite of a short word), or the
 * same word at another level (a key indented under the wrong mapping), or
 * the list of keys valid here.  full_paths names suggestions by their
 * dotted path, as --set needs.
 */
static void
unknown_hint(char *buf, size_t size, enum cfg_key parent, const char *s,
    size_t len, bool full_paths)
{
	struct suggestion sg;
	const char	*leaf, *near;
	int		 k;
	bool		 first = true;

	buf[0] = '\0';
	if (parent != ROOT && keys[parent].type != TYPE_MAP) {
		snprintf(buf, size, "%s takes a value, not keys",
		    keys[parent].path);
		return;
	}
	if (len == 2 && memcmp(s, "<<", 2) == 0) {
		snprintf(buf, size,
		    "merge keys and aliases are not supported: "
		    "write each configuration out");
		return;
	}
	suggest_init(&sg, s, len);
	for (k = 0; k < KEY__COUNT; k++)
		if (keys[k].parent == parent)
			suggest_consider(&sg, key_leaf((enum cfg_key)k));
	if ((near = suggest_best(&sg)) != NULL) {
		for (k = 0; key_leaf((enum cfg_key)k) != near; k++)
			continue;
		snprintf(buf, size, "did you mean \"%s\"?", full_paths ?
		    keys[k].path : near);
		return;
	}
	for (k = 0; k < KEY__COUNT; k++) {
		leaf = key_leaf((enum cfg_key)k);
		if (strlen(leaf) != len || memcmp(leaf, s, len) != 0)
			continue;
		/* "did you mean "name"?" about "name" would suggest itself. */
		if (keys[k].parent == ROOT && !full_paths)
			snprintf(buf, size, "\"%s\" belongs at the top level, "
			    "not under %s", leaf, keys[parent].path);
		else
			snprintf(buf, size, "did you mean \"%s\"?",
			    keys[k].path);
		return;
	}
	snprintf(buf, size, "valid keys: ");
	for (k = 0; k < KEY__COUNT; k++) {
		if (keys[k].parent != parent)
			continue;
		append(buf, size, "%s%s", first ? "" : ", ",
		    key_leaf((enum cfg_key)k));
		first = false;
	}
}

/*
 * Resolve the dotted path of a --set before any file is read, so that a
 * misspelt override is reported even when the file is broken too.
 */
/*
 * A --set key is a whole dotted path: a slip in a section's name
 * ("mseh.dp") is best answered with the whole key it meant, "mesh.dp",
 * and only when no key is that close by the segment's own hint.
 */
static void
full_path_hint(char *hint, size_t size, const char *path,
    enum cfg_key parent, const char *seg, size_t len)
{
	struct suggestion	 sg;
	int			 k;

	suggest_init(&sg, path, strlen(path));
	for (k = 0; k < KEY__COUNT; k++)
		if (keys[k].type != TYPE_MAP)
			suggest_consider(&sg, keys[k].path);
	if (suggest_best(&sg) != NULL)
		snprintf(hint, size, "did you mean \"%s\"?",
		    suggest_best(&sg));
	else
		unknown_hint(hint, size, parent, seg, len, true);
}

static int
resolve_override(const char *path, enum cfg_key *out, char **keep)
{
	const char	*seg = path, *dot;
	enum cfg_key	 parent = ROOT, k;
	size_t		 len;
	char		 hint[MSG_SIZE], q[QUOTED_SIZE], cut[QUOTE_SIZE];
	char		*line;

	for (;;) {
		dot = strchr(seg, '.');
		len = dot != NULL ? (size_t)(dot - seg) : strlen(seg);
		k = KEY__COUNT;
		if (parent == ROOT || keys[parent].type == TYPE_MAP)
			k = key_child(parent, seg, len);
		if (k == KEY__COUNT) {
			full_path_hint(hint, sizeof(hint), path, parent, seg,
			    len);
			quote(q, sizeof(q), (const unsigned char *)path,
			    strlen(path));
			text_cut(cut, sizeof(cut), path, strlen(path));
			/* No value is involved yet: name the key alone. */
			xasprintf(&line, "%s: --set %s: unknown key %s (%s)",
			    progname, cut, q, hint);
			emit(keep, line, false);
			free(line);
			return -1;
		}
		if (dot == NULL)
			break;
		parent = k;
		seg = dot + 1;
	}
	*out = k;
	return 0;
}

/*
 * Values.
 */

enum int_parse { INT_BAD, INT_OK, INT_HUGE };

/*
 * A plain decimal integer with an optional sign.  Huge magnitudes are
 * reported as such rather than wrapped; a negative value is only ever below
 * the minimum, so its magnitude does not matter.
 */
static enum int_parse
parse_integer(const unsigned char *s, size_t len, int64_t *out)
{
	uint64_t	 v = 0, digit;
	size_t		 i = 0;
	bool		 neg = false, huge = false;

	if (len > 0 && (s[0] == '+' || s[0] == '-')) {
		neg = s[0] == '-';
		i++;
	}
	if (i == len)
		return INT_BAD;
	for (; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return INT_BAD;
		digit = (uint64_t)(s[i] - '0');
		if (huge || v > ((uint64_t)INT64_MAX - digit) / 10)
			huge = true;
		else
			v = v * 10 + digit;
	}
	if (neg) {
		*out = v == 0 && !huge ? 0 : -1;
		return INT_OK;
	}
	if (huge)
		return INT_HUGE;
	*out = (int64_t)v;
	return INT_OK;
}

static bool
ascii_caseeq(const unsigned char *s, size_t len, const char *word)
{
	size_t	 i;
	int	 a, b;

	if (strlen(word) != len)
		return false;
	for (i = 0; i < len; i++) {
		a = s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i];
		b = (unsigned char)word[i];
		if (a != b)
			return false;
	}
	return true;
}

/*
 * The octal reading of s[0..len), an integer that parse_integer accepted,
 * as YAML 1.1 has it for a leading zero: false when a digit is not octal or
 * the value does not fit.
 */
static bool
parse_octal(const unsigned char *s, size_t len, int64_t *out)
{
	uint64_t	 v = 0;
	size_t		 i = 0;
	bool		 neg = false;

	if (len > 0 && (s[0] == '+' || s[0] == '-')) {
		neg = s[0] == '-';
		i++;
	}
	for (; i < len; i++) {
		if (s[i] > '7' || v > ((uint64_t)INT64_MAX - (s[i] - '0')) / 8)
			return false;
		v = v * 8 + (uint64_t)(s[i] - '0');
	}
	*out = neg ? -(int64_t)v : (int64_t)v;
	return true;
}

/*
 * YAML 1.1 reads "010" as octal 8 and YAML 1.2 as decimal 10, so a leading
 * zero on an integer (other than a lone "0") is rejected rather than read in
 * either way: the hint in buf names the readings the user may have meant.
 * Returns false when no reading is in range, for the ordinary range error
 * then says all there is to say ("00" for a positive size).
 */
static bool
leading_zero_hint(char *buf, size_t size, const struct key_def *d,
    const unsigned char *s, size_t len, enum int_parse r, int64_t dec)
{
	size_t	 i = len > 0 && (s[0] == '+' || s[0] == '-') ? 1 : 0;
	int64_t	 oct;
	bool	 has_oct;

	if (r == INT_BAD || len - i < 2 || s[i] != '0')
		return false;
	has_oct = parse_octal(s, len, &oct);
	if (!(r == INT_OK && dec >= d->min && dec <= d->max) &&
	    !(has_oct && oct >= d->min && oct <= d->max))
		return false;
	snprintf(buf, size, " (a leading zero means octal in YAML; write ");
	if (r == INT_OK)
		append(buf, size, "%" PRId64, dec);
	if (has_oct && !(r == INT_OK && oct == dec))
		append(buf, size, "%s%" PRId64, r == INT_OK ? " or " : "", oct);
	append(buf, size, ")");
	return true;
}

static int
load_integer(struct loader *ld, enum cfg_key k, const yaml_event_t *ev)
{
	const struct key_def	*d = &keys[k];
	char			 what[MSG_SIZE], got[GOT_SIZE];
	char			 hint[MSG_SIZE];
	enum int_parse		 r = INT_BAD;
	int64_t			 v = 0;

	if (is_plain(ev))
		r = parse_integer(ev->data.scalar.value,
		    ev->data.scalar.length, &v);
	expectation(what, sizeof(what), k);
	describe(got, sizeof(got), ev);
	if (leading_zero_hint(hint, sizeof(hint), d, ev->data.scalar.value,
	    ev->data.scalar.length, r, v)) {
		error_at(ld, &ev->start_mark, d->path, "expected %s, got %s%s",
		    what, got, hint);
		return -1;
	}
	if (r == INT_BAD || (r == INT_OK && v < d->min)) {
		error_at(ld, &ev->start_mark, d->path, "expected %s, got %s",
		    what, got);
		return -1;
	}
	if (r == INT_HUGE || v > d->max) {
		error_at(ld, &ev->start_mark, d->path,
		    "expected %s%s at most %" PRId64 ", got %s", what,
		    d->min > 1 ? " and" : "", d->max, got);
		return -1;
	}
	key_set(ld->cfg, k, v);
	return 0;
}

static int
load_bool(struct loader *ld, enum cfg_key k, const yaml_event_t *ev)
{
	static const char *const yes[] = { "true", "yes", "on" };
	static const char *const no[] = { "false", "no", "off" };
	const unsigned char	*s = ev->data.scalar.value;
	size_t			 i, len = ev->data.scalar.length;
	char			 got[GOT_SIZE];

	for (i = 0; is_plain(ev) && i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (ascii_caseeq(s, len, yes[i]) || ascii_caseeq(s, len, no[i])) {
			key_set(ld->cfg, k, ascii_caseeq(s, len, yes[i]));
			return 0;
		}
	}
	describe(got, sizeof(got), ev);
	error_at(ld, &ev->start_mark, keys[k].path,
	    "expected %s, got %s", BOOL_WORDS, got);
	return -1;
}

static int
load_enum(struct loader *ld, enum cfg_key k, const yaml_event_t *ev)
{
	const char *const	*w = keys[k].words;
	size_t			 i, len = ev->data.scalar.length;
	char			 list[MSG_SIZE], got[QUOTED_SIZE];

	for (i = 0; w[i] != NULL; i++) {
		if (strlen(w[i]) == len &&
		    memcmp(w[i], ev->data.scalar.value, len) == 0) {
			key_set(ld->cfg, k, (int64_t)i);
			return 0;
		}
	}
	word_list(list, sizeof(list), w);
	quote(got, sizeof(got), ev->data.scalar.value, len);
	error_at(ld, &ev->start_mark, keys[k].path,
	    "unknown value %s: expected %s", got, list);
	return -1;
}

static int
load_string(struct loader *ld, enum cfg_key k, const yaml_event_t *ev)
{
	const unsigned char	*s = ev->data.scalar.value;
	size_t			 i, len = ev->data.scalar.length;
	char			 what[MSG_SIZE], got[GOT_SIZE], **field;
	bool			 ok = len > 0 && !is_null_scalar(ev);

	/* Names label report rows and JSON: one printable line. */
	for (i = 0; ok && i < len; i++)
		if (s[i] < 0x20 || s[i] == 0x7f)
			ok = false;
	if (!ok) {
		expectation(what, sizeof(what), k);
		describe(got, sizeof(got), ev);
		error_at(ld, &ev->start_mark, keys[k].path,
		    "expected %s, got %s", what, got);
		return -1;
	}
	field = key_field(ld->cfg, k);
	free(*field);
	*field = xmalloc(len + 1);
	memcpy(*field, s, len);
	(*field)[len] = '\0';
	return 0;
}

static int	load_mapping(struct loader *, enum cfg_key);

/* The value of key k, whose first event is ev. */
static int
load_value(struct loader *ld, enum cfg_key k, const yaml_event_t *ev)
{
	char	 what[MSG_SIZE], got[GOT_SIZE];

	if (ev->type == YAML_ALIAS_EVENT) {
		error_at(ld, &ev->start_mark, keys[k].path,
		    "aliases are not supported: write the value out");
		return -1;
	}
	if (keys[k].type == TYPE_MAP && ev->type == YAML_MAPPING_START_EVENT) {
		key_set(ld->cfg, k, 1);
		return load_mapping(ld, k);
	}
	if (keys[k].type == TYPE_MAP || ev->type != YAML_SCALAR_EVENT) {
		expectation(what, sizeof(what), k);
		describe(got, sizeof(got), ev);
		error_at(ld, &ev->start_mark, keys[k].path,
		    "expected %s, got %s%s", what, got,
		    keys[k].type == TYPE_MAP && is_null_scalar(ev) ?
		    " (write {} for all defaults)" : "");
		return -1;
	}
	switch (keys[k].type) {
	case TYPE_INT:
	case TYPE_INT64:
		return load_integer(ld, k, ev);
	case TYPE_BOOL:
		return load_bool(ld, k, ev);
	case TYPE_ENUM:
		return load_enum(ld, k, ev);
	case TYPE_STRING:
		return load_string(ld, k, ev);
	case TYPE_MAP:
		break;
	}
	fatalx("load_value: %s", keys[k].path);
}

/* Note that key k was written, and where: a --set has no position. */
static void
record_key(struct loader *ld, enum cfg_key k, const yaml_mark_t *m)
{
	struct config	*c = ld->cfg;

	keyset_add(&c->given, k);
	ld->origin[k] = ld->ovr;
	if (ld->ovr != NULL || m == NULL)
		cfg_set_key_mark(c, k, (struct cfg_mark){ 0, 0 });
	else
		cfg_set_key_mark(c, k, to_mark(m));
}

static int
load_pair(struct loader *ld, enum cfg_key parent, const yaml_event_t *kev,
    struct keyset *seen)
{
	const char		*ppath = parent == ROOT ? NULL : keys[parent].path;
	yaml_event_t		 vev;
	enum cfg_key		 k;
	char			 got[GOT_SIZE], esc[QUOTE_SIZE];
	char			 path[MSG_SIZE], hint[MSG_SIZE];
	int			 rc;

	if (kev->type == YAML_ALIAS_EVENT) {
		error_at(ld, &kev->start_mark, ppath,
		    "aliases are not supported: write the key out");
		return -1;
	}
	if (kev->type != YAML_SCALAR_EVENT) {
		describe(got, sizeof(got), kev);
		error_at(ld, &kev->start_mark, ppath,
		    "expected a key name, got %s", got);
		return -1;
	}
	k = key_child(parent, (const char *)kev->data.scalar.value,
	    kev->data.scalar.length);
	if (k == KEY__COUNT) {
		text_escape(esc, sizeof(esc), kev->data.scalar.value,
		    kev->data.scalar.length);
		snprintf(path, sizeof(path), "%s%s%s", ppath != NULL ?
		    ppath : "", ppath != NULL ? "." : "", esc);
		unknown_hint(hint, sizeof(hint), parent,
		    (const char *)kev->data.scalar.value,
		    kev->data.scalar.length, false);
		/* An empty key as a key path would print as ": ". */
		if (kev->data.scalar.length == 0)
			error_at(ld, &kev->start_mark, ppath, "empty key (%s)",
			    hint);
		else
			error_at(ld, &kev->start_mark, path,
			    "unknown key \"%s\" (%s)", esc, hint);
		return -1;
	}
	if (keyset_has(seen, k)) {
		if (ld->ovr == NULL)
			error_at(ld, &kev->start_mark, keys[k].path,
			    "duplicate key \"%s\" (first at line %d column %d)",
			    key_leaf(k), cfg_key_mark(ld->cfg, k).line,
			    cfg_key_mark(ld->cfg, k).col);
		else
			error_at(ld, &kev->start_mark, keys[k].path,
			    "duplicate key \"%s\"", key_leaf(k));
		return -1;
	}
	keyset_add(seen, k);
	record_key(ld, k, &kev->start_mark);
	if (next_event(ld, &vev) == -1)
		return -1;
	rc = load_value(ld, k, &vev);
	yaml_event_delete(&vev);
	return rc;
}

/* The pairs of a mapping whose start event has been read. */
static int
load_mapping(struct loader *ld, enum cfg_key parent)
{
	yaml_event_t	 ev;
	struct keyset	 seen = { { 0 } };
	int		 rc;

	for (;;) {
		if (next_event(ld, &ev) == -1)
			return -1;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		rc = load_pair(ld, parent, &ev, &seen);
		yaml_event_delete(&ev);
		if (rc == -1)
			return -1;
	}
}

/*
 * Overrides.  The value of a --set is a little YAML document of its own,
 * read by the same code as the file, so it follows the same type rules and
 * may even be a flow mapping ("--set model.moe={}").
 */
static int
apply_override(struct loader *ld, size_t i)
{
	const struct cfg_override	*o = &ld->ovrs[i];
	yaml_parser_t			 vp, *saved = ld->parser;
	yaml_event_t			 ev;
	enum cfg_key			 k = ld->ovr_keys[i], p;
	int				 rc = -1;

	if (!yaml_parser_initialize(&vp))
		fatal("yaml_parser_initialize");
	yaml_parser_set_input_string(&vp, (const unsigned char *)o->value,
	    strlen(o->value));
	ld->parser = &vp;
	ld->ovr = o;

	/* Setting a key inside a mapping brings the mapping into being. */
	for (p = keys[k].parent; p != ROOT; p = keys[p].parent) {
		if (!keyset_has(&ld->cfg->given, p))
			record_key(ld, p, NULL);
		key_set(ld->cfg, p, 1);
	}
	record_key(ld, k, NULL);

	if (next_event(ld, &ev) == -1)		/* stream start */
		goto out;
	yaml_event_delete(&ev);
	if (next_event(ld, &ev) == -1)
		goto out;
	if (ev.type == YAML_STREAM_END_EVENT) {
		/*
		 * An empty value holds no document at all: read it as the
		 * empty plain scalar it stands for.  The event is built by
		 * hand and owns nothing.
		 */
		memset(&ev, 0, sizeof(ev));
		ev.type = YAML_SCALAR_EVENT;
		ev.data.scalar.value = (yaml_char_t *)"";
		ev.data.scalar.style = YAML_PLAIN_SCALAR_STYLE;
		rc = load_value(ld, k, &ev);
		goto out;
	}
	yaml_event_delete(&ev);			/* document start */
	if (next_event(ld, &ev) == -1)
		goto out;
	rc = load_value(ld, k, &ev);
	yaml_event_delete(&ev);
	if (rc == -1)
		goto out;
	rc = -1;
	if (next_event(ld, &ev) == -1)		/* document end */
		goto out;
	yaml_event_delete(&ev);
	if (next_event(ld, &ev) == -1)
		goto out;
	if (ev.type != YAML_STREAM_END_EVENT)
		error_at(ld, &ev.start_mark, keys[k].path,
		    "expected one value, got several YAML documents");
	else
		rc = 0;
	yaml_event_delete(&ev);
out:
	yaml_parser_delete(&vp);
	ld->parser = saved;
	ld->ovr = NULL;
	return rc;
}

/*
 * Defaults and constraints.
 */

static void
apply_defaults(struct config *c)
{
	int	 k;

	for (k = 0; k < KEY__COUNT; k++) {
		if (keyset_has(&c->given, k) ||
		    keyset_has(&c->from_profile, k) || keys[k].type == TYPE_MAP ||
		    keys[k].type == TYPE_STRING)
			continue;
		key_set(c, (enum cfg_key)k,
		    keys[k].def == DEFAULT_PP ? c->mesh.pp : keys[k].def);
	}
}

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

int64_t
cfg_world(const struct config *c)
{
	return (int64_t)c->mesh.dp * c->mesh.cp * c->mesh.pp * c->mesh.tp;
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
 * A lossy MoE boundary keeps a second atom per chunk (atom.h), which
 * the multi-token prediction losses' atoms do not have yet: one declared
 * Replicate or Partial, or behind a router's all-reduce, can be lossy.
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
 * The model code counts the tokens of a micro-batch in an int; each factor
 * alone fits, but their product must too.
 */
/* qk_norm: every tp rank holds whole heads of the mixer's features. */
static bool
heads_split_over_tp(const struct config *c, char *buf, size_t size)
{
	if (!c->model.qk_norm)
		return true;
	return must_be_divisible(buf, size, "ffn", c->model.ffn,
	    "tp*head_dim", (int64_t)c->mesh.tp * c->model.head_dim);
}

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

bool
cfg_ddp_path(const struct config *c)
{
	return c->sync.replicate_only == REPLICATE_ONLY_DDP_AVERAGE &&
	    c->layout.dp_engine != DP_ENGINE_MEGATRON &&
	    c->mesh.dp_replicate > 1 && c->mesh.dp == c->mesh.dp_replicate &&
	    c->mesh.cp == 1;
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
 * on main the trainer checks tp * (2 * cp if cp > 1 else 1) instead.
 */
static bool
framework_seq_divisor(const struct config *c, char *buf, size_t size)
{
	int64_t	 d = (int64_t)2 * c->mesh.cp * c->mesh.tp;
	char	 what[200];

	if (c->limits.seq_divisor == SEQ_DIVISOR_2_CP_TP_IF_CP &&
	    c->mesh.cp == 1)
		d = c->mesh.tp;
	if (c->limits.seq_divisor == SEQ_DIVISOR_CP_TP ||
	    c->model.seq % d == 0)
		return true;
	if (c->limits.seq_divisor == SEQ_DIVISOR_2_CP_TP_IF_CP)
		snprintf(what, sizeof what, "needs seq (%d) divisible by %s "
		    "(%" PRId64 "): \"Training sequence length must be "
		    "divisible by %" PRId64 " for the configured "
		    "sequence/context parallelism\"", c->model.seq,
		    c->mesh.cp == 1 ? "tp" : "2*cp*tp", d, d);
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

/* Only the FSDP2 engine flattens a unit's parameters (layout.fsdp_flatten). */
static bool
flatten_fits(const struct config *c, char *buf, size_t size)
{
	if (c->layout.fsdp_flatten == FSDP_FLATTEN_PARAMETER ||
	    c->layout.dp_engine == DP_ENGINE_FSDP2)
		return true;
	snprintf(buf, size, "unit needs layout.dp_engine "
	    "fsdp2");
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
	    "and cp > 1: its arguments assert context_parallel_size == 1",
	    buf, size);
}

/*
 * When the ranks of an ep group scale a micro-batch differently, expert
 * gradients are kept per source (lossnorm.h), which the multi-token
 * prediction losses' atoms are not.  Last of the constraints: the loss
 * normalization is built from the mesh and counts the others checked.
 */
static bool
mtp_one_source(const struct config *c, char *buf, size_t size)
{
	struct config	 t;
	struct mesh	 mesh;
	struct loss_norm ln;
	bool		 split;

	if (c->model.mtp == 0 || c->mesh.ep == 1)
		return true;
	t = *c;
	t.model.mtp = 0;
	mesh_from_config(&mesh, &t);
	lossnorm_build(&ln, &t, &mesh);
	split = ln.split;
	lossnorm_free(&ln);
	if (!split)
		return true;
	snprintf(buf, size, "model.mtp is not modelled when the ranks of an "
	    "ep group scale a micro-batch's loss differently (their expert "
	    "gradients are kept per source)");
	return false;
}

static const struct constraint constraints[] = {
	{ KEY_ETP, false, etp_divides_tp },
	{ KEY_EP, false, expert_mesh_fits },
	{ KEY_LAYERS, false, layers_split_over_pp },
	{ KEY_VOCAB, false, padded_vocab_fits },
	{ KEY_FFN, false, ffn_split_over_tp },
	{ KEY_HEAD_DIM, false, heads_split_over_tp },
	{ KEY_SEQ, false, seq_split_over_tp },
	{ KEY_SEQ, false, tokens_fit },
	{ KEY_VALID_TOKENS, false, valid_tokens_fit },
	{ KEY_AUX_LOSS_COEFF, true, aux_coeff_fits },
	{ KEY_SHARED_EXPERT_FFN, true, shared_ffn_split_over_tp },
	{ KEY_SHARED_EXPERT_FFN, true, shared_ffn_fits },
	{ KEY_Z_LOSS_COEFF, true, z_coeff_fits },
	{ KEY_MTP_LOSS_SCALING_FACTOR, false, mtp_factor_fits },
	{ KEY_MTP, true, mtp_without_boundary },
	{ KEY_MTP, false, framework_mtp },
	{ KEY_MTP, false, framework_mtp_cp },
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
	{ KEY_ETP, true, framework_has_etp },
	{ KEY_SEQUENCE_PARALLEL, true, framework_moe_tp_sp },
	{ KEY_AVERAGE_IN_COLLECTIVE, false, framework_has_avg },
	{ KEY_AVERAGE_IN_COLLECTIVE, true, framework_avg_etp },
	{ KEY_SHARED_EXPERT_GATE, true, gate_has_shared_expert },
	{ KEY_SHARED_EXPERTS, true, framework_has_shared_experts },
	{ KEY_SEQUENCE_PARALLEL, true, framework_ep_tp_sp },
	{ KEY_DISTRIBUTED_OPTIMIZER, true, framework_ep_distopt },
	{ KEY_EP, true, framework_has_ep },
	{ KEY_ETP, true, framework_etp_one_or_tp },
	{ KEY_EP, true, framework_ep_borrows_all_cp_tp },
	{ KEY_TOP_K, true, framework_top_k },
	{ KEY_EVERY, true, framework_moe_every },
	{ KEY_EXPERT_FFN, true, framework_expert_ffn },
	{ KEY_SCORE_FUNC, true, framework_sigmoid },
	{ KEY_SCORE_BEFORE_EXPERTS, true, framework_score_after },
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
	{ KEY_MTP, true, mtp_one_source },
	{ KEY_OBJECTIVE, false, sample_mean_expressible },
};

/*
 * The first violated rule, described in buf, with the key it concerns; or
 * KEY__COUNT when the config is valid.  After the world size, the integer
 * ranges of the key table come first: they are checked on parsing already, but a default (layers =
 * pp) or a mesh built by sweep can still break them.
 */
static enum cfg_key
find_violation(const struct config *c, char *buf, size_t size)
{
	const struct key_def	*d;
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
		d = &keys[k];
		if ((d->type != TYPE_INT && d->type != TYPE_INT64) ||
		    !key_active(c, (enum cfg_key)k))
			continue;
		v = key_get(c, (enum cfg_key)k);
		if (v >= d->min && v <= d->max)
			continue;
		if (v < d->min && d->min > 1)
			snprintf(buf, size, "%s (%" PRId64 ") must be at least %"
			    PRId64, key_leaf((enum cfg_key)k), v, d->min);
		else if (v < d->min)
			snprintf(buf, size, "%s (%" PRId64 ") must be %s",
			    key_leaf((enum cfg_key)k), v, d->min > 0 ?
			    "positive" : "non-negative");
		else
			snprintf(buf, size, "%s (%" PRId64 ") must be at most %"
			    PRId64, key_leaf((enum cfg_key)k), v, d->max);
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

/*
 * Where to point at for a constraint on key k: the key itself, or, when it
 * was left to its default, the mesh (whose sizes the defaults clash with),
 * or the document.
 */
static void
blame(const struct loader *ld, enum cfg_key k,
    const struct cfg_override **ovr, struct cfg_mark *m)
{
	const struct config	*c = ld->cfg;

	if (!keyset_has(&c->given, k))
		k = KEY_MESH;
	if (keyset_has(&c->given, k)) {
		*ovr = ld->origin[k];
		*m = cfg_key_mark(c, k);
	} else {
		*ovr = NULL;
		*m = c->doc_mark;
	}
}

/*
 * framework: NAME@VERSION.  The profile's settings fill every key the
 * config does not write itself; what the config writes overrides them.
 */
static int
apply_framework(struct loader *ld)
{
	struct config		*c = ld->cfg;
	const struct fw_profile	*p;
	char			 err[MSG_SIZE], v[160];
	bool			 newer;

	if (!keyset_has(&c->given, KEY_FRAMEWORK) ||
	    strcmp(c->framework, "reference") == 0)
		return 0;
	if ((p = fw_resolve(c->framework, &newer, err, sizeof(err))) == NULL) {
		report(ld, ld->origin[KEY_FRAMEWORK],
		    cfg_key_mark(c, KEY_FRAMEWORK),
		    keys[KEY_FRAMEWORK].path, "%s", err);
		return -1;
	}
	if (newer && !ld->quiet) {
		fw_newest_read(p, c->framework, v, sizeof(v));
		fprintf(stderr, "%s: %s: %s is newer than %s: auditing it "
		    "with the newest profile, %s\n", progname, ld->path,
		    c->framework, v, p->label);
	}
	c->profile = p;
	c->from_profile = cfg_merge_settings(c, &p->settings, true);
	return 0;
}

static int
finish_config(struct loader *ld)
{
	struct config			*c = ld->cfg;
	const struct cfg_override	*ovr;
	struct cfg_mark			 m;
	enum cfg_key			 k;
	char				 msg[MSG_SIZE];

	if (!keyset_has(&c->given, KEY_MESH)) {
		report(ld, NULL, c->doc_mark, NULL,
		    "missing required key \"mesh\"");
		return -1;
	}
	if (apply_framework(ld) == -1)
		return -1;
	apply_defaults(c);
	if ((k = find_violation(c, msg, sizeof(msg))) == KEY__COUNT)
		return 0;
	blame(ld, k, &ovr, &m);
	report(ld, ovr, m, keys[k].path, "%s", msg);
	return -1;
}

/*
 * Documents.
 */

/* One configuration, from the mapping whose start event is at m. */
static int
load_config(struct loader *ld, const yaml_mark_t *m)
{
	struct config	*c;
	size_t		 i;

	/* Grow geometrically: a file may hold thousands of documents. */
	if (ld->list.n == ld->cap) {
		ld->cap = ld->cap == 0 ? 4 : ld->cap * 2;
		ld->list.v = xreallocarray(ld->list.v, ld->cap,
		    sizeof(*ld->list.v));
	}
	c = &ld->list.v[ld->list.n++];
	memset(c, 0, sizeof(*c));
	c->file = xstrdup(ld->path);
	c->doc_index = ld->list.n - 1 > INT_MAX ? INT_MAX :
	    (int)(ld->list.n - 1);
	c->doc_mark = to_mark(m);
	ld->cfg = c;
	memset(ld->origin, 0, sizeof(ld->origin));

	if (load_mapping(ld, ROOT) == -1)
		return -1;
	for (i = 0; i < ld->novrs; i++)
		if (apply_override(ld, i) == -1)
			return -1;
	return finish_config(ld);
}

/* A sequence of configurations, whose start event is at m. */
static int
load_list(struct loader *ld, const yaml_mark_t *m)
{
	yaml_event_t	 ev;
	size_t		 n = 0;
	char		 got[GOT_SIZE];
	int		 rc;

	for (;; n++) {
		if (next_event(ld, &ev) == -1)
			return -1;
		if (ev.type == YAML_SEQUENCE_END_EVENT)
			break;
		if (ev.type == YAML_MAPPING_START_EVENT)
			rc = load_config(ld, &ev.start_mark);
		else {
			describe(got, sizeof(got), &ev);
			error_at(ld, &ev.start_mark, NULL,
			    "expected a configuration mapping, got %s", got);
			rc = -1;
		}
		yaml_event_delete(&ev);
		if (rc == -1)
			return -1;
	}
	yaml_event_delete(&ev);
	if (n == 0) {
		error_at(ld, m, NULL, "empty list of configurations: "
		    "expected mappings with at least \"mesh\"");
		return -1;
	}
	return 0;
}

static int
load_document(struct loader *ld, const yaml_mark_t *docmark)
{
	yaml_event_t	 ev;
	char		 got[GOT_SIZE];
	int		 rc = -1;

	if (next_event(ld, &ev) == -1)
		return -1;
	if (ev.type == YAML_MAPPING_START_EVENT)
		rc = load_config(ld, &ev.start_mark);
	else if (ev.type == YAML_SEQUENCE_START_EVENT) {
		ld->is_list = true;
		rc = load_list(ld, &ev.start_mark);
	} else if (ev.type == YAML_SCALAR_EVENT && is_null_scalar(&ev))
		error_at(ld, docmark, NULL, "empty configuration: "
		    "expected a mapping with at least \"mesh\"");
	else {
		describe(got, sizeof(got), &ev);
		error_at(ld, &ev.start_mark, NULL,
		    "expected a mapping of configuration keys, got %s", got);
	}
	yaml_event_delete(&ev);
	if (rc == -1)
		return -1;
	if (next_event(ld, &ev) == -1)		/* document end */
		return -1;
	yaml_event_delete(&ev);
	return 0;
}

static int
load_stream(struct loader *ld)
{
	yaml_event_t	 ev;
	yaml_mark_t	 docmark;
	size_t		 ndocs = 0;

	if (next_event(ld, &ev) == -1)		/* stream start */
		return -1;
	yaml_event_delete(&ev);
	for (;;) {
		if (next_event(ld, &ev) == -1)
			return -1;
		if (ev.type == YAML_STREAM_END_EVENT)
			break;
		docmark = ev.start_mark;
		yaml_event_delete(&ev);
		ndocs++;
		if (load_document(ld, &docmark) == -1)
			return -1;
	}
	yaml_event_delete(&ev);
	if (ndocs == 0) {
		report(ld, NULL, (struct cfg_mark){ 1, 1 }, NULL,
		    "empty configuration: "
		    "expected a mapping with at least \"mesh\"");
		return -1;
	}
	if (ndocs > 1)
		ld->is_list = true;
	return 0;
}

/*
 * The default name is the file's base name without .yaml or .yml; the
 * configs of a list are told apart by their position ("sweep#1").
 */
char *
cfg_file_name(const char *path)
{
	static const char *const suffixes[] = { ".yaml", ".yml" };
	const char	*base = strrchr(path, '/');
	size_t		 i, n, slen;
	char		*name;

	base = base != NULL ? base + 1 : path;
	if (strcmp(path, "<stdin>") == 0)
		base = "stdin";
	n = strlen(base);
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		slen = strlen(suffixes[i]);
		if (n > slen && strcmp(base + n - slen, suffixes[i]) == 0) {
			n -= slen;
			break;
		}
	}
	name = xmalloc(n + 1);
	memcpy(name, base, n);
	name[n] = '\0';
	return name;
}

static void
default_names(struct loader *ld)
{
	char		*base = cfg_file_name(ld->path);
	size_t		 i;
	struct config	*c;

	for (i = 0; i < ld->list.n; i++) {
		c = &ld->list.v[i];
		if (keyset_has(&c->given, KEY_NAME))
			continue;
		if (ld->is_list)
			xasprintf(&c->name, "%s#%d", base, c->doc_index);
		else
			c->name = xstrdup(base);
	}
	free(base);
}

static int
read_file(struct loader *ld, unsigned char **text, size_t *len)
{
	FILE		*f;
	unsigned char	*buf = NULL;
	size_t		 cap = 0, n = 0, got;
	int		 saved;

	if (ld->from_stdin)
		f = stdin;
	else if ((f = fopen(ld->open_path, "rb")) == NULL) {
		report(ld, NULL, (struct cfg_mark){ 0, 0 }, NULL,
		    "cannot open: %s", strerror(errno));
		return -1;
	}
	for (;;) {
		if (n == cap) {
			cap = cap == 0 ? 4096 : cap * 2;
			buf = xreallocarray(buf, cap, 1);
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
		/* /dev/zero or a huge file is no configuration. */
		if (n > CFG_MAX_FILE_BYTES) {
			if (f != stdin)
				fclose(f);
			free(buf);
			report(ld, NULL, (struct cfg_mark){ 0, 0 }, NULL,
			    "larger than %d MiB: not a configuration",
			    CFG_MAX_FILE_BYTES >> 20);
			return -1;
		}
	}
	if (ferror(f)) {
		saved = errno;
		if (f != stdin)
			fclose(f);
		free(buf);
		report(ld, NULL, (struct cfg_mark){ 0, 0 }, NULL,
		    "cannot read: %s", strerror(saved));
		return -1;
	}
	if (f != stdin)
		fclose(f);
	*text = buf;
	*len = n;
	return 0;
}

/* The configurations of ld->text, ld->len bytes, appended to out. */
static int
load_text(struct loader *ld, struct config_list *out)
{
	yaml_parser_t	 parser;
	uint64_t	 digest;
	size_t		 i;
	int		 rc;

	if (!yaml_parser_initialize(&parser))
		fatal("yaml_parser_initialize");
	yaml_parser_set_input_string(&parser, ld->text, ld->len);
	ld->parser = &parser;
	rc = load_stream(ld);
	yaml_parser_delete(&parser);
	if (rc == 0) {
		/*
		 * Whether the file was a list is known only once it has been
		 * read to the end (a second document may follow the first).
		 */
		digest = hash_bytes(ld->text, ld->len);
		for (i = 0; i < ld->list.n; i++) {
			ld->list.v[i].in_list = ld->is_list;
			ld->list.v[i].source_digest = digest;
		}
		default_names(ld);
		if (out->n == 0) {
			/* No copy: a list of 100,000 configs is 50 MB. */
			free(out->v);
			out->v = ld->list.v;
			out->n = ld->list.n;
		} else {
			out->v = xreallocarray(out->v, out->n + ld->list.n,
			    sizeof(*out->v));
			memcpy(out->v + out->n, ld->list.v,
			    ld->list.n * sizeof(*ld->list.v));
			out->n += ld->list.n;
			free(ld->list.v);
		}
		ld->list.v = NULL;
		ld->list.n = 0;
	}
	config_list_free(&ld->list);
	return rc;
}

int
cfg_load(const char *path, const struct cfg_override *ovrs, size_t novrs,
    struct config_list *out)
{
	return cfg_load_as(path, NULL, ovrs, novrs, out);
}

int
cfg_load_as(const char *path, const char *copy,
    const struct cfg_override *ovrs, size_t novrs, struct config_list *out)
{
	struct loader	 ld;
	unsigned char	*text = NULL;
	size_t		 i;
	int		 rc = -1;

	memset(&ld, 0, sizeof(ld));
	ld.error = &out->error;
	/*
	 * "-" is the standard input, named in messages as a compiler does,
	 * and so is the copy of it that run gives its MPI job (jobdir.h).
	 */
	ld.from_stdin = copy == NULL && strcmp(path, "-") == 0;
	ld.open_path = copy != NULL ? copy : path;
	ld.path = strcmp(path, "-") == 0 ? "<stdin>" : path;
	ld.ovrs = ovrs;
	ld.novrs = novrs;
	ld.ovr_keys = xreallocarray(NULL, novrs, sizeof(*ld.ovr_keys));
	for (i = 0; i < novrs; i++)
		if (resolve_override(ovrs[i].key, &ld.ovr_keys[i],
		    &out->error) == -1)
			goto out;
	if (read_file(&ld, &text, &ld.len) == -1)
		goto out;
	ld.text = text;
	rc = load_text(&ld, out);
out:
	config_list_free(&ld.list);
	free(ld.ovr_keys);
	free(text);
	return rc;
}

int
cfg_load_quietly(const char *name, const char *text, size_t len,
    struct config_list *out)
{
	struct loader	 ld;

	memset(&ld, 0, sizeof(ld));
	ld.error = &out->error;
	ld.error_key = &out->error_key;
	ld.quiet = true;
	ld.path = ld.open_path = name;
	ld.text = (const unsigned char *)text;
	ld.len = len;
	return load_text(&ld, out);
}

const char *
cfg_check_constraints(const struct config *c, char *buf, size_t len)
{
	if (find_violation(c, buf, len) == KEY__COUNT)
		return NULL;
	return buf;
}

void
cfg_error(const struct config *c, enum cfg_key k, char **keep,
    const char *fmt, ...)
{
	struct cfg_mark	 m = cfg_key_mark(c, k);
	char		 msg[MSG_SIZE], *line;
	va_list		 ap;

	if (m.line == 0)
		m = c->doc_mark;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m.line > 0)
		xasprintf(&line, "%s: %s:%d:%d: %s: %s", progname, c->file,
		    m.line, m.col, keys[k].path, msg);
	else
		xasprintf(&line, "%s: %s: %s: %s", progname, c->file,
		    keys[k].path, msg);
	emit(keep, line, false);
	free(line);
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
}

/*
 * Profiles.
 */

const char *
cfg_key_path(enum cfg_key k)
{
	return keys[k].path;
}

bool
cfg_key_is_setting(enum cfg_key k)
{
	return keys[k].type != TYPE_MAP && keys[k].type != TYPE_STRING;
}

void
cfg_key_value(const struct config *c, enum cfg_key k, char *buf, size_t len)
{
	int64_t	 v;

	if (keys[k].type == TYPE_STRING) {
		const char *s = *(char *const *)((const char *)c +
		    keys[k].offset);

		snprintf(buf, len, "%s", s != NULL ? s : "");
		return;
	}
	v = key_get(c, k);
	switch (keys[k].type) {
	case TYPE_BOOL:
		snprintf(buf, len, "%s", v ? "true" : "false");
		break;
	case TYPE_ENUM:
		snprintf(buf, len, "%s", spelling(keys[k].words, (int)v));
		break;
	default:
		snprintf(buf, len, "%" PRId64, v);
		break;
	}
}

enum cfg_value_type
cfg_key_value_type(enum cfg_key k)
{
	switch (keys[k].type) {
	case TYPE_INT:
	case TYPE_INT64:
		return CFG_VALUE_NUMBER;
	case TYPE_BOOL:
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
	switch (keys[k].type) {
	case TYPE_ENUM:
		return keys[k].words;
	case TYPE_BOOL:
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
		snprintf(buf, len, "%" PRId64, keys[k].def);
	else
		snprintf(buf, len, "%s", spelling(words, (int)keys[k].def));
}

int
cfg_key_set(struct config *c, enum cfg_key k, const char *value)
{
	const char *const *words = cfg_key_words(k);
	int	 i;

	if (words == NULL || !key_active(c, k))
		return -1;
	for (i = 0; words[i] != NULL; i++)
		if (strcmp(words[i], value) == 0)
			break;
	if (words[i] == NULL)
		return -1;
	key_set(c, k, i);
	/* As a --set of it: written, at no position, over any profile. */
	keyset_add(&c->given, k);
	c->from_profile.w[k / 64] &= ~((uint64_t)1 << (k % 64));
	cfg_set_key_mark(c, k, (struct cfg_mark){ 0, 0 });
	return 0;
}

bool
cfg_key_is_active(const struct config *c, enum cfg_key k)
{
	return key_active(c, k);
}

void
cfg_key_origin(const struct config *c, enum cfg_key k, char *buf, size_t len)
{
	struct cfg_mark	 m = cfg_key_mark(c, k);

	if (keyset_has(&c->given, k)) {
		if (m.line > 0)
			snprintf(buf, len, "%s:%d:%d", c->file, m.line, m.col);
		else
			snprintf(buf, len, "--set");
	} else if (keyset_has(&c->from_profile, k))
		snprintf(buf, len, "%s (profile %s): read from %s",
		    c->framework, c->profile->label, c->profile->source[k]);
	else
		snprintf(buf, len, "the reference default");
}

struct keyset
cfg_profile_overridden(const struct config *c)
{
	struct keyset	 over = { { 0 } };
	int		 k;

	if (c->profile == NULL)
		return over;
	/* A key written with the profile's own value overrides nothing. */
	for (k = 0; k < KEY__COUNT; k++)
		if (keyset_has(&c->given, k) &&
		    keyset_has(&c->profile->settings.given, k) &&
		    cfg_key_is_setting(k) && key_get(c, k) !=
		    key_get(&c->profile->settings, k))
			keyset_add(&over, k);
	return over;
}

/* The sections a profile may not set: they describe the user's job. */
bool
cfg_key_is_job(enum cfg_key k)
{
	for (; k != ROOT; k = keys[k].parent)
		if (k == KEY_MESH || k == KEY_NAME || k == KEY_FRAMEWORK ||
		    k == KEY_MOE)
			return true;
	return false;
}

int
cfg_load_settings(struct yaml_parser_s *parser, const char *path,
    const unsigned char *text, size_t len, struct config *c)
{
	struct loader	 ld;
	int		 k;

	memset(&ld, 0, sizeof(ld));
	ld.path = path;
	ld.open_path = path;
	/*
	 * The profile's text, for the place of an encoding error: without
	 * it the error was reported at 1:1, after arithmetic on a null
	 * pointer that UBSan stopped at (issue 26).
	 */
	ld.text = text;
	ld.len = len;
	ld.parser = parser;
	ld.cfg = c;
	if (load_mapping(&ld, ROOT) == -1)
		return -1;
	for (k = 0; k < KEY__COUNT; k++) {
		if (!keyset_has(&c->given, k) || !cfg_key_is_job(k))
			continue;
		report(&ld, NULL, cfg_key_mark(c, k), keys[k].path, "a profile "
		    "sets how a framework synchronizes, not the job: "
		    "%s belongs in the configuration", keys[k].path);
		return -1;
	}
	return 0;
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
		key_set(dst, (enum cfg_key)k, key_get(src, (enum cfg_key)k));
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

static const char *
spelling(const char *const *words, int v)
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
	return spelling(embedding_words, (int)v);
}

const char *
cfg_router_sync_name(enum router_sync v)
{
	return spelling(router_words, (int)v);
}

const char *
cfg_expert_input_sync_name(enum expert_input_sync v)
{
	return spelling(expert_input_words, (int)v);
}


const char *
cfg_sp_param_sync_name(enum sp_param_sync v)
{
	return spelling(sp_param_words, (int)v);
}

const char *
cfg_expert_divisor_name(enum expert_divisor v)
{
	return spelling(divisor_words, (int)v);
}

const char *
cfg_score_func_name(enum score_func v)
{
	return spelling(score_words, (int)v);
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
