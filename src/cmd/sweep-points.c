/*
 * The meshes a sweep audits (sweep-points.h): every valid mesh of the
 * world, within --keep, --fix, --min and --max, with every combination of
 * the --vary flags, and the config of each point, its defaulted sizes
 * fitted to its mesh.  The flags, dimensions and sizes are keys of the
 * schema (config.h), which says where each lives and how --set spells it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "base/xmalloc.h"
#include "cmd/options.h"
#include "cmd/sweep-points.h"
#include "config/constraints.h"

/*
 * The flags --vary may name, by the last component of their key: the
 * schema (config.h) says where each lives, how --set spells it, and
 * whether it means anything in a config (model.moe's under a dense model
 * do not).
 */
static const enum cfg_key vary_keys[] = {
	KEY_TIE_EMBEDDINGS, KEY_DISTRIBUTED_OPTIMIZER, KEY_SEQUENCE_PARALLEL,
	KEY_SCORE_BEFORE_EXPERTS, KEY_AVERAGE_IN_COLLECTIVE,
};
_Static_assert(sizeof vary_keys / sizeof vary_keys[0] == SWEEP_NVARY_FLAGS,
    "SWEEP_NVARY_FLAGS counts vary_keys[]");

const enum cfg_key sweep_dim_keys[NDIMS] = {
	KEY_DP, KEY_PP, KEY_TP, KEY_EP, KEY_ETP, KEY_GTP, KEY_EGTP,
};

/* Model sizes that follow the mesh when the config leaves them defaulted. */
const enum cfg_key sweep_size_keys[] = {
	KEY_LAYERS, KEY_VOCAB, KEY_FFN, KEY_SEQ, KEY_EXPERTS, KEY_EXPERT_FFN,
};
const size_t sweep_nsize_keys = sizeof sweep_size_keys /
    sizeof sweep_size_keys[0];

static int
round_up(int v, int m)
{
	return (v + m - 1) / m * m;
}

/*
 * Model sizes the config leaves to their defaults follow the mesh (layers
 * = pp, divisibility by tp, ep, etp); sizes the user wrote stay as written,
 * and a mesh they do not fit is skipped.
 */
static void
adjust_defaults(struct config *c)
{
	int	tp = c->mesh.tp;

#define DEFAULTED(k) (!keyset_has(&c->given, (k)))
	if (DEFAULTED(KEY_LAYERS))
		c->model.layers = c->mesh.pp;
	if (DEFAULTED(KEY_VOCAB))
		c->model.vocab = round_up(c->model.vocab, tp);
	if (DEFAULTED(KEY_FFN))
		c->model.ffn = round_up(c->model.ffn, tp);
	if (DEFAULTED(KEY_SEQ))
		c->model.seq = round_up(c->model.seq, c->mesh.cp * tp);
	if (c->model.has_moe && DEFAULTED(KEY_EXPERTS))
		c->model.moe.experts = round_up(c->model.moe.experts,
		    c->mesh.ep);
	if (c->model.has_moe && DEFAULTED(KEY_EXPERT_FFN))
		c->model.moe.expert_ffn = round_up(c->model.moe.expert_ffn,
		    c->mesh.etp);
#undef DEFAULTED
}

static void
add_point(struct sweep *sw, const struct sweep_point *at)
{
	struct sweep_point *pt;

	if (sw->npoints == sw->cap) {
		sw->cap = sw->cap ? 2 * sw->cap : 64;
		sw->points = xreallocarray(sw->points, sw->cap,
		    sizeof *sw->points);
	}
	pt = &sw->points[sw->npoints++];
	memset(pt, 0, sizeof *pt);
	pt->dp = at->dp;
	pt->pp = at->pp;
	pt->tp = at->tp;
	pt->ep = at->ep;
	pt->etp = at->etp;
	pt->gtp = at->gtp;
	pt->egtp = at->egtp;
	pt->flags = at->flags;
}

/*
 * The config of a point: the base with the mesh and flags set and the
 * defaulted sizes adjusted.  NULL when it is valid, else why not, in
 * whybuf (and *c freed).
 */
