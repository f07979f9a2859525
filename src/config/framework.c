/*
 * Framework profile files: finding them, reading them, and resolving
 * "NAME@VERSION" to the profile of that release (see framework.h).
 *
 * A profile file is read with the same strictness as a configuration:
 * every error names file:line:col and makes the command exit 2, and a
 * profile that sets a key without saying which commit it was read from is
 * an error, so that no rule enters the audit uncited.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "base/text.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/framework.h"
#include "config/reader.h"

#ifndef PKGDATADIR
#define PKGDATADIR "/usr/local/share/gradaudit"
#endif

/* Longest profile file read: they are a few kilobytes. */
#define FW_MAX_FILE_BYTES	(1 << 20)
#define FW_MAX_FRAMEWORKS	64
#define FW_MAX_PROFILES		256

struct fw_registry {
	struct framework	*v;
	int			 n;		/* -1: not read yet */
	char			*dir;		/* where they were read */
	/* The directory or a profile file did not load: said once. */
	bool			 failed;
};

const char *
fw_dir(void)
{
	const char	*env = getenv("GRADAUDIT_FRAMEWORKS");
#if defined(GA_BUILD_DIR) && defined(GA_SOURCE_FRAMEWORKS)
	char		 exe[PATH_MAX], *slash;
	ssize_t		 n;
#endif

	if (env != NULL && *env != '\0')
		return env;
#if defined(GA_BUILD_DIR) && defined(GA_SOURCE_FRAMEWORKS)
	/*
	 * Run from its build tree (src/gradaudit, as the README does), the
	 * program reads the profiles of its source tree: the installed ones
	 * may be of another version, or absent.
	 */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL)
			*slash = '\0';
		if (strcmp(exe, GA_BUILD_DIR) == 0)
			return GA_SOURCE_FRAMEWORKS;
	}
#endif
	return PKGDATADIR "/frameworks";
}

static bool	is_date(const char *);

/*
 * Versions.
 */

int
fw_version_parse(const char *s, struct fw_version *v)
{
	/*
	 * Release tags; not a bare "v", which the Megatron-LM repository uses
	 * for its own, older releases (v2.6 is from 2021).
	 */
	static const char *const prefixes[] = { "core_v", "core_r" };
	int	*part[3] = { &v->major, &v->minor, &v->patch };
	size_t	 i;
	long	 n;
	char	*end;

	memset(v, 0, sizeof(*v));
	if (strcmp(s, "main") == 0) {
		v->main = true;
		return 0;
	}
	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(s, prefixes[i], strlen(prefixes[i])) == 0 &&
		    isdigit((unsigned char)s[strlen(prefixes[i])])) {
			s += strlen(prefixes[i]);
			break;
		}
	for (i = 0; i < 3; i++) {
		if (!isdigit((unsigned char)*s))
			return -1;
		errno = 0;
		n = strtol(s, &end, 10);
		if (errno != 0 || n > 99999)
			return -1;
		*part[i] = (int)n;
		s = end;
		/* "0.5" is 0.5.0; after the patch, a suffix may follow. */
		if (*s != '.' || i == 2)
			break;
		if (!isdigit((unsigned char)s[1]))
			break;
		s++;
	}
	if (i == 0)
		return -1;
	/*
	 * A pre-release: 0.9.0rc1, 0.9.0-rc1, 0.7.0.beta.  Build metadata
	 * ("+local") is the release itself.
	 */
	if (*s == '.' || *s == '-' || isalpha((unsigned char)*s)) {
		v->pre = true;
		s += *s == '.' || *s == '-';
		/* Only after a full MAJOR.MINOR.PATCH, and a word: rc1, beta. */
		if (i < 2 || !isalpha((unsigned char)*s))
			return -1;
		while (isalnum((unsigned char)*s) || *s == '.')
			s++;
	}
	if (*s == '+') {
		if (!isalnum((unsigned char)s[1]))
			return -1;
		return 0;
	}
	return *s == '\0' ? 0 : -1;
}

int
fw_version_cmp(const struct fw_version *a, const struct fw_version *b)
{
	if (a->main != b->main)
		return a->main ? 1 : -1;
	if (a->major != b->major)
		return a->major < b->major ? -1 : 1;
	if (a->minor != b->minor)
		return a->minor < b->minor ? -1 : 1;
	if (a->patch != b->patch)
		return a->patch < b->patch ? -1 : 1;
	return 0;
}

void
fw_version_format(const struct fw_version *v, char *buf, size_t len)
{
	if (v->main)
		snprintf(buf, len, "main");
	else
		snprintf(buf, len, "%d.%d.%d", v->major, v->minor, v->patch);
}

