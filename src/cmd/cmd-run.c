/*
 * gradaudit run CONFIG...: the symbolic audit, then the numeric audit on
 * real MPI ranks.
 *
 * Like torchrun, run starts its own MPI job: outside a launcher it checks
 * the configs (a bad one is an error case of its own, and when none loads
 * nothing starts) and then runs `LAUNCHER -n P gradaudit run ...` on
 * itself.  Inside the job every
 * process loads the same configs, builds the same symbolic audit and takes
 * part in the numeric one; process 0 prints the report.  All processes
 * agree on the exit status before they leave.  In a job run started, process
 * 0 sends its report to the launching parent, which prints it.
 */
#include <sys/statvfs.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "base/clock.h"
#include "base/cores.h"
#include "base/exitcode.h"
#include "base/hash.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/output.h"
#include "launch/jobdir.h"
#include "launch/launch.h"
#include "numeric/numeric.h"
#include "numeric/shrink.h"
#include "numeric/transport.h"
#include "report/summary.h"
#include "symbolic/fix.h"
#include "symbolic/symbolic.h"

/*
 * MPICH keeps each process's shared-memory queues in /dev/shm, and a
 * container gets 64 MiB of it from Docker: there MPI_Init fails on every
 * rank ("UCX ERROR Not enough memory ... Please check that /dev/shm ...")
 * and the job dies with exit 15.  Measured with MPICH 4.0 (ch4:ucx) on a
 * tmpfs of each size: 2 processes need 8-16 MiB, 4 need 16-24, 8 need
 * 32-48, 16 need 64-80, so about 5 MiB each.
 *
 * The space is measured with statvfs before launching rather than read
 * from MPICH's error text: the text differs between MPICH's devices (ucx,
 * ofi, ch3) and versions, and without a terminal the job's stderr goes
 * straight to the user, never through gradaudit.
 */
#define SHM_DIR		"/dev/shm"
#define SHM_PER_PROC	((uint64_t)5 << 20)

