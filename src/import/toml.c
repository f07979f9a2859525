/*
 * The TOML reader of toml.h: one pass over the lines, keeping every table
 * and key defined so far in a hash table, so that a key given twice or a
 * table opened twice is refused where the second one starts (TOML 1.0,
 * "Keys", "Table").  Written for `gradaudit import torchtitan` (issue 28):
 * the subset is what torchtitan's train_configs use from v0.1.0 to v0.2.2,
 * and what TOML has beyond it is refused by name rather than half read.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "import/toml.h"

/* What a path names, for the rules on defining it again. */
enum node_kind {
	NODE_VALUE,		/* key = value */
	NODE_HEADER,		/* [a.b]: defined, may not be opened again */
	NODE_IMPLICIT,		/* a, of [a.b]: may be opened once */
	NODE_DOTTED		/* a, of a.b = 1: extended by dotted keys only */
};

struct node {
	char		*id;	/* the path, each key length-prefixed */
	enum node_kind	 kind;
	/* NODE_DOTTED: the table whose section created it (its header's id). */
	char		*owner;
};

struct parser {
	const char	*name;
	const char	*text;
	size_t		 len, pos;
	int		 line;
	size_t		 line_start;
	char		*err;
	size_t		 errsize;
	bool		 failed;
	struct toml_doc	*doc;
	/* The nodes: an open-addressing table of nnodes in nslots. */
	struct node	*nodes;
	size_t		 nnodes, nslots;
	/* The current table, [a.b]: its keys and id. */
	char		*table[TOML_MAX_DEPTH];
	size_t		 ntable;
	char		*table_id;
};

static void	fail_at(struct parser *, size_t pos, const char *, ...)
		    __attribute__((format(printf, 3, 4)));

/* The column of byte pos on its line, in characters from 1. */
static int
column_of(const struct parser *p, size_t pos)
{
	size_t	 i, start = p->line_start;
	int	 col = 1;

	/* A position on a later line than the one read (never), or before. */
	if (pos < start)
		start = pos;
	for (i = start; i < pos && i < p->len; i++)
		if (((unsigned char)p->text[i] & 0xc0) != 0x80)
			col++;
	return col;
}

static void
fail_at(struct parser *p, size_t pos, const char *fmt, ...)
{
	va_list	 ap;
	char	 msg[512];

	if (p->failed)
		return;
	p->failed = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(p->err, p->errsize, "%s:%d:%d: %s", p->name, p->line,
	    column_of(p, pos), msg);
}

static int
peek(const struct parser *p, size_t ahead)
{
	return p->pos + ahead < p->len ?
	    (unsigned char)p->text[p->pos + ahead] : -1;
}

/* The length of the UTF-8 sequence at i, or 0 when it is not one. */
static size_t
utf8_length(const unsigned char *s, size_t avail)
{
	uint32_t	 c;
	size_t		 n, k;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, c = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, c = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, c = s[0] & 0x07;
	else
		return 0;
	if (n > avail)
		return 0;
	for (k = 1; k < n; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[k] & 0x3f);
	}
	/* Overlong forms, surrogates and code points past U+10FFFF. */
	if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 ||
	    c > 0x10ffff)) || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return n;
}

/*
 * The whole text must be UTF-8 without NUL bytes, control characters
 * outside strings and comments' rules aside (those are checked where
 * they are read), and every CR must end a line with its LF: TOML 1.0.
 */
static void
check_encoding(struct parser *p)
{
	const unsigned char	*s = (const unsigned char *)p->text;
	size_t			 i = 0, n;

	while (i < p->len && !p->failed) {
		/* A NUL or a lone CR fails with n unread: one byte. */
		n = 1;
		if (s[i] == '\0')
			fail_at(p, i, "a NUL byte: not a TOML file");
		else if (s[i] == '\r' && (i + 1 >= p->len || s[i + 1] != '\n'))
			fail_at(p, i, "a carriage return not followed by a "
			    "line feed");
		else if ((n = utf8_length(s + i, p->len - i)) == 0)
			fail_at(p, i, "byte \\x%02X is not UTF-8", s[i]);
		else if (s[i] == '\n') {
			p->line++;
			p->line_start = i + 1;
		}
		i += n > 0 ? n : 1;
	}
	p->line = 1;
	p->line_start = 0;
}

