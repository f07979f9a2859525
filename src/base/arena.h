/*
 * A bump allocator for values that live as long as one audit: symbolic
 * expressions are immutable and shared between the ranks of a group, so they
 * are never freed one by one, only all at once with the audit.
 */
#ifndef GRADAUDIT_ARENA_H
#define GRADAUDIT_ARENA_H

#include <stddef.h>

struct arena_block;

/*
 * Freed standard blocks (16 KiB to 1 MiB) kept for the next arena, zeroed
 * again over the part that was used: a sweep builds an audit, and its
 * parameters' segment arenas, thousands of times a second, and fresh
 * blocks from calloc cost more in page faults than the audits themselves
 * (issue 10).  A named object, not a file static (STYLE.md: no
 * process-wide mutable state): whoever makes arenas in a loop (check's
 * batch, sweep and each of its fork()ed workers, shrink's search, the
 * text report's tables) owns one, hands it to the arenas it makes with
 * arena_init_cached (an audit's, through sym_context.blocks), and frees
 * it with arena_cache_free after the last of them is freed.  A sweep
 * worker makes its own after fork(): nothing relies on one being reset.
 */
#define ARENA_CACHE_BINS	7	/* 16 KiB, 32 KiB, ... 1 MiB */

struct arena_cache {
	struct arena_block	*bin[ARENA_CACHE_BINS];
	size_t			 bytes;
};

struct arena {
	struct arena_block	*head;
	size_t			 used_bytes;	/* for the benchmark's memory figure */
	struct arena_cache	*cache;		/* NULL: blocks are free()d */
};

void	 arena_cache_init(struct arena_cache *);
/* Free the blocks kept; every arena given the cache must be freed first. */
void	 arena_cache_free(struct arena_cache *);

/* An arena of no cache, or of cache c (NULL: none), for its whole life. */
void	 arena_init(struct arena *);
void	 arena_init_cached(struct arena *, struct arena_cache *c);
void	*arena_alloc(struct arena *, size_t);	/* zeroed, 16-byte aligned */
char	*arena_strdup(struct arena *, const char *);
/*
 * Give back p, allocated with arena_alloc(a, n), when nothing was allocated
 * after it; otherwise do nothing.  For a value built only to find an equal
 * one already there.
 */
void	 arena_unalloc(struct arena *, void *p, size_t n);
/* Free every block, into the arena's cache where it has room. */
void	 arena_free(struct arena *);

#endif
