/*
 * Unit tests of the stale rows of a tied weight wrapped in two FSDP2
 * groups (model/stale.c, pytorch #176076), table-driven: for a config,
 * every rank holding rows no update reaches and those rows of the
 * logical weight.  A rank missing here is rows trained on a frozen copy
 * that the audit would not name; a rank too many is a finding against a
 * setup that trains right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config-text.h"
#include "config/config.h"
#include "model/stale.h"
#include "symbolic/context.h"
#include "tap.h"

static const struct {
	const char	*why;
	const char	*yaml;
	const char	*want;	/* "rank:row_lo-row_hi ..." or "" */
} cases[] = {
	/*
	 * torch.chunk of 29 rows over 4 members: 8, 8, 8 and 5 rows; the
	 * last member's shard is short (pytorch _fsdp_param.py
	 * _init_sharded_param pads it to 8).
	 */
	{ "29 rows over 4: the last member's 5 rows",
	  "mesh: {dp: 4}\n"
	  "model: {vocab: 29, tie_embeddings: true}\n"
	  "layout: {dp_engine: fsdp2, tied_fsdp_groups: two}\n",
	  "3:24-29" },
	/* One group for both uses: nothing is stale. */
	{ "29 rows over 4 in one fully_shard group",
	  "mesh: {dp: 4}\n"
	  "model: {vocab: 29, tie_embeddings: true}\n"
	  "layout: {dp_engine: fsdp2, tied_fsdp_groups: one}\n",
	  "" },
	/* An even split: every shard fills the padded size. */
	{ "32 rows over 4: no short shard",
	  "mesh: {dp: 4}\n"
	  "model: {vocab: 32, tie_embeddings: true}\n"
	  "layout: {dp_engine: fsdp2, tied_fsdp_groups: two}\n",
	  "" },
	/*
	 * 10 rows over 4: chunks of 3, 3, 3 and 1; member 3 is short.
	 * Over 6: chunks of 2, 2, 2, 2, 2 and an empty sixth, which holds
	 * no row and so nothing stale.
	 */
	{ "10 rows over 6: an empty last member holds nothing",
	  "mesh: {dp: 6}\n"
	  "model: {vocab: 10, tie_embeddings: true}\n"
	  "layout: {dp_engine: fsdp2, tied_fsdp_groups: two}\n",
	  "" },
	{ "10 rows over 4: member 3's one row",
	  "mesh: {dp: 4}\n"
	  "model: {vocab: 10, tie_embeddings: true}\n"
	  "layout: {dp_engine: fsdp2, tied_fsdp_groups: two}\n",
	  "3:9-10" },
	/* HSDP: shard group 3, each replica's member 2 short. */
	{ "HSDP, 2 replicas of 3 shards over 29 rows",
	  "mesh: {dp: 6, dp_replicate: 2}\n"
	  "model: {vocab: 29, tie_embeddings: true}\n"
	  "layout: {dp_engine: fsdp2, tied_fsdp_groups: two}\n",
	  "2:20-29 5:20-29" },
	/*
	 * tp 2: each tp rank holds 16 of 32 vocab rows, chunked over dp 3
	 * as 6, 6 and 4; the short member on both tp ranks, at its own
	 * rows of the logical weight (tp fastest: ranks 4 and 5).
	 */
	{ "tp 2 x dp 3 over 32 rows",
	  "mesh: {dp: 3, tp: 2}\n"
	  "model: {vocab: 32, tie_embeddings: true}\n"
	  "layout: {dp_engine: fsdp2, tied_fsdp_groups: two}\n",
	  "4:12-16 5:28-32" },
	/* Untied: two parameters, each in one group. */
	{ "untied weights",
	  "mesh: {dp: 4}\n"
	  "model: {vocab: 29}\n"
	  "layout: {dp_engine: fsdp2, tied_fsdp_groups: two}\n",
	  "" },
	/* Megatron's buffers have no fully_shard groups. */
	{ "the Megatron engine",
	  "mesh: {dp: 4}\n"
	  "model: {vocab: 29, tie_embeddings: true}\n"
	  "layout: {tied_fsdp_groups: two}\n",
	  "" },
};

static void
check_case(size_t k)
{
	struct config_list	 list;
	struct sym_context	 ctx;
	struct stale_rows	*v;
	char			 got[256];
	size_t			 n, i, off = 0;

	memset(&list, 0, sizeof list);
	if (config_text_load(cases[k].yaml, &list) != 0) {
		tap_ok(false, "%s: the config loads", cases[k].why);
		config_list_free(&list);
		return;
	}
	sym_context_build(&ctx, &list.v[0]);
	n = stale_rows_find(&ctx.model, &ctx.layout, &v);
	got[0] = '\0';
	for (i = 0; i < n && off < sizeof got; i++)
		off += (size_t)snprintf(got + off, sizeof got - off,
		    "%s%d:%lld-%lld", i ? " " : "", v[i].rank,
		    (long long)v[i].row_lo, (long long)v[i].row_hi);
	tap_ok_str_eq(got, cases[k].want, "%s", cases[k].why);
	tap_ok(stale_rows_find(&ctx.model, &ctx.layout, NULL) == n,
	    "%s: counting alone finds as many", cases[k].why);
	free(v);
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
