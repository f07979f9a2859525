/*
 * The framing of run's MPI job's stdout, both sides (see jobstream.h).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/xmalloc.h"
#include "launch/jobstream.h"

#define JOBSTREAM_RS		'\036'
#define JOBSTREAM_PREFIX	"\036gradaudit-"

static const char *const jobstream_names[JOBSTREAM_NKINDS] = {
	[JOBSTREAM_REPORT] = "report",
	[JOBSTREAM_ATTACHMENT] = "attachment",
	[JOBSTREAM_SUMMARY] = "summary",
	[JOBSTREAM_BASELINE] = "baseline"
};

void
jobstream_send(FILE *fp, enum jobstream_kind kind, const char *data,
    size_t len)
{
	fprintf(fp, "%s%s %zu %016" PRIx64 "\n", JOBSTREAM_PREFIX,
	    jobstream_names[kind], len, hash_bytes(data, len));
	fwrite(data, 1, len, fp);
	fflush(fp);
}

void
jobstream_send_status(FILE *fp, int status)
{
	fprintf(fp, "%sstatus %d\n", JOBSTREAM_PREFIX, status);
	fflush(fp);
}

void
jobstream_init(struct jobstream *js,
    void (*chatter)(void *, const char *, size_t), void *arg)
{
	memset(js, 0, sizeof(*js));
	js->chatter = chatter;
	js->arg = arg;
	js->status = -1;
	js->frame = -1;
	js->last = '\n';
}

/*
 * Chatter: the first JOBSTREAM_HEAD bytes are passed on as they come, and
 * of the rest only the last JOBSTREAM_TAIL are kept, in a ring, for
 * jobstream_end.
 */
static void
jobstream_chatter(struct jobstream *js, const char *p, size_t n)
{
	size_t	 k, evicted;

	if (js->passed < JOBSTREAM_HEAD && n > 0) {
		k = JOBSTREAM_HEAD - js->passed < n ?
		    JOBSTREAM_HEAD - js->passed : n;
		js->chatter(js->arg, p, k);
		js->passed += k;
		js->last = p[k - 1];
		p += k;
		n -= k;
	}
	if (n == 0)
		return;
	if (js->tail == NULL)
		js->tail = xmalloc(JOBSTREAM_TAIL);
	if (n >= JOBSTREAM_TAIL) {
		js->dropped += js->tail_len + n - JOBSTREAM_TAIL;
		memcpy(js->tail, p + n - JOBSTREAM_TAIL, JOBSTREAM_TAIL);
		js->tail_len = JOBSTREAM_TAIL;
		js->tail_next = 0;
		return;
	}
	evicted = js->tail_len + n > JOBSTREAM_TAIL ?
	    js->tail_len + n - JOBSTREAM_TAIL : 0;
	js->dropped += evicted;
	js->tail_len -= evicted;
	while (n > 0) {
		k = JOBSTREAM_TAIL - js->tail_next < n ?
		    JOBSTREAM_TAIL - js->tail_next : n;
		memcpy(js->tail + js->tail_next, p, k);
		js->tail_next = (js->tail_next + k) % JOBSTREAM_TAIL;
		js->tail_len += k;
		p += k;
		n -= k;
	}
}

/* A header line, without its newline: true when it is one. */
static bool
jobstream_header(struct jobstream *js, const char *line)
{
	struct jobstream_doc	*doc;
	const char		*rest = line + strlen(JOBSTREAM_PREFIX);
	char			*end;
	unsigned long long	 len, digest;
	size_t			 n;
	long			 status;
	int			 k;

	if (strncmp(line, JOBSTREAM_PREFIX, strlen(JOBSTREAM_PREFIX)) != 0)
		return false;
	if (strncmp(rest, "status ", 7) == 0) {
		status = strtol(rest + 7, &end, 10);
		if (end == rest + 7 || *end != '\0' || status < 0 ||
		    status > 255)
			return false;
		js->status = (int)status;
		return true;
	}
	for (k = 0; k < JOBSTREAM_NKINDS; k++) {
		n = strlen(jobstream_names[k]);
		if (strncmp(rest, jobstream_names[k], n) == 0 &&
		    rest[n] == ' ')
			break;
	}
	if (k == JOBSTREAM_NKINDS)
		return false;
	rest += strlen(jobstream_names[k]) + 1;
	len = strtoull(rest, &end, 10);
	if (end == rest || *end != ' ')
		return false;
	rest = end + 1;
	digest = strtoull(rest, &end, 16);
	if (end != rest + 16 || *end != '\0' || len > SIZE_MAX)
		return false;
	doc = &js->docs[k];
	free(doc->data);
	memset(doc, 0, sizeof(*doc));
	doc->want = (size_t)len;
	doc->digest = (uint64_t)digest;
	doc->announced = true;
	doc->data = xmalloc(1);
	js->frame = doc->want > 0 ? k : -1;
	return true;
}

