/*
 * The TAP fuzzers' generator and mutable text (fuzz-text.h).  The state is
 * the test program's own: each fuzzer is a process of its own.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "fuzz-text.h"

static uint64_t	 rng_state = 0x9e3779b97f4a7c15ULL;

void
fuzz_seed(uint64_t seed)
{
	rng_state = seed;
}

uint64_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

size_t
pick(size_t n)
{
	return n == 0 ? 0 : (size_t)(rng() % n);
}

void
text_insert(struct text *t, size_t at, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		t->cap = (t->len + n + 1) * 2;
		t->s = xreallocarray(t->s, t->cap, 1);
	}
	memmove(t->s + at + n, t->s + at, t->len - at);
	memcpy(t->s + at, s, n);
	t->len += n;
}

void
text_delete(struct text *t, size_t at, size_t n)
{
	if (at >= t->len)
		return;
	if (n > t->len - at)
		n = t->len - at;
	memmove(t->s + at, t->s + at + n, t->len - at - n);
	t->len -= n;
}

void
text_flip_bit(struct text *t)
{
	if (t->len > 0)
		t->s[pick(t->len)] ^= (char)(1 << pick(8));
}

void
text_delete_some(struct text *t, size_t most)
{
	text_delete(t, pick(t->len), 1 + pick(most));
}

/* Start and length of the line holding byte at, its newline included. */
static void
line_at(const struct text *t, size_t at, size_t *start, size_t *len)
{
	size_t	 s = at, e = at;

	while (s > 0 && t->s[s - 1] != '\n')
		s--;
	while (e < t->len && t->s[e] != '\n')
		e++;
	*start = s;
	*len = e < t->len ? e - s + 1 : e - s;
}

void
text_repeat_line(struct text *t)
{
	size_t	 start, len;
	char	*copy;

	if (t->len == 0)
		return;
	line_at(t, pick(t->len), &start, &len);
	copy = xmalloc(len + 1);
	memcpy(copy, t->s + start, len);
	text_insert(t, pick(t->len + 1), copy, len);
	free(copy);
}

void
text_move_line(struct text *t)
{
	size_t	 start, len, at, skip;
	char	*copy;

	if (t->len == 0)
		return;
	line_at(t, pick(t->len), &start, &len);
	copy = xmalloc(len + 1);
	memcpy(copy, t->s + start, len);
	text_delete(t, start, len);
	/* Before another line: where it starts, not its length. */
	line_at(t, pick(t->len + 1), &at, &skip);
	text_insert(t, at, copy, len);
	free(copy);
}
