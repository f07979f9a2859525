/*
 * The JSON report of one audit (json-report.h): the field names of SPEC
 * section 9, through the one JSON writer (json.h).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L		/* open_memstream */
#endif

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/framework.h"
#include "model/lossnorm.h"
#include "report/baseline.h"
#include "report/cells.h"
#include "report/json-report.h"
#include "report/parts.h"
#include "report/report.h"
#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/lincomb.h"
#include "symbolic/meshsum.h"

/*
 * The JSON report: the field names of SPEC section 9, which are stable.
 */

static void
jsonw_key_hash(struct json *j, const char *key, uint64_t h)
{
	char	 hex[17];

	hash_hex(h, hex);
	jsonw_key_string(j, key, hex);
}

static void
jsonw_key_string_or_null(struct json *j, const char *key, const char *s)
{
	if (s != NULL)
		jsonw_key_string(j, key, s);
	else
		jsonw_key_null(j, key);
}

/* NaN and infinities have no JSON form. */
static void
jsonw_key_double(struct json *j, const char *key, double v)
{
	char	 buf[32];

	if (!isfinite(v)) {
		jsonw_key_null(j, key);
		return;
	}
	snprintf(buf, sizeof(buf), "%.17g", v);
	jsonw_key(j, key);
	jsonw_raw_number(j, buf);
}

/*
 * "loss_factors": every chunk's loss factor (micro-batch mb, dp_cp index
 * dp: chunk mb * dp + dp), which a piece with a "wcoef" multiplies each of
 * its atoms by.  Only when such a piece can appear (atom_space_weighted).
 * "mtp_loss_factors": the same of each multi-token prediction layer, one
 * array a layer, for the pieces of its atoms ("t1" in "of").
 */
static void
jsonw_factor_array(struct json *j, const struct atom_space *sp, int layer)
{
	char	 q[48];
	int	 c;

	jsonw_begin_array(j);
	for (c = 0; c < atom_space_chunks(sp); c++) {
		q_format(layer == 0 ? atom_chunk_factor(sp, c) :
		    atom_mtp_chunk_factor(sp, layer, c), q, sizeof q);
		jsonw_string(j, q);
	}
	jsonw_end_array(j);
}

static void
jsonw_loss_factors(struct json *j, const struct atom_space *sp)
{
	int	 k;

	if (atom_space_main_weighted(sp)) {
		jsonw_key(j, "loss_factors");
		jsonw_factor_array(j, sp, 0);
	}
	if (!atom_space_mtp_weighted(sp))
		return;
	jsonw_key(j, "mtp_loss_factors");
	jsonw_begin_array(j);
	for (k = 1; k <= sp->mtp; k++)
		jsonw_factor_array(j, sp, k);
	jsonw_end_array(j);
}

static void
jsonw_mesh(struct json *j, const struct mesh *m, const struct atom_space *sp)
{
	jsonw_key(j, "mesh");
	jsonw_begin_object(j);
	/*
	 * dp is the data-parallel group the cells' "dp" coordinate and
	 * "sum":"dp" terms run over: Megatron's dp_cp, cp of them the
	 * context-parallel ranks of one sequence.
	 */
	jsonw_key_int(j, "dp", m->dp);
	jsonw_key_int(j, "cp", m->cp);
	/* HSDP: dp is dp_replicate * dp_shard * cp, replicate slowest. */
	jsonw_key_int(j, "dp_replicate", m->dp_replicate);
	/* The "mb" coordinate of the atoms (gradaudit.yaml(5), loss). */
	jsonw_key_int(j, "micro_batches", atom_space_micro_batches(sp));
	if (atom_space_weighted(sp))
		jsonw_loss_factors(j, sp);
	jsonw_key_int(j, "pp", m->pp);
	jsonw_key_int(j, "tp", m->tp);
	jsonw_key_int(j, "ep", m->ep);
	jsonw_key_int(j, "etp", m->etp);
	jsonw_key_int(j, "edp", m->edp);
	jsonw_key_int(j, "world", m->world);
	/*
	 * Generalized tensor parallelism: factors of dp and edp (mesh.h),
	 * named only when present, as the text report's mesh line does.
	 */
	if (m->gtp > 1 || m->egtp > 1) {
		jsonw_key_int(j, "gtp", m->gtp);
		jsonw_key_int(j, "egtp", m->egtp);
	}
	jsonw_end_object(j);
}

