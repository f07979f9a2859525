/*
 * Starting and supervising the numeric audit's MPI job (see launch.h).
 *
 * The launcher runs in a process group of its own, so that one kill(2)
 * reaches it and everything it started locally, and the terminal's Ctrl-C
 * reaches only gradaudit, which decides what to forward.  MPICH's hydra
 * puts its proxy and each rank in a session of its own, out of reach of
 * that group; it cleans them up when mpiexec gets SIGTERM, but not when the
 * proxy is stopped or killed (issue 8).  So the job is ended politely
 * through the launcher's group and then for certain through proctree.h,
 * which finds every process of the job, and the messages say what the
 * parent saw happen.
 *
 * The parent polls with waitid(WNOWAIT) rather than reaping at once: while
 * the launcher is an unreaped zombie its process group ID cannot be reused,
 * so the SIGKILL to the group can never hit an unrelated process.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE	200809L
#endif

#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "base/clock.h"
#include "base/exitcode.h"
#include "base/shellwords.h"
#include "base/xmalloc.h"
#include "launch/jobstream.h"
#include "launch/launch.h"
#include "launch/proctree.h"

extern char **environ;

/* How long a job may take to end after SIGTERM before it gets SIGKILL. */
#define LAUNCH_GRACE		2.0
/* How long killed processes may take to be gone before the parent gives up. */
#define LAUNCH_KILL_WAIT	5.0
/* How often the parent looks at the job; short enough to feel immediate. */
#define LAUNCH_POLL_MSEC	20
/* The progress line appears only for jobs that take a while. */
#define LAUNCH_PROGRESS_AFTER	1.0
#define LAUNCH_PROGRESS_EVERY	0.2
/* How long the job's last output may trickle in after it has ended. */
#define LAUNCH_DRAIN		1.0

/*
 * Signals the parent handles while the job runs: the first three are
 * forwarded to the job; SIGPIPE is ignored, so that a reader of our stdout
 * going away cannot kill the parent and leave the job unsupervised.  The
 * job itself gets the dispositions gradaudit started with.
 */
static const int launch_handled[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
#define LAUNCH_NHANDLED	(sizeof(launch_handled) / sizeof(launch_handled[0]))
_Static_assert(LAUNCH_NHANDLED <= LAUNCH_NSIGNALS,
    "struct launch_signals holds every handled signal");

static volatile sig_atomic_t launch_caught;

static const struct {
	int		 number;
	const char	*name;
} launch_signal_names[] = {
	{ SIGHUP, "SIGHUP" }, { SIGINT, "SIGINT" }, { SIGQUIT, "SIGQUIT" },
	{ SIGILL, "SIGILL" }, { SIGTRAP, "SIGTRAP" }, { SIGABRT, "SIGABRT" },
	{ SIGBUS, "SIGBUS" }, { SIGFPE, "SIGFPE" }, { SIGKILL, "SIGKILL" },
	{ SIGUSR1, "SIGUSR1" }, { SIGSEGV, "SIGSEGV" }, { SIGUSR2, "SIGUSR2" },
	{ SIGPIPE, "SIGPIPE" }, { SIGALRM, "SIGALRM" }, { SIGTERM, "SIGTERM" },
	{ SIGXCPU, "SIGXCPU" }, { SIGXFSZ, "SIGXFSZ" }
};

bool
launch_under_mpi(void)
{
	static const char *const vars[] = {
		"PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
		"GRADAUDIT_WORKER"
	};
	size_t	 i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (getenv(vars[i]) != NULL)
			return true;
	return false;
}

void
launch_forget_job(void)
{
	extern char	**environ;
	char		**e, name[256];
	size_t		 n;
	static const char *const prefixes[] = {
		"PMI_", "PMIX_", "OMPI_", "MPI_LOCAL", "HYDRA_", "GRADAUDIT_WORKER"
	};
	size_t		 i;
	bool		 again = true;

	/* unsetenv moves environ's entries: rescan until nothing matches. */
	while (again) {
		again = false;
		for (e = environ; *e != NULL && !again; e++)
			for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]);
			    i++) {
				if (strncmp(*e, prefixes[i], strlen(prefixes[i]))
				    != 0)
					continue;
				n = strcspn(*e, "=");
				if (n >= sizeof(name))
					continue;
				memcpy(name, *e, n);
				name[n] = '\0';
				unsetenv(name);
				again = true;
				break;
			}
	}
}

const char *
launch_signal_name(int sig, char *buf, size_t size)
{
	size_t	 i;

	for (i = 0; i < sizeof(launch_signal_names) /
	    sizeof(launch_signal_names[0]); i++)
		if (launch_signal_names[i].number == sig)
			return launch_signal_names[i].name;
	snprintf(buf, size, "%d", sig);
	return buf;
}

