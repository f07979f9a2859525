/*
 * The TOML reader's contract (toml-check.h), shared by its fuzzers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "toml-check.h"

/* The lines of text, and the characters of line n (1-based). */
static size_t
count_lines(const char *text, size_t len)
{
	size_t	 i, n = 1;

	for (i = 0; i < len; i++)
		if (text[i] == '\n')
			n++;
	return n;
}

static size_t
line_chars(const char *text, size_t len, size_t line)
{
	size_t	 i, n = 1, chars = 0;

	for (i = 0; i < len && n < line; i++)
		if (text[i] == '\n')
			n++;
	for (; i < len && text[i] != '\n'; i++)
		if (((unsigned char)text[i] & 0xc0) != 0x80)
			chars++;
	return chars;
}

static const char *
check_error(const char *name, const char *text, size_t len, const char *err,
    const struct toml_doc *doc)
{
	size_t	 nl = strlen(name), line, col;
	char	*end;

	if (doc->n != 0 || doc->entries != NULL || doc->name != NULL)
		return "a failed parse left entries";
	if (strncmp(err, name, nl) != 0 || err[nl] != ':')
		return "the message does not start with \"NAME:\"";
	line = strtoul(err + nl + 1, &end, 10);
	if (*end != ':' || line < 1 || line > count_lines(text, len))
		return "the message's line is not one of the text";
	col = strtoul(end + 1, &end, 10);
	if (strncmp(end, ": ", 2) != 0 || col < 1 ||
	    col > line_chars(text, len, line) + 1)
		return "the message's column is not on its line";
	if (strchr(err, '\n') != NULL || end[2] == '\0')
		return "the message is not one line of text";
	return NULL;
}

static const char *
check_value(const struct toml_value *v, bool in_array)
{
	size_t	 i;

	if (v->line < 1 || v->col < 1)
		return "a value without a place";
	switch (v->type) {
	case TOML_STRING:
		return v->string == NULL ? "a string without text" : NULL;
	case TOML_INTEGER:
	case TOML_FLOAT:
	case TOML_BOOLEAN:
		return NULL;
	case TOML_ARRAY:
		if (in_array)
			return "an array in an array";
		for (i = 0; i < v->nitems; i++)
			if (check_value(&v->items[i], true) != NULL)
				return check_value(&v->items[i], true);
		return NULL;
	}
	return "a value of no type";
}

static bool
same_keys(const struct toml_entry *a, const struct toml_entry *b, size_t n)
{
	size_t	 k;

	for (k = 0; k < n; k++)
		if (strcmp(a->keys[k], b->keys[k]) != 0)
			return false;
	return true;
}

static const char *
check_doc(const struct toml_doc *doc)
{
	const struct toml_entry	*a, *b;
	const char		*why;
	size_t			 i, j;

	for (i = 0; i < doc->n; i++) {
		a = &doc->entries[i];
		if (a->nkeys < 1 || a->nkeys > TOML_MAX_DEPTH ||
		    a->path == NULL || a->line < 1 || a->col < 1)
			return "an entry without keys, a path or a place";
		if ((why = check_value(&a->value, false)) != NULL)
			return why;
		/* No key twice, and no key both a value and a table. */
		for (j = 0; j < i; j++) {
			b = &doc->entries[j];
			if (same_keys(a, b, a->nkeys < b->nkeys ? a->nkeys :
			    b->nkeys))
				return "two entries where one path is the "
				    "other's or under it";
		}
	}
	return NULL;
}

const char *
toml_check_result(const char *name, const char *text, size_t len, int rc,
    const char *err, const struct toml_doc *doc)
{
	if (rc == -1)
		return check_error(name, text, len, err, doc);
	if (rc != 0)
		return "toml_parse returned neither 0 nor -1";
	if (doc->name == NULL || strcmp(doc->name, name) != 0)
		return "the doc does not name its file";
	return check_doc(doc);
}