void
fw_profile_range(const struct fw_profile *p, char *buf, size_t len)
{
	const struct framework	*fw = p->framework;
	const struct fw_profile	*next = p + 1;
	char			 a[32], b[32];

	fw_version_format(&p->since, a, sizeof(a));
	/* A window: "de329200b to e1847f439^", "ecae62f15 and later, main". */
	if (p->since.main && p->commit != NULL) {
		if (next < fw->profiles + fw->nprofiles)
			snprintf(buf, len, "%s to %s^", p->commit,
			    next->commit);
		else
			snprintf(buf, len, "%s and later, main", p->commit);
		return;
	}
	if (p->since.main) {
		snprintf(buf, len, "main");
		return;
	}
	if (next < fw->profiles + fw->nprofiles && !next->since.main) {
		/* Up to the release before the next profile's. */
		if (next->since.patch > 0)
			snprintf(b, sizeof(b), "%d.%d.%d", next->since.major,
			    next->since.minor, next->since.patch - 1);
		else if (next->since.minor > 0)
			snprintf(b, sizeof(b), "%d.%d.x", next->since.major,
			    next->since.minor - 1);
		else
			snprintf(b, sizeof(b), "%d.x", next->since.major - 1);
		snprintf(buf, len, "%s - %s", a, b);
		return;
	}
	fw_version_format(&fw->latest, b, sizeof(b));
	if (next < fw->profiles + fw->nprofiles)
		snprintf(buf, len, "%s - %s", a, b);
	else if (fw_version_cmp(&p->since, &fw->latest) == 0)
		snprintf(buf, len, "%s and later, main", a);
	else
		snprintf(buf, len, "%s - %s and later, main", a, b);
}

bool
fw_profile_window(const struct fw_profile *p, char *buf, size_t len)
{
	const struct framework	*fw = p->framework;
	const struct fw_history	*h = fw->history;
	const struct fw_profile	*next = p + 1;
	const struct fw_commit	*a, *b;

	buf[0] = '\0';
	if (p->first < 0 || h == NULL)
		return false;
	a = &h->commits[p->first];
	if (next < fw->profiles + fw->nprofiles) {
		b = &h->commits[next->first - 1];
		snprintf(buf, len, "%.10s (%s) to %.10s (%s)", a->hash,
		    a->date, b->hash, b->date);
	} else {
		b = &h->commits[h->ncommits - 1];
		snprintf(buf, len, "%.10s (%s) to %.10s (%s), the newest "
		    "commit read", a->hash, a->date, b->hash, b->date);
	}
	return true;
}

void
fw_newest_read(const struct fw_profile *p, const char *spec, char *buf,
    size_t len)
{
	const struct framework	*fw = p->framework;
	const struct fw_commit	*c;
	const char		*at = strchr(spec, '@');
	char			 v[32];

	if (at != NULL && is_date(at + 1) && fw->history != NULL) {
		c = &fw->history->commits[fw->history->ncommits - 1];
		snprintf(buf, len, "the newest commit of %s main read, %.10s "
		    "(%s)", fw->name, c->hash, c->date);
		return;
	}
	fw_version_format(&fw->latest, v, sizeof(v));
	snprintf(buf, len, "%s %s, the newest release the profiles were "
	    "checked against", fw->name, v);
}

/*
 * Reading a profile file.
 */

struct reader {
	const char		*path;
	unsigned char		*text;	/* the whole file, len bytes */
	size_t			 len;
	yaml_parser_t		 parser;
	bool			 failed;
};

static void
fail(struct reader *r, const yaml_mark_t *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
fail(struct reader *r, const yaml_mark_t *m, const char *fmt, ...)
{
	va_list	 ap;
	char	 msg[512];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m != NULL)
		fprintf(stderr, "%s: %s:%zu:%zu: %s\n", progname, r->path,
		    m->line + 1, m->column + 1, msg);
	else
		fprintf(stderr, "%s: %s: %s\n", progname, r->path, msg);
	r->failed = true;
}

static int
next(struct reader *r, yaml_event_t *ev)
{
	const yaml_parser_t	*p = &r->parser;
	struct cfg_mark		 cm;
	yaml_mark_t		 m = p->problem_mark;

	if (yaml_parser_parse(&r->parser, ev))
		return 0;
	if (p->error == YAML_MEMORY_ERROR) {
		errno = ENOMEM;
		fatal("libyaml");
	}
	/*
	 * An encoding error has an offset, not a mark, and was reported at
	 * 1:1 (issue 26); as config.c reports one, with the byte.
	 */
	if (p->error == YAML_READER_ERROR) {
		cm = cfg_offset_mark(r->text, r->len, p->problem_offset);
		m.line = (size_t)cm.line - 1;
		m.column = (size_t)cm.col - 1;
		if (p->problem_value != -1) {
			fail(r, &m, "%s (#%X)", p->problem,
			    (unsigned)p->problem_value);
			return -1;
		}
	}
	fail(r, &m, "%s", p->problem != NULL ? p->problem : "invalid YAML");
	return -1;
}

/* Read the event that must open a mapping or a list, or say what was due. */
static int
expect_start(struct reader *r, yaml_event_type_t type, const char *what)
{
	yaml_event_t	 ev;

	if (next(r, &ev) == -1)
		return -1;
	if (ev.type != type) {
		fail(r, &ev.start_mark, "%s", what);
		yaml_event_delete(&ev);
		return -1;
	}
	yaml_event_delete(&ev);
	return 0;
}

static bool
is_key(const yaml_event_t *ev, const char *name)
{
	return ev->type == YAML_SCALAR_EVENT &&
	    ev->data.scalar.length == strlen(name) &&
	    memcmp(ev->data.scalar.value, name, ev->data.scalar.length) == 0;
}

