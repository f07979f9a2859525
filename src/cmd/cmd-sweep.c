/*
 * gradaudit sweep CONFIG --world N [--vary FLAG,...] [--numeric]: audit
 * every valid mesh of N ranks built on CONFIG (within the bounds of --keep,
 * --fix, --min and --max), and every combination of the boolean flags named
 * in --vary, symbolically; print a row per mesh as soon as it is audited,
 * with the parameters it gets wrong, its finding and the `gradaudit check`
 * line that reproduces it.  With --numeric, meshes up to --numeric-max
 * ranks are also audited on MPI ranks by running `gradaudit run` on them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "base/cores.h"
#include "base/exitcode.h"
#include "base/json.h"
#include "base/progress.h"
#include "base/shellwords.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/output.h"
#include "config/constraints.h"
#include "launch/launch.h"
#include "numeric/numeric.h"
#include "report/junit.h"
#include "report/report.h"
#include "symbolic/fix.h"
#include "symbolic/symbolic.h"

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
#define NVARY_FLAGS (sizeof vary_keys / sizeof vary_keys[0])

/* The mesh dimensions a sweep enumerates, in the order of its labels. */
enum sweep_dim { DIM_DP, DIM_PP, DIM_TP, DIM_EP, DIM_ETP, NDIMS };

static const enum cfg_key dim_keys[NDIMS] = {
	KEY_DP, KEY_PP, KEY_TP, KEY_EP, KEY_ETP,
};

/* Model sizes that follow the mesh when the config leaves them defaulted. */
static const enum cfg_key size_keys[] = {
	KEY_LAYERS, KEY_VOCAB, KEY_FFN, KEY_SEQ, KEY_EXPERTS, KEY_EXPERT_FFN,
};
#define NSIZE_KEYS (sizeof size_keys / sizeof size_keys[0])

/*
 * What a sweep keeps of each audited mesh: a sweep of thousands of meshes
 * cannot hold thousands of audits, so each one is printed (JSON) and
 * summarized as soon as it is done, then freed.
 */
struct sweep_point {
	int		 dp, pp, tp, ep, etp;
	unsigned	 flags;		/* bit k: vary flag k set */
	char		*label;
	bool		 failed;
	/*
	 * --baseline: wrong, but accepted (not failed); and the verdict
	 * before the baseline, which --numeric's run, without it, must
	 * reach.
	 */
	bool		 accepted;
	bool		 correct;
	int		*families;	/* failing parameter families */
	int		 nfamilies;
	char		*failure_text;	/* JUnit: failed or accepted */
	char		*failure_message;	/* or the skipped one's */
	const char	*numeric;	/* --numeric outcome, or NULL */
	double		 seconds;
};

struct sweep {
	const struct config	*base;
	enum cfg_key		*vary;		/* --vary, vary_keys[] */
	int			 nvary;
	struct sweep_point	*points;
	size_t			 npoints, cap;
	int			 skipped;	/* meshes whose constraints fail */
	int			 too_big;	/* meshes too large to run */
	char			**families;	/* "layers.*.moe.router.weight" */
	int			 nfamilies;
	int			 lo[NDIMS], hi[NDIMS];	/* --keep ... --max */

	/* The streamed text table. */
	const struct options	*options;
	bool			 rows;		/* print a row per mesh */
	int			 label_width;
	bool			 color;		/* --color: the verdicts */
	char			**seen;		/* findings printed in full */
	int			 nseen;
	struct baseline_draft	 draft;	/* --write-baseline */
};

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
add_point(struct sweep *sw, int dp, int pp, int tp, int ep, int etp,
    unsigned flags)
{
	struct sweep_point *pt;

	if (sw->npoints == sw->cap) {
		sw->cap = sw->cap ? 2 * sw->cap : 64;
		sw->points = xreallocarray(sw->points, sw->cap,
		    sizeof *sw->points);
	}
	pt = &sw->points[sw->npoints++];
	memset(pt, 0, sizeof *pt);
	pt->dp = dp;
	pt->pp = pp;
	pt->tp = tp;
	pt->ep = ep;
	pt->etp = etp;
	pt->flags = flags;
}

/*
 * The config of a point: the base with the mesh and flags set and the
 * defaulted sizes adjusted.  NULL when it is valid, else why not, in
 * whybuf (and *c freed).
 */
