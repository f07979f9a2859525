/*
 * A bump allocator for values that live as long as one audit: symbolic
 * expressions are immutable and shared between the ranks of a group, so they
 * are never freed one by one, only all at once with the audit.
 */
#ifndef GRADAUDIT_ARENA_H
#define GRADAUDIT_ARENA_H

#include <stddef.h>

struct arena_block;

struct arena {
	struct arena_block	*head;
	size_t			 used_bytes;	/* for the benchmark's memory figure */
};

void	 arena_init(struct arena *);
void	*arena_alloc(struct arena *, size_t);	/* zeroed, 16-byte aligned */
char	*arena_strdup(struct arena *, const char *);
/*
 * Give back p, allocated with arena_alloc(a, n), when nothing was allocated
 * after it; otherwise do nothing.  For a value built only to find an equal
 * one already there.
 */
void	 arena_unalloc(struct arena *, void *p, size_t n);
void	 arena_free(struct arena *);

#endif
