/*
 * The baseline of accepted findings (baseline.h): its reader, the
 * matching of its entries against an audit's findings, and the writer of
 * --write-baseline.
 *
 * The reader follows config.c's manner: libyaml's events, read once, every
 * error one line at the exact file:line:col of the node at fault, the
 * input quoted back escaped and cut (text.h).  A baseline is small and
 * hand-written, so it is strict: an unknown key, a duplicate key, a kind
 * no finding has or a date that is no date is an error, never ignored,
 * since an entry that silently accepts nothing is worse than none.
 */
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yaml.h>

#include "base/arena.h"
#include "base/suggest.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "report/baseline.h"
#include "symbolic/audit.h"

/* A baseline larger than this is no hand-written file. */
#define BASELINE_MAX_BYTES	(16 << 20)

/* A message, before the location is put in front of it. */
#define MSG_SIZE		512

/*
 * The keys of an entry.  "what" completes 'missing "KEY": ' for the
 * required ones, so that the message says what to write.
 */
enum entry_key {
	ENTRY_CONFIG,
	ENTRY_KIND,
	ENTRY_PARAMS,
	ENTRY_MECHANISM,
	ENTRY_REASON,
	ENTRY_EXPIRES,
	ENTRY__COUNT
};

static const struct {
	const char	*name;
	bool		 required;
	const char	*what;
} entry_keys[ENTRY__COUNT] = {
	[ENTRY_CONFIG] = { "config", true,
	    "a glob of the config names or files whose finding it accepts" },
	[ENTRY_KIND] = { "kind", true,
	    "the finding's kind, as in the JSON report (wrong-weights)" },
	[ENTRY_PARAMS] = { "params", true,
	    "a glob, or a list of globs, of the finding's parameters" },
	[ENTRY_MECHANISM] = { "mechanism", false, NULL },
	[ENTRY_REASON] = { "reason", true,
	    "say why this finding is accepted" },
	[ENTRY_EXPIRES] = { "expires", false, NULL },
};

struct reader {
	const char		*path;
	const unsigned char	*text;
	size_t			 len;
	yaml_parser_t		 parser;
	struct baseline		*b;
	const char		*today;		/* "YYYY-MM-DD" */
};

/*
 * Diagnostics: one line on stderr, written in one call (MPI ranks share
 * the terminal), whatever the input quoted in it holds.
 */
static void
say(const char *line)
{
	char	*out = text_visible(line);
	size_t	 n = strlen(out);

	out[n] = '\n';
	fwrite(out, 1, n + 1, stderr);
	free(out);
}

static void fail_at(const struct reader *, int line, int col, const char *,
    ...) __attribute__((format(printf, 4, 5)));

static void
fail_at(const struct reader *r, int line, int col, const char *fmt, ...)
{
	char	 msg[MSG_SIZE], *s;
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (line > 0)
		xasprintf(&s, "%s: %s:%d:%d: %s", progname, r->path, line, col,
		    msg);
	else
		xasprintf(&s, "%s: %s: %s", progname, r->path, msg);
	say(s);
	free(s);
}

static int
mark_line(const yaml_mark_t *m)
{
	return m->line >= INT_MAX ? INT_MAX : (int)m->line + 1;
}

static int
mark_col(const yaml_mark_t *m)
{
	return m->column >= INT_MAX ? INT_MAX : (int)m->column + 1;
}

static void fail(const struct reader *, const yaml_mark_t *, const char *,
    ...) __attribute__((format(printf, 3, 4)));

static void
fail(const struct reader *r, const yaml_mark_t *m, const char *fmt, ...)
{
	char	 msg[MSG_SIZE];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fail_at(r, mark_line(m), mark_col(m), "%s", msg);
}

/*
 * libyaml's own words for a syntax or encoding error.  The reader (bad
 * UTF-8) gives a byte offset, not a mark: its line and column are counted
 * here, in characters as libyaml's marks count them.
 */
