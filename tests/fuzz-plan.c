/*
 * Deterministic fuzzing of a plan: step's factor (planexpr.c, TAP).
 *
 * Expressions built from the grammar's own tokens and from junk (every
 * size, digits, operators, parentheses, spaces, bytes that are none of
 * these) go through plan_expr_eval with every size 1 and with large
 * ones.  It must never crash, report an error at an offset inside the
 * text, agree with itself on a second reading, and, with every size 1,
 * accept whatever it accepts with the real sizes unless that overflowed:
 * the load-time reading finds every error that does not depend on them.
 * The plan: section's YAML goes through fuzz-config's mutations.
 *
 * Then plans built from whole steps (every operation, group, buffer,
 * sub-dimension, loss term, activation and selector, good and bad) on a
 * few meshes go through the loader and the model: the loader takes or
 * refuses each
 * without a crash; every collective of a plan the model accepts runs
 * over a group the size of its buffer's shards (the numeric engine's
 * collectives stop on any other, fatalx); and a plan explain --plan
 * writes back (planwrite.c) reads back as the very same steps.  Every
 * declaration of an activation that some model takes (a duplicated
 * mixer's input, a tp-masked block's router scores and experts' input,
 * the scores detached, the output layer's input) runs in some plan.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rational.h"
#include "base/xmalloc.h"
#include "config/load.h"
#include "config/planexpr.h"
#include "model/layout.h"
#include "model/planwrite.h"
#include "model/syncplan.h"
#include "symbolic/context.h"
#include "fuzz-text.h"
#include "tap.h"

#define CASES	4000

static const char *const tokens[] = {
	"dp", "cp", "pp", "tp", "ep", "etp", "edp", "vpp", "dp_shard",
	"dp_replicate", "micro_batches", "0", "1", "2", "7", "1000000000",
	"1000000001", "08", "*", "/", "(", ")", " ", "\t", "-", "+", ".",
	"Dp", "\xff", "\0", "//", "((", "))", "micro", "_",
};
#define NTOKENS	(sizeof(tokens) / sizeof(tokens[0]))

/*
 * Enough that each declaration of an activation (wanted_declares below)
 * runs in a few plans, not one.
 */
#define STEP_CASES	6000

static const char *const meshes[] = {
	"mesh: {dp: 2, pp: 2}\nmodel: {tie_embeddings: true}\n"
	"training: {distributed_optimizer: true}\n",
	"mesh: {dp: 2, tp: 4, ep: 2, etp: 2}\n"
	"model: {moe: {experts: 2, top_k: 1}}\n"
	"training: {sequence_parallel: true, distributed_optimizer: true}\n",
	"mesh: {dp: 4, tp: 2}\nmodel: {moe: {experts: 4, top_k: 1}}\n"
	"layout: {dp_engine: fsdp2}\n",
	"mesh: {dp: 2, cp: 2, ep: 2}\nmodel: {mtp: 1, moe: {experts: 4, "
	"top_k: 2, aux_loss_coeff: \"0.01\"}}\n",
	"mesh: {dp: 2, tp: 2}\nmodel: {duplicated_mixer: true}\n"
	"training: {sequence_parallel: true}\n",
	/*
	 * Experts masked on the tp group (ep is tp, etp 1), and a
	 * duplicated mixer, without dp: a plan needs no preset to load.
	 */
	"mesh: {tp: 2, ep: 2, etp: 1}\nmodel: {moe: {experts: 4, "
	"top_k: 2, ep_on: tp-mask}}\n",
	"mesh: {tp: 4}\nmodel: {duplicated_mixer: true}\n",
	"mesh: {pp: 2, tp: 2, ep: 2}\nmodel: {duplicated_mixer: true, "
	"moe: {experts: 4, top_k: 1, ep_on: tp-mask}}\n"
	"training: {sequence_parallel: true}\n",
};
#define NMESHES	(sizeof(meshes) / sizeof(meshes[0]))

/*
 * The operations and keys of a step, those that can be right first (the
 * first NGOOD_*), then those the loader always refuses; three picks in
 * four take from the first, or too few plans would load.
 */