/* A one-line scalar value, xmalloc'd; *at, when given, is where it is. */
static char *
read_string_at(struct reader *r, const char *key, yaml_mark_t *at)
{
	yaml_event_t	 ev;
	char		*s = NULL;
	size_t		 i;

	if (next(r, &ev) == -1)
		return NULL;
	if (at != NULL)
		*at = ev.start_mark;
	if (ev.type != YAML_SCALAR_EVENT || ev.data.scalar.length == 0) {
		fail(r, &ev.start_mark, "%s: expected a one-line string", key);
		yaml_event_delete(&ev);
		return NULL;
	}
	for (i = 0; i < ev.data.scalar.length; i++)
		if (ev.data.scalar.value[i] < 0x20) {
			fail(r, &ev.start_mark, "%s: expected one line", key);
			yaml_event_delete(&ev);
			return NULL;
		}
	s = xmalloc(ev.data.scalar.length + 1);
	memcpy(s, ev.data.scalar.value, ev.data.scalar.length);
	s[ev.data.scalar.length] = '\0';
	yaml_event_delete(&ev);
	return s;
}

static char *
read_string(struct reader *r, const char *key)
{
	return read_string_at(r, key, NULL);
}

static int
read_version(struct reader *r, const char *key, struct fw_version *v)
{
	yaml_mark_t	 m = r->parser.mark;
	char		*s;
	int		 rc;

	if ((s = read_string(r, key)) == NULL)
		return -1;
	if ((rc = fw_version_parse(s, v)) == -1)
		fail(r, &m, "%s: \"%s\" is not a version (MAJOR.MINOR.PATCH "
		    "or main)", key, s);
	free(s);
	return rc;
}

static enum cfg_key
key_by_path(const char *path)
{
	int	 k;

	for (k = 0; k < KEY__COUNT; k++)
		if (strcmp(cfg_key_path(k), path) == 0)
			return (enum cfg_key)k;
	return KEY__COUNT;
}

/* sources: a mapping of key path -> where it was read. */
static int
read_sources(struct reader *r, struct fw_profile *p)
{
	yaml_event_t	 ev;
	enum cfg_key	 k;
	char		*path;

	if (expect_start(r, YAML_MAPPING_START_EVENT, "sources: expected a "
	    "mapping of keys to the commit and code each was read from") == -1)
		return -1;
	for (;;) {
		if (next(r, &ev) == -1)
			return -1;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		if (ev.type != YAML_SCALAR_EVENT) {
			fail(r, &ev.start_mark, "sources: expected a key path");
			yaml_event_delete(&ev);
			return -1;
		}
		path = xmalloc(ev.data.scalar.length + 1);
		memcpy(path, ev.data.scalar.value, ev.data.scalar.length);
		path[ev.data.scalar.length] = '\0';
		k = key_by_path(path);
		if (k == KEY__COUNT || !keyset_has(&p->settings.given, k) ||
		    p->source[k] != NULL) {
			fail(r, &ev.start_mark, "sources: %s: %s", path,
			    k == KEY__COUNT ? "unknown key" :
			    p->source[k] != NULL ? "cited twice" :
			    "not set by this profile's config");
			free(path);
			yaml_event_delete(&ev);
			return -1;
		}
		free(path);
		yaml_event_delete(&ev);
		if ((p->source[k] = read_string(r, cfg_key_path(k))) == NULL)
			return -1;
	}
}

/*
 * The main history, frameworks/NAME.commits next to NAME.yaml: comment
 * lines, then "base RELEASE HASH DATE", then "HASH DATE" per commit, as
 * scripts/main-commits writes it.  Read before the profiles, whose
 * commit: keys it resolves; an error names the history's file:line:col.
 */