static void
syntax_error(const struct reader *r)
{
	const yaml_parser_t	*p = &r->parser;
	const char		*problem = p->problem != NULL ? p->problem :
				    "invalid YAML";
	size_t			 i, bol = 0;
	int			 line = 1;

	if (p->error == YAML_MEMORY_ERROR) {
		errno = ENOMEM;
		fatal("libyaml");
	}
	if (p->error == YAML_READER_ERROR) {
		for (i = 0; i < p->problem_offset && i < r->len; i++)
			if (r->text[i] == '\n') {
				line++;
				bol = i + 1;
			}
		fail_at(r, line, 1 + (int)text_columns(r->text + bol, i - bol),
		    "%s", problem);
	} else if (p->context != NULL)
		fail(r, &p->problem_mark, "%s (%s that started at %d:%d)",
		    problem, p->context, mark_line(&p->context_mark),
		    mark_col(&p->context_mark));
	else
		fail(r, &p->problem_mark, "%s", problem);
}

static int
next_event(struct reader *r, yaml_event_t *ev)
{
	if (yaml_parser_parse(&r->parser, ev))
		return 0;
	syntax_error(r);
	return -1;
}

/* A plain scalar YAML reads as null: empty, "~" or "null". */
static bool
is_null(const yaml_event_t *ev)
{
	const char	*s = (const char *)ev->data.scalar.value;
	size_t		 n = ev->data.scalar.length;

	if (ev->type != YAML_SCALAR_EVENT ||
	    ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
	    ev->data.scalar.tag != NULL)
		return false;
	return n == 0 || (n == 1 && s[0] == '~') || (n == 4 &&
	    (memcmp(s, "null", 4) == 0 || memcmp(s, "Null", 4) == 0 ||
	    memcmp(s, "NULL", 4) == 0));
}

/* What a node is, for "expected X, got Y". */
static void
describe(char *buf, size_t size, const yaml_event_t *ev)
{
	char	 q[TEXT_QUOTE_SIZE];

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if (is_null(ev)) {
			snprintf(buf, size, "nothing");
			break;
		}
		text_escape(q, sizeof q, ev->data.scalar.value,
		    ev->data.scalar.length);
		snprintf(buf, size, "\"%s\"", q);
		break;
	case YAML_MAPPING_START_EVENT:
		snprintf(buf, size, "a mapping");
		break;
	case YAML_SEQUENCE_START_EVENT:
		snprintf(buf, size, "a list");
		break;
	case YAML_ALIAS_EVENT:
		snprintf(buf, size, "an alias (aliases are not supported)");
		break;
	default:
		snprintf(buf, size, "nothing");
		break;
	}
}

/* U+2028 and U+2029, which YAML and some readers take for line breaks. */
static bool
line_separator(const unsigned char *s, size_t n)
{
	return n >= 3 && s[0] == 0xe2 && s[1] == 0x80 &&
	    (s[2] == 0xa8 || s[2] == 0xa9);
}

/* Printable characters only, none of them a line separator. */
static bool
printable_line(const unsigned char *s, size_t n)
{
	size_t	 i = 0, k;

	while (i < n) {
		if ((k = text_char_len(s + i, n - i)) == 0 ||
		    line_separator(s + i, n - i))
			return false;
		i += k;
	}
	return true;
}

/*
 * A scalar as one line of text: trailing blanks and newlines (a block
 * scalar's) dropped, never empty, only printable characters, since every
 * report prints it on one line (and --write-baseline writes it back as
 * it is).  -1 after a message.
 */
static int
one_line(struct reader *r, const yaml_event_t *ev, const char *key,
    char **out)
{
	const unsigned char	*s = ev->data.scalar.value;
	size_t			 n;
	char			 what[TEXT_QUOTE_SIZE + 48];

	if (ev->type != YAML_SCALAR_EVENT || is_null(ev)) {
		describe(what, sizeof what, ev);
		fail(r, &ev->start_mark, "%s: expected a string, got %s", key,
		    what);
		return -1;
	}
	n = ev->data.scalar.length;
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' ||
	    s[n - 1] == '\n' || s[n - 1] == '\r'))
		n--;
	if (n == 0) {
		fail(r, &ev->start_mark, "%s: expected a string, got an "
		    "empty one", key);
		return -1;
	}
	if (!printable_line(s, n)) {
		describe(what, sizeof what, ev);
		fail(r, &ev->start_mark, "%s: must be one line of printable "
		    "text, got %s", key, what);
		return -1;
	}
	*out = xmalloc(n + 1);
	memcpy(*out, s, n);
	(*out)[n] = '\0';
	return 0;
}

