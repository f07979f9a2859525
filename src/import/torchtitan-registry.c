/*
 * torchtitan main's config registry (torchtitan-registry.h): the entries
 * of torchtitan/models/{llama3,deepseek_v3,qwen3}/config_registry.py as
 * read at each window's commit (de329200b, e1847f439, 786e26f8e,
 * 963c20cba, b052f36fe, 565cb810c, ecae62f15, f59c215e8, 73aed7f6c) and
 * where a key of theirs moved inside a window (737594746).  These are
 * data, and
 * facts: each row holds what its function passes to TrainingConfig and
 * ParallelismConfig, the model_registry flavour, and the settings that
 * the importer reports as ignored (compile, asynchronous tp, float8);
 * everything else the function sets (optimizer, lr_scheduler, dataloader,
 * checkpoint, metrics, profiler, validator, activation checkpointing,
 * the chunked loss) changes no gradient reduction and is left out.
 *
 * A window's registry is the one at its commit, or at the commit inside
 * it where an entry's key moved (llama3_405b's asynchronous tp, into
 * compile by 737594746): the rows hold from the commit they were read at
 * to the next row's, by the place of the --framework commit in main's
 * first-parent history (fw_history_at).  qwen3_14b, added by
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

/*
 * TrainingConfig's batch: local_batch_size samples of seq_len tokens a
 * micro-batch up to 73aed7f6c; from it (PR #4121, which folds the batch
 * into the tokens) the entries write the same product as
 * num_tokens_per_microbatch_per_dp_rank=B * L, and L as
 * max_context_length: TOKENS(B * L, L), the product written out.
 */
#define BATCH(b, l)	" --training.local_batch_size " #b \
			" --training.seq_len " #l
#define TOKENS(n, l)	" --training.num_tokens_per_microbatch_per_dp_rank " \
			#n " --training.max_context_length " #l

/*
 * The rows of a window span (since..until) whose entries changed only in
 * the batch's words: one macro, written twice.  Each is cited in the row.
 */
#define LLAMA3_8B(batch) \
	"--model.name llama3 --model.flavor 8B" batch \
	" --training.steps 1000"
#define LLAMA3_70B(batch) \
	"--model.name llama3 --model.flavor 70B" batch \
	" --training.steps 1000 --parallelism.tensor_parallel_degree 8"
#define DSV3_16B(batch, extra) \
	"--model.name deepseek_v3 --model.flavor 16B" batch \
	" --training.steps 1000" extra \
	" --parallelism.pipeline_parallel_schedule Interleaved1F1B" \
	" --parallelism.expert_parallel_degree 8 --compile.enable" \
	" --compile.components loss"
#define DSV3_671B(batch, extra) \
	"--model.name deepseek_v3 --model.flavor 671B" batch \
	" --training.steps 10000" extra \
	" --parallelism.pipeline_parallel_schedule Interleaved1F1B" \
	" --parallelism.expert_parallel_degree 2 --compile.enable" \
	" --compile.components loss"
#define QWEN3_ROW(flavor, batch, steps, mesh) \
	"--model.name qwen3 --model.flavor " flavor batch \
	" --training.steps " steps mesh

/* f84224af0 (PR #3559) captures the step in CUDA graphs by default; the
 * deepseek_v3 entries turn it off, as 73aed7f6c reads them. */
#define NO_CUDA_GRAPHS	" --training.disable_cuda_graphs"