/*
 * "framework": the profile applied and the keys the config wrote over it;
 * "settings": every setting in effect, whatever its origin.
 */
static void
jsonw_settings(struct json *j, const struct config *c)
{
	const struct fw_profile	*p = c->profile;
	struct keyset		 over;
	char			 v[64], window[160];
	int			 k;

	jsonw_key(j, "framework");
	jsonw_begin_object(j);
	if (p == NULL)
		jsonw_key_string(j, "name", "reference");
	else {
		jsonw_key_string(j, "name", p->framework->name);
		jsonw_key_string(j, "spec", c->framework);
		jsonw_key_string(j, "profile", p->label);
		jsonw_key_string(j, "read_at", p->read_at);
		if (fw_profile_window(p, window, sizeof(window))) {
			jsonw_key_string(j, "commit", p->commit);
			jsonw_key_string(j, "window", window);
		}
		over = fw_profile_overridden(c);
		jsonw_key(j, "overridden");
		jsonw_begin_array(j);
		for (k = 0; k < KEY__COUNT; k++)
			if (keyset_has(&over, k))
				jsonw_string(j, cfg_key_path(k));
		jsonw_end_array(j);
	}
	jsonw_end_object(j);
	jsonw_key(j, "settings");
	jsonw_begin_object(j);
	for (k = 0; k < KEY__COUNT; k++) {
		if (!cfg_key_is_setting(k) || !cfg_key_is_active(c, k) ||
		    cfg_key_is_job(k))
			continue;
		cfg_key_value(c, k, v, sizeof(v));
		/* Typed for scripts: jq 'select(.settings["x"] == 8)'. */
		switch (cfg_key_value_type(k)) {
		case CFG_VALUE_NUMBER:
			jsonw_key(j, cfg_key_path(k));
			jsonw_raw_number(j, v);
			break;
		case CFG_VALUE_BOOL:
			jsonw_key_bool(j, cfg_key_path(k), strcmp(v, "true") == 0);
			break;
		default:
			jsonw_key_string(j, cfg_key_path(k), v);
			break;
		}
	}
	jsonw_end_object(j);
}

/* {"g0": "1/2", ...}: atom names to reduced fractions. */
static void
jsonw_terms(struct json *j, const struct atom_space *sp, const char *key,
    const struct lincomb *x)
{
	char		 atom[ATOM_NAME_SIZE], coef[48];
	uint32_t	 i;

	jsonw_key(j, key);
	if (x == NULL) {
		jsonw_null(j);
		return;
	}
	jsonw_begin_object(j);
	for (i = 0; i < x->nterms; i++) {
		atom_name(sp, atom, sizeof(atom), "g", x->terms[i].atom);
		q_format(x->terms[i].coef, coef, sizeof(coef));
		jsonw_key_string(j, atom, coef);
	}
	jsonw_end_object(j);
}

static void
jsonw_expr(struct json *j, struct arena *scratch,
    const struct atom_space *sp, const char *key, const struct lincomb *x)
{
	jsonw_key_string_or_null(j, key, x != NULL ?
	    lc_format(scratch, sp, x, "g") : NULL);
}

static void
jsonw_cell_numeric(struct json *j, const struct audit *a, const struct cell *c)
{
	if (!c->has_hash)
		return;
	jsonw_key_hash(j, "hash", c->hash);
	jsonw_key_hash(j, "reference_hash", c->reference_hash);
	jsonw_key_bool(j, "numeric_ok", c->numeric_ok);
	if (a->arith != ARITH_EXACT) {
		jsonw_key_double(j, "max_ulps", c->max_ulps);
		jsonw_key_double(j, "max_rel_error", c->max_rel_error);
	}
}

