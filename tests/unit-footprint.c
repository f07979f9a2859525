/*
 * TAP unit test of what a symbolic audit keeps per rank (issue 24).  At
 * 131,072 ranks scripts/bench's MoE check sat at its 256 MiB target: a
 * million cells of 128 bytes, each with a copy of its rank's coordinates;
 * a product of the scaling step built for every param of every rank,
 * though the params of a rank scale one value; and a segment array sized
 * for every cut, for every member of every reduce-scatter, though almost
 * every member keeps one segment.
 *
 * The arenas count the bytes they hand out, so the bounds below are
 * exact figures of the audit, which a loaded machine cannot move (the
 * peak RSS is tests/memory.test's).  On the bench's mesh at dp 64 (4,096
 * ranks), the segment arenas held at most 171 bytes per rank and param
 * before, 80 after; the audit's arena, cells and values, 186 bytes per
 * cell before, 112 after.  The bounds leave a tenth for other changes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "config-text.h"
#include "config/config.h"
#include "symbolic/audit.h"
#include "symbolic/context.h"
#include "symbolic/run.h"
#include "symbolic/symbolic.h"
#include "tap.h"

/* Segment arena bytes per rank holding a param, and audit bytes per cell. */
#define SEG_BYTES_PER_HOLDER	88
#define AUDIT_BYTES_PER_CELL	123

/* scripts/bench's MoE mesh, at dp 64: 4,096 ranks. */
static const char moe[] =
    "mesh: {dp: 64, pp: 8, tp: 8, ep: 8, etp: 1}\n"
    "model:\n"
    "  tie_embeddings: true\n"
    "  moe: {experts: 8, top_k: 2, expert_ffn: 8}\n"
    "training: {distributed_optimizer: true, sequence_parallel: true}\n"
    "sync: {embedding_grad: after-dp, router_grad: none}\n";

/* The hook after every step: the most the segment arenas held. */
static void
seg_peak(void *arg, const struct sym_run *run, int step)
{
	size_t	*peak = arg, n = 0;
	int	 l;

	(void)step;
	for (l = 0; l < run->model->nlogical; l++)
		n += run->seg_arenas[l].used_bytes;
	if (n > *peak)
		*peak = n;
}

int
main(void)
{
	struct config_list	 list;
	struct sym_context	 ctx;
	struct audit		 a;
	size_t			 peak = 0, ncells = 0, holders, i;
	double			 per_holder, per_cell;

	/*
	 * A million of them at 131,072 ranks: the coordinates are the
	 * mesh's to compute from the rank, and the members leave no holes.
	 */
	tap_ok(sizeof(struct cell) <= 72, "a cell takes at most 72 bytes "
	    "(%zu)", sizeof(struct cell));

	memset(&list, 0, sizeof list);
	if (config_text_load(moe, &list) != 0) {
		tap_ok(false, "the MoE config loads");
		config_list_free(&list);
		return tap_done();
	}
	sym_context_build(&ctx, &list.v[0]);
	holders = (size_t)ctx.model.nparams * ctx.model.mesh.dp *
	    ctx.model.mesh.tp;
	sym_audit(&ctx, &a, seg_peak, &peak);
	for (i = 0; i < a.nparams; i++)
		ncells += a.params[i].ncells;
	tap_ok(!a.correct && ncells > 0, "the MoE mesh audits wrong, as in "
	    "the bench (%zu cells)", ncells);

	per_holder = (double)peak / (double)holders;
	tap_ok(per_holder <= SEG_BYTES_PER_HOLDER, "the segment arenas hold "
	    "at most %d bytes per rank and param (%.1f)",
	    SEG_BYTES_PER_HOLDER, per_holder);
	per_cell = (double)a.arena.used_bytes / (double)ncells;
	tap_ok(per_cell <= AUDIT_BYTES_PER_CELL, "the audit holds at most "
	    "%d bytes per cell, values included (%.1f)", AUDIT_BYTES_PER_CELL,
	    per_cell);

	audit_free(&a);
	sym_context_free(&ctx);
	config_list_free(&list);
	return tap_done();
}
