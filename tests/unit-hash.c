/*
 * TAP unit test of hash.c: the region hash must be XXH3-64 of the values'
 * little-endian bytes (SPEC section 8), so it is compared with XXH3_64bits
 * over byte arrays written out by hand; the streaming form must agree with
 * the one-shot form however the values are split.  Built once natively and
 * once with -DHASH_PORTABLE, this covers both paths of hash.c.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "base/hash.h"
#include "tap.h"

static void
test_known_inputs(void)
{
	static const uint64_t	 u[] = { UINT64_C(0x0102030405060708), 0,
				     UINT64_MAX, 42 };
	static const unsigned char ub[] = {
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	/* 1.0 = 0x3ff0000000000000, -2.5 = 0xc004000000000000 */
	static const double	 d[] = { 1.0, -2.5 };
	static const unsigned char db[] = {
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xc0,
	};
	/* 1.0f = 0x3f800000, -2.5f = 0xc0200000, 0.0f */
	static const float	 f[] = { 1.0f, -2.5f, 0.0f };
	static const unsigned char fb[] = {
		0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0,
		0x00, 0x00, 0x00, 0x00,
	};

	tap_ok(hash_u64s(u, 4) == XXH3_64bits(ub, sizeof(ub)),
	    "u64s hash the little-endian bytes");
	tap_ok(hash_u64s(u, 1) == XXH3_64bits(ub, 8), "a single u64");
	tap_ok(hash_u64s(u, 4) != hash_u64s(u, 3), "length matters");
	tap_ok(hash_doubles(d, 2) == XXH3_64bits(db, sizeof(db)),
	    "doubles hash their IEEE little-endian bytes");
	tap_ok(hash_floats(f, 3) == XXH3_64bits(fb, sizeof(fb)),
	    "floats hash their IEEE little-endian bytes");
	/* XXH3-64 of no bytes, seed 0: a published test vector. */
	tap_ok(hash_u64s(NULL, 0) == UINT64_C(0x2d06800538d394c2),
	    "empty region is XXH3-64 of nothing");
	tap_ok(hash_doubles(NULL, 0) == hash_floats(NULL, 0),
	    "empty regions agree whatever the type");
}

static void
test_streaming(void)
{
	enum { N = 5000 };	/* several of hash.c's conversion chunks */
	uint64_t		*u;
	double			*d;
	float			*f;
	unsigned char		*bytes;
	struct hash_state	 hs;
	size_t			 i, k, cuts[] = { 0, 1, 7, 300, 301, 2048, N };
	uint64_t		 x = 1;

	u = calloc(N, sizeof(*u));
	d = calloc(N, sizeof(*d));
	f = calloc(N, sizeof(*f));
	bytes = calloc(N, 8);
	if (u == NULL || d == NULL || f == NULL || bytes == NULL)
		abort();
	for (i = 0; i < N; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		u[i] = x;
		d[i] = (double)(int64_t)x / 3.0;
		f[i] = (float)d[i];
		for (k = 0; k < 8; k++)
			bytes[i * 8 + k] = (unsigned char)(x >> (8 * k));
	}
	tap_ok(hash_u64s(u, N) == XXH3_64bits(bytes, (size_t)N * 8),
	    "%d u64s equal XXH3 over hand-built bytes", N);

	hash_begin(&hs);
	for (k = 0; k + 1 < sizeof(cuts) / sizeof(cuts[0]); k++)
		hash_update_u64s(&hs, u + cuts[k], cuts[k + 1] - cuts[k]);
	tap_ok(hash_end(&hs) == hash_u64s(u, N),
	    "u64s in pieces equal one call");

	hash_begin(&hs);
	for (k = 0; k + 1 < sizeof(cuts) / sizeof(cuts[0]); k++)
		hash_update_doubles(&hs, d + cuts[k], cuts[k + 1] - cuts[k]);
	tap_ok(hash_end(&hs) == hash_doubles(d, N),
	    "doubles in pieces equal one call");

	hash_begin(&hs);
	for (k = 0; k + 1 < sizeof(cuts) / sizeof(cuts[0]); k++)
		hash_update_floats(&hs, f + cuts[k], cuts[k + 1] - cuts[k]);
	tap_ok(hash_end(&hs) == hash_floats(f, N),
	    "floats in pieces equal one call");

	hash_begin(&hs);
	for (i = 0; i < N; i++)
		hash_update_floats(&hs, f + i, 1);
	tap_ok(hash_end(&hs) == hash_floats(f, N),
	    "floats one at a time equal one call");

	/* Same bytes, whatever the type they were handed in as. */
	memcpy(d, u, N * sizeof(*u));
	hash_begin(&hs);
	hash_update_u64s(&hs, u, 10);
	hash_update_doubles(&hs, d + 10, N - 10);
	tap_ok(hash_end(&hs) == hash_u64s(u, N),
	    "mixed u64 and double pieces of the same bits agree");

	hash_begin(&hs);
	tap_ok(hash_end(&hs) == hash_u64s(NULL, 0), "empty stream");

	tap_ok(hash_u64s(u, N) != hash_u64s(u + 1, N - 1) &&
	    hash_floats(f, N) != hash_floats(f, N - 1),
	    "different regions hash differently");
	free(u);
	free(d);
	free(f);
	free(bytes);
}

static void
test_hex(void)
{
	char	 buf[17], ref[17];
	uint64_t h;

	hash_hex(UINT64_C(0x0123456789abcdef), buf);
	tap_ok(strcmp(buf, "0123456789abcdef") == 0,
	    "hex of 0x0123456789abcdef");
	hash_hex(0, buf);
	tap_ok(strcmp(buf, "0000000000000000") == 0,
	    "hex of 0 keeps 16 digits");
	hash_hex(UINT64_MAX, buf);
	tap_ok(strcmp(buf, "ffffffffffffffff") == 0, "hex of all ones");
	h = hash_u64s(NULL, 0);
	hash_hex(h, buf);
	snprintf(ref, sizeof(ref), "%016" PRIx64, h);
	tap_ok(strcmp(buf, ref) == 0 && strcmp(buf, "2d06800538d394c2") == 0,
	    "hex of the empty hash");
}

int
main(void)
{
	test_known_inputs();
	test_streaming();
	test_hex();
	return tap_done();
}