static bool
is_date(const char *s)
{
	int	 i, month, day;

	for (i = 0; i < 10; i++)
		if (i == 4 || i == 7 ? s[i] != '-' :
		    !isdigit((unsigned char)s[i]))
			return false;
	if (s[10] != '\0')
		return false;
	month = (s[5] - '0') * 10 + (s[6] - '0');
	day = (s[8] - '0') * 10 + (s[9] - '0');
	return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

static bool
is_hex(const char *s, size_t min, size_t max)
{
	size_t	 n;

	for (n = 0; s[n] != '\0'; n++)
		if (!isdigit((unsigned char)s[n]) && (s[n] < 'a' || s[n] > 'f'))
			return false;
	return n >= min && n <= max;
}

/* One "HASH DATE" pair from the words at w. */
static int
history_commit(struct reader *r, yaml_mark_t *m, char **w,
    struct fw_commit *c)
{
	if (w[0] == NULL || !is_hex(w[0], 40, 40)) {
		fail(r, m, "expected a full commit hash (40 hex digits)");
		return -1;
	}
	if (w[1] == NULL || !is_date(w[1]) || w[2] != NULL) {
		fail(r, m, "expected the commit's date, YYYY-MM-DD, and no more");
		return -1;
	}
	memcpy(c->hash, w[0], 41);
	memcpy(c->date, w[1], 11);
	return 0;
}

static int
read_history(struct reader *r, struct fw_history *h)
{
	FILE		*f;
	char		 line[256], *w[5], *save;
	yaml_mark_t	 m;
	size_t		 lineno = 0;
	int		 n;

	memset(&m, 0, sizeof(m));
	if ((f = fopen(r->path, "r")) == NULL) {
		fail(r, NULL, "cannot open: %s", strerror(errno));
		return -1;
	}
	h->file = xstrdup(r->path);
	while (!r->failed && fgets(line, sizeof(line), f) != NULL) {
		m.line = lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			fail(r, &m, "line too long");
			break;
		}
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		for (n = 0, save = NULL; n < 5; n++)
			w[n] = strtok_r(n == 0 ? line : NULL, " \t", &save);
		if (h->release == NULL) {
			if (w[0] == NULL || strcmp(w[0], "base") != 0 ||
			    w[1] == NULL) {
				fail(r, &m, "expected \"base RELEASE HASH "
				    "DATE\" first");
				break;
			}
			h->release = xstrdup(w[1]);
			history_commit(r, &m, w + 2, &h->base);
			continue;
		}
		h->commits = xreallocarray(h->commits, h->ncommits + 1,
		    sizeof(*h->commits));
		if (history_commit(r, &m, w, &h->commits[h->ncommits]) == 0)
			h->ncommits++;
	}
	if (!r->failed && ferror(f))
		fail(r, NULL, "cannot read: %s", strerror(errno));
	if (!r->failed && h->ncommits == 0)
		fail(r, NULL, "no base line and commits: not a main history "
		    "(write it with scripts/main-commits)");
	fclose(f);
	return r->failed ? -1 : 0;
}

static void
history_free(struct fw_history *h)
{
	if (h == NULL)
		return;
	free(h->file);
	free(h->release);
	free(h->commits);
	free(h);
}

int
fw_history_find(const struct fw_history *h, const char *s)
{
	size_t	 len = strlen(s);
	int	 i, found = -1;

	for (i = 0; i < h->ncommits; i++)
		if (strncmp(h->commits[i].hash, s, len) == 0) {
			if (found >= 0)
				return -2;
			found = i;
		}
	return found;
}

/* A window's commit: key, found in the history read before the profiles. */
static int
read_commit(struct reader *r, struct framework *fw, struct fw_profile *p)
{
	yaml_mark_t	 m;

	if ((p->commit = read_string_at(r, "commit", &m)) == NULL)
		return -1;
	if (fw->history == NULL) {
		fail(r, &m, "commit: no main history next to this file "
		    "(write one with scripts/main-commits)");
		return -1;
	}
	if (!is_hex(p->commit, 7, 40)) {
		fail(r, &m, "commit: \"%s\" is not 7 to 40 lowercase hex "
		    "digits", p->commit);
		return -1;
	}
	p->first = fw_history_find(fw->history, p->commit);
	if (p->first < 0) {
		fail(r, &m, "commit: %s is %s of main's first-parent commits "
		    "after %s in %s", p->commit, p->first == -1 ? "none" :
		    "more than one", fw->history->release,
		    fw->history->file);
		return -1;
	}
	return 0;
}

/*
 * One profile: its own settings are read into a fresh config, checked for
 * sources, then laid over a copy of the previous profile's.
 */