const char *
sweep_point_config(const struct sweep *sw, struct sweep_point *pt,
    struct config *c, char *whybuf, size_t whylen)
{
	char		*label = NULL;
	size_t		 len = 0;
	FILE		*fp;
	const char	*why;
	int		 k;

	cfg_copy(c, sw->base);
	c->mesh.dp = pt->dp;
	c->mesh.pp = pt->pp;
	c->mesh.tp = pt->tp;
	c->mesh.ep = pt->ep;
	c->mesh.etp = pt->etp;
	c->mesh.gtp = pt->gtp;
	c->mesh.egtp = pt->egtp;
	for (k = 0; k < sw->nvary; k++)
		cfg_key_put(c, sw->vary[k], pt->flags >> k & 1);
	adjust_defaults(c);
	if ((why = cfg_check_constraints(c, whybuf, whylen)) != NULL) {
		cfg_free(c);
		return why;
	}
	/* A stream, not a fixed buffer: the config's name has any length. */
	if ((fp = open_memstream(&label, &len)) == NULL)
		fatal("open_memstream");
	fprintf(fp, "%s[dp=%d,", sw->base->name, pt->dp);
	if (c->mesh.cp > 1)
		fprintf(fp, "cp=%d,", c->mesh.cp);
	fprintf(fp, "pp=%d,tp=%d,ep=%d,etp=%d", pt->pp, pt->tp, pt->ep,
	    pt->etp);
	if (sw->gtp_axis)
		fprintf(fp, ",gtp=%d", pt->gtp);
	if (sw->egtp_axis)
		fprintf(fp, ",egtp=%d", pt->egtp);
	for (k = 0; k < sw->nvary; k++)
		fprintf(fp, ",%s=%d", cfg_key_leaf(sw->vary[k]), pt->flags >> k & 1);
	putc(']', fp);
	if (fclose(fp) != 0)
		fatal("open_memstream");
	pt->label = label;
	free(c->name);
	c->name = xstrdup(label);
	return NULL;
}

bool
sweep_within(const struct sweep *sw, enum sweep_dim d, int v)
{
	return sw->lo[d] <= v && v <= sw->hi[d];
}

/*
 * gtp and egtp are axes of the sweep where the framework has them
 * (limits.gtp_supported: Megatron's gtp_remat from core_v0.19.0) and the
 * config uses them (mesh.gtp or mesh.egtp above 1): each mesh then tries
 * every gtp that divides its dp and, for a MoE model, every egtp that
 * divides its edp, 1 included, so that what only a gtp mesh (or egtp
 * unlike gtp, Megatron-LM PR #7165) gets wrong shows beside the meshes
 * without it.  Elsewhere each mesh keeps the config's sizes, and one they
 * do not divide is skipped by the constraints, and counted.
 */
static void
choose_gtp_axes(struct sweep *sw)
{
	const struct config *b = sw->base;
	bool	 asked = b->limits.gtp && (b->mesh.gtp > 1 || b->mesh.egtp > 1);

	sw->gtp_axis = asked;
	sw->egtp_axis = asked && b->model.has_moe;
}

/*
 * A walk over the meshes of a sweep, which either counts its points
 * (sweep_count, before anything is built) or adds them (sweep_enumerate),
 * so that the count refused is the sweep that would run.  Every size it
 * tries divides the world: the loops go over the world's divisors (240
 * at most below CFG_MAX_WORLD), not over every integer up to it, which
 * took seconds at a world of 720720 before the first mesh was audited.
 */
#define SWEEP_MAX_DIVISORS	256

struct mesh_walk {
	struct sweep	*sw;
	bool		 count_only;
	int		 div[SWEEP_MAX_DIVISORS];	/* of the world, rising */
	int		 ndiv;
	/* count_only: divisors within the gtp (egtp) bounds, of div[i]. */
	int		 ngtp[SWEEP_MAX_DIVISORS], negtp[SWEEP_MAX_DIVISORS];
	uint64_t	 meshes, points;
};

/* Whether d, a divisor of the world, divides n and lies in dimension dim. */
static bool
divides_within(const struct sweep *sw, int d, int n, enum sweep_dim dim)
{
	return n % d == 0 && sweep_within(sw, dim, d);
}

