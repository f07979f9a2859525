/*
 * What the libFuzzer harnesses of tests/libfuzzer/ share: a private
 * directory for the files a parser must read, the capture of what the
 * library prints, and the failure of an invariant.
 *
 * A parser reads a file by its name, so each harness writes its input to
 * a file of its process's own directory, created on the first input and
 * removed at exit.  The library prints its messages through stdio's
 * stderr (and import its configuration through stdout): the harness
 * points those two streams at memory while the parser runs, so that it
 * can check what was said, while a sanitizer's report, written to file
 * descriptor 2, still reaches libFuzzer's log.
 */
#ifndef GRADAUDIT_FUZZ_HARNESS_H
#define GRADAUDIT_FUZZ_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The process's directory, made on the first call; the framework
 * profiles of the source tree are then GRADAUDIT_FRAMEWORKS's default.
 */
const char	*harness_dir(void);

/* The path of file `name` in that directory (a static buffer per name). */
const char	*harness_path(const char *name);

/*
 * Make the file at path hold exactly data (len bytes), through a
 * descriptor kept open: truncating and rewriting it in place costs no
 * directory change per input.
 */
void		 harness_write(const char *path, const void *data, size_t len);

/* Remove the file at path when it exists (and forget its descriptor). */
void		 harness_remove(const char *path);

/*
 * Point stderr and stdout at memory until harness_capture_end, which
 * returns what the library wrote to stderr (NUL-terminated; *len bytes,
 * which may hold a NUL of the library's own) and, if out is not NULL,
 * what it wrote to stdout.  Both are the caller's to free.
 */
void		 harness_capture_begin(void);
char		*harness_capture_end(size_t *len, char **out, size_t *outlen);

/*
 * An invariant failed: say which, and what the library said, on file
 * descriptor 2, and abort, which libFuzzer reports as a crash and keeps
 * the input of.
 */
void		 harness_fail(const char *said, const char *fmt, ...)
		    __attribute__((format(printf, 2, 3), noreturn));

/*
 * True when text (len bytes) is a whole number of lines, each starting
 * with prefix, with no NUL in it; *nlines is their number.
 */
bool		 harness_lines(const char *text, size_t len, const char *prefix,
		    size_t *nlines);

/*
 * True when line starts "gradaudit: PATH:LINE:COL: ", the place every
 * message about an input's content names (STYLE item 4).
 */
bool		 harness_at_place(const char *line, const char *path);

/* A hash of the input, to choose among a harness's variants for it. */
uint64_t	 harness_hash(const uint8_t *data, size_t len);

#endif
