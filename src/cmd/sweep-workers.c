/*
 * The workers of a text sweep on several cores (sweep-workers.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include "base/clock.h"
#include "base/cores.h"
#include "base/xmalloc.h"
#include "cmd/output.h"
#include "cmd/sweep-points.h"
#include "cmd/sweep-workers.h"
#include "symbolic/context.h"
#include "symbolic/symbolic.h"

enum verdict_kind { VERDICT_OK, VERDICT_OTHER };

struct verdict {
	uint32_t	index;
	uint32_t	kind;
	double		seconds;
};

/*
 * Workers for a text sweep on several cores.  Almost every mesh of a sweep
 * is correct, and a correct mesh's row needs only its verdict: forked
 * workers audit the meshes and send back one verdict each through a pipe
 * of their own.  Meshes are handed out one at a time from a counter the
 * workers share, not dealt round-robin: their costs differ by orders of
 * magnitude (dp 2,048 against tp 8 of the same world), and a worker dealt
 * the costly ones left the others idle (1.22x on 2 cores, issue 24).  The
 * sweep itself stays in order: it keeps the verdicts that arrive, prints
 * a correct mesh's row from its verdict, and audits again, itself, any
 * mesh a worker found wrong or skipped, so that its row, findings and
 * reproduce line come out exactly as without workers.  A worker that
 * fails ends them all, and the sweep goes on alone.
 */
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

/*
 * A mesh past GRADAUDIT_MAX_MEMORY (run_check_memory) in a worker: it
 * leaves without a word.  Its pipe closes before its verdict, so the
 * sweep audits that mesh itself, reaches the limit and says why once;
 * each worker that met such a mesh said it too (three messages on two
 * cores).
 */
static void
worker_over_limit(const char *why, void *arg)
{
	(void)why;
	(void)arg;
	_exit(1);
}

static void
worker_main(struct sweep *sw, atomic_size_t *next, int fd)
{
	struct sym_context	 ctx;
	struct arena_cache	 blocks;	/* this worker's audits' */
	struct config		 c;
	struct audit		 a;
	struct verdict		 v;
	enum cfg_key		 blame;
	char			 whybuf[SYM_WHY_SIZE];
	const char		*why;
	size_t			 i;

	/*
	 * Its own, not the parent's: a fork()ed worker shares no memory it
	 * writes with the sweep, and relies on nothing of it being reset.
	 */
	arena_cache_init(&blocks);
	while ((i = atomic_fetch_add(next, 1)) < sw->npoints) {
		double t0 = clock_seconds();

		v.index = (uint32_t)i;
		v.kind = VERDICT_OTHER;
		if (sweep_point_config(sw, &sw->points[i], &c, whybuf,
		    sizeof whybuf) == NULL) {
			sym_context_build(&ctx, &c);
			ctx.blocks = &blocks;
			ctx.over_limit = worker_over_limit;
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
		v.seconds = clock_seconds() - t0;
		if (write_all(fd, &v, sizeof v) < 0)
			_exit(1);
	}
	arena_cache_free(&blocks);
	_exit(0);
}

void
sweep_workers_stop(struct workers *wk)
{
	int	 w, st;

	for (w = 0; w < wk->n; w++) {
		if (wk->fd[w] >= 0)
			close(wk->fd[w]);
		kill(wk->pid[w], SIGTERM);
	}
	for (w = 0; w < wk->n; w++)
		while (waitpid(wk->pid[w], &st, 0) < 0 && errno == EINTR)
			;
	if (wk->next != NULL)
		munmap(wk->next, sizeof *wk->next);
	free(wk->pid);
	free(wk->fd);
	free(wk->verdict);
	free(wk->got);
	memset(wk, 0, sizeof *wk);
}

/* Workers for the cores there are, when the sweep is worth them. */
void
sweep_workers_start(struct workers *wk, struct sweep *sw, const struct options *o)
{
	int	 n = cores_available(), w, p[2];

	memset(wk, 0, sizeof *wk);
	if (o->numeric || o->format != FORMAT_TEXT || n < 2 ||
	    sw->npoints < (size_t)(8 * n))
		return;
	wk->next = mmap(NULL, sizeof *wk->next, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (wk->next == MAP_FAILED) {
		wk->next = NULL;
		return;
	}
	atomic_init(wk->next, 0);
	wk->pid = xcalloc((size_t)n, sizeof *wk->pid);
	wk->fd = xcalloc((size_t)n, sizeof *wk->fd);
	wk->verdict = xcalloc(sw->npoints, sizeof *wk->verdict);
	wk->got = xcalloc(sw->npoints, sizeof *wk->got);
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
			worker_main(sw, wk->next, p[1]);
		}
		close(p[1]);
		(void)fcntl(p[0], F_SETFD, FD_CLOEXEC);
		wk->fd[w] = p[0];
		wk->n = w + 1;
	}
	if (wk->n < n)
		sweep_workers_stop(wk);
}

/*
 * Read the verdicts that are ready, waiting for at least one: false when
 * a worker failed (a short read, or its end of the pipe closed before the
 * meshes ran out), or every pipe is closed.
 */
static bool
workers_collect(struct workers *wk, size_t npoints)
{
	struct pollfd	*pfd;
	struct verdict	 v;
	int		 w, open = 0, rc;
	bool		 ok = true;

	pfd = xcalloc((size_t)wk->n, sizeof *pfd);
	for (w = 0; w < wk->n; w++) {
		pfd[w].fd = wk->fd[w];	/* -1: poll ignores it */
		pfd[w].events = POLLIN;
		open += wk->fd[w] >= 0;
	}
	if (open == 0) {
		free(pfd);
		return false;
	}
	while ((rc = poll(pfd, (nfds_t)wk->n, -1)) < 0 && errno == EINTR)
		;
	for (w = 0; rc > 0 && w < wk->n && ok; w++) {
		if (pfd[w].revents == 0)
			continue;
		if (read_all(wk->fd[w], &v, sizeof v) == 0 && v.index <
		    npoints && !wk->got[v.index]) {
			wk->verdict[v.index] = v;
			wk->got[v.index] = true;
			continue;
		}
		/*
		 * End of file: the worker is done if the meshes ran out,
		 * since it writes every verdict before it exits.
		 */
		close(wk->fd[w]);
		wk->fd[w] = -1;
		ok = atomic_load(wk->next) >= npoints;
	}
	free(pfd);
	return ok && rc > 0;
}

/*
 * The verdict of mesh i, if a worker found it correct; false when the
 * sweep must audit it itself (then, if the workers failed, they are gone).
 */
bool
sweep_worker_says_ok(struct workers *wk, size_t i, size_t npoints,
    double *seconds)
{
	if (wk->n == 0)
		return false;
	while (!wk->got[i])
		if (!workers_collect(wk, npoints)) {
			sweep_workers_stop(wk);
			return false;
		}
	*seconds = wk->verdict[i].seconds;
	return wk->verdict[i].kind == VERDICT_OK;
}
