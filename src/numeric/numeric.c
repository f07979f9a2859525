/*
 * The numeric audit (SPEC section 8): the model of model.h run for real on
 * the mesh ranks this process hosts, every collective and every pipeline
 * transfer a round of messages between MPI processes (transport.h), then
 * the sync plan executed on real gradient buffers, then every rank's values
 * hashed and compared with a single-rank reference on process 0.
 *
 * The engine is layered, one file a layer, each using those before it:
 *
 *   numvalue.c	one number type for the three numerics, and tensors;
 *   numdata.c	weights and inputs as pure functions of (seed, indices);
 *   collective.c messages, rounds of the transport or a loopback for the
 *		reference, and the collectives over mesh groups;
 *   numengine.c the ranks this process hosts and their state;
 *   kernels.c	forward and backward of every op kind, in a table (the
 *		kernels in kernels-dense.c, kernels-comm.c, kernels-moe.c);
 *   interpret.c every process walks the same global sequence of ops
 *		(forward over stages 0..pp-1, backward over pp-1..0), so the
 *		rounds of all processes line up: a process with no rank on the
 *		active stage takes part with an empty outbox;
 *   numsync.c	the steps of the sync plan, as syncplan.h defines them and
 *		symbolic.c executes them on expressions;
 *   reference.c the same interpreter on the single-rank model, once per
 *		dp micro-batch;
 *   numcheck.c	hashes, reference verdicts and the self-check against the
 *		symbolic audit (process 0);
 *
 * and this file drives them, and bounds their size.
 *
 * Test hooks, environment variables the test suite sets to exercise the
 * failure paths of `gradaudit run` (never set them otherwise); r is a mesh
 * rank and the process hosting it acts:
 *   GRADAUDIT_TEST_KILL_RANK=r	 raise SIGKILL at the start of backward;
 *   GRADAUDIT_TEST_HANG_RANK=r	 sleep forever there;
 *   GRADAUDIT_TEST_CORRUPT_RANK=r add 1 to the first element of the rank's
 *				 first synced gradient, which the self-check
 *				 must report (exit 3);
 *   GRADAUDIT_TEST_SHIFT_PADDING=1 shift the token ids of every padded
 *				 token by one (kernels-dense.c): a padded token
 *				 contributes nothing, so no value may change;
 *   GRADAUDIT_TEST_NUDGE_RANK=r move that element to the next float (in
 *				 float numerics), a difference within rounding
 *				 that only the bit-for-bit comparison of
 *				 replicas must report (exit 3);
 *   GRADAUDIT_TEST_TRACE_DIR=dir write the step as a trace and its
 *				 reference into dir (tracewrite.h), with
 *				 --numerics float64, for gradaudit compare to
 *				 be held against the symbolic engine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/exitcode.h"
#include "base/progress.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/stale.h"
#include "model/syncplan.h"
#include "numeric/interpret.h"
#include "numeric/numcheck.h"
#include "numeric/numdata.h"
#include "numeric/numengine.h"
#include "numeric/numeric.h"
#include "numeric/numsync.h"
#include "numeric/reference.h"
#include "numeric/tracewrite.h"
#include "numeric/transport.h"
#include "symbolic/audit.h"
#include "symbolic/context.h"
#include "symbolic/lincomb.h"
#include "symbolic/measure.h"

/*
 * The most values (8 bytes each) the numeric audit holds for one mesh
 * rank, and for all of them together: process 0 also gathers every rank's
 * gradients and runs the reference, so the mesh total bounds its memory
 * (512 MiB).  The test cases need a few thousand values a rank.
 */
#define NUM_MAX_RANK_VALUES	((int64_t)1 << 24)
#define NUM_MAX_MESH_VALUES	((int64_t)1 << 26)


/*
 * The size limit.  A rank of stage s holds, for every parameter of s, its
 * weights, its local gradient and a copy of it (the atoms), and for every
 * slot of the stage program a value and its gradient, tokens rows of at
 * most the widest dimension but the vocabulary, which only the logits
 * have; an expert op also keeps the items it routes
 * and those it receives from its ep group, each a row of hidden plus two
 * of expert_ffn.  An estimate from above, in int64 without overflow: a
 * valid config has at most 2^40 elements a parameter and 2^20 tokens.
 */
