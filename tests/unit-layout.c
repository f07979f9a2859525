/*
 * Unit tests of the gradient buffers' layout (layout.c), table-driven: for
 * a config, the elements of a parameter that each member of its reducing
 * group owns after the reduce-scatter, in the parameter's own coordinates.
 * Each row says which code it comes from.  Who owns what decides which
 * rank's optimizer reads which reduced value, so an owner wrong here is an
 * audit wrong everywhere (the #844 tables are exactly these ownerships).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config-text.h"
#include "config/config.h"
#include "model/layout.h"
#include "symbolic/context.h"
#include "tap.h"

static const struct {
	const char	*why;
	const char	*yaml;
	const char	*param;
	const char	*owned[4];	/* per member: "lo-hi ..." or "" */
} cases[] = {
	/*
	 * core_v0.5.0 grad_buffer.py: one bucket a stage, parameters in
	 * reverse order, padded to a multiple of dp; the first stage's 784
	 * elements split at 392, so member 1 owns the embedding, [528,784)
	 * of the buffer, and the last stage's 792 split at 396, so member 0
	 * owns the output weight at [0,256) (megatron-844.yaml).
	 */
	{ "#844's mesh, dp 2 x pp 2: the embedding all on member 1",
	  "mesh: {dp: 2, pp: 2}\n"
	  "model: {tie_embeddings: true}\n"
	  "training: {distributed_optimizer: true}\n",
	  "embedding.weight", { "", "0-256" } },
	{ "#844's mesh, dp 2 x pp 2: the output weight all on member 0",
	  "mesh: {dp: 2, pp: 2}\n"
	  "model: {tie_embeddings: true}\n"
	  "training: {distributed_optimizer: true}\n",
	  "output.weight", { "0-256", "" } },
	/*
	 * FSDP2 (pytorch _fsdp_param.py): each parameter its own bucket,
	 * cut with torch.chunk, ceil(32 / 3) = 11 rows of 8 a member, the
	 * last member short.
	 */
	{ "FSDP2, dp 3: 32 rows as 11, 11 and 10",
	  "mesh: {dp: 3}\n"
	  "layout: {dp_engine: fsdp2}\n",
	  "embedding.weight", { "0-88", "88-176", "176-256" } },
	/* HSDP: sharded over dp_shard = 2, each replica alike. */
	{ "FSDP2 under HSDP, dp 4 = 2 replicas x 2 shards",
	  "mesh: {dp: 4, dp_replicate: 2}\n"
	  "layout: {dp_engine: fsdp2}\n",
	  "embedding.weight", { "0-128", "128-256" } },
};

/* The ranges a member owns, "lo-hi lo-hi", into buf. */
static void
owned(const struct layout *lay, const struct model *m, int param,
    int member, char *buf, size_t len)
{
	int64_t	 r[8][2];
	int	 n, i;
	size_t	 off = 0;

	buf[0] = '\0';
	n = layout_owned_ranges(lay, m, param, member, r, 8);
	for (i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%lld-%lld",
		    i ? " " : "", (long long)r[i][0], (long long)r[i][1]);
}

static void
check_case(size_t k)
{
	struct config_list	 list;
	struct sym_context	 ctx;
	char			 got[256];
	int			 p, member, n;

	memset(&list, 0, sizeof list);
	if (config_text_load(cases[k].yaml, &list) != 0) {
		tap_ok(false, "%s: the config loads", cases[k].why);
		config_list_free(&list);
		return;
	}
	sym_context_build(&ctx, &list.v[0]);
	for (p = 0; p < ctx.model.nparams; p++)
		if (strcmp(ctx.model.params[p].name, cases[k].param) == 0)
			break;
	n = layout_shard_group_size(&ctx.model, layout_buffer_of(&ctx.model,
	    p < ctx.model.nparams ? p : 0));
	for (member = 0; member < 4; member++) {
		if (cases[k].owned[member] == NULL)
			break;
		if (p == ctx.model.nparams || member >= n) {
			tap_ok(false, "%s: member %d of %s", cases[k].why,
			    member, cases[k].param);
			continue;
		}
		owned(&ctx.layout, &ctx.model, p, member, got, sizeof got);
		tap_ok_str_eq(got, cases[k].owned[member], "%s: member %d",
		    cases[k].why, member);
	}
	sym_context_free(&ctx);
	config_list_free(&list);
}

int
main(void)
{
	size_t	 k;

	for (k = 0; k < sizeof cases / sizeof cases[0]; k++)
		check_case(k);
	return tap_done();
}
