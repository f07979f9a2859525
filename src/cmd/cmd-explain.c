/*
 * gradaudit explain CONFIG [PARAM]: the sync plan step by step, with the
 * per-rank expression table of the parameter after every step that touches
 * it, like the three tables of the Megatron-LM #844 report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/exitcode.h"
#include "base/json.h"
#include "base/suggest.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/explain-plan.h"
#include "cmd/output.h"
#include "config/framework.h"
#include "config/plan.h"
#include "model/layout.h"
#include "model/lossnorm.h"
#include "model/lossterm.h"
#include "model/syncplan.h"
#include "report/json-report.h"
#include "report/report.h"
#include "report/text-report.h"
#include "symbolic/atom.h"
#include "symbolic/findings.h"
#include "symbolic/fix.h"
#include "symbolic/gradnorm.h"
#include "symbolic/lincomb.h"
#include "symbolic/meshsum.h"
#include "symbolic/symbolic.h"

struct explain {
	const struct options	*options;
	const struct config	*config;
	struct json		 json;
	bool			*show;		/* per model parameter */
	/*
	 * The rules the audit found at fault: a step is labelled with the bug
	 * it models only when it is one of these, not merely because it can
	 * be buggy.
	 */
	const char		**faulty;
	size_t			 nfaulty;
	struct audit		 layout_audit;	/* mesh only, for the grids */
	struct ms_grouper	*grouper;	/* the hooked run's pieces */
};

/*
 * "g0+g2" for one segment, "[0,128) g3+(g0+g1)/2; [128,256) g3" for more.
 * Relative to the rank (relative), in the check report's mesh-group
 * notation: "sum_dp(self)/64", the same text on every rank that holds the
 * same kind of value, so that the table can fold.
 */
static const char *
segments_text(struct arena *ar, struct ms_grouper *gr,
    const struct atom_space *sp, int rank, const struct segment *sv, int n,
    bool relative)
{
	const struct ms_piece *pieces;
	size_t		 len = 1, off = 0, np;
	const char	**exprs = xcalloc(n, sizeof *exprs);
	char		*out;
	int		 i;

	for (i = 0; i < n; i++) {
		if (relative) {
			pieces = ms_grouper_find(gr, sv[i].value, &np);
			exprs[i] = ms_format(ar, sp, pieces, np, rank);
		} else
			exprs[i] = lc_format(ar, sp, sv[i].value, "g");
		len += strlen(exprs[i]) + 48;
	}
	out = arena_alloc(ar, len);
	for (i = 0; i < n; i++) {
		if (n == 1)
			off += snprintf(out + off, len - off, "%s", exprs[i]);
		else
			off += snprintf(out + off, len - off, "%s[%lld,%lld) %s",
			    i ? "; " : "", (long long)sv[i].lo,
			    (long long)sv[i].hi, exprs[i]);
	}
	free(exprs);
	return out;
}

/*
 * A tied embedding is one table, embedding.weight on the first stage and
 * output.weight on the last, like the Megatron report's pp x dp matrices.
 */
static int
instance_held(const struct model *m, int p, int rank)
{
	int	inst = model_instance_on(m, p, rank);

	return inst >= 0 ? inst : p;
}

static bool
at_fault(const struct explain *ex, const struct sync_step *s)
{
	size_t	 i;

	for (i = 0; i < ex->nfaulty; i++)
		if (strcmp(ex->faulty[i], s->label) == 0)
			return true;
	return false;
}

/* The rules named by the findings of the first pass (op is a rule label). */
static void
collect_faulty(struct explain *ex, const struct audit *a)
{
	size_t	 i;

	ex->faulty = xcalloc(a->nfindings + 1, sizeof *ex->faulty);
	for (i = 0; i < a->nfindings; i++)
		if (a->findings[i].op != NULL)
			ex->faulty[ex->nfaulty++] = xstrdup(a->findings[i].op);
}

static void
param_result_for(const struct model *m, int p, struct param_result *pr)
{
	memset(pr, 0, sizeof *pr);
	pr->name = m->logical[m->params[p].logical].name;
	pr->is_expert = m->params[p].expert;
}

/*
 * Every rank's value, atom by atom as in the Megatron-LM #844 report up to
 * MS_ATOMS_WORLD ranks (and with -v); above, a 4,096-rank table was
 * 64 columns of distinct atoms, so the values are written relative to
 * their rank and identical neighbours fold as in the check report.
 */
/*
 * Under a sharded buffer each rank owns its own elements of a parameter,
 * so relative texts still differ rank by rank in their ranges: dp 128
 * under the distributed optimizer printed a column per owning rank, a
 * line of thousands of characters (issue 24).  When the segments inside
 * the ranges the rank owns all hold one value and those outside another,
 * the cell says so without the ranges ("owned: X; rest: Y"), the same text
 * on every owner, and the owners fold.  NULL when the segments do not
 * split that way, or the rank owns none or all of the parameter.
 */
