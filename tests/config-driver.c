/*
 * config-driver: load one configuration file the way gradaudit does and
 * print every resolved field of every config in it, one "key=value" line
 * each, so that tests/config-bad.test can compare the loader's work with
 * golden dumps (testdata/good/NAME.dump) and its diagnostics with
 * testdata/bad/NAME.err.
 *
 * usage: config-driver file [--set key=value ...]
 *
 * Each config is dumped from a cfg_copy of it, so the golden files also
 * check the deep copy, and each must pass cfg_check_constraints.  The key
 * names below are spelt out here on purpose rather than taken from the
 * loader's table: the dump is an independent statement of the schema.
 * Exits 0 when the file loads, 2 when cfg_load reports an error or the
 * usage is wrong, 3 when a loaded config fails its own checks.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitcode.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/constraints.h"
#include "config/framework.h"
#include "config/load.h"

static const char *const key_names[KEY__COUNT] = {
	[KEY_NAME] = "name",
	[KEY_MESH] = "mesh",
	[KEY_DP] = "mesh.dp",
	[KEY_PP] = "mesh.pp",
	[KEY_TP] = "mesh.tp",
	[KEY_EP] = "mesh.ep",
	[KEY_ETP] = "mesh.etp",
	[KEY_MODEL] = "model",
	[KEY_VOCAB] = "model.vocab",
	[KEY_HIDDEN] = "model.hidden",
	[KEY_FFN] = "model.ffn",
	[KEY_LAYERS] = "model.layers",
	[KEY_SEQ] = "model.seq",
	[KEY_MICRO_BATCH] = "model.micro_batch",
	[KEY_TIE_EMBEDDINGS] = "model.tie_embeddings",
	[KEY_MOE] = "model.moe",
	[KEY_EXPERTS] = "model.moe.experts",
	[KEY_TOP_K] = "model.moe.top_k",
	[KEY_EXPERT_FFN] = "model.moe.expert_ffn",
	[KEY_SCORE_BEFORE_EXPERTS] = "model.moe.score_before_experts",
	[KEY_SHARED_EXPERTS] = "model.moe.shared_experts",
	[KEY_SCORE_FUNC] = "model.moe.score_func",
	[KEY_EVERY] = "model.moe.every",
	[KEY_TRAINING] = "training",
	[KEY_DISTRIBUTED_OPTIMIZER] = "training.distributed_optimizer",
	[KEY_SEQUENCE_PARALLEL] = "training.sequence_parallel",
	[KEY_AVERAGE_IN_COLLECTIVE] = "training.average_in_collective",
	[KEY_BUCKET_ELEMS] = "training.bucket_elems",
	[KEY_SYNC] = "sync",
	[KEY_EMBEDDING_GRAD] = "sync.embedding_grad",
	[KEY_ROUTER_GRAD] = "sync.router_grad",
	[KEY_EXPERT_INPUT_GRAD] = "sync.expert_input_grad",
	[KEY_SP_PARAM_GRAD] = "sync.sp_param_grad",
	[KEY_EXPERT_GRAD_DIVISOR] = "sync.expert_grad_divisor",
	[KEY_FRAMEWORK] = "framework",
	[KEY_OVERLAP_GRAD_REDUCE] = "training.overlap_grad_reduce",
	[KEY_LAYOUT] = "layout",
	[KEY_BUCKET_STAGES] = "layout.bucket_stages",
	[KEY_BUCKET_NEEDS_OVERLAP] = "layout.bucket_needs_overlap",
	[KEY_BUCKET_MIN_PARAMS] = "layout.bucket_min_params",
	[KEY_BUCKET_PADDING] = "layout.bucket_padding",
	[KEY_PARAM_ALIGNMENT] = "layout.param_alignment",
	[KEY_EXPERT_BUFFER] = "layout.expert_buffer",
	[KEY_TIED_EMBEDDING_BUCKET] = "layout.tied_embedding_bucket",
	[KEY_TIED_BUCKET_START] = "layout.tied_bucket_start",
	[KEY_TIED_START_ASSERTED] = "layout.tied_start_asserted",
	[KEY_BUCKET_ELEMS_PER_DP] = "layout.bucket_elems_per_dp",
	[KEY_AVG_SUPPORTED] = "limits.avg_supported",
	[KEY_AVG_NEEDS_ETP_EQ_TP] = "limits.avg_needs_etp_eq_tp",
	[KEY_QK_NORM] = "model.qk_norm",
	[KEY_HEAD_DIM] = "model.head_dim",
	[KEY_QK_NORM_GRAD] = "sync.qk_norm_grad",
	[KEY_SHARED_EXPERT_GATE] = "model.moe.shared_expert_gate",
	[KEY_SHARED_EXPERTS_SUPPORTED] = "limits.shared_experts_supported",
	[KEY_EP_TP_NEEDS_SP] = "limits.ep_tp_needs_sp",
	[KEY_EP_DISTOPT_SUPPORTED] = "limits.ep_distopt_supported",
	[KEY_MAX_TOP_K] = "limits.max_top_k",
	[KEY_MOE_EVERY_SUPPORTED] = "limits.moe_every_supported",
	[KEY_FIRST_STAGE_LAYERS] = "model.first_stage_layers",
	[KEY_LAST_STAGE_LAYERS] = "model.last_stage_layers",
	[KEY_PATTERN] = "model.moe.pattern",
	[KEY_UNEVEN_PP_SUPPORTED] = "limits.uneven_pp_supported",
	[KEY_CP] = "mesh.cp",
	[KEY_MICRO_BATCHES] = "training.micro_batches",
	[KEY_LOSS] = "loss",
	[KEY_VALID_TOKENS] = "loss.valid_tokens",
	[KEY_NORMALIZE_BY] = "loss.normalize_by",
	[KEY_SCALE] = "loss.scale",
	[KEY_DP_DIVISOR] = "sync.dp_divisor",
	[KEY_DP_GROUP] = "sync.dp_group",
	[KEY_GRAD_NORM] = "grad_norm",
	[KEY_TP_DUPLICATES] = "grad_norm.tp_duplicates",
	[KEY_TIED_COPIES] = "grad_norm.tied_copies",
	[KEY_EXPERT_FILTER] = "grad_norm.expert_filter",
	[KEY_EXPERT_NORM] = "grad_norm.expert_norm",
	[KEY_SHARD_GROUP] = "grad_norm.shard_group",
	[KEY_PP_REDUCE] = "grad_norm.pp_reduce",
	[KEY_CLIP_RANKS] = "grad_norm.clip_ranks",
	[KEY_VOCAB_DIVISIBLE_BY] = "model.vocab_divisible_by",
	[KEY_VPP] = "mesh.vpp",
	[KEY_BUCKET_CHUNKS] = "layout.bucket_chunks",
	[KEY_VPP_MIN_PP] = "limits.vpp_min_pp",
	[KEY_UNEVEN_VPP_SUPPORTED] = "limits.uneven_vpp_supported",
	[KEY_AVG_CP_SUPPORTED] = "limits.avg_cp_supported",
	[KEY_DP_REPLICATE] = "mesh.dp_replicate",
	[KEY_DP_ENGINE] = "layout.dp_engine",
	[KEY_FSDP_ONE_MEMBER] = "sync.fsdp_one_member",
	[KEY_FSDP_FLATTEN] = "layout.fsdp_flatten",
	[KEY_EXPERT_DIM_MESH] = "layout.expert_dim_mesh",
	[KEY_TIED_FSDP_GROUPS] = "layout.tied_fsdp_groups",
	[KEY_SHARED_PARAM_REFUSED] = "limits.shared_param_refused",
	[KEY_PLAN] = "plan",
	[KEY_MOE_INPUT_GRAD] = "sync.moe_input_grad",
	[KEY_EP_SUPPORTED] = "limits.ep_supported",
	[KEY_ETP_ONE_OR_TP] = "limits.etp_one_or_tp",
	[KEY_AUX_LOSS_COEFF] = "model.moe.aux_loss_coeff",
	[KEY_Z_LOSS_COEFF] = "model.moe.z_loss_coeff",
	[KEY_AUX_SCALE] = "loss.aux_scale",
	[KEY_AUX_TYPE] = "loss.aux_type",
	[KEY_AUX_OBJECTIVE] = "loss.aux_objective",
	[KEY_SHARED_EXPERT_FFN] = "model.moe.shared_expert_ffn",
	[KEY_EXPERT_FFN_SUPPORTED] = "limits.expert_ffn_supported",
	[KEY_SIGMOID_SUPPORTED] = "limits.sigmoid_supported",
	[KEY_SCORE_AFTER_EXPERTS_SUPPORTED] = "limits.score_after_experts_supported",
	[KEY_ROUTER_INPUT_GRAD] = "sync.router_input_grad",
	[KEY_MTP] = "model.mtp",
	[KEY_MTP_LOSS_SCALING_FACTOR] = "model.mtp_loss_scaling_factor",
	[KEY_MTP_SCALE] = "loss.mtp_scale",
	[KEY_MTP_SUPPORTED] = "limits.mtp_supported",
	[KEY_MTP_CP_SUPPORTED] = "limits.mtp_cp_supported",
	[KEY_MTP_PP_SUPPORTED] = "limits.mtp_pp_supported",
	[KEY_OBJECTIVE] = "loss.objective",
	[KEY_MTP_OBJECTIVE] = "loss.mtp_objective",
	[KEY_ETP_ONE_WITH_EP] = "limits.etp_one_with_ep",
	[KEY_SCORE_BEFORE_EXPERTS_SUPPORTED] =
	    "limits.score_before_experts_supported",
	[KEY_KV_HEADS] = "model.kv_heads",
	[KEY_KV_GRAD] = "sync.kv_grad",
	[KEY_ATTENTION_SINK] = "model.attention_sink",
	[KEY_SINK_FILTER] = "grad_norm.sink_filter",
	[KEY_OUT_NORM] = "model.out_norm",
	[KEY_OUT_NORM_GRAD] = "sync.out_norm_grad",
	[KEY_ATTENTION_SINK_SUPPORTED] = "limits.attention_sink_supported",
	[KEY_EP_ON] = "model.moe.ep_on",
	[KEY_OUT_NORM_SUPPORTED] = "limits.out_norm_supported",
	[KEY_TP_MASK_SUPPORTED] = "limits.tp_mask_supported",
	[KEY_TP_REPLICATED_SUPPORTED] = "limits.tp_replicated_supported",
	[KEY_GLOBAL_AUX_SUPPORTED] = "limits.global_aux_supported",
	[KEY_GTP] = "mesh.gtp",
	[KEY_EGTP] = "mesh.egtp",
	[KEY_GTP_SHARDED] = "model.gtp_sharded",
	[KEY_GTP_SUPPORTED] = "limits.gtp_supported",
	[KEY_EXPERT_GTP_DIVISOR] = "sync.expert_gtp_divisor",
	[KEY_DUPLICATED_MIXER] = "model.duplicated_mixer",
	[KEY_FSDP_DIVIDE_FACTOR] = "sync.fsdp_divide_factor",
	[KEY_EXPERT_TP_DIVISOR] = "sync.expert_tp_divisor",
	[KEY_PER_TOKEN_AVG] = "sync.per_token_avg",
	[KEY_AVG_PER_TOKEN_SUPPORTED] = "limits.avg_per_token_supported",
	[KEY_REPLICATE_ONLY] = "sync.replicate_only",
	[KEY_DDP_NEEDS_ONE_DIM] = "limits.ddp_needs_one_dim",
	[KEY_PP_NORMALIZE_BY] = "loss.pp_normalize_by",
	[KEY_EP_BORROWS_ALL_CP_TP] = "limits.ep_borrows_all_cp_tp",
	[KEY_SEQ_DIVISOR] = "limits.seq_divisor",
};

static void
usage(void)
{
	fprintf(stderr, "usage: config-driver file [--set key=value ...]\n");
	exit(EXIT_USAGE);
}

static const char *
yes_no(bool b)
{
	return b ? "true" : "false";
}

static void
dump_moe_layers(const struct config *c)
{
	int	 i;
	bool	 any = false;

	printf("moe_layers=");
	for (i = 0; i < c->model.layers; i++) {
		if (!cfg_layer_is_moe(c, i))
			continue;
		printf("%s%d", any ? "," : "", i);
		any = true;
	}
	printf("%s\n", any ? "" : "none");
}

/* With a virtual pipeline, every chunk's layers: "s0c0=0-1 s0c1=4-5 ...". */
static void
dump_chunk_layers(const struct config *c)
{
	int	 s, k, first, count;

	if (c->mesh.vpp == 1)
		return;
	printf("chunk_layers=");
	for (s = 0; s < c->mesh.pp; s++)
		for (k = 0; k < c->mesh.vpp; k++) {
			cfg_chunk_layers(c, s, k, &first, &count);
			printf("%ss%dc%d=%d-%d", s + k > 0 ? " " : "", s, k,
			    first, first + count - 1);
		}
	printf("\n");
}

