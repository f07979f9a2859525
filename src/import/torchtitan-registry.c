/*
 * torchtitan main's config registry (torchtitan-registry.h): the entries
 * of torchtitan/models/{llama3,deepseek_v3,qwen3}/config_registry.py as
 * read at each window's commit (de329200b, e1847f439, 786e26f8e,
 * 963c20cba, b052f36fe, 565cb810c, ecae62f15).  These are data, and
 * facts: each row holds what its function passes to TrainingConfig and
 * ParallelismConfig, the model_registry flavour, and the settings that
 * the importer reports as ignored (compile, asynchronous tp, float8);
 * everything else the function sets (optimizer, lr_scheduler, dataloader,
 * checkpoint, metrics, profiler, validator, activation checkpointing,
 * the chunked loss) changes no gradient reduction and is left out.
 *
 * A window's registry is the one at its commit: qwen3_14b, added by
 * 6b081f404 a day after de329200b, is an entry from e1847f439's window
 * on, and qwen3_30b_a3b (06d4a35e2, within 963c20cba's) from b052f36fe's.
 * The debug entries and the variants that swap kernels or quantize
 * (llama3_8b_mxfp8, deepseek_v3_16b_hybridep ...) are not rows.  llama4's
 * entries (torchtitan/models/llama4/config_registry.py, deleted by
 * d92336fee, PR #3573) are not rows either: its 17bx128e flavour has
 * experts in every layer at 963c20cba, not v0.2.2's every other, and
 * when that changed was not read.
 */
#include <stdio.h>
#include <string.h>

#include "import/torchtitan-registry.h"

#define LLAMA3	"torchtitan/models/llama3/config_registry.py"
#define DSV3	"torchtitan/models/deepseek_v3/config_registry.py"
#define QWEN3	"torchtitan/models/qwen3/config_registry.py"

/* Qwen3's larger entries give the mesh's degrees from e1847f439 on
 * (the values of ParallelismConfig's defaults). */
#define QWEN3_MESH	" --parallelism.data_parallel_shard_degree -1" \
			" --parallelism.tensor_parallel_degree 1" \
			" --parallelism.context_parallel_degree 1" \
			" --parallelism.pipeline_parallel_degree 1"

static const struct tt_entry entries[] = {
	{ "llama3", "llama3_8b", "de329200b", NULL,
	  LLAMA3 " llama3_8b, de329200b to ecae62f15",
	  "--model.name llama3 --model.flavor 8B"
	  " --training.local_batch_size 1 --training.seq_len 8192"
	  " --training.steps 1000" },
	{ "llama3", "llama3_70b", "de329200b", NULL,
	  LLAMA3 " llama3_70b, de329200b to ecae62f15",
	  "--model.name llama3 --model.flavor 70B"
	  " --training.local_batch_size 8 --training.seq_len 8192"
	  " --training.steps 1000 --parallelism.tensor_parallel_degree 8" },
	/*
	 * Float8 linear layers: model_converters at de329200b, the
	 * model_registry's converters from 6348d93d1 (PR #3127) on.
	 */
	{ "llama3", "llama3_405b", "de329200b", NULL,
	  LLAMA3 " llama3_405b, de329200b to ecae62f15",
	  "--model.name llama3 --model.flavor 405B --model.converters float8"
	  " --training.local_batch_size 2 --training.seq_len 8192"
	  " --training.steps 3000 --parallelism.tensor_parallel_degree 8"
	  " --parallelism.enable_async_tensor_parallel --compile.enable" },
	/* ETP gone by c4b409af2 (PR #3167), so from 963c20cba's window. */
	{ "deepseek_v3", "deepseek_v3_16b", "de329200b", "963c20cba",
	  DSV3 " deepseek_v3_16b, de329200b to 786e26f8e",
	  "--model.name deepseek_v3 --model.flavor 16B"
	  " --training.local_batch_size 4 --training.seq_len 4096"
	  " --training.steps 1000"
	  " --parallelism.pipeline_parallel_schedule Interleaved1F1B"
	  " --parallelism.expert_parallel_degree 8"
	  " --parallelism.expert_tensor_parallel_degree 1 --compile.enable"
	  " --compile.components loss" },
	{ "deepseek_v3", "deepseek_v3_16b", "963c20cba", NULL,
	  DSV3 " deepseek_v3_16b, 963c20cba to ecae62f15",
	  "--model.name deepseek_v3 --model.flavor 16B"
	  " --training.local_batch_size 4 --training.seq_len 4096"
	  " --training.steps 1000"
	  " --parallelism.pipeline_parallel_schedule Interleaved1F1B"
	  " --parallelism.expert_parallel_degree 8 --compile.enable"
	  " --compile.components loss" },
	{ "deepseek_v3", "deepseek_v3_671b", "de329200b", "963c20cba",
	  DSV3 " deepseek_v3_671b, de329200b to 786e26f8e",
	  "--model.name deepseek_v3 --model.flavor 671B"
	  " --training.local_batch_size 4 --training.seq_len 4096"
	  " --training.steps 10000"
	  " --parallelism.pipeline_parallel_schedule Interleaved1F1B"
	  " --parallelism.expert_parallel_degree 1"
	  " --parallelism.expert_tensor_parallel_degree 1 --compile.enable"
	  " --compile.components loss" },
	/* Expert parallelism 2 by 963c20cba's window. */
	{ "deepseek_v3", "deepseek_v3_671b", "963c20cba", NULL,
	  DSV3 " deepseek_v3_671b, 963c20cba to ecae62f15",
	  "--model.name deepseek_v3 --model.flavor 671B"
	  " --training.local_batch_size 4 --training.seq_len 4096"
	  " --training.steps 10000"
	  " --parallelism.pipeline_parallel_schedule Interleaved1F1B"
	  " --parallelism.expert_parallel_degree 2 --compile.enable"
	  " --compile.components loss" },
	{ "qwen3", "qwen3_0_6b", "de329200b", NULL,
	  QWEN3 " qwen3_0_6b, de329200b to ecae62f15",
	  "--model.name qwen3 --model.flavor 0.6B"
	  " --training.local_batch_size 4 --training.seq_len 4096"
	  " --training.steps 10" },
	{ "qwen3", "qwen3_1_7b", "de329200b", NULL,
	  QWEN3 " qwen3_1_7b, de329200b to ecae62f15",
	  "--model.name qwen3 --model.flavor 1.7B"
	  " --training.local_batch_size 4 --training.seq_len 4096"
	  " --training.steps 100" },
	{ "qwen3", "qwen3_14b", "e1847f439", NULL,
	  QWEN3 " qwen3_14b, e1847f439 to ecae62f15",
	  "--model.name qwen3 --model.flavor 14B"
	  " --training.local_batch_size 4 --training.seq_len 4096"
	  " --training.steps 3000" QWEN3_MESH },
	{ "qwen3", "qwen3_32b", "de329200b", "e1847f439",
	  QWEN3 " qwen3_32b at de329200b",
	  "--model.name qwen3 --model.flavor 32B"
	  " --training.local_batch_size 2 --training.seq_len 4096"
	  " --training.steps 3000" },
	{ "qwen3", "qwen3_32b", "e1847f439", NULL,
	  QWEN3 " qwen3_32b, e1847f439 to ecae62f15",
	  "--model.name qwen3 --model.flavor 32B"
	  " --training.local_batch_size 2 --training.seq_len 4096"
	  " --training.steps 3000" QWEN3_MESH },
	{ "qwen3", "qwen3_30b_a3b", "b052f36fe", NULL,
	  QWEN3 " qwen3_30b_a3b, b052f36fe to ecae62f15",
	  "--model.name qwen3 --model.flavor 30B-A3B"
	  " --training.local_batch_size 2 --training.seq_len 4096"
	  " --training.steps 3000" QWEN3_MESH },
};