/* Bytes free in /dev/shm, or 0 where there is none to measure. */
static uint64_t
shm_free(void)
{
	struct statvfs	 sv;

	if (statvfs(SHM_DIR, &sv) != 0)
		return 0;
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/*
 * How many MPI processes the shared memory free holds: 0 when not even
 * one.  It was at least 1, so that 1 MiB had "room for 1 MPI process" and
 * a job of one process that failed for want of it was not told why
 * (issue 26).
 */
static int
shm_fit(uint64_t avail)
{
	uint64_t	 n = avail / SHM_PER_PROC;

	return n > INT_MAX ? INT_MAX : (int)n;
}

/* What to do about too small a /dev/shm, after saying what is wrong. */
static void
shm_advice(uint64_t avail, int procs)
{
	int	 fit = shm_fit(avail);

	fprintf(stderr, "%s: %s has %llu MiB free and %d MPI process%s "
	    "about %llu MiB: ", progname, SHM_DIR,
	    (unsigned long long)(avail >> 20), procs,
	    procs == 1 ? " needs" : "es need",
	    (unsigned long long)((procs * SHM_PER_PROC) >> 20));
	if (fit >= 1)
		fprintf(stderr, "use --procs %d, or give the container more "
		    "shared memory (docker run --shm-size=1g)\n", fit);
	else
		fprintf(stderr, "give the container more shared memory "
		    "(docker run --shm-size=1g)\n");
}

/*
 * One process per available core (or --procs), and never more than the
 * largest config audited numerically has mesh ranks: more would only sit
 * idle.  By default, no more than /dev/shm holds either.  The default
 * was one process per rank up to 16, and on a 2-core CI runner 16
 * processes busy-polling MPICH's shared memory took 5.5 s where 2 took
 * 0.3 s (issue 10).
 */
static int
choose_procs(const struct config_list *list, int asked, bool shrink)
{
	uint64_t avail;
	size_t	 i;
	int64_t	 world, most = 1;
	int	 want;
	char	 why[NUMERIC_WHY_SIZE];

	for (i = 0; i < list->n; i++) {
		if (numeric_skip_reason(&list->v[i], why, sizeof why) != NULL) {
			/*
			 * --shrink audits a smaller config, which only the
			 * job finds: the count is left to the cores.
			 */
			if (shrink)
				most = INT64_MAX;
			continue;
		}
		/* Issue 22: without cp, a 4-rank cp config started 2. */
		world = cfg_world(&list->v[i]);
		if (world > most)
			most = world;
	}
	want = asked > 0 ? asked : cores_available();
	if (most < want)
		want = (int)most;
	if (asked <= 0 && (avail = shm_free()) > 0 && shm_fit(avail) < want) {
		if (shm_fit(avail) == 0)
			fprintf(stderr, "%s: %s has %llu MiB free, not room for "
			    "one MPI process (about %llu MiB): the MPI job "
			    "will probably fail (docker run --shm-size=1g "
			    "gives a container more)\n", progname, SHM_DIR,
			    (unsigned long long)(avail >> 20),
			    (unsigned long long)(SHM_PER_PROC >> 20));
		else
			fprintf(stderr, "%s: %s has %llu MiB free, room for %d "
			    "MPI process%s, not %d (docker run --shm-size=1g "
			    "gives a container more)\n", progname, SHM_DIR,
			    (unsigned long long)(avail >> 20), shm_fit(avail),
			    shm_fit(avail) == 1 ? "" : "es", want);
		want = shm_fit(avail) > 0 ? shm_fit(avail) : 1;
	}
	return want;
}

/* Where a job that sent no reports leaves the files: every operand an error. */
static const char *
not_audited_why(int status)
{
	if (status == EXIT_USAGE)
		return "configuration error, see stderr";
	if (status > EXIT_RUNTIME)
		return "interrupted, see stderr";
	return "runtime failure, see stderr";
}

/*
 * Run the job, `gradaudit run ARGS` with ARGS its arguments' file
 * (jobdir.h), and, with --junit or --summary, write the reports it
 * rendered (or, if it failed, an error per config) here, on the host the
 * user is on.
 */
static int
launch(struct options *o, const struct config_list *list, char *args)
{
	char			*job[] = { o->argv[0], "run", args, NULL };
	struct launch_options	 lo;
	struct launch_attachment junit = { NULL, 0 }, summary = { NULL, 0 };
	struct launch_attachment baseline = { NULL, 0 };
	const char		*env = getenv("GRADAUDIT_MPIEXEC");
	uint64_t		 avail;
	bool			 sent;
	int			 status;

	memset(&lo, 0, sizeof lo);
	lo.launcher = o->launcher ? o->launcher :
	    env && *env ? env : "mpiexec";
	lo.procs = choose_procs(list, o->procs, o->shrink);
	lo.timeout = o->timeout;
	lo.progress = isatty(STDERR_FILENO);
	lo.attachment = &junit;
	lo.summary = &summary;
	lo.baseline = &baseline;
	/*
	 * The job's report reaches our stdout through a pipe, so the job
	 * cannot see the terminal: tell it (options_use_color).  Without
	 * this, run never coloured (issue 10).
	 */
	if (o->color == COLOR_AUTO && setenv("GRADAUDIT_COLOR",
	    options_use_color(o, stdout) ? "always" : "never", 1) != 0)
		fatal("setenv");
	status = launch_job(&lo, 3, job);
	/*
	 * A job that failed with more processes than /dev/shm holds most
	 * likely failed in MPI_Init for want of it: say so.
	 */
	if (status == EXIT_RUNTIME && (avail = shm_free()) > 0 &&
	    shm_fit(avail) < lo.procs) {
		fprintf(stderr, "%s: the MPI job probably failed for want of "
		    "shared memory\n", progname);
		shm_advice(avail, lo.procs);
	}
	sent = (o->junit == NULL || junit.data != NULL) &&
	    (o->summary == NULL || summary.data != NULL);
	if (status <= EXIT_USAGE && sent) {
		if (o->junit != NULL && output_junit_bytes(o->junit,
		    junit.data, junit.len) != EXIT_OK)
			status = EXIT_RUNTIME;
		if (o->summary != NULL && output_summary_bytes(o->summary,
		    summary.data, summary.len) != EXIT_OK)
			status = EXIT_RUNTIME;
		/* None comes when a config was not audited (output.h). */
		if (baseline.data != NULL && output_baseline_bytes(
		    o->write_baseline, baseline.data, baseline.len) != EXIT_OK)
			status = EXIT_RUNTIME;
	} else if (status == EXIT_OK || status == EXIT_WRONG) {
		fprintf(stderr, "%s: the MPI job sent no %s\n", progname,
		    junit.data == NULL && o->junit != NULL ? "JUnit report" :
		    "summary");
		output_junit_not_audited(o, not_audited_why(EXIT_RUNTIME));
		status = EXIT_RUNTIME;
	} else
		output_junit_not_audited(o, not_audited_why(status));
	free(junit.data);
	free(summary.data);
	free(baseline.data);
	return status;
}

enum rendered { RENDER_JUNIT, RENDER_SUMMARY, RENDER_BASELINE };

/* A report rendered on a memory stream. */
static char *
render(const struct options *o, const struct audited *v, size_t n,
    enum rendered what, size_t *len)
{
	char	*buf = NULL;
	FILE	*fp;

	if ((fp = open_memstream(&buf, len)) == NULL)
		fatal("open_memstream");
	switch (what) {
	case RENDER_JUNIT:
		output_junit_write(fp, v, n, "gradaudit.run");
		break;
	case RENDER_SUMMARY:
		output_summary_write(fp, v, n, "gradaudit.run");
		break;
	case RENDER_BASELINE:
		output_baseline_write(fp, o, v, n);
		break;
	}
	if (fclose(fp) != 0)
		fatal("open_memstream");
	return buf;
}

/*
 * The JUnit report, the summary and the --write-baseline file of a job:
 * sent to the launching parent when there is one, written here when the
 * user started the job.
 */
static int
reports_from_job(const struct options *o, const struct audited *v, size_t n)
{
	char	*doc;
	size_t	 len = 0;
	int	 status = EXIT_OK;

	if (o->junit != NULL) {
		doc = render(o, v, n, RENDER_JUNIT, &len);
		if (!launch_report_attachment(doc, len) &&
		    output_junit_bytes(o->junit, doc, len) != EXIT_OK)
			status = EXIT_RUNTIME;
		free(doc);
	}
	if (o->summary != NULL) {
		doc = render(o, v, n, RENDER_SUMMARY, &len);
		if (!launch_report_summary(doc, len) &&
		    output_summary_bytes(o->summary, doc, len) != EXIT_OK)
			status = EXIT_RUNTIME;
		free(doc);
	}
	if (o->write_baseline != NULL && output_baseline_complete(o, v, n)) {
		doc = render(o, v, n, RENDER_BASELINE, &len);
		if (!launch_report_baseline(doc, len) &&
		    output_baseline_bytes(o->write_baseline, doc, len) !=
		    EXIT_OK)
			status = EXIT_RUNTIME;
		free(doc);
	}
	return status;
}

/*
 * The digest of the bytes of every config file as loaded, in order, and
 * of which operands did not load.
 */
static uint64_t
configs_digest(const struct batch *b)
{
	struct hash_state	 h;
	uint64_t		 word;
	size_t			 i;

	hash_begin(&h);
	for (i = 0; i < b->n; i++) {
		word = b->items[i].config < 0 ? 0 :
		    b->list.v[b->items[i].config].source_digest;
		hash_update_u64s(&h, &word, 1);
	}
	return hash_end(&h);
}

/*
 * The job reads the configurations again, after the parent checked them:
 * a file replaced meanwhile was audited in its new form (issue 8).  It
 * reads the parent's copies now (jobdir.h), and the digest still guards
 * them: the parent passes the digest of what it checked in
 * GRADAUDIT_CONFIG_DIGEST, and a process of the job that read anything
 * else fails.
 */
#define CONFIG_DIGEST_VAR	"GRADAUDIT_CONFIG_DIGEST"

static void
pass_digest(const struct batch *b)
{
	char	 hex[17];

	hash_hex(configs_digest(b), hex);
	if (setenv(CONFIG_DIGEST_VAR, hex, 1) == -1)
		fatal("setenv");
}

static bool
same_as_checked(const struct batch *b)
{
	const char	*want = getenv(CONFIG_DIGEST_VAR);
	char		 got[17];

	if (getenv("GRADAUDIT_WORKER") == NULL || want == NULL)
		return true;
	hash_hex(configs_digest(b), got);
	return strcmp(got, want) == 0;
}

/*
 * Processes other than 0 stay silent while loading, or every process would
 * print the same error; so does process 0 when a parent started the job,
 * which has printed them.  Every process reads the baseline (the gate of
 * each depends on it); EXIT_USAGE when it cannot.
 */
static int
load_quietly(struct options *o, struct batch *b, int proc)
{
	int	saved = -1, devnull, rc;

	if ((proc != 0 || getenv("GRADAUDIT_WORKER") != NULL) &&
	    (devnull = open("/dev/null", O_WRONLY)) >= 0) {
		fflush(stderr);
		saved = dup(STDERR_FILENO);
		dup2(devnull, STDERR_FILENO);
		close(devnull);
	}
	rc = output_read_baseline(o, false);
	output_load_batch(o, b);
	if (saved >= 0) {
		dup2(saved, STDERR_FILENO);
		close(saved);
	}
	return rc;
}

/* Whether every process read what process 0 read. */
static bool
same_as_proc0(const struct batch *b)
{
	uint64_t	 mine = configs_digest(b), theirs = mine;
	int		 same, all = 0;

	if (MPI_Bcast(&theirs, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD) !=
	    MPI_SUCCESS)
		return false;
	same = mine == theirs;
	if (MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) !=
	    MPI_SUCCESS)
		return false;
	return all != 0;
}