/* A cell's region and verdicts, per-rank and grouped cells alike. */
static void
jsonw_cell_verdict(struct json *j, const struct audit *a, const struct cell *c)
{
	jsonw_key(j, "region");
	jsonw_begin_array(j);
	jsonw_int(j, c->lo);
	jsonw_int(j, c->hi);
	jsonw_end_array(j);
	jsonw_key_bool(j, "used", c->used);
	if (c->used)
		jsonw_key_bool(j, "ok", c->ok);
	else
		jsonw_key_null(j, "ok");
	jsonw_cell_numeric(j, a, c);
}

static void
jsonw_cell(struct json *j, const struct audit *a, const struct cell *c,
    struct arena *scratch)
{
	struct coord	 co;

	mesh_coord_of(&a->mesh, c->rank, &co);
	jsonw_begin_object(j);
	jsonw_key_int(j, "rank", c->rank);
	jsonw_key_int(j, "pp", co.pp);
	jsonw_key_int(j, "dp", co.dp);
	jsonw_key_int(j, "tp", co.tp);
	jsonw_key_int(j, "ep", co.ep);
	jsonw_key_int(j, "etp", co.etp);
	jsonw_key_int(j, "edp", co.edp);
	jsonw_cell_verdict(j, a, c);
	jsonw_terms(j, &a->atoms, "terms", c->value);
	jsonw_terms(j, &a->atoms, "expected", c->expected);
	jsonw_expr(j, scratch, &a->atoms, "expr", c->value);
	jsonw_expr(j, scratch, &a->atoms, "expected_expr", c->expected);
	jsonw_end_object(j);
}

/* "0-7,64,66-71": ascending ranks, runs of two or more as "a-b". */
static void
jsonw_key_ranges(struct json *j, const char *key, const int *r, size_t n)
{
	char	*buf = NULL;
	size_t	 len = 0, i, k;
	FILE	*fp = rp_memstream(&buf, &len);

	for (i = 0; i < n; i = k + 1) {
		for (k = i; k + 1 < n && r[k + 1] == r[k] + 1; k++)
			continue;
		fprintf(fp, "%s%d", i > 0 ? "," : "", r[i]);
		if (k > i)
			fprintf(fp, "-%d", r[k]);
	}
	if (fclose(fp) != 0)
		fatal("open_memstream");
	jsonw_key_string(j, key, buf);
	free(buf);
}

/*
 * [{"coef": "1/64", "sum": "dp", "of": "pp7 tp0", "n": 64},
 *  {"coef": "1", "sum": "", "of": "g3", "n": 1},
 *  {"coef": "1/2", "sum": "tp", "of": "self", "n": 8}]
 */
static void
jsonw_pieces(struct json *j, const char *key, const struct atom_space *sp,
    const struct piece_memo *pm, int rank)
{
	char	 buf[128];
	size_t	 i;

	jsonw_key(j, key);
	if (pm == NULL) {
		jsonw_null(j);
		return;
	}
	jsonw_begin_array(j);
	for (i = 0; i < pm->n; i++) {
		jsonw_begin_object(j);
		q_format(pm->p[i].coef, buf, sizeof buf);
		/*
		 * Not "coef": a script that knows no weights must not read
		 * this one as every atom's coefficient.
		 */
		jsonw_key_string(j, pm->p[i].weighted ? "wcoef" : "coef", buf);
		ms_piece_sum(&pm->p[i], buf, sizeof buf);
		jsonw_key_string(j, "sum", buf);
		ms_piece_of(sp, &pm->p[i], rank, buf, sizeof buf);
		jsonw_key_string(j, "of", buf);
		jsonw_key_int(j, "n", pm->p[i].n);
		jsonw_end_object(j);
	}
	jsonw_end_array(j);
}

static void
jsonw_pieces_expr(struct json *j, struct arena *scratch, const char *key,
    const struct atom_space *sp, const struct piece_memo *pm, int rank)
{
	jsonw_key_string_or_null(j, key, pm != NULL ?
	    ms_format(scratch, sp, pm->p, pm->n, rank) : NULL);
}