static int64_t
stage_values(const struct model *m, int stage)
{
	const struct config		*cfg = m->config;
	const struct stage_program	*sp = &m->stages[stage];
	int64_t				 n = 0, width, routed;
	int				 k;

	for (k = 0; k < m->nparams; k++)
		if (m->params[k].stage == stage)
			n += (3 + model_atoms_per_rank(m, &m->params[k]) +
			    (model_per_source(m, &m->params[k]) ?
			    m->mesh.ep : 0)) * m->params[k].local_elems;
	width = cfg->model.hidden;
	if (cfg->model.ffn > width)
		width = cfg->model.ffn;
	if (cfg->model.has_moe && cfg_shared_expert_ffn(cfg) > width)
		width = cfg_shared_expert_ffn(cfg);
	if (cfg->model.has_moe && cfg->model.moe.experts > width)
		width = cfg->model.moe.experts;
	n += 2 * (int64_t)sp->nslots * m->tokens * width;
	/*
	 * Only the logits are as wide as the vocabulary: a 50257-token
	 * vocabulary counted in every slot put GPT-3's shape past the limit.
	 */
	for (k = 0; k < sp->nops; k++)
		if (sp->ops[k].kind == OP_OUTPUT)
			n += 2 * (int64_t)m->tokens * (cfg_padded_vocab(cfg) /
			    m->mesh.tp);
	if (!cfg->model.has_moe)
		return n;
	routed = (int64_t)m->tokens * cfg->model.moe.top_k;
	for (k = 0; k < sp->nops; k++)
		if (sp->ops[k].kind == OP_EXPERTS)
			n += routed * cfg->model.hidden + routed *
			    m->mesh.ep * (cfg->model.hidden +
			    2 * (int64_t)cfg->model.moe.expert_ffn);
	return n;
}

/* The values the numeric audit holds on its fullest rank and over the mesh. */
static void
numeric_sizes(const struct config *cfg, int64_t *rank_max, int64_t *total,
    int *world)
{
	struct model	 m;
	int64_t		 n;
	int		 s, per_stage;

	model_build(&m, cfg);
	per_stage = m.mesh.world / m.mesh.pp;
	*rank_max = *total = 0;
	*world = m.mesh.world;
	for (s = 0; s < m.mesh.pp; s++) {
		n = stage_values(&m, s);
		if (n > *rank_max)
			*rank_max = n;
		/* Past the rank limit the total is never needed. */
		if (n <= NUM_MAX_RANK_VALUES)
			*total += n * per_stage;
	}
	model_free(&m);
}

const char *
numeric_too_big(const struct config *cfg, char *msg, size_t len)
{
	int64_t		 rank_max, total;
	int		 world;

	numeric_sizes(cfg, &rank_max, &total, &world);
	if (rank_max > NUM_MAX_RANK_VALUES) {
		snprintf(msg, len, "the numeric audit needs %lld "
		    "values per rank; at most %lld are supported (use "
		    "gradaudit check, or smaller model sizes)",
		    (long long)rank_max, (long long)NUM_MAX_RANK_VALUES);
		return msg;
	}
	if (total > NUM_MAX_MESH_VALUES) {
		snprintf(msg, len, "the numeric audit needs %lld "
		    "values over its %d ranks; at most %lld are supported "
		    "(use gradaudit check, or a smaller mesh or model)",
		    (long long)total, world,
		    (long long)NUM_MAX_MESH_VALUES);
		return msg;
	}
	return NULL;
}

int64_t
numeric_values(const struct config *cfg)
{
	struct model	 m;
	int64_t		 n, total = 0;
	int		 s, per_stage;

	model_build(&m, cfg);
	per_stage = m.mesh.world / m.mesh.pp;
	for (s = 0; s < m.mesh.pp; s++) {
		n = stage_values(&m, s);
		/* Saturate: a stage past the limit is past it whatever else. */
		if (n > INT64_MAX / per_stage || total > INT64_MAX - n * per_stage)
			total = INT64_MAX;
		else
			total += n * per_stage;
	}
	model_free(&m);
	return total;
}

const char *
numeric_skip_reason(const struct config *cfg, char *msg, size_t len)
{
	int64_t		 rank_max, total;
	int		 world;

	numeric_sizes(cfg, &rank_max, &total, &world);
	if (rank_max > NUM_MAX_RANK_VALUES)
		snprintf(msg, len, "needs %lld values per rank, "
		    "limit %lld", (long long)rank_max,
		    (long long)NUM_MAX_RANK_VALUES);
	else if (total > NUM_MAX_MESH_VALUES)
		snprintf(msg, len, "needs %lld values over %d ranks, "
		    "limit %lld", (long long)total, world,
		    (long long)NUM_MAX_MESH_VALUES);
	else
		return NULL;
	return msg;
}

/*
 * The audit.
 */

/* GRADAUDIT_TEST_TRACE_DIR: the step as a trace, on process 0. */
static void
test_trace(enum arith arith, const struct model *m, const struct gathered *gv,
    union num **ref, const struct audit *audit)
{
	const char	*dir = getenv("GRADAUDIT_TEST_TRACE_DIR");
	char		 why[256];

	if (dir == NULL || *dir == '\0')
		return;
	if (arith != ARITH_FLOAT64)
		fatalx("GRADAUDIT_TEST_TRACE_DIR needs --numerics float64");
	if (trace_write_step(dir, m, gv, ref, audit, why, sizeof why) != 0)
		fprintf(stderr, "gradaudit: trace not written: %s\n", why);
}