static const char *const step_ops[] = {
	"preset", "scale: 1/dp", "scale: 2", "all-reduce: dp",
	"all-reduce: tp", "all-reduce: edp", "all-reduce: embedding",
	"all-reduce: pp", "reduce-scatter: dp", "reduce-scatter: edp",
	"reduce-scatter: tp", "reduce-scatter: dp_shard",
	"reduce-scatter: efsdp", "all-gather: dp", "all-gather: dp_shard",
	"all-gather: tp", "to-partial: tp", "declare: replicate",
	"gather-loss: dp", "gather-loss: cp", "gather-loss: tp",
	"all-reduce: [cp, tp]", "all-reduce: [dp, tp]",
	"all-reduce: [edp, ep, etp]", "all-reduce: [pure-dp, cp]",
	"gather-loss: [cp, tp]",
	/*
	 * Declarations of activations, which take no other key, so that
	 * some load (each needs its model: the meshes above have them).
	 */
	"declare: replicate\n    activation: output",
	"declare: partial\n    activation: output",
	"declare: partial\n    activation: mixer-input",
	"declare: replicate\n    activation: mixer-input",
	"declare: partial\n    activation: router-scores",
	"declare: partial\n    activation: experts-input",
	"declare: detached\n    activation: router-scores",
	"all-gather: pp", "to-partial: dp", "reduce-scater: dp",
	"all-gather: [dp]", "declare: partial", "gather-loss: pp",
	"gather-los: dp", "all-reduce: [pp, tp]", "all-reduce: [dp, cp]",
	"all-reduce: [tp, ep]", "all-reduce: []", "reduce-scatter: [cp, tp]",
	"all-reduce: [[tp]]", "declare: detached",
	"declare: detached\n    activation: output",
	"declare: replicate\n    activation: router-scores",
	"declare: partial\n    activation: experts-input\n    params: \"*\"",
};
#define NGOOD_OPS	33
static const char *const step_keys[] = {
	"average: true", "average: false", "buffer: dense", "buffer: expert",
	"buffer: dense", "replicate: etp", "replicate: slices",
	"replicate: [slices, etp]", "params: \"*norm*\"",
	"params: [embedding.weight, output.weight]",
	"params: \"*.router.weight\"", "params: \"*\"", "stages: [1]",
	"stages: 0", "term: main", "term: aux", "term: mtp",
	"autograd: false", "autograd: true", "activation: output",
	"buffer: dnese", "buffer: [dense]", "replicate: [etp, etp]",
	"replicate: []", "params: nothing", "term: axu", "term: [aux]",
	"autograd: maybe", "activation: outptu", "activation: [output]",
	"activation: mixer-input", "activation: router-scores",
	"activation: experts-input",
};
#define NGOOD_KEYS	20
#define NOPS	(sizeof(step_ops) / sizeof(step_ops[0]))
#define NKEYS	(sizeof(step_keys) / sizeof(step_keys[0]))

/*
 * The declarations of activations the model accepts somewhere (the
 * loader's refusals, plan.c): each must run in some plan of the stream,
 * so that the meshes and words above keep reaching it.
 */
static const struct {
	int	 declare;	/* PLAN_DECLARE_* */
	int	 activation;	/* PLAN_ACTIVATION_* */
} wanted_declares[] = {
	{ PLAN_DECLARE_REPLICATE, PLAN_ACTIVATION_OUTPUT },
	{ PLAN_DECLARE_PARTIAL, PLAN_ACTIVATION_OUTPUT },
	{ PLAN_DECLARE_PARTIAL, PLAN_ACTIVATION_MIXER_INPUT },
	{ PLAN_DECLARE_REPLICATE, PLAN_ACTIVATION_MIXER_INPUT },
	{ PLAN_DECLARE_PARTIAL, PLAN_ACTIVATION_ROUTER_SCORES },
	{ PLAN_DECLARE_PARTIAL, PLAN_ACTIVATION_EXPERTS_INPUT },
	{ PLAN_DECLARE_DETACHED, PLAN_ACTIVATION_ROUTER_SCORES },
};
#define NWANTED	(sizeof(wanted_declares) / sizeof(wanted_declares[0]))

static const char *
pick_word(const char *const *words, size_t good, size_t all)
{
	return words[pick(4) > 0 ? pick(good) : pick(all)];
}

static void
append(struct text *t, const char *s)
{
	text_insert(t, t->len, s, strlen(s));
}

/* Every collective over a group of as many members as its shards. */
static bool
shards_fit(const struct sym_context *ctx)
{
	const struct model *m = &ctx->model;
	const struct sync_step *s;
	int	 k, p, n;

	for (k = 0; k < ctx->plan.nsteps; k++) {
		s = &ctx->plan.steps[k];
		if (s->op != SYNC_REDUCE_SCATTER && s->op != SYNC_ALL_GATHER)
			continue;
		n = mesh_group_size(&m->mesh, s->group);
		for (p = 0; p < m->nparams; p++)
			if (syncplan_touches(s, m, p) &&
			    layout_buffer_shards(m, layout_buffer_of(m, p)) != n)
				return false;
	}
	return true;
}

