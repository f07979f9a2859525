/*
 * torchtitan's model flavours (torchtitan-flavors.h), each entry read from
 * the flavour table of pytorch/torchtitan at the tags it names.  These are
 * data, and facts: the values are torchtitan's, computed where torchtitan
 * computes them (llama3's FeedForward width) as the comment shows.
 *
 * What a gradient synchronization audit needs of a flavour is its sizes,
 * which of its parameters exist (qk-norm, tied output, experts, shared
 * experts) and how its scores reach the experts; head counts, RoPE and
 * attention kernels change no reduction and are not kept.
 *
 * Tags read: v0.1.0 (torchtitan/models/llama3/__init__.py; DeepSeek-V3
 * and Qwen3 were not models of torchtitan/models yet), v0.2.0, v0.2.1 and
 * v0.2.2 (torchtitan/models/{llama3,deepseek_v3,qwen3}/__init__.py).
 * Between v0.2.0 and v0.2.2 those tables changed only in attention
 * options (use_flex_attn became attn_type) and in the names of the
 * expert-group arguments (n_expert_groups became MoEArgs's
 * num_expert_groups): no size below changed, nor in llama4's table and
 * model (torchtitan/models/llama4/__init__.py, model/model.py).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config/framework.h"
#include "import/torchtitan-flavors.h"

/*
 * llama3's FeedForward (model/model.py): hidden = 4 * dim, then
 * int(2 * hidden / 3), then int(ffn_dim_multiplier * hidden), rounded up
 * to a multiple of multiple_of.  vocab_size is TransformerModelArgs's
 * default, 128256 (model/args.py); the output is not tied.
 *   8B:   dim 4096, x1.3, multiple 1024: 10922 -> 14198 -> 14336
 *   70B:  dim 8192, x1.3, multiple 4096: 21845 -> 28398 -> 28672
 *   405B: dim 16384, x1.2, multiple 4096: 43690 -> 52428 -> 53248
 */
#define LLAMA3	"torchtitan/models/llama3/__init__.py llama3_args " \
		"(llama3_configs at v0.1.0), v0.1.0 to v0.2.2"

/*
 * DeepSeek-V3 (deepseek_v3/__init__.py deepseekv3_args): inter_dim is the
 * dense layers' width (the first n_dense_layers), moe_inter_dim each
 * expert's, and the shared experts are one FeedForward of moe_inter_dim *
 * num_shared_experts (models/moe/moe.py MoE.__init__).  Multi-latent
 * attention; scores after the experts (score_before_experts=False).
 */
#define DSV3	"torchtitan/models/deepseek_v3/__init__.py deepseekv3_args, " \
		"v0.2.0 to v0.2.2"

/*
 * Qwen3 (qwen3/__init__.py qwen3_args): hidden_dim is the dense width,
 * head_dim 128 with qk_norm, enable_weight_tying for 0.6B, 1.7B and 4B.
 * The MoE flavours have no shared experts and route softmax scores, after
 * the experts, in every layer (moe_enabled).
 */
#define QWEN3	"torchtitan/models/qwen3/__init__.py qwen3_args, " \
		"v0.2.0 to v0.2.2"

/*
 * Llama 4 (llama4/__init__.py llama4_args, model/model.py
 * TransformerBlock): vocab_size 202048 (model/args.py), MoEArgs's
 * defaults (one routed expert a token, one shared expert, sigmoid scores
 * applied before the experts), experts in the layers where (layer_id + 1)
 * % interleave_moe_layer_step is 0: every layer of 17bx16e (step 1), every
 * other of 17bx128e (args.py's default, 2).  Widths, dim 5120, x1.2,
 * multiple_of 2048: a dense layer's FeedForward 20480 -> 13653 -> 16383 ->
 * 16384; an expert's, auto_scale_hidden_dim over top_k + num_shared 2:
 * 16383 / 2 = 8191, rounded up to 8192, and the shared expert the same
 * (moe.py FeedForward(dim, hidden_dim * num_shared_experts)).
 */
#define LLAMA4	"torchtitan/models/llama4/__init__.py llama4_args and " \
		"model/model.py TransformerBlock, v0.2.0 to v0.2.2"