static int
read_profile(struct reader *r, struct framework *fw, const yaml_mark_t *at)
{
	struct fw_profile	*p, *prev;
	struct config		 own;
	yaml_event_t		 ev;
	bool			 has_since = false, has_config = false;
	int			 k, rc = -1;

	if (fw->nprofiles == FW_MAX_PROFILES) {
		fail(r, at, "more than %d profiles", FW_MAX_PROFILES);
		return -1;
	}
	fw->profiles = xreallocarray(fw->profiles, fw->nprofiles + 1,
	    sizeof(*fw->profiles));
	p = &fw->profiles[fw->nprofiles++];
	memset(p, 0, sizeof(*p));
	p->first = -1;
	memset(&own, 0, sizeof(own));
	prev = fw->nprofiles > 1 ? p - 1 : NULL;
	for (;;) {
		if (next(r, &ev) == -1)
			goto out;
		if (ev.type == YAML_MAPPING_END_EVENT)
			break;
		if ((is_key(&ev, "label") && p->label != NULL) ||
		    (is_key(&ev, "summary") && p->summary != NULL) ||
		    (is_key(&ev, "read_at") && p->read_at != NULL) ||
		    (is_key(&ev, "commit") && p->commit != NULL) ||
		    (is_key(&ev, "since") && has_since) ||
		    (is_key(&ev, "config") && has_config)) {
			fail(r, &ev.start_mark, "duplicate key in a profile");
			yaml_event_delete(&ev);
			goto out;
		}
		if (is_key(&ev, "label"))
			p->label = read_string(r, "label");
		else if (is_key(&ev, "summary"))
			p->summary = read_string(r, "summary");
		else if (is_key(&ev, "read_at"))
			p->read_at = read_string(r, "read_at");
		else if (is_key(&ev, "commit")) {
			if (read_commit(r, fw, p) == -1)
				r->failed = true;
		}
		else if (is_key(&ev, "since")) {
			has_since = true;
			if (read_version(r, "since", &p->since) == -1)
				r->failed = true;
		} else if (is_key(&ev, "config")) {
			yaml_event_delete(&ev);
			if (next(r, &ev) == -1)
				goto out;
			if (ev.type != YAML_MAPPING_START_EVENT) {
				fail(r, &ev.start_mark, "config: expected a "
				    "mapping of configuration keys");
				yaml_event_delete(&ev);
				goto out;
			}
			has_config = true;
			if (cfg_load_settings(&r->parser, r->path, r->text,
			    r->len, &own) == -1)
				r->failed = true;
			/* What sources: checks is this profile's own keys. */
			p->settings.given = own.given;
		} else if (is_key(&ev, "sources")) {
			if (!has_config) {
				fail(r, &ev.start_mark, "sources: must follow "
				    "config");
				yaml_event_delete(&ev);
				goto out;
			}
			if (read_sources(r, p) == -1)
				r->failed = true;
		} else {
			fail(r, &ev.start_mark, "unknown key in a profile "
			    "(valid: label, summary, since, commit, read_at, "
			    "config, sources)");
			yaml_event_delete(&ev);
			goto out;
		}
		yaml_event_delete(&ev);
		if (r->failed)
			goto out;
	}
	if (p->label == NULL || p->read_at == NULL || !has_since) {
		fail(r, at, "a profile needs label, since and read_at");
		goto out;
	}
	/*
	 * Windows of main are ordered by their first commits in the main
	 * history, which is what resolves a commit or a date to one of them.
	 */
	if ((p->commit != NULL) != p->since.main) {
		fail(r, at, "profile %s: a window of main needs since: main "
		    "and commit:, a release neither", p->label);
		goto out;
	}
	if (prev != NULL && prev->since.main && p->since.main ?
	    prev->first >= p->first :
	    prev != NULL && fw_version_cmp(&prev->since, &p->since) >= 0) {
		fail(r, at, "profile %s: %s must be later than profile %s's",
		    p->label, p->since.main ? "commit" : "since", prev->label);
		goto out;
	}
	for (k = 0; k < KEY__COUNT; k++)
		if (keyset_has(&own.given, k) && cfg_key_is_setting(k) &&
		    p->source[k] == NULL) {
			fail(r, at, "profile %s sets %s without citing the "
			    "commit it was read from (add it to sources)",
			    p->label, cfg_key_path(k));
			goto out;
		}
	/* Cumulative: the previous profile's settings, then this one's. */
	memset(&p->settings, 0, sizeof(p->settings));
	if (prev != NULL) {
		cfg_merge_settings(&p->settings, &prev->settings, false);
		for (k = 0; k < KEY__COUNT; k++)
			if (p->source[k] == NULL && prev->source[k] != NULL)
				p->source[k] = xstrdup(prev->source[k]);
	}
	cfg_merge_settings(&p->settings, &own, false);
	p->framework = fw;
	rc = 0;
out:
	yaml_event_delete(&ev);
	cfg_free(&own);
	return rc;
}

static int
read_profiles(struct reader *r, struct framework *fw)
{
	yaml_event_t	 ev;

	if (expect_start(r, YAML_SEQUENCE_START_EVENT,
	    "profiles: expected a list of profiles") == -1)
		return -1;
	for (;;) {
		if (next(r, &ev) == -1)
			return -1;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		if (ev.type != YAML_MAPPING_START_EVENT) {
			fail(r, &ev.start_mark, "profiles: expected a mapping");
			yaml_event_delete(&ev);
			return -1;
		}
		if (read_profile(r, fw, &ev.start_mark) == -1) {
			yaml_event_delete(&ev);
			return -1;
		}
		yaml_event_delete(&ev);
	}
}

void
fw_free(struct framework *fw)
{
	int	 i, k;

	for (i = 0; i < fw->nprofiles; i++) {
		struct fw_profile *p = &fw->profiles[i];

		free(p->label);
		free(p->summary);
		free(p->read_at);
		free(p->commit);
		cfg_free(&p->settings);
		for (k = 0; k < KEY__COUNT; k++)
			free(p->source[k]);
	}
	free(fw->profiles);
	history_free(fw->history);
	free(fw->name);
	free(fw->file);
	free(fw->description);
	memset(fw, 0, sizeof(*fw));
}

/*
 * The whole file in memory, which the messages need for the place of an
 * encoding error (cfg_offset_mark).
 */
static int
read_text(struct reader *r)
{
	FILE	*f;
	int	 saved;

	if ((f = fopen(r->path, "rb")) == NULL) {
		fail(r, NULL, "cannot open: %s", strerror(errno));
		return -1;
	}
	r->text = xmalloc(FW_MAX_FILE_BYTES + 1);
	r->len = fread(r->text, 1, FW_MAX_FILE_BYTES + 1, f);
	saved = errno;
	if (ferror(f))
		fail(r, NULL, "cannot read: %s", strerror(saved));
	else if (r->len > FW_MAX_FILE_BYTES)
		fail(r, NULL, "larger than %d MiB: not a profile file",
		    FW_MAX_FILE_BYTES >> 20);
	fclose(f);
	if (r->failed) {
		free(r->text);
		r->text = NULL;
		return -1;
	}
	return 0;
}