static void
dump(const struct config *c)
{
	struct cfg_mark	 m;
	char		 value[512];
	int		 k;

	printf("file=%s\n", c->file);
	printf("name=%s\n", c->name);
	printf("doc_index=%d\n", c->doc_index);
	printf("doc_mark=%d:%d\n", c->doc_mark.line, c->doc_mark.col);
	printf("in_list=%s\n", yes_no(c->in_list));
	printf("mesh.dp=%d\n", c->mesh.dp);
	printf("mesh.pp=%d\n", c->mesh.pp);
	printf("mesh.tp=%d\n", c->mesh.tp);
	printf("mesh.ep=%d\n", c->mesh.ep);
	printf("mesh.etp=%d\n", c->mesh.etp);
	printf("model.vocab=%d\n", c->model.vocab);
	printf("model.hidden=%d\n", c->model.hidden);
	printf("model.ffn=%d\n", c->model.ffn);
	printf("model.layers=%d\n", c->model.layers);
	printf("model.seq=%d\n", c->model.seq);
	printf("model.micro_batch=%d\n", c->model.micro_batch);
	printf("model.tie_embeddings=%s\n", yes_no(c->model.tie_embeddings));
	printf("model.moe=%s\n", c->model.has_moe ? "present" : "absent");
	if (c->model.has_moe) {
		printf("model.moe.experts=%d\n", c->model.moe.experts);
		printf("model.moe.top_k=%d\n", c->model.moe.top_k);
		printf("model.moe.expert_ffn=%d\n", c->model.moe.expert_ffn);
		printf("model.moe.score_before_experts=%s\n",
		    yes_no(c->model.moe.score_before_experts));
		printf("model.moe.shared_experts=%d\n",
		    c->model.moe.shared_experts);
		printf("model.moe.score_func=%s\n",
		    cfg_score_func_name(c->model.moe.score_func));
		printf("model.moe.every=%d\n", c->model.moe.every);
	}
	printf("training.distributed_optimizer=%s\n",
	    yes_no(c->training.distributed_optimizer));
	printf("training.sequence_parallel=%s\n",
	    yes_no(c->training.sequence_parallel));
	printf("training.average_in_collective=%s\n",
	    yes_no(c->training.average_in_collective));
	printf("training.bucket_elems=%lld\n",
	    (long long)c->training.bucket_elems);
	printf("training.overlap_grad_reduce=%s\n",
	    yes_no(c->training.overlap_grad_reduce));
	printf("sync.embedding_grad=%s\n",
	    cfg_embedding_sync_name(c->sync.embedding_grad));
	printf("sync.router_grad=%s\n",
	    cfg_router_sync_name(c->sync.router_grad));
	printf("sync.expert_input_grad=%s\n",
	    cfg_expert_input_sync_name(c->sync.expert_input_grad));
	printf("sync.sp_param_grad=%s\n",
	    cfg_sp_param_sync_name(c->sync.sp_param_grad));
	printf("sync.expert_grad_divisor=%s\n",
	    cfg_expert_divisor_name(c->sync.expert_grad_divisor));
	printf("framework=%s\n", c->framework != NULL ? c->framework :
	    "(none)");
	for (k = KEY_BUCKET_STAGES; k < KEY__COUNT; k++) {
		cfg_key_value(c, k, value, sizeof(value));
		printf("%s=%s\n", key_names[k], value);
	}
	dump_moe_layers(c);
	printf("padded_vocab=%lld\n", (long long)cfg_padded_vocab(c));
	dump_chunk_layers(c);
	/* Written keys: their position, or "set" for a --set. */
	for (k = 0; k < KEY__COUNT; k++) {
		m = cfg_key_mark(c, k);
		if (!keyset_has(&c->given, k)) {
			if (m.line != 0)
				printf("error=%s has a mark but is not given\n",
				    key_names[k]);
			continue;
		}
		if (m.line == 0)
			printf("given.%s=set\n", key_names[k]);
		else
			printf("given.%s=%d:%d\n", key_names[k], m.line,
			    m.col);
	}
}

