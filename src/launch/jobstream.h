/*
 * What run's MPI job writes on its standard output, and how the launching
 * parent reads it.
 *
 * That stdout is shared: hydra's mpiexec prints its "BAD TERMINATION"
 * banner there, a launcher or a wrapper script may print anything, and only
 * process 0 of the job speaks for gradaudit.  So process 0 sends what it
 * has for the parent framed: a line that starts with ASCII RS (\036), a
 * byte no text holds, names the document, its length and its XXH3-64
 * digest, and the bytes follow; its last word is a status line.  Everything else is chatter, which the
 * parent passes to its stderr: stdout carries only the report (issue 8).
 * Of chatter it passes the first JOBSTREAM_HEAD bytes and keeps only the
 * last JOBSTREAM_TAIL, saying how much it dropped, so that a chatty
 * launcher cannot fill memory (one held 1.8 GB) or a CI log.
 */
#ifndef GRADAUDIT_JOBSTREAM_H
#define GRADAUDIT_JOBSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JOBSTREAM_HEAD		(1024 * 1024)
#define JOBSTREAM_TAIL		(64 * 1024)

enum jobstream_kind {
	JOBSTREAM_REPORT,	/* the report, for the parent's stdout */
	JOBSTREAM_ATTACHMENT,	/* the JUnit report, for the parent to write */
	JOBSTREAM_SUMMARY,	/* the --summary Markdown, for the parent */
	JOBSTREAM_BASELINE,	/* the --write-baseline file */
	JOBSTREAM_NKINDS
};

/* Process 0's side: one framed document, or the status line, on fp. */
void	 jobstream_send(FILE *fp, enum jobstream_kind, const char *data,
	    size_t len);
void	 jobstream_send_status(FILE *fp, int status);

struct jobstream_doc {
	char		*data;		/* xmalloc'd; NULL if none came */
	size_t		 len;		/* bytes received */
	size_t		 cap;
	size_t		 want;		/* bytes announced */
	uint64_t	 digest;	/* announced */
	bool		 announced;
};

/*
 * The parent's side.  Bytes are fed as they come; chatter goes to
 * `chatter` (the parent's stderr, after erasing its progress line).
 */
struct jobstream {
	void		 (*chatter)(void *, const char *, size_t);
	void		*arg;
	struct jobstream_doc docs[JOBSTREAM_NKINDS];
	int		 status;	/* the status line's, or -1 */

	/* The parser. */
	int		 frame;		/* kind being received, or -1 */
	char		 line[128];	/* a line that may be a frame header */
	size_t		 line_len;	/* > 0 while one is being read */

	/* Chatter: what was passed on, and the kept tail after that. */
	size_t		 passed;
	char		 last;		/* the last byte passed on */
	char		*tail;		/* a ring of JOBSTREAM_TAIL bytes */
	size_t		 tail_len, tail_next;
	size_t		 dropped;
};

void	 jobstream_init(struct jobstream *,
	    void (*chatter)(void *, const char *, size_t), void *arg);
void	 jobstream_feed(struct jobstream *, const char *, size_t);
/*
 * The stream has ended: pass on a header line left unfinished and the kept
 * tail, after a note of how much was dropped.
 */
void	 jobstream_end(struct jobstream *);

/*
 * A document that came whole and intact: true, with *data and *len (still
 * owned by the stream).  False with *why NULL when none came, else why it
 * is unusable ("cut short", "garbled").
 */
bool	 jobstream_doc(const struct jobstream *, enum jobstream_kind,
	    const char **data, size_t *len, const char **why);
/* Take a document's bytes away from the stream (the caller frees them). */
char	*jobstream_take(struct jobstream *, enum jobstream_kind);

void	 jobstream_free(struct jobstream *);

#endif