/*
 * Every process leaves with the same status.  A failed agreement is itself
 * a runtime failure: MPI_ERRORS_RETURN is set on COMM_WORLD by then.
 */
static int
agree(int status)
{
	int	worst = status;

	if (MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX,
	    MPI_COMM_WORLD) != MPI_SUCCESS) {
		fprintf(stderr, "%s: MPI error while agreeing on the exit "
		    "status\n", progname);
		MPI_Abort(MPI_COMM_WORLD, EXIT_RUNTIME);
	}
	return worst;
}

/* Process 0's last word to the launching parent, then MPI_Finalize. */
static int
finish(int proc, int status)
{
	if (proc == 0)
		launch_report_status(status);
	MPI_Finalize();
	return status;
}

/*
 * The numeric audit of the config of ctx into audit, or why not: it is too
 * large to hold (issue 10: one such config stopped the batch).
 */
static int
numeric_or_skip(const struct sym_context *ctx, const char *skip,
    const struct numeric_options *no, struct audit *audit)
{
	struct transport	 t;
	int			 rc;

	if (skip != NULL) {
		audit->numeric_skipped = arena_strdup(&audit->arena, skip);
		return EXIT_OK;
	}
	transport_init(&t, ctx->model.mesh.world);
	rc = numeric_audit(ctx, &t, no, audit);
	transport_free(&t);
	return rc;
}