static void
launch_nap(void)
{
	struct timespec	 ts = { 0, LAUNCH_POLL_MSEC * 1000 * 1000 };

	/* EINTR is fine: a signal is exactly what should wake us. */
	nanosleep(&ts, NULL);
}

/*
 * The job's environment: ours, with GRADAUDIT_WORKER=1 so that the copies
 * of gradaudit the launcher starts know they are ranks, not launchers,
 * even under a launcher that sets none of the usual PMI variables, and
 * GRADAUDIT_PARENT="PID START HOST" naming this process, for the ranks'
 * watchdog (launch_arm_worker_watchdog).  *parent holds that string.
 */
static char **
launch_worker_environment(char **parent)
{
	static char	 worker[] = "GRADAUDIT_WORKER=1";
	static const char *const ours[] = {
		"GRADAUDIT_WORKER=", "GRADAUDIT_PARENT="
	};
	char		**env, host[256];
	size_t		 n = 0, i, j = 0, k;

	if (gethostname(host, sizeof(host)) == -1)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	xasprintf(parent, "GRADAUDIT_PARENT=%ld %llu %s", (long)getpid(),
	    proctree_start_time(getpid()), host);
	while (environ[n] != NULL)
		n++;
	env = xreallocarray(NULL, n + 3, sizeof(*env));
	for (i = 0; i < n; i++) {
		for (k = 0; k < sizeof(ours) / sizeof(ours[0]); k++)
			if (strncmp(environ[i], ours[k], strlen(ours[k])) == 0)
				break;
		if (k == sizeof(ours) / sizeof(ours[0]))
			env[j++] = environ[i];
	}
	env[j++] = worker;
	env[j++] = *parent;
	env[j] = NULL;
	return env;
}

static void
launch_catch(int sig)
{
	launch_caught = sig;
}

void
launch_signals_catch(struct launch_signals *saved)
{
	struct sigaction	 sa;
	size_t			 i;

	launch_caught = 0;
	for (i = 0; i < LAUNCH_NHANDLED; i++) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = launch_handled[i] == SIGPIPE ? SIG_IGN :
		    launch_catch;
		sigemptyset(&sa.sa_mask);
		/* No SA_RESTART: a signal must cut the parent's wait short. */
		sa.sa_flags = 0;
		if (sigaction(launch_handled[i], &sa, &saved->old[i]) == -1)
			fatal("sigaction");
	}
}

void
launch_signals_restore(const struct launch_signals *saved)
{
	size_t	 i;

	for (i = 0; i < LAUNCH_NHANDLED; i++)
		sigaction(launch_handled[i], &saved->old[i], NULL);
}

int
launch_signals_caught(void)
{
	return launch_caught;
}

void
launch_exit_interrupted(int status)
{
	struct sigaction	 sa;
	sigset_t		 set;
	int			 sig = status - EXIT_INTERRUPTED;

	if (sig <= 0)
		return;
	fflush(stdout);
	fflush(stderr);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&set);
	sigaddset(&set, sig);
	if (sigaction(sig, &sa, NULL) == 0 &&
	    sigprocmask(SIG_UNBLOCK, &set, NULL) == 0)
		raise(sig);
	/* Still here: no such signal, or one whose default is not to end. */
}

/*
 * What the parent knows while the job runs.  The job's stdout always comes
 * through a pipe (fd[0]) and is read as jobstream.h describes: the report
 * and the JUnit report framed, anything else (hydra's "BAD TERMINATION"
 * banner, a launcher's chatter) to stderr, within bounds.  With a progress
 * line on the terminal, the job's stderr comes through a pipe too (fd[1])
 * and the parent copies it out, erasing the line first; written straight
 * to the terminal, the job's first line would land on top of the progress
 * line and keep its tail.  Ranks under hydra write into hydra's own pipes
 * anyway, so relaying takes no terminal away from them.  Without a
 * progress line the job simply inherits stderr.
 */
struct launch_watch {
	const struct launch_options	*opts;
	bool				 bar;	/* progress line wanted */
	bool				 drawn;	/* and on the screen now */
	double				 start;
	double				 last_draw;
	int				 tick;
	int				 fd[2];	/* job's stdout, stderr; -1 */
	bool				 midline[2]; /* line half written */
	struct jobstream		 stream; /* of the job's stdout */
};

static void
launch_unbar(struct launch_watch *w)
{
	if (!w->drawn)
		return;
	fputs("\r\033[K", stderr);
	w->drawn = false;
}