static const char *
owned_text(struct arena *ar, struct ms_grouper *gr,
    const struct sym_context *ctx, int p, int rank, const struct segment *sv,
    int n)
{
	const struct model *m = &ctx->model;
	int64_t		 used[64][2];
	const char	*in = NULL, *out = NULL, *e, *text;
	const struct ms_piece *pieces;
	size_t		 np, len;
	int		 nused, i, k;
	bool		 inside;

	nused = syncplan_used_ranges(m, &ctx->layout, p, rank, used, 64);
	if (nused == 0 || (nused == 1 && used[0][0] == 0 &&
	    used[0][1] == m->params[p].local_elems))
		return NULL;
	for (i = 0; i < n; i++) {
		inside = false;
		for (k = 0; k < nused; k++) {
			if (sv[i].lo >= used[k][0] && sv[i].hi <= used[k][1])
				inside = true;
			else if (sv[i].lo < used[k][1] && sv[i].hi > used[k][0])
				return NULL;	/* straddles an owned range */
		}
		pieces = ms_grouper_find(gr, sv[i].value, &np);
		e = ms_format(ar, &ctx->atoms, pieces, np, rank);
		if (inside ? in != NULL && strcmp(in, e) != 0 :
		    out != NULL && strcmp(out, e) != 0)
			return NULL;
		*(inside ? &in : &out) = e;
	}
	if (in == NULL)
		return NULL;
	len = strlen(in) + (out != NULL ? strlen(out) : 0) + 32;
	text = arena_alloc(ar, len);
	if (out != NULL)
		snprintf((char *)text, len, "owned: %s; rest: %s", in, out);
	else
		snprintf((char *)text, len, "owned: %s", in);
	return text;
}

/*
 * The distinct neighbouring columns a folded table shows.  Past them the
 * values differ from column to column (uneven token counts give every dp
 * rank coefficients of its own): at 4,096 ranks with MTP and cp, explain
 * wrote lines of 5.7 MB, 187 MB in all, in 88 s (issue 24).  So the table
 * stops after these and names the columns it leaves out; -v shows them.
 */
#define EXPLAIN_COLUMN_RUNS	8

static bool
same_column(char *const *cells, int nrows, int ncols, int a, int b)
{
	const char	*x, *y;
	int		 r;

	for (r = 0; r < nrows; r++) {
		x = cells[(size_t)r * ncols + a];
		y = cells[(size_t)r * ncols + b];
		if (x == NULL || y == NULL ? x != y : strcmp(x, y) != 0)
			return false;
	}
	return true;
}

static void
print_table(struct explain *ex, const struct sym_run *run, int p)
{
	const struct sym_context *ctx = sym_run_context(run);
	const struct model *m = &ctx->model;
	struct param_result pr;
	struct cell	 cell;
	char		**cells;
	const char	*text;
	bool		 fold;
	int		 rank, n, row, col, nrows, ncols, shown, runs, i;
	int		*rowof, *order, *start;

	fold = !ex->options->verbose && m->mesh.world > MS_ATOMS_WORLD;
	param_result_for(m, p, &pr);
	cells = report_table_cells(&ex->layout_audit, &pr, &nrows, &ncols);
	/* Each holding rank's row, and the ranks column by column. */
	rowof = xcalloc(m->mesh.world, sizeof *rowof);
	order = xcalloc(m->mesh.world, sizeof *order);
	start = xcalloc((size_t)ncols + 1, sizeof *start);
	for (rank = 0; rank < m->mesh.world; rank++) {
		rowof[rank] = -1;
		if (sym_segments(run, instance_held(m, p, rank), rank,
		    &n) == NULL)
			continue;
		memset(&cell, 0, sizeof cell);
		cell.rank = rank;
		report_cell_position(&ex->layout_audit, &pr, &cell, &row, &col,
		    &nrows, &ncols, NULL, 0);
		rowof[rank] = row;
		order[rank] = col;	/* the column, until sorted below */
		start[col + 1]++;
	}
	for (col = 0; col < ncols; col++)
		start[col + 1] += start[col];
	{
		int *fill = xcalloc((size_t)ncols, sizeof *fill), *byc;

		byc = xcalloc(m->mesh.world, sizeof *byc);
		for (rank = 0; rank < m->mesh.world; rank++)
			if (rowof[rank] >= 0)
				byc[start[order[rank]] + fill[order[rank]]++] =
				    rank;
		memcpy(order, byc, m->mesh.world * sizeof *order);
		free(byc);
		free(fill);
	}
	shown = ncols;
	for (col = 0, runs = 0; col < ncols; col++) {
		for (i = start[col]; i < start[col + 1]; i++) {
			const struct segment *sv;

			rank = order[i];
			sv = sym_segments(run, instance_held(m, p, rank), rank,
			    &n);
			text = fold ? owned_text(sym_run_arena(run), ex->grouper,
			    ctx, instance_held(m, p, rank), rank, sv, n) : NULL;
			if (text == NULL)
				text = segments_text(sym_run_arena(run),
				    ex->grouper, &ctx->atoms, rank, sv, n, fold);
			cells[(size_t)rowof[rank] * ncols + col] =
			    xstrdup(text);
		}
		if (!fold || (col > 0 && same_column(cells, nrows, ncols,
		    col - 1, col)))
			continue;
		if (++runs > EXPLAIN_COLUMN_RUNS) {
			for (row = 0; row < nrows; row++) {
				free(cells[(size_t)row * ncols + col]);
				cells[(size_t)row * ncols + col] = NULL;
			}
			shown = col;
			break;
		}
	}
	free(rowof);
	free(order);
	free(start);
	report_print_table(stdout, &ex->layout_audit, &pr, cells, fold,
	    shown);
}

