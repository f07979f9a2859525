/*
 * Unit tests of the sync plan (syncplan.c), table-driven: for a config, the
 * gradient collectives in the order they run, as explain describes them.
 * Each row says which code its order comes from; the plan is the one
 * decision both engines execute (issue 22), so a row here is a claim about
 * both.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config-text.h"
#include "config/config.h"
#include "model/syncplan.h"
#include "symbolic/context.h"
#include "tap.h"

static const struct {
	const char	*why;
	const char	*yaml;
	const char	*steps;		/* one line per step */
} cases[] = {
	{ "Megatron core 0.5.0 finalize_model_grads (#844): the dp "
	  "reduce-scatter, then the tied embedding's all-reduce",
	  "mesh: {dp: 2, pp: 2}\n"
	  "model: {tie_embeddings: true}\n"
	  "training: {distributed_optimizer: true}\n"
	  "sync: {embedding_grad: after-dp}\n",
	  "scale the dense gradient buffer by 1/2\n"
	  "reduce-scatter (sum) over dp of the dense gradient buffer\n"
	  "all-reduce (sum) over embedding of embedding.weight and "
	  "output.weight\n" },
	{ "the order before 0203a13: the embedding first",
	  "mesh: {dp: 2, pp: 2}\n"
	  "model: {tie_embeddings: true}\n"
	  "training: {distributed_optimizer: true}\n"
	  "sync: {embedding_grad: before-dp}\n",
	  "all-reduce (sum) over embedding of embedding.weight and "
	  "output.weight\n"
	  "scale the dense gradient buffer by 1/2\n"
	  "reduce-scatter (sum) over dp of the dense gradient buffer\n" },
	{ "--ddp-average-in-collective (a4b31f2, core 0.8.0): AVG, no "
	  "scaling step",
	  "mesh: {dp: 4}\n"
	  "training: {distributed_optimizer: true, "
	  "average_in_collective: true}\n",
	  "reduce-scatter (average) over dp of the dense gradient buffer\n" },
	{ "FSDP2 under HSDP (pytorch _fsdp_collectives.foreach_reduce): "
	  "the shard group's reduce-scatter, then the replicas' all-reduce",
	  "mesh: {dp: 4, dp_replicate: 2}\n"
	  "layout: {dp_engine: fsdp2}\n",
	  "reduce-scatter (average) over dp_shard of the dense gradient "
	  "buffer\n"
	  "all-reduce (average) over dp_replicate of the dense gradient "
	  "buffer\n" },
	{ "sequence parallelism (Megatron _allreduce_layernorm_grads): the "
	  "norms' tp all-reduce after the dp all-reduce",
	  "mesh: {dp: 2, tp: 2}\n"
	  "training: {sequence_parallel: true}\n",
	  "scale the dense gradient buffer by 1/2\n"
	  "all-reduce (sum) over dp of the dense gradient buffer\n"
	  "all-reduce (sum) over tp of layers.0.norm1.weight and 2 more\n" },
	{ "the same with Megatron #1446's skipped standalone norm",
	  "mesh: {dp: 2, tp: 2}\n"
	  "training: {sequence_parallel: true}\n"
	  "sync: {sp_param_grad: skip-standalone}\n",
	  "scale the dense gradient buffer by 1/2\n"
	  "all-reduce (sum) over dp of the dense gradient buffer\n"
	  "all-reduce (sum) over tp of layers.0.norm1.weight and "
	  "layers.0.norm2.weight\n" },
};

/* The steps of the plan of the config `yaml`, one line each (xmalloc'd). */
static char *
plan_of(const char *yaml)
{
	struct config_list	 list;
	struct sym_context	 ctx;
	char			 line[256];
	char			*out = xstrdup("");
	char			*next;
	int			 i;

	memset(&list, 0, sizeof list);
	if (config_text_load(yaml, &list) == 0) {
		sym_context_build(&ctx, &list.v[0]);
		for (i = 0; i < ctx.plan.nsteps; i++) {
			syncplan_describe(&ctx.plan.steps[i], &ctx.model,
			    line, sizeof line);
			xasprintf(&next, "%s%s\n", out, line);
			free(out);
			out = next;
		}
		sym_context_free(&ctx);
	}
	config_list_free(&list);
	return out;
}

int
main(void)
{
	size_t	 i;
	char	*got;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		got = plan_of(cases[i].yaml);
		tap_ok_str_eq(got, cases[i].steps, "%s", cases[i].why);
		free(got);
	}
	return tap_done();
}
