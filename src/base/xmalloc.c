/*
 * Allocation wrappers and fatal errors.  gradaudit is a short-lived command:
 * running out of memory is a runtime failure (exit 3), reported once, never a
 * NULL pointer threaded through every caller.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitcode.h"
#include "base/xmalloc.h"

const char *const progname = "gradaudit";

void *
xmalloc(size_t size)
{
	void	*p;

	if (size == 0)
		size = 1;
	if ((p = malloc(size)) == NULL)
		fatal("malloc %zu bytes", size);
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void	*p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if ((p = calloc(nmemb, size)) == NULL)
		fatal("calloc %zu x %zu bytes", nmemb, size);
	return p;
}

void *
xreallocarray(void *old, size_t nmemb, size_t size)
{
	void	*p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if (nmemb > SIZE_MAX / size)
		fatalx("allocation of %zu x %zu bytes overflows", nmemb, size);
	if ((p = realloc(old, nmemb * size)) == NULL)
		fatal("realloc %zu x %zu bytes", nmemb, size);
	return p;
}

char *
xstrdup(const char *s)
{
	char	*p;

	if ((p = strdup(s)) == NULL)
		fatal("strdup");
	return p;
}

int
xvasprintf(char **ret, const char *fmt, va_list ap)
{
	va_list	 copy;
	int	 n;

	va_copy(copy, ap);
	n = vsnprintf(NULL, 0, fmt, copy);
	va_end(copy);
	if (n < 0)
		fatalx("xvasprintf: bad format");
	*ret = xmalloc((size_t)n + 1);
	vsnprintf(*ret, (size_t)n + 1, fmt, ap);
	return n;
}

int
xasprintf(char **ret, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = xvasprintf(ret, fmt, ap);
	va_end(ap);
	return n;
}

void
fatal(const char *fmt, ...)
{
	va_list	 ap;
	int	 saved = errno;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(saved));
	exit(EXIT_RUNTIME);
}

void
fatalx(const char *fmt, ...)
{
	va_list	 ap;

	fprintf(stderr, "%s: internal error: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_RUNTIME);
}