static void
jsonw_table(struct explain *ex, const struct sym_run *run, int p)
{
	const struct sym_context *ctx = sym_run_context(run);
	const struct model *m = &ctx->model;
	int	 rank, n, i;
	char	 q[48];

	jsonw_key(&ex->json, "cells");
	jsonw_begin_array(&ex->json);
	for (rank = 0; rank < m->mesh.world; rank++) {
		const struct segment *sv = sym_segments(run,
		    instance_held(m, p, rank), rank, &n);

		if (sv == NULL)
			continue;
		for (i = 0; i < n; i++) {
			uint32_t t;

			jsonw_begin_object(&ex->json);
			jsonw_key_int(&ex->json, "rank", rank);
			jsonw_key(&ex->json, "region");
			jsonw_begin_array(&ex->json);
			jsonw_int(&ex->json, sv[i].lo);
			jsonw_int(&ex->json, sv[i].hi);
			jsonw_end_array(&ex->json);
			jsonw_key(&ex->json, "terms");
			jsonw_begin_object(&ex->json);
			for (t = 0; t < sv[i].value->nterms; t++) {
				char atom[ATOM_NAME_SIZE];

				atom_name(&ctx->atoms, atom, sizeof atom, "g",
				    sv[i].value->terms[t].atom);
				q_format(sv[i].value->terms[t].coef, q, sizeof q);
				jsonw_key_string(&ex->json, atom, q);
			}
			jsonw_end_object(&ex->json);
			jsonw_key_string(&ex->json, "expr", lc_format(
			    sym_run_arena(run), &ctx->atoms, sv[i].value,
			    "g"));
			jsonw_end_object(&ex->json);
		}
	}
	jsonw_end_array(&ex->json);
}

/* A setting as explain's JSON writes it: {"key", "value", "from"}. */
static void
jsonw_setting(struct json *j, enum cfg_key k, const char *value,
    const char *origin)
{
	jsonw_begin_object(j);
	jsonw_key_string(j, "key", cfg_key_path(k));
	jsonw_key_string(j, "value", value);
	jsonw_key_string(j, "from", origin);
	jsonw_end_object(j);
}

/*
 * A reduce-scatter's result depends on where the buffer's shards fall, so
 * explain names the layout settings that a config or profile chose (the
 * reference defaults decide nothing worth reading).  Text gives each
 * setting's value and kind of origin; JSON gives the whole origin.
 */
static void
layout_settings(struct explain *ex, const struct sync_step *s)
{
	const struct config *c = ex->config;
	bool	 json = ex->options->format == FORMAT_JSON;
	char	 value[64], origin[512];
	size_t	 i;
	int	 n = 0;

	if (s == NULL || s->op != SYNC_REDUCE_SCATTER)
		return;
	for (i = 0; i < layout_nsetting_keys; i++) {
		enum cfg_key k = layout_setting_keys[i];
		bool given = keyset_has(&c->given, k);

		if (!given && !keyset_has(&c->from_profile, k))
			continue;
		cfg_key_value(c, k, value, sizeof value);
		if (json) {
			if (n == 0) {
				jsonw_key(&ex->json, "layout");
				jsonw_begin_array(&ex->json);
			}
			fw_key_origin(c, k, origin, sizeof origin);
			jsonw_setting(&ex->json, k, value, origin);
		} else
			printf("%s%s: %s (%s)", n == 0 ? "  (shards cut by " :
			    ", ", cfg_key_path(k), value, !given ? "profile" :
			    cfg_key_mark(c, k).line > 0 ? "config" : "--set");
		n++;
	}
	if (n > 0 && json)
		jsonw_end_array(&ex->json);
	else if (n > 0)
		printf(")\n");
}

/* Where a held atom (atom.h) comes from: the lossy boundary behind it. */
static const char *
held_source(enum reduction_cite cite)
{
	switch (cite) {
	case REDUCTION_CITE_OUTPUT_BOUNDARY:
		return "the output layer's input as the plan declares it";
	case REDUCTION_CITE_MIXER_INPUT:
		return "the duplicated mixer's input as the plan declares it";
	case REDUCTION_CITE_SCORES_DETACHED:
		return "the router's scores detached as the plan declares "
		    "them";
	case REDUCTION_CITE_EXPERT_INPUT:
	case REDUCTION_CITE_MOE_BOUNDARY:
	case REDUCTION_CITE_ROUTER_SHARE:
		break;
	}
	return "the MoE block input as sync.moe_input_grad declares it";
}

