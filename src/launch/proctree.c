/*
 * Finding, signalling and reaping every process of a job (see proctree.h).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE	200809L
#endif

#include <sys/types.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/xmalloc.h"
#include "launch/proctree.h"

extern char **environ;

/* How often proctree_kill_all looks again while processes die. */
#define PROCTREE_POLL_MSEC	10

#if defined(__linux__) && defined(PR_SET_CHILD_SUBREAPER)
static int	 proctree_was_subreaper;
#endif

void
proctree_adopt(void)
{
#if defined(__linux__) && defined(PR_SET_CHILD_SUBREAPER)
	if (prctl(PR_GET_CHILD_SUBREAPER, &proctree_was_subreaper) == -1)
		proctree_was_subreaper = 0;
	/* Failure leaves the orphans to init: the count will say so. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
}

void
proctree_release(void)
{
#if defined(__linux__) && defined(PR_SET_CHILD_SUBREAPER)
	prctl(PR_SET_CHILD_SUBREAPER, proctree_was_subreaper);
#endif
}

struct proctree_entry {
	pid_t	 pid;
	pid_t	 ppid;
};

/*
 * What /proc/PID/stat says of pid: its state, parent and start time (clock
 * ticks after boot).  False when it is gone.  Async-signal-safe, for the
 * ranks' watchdog: no stdio, no allocation.
 */
static bool
proctree_stat(pid_t pid, char *state, pid_t *ppid, unsigned long long *start)
{
	char		 path[32] = "/proc/", digits[16], buf[1024], *p;
	size_t		 len = strlen(path), nd = 0;
	ssize_t		 n;
	int		 fd, field;
	unsigned long	 v = (unsigned long)pid;

	do
		digits[nd++] = (char)('0' + v % 10);
	while ((v /= 10) != 0 && nd < sizeof(digits));
	while (nd > 0)
		path[len++] = digits[--nd];
	memcpy(path + len, "/stat", sizeof("/stat"));
	if ((fd = open(path, O_RDONLY)) == -1)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "PID (COMM) STATE PPID ...": COMM may hold blanks and parentheses. */
	for (p = buf + n; p > buf && p[-1] != ')'; p--)
		continue;
	if (p == buf || p[0] != ' ' || p[1] == '\0' || p[2] != ' ')
		return false;
	*state = p[1];
	p += 3;
	*ppid = 0;
	*start = 0;
	for (field = 4; field <= 22 && *p != '\0'; field++) {
		for (; *p >= '0' && *p <= '9'; p++) {
			if (field == 4)
				*ppid = (pid_t)(*ppid * 10 + (*p - '0'));
			if (field == 22)
				*start = *start * 10 + (unsigned)(*p - '0');
		}
		while (*p != ' ' && *p != '\0')
			p++;	/* a negative field, say */
		if (*p == ' ')
			p++;
	}
	return field > 22;
}

unsigned long long
proctree_start_time(pid_t pid)
{
	unsigned long long	 start;
	pid_t			 ppid;
	char			 state;

	if (!proctree_stat(pid, &state, &ppid, &start) || state == 'Z' ||
	    state == 'X')
		return 0;
	return start;
}

bool
proctree_alive(pid_t pid, unsigned long long start)
{
	if (start == 0)
		return kill(pid, 0) == 0 || errno == EPERM;
	return proctree_start_time(pid) == start;
}

/* Every process /proc lists, with its parent; NULL without /proc. */
static struct proctree_entry *
proctree_scan(size_t *n)
{
	struct proctree_entry	*v = NULL;
	struct dirent		*de;
	size_t			 cap = 0;
	DIR			*d;
	const char		*s;
	unsigned long long	 start;
	pid_t			 ppid;
	char			 state;

	*n = 0;
	if ((d = opendir("/proc")) == NULL)
		return NULL;
	while ((de = readdir(d)) != NULL) {
		for (s = de->d_name; isdigit((unsigned char)*s); s++)
			continue;
		if (*s != '\0' || s == de->d_name)
			continue;
		if (!proctree_stat((pid_t)atol(de->d_name), &state, &ppid,
		    &start))
			continue;	/* gone meanwhile */
		if (*n == cap) {
			cap = cap == 0 ? 256 : 2 * cap;
			v = xreallocarray(v, cap, sizeof(*v));
		}
		v[*n].pid = (pid_t)atol(de->d_name);
		v[(*n)++].ppid = ppid;
	}
	closedir(d);
	/* A /proc that lists nothing is no /proc (this process is in it). */
	if (*n == 0) {
		free(v);
		return NULL;
	}
	return v;
}

/*
 * The descendants of this process, parents before their children (a
 * process found in one pass is a child of one found before it).  NULL
 * without /proc.
 */
static pid_t *
proctree_descendants(size_t *n)
{
	struct proctree_entry	*all;
	pid_t			*out;
	bool			*taken, grew = true;
	size_t			 nall, i, j;

	*n = 0;
	if ((all = proctree_scan(&nall)) == NULL)
		return NULL;
	out = xreallocarray(NULL, nall, sizeof(*out));
	taken = xcalloc(nall, sizeof(*taken));
	while (grew) {
		grew = false;
		for (i = 0; i < nall; i++) {
			if (taken[i])
				continue;
			if (all[i].ppid != getpid()) {
				for (j = 0; j < *n; j++)
					if (out[j] == all[i].ppid)
						break;
				if (j == *n)
					continue;
			}
			taken[i] = grew = true;
			out[(*n)++] = all[i].pid;
		}
	}
	free(taken);
	free(all);
	return out;
}

bool
proctree_signal(int sig)
{
	pid_t	*pids;
	size_t	 n, i;

	if ((pids = proctree_descendants(&n)) == NULL)
		return false;
	for (i = 0; i < n; i++)
		kill(pids[i], sig);
	free(pids);
	return true;
}

/* Reap every child that has ended; note the leader's status. */
static void
proctree_reap(pid_t leader, int *leader_status, bool *reaped)
{
	pid_t	 pid;
	int	 status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0 ||
	    (pid == -1 && errno == EINTR))
		if (pid == leader) {
			*leader_status = status;
			*reaped = true;
		}
}