/*
 * run --shrink: the numeric audit of the smallest config found whose
 * symbolic verdict has the full one's signature (shrink.h), reported in
 * the full config's audit as the mesh it proved.  Process 0 searches,
 * since the search is bounded in time and two processes could stop at
 * different candidates; the others take its result.
 */
#define SHRINK_BUDGET	40.0	/* seconds; issue 24's target is 60 */

static int
audit_shrunk(const struct config *cfg, const struct sym_context *ctx,
    const char *skip, const struct numeric_options *no, int proc,
    struct audit *audit)
{
	struct shrink_result	 r;
	struct sym_context	 sctx;
	struct config		 small;
	struct audit		 sa;
	char			*note, over[64];
	int			 rc;

	if (proc == 0)
		shrink_search(cfg, audit, SHRINK_BUDGET, &r);
	if (MPI_Bcast(&r, sizeof r, MPI_BYTE, 0, MPI_COMM_WORLD) !=
	    MPI_SUCCESS)
		return EXIT_RUNTIME;
	if (!r.smaller || !r.fits) {
		/* The candidates that went past GRADAUDIT_MAX_MEMORY. */
		snprintf(over, sizeof over, "%d past GRADAUDIT_MAX_MEMORY",
		    r.over_limit);
		/* No time in it: the report stays the same run after run. */
		xasprintf(&note, "%s (%d candidate%s audited%s%s%s)",
		    !r.smaller ? "no smaller config keeps the symbolic verdict" :
		    "the smallest config found that keeps the symbolic verdict "
		    "is still too large", r.tried, r.tried == 1 ? "" : "s",
		    r.over_limit > 0 ? ", " : "", r.over_limit > 0 ?
		    over : "", r.timed_out ? ", time budget spent" : "");
		audit->shrink_note = arena_strdup(&audit->arena, note);
		free(note);
		/* Then the full config, when it fits, is the one proven. */
		return numeric_or_skip(ctx, skip, no, audit);
	}
	shrink_apply(&small, cfg, &r);
	sym_context_build(&sctx, &small);
	memset(&sa, 0, sizeof sa);
	sym_audit(&sctx, &sa, NULL, NULL);
	rc = numeric_or_skip(&sctx, NULL, no, &sa);
	audit->numeric = sa.numeric;
	audit->numeric_correct = audit_numeric_passes(&sa);
	audit->arith = sa.arith;
	audit->procs = sa.procs;
	audit->shrunk = true;
	audit->shrunk_sets = shrink_sets(cfg, &r, &audit->arena,
	    &audit->nshrunk_sets);
	audit->shrunk_world = r.world;
	audit_free(&sa);
	sym_context_free(&sctx);
	cfg_free(&small);
	return rc;
}