static const char *
point_config(const struct sweep *sw, struct sweep_point *pt,
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

static bool
within(const struct sweep *sw, enum sweep_dim d, int v)
{
	return sw->lo[d] <= v && v <= sw->hi[d];
}

/*
 * Every (dp, pp, tp, ep, etp) with dp*cp*pp*tp = world within the bounds,
 * times every flag set; cp is the config's.  Experts regroup the dp*cp*tp
 * ranks of a stage.
 */
static void
enumerate(struct sweep *sw, int world)
{
	int		 cp = sw->base->mesh.cp;
	int		 pp, tp, dp, ep, etp;
	unsigned	 flags, nflags = 1u << sw->nvary;
	bool		 moe = sw->base->model.has_moe;

	world /= cp;
	for (pp = 1; pp <= world; pp++) {
		if (world % pp || !within(sw, DIM_PP, pp))
			continue;
		for (tp = 1; tp <= world / pp; tp++) {
			if ((world / pp) % tp || !within(sw, DIM_TP, tp))
				continue;
			dp = world / pp / tp;
			if (!within(sw, DIM_DP, dp))
				continue;
			for (etp = 1; etp <= (moe ? tp : 1); etp++) {
				if (tp % etp || !within(sw, DIM_ETP, etp))
					continue;
				for (ep = 1; ep <= (moe ? dp * cp * tp / etp :
				    1); ep++) {
					if ((dp * cp * tp) % (ep * etp) ||
					    !within(sw, DIM_EP, ep))
						continue;
					for (flags = 0; flags < nflags; flags++)
						add_point(sw, dp, pp, tp, ep,
						    etp, flags);
				}
			}
		}
	}
}

/* "layers.3.moe.router.weight" -> "layers.*.moe.router.weight". */
static char *
param_family(const char *name)
{
	char	*out = xmalloc(strlen(name) + 2);
	const char *p = name;
	char	*o = out;

	if (strncmp(p, "layers.", 7) == 0) {
		memcpy(o, "layers.*", 8);
		o += 8;
		p += 7;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	strcpy(o, p);
	return out;
}

static int
family_index(struct sweep *sw, const char *name)
{
	char	*fam = param_family(name);
	int	 f;

	for (f = 0; f < sw->nfamilies; f++)
		if (strcmp(sw->families[f], fam) == 0) {
			free(fam);
			return f;
		}
	sw->families = xreallocarray(sw->families, sw->nfamilies + 1,
	    sizeof *sw->families);
	sw->families[sw->nfamilies] = fam;
	return sw->nfamilies++;
}

static void
summarize(struct sweep *sw, struct sweep_point *pt, const struct audit *a,
    bool junit)
{
	size_t	j;
	int	f, k;

	pt->failed = !audit_passes(a);
	pt->accepted = audit_accepted(a);
	pt->correct = audit_correct(a);
	if (pt->correct)
		return;
	for (j = 0; j < a->nparams; j++) {
		if (a->params[j].correct && a->params[j].consistent)
			continue;
		f = family_index(sw, a->params[j].name);
		for (k = 0; k < pt->nfamilies; k++)
			if (pt->families[k] == f)
				break;
		if (k < pt->nfamilies)
			continue;
		pt->families = xreallocarray(pt->families, pt->nfamilies + 1,
		    sizeof *pt->families);
		pt->families[pt->nfamilies++] = f;
	}
	if (junit) {
		pt->failure_text = junit_failure_text(a);
		pt->failure_message = pt->accepted ?
		    junit_skipped_message(a) : junit_failure_message(a);
	}
}

struct arglist {
	char	**v;
	int	 n;
};

/*
 * --baseline and --write-baseline for one mesh: the hook of every other
 * report (output_accept), with the mesh's config, named
 * "NAME[dp=2,pp=2,...]", and its file.
 */
static void
accept_point(const struct options *o, struct sweep *sw, struct audit *a,
    const struct config *c)
{
	struct audited	 v;

	memset(&v, 0, sizeof v);
	v.audit = a;
	v.label = c->name;
	v.file = c->file;
	output_accept(o, &v);
	if (o->write_baseline != NULL)
		baseline_draft_add(&sw->draft, a, c->name);
}

static void
arg_add(struct arglist *al, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
arg_add(struct arglist *al, const char *fmt, ...)
{
	va_list	 ap;
	char	*arg;

	va_start(ap, fmt);
	xvasprintf(&arg, fmt, ap);
	va_end(ap);
	al->v = xreallocarray(al->v, al->n + 2, sizeof *al->v);
	al->v[al->n++] = arg;
	al->v[al->n] = NULL;
}

/*
 * "dp=4 pp=2 tp=1", with the config's cp, ep and etp for a MoE model, and
 * the flags.
 */
static void
point_label(const struct sweep *sw, const struct sweep_point *pt,
    char *label, size_t len)
{
	size_t	 off;
	int	 k;

	off = (size_t)snprintf(label, len, "dp=%d", pt->dp);
	if (sw->base->mesh.cp > 1 && off < len)
		off += (size_t)snprintf(label + off, len - off, " cp=%d",
		    sw->base->mesh.cp);
	if (off < len)
		off += (size_t)snprintf(label + off, len - off, " pp=%d tp=%d",
		    pt->pp, pt->tp);
	if (sw->base->model.has_moe && off < len)
		off += (size_t)snprintf(label + off, len - off, " ep=%d etp=%d",
		    pt->ep, pt->etp);
	for (k = 0; k < sw->nvary && off < len; k++)
		off += (size_t)snprintf(label + off, len - off, " %s=%d",
		    cfg_key_leaf(sw->vary[k]), pt->flags >> k & 1);
}

/*
 * The width of the verdict column: "FAIL numeric DISAGREES" at most, and
 * "accepted" with a baseline.
 */
static int
verdict_width(const struct sweep *sw)
{
	bool	 accepted = sw->options->baseline_file != NULL;

	if (sw->options->numeric)
		return accepted ? 26 : 22;
	return accepted ? 8 : 7;
}

/*
 * The head of the streamed table.  Every row is printed as its mesh is
 * audited, so the parameters are listed by name in each row rather than as
 * columns of a matrix, whose columns are known only at the end: a sweep of
 * thousands of meshes showed nothing until it had finished (issue 10).
 */
static void
print_header(struct sweep *sw)
{
	char	 label[256];
	size_t	 i;
	int	 w = (int)strlen("mesh"), vw = verdict_width(sw), len;

	for (i = 0; i < sw->npoints; i++) {
		point_label(sw, &sw->points[i], label, sizeof label);
		if ((len = (int)strlen(label)) > w)
			w = len;
	}
	sw->label_width = w;
	printf("%-*s  %-*s  %s\n", w, "mesh", vw, "verdict",
	    "wrong parameters");
	printf("%.*s  %.*s  %s\n", w, "----------------------------------------"
	    "--------------------------------------------------------------------"
	    "--------------------------------------------------------------------"
	    "--------------------------------------------------------------------",
	    vw, "--------------------------", "----------------");
}

/* The parameter families of a list of names, each once: "embedding.weight". */
static void
print_families(const char *const *names, size_t n)
{
	char	**fam = xcalloc(n + 1, sizeof *fam);
	size_t	 i, j, nfam = 0;

	for (i = 0; i < n; i++) {
		char *f = param_family(names[i]);

		for (j = 0; j < nfam; j++)
			if (strcmp(fam[j], f) == 0)
				break;
		if (j < nfam) {
			free(f);
			continue;
		}
		printf("%s%s", nfam > 0 ? ", " : "", f);
		fam[nfam++] = f;
	}
	for (j = 0; j < nfam; j++)
		free(fam[j]);
	free(fam);
}

/*
 * The --set assignments that give a point's config from CONFIG and the
 * command's own --set options: the mesh, the model sizes sweep adjusted
 * (every size with `all`, for run), and the flags varied.
 */
static void
point_sets(const struct sweep *sw, const struct sweep_point *pt,
    const struct config *c, bool all, struct arglist *al)
{
	size_t	 z;
	int	 k, v, w;

	arg_add(al, "mesh.dp=%d", c->mesh.dp);
	arg_add(al, "mesh.pp=%d", c->mesh.pp);
	arg_add(al, "mesh.tp=%d", c->mesh.tp);
	if (all || c->model.has_moe) {
		arg_add(al, "mesh.ep=%d", c->mesh.ep);
		arg_add(al, "mesh.etp=%d", c->mesh.etp);
	}
	for (z = 0; z < NSIZE_KEYS; z++) {
		if (!cfg_key_is_active(c, size_keys[z]))
			continue;
		v = (int)cfg_key_get(c, size_keys[z]);
		w = (int)cfg_key_get(sw->base, size_keys[z]);
		if (all || v != w)
			arg_add(al, "%s=%d", cfg_key_path(size_keys[z]), v);
	}
	for (k = 0; k < sw->nvary; k++)
		arg_add(al, "%s=%s", cfg_key_path(sw->vary[k]),
		    pt->flags >> k & 1 ? "true" : "false");
}

static void
arglist_free(struct arglist *al)
{
	int	k;

	for (k = 0; k < al->n; k++)
		free(al->v[k]);
	free(al->v);
	al->v = NULL;
	al->n = 0;
}

/* "gradaudit check --set mesh.dp=4 ... CONFIG", quoted for sh(1). */
static void
print_reproduce(const struct sweep *sw, const struct sweep_point *pt,
    const struct config *c)
{
	const struct options *o = sw->options;
	struct arglist	 al = { NULL, 0 };
	char		*q, *v;
	int		 k;

	for (k = 0; k < (int)o->nsets; k++)
		arg_add(&al, "%s=%s", o->sets[k].key, o->sets[k].value);
	point_sets(sw, pt, c, false, &al);
	printf("    reproduce: %s check", progname);
	for (k = 0; k < al.n; k++) {
		q = shellwords_quote(al.v[k]);
		v = text_visible(q);
		printf(" --set %s", v);
		free(v);
		free(q);
	}
	q = shellwords_quote(o->args[0]);
	v = text_visible(q);
	printf(" %s\n", v);
	free(v);
	free(q);
	arglist_free(&al);
}

/*
 * A failing mesh's findings: the first time a finding appears in the
 * sweep, in full; after that by its number, since the meshes that fail
 * one way are usually many.  With -v, in full every time, with the fix.
 */
static void
print_findings(struct sweep *sw, const struct audit *a)
{
	size_t	 i;
	int	 k;
	char	*sig, effect[128];
	bool	 fresh;

	for (i = 0; i < a->nfindings; i++) {
		const struct finding *f = &a->findings[i];

		xasprintf(&sig, "%s\n%s\n%s", finding_kind_name(f->kind),
		    f->op != NULL ? f->op : "", f->message);
		for (k = 0; k < sw->nseen; k++)
			if (strcmp(sw->seen[k], sig) == 0)
				break;
		if ((fresh = k == sw->nseen)) {
			sw->seen = xreallocarray(sw->seen, sw->nseen + 1,
			    sizeof *sw->seen);
			sw->seen[sw->nseen++] = sig;
		} else
			free(sig);
		printf("    %s %d: %s: ", f->accepted ? "accepted" :
		    "finding", k + 1, finding_kind_name(f->kind));
		print_families(f->params, f->nparams);
		/* The effect is this mesh's own, even for a finding above. */
		effect_format(&f->effect, effect, sizeof effect);
		/* An accepted finding: the reason is what to recall. */
		if (f->accepted)
			printf(": %s (%s)", f->reason, f->baseline_at);
		else if (fresh || sw->options->verbose)
			printf(": %s", f->message);
		else
			printf(" (as above)");
		printf("%s%s%s\n", *effect ? " (effect: " : "", effect,
		    *effect ? ")" : "");
		if (sw->options->verbose && f->fix != NULL && !f->accepted)
			printf("      fix: %s\n", f->fix);
		if (f->reason != NULL && !f->accepted)
			printf("      expired on %s: %s accepted it: %s\n",
			    f->expires, f->baseline_at, f->reason);
	}
}

/* Red in the table: a wrong mesh, or a numeric audit that did not agree. */
static bool
row_is_bad(const struct sweep_point *pt)
{
	return pt->failed || (pt->numeric != NULL &&
	    (strcmp(pt->numeric, "DISAGREES") == 0 ||
	    strcmp(pt->numeric, "error") == 0 ||
	    strcmp(pt->numeric, "interrupted") == 0));
}

/* The row of an audited mesh, and for a failing one how to see it again. */
static void
print_row(struct sweep *sw, const struct sweep_point *pt,
    const struct audit *a, const struct config *c)
{
	char	 label[256], verdict[96];
	int	 k;

	point_label(sw, pt, label, sizeof label);
	snprintf(verdict, sizeof verdict, "%s%s%s", pt->failed ? "FAIL" :
	    pt->accepted ? "accepted" : "ok", pt->numeric ? " numeric " : "",
	    pt->numeric ? pt->numeric : "");
	/* The escapes go around the padded verdict, not into its width. */
	printf("%-*s  %s", sw->label_width, label, sw->color ?
	    (row_is_bad(pt) ? ANSI_RED : ANSI_GREEN) : "");
	if (pt->correct) {
		printf("%s%s\n", verdict, sw->color ? ANSI_RESET : "");
		return;
	}
	printf("%-*s%s  ", verdict_width(sw), verdict,
	    sw->color ? ANSI_RESET : "");
	for (k = 0; k < pt->nfamilies; k++)
		printf("%s%s", k > 0 ? ", " : "", sw->families[pt->families[k]]);
	/*
	 * Issue 23: a mesh wrong in its gradient norm alone has no wrong
	 * parameter, and printed a bare FAIL; it has findings and a
	 * reproduce line like any other.
	 */
	if (pt->nfamilies == 0)
		printf("(the gradient norm)");
	printf("\n");
	print_findings(sw, a);
	print_reproduce(sw, pt, c);
}

/* -v: a mesh skipped, and why. */
static void
print_skipped(const struct sweep *sw, const struct sweep_point *pt,
    const char *why)
{
	char	 label[256];

	point_label(sw, pt, label, sizeof label);
	printf("%-*s  %-*s  %s\n", sw->label_width, label, verdict_width(sw),
	    "skipped", why);
}

/*
 * The JSON fields of a point: its mesh sizes (with the config's cp) and
 * flags, by name; returns their number.
 */
static int
point_varied(const struct sweep *sw, const struct sweep_point *pt,
    struct varied_value *v)
{
	const int	 dims[NDIMS] = { pt->dp, pt->pp, pt->tp, pt->ep, pt->etp };
	int		 d, k, n = 0;

	for (d = 0; d < NDIMS; d++) {
		v[n].name = cfg_key_leaf(dim_keys[d]);
		v[n].value = dims[d];
		v[n++].flag = false;
		/* The config's cp, so that dp*cp*pp*tp is the world. */
		if (d == DIM_DP && sw->base->mesh.cp > 1) {
			v[n].name = "cp";
			v[n].value = sw->base->mesh.cp;
			v[n++].flag = false;
		}
	}
	for (k = 0; k < sw->nvary; k++) {
		v[n].name = cfg_key_leaf(sw->vary[k]);
		v[n].value = pt->flags >> k & 1;
		v[n++].flag = true;
	}
	return n;
}

/* The summary line; EXIT_OK or EXIT_WRONG. */
static int
print_summary(const struct sweep *sw)
{
	size_t		 i, n = 0;
	int		 failing = 0, accepted = 0;

	for (i = 0; i < sw->npoints; i++) {
		n += sw->points[i].label != NULL;
		failing += sw->points[i].failed;
		accepted += sw->points[i].accepted;
	}
	printf("%d of %zu configurations fail", failing, n);
	if (accepted > 0)
		printf(", %d more accepted by the baseline", accepted);
	if (sw->skipped)
		printf(" (%d skipped: the config's model sizes do not fit "
		    "their mesh)", sw->skipped);
	printf("\n");
	return failing ? EXIT_WRONG : EXIT_OK;
}

static int
write_junit(const char *path, const struct sweep *sw)
{
	struct junit_case *cases = xcalloc(sw->npoints + 1, sizeof *cases);
	size_t	 i, n = 0;
	FILE	*fp;
	int	 status = EXIT_OK;

	for (i = 0; i < sw->npoints; i++) {
		const struct sweep_point *pt = &sw->points[i];

		if (pt->label == NULL)
			continue;
		cases[n].name = pt->label;
		cases[n].seconds = pt->seconds;
		cases[n].failed = pt->failed;
		cases[n].skipped = pt->accepted;
		cases[n].failure_message = pt->failure_message;
		cases[n].file = sw->base->file;
		cases[n].failure_text = pt->failure_text;
		n++;
	}
	if ((fp = output_open(path, "w", "JUnit report")) == NULL)
		status = EXIT_RUNTIME;
	else {
		junit_write(fp, "gradaudit.sweep", cases, n);
		status = output_close(fp, path);
	}
	free(cases);
	return status;
}

/*
 * Once every mesh is audited: --baseline's stale entries on stderr, and
 * --write-baseline's file.  EXIT_OK, EXIT_WRONG for a stale entry under
 * --strict-baseline, or EXIT_RUNTIME when the file cannot be written.
 */
static int
finish_baseline(const struct options *o, struct sweep *sw)
{
	FILE	*fp;
	int	 rc = EXIT_OK;

	if (o->baseline_file != NULL &&
	    baseline_report_stale(o->baseline, stderr) > 0 &&
	    o->strict_baseline)
		rc = EXIT_WRONG;
	if (o->write_baseline == NULL)
		return rc;
	if ((fp = output_open(o->write_baseline, "w", "baseline")) == NULL)
		return EXIT_RUNTIME;
	baseline_draft_write(fp, &sw->draft, o->baseline->today);
	if (output_close(fp, o->write_baseline) != EXIT_OK)
		return EXIT_RUNTIME;
	return rc;
}

/*
 * Wait for the run of a mesh.  A signal to sweep itself (not to its process
 * group, as Ctrl-C is) would otherwise orphan the run and its MPI job
 * (issue 8): it is forwarded, and the run ends its job before it exits.
 * Returns the run's wait status; *sig is the signal caught, or 0.
 */
static int
wait_for_run(pid_t pid, int *sig)
{
	struct timespec	 nap = { 0, 20 * 1000 * 1000 };
	int		 wstatus, forwarded = 0;
	pid_t		 r;

	for (;;) {
		if ((*sig = launch_signals_caught()) != 0 && *sig != forwarded) {
			kill(pid, *sig);
			forwarded = *sig;
		}
		if ((r = waitpid(pid, &wstatus, WNOHANG)) == pid)
			break;
		if (r == -1 && errno != EINTR)
			fatal("waitpid");
		nanosleep(&nap, NULL);
	}
	*sig = launch_signals_caught();
	return wstatus;
}

/*
 * The numeric audit of one mesh: `gradaudit run` on the same config with
 * the mesh, the flags and the adjusted model sizes set, so that launching,
 * timeouts and exit statuses are exactly those of run.  A signal that
 * interrupts it makes *status LAUNCH_INTERRUPTED(sig).
 */
static const char *
numeric_point(const struct options *o, const struct sweep *sw,
    const struct sweep_point *pt, const struct config *c, int *status)
{
	struct arglist	 al = { NULL, 0 }, sets = { NULL, 0 };
	struct launch_signals saved;
	char		 self[4096];
	ssize_t		 len;
	pid_t		 pid, parent;
	int		 k, rc, wstatus = 0, sig;
	static const char *const arith[] = { "exact", "float64", "float32" };

	len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (len <= 0) {
		fprintf(stderr, "%s: sweep: cannot find the running program: "
		    "%s\n", progname, strerror(errno));
		*status = EXIT_RUNTIME;
		return "error";
	}
	self[len] = '\0';
	arg_add(&al, "%s", self);
	arg_add(&al, "run");
	arg_add(&al, "-q");
	arg_add(&al, "--numerics=%s", arith[o->arith]);
	arg_add(&al, "--seed=%llu", (unsigned long long)o->seed);
	arg_add(&al, "--timeout=%g", o->timeout);
	if (o->procs)
		arg_add(&al, "--procs=%d", o->procs);
	if (o->launcher)
		arg_add(&al, "--launcher=%s", o->launcher);
	for (k = 0; k < (int)o->nsets; k++)
		arg_add(&al, "--set=%s=%s", o->sets[k].key, o->sets[k].value);
	point_sets(sw, pt, c, true, &sets);
	for (k = 0; k < sets.n; k++)
		arg_add(&al, "--set=%s", sets.v[k]);
	arglist_free(&sets);
	arg_add(&al, "%s", o->args[0]);

	fflush(stdout);
	launch_signals_catch(&saved);
	parent = getpid();
	if ((pid = fork()) == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		launch_signals_restore(&saved);
#ifdef __linux__
		/*
		 * A sweep killed by a signal it cannot catch (SIGKILL) can
		 * forward nothing: the run then gets SIGTERM from the kernel
		 * and ends its job, rather than run on to --timeout.
		 */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) == -1 ||
		    getppid() != parent)
			_exit(EXIT_RUNTIME);
#endif
		launch_forget_job();
		/* The child's report is not wanted, only its verdict. */
		if (devnull >= 0)
			dup2(devnull, STDOUT_FILENO);
		execv(self, al.v);
		_exit(EXIT_RUNTIME);
	}
	rc = EXIT_RUNTIME;
	sig = 0;
	if (pid > 0) {
		wstatus = wait_for_run(pid, &sig);
		if (WIFEXITED(wstatus))
			rc = WEXITSTATUS(wstatus);
	}
	launch_signals_restore(&saved);
	arglist_free(&al);
	if (sig != 0) {
		*status = LAUNCH_INTERRUPTED(sig);
		return "interrupted";
	}
	if (rc != EXIT_OK && rc != EXIT_WRONG) {
		fprintf(stderr, "%s: sweep: %s: the numeric audit failed "
		    "(exit %d)\n", progname, pt->label, rc);
		*status = EXIT_RUNTIME;
		return "error";
	}
	/* The run has no baseline: its verdict is the one before it. */
	if ((rc == EXIT_OK) != pt->correct) {
		fprintf(stderr, "%s: sweep: %s: the numeric verdict (exit %d) "
		    "disagrees with the symbolic one\n", progname, pt->label,
		    rc);
		*status = EXIT_RUNTIME;
		return "DISAGREES";
	}
	return "agrees";
}

/*
 * A mesh that is too large for the numeric audit is not a runtime failure
 * (issue 8: run refused it with exit 2, and the sweep exited 3): it keeps
 * its symbolic verdict.  The first one says why; cmd_sweep_exec counts
 * them all at the end.
 */
static const char *
skip_numeric(struct sweep *sw, const struct sweep_point *pt, const char *why)
{
	if (sw->too_big++ == 0)
		fprintf(stderr, "%s: sweep: %s: not audited numerically: %s\n",
		    progname, pt->label, why);
	return "skipped";
}

/* "a, b, c or d": the flags --vary may name, for its message. */
static void
vary_names(char *buf, size_t size)
{
	size_t	 f, used = 0;

	buf[0] = '\0';
	for (f = 0; f < NVARY_FLAGS && used < size; f++) {
		snprintf(buf + used, size - used, "%s%s", f == 0 ? "" :
		    f + 1 == NVARY_FLAGS ? " or " : ", ",
		    cfg_key_leaf(vary_keys[f]));
		used = strlen(buf);
	}
}

static int
parse_vary(struct sweep *sw, const struct options *o)
{
	char	 names[256];
	int	 k, i;
	size_t	 f;

	sw->vary = xcalloc(o->nvary + 1, sizeof *sw->vary);
	for (k = 0; k < o->nvary; k++) {
		for (f = 0; f < NVARY_FLAGS; f++)
			if (strcmp(o->vary[k], cfg_key_leaf(vary_keys[f])) == 0)
				break;
		if (f == NVARY_FLAGS) {
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
	return (int)cfg_key_get(sw->base, dim_keys[d]);
}

/*
 * --keep DIM (the config's own size), --fix DIM=N, --min DIM=N and
 * --max DIM=N: each narrows the range of one dimension, and enumerate
 * only builds the meshes inside every range.
 */
static int
parse_bounds(struct sweep *sw, const struct options *o)
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
			if (strlen(cfg_key_leaf(dim_keys[d])) == len &&
			    strncmp(cfg_key_leaf(dim_keys[d]), b->item, len) == 0)
				break;
		text_escape(q, sizeof q, b->item, len);
		if (d == NDIMS) {
			fprintf(stderr, "%s: sweep: --%s: unknown mesh "
			    "dimension \"%s\": expected dp, pp, tp, ep or etp\n",
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
static void
drop_inapplicable(struct sweep *sw)
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

static void
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

/*
 * Workers for a text sweep on several cores.  Almost every mesh of a sweep
 * is correct, and a correct mesh's row needs only its verdict: forked
 * workers audit the meshes, worker w those with index i % n == w, and send
 * back one verdict each, in order, through a pipe of their own.  The sweep
 * itself stays in order: it prints a correct mesh's row from the verdict,
 * and audits again, itself, any mesh a worker found wrong or skipped, so
 * that its row, findings and reproduce line come out exactly as without
 * workers.  A worker that fails ends them all, and the sweep goes on alone.
 */
enum verdict_kind { VERDICT_OK, VERDICT_OTHER };

struct verdict {
	uint32_t	index;
	uint32_t	kind;
	double		seconds;
};

struct workers {
	int	 n;		/* 0: no workers */
	pid_t	*pid;
	int	*fd;		/* read end of worker w's pipe */
};

static int
write_all(int fd, const void *buf, size_t len)
{
	const char	*p = buf;
	ssize_t		 k;

	while (len > 0) {
		if ((k = write(fd, p, len)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

static int
read_all(int fd, void *buf, size_t len)
{
	char	*p = buf;
	ssize_t	 k;

	while (len > 0) {
		if ((k = read(fd, p, len)) <= 0) {
			if (k < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

static void
worker_main(struct sweep *sw, int w, int n, int fd)
{
	struct sym_context	 ctx;
	struct config		 c;
	struct audit		 a;
	struct verdict		 v;
	enum cfg_key		 blame;
	char			 whybuf[SYM_WHY_SIZE];
	const char		*why;
	size_t			 i;

	for (i = (size_t)w; i < sw->npoints; i += (size_t)n) {
		double t0 = output_now();

		v.index = (uint32_t)i;
		v.kind = VERDICT_OTHER;
		if (point_config(sw, &sw->points[i], &c, whybuf,
		    sizeof whybuf) == NULL) {
			sym_context_build(&ctx, &c);
			why = sym_context_unauditable(&ctx, &c, &blame,
			    whybuf, sizeof whybuf);
			if (why == NULL) {
				sym_audit(&ctx, &a, NULL, NULL);
				/* A wrong one is audited again, baseline
				 * and all. */
				if (audit_correct(&a))
					v.kind = VERDICT_OK;
				audit_free(&a);
			}
			sym_context_free(&ctx);
			cfg_free(&c);
		}
		v.seconds = output_now() - t0;
		if (write_all(fd, &v, sizeof v) < 0)
			_exit(1);
	}
	_exit(0);
}

static void
workers_stop(struct workers *wk)
{
	int	 w, st;

	for (w = 0; w < wk->n; w++) {
		close(wk->fd[w]);
		kill(wk->pid[w], SIGTERM);
	}
	for (w = 0; w < wk->n; w++)
		while (waitpid(wk->pid[w], &st, 0) < 0 && errno == EINTR)
			;
	free(wk->pid);
	free(wk->fd);
	memset(wk, 0, sizeof *wk);
}

/* Workers for the cores there are, when the sweep is worth them. */
static void
workers_start(struct workers *wk, struct sweep *sw, const struct options *o)
{
	int	 n = cores_available(), w, p[2];

	memset(wk, 0, sizeof *wk);
	if (o->numeric || o->format != FORMAT_TEXT || n < 2 ||
	    sw->npoints < (size_t)(8 * n))
		return;
	wk->pid = xcalloc((size_t)n, sizeof *wk->pid);
	wk->fd = xcalloc((size_t)n, sizeof *wk->fd);
	fflush(NULL);
	for (w = 0; w < n; w++) {
		if (pipe(p) < 0)
			break;
		if ((wk->pid[w] = fork()) < 0) {
			close(p[0]);
			close(p[1]);
			break;
		}
		if (wk->pid[w] == 0) {
			close(p[0]);
			for (int k = 0; k < w; k++)
				close(wk->fd[k]);
#ifdef __linux__
			/* A worker outlives no sweep. */
			prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
			worker_main(sw, w, n, p[1]);
		}
		close(p[1]);
		(void)fcntl(p[0], F_SETFD, FD_CLOEXEC);
		wk->fd[w] = p[0];
		wk->n = w + 1;
	}
	if (wk->n < n)
		workers_stop(wk);
}

/*
 * The verdict of mesh i, if a worker found it correct; false when the
 * sweep must audit it itself (then, if the workers failed, they are gone).
 */
static bool
worker_says_ok(struct workers *wk, size_t i, double *seconds)
{
	struct verdict	 v;

	if (wk->n == 0)
		return false;
	if (read_all(wk->fd[i % (size_t)wk->n], &v, sizeof v) < 0 ||
	    v.index != (uint32_t)i) {
		workers_stop(wk);
		return false;
	}
	*seconds = v.seconds;
	return v.kind == VERDICT_OK;
}

static int
cmd_sweep_exec(struct options *o)
{
	struct config_list	 list;
	struct sweep		 sw;
	struct sym_context	 ctx;
	struct config		 c;
	struct audit		 a;
	struct json		 js;
	struct varied_value	 varied[NDIMS + 1 + NVARY_FLAGS];
	bool			 json = o->format == FORMAT_JSON;
	const char		*why;
	enum cfg_key		 blame;
	char			 whybuf[SYM_WHY_SIZE];
	struct workers		 wk;
	size_t			 i;
	int			 status = EXIT_OK, rc, st;

	if (o->world <= 0) {
		fprintf(stderr, "%s: sweep: --world N is required\n", progname);
		command_usage(stderr, &cmd_sweep_entry);
		return EXIT_USAGE;
	}
	/* A sweep can take minutes: find an unwritable --junit first. */
	if (output_check_paths(o) != EXIT_OK ||
	    output_read_baseline(o, true) != EXIT_OK)
		return EXIT_USAGE;
	memset(&sw, 0, sizeof sw);
	sw.options = o;
	if (parse_vary(&sw, o) < 0 || output_load_configs(o, &list) < 0) {
		free(sw.vary);
		return EXIT_USAGE;
	}
	if (list.n != 1) {
		fprintf(stderr, "%s: sweep: %s holds %zu configs; sweep takes "
		    "one\n", progname, o->args[0], list.n);
		config_list_free(&list);
		free(sw.vary);
		return EXIT_USAGE;
	}
	sw.base = &list.v[0];
	if (parse_bounds(&sw, o) < 0) {
		command_usage(stderr, &cmd_sweep_entry);
		sweep_free(&sw, &list);
		return EXIT_USAGE;
	}
	/*
	 * Context parallelism is the config's own: it splits the sequence,
	 * which the model sizes were chosen for, so sweep keeps it and
	 * spreads the rest of the world over dp, pp and tp.
	 */
	if (o->world % sw.base->mesh.cp != 0) {
		fprintf(stderr, "%s: sweep: --world %d is not a multiple of "
		    "the config's mesh.cp (%d)\n", progname, o->world,
		    sw.base->mesh.cp);
		sweep_free(&sw, &list);
		return EXIT_USAGE;
	}
	drop_inapplicable(&sw);
	enumerate(&sw, o->world);
	if (sw.npoints == 0) {
		fprintf(stderr, "%s: sweep: no mesh of %d ranks is within "
		    "--keep, --fix, --min and --max\n", progname, o->world);
		sweep_free(&sw, &list);
		return EXIT_USAGE;
	}
	sw.rows = o->format == FORMAT_TEXT && !o->quiet;
	sw.color = sw.rows && options_use_color(o, stdout);
	if (o->numeric && o->world > o->numeric_max)
		fprintf(stderr, "%s: sweep: world %d is above --numeric-max %d: "
		    "no numeric audit\n", progname, o->world, o->numeric_max);
	if (json) {
		jsonw_init(&js, stdout, false);
		jsonw_begin_array(&js);
	}
	if (sw.rows)
		print_header(&sw);
	/* On a terminal the rows that come show the progress themselves. */
	if (!(sw.rows && isatty(STDOUT_FILENO)))
		progress_start("sweep", (int64_t)sw.npoints);
	workers_start(&wk, &sw, o);
	for (i = 0; i < sw.npoints; i++) {
		struct sweep_point *pt = &sw.points[i];
		double t0 = output_now(), seconds;

		/* The reader has gone (| head): auditing on is for no one. */
		if (ferror(stdout))
			break;
		progress_update((int64_t)i);
		if (worker_says_ok(&wk, i, &seconds) &&
		    point_config(&sw, pt, &c, whybuf, sizeof whybuf) == NULL) {
			struct audit correct;

			memset(&correct, 0, sizeof correct);
			atom_space_init(&correct.atoms);
			pt->failed = false;
			pt->correct = true;
			if (sw.rows)
				print_row(&sw, pt, &correct, &c);
			fflush(stdout);
			cfg_free(&c);
			pt->seconds = seconds;
			continue;
		}
		if ((why = point_config(&sw, pt, &c, whybuf, sizeof whybuf)) ==
		    NULL) {
			sym_context_build(&ctx, &c);
			if ((why = sym_context_unauditable(&ctx, &c,
			    &blame, whybuf, sizeof whybuf)) != NULL) {
				sym_context_free(&ctx);
				cfg_free(&c);
				free(pt->label);
				pt->label = NULL;
			}
		}
		if (why != NULL) {
			sw.skipped++;
			if (sw.rows && o->verbose)
				print_skipped(&sw, pt, why);
			continue;
		}
		sym_audit(&ctx, &a, NULL, NULL);
		sym_context_free(&ctx);
		/*
		 * Each fix audits the mesh again: only where it is shown
		 * (JSON, -v, JUnit), not for the rows of a large sweep.
		 */
		if (json || o->verbose || o->junit != NULL)
			fix_derive(&a);
		accept_point(o, &sw, &a, &c);
		summarize(&sw, pt, &a, o->junit != NULL);
		if (o->numeric && o->world <= o->numeric_max &&
		    (why = numeric_too_big(&c, whybuf, sizeof whybuf)) != NULL)
			a.numeric_verdict = pt->numeric = skip_numeric(&sw, pt,
			    why);
		else if (o->numeric && o->world <= o->numeric_max)
			a.numeric_verdict = pt->numeric = numeric_point(o, &sw,
			    pt, &c, &status);
		if (status > EXIT_RUNTIME) {
			audit_free(&a);
			cfg_free(&c);
			break;
		}
		if (json || o->format == FORMAT_JSONL) {
			a.nvaried = point_varied(&sw, pt, varied);
			a.varied = varied;
		}
		if (json && output_expand_refused(o, &a, pt->label)) {
			struct audited refused = { .label = pt->label,
			    .why_not = "--expand past its size bound" };

			jsonw_not_audited(&js, &refused);
			if (status < EXIT_USAGE)
				status = EXIT_USAGE;
		} else if (json)
			report_json(&js, &a, &(struct report_options){
			    .expand = o->expand });
		else if (o->format == FORMAT_JSONL) {
			jsonw_init(&js, stdout, true);
			report_json_summary(&js, &a);
		} else if (sw.rows)
			print_row(&sw, pt, &a, &c);
		/* A row is worth seeing as soon as it is known (| tee). */
		fflush(stdout);
		audit_free(&a);
		cfg_free(&c);
		pt->seconds = output_now() - t0;
	}
	if (wk.n > 0)
		workers_stop(&wk);
	progress_end();
	if (sw.too_big > 0)
		fprintf(stderr, "%s: sweep: %d mesh%s not audited numerically, "
		    "too large to run: their verdicts are symbolic only\n",
		    progname, sw.too_big, sw.too_big == 1 ? "" : "es");
	if (status > EXIT_RUNTIME) {
		char	 buf[16];

		fprintf(stderr, "%s: sweep: interrupted by %s during the "
		    "numeric audit of %s\n", progname,
		    launch_signal_name(status - EXIT_INTERRUPTED, buf,
		    sizeof(buf)),
		    sw.points[i].label);
		sweep_free(&sw, &list);
		launch_exit_interrupted(status);
		return status;
	}
	if (json)
		jsonw_end_array(&js);
	if (o->format != FORMAT_TEXT) {
		rc = EXIT_OK;
		for (i = 0; i < sw.npoints; i++)
			if (sw.points[i].failed)
				rc = EXIT_WRONG;
	} else
		rc = print_summary(&sw);
	if (o->junit != NULL && write_junit(o->junit, &sw) != EXIT_OK)
		rc = EXIT_RUNTIME;
	if ((st = finish_baseline(o, &sw)) > rc)
		rc = st;
	if (status == EXIT_OK || rc == EXIT_RUNTIME)
		status = rc;
	sweep_free(&sw, &list);
	return status;
}

const struct command cmd_sweep_entry = {
	.name = "sweep",
	.operands = "CONFIG",
	.summary = "audit every valid mesh of N ranks, and each --vary flag "
	    "combination",
	.scope = SCOPE_SWEEP,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_sweep_exec
};