static void
hook(void *arg, const struct sym_run *run, int step)
{
	struct explain	*ex = arg;
	const struct sym_context *ctx = sym_run_context(run);
	const struct model *m = &ctx->model;
	const struct sync_step *s = step >= 0 ? &ctx->plan.steps[step] : NULL;
	char		 what[256];
	int		 l;
	bool		 json = ex->options->format == FORMAT_JSON;

	const char	*cite = s != NULL && at_fault(ex, s) ?
			    sync_cite_text(s->cite) : NULL;
	char		 value[256], origin[512], key[64];

	if (s != NULL && s->plan_item >= 0) {
		/* A step of plan: comes from its own place in the file. */
		const struct plan_item *it = &ex->config->plan[s->plan_item];

		syncplan_describe(s, m, what, sizeof what);
		snprintf(key, sizeof key, "plan[%d]", s->plan_item);
		cfg_plan_item_text(it, value, sizeof value);
		snprintf(origin, sizeof origin, "%s:%d:%d", ex->config->file,
		    it->mark.line, it->mark.col);
	} else if (s != NULL) {
		syncplan_describe(s, m, what, sizeof what);
		snprintf(key, sizeof key, "%s", cfg_key_path(s->key));
		cfg_key_value(ex->config, s->key, value, sizeof value);
		fw_key_origin(ex->config, s->key, origin, sizeof origin);
	} else if (sym_run_micro_batch(run) >= 0) {
		/* The plan runs per micro-batch: each backward adds its own. */
		snprintf(what, sizeof what, "the backward of micro-batch %d "
		    "adds its local gradients (atom gRmM: rank R's own of "
		    "micro-batch M)", sym_run_micro_batch(run));
	} else {
		snprintf(what, sizeof what, "local gradients before "
		    "synchronization (atom gR: rank R's own)");
		/* Held atoms (atom.h) say where they come from. */
		for (l = 0; l < m->nparams; l++)
			if (m->params[l].boundary >= 0) {
				snprintf(what, sizeof what, "local gradients "
				    "before synchronization (atom gR: rank R's "
				    "own; hR: rank R's with %s)",
				    held_source(ctx->reductions[
				    m->params[l].boundary].cite));
				break;
			}
	}
	if (json) {
		jsonw_begin_object(&ex->json);
		jsonw_key_int(&ex->json, "step", step + 1);
		if (sym_run_micro_batch(run) >= 0)
			jsonw_key_int(&ex->json, "micro_batch",
			    sym_run_micro_batch(run));
		jsonw_key_string(&ex->json, "does", what);
		jsonw_key_string(&ex->json, "rule", s ? s->label : "backward");
		if (s != NULL) {
			jsonw_key(&ex->json, "setting");
			jsonw_begin_object(&ex->json);
			jsonw_key_string(&ex->json, "key", key);
			jsonw_key_string(&ex->json, "value", value);
			jsonw_key_string(&ex->json, "from", origin);
			jsonw_end_object(&ex->json);
			layout_settings(ex, s);
		}
		if (cite != NULL)
			jsonw_key_string(&ex->json, "cite", cite);
		jsonw_key(&ex->json, "params");
		jsonw_begin_array(&ex->json);
	} else {
		printf("\nstep %d: %s%s%s%s\n", step + 1, what,
		    cite ? " [" : "", cite ? cite : "", cite ? "]" : "");
		if (s != NULL)
			printf("  (%s: %s, from %s)\n", key, value, origin);
		layout_settings(ex, s);
	}
	for (l = 0; l < m->nlogical; l++) {
		const struct logical_param *lp = &m->logical[l];
		int p = lp->instance[0];

		if (!ex->show[p] || (s != NULL && !syncplan_touches(s, m, p) &&
		    (lp->ninstances < 2 ||
		    !syncplan_touches(s, m, lp->instance[1]))))
			continue;
		if (json) {
			jsonw_begin_object(&ex->json);
			jsonw_key_string(&ex->json, "name", lp->name);
			jsonw_table(ex, run, p);
			jsonw_end_object(&ex->json);
		} else {
			printf("  %s", lp->name);
			if (lp->tied_with)
				printf(" (tied with %s)", lp->tied_with);
			printf(":\n");
			print_table(ex, run, p);
		}
	}
	if (json) {
		jsonw_end_array(&ex->json);
		jsonw_end_object(&ex->json);
	}
}

/* One setting of the gradient norm, its value and where it came from. */
static void
norm_setting(struct explain *ex, enum cfg_key k)
{
	char	 value[64], origin[512];

	cfg_key_value(ex->config, k, value, sizeof value);
	fw_key_origin(ex->config, k, origin, sizeof origin);
	if (ex->options->format == FORMAT_JSON)
		jsonw_setting(&ex->json, k, value, origin);
	else
		printf("  (%s: %s, from %s)\n", cfg_key_path(k), value, origin);
}

/*
 * The gradient norm's plan (gradnorm.h) after the synchronization: the
 * filters that choose what each rank squares, then the all-reduces of the
 * partial sums, each with the setting that decided it.
 */
