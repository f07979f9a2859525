/*
 * TAP unit test of an audit that stops at GRADAUDIT_MAX_MEMORY and
 * returns (sym_context.over_limit_returns), as the fix search's and run
 * --shrink's candidates do: one past the limit exited 2 by itself,
 * throwing away check's verdict of the config, which fit, or leaving
 * run's process 0 gone while the others waited.  The run past the limit
 * here is Megatron-LM #844's wrong order, whose ranks hold values of
 * their own that the distributed optimizer's shards then sum: the
 * configs the fix search tries never take that turn from a config that
 * fits, so the command-line tests (tests/limits.test) reach the norm's
 * count alone.  What the stopped audit took must be freed: the sanitizer
 * build (tests/sanitizers.test) and valgrind run this too.
 *
 * run --shrink's search (shrink.h) goes from the large to the small, so
 * that its candidates fit where the config did; the search here is told
 * to keep the verdict of the config's correct twin, which none of them
 * has, and so audits them all, the largest past a limit set below them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "config-text.h"
#include "config/config.h"
#include "numeric/shrink.h"
#include "symbolic/audit.h"
#include "symbolic/context.h"
#include "symbolic/run.h"
#include "symbolic/symbolic.h"
#include "tap.h"

/* Megatron-LM #844 on 2,048 ranks: the tied weight summed in a wrong order. */
static const char wrong_order[] =
    "mesh: {dp: 1024, pp: 2}\n"
    "model: {tie_embeddings: true}\n"
    "training: {distributed_optimizer: true}\n"
    "sync: {embedding_grad: after-dp}\n"
    "loss: {valid_tokens: all}\n";
/* Its fix: the tied all-reduce before the data-parallel one. */
static const char right_order[] =
    "mesh: {dp: 1024, pp: 2}\n"
    "model: {tie_embeddings: true}\n"
    "training: {distributed_optimizer: true}\n"
    "sync: {embedding_grad: before-dp}\n"
    "loss: {valid_tokens: all}\n";

/* What run_check_memory counts. */
static size_t
counted(const struct sym_run *run)
{
	size_t	 n;
	int	 l;

	n = run->arena->used_bytes + run->table.cap *
	    (sizeof *run->table.slot + sizeof *run->table.hash);
	for (l = 0; l < run->model->nlogical; l++)
		n += run->seg_arenas[l].used_bytes;
	return n;
}

/* What run_check_memory counts, at its most after any step. */
static void
counted_peak(void *arg, const struct sym_run *run, int step)
{
	size_t	*peak = arg, n = counted(run);

	(void)step;
	if (n > *peak)
		*peak = n;
}

/* #844 summed per micro-batch: the second one's backward adds to the first. */
static const char wrong_order_twice[] =
    "mesh: {dp: 64, pp: 2}\n"
    "model: {tie_embeddings: true}\n"
    "training: {distributed_optimizer: true, micro_batches: 2}\n"
    "sync: {embedding_grad: after-dp}\n"
    "loss: {valid_tokens: all}\n";

/*
 * What a step hook saw: the count at its last call before the second
 * micro-batch's backward (step -1), and whether any call was of a run
 * already stopped.
 */
struct watch {
	int	 backwards;
	size_t	 last, before_second;
	bool	 saw_stopped;
};

static void
watch_run(void *arg, const struct sym_run *run, int step)
{
	struct watch *w = arg;

	if (run->stopped)
		w->saw_stopped = true;
	if (step == -1 && ++w->backwards == 2)
		w->before_second = w->last;
	w->last = counted(run);
}

/*
 * A step hook (explain's, sweep's) reads the run's values: past the limit
 * they are no audit.  Run per micro-batch, a sum of the second
 * micro-batch's backward past the limit stopped the run, and the hook was
 * still called on it as the backward (step -1).  The limit here is what
 * the run held before that backward, which its first sum goes past.
 */
static void
hook_after_stop(void)
{
	struct config_list	 list;
	struct sym_context	 ctx;
	struct audit		 a;
	struct watch		 w;
	bool			 done;

	memset(&list, 0, sizeof list);
	if (config_text_load(wrong_order_twice, &list) != 0) {
		tap_ok(false, "the two-micro-batch config loads");
		config_list_free(&list);
		return;
	}
	if (setenv("GRADAUDIT_TEST_PER_MICRO_BATCH", "1", 1) != 0) {
		tap_skip("setenv failed", "a hook after the run stopped");
		config_list_free(&list);
		return;
	}
	sym_context_build(&ctx, &list.v[0]);
	unsetenv("GRADAUDIT_TEST_PER_MICRO_BATCH");
	ctx.over_limit_returns = true;
	memset(&w, 0, sizeof w);
	done = sym_audit(&ctx, &a, watch_run, &w);
	audit_free(&a);
	if (!done || w.backwards != 2) {
		tap_ok(false, "the config runs per micro-batch, two backwards "
		    "(%d)", w.backwards);
		sym_context_free(&ctx);
		config_list_free(&list);
		return;
	}
	ctx.memory_limit = (int64_t)w.before_second;
	memset(&w, 0, sizeof w);
	done = sym_audit(&ctx, &a, watch_run, &w);
	tap_ok(!done && w.backwards <= 2 && !w.saw_stopped, "a run stopped "
	    "at the second micro-batch's backward is not shown to the step "
	    "hook (%d backwards seen, %s)", w.backwards, w.saw_stopped ?
	    "one of a stopped run" : "none stopped");
	audit_free(&a);
	sym_context_free(&ctx);
	config_list_free(&list);
}