/* The index of n, a divisor of the world, in w->div. */
static int
divisor_index(const struct mesh_walk *w, int n)
{
	int	 lo = 0, hi = w->ndiv - 1, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (w->div[mid] < n)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (w->div[lo] != n)
		fatalx("sweep: %d does not divide the world", n);
	return lo;
}

static void
walk_init(struct mesh_walk *w, struct sweep *sw, int world, bool count_only)
{
	int	 d, i, j;

	memset(w, 0, sizeof *w);
	w->sw = sw;
	w->count_only = count_only;
	for (d = 1; (int64_t)d * d <= world; d++)
		if (world % d == 0) {
			w->div[w->ndiv++] = d;
			if (w->ndiv == SWEEP_MAX_DIVISORS)
				fatalx("sweep: more divisors of %d than %d",
				    world, SWEEP_MAX_DIVISORS);
		}
	/* Their cofactors, falling, complete the list in rising order. */
	for (i = w->ndiv - 1; i >= 0; i--)
		if (w->div[i] != world / w->div[i]) {
			if (w->ndiv == SWEEP_MAX_DIVISORS)
				fatalx("sweep: more divisors of %d than %d",
				    world, SWEEP_MAX_DIVISORS);
			w->div[w->ndiv++] = world / w->div[i];
		}
	if (!count_only)
		return;
	for (i = 0; i < w->ndiv; i++)
		for (j = 0; j <= i; j++) {
			w->ngtp[i] += divides_within(sw, w->div[j], w->div[i],
			    DIM_GTP);
			w->negtp[i] += divides_within(sw, w->div[j],
			    w->div[i], DIM_EGTP);
		}
}

/* The gtp (egtp) sizes of a mesh whose dp (edp) is n. */
static uint64_t
axis_sizes(const struct mesh_walk *w, bool axis, int base, int n,
    enum sweep_dim dim)
{
	if (!axis)
		return sweep_within(w->sw, dim, base);
	return (uint64_t)(dim == DIM_GTP ? w->ngtp : w->negtp)
	    [divisor_index(w, n)];
}

/* Every gtp, then egtp, of the mesh at, times every flag set. */
static void
add_gtp_points(struct mesh_walk *w, struct sweep_point *at, int edp)
{
	struct sweep	*sw = w->sw;
	const struct config *b = sw->base;
	unsigned	 nflags = 1u << sw->nvary;
	int		 i, j;

	w->meshes++;
	if (w->count_only) {
		w->points += axis_sizes(w, sw->gtp_axis, b->mesh.gtp, at->dp,
		    DIM_GTP) * axis_sizes(w, sw->egtp_axis, b->mesh.egtp, edp,
		    DIM_EGTP) * nflags;
		return;
	}
	for (i = 0; i < (sw->gtp_axis ? w->ndiv : 1); i++) {
		at->gtp = sw->gtp_axis ? w->div[i] : b->mesh.gtp;
		if ((sw->gtp_axis && at->dp % at->gtp) ||
		    !sweep_within(sw, DIM_GTP, at->gtp))
			continue;
		for (j = 0; j < (sw->egtp_axis ? w->ndiv : 1); j++) {
			at->egtp = sw->egtp_axis ? w->div[j] : b->mesh.egtp;
			if ((sw->egtp_axis && edp % at->egtp) ||
			    !sweep_within(sw, DIM_EGTP, at->egtp))
				continue;
			for (at->flags = 0; at->flags < nflags; at->flags++)
				add_point(sw, at);
		}
	}
}

/*
 * Every (dp, pp, tp, ep, etp) with dp*cp*pp*tp = world within the bounds,
 * and gtp, egtp where the sweep varies them (choose_gtp_axes), times
 * every flag set; cp is the config's.  Experts regroup the dp*cp*tp
 * ranks of a stage.  Each size divides the world: dp*cp*tp, which ep*etp
 * divides, is a world over pp.
 */