/* A control character TOML allows in no string or comment. */
static bool
is_control(int c)
{
	return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f;
}

static bool
at_line_end(const struct parser *p)
{
	return p->pos >= p->len || peek(p, 0) == '\n' ||
	    (peek(p, 0) == '\r' && peek(p, 1) == '\n');
}

static void
skip_blanks(struct parser *p)
{
	while (peek(p, 0) == ' ' || peek(p, 0) == '\t')
		p->pos++;
}

/* A comment, to the end of its line (not past it). */
static void
skip_comment(struct parser *p)
{
	if (peek(p, 0) != '#')
		return;
	while (!at_line_end(p) && !p->failed) {
		if (is_control(peek(p, 0)))
			fail_at(p, p->pos, "control character U+%04X in a "
			    "comment", peek(p, 0));
		p->pos++;
	}
}

static void
next_line(struct parser *p)
{
	if (peek(p, 0) == '\r')
		p->pos++;
	if (peek(p, 0) == '\n')
		p->pos++;
	p->line++;
	p->line_start = p->pos;
}

/* Blanks, then a comment or nothing to the end of the line. */
static void
end_line(struct parser *p, const char *after)
{
	skip_blanks(p);
	skip_comment(p);
	if (!at_line_end(p))
		fail_at(p, p->pos, "%s must end its line (a comment may "
		    "follow)", after);
	else
		next_line(p);
}

static void
append_utf8(char *buf, size_t *n, uint32_t c)
{
	if (c < 0x80)
		buf[(*n)++] = (char)c;
	else if (c < 0x800) {
		buf[(*n)++] = (char)(0xc0 | c >> 6);
		buf[(*n)++] = (char)(0x80 | (c & 0x3f));
	} else if (c < 0x10000) {
		buf[(*n)++] = (char)(0xe0 | c >> 12);
		buf[(*n)++] = (char)(0x80 | (c >> 6 & 0x3f));
		buf[(*n)++] = (char)(0x80 | (c & 0x3f));
	} else {
		buf[(*n)++] = (char)(0xf0 | c >> 18);
		buf[(*n)++] = (char)(0x80 | (c >> 12 & 0x3f));
		buf[(*n)++] = (char)(0x80 | (c >> 6 & 0x3f));
		buf[(*n)++] = (char)(0x80 | (c & 0x3f));
	}
}

/* \uXXXX or \UXXXXXXXX after the backslash and the letter, at pos. */
static bool
read_unicode_escape(struct parser *p, size_t digits, uint32_t *c)
{
	size_t	 start = p->pos - 2, k;
	int	 d;

	*c = 0;
	for (k = 0; k < digits; k++) {
		d = peek(p, 0);
		if (d >= '0' && d <= '9')
			d -= '0';
		else if (d >= 'a' && d <= 'f')
			d -= 'a' - 10;
		else if (d >= 'A' && d <= 'F')
			d -= 'A' - 10;
		else {
			fail_at(p, start, "\\%c takes %zu hexadecimal digits",
			    digits == 4 ? 'u' : 'U', digits);
			return false;
		}
		*c = *c << 4 | (uint32_t)d;
		p->pos++;
	}
	if (*c > 0x10ffff || (*c >= 0xd800 && *c <= 0xdfff))
		fail_at(p, start, "\\%c%0*X is not a Unicode scalar value",
		    digits == 4 ? 'u' : 'U', (int)digits, *c);
	else if (*c == 0)
		fail_at(p, start, "\\u0000: a NUL in a string is refused");
	return !p->failed;
}

/*
 * A string on one line, at its opening quote: basic ("..." with escapes)
 * or literal ('...').  Returns it, or NULL after a message.
 */