int
main(int argc, char *argv[])
{
	struct config_list	 list;
	struct fw_registry	*frameworks;
	struct cfg_override	*ovr;
	struct config		 copy;
	const char		*why;
	char			 whybuf[CFG_WHY_SIZE];
	char			*eq;
	size_t			 novr = 0, i;
	int			 a, status = EXIT_OK;

	if (argc < 2 || argv[1][0] == '-')
		usage();
	ovr = xreallocarray(NULL, (size_t)argc, sizeof(*ovr));
	for (a = 2; a < argc; a++) {
		if (strcmp(argv[a], "--set") != 0 || a + 1 >= argc ||
		    (eq = strchr(argv[a + 1], '=')) == NULL)
			usage();
		*eq = '\0';
		ovr[novr].key = argv[++a];
		ovr[novr++].value = eq + 1;
	}
	memset(&list, 0, sizeof list);
	frameworks = fw_registry_open();
	if (cfg_load(frameworks, argv[1], ovr, novr, &list) == -1) {
		/* The message it kept (config_list.error). */
		config_list_free(&list);
		fw_registry_close(frameworks);
		free(ovr);
		return EXIT_USAGE;
	}
	for (i = 0; i < list.n; i++) {
		cfg_copy(&copy, &list.v[i]);
		printf("config=%zu\n", i);
		dump(&copy);
		if ((why = cfg_check_constraints(&copy, whybuf,
		    sizeof whybuf)) != NULL) {
			fprintf(stderr, "config-driver: loaded config %zu "
			    "fails its constraints: %s\n", i, why);
			status = EXIT_RUNTIME;
		}
		cfg_free(&copy);
	}
	config_list_free(&list);
	fw_registry_close(frameworks);
	free(ovr);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "config-driver: error writing stdout\n");
		return EXIT_RUNTIME;
	}
	return status;
}