static void
launch_draw(struct launch_watch *w)
{
	static const char	 spin[] = "|/-\\";
	double			 now = clock_seconds(), elapsed = now - w->start;

	if (!w->bar || elapsed < LAUNCH_PROGRESS_AFTER ||
	    now - w->last_draw < LAUNCH_PROGRESS_EVERY ||
	    w->midline[0] || w->midline[1])
		return;
	w->last_draw = now;
	w->tick++;
	/*
	 * "12 s of 120 s" read as an estimate of the time left, when 120 s is
	 * only when the audit gives up (issue 10): name the limit for what
	 * it is.
	 */
	if (w->opts->timeout > 0)
		fprintf(stderr, "\r\033[Knumeric audit on %d processes: %.0f s "
		    "elapsed (--timeout %.0f s) %c", w->opts->procs, elapsed,
		    w->opts->timeout, spin[w->tick % 4]);
	else
		fprintf(stderr, "\r\033[Knumeric audit on %d processes: %.0f s "
		    "elapsed %c", w->opts->procs, elapsed, spin[w->tick % 4]);
	w->drawn = true;
}

/* False when the bytes could not all be written (EPIPE, ENOSPC, ...). */
static bool
launch_write_all(int fd, const char *buf, size_t len)
{
	ssize_t	 n;

	while (len > 0) {
		if ((n = write(fd, buf, len)) == -1) {
			if (errno == EINTR)
				continue;
			return false;
		}
		buf += n;
		len -= (size_t)n;
	}
	return true;
}

/* What the job wrote on one of its streams goes to our stderr. */
static void
launch_relay(struct launch_watch *w, int which, const char *buf, size_t n)
{
	if (n == 0)
		return;
	launch_unbar(w);
	fflush(stderr);
	launch_write_all(STDERR_FILENO, buf, n);
	w->midline[which] = buf[n - 1] != '\n';
}

/* The job's stdout that is no document of jobstream.h: chatter. */
static void
launch_chatter(void *arg, const char *buf, size_t n)
{
	launch_relay(arg, 0, buf, n);
}

bool
launch_report_attachment(const char *data, size_t len)
{
	if (getenv("GRADAUDIT_WORKER") == NULL)
		return false;
	jobstream_send(stdout, JOBSTREAM_ATTACHMENT, data, len);
	return true;
}

bool
launch_report_summary(const char *data, size_t len)
{
	if (getenv("GRADAUDIT_WORKER") == NULL)
		return false;
	jobstream_send(stdout, JOBSTREAM_SUMMARY, data, len);
	return true;
}

bool
launch_report_baseline(const char *data, size_t len)
{
	if (getenv("GRADAUDIT_WORKER") == NULL)
		return false;
	jobstream_send(stdout, JOBSTREAM_BASELINE, data, len);
	return true;
}

void
launch_report_status(int status)
{
	if (getenv("GRADAUDIT_WORKER") == NULL)
		return;
	jobstream_send_status(stdout, status);
}

bool
launch_report_begin(struct launch_capture *cap)
{
	cap->saved = -1;
	cap->file = NULL;
	if (getenv("GRADAUDIT_WORKER") == NULL)
		return false;
	fflush(stdout);
	if ((cap->file = tmpfile()) == NULL ||
	    (cap->saved = dup(STDOUT_FILENO)) == -1 ||
	    dup2(fileno(cap->file), STDOUT_FILENO) == -1)
		fatal("cannot keep the report in a temporary file");
	return true;
}

int
launch_report_end(struct launch_capture *cap)
{
	char	*data;
	long	 len;
	int	 failed;

	failed = fflush(stdout) != 0 || ferror(stdout);
	if (dup2(cap->saved, STDOUT_FILENO) == -1)
		fatal("dup2");
	close(cap->saved);
	clearerr(stdout);
	if (failed || fseek(cap->file, 0, SEEK_END) == -1 ||
	    (len = ftell(cap->file)) < 0 ||
	    fseek(cap->file, 0, SEEK_SET) == -1) {
		fclose(cap->file);
		return EXIT_RUNTIME;	/* output_audits has said why */
	}
	data = xmalloc((size_t)len + 1);
	if (fread(data, 1, (size_t)len, cap->file) != (size_t)len) {
		fprintf(stderr, "%s: cannot read back the report: %s\n",
		    progname, strerror(errno));
		free(data);
		fclose(cap->file);
		return EXIT_RUNTIME;
	}
	fclose(cap->file);
	jobstream_send(stdout, JOBSTREAM_REPORT, data, (size_t)len);
	free(data);
	return EXIT_OK;
}

