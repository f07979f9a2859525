/*
 * Splitting a command line into words as sh(1) does, without running a
 * shell and without expanding anything: for --launcher, and for the launch
 * lines that `gradaudit import` reads.
 */
#ifndef GRADAUDIT_SHELLWORDS_H
#define GRADAUDIT_SHELLWORDS_H

#include <stddef.h>

/* A word that starts with an unquoted '#' starts a comment to the line end. */
#define SHELLWORDS_COMMENTS	0x01

/*
 * Split s into words: blanks (newlines included) separate them, single
 * quotes keep everything literally, double quotes keep blanks and take \",
 * \\ and \$ as escapes, a backslash outside quotes escapes the next
 * character, and a backslash before a newline is removed with it (a
 * continued line) outside single quotes.  Returns a NULL-terminated array
 * of *nwords words, or NULL for an unterminated quote.
 */
char	**shellwords_split(const char *s, unsigned flags, size_t *nwords);
void	 shellwords_free(char **, size_t);
/*
 * The length of the first command of the command line s: up to the first
 * ';', '&', '|' or newline outside quotes and not escaped, where a command
 * list or pipeline goes on to the next command.  An '&' right after '>'
 * or '<' belongs to a redirection (2>&1).  The whole of s when it holds
 * one command.
 */
size_t	 shellwords_command_len(const char *s);
/*
 * The word w as sh(1) reads it back: as it is when it holds only letters,
 * digits and -_./=:,+@%, else in single quotes ('\'' for a quote).
 * Allocated; the caller frees it.
 */
char	*shellwords_quote(const char *w);

#endif