/*
 * The keys of a profile file's top-level mapping.  A second one of them
 * is an error, as it is in a configuration: the later one won, and the
 * first one's strings leaked (issue 26).
 */
static const char *const top_keys[] = {
	"framework", "description", "latest", "profiles"
};
#define NTOP_KEYS	(sizeof(top_keys) / sizeof(top_keys[0]))

/*
 * True, after the message, when ev is a top-level key already read; else
 * it is marked read, where it is.
 */
static bool
seen_before(struct reader *r, const yaml_event_t *ev, bool seen[NTOP_KEYS],
    yaml_mark_t first[NTOP_KEYS])
{
	size_t	 i;

	for (i = 0; i < NTOP_KEYS; i++) {
		if (!is_key(ev, top_keys[i]))
			continue;
		if (!seen[i]) {
			seen[i] = true;
			first[i] = ev->start_mark;
			return false;
		}
		fail(r, &ev->start_mark, "duplicate key \"%s\" (first at line "
		    "%zu column %zu)", top_keys[i], first[i].line + 1,
		    first[i].column + 1);
		return true;
	}
	return false;
}

/*
 * NAME.commits next to NAME.yaml, when there is one: 0 with fw->history
 * set or left NULL, or -1 after the message.
 */
static int
load_history(const char *path, struct framework *fw)
{
	struct reader	 h;
	size_t		 len = strlen(path);
	char		*hpath;
	int		 rc = 0;

	if (len < 5 || strcmp(path + len - 5, ".yaml") != 0)
		return 0;
	xasprintf(&hpath, "%.*s.commits", (int)(len - 5), path);
	if (access(hpath, F_OK) == 0) {
		memset(&h, 0, sizeof(h));
		h.path = hpath;
		fw->history = xcalloc(1, sizeof(*fw->history));
		if ((rc = read_history(&h, fw->history)) == -1) {
			history_free(fw->history);
			fw->history = NULL;
		}
	}
	free(hpath);
	return rc;
}

int
fw_read(const char *path, struct framework *fw)
{
	struct reader	 r;
	yaml_event_t	 ev;
	yaml_mark_t	 first[NTOP_KEYS], top;
	bool		 has_latest = false, seen[NTOP_KEYS];
	int		 depth = 0;

	memset(fw, 0, sizeof(*fw));
	memset(&r, 0, sizeof(r));
	memset(seen, 0, sizeof(seen));
	r.path = path;
	if (read_text(&r) == -1)
		return -1;
	fw->file = xstrdup(path);
	if (load_history(path, fw) == -1) {
		free(r.text);
		fw_free(fw);
		return -1;
	}
	if (!yaml_parser_initialize(&r.parser))
		fatal("yaml_parser_initialize");
	yaml_parser_set_input_string(&r.parser, r.text, r.len);
	/* Stream start, document start, the top-level mapping. */
	for (depth = 0; depth < 3; depth++) {
		if (next(&r, &ev) == -1)
			goto out;
		if (depth == 2 && ev.type != YAML_MAPPING_START_EVENT) {
			fail(&r, &ev.start_mark, "expected a mapping with "
			    "framework, latest and profiles");
			yaml_event_delete(&ev);
			goto out;
		}
		top = ev.start_mark;
		yaml_event_delete(&ev);
	}
	for (;;) {
		if (next(&r, &ev) == -1)
			goto out;
		if (ev.type == YAML_MAPPING_END_EVENT)
			break;
		if (seen_before(&r, &ev, seen, first)) {
			yaml_event_delete(&ev);
			goto out;
		}
		if (is_key(&ev, "framework"))
			fw->name = read_string(&r, "framework");
		else if (is_key(&ev, "description"))
			fw->description = read_string(&r, "description");
		else if (is_key(&ev, "latest")) {
			has_latest = true;
			read_version(&r, "latest", &fw->latest);
		} else if (is_key(&ev, "profiles"))
			read_profiles(&r, fw);
		else
			fail(&r, &ev.start_mark, "unknown key (valid: "
			    "framework, description, latest, profiles)");
		yaml_event_delete(&ev);
		if (r.failed)
			goto out;
	}
	yaml_event_delete(&ev);
	/*
	 * Where the mapping that lacks them starts, as config.c names the
	 * document that lacks its mesh: an error with no line and column
	 * was the one exception to file:line:col in a profile file.
	 */
	if (fw->name == NULL || !has_latest || fw->nprofiles == 0)
		fail(&r, &top, "a profile file needs framework, latest and "
		    "at least one profile");
out:
	yaml_parser_delete(&r.parser);
	free(r.text);
	if (r.failed) {
		fw_free(fw);
		return -1;
	}
	return 0;
}

struct fw_registry *
fw_registry_open(void)
{
	struct fw_registry	*reg = xcalloc(1, sizeof(*reg));

	reg->n = -1;
	return reg;
}

