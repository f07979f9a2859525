/*
 * The progress bar of progress.h.  It writes only to a terminal: stderr
 * also carries diagnostics, and a log full of carriage returns helps no
 * one.  Redrawing is throttled because a sweep can finish thousands of
 * configurations a second, and a terminal cannot show more than a few
 * frames of that anyway.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L		/* clock_gettime, isatty */
#endif

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/progress.h"

#define PROGRESS_INTERVAL_NS	100000000	/* 10 redraws a second */
#define PROGRESS_BAR_WIDTH	30
#define PROGRESS_LABEL_MAX	40
#define PROGRESS_LINE_MAX	128

static struct {
	bool		 active;
	char		 label[PROGRESS_LABEL_MAX + 1];
	int64_t		 total;
	int64_t		 drawn;		/* the count on screen */
	int64_t		 last_ns;	/* when */
	int64_t		 start_ns;	/* progress_start */
	size_t		 width;		/* its columns */
} bar;

static int64_t
now_ns(void)
{
	struct timespec	 ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t
format_line(char *line, size_t len, int64_t done)
{
	char	 fill[PROGRESS_BAR_WIDTH + 1];
	int64_t	 filled, elapsed = (now_ns() - bar.start_ns) / 1000000000;
	int	 n;

	/*
	 * The time elapsed, not a guess of the time left: a sweep's meshes
	 * differ too much in cost for one (issue 10).
	 */
	if (bar.total <= 0)
		n = snprintf(line, len, "%s %" PRId64 ", %" PRId64 " s elapsed",
		    bar.label, done, elapsed);
	else {
		if (done > bar.total)
			done = bar.total;
		filled = done * PROGRESS_BAR_WIDTH / bar.total;
		memset(fill, '.', PROGRESS_BAR_WIDTH);
		memset(fill, '#', (size_t)filled);
		fill[PROGRESS_BAR_WIDTH] = '\0';
		n = snprintf(line, len, "%s [%s] %" PRId64 "/%" PRId64
		    " %3d%%, %" PRId64 " s elapsed", bar.label, fill, done,
		    bar.total, (int)(done * 100 / bar.total), elapsed);
	}
	if (n < 0)
		return 0;
	return (size_t)n < len ? (size_t)n : len - 1;
}

/* One write per frame: a carriage return, the line, blanks over the old. */
static void
draw(int64_t done)
{
	char	 line[PROGRESS_LINE_MAX], out[2 * PROGRESS_LINE_MAX + 2];
	size_t	 n, pad;

	n = format_line(line, sizeof(line), done);
	pad = bar.width > n ? bar.width - n : 0;
	out[0] = '\r';
	memcpy(out + 1, line, n);
	memset(out + 1 + n, ' ', pad);
	fwrite(out, 1, 1 + n + pad, stderr);
	fflush(stderr);
	bar.width = n;
	bar.drawn = done;
	bar.last_ns = now_ns();
}

void
progress_start(const char *label, int64_t total)
{
	if (bar.active)
		progress_end();
	if (!isatty(STDERR_FILENO))
		return;
	memset(&bar, 0, sizeof(bar));
	snprintf(bar.label, sizeof(bar.label), "%s", label != NULL ? label :
	    "");
	bar.total = total;
	bar.start_ns = now_ns();
	bar.active = true;
	draw(0);
}

void
progress_update(int64_t done)
{
	bool	 finished;

	if (!bar.active || done == bar.drawn)
		return;
	finished = bar.total > 0 && done >= bar.total;
	if (!finished && now_ns() - bar.last_ns < PROGRESS_INTERVAL_NS)
		return;
	draw(done);
}

void
progress_end(void)
{
	char	 out[PROGRESS_LINE_MAX + 2];

	if (!bar.active)
		return;
	out[0] = '\r';
	memset(out + 1, ' ', bar.width);
	out[bar.width + 1] = '\r';
	fwrite(out, 1, bar.width + 2, stderr);
	fflush(stderr);
	bar.active = false;
}