static void
write_string(FILE *fp, const char *s)
{
	fputc('"', fp);
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(fp, "\\%c", *s);
		else if ((unsigned char)*s < 0x20 || *s == 0x7f)
			fprintf(fp, "\\u%04X", (unsigned char)*s);
		else
			fputc(*s, fp);
	}
	fputc('"', fp);
}

static void
write_scalar(FILE *fp, const struct toml_value *v)
{
	char	 buf[64];

	switch (v->type) {
	case TOML_STRING:
		write_string(fp, v->string);
		break;
	case TOML_INTEGER:
		fprintf(fp, "%lld", v->integer);
		break;
	case TOML_BOOLEAN:
		fputs(v->boolean ? "true" : "false", fp);
		break;
	case TOML_FLOAT:
		if (isnan(v->number))
			fputs("nan", fp);
		else if (isinf(v->number))
			fputs(v->number < 0 ? "-inf" : "inf", fp);
		else {
			snprintf(buf, sizeof(buf), "%.17g", v->number);
			fputs(buf, fp);
			if (strpbrk(buf, ".e") == NULL)
				fputs(".0", fp);
		}
		break;
	case TOML_ARRAY:
		break;
	}
}

static bool
same_value(const struct toml_value *a, const struct toml_value *b)
{
	size_t	 i;

	if (a->type != b->type)
		return false;
	switch (a->type) {
	case TOML_STRING:
		return strcmp(a->string, b->string) == 0;
	case TOML_INTEGER:
		return a->integer == b->integer;
	case TOML_BOOLEAN:
		return a->boolean == b->boolean;
	case TOML_FLOAT:
		return (isnan(a->number) && isnan(b->number)) ||
		    a->number == b->number;
	case TOML_ARRAY:
		if (a->nitems != b->nitems)
			return false;
		for (i = 0; i < a->nitems; i++)
			if (!same_value(&a->items[i], &b->items[i]))
				return false;
		return true;
	}
	return false;
}

const char *
toml_check_round_trip(const struct toml_doc *doc)
{
	const struct toml_entry	*e;
	struct toml_doc		 back;
	const char		*why = NULL;
	FILE			*fp;
	char			*text, err[1024];
	size_t			 len, i, k;

	err[0] = '\0';
	if ((fp = open_memstream(&text, &len)) == NULL)
		fatal("open_memstream");
	for (i = 0; i < doc->n; i++) {
		e = &doc->entries[i];
		for (k = 0; k < e->nkeys; k++) {
			if (k > 0)
				fputc('.', fp);
			write_string(fp, e->keys[k]);
		}
		fputs(" = ", fp);
		if (e->value.type != TOML_ARRAY)
			write_scalar(fp, &e->value);
		else {
			fputc('[', fp);
			for (k = 0; k < e->value.nitems; k++) {
				write_scalar(fp, &e->value.items[k]);
				fputs(",\n", fp);
			}
			fputc(']', fp);
		}
		fputc('\n', fp);
	}
	if (fclose(fp) != 0)
		fatal("open_memstream");
	if (toml_parse("again", text, len, &back, err, sizeof(err)) != 0)
		why = "the doc written back does not parse";
	else if (back.n != doc->n)
		why = "the doc written back has other entries";
	for (i = 0; why == NULL && i < doc->n; i++)
		if (back.entries[i].nkeys != doc->entries[i].nkeys ||
		    !same_keys(&back.entries[i], &doc->entries[i],
		    doc->entries[i].nkeys) ||
		    strcmp(back.entries[i].path, doc->entries[i].path) != 0)
			why = "the doc written back has other keys";
		else if (!same_value(&back.entries[i].value,
		    &doc->entries[i].value))
			why = "the doc written back has other values";
	if (why != NULL)
		fprintf(stderr, "written back:\n%s\n(%s)\n", text, err);
	toml_free(&back);
	free(text);
	return why;
}