void
fw_registry_close(struct fw_registry *reg)
{
	int	 i;

	if (reg == NULL)
		return;
	for (i = 0; i < reg->n; i++)
		fw_free(&reg->v[i]);
	free(reg->v);
	free(reg->dir);
	free(reg);
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
fw_all(struct fw_registry *reg, const struct framework **out)
{
	DIR		*d;
	struct dirent	*de;
	char		*names[FW_MAX_FRAMEWORKS], *path;
	size_t		 len;
	int		 n = 0, i, rc = 0;

	if (reg->failed)
		return -1;
	if (reg->n >= 0) {
		*out = reg->v;
		return reg->n;
	}
	reg->dir = xstrdup(fw_dir());
	/*
	 * A directory that does not open fails every later call too, as a
	 * broken file does below: the line was printed again for every
	 * config of a batch that names a framework.
	 */
	if ((d = opendir(reg->dir)) == NULL) {
		fprintf(stderr, "%s: %s: cannot read the framework profiles: "
		    "%s (set GRADAUDIT_FRAMEWORKS to their directory)\n",
		    progname, reg->dir, strerror(errno));
		free(reg->dir);
		reg->dir = NULL;
		reg->failed = true;
		return -1;
	}
	while ((de = readdir(d)) != NULL && n < FW_MAX_FRAMEWORKS) {
		len = strlen(de->d_name);
		if (len > 5 && de->d_name[0] != '.' &&
		    strcmp(de->d_name + len - 5, ".yaml") == 0)
			names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), by_name);
	/*
	 * Read once.  After a file that did not load, every later call fails
	 * too (its diagnostic was printed once, here): the next config of a
	 * batch was told its framework was unknown, "one of none", from the
	 * frameworks read before the broken file.
	 */
	reg->v = xcalloc(n > 0 ? n : 1, sizeof(*reg->v));
	reg->n = 0;
	for (i = 0; i < n; i++) {
		xasprintf(&path, "%s/%s", reg->dir, names[i]);
		if (rc == 0 && fw_read(path, &reg->v[reg->n]) == 0)
			reg->n++;
		else
			rc = -1;
		free(path);
		free(names[i]);
	}
	if (rc == -1) {
		reg->failed = true;
		return -1;
	}
	*out = reg->v;
	return reg->n;
}

/* "megatron-core (0.1.0 - 0.19.0, main), torchtitan (...)" */
static void
list_known(char *buf, size_t len, const struct fw_registry *reg,
    const struct framework *fws, int n)
{
	char	 a[32], b[32];
	size_t	 used;
	int	 i;

	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		fw_version_format(&fws[i].profiles[0].since, a, sizeof(a));
		fw_version_format(&fws[i].latest, b, sizeof(b));
		used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s@%s to %s (or main)",
		    i > 0 ? ", " : "", fws[i].name, a, b);
	}
	if (n == 0)
		snprintf(buf, len, "none in %s", reg->dir);
}

/*
 * The profile that models the code of main's commit at index i of the
 * history: the newest window starting at or before it, or, before the
 * first window, the newest release profile, whose code main kept until
 * then.
 */
static const struct fw_profile *
window_of(const struct framework *fw, int i)
{
	const struct fw_profile	*p;

	for (p = &fw->profiles[fw->nprofiles - 1]; p > fw->profiles; p--)
		if (!p->since.main || p->first <= i)
			break;
	return p;
}

/* NAME@COMMIT: 7 to 40 hex digits of a commit of the history. */
static const struct fw_profile *
resolve_commit(const struct framework *fw, const char *q, const char *s,
    char *err, size_t errlen)
{
	const struct fw_history	*h = fw->history;
	int			 i = fw_history_find(h, s);

	if (i == -2) {
		snprintf(err, errlen, "%s@%s: more than one commit of %s main "
		    "starts with %s: give more digits", fw->name, q, fw->name,
		    q);
		return NULL;
	}
	if (i == -1) {
		snprintf(err, errlen, "%s@%s: not a first-parent commit of %s "
		    "main after %s (%s, read up to %.10s of %s): name a "
		    "commit of main's first-parent history, a date or a "
		    "release", fw->name, q, fw->name, h->release, h->file,
		    h->commits[h->ncommits - 1].hash,
		    h->commits[h->ncommits - 1].date);
		return NULL;
	}
	return window_of(fw, i);
}

/* The newest commit of h dated on or before day s, or -1. */
static int
history_by_date(const struct fw_history *h, const char *s)
{
	int	 i, last = -1;

	for (i = 0; i < h->ncommits; i++)
		if (strcmp(h->commits[i].date, s) <= 0)
			last = i;
	return last;
}

int
fw_history_at(const struct fw_profile *p, const char *spec)
{
	const struct fw_history	*h = p->framework->history;
	const char		*at = strchr(spec, '@');
	int			 i;

	if (p->first < 0 || h == NULL || at == NULL)
		return p->first;
	if (is_date(at + 1) && (i = history_by_date(h, at + 1)) >= 0)
		return i;
	if (is_hex(at + 1, 7, 40) && (i = fw_history_find(h, at + 1)) >= 0)
		return i;
	return p->first;
}

/*
 * NAME@YYYY-MM-DD: the window in effect at the end of that day, that of
 * the newest commit of main dated on or before it (by the history's order:
 * committer dates are not always in it).
 */
