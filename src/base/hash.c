/*
 * XXH3-64 over little-endian value bytes (hash.h).  On a little-endian
 * host the values already are those bytes and go to xxHash unchanged; on
 * any other host (or with -DHASH_PORTABLE, which the unit test uses to
 * exercise this path) they are converted a chunk at a time into a small
 * buffer, so no allocation grows with the region.
 */
#include <stdint.h>
#include <string.h>

#include "base/hash.h"
#include "base/xmalloc.h"

#if !defined(HASH_PORTABLE) && defined(__BYTE_ORDER__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HASH_NATIVE_LE	1
#else
#define HASH_NATIVE_LE	0
#endif

_Static_assert(sizeof(double) == 8, "double is not IEEE binary64");
_Static_assert(sizeof(float) == 4, "float is not IEEE binary32");

/* Values converted per round on the portable path. */
#define HASH_CHUNK	256

#if !HASH_NATIVE_LE
static void
put_le(unsigned char *p, uint64_t v, size_t width)
{
	size_t	 i;

	for (i = 0; i < width; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/*
 * Feed n values of width 4 or 8 bytes as little-endian bytes.  Floats and
 * doubles are read through memcpy into an integer of the same size, which
 * yields their IEEE bit pattern.
 */
static void
feed_portable(XXH3_state_t *st, const void *vals, size_t n, size_t width)
{
	unsigned char		 buf[HASH_CHUNK * 8];
	const unsigned char	*src = vals;
	uint64_t		 v;
	uint32_t		 v32;
	size_t			 i, m;

	while (n > 0) {
		m = n < HASH_CHUNK ? n : HASH_CHUNK;
		for (i = 0; i < m; i++) {
			if (width == 8)
				memcpy(&v, src + i * 8, 8);
			else {
				memcpy(&v32, src + i * 4, 4);
				v = v32;
			}
			put_le(buf + i * width, v, width);
		}
		if (XXH3_64bits_update(st, buf, m * width) != XXH_OK)
			fatalx("XXH3_64bits_update failed");
		src += m * width;
		n -= m;
	}
}
#endif

static void
feed(struct hash_state *hs, const void *vals, size_t n, size_t width)
{
	if (hs->xxh == NULL)
		fatalx("hash update without hash_begin");
	if (n == 0)
		return;
#if HASH_NATIVE_LE
	if (XXH3_64bits_update(hs->xxh, vals, n * width) != XXH_OK)
		fatalx("XXH3_64bits_update failed");
#else
	feed_portable(hs->xxh, vals, n, width);
#endif
}

void
hash_begin(struct hash_state *hs)
{
	if ((hs->xxh = XXH3_createState()) == NULL)
		fatal("XXH3_createState");
	if (XXH3_64bits_reset(hs->xxh) != XXH_OK)
		fatalx("XXH3_64bits_reset failed");
}

void
hash_update_u64s(struct hash_state *hs, const uint64_t *v, size_t n)
{
	feed(hs, v, n, sizeof(*v));
}

void
hash_update_doubles(struct hash_state *hs, const double *v, size_t n)
{
	feed(hs, v, n, sizeof(*v));
}

void
hash_update_floats(struct hash_state *hs, const float *v, size_t n)
{
	feed(hs, v, n, sizeof(*v));
}

uint64_t
hash_end(struct hash_state *hs)
{
	uint64_t	 h;

	if (hs->xxh == NULL)
		fatalx("hash_end without hash_begin");
	h = XXH3_64bits_digest(hs->xxh);
	XXH3_freeState(hs->xxh);
	hs->xxh = NULL;
	return h;
}

/*
 * One-shot hashes.  The native path avoids the streaming state entirely:
 * this is called once per region per rank.
 */
static uint64_t
hash_values(const void *vals, size_t n, size_t width)
{
#if HASH_NATIVE_LE
	return XXH3_64bits(n == 0 ? "" : vals, n * width);
#else
	struct hash_state	 hs;

	hash_begin(&hs);
	feed(&hs, vals, n, width);
	return hash_end(&hs);
#endif
}

uint64_t
hash_bytes(const void *data, size_t len)
{
	return XXH3_64bits(len == 0 ? "" : data, len);
}

uint64_t
hash_u64s(const uint64_t *v, size_t n)
{
	return hash_values(v, n, sizeof(*v));
}

uint64_t
hash_doubles(const double *v, size_t n)
{
	return hash_values(v, n, sizeof(*v));
}

uint64_t
hash_floats(const float *v, size_t n)
{
	return hash_values(v, n, sizeof(*v));
}

void
hash_hex(uint64_t h, char buf[17])
{
	static const char	 digits[] = "0123456789abcdef";
	int			 i;

	for (i = 15; i >= 0; i--) {
		buf[i] = digits[h & 0xf];
		h >>= 4;
	}
	buf[16] = '\0';
}
