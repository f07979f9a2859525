/*
 * The helpers of one Megatron import (megatron-state.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"
#include "base/xmalloc.h"
#include "config/framework.h"
#include "import/megatron-state.h"

/* An argument that stops the import: the message, and exit status 2. */
void
mg_refuse(struct import_state *st, const char *fmt, ...)
{
	va_list	 ap;

	fprintf(stderr, "%s: import: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	st->errors++;
}

/*
 * Something the user should know about the configuration printed: kept
 * until the import succeeds, since a refusal makes it moot.
 */
void
mg_note(struct import_state *st, const char *fmt, ...)
{
	va_list	 ap;
	char	*line, *more;

	va_start(ap, fmt);
	xvasprintf(&line, fmt, ap);
	va_end(ap);
	xasprintf(&more, "%s%s: import: note: %s\n", st->notes != NULL ?
	    st->notes : "", progname, line);
	free(line);
	free(st->notes);
	st->notes = more;
}

const char *
mg_shown_len(struct shown *buf, const char *word, size_t len)
{
	text_escape(buf->s, sizeof(buf->s), word, len);
	return buf->s;
}

const char *
mg_shown(struct shown *buf, const char *word)
{
	return mg_shown_len(buf, word, strlen(word));
}

/* Set key k as written, with where its value came from. */
void
mg_explain(struct import_state *st, enum cfg_key k, const char *fmt, ...)
{
	va_list	 ap;

	keyset_add(&st->mi->cfg.given, k);
	free(st->mi->why[k]);
	va_start(ap, fmt);
	xvasprintf(&st->mi->why[k], fmt, ap);
	va_end(ap);
}

/* Value j of a list argument. */
const char *
mg_list_value(const struct import_state *st, const struct arg_use *u, size_t j)
{
	return u->value != NULL ? u->value : st->words[u->first + j];
}

/* True when value is one of the inert words of def (numerically, if a number). */
bool
mg_is_inert(const struct arg_def *def, const char *value)
{
	char		*copy, *word, *save = NULL, *end;
	double		 a, b;
	bool		 found = false;

	if (def->inert == NULL)
		return false;
	copy = xstrdup(def->inert);
	for (word = strtok_r(copy, " ", &save); word != NULL && !found;
	    word = strtok_r(NULL, " ", &save)) {
		a = strtod(word, &end);
		if (*end == '\0' && isdigit((unsigned char)*word)) {
			b = strtod(value, &end);
			found = *value != '\0' && *end == '\0' && a == b;
		} else
			found = strcmp(word, value) == 0;
	}
	free(copy);
	return found;
}

/* The words of a use, for messages: " 2", " 0.01 0.001", or "". */
char *
mg_use_values(const struct import_state *st, const struct arg_def *def,
    const struct arg_use *u)
{
	struct shown	 sh;
	char		*s = xstrdup(""), *more;
	size_t		 j;

	if (def->kind == ARG_VALUE && u->value != NULL) {
		free(s);
		xasprintf(&s, " %s", mg_shown(&sh, u->value));
	} else if (def->kind == ARG_LIST)
		for (j = 0; j < u->count; j++) {
			xasprintf(&more, "%s %s", s,
			    mg_shown(&sh, mg_list_value(st, u, j)));
			free(s);
			s = more;
		}
	return s;
}

/* Whether the release --framework names is older than release. */
bool
mg_older_than(const struct import_state *st, const char *release)
{
	struct fw_version	 v;

	if (!st->mi->have_version || fw_version_parse(release, &v) == -1)
		return false;
	return fw_version_cmp(&st->mi->version, &v) < 0;
}

/*
 * Integer values.  Megatron's type=int takes what Python's int() does; a
 * launch line writes plain decimal numbers, and anything else (a shell
 * variable that was never expanded, a float) is refused with the name.
 */
long
mg_int_arg(struct import_state *st, enum mapped_arg k, long min, long max,
    long def)
{
	struct arg_use	*u = &st->use[k];
	struct shown	 sh;
	const char	*v = u->value;
	char		*end;
	long		 n;

	if (!u->given || v == NULL)
		return def;
	u->used = true;
	errno = 0;
	n = strtol(v, &end, 10);
	if (!isdigit((unsigned char)*v) || *end != '\0' || errno != 0 ||
	    n < min || n > max) {
		mg_refuse(st, "--%s \"%s\": expected an integer from %ld to %ld%s",
		    megatron_args[k].name, mg_shown(&sh, v), min, max, *v == '$' ? " (a shell variable "
		    "that was not expanded: give its value)" : "");
		return def;
	}
	return n;
}

/*
 * Whether v is a word Python's int() takes, as argparse's type=int reads
 * it: blanks around, a sign, decimal digits with single underscores
 * between them ("40_000_000"), at most 4,300 of them (CPython's
 * int_max_str_digits since 3.11).
 */
static bool
python_int(const char *v)
{
	size_t	 digits = 0;

	while (isspace((unsigned char)*v))
		v++;
	if (*v == '+' || *v == '-')
		v++;
	if (!isdigit((unsigned char)*v))
		return false;
	for (; *v != '\0' && !isspace((unsigned char)*v); v++) {
		if (isdigit((unsigned char)*v))
			digits++;
		else if (*v != '_' || !isdigit((unsigned char)v[1]))
			return false;
	}
	while (isspace((unsigned char)*v))
		v++;
	return *v == '\0' && digits <= 4300;
}

/* Past digits with single underscores between them; NULL if none. */
static const char *
python_digits(const char *v)
{
	if (!isdigit((unsigned char)*v))
		return NULL;
	for (v++; isdigit((unsigned char)*v) || (*v == '_' &&
	    isdigit((unsigned char)v[1])); v++)
		;
	return v;
}

/*
 * Whether v is a word Python's float() takes, as argparse's type=float
 * reads it: blanks around, a sign, then inf, infinity or nan in any case,
 * or digits with a point and an exponent ("1_0.5", ".5", "1e400").
 */
bool
mg_python_float(const char *v)
{
	static const char *const words[] = { "infinity", "inf", "nan" };
	const char	*p;
	size_t		 i, len;

	while (isspace((unsigned char)*v))
		v++;
	if (*v == '+' || *v == '-')
		v++;
	for (i = 0, len = 0; i < sizeof words / sizeof words[0]; i++)
		if (strncasecmp(v, words[i], strlen(words[i])) == 0) {
			len = strlen(words[i]);
			break;
		}
	if (len > 0)
		v += len;
	else {
		/* A mantissa: "5", "5.", ".5", "5.5", never "." alone. */
		if ((p = python_digits(v)) != NULL)
			v = p;
		if (*v == '.' && python_digits(v + 1) != NULL)
			v = python_digits(v + 1);
		else if (*v == '.' && p != NULL)
			v++;
		else if (p == NULL)
			return false;
		if (*v == 'e' || *v == 'E') {
			v++;
			if (*v == '+' || *v == '-')
				v++;
			if ((v = python_digits(v)) == NULL)
				return false;
		}
	}
	while (isspace((unsigned char)*v))
		v++;
	return *v == '\0';
}

/*
 * An integer argument this launch does not use: refused only where
 * Megatron's argparse refuses it, and listed as ignored.  The range of a
 * used one held for it too, and "--ddp-bucket-size 0" without
 * --overlap-grad-reduce, which Megatron takes and never reads
 * (DistributedDataParallel sets bucket_size to None), was refused
 * (44f16d4).
 */
void
mg_int_aside(struct import_state *st, enum mapped_arg k)
{
	const struct arg_use *u = &st->use[k];
	struct shown	 sh;

	if (!u->given || u->value == NULL || python_int(u->value))
		return;
	mg_refuse(st, "--%s \"%s\": expected an integer%s",
	    megatron_args[k].name, mg_shown(&sh, u->value), *u->value == '$' ?
	    " (a shell variable that was not expanded: give its value)" : "");
}

bool
mg_flag_arg(struct import_state *st, enum mapped_arg k)
{
	if (!st->use[k].given)
		return false;
	st->use[k].used = true;
	return true;
}

/* Where a value came from, for the comments: the argument or a default. */
const char *
mg_given_or(const struct import_state *st, enum mapped_arg k, const char *arg,
    const char *dflt)
{
	return st->use[k].given ? arg : dflt;
}

/*
 * An integer argument as written, for the checks that run before the
 * values are read (check_mla, check_aux_losses): def when it is not given
 * or not a plain number, which int_arg refuses later.
 */
long
mg_raw_long(const struct import_state *st, enum mapped_arg k, long def)
{
	const char	*v = st->use[k].value;
	char		*end;
	long		 n;

	if (!st->use[k].given || v == NULL || !isdigit((unsigned char)*v))
		return def;
	errno = 0;
	n = strtol(v, &end, 10);
	return *end != '\0' || errno != 0 ? def : n;
}