static const struct fw_profile *
resolve_date(const struct framework *fw, const char *s, bool *newer,
    char *err, size_t errlen)
{
	const struct fw_history	*h = fw->history;
	int			 last;

	if (strcmp(s, h->base.date) < 0) {
		snprintf(err, errlen, "%s@%s: before %s main's history, which "
		    "starts where main forked from %s (%s): name a release "
		    "instead", fw->name, s, fw->name, h->release,
		    h->base.date);
		return NULL;
	}
	last = history_by_date(h, s);
	/* A later day may have commits not read: as a newer release. */
	if (strcmp(s, h->commits[h->ncommits - 1].date) > 0)
		*newer = true;
	return window_of(fw, last);
}

const struct fw_profile *
fw_resolve(struct fw_registry *reg, const char *spec, bool *newer,
    char *err, size_t errlen)
{
	const struct framework	*fws, *fw = NULL;
	const struct fw_profile	*p;
	struct fw_version	 v;
	const char		*at = strchr(spec, '@');
	size_t			 namelen = at != NULL ? (size_t)(at - spec) :
				    strlen(spec);
	char			 known[512], oldest[32], q[TEXT_QUOTE_SIZE];
	int			 n, i;

	*newer = false;
	/* NULL: a unit test's configs, which name no framework. */
	if (reg == NULL || (n = fw_all(reg, &fws)) < 0) {
		snprintf(err, errlen, "the framework profiles did not load");
		return NULL;
	}
	list_known(known, sizeof(known), reg, fws, n);
	for (i = 0; i < n; i++)
		if (strlen(fws[i].name) == namelen &&
		    strncmp(fws[i].name, spec, namelen) == 0)
			fw = &fws[i];
	/*
	 * The spec is the user's (--framework, a config's framework:) and
	 * is quoted escaped: a newline in it split the message (issue 26).
	 */
	if (fw == NULL) {
		text_escape(q, sizeof(q), spec, namelen);
		snprintf(err, errlen, "unknown framework \"%s\": expected "
		    "reference or NAME@VERSION, one of %s", q, known);
		return NULL;
	}
	if (at == NULL) {
		snprintf(err, errlen, "\"%s\" names no version: write "
		    "%s@VERSION (known: %s)", fw->name, fw->name, known);
		return NULL;
	}
	text_escape(q, sizeof(q), at + 1, strlen(at + 1));
	if (fw->history != NULL && is_date(at + 1))
		return resolve_date(fw, at + 1, newer, err, errlen);
	if (fw->history != NULL && is_hex(at + 1, 7, 40))
		return resolve_commit(fw, q, at + 1, err, errlen);
	if (fw_version_parse(at + 1, &v) == -1) {
		snprintf(err, errlen, "\"%s\" is not a version: expected "
		    "MAJOR.MINOR.PATCH or main%s (known: %s)", q,
		    fw->history != NULL ? ", a commit of main (7 to 40 hex "
		    "digits) or a date (YYYY-MM-DD)" : "", known);
		return NULL;
	}
	if (fw_version_cmp(&v, &fw->profiles[0].since) < 0) {
		fw_version_format(&fw->profiles[0].since, oldest,
		    sizeof(oldest));
		snprintf(err, errlen, "%s is older than the oldest %s profile "
		    "(%s): no profile models it (known: %s)", q, fw->name,
		    oldest, known);
		return NULL;
	}
	/*
	 * A release newer than any the profiles were checked against is cut
	 * from the code the newest profile models.
	 */
	if (!v.main && fw_version_cmp(&v, &fw->latest) > 0) {
		*newer = true;
		return &fw->profiles[fw->nprofiles - 1];
	}
	for (p = &fw->profiles[fw->nprofiles - 1]; p > fw->profiles; p--)
		if (fw_version_cmp(&p->since, &v) <= 0)
			break;
	/*
	 * A pre-release of the release a profile starts with has not all of
	 * its changes (core_v0.7.0.beta lacks a889b3591e): the profile before.
	 */
	if (v.pre && p > fw->profiles && fw_version_cmp(&p->since, &v) == 0)
		p--;
	return p;
}

void
fw_key_origin(const struct config *c, enum cfg_key k, char *buf, size_t len)
{
	struct cfg_mark	 m = cfg_key_mark(c, k);

	if (keyset_has(&c->given, k)) {
		if (m.line > 0)
			snprintf(buf, len, "%s:%d:%d", c->file, m.line, m.col);
		else
			snprintf(buf, len, "--set");
	} else if (keyset_has(&c->from_profile, k))
		snprintf(buf, len, "%s (profile %s): read from %s",
		    c->framework, c->profile->label, c->profile->source[k]);
	else
		snprintf(buf, len, "the reference default");
}

struct keyset
fw_profile_overridden(const struct config *c)
{
	struct keyset	 over = { { 0 } };
	int		 k;

	if (c->profile == NULL)
		return over;
	/* A key written with the profile's own value overrides nothing. */
	for (k = 0; k < KEY__COUNT; k++)
		if (keyset_has(&c->given, k) &&
		    keyset_has(&c->profile->settings.given, k) &&
		    cfg_key_is_setting(k) && cfg_key_get(c, k) !=
		    cfg_key_get(&c->profile->settings, k))
			keyset_add(&over, k);
	return over;
}