/*
 * The shrink search for cfg towards the verdict of twin, none of whose
 * candidates keeps it, under GRADAUDIT_MAX_MEMORY of 2 MiB: above the
 * size estimate of each candidate, below the run of the largest, whose
 * ranks hold values of their own.
 */
static void
shrink_past_limit(const struct config *cfg, const char *twin)
{
	struct config_list	 list;
	struct sym_context	 ctx;
	struct shrink_result	 r;
	struct audit		 want;

	memset(&list, 0, sizeof list);
	if (config_text_load(twin, &list) != 0) {
		tap_ok(false, "the right-order config loads");
		config_list_free(&list);
		return;
	}
	sym_context_build(&ctx, &list.v[0]);
	sym_audit(&ctx, &want, NULL, NULL);
	sym_context_free(&ctx);
	if (setenv("GRADAUDIT_MAX_MEMORY", "2", 1) != 0) {
		tap_skip("setenv failed", "the shrink search past the limit");
		audit_free(&want);
		config_list_free(&list);
		return;
	}
	shrink_search(cfg, &want, 60.0, &r);
	unsetenv("GRADAUDIT_MAX_MEMORY");
	tap_ok(r.over_limit > 0 && r.over_limit < r.tried && !r.smaller,
	    "run --shrink goes on past candidates over the limit (%d of %d "
	    "audited), and keeps none", r.over_limit, r.tried);
	audit_free(&want);
	config_list_free(&list);
}

/* Is *a the empty audit a stopped one leaves? */
static bool
empty(const struct audit *a)
{
	return a->nparams == 0 && a->params == NULL && a->nfindings == 0 &&
	    a->findings == NULL && a->arena.used_bytes == 0 &&
	    !a->grad_norm.present;
}

int
main(void)
{
	static const char *const tied[] = { "embedding.weight" };
	struct config_list	 list;
	struct sym_context	 ctx;
	struct arena_cache	 blocks;
	struct audit		 a;
	size_t			 peak = 0;
	bool			 done;
	int			 at;

	memset(&list, 0, sizeof list);
	if (config_text_load(wrong_order, &list) != 0) {
		tap_ok(false, "the wrong-order config loads");
		config_list_free(&list);
		return tap_done();
	}
	arena_cache_init(&blocks);
	sym_context_build(&ctx, &list.v[0]);
	ctx.blocks = &blocks;
	ctx.over_limit_returns = true;

	done = sym_audit(&ctx, &a, counted_peak, &peak);
	tap_ok(done && !a.correct && a.nfindings > 0, "within the default "
	    "limit the audit is done and finds the wrong order (%zu "
	    "findings, %zu bytes at most)", a.nfindings, peak);
	audit_free(&a);

	/* Half of what the run holds at its most: the steps go past it. */
	ctx.memory_limit = (int64_t)peak / 2;
	done = sym_audit(&ctx, &a, NULL, NULL);
	tap_ok(!done, "past the limit, sym_audit returns false, the program "
	    "goes on");
	tap_ok(empty(&a), "and leaves an empty audit (%zu params, %zu "
	    "findings, %zu bytes)", a.nparams, a.nfindings,
	    a.arena.used_bytes);
	audit_free(&a);

	at = sym_audit_param(&ctx, &a, tied, 1);
	tap_ok(at == -2 && empty(&a), "the tied weight audited alone stops "
	    "too: -2, an empty audit (%d)", at);
	audit_free(&a);

	/* The context is the same after: a stop leaves nothing behind. */
	ctx.memory_limit = (int64_t)peak * 2;
	done = sym_audit(&ctx, &a, NULL, NULL);
	tap_ok(done && !a.correct && a.nfindings > 0, "the same context "
	    "audits again within a limit that fits");
	audit_free(&a);

	sym_context_free(&ctx);
	arena_cache_free(&blocks);
	shrink_past_limit(&list.v[0], right_order);
	config_list_free(&list);
	hook_after_stop();
	return tap_done();
}