static const char *
kind_list(char *buf, size_t size)
{
	size_t	 used = 0;
	int	 k;

	buf[0] = '\0';
	for (k = 0; k < FINDING__COUNT && used < size; k++)
		used += (size_t)snprintf(buf + used, size - used, "%s%s",
		    k == 0 ? "" : k + 1 == FINDING__COUNT ? " or " : ", ",
		    finding_kind_name((enum finding_kind)k));
	return buf;
}

static int
read_kind(struct reader *r, const yaml_event_t *ev, struct baseline_entry *e)
{
	struct suggestion	 sg;
	char			*s, q[TEXT_QUOTE_SIZE], kinds[MSG_SIZE / 2];
	int			 k;

	if (one_line(r, ev, "kind", &s) < 0)
		return -1;
	suggest_init(&sg, s, strlen(s));
	for (k = 0; k < FINDING__COUNT; k++) {
		if (strcmp(s, finding_kind_name((enum finding_kind)k)) == 0) {
			e->kind = (enum finding_kind)k;
			free(s);
			return 0;
		}
		suggest_consider(&sg, finding_kind_name((enum finding_kind)k));
	}
	text_escape(q, sizeof q, s, strlen(s));
	if (suggest_best(&sg) != NULL)
		fail(r, &ev->start_mark, "kind: unknown finding kind \"%s\" "
		    "(did you mean \"%s\"?)", q, suggest_best(&sg));
	else
		fail(r, &ev->start_mark, "kind: unknown finding kind \"%s\" "
		    "(kinds: %s)", q, kind_list(kinds, sizeof kinds));
	free(s);
	return -1;
}

static bool
leap_year(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* "YYYY-MM-DD", a day of the calendar. */
static bool
valid_date(const char *s)
{
	static const int days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31,
	    30, 31 };
	int	 i, y, m, d;

	if (strlen(s) != 10 || s[4] != '-' || s[7] != '-')
		return false;
	for (i = 0; i < 10; i++)
		if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9'))
			return false;
	y = atoi(s);
	m = atoi(s + 5);
	d = atoi(s + 8);
	if (y < 1 || m < 1 || m > 12 || d < 1)
		return false;
	return d <= days[m - 1] + (m == 2 && leap_year(y));
}

static int
read_expires(struct reader *r, const yaml_event_t *ev,
    struct baseline_entry *e)
{
	char	*s, q[TEXT_QUOTE_SIZE];

	if (one_line(r, ev, "expires", &s) < 0)
		return -1;
	if (!valid_date(s)) {
		text_escape(q, sizeof q, s, strlen(s));
		fail(r, &ev->start_mark, "expires: expected a date YYYY-MM-DD, "
		    "got \"%s\"", q);
		free(s);
		return -1;
	}
	memcpy(e->expires, s, BASELINE_DATE_SIZE);
	/* It accepts until the day before: on that day it has expired. */
	e->expired = strcmp(e->expires, r->today) <= 0;
	free(s);
	return 0;
}

static void
add_param(struct baseline_entry *e, char *glob)
{
	e->params = xreallocarray(e->params, e->nparams + 1,
	    sizeof *e->params);
	e->params[e->nparams++] = glob;
}

/* "params": one glob, or a list of them (not empty). */
static int
read_params(struct reader *r, const yaml_event_t *ev,
    struct baseline_entry *e)
{
	yaml_event_t	 item;
	char		*s;
	int		 rc = 0;

