/*
 * Starting and supervising the numeric audit's MPI job (see launch.h).
 *
 * The launcher runs in a process group of its own, so that one kill(2)
 * reaches it and everything it started locally, and the terminal's Ctrl-C
 * reaches only gradaudit, which decides what to forward.  MPICH's hydra
 * puts each rank in a session of its own, out of reach of that group, but
 * cleans its ranks up when it gets SIGTERM, and its proxies kill their
 * ranks when mpiexec itself dies: ending the launcher's group ends the job.
 *
 * The parent polls with waitid(WNOWAIT) rather than reaping at once: while
 * the launcher is an unreaped zombie its process group ID cannot be reused,
 * so the final SIGKILL to the group can never hit an unrelated process.
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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "exitcode.h"
#include "launch.h"
#include "shellwords.h"
#include "xmalloc.h"

extern char **environ;

/* How long a job may take to end after SIGTERM before it gets SIGKILL. */
#define LAUNCH_GRACE		2.0
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

static const char *
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

static double
launch_now(void)
{
	struct timespec	 ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1)
		fatal("clock_gettime");
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
 * even under a launcher that sets none of the usual PMI variables.
 */
static char **
launch_worker_environment(void)
{
	static char	 worker[] = "GRADAUDIT_WORKER=1";
	const char	*prefix = "GRADAUDIT_WORKER=";
	char		**env;
	size_t		 n = 0, i, j = 0;

	while (environ[n] != NULL)
		n++;
	env = xreallocarray(NULL, n + 2, sizeof(*env));
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], prefix, strlen(prefix)) != 0)
			env[j++] = environ[i];
	env[j++] = worker;
	env[j] = NULL;
	return env;
}

static void
launch_catch(int sig)
{
	launch_caught = sig;
}

static void
launch_install(struct sigaction *old)
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
		if (sigaction(launch_handled[i], &sa, &old[i]) == -1)
			fatal("sigaction");
	}
}

static void
launch_restore(const struct sigaction *old)
{
	size_t	 i;

	for (i = 0; i < LAUNCH_NHANDLED; i++)
		sigaction(launch_handled[i], &old[i], NULL);
}

/*
 * What the parent knows while the job runs.  With a progress line on the
 * terminal, the job's stdout and stderr come through pipes (fd[]) and the
 * parent copies them out, erasing the line first; written straight to the
 * terminal, the job's first line would land on top of the progress line
 * and keep its tail.  Ranks under hydra write into hydra's own pipes
 * anyway, so relaying takes no terminal away from them.  Without a
 * progress line the job simply inherits stdout and stderr.
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
	/*
	 * The job's stdout, held until it ends: hydra prints its "BAD
	 * TERMINATION" banner on stdout, and stdout must carry only the
	 * report.  It goes to stdout when the job ends with a verdict (0, 1
	 * or 2), to stderr when it failed.
	 */
	char				*held;
	size_t				 held_len, held_cap;
};

static void
launch_hold(struct launch_watch *w, const char *buf, size_t n)
{
	if (w->held_len + n > w->held_cap) {
		w->held_cap = 2 * (w->held_len + n) + 4096;
		w->held = xreallocarray(w->held, w->held_cap, 1);
	}
	memcpy(w->held + w->held_len, buf, n);
	w->held_len += n;
}

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
	double			 now = launch_now(), elapsed = now - w->start;

	if (!w->bar || elapsed < LAUNCH_PROGRESS_AFTER ||
	    now - w->last_draw < LAUNCH_PROGRESS_EVERY ||
	    w->midline[0] || w->midline[1])
		return;
	w->last_draw = now;
	w->tick++;
	if (w->opts->timeout > 0)
		fprintf(stderr, "\r\033[Knumeric audit on %d processes: %.0f s "
		    "of %.0f s %c", w->opts->procs, elapsed, w->opts->timeout,
		    spin[w->tick % 4]);
	else
		fprintf(stderr, "\r\033[Knumeric audit on %d processes: %.0f s "
		    "%c", w->opts->procs, elapsed, spin[w->tick % 4]);
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

