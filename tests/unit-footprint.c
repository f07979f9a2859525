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
 *
 * Where every rank clips by a norm of its own, the gradient norm's
 * findings kept each class's words: a message, a fix and a list of
 * parameters told for every class of a rank or two, then dropped when
 * the class joined the finding its message named (gradnorm.c
 * explain_class).  hf-48205-ep-router-partial-fixed with
 * grad_norm.expert_norm: local, one of its fix search's candidates, at dp
 * 1,024 (2,048 ranks): 3,073 bytes per rank before, 2,530 after, most of
 * them the class's multiplicities that measure.c reads.
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
/* Audit bytes per rank where each clips by a norm of its own. */
#define NORM_OWN_BYTES_PER_RANK	2780

/* scripts/bench's MoE mesh, at dp 64: 4,096 ranks. */
static const char moe[] =
    "mesh: {dp: 64, pp: 8, tp: 8, ep: 8, etp: 1}\n"
    "model:\n"
    "  tie_embeddings: true\n"
    "  moe: {experts: 8, top_k: 2, expert_ffn: 8}\n"
    "training: {distributed_optimizer: true, sequence_parallel: true}\n"
    "sync: {embedding_grad: after-dp, router_grad: none}\n";

/* Its ranks clip by norms of their own: a class of the norm per rank. */
static const char norms_own[] =
    "mesh: {dp: 1024, tp: 2, ep: 2, etp: 1}\n"
    "model:\n"
    "  moe: {experts: 4, top_k: 2, expert_ffn: 8,\n"
    "    score_before_experts: false, ep_on: tp-mask}\n"
    "sync: {moe_input_grad: replicate}\n"
    "grad_norm: {expert_norm: local}\n"
    "plan:\n"
    "  - {declare: partial, activation: experts-input}\n"
    "  - {declare: partial, activation: router-scores}\n"
    "loss: {valid_tokens: all}\n";

/*
 * The audit's bytes per rank where each rank clips by a norm of its own,
 * without the effects, as the fix search audits it.
 */
static void
norm_findings_kept(void)
{
	struct config_list	 list;
	struct sym_context	 ctx;
	struct audit		 a;
	double			 per_rank;

	memset(&list, 0, sizeof list);
	if (config_text_load(norms_own, &list) != 0) {
		tap_ok(false, "the config of norms of their own loads");
		config_list_free(&list);
		return;
	}
	sym_context_build(&ctx, &list.v[0]);
	ctx.no_effects = true;
	sym_audit(&ctx, &a, NULL, NULL);
	tap_ok(a.grad_norm.present && a.grad_norm.nclasses ==
	    (size_t)a.mesh.world, "every rank clips by a norm of its own "
	    "(%zu classes of %d ranks)", a.grad_norm.nclasses, a.mesh.world);
	per_rank = (double)a.arena.used_bytes / (double)a.mesh.world;
	tap_ok(per_rank <= NORM_OWN_BYTES_PER_RANK, "the audit holds at most "
	    "%d bytes per rank, the norm's findings one message each (%.1f)",
	    NORM_OWN_BYTES_PER_RANK, per_rank);
	audit_free(&a);
	sym_context_free(&ctx);
	config_list_free(&list);
}

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
	norm_findings_kept();
	return tap_done();
}