static void
jsonw_cell_group(struct json *j, const struct audit *a,
    const struct cell_group *g, struct arena *scratch)
{
	const struct cell	*c = g->key.c;

	jsonw_begin_object(j);
	jsonw_key_ranges(j, "ranks", g->ranks, g->nranks);
	jsonw_key_int(j, "nranks", (int64_t)g->nranks);
	jsonw_cell_verdict(j, a, c);
	jsonw_pieces(j, "terms", &a->atoms, g->key.v, g->key.self);
	jsonw_pieces(j, "expected", &a->atoms, g->key.e, g->key.self);
	jsonw_pieces_expr(j, scratch, "expr", &a->atoms, g->key.v,
	    g->key.self);
	jsonw_pieces_expr(j, scratch, "expected_expr", &a->atoms, g->key.e,
	    g->key.self);
	jsonw_end_object(j);
}

static void
jsonw_param(struct json *j, const struct audit *a,
    const struct param_result *p, struct ms_grouper *gr, bool expand)
{
	struct arena		 scratch;
	struct piece_cache	 pc;
	struct cell_group	*g;
	size_t			 i, ng;

	arena_init(&scratch);
	jsonw_begin_object(j);
	jsonw_key_string(j, "name", p->name);
	jsonw_key_string_or_null(j, "tied_with", p->tied_with);
	/* Only with a virtual pipeline: other reports keep their shape. */
	if (p->has_chunk)
		jsonw_key_int(j, "chunk", p->chunk);
	if (p->has_chunk && p->tied_with != NULL)
		jsonw_key_int(j, "tied_chunk", p->tied_chunk);
	jsonw_key_bool(j, "consistent", p->consistent);
	jsonw_key_bool(j, "correct", p->correct);
	if (p->note != NULL)
		jsonw_key_string(j, "note", p->note);
	if (p->has_hash)
		jsonw_key_hash(j, "reference_hash", p->reference_hash);
	jsonw_key(j, "cells");
	jsonw_begin_array(j);
	if (expand) {
		for (i = 0; i < p->ncells; i++)
			jsonw_cell(j, a, &p->cells[i], &scratch);
	} else {
		memset(&pc, 0, sizeof pc);
		pc.grouper = gr;
		g = cells_group(&a->atoms, p, &pc, false, &ng);
		for (i = 0; i < ng; i++) {
			jsonw_cell_group(j, a, &g[i], &scratch);
			free(g[i].ranks);
		}
		free(g);
		cells_piece_cache_free(&pc);
	}
	jsonw_end_array(j);
	jsonw_end_object(j);
	arena_free(&scratch);
}

/*
 * "effect": {"kind": "factor", "factor": "1/8", "text": "x1/8"}, with
 * "min" and "max" for weights, "fraction" for a norm, "difference"
 * otherwise; null when there is nothing to measure.
 */
/*
 * A measure of an effect, to six digits, or null when it is no number: a
 * traced step's relative difference overflows a double when a diverged
 * element meets a reference of small gradients, and that was an internal
 * error (exit 3), found by the trace reader's fuzz harness.
 */
static void
jsonw_key_g6(struct json *j, const char *key, double v)
{
	char	 buf[32];

	if (!isfinite(v)) {
		jsonw_key_null(j, key);
		return;
	}
	snprintf(buf, sizeof buf, "%.6g", v);
	jsonw_key(j, key);
	jsonw_raw_number(j, buf);
}