bool
launch_report_attachment(const char *data, size_t len)
{
	if (getenv("GRADAUDIT_WORKER") == NULL)
		return false;
	printf("%s %zu\n", LAUNCH_ATTACHMENT_MARKER, len);
	fwrite(data, 1, len, stdout);
	fflush(stdout);
	return true;
}

/*
 * Take "MARKER LEN\n" and the LEN bytes after it out of the held stdout.
 */
static void
launch_take_attachment(struct launch_watch *w, struct launch_attachment *at)
{
	size_t	 mlen = strlen(LAUNCH_ATTACHMENT_MARKER), i, start, len;
	char	*end;

	for (i = 0; i + mlen < w->held_len; i++) {
		if ((i > 0 && w->held[i - 1] != '\n') ||
		    memcmp(w->held + i, LAUNCH_ATTACHMENT_MARKER, mlen) != 0 ||
		    w->held[i + mlen] != ' ')
			continue;
		len = strtoul(w->held + i + mlen + 1, &end, 10);
		if (end >= w->held + w->held_len || *end != '\n')
			return;
		start = (size_t)(end + 1 - w->held);
		if (len > w->held_len - start)
			return;
		at->data = xmalloc(len + 1);
		memcpy(at->data, w->held + start, len);
		at->len = len;
		memmove(w->held + i, w->held + start + len,
		    w->held_len - start - len);
		w->held_len -= start + len - i;
		return;
	}
}

void
launch_report_status(int status)
{
	if (getenv("GRADAUDIT_WORKER") == NULL)
		return;
	printf("%s %d\n", LAUNCH_RESULT_MARKER, status);
	fflush(stdout);
}

/*
 * Take the result line out of the held stdout.  Returns the status it
 * carries, or -1 when the job printed none.
 */
static int
launch_take_result(struct launch_watch *w, const char *marker)
{
	size_t	 mlen = strlen(marker), i;
	int	 status;

	for (i = w->held_len; i-- > 0;) {
		if (i > 0 && w->held[i - 1] != '\n')
			continue;
		if (w->held_len - i > mlen + 1 &&
		    memcmp(w->held + i, marker, mlen) == 0 &&
		    w->held[i + mlen] == ' ') {
			status = atoi(w->held + i + mlen + 1);
			w->held_len = i;
			return status;
		}
	}
	return -1;
}

/* Copy what the job wrote; without relayed output, just wait a little. */
static void
launch_pump(struct launch_watch *w)
{
	struct pollfd	 pfd[2];
	int		 which[2], i, nfds = 0;
	char		 buf[4096];
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
			launch_hold(w, buf, (size_t)n);
		else if (n > 0) {
			launch_unbar(w);
			launch_write_all(STDERR_FILENO, buf, (size_t)n);
			w->midline[1] = buf[n - 1] != '\n';
		} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			close(pfd[i].fd);
			w->fd[which[i]] = -1;
		}
	}
}

/* Let the job's last output through, within a bound: a stray may hold it. */
static void
launch_drain(struct launch_watch *w)
{
	double	 deadline = launch_now() + LAUNCH_DRAIN;
	int	 i;

	while ((w->fd[0] != -1 || w->fd[1] != -1) && launch_now() < deadline)
		launch_pump(w);
	for (i = 0; i < 2; i++)
		if (w->fd[i] != -1) {
			close(w->fd[i]);
			w->fd[i] = -1;
		}
	launch_unbar(w);
}

/* True once the launcher has exited; it stays a zombie until reaped. */
static bool
launch_exited(pid_t pid)
{
	siginfo_t	 info;

	for (;;) {
		memset(&info, 0, sizeof(info));
		if (waitid(P_PID, (id_t)pid, &info,
		    WEXITED | WNOHANG | WNOWAIT) == 0)
			return info.si_pid == pid;
		if (errno != EINTR)
			fatal("waitid");
	}
}

static int
launch_reap(pid_t pid)
{
	int	 status;

	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			fatal("waitpid");
	return status;
}