	if (ev->type != YAML_SEQUENCE_START_EVENT) {
		if (one_line(r, ev, "params", &s) < 0)
			return -1;
		add_param(e, s);
		return 0;
	}
	for (;;) {
		if (next_event(r, &item) < 0)
			return -1;
		if (item.type == YAML_SEQUENCE_END_EVENT)
			break;
		rc = one_line(r, &item, "params", &s);
		if (rc == 0)
			add_param(e, s);
		yaml_event_delete(&item);
		if (rc < 0)
			return -1;
	}
	if (e->nparams == 0) {
		fail(r, &ev->start_mark, "params: an empty list accepts "
		    "nothing: give at least one glob (\"*\" for any "
		    "parameter)");
		rc = -1;
	}
	yaml_event_delete(&item);
	return rc;
}

static int
read_value(struct reader *r, enum entry_key k, const yaml_event_t *ev,
    struct baseline_entry *e)
{
	switch (k) {
	case ENTRY_CONFIG:
		return one_line(r, ev, "config", &e->config);
	case ENTRY_KIND:
		return read_kind(r, ev, e);
	case ENTRY_PARAMS:
		return read_params(r, ev, e);
	case ENTRY_MECHANISM:
		return one_line(r, ev, "mechanism", &e->mechanism);
	case ENTRY_REASON:
		return one_line(r, ev, "reason", &e->reason);
	case ENTRY_EXPIRES:
		return read_expires(r, ev, e);
	case ENTRY__COUNT:
		break;
	}
	fatalx("read_value: bad key %d", (int)k);
}

/* The key a scalar names, or -1 after "unknown key" with a hint. */
static int
entry_key(struct reader *r, const yaml_event_t *ev)
{
	struct suggestion	 sg;
	const char		*s = (const char *)ev->data.scalar.value;
	size_t			 n = ev->data.scalar.length;
	char			 q[TEXT_QUOTE_SIZE];
	int			 k;

	suggest_init(&sg, s, n);
	for (k = 0; k < ENTRY__COUNT; k++) {
		if (strlen(entry_keys[k].name) == n &&
		    memcmp(entry_keys[k].name, s, n) == 0)
			return k;
		suggest_consider(&sg, entry_keys[k].name);
	}
	text_escape(q, sizeof q, s, n);
	if (suggest_best(&sg) != NULL)
		fail(r, &ev->start_mark, "unknown key \"%s\" (did you mean "
		    "\"%s\"?)", q, suggest_best(&sg));
	else
		fail(r, &ev->start_mark, "unknown key \"%s\" (an entry has "
		    "config, kind, params, mechanism, reason and expires)", q);
	return -1;
}

static void
entry_free(struct baseline_entry *e)
{
	size_t	 i;

	free(e->config);
	for (i = 0; i < e->nparams; i++)
		free(e->params[i]);
	free(e->params);
	free(e->mechanism);
	free(e->reason);
	free(e->at);
	memset(e, 0, sizeof *e);
}

/* The pairs of one entry, after its MAPPING_START event `start`. */
static int
read_pairs(struct reader *r, const yaml_event_t *start,
    struct baseline_entry *e)
{
	yaml_mark_t	 seen[ENTRY__COUNT];
	bool		 have[ENTRY__COUNT] = { false };
	yaml_event_t	 key, value;
	char		 what[TEXT_QUOTE_SIZE + 48];
	int		 k, rc;

	for (;;) {
		if (next_event(r, &key) < 0)
			return -1;
		if (key.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&key);
			break;
		}
		if (key.type != YAML_SCALAR_EVENT) {
			describe(what, sizeof what, &key);
			fail(r, &key.start_mark, "expected a key, got %s",
			    what);
			yaml_event_delete(&key);
			return -1;
		}
		if ((k = entry_key(r, &key)) < 0) {
			yaml_event_delete(&key);
			return -1;
		}
		if (have[k]) {
			fail(r, &key.start_mark, "duplicate key \"%s\" (first "
			    "at line %d column %d)", entry_keys[k].name,
			    mark_line(&seen[k]), mark_col(&seen[k]));
			yaml_event_delete(&key);
			return -1;
		}
		have[k] = true;
		seen[k] = key.start_mark;
		yaml_event_delete(&key);
		if (next_event(r, &value) < 0)
			return -1;
		rc = read_value(r, (enum entry_key)k, &value, e);
		yaml_event_delete(&value);
		if (rc < 0)
			return -1;
	}
	for (k = 0; k < ENTRY__COUNT; k++)
		if (entry_keys[k].required && !have[k]) {
			fail(r, &start->start_mark, "missing \"%s\": %s",
			    entry_keys[k].name, entry_keys[k].what);
			return -1;
		}
	return 0;
}