static void
jsonw_effect(struct json *j, const struct effect *e)
{
	char	 buf[128];

	jsonw_key(j, "effect");
	if (e->kind == EFFECT_NONE) {
		jsonw_null(j);
		return;
	}
	jsonw_begin_object(j);
	jsonw_key_string(j, "kind", effect_kind_name(e->kind));
	switch (e->kind) {
	case EFFECT_FACTOR:
		q_format(e->lo, buf, sizeof buf);
		jsonw_key_string(j, "factor", buf);
		break;
	case EFFECT_WEIGHTS:
		q_format(e->lo, buf, sizeof buf);
		jsonw_key_string(j, "min", buf);
		q_format(e->hi, buf, sizeof buf);
		jsonw_key_string(j, "max", buf);
		break;
	case EFFECT_NORM:
		jsonw_key_g6(j, "fraction", e->fraction);
		break;
	case EFFECT_DIFFERENCE:
		jsonw_key_g6(j, "difference", e->difference);
		break;
	case EFFECT_UNMEASURED:
	case EFFECT_NONE:
		break;
	}
	effect_format(e, buf, sizeof buf);
	jsonw_key_string(j, "text", buf);
	jsonw_end_object(j);
}

/* A fix as the --set options that make it: ["loss.scale=dp-cp", ...]. */
static void
jsonw_fix_settings(struct json *j, const char *key,
    const struct fix_setting *s, size_t n)
{
	char	 buf[256];
	size_t	 i;

	jsonw_key(j, key);
	jsonw_begin_array(j);
	for (i = 0; i < n; i++) {
		snprintf(buf, sizeof buf, "%s=%s", s[i].key, s[i].value);
		jsonw_string(j, buf);
	}
	jsonw_end_array(j);
}

static void
jsonw_finding(struct json *j, const struct finding *f)
{
	size_t	 i;

	jsonw_begin_object(j);
	jsonw_key_string(j, "kind", finding_kind_name(f->kind));
	jsonw_key_string_or_null(j, "param", f->param);
	jsonw_key(j, "params");
	jsonw_begin_array(j);
	for (i = 0; i < f->nparams; i++)
		jsonw_string(j, f->params[i]);
	jsonw_end_array(j);
	jsonw_key(j, "ranks");
	jsonw_begin_array(j);
	for (i = 0; i < f->nranks; i++)
		jsonw_int(j, f->ranks[i]);
	jsonw_end_array(j);
	jsonw_key_string_or_null(j, "op", f->op);
	jsonw_key_string_or_null(j, "dim", f->dim);
	jsonw_key_string_or_null(j, "message", f->message);
	jsonw_key_string_or_null(j, "fix", f->fix);
	jsonw_key_string_or_null(j, "cause", f->cause < KEY__COUNT ?
	    cfg_key_path(f->cause) : NULL);
	jsonw_fix_settings(j, "fix_set", f->fix_set, f->nfix_set);
	jsonw_fix_settings(j, "fix_alternative", f->fix_alternative,
	    f->nfix_alternative);
	jsonw_effect(j, &f->effect);
	jsonw_key_bool(j, "accepted", f->accepted);
	/* The baseline entry that matched, even an expired one. */
	if (f->reason != NULL) {
		jsonw_key_string(j, "reason", f->reason);
		jsonw_key_string(j, "baseline", f->baseline_at);
		jsonw_key_string_or_null(j, "expires", f->expires);
		jsonw_key_bool(j, "expired", !f->accepted);
	}
	jsonw_end_object(j);
}

/*
 * --baseline: the entries that name this config and match none of its
 * findings.  An entry stale for every config it names is also said on
 * stderr (baseline_report_stale).
 */
static void
jsonw_stale(struct json *j, const struct audit *a)
{
	const struct baseline_entry *e;
	size_t	 i;

	if (!a->baselined)
		return;
	jsonw_key(j, "stale_baseline");
	jsonw_begin_array(j);
	for (i = 0; i < a->nstale; i++) {
		e = a->stale[i];
		jsonw_begin_object(j);
		jsonw_key_string(j, "baseline", e->at);
		jsonw_key_string(j, "config", e->config);
		jsonw_key_string(j, "kind", finding_kind_name(e->kind));
		jsonw_key_string(j, "reason", e->reason);
		jsonw_end_object(j);
	}
	jsonw_end_array(j);
}

/*
 * run --shrink: "shrink": {"world": 8, "set": ["mesh.dp=2", ...]} when the
 * numeric audit ran on a smaller config, {"note": "..."} when none was
 * found.
 */
