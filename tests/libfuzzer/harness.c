/*
 * The libFuzzer harnesses' common part (harness.h).
 */
#define _XOPEN_SOURCE 700

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#ifndef FUZZ_FRAMEWORKS
#define FUZZ_FRAMEWORKS	"frameworks"
#endif

#define MAX_FILES	32

static char	 dir[4096];
static struct {
	char	 path[4200];
	int	 fd;
} files[MAX_FILES];
static int	 nfiles;

static FILE	*saved_err, *saved_out;
static FILE	*err_stream, *out_stream;
static char	*err_buf, *out_buf;
static size_t	 err_len, out_len;

static void	 say(const char *, size_t);
static void	 say_string(const char *);

static int
remove_entry(const char *path, const struct stat *st, int flag,
    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/*
 * At exit: what the library said before it called exit() (fatal()
 * exits 3, which libFuzzer reports as "fuzz target exited") would be
 * lost in memory; then the directory goes.
 */
static void
at_exit(void)
{
	if (err_stream != NULL && fflush(err_stream) == 0 && err_len > 0) {
		say_string("the library said, before exiting:\n");
		say(err_buf, err_len);
	}
	if (dir[0] != '\0')
		(void)nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Write to file descriptor 2, whatever stderr points at. */
static void
say(const char *s, size_t n)
{
	ssize_t	 w;

	while (n > 0 && (w = write(2, s, n)) > 0) {
		s += w;
		n -= (size_t)w;
	}
}

static void
say_string(const char *s)
{
	say(s, strlen(s));
}

static void
die(const char *what)
{
	char	 msg[512];
	int	 n;

	n = snprintf(msg, sizeof msg, "harness: %s: %s\n", what,
	    strerror(errno));
	say(msg, n > 0 ? (size_t)n : 0);
	abort();
}

const char *
harness_dir(void)
{
	const char	*tmp = getenv("TMPDIR");

	if (dir[0] != '\0')
		return dir;
	snprintf(dir, sizeof dir, "%s/gradaudit-fuzz.XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	/* A reproducer run by hand finds the profiles of its source tree. */
	setenv("GRADAUDIT_FRAMEWORKS", FUZZ_FRAMEWORKS, 0);
	atexit(at_exit);
	return dir;
}

const char *
harness_path(const char *name)
{
	static struct {
		char	 name[64];
		char	 path[4200];
	} paths[MAX_FILES];
	static int	 n;
	int		 i;

	for (i = 0; i < n; i++)
		if (strcmp(paths[i].name, name) == 0)
			return paths[i].path;
	if (n == MAX_FILES || strlen(name) >= sizeof paths[0].name) {
		errno = ENOSPC;
		die(name);
	}
	snprintf(paths[n].name, sizeof paths[n].name, "%s", name);
	snprintf(paths[n].path, sizeof paths[n].path, "%s/%s", harness_dir(),
	    name);
	return paths[n++].path;
}

static int
file_index(const char *path)
{
	int	 i;

	for (i = 0; i < nfiles; i++)
		if (strcmp(files[i].path, path) == 0)
			return i;
	return -1;
}

void
harness_write(const char *path, const void *data, size_t len)
{
	int	 i = file_index(path);

	if (i < 0) {
		if (nfiles == MAX_FILES) {
			errno = ENOSPC;
			die(path);
		}
		i = nfiles++;
		snprintf(files[i].path, sizeof files[i].path, "%s", path);
		if ((files[i].fd = open(path, O_RDWR | O_CREAT, 0600)) == -1)
			die(path);
	}
	if (pwrite(files[i].fd, data, len, 0) != (ssize_t)len ||
	    ftruncate(files[i].fd, (off_t)len) == -1)
		die(path);
}

void
harness_remove(const char *path)
{
	int	 i = file_index(path);

	if (i >= 0) {
		close(files[i].fd);
		files[i] = files[--nfiles];
	}
	if (unlink(path) == -1 && errno != ENOENT)
		die(path);
}

void
harness_capture_begin(void)
{
	free(err_buf);
	free(out_buf);
	err_buf = out_buf = NULL;
	if ((err_stream = open_memstream(&err_buf, &err_len)) == NULL ||
	    (out_stream = open_memstream(&out_buf, &out_len)) == NULL)
		die("open_memstream");
	saved_err = stderr;
	saved_out = stdout;
	stderr = err_stream;
	stdout = out_stream;
}

char *
harness_capture_end(size_t *len, char **out, size_t *outlen)
{
	char	*s;

	stderr = saved_err;
	stdout = saved_out;
	if (fclose(err_stream) != 0 || fclose(out_stream) != 0)
		die("closing a memory stream");
	err_stream = out_stream = NULL;
	s = err_buf;
	*len = err_len;
	if (out != NULL) {
		*out = out_buf;
		*outlen = out_len;
	} else
		free(out_buf);
	err_buf = out_buf = NULL;
	return s;
}

void
harness_fail(const char *said, const char *fmt, ...)
{
	char	 msg[1024];
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	say_string("==harness== invariant failed: ");
	say(msg, n > 0 ? strnlen(msg, sizeof msg) : 0);
	say_string("\n");
	if (said != NULL) {
		say_string("==harness== the library said:\n");
		say_string(said);
	}
	abort();
}

bool
harness_lines(const char *text, size_t len, const char *prefix,
    size_t *nlines)
{
	size_t	 i = 0, n = 0, plen = strlen(prefix);
	const char *nl;

	*nlines = 0;
	if (memchr(text, '\0', len) != NULL)
		return false;
	while (i < len) {
		if (len - i < plen || memcmp(text + i, prefix, plen) != 0)
			return false;
		if ((nl = memchr(text + i, '\n', len - i)) == NULL)
			return false;
		i = (size_t)(nl - text) + 1;
		n++;
	}
	*nlines = n;
	return true;
}

bool
harness_at_place(const char *line, const char *path)
{
	const char	*p;
	int		 i;

	if (strncmp(line, "gradaudit: ", 11) != 0 ||
	    strncmp(line + 11, path, strlen(path)) != 0)
		return false;
	p = line + 11 + strlen(path);
	for (i = 0; i < 2; i++) {
		if (*p++ != ':' || *p < '1' || *p > '9')
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return p[0] == ':' && p[1] == ' ';
}

uint64_t
harness_hash(const uint8_t *data, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;	/* FNV-1a */
	size_t	 i;

	for (i = 0; i < len; i++)
		h = (h ^ data[i]) * 0x100000001b3ULL;
	return h;
}