static void
explain_norm(struct explain *ex, const struct sym_context *ctx)
{
	static const enum cfg_key filters[] = {
		KEY_TP_DUPLICATES, KEY_TIED_COPIES, KEY_EXPERT_FILTER,
		KEY_SINK_FILTER, KEY_EXPERT_NORM, KEY_CLIP_RANKS
	};
	static const struct {
		enum cfg_key	 key;
		const char	*what;
	} removable[] = {
		{ KEY_SHARD_GROUP, "all-reduce over the dense shard group" },
		{ KEY_PP_REDUCE, "all-reduce over pp" }
	};
	struct gn_plan	 plan;
	char		 what[160];
	size_t		 i;
	int		 s;
	bool		 json = ex->options->format == FORMAT_JSON;

	gn_plan_build(&plan, ctx);
	if (json) {
		jsonw_key(&ex->json, "grad_norm");
		jsonw_begin_object(&ex->json);
		jsonw_key(&ex->json, "filters");
		jsonw_begin_array(&ex->json);
	} else
		printf("\ngradient norm: each rank squares the elements its "
		    "optimizer uses, filtered by\n");
	/* The sinks' filter only where there are sinks to filter. */
	for (i = 0; i < sizeof filters / sizeof filters[0]; i++)
		if (filters[i] != KEY_SINK_FILTER ||
		    ctx->model.config->model.attention_sink)
			norm_setting(ex, filters[i]);
	if (json) {
		jsonw_end_array(&ex->json);
		jsonw_key(&ex->json, "steps");
		jsonw_begin_array(&ex->json);
	}
	for (s = 0; s < plan.nsteps; s++) {
		gn_step_describe(&plan.steps[s], what, sizeof what);
		if (json) {
			jsonw_begin_object(&ex->json);
			jsonw_key_int(&ex->json, "step", s + 1);
			jsonw_key_string(&ex->json, "does", what);
			if (plan.steps[s].key != KEY_GRAD_NORM) {
				jsonw_key(&ex->json, "setting");
				norm_setting(ex, plan.steps[s].key);
			}
			jsonw_end_object(&ex->json);
		} else {
			printf("norm step %d: %s\n", s + 1, what);
			if (plan.steps[s].key != KEY_GRAD_NORM)
				norm_setting(ex, plan.steps[s].key);
		}
	}
	/* The settings that took a step away say so too. */
	if (json) {
		jsonw_end_array(&ex->json);
		jsonw_key(&ex->json, "skipped");
		jsonw_begin_array(&ex->json);
	}
	for (i = 0; i < sizeof removable / sizeof removable[0]; i++) {
		for (s = 0; s < plan.nsteps; s++)
			if (plan.steps[s].key == removable[i].key)
				break;
		if (s < plan.nsteps)
			continue;
		if (!json)
			printf("no %s\n", removable[i].what);
		norm_setting(ex, removable[i].key);
	}
	if (json) {
		jsonw_end_array(&ex->json);
		jsonw_end_object(&ex->json);
	}
}

/* Which params to show: the named one (both tied copies), else the wrong. */
static int
select_params(struct explain *ex, const struct sym_context *ctx,
    const struct audit *a, const char *name)
{
	const struct model *m = &ctx->model;
	int	 p, any = 0;

	for (p = 0; p < m->nparams; p++) {
		const struct logical_param *l = &m->logical[m->params[p].logical];
		const struct param_result *pr = &a->params[m->params[p].logical];

		if (name != NULL)
			ex->show[p] = strcmp(l->name, name) == 0 ||
			    (l->tied_with && strcmp(l->tied_with, name) == 0);
		else
			ex->show[p] = !pr->correct || !pr->consistent;
		any += ex->show[p];
	}
	return any;
}

/* "no parameter", and the nearest name: "embeding.weight" is a typo. */
static void
no_such_param(const struct model *m, const char *name, const char *file)
{
	struct suggestion	 s;
	char			 q[TEXT_QUOTE_SIZE];
	int			 p;

	suggest_init(&s, name, strlen(name));
	for (p = 0; p < m->nparams; p++) {
		const struct logical_param *l = &m->logical[m->params[p].logical];

		suggest_consider(&s, l->name);
		if (l->tied_with != NULL)
			suggest_consider(&s, l->tied_with);
	}
	text_escape(q, sizeof q, name, strlen(name));
	fprintf(stderr, "%s: explain: no parameter \"%s\" in %s", progname, q,
	    file);
	if (suggest_best(&s) != NULL)
		fprintf(stderr, " (did you mean \"%s\"?)", suggest_best(&s));
	fputc('\n', stderr);
}

/*
 * The chunks of the step (lossnorm.h): each micro-batch's valid tokens on
 * every dp and cp rank, and the factor its loss gets, in atom units, so
 * that a wrong weight in the tables can be traced to its count.  Up to
 * EXPLAIN_MAX_CHUNKS of them; the totals always.
 */
#define EXPLAIN_MAX_CHUNKS	64

