/*
 * User text quoted back in diagnostics and reports.  A config file, a --set
 * value or a file name can hold anything: kilobytes, control characters
 * that drive the terminal, bytes that are no UTF-8.  Every message shows
 * such text through these functions, so that it stays one readable line.
 */
#ifndef GRADAUDIT_TEXT_H
#define GRADAUDIT_TEXT_H

#include <stddef.h>

/* The most characters of one piece of input a message quotes. */
#define TEXT_QUOTE_MAX	40
/* Room for text_escape() and text_cut(): 4 bytes a character, "...", NUL. */
#define TEXT_QUOTE_SIZE	(TEXT_QUOTE_MAX * 4 + 4)

/*
 * s[0..len) for a message, into buf: control characters and bytes that
 * are not UTF-8 as \xNN (\n and \t as such), cut after TEXT_QUOTE_MAX
 * characters with "...".  text_escape() also escapes '"' and '\', for text
 * shown between quotes.
 */
void	 text_escape(char *buf, size_t size, const void *s, size_t len);
void	 text_cut(char *buf, size_t size, const void *s, size_t len);

/* A copy of s, whole, with what text_cut() escapes escaped; xmalloc'd. */
char	*text_visible(const char *s);
/*
 * The message in buf (size bytes) made visible in place, as text_visible()
 * shows it, cut to fit: for messages that quote a file's names and keys.
 */
void	 text_make_visible(char *buf, size_t size);

/*
 * The bytes of the printable character at s (len > 0 bytes left), or 0
 * for a control character or a byte that starts no valid UTF-8 sequence.
 */
size_t	 text_char_len(const void *s, size_t len);

/* The characters of s[0..len): its columns, a byte that is no UTF-8 one. */
size_t	 text_columns(const void *s, size_t len);

#endif