static bool
same_step(const struct model *m, const struct sync_step *a,
    const struct sync_step *b)
{
	int	 p;

	if (a->op != b->op || a->target != b->target ||
	    (a->op != SYNC_SCALE && a->group != b->group) ||
	    !q_equal(a->scale, b->scale) || a->average != b->average ||
	    a->term != b->term ||
	    (a->target == TARGET_BUFFER && a->buffer != b->buffer))
		return false;
	if (a->op == SYNC_MASK_REPLICAS &&
	    !pl_equal(a->replicate, b->replicate))
		return false;
	for (p = 0; a->target == TARGET_PARAMS && p < m->nparams; p++)
		if (a->params[p] != b->params[p])
			return false;
	return true;
}

/*
 * Write ctx's plan as explain --plan does, under mesh, and read it back:
 * 1 when it gives the same steps, 0 when not, -1 when it cannot be
 * written.
 */
static int
round_trip(const char *mesh, const struct sym_context *ctx)
{
	struct config_list back;
	struct sym_context ctx2;
	char	*buf = NULL, why[128];
	size_t	 len = 0;
	FILE	*fp = open_memstream(&buf, &len);
	const struct config *c = ctx->model.config;
	int	 k, same, acts = 0;

	for (k = 0; k < c->nplan; k++)
		acts += c->plan[k].activation >= 0;
	fprintf(fp, "%splan:%s\n", mesh, ctx->plan.nsteps || acts ? "" :
	    " []");
	for (k = 0; k < ctx->plan.nsteps; k++)
		if (planwrite_step(fp, &ctx->plan.steps[k], &ctx->model, why,
		    sizeof why) == -1) {
			fclose(fp);
			free(buf);
			return -1;
		}
	/* A declaration of an activation runs no step: written as read. */
	for (k = 0; k < c->nplan; k++)
		if (c->plan[k].activation >= 0)
			planwrite_item(fp, &c->plan[k]);
	fclose(fp);
	memset(&back, 0, sizeof back);
	if (cfg_load_quietly(NULL, "round-trip", buf, len, &back) == -1 ||
	    back.n != 1) {
		tap_diag("written back, not read: %s\n%s", back.error ?
		    back.error : "", buf);
		free(buf);
		config_list_free(&back);
		return 0;
	}
	sym_context_build(&ctx2, &back.v[0]);
	same = ctx2.plan.nsteps == ctx->plan.nsteps &&
	    ctx2.plan.refusal == NULL &&
	    pl_output_boundary_replicate(&ctx2.model) ==
	    pl_output_boundary_replicate(&ctx->model);
	for (k = 0; same && k < ctx->plan.nsteps; k++)
		same = same_step(&ctx->model, &ctx->plan.steps[k],
		    &ctx2.plan.steps[k]);
	if (!same)
		tap_diag("read back as other steps:\n%s", buf);
	sym_context_free(&ctx2);
	config_list_free(&back);
	free(buf);
	return same;
}