/* Copy what the job wrote; without relayed output, just wait a little. */
static void
launch_pump(struct launch_watch *w)
{
	struct pollfd	 pfd[2];
	int		 which[2], i, nfds = 0;
	char		 buf[65536];
	ssize_t		 n;

	for (i = 0; i < 2; i++)
		if (w->fd[i] != -1) {
			pfd[nfds].fd = w->fd[i];
			pfd[nfds].events = POLLIN;
			which[nfds++] = i;
		}
	if (nfds == 0) {
		launch_nap();
		return;
	}
	if (poll(pfd, (nfds_t)nfds, LAUNCH_POLL_MSEC) <= 0)
		return;
	for (i = 0; i < nfds; i++) {
		if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0)
			continue;
		n = read(pfd[i].fd, buf, sizeof(buf));
		if (n > 0 && which[i] == 0)
			jobstream_feed(&w->stream, buf, (size_t)n);
		else if (n > 0)
			launch_relay(w, 1, buf, (size_t)n);
		else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			close(pfd[i].fd);
			w->fd[which[i]] = -1;
		}
	}
}

/* Let the job's last output through, within a bound: a stray may hold it. */
static void
launch_drain(struct launch_watch *w)
{
	double	 deadline = clock_seconds() + LAUNCH_DRAIN;
	int	 i;

	while ((w->fd[0] != -1 || w->fd[1] != -1) && clock_seconds() < deadline)
		launch_pump(w);
	for (i = 0; i < 2; i++)
		if (w->fd[i] != -1) {
			close(w->fd[i]);
			w->fd[i] = -1;
		}
	jobstream_end(&w->stream);
	launch_unbar(w);
	/*
	 * What the job left half a line of ends its line, or our own
	 * message (or the shell's prompt) would follow on it.
	 */
	for (i = 0; i < 2; i++)
		if (w->midline[i]) {
			launch_write_all(STDERR_FILENO, "\n", 1);
			w->midline[i] = false;
		}
}

/*
 * What became of the job's processes, as proctree_kill_all counted them,
 * in words that claim no more than the parent saw.
 */
static const char *
launch_ended(long left, char *buf, size_t size)
{
	if (left == 0)
		return "every process was ended";
	if (left < 0)
		return "the launcher's process group was ended";
	snprintf(buf, size, "%ld process%s of the job could not be ended",
	    left, left == 1 ? "" : "es");
	return buf;
}

/*
 * End the whole job: ask politely through the launcher's group (hydra's
 * mpiexec then ends its proxies and ranks), continuing every stopped
 * process of the job so that it can act on it; after LAUNCH_GRACE seconds
 * kill whatever is left, wherever it is.  Returns what proctree_kill_all
 * counted.
 */
static long
launch_end_job(struct launch_watch *w, pid_t pid, int sig, int *status)
{
	double	 deadline;
	long	 left;

	kill(-pid, sig);
	kill(-pid, SIGCONT);
	proctree_signal(SIGCONT);
	deadline = clock_seconds() + LAUNCH_GRACE;
	while (!proctree_exited(pid) && clock_seconds() < deadline)
		launch_pump(w);
	left = proctree_kill_all(pid, status, LAUNCH_KILL_WAIT);
	launch_drain(w);
	return left;
}