static int
read_entry(struct reader *r, const yaml_event_t *ev)
{
	struct baseline		*b = r->b;
	struct baseline_entry	 e;
	char			 what[TEXT_QUOTE_SIZE + 48];

	if (ev->type != YAML_MAPPING_START_EVENT) {
		describe(what, sizeof what, ev);
		fail(r, &ev->start_mark, "expected an entry, a mapping of "
		    "config, kind, params and reason, got %s", what);
		return -1;
	}
	memset(&e, 0, sizeof e);
	if (read_pairs(r, ev, &e) < 0) {
		entry_free(&e);
		return -1;
	}
	xasprintf(&e.at, "%s:%d:%d", r->path, mark_line(&ev->start_mark),
	    mark_col(&ev->start_mark));
	b->entries = xreallocarray(b->entries, b->n + 1, sizeof *b->entries);
	b->entries[b->n++] = e;
	return 0;
}

/* The document's node, after its first event `ev`: a list of entries. */
static int
read_top(struct reader *r, const yaml_event_t *ev)
{
	yaml_event_t	 item;
	char		 what[TEXT_QUOTE_SIZE + 48];
	int		 rc;

	/* "---" alone, or "~": a baseline without entries. */
	if (is_null(ev))
		return 0;
	if (ev->type != YAML_SEQUENCE_START_EVENT) {
		describe(what, sizeof what, ev);
		fail(r, &ev->start_mark, "expected a list of entries "
		    "(\"- config: ...\"), got %s", what);
		return -1;
	}
	for (;;) {
		if (next_event(r, &item) < 0)
			return -1;
		if (item.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&item);
			return 0;
		}
		rc = read_entry(r, &item);
		yaml_event_delete(&item);
		if (rc < 0)
			return -1;
	}
}

/*
 * The stream: nothing at all (an empty file has no entries), or one
 * document.  A second document is an error rather than ignored: its
 * entries would accept nothing.
 */
static int
read_stream(struct reader *r)
{
	yaml_event_t	 ev;
	int		 rc = -1;

	if (next_event(r, &ev) < 0)		/* stream start */
		return -1;
	yaml_event_delete(&ev);
	if (next_event(r, &ev) < 0)
		return -1;
	if (ev.type == YAML_STREAM_END_EVENT) {
		yaml_event_delete(&ev);
		return 0;
	}
	yaml_event_delete(&ev);			/* document start */
	if (next_event(r, &ev) < 0)
		return -1;
	rc = read_top(r, &ev);
	yaml_event_delete(&ev);
	if (rc < 0 || next_event(r, &ev) < 0)	/* document end */
		return -1;
	yaml_event_delete(&ev);
	if (next_event(r, &ev) < 0)
		return -1;
	if (ev.type != YAML_STREAM_END_EVENT) {
		fail(r, &ev.start_mark, "a baseline is one YAML document: "
		    "join this one to the first");
		rc = -1;
	}
	yaml_event_delete(&ev);
	return rc;
}

static int
read_text(struct reader *r, const char *path, unsigned char **text,
    size_t *len)
{
	FILE		*f;
	unsigned char	*buf = NULL;
	size_t		 cap = 0, n = 0, got;
	int		 saved;

	if ((f = fopen(path, "rb")) == NULL) {
		fail_at(r, 0, 0, "cannot open the baseline: %s",
		    strerror(errno));
		return -1;
	}
	for (;;) {
		if (n == cap) {
			cap = cap == 0 ? 4096 : cap * 2;
			buf = xreallocarray(buf, cap, 1);
		}
		if ((got = fread(buf + n, 1, cap - n, f)) == 0)
			break;
		n += got;
		if (n > BASELINE_MAX_BYTES) {
			fclose(f);
			free(buf);
			fail_at(r, 0, 0, "larger than %d MiB: not a baseline",
			    BASELINE_MAX_BYTES >> 20);
			return -1;
		}
	}
	if (ferror(f)) {
		saved = errno;
		fclose(f);
		free(buf);
		fail_at(r, 0, 0, "cannot read the baseline: %s",
		    strerror(saved));
		return -1;
	}
	fclose(f);
	*text = buf;
	*len = n;
	return 0;
}