static const struct tt_entry entries[] = {
	{ "llama3", "llama3_8b", "de329200b", "73aed7f6c",
	  LLAMA3 " llama3_8b, de329200b to f59c215e8",
	  LLAMA3_8B(BATCH(1, 8192)) },
	/* 73aed7f6c: num_tokens_per_microbatch_per_dp_rank=1 * 8192. */
	{ "llama3", "llama3_8b", "73aed7f6c", NULL,
	  LLAMA3 " llama3_8b at 73aed7f6c",
	  LLAMA3_8B(TOKENS(8192, 8192)) },
	{ "llama3", "llama3_70b", "de329200b", "73aed7f6c",
	  LLAMA3 " llama3_70b, de329200b to f59c215e8",
	  LLAMA3_70B(BATCH(8, 8192)) },
	{ "llama3", "llama3_70b", "73aed7f6c", NULL,
	  LLAMA3 " llama3_70b at 73aed7f6c",
	  LLAMA3_70B(TOKENS(65536, 8192)) },
	/*
	 * Float8 linear layers: model_converters at de329200b, the
	 * model_registry's converters from 6348d93d1 (PR #3127) on.
	 * Asynchronous tp: ParallelismConfig's until 737594746 (PR #4045,
	 * "fix async tp and move it into compile"), CompileConfig's from it.
	 */
	{ "llama3", "llama3_405b", "de329200b", "737594746",
	  LLAMA3 " llama3_405b, de329200b to f59c215e8",
	  "--model.name llama3 --model.flavor 405B --model.converters float8"
	  BATCH(2, 8192) " --training.steps 3000"
	  " --parallelism.tensor_parallel_degree 8"
	  " --parallelism.enable_async_tensor_parallel --compile.enable" },
	{ "llama3", "llama3_405b", "737594746", "73aed7f6c",
	  LLAMA3 " llama3_405b at 737594746 (in f59c215e8's window)",
	  "--model.name llama3 --model.flavor 405B --model.converters float8"
	  BATCH(2, 8192) " --training.steps 3000"
	  " --parallelism.tensor_parallel_degree 8 --compile.enable"
	  " --compile.enable_async_tensor_parallel" },
	{ "llama3", "llama3_405b", "73aed7f6c", NULL,
	  LLAMA3 " llama3_405b at 73aed7f6c",
	  "--model.name llama3 --model.flavor 405B --model.converters float8"
	  TOKENS(16384, 8192) " --training.steps 3000"
	  " --parallelism.tensor_parallel_degree 8 --compile.enable"
	  " --compile.enable_async_tensor_parallel" },
	/* ETP gone by c4b409af2 (PR #3167), so from 963c20cba's window. */
	{ "deepseek_v3", "deepseek_v3_16b", "de329200b", "963c20cba",
	  DSV3 " deepseek_v3_16b, de329200b to 786e26f8e",
	  "--model.name deepseek_v3 --model.flavor 16B"
	  BATCH(4, 4096) " --training.steps 1000"
	  " --parallelism.pipeline_parallel_schedule Interleaved1F1B"
	  " --parallelism.expert_parallel_degree 8"
	  " --parallelism.expert_tensor_parallel_degree 1 --compile.enable"
	  " --compile.components loss" },
	{ "deepseek_v3", "deepseek_v3_16b", "963c20cba", "73aed7f6c",
	  DSV3 " deepseek_v3_16b, 963c20cba to f59c215e8",
	  DSV3_16B(BATCH(4, 4096), "") },
	{ "deepseek_v3", "deepseek_v3_16b", "73aed7f6c", NULL,
	  DSV3 " deepseek_v3_16b at 73aed7f6c",
	  DSV3_16B(TOKENS(16384, 4096), NO_CUDA_GRAPHS) },
	{ "deepseek_v3", "deepseek_v3_671b", "de329200b", "963c20cba",
	  DSV3 " deepseek_v3_671b, de329200b to 786e26f8e",
	  "--model.name deepseek_v3 --model.flavor 671B"
	  BATCH(4, 4096) " --training.steps 10000"
	  " --parallelism.pipeline_parallel_schedule Interleaved1F1B"
	  " --parallelism.expert_parallel_degree 1"
	  " --parallelism.expert_tensor_parallel_degree 1 --compile.enable"
	  " --compile.components loss" },
	/* Expert parallelism 2 by 963c20cba's window. */
	{ "deepseek_v3", "deepseek_v3_671b", "963c20cba", "73aed7f6c",
	  DSV3 " deepseek_v3_671b, 963c20cba to f59c215e8",
	  DSV3_671B(BATCH(4, 4096), "") },
	{ "deepseek_v3", "deepseek_v3_671b", "73aed7f6c", NULL,
	  DSV3 " deepseek_v3_671b at 73aed7f6c",
	  DSV3_671B(TOKENS(16384, 4096), NO_CUDA_GRAPHS) },
	{ "qwen3", "qwen3_0_6b", "de329200b", "73aed7f6c",
	  QWEN3 " qwen3_0_6b, de329200b to f59c215e8",
	  QWEN3_ROW("0.6B", BATCH(4, 4096), "10", "") },
	{ "qwen3", "qwen3_0_6b", "73aed7f6c", NULL,
	  QWEN3 " qwen3_0_6b at 73aed7f6c",
	  QWEN3_ROW("0.6B", TOKENS(16384, 4096), "10", "") },
	{ "qwen3", "qwen3_1_7b", "de329200b", "73aed7f6c",
	  QWEN3 " qwen3_1_7b, de329200b to f59c215e8",
	  QWEN3_ROW("1.7B", BATCH(4, 4096), "100", "") },
	{ "qwen3", "qwen3_1_7b", "73aed7f6c", NULL,
	  QWEN3 " qwen3_1_7b at 73aed7f6c",
	  QWEN3_ROW("1.7B", TOKENS(16384, 4096), "100", "") },
	{ "qwen3", "qwen3_14b", "e1847f439", "73aed7f6c",
	  QWEN3 " qwen3_14b, e1847f439 to f59c215e8",
	  QWEN3_ROW("14B", BATCH(4, 4096), "3000", QWEN3_MESH) },
	{ "qwen3", "qwen3_14b", "73aed7f6c", NULL,
	  QWEN3 " qwen3_14b at 73aed7f6c",
	  QWEN3_ROW("14B", TOKENS(16384, 4096), "3000", QWEN3_MESH) },
	{ "qwen3", "qwen3_32b", "de329200b", "e1847f439",
	  QWEN3 " qwen3_32b at de329200b",
	  QWEN3_ROW("32B", BATCH(2, 4096), "3000", "") },
	{ "qwen3", "qwen3_32b", "e1847f439", "73aed7f6c",
	  QWEN3 " qwen3_32b, e1847f439 to f59c215e8",
	  QWEN3_ROW("32B", BATCH(2, 4096), "3000", QWEN3_MESH) },
	{ "qwen3", "qwen3_32b", "73aed7f6c", NULL,
	  QWEN3 " qwen3_32b at 73aed7f6c",
	  QWEN3_ROW("32B", TOKENS(8192, 4096), "3000", QWEN3_MESH) },
	{ "qwen3", "qwen3_30b_a3b", "b052f36fe", "73aed7f6c",
	  QWEN3 " qwen3_30b_a3b, b052f36fe to f59c215e8",
	  QWEN3_ROW("30B-A3B", BATCH(2, 4096), "3000", QWEN3_MESH) },
	{ "qwen3", "qwen3_30b_a3b", "73aed7f6c", NULL,
	  QWEN3 " qwen3_30b_a3b at 73aed7f6c",
	  QWEN3_ROW("30B-A3B", TOKENS(8192, 4096), "3000", QWEN3_MESH) },
};