/* Turn the launcher's wait status into gradaudit's exit status. */
static int
launch_status(int status, const char *name)
{
	char	 buf[16];

	if (WIFEXITED(status) && WEXITSTATUS(status) <= EXIT_RUNTIME)
		return WEXITSTATUS(status);
	if (WIFEXITED(status))
		fprintf(stderr, "%s: MPI job failed: %s exited with "
		    "status %d\n", progname, name, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		fprintf(stderr, "%s: MPI job failed: %s killed by signal %s\n",
		    progname, name,
		    launch_signal_name(WTERMSIG(status), buf, sizeof(buf)));
	else
		fprintf(stderr, "%s: MPI job failed: %s ended with wait "
		    "status %#x\n", progname, name, (unsigned)status);
	return EXIT_RUNTIME;
}

/* Wait for the launcher, within the deadline, forwarding signals. */
static int
launch_supervise(struct launch_watch *w, pid_t pid, const char *name)
{
	const struct launch_options	*opts = w->opts;
	char				 buf[16], ended[64];
	int				 sig, status;
	long				 left;

	while (!proctree_exited(pid)) {
		if ((sig = launch_caught) != 0) {
			left = launch_end_job(w, pid, sig, &status);
			fprintf(stderr, "%s: numeric audit interrupted by %s; "
			    "%s\n", progname,
			    launch_signal_name(sig, buf, sizeof(buf)),
			    launch_ended(left, ended, sizeof(ended)));
			return LAUNCH_INTERRUPTED(sig);
		}
		if (opts->timeout > 0 &&
		    clock_seconds() - w->start >= opts->timeout) {
			left = launch_end_job(w, pid, SIGTERM, &status);
			fprintf(stderr, "%s: numeric audit timed out after "
			    "%g s; %s\n", progname, opts->timeout,
			    launch_ended(left, ended, sizeof(ended)));
			return EXIT_RUNTIME;
		}
		launch_draw(w);
		launch_pump(w);
	}
	/*
	 * The launcher is gone; nothing it started may outlive it, such as
	 * the ranks of a hydra proxy that was killed.
	 */
	left = proctree_kill_all(pid, &status, LAUNCH_KILL_WAIT);
	launch_drain(w);
	if (left > 0)
		fprintf(stderr, "%s: the MPI launcher has ended, but %s\n",
		    progname, launch_ended(left, ended, sizeof(ended)));
	return launch_status(status, name);
}

/*
 * The child: a group of its own, the signal dispositions gradaudit started
 * with, the relay pipes if any, then exec.  The job's stdin is always
 * /dev/null: ranks never read it, but mpiexec forwards whatever it can read
 * to rank 0, so in `... | while read f; do gradaudit run "$f"; done` it
 * swallowed the lines meant for the loop (issue 8), and on a terminal a
 * job in a background process group would be stopped by SIGTTIN.
 */
static void __attribute__((noreturn))
launch_child(char **argv, char **envp, const struct launch_signals *old,
    const int relay[2], int errfd)
{
	int	 fd;

	setpgid(0, 0);
	launch_signals_restore(old);
	/* gradaudit ignores SIGPIPE (gradaudit.c); the job's are not ours. */
	signal(SIGPIPE, SIG_DFL);
	if (relay[0] != -1 && dup2(relay[0], STDOUT_FILENO) == -1)
		goto fail;
	if (relay[1] != -1 && dup2(relay[1], STDERR_FILENO) == -1)
		goto fail;
	if ((fd = open("/dev/null", O_RDONLY)) == -1 ||
	    dup2(fd, STDIN_FILENO) == -1)
		goto fail;
	if (fd != STDIN_FILENO)
		close(fd);
	proctree_exec(argv, envp, errfd);
fail:
	proctree_exec_fail(errfd);
}

/*
 * Descriptors 0, 1 and 2 are opened on /dev/null if they are closed, before
 * any pipe is made: pipe(2) would otherwise hand one of them out, and the
 * job would inherit a closed descriptor (hydra's mpiexec exits at once
 * without a stderr, so `run cfg 2>&-` always failed; issue 8).  A closed
 * stdout becomes /dev/null opened for reading, so that writing the report
 * still fails with EBADF as it did, and says so; the job's own stdout is
 * always a pipe to this process.
 */
static void
launch_reserve_stdio(void)
{
	static const int	 flags[3] = { O_RDONLY, O_RDONLY, O_WRONLY };
	int			 fd, i;

	for (i = 0; i < 3; i++) {
		if (fcntl(i, F_GETFD) != -1 || errno != EBADF)
			continue;
		/* The lowest free descriptor: i, the lower ones are open. */
		if ((fd = open("/dev/null", flags[i])) == -1)
			fatal("/dev/null");
		if (fd != i)
			fatalx("launch_reserve_stdio: got descriptor %d for %d",
			    fd, i);
	}
}

/* A pipe whose ends are not inherited across exec. */
static void
launch_pipe(int fds[2])
{
	if (pipe(fds) == -1)
		fatal("pipe");
	if (fcntl(fds[0], F_SETFD, FD_CLOEXEC) == -1 ||
	    fcntl(fds[1], F_SETFD, FD_CLOEXEC) == -1)
		fatal("fcntl");
}

/*
 * What the job sent, once it has ended.  Its own word on its status wins
 * over the launcher's exit status, which a wrapper script may have lost;
 * no word at all means gradaudit never ran.  The report goes to stdout,
 * or to stderr when the job failed; the JUnit report to the caller.
 */
static int
launch_result(struct launch_watch *w, int rc, const char *name)
{
	static const char *const what[JOBSTREAM_NKINDS] = {
		[JOBSTREAM_REPORT] = "report",
		[JOBSTREAM_ATTACHMENT] = "JUnit report",
		[JOBSTREAM_SUMMARY] = "summary",
		[JOBSTREAM_BASELINE] = "baseline"
	};
	const struct launch_options	*opts = w->opts;
	const char			*data[JOBSTREAM_NKINDS], *why;
	size_t				 len[JOBSTREAM_NKINDS];
	bool				 have[JOBSTREAM_NKINDS];
	int				 k;

	if (opts->need_result && rc < EXIT_RUNTIME) {
		if (w->stream.status >= 0)
			rc = w->stream.status;
		else {
			fprintf(stderr, "%s: the MPI job ended without a "
			    "result: \"%s\" exited %d but ran no gradaudit "
			    "process\n", progname, name, rc);
			rc = EXIT_RUNTIME;
		}
	}
	for (k = 0; k < JOBSTREAM_NKINDS; k++) {
		have[k] = jobstream_doc(&w->stream, k, &data[k], &len[k], &why);
		if (why != NULL && rc < EXIT_RUNTIME) {
			fprintf(stderr, "%s: the MPI job's %s was %s\n",
			    progname, what[k], why);
			rc = EXIT_RUNTIME;
		}
	}
	/* A verdict comes with its report. */
	if (opts->need_result && !have[JOBSTREAM_REPORT] &&
	    (rc == EXIT_OK || rc == EXIT_WRONG)) {
		fprintf(stderr, "%s: the MPI job ended with status %d but "
		    "sent no report\n", progname, rc);
		rc = EXIT_RUNTIME;
	}
	if (have[JOBSTREAM_REPORT] && !launch_write_all(rc >= EXIT_RUNTIME ?
	    STDERR_FILENO : STDOUT_FILENO, data[JOBSTREAM_REPORT],
	    len[JOBSTREAM_REPORT])) {
		fprintf(stderr, "%s: error writing the report: %s\n",
		    progname, strerror(errno));
		rc = EXIT_RUNTIME;
	}
	if (have[JOBSTREAM_ATTACHMENT] && opts->attachment != NULL) {
		opts->attachment->len = len[JOBSTREAM_ATTACHMENT];
		opts->attachment->data = jobstream_take(&w->stream,
		    JOBSTREAM_ATTACHMENT);
	}
	if (have[JOBSTREAM_SUMMARY] && opts->summary != NULL) {
		opts->summary->len = len[JOBSTREAM_SUMMARY];
		opts->summary->data = jobstream_take(&w->stream,
		    JOBSTREAM_SUMMARY);
	}
	if (have[JOBSTREAM_BASELINE] && opts->baseline != NULL) {
		opts->baseline->len = len[JOBSTREAM_BASELINE];
		opts->baseline->data = jobstream_take(&w->stream,
		    JOBSTREAM_BASELINE);
	}
	return rc;
}

static int
launch_run(const struct launch_options *opts, char **argv, char **envp)
{
	struct launch_signals	 old;
	struct launch_watch	 w;
	pid_t			 pid;
	int			 errpipe[2], out[2], err[2], relay[2];
	int			 child_errno = 0, rc, i;

	launch_reserve_stdio();
	memset(&w, 0, sizeof(w));
	w.opts = opts;
	jobstream_init(&w.stream, launch_chatter, &w);
	w.bar = opts->progress && isatty(STDERR_FILENO);
	w.fd[0] = w.fd[1] = relay[0] = relay[1] = -1;
	/* The error pipe closes on a successful exec, else carries errno. */
	launch_pipe(errpipe);
	launch_pipe(out);
	w.fd[0] = out[0];
	relay[0] = out[1];
	if (w.bar) {
		launch_pipe(err);
		w.fd[1] = err[0];
		relay[1] = err[1];
	}
	for (i = 0; i < 2; i++)
		if (w.fd[i] != -1 && fcntl(w.fd[i], F_SETFL, O_NONBLOCK) == -1)
			fatal("fcntl");
	fflush(stdout);
	fflush(stderr);
	launch_signals_catch(&old);
	proctree_adopt();
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid == 0) {
		close(errpipe[0]);
		launch_child(argv, envp, &old, relay, errpipe[1]);
	}
	/* Both sides set the group, so neither order of events races. */
	setpgid(pid, pid);
	w.start = clock_seconds();
	close(errpipe[1]);
	for (i = 0; i < 2; i++)
		if (relay[i] != -1)
			close(relay[i]);
	if ((child_errno = proctree_exec_errno(errpipe[0])) != 0) {
		proctree_wait(pid);
		launch_drain(&w);
		proctree_release();
		launch_signals_restore(&old);
		jobstream_free(&w.stream);
		fprintf(stderr, "%s: cannot run launcher \"%s\": %s\n",
		    progname, argv[0], strerror(child_errno));
		return EXIT_RUNTIME;
	}
	rc = launch_supervise(&w, pid, argv[0]);
	proctree_release();
	launch_signals_restore(&old);
	rc = launch_result(&w, rc, argv[0]);
	jobstream_free(&w.stream);
	return rc;
}