/* What the buffer hook (interpret.h) needs to run the plan's steps. */
struct plan_run {
	const struct layout	*layout;
	const struct sync_plan	*plan;
	struct progress_count	*pc;
};

static void
plan_hook(struct engine *eng, int mb, bool before, void *arg)
{
	struct plan_run	*pr = arg;

	run_sync(eng, pr->layout, pr->plan, mb, before, pr->pc);
}

/* How many steps the plan runs, for the progress count. */
static int64_t
plan_runs(const struct sync_plan *plan)
{
	int64_t	 n = 0;
	int	 s;

	for (s = 0; s < plan->nsteps; s++)
		n += plan->per_micro_batch ?
		    __builtin_popcount(plan->steps[s].micro_batches) :
		    plan->steps[s].op != SYNC_RESET;
	return n;
}

int
numeric_audit(const struct sym_context *ctx, struct transport *transport,
    const struct numeric_options *options, struct audit *audit)
{
	const struct model		*m = &ctx->model;
	struct weight_source		 ws;
	struct engine			 eng;
	struct gathered			 gv;
	struct progress_count		 pc = { false, 0 };
	struct plan_run			 pr;
	union num			***atoms, **ref = NULL, *norm2;
	int				*key, k, i, status = EXIT_OK;
	int64_t				 total;
	bool				 root;

	if (transport->world != m->mesh.world)
		fatalx("numeric: transport of %d ranks for a mesh of %d",
		    transport->world, m->mesh.world);
	root = transport->proc == transport_host_of(transport, 0);

	ws.seed = options->seed;
	ws.arith = options->arith;
	ws.scale = xcalloc((size_t)m->nlogical, sizeof(*ws.scale));
	for (k = 0; k < m->nlogical; k++)
		ws.scale[k] =
		    weight_scale(&m->params[m->logical[k].instance[0]]);
	key = xcalloc((size_t)m->nparams, sizeof(*key));
	for (k = 0; k < m->nparams; k++)
		key[k] = m->params[k].logical;

	if (root && options->progress) {
		for (total = 0, k = 0; k < m->mesh.pp; k++)
			total += 2 * m->stages[k].nops;
		total *= m->loss.micro_batches * (1 + m->loss.mtp +
		    (m->loss.aux_source >= 0));
		total += plan_runs(&ctx->plan) + m->loss.chunks +
		    (int64_t)audit->nparams;
		progress_start("numeric audit", total);
		pc.on = true;
	}

	engine_init(&eng, m, transport, transport->local, transport->nlocal,
	    &ws, key);
	/*
	 * The atoms: every micro-batch's local gradient, before the sync.
	 * The plan runs on the buffer around each micro-batch's backward
	 * when its schedule says so (syncplan.h), else once after the last.
	 */
	pr.layout = &ctx->layout;
	pr.plan = &ctx->plan;
	pr.pc = &pc;
	atoms = run_step(&eng, &pc, ctx->plan.per_micro_batch ? plan_hook :
	    NULL, &pr);
	if (!ctx->plan.per_micro_batch)
		run_sync(&eng, &ctx->layout, &ctx->plan,
		    ctx->plan.micro_batch_count - 1, false, &pc);
	test_corruption(&eng);
	norm2 = norm_on_ranks(&eng, ctx);

	memset(&gv, 0, sizeof(gv));
	gather_values(&eng, atoms, &gv);
	if (root) {
		ref = reference_gradients(m, &ws, &pc);
		if (numeric_check(options->arith, m, &gv, ref, norm2, audit,
		    &pc) > 0)
			status = EXIT_RUNTIME;
		audit->numeric = true;
		test_trace(options->arith, m, &gv, ref, audit);
		/*
		 * The norm's numeric verdict is grad_norm.numeric_correct.
		 * Rows no update reaches show in no value: the verdict takes
		 * them from the model layer, as the symbolic one does.
		 */
		audit->numeric_correct = numeric_verdict(audit) &&
		    stale_rows_find(m, &ctx->layout, NULL) == 0;
		audit->arith = options->arith;
		audit->procs = transport->nprocs;
		/* A lossy boundary's effect, from the numbers (issue 23). */
		measure_effects_numeric(audit);
		for (k = 0; k < m->nlogical; k++)
			free(ref[k]);
		free(ref);
	}
	if (pc.on)
		progress_end();

	free(norm2);
	gathered_free(&eng, &gv, m->mesh.world);
	for (i = 0; i < eng.nranks; i++) {
		for (k = 0; k < m->nparams; k++)
			free(atoms[i][k]);
		free(atoms[i]);
	}
	free(atoms);
	engine_free(&eng);
	free(key);
	free(ws.scale);
	return transport_max_int(transport, status);
}
