/*
 * peak-rss: run a command and write the peak resident set size of the
 * largest process it started (itself, or any descendant that was waited
 * for: the ranks of an MPI job too), in KiB, to a file.  The memory tests
 * (tests/memory.test) compare it across input sizes, which needs neither
 * /usr/bin/time nor a ulimit that sanitizer builds cannot live under.
 *
 * usage: peak-rss OUTFILE COMMAND [ARG ...]
 *
 * The command inherits stdin, stdout and stderr; peak-rss exits with its
 * status, or 128 plus the signal that ended it.
 */
#include <sys/resource.h>
#include <sys/wait.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	struct rusage	 ru;
	FILE		*fp;
	pid_t		 pid;
	int		 status;

	if (argc < 3) {
		fprintf(stderr, "usage: peak-rss OUTFILE COMMAND [ARG ...]\n");
		return 2;
	}
	if ((pid = fork()) == -1) {
		perror("peak-rss: fork");
		return 2;
	}
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		fprintf(stderr, "peak-rss: %s: %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR) {
			perror("peak-rss: waitpid");
			return 2;
		}
	if (getrusage(RUSAGE_CHILDREN, &ru) == -1) {
		perror("peak-rss: getrusage");
		return 2;
	}
#ifdef __APPLE__
	ru.ru_maxrss /= 1024;		/* bytes there, KiB elsewhere */
#endif
	if ((fp = fopen(argv[1], "w")) == NULL ||
	    fprintf(fp, "%ld\n", ru.ru_maxrss) < 0 || fclose(fp) != 0) {
		perror(argv[1]);
		return 2;
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
