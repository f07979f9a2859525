/*
 * The nearest valid word to a misspelt one (suggest.h).  config.c had its
 * own Levenshtein distance for unknown keys; commands, options and
 * parameter names got no suggestion at all (issue 10), so the distance and
 * the choice live here, once.  A swap of two neighbouring letters counts as
 * one edit: "ehck" is one from "check", as a typist would expect.
 */
#include <limits.h>
#include <string.h>

#include "base/suggest.h"

int
suggest_distance(const char *a, size_t la, const char *b, size_t lb)
{
	int	 d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
	int	 cost, v;
	size_t	 i, j;

	if (la > SUGGEST_MAX_LEN || lb > SUGGEST_MAX_LEN)
		return INT_MAX;
	for (i = 0; i <= la; i++)
		d[i][0] = (int)i;
	for (j = 0; j <= lb; j++)
		d[0][j] = (int)j;
	for (i = 1; i <= la; i++)
		for (j = 1; j <= lb; j++) {
			cost = a[i - 1] == b[j - 1] ? 0 : 1;
			v = d[i - 1][j - 1] + cost;
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[la][lb];
}

void
suggest_init(struct suggestion *s, const char *word, size_t len)
{
	memset(s, 0, sizeof *s);
	s->word = word;
	s->len = len;
	s->distance = INT_MAX;
}

void
suggest_consider(struct suggestion *s, const char *candidate)
{
	size_t	 len = strlen(candidate), prefix;
	int	 d;

	d = suggest_distance(s->word, s->len, candidate, len);
	/* Two edits of a two-letter word would suggest any two letters. */
	if (d > SUGGEST_MAX_EDITS || d >= (int)s->len || d > s->distance)
		return;
	for (prefix = 0; prefix < s->len && prefix < len &&
	    s->word[prefix] == candidate[prefix]; prefix++)
		continue;
	if (d < s->distance || prefix > s->prefix) {
		s->best = candidate;
		s->distance = d;
		s->prefix = prefix;
	}
}

const char *
suggest_best(const struct suggestion *s)
{
	return s->best;
}