int
baseline_load(struct baseline *b, const char *path, const char *today)
{
	struct reader	 r;
	unsigned char	*text = NULL;
	int		 rc;

	memset(b, 0, sizeof *b);
	memset(&r, 0, sizeof r);
	r.path = path;
	r.b = b;
	r.today = today;
	if (read_text(&r, path, &text, &r.len) < 0)
		return -1;
	r.text = text;
	if (!yaml_parser_initialize(&r.parser))
		fatal("yaml_parser_initialize");
	yaml_parser_set_input_string(&r.parser, text, r.len);
	rc = read_stream(&r);
	yaml_parser_delete(&r.parser);
	free(text);
	if (rc < 0) {
		baseline_free(b);
		return -1;
	}
	b->path = xstrdup(path);
	snprintf(b->today, sizeof b->today, "%s", today);
	return 0;
}

void
baseline_free(struct baseline *b)
{
	size_t	 i;

	for (i = 0; i < b->n; i++)
		entry_free(&b->entries[i]);
	free(b->entries);
	free(b->path);
	memset(b, 0, sizeof *b);
}

int
baseline_today(char today[BASELINE_DATE_SIZE])
{
	const char	*env = getenv("SOURCE_DATE_EPOCH");
	char		*end, q[TEXT_QUOTE_SIZE], *line;
	unsigned long long v;
	time_t		 t;
	struct tm	 tm;

	/* Set but empty is taken as unset, as most tools of the convention do. */
	if (env == NULL || *env == '\0')
		t = time(NULL);
	else {
		errno = 0;
		v = strtoull(env, &end, 10);
		if (*env < '0' || *env > '9' || *end != '\0' || errno != 0 ||
		    v > (unsigned long long)INT32_MAX * 64)
			goto bad;
		t = (time_t)v;
	}
	if (gmtime_r(&t, &tm) == NULL || tm.tm_year + 1900 > 9999 ||
	    strftime(today, BASELINE_DATE_SIZE, "%Y-%m-%d", &tm) == 0)
		goto bad;
	return 0;
bad:
	text_escape(q, sizeof q, env != NULL ? env : "", env != NULL ?
	    strlen(env) : 0);
	xasprintf(&line, "%s: SOURCE_DATE_EPOCH \"%s\": expected the seconds "
	    "since 1970-01-01 UTC, which give today's date for the "
	    "baseline's expiry dates", progname, q);
	say(line);
	free(line);
	return -1;
}

/*
 * Matching.
 */

static bool
glob_matches(const char *glob, const char *s)
{
	return s != NULL && fnmatch(glob, s, 0) == 0;
}

static bool
names_config(const struct baseline_entry *e, const char *name,
    const char *file)
{
	return glob_matches(e->config, name) || glob_matches(e->config, file);
}

static bool
any_param_glob(const struct baseline_entry *e, const char *param)
{
	size_t	 i;

	for (i = 0; i < e->nparams; i++)
		if (glob_matches(e->params[i], param))
			return true;
	return false;
}

/* A finding that names no parameter is matched as one named "". */
static bool
entry_matches(const struct baseline_entry *e, const struct finding *f)
{
	size_t	 k;

	if (e->kind != f->kind)
		return false;
	if (e->mechanism != NULL &&
	    !glob_matches(e->mechanism, f->op != NULL ? f->op : ""))
		return false;
	if (f->nparams == 0)
		return any_param_glob(e, f->param != NULL ? f->param : "");
	for (k = 0; k < f->nparams; k++)
		if (!any_param_glob(e, f->params[k]))
			return false;
	return true;
}

/*
 * The first entry that has not expired accepts the finding; an expired
 * one is kept only until then, to say why the finding is not accepted.
 */
