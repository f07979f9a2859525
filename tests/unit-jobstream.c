/*
 * TAP unit test of jobstream.c, the framing of run's MPI job's stdout: the
 * report comes out whole however the bytes are split, chatter around it
 * (even a half line just before a header) goes to the chatter sink
 * unchanged, a damaged or truncated document is refused, and chatter is
 * bounded (issue 8: a launcher's chatter reached stdout, and a chatty one
 * was held whole in memory).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "launch/jobstream.h"
#include "tap.h"

/* The chatter sink: everything passed on, in order. */
struct sink {
	char	*buf;
	size_t	 len, cap;
};

static void
sink_chatter(void *arg, const char *p, size_t n)
{
	struct sink	*s = arg;

	if (s->len + n + 1 > s->cap) {
		s->cap = 2 * (s->len + n) + 64;
		s->buf = xreallocarray(s->buf, s->cap, 1);
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	s->buf[s->len] = '\0';
}

/* What a job writes: chatter, the report, chatter, the status line. */
static char *
job_output(size_t *len, const char *report)
{
	char	*out = NULL;
	FILE	*fp;

	if ((fp = open_memstream(&out, len)) == NULL)
		fatal("open_memstream");
	fputs("launcher: starting\n", fp);
	jobstream_send(fp, JOBSTREAM_REPORT, report, strlen(report));
	fputs("half a line from another rank", fp);
	jobstream_send(fp, JOBSTREAM_ATTACHMENT, "<xml/>", 6);
	fputs("\036not a header\nlauncher: done\n", fp);
	jobstream_send_status(fp, 1);
	fclose(fp);
	return out;
}

static void
test_split(size_t step)
{
	const char	*report = "2 of 14 parameters wrong\n\036 and a RS\n";
	const char	*data, *why;
	struct jobstream js;
	struct sink	 s = { NULL, 0, 0 };
	size_t		 len, n, i;
	char		*out = job_output(&len, report);

	jobstream_init(&js, sink_chatter, &s);
	for (i = 0; i < len; i += n) {
		n = len - i < step ? len - i : step;
		jobstream_feed(&js, out + i, n);
	}
	jobstream_end(&js);
	tap_ok(jobstream_doc(&js, JOBSTREAM_REPORT, &data, &n, &why) &&
	    n == strlen(report) && memcmp(data, report, n) == 0,
	    "fed %zu bytes at a time: the report comes out whole", step);
	tap_ok(jobstream_doc(&js, JOBSTREAM_ATTACHMENT, &data, &n, &why) &&
	    n == 6 && memcmp(data, "<xml/>", 6) == 0,
	    "fed %zu bytes at a time: the attachment too", step);
	tap_ok(js.status == 1, "fed %zu bytes at a time: status 1", step);
	tap_ok_str_eq(s.buf != NULL ? s.buf : "", "launcher: starting\n"
	    "half a line from another rank\036not a header\nlauncher: done\n",
	    "fed %zu bytes at a time: the chatter, unchanged", step);
	jobstream_free(&js);
	free(s.buf);
	free(out);
}

static void
test_damaged(void)
{
	const char	*data, *why;
	struct jobstream js;
	struct sink	 s = { NULL, 0, 0 };
	size_t		 len, n;
	char		*out = NULL, *p;
	FILE		*fp;

	if ((fp = open_memstream(&out, &len)) == NULL)
		fatal("open_memstream");
	jobstream_send(fp, JOBSTREAM_REPORT, "the report\n", 11);
	fclose(fp);
	p = strstr(out, "the report");
	p[4] = 'R';
	jobstream_init(&js, sink_chatter, &s);
	jobstream_feed(&js, out, len);
	jobstream_end(&js);
	tap_ok(!jobstream_doc(&js, JOBSTREAM_REPORT, &data, &n, &why) &&
	    why != NULL && strcmp(why, "garbled by other output") == 0,
	    "a report whose bytes changed is refused as garbled");
	jobstream_free(&js);

	jobstream_init(&js, sink_chatter, &s);
	jobstream_feed(&js, out, len - 3);
	jobstream_end(&js);
	tap_ok(!jobstream_doc(&js, JOBSTREAM_REPORT, &data, &n, &why) &&
	    why != NULL && strcmp(why, "cut short") == 0,
	    "a report cut short is refused");
	tap_ok(!jobstream_doc(&js, JOBSTREAM_ATTACHMENT, &data, &n, &why) &&
	    why == NULL, "no attachment: none, and nothing wrong");
	tap_ok(js.status == -1, "no status line: status -1");
	tap_ok(s.len == 0, "no chatter: the sink got nothing");
	jobstream_free(&js);
	free(s.buf);
	free(out);
}

static void
test_bounded(void)
{
	const char	*line = "chatter chatter chatter chatter\n";
	struct jobstream js;
	struct sink	 s = { NULL, 0, 0 };
	size_t		 total = 0, linelen = strlen(line), kept, dropped;
	char		*note, *end;
	int		 i;

	jobstream_init(&js, sink_chatter, &s);
	for (i = 0; i < 200000; i++) {
		jobstream_feed(&js, line, linelen);
		total += linelen;
	}
	jobstream_feed(&js, "the last line\n", 14);
	total += 14;
	jobstream_end(&js);
	note = strstr(s.buf, "gradaudit: the MPI job wrote more than 1024 KiB");
	tap_ok(note != NULL && note - s.buf == JOBSTREAM_HEAD,
	    "6 MB of chatter: the first 1 MiB passes, then a note");
	tap_ok(s.len <= JOBSTREAM_HEAD + JOBSTREAM_TAIL + 256,
	    "6 MB of chatter: at most 1 MiB + 64 KiB pass (%zu bytes)",
	    s.len);
	if (note != NULL && (end = strstr(note, " bytes dropped here, the "
	    "last ")) != NULL) {
		dropped = strtoul(strstr(note, "report: ") + 8, NULL, 10);
		kept = strtoul(end + strlen(" bytes dropped here, the last "),
		    NULL, 10);
		tap_ok(JOBSTREAM_HEAD + dropped + kept == total,
		    "6 MB of chatter: passed + dropped + kept = all %zu bytes",
		    total);
		tap_ok(kept <= JOBSTREAM_TAIL && kept == strlen(strchr(note,
		    '\n') + 1), "6 MB of chatter: the kept tail follows");
	} else {
		tap_ok(false, "6 MB of chatter: the note gives the counts");
		tap_ok(false, "6 MB of chatter: the kept tail follows");
	}
	tap_ok(s.len >= 14 && strcmp(s.buf + s.len - 14,
	    "the last line\n") == 0, "6 MB of chatter: it ends the sink");
	tap_ok(note != NULL && note[-1] == '\n' && strchr(note, '\n')[1] ==
	    'c', "6 MB of chatter: note and tail start lines of their own");
	jobstream_free(&js);
	free(s.buf);
}

int
main(void)
{
	test_split(1);
	test_split(7);
	test_split(1 << 20);
	test_damaged();
	test_bounded();
	return tap_done();
}
