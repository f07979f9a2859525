/*
 * Starting the numeric audit's MPI job, like torchrun: when gradaudit run is
 * not already inside an MPI job, it runs `LAUNCHER -n P gradaudit run ...`
 * on itself with the same arguments, writes the report the job sends on
 * stdout, passes anything else the job writes to stderr, and maps what
 * happened to an exit status.  A launcher that cannot
 * start, a rank that dies and a job that outlives --timeout all give
 * EXIT_RUNTIME with a message; the whole job is killed, never left behind.
 */
#ifndef GRADAUDIT_LAUNCH_H
#define GRADAUDIT_LAUNCH_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/exitcode.h"

/* True when this process was started by an MPI launcher (PMI_SIZE etc.). */
bool	 launch_under_mpi(void);

/*
 * Forget the MPI job this process belongs to (PMI_*, PMIX_*, OMPI_*, ...):
 * for a child that must start a job of its own, such as the `run` that
 * sweep --numeric starts, which would otherwise join its parent's job.
 */
void	 launch_forget_job(void);

/*
 * A document the job hands to the launching parent through its stdout:
 * run's JUnit report, which the parent writes where the user asked, on its
 * own host (a job started with 'mpiexec -f hosts' may run process 0
 * elsewhere).
 */
struct launch_attachment {
	char	*data;		/* xmalloc'd, NULL when the job sent none */
	size_t	 len;
};

struct launch_options {
	const char	*launcher;	/* --launcher, else $GRADAUDIT_MPIEXEC, else "mpiexec" */
	int		 procs;		/* P */
	double		 timeout;	/* seconds; <= 0 means none */
	bool		 progress;	/* show a progress bar on stderr */
	/*
	 * When set, the job must send its status (launch_report_status,
	 * process 0 of a gradaudit job): a job that ends without it did not
	 * run gradaudit at all (a launcher that exits 0 without starting
	 * anything), and a status of 0 or 1 must come with a report
	 * (launch_report_begin); else the status is EXIT_RUNTIME, never a
	 * pass.
	 */
	bool		 need_result;
	/* When set, receives the job's attachment (launch_report_attachment). */
	struct launch_attachment *attachment;
	/* When set, receives the job's --summary (launch_report_summary). */
	struct launch_attachment *summary;
	/* When set, receives its --write-baseline (launch_report_baseline). */
	struct launch_attachment *baseline;
};

/*
 * The status of a job that a signal to gradaudit (SIGINT, SIGTERM or
 * SIGHUP) interrupted: the shell's 128+N.  The job has been ended.
 */
#define LAUNCH_INTERRUPTED(sig)	(EXIT_INTERRUPTED + (sig))

/*
 * The signals a process catches while a child of it does the work:
 * SIGINT, SIGTERM and SIGHUP are caught, to be forwarded to the child, and
 * SIGPIPE is ignored, so that a reader of stdout going away cannot leave
 * the child unsupervised.  launch_signals_restore puts back what
 * launch_signals_catch replaced (a child does so before exec).
 */
#define LAUNCH_NSIGNALS		4
struct launch_signals {
	struct sigaction	 old[LAUNCH_NSIGNALS];
};
void	 launch_signals_catch(struct launch_signals *);
void	 launch_signals_restore(const struct launch_signals *);
/* The last signal caught since launch_signals_catch, or 0. */
int	 launch_signals_caught(void);
/* "SIGTERM", or the number in buf for a signal without a name here. */
const char *launch_signal_name(int sig, char *buf, size_t size);

/*
 * With status LAUNCH_INTERRUPTED(sig), end this process by sig, as a shell
 * expects of a program it interrupted: a loop running gradaudit then stops
 * at Ctrl-C rather than going on with the next file.  Returns otherwise.
 */
void	 launch_exit_interrupted(int status);

/*
 * In a job started by launch_job, process 0 prints its report between
 * these two calls: launch_report_begin diverts stdout to a temporary file,
 * launch_report_end puts stdout back and sends the report to the parent
 * (jobstream.h), which alone writes to the user's stdout.  Outside such a
 * job launch_report_begin returns false, stdout is left alone and
 * launch_report_end must not be called.  launch_report_end returns EXIT_OK,
 * or EXIT_RUNTIME when the report could not be kept (the writer has said
 * why).
 */
struct launch_capture {
	int	 saved;		/* the real stdout */
	FILE	*file;
};
bool	 launch_report_begin(struct launch_capture *);
int	 launch_report_end(struct launch_capture *);

/*
 * In a job started by launch_job, process 0 sends the parent a document
 * (before launch_report_status); outside such a job it returns false and
 * the caller writes the document itself.
 */
bool	 launch_report_attachment(const char *data, size_t len);
/* The same for run's --summary Markdown, which the parent appends. */
bool	 launch_report_summary(const char *data, size_t len);
/* And for its --write-baseline file, which the parent writes. */
bool	 launch_report_baseline(const char *data, size_t len);

/*
 * In a job started by launch_job (GRADAUDIT_WORKER set), process 0 calls
 * this last, with the status every process agreed on.
 */
void	 launch_report_status(int status);

/*
 * Run the job: argv is this program's own argument vector (argv[0] is
 * replaced by the path of the running executable).  Returns the exit status
 * to use: the job's own status when it is 0..3, LAUNCH_INTERRUPTED(sig)
 * when a signal to this process ended the job, EXIT_RUNTIME otherwise.
 */
int	 launch_job(const struct launch_options *, int argc, char **argv);

/*
 * What launch_job does once it knows the command: run
 * `LAUNCHER... -n P argv...` (argv NULL-terminated, argv[0] looked up in
 * PATH by the launcher) with GRADAUDIT_WORKER=1 in its environment, and
 * supervise it as described above.  A NULL launcher means
 * $GRADAUDIT_MPIEXEC, else "mpiexec".  Separate so that tests can launch
 * something other than gradaudit.
 */
int	 launch_command(const struct launch_options *, char *const argv[]);

/*
 * For jobs the user started (`mpiexec -n P gradaudit run`), where no parent
 * enforces --timeout: after `timeout` seconds (rank 0; other ranks one
 * second later) print the timeout message and end the job with
 * MPI_Abort(MPI_COMM_WORLD, 3), or _exit(3) if that does not return.
 * Call after MPI_Init.  Uses SIGALRM and ITIMER_REAL.  A timeout <= 0
 * disarms it.
 */
void	 launch_arm_watchdog(double timeout);

/*
 * For the processes of a job launch_job started (GRADAUDIT_WORKER set):
 * every second, end the job as above when the gradaudit process that
 * started it (GRADAUDIT_PARENT) is gone, if it ran on this machine, or
 * when the timeout is more than a few seconds past, by which time that
 * process would have ended the job.  Call after MPI_Init; uses SIGALRM and
 * ITIMER_REAL.
 */
void	 launch_arm_worker_watchdog(double timeout);

#endif