/*
 * The debug models of the train configs' debug_model.toml, from v0.2.0:
 * v0.1.0's llama3 debugmodel takes its vocab_size from the tokenizer.
 * llama3's FeedForward of dim 256, multiple_of 256: 1024 -> 682 -> 768.
 */
#define DEBUG	"the \"debugmodel\" entries of torchtitan/models/" \
		"{llama3,deepseek_v3,qwen3}/__init__.py, v0.2.0 to v0.2.2"

/*
 * main: the model registries that replaced the flavour tables (9810191bb,
 * PR #2386) build the same sizes in other code: llama3's _8b, _70b and
 * _405b in torchtitan/models/llama3/__init__.py (compute_ffn_hidden_dim,
 * torchtitan/models/common/feed_forward.py, the same rounding as above),
 * deepseek_v3's _16b and _671b and qwen3's flavours in their
 * __init__.py, read at de329200b and ecae62f15, and again at b5bcd76c6:
 * 73aed7f6c renames their max_seq_len max_context_length and f59c215e8
 * adds deepseek_v3's num_mtp_layers (0 in these flavours), no size
 * changes.  score_before_experts is gone from main by cd8950ba7 (PR
 * #3663, scores always after the experts), as these flavours already
 * had it.
 */
#define MAIN_LLAMA3	"torchtitan/models/llama3/__init__.py _8b, _70b, " \
			"_405b at de329200b, ecae62f15 and b5bcd76c6"
#define MAIN_DSV3	"torchtitan/models/deepseek_v3/__init__.py _16b, " \
			"_671b at de329200b, ecae62f15 and b5bcd76c6"
#define MAIN_QWEN3	"torchtitan/models/qwen3/__init__.py at de329200b, " \
			"ecae62f15 and b5bcd76c6"

static const struct tt_flavor flavors[] = {
	{ "llama3", "debugmodel", "0.2.0", "0.2.2", DEBUG,
	  2048, 256, 768, 6, 16, false, false, false,
	  0, 0, 0, 0, false, false, 0, 0, NULL },
	{ "deepseek_v3", "debugmodel", "0.2.0", "0.2.2", DEBUG,
	  2048, 256, 1024, 6, 128, false, false, true,
	  8, 3, 256, 2 * 256, false, false, 1, 0, NULL },
	{ "qwen3", "debugmodel", "0.2.0", "0.2.2", DEBUG,
	  2048, 256, 3072, 8, 128, true, true, false,
	  0, 0, 0, 0, false, false, 0, 0, NULL },
	{ "llama3", "8B", "0.1.0", "0.2.2", LLAMA3,
	  128256, 4096, 14336, 32, 128, false, false, false,
	  0, 0, 0, 0, false, false, 0, 0,
	  MAIN_LLAMA3 },
	{ "llama3", "70B", "0.1.0", "0.2.2", LLAMA3,
	  128256, 8192, 28672, 80, 128, false, false, false,
	  0, 0, 0, 0, false, false, 0, 0,
	  MAIN_LLAMA3 },
	{ "llama3", "405B", "0.1.0", "0.2.2", LLAMA3,
	  128256, 16384, 53248, 126, 128, false, false, false,
	  0, 0, 0, 0, false, false, 0, 0,
	  MAIN_LLAMA3 },
	{ "deepseek_v3", "16B", "0.2.0", "0.2.2", DSV3,
	  102400, 2048, 10944, 27, 128, false, false, true,
	  64, 6, 1408, 2 * 1408, false, false, 1, 0,
	  MAIN_DSV3 },
	{ "deepseek_v3", "236B", "0.2.0", "0.2.2", DSV3,
	  102400, 5120, 12288, 60, 128, false, false, true,
	  160, 6, 1536, 2 * 1536, false, false, 1, 0, NULL },
	{ "deepseek_v3", "671B", "0.2.0", "0.2.2", DSV3,
	  129280, 7168, 18432, 61, 128, false, false, true,
	  256, 8, 2048, 1 * 2048, true, false, 3, 0,
	  MAIN_DSV3 },
	{ "llama4", "17bx16e", "0.2.0", "0.2.2", LLAMA4,
	  202048, 5120, 16384, 48, 128, false, false, false,
	  16, 1, 8192, 8192, true, true, 0, 1, NULL },
	{ "llama4", "17bx128e", "0.2.0", "0.2.2", LLAMA4,
	  202048, 5120, 16384, 48, 128, false, false, false,
	  128, 1, 8192, 8192, true, true, 0, 2, NULL },
	{ "qwen3", "0.6B", "0.2.0", "0.2.2", QWEN3,
	  151936, 1024, 3072, 28, 128, true, true, false,
	  0, 0, 0, 0, false, false, 0, 0,
	  MAIN_QWEN3 },
	{ "qwen3", "1.7B", "0.2.0", "0.2.2", QWEN3,
	  151936, 2048, 6144, 28, 128, true, true, false,
	  0, 0, 0, 0, false, false, 0, 0,
	  MAIN_QWEN3 },
	{ "qwen3", "4B", "0.2.0", "0.2.2", QWEN3,
	  151936, 2560, 9728, 36, 128, true, true, false,
	  0, 0, 0, 0, false, false, 0, 0,
	  MAIN_QWEN3 },
	{ "qwen3", "8B", "0.2.0", "0.2.2", QWEN3,
	  151936, 4096, 12288, 36, 128, true, false, false,
	  0, 0, 0, 0, false, false, 0, 0,
	  MAIN_QWEN3 },
	{ "qwen3", "14B", "0.2.0", "0.2.2", QWEN3,
	  151936, 5120, 17408, 40, 128, true, false, false,
	  0, 0, 0, 0, false, false, 0, 0,
	  MAIN_QWEN3 },
	{ "qwen3", "32B", "0.2.0", "0.2.2", QWEN3,
	  151936, 5120, 25600, 64, 128, true, false, false,
	  0, 0, 0, 0, false, false, 0, 0,
	  MAIN_QWEN3 },
	{ "qwen3", "30B-A3B", "0.2.0", "0.2.2", QWEN3,
	  151936, 2048, 6144, 48, 128, true, false, false,
	  128, 8, 768, 0, false, false, 0, 0,
	  MAIN_QWEN3 },
	{ "qwen3", "235B-A22B", "0.2.0", "0.2.2", QWEN3,
	  151936, 4096, 12288, 94, 128, true, false, false,
	  128, 8, 1536, 0, false, false, 0, 0,
	  MAIN_QWEN3 },
};

