/*
 * The region hash of SPEC section 8: XXH3-64 (seed 0) over the
 * little-endian bytes of the values, whatever the host's byte order, so
 * that hashes printed on different machines can be compared.
 *
 * The streaming form hashes a region that is not contiguous in memory (a
 * row-major slice of a sharded matrix, say) piece by piece, with the same
 * result as one call over the concatenated values.
 */
#ifndef GRADAUDIT_HASH_H
#define GRADAUDIT_HASH_H

#include <stddef.h>
#include <stdint.h>

#include <xxhash.h>

uint64_t	 hash_u64s(const uint64_t *, size_t n);
uint64_t	 hash_bytes(const void *, size_t len);	/* as they are */
uint64_t	 hash_doubles(const double *, size_t n);	/* IEEE bytes */
uint64_t	 hash_floats(const float *, size_t n);		/* IEEE bytes */
/* 16 lowercase hex digits and a NUL. */
void		 hash_hex(uint64_t, char buf[17]);

struct hash_state {
	XXH3_state_t	*xxh;	/* heap-allocated: the layout is xxHash's */
};

void		 hash_begin(struct hash_state *);
void		 hash_update_u64s(struct hash_state *, const uint64_t *,
		    size_t n);
void		 hash_update_doubles(struct hash_state *, const double *,
		    size_t n);
void		 hash_update_floats(struct hash_state *, const float *,
		    size_t n);
/* The digest; releases the state (hash_begin() again to reuse it). */
uint64_t	 hash_end(struct hash_state *);

#endif