static char *
read_string(struct parser *p)
{
	int	 quote = peek(p, 0), c;
	size_t	 start = p->pos, n = 0;
	char	*buf;
	uint32_t u;

	if (peek(p, 1) == quote && peek(p, 2) == quote) {
		fail_at(p, start, "multi-line strings (%c%c%c) are outside the "
		    "TOML subset gradaudit reads", quote, quote, quote);
		return NULL;
	}
	p->pos++;
	/* Escapes only shrink: \U0010FFFF's 10 bytes make 4. */
	buf = xmalloc(p->len - p->pos + 1);
	for (;;) {
		c = peek(p, 0);
		if (c == -1 || c == '\n' || c == '\r') {
			fail_at(p, start, "a string is not closed on its line");
			break;
		}
		if (c == quote) {
			p->pos++;
			buf[n] = '\0';
			return buf;
		}
		if (is_control(c)) {
			fail_at(p, p->pos, "control character U+%04X in a "
			    "string: write it as an escape", c);
			break;
		}
		p->pos++;
		if (c != '\\' || quote == '\'') {
			buf[n++] = (char)c;
			continue;
		}
		c = peek(p, 0);
		p->pos++;
		switch (c) {
		case 'b': buf[n++] = '\b'; continue;
		case 't': buf[n++] = '\t'; continue;
		case 'n': buf[n++] = '\n'; continue;
		case 'f': buf[n++] = '\f'; continue;
		case 'r': buf[n++] = '\r'; continue;
		case '"': buf[n++] = '"'; continue;
		case '\\': buf[n++] = '\\'; continue;
		case 'u':
		case 'U':
			if (!read_unicode_escape(p, c == 'u' ? 4 : 8, &u))
				break;
			append_utf8(buf, &n, u);
			continue;
		default:
			fail_at(p, p->pos - 2, "\\%c is no escape of TOML 1.0 "
			    "(\\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX "
			    "\\UXXXXXXXX)", c >= 0x20 && c < 0x7f ? c : '?');
		}
		break;
	}
	free(buf);
	return NULL;
}