static void
mark(struct audit *a, struct finding *f, const struct baseline_entry *e)
{
	if (f->accepted || (f->reason != NULL && e->expired))
		return;
	f->accepted = !e->expired;
	f->reason = arena_strdup(&a->arena, e->reason);
	f->baseline_at = arena_strdup(&a->arena, e->at);
	f->expires = e->expires[0] != '\0' ?
	    arena_strdup(&a->arena, e->expires) : NULL;
}

void
baseline_apply(struct baseline *b, struct audit *a, const char *name,
    const char *file)
{
	bool	*names, *hit;
	size_t	 i, k, nstale = 0;

	if (a->baselined)
		return;
	a->baselined = true;
	names = xcalloc(b->n + 1, sizeof *names);
	hit = xcalloc(b->n + 1, sizeof *hit);
	for (k = 0; k < b->n; k++)
		if ((names[k] = names_config(&b->entries[k], name, file)))
			b->entries[k].configs++;
	for (i = 0; i < a->nfindings; i++)
		for (k = 0; k < b->n; k++) {
			if (!names[k] ||
			    !entry_matches(&b->entries[k], &a->findings[i]))
				continue;
			hit[k] = true;
			b->entries[k].matched++;
			mark(a, &a->findings[i], &b->entries[k]);
		}
	for (k = 0; k < b->n; k++)
		nstale += names[k] && !hit[k];
	a->stale = arena_alloc(&a->arena, (nstale + 1) * sizeof *a->stale);
	for (k = 0; k < b->n; k++)
		if (names[k] && !hit[k])
			a->stale[a->nstale++] = &b->entries[k];
	free(names);
	free(hit);
}

size_t
baseline_report_stale(const struct baseline *b, FILE *fp)
{
	const struct baseline_entry *e;
	char	*line, *out;
	size_t	 k, n = 0, len;

	for (k = 0; k < b->n; k++) {
		e = &b->entries[k];
		if (e->configs == 0 || e->matched > 0)
			continue;
		n++;
		xasprintf(&line, "%s: %s: stale baseline entry: it names %zu "
		    "config%s audited but matches no %s finding of %s; remove "
		    "it if the finding was fixed", progname, e->at, e->configs,
		    e->configs == 1 ? "" : "s", finding_kind_name(e->kind),
		    e->configs == 1 ? "it" : "them");
		out = text_visible(line);
		len = strlen(out);
		out[len] = '\n';
		fwrite(out, 1, len + 1, fp);
		free(out);
		free(line);
	}
	return n;
}

/*
 * The writer of --write-baseline.
 */

/* A glob that matches s alone: fnmatch's special characters escaped. */
static char *
glob_escape(const char *s)
{
	char	*out = xmalloc(2 * strlen(s) + 1), *o = out;

	for (; *s != '\0'; s++) {
		if (strchr("*?[]\\", *s) != NULL)
			*o++ = '\\';
		*o++ = *s;
	}
	*o = '\0';
	return out;
}

static bool
same_draft(const struct baseline_draft_entry *d, const char *config,
    enum finding_kind kind, const char *const *params, size_t nparams)
{
	size_t	 k;

	if (d->kind != kind || d->nparams != nparams ||
	    strcmp(d->config, config) != 0)
		return false;
	for (k = 0; k < nparams; k++)
		if (strcmp(d->params[k], params[k]) != 0)
			return false;
	return true;
}