int
launch_command(const struct launch_options *opts, char *const argv[])
{
	const char	*launcher = opts->launcher;
	char		**words, **full, **envp, *parent, procs[16];
	size_t		 nwords, nargs = 0, i, j = 0;
	int		 rc;

	if (launcher == NULL && (launcher = getenv("GRADAUDIT_MPIEXEC")) ==
	    NULL)
		launcher = "mpiexec";
	if (opts->procs < 1)
		fatalx("launch_command: %d processes", opts->procs);
	/* A launcher that cannot be a command is a usage error (exit 2). */
	if ((words = shellwords_split(launcher, 0, &nwords)) == NULL) {
		fprintf(stderr, "%s: the MPI launcher \"%s\" has an "
		    "unterminated quote\n", progname, launcher);
		return EXIT_USAGE;
	}
	if (nwords == 0) {
		fprintf(stderr, "%s: the MPI launcher \"%s\" is empty: "
		    "give --launcher or set GRADAUDIT_MPIEXEC\n", progname,
		    launcher);
		free(words);
		return EXIT_USAGE;
	}
	while (argv[nargs] != NULL)
		nargs++;
	snprintf(procs, sizeof(procs), "%d", opts->procs);
	full = xreallocarray(NULL, nwords + nargs + 3, sizeof(*full));
	for (i = 0; i < nwords; i++)
		full[j++] = words[i];
	full[j++] = "-n";
	full[j++] = procs;
	for (i = 0; i < nargs; i++)
		full[j++] = argv[i];
	full[j] = NULL;
	envp = launch_worker_environment(&parent);
	rc = launch_run(opts, full, envp);
	free(parent);
	free(envp);
	free(full);
	shellwords_free(words, nwords);
	return rc;
}