/*
 * The job's end: process 0 reports the batch's audits v (an entry whose
 * audit is NULL was not audited: why_not says why), every process agrees
 * on the status and the job finishes.  Frees v and b.
 */
static int
job_end(struct options *o, struct batch *b, struct audited *v, int proc,
    int status)
{
	size_t	 i;

	if (status == EXIT_OK && proc == 0) {
		struct options report_only = *o;
		struct launch_capture cap;
		bool	 sent;

		/* Only the reporting process says how to fix what it found. */
		for (i = 0; i < b->n; i++)
			if (v[i].audit != NULL && output_wants_fixes(o))
				fix_derive(v[i].audit);
		sent = launch_report_begin(&cap);

		report_only.junit = NULL;
		report_only.summary = NULL;
		status = output_audits(&report_only, v, b->n,
		    output_as_array(&b->list) || b->n > 1, "gradaudit.run");
		if (sent && launch_report_end(&cap) != EXIT_OK)
			status = EXIT_RUNTIME;
		if (reports_from_job(o, v, b->n) != EXIT_OK)
			status = EXIT_RUNTIME;
	}
	else if (status == EXIT_OK)
		for (i = 0; i < b->n; i++) {
			if (v[i].audit == NULL)
				status = EXIT_USAGE;
			else if (status == EXIT_OK &&
			    !audit_passes(v[i].audit))
				status = EXIT_WRONG;
		}
	status = agree(status);
	for (i = 0; i < b->n; i++)
		if (v[i].audit != NULL) {
			audit_free(v[i].audit);
			free(v[i].audit);
		}
	free(v);
	batch_free(b);
	return finish(proc, status);
}

/* The job's batch as audit_one goes through it, for job_over_limit. */
struct job {
	struct options	*o;
	struct batch	*b;
	struct audited	*v;
	size_t		 i;	/* the config being audited */
	int		 proc;
};

/*
 * A symbolic audit past GRADAUDIT_MAX_MEMORY (run_check_memory), in the
 * job: every process audits the config and reaches it at the same step.
 * Process 0 says why; the config is an error case of the batch like one
 * the size estimate refuses, the configs after it are not audited (the
 * run holds what it took), and the job ends as it does after the last
 * config: process 0 reports the configs before it and gives the launcher
 * the status word, without which it reported an MPI failure of a job
 * that "ran no gradaudit process" (exit 3) where the config is too large
 * (exit 2).  Exiting here at first left the configs audited before it
 * unreported, stdout empty.
 */
