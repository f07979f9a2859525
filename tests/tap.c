/*
 * The TAP printer shared by the C test programs (see tap.h).  Every test
 * counts its checks and words its failures the same way, so a change to the
 * format (or a fix to it) is made once.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "tap.h"

static int	 tap_count;		/* checks so far, skips included */
static int	 tap_failed;
static int	 tap_planned = -1;	/* from tap_plan(), else -1 */
static bool	 tap_silent;

static void	 tap_vresult(bool, const char *, const char *, va_list)
		    __attribute__((format(printf, 2, 0)));
static void	 tap_comment(const char *, const char *);

void
tap_plan(int count)
{
	tap_planned = count;
	if (!tap_silent)
		printf("1..%d\n", count);
}

void
tap_quiet(bool quiet)
{
	tap_silent = quiet;
}

/* The result line; a skip is "ok" with the reason after the description. */
static void
tap_vresult(bool cond, const char *fmt, const char *skip, va_list ap)
{
	tap_count++;
	if (!cond)
		tap_failed++;
	if (tap_silent)
		return;
	printf("%s %d - ", cond ? "ok" : "not ok", tap_count);
	vprintf(fmt, ap);
	if (skip != NULL)
		printf(" # SKIP %s", skip);
	putchar('\n');
}

bool
tap_ok(bool cond, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	tap_vresult(cond, fmt, NULL, ap);
	va_end(ap);
	return cond;
}

void
tap_skip(const char *why, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	tap_vresult(true, fmt, why, ap);
	va_end(ap);
}

/*
 * Print text under a label, every line a comment and every line end shown
 * as '|': reports differ in trailing blanks and final newlines, which a
 * plain dump would hide.
 */
static void
tap_comment(const char *label, const char *text)
{
	const char	*p;

	printf("# %s:\n# ", label);
	for (p = text; *p != '\0'; p++) {
		if (*p == '\n')
			fputs("|\n# ", stdout);
		else
			putchar(*p);
	}
	putchar('\n');
}

bool
tap_ok_str_eq(const char *got, const char *want, const char *fmt, ...)
{
	va_list	 ap;
	bool	 equal;

	equal = strcmp(got, want) == 0;
	va_start(ap, fmt);
	tap_vresult(equal, fmt, NULL, ap);
	va_end(ap);
	if (!equal && !tap_silent) {
		tap_comment("got", got);
		tap_comment("want", want);
	}
	return equal;
}

/*
 * A message that spans lines (a loader's errors, a fuzzed input) must not
 * leave a line without "# ": the driver would read a stray "ok" as a result.
 */
void
tap_diag(const char *fmt, ...)
{
	va_list	 ap, ap2;
	char	*buf, *line, *end;
	int	 len;

	if (tap_silent)
		return;
	va_start(ap, fmt);
	va_copy(ap2, ap);
	len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len < 0)
		fatalx("tap_diag: cannot format \"%s\"", fmt);
	buf = xmalloc((size_t)len + 1);
	vsnprintf(buf, (size_t)len + 1, fmt, ap2);
	va_end(ap2);

	/* One comment a line; a final newline does not add an empty one. */
	line = buf;
	do {
		if ((end = strchr(line, '\n')) != NULL)
			*end++ = '\0';
		printf("# %s\n", line);
		line = end;
	} while (line != NULL && *line != '\0');
	free(buf);
}

int
tap_done(void)
{
	bool	 counted = true;

	if (tap_planned < 0) {
		if (!tap_silent)
			printf("1..%d\n", tap_count);
	} else if (tap_count != tap_planned) {
		tap_diag("planned %d tests, ran %d", tap_planned, tap_count);
		counted = false;
	}
	/* Output lost to a full disk or a closed pipe is no pass. */
	if (fflush(stdout) == EOF || ferror(stdout))
		return 1;
	return tap_failed != 0 || !counted;
}
