/*
 * The streaming JSON emitter of json.h.  It keeps one small frame per open
 * container (object or array, empty or not), which is all it needs to place
 * commas, newlines and indentation itself; callers only say what comes next.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "base/xmalloc.h"

void
jsonw_init(struct json *j, FILE *fp, bool compact)
{
	memset(j, 0, sizeof(*j));
	j->fp = fp;
	j->compact = compact;
}

static void
newline_indent(struct json *j, int depth)
{
	int	 i;

	if (j->compact)
		return;
	putc('\n', j->fp);
	for (i = 0; i < depth; i++)
		fputs("  ", j->fp);
}

/* Separate a new member of the innermost container from the previous one. */
static void
begin_member(struct json *j)
{
	if (j->stack[j->depth - 1].nonempty)
		putc(',', j->fp);
	j->stack[j->depth - 1].nonempty = true;
	newline_indent(j, j->depth);
}

static void
before_value(struct json *j)
{
	if (j->done)
		fatalx("json: a second top-level value");
	if (j->depth == 0)
		return;
	if (j->stack[j->depth - 1].object) {
		if (!j->key_pending)
			fatalx("json: value without a key in an object");
		j->key_pending = false;
	} else
		begin_member(j);
}

/* A complete top-level value ends the document and its line. */
static void
after_value(struct json *j)
{
	if (j->depth == 0) {
		putc('\n', j->fp);
		j->done = true;
	}
}

static void
begin_container(struct json *j, bool object)
{
	before_value(j);
	if (j->depth == JSON_MAX_DEPTH)
		fatalx("json: nesting deeper than %d", JSON_MAX_DEPTH);
	j->stack[j->depth].object = object;
	j->stack[j->depth].nonempty = false;
	j->depth++;
	putc(object ? '{' : '[', j->fp);
}

static void
end_container(struct json *j, bool object)
{
	if (j->depth == 0 || j->stack[j->depth - 1].object != object)
		fatalx("json: unbalanced end of %s", object ? "object" :
		    "array");
	if (j->key_pending)
		fatalx("json: key without a value");
	j->depth--;
	if (j->stack[j->depth].nonempty)
		newline_indent(j, j->depth);
	putc(object ? '}' : ']', j->fp);
	after_value(j);
}

void
jsonw_begin_object(struct json *j)
{
	begin_container(j, true);
}

void
jsonw_end_object(struct json *j)
{
	end_container(j, true);
}

void
jsonw_begin_array(struct json *j)
{
	begin_container(j, false);
}

void
jsonw_end_array(struct json *j)
{
	end_container(j, false);
}

/*
 * The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0 if there is none.
 * Only called on a byte >= 0x80.
 */
static size_t
utf8_length(const unsigned char *s)
{
	unsigned char	 c = s[0], lo = 0x80, hi = 0xbf;
	size_t		 len, i;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;	/* overlong */
		else if (c == 0xed)
			hi = 0x9f;	/* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;	/* overlong */
		else if (c == 0xf4)
			hi = 0x8f;	/* above U+10FFFF */
	} else
		return 0;
	/* The NUL terminator fails the range check, so no overrun. */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

static void
write_string(struct json *j, const char *str)
{
	const unsigned char	*s = (const unsigned char *)str, *run = s;
	size_t			 len;

	putc('"', j->fp);
	while (*s != '\0') {
		if (*s >= 0x20 && *s != '"' && *s != '\\' && *s < 0x80) {
			s++;
			continue;
		}
		if (*s >= 0x80 && (len = utf8_length(s)) != 0) {
			s += len;
			continue;
		}
		/* Flush the run of bytes that need no escaping. */
		fwrite(run, 1, (size_t)(s - run), j->fp);
		switch (*s) {
		case '"':
			fputs("\\\"", j->fp);
			break;
		case '\\':
			fputs("\\\\", j->fp);
			break;
		case '\b':
			fputs("\\b", j->fp);
			break;
		case '\f':
			fputs("\\f", j->fp);
			break;
		case '\n':
			fputs("\\n", j->fp);
			break;
		case '\r':
			fputs("\\r", j->fp);
			break;
		case '\t':
			fputs("\\t", j->fp);
			break;
		default:
			if (*s < 0x20)
				fprintf(j->fp, "\\u%04x", *s);
			else
				fputs("\\ufffd", j->fp);  /* invalid UTF-8 */
			break;
		}
		run = ++s;
	}
	fwrite(run, 1, (size_t)(s - run), j->fp);
	putc('"', j->fp);
}

void
jsonw_key(struct json *j, const char *key)
{
	if (j->depth == 0 || !j->stack[j->depth - 1].object)
		fatalx("json: key \"%s\" outside an object", key);
	if (j->key_pending)
		fatalx("json: key \"%s\" after a key", key);
	begin_member(j);
	write_string(j, key);
	fputs(j->compact ? ":" : ": ", j->fp);
	j->key_pending = true;
}

void
jsonw_string(struct json *j, const char *s)
{
	before_value(j);
	write_string(j, s);
	after_value(j);
}

void
jsonw_int(struct json *j, int64_t v)
{
	before_value(j);
	fprintf(j->fp, "%" PRId64, v);
	after_value(j);
}

void
jsonw_bool(struct json *j, bool v)
{
	before_value(j);
	fputs(v ? "true" : "false", j->fp);
	after_value(j);
}

void
jsonw_null(struct json *j)
{
	before_value(j);
	fputs("null", j->fp);
	after_value(j);
}

static const char *
skip_digits(const char *p)
{
	while (*p >= '0' && *p <= '9')
		p++;
	return p;
}

/* Does s match JSON's number grammar (RFC 8259 section 6)? */
static bool
is_json_number(const char *s)
{
	const char	*p = s, *q;

	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		p = skip_digits(p);
	else
		return false;
	if (*p == '.') {
		q = skip_digits(p + 1);
		if (q == p + 1)
			return false;
		p = q;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		q = skip_digits(p);
		if (q == p)
			return false;
		p = q;
	}
	return *p == '\0';
}

void
jsonw_raw_number(struct json *j, const char *s)
{
	/* NaN and infinities have no JSON form: the caller must use null. */
	if (!is_json_number(s))
		fatalx("json: \"%s\" is not a JSON number", s);
	before_value(j);
	fputs(s, j->fp);
	after_value(j);
}

void
jsonw_key_string(struct json *j, const char *key, const char *s)
{
	jsonw_key(j, key);
	jsonw_string(j, s);
}

void
jsonw_key_int(struct json *j, const char *key, int64_t v)
{
	jsonw_key(j, key);
	jsonw_int(j, v);
}

void
jsonw_key_bool(struct json *j, const char *key, bool v)
{
	jsonw_key(j, key);
	jsonw_bool(j, v);
}

void
jsonw_key_null(struct json *j, const char *key)
{
	jsonw_key(j, key);
	jsonw_null(j);
}