#define NENTRIES	(sizeof(entries) / sizeof(entries[0]))

/* Keys of the command line that a window no longer has. */
static const struct {
	const char	*path, *since, *why;
} removed[] = {
	{ "parallelism.expert_tensor_parallel_degree", "963c20cba",
	  "removed with expert tensor parallelism by c4b409af2 (PR #3167): "
	  "tyro refuses it" },
	{ "parallelism.expert_parallel_comm_backend", "963c20cba",
	  "removed by c4b409af2 (PR #3167): tyro refuses it" },
};

/* The place in main's history of the window whose commit is c, or -1. */
static int
window_first(const struct fw_profile *p, const char *c)
{
	const struct framework	*fw = p->framework;
	int			 i;

	for (i = 0; i < fw->nprofiles; i++)
		if (fw->profiles[i].commit != NULL &&
		    strncmp(fw->profiles[i].commit, c, strlen(c)) == 0)
			return fw->profiles[i].first;
	return -1;
}

/* since <= p's window < until. */
static int
holds(const char *since, const char *until, const struct fw_profile *p)
{
	int	 from = window_first(p, since);

	return from >= 0 && from <= p->first && (until == NULL ||
	    p->first < window_first(p, until));
}

const struct tt_entry *
tt_registry_find(const char *module, const char *config,
    const struct fw_profile *p, int *known)
{
	size_t	 i;

	*known = 0;
	for (i = 0; i < NENTRIES; i++) {
		if (strcmp(entries[i].module, module) != 0 ||
		    strcmp(entries[i].config, config) != 0)
			continue;
		*known = 1;
		if (holds(entries[i].since, entries[i].until, p))
			return &entries[i];
	}
	return NULL;
}

void
tt_registry_names(const char *module, const struct fw_profile *p,
    char *buf, size_t size)
{
	size_t	 i, n = 0;
	int	 any = 0;

	for (i = 0; i < NENTRIES; i++)
		any = any || strcmp(entries[i].module, module) == 0;
	buf[0] = '\0';
	for (i = 0; i < NENTRIES && n < size; i++) {
		if ((any && strcmp(entries[i].module, module) != 0) ||
		    !holds(entries[i].since, entries[i].until, p))
			continue;
		n += (size_t)snprintf(buf + n, size - n, "%s%s%s%s",
		    n > 0 ? " " : "", any ? "" : entries[i].module,
		    any ? "" : "/", entries[i].config);
	}
}

const char *
tt_registry_removed(const char *path, const struct fw_profile *p)
{
	size_t	 i;

	for (i = 0; i < sizeof(removed) / sizeof(removed[0]); i++)
		if (strcmp(removed[i].path, path) == 0 &&
		    holds(removed[i].since, NULL, p))
			return removed[i].why;
	return NULL;
}