/* Chunks i and j count and weigh the same. */
static bool
same_chunk(const struct loss_norm *ln, int i, int j)
{
	return ln->valid[i] == ln->valid[j] &&
	    q_equal(ln->coef[i], ln->coef[j]) &&
	    q_equal(lossnorm_weight(ln, i), lossnorm_weight(ln, j));
}

/*
 * The chunks from i on that print as one line, labelled in by: whole dp
 * ranks of one micro-batch alike ("m0 dp0-63 cp0-1"), or else the cp ranks
 * alike within one dp rank ("m1 dp3 cp0-2"); returns the chunk after
 * them.  Chunk i is micro-batch i / dp, dp rank (i % dp) / cp, cp rank
 * i % cp, dp counting every dp x cp rank (lossnorm_chunk).  A table of one
 * line per chunk repeated the same line 64 times for a plain dp of 64
 * (issue 24).
 */
static int
chunk_run(const struct model *m, int i, char *by, size_t len)
{
	const struct loss_norm *ln = &m->loss;
	int	 ranks = m->mesh.dp, cp = m->mesh.cp;
	int	 mb = i / ranks, d = (i % ranks) / cp, c = i % cp;
	int	 end = (mb + 1) * ranks, j = i, nd;
	char	 cps[16];

	if (cp == 1)
		snprintf(cps, sizeof cps, "cp0");
	else
		snprintf(cps, sizeof cps, "cp0-%d", cp - 1);
	/* Whole dp ranks alike, from a dp rank's first cp rank. */
	if (c == 0) {
		while (j < end && same_chunk(ln, i, j))
			j++;
		if ((nd = (j - i) / cp) == 1)
			snprintf(by, len, "m%d dp%d %s", mb, d, cps);
		else if (nd > 1)
			snprintf(by, len, "m%d dp%d-%d %s", mb, d, d + nd - 1,
			    cps);
		if (nd >= 1)
			return i + nd * cp;
	}
	/* Else the cp ranks of this dp rank alike. */
	for (j = i + 1; j < (i / cp + 1) * cp && same_chunk(ln, i, j); j++)
		continue;
	if (j - i == 1)
		snprintf(by, len, "m%d dp%d cp%d", mb, d, c);
	else
		snprintf(by, len, "m%d dp%d cp%d-%d", mb, d, c, c + j - i - 1);
	return j;
}


/*
 * The factors the plan's steps on the loss terms (lossterm.h) put into
 * the loss factors below, when one is not 1: the one line that says why
 * they differ from what the loss keys alone make.
 */
static void
loss_terms_line(FILE *fp, const struct config *cfg, const struct model *m)
{
	struct rational	 q;
	char		 line[256] = "", f[48];
	int		 t;

	for (t = 0; t < PLAN_TERM__COUNT; t++) {
		if (!plan_has_term(cfg, (enum plan_term)t))
			continue;
		q = lossterm_factor(cfg, &m->mesh, (enum plan_term)t);
		if (q_equal(q, q_make(1, 1)))
			continue;
		q_format(q, f, sizeof f);
		snprintf(line + strlen(line), sizeof line - strlen(line),
		    "%s%s x%s", line[0] != '\0' ? ", " : "",
		    cfg_plan_term_words[t], f);
	}
	if (line[0] != '\0')
		fprintf(fp, "  the plan's steps on the loss terms multiply "
		    "their factors: %s\n", line);
}