#define NENTRIES	(sizeof(entries) / sizeof(entries[0]))

/*
 * Keys of the command line that main's code at some commits does not have:
 * tyro refuses them there (from, inclusive, to to, exclusive; NULL: the
 * start of main's windows, or the newest commit read).
 */
#define TOKENS_SINCE	"added by 73aed7f6c (PR #4121, which folds the batch " \
			"into the tokens): tyro refuses it before; "
#define TOKENS_UNTIL	"replaced by 73aed7f6c (PR #4121, which folds the " \
			"batch into the tokens): tyro refuses it; "
static const struct {
	const char	*path, *from, *to, *why;
} absent[] = {
	{ "parallelism.expert_tensor_parallel_degree", "963c20cba", NULL,
	  "removed with expert tensor parallelism by c4b409af2 (PR #3167): "
	  "tyro refuses it" },
	{ "parallelism.expert_parallel_comm_backend", "963c20cba", NULL,
	  "removed by c4b409af2 (PR #3167): tyro refuses it" },
	{ "parallelism.spmd_backend", NULL, "641b5f6b8",
	  "added by 641b5f6b8 (PR #3466): tyro refuses it before" },
	{ "parallelism.enable_async_tensor_parallel", "737594746", NULL,
	  "moved to --compile.enable_async_tensor_parallel by 737594746 "
	  "(PR #4045): tyro refuses it" },
	{ "compile.enable_async_tensor_parallel", NULL, "737594746",
	  "added by 737594746 (PR #4045): tyro refuses it before; give "
	  "--parallelism.enable_async_tensor_parallel" },
	{ "training.disable_cuda_graphs", NULL, "f84224af0",
	  "added by f84224af0 (PR #3559), with CUDA graphs: tyro refuses "
	  "it before" },
	{ "training.local_batch_size", "73aed7f6c", NULL, TOKENS_UNTIL
	  "give --training.num_tokens_per_microbatch_per_dp_rank, the tokens "
	  "of a micro-batch (local_batch_size * seq_len)" },
	{ "training.global_batch_size", "73aed7f6c", NULL, TOKENS_UNTIL
	  "give --training.num_tokens_per_train_step (global_batch_size * "
	  "seq_len)" },
	{ "training.seq_len", "73aed7f6c", NULL, TOKENS_UNTIL "give "
	  "--training.max_context_length, and the micro-batch's tokens as "
	  "--training.num_tokens_per_microbatch_per_dp_rank" },
	{ "parallelism.pipeline_parallel_microbatch_size", "73aed7f6c", NULL,
	  TOKENS_UNTIL "give --parallelism.num_pp_microbatches, a count of "
	  "pipeline micro-batches of num_tokens_per_microbatch_per_dp_rank "
	  "tokens each" },
	{ "training.num_tokens_per_microbatch_per_dp_rank", NULL, "73aed7f6c",
	  TOKENS_SINCE "give --training.local_batch_size and "
	  "--training.seq_len, whose product it is" },
	{ "training.num_tokens_per_train_step", NULL, "73aed7f6c",
	  TOKENS_SINCE "give --training.global_batch_size, in samples" },
	{ "training.max_context_length", NULL, "73aed7f6c", TOKENS_SINCE
	  "give --training.seq_len" },
	{ "parallelism.num_pp_microbatches", NULL, "73aed7f6c", TOKENS_SINCE
	  "give --parallelism.pipeline_parallel_microbatch_size, in samples" },
};

