/*
 * The arena of arena.h: memory is taken from the system in large zeroed
 * blocks and handed out by bumping an offset, so the symbolic audit's many
 * small immutable values cost one pointer increment each and are released
 * together by arena_free().
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"

#define ARENA_ALIGN		16
/*
 * Blocks start small and double up to a megabyte: a sweep builds thousands
 * of small audits, and a fresh megabyte for each one costs the kernel more
 * in page clearing than the audit itself.
 */
#define ARENA_FIRST_BLOCK	((size_t)16 << 10)
#define ARENA_BLOCK_SIZE	((size_t)1 << 20)

/*
 * A request larger than this gets a block of its own: carving it out of a
 * standard block would waste most of the block's remaining space.
 */
#define ARENA_BIG_REQUEST	(ARENA_BLOCK_SIZE / 4)

/*
 * Bytes of freed standard blocks an arena_cache (arena.h) keeps: enough for
 * a sweep point's audit and its segment arenas.
 */
#define ARENA_CACHE_BYTES	((size_t)8 << 20)

struct arena_block {
	struct arena_block	*next;
	size_t			 size;	/* bytes in data[] */
	size_t			 used;	/* bytes of data[] handed out */
	/*
	 * data[] follows the header.  The alignment of each allocation is
	 * computed from its address, so nothing relies on what malloc()
	 * guarantees about the block itself.
	 */
};

static unsigned char *
block_data(struct arena_block *b)
{
	return (unsigned char *)(b + 1);
}

/* Bytes to add to p to reach the next ARENA_ALIGN boundary. */
static size_t
align_gap(const unsigned char *p)
{
	return (size_t)(-(uintptr_t)p & (ARENA_ALIGN - 1));
}

/* The bin of a standard block size, or -1. */
static int
cache_bin(size_t size)
{
	int	i;

	for (i = 0; i < ARENA_CACHE_BINS; i++)
		if (size == ARENA_FIRST_BLOCK << i)
			return i;
	return -1;
}

static struct arena_block *
block_new(struct arena_cache *cache, size_t size)
{
	struct arena_block	*b;
	int			 bin = cache_bin(size);

	if (cache != NULL && bin >= 0 && (b = cache->bin[bin]) != NULL) {
		cache->bin[bin] = b->next;
		cache->bytes -= size;
		b->used = 0;
		b->next = NULL;
		return b;
	}
	if (size > SIZE_MAX - sizeof(*b))
		fatalx("arena block of %zu bytes overflows", size);
	/* calloc, not malloc: every allocation is promised zeroed. */
	b = xcalloc(1, sizeof(*b) + size);
	b->size = size;
	b->used = 0;
	b->next = NULL;
	return b;
}

void
arena_cache_init(struct arena_cache *c)
{
	memset(c, 0, sizeof *c);
}

void
arena_cache_free(struct arena_cache *c)
{
	struct arena_block	*b, *next;
	int			 i;

	for (i = 0; i < ARENA_CACHE_BINS; i++)
		for (b = c->bin[i]; b != NULL; b = next) {
			next = b->next;
			free(b);
		}
	arena_cache_init(c);
}

void
arena_init_cached(struct arena *a, struct arena_cache *c)
{
	a->head = NULL;
	a->used_bytes = 0;
	a->cache = c;
}

void
arena_init(struct arena *a)
{
	arena_init_cached(a, NULL);
}

void *
arena_alloc(struct arena *a, size_t n)
{
	struct arena_block	*b;
	unsigned char		*p;
	size_t			 gap;

	if (n == 0)
		n = 1;
	if (n > SIZE_MAX - 2 * ARENA_ALIGN)
		fatalx("arena allocation of %zu bytes overflows", n);
	/* Round up so that used_bytes counts what is really consumed. */
	n = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);

	b = a->head;
	if (b != NULL) {
		p = block_data(b) + b->used;
		gap = align_gap(p);
		if (gap <= b->size - b->used && n <= b->size - b->used - gap) {
			b->used += gap + n;
			a->used_bytes += n;
			return p + gap;
		}
	}

	if (n > ARENA_BIG_REQUEST) {
		/*
		 * A dedicated block goes behind the head, so that the head's
		 * free space stays available for the small requests that
		 * follow.
		 */
		b = block_new(a->cache, n + ARENA_ALIGN);
		if (a->head != NULL) {
			b->next = a->head->next;
			a->head->next = b;
		} else
			a->head = b;
	} else {
		size_t size = ARENA_FIRST_BLOCK;

		/*
		 * Double the standard block before, not a big request's
		 * own block at the head (the arena's first request): the
		 * segment arenas of a 131,072-rank audit open with one and
		 * took a megabyte each for their next hundred kilobytes.
		 */
		if (a->head != NULL && cache_bin(a->head->size) >= 0)
			size = a->head->size >= ARENA_BLOCK_SIZE / 2 ?
			    ARENA_BLOCK_SIZE : 2 * a->head->size;
		while (size < n + ARENA_ALIGN)
			size *= 2;
		b = block_new(a->cache, size);
		b->next = a->head;
		a->head = b;
	}
	p = block_data(b);
	gap = align_gap(p);
	b->used = gap + n;
	a->used_bytes += n;
	return p + gap;
}

void
arena_unalloc(struct arena *a, void *p, size_t n)
{
	struct arena_block	*b = a->head, *big;
	unsigned char		*q = p;

	if (b == NULL)
		return;
	if (n == 0)
		n = 1;
	n = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	if (q + n == block_data(b) + b->used && q >= block_data(b)) {
		/* The zeroed promise: clear what the next request gets. */
		memset(q, 0, n);
		b->used = (size_t)(q - block_data(b));
		a->used_bytes -= n;
		return;
	}
	/* A big request got a block of its own behind the head. */
	big = b->next;
	if (big != NULL && n > ARENA_BIG_REQUEST &&
	    q == block_data(big) + align_gap(block_data(big)) &&
	    big->used == align_gap(block_data(big)) + n) {
		b->next = big->next;
		free(big);
		a->used_bytes -= n;
	}
}

char *
arena_strdup(struct arena *a, const char *s)
{
	size_t	 len = strlen(s);
	char	*p;

	p = arena_alloc(a, len + 1);
	memcpy(p, s, len + 1);
	return p;
}

void
arena_free(struct arena *a)
{
	struct arena_cache	*cache = a->cache;
	struct arena_block	*b, *next;

	for (b = a->head; b != NULL; b = next) {
		int bin = cache_bin(b->size);

		next = b->next;
		if (cache == NULL || bin < 0 ||
		    cache->bytes + b->size > ARENA_CACHE_BYTES) {
			free(b);
			continue;
		}
		memset(block_data(b), 0, b->used);
		b->next = cache->bin[bin];
		cache->bin[bin] = b;
		cache->bytes += b->size;
	}
	a->head = NULL;
	a->used_bytes = 0;
}
