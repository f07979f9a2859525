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
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/cores.h"
#include "base/exitcode.h"
#include "base/json.h"
#include "base/progress.h"
#include "base/shellwords.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/output.h"
#include "cmd/sweep-points.h"
#include "cmd/sweep-workers.h"
#include "config/constraints.h"
#include "launch/launch.h"
#include "numeric/numeric.h"
#include "numeric/shrink.h"
#include "report/json-report.h"
#include "report/junit.h"
#include "report/report.h"
#include "symbolic/fix.h"
#include "symbolic/symbolic.h"

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
	if (sw->gtp_axis && off < len)
		off += (size_t)snprintf(label + off, len - off, " gtp=%d",
		    pt->gtp);
	if (sw->egtp_axis && off < len)
		off += (size_t)snprintf(label + off, len - off, " egtp=%d",
		    pt->egtp);
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
	if (sw->gtp_axis)
		arg_add(al, "mesh.gtp=%d", c->mesh.gtp);
	if (sw->egtp_axis)
		arg_add(al, "mesh.egtp=%d", c->mesh.egtp);
	for (z = 0; z < sweep_nsize_keys; z++) {
		if (!cfg_key_is_active(c, sweep_size_keys[z]))
			continue;
		v = (int)cfg_key_get(c, sweep_size_keys[z]);
		w = (int)cfg_key_get(sw->base, sweep_size_keys[z]);
		if (all || v != w)
			arg_add(al, "%s=%d", cfg_key_path(sweep_size_keys[z]), v);
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
	 * reproduce line like any other.  Rows no update reaches (pytorch
	 * #176076) have right gradients and a right norm: named as the
	 * summary names them.
	 */
	if (pt->nfamilies == 0 && a->nstale_rows > 0)
		printf("(rows of %s never updated)", a->stale_rows[0].param);
	else if (pt->nfamilies == 0)
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
	const int	 dims[NDIMS] = { pt->dp, pt->pp, pt->tp, pt->ep, pt->etp,
			     pt->gtp, pt->egtp };
	int		 d, k, n = 0;

	for (d = 0; d < NDIMS; d++) {
		/* gtp and egtp where the sweep varies them. */
		if ((d == DIM_GTP && !sw->gtp_axis) ||
		    (d == DIM_EGTP && !sw->egtp_axis))
			continue;
		v[n].name = cfg_key_leaf(sweep_dim_keys[d]);
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
		printf(" (%d skipped: the config does not fit their mesh; "
		    "-v says why)", sw->skipped);
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
    const struct sweep_point *pt, const struct config *c,
    const char *const *shrunk, size_t nshrunk, int *status)
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
	for (k = 0; k < (int)nshrunk; k++)
		arg_add(&al, "--set=%s", shrunk[k]);
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

/*
 * A mesh too large for the numeric audit is audited numerically on the
 * smaller config run --shrink would find (shrink.h), with the same
 * symbolic verdict, when there is one that fits; else it is skipped.
 */
#define SWEEP_SHRINK_BUDGET	10.0	/* seconds per mesh */

static const char *
shrunk_numeric(const struct options *o, struct sweep *sw,
    const struct sweep_point *pt, const struct config *c,
    struct audit *a, const char *why, int *status)
{
	struct shrink_result	 r;
	const char		**sets;
	size_t			 n;

	shrink_search(c, a, SWEEP_SHRINK_BUDGET, &r);
	if (!r.smaller || !r.fits)
		return skip_numeric(sw, pt, why);
	sets = shrink_sets(c, &r, &a->arena, &n);
	sw->shrunk++;
	return numeric_point(o, sw, pt, c, sets, n, status);
}

/*
 * A sweep past SWEEP_MAX_WORK is refused before any point is built, with
 * its count and what narrows it; --force-sweep audits it anyway.
 */
static int
check_size(struct sweep *sw, const struct options *o)
{
	uint64_t	 meshes, points, work;

	sweep_count(sw, o->world, &meshes, &points);
	work = points * (uint64_t)o->world;
	if (o->force_sweep || work <= SWEEP_MAX_WORK)
		return EXIT_OK;
	fprintf(stderr, "%s: sweep: --world %d is %llu meshes, %llu "
	    "configurations of %d ranks: %llu rank audits, over the bound of "
	    "%llu; narrow it with --keep, --fix, --min or --max, or give "
	    "--force-sweep\n", progname, o->world,
	    (unsigned long long)meshes, (unsigned long long)points, o->world,
	    (unsigned long long)work, (unsigned long long)SWEEP_MAX_WORK);
	return EXIT_USAGE;
}

static int
cmd_sweep_exec(struct options *o)
{
	struct config_list	 list;
	struct sweep		 sw;
	struct sym_context	 ctx;
	struct arena_cache	 blocks;	/* the points' audits' */
	struct config		 c;
	struct audit		 a;
	struct json		 js;
	struct varied_value	 varied[NDIMS + 1 + SWEEP_NVARY_FLAGS];
	bool			 json = o->format == FORMAT_JSON;
	const char		*why;
	enum cfg_key		 blame;
	char			 whybuf[SYM_WHY_SIZE];
	struct workers		 wk;
	struct keyset		 varying;
	size_t			 i;
	int			 status = EXIT_OK, rc, st, d;

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
	if (sweep_parse_vary(&sw, o) < 0) {
		free(sw.vary);
		return EXIT_USAGE;
	}
	/* The mesh and the --vary flags are sweep's: no warning needs them. */
	memset(&varying, 0, sizeof varying);
	for (d = 0; d < NDIMS; d++)
		keyset_add(&varying, sweep_dim_keys[d]);
	for (d = 0; d < sw.nvary; d++)
		keyset_add(&varying, sw.vary[d]);
	if (output_load_configs(o, &varying, &list) < 0) {
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
	if (sweep_parse_bounds(&sw, o) < 0) {
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
	sweep_drop_inapplicable(&sw);
	if (check_size(&sw, o) != EXIT_OK) {
		sweep_free(&sw, &list);
		return EXIT_USAGE;
	}
	sweep_enumerate(&sw, o->world);
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
	sweep_workers_start(&wk, &sw, o);
	arena_cache_init(&blocks);
	for (i = 0; i < sw.npoints; i++) {
		struct sweep_point *pt = &sw.points[i];
		double t0 = clock_seconds(), seconds;

		/* The reader has gone (| head): auditing on is for no one. */
		if (ferror(stdout))
			break;
		progress_update((int64_t)i);
		if (sweep_worker_says_ok(&wk, i, sw.npoints, &seconds) &&
		    sweep_point_config(&sw, pt, &c, whybuf, sizeof whybuf) == NULL) {
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
		if ((why = sweep_point_config(&sw, pt, &c, whybuf, sizeof whybuf)) ==
		    NULL) {
			sym_context_build(&ctx, &c);
			ctx.blocks = &blocks;
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
			a.numeric_verdict = pt->numeric = shrunk_numeric(o,
			    &sw, pt, &c, &a, why, &status);
		else if (o->numeric && o->world <= o->numeric_max)
			a.numeric_verdict = pt->numeric = numeric_point(o, &sw,
			    pt, &c, NULL, 0, &status);
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
		pt->seconds = clock_seconds() - t0;
	}
	arena_cache_free(&blocks);
	if (wk.n > 0)
		sweep_workers_stop(&wk);
	progress_end();
	if (sw.shrunk > 0)
		fprintf(stderr, "%s: sweep: %d mesh%s too large to run audited "
		    "numerically on a smaller config with the same symbolic "
		    "verdict (run --shrink)\n", progname, sw.shrunk,
		    sw.shrunk == 1 ? "" : "es");
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