/* The place in main's history of commit c, or -1. */
static int
place(const struct fw_profile *p, const char *c)
{
	const struct fw_history	*h = p->framework->history;

	return h != NULL ? fw_history_find(h, c) : -1;
}

/* from <= at < to, by their places in main's history (NULL: open). */
static int
holds(const char *from, const char *to, const struct fw_profile *p, int at)
{
	return (from == NULL || place(p, from) <= at) &&
	    (to == NULL || at < place(p, to));
}

const struct tt_entry *
tt_registry_find(const char *module, const char *config,
    const struct fw_profile *p, int at, int *known)
{
	size_t	 i;

	*known = 0;
	for (i = 0; i < NENTRIES; i++) {
		if (strcmp(entries[i].module, module) != 0 ||
		    strcmp(entries[i].config, config) != 0)
			continue;
		*known = 1;
		if (holds(entries[i].since, entries[i].until, p, at))
			return &entries[i];
	}
	return NULL;
}

void
tt_registry_names(const char *module, const struct fw_profile *p, int at,
    char *buf, size_t size)
{
	size_t	 i, n = 0;
	int	 any = 0;

	for (i = 0; i < NENTRIES; i++)
		any = any || strcmp(entries[i].module, module) == 0;
	buf[0] = '\0';
	for (i = 0; i < NENTRIES && n < size; i++) {
		if ((any && strcmp(entries[i].module, module) != 0) ||
		    !holds(entries[i].since, entries[i].until, p, at))
			continue;
		n += (size_t)snprintf(buf + n, size - n, "%s%s%s%s",
		    n > 0 ? " " : "", any ? "" : entries[i].module,
		    any ? "" : "/", entries[i].config);
	}
}

const char *
tt_registry_absent(const char *path, const struct fw_profile *p, int at)
{
	size_t	 i;

	for (i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		if (strcmp(absent[i].path, path) == 0 &&
		    holds(absent[i].from, absent[i].to, p, at))
			return absent[i].why;
	return NULL;
}

const char *
tt_registry_spmd_default(const struct fw_profile *p, int at)
{
	/*
	 * 641b5f6b8 (PR #3466) adds parallelism.spmd_backend, "default" the
	 * DTensor paths the windows before were read for; 5ab3a0fd1 (PR
	 * #4085) makes spmd_types the default, whose reductions the window
	 * of f59c215e8 read as the same.
	 */
	return holds("5ab3a0fd1", NULL, p, at) ? "spmd_types" : "default";
}

bool
tt_registry_folded(const struct fw_profile *p, int at)
{
	return holds("73aed7f6c", NULL, p, at);
}