/*
 * End the whole job: ask politely (hydra's mpiexec then ends its ranks),
 * and after LAUNCH_GRACE seconds kill whatever is left of the group.
 */
static void
launch_end_group(struct launch_watch *w, pid_t pid, int sig)
{
	double	 deadline;

	kill(-pid, sig);
	deadline = launch_now() + LAUNCH_GRACE;
	while (!launch_exited(pid) && launch_now() < deadline)
		launch_pump(w);
	kill(-pid, SIGKILL);
	launch_reap(pid);
	launch_drain(w);
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
	char				 buf[16];
	int				 sig;

	while (!launch_exited(pid)) {
		if ((sig = launch_caught) != 0) {
			launch_end_group(w, pid, sig);
			fprintf(stderr, "%s: numeric audit interrupted by %s; "
			    "every process was ended\n", progname,
			    launch_signal_name(sig, buf, sizeof(buf)));
			return EXIT_RUNTIME;
		}
		if (opts->timeout > 0 &&
		    launch_now() - w->start >= opts->timeout) {
			launch_end_group(w, pid, SIGTERM);
			fprintf(stderr, "%s: numeric audit timed out after "
			    "%g s; every process was ended\n", progname,
			    opts->timeout);
			return EXIT_RUNTIME;
		}
		launch_draw(w);
		launch_pump(w);
	}
	/* The launcher is gone; nothing it started may outlive it. */
	kill(-pid, SIGKILL);
	launch_drain(w);
	return launch_status(launch_reap(pid), name);
}

/*
 * The child: a group of its own, the signal dispositions gradaudit started
 * with, the relay pipes if any, then exec.  A job in a background process
 * group that read the terminal would be stopped (SIGTTIN) and look hung;
 * ranks never read it, so a terminal on stdin is replaced by /dev/null.
 */
static void __attribute__((noreturn))
launch_child(char **argv, char **envp, const struct sigaction *old,
    const int relay[2], int errfd)
{
	int	 saved, fd;

	setpgid(0, 0);
	launch_restore(old);
	if (relay[0] != -1 && dup2(relay[0], STDOUT_FILENO) == -1)
		goto fail;
	if (relay[1] != -1 && dup2(relay[1], STDERR_FILENO) == -1)
		goto fail;
	if (isatty(STDIN_FILENO)) {
		if ((fd = open("/dev/null", O_RDONLY)) == -1 ||
		    dup2(fd, STDIN_FILENO) == -1)
			goto fail;
		if (fd != STDIN_FILENO)
			close(fd);
	}
	environ = envp;
	execvp(argv[0], argv);
fail:
	saved = errno;
	if (write(errfd, &saved, sizeof(saved)) == -1) {
		/* The parent then sees no errno and reports the exit. */
	}
	_exit(127);
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

static int
launch_run(const struct launch_options *opts, char **argv, char **envp)
{
	struct sigaction	 old[LAUNCH_NHANDLED];
	struct launch_watch	 w;
	pid_t			 pid;
	ssize_t			 n;
	int			 errpipe[2], out[2], err[2], relay[2];
	int			 child_errno = 0, rc, i, status;

	memset(&w, 0, sizeof(w));
	w.opts = opts;
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
	launch_install(old);
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid == 0) {
		close(errpipe[0]);
		launch_child(argv, envp, old, relay, errpipe[1]);
	}
	/* Both sides set the group, so neither order of events races. */
	setpgid(pid, pid);
	w.start = launch_now();
	close(errpipe[1]);
	for (i = 0; i < 2; i++)
		if (relay[i] != -1)
			close(relay[i]);
	do
		n = read(errpipe[0], &child_errno, sizeof(child_errno));
	while (n == -1 && errno == EINTR);
	close(errpipe[0]);
	if (n == (ssize_t)sizeof(child_errno)) {
		launch_reap(pid);
		launch_drain(&w);
		launch_restore(old);
		free(w.held);
		fprintf(stderr, "%s: cannot run launcher \"%s\": %s\n",
		    progname, argv[0], strerror(child_errno));
		return EXIT_RUNTIME;
	}
	rc = launch_supervise(&w, pid, argv[0]);
	launch_restore(old);
	if (opts->attachment != NULL)
		launch_take_attachment(&w, opts->attachment);
	/*
	 * The job's own word on its status wins over the launcher's exit
	 * status, which a wrapper script may have lost; no word at all means
	 * gradaudit never ran.
	 */
	if (opts->result_marker != NULL &&
	    (status = launch_take_result(&w, opts->result_marker)) >= 0) {
		if (rc != EXIT_RUNTIME)
			rc = status;
	} else if (opts->result_marker != NULL && rc != EXIT_RUNTIME) {
		fprintf(stderr, "%s: the MPI job ended without a result: "
		    "\"%s\" exited %d but ran no gradaudit process\n",
		    progname, argv[0], rc);
		rc = EXIT_RUNTIME;
	}
	if (!launch_write_all(rc == EXIT_RUNTIME ? STDERR_FILENO :
	    STDOUT_FILENO, w.held, w.held_len)) {
		fprintf(stderr, "%s: error writing the report: %s\n",
		    progname, strerror(errno));
		rc = EXIT_RUNTIME;
	}
	free(w.held);
	return rc;
}
int
launch_command(const struct launch_options *opts, char *const argv[])
{
	const char	*launcher = opts->launcher;
	char		**words, **full, **envp, procs[16];
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
	envp = launch_worker_environment();
	rc = launch_run(opts, full, envp);
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
	opts.result_marker = LAUNCH_RESULT_MARKER;
	rc = launch_command(&opts, cmd);
	free(cmd[0]);
	free(cmd);
	return rc;
}