static void
print_loss(FILE *fp, const struct model *m, const struct config *cfg)
{
	const struct loss_norm *ln = &m->loss;
	char	 q[48], by[64], scale[32], divisor[32];
	int	 i, j, k, lines, width, n = ln->chunks < EXPLAIN_MAX_CHUNKS ?
		    ln->chunks : EXPLAIN_MAX_CHUNKS;

	/* With pp > 1 the pipeline's loss may be normalized otherwise. */
	if (m->mesh.pp > 1 && cfg->loss.pp_normalize_by != PP_NORMALIZE_SAME)
		cfg_key_value(cfg, KEY_PP_NORMALIZE_BY, by, sizeof by);
	else
		cfg_key_value(cfg, KEY_NORMALIZE_BY, by, sizeof by);
	cfg_key_value(cfg, KEY_SCALE, scale, sizeof scale);
	cfg_key_value(cfg, KEY_DP_DIVISOR, divisor, sizeof divisor);
	fprintf(fp, "loss: %lld valid tokens of %lld in %d chunks "
	    "(micro-batches %d x dp %d x cp %d); %snormalize_by %s, "
	    "scale %s, dp_divisor %s\n", (long long)ln->total,
	    (long long)ln->tokens * ln->chunks, ln->chunks,
	    ln->micro_batches, m->mesh.pure_dp, m->mesh.cp,
	    m->mesh.pp > 1 && cfg->loss.pp_normalize_by != PP_NORMALIZE_SAME ?
	    "pp_" : "", by, scale, divisor);
	cfg_key_value(cfg, KEY_OBJECTIVE, by, sizeof by);
	if (ln->uniform) {
		q_format(lossnorm_weight(ln, 0), q, sizeof q);
		fprintf(fp, "  objective %s: every atom's expected weight %s\n",
		    by, q);
	} else
		fprintf(fp, "  objective %s: each chunk's atoms weigh as below\n",
		    by);
	/* The labels' width first, so that the columns line up. */
	for (i = 0, lines = 0, width = 14; i < ln->chunks &&
	    lines < EXPLAIN_MAX_CHUNKS; i = j, lines++) {
		j = chunk_run(m, i, by, sizeof by);
		if ((int)strlen(by) > width)
			width = (int)strlen(by);
	}
	fprintf(fp, "  %-*s  valid  loss factor (atom units)%s\n", width,
	    "chunk", ln->uniform ? "" : "  expected weight");
	for (i = 0, lines = 0; i < ln->chunks && lines < EXPLAIN_MAX_CHUNKS;
	    i = j, lines++) {
		char w[48];

		j = chunk_run(m, i, by, sizeof by);
		q_format(ln->coef[i], q, sizeof q);
		q_format(lossnorm_weight(ln, i), w, sizeof w);
		if (ln->uniform)
			fprintf(fp, "  %-*s %6d  %s\n", width, by,
			    ln->valid[i], q);
		else
			fprintf(fp, "  %-*s %6d  %-24s  %s\n", width, by,
			    ln->valid[i], q, w);
	}
	if (i < ln->chunks)
		fprintf(fp, "  (%d more chunks)\n", ln->chunks - i);
	loss_terms_line(fp, cfg, m);
	/* The auxiliary losses' atoms (gRa) have a factor of their own. */
	if (ln->aux_source >= 0) {
		cfg_key_value(cfg, KEY_AUX_SCALE, scale, sizeof scale);
		q_format(ln->aux_coef, q, sizeof q);
		q_format(ln->aux_expected, divisor, sizeof divisor);
		fprintf(fp, "  auxiliary losses (load balancing %s, z-loss "
		    "%s): aux_scale %s, factor %s, expected weight %s\n",
		    cfg->model.moe.aux_loss_coeff ?
		    cfg->model.moe.aux_loss_coeff : "0",
		    cfg->model.moe.z_loss_coeff ?
		    cfg->model.moe.z_loss_coeff : "0", scale, q, divisor);
		/* Their atoms gRad count the dp group (lossnorm.h). */
		if (ln->aux_global)
			fprintf(fp, "  load-balancing counts over the dp group, "
			    "their running mean over the micro-batches "
			    "(aux_type global-aux-loss): atoms gRad\n");
	}
	/* So have each multi-token prediction layer's (gRtK). */
	if (ln->mtp == 0)
		return;
	cfg_key_value(cfg, KEY_MTP_SCALE, scale, sizeof scale);
	q_format(ln->mtp_factor, q, sizeof q);
	fprintf(fp, "  multi-token prediction, %d layer%s, weight %s: "
	    "mtp_scale %s\n", ln->mtp, ln->mtp == 1 ? "" : "s", q, scale);
	for (k = 0; k < ln->mtp; k++) {
		q_format(ln->mtp_expected[k], q, sizeof q);
		fprintf(fp, "    layer %d: expected weight %s; valid and "
		    "factor by chunk:", k + 1, q);
		for (i = 0; i < n; i++) {
			q_format(ln->mtp_coef[k * ln->chunks + i], q, sizeof q);
			fprintf(fp, " %d:%s", ln->mtp_valid[k * ln->chunks + i],
			    q);
		}
		fprintf(fp, "%s\n", n < ln->chunks ? " ..." : "");
	}
}

static void
jsonw_loss(struct json *j, const struct model *m)
{
	const struct loss_norm *ln = &m->loss;
	char	 q[48];
	int	 i;

	jsonw_key(j, "loss");
	jsonw_begin_object(j);
	jsonw_key_int(j, "micro_batches", ln->micro_batches);
	jsonw_key_int(j, "tokens_per_chunk", ln->tokens);
	jsonw_key_int(j, "valid_tokens", ln->total);
	q_format(lossnorm_weight(ln, 0), q, sizeof q);
	/* One weight for every atom, or null: each chunk has its own. */
	if (ln->uniform)
		jsonw_key_string(j, "expected_weight", q);
	else
		jsonw_key_null(j, "expected_weight");
	jsonw_key(j, "chunks");
	jsonw_begin_array(j);
	for (i = 0; i < ln->chunks; i++) {
		jsonw_begin_object(j);
		jsonw_key_int(j, "mb", i / m->mesh.dp);
		/* dp as the cells have it: the index in dp_cp. */
		jsonw_key_int(j, "dp", i % m->mesh.dp);
		jsonw_key_int(j, "cp", i % m->mesh.dp % m->mesh.cp);
		jsonw_key_int(j, "valid", ln->valid[i]);
		q_format(ln->coef[i], q, sizeof q);
		jsonw_key_string(j, "factor", q);
		q_format(lossnorm_weight(ln, i), q, sizeof q);
		jsonw_key_string(j, "expected_weight", q);
		jsonw_end_object(j);
	}
	jsonw_end_array(j);
	jsonw_end_object(j);
}

/*
 * explain --plan: the plan as YAML steps (explain-plan.c), which is a
 * listing and not an audit: it exits 0 once the plan is written.
 */