static void
jsonw_shrunk(struct json *j, const struct audit *a)
{
	size_t	i;

	if (!a->shrunk && a->shrink_note == NULL)
		return;
	jsonw_key(j, "shrink");
	jsonw_begin_object(j);
	if (a->shrunk) {
		jsonw_key_int(j, "world", a->shrunk_world);
		jsonw_key(j, "set");
		jsonw_begin_array(j);
		for (i = 0; i < a->nshrunk_sets; i++)
			jsonw_string(j, a->shrunk_sets[i]);
		jsonw_end_array(j);
	} else
		jsonw_key_string(j, "note", a->shrink_note);
	jsonw_end_object(j);
}

static void
jsonw_numerics(struct json *j, const struct audit *a)
{
	if (a->numeric_skipped != NULL) {
		jsonw_key(j, "numerics");
		jsonw_begin_object(j);
		jsonw_key_string(j, "skipped", a->numeric_skipped);
		jsonw_shrunk(j, a);
		jsonw_end_object(j);
	}
	if (!a->numeric)
		return;
	jsonw_key(j, "numerics");
	jsonw_begin_object(j);
	jsonw_key_string(j, "arith", arith_name(a->arith));
	jsonw_key_int(j, "procs", a->procs);
	jsonw_key_bool(j, "correct", a->numeric_correct);
	jsonw_shrunk(j, a);
	jsonw_end_object(j);
}

/* sweep: "varied": {"dp": 4, ..., "tie_embeddings": true}. */
static void
jsonw_varied(struct json *j, const struct audit *a)
{
	size_t	i;

	if (a->nvaried == 0)
		return;
	jsonw_key(j, "varied");
	jsonw_begin_object(j);
	for (i = 0; i < a->nvaried; i++) {
		if (a->varied[i].flag)
			jsonw_key_bool(j, a->varied[i].name, a->varied[i].value);
		else
			jsonw_key_int(j, a->varied[i].name, a->varied[i].value);
	}
	jsonw_end_object(j);
}

/*
 * "counts": what a script would otherwise count from params and findings,
 * every kind of finding present even at 0, so that a script can read
 * .counts.by_kind["double-count"] without a default.
 */
static void
jsonw_counts(struct json *j, const struct audit *a)
{
	size_t	 by_kind[FINDING__COUNT] = { 0 }, i;
	int	 k;

	for (i = 0; i < a->nfindings; i++)
		if ((int)a->findings[i].kind >= 0 &&
		    a->findings[i].kind < FINDING__COUNT)
			by_kind[a->findings[i].kind]++;
	jsonw_key(j, "counts");
	jsonw_begin_object(j);
	jsonw_key_int(j, "params", (int64_t)a->nparams);
	jsonw_key_int(j, "wrong_params", audit_wrong_params(a));
	jsonw_key_int(j, "ranks", a->mesh.world);
	jsonw_key_int(j, "wrong_ranks", audit_wrong_ranks(a));
	jsonw_key_int(j, "findings", (int64_t)a->nfindings);
	jsonw_key_int(j, "accepted", (int64_t)audit_accepted_findings(a));
	jsonw_key(j, "by_kind");
	jsonw_begin_object(j);
	for (k = 0; k < FINDING__COUNT; k++)
		jsonw_key_int(j, finding_kind_name((enum finding_kind)k),
		    (int64_t)by_kind[k]);
	jsonw_end_object(j);
	jsonw_end_object(j);
}

/*
 * "grad_norm": the norms the ranks clip by (gradnorm.h): one class per
 * distinct norm with its ranks and, when wrong, the multiplicity of each
 * wrongly counted parameter; after a numeric audit, every rank's norm
 * squared against the reference's.
 */