/* The running executable, so the job runs this very binary. */
static char *
launch_self(const char *argv0)
{
	char	*buf;
	size_t	 size = 256;
	ssize_t	 n;

	for (;;) {
		buf = xmalloc(size);
		n = readlink("/proc/self/exe", buf, size);
		if (n == -1) {
			free(buf);
			return xstrdup(argv0);
		}
		if ((size_t)n < size) {
			buf[n] = '\0';
			return buf;
		}
		free(buf);
		size *= 2;
	}
}

int
launch_job(const struct launch_options *given, int argc, char **argv)
{
	struct launch_options opts = *given;
	char	**cmd;
	int	 i, rc;

	if (argc < 1)
		fatalx("launch_job: empty argument vector");
	cmd = xreallocarray(NULL, (size_t)argc + 1, sizeof(*cmd));
	cmd[0] = launch_self(argv[0]);
	for (i = 1; i < argc; i++)
		cmd[i] = argv[i];
	cmd[argc] = NULL;
	opts.need_result = true;
	rc = launch_command(&opts, cmd);
	free(cmd[0]);
	free(cmd);
	return rc;
}

/*
 * The ranks' own watchdog.  In a job the user started with mpiexec nobody
 * outside is timing it, so each rank times itself: one alarm at the
 * timeout.  In a job launch_job started, the parent times it, but a parent
 * that dies of a signal it cannot handle (SIGKILL, SIGUSR1) left ranks
 * spinning for ever (issue 8): so the ranks look every second whether the
 * parent named in GRADAUDIT_PARENT is still alive, where they run on its
 * machine, and end the job when it is not, or when the timeout is long
 * past (the parent would have ended them by then).
 */
static struct {
	char		 text[256];	/* the timeout message */
	size_t		 len;
	char		 orphan[256];	/* the parent-is-gone message */
	size_t		 orphan_len;
	bool		 ticking;	/* a check every tick, not one alarm */
	double		 deadline;	/* monotonic seconds; 0: none */
	bool		 watch_parent;
	pid_t		 parent;
	unsigned long long parent_start;
	int		 misses;	/* ticks that found the parent gone */
	int		 misses_allowed;
} watchdog;
static volatile sig_atomic_t	 watchdog_fired;

/* Seconds between the checks of a launched job's ranks. */
#define WATCHDOG_TICK		1
/*
 * A launched job's ranks end it themselves this long after the timeout:
 * the parent has ended it within LAUNCH_GRACE by then, unless it is gone.
 */
#define WATCHDOG_BACKSTOP	(LAUNCH_GRACE + 3.0)