#define NFLAVORS	(sizeof(flavors) / sizeof(flavors[0]))

/* since <= version <= until; main (a TOML file read under main) is newest. */
static bool
in_range(const struct tt_flavor *f, const char *version)
{
	struct fw_version	 v, since, until;

	if (version == NULL)
		return true;
	if (strcmp(version, "main") == 0)
		return f->main != NULL;
	if (fw_version_parse(version, &v) != 0 ||
	    fw_version_parse(f->since, &since) != 0 ||
	    fw_version_parse(f->until, &until) != 0)
		return false;
	if (v.main)
		return true;
	return fw_version_cmp(&since, &v) <= 0 &&
	    (fw_version_cmp(&v, &until) <= 0);
}

const struct tt_flavor *
tt_flavor_find(const char *model, const char *flavor, const char *version,
    bool *known)
{
	size_t	 i;

	*known = false;
	for (i = 0; i < NFLAVORS; i++) {
		if (strcmp(flavors[i].model, model) != 0 ||
		    strcmp(flavors[i].flavor, flavor) != 0)
			continue;
		*known = true;
		if (in_range(&flavors[i], version))
			return &flavors[i];
	}
	return NULL;
}

void
tt_flavor_names(const char *model, char *buf, size_t size)
{
	size_t	 i, n = 0;
	bool	 any = false;
	const char *last = NULL;

	for (i = 0; i < NFLAVORS; i++)
		any = any || strcmp(flavors[i].model, model) == 0;
	buf[0] = '\0';
	for (i = 0; i < NFLAVORS && n < size; i++) {
		if (any && strcmp(flavors[i].model, model) != 0)
			continue;
		if (last == NULL || strcmp(last, flavors[i].model) != 0)
			n += (size_t)snprintf(buf + n, size - n, "%s%s:",
			    last != NULL ? "; " : "", flavors[i].model);
		if (n < size)
			n += (size_t)snprintf(buf + n, size - n, " %s",
			    flavors[i].flavor);
		last = flavors[i].model;
	}
}