static void
jsonw_grad_norm(struct json *j, const struct audit *a)
{
	const struct grad_norm_result	*g = &a->grad_norm;
	size_t				 c, i;
	int				 r;
	char				 q[48];

	if (!g->present)
		return;
	jsonw_key(j, "grad_norm");
	jsonw_begin_object(j);
	jsonw_key_bool(j, "correct", g->correct);
	jsonw_key_bool(j, "consistent", g->consistent);
	jsonw_key_bool(j, "gradients_wrong", g->gradients_wrong);
	jsonw_key_double(j, "clip_grad", GN_CLIP_GRAD);
	jsonw_key(j, "classes");
	jsonw_begin_array(j);
	for (c = 0; c < g->nclasses; c++) {
		const struct gn_class *cl = &g->classes[c];

		jsonw_begin_object(j);
		jsonw_key_ranges(j, "ranks", cl->ranks, cl->nranks);
		jsonw_key_bool(j, "correct", cl->correct);
		jsonw_key(j, "multiplicities");
		jsonw_begin_array(j);
		for (i = 0; i < cl->nmults; i++) {
			jsonw_begin_object(j);
			jsonw_key_string(j, "param", cl->mults[i].param);
			q_format(cl->mults[i].min, q, sizeof q);
			jsonw_key_string(j, "min", q);
			q_format(cl->mults[i].max, q, sizeof q);
			jsonw_key_string(j, "max", q);
			jsonw_key_bool(j, "values_ok", cl->mults[i].values_ok);
			jsonw_end_object(j);
		}
		jsonw_end_array(j);
		jsonw_end_object(j);
	}
	jsonw_end_array(j);
	if (g->numeric) {
		jsonw_key_hash(j, "reference_hash", g->reference_hash);
		if (a->arith != ARITH_EXACT) {
			jsonw_key_double(j, "reference_norm", g->reference_norm);
			jsonw_key_double(j, "reference_coefficient",
			    g->reference_coefficient);
		}
		jsonw_key_bool(j, "numeric_correct", g->numeric_correct);
		jsonw_key(j, "ranks");
		jsonw_begin_array(j);
		for (r = 0; r < a->mesh.world; r++) {
			int k = g->class_of[r];

			jsonw_begin_object(j);
			jsonw_key_int(j, "rank", r);
			jsonw_key_bool(j, "clips", k >= 0);
			jsonw_key_bool(j, "ok", k >= 0 && g->classes[k].correct);
			jsonw_key_hash(j, "hash", g->hash[r]);
			jsonw_key_bool(j, "numeric_ok", g->numeric_ok[r]);
			if (a->arith != ARITH_EXACT) {
				jsonw_key_double(j, "norm", g->norm[r]);
				jsonw_key_double(j, "coefficient",
				    g->coefficient[r]);
				jsonw_key_double(j, "ulps", g->ulps[r]);
			}
			jsonw_end_object(j);
		}
		jsonw_end_array(j);
	}
	jsonw_end_object(j);
}

/* Everything of the object but params and findings, and its opening. */
static void
jsonw_head(struct json *j, const struct audit *a)
{
	jsonw_begin_object(j);
	jsonw_key_string(j, "tool", "gradaudit");
	jsonw_key_string(j, "version", REPORT_VERSION);
	jsonw_key_string_or_null(j, "config",
	    a->config != NULL ? a->config->file : NULL);
	jsonw_key_string_or_null(j, "name",
	    a->config != NULL ? a->config->name : NULL);
	if (a->trace != NULL) {
		jsonw_key(j, "trace");
		jsonw_begin_object(j);
		jsonw_key_string(j, "dir", a->trace->dir);
		jsonw_key_string(j, "step", a->trace->step);
		jsonw_key_string(j, "against", a->trace->against);
		jsonw_key_string(j, "dtype", a->trace->dtype);
		jsonw_key_int(j, "micro_batches", a->trace->micro_batches);
		{
			char num[32];

			snprintf(num, sizeof num, "%.17g", a->trace->tolerance);
			jsonw_key(j, "tolerance");
			jsonw_raw_number(j, num);
		}
		jsonw_end_object(j);
	}
	jsonw_mesh(j, &a->mesh, &a->atoms);
	if (a->config != NULL)
		jsonw_settings(j, a->config);
	jsonw_numerics(j, a);
	jsonw_key_bool(j, "consistent", a->consistent);
	jsonw_key_bool(j, "correct", a->correct);
	/* Wrong, and the baseline accepts all of it: the gate passes. */
	jsonw_key_bool(j, "accepted", audit_accepted(a));
	if (a->numeric_verdict != NULL)
		jsonw_key_string(j, "numeric_verdict", a->numeric_verdict);
	jsonw_counts(j, a);
	jsonw_varied(j, a);
}

