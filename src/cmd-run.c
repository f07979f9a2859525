/*
 * gradaudit run CONFIG...: the symbolic audit, then the numeric audit on
 * real MPI ranks.
 *
 * Like torchrun, run starts its own MPI job: outside a launcher it checks
 * the configs (so a bad config exits 2 before anything starts) and then
 * runs `LAUNCHER -n P gradaudit run ...` on itself.  Inside the job every
 * process loads the same configs, builds the same symbolic audit and takes
 * part in the numeric one; process 0 prints the report.  All processes
 * agree on the exit status before they leave.  In a job run started, process
 * 0 sends its report to the launching parent, which prints it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "commands.h"
#include "exitcode.h"
#include "hash.h"
#include "launch.h"
#include "numeric.h"
#include "output.h"
#include "symbolic.h"
#include "transport.h"
#include "xmalloc.h"

#define DEFAULT_MAX_PROCS	16

/*
 * One process per mesh rank of the largest config, at most 16 (or
 * --procs): more processes than mesh ranks would only sit idle.
 */
static int
choose_procs(const struct config_list *list, int asked)
{
	size_t	i;
	int	world, most = 1, want;

	for (i = 0; i < list->n; i++) {
		world = list->v[i].mesh.dp * list->v[i].mesh.pp *
		    list->v[i].mesh.tp;
		if (world > most)
			most = world;
	}
	want = asked > 0 ? asked : DEFAULT_MAX_PROCS;
	return most < want ? most : want;
}

/*
 * Run the job and, with --junit, write the report it rendered (or, if it
 * failed, an error per config) here, on the host the user is on.
 */
static int
launch(struct options *o, const struct config_list *list)
{
	struct launch_options	 lo;
	struct launch_attachment junit = { NULL, 0 };
	const char		*env = getenv("GRADAUDIT_MPIEXEC");
	int			 status;

	memset(&lo, 0, sizeof lo);
	lo.launcher = o->launcher ? o->launcher :
	    env && *env ? env : "mpiexec";
	lo.procs = choose_procs(list, o->procs);
	lo.timeout = o->timeout;
	lo.progress = isatty(STDERR_FILENO);
	lo.attachment = &junit;
	/*
	 * The job's report reaches our stdout through a pipe, so the job
	 * cannot see the terminal: tell it (options_use_color).  Without
	 * this, run never coloured (issue 10).
	 */
	if (o->color == COLOR_AUTO && setenv("GRADAUDIT_COLOR",
	    options_use_color(o, stdout) ? "always" : "never", 1) != 0)
		fatal("setenv");
	status = launch_job(&lo, o->argc, o->argv);
	if (o->junit != NULL && status != EXIT_RUNTIME && junit.data != NULL) {
		if (output_junit_bytes(o->junit, junit.data, junit.len) !=
		    EXIT_OK)
			status = EXIT_RUNTIME;
	} else if (status == EXIT_USAGE)
		output_junit_not_audited(o, "configuration error, see stderr");
	else if (status > EXIT_RUNTIME)
		output_junit_not_audited(o, "interrupted, see stderr");
	else if (status != EXIT_OK && status != EXIT_WRONG)
		output_junit_not_audited(o, "runtime failure, see stderr");
	else if (o->junit != NULL) {
		fprintf(stderr, "%s: the MPI job sent no JUnit report\n",
		    progname);
		output_junit_not_audited(o, "runtime failure, see stderr");
		status = EXIT_RUNTIME;
	}
	free(junit.data);
	return status;
}

/*
 * The JUnit report of a job: sent to the launching parent when there is
 * one, written here when the user started the job.
 */
static int
junit_from_job(const struct options *o, const struct audited *v, size_t n)
{
	char	*xml = NULL;
	size_t	 len = 0;
	FILE	*fp;
	int	 status = EXIT_OK;

	if ((fp = open_memstream(&xml, &len)) == NULL)
		fatal("open_memstream");
	output_junit_write(fp, v, n, "gradaudit.run");
	if (fclose(fp) != 0)
		fatal("open_memstream");
	if (!launch_report_attachment(xml, len))
		status = output_junit_bytes(o->junit, xml, len);
	free(xml);
	return status;
}

/* The digest of the bytes of every config file as loaded, in order. */
static uint64_t
configs_digest(const struct config_list *list)
{
	struct hash_state	 h;
	size_t			 i;

	hash_begin(&h);
	for (i = 0; i < list->n; i++)
		hash_update_u64s(&h, &list->v[i].source_digest, 1);
	return hash_end(&h);
}

/*
 * The job reads the config files again, after the parent checked them: a
 * file replaced meanwhile was audited in its new form (issue 8).  The
 * parent passes the digest of what it checked in GRADAUDIT_CONFIG_DIGEST,
 * and a process of the job that read anything else fails.
 */
#define CONFIG_DIGEST_VAR	"GRADAUDIT_CONFIG_DIGEST"

static void
pass_digest(const struct config_list *list)
{
	char	 hex[17];

	hash_hex(configs_digest(list), hex);
	if (setenv(CONFIG_DIGEST_VAR, hex, 1) == -1)
		fatal("setenv");
}

static bool
same_as_checked(const struct config_list *list)
{
	const char	*want = getenv(CONFIG_DIGEST_VAR);
	char		 got[17];

	if (getenv("GRADAUDIT_WORKER") == NULL || want == NULL)
		return true;
	hash_hex(configs_digest(list), got);
	return strcmp(got, want) == 0;
}