/* The bytes of the document being received. */
static size_t
jobstream_frame(struct jobstream *js, const char *p, size_t n)
{
	struct jobstream_doc	*doc = &js->docs[js->frame];
	size_t			 k = doc->want - doc->len < n ?
				    doc->want - doc->len : n;

	if (doc->len + k > doc->cap) {
		/* Grow with what arrives, whatever the header claimed. */
		doc->cap = 2 * (doc->len + k) + 4096;
		if (doc->cap > doc->want)
			doc->cap = doc->want;
		doc->data = xreallocarray(doc->data, doc->cap, 1);
	}
	memcpy(doc->data + doc->len, p, k);
	doc->len += k;
	if (doc->len == doc->want)
		js->frame = -1;
	return k;
}

/*
 * A line that began with RS, byte by byte up to its newline: a header, or
 * chatter after all.
 */
static size_t
jobstream_line(struct jobstream *js, const char *p, size_t n)
{
	size_t	 used = 0;

	while (used < n) {
		if (p[used] == '\n') {
			js->line[js->line_len] = '\0';
			if (!jobstream_header(js, js->line)) {
				jobstream_chatter(js, js->line, js->line_len);
				jobstream_chatter(js, "\n", 1);
			}
			js->line_len = 0;
			return used + 1;
		}
		if (js->line_len == sizeof(js->line) - 1) {
			jobstream_chatter(js, js->line, js->line_len);
			js->line_len = 0;
			return used;
		}
		js->line[js->line_len++] = p[used++];
	}
	return used;
}

void
jobstream_feed(struct jobstream *js, const char *p, size_t n)
{
	const char	*rs;
	size_t		 k;

	while (n > 0) {
		if (js->frame >= 0)
			k = jobstream_frame(js, p, n);
		else if (js->line_len > 0)
			k = jobstream_line(js, p, n);
		else if (*p == JOBSTREAM_RS) {
			js->line[0] = *p;
			js->line_len = 1;
			k = 1;
		} else {
			/*
			 * Up to the next RS, wherever it is: the header of
			 * process 0 may follow another process's half line.
			 */
			rs = memchr(p, JOBSTREAM_RS, n);
			k = rs != NULL ? (size_t)(rs - p) : n;
			jobstream_chatter(js, p, k);
		}
		p += k;
		n -= k;
	}
}

void
jobstream_end(struct jobstream *js)
{
	char	 note[256];
	size_t	 start, skip = 0, i, chunk;
	int	 len;

	if (js->line_len > 0) {
		jobstream_chatter(js, js->line, js->line_len);
		js->line_len = 0;
	}
	if (js->tail_len == 0)
		return;
	start = (js->tail_next + JOBSTREAM_TAIL - js->tail_len) %
	    JOBSTREAM_TAIL;
	if (js->dropped > 0) {
		/* Begin the tail on a line of its own. */
		for (i = 0; i < js->tail_len; i++)
			if (js->tail[(start + i) % JOBSTREAM_TAIL] == '\n')
				break;
		if (i < js->tail_len)
			skip = i + 1;
		js->dropped += skip;
		if (js->last != '\n')
			js->chatter(js->arg, "\n", 1);
		len = snprintf(note, sizeof(note), "%s: the MPI job wrote more "
		    "than %d KiB on its standard output besides the report: "
		    "%zu bytes dropped here, the last %zu follow\n", progname,
		    JOBSTREAM_HEAD / 1024, js->dropped, js->tail_len - skip);
		if (len > 0)
			js->chatter(js->arg, note, (size_t)len <
			    sizeof(note) ? (size_t)len : sizeof(note) - 1);
	}
	/* The ring in order: from start to its end, then from its beginning. */
	start = (start + skip) % JOBSTREAM_TAIL;
	chunk = JOBSTREAM_TAIL - start < js->tail_len - skip ?
	    JOBSTREAM_TAIL - start : js->tail_len - skip;
	if (chunk > 0)
		js->chatter(js->arg, js->tail + start, chunk);
	if (js->tail_len - skip > chunk)
		js->chatter(js->arg, js->tail, js->tail_len - skip - chunk);
	js->tail_len = 0;
}

bool
jobstream_doc(const struct jobstream *js, enum jobstream_kind kind,
    const char **data, size_t *len, const char **why)
{
	const struct jobstream_doc *doc = &js->docs[kind];

	*why = NULL;
	if (!doc->announced)
		return false;
	if (doc->len < doc->want) {
		*why = "cut short";
		return false;
	}
	if (hash_bytes(doc->data, doc->len) != doc->digest) {
		*why = "garbled by other output";
		return false;
	}
	*data = doc->data;
	*len = doc->len;
	return true;
}

char *
jobstream_take(struct jobstream *js, enum jobstream_kind kind)
{
	char	*data = js->docs[kind].data;

	memset(&js->docs[kind], 0, sizeof(js->docs[kind]));
	return data;
}

void
jobstream_free(struct jobstream *js)
{
	int	 k;

	for (k = 0; k < JOBSTREAM_NKINDS; k++)
		free(js->docs[k].data);
	free(js->tail);
	memset(js, 0, sizeof(*js));
}