static void
job_over_limit(const char *why, void *arg)
{
	const struct job *j = arg;
	size_t		 i;

	if (j->proc == 0)
		fprintf(stderr, "%s: %s\n", progname, why);
	/* Half built, and the program ends: left to exit. */
	j->v[j->i].audit = NULL;
	j->v[j->i].why_not = why;
	for (i = j->i + 1; i < j->b->n; i++)
		batch_entry_unaudited(j->b, i, &j->v[i], j->proc == 0);
	exit(job_end(j->o, j->b, j->v, j->proc, EXIT_OK));
}

/*
 * The symbolic audit of one config, then its numeric audit: of the config
 * itself, or with --shrink of a smaller one with the same verdict.
 */
static int
audit_one(const struct config *cfg, const struct numeric_options *no,
    bool shrink, int proc, struct job *job, struct audited *v)
{
	struct sym_context	 ctx;
	const char		*skip;
	char			 why[NUMERIC_WHY_SIZE];
	double			 t0 = clock_seconds();
	int			 rc;

	v->audit = xcalloc(1, sizeof *v->audit);
	sym_context_build(&ctx, cfg);
	ctx.over_limit = job_over_limit;
	ctx.over_limit_arg = job;
	sym_audit(&ctx, v->audit, NULL, NULL);
	skip = numeric_skip_reason(cfg, why, sizeof why);
	if (shrink)
		rc = audit_shrunk(cfg, &ctx, skip, no, proc, v->audit);
	else
		rc = numeric_or_skip(&ctx, skip, no, v->audit);
	sym_context_free(&ctx);
	v->seconds = clock_seconds() - t0;
	return rc;
}

/*
 * The job: o its options, and in a job run started (jobargs, its
 * arguments' file, not NULL) args_read false when that file did not read.
 */
static int
run_in_job(struct options *o, bool args_read, const char *jobargs)
{
	struct batch		 b;
	struct audited		*v;
	struct numeric_options	 no;
	struct job		 job;
	int			 proc, nprocs, status = EXIT_OK, rc = EXIT_OK;
	size_t			 i;

	MPI_Init(NULL, NULL);
	MPI_Comm_rank(MPI_COMM_WORLD, &proc);
	MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
	if (getenv("GRADAUDIT_WORKER") == NULL)
		launch_arm_watchdog(o->timeout);
	else
		launch_arm_worker_watchdog(o->timeout);
	/* The arguments' file did not read (said): nothing to audit. */
	if (!args_read)
		return finish(proc, agree(EXIT_RUNTIME));
	/* The parent checked the paths when there is one. */
	if (proc == 0 && getenv("GRADAUDIT_WORKER") == NULL)
		rc = output_check_paths(o);
	if (load_quietly(o, &b, proc) != EXIT_OK && rc == EXIT_OK)
		rc = EXIT_USAGE;
	if (!same_as_checked(&b))
		rc = EXIT_RUNTIME;
	status = agree(rc);
	/* Every process has read the job's directory: it can go. */
	if (proc == 0 && jobargs != NULL)
		jobdir_discard(jobargs, o->read_from, o->nargs);
	if (status == EXIT_RUNTIME) {
		if (proc == 0)
			fprintf(stderr, "%s: a configuration file changed "
			    "after gradaudit run checked it, before its MPI "
			    "job read it: nothing was audited\n", progname);
		batch_free(&b);
		return finish(proc, EXIT_RUNTIME);
	}
	if (status == EXIT_OK && !same_as_proc0(&b)) {
		if (proc == 0)
			fprintf(stderr, "%s: another process of the MPI job "
			    "read other configuration files: every process "
			    "must see the same files\n", progname);
		status = EXIT_USAGE;
	}
	if (status != EXIT_OK) {
		batch_free(&b);
		return finish(proc, EXIT_USAGE);
	}
	memset(&no, 0, sizeof no);
	no.arith = o->arith;
	no.seed = o->seed;
	no.progress = proc == 0 && isatty(STDERR_FILENO);

	/*
	 * A runtime failure (a failed self-check) stops the batch: what the
	 * job computes after it is not to be trusted.
	 */
	v = xcalloc(b.n + 1, sizeof *v);
	job.o = o;
	job.b = &b;
	job.v = v;
	job.proc = proc;
	for (i = 0; i < b.n && status == EXIT_OK; i++) {
		batch_entry(&b, i, &v[i]);
		job.i = i;
		if (b.items[i].config >= 0)
			status = audit_one(&b.list.v[b.items[i].config], &no,
			    o->shrink, proc, &job, &v[i]);
		/* On every process, so that all reach process 0's verdict. */
		output_accept(o, &v[i]);
	}
	return job_end(o, &b, v, proc, status);
}