/*
 * Processes other than 0 stay silent while loading: the configs were
 * checked before launch (or every process would print the same error).
 */
static int
load_quietly(struct options *o, struct config_list *list, int proc)
{
	int	saved = -1, devnull, rc;

	if (proc != 0 && (devnull = open("/dev/null", O_WRONLY)) >= 0) {
		fflush(stderr);
		saved = dup(STDERR_FILENO);
		dup2(devnull, STDERR_FILENO);
		close(devnull);
	}
	rc = output_load_configs(o, list);
	if (saved >= 0) {
		dup2(saved, STDERR_FILENO);
		close(saved);
	}
	return rc;
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
 * A config can pass validation (check audits it symbolically) and still be
 * far too large to run: refuse it before anything is launched.
 */
static int
check_sizes(const struct config_list *list, bool report)
{
	const char	*why;
	size_t		 i;

	for (i = 0; i < list->n; i++)
		if ((why = numeric_too_big(&list->v[i])) != NULL) {
			if (report)
				fprintf(stderr, "%s: %s: %s: %s\n", progname,
				    list->v[i].file, list->v[i].name, why);
			return EXIT_USAGE;
		}
	return EXIT_OK;
}

static int
run_in_job(struct options *o)
{
	struct config_list	 list;
	struct audited		*v;
	struct sym_context	 ctx;
	struct numeric_options	 no;
	struct transport	 t;
	int			 proc, nprocs, status = EXIT_OK, rc;
	bool			 loaded;
	size_t			 i;

	MPI_Init(NULL, NULL);
	MPI_Comm_rank(MPI_COMM_WORLD, &proc);
	MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
	if (getenv("GRADAUDIT_WORKER") == NULL)
		launch_arm_watchdog(o->timeout);
	else
		launch_arm_worker_watchdog(o->timeout);
	loaded = load_quietly(o, &list, proc) == 0;
	rc = !loaded ? EXIT_USAGE : check_sizes(&list, proc == 0);
	if (rc == EXIT_OK && !same_as_checked(&list))
		rc = EXIT_RUNTIME;
	if ((status = agree(rc)) == EXIT_RUNTIME) {
		if (proc == 0)
			fprintf(stderr, "%s: a configuration file changed "
			    "after gradaudit run checked it, before its MPI "
			    "job read it: nothing was audited\n", progname);
		if (loaded)
			config_list_free(&list);
		return finish(proc, EXIT_RUNTIME);
	}
	if (status != EXIT_OK) {
		/* Only the others failed: they were silenced, so say it. */
		if (proc == 0 && rc == EXIT_OK)
			fprintf(stderr, "%s: another process of the MPI job "
			    "could not load the configuration: every process "
			    "must see the same files\n", progname);
		if (loaded)
			config_list_free(&list);
		return finish(proc, EXIT_USAGE);
	}
	memset(&no, 0, sizeof no);
	no.arith = o->arith;
	no.seed = o->seed;
	no.progress = proc == 0 && isatty(STDERR_FILENO);

	v = xcalloc(list.n, sizeof *v);
	for (i = 0; i < list.n && status == EXIT_OK; i++) {
		double t0 = output_now();

		v[i].audit = xcalloc(1, sizeof *v[i].audit);
		v[i].label = list.v[i].name;
		sym_context_build(&ctx, &list.v[i]);
		sym_audit(&ctx, v[i].audit, NULL, NULL);
		transport_init(&t, ctx.model.mesh.world);
		rc = numeric_audit(&ctx, &t, &no, v[i].audit);
		transport_free(&t);
		sym_context_free(&ctx);
		if (rc != EXIT_OK)
			status = rc;
		v[i].seconds = output_now() - t0;
	}
	if (status == EXIT_OK && proc == 0) {
		struct options report_only = *o;
		struct launch_capture cap;
		bool	 sent = launch_report_begin(&cap);

		report_only.junit = NULL;
		status = output_audits(&report_only, v, list.n,
		    output_as_array(&list), "gradaudit.run");
		if (sent && launch_report_end(&cap) != EXIT_OK)
			status = EXIT_RUNTIME;
		if (o->junit != NULL && junit_from_job(o, v, list.n) !=
		    EXIT_OK)
			status = EXIT_RUNTIME;
	}
	else if (status == EXIT_OK)
		for (i = 0; i < list.n; i++)
			if (!(v[i].audit->consistent && v[i].audit->correct))
				status = EXIT_WRONG;
	status = agree(status);
	for (i = 0; i < list.n; i++)
		if (v[i].audit != NULL) {
			audit_free(v[i].audit);
			free(v[i].audit);
		}
	free(v);
	config_list_free(&list);
	return finish(proc, status);
}

static int
cmd_run_exec(struct options *o)
{
	struct config_list	 list;
	int			 status;

	if (launch_under_mpi())
		return run_in_job(o);
	if (output_load_configs(o, &list) < 0)
		return EXIT_USAGE;
	if (check_sizes(&list, true) != EXIT_OK) {
		output_junit_not_audited(o, "configuration error, see stderr");
		config_list_free(&list);
		return EXIT_USAGE;
	}
	pass_digest(&list);
	status = launch(o, &list);
	config_list_free(&list);
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