long
proctree_kill_all(pid_t leader, int *leader_status, double wait)
{
	double	 deadline = clock_seconds() + wait;
	struct timespec nap = { 0, PROCTREE_POLL_MSEC * 1000 * 1000 };
	pid_t	*pids;
	size_t	 n, i;
	bool	 reaped = false;
	long	 left = -1;

	kill(-leader, SIGKILL);
	for (;;) {
		proctree_reap(leader, leader_status, &reaped);
		if ((pids = proctree_descendants(&n)) == NULL)
			break;
		left = (long)n;
		/*
		 * Parents first: a child killed after its parent is adopted
		 * here, and its ID cannot be reused before it is reaped here.
		 */
		for (i = 0; i < n; i++)
			kill(pids[i], SIGKILL);
		free(pids);
		if ((n == 0 && reaped) || clock_seconds() >= deadline)
			break;
		nanosleep(&nap, NULL);
	}
	while (!reaped) {
		if (waitpid(leader, leader_status, 0) == leader)
			reaped = true;
		else if (errno != EINTR)
			fatal("waitpid");
	}
	return left;
}

bool
proctree_exited(pid_t pid)
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

int
proctree_wait(pid_t pid)
{
	int	 status;

	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			fatal("waitpid");
	return status;
}

void
proctree_exec(char **argv, char **envp, int errfd)
{
	environ = envp;
	execvp(argv[0], argv);
	proctree_exec_fail(errfd);
}

void
proctree_exec_fail(int errfd)
{
	int	 saved = errno;

	if (write(errfd, &saved, sizeof(saved)) == -1) {
		/* The parent then sees no errno and reports the exit. */
	}
	_exit(127);
}

int
proctree_exec_errno(int errfd)
{
	int	 child_errno = 0;
	ssize_t	 n;

	do
		n = read(errfd, &child_errno, sizeof(child_errno));
	while (n == -1 && errno == EINTR);
	close(errfd);
	return n == (ssize_t)sizeof(child_errno) ? child_errno : 0;
}
