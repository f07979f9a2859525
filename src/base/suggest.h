/*
 * "Did you mean ...?" for a misspelt word: a command, an option, a
 * configuration key or a parameter name.  The caller offers every word
 * valid where the bad one was given and asks for the nearest: within two
 * edits (a swap of two neighbours is one), never a complete rewrite of a
 * short word, and of equally near ones the first that starts alike.
 *
 *	struct suggestion s;
 *
 *	suggest_init(&s, word, strlen(word));
 *	for (each valid name)
 *		suggest_consider(&s, name);
 *	if (suggest_best(&s) != NULL)
 *		... "did you mean \"%s\"?", suggest_best(&s) ...
 */
#ifndef GRADAUDIT_SUGGEST_H
#define GRADAUDIT_SUGGEST_H

#include <stddef.h>

struct suggestion {
	const char	*word;		/* what was given; not a C string */
	size_t		 len;
	const char	*best;		/* the nearest candidate so far */
	int		 distance;	/* and its distance */
	size_t		 prefix;	/* and what it shares at the start */
};

void		 suggest_init(struct suggestion *, const char *word,
		    size_t len);
void		 suggest_consider(struct suggestion *, const char *candidate);
/* The nearest candidate close enough, else NULL. */
const char	*suggest_best(const struct suggestion *);
/* The edit distance (Damerau, optimal string alignment); INT_MAX when
 * either string is longer than SUGGEST_MAX_LEN. */
int		 suggest_distance(const char *a, size_t la, const char *b,
		    size_t lb);

#define SUGGEST_MAX_LEN		64
#define SUGGEST_MAX_EDITS	2

#endif