static int
explain_plan_exec(const struct options *o, struct config_list *list,
    const char *name)
{
	struct sym_context	 ctx;
	int			 status;

	if (name != NULL || o->format != FORMAT_TEXT) {
		fprintf(stderr, "%s: explain: --plan writes the whole plan as "
		    "YAML: it takes no PARAM and no --format\n", progname);
		config_list_free(list);
		return EXIT_USAGE;
	}
	sym_context_build(&ctx, &list->v[0]);
	status = explain_plan(stdout, &list->v[0], &ctx);
	sym_context_free(&ctx);
	config_list_free(list);
	return status;
}

static int
cmd_explain_exec(struct options *o)
{
	struct config_list	 list;
	struct sym_context	 ctx;
	struct audit		 a;
	struct explain		 ex;
	const char		*name = o->nargs > 1 ? o->args[1] : NULL;
	int			 status;
	bool			 show_norm;
	char			**args = o->args;

	o->nargs = 1;
	if (output_load_configs(o, NULL, &list) < 0)
		return EXIT_USAGE;
	if (list.n != 1) {
		fprintf(stderr, "%s: explain: %s holds %zu configs; explain "
		    "takes one\n", progname, args[0], list.n);
		config_list_free(&list);
		return EXIT_USAGE;
	}
	if (o->plan)
		return explain_plan_exec(o, &list, name);
	memset(&ex, 0, sizeof ex);
	ex.options = o;
	ex.config = &list.v[0];
	sym_context_build(&ctx, &list.v[0]);
	ex.layout_audit.mesh = ctx.model.mesh;
	/* A valid empty space: the grids never name an atom. */
	atom_space_init(&ex.layout_audit.atoms);
	ex.show = xcalloc(ctx.model.nparams, sizeof *ex.show);

	/* A first pass finds the verdicts, the second prints the steps. */
	sym_audit(&ctx, &a, NULL, NULL);
	if (select_params(&ex, &ctx, &a, name) == 0 && name != NULL) {
		no_such_param(&ctx.model, name, args[0]);
		status = EXIT_USAGE;
		goto out;
	}
	status = audit_passes(&a) ? EXIT_OK : EXIT_WRONG;
	/* The text shows the norm's plan where it is at fault, or with -v. */
	show_norm = a.grad_norm.miscounted || !a.grad_norm.consistent ||
	    o->verbose;
	collect_faulty(&ex, &a);
	audit_free(&a);
	if (o->format == FORMAT_JSON) {
		jsonw_init(&ex.json, stdout, false);
		jsonw_begin_object(&ex.json);
		jsonw_key_string(&ex.json, "config", list.v[0].file);
		jsonw_key_string(&ex.json, "name", list.v[0].name);
		jsonw_loss(&ex.json, &ctx.model);
		jsonw_key(&ex.json, "steps");
		jsonw_begin_array(&ex.json);
	} else {
		/* As report_text() shows them: control characters visible. */
		char *file = text_visible(list.v[0].file);
		char meshline[128];
		char *cname = text_visible(list.v[0].name);

		printf("config: %s (%s)\n", file, cname);
		free(file);
		free(cname);
		mesh_format(&ctx.model.mesh, meshline, sizeof meshline);
		printf("mesh: %s\n", meshline);
		report_framework(stdout, &list.v[0]);
		print_loss(stdout, &ctx.model, &list.v[0]);
		printf("gradient synchronization: %d steps\n", ctx.plan.nsteps);
	}
	ex.grouper = ms_grouper_new(&ctx.atoms);
	sym_audit(&ctx, &a, hook, &ex);
	ms_grouper_free(ex.grouper);
	ex.grouper = NULL;
	fix_derive(&a);
	if (o->format == FORMAT_JSON) {
		jsonw_end_array(&ex.json);
		explain_norm(&ex, &ctx);
		/*
		 * The verdicts and findings: the steps above already show the
		 * selected parameters' values, and the whole audit of a large
		 * mesh would dwarf them (issue 10).
		 */
		jsonw_key(&ex.json, "audit");
		report_json_summary(&ex.json, &a);
		jsonw_end_object(&ex.json);
	} else {
		struct report_options ro = { .verbose = o->verbose,
		    .quiet = o->quiet, .color = options_use_color(o, stdout) };

		if (show_norm)
			explain_norm(&ex, &ctx);
		printf("\n");
		report_text(stdout, &a, &ro);
	}
out:
	audit_free(&a);
	while (ex.nfaulty > 0)
		free((char *)ex.faulty[--ex.nfaulty]);
	free(ex.faulty);
	free(ex.show);
	sym_context_free(&ctx);
	config_list_free(&list);
	return status;
}

const struct command cmd_explain_entry = {
	.name = "explain",
	.operands = "CONFIG [PARAM]",
	.summary = "every gradient collective in order, with per-rank "
	    "expression tables",
	.scope = SCOPE_EXPLAIN,
	.min_args = 1,
	.max_args = 2,
	.exec = cmd_explain_exec
};