/* Plans of whole steps through the loader and the model (see above). */
static void
fuzz_steps(void)
{
	struct text	 t = { NULL, 0, 0 };
	struct config_list list;
	struct sym_context ctx;
	struct cfg_mark	 at;
	enum cfg_key	 blame;
	char		 why[CFG_WHY_SIZE];
	const char	*mesh;
	int		 c, i, j, n, loaded = 0, accepted = 0, bad = 0, rt;
	int		 declared = 0, ran[NWANTED] = { 0 }, missed = 0, fewest;
	size_t		 w;

	fuzz_seed(0x73746570);
	for (c = 0; c < STEP_CASES; c++) {
		t.len = 0;
		mesh = meshes[pick(NMESHES)];
		append(&t, mesh);
		append(&t, "plan:\n");
		n = 1 + pick(4);
		for (i = 0; i < n; i++) {
			append(&t, "  - ");
			append(&t, pick_word(step_ops, NGOOD_OPS, NOPS));
			append(&t, "\n");
			for (j = pick(3); j > 0; j--) {
				append(&t, "    ");
				append(&t, pick_word(step_keys, NGOOD_KEYS,
				    NKEYS));
				append(&t, "\n");
			}
		}
		memset(&list, 0, sizeof list);
		if (cfg_load_quietly(NULL, "fuzz", t.s, t.len, &list) == -1) {
			if (list.error == NULL) {
				bad++;
				tap_diag("case %d: refused without a message", c);
			}
			config_list_free(&list);
			continue;
		}
		loaded++;
		if (sym_unauditable_at(&list.v[0], &blame, &at, why,
		    sizeof why) != NULL) {
			config_list_free(&list);
			continue;
		}
		accepted++;
		for (i = 0; i < list.v[0].nplan; i++)
			for (w = 0; w < NWANTED; w++)
				ran[w] += list.v[0].plan[i].op == PLAN_DECLARE &&
				    list.v[0].plan[i].declare ==
				    wanted_declares[w].declare &&
				    list.v[0].plan[i].activation ==
				    wanted_declares[w].activation;
		sym_context_build(&ctx, &list.v[0]);
		declared += pl_output_boundary_replicate(&ctx.model);
		if (!shards_fit(&ctx)) {
			bad++;
			tap_diag("case %d: a collective over a group of another "
			    "size than its shards", c);
		}
		rt = round_trip(mesh, &ctx);
		if (rt != 1) {
			bad++;
			tap_diag("case %d: %s", c, rt == -1 ? "a step with no "
			    "plan: spelling" : "written back, not the same");
		}
		sym_context_free(&ctx);
		config_list_free(&list);
	}
	tap_ok(bad == 0, "%d plans of whole steps: refused with a message or "
	    "run over their shards' groups, and written back as the same "
	    "steps", STEP_CASES);
	tap_ok(loaded > STEP_CASES / 20 && accepted > STEP_CASES / 50 &&
	    declared > 0, "some load (%d) and some run (%d), some with the "
	    "output layer's input declared Replicate (%d)", loaded, accepted,
	    declared);
	for (w = 0; w < NWANTED; w++)
		if (ran[w] == 0) {
			missed++;
			tap_diag("no plan ran declare: %s of activation: %s",
			    cfg_plan_declare_words[wanted_declares[w].declare],
			    cfg_plan_activation_words[
			    wanted_declares[w].activation]);
		}
	for (w = 1, fewest = ran[0]; w < NWANTED; w++)
		if (ran[w] < fewest)
			fewest = ran[w];
	tap_ok(missed == 0, "every declaration of an activation the model "
	    "takes runs in some plan (%zu kinds, the rarest in %d)", NWANTED,
	    fewest);
	free(t.s);
}

int
main(void)
{
	struct text	 t = { NULL, 0, 0 };
	int64_t		 ones[PLAN_NAME__COUNT], big[PLAN_NAME__COUNT];
	struct rational	 a, b;
	char		 why[256];
	size_t		 at, at2, n, k;
	int		 i, c, ra, rb, rc, bad = 0, accepted = 0;

	for (i = 0; i < PLAN_NAME__COUNT; i++) {
		ones[i] = 1;
		big[i] = (int64_t)1 << (10 + 2 * i);
	}
	fuzz_seed(0x706c616e);
	for (c = 0; c < CASES; c++) {
		t.len = 0;
		n = 1 + pick(12);
		for (k = 0; k < n; k++) {
			const char *w = tokens[pick(NTOKENS)];

			text_insert(&t, t.len, w, w[0] == '\0' ? 1 : strlen(w));
		}
		at = at2 = 0;
		ra = plan_expr_eval(t.s, t.len, NULL, &a, &at, why,
		    sizeof why);
		rb = plan_expr_eval(t.s, t.len, ones, &b, &at2, why,
		    sizeof why);
		if (ra != rb || (ra == -1 && at != at2) ||
		    (ra == 0 && !q_equal(a, b)) || (ra == -1 && at > t.len)) {
			bad++;
			tap_diag("case %d: NULL sizes and sizes 1 disagree", c);
			continue;
		}
		rc = plan_expr_eval(t.s, t.len, big, &b, &at2, why,
		    sizeof why);
		if (ra == 0)
			accepted++;
		/* Only an overflow is an error that the sizes bring. */
		if (ra == 0 && rc == -1 && strstr(why, "does not fit") == NULL) {
			bad++;
			tap_diag("case %d: an error only with large sizes: %s",
			    c, why);
		}
		if (ra == -1 && rc == 0) {
			bad++;
			tap_diag("case %d: an error with sizes 1 only", c);
		}
	}
	tap_ok(bad == 0, "%d expressions: no crash, offsets inside, the "
	    "load-time reading finds every error but overflow", CASES);
	tap_ok(accepted > CASES / 50, "some expressions are accepted (%d)",
	    accepted);
	free(t.s);
	fuzz_steps();
	return tap_done();
}