static size_t
watchdog_format(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static size_t
watchdog_format(char *buf, size_t size, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
}

/*
 * Which message is due at this tick, if any.  Async-signal-safe:
 * clock_seconds (clock_gettime(2)), and proctree_alive's open/read/close.
 */
static bool
watchdog_due(const char **text, size_t *len)
{
	*text = watchdog.text;
	*len = watchdog.len;
	if (!watchdog.ticking)
		return true;
	if (watchdog.deadline > 0 && clock_seconds() >= watchdog.deadline)
		return true;
	if (!watchdog.watch_parent ||
	    proctree_alive(watchdog.parent, watchdog.parent_start)) {
		watchdog.misses = 0;
		return false;
	}
	*text = watchdog.orphan;
	*len = watchdog.orphan_len;
	return ++watchdog.misses > watchdog.misses_allowed;
}

/*
 * Only write(2), alarm(2), poll(2) and _exit(2) are async-signal-safe
 * here, with watchdog_due.  MPI_Abort is not, so it is best effort: it is
 * what makes the launcher end the other ranks at once, but if it blocks
 * (the rank was inside MPI when the alarm came), the alarm set just before
 * it re-enters this handler (SA_NODEFER) and _exit(3) ends the rank
 * anyway; hydra then ends the rest because a rank exited without
 * MPI_Finalize.
 */
static void
watchdog_alarm(int sig)
{
	const char	*text;
	size_t		 len;
	int		 initialized = 0, finalized = 0;

	(void)sig;
	if (watchdog_fired)
		_exit(EXIT_RUNTIME);
	if (!watchdog_due(&text, &len))
		return;
	watchdog_fired = 1;
	if (write(STDERR_FILENO, text, len) == -1) {
		/* Nowhere left to report to; ending the job matters more. */
	}
	/*
	 * Under hydra, stderr is a pipe its proxy forwards; MPI_Abort makes
	 * the proxy kill everything, and it could drop the message still in
	 * the pipe.  A short wait (poll(2) is async-signal-safe) lets it go.
	 */
	poll(NULL, 0, 200);
	alarm(2);
	MPI_Initialized(&initialized);
	MPI_Finalized(&finalized);
	if (initialized && !finalized)
		MPI_Abort(MPI_COMM_WORLD, EXIT_RUNTIME);
	_exit(EXIT_RUNTIME);
}

static int
watchdog_rank(void)
{
	int	 initialized = 0, rank = 0;

	MPI_Initialized(&initialized);
	if (initialized)
		MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	return rank;
}

static void
watchdog_start(double first, double every)
{
	struct sigaction	 sa;
	struct itimerval	 it;

	watchdog_fired = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watchdog_alarm;
	sigemptyset(&sa.sa_mask);
	/* SA_RESTART: a tick that finds all well must disturb nothing. */
	sa.sa_flags = SA_NODEFER | SA_RESTART;
	if (sigaction(SIGALRM, &sa, NULL) == -1)
		fatal("sigaction");
	memset(&it, 0, sizeof(it));
	it.it_value.tv_sec = (time_t)first;
	it.it_value.tv_usec = (suseconds_t)((first -
	    (double)it.it_value.tv_sec) * 1e6);
	it.it_interval.tv_sec = (time_t)every;
	if (setitimer(ITIMER_REAL, &it, NULL) == -1)
		fatal("setitimer");
}

void
launch_arm_watchdog(double timeout)
{
	struct itimerval	 it;

	if (timeout <= 0) {
		memset(&it, 0, sizeof(it));
		setitimer(ITIMER_REAL, &it, NULL);
		return;
	}
	memset(&watchdog, 0, sizeof(watchdog));
	watchdog.len = watchdog_format(watchdog.text, sizeof(watchdog.text),
	    "%s: numeric audit timed out after %g s; every process was "
	    "ended\n", progname, timeout);
	/*
	 * Every rank's clock started at about the same time; rank 0 goes
	 * first and the others a second later, as a backup, so the user
	 * normally reads the message once rather than once per rank.
	 */
	watchdog_start(watchdog_rank() != 0 ? timeout + 1 : timeout, 0);
}

/* "PID START HOST", as launch_parent_environment writes it. */
static bool
watchdog_parent(pid_t *pid, unsigned long long *start)
{
	const char	*env = getenv("GRADAUDIT_PARENT");
	char		 host[256], here[256];
	long		 p;

	if (env == NULL || sscanf(env, "%ld %llu %255s", &p, start,
	    host) != 3 || p <= 0)
		return false;
	/* Another machine's process IDs mean nothing here. */
	if (gethostname(here, sizeof(here)) == -1)
		return false;
	here[sizeof(here) - 1] = '\0';
	*pid = (pid_t)p;
	return strcmp(host, here) == 0;
}

void
launch_arm_worker_watchdog(double timeout)
{
	int		 rank = watchdog_rank();

	memset(&watchdog, 0, sizeof(watchdog));
	watchdog.ticking = true;
	watchdog.watch_parent = watchdog_parent(&watchdog.parent,
	    &watchdog.parent_start);
	if (timeout > 0) {
		/* As above, rank 0 first, the others a tick later. */
		watchdog.deadline = clock_seconds() + timeout + WATCHDOG_BACKSTOP +
		    (rank != 0 ? WATCHDOG_TICK : 0);
	}
	if (!watchdog.watch_parent && watchdog.deadline == 0)
		return;
	watchdog.misses_allowed = rank != 0;
	watchdog.len = watchdog_format(watchdog.text, sizeof(watchdog.text),
	    "%s: numeric audit timed out after %g s and the gradaudit "
	    "process that started the MPI job did not end it; ending it\n",
	    progname, timeout);
	watchdog.orphan_len = watchdog_format(watchdog.orphan,
	    sizeof(watchdog.orphan), "%s: the gradaudit process that "
	    "started this MPI job (pid %ld) is gone; ending the job\n",
	    progname, (long)watchdog.parent);
	watchdog_start(WATCHDOG_TICK, WATCHDOG_TICK);
}
