/*
 * Shell-style word splitting (shellwords.h).  Only quoting is interpreted:
 * no variable, command, tilde or glob expansion, so a word such as $TP
 * stays literally "$TP" and the caller can say that it was never expanded.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/shellwords.h"
#include "base/xmalloc.h"

/* A backslash and a newline: a continued line, which sh removes first. */
static bool
continued(const char *s)
{
	return s[0] == '\\' && s[1] == '\n';
}

/* Skip blanks, continued lines and (with SHELLWORDS_COMMENTS) comments. */
static const char *
skip_blanks(const char *s, unsigned flags)
{
	for (;;) {
		if (isspace((unsigned char)*s))
			s++;
		else if (continued(s))
			s += 2;
		else if (*s == '#' && (flags & SHELLWORDS_COMMENTS)) {
			while (*s != '\0' && *s != '\n')
				s++;
		} else
			return s;
	}
}

/*
 * Read one word starting at *sp into w (large enough for the rest of the
 * input: shellwords_split's one scratch buffer); returns false for an
 * unterminated quote.
 */
static bool
read_word(const char **sp, char *w)
{
	const char	*s = *sp;
	size_t		 len = 0;
	char		 quote = '\0';

	for (; *s != '\0'; s++) {
		if (quote == '\'') {
			if (*s == '\'')
				quote = '\0';
			else
				w[len++] = *s;
		} else if (continued(s))
			s++;
		else if (quote == '"') {
			if (*s == '"')
				quote = '\0';
			else if (*s == '\\' && (s[1] == '"' || s[1] == '\\' ||
			    s[1] == '$'))
				w[len++] = *++s;
			else
				w[len++] = *s;
		} else if (*s == '\'' || *s == '"')
			quote = *s;
		else if (*s == '\\' && s[1] != '\0')
			w[len++] = *++s;
		else if (isspace((unsigned char)*s))
			break;
		else
			w[len++] = *s;
	}
	w[len] = '\0';
	*sp = s;
	return quote == '\0';
}

/*
 * Each word is read into one scratch buffer as long as the input, then
 * copied at its own size.  A buffer of the rest of the input for every
 * word made a 1 MiB --args-file take 1.2 GB and its strlen() calls
 * quadratic time (issue 26).
 */
char **
shellwords_split(const char *s, unsigned flags, size_t *nwords)
{
	char	**words, *scratch;
	size_t	 n = 0, cap = 8;

	words = xreallocarray(NULL, cap, sizeof(*words));
	words[0] = NULL;
	scratch = xmalloc(strlen(s) + 1);
	for (;;) {
		s = skip_blanks(s, flags);
		if (*s == '\0')
			break;
		if (!read_word(&s, scratch)) {
			free(scratch);
			shellwords_free(words, n);
			*nwords = 0;
			return NULL;
		}
		if (n + 2 > cap) {
			cap *= 2;
			words = xreallocarray(words, cap, sizeof(*words));
		}
		words[n++] = xstrdup(scratch);
		words[n] = NULL;
	}
	free(scratch);
	*nwords = n;
	return words;
}

size_t
shellwords_command_len(const char *s)
{
	const char	*p;
	char		 quote = '\0';

	for (p = s; *p != '\0'; p++) {
		if (quote == '\'') {
			if (*p == '\'')
				quote = '\0';
		} else if (*p == '\\' && p[1] != '\0')
			p++;
		else if (quote == '"') {
			if (*p == '"')
				quote = '\0';
		} else if (*p == '\'' || *p == '"')
			quote = *p;
		else if (*p == '&' && p > s && (p[-1] == '>' || p[-1] == '<'))
			continue;
		else if (strchr(";&|\n", *p) != NULL)
			break;
	}
	return (size_t)(p - s);
}

void
shellwords_free(char **words, size_t n)
{
	size_t	 i;

	if (words == NULL)
		return;
	for (i = 0; i < n; i++)
		free(words[i]);
	free(words);
}

char *
shellwords_quote(const char *w)
{
	const char	*p;
	char		*out, *o;
	size_t		 quotes = 0;
	bool		 plain = *w != '\0';

	for (p = w; *p != '\0'; p++) {
		if (!isalnum((unsigned char)*p) && strchr("-_./=:,+@%", *p) == NULL)
			plain = false;
		quotes += *p == '\'';
	}
	if (plain)
		return xstrdup(w);
	out = o = xmalloc(strlen(w) + 3 * quotes + 3);
	*o++ = '\'';
	for (p = w; *p != '\0'; p++) {
		if (*p == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else
			*o++ = *p;
	}
	*o++ = '\'';
	*o = '\0';
	return out;
}