/*
 * "stale_rows": every rank's rows of a weight that no update reaches
 * (model/stale.h), the rows of the logical weight and the elements of
 * the rank's own; an empty array when there are none.
 */
static void
jsonw_stale_rows(struct json *j, const struct audit *a)
{
	const struct stale_rows_cell *c;
	size_t	 i;

	jsonw_key(j, "stale_rows");
	jsonw_begin_array(j);
	for (i = 0; i < a->nstale_rows; i++) {
		c = &a->stale_rows[i];
		jsonw_begin_object(j);
		jsonw_key_string(j, "param", c->param);
		jsonw_key_int(j, "rank", c->rank);
		jsonw_key(j, "rows");
		jsonw_begin_array(j);
		jsonw_int(j, c->row_lo);
		jsonw_int(j, c->row_hi);
		jsonw_end_array(j);
		jsonw_key(j, "elements");
		jsonw_begin_array(j);
		jsonw_int(j, c->lo);
		jsonw_int(j, c->hi);
		jsonw_end_array(j);
		jsonw_end_object(j);
	}
	jsonw_end_array(j);
}

static void
jsonw_findings(struct json *j, const struct audit *a)
{
	size_t	 i;

	jsonw_key(j, "findings");
	jsonw_begin_array(j);
	for (i = 0; i < a->nfindings; i++)
		jsonw_finding(j, &a->findings[i]);
	jsonw_end_array(j);
}

/*
 * An --expand cell costs about 400 bytes besides its terms (region,
 * coordinates, flags, expressions' brackets), and a term about 24 twice
 * over: "g1234m3": "1/2048" in the terms and again in the expression.  A
 * lower estimate would let a report far past the bound through.
 */
#define EXPAND_CELL_BYTES	400
#define EXPAND_TERM_BYTES	48

uint64_t
report_expand_size(const struct audit *a)
{
	const struct cell *c;
	uint64_t	 n = 0;
	size_t		 i, k;

	for (i = 0; i < a->nparams; i++)
		for (k = 0; k < a->params[i].ncells; k++) {
			c = &a->params[i].cells[k];
			n += EXPAND_CELL_BYTES;
			if (c->value != NULL)
				n += (uint64_t)c->value->nterms *
				    EXPAND_TERM_BYTES;
			if (c->expected != NULL)
				n += (uint64_t)c->expected->nterms *
				    EXPAND_TERM_BYTES;
		}
	return n;
}

void
report_json(struct json *j, const struct audit *a,
    const struct report_options *opt)
{
	struct ms_grouper *gr;
	size_t		 i;

	jsonw_head(j, a);
	jsonw_key(j, "params");
	jsonw_begin_array(j);
	/*
	 * One grouper for every parameter: their cells hold values alike
	 * (a rank's own shards, its dp group's sums) in objects of their
	 * own, grouped once for all (issue 24).
	 */
	gr = ms_grouper_new(&a->atoms);
	for (i = 0; i < a->nparams; i++)
		jsonw_param(j, a, &a->params[i], gr,
		    opt != NULL && opt->expand);
	ms_grouper_free(gr);
	jsonw_end_array(j);
	jsonw_stale_rows(j, a);
	jsonw_findings(j, a);
	jsonw_stale(j, a);
	jsonw_grad_norm(j, a);
	jsonw_end_object(j);
}

void
report_json_summary(struct json *j, const struct audit *a)
{
	jsonw_head(j, a);
	jsonw_stale_rows(j, a);
	jsonw_findings(j, a);
	jsonw_stale(j, a);
	jsonw_grad_norm(j, a);
	jsonw_end_object(j);
}