/*
 * No config loaded: there is nothing to launch, and the reports say for
 * each why.
 */
static int
report_unloaded(struct options *o, const struct batch *b)
{
	struct audited	*v = xcalloc(b->n + 1, sizeof *v);
	size_t		 i;
	int		 status;

	for (i = 0; i < b->n; i++)
		batch_entry(b, i, &v[i]);
	status = output_audits(o, v, b->n, b->n > 1, "gradaudit.run");
	free(v);
	return status;
}

/*
 * In a job the user started, every process reads every operand: one that
 * cannot be read twice (jobdir.h) would give each a part, or nothing.
 */
static int
refuse_uncopied(const struct options *o)
{
	int	 i;

	for (i = 0; i < o->nargs; i++) {
		if (!jobdir_read_once(o->args[i]))
			continue;
		if (strcmp(o->args[i], "-") == 0)
			fprintf(stderr, "%s: run: inside an MPI job the "
			    "standard input (-) is not read: save the "
			    "configuration to a file\n", progname);
		else
			fprintf(stderr, "%s: run: inside an MPI job every "
			    "process reads %s, which is not a regular file: "
			    "save the configuration to a file\n", progname,
			    o->args[i]);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/*
 * In the job run started: its one operand is the file of its arguments
 * (jobdir.h), which are parsed as the user's own were.
 */
static int
run_launched(struct options *outer)
{
	struct options	 o;
	char		**argv = NULL, **copies = NULL, *buf = NULL;
	int		 argc, ncopies, status;

	if (outer->nargs != 1 || jobdir_read(outer->args[0], outer->argv[0],
	    &argc, &argv, &copies, &ncopies, &buf) == -1 ||
	    options_parse(&o, "run", SCOPE_RUN, cmd_run_entry.operands, argc,
	    argv) != 0)
		/* Every process fails alike, and they agree on it. */
		status = run_in_job(outer, false, NULL);
	else {
		o.read_from = copies;
		/* The command's registry: command_exec closes it. */
		o.frameworks = outer->frameworks;
		status = run_in_job(&o, o.nargs <= ncopies, outer->args[0]);
		options_free(&o);
	}
	free(argv);
	free(copies);
	free(buf);
	return status;
}

static int
cmd_run_exec(struct options *o)
{
	struct batch	 b;
	struct jobdir	 jd;
	int		 status;

	if (launch_under_mpi()) {
		if (getenv("GRADAUDIT_WORKER") != NULL)
			return run_launched(o);
		if (refuse_uncopied(o) != EXIT_OK)
			return EXIT_USAGE;
		return run_in_job(o, true, NULL);
	}
	if (output_check_paths(o) != EXIT_OK ||
	    output_read_baseline(o, true) != EXIT_OK)
		return EXIT_USAGE;
	/* The parent checks what the job will read: the copies. */
	if (jobdir_make(&jd, o->argc, o->argv, o->nargs, o->args) == -1)
		return EXIT_RUNTIME;
	o->read_from = jd.copies;
	output_load_batch(o, &b);
	if (b.list.n == 0) {
		status = report_unloaded(o, &b);
		batch_free(&b);
	} else {
		pass_digest(&b);
		status = launch(o, &b.list, jd.args);
		batch_free(&b);
	}
	o->read_from = NULL;
	jobdir_remove(&jd);
	launch_exit_interrupted(status);
	return status;
}

const struct command cmd_run_entry = {
	.name = "run",
	.operands = "CONFIG ...",
	.summary = "symbolic audit, then numeric audit on MPI ranks, with "
	    "per-rank hashes",
	.scope = SCOPE_RUN,
	.min_args = 1,
	.max_args = -1,
	.exec = cmd_run_exec
};