static void
walk_meshes(struct mesh_walk *w, int world)
{
	struct sweep	*sw = w->sw;
	struct sweep_point at;
	int		 cp = sw->base->mesh.cp;
	int		 ip, it, ie, ix, pp, tp, dp, ep, etp;
	bool		 moe = sw->base->model.has_moe;

	choose_gtp_axes(sw);
	memset(&at, 0, sizeof at);
	world /= cp;
	for (ip = 0; ip < w->ndiv; ip++) {
		if ((pp = w->div[ip]) > world)
			break;
		if (!divides_within(sw, pp, world, DIM_PP))
			continue;
		for (it = 0; it < w->ndiv; it++) {
			if ((tp = w->div[it]) > world / pp)
				break;
			if (!divides_within(sw, tp, world / pp, DIM_TP))
				continue;
			dp = world / pp / tp;
			if (!sweep_within(sw, DIM_DP, dp))
				continue;
			for (ix = 0; ix < (moe ? w->ndiv : 1); ix++) {
				if ((etp = w->div[ix]) > tp)
					break;
				if (!divides_within(sw, etp, tp, DIM_ETP))
					continue;
				for (ie = 0; ie < (moe ? w->ndiv : 1); ie++) {
					/* Past it, ep * etp could overflow. */
					if ((ep = w->div[ie]) > dp * cp * tp / etp)
						break;
					if ((dp * cp * tp) % (ep * etp) ||
					    !sweep_within(sw, DIM_EP, ep))
						continue;
					at.dp = dp;
					at.pp = pp;
					at.tp = tp;
					at.ep = ep;
					at.etp = etp;
					add_gtp_points(w, &at,
					    dp * cp * tp / (ep * etp));
				}
			}
		}
	}
}

void
sweep_count(struct sweep *sw, int world, uint64_t *meshes, uint64_t *points)
{
	struct mesh_walk *w = xcalloc(1, sizeof *w);

	walk_init(w, sw, world, true);
	walk_meshes(w, world);
	*meshes = w->meshes;
	*points = w->points;
	free(w);
}

void
sweep_enumerate(struct sweep *sw, int world)
{
	struct mesh_walk *w = xcalloc(1, sizeof *w);

	walk_init(w, sw, world, false);
	walk_meshes(w, world);
	free(w);
}

/* "a, b, c or d": the flags --vary may name, for its message. */
static void
vary_names(char *buf, size_t size)
{
	size_t	 f, used = 0;

	buf[0] = '\0';
	for (f = 0; f < SWEEP_NVARY_FLAGS && used < size; f++) {
		snprintf(buf + used, size - used, "%s%s", f == 0 ? "" :
		    f + 1 == SWEEP_NVARY_FLAGS ? " or " : ", ",
		    cfg_key_leaf(vary_keys[f]));
		used = strlen(buf);
	}
}

int
sweep_parse_vary(struct sweep *sw, const struct options *o)
{
	char	 names[256];
	int	 k, i;
	size_t	 f;

	sw->vary = xcalloc(o->nvary + 1, sizeof *sw->vary);
	for (k = 0; k < o->nvary; k++) {
		for (f = 0; f < SWEEP_NVARY_FLAGS; f++)
			if (strcmp(o->vary[k], cfg_key_leaf(vary_keys[f])) == 0)
				break;
		if (f == SWEEP_NVARY_FLAGS) {
			vary_names(names, sizeof names);
			fprintf(stderr, "%s: sweep: --vary: unknown flag \"%s\": "
			    "expected %s\n", progname, o->vary[k], names);
			return -1;
		}
		for (i = 0; i < sw->nvary; i++)
			if (sw->vary[i] == vary_keys[f]) {
				fprintf(stderr, "%s: sweep: --vary: %s named "
				    "twice\n", progname, o->vary[k]);
				return -1;
			}
		sw->vary[sw->nvary++] = vary_keys[f];
	}
	return 0;
}

/* A mesh dimension of the base config. */
static int
base_dim(const struct sweep *sw, enum sweep_dim d)
{
	return (int)cfg_key_get(sw->base, sweep_dim_keys[d]);
}

