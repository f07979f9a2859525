/*
 * Making user text safe to print (text.h): a character is a valid UTF-8
 * sequence other than a control character; everything else is shown as
 * \xNN, byte by byte.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "base/xmalloc.h"

/*
 * The length of the printable UTF-8 character at s (len bytes left), or 0
 * for a control character (C0, DEL, C1) or a byte that starts no valid
 * sequence: overlong forms, surrogates and code points past U+10FFFF are
 * not UTF-8.
 */
static size_t
char_len(const unsigned char *s, size_t len)
{
	unsigned char	 lo = 0x80, hi = 0xbf;
	size_t		 n, i;

	if (s[0] < 0x80)
		return s[0] < 0x20 || s[0] == 0x7f ? 0 : 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		if (s[0] == 0xe0)
			lo = 0xa0;
		else if (s[0] == 0xed)
			hi = 0x9f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		if (s[0] == 0xf0)
			lo = 0x90;
		else if (s[0] == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (n > len || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	/* U+0080..U+009F are the C1 controls. */
	if (s[0] == 0xc2 && s[1] < 0xa0)
		return 0;
	return n;
}

size_t
text_char_len(const void *s, size_t len)
{
	return len > 0 ? char_len(s, len) : 0;
}

/*
 * The visible form of one character at s into out (room for 4 bytes);
 * returns the input bytes it took, and the output length in *olen.
 */
static size_t
visible_char(const unsigned char *s, size_t len, bool quotes, char *out,
    size_t *olen)
{
	size_t	 n = char_len(s, len);

	if (quotes && (s[0] == '"' || s[0] == '\\')) {
		out[0] = '\\';
		out[1] = (char)s[0];
		*olen = 2;
		return 1;
	}
	if (n > 0) {
		memcpy(out, s, n);
		*olen = n;
		return n;
	}
	if (s[0] == '\n' || s[0] == '\t') {
		out[0] = '\\';
		out[1] = s[0] == '\n' ? 'n' : 't';
		*olen = 2;
		return 1;
	}
	snprintf(out, 5, "\\x%02x", s[0]);
	*olen = 4;
	return 1;
}

static void
quote_into(char *buf, size_t size, const unsigned char *s, size_t len,
    bool quotes)
{
	size_t	 i = 0, o = 0, chars = 0, olen;
	char	 one[5];

	if (size == 0)
		return;
	while (i < len && chars < TEXT_QUOTE_MAX) {
		i += visible_char(s + i, len - i, quotes, one, &olen);
		if (o + olen >= size)
			break;
		memcpy(buf + o, one, olen);
		o += olen;
		chars++;
	}
	if (i < len && o + 3 < size) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
}

void
text_escape(char *buf, size_t size, const void *s, size_t len)
{
	quote_into(buf, size, s, len, true);
}

void
text_cut(char *buf, size_t size, const void *s, size_t len)
{
	quote_into(buf, size, s, len, false);
}

char *
text_visible(const char *s)
{
	const unsigned char	*p = (const unsigned char *)s;
	size_t			 len = strlen(s), i = 0, o = 0, olen;
	char			*out;

	out = xreallocarray(NULL, len + 1, 4);
	while (i < len) {
		i += visible_char(p + i, len - i, false, out + o, &olen);
		o += olen;
	}
	out[o] = '\0';
	return out;
}

void
text_make_visible(char *buf, size_t size)
{
	char	*v;

	if (size == 0)
		return;
	v = text_visible(buf);
	snprintf(buf, size, "%s", v);
	free(v);
}

size_t
text_columns(const void *s, size_t len)
{
	const unsigned char	*p = s;
	size_t			 i = 0, n, cols = 0;

	while (i < len) {
		n = char_len(p + i, len - i);
		i += n > 0 ? n : 1;
		cols++;
	}
	return cols;
}
