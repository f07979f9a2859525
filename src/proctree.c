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

#include "proctree.h"
#include "xmalloc.h"

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

/* The parent of pid from /proc/PID/stat; false when it is gone. */
static bool
proctree_parent(const char *pid, pid_t *ppid)
{
	char		 path[64], buf[512], *p;
	ssize_t		 n;
	int		 fd;
	long		 v;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	if ((fd = open(path, O_RDONLY)) == -1)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "PID (COMM) STATE PPID ...": COMM may hold blanks and parentheses. */
	if ((p = strrchr(buf, ')')) == NULL || p[1] != ' ' || p[2] == '\0' ||
	    p[3] != ' ')
		return false;
	v = strtol(p + 4, NULL, 10);
	*ppid = (pid_t)v;
	return true;
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
	pid_t			 ppid;

	*n = 0;
	if ((d = opendir("/proc")) == NULL)
		return NULL;
	while ((de = readdir(d)) != NULL) {
		for (s = de->d_name; isdigit((unsigned char)*s); s++)
			continue;
		if (*s != '\0' || s == de->d_name)
			continue;
		if (!proctree_parent(de->d_name, &ppid))
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

static double
proctree_now(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
	double	 deadline = proctree_now() + wait;
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
		if ((n == 0 && reaped) || proctree_now() >= deadline)
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