/*
 * --keep DIM (the config's own size), --fix DIM=N, --min DIM=N and
 * --max DIM=N: each narrows the range of one dimension, and enumerate
 * only builds the meshes inside every range.
 */
int
sweep_parse_bounds(struct sweep *sw, const struct options *o)
{
	static const char *const opt[] = { "keep", "fix", "min", "max" };
	char		 q[TEXT_QUOTE_SIZE];
	int		 k, d, v;
	long		 n;
	char		*end;

	for (d = 0; d < NDIMS; d++) {
		sw->lo[d] = 1;
		sw->hi[d] = CFG_MAX_WORLD;
	}
	for (k = 0; k < o->nbounds; k++) {
		const struct sweep_bound *b = &o->bounds[k];
		const char *eq = strchr(b->item, '=');
		size_t len = eq != NULL ? (size_t)(eq - b->item) :
		    strlen(b->item);

		for (d = 0; d < NDIMS; d++)
			if (strlen(cfg_key_leaf(sweep_dim_keys[d])) == len &&
			    strncmp(cfg_key_leaf(sweep_dim_keys[d]), b->item, len) == 0)
				break;
		text_escape(q, sizeof q, b->item, len);
		if (d == NDIMS) {
			fprintf(stderr, "%s: sweep: --%s: unknown mesh "
			    "dimension \"%s\": expected dp, pp, tp, ep, etp, gtp "
			    "or egtp\n",
			    progname, opt[b->kind], q);
			return -1;
		}
		if (b->kind == BOUND_KEEP) {
			if (eq != NULL) {
				text_escape(q, sizeof q, b->item,
				    strlen(b->item));
				fprintf(stderr, "%s: sweep: --keep %s: --keep "
				    "takes the names of dimensions that keep "
				    "the config's size; --fix %s sets one\n",
				    progname, q, q);
				return -1;
			}
			v = base_dim(sw, (enum sweep_dim)d);
		} else {
			errno = 0;
			n = eq != NULL ? strtol(eq + 1, &end, 10) : 0;
			if (eq == NULL || eq[1] == '\0' || *end != '\0' ||
			    errno != 0 || n < 1 || n > CFG_MAX_WORLD) {
				text_escape(q, sizeof q, b->item,
				    strlen(b->item));
				fprintf(stderr, "%s: sweep: --%s: expected "
				    "DIM=N with N from 1 to %d, got \"%s\"\n",
				    progname, opt[b->kind], CFG_MAX_WORLD, q);
				return -1;
			}
			v = (int)n;
		}
		if (b->kind != BOUND_MAX && v > sw->lo[d])
			sw->lo[d] = v;
		if (b->kind != BOUND_MIN && v < sw->hi[d])
			sw->hi[d] = v;
	}
	return 0;
}

/*
 * A flag of the MoE block changes nothing in a dense model: varying it
 * would only audit every mesh twice (and --numeric would build an MoE
 * model from the --set), so it is dropped with a note.
 */
void
sweep_drop_inapplicable(struct sweep *sw)
{
	int	k, n = 0;

	for (k = 0; k < sw->nvary; k++) {
		if (!sw->base->model.has_moe &&
		    strncmp(cfg_key_path(sw->vary[k]), "model.moe.", 10) == 0) {
			fprintf(stderr, "%s: sweep: %s has no effect on a dense "
			    "model: not varied\n", progname, cfg_key_leaf(sw->vary[k]));
			continue;
		}
		sw->vary[n++] = sw->vary[k];
	}
	sw->nvary = n;
}

void
sweep_free(struct sweep *sw, struct config_list *list)
{
	size_t	 i;
	int	 f;

	for (i = 0; i < sw->npoints; i++) {
		free(sw->points[i].label);
		free(sw->points[i].families);
		free(sw->points[i].failure_text);
		free(sw->points[i].failure_message);
	}
	for (f = 0; f < sw->nfamilies; f++)
		free(sw->families[f]);
	free(sw->families);
	for (f = 0; f < sw->nseen; f++)
		free(sw->seen[f]);
	free(sw->seen);
	baseline_draft_free(&sw->draft);
	free(sw->points);
	free(sw->vary);
	config_list_free(list);
}
