/*
 * Allocation that never returns NULL, and the two ways to die: fatal() for a
 * failed system call (appends strerror(errno)) and fatalx() for a broken
 * internal invariant.  Both exit with EXIT_RUNTIME: an internal failure is
 * never reported as a configuration verdict.
 */
#ifndef GRADAUDIT_XMALLOC_H
#define GRADAUDIT_XMALLOC_H

#include <stdarg.h>
#include <stddef.h>

void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xreallocarray(void *, size_t, size_t);
char	*xstrdup(const char *);
int	 xasprintf(char **, const char *, ...)
	    __attribute__((format(printf, 2, 3)));
int	 xvasprintf(char **, const char *, va_list)
	    __attribute__((format(printf, 2, 0)));

void	 fatal(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));
void	 fatalx(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));

/* The program name used as the prefix of every diagnostic ("gradaudit"). */
extern const char *const progname;

#endif