static bool
is_bare_key_char(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/*
 * A key, dotted or not, up to the '=' or ']' (not read).  Fills keys and
 * returns their count, or 0 after a message.
 */
static size_t
read_key(struct parser *p, char **keys, size_t room, const char *what)
{
	size_t	 n = 0, start;
	int	 c;

	for (;;) {
		skip_blanks(p);
		c = peek(p, 0);
		start = p->pos;
		if (n == room) {
			fail_at(p, start, "keys nest deeper than %d levels",
			    TOML_MAX_DEPTH);
			break;
		}
		if (c == '"' || c == '\'') {
			if ((keys[n] = read_string(p)) == NULL)
				break;
			n++;
		} else if (is_bare_key_char(c)) {
			while (is_bare_key_char(peek(p, 0)))
				p->pos++;
			keys[n] = xmalloc(p->pos - start + 1);
			memcpy(keys[n], p->text + start, p->pos - start);
			keys[n++][p->pos - start] = '\0';
		} else {
			if (c == -1 || c == '\n' || c == '\r')
				fail_at(p, start, "%s ends before its key",
				    what);
			else
				fail_at(p, start, "'%c' cannot start a key "
				    "(bare keys are A-Z a-z 0-9 _ -; quote "
				    "others)", c >= 0x20 && c < 0x7f ? c : '?');
			break;
		}
		skip_blanks(p);
		if (peek(p, 0) != '.')
			return n;
		p->pos++;
	}
	while (n > 0)
		free(keys[--n]);
	return 0;
}

/* The id of a path: each key as its length, ':' and its bytes. */
static char *
path_id(char *const *keys, size_t n)
{
	char	*id, *more;
	size_t	 k;

	id = xstrdup("");
	for (k = 0; k < n; k++) {
		xasprintf(&more, "%s%zu:%s", id, strlen(keys[k]), keys[k]);
		free(id);
		id = more;
	}
	return id;
}

static size_t
slot_of(const struct parser *p, const char *id)
{
	size_t	 i = (size_t)hash_bytes(id, strlen(id)) & (p->nslots - 1);

	while (p->nodes[i].id != NULL && strcmp(p->nodes[i].id, id) != 0)
		i = (i + 1) & (p->nslots - 1);
	return i;
}

static struct node *
find_node(const struct parser *p, const char *id)
{
	size_t	 i;

	if (p->nslots == 0)
		return NULL;
	i = slot_of(p, id);
	return p->nodes[i].id != NULL ? &p->nodes[i] : NULL;
}

static struct node *
add_node(struct parser *p, const char *id, enum node_kind kind,
    const char *owner)
{
	struct node	*old = p->nodes;
	size_t		 i, oldslots = p->nslots;

	if (2 * (p->nnodes + 1) > p->nslots) {
		p->nslots = p->nslots == 0 ? 64 : 2 * p->nslots;
		p->nodes = xcalloc(p->nslots, sizeof(*p->nodes));
		for (i = 0; i < oldslots; i++)
			if (old[i].id != NULL)
				p->nodes[slot_of(p, old[i].id)] = old[i];
		free(old);
	}
	i = slot_of(p, id);
	p->nodes[i].id = xstrdup(id);
	p->nodes[i].kind = kind;
	p->nodes[i].owner = owner != NULL ? xstrdup(owner) : NULL;
	p->nnodes++;
	return &p->nodes[i];
}

/* "a.b" as the user wrote it, quotes aside, for messages. */
static char *
shown_path(char *const *keys, size_t n)
{
	char	*s, *more;
	size_t	 k;

	s = xstrdup("");
	for (k = 0; k < n; k++) {
		xasprintf(&more, "%s%s%s", s, k > 0 ? "." : "", keys[k]);
		free(s);
		s = more;
	}
	return s;
}

/*
 * [keys]: each table above it is made if new, and must be a table; the
 * table itself must be new, or made only by a header below it.
 */
static void
open_table(struct parser *p, char **keys, size_t n, size_t at)
{
	struct node	*node;
	char		*id, *shown;
	size_t		 k;

	for (k = 1; k <= n && !p->failed; k++) {
		id = path_id(keys, k);
		shown = shown_path(keys, k);
		node = find_node(p, id);
		if (node == NULL)
			add_node(p, id, k == n ? NODE_HEADER : NODE_IMPLICIT,
			    NULL);
		else if (node->kind == NODE_VALUE)
			fail_at(p, at, "%s is a value, not a table", shown);
		else if (k < n)
			;	/* a table above: [a] then [a.b] */
		else if (node->kind == NODE_HEADER)
			fail_at(p, at, "table [%s] is defined twice", shown);
		else if (node->kind == NODE_DOTTED)
			fail_at(p, at, "table [%s] was defined by dotted keys "
			    "already", shown);
		else
			node->kind = NODE_HEADER;
		free(shown);
		free(id);
	}
	for (k = 0; k < p->ntable; k++)
		free(p->table[k]);
	free(p->table_id);
	p->ntable = 0;
	for (k = 0; k < n; k++)
		p->table[p->ntable++] = keys[k];
	p->table_id = path_id(keys, n);
}

/*
 * key = value in the current table: the tables its dots make must be
 * new or made by dotted keys of this same table's section, and the key
 * itself new.
 */
static void
define_key(struct parser *p, char **path, size_t n, size_t at)
{
	struct node	*node;
	char		*id, *shown;
	size_t		 k;

	for (k = p->ntable + 1; k <= n && !p->failed; k++) {
		id = path_id(path, k);
		shown = shown_path(path, k);
		node = find_node(p, id);
		if (k == n && node != NULL)
			fail_at(p, at, "key %s is defined twice", shown);
		else if (k == n)
			add_node(p, id, NODE_VALUE, NULL);
		else if (node == NULL)
			add_node(p, id, NODE_DOTTED, p->table_id);
		else if (node->kind == NODE_VALUE)
			fail_at(p, at, "%s is a value, not a table", shown);
		else if (node->kind != NODE_DOTTED ||
		    strcmp(node->owner, p->table_id) != 0)
			fail_at(p, at, "table %s is defined already: dotted "
			    "keys cannot add to it", shown);
		free(shown);
		free(id);
	}
}

/* Digits with single underscores between them; returns their count. */
static size_t
scan_digits(const char *s, size_t *i, bool *bad)
{
	size_t	 n = 0;

	while (s[*i] >= '0' && s[*i] <= '9') {
		(*i)++;
		n++;
		if (s[*i] == '_') {
			(*i)++;
			if (s[*i] < '0' || s[*i] > '9')
				*bad = true;
		}
	}
	return n;
}

/* The token of a number or a word: up to a blank, ',', ']', '#' or EOL. */
static size_t
token_end(const struct parser *p)
{
	size_t	 i = p->pos;
	int	 c;

	while (i < p->len) {
		c = (unsigned char)p->text[i];
		if (c == ' ' || c == '\t' || c == ',' || c == ']' ||
		    c == '#' || c == '\n' || c == '\r')
			break;
		i++;
	}
	return i;
}

/* An integer, a float, true, false or inf/nan, at p->pos. */
static bool
read_word(struct parser *p, struct toml_value *v)
{
	size_t	 start = p->pos, end = token_end(p), len = end - start, i, k;
	char	*tok, *clean, q[TEXT_QUOTE_SIZE];
	bool	 bad = false, neg, is_float = false;
	size_t	 intdigits;
	long long value = 0;
	int	 d;

	tok = xmalloc(len + 1);
	memcpy(tok, p->text + start, len);
	tok[len] = '\0';
	p->pos = end;
	if (strcmp(tok, "true") == 0 || strcmp(tok, "false") == 0) {
		v->type = TOML_BOOLEAN;
		v->boolean = tok[0] == 't';
		free(tok);
		return true;
	}
	i = (tok[0] == '+' || tok[0] == '-') ? 1 : 0;
	neg = tok[0] == '-';
	if (strcmp(tok + i, "inf") == 0 || strcmp(tok + i, "nan") == 0) {
		v->type = TOML_FLOAT;
		v->number = tok[i] == 'i' ? (neg ? -INFINITY : INFINITY) :
		    NAN;
		free(tok);
		return true;
	}
	if (len == 0 || (tok[i] < '0' || tok[i] > '9')) {
		text_escape(q, sizeof q, tok, strlen(tok));
		fail_at(p, start, "\"%s\" is no value: give a string in "
		    "quotes, a number, true or false", q);
		free(tok);
		return false;
	}
	if (tok[i] == '0' && (tok[i + 1] == 'x' || tok[i + 1] == 'o' ||
	    tok[i + 1] == 'b')) {
		fail_at(p, start, "hexadecimal, octal and binary integers are "
		    "outside the TOML subset gradaudit reads");
		free(tok);
		return false;
	}
	k = i;
	intdigits = scan_digits(tok, &k, &bad);
	if (tok[k] == '-' || tok[k] == ':') {
		fail_at(p, start, "dates and times are outside the TOML "
		    "subset gradaudit reads");
		free(tok);
		return false;
	}
	if (intdigits > 1 && tok[i] == '0')
		bad = true;	/* leading zeros */
	if (tok[k] == '.') {
		is_float = true;
		k++;
		if (scan_digits(tok, &k, &bad) == 0)
			bad = true;
	}
	if (tok[k] == 'e' || tok[k] == 'E') {
		is_float = true;
		k++;
		if (tok[k] == '+' || tok[k] == '-')
			k++;
		if (scan_digits(tok, &k, &bad) == 0)
			bad = true;
	}
	if (bad || tok[k] != '\0') {
		text_escape(q, sizeof q, tok, strlen(tok));
		fail_at(p, start, "\"%s\" is not a number of TOML", q);
		free(tok);
		return false;
	}
	/* Without the underscores, which strtod does not take. */
	clean = xmalloc(len + 1);
	for (k = 0, d = 0; k < len; k++)
		if (tok[k] != '_')
			clean[d++] = tok[k];
	clean[d] = '\0';
	free(tok);
	if (is_float) {
		v->type = TOML_FLOAT;
		errno = 0;
		v->number = strtod(clean, NULL);
		if (isinf(v->number)) {
			text_cut(q, sizeof q, clean, strlen(clean));
			fail_at(p, start, "%s is out of the range of a "
			    "double", q);
		}
		free(clean);
		return !p->failed;
	}
	for (k = i; clean[k] != '\0'; k++) {
		d = clean[k] - '0';
		if (neg ? value < (LLONG_MIN + d) / 10 :
		    value > (LLONG_MAX - d) / 10) {
			text_cut(q, sizeof q, clean, strlen(clean));
			fail_at(p, start, "%s is out of the range of a "
			    "64-bit integer", q);
			free(clean);
			return false;
		}
		value = value * 10 + (neg ? -d : d);
	}
	free(clean);
	v->type = TOML_INTEGER;
	v->integer = value;
	return true;
}

static void
value_free(struct toml_value *v)
{
	size_t	 i;

	free(v->string);
	for (i = 0; i < v->nitems; i++)
		value_free(&v->items[i]);
	free(v->items);
	memset(v, 0, sizeof(*v));
}

static bool	read_value(struct parser *, struct toml_value *, bool in_array);

/* Blanks, comments and line ends inside an array. */
static void
skip_array_space(struct parser *p)
{
	for (;;) {
		skip_blanks(p);
		skip_comment(p);
		if (p->failed || p->pos >= p->len || !at_line_end(p))
			return;
		next_line(p);
	}
}

static bool
read_array(struct parser *p, struct toml_value *v)
{
	size_t	 start = p->pos, line_start = p->line_start;
	int	 line = p->line;

	v->type = TOML_ARRAY;
	p->pos++;
	for (;;) {
		skip_array_space(p);
		if (p->failed)
			return false;
		if (peek(p, 0) == ']') {
			p->pos++;
			return true;
		}
		if (p->pos >= p->len) {
			p->line = line;
			p->line_start = line_start;
			fail_at(p, start, "the array is not closed");
			return false;
		}
		v->items = xreallocarray(v->items, v->nitems + 1,
		    sizeof(*v->items));
		memset(&v->items[v->nitems], 0, sizeof(*v->items));
		if (!read_value(p, &v->items[v->nitems++], true))
			return false;
		skip_array_space(p);
		if (p->failed)
			return false;
		if (peek(p, 0) == ',')
			p->pos++;
		else if (peek(p, 0) != ']') {
			if (p->pos >= p->len) {
				p->line = line;
				p->line_start = line_start;
				fail_at(p, start, "the array is not closed");
			} else
				fail_at(p, p->pos, "expected ',' or ']' in "
				    "the array");
			return false;
		}
	}
}

static bool
read_value(struct parser *p, struct toml_value *v, bool in_array)
{
	int	 c = peek(p, 0);

	v->line = p->line;
	v->col = column_of(p, p->pos);
	if (c == '"' || c == '\'') {
		v->type = TOML_STRING;
		return (v->string = read_string(p)) != NULL;
	}
	if (c == '[') {
		if (in_array) {
			fail_at(p, p->pos, "arrays of arrays are outside the "
			    "TOML subset gradaudit reads");
			return false;
		}
		return read_array(p, v);
	}
	if (c == '{') {
		fail_at(p, p->pos, "inline tables are outside the TOML "
		    "subset gradaudit reads: write a [table]");
		return false;
	}
	if (c == -1 || c == '\n' || c == '\r' || c == '#') {
		fail_at(p, p->pos, "a value is missing");
		return false;
	}
	return read_word(p, v);
}

static void
read_header(struct parser *p)
{
	char	*keys[TOML_MAX_DEPTH];
	size_t	 start = p->pos, n, k;

	if (peek(p, 1) == '[') {
		fail_at(p, start, "arrays of tables ([[...]]) are outside the "
		    "TOML subset gradaudit reads");
		return;
	}
	p->pos++;
	if ((n = read_key(p, keys, TOML_MAX_DEPTH, "the table header")) == 0)
		return;
	if (peek(p, 0) != ']') {
		fail_at(p, p->pos, "expected ']' to close the table header");
		for (k = 0; k < n; k++)
			free(keys[k]);
		return;
	}
	p->pos++;
	open_table(p, keys, n, start);
	if (!p->failed)
		end_line(p, "a table header");
}

static void
read_key_value(struct parser *p)
{
	struct toml_entry	*e;
	char			*path[TOML_MAX_DEPTH];
	size_t			 start = p->pos, n, k;
	int			 col = column_of(p, p->pos);

	for (k = 0; k < p->ntable; k++)
		path[k] = p->table[k];
	if ((n = read_key(p, path + p->ntable, TOML_MAX_DEPTH - p->ntable,
	    "the line")) == 0)
		return;
	n += p->ntable;
	if (peek(p, 0) != '=') {
		fail_at(p, p->pos, "expected '=' after the key");
		goto out;
	}
	define_key(p, path, n, start);
	if (p->failed)
		goto out;
	p->pos++;
	skip_blanks(p);
	p->doc->entries = xreallocarray(p->doc->entries, p->doc->n + 1,
	    sizeof(*p->doc->entries));
	e = &p->doc->entries[p->doc->n++];
	memset(e, 0, sizeof(*e));
	e->line = p->line;
	e->col = col;
	e->nkeys = n;
	e->keys = xcalloc(n, sizeof(*e->keys));
	for (k = 0; k < n; k++)
		e->keys[k] = xstrdup(path[k]);
	e->path = shown_path(path, n);
	if (read_value(p, &e->value, false))
		end_line(p, "a value");
out:
	for (k = p->ntable; k < n; k++)
		free(path[k]);
}

void
toml_entry_free(struct toml_entry *e)
{
	size_t	 k;

	for (k = 0; k < e->nkeys; k++)
		free(e->keys[k]);
	free(e->keys);
	free(e->path);
	free(e->origin);
	value_free(&e->value);
}

void
toml_free(struct toml_doc *doc)
{
	size_t	 i;

	for (i = 0; i < doc->n; i++)
		toml_entry_free(&doc->entries[i]);
	free(doc->entries);
	free(doc->name);
	memset(doc, 0, sizeof(*doc));
}

int
toml_parse(const char *name, const char *text, size_t len,
    struct toml_doc *doc, char *err, size_t errsize)
{
	struct parser	 p;
	size_t		 i;

	memset(doc, 0, sizeof(*doc));
	memset(&p, 0, sizeof(p));
	p.name = name;
	p.text = text;
	p.len = len;
	p.line = 1;
	p.err = err;
	p.errsize = errsize;
	p.doc = doc;
	p.table_id = xstrdup("");
	if (len > TOML_MAX_SIZE)
		fail_at(&p, 0, "larger than 1 MiB: not a config file");
	else
		check_encoding(&p);
	while (!p.failed && p.pos < p.len) {
		skip_blanks(&p);
		if (peek(&p, 0) == '[')
			read_header(&p);
		else if (peek(&p, 0) == '#' || at_line_end(&p))
			end_line(&p, "a comment");
		else
			read_key_value(&p);
	}
	for (i = 0; i < p.nslots; i++) {
		free(p.nodes[i].id);
		free(p.nodes[i].owner);
	}
	free(p.nodes);
	for (i = 0; i < p.ntable; i++)
		free(p.table[i]);
	free(p.table_id);
	if (p.failed) {
		toml_free(doc);
		return -1;
	}
	doc->name = xstrdup(name);
	return 0;
}

const char *
toml_type_name(enum toml_type t)
{
	switch (t) {
	case TOML_STRING:	return "a string";
	case TOML_INTEGER:	return "an integer";
	case TOML_FLOAT:	return "a float";
	case TOML_BOOLEAN:	return "a boolean";
	case TOML_ARRAY:	return "an array";
	}
	return "a value";
}