/*
 * The watchdog for jobs the user started with mpiexec: nobody outside is
 * timing them, so each rank times itself.
 */
static char			 watchdog_text[256];
static size_t			 watchdog_len;
static volatile sig_atomic_t	 watchdog_fired;

/*
 * Only write(2), alarm(2) and _exit(2) are async-signal-safe here.
 * MPI_Abort is not, so it is best effort: it is what makes the launcher end
 * the other ranks at once, but if it blocks (the rank was inside MPI when
 * the alarm came), the alarm set just before it re-enters this handler
 * (SA_NODEFER) and _exit(3) ends the rank anyway; hydra then ends the rest
 * because a rank exited without MPI_Finalize.
 */
static void
watchdog_alarm(int sig)
{
	int	 initialized = 0, finalized = 0;

	(void)sig;
	if (watchdog_fired)
		_exit(EXIT_RUNTIME);
	watchdog_fired = 1;
	if (write(STDERR_FILENO, watchdog_text, watchdog_len) == -1) {
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

void
launch_arm_watchdog(double timeout)
{
	struct sigaction	 sa;
	struct itimerval	 it;
	int			 initialized = 0, rank = 0, n;

	memset(&it, 0, sizeof(it));
	if (timeout <= 0) {
		setitimer(ITIMER_REAL, &it, NULL);
		return;
	}
	MPI_Initialized(&initialized);
	if (initialized)
		MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	n = snprintf(watchdog_text, sizeof(watchdog_text), "%s: numeric audit "
	    "timed out after %g s; every process was ended\n", progname,
	    timeout);
	watchdog_len = n < 0 ? 0 : (size_t)n < sizeof(watchdog_text) ?
	    (size_t)n : sizeof(watchdog_text) - 1;
	watchdog_fired = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watchdog_alarm;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_NODEFER;
	if (sigaction(SIGALRM, &sa, NULL) == -1)
		fatal("sigaction");
	/*
	 * Every rank's clock started at about the same time; rank 0 goes
	 * first and the others a second later, as a backup, so the user
	 * normally reads the message once rather than once per rank.
	 */
	if (rank != 0)
		timeout += 1;
	it.it_value.tv_sec = (time_t)timeout;
	it.it_value.tv_usec = (suseconds_t)((timeout -
	    (double)it.it_value.tv_sec) * 1e6);
	if (setitimer(ITIMER_REAL, &it, NULL) == -1)
		fatal("setitimer");
}
