/*
 * What the deterministic TAP fuzzers (tests/fuzz-*.c) share: a seeded
 * xorshift64* generator, so that a run is the same every time, and a
 * growable text to mutate (fuzz-text.c).
 */
#ifndef GRADAUDIT_FUZZ_TEXT_H
#define GRADAUDIT_FUZZ_TEXT_H

#include <stddef.h>
#include <stdint.h>

struct text {
	char	*s;
	size_t	 len, cap;
};

/* Start the generator again from seed (the default: 0x9e3779b97f4a7c15). */
void		 fuzz_seed(uint64_t seed);
uint64_t	 rng(void);
/* A number in [0, n), 0 for n = 0. */
size_t		 pick(size_t n);
/* Insert s[0..n) at byte at; delete n bytes at at (no more than there are). */
void		 text_insert(struct text *, size_t at, const char *s, size_t n);
void		 text_delete(struct text *, size_t at, size_t n);

/*
 * The mutations every line-oriented fuzzer makes (a TOML file, a command
 * line of one word a line): flip one bit; delete 1 to most bytes; copy
 * a line to anywhere; move a line before another.
 */
void		 text_flip_bit(struct text *);
void		 text_delete_some(struct text *, size_t most);
void		 text_repeat_line(struct text *);
void		 text_move_line(struct text *);

#endif
