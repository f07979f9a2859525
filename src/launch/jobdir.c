/*
 * The private directory of a job run starts (jobdir.h).  The arguments are
 * NUL-terminated words, as in /proc/PID/cmdline, since an argument may hold
 * any byte but NUL: a magic word, the number n of the job's arguments, the
 * n arguments (the job's argv[1..n]), then pairs of an operand's index and
 * the path of its copy.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "launch/jobdir.h"

#define JOBDIR_MAGIC	"gradaudit-job-args 1"

bool
jobdir_read_once(const char *operand)
{
	struct stat	 st;

	if (strcmp(operand, "-") == 0)
		return true;
	return stat(operand, &st) == 0 && !S_ISREG(st.st_mode) &&
	    !S_ISDIR(st.st_mode);
}

/* Write all of buf, or -1 with errno. */
static int
write_all(int fd, const void *buf, size_t len)
{
	const char	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Copy operand (stdin for "-") to path: one byte past the loader's limit
 * is enough for it to refuse the file.  Returns 0, 1 when the operand
 * does not open or read (the loader will say why), or -1 after a message.
 */
static int
copy_operand(const char *operand, const char *path)
{
	char		 buf[65536];
	size_t		 total = 0;
	ssize_t		 n;
	int		 in, out, saved;

	if (strcmp(operand, "-") == 0)
		in = STDIN_FILENO;
	else if ((in = open(operand, O_RDONLY | O_CLOEXEC)) == -1)
		return 1;
	if ((out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) == -1) {
		saved = errno;
		goto fail;
	}
	while (total <= CFG_MAX_FILE_BYTES) {
		if ((n = read(in, buf, sizeof buf)) == -1) {
			if (errno == EINTR)
				continue;
			close(out);
			if (in != STDIN_FILENO)
				close(in);
			return 1;
		}
		if (n == 0)
			break;
		if (write_all(out, buf, (size_t)n) == -1) {
			saved = errno;
			goto fail;
		}
		total += (size_t)n;
	}
	if (close(out) == -1) {
		out = -1;
		saved = errno;
		goto fail;
	}
	if (in != STDIN_FILENO)
		close(in);
	return 0;
fail:
	fprintf(stderr, "%s: %s: cannot copy it for the MPI job: %s\n",
	    progname, strcmp(operand, "-") == 0 ? "<stdin>" : operand,
	    strerror(saved));
	if (out != -1)
		close(out);
	if (in != STDIN_FILENO)
		close(in);
	return -1;
}

/* One NUL-terminated word, or an integer as one. */
static int
put_word(FILE *fp, const char *w)
{
	return fwrite(w, 1, strlen(w) + 1, fp) == strlen(w) + 1 ? 0 : -1;
}

static int
put_number(FILE *fp, long n)
{
	char	 num[32];

	snprintf(num, sizeof num, "%ld", n);
	return put_word(fp, num);
}

static int
write_args(const struct jobdir *jd, int argc, char **argv)
{
	FILE	*fp;
	int	 i, rc = 0, fd;

	if ((fd = open(jd->args, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) == -1 || (fp = fdopen(fd, "w")) == NULL) {
		fprintf(stderr, "%s: %s: cannot write the MPI job's arguments: "
		    "%s\n", progname, jd->args, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	rc |= put_word(fp, JOBDIR_MAGIC);
	rc |= put_number(fp, argc - 1);
	for (i = 1; i < argc; i++)
		rc |= put_word(fp, argv[i]);
	for (i = 0; i < jd->ncopies; i++)
		if (jd->copies[i] != NULL) {
			rc |= put_number(fp, i);
			rc |= put_word(fp, jd->copies[i]);
		}
	if (fclose(fp) != 0)
		rc = -1;
	if (rc != 0)
		fprintf(stderr, "%s: %s: cannot write the MPI job's arguments: "
		    "%s\n", progname, jd->args, strerror(errno));
	return rc;
}

int
jobdir_make(struct jobdir *jd, int argc, char **argv, int nargs, char **args)
{
	const char	*tmp = getenv("TMPDIR");
	int		 i, rc;

	memset(jd, 0, sizeof *jd);
	if (tmp == NULL || *tmp == '\0')
		tmp = "/tmp";
	xasprintf(&jd->path, "%s/gradaudit-run.XXXXXX", tmp);
	if (mkdtemp(jd->path) == NULL) {
		fprintf(stderr, "%s: %s: cannot make a directory for the MPI "
		    "job: %s\n", progname, jd->path, strerror(errno));
		free(jd->path);
		jd->path = NULL;
		return -1;
	}
	xasprintf(&jd->args, "%s/args", jd->path);
	jd->ncopies = nargs;
	jd->copies = xcalloc((size_t)nargs + 1, sizeof *jd->copies);
	for (i = 0; i < nargs; i++) {
		xasprintf(&jd->copies[i], "%s/config.%d", jd->path, i);
		if ((rc = copy_operand(args[i], jd->copies[i])) == 0)
			continue;
		if (rc > 0) {
			unlink(jd->copies[i]);
			free(jd->copies[i]);
			jd->copies[i] = NULL;
			continue;
		}
		jobdir_remove(jd);
		return -1;
	}
	if (write_args(jd, argc, argv) == -1) {
		jobdir_remove(jd);
		return -1;
	}
	return 0;
}

/* The whole file, NUL-terminated after its *len bytes. */
static char *
slurp(const char *path, size_t *len)
{
	FILE	*fp;
	char	*buf = NULL;
	size_t	 cap = 0, n = 0, got;

	if ((fp = fopen(path, "rb")) == NULL)
		return NULL;
	do {
		if (cap - n < 4096) {
			cap = cap == 0 ? 65536 : 2 * cap;
			buf = xreallocarray(buf, cap + 1, 1);
		}
		got = fread(buf + n, 1, cap - n, fp);
		n += got;
	} while (got > 0);
	if (ferror(fp)) {
		fclose(fp);
		free(buf);
		return NULL;
	}
	fclose(fp);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* The next word of buf[*at..len), or NULL past the last. */
static char *
next_word(char *buf, size_t len, size_t *at)
{
	char	*w;

	if (*at >= len)
		return NULL;
	w = buf + *at;
	*at += strlen(w) + 1;
	return w;
}

/* A word that is a number in [0, max], or -1. */
static long
word_number(const char *w, long max)
{
	char	*end;
	long	 n;

	if (w == NULL || *w < '0' || *w > '9')
		return -1;
	errno = 0;
	n = strtol(w, &end, 10);
	return *end != '\0' || errno != 0 || n > max ? -1 : n;
}

int
jobdir_read(const char *path, const char *argv0, int *argc, char ***argv,
    char ***copies, int *ncopies, char **buf)
{
	size_t	 len, at = 0;
	long	 n, i, k;
	char	*w;

	*argv = *copies = NULL;
	if ((*buf = slurp(path, &len)) == NULL) {
		fprintf(stderr, "%s: %s: cannot read the MPI job's arguments: "
		    "%s\n", progname, path, strerror(errno));
		return -1;
	}
	/* The last word ends with the file. */
	if (len == 0 || (*buf)[len - 1] != '\0' ||
	    strcmp(next_word(*buf, len, &at), JOBDIR_MAGIC) != 0 ||
	    (n = word_number(next_word(*buf, len, &at), INT_MAX - 2)) < 1)
		goto bad;
	*argv = xcalloc((size_t)n + 2, sizeof **argv);
	(*argv)[0] = (char *)argv0;
	for (i = 1; i <= n; i++)
		if (((*argv)[i] = next_word(*buf, len, &at)) == NULL)
			goto bad;
	*argc = (int)n + 1;
	*ncopies = (int)n;
	*copies = xcalloc((size_t)n + 1, sizeof **copies);
	while ((w = next_word(*buf, len, &at)) != NULL) {
		if ((k = word_number(w, n - 1)) < 0 ||
		    ((*copies)[k] = next_word(*buf, len, &at)) == NULL)
			goto bad;
	}
	return 0;
bad:
	fprintf(stderr, "%s: %s: not the arguments of a gradaudit MPI job\n",
	    progname, path);
	free(*argv);
	free(*copies);
	free(*buf);
	*argv = *copies = NULL;
	*buf = NULL;
	return -1;
}

void
jobdir_discard(const char *path, char *const *copies, int ncopies)
{
	char	*dir, *slash;
	int	 i;

	for (i = 0; i < ncopies; i++)
		if (copies[i] != NULL)
			unlink(copies[i]);
	unlink(path);
	dir = xstrdup(path);
	if ((slash = strrchr(dir, '/')) != NULL) {
		*slash = '\0';
		rmdir(dir);
	}
	free(dir);
}

void
jobdir_remove(struct jobdir *jd)
{
	int	 i;

	for (i = 0; i < jd->ncopies; i++)
		if (jd->copies[i] != NULL) {
			unlink(jd->copies[i]);
			free(jd->copies[i]);
		}
	free(jd->copies);
	if (jd->args != NULL) {
		unlink(jd->args);
		free(jd->args);
	}
	if (jd->path != NULL) {
		rmdir(jd->path);
		free(jd->path);
	}
	memset(jd, 0, sizeof *jd);
}