static void
draft_finding(struct baseline_draft *d, const struct finding *f,
    const char *config)
{
	struct baseline_draft_entry *e;
	char		**params;
	size_t		 k, i, n = f->nparams > 0 ? f->nparams : 1;

	params = xcalloc(n + 1, sizeof *params);
	for (k = 0; k < f->nparams; k++)
		params[k] = glob_escape(f->params[k]);
	/* A finding that names no parameter is matched as "" (any glob). */
	if (f->nparams == 0)
		params[0] = f->param != NULL ? glob_escape(f->param) :
		    xstrdup("*");
	for (i = 0; i < d->n; i++)
		if (same_draft(&d->entries[i], config, f->kind,
		    (const char *const *)params, n))
			break;
	if (i < d->n) {
		for (k = 0; k < n; k++)
			free(params[k]);
		free(params);
		return;
	}
	if (d->n == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 16;
		d->entries = xreallocarray(d->entries, d->cap,
		    sizeof *d->entries);
	}
	e = &d->entries[d->n++];
	memset(e, 0, sizeof *e);
	e->config = xstrdup(config);
	e->kind = f->kind;
	e->params = params;
	e->nparams = n;
	if (f->accepted) {
		e->reason = xstrdup(f->reason);
		e->expires = f->expires != NULL ? xstrdup(f->expires) : NULL;
	}
	e->about = xstrdup(f->message != NULL ? f->message : "");
}

/* Without a config name, an entry names every config. */
void
baseline_draft_add(struct baseline_draft *d, const struct audit *a,
    const char *config)
{
	char	*glob = config != NULL ? glob_escape(config) : xstrdup("*");
	size_t	 i;

	for (i = 0; i < a->nfindings; i++)
		draft_finding(d, &a->findings[i], glob);
	free(glob);
}

/*
 * A YAML double-quoted scalar: '"' and '\' escaped, the line separators
 * as YAML's \L and \P, and what is no printable UTF-8 written as \xNN,
 * so that the file always reads back.
 */
static void
put_quoted(FILE *fp, const char *str)
{
	const unsigned char	*s = (const unsigned char *)str;
	size_t			 len = strlen(str), i = 0, n;

	putc('"', fp);
	while (i < len) {
		if (s[i] == '"' || s[i] == '\\') {
			fprintf(fp, "\\%c", s[i++]);
			continue;
		}
		if (line_separator(s + i, len - i)) {
			fputs(s[i + 2] == 0xa8 ? "\\L" : "\\P", fp);
			i += 3;
			continue;
		}
		if ((n = text_char_len(s + i, len - i)) == 0) {
			fprintf(fp, "\\x%02x", s[i++]);
			continue;
		}
		fwrite(s + i, 1, n, fp);
		i += n;
	}
	putc('"', fp);
}

void
baseline_draft_write(FILE *fp, const struct baseline_draft *d,
    const char *today)
{
	const struct baseline_draft_entry *e;
	char	*about;
	size_t	 i, k;

	fprintf(fp, "# The findings of %s, written by gradaudit "
	    "--write-baseline: each entry\n"
	    "# accepts one of them as it is today.  Say in each reason why it "
	    "is accepted,\n"
	    "# and add \"expires: YYYY-MM-DD\" to look at it again on that "
	    "day.\n"
	    "# The file's format is in gradaudit-baseline(5).\n", today);
	if (d->n == 0)
		fputs("[]\n", fp);
	for (i = 0; i < d->n; i++) {
		e = &d->entries[i];
		about = text_visible(e->about);
		fprintf(fp, "\n# %s\n- config: ", about);
		free(about);
		put_quoted(fp, e->config);
		fprintf(fp, "\n  kind: %s\n  params:\n",
		    finding_kind_name(e->kind));
		for (k = 0; k < e->nparams; k++) {
			fputs("    - ", fp);
			put_quoted(fp, e->params[k]);
			putc('\n', fp);
		}
		fputs("  reason: ", fp);
		if (e->reason != NULL)
			put_quoted(fp, e->reason);
		else
			fprintf(fp, "\"to be given: found on %s\"", today);
		putc('\n', fp);
		if (e->expires != NULL)
			fprintf(fp, "  expires: %s\n", e->expires);
	}
}

void
baseline_draft_free(struct baseline_draft *d)
{
	size_t	 i, k;

	for (i = 0; i < d->n; i++) {
		free(d->entries[i].config);
		for (k = 0; k < d->entries[i].nparams; k++)
			free(d->entries[i].params[k]);
		free(d->entries[i].params);
		free(d->entries[i].reason);
		free(d->entries[i].expires);
		free(d->entries[i].about);
	}
	free(d->entries);
	memset(d, 0, sizeof *d);
}
