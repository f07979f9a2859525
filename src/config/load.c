/*
 * Loading configuration documents (load.h): a file, a list of configs or
 * a stream of documents, each read by reader.c, its framework profile
 * applied under what it writes, its --set overrides and defaults, and
 * every constraint checked (constraints.c) before anything is audited.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "base/hash.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/constraints.h"
#include "config/framework.h"
#include "config/load.h"
#include "config/plan.h"
#include "config/reader.h"

/*
 * Where to point at for a constraint on key k: the key itself, or, when it
 * was left to its default, the mesh (whose sizes the defaults clash with),
 * or the document.
 */
static void
blame(const struct loader *ld, enum cfg_key k,
    const struct cfg_override **ovr, struct cfg_mark *m)
{
	const struct config	*c = ld->cfg;

	if (!keyset_has(&c->given, k))
		k = KEY_MESH;
	if (keyset_has(&c->given, k)) {
		*ovr = ld->origin[k];
		*m = cfg_key_mark(c, k);
	} else {
		*ovr = NULL;
		*m = c->doc_mark;
	}
}

/*
 * framework: NAME@VERSION.  The profile's settings fill every key the
 * config does not write itself; what the config writes overrides them.
 */
static int
apply_framework(struct loader *ld)
{
	struct config		*c = ld->cfg;
	const struct fw_profile	*p;
	char			 err[MSG_SIZE], v[160];
	bool			 newer;

	if (!keyset_has(&c->given, KEY_FRAMEWORK) ||
	    strcmp(c->framework, "reference") == 0)
		return 0;
	if ((p = fw_resolve(ld->frameworks, c->framework, &newer, err,
	    sizeof(err))) == NULL) {
		reader_report(ld, ld->origin[KEY_FRAMEWORK],
		    cfg_key_mark(c, KEY_FRAMEWORK),
		    cfg_keys[KEY_FRAMEWORK].path, "%s", err);
		return -1;
	}
	if (newer && !ld->quiet) {
		fw_newest_read(p, c->framework, v, sizeof(v));
		fprintf(stderr, "%s: %s: %s is newer than %s: auditing it "
		    "with the newest profile, %s\n", progname, ld->path,
		    c->framework, v, p->label);
	}
	c->profile = p;
	c->from_profile = cfg_merge_settings(c, &p->settings, true);
	return 0;
}

static int
finish_config(struct loader *ld)
{
	struct config			*c = ld->cfg;
	const struct cfg_override	*ovr;
	struct cfg_mark			 m;
	enum cfg_key			 k;
	char				 msg[MSG_SIZE];

	if (!keyset_has(&c->given, KEY_MESH)) {
		reader_report(ld, NULL, c->doc_mark, NULL,
		    "missing required key \"mesh\"");
		return -1;
	}
	if (apply_framework(ld) == -1)
		return -1;
	reader_apply_defaults(c);
	if ((k = cfg_find_violation(c, msg, sizeof(msg))) == KEY__COUNT)
		return 0;
	/* A plan's fault is at its step, which the message names. */
	if (k == KEY_PLAN && !plan_violation(c, &m, msg, sizeof(msg))) {
		reader_report(ld, NULL, m, NULL, "%s", msg);
		return -1;
	}
	blame(ld, k, &ovr, &m);
	reader_report(ld, ovr, m, cfg_keys[k].path, "%s", msg);
	return -1;
}

/*
 * Documents.
 */

/* One configuration, from the mapping whose start event is at m. */
static int
load_config(struct loader *ld, const yaml_mark_t *m)
{
	struct config	*c;
	size_t		 i;

	/* Grow geometrically: a file may hold thousands of documents. */
	if (ld->list.n == ld->cap) {
		ld->cap = ld->cap == 0 ? 4 : ld->cap * 2;
		ld->list.v = xreallocarray(ld->list.v, ld->cap,
		    sizeof(*ld->list.v));
	}
	c = &ld->list.v[ld->list.n++];
	memset(c, 0, sizeof(*c));
	c->file = xstrdup(ld->path);
	c->doc_index = ld->list.n - 1 > INT_MAX ? INT_MAX :
	    (int)(ld->list.n - 1);
	c->doc_mark = reader_mark(m);
	ld->cfg = c;
	memset(ld->origin, 0, sizeof(ld->origin));

	if (reader_load_mapping(ld, CFG_ROOT) == -1)
		return -1;
	for (i = 0; i < ld->novrs; i++)
		if (reader_apply_override(ld, i) == -1)
			return -1;
	return finish_config(ld);
}

/* A sequence of configurations, whose start event is at m. */
static int
load_list(struct loader *ld, const yaml_mark_t *m)
{
	yaml_event_t	 ev;
	size_t		 n = 0;
	char		 got[GOT_SIZE];
	int		 rc;

	for (;; n++) {
		if (reader_next_event(ld, &ev) == -1)
			return -1;
		if (ev.type == YAML_SEQUENCE_END_EVENT)
			break;
		if (ev.type == YAML_MAPPING_START_EVENT)
			rc = load_config(ld, &ev.start_mark);
		else {
			reader_describe(got, sizeof(got), &ev);
			reader_error_at(ld, &ev.start_mark, NULL,
			    "expected a configuration mapping, got %s", got);
			rc = -1;
		}
		yaml_event_delete(&ev);
		if (rc == -1)
			return -1;
	}
	yaml_event_delete(&ev);
	if (n == 0) {
		reader_error_at(ld, m, NULL, "empty list of configurations: "
		    "expected mappings with at least \"mesh\"");
		return -1;
	}
	return 0;
}

static int
load_document(struct loader *ld, const yaml_mark_t *docmark)
{
	yaml_event_t	 ev;
	char		 got[GOT_SIZE];
	int		 rc = -1;

	if (reader_next_event(ld, &ev) == -1)
		return -1;
	if (ev.type == YAML_MAPPING_START_EVENT)
		rc = load_config(ld, &ev.start_mark);
	else if (ev.type == YAML_SEQUENCE_START_EVENT) {
		ld->is_list = true;
		rc = load_list(ld, &ev.start_mark);
	} else if (ev.type == YAML_SCALAR_EVENT && reader_is_null_scalar(&ev))
		reader_error_at(ld, docmark, NULL, "empty configuration: "
		    "expected a mapping with at least \"mesh\"");
	else {
		reader_describe(got, sizeof(got), &ev);
		reader_error_at(ld, &ev.start_mark, NULL,
		    "expected a mapping of configuration keys, got %s", got);
	}
	yaml_event_delete(&ev);
	if (rc == -1)
		return -1;
	if (reader_next_event(ld, &ev) == -1)		/* document end */
		return -1;
	yaml_event_delete(&ev);
	return 0;
}

static int
load_stream(struct loader *ld)
{
	yaml_event_t	 ev;
	yaml_mark_t	 docmark;
	size_t		 ndocs = 0;

	if (reader_next_event(ld, &ev) == -1)		/* stream start */
		return -1;
	yaml_event_delete(&ev);
	for (;;) {
		if (reader_next_event(ld, &ev) == -1)
			return -1;
		if (ev.type == YAML_STREAM_END_EVENT)
			break;
		docmark = ev.start_mark;
		yaml_event_delete(&ev);
		ndocs++;
		if (load_document(ld, &docmark) == -1)
			return -1;
	}
	yaml_event_delete(&ev);
	if (ndocs == 0) {
		reader_report(ld, NULL, (struct cfg_mark){ 1, 1 }, NULL,
		    "empty configuration: "
		    "expected a mapping with at least \"mesh\"");
		return -1;
	}
	if (ndocs > 1)
		ld->is_list = true;
	return 0;
}

/*
 * The default name is the file's base name without .yaml or .yml; the
 * configs of a list are told apart by their position ("sweep#1").
 */
char *
cfg_file_name(const char *path)
{
	static const char *const suffixes[] = { ".yaml", ".yml" };
	const char	*base = strrchr(path, '/');
	size_t		 i, n, slen;
	char		*name;

	base = base != NULL ? base + 1 : path;
	if (strcmp(path, "<stdin>") == 0)
		base = "stdin";
	n = strlen(base);
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		slen = strlen(suffixes[i]);
		if (n > slen && strcmp(base + n - slen, suffixes[i]) == 0) {
			n -= slen;
			break;
		}
	}
	name = xmalloc(n + 1);
	memcpy(name, base, n);
	name[n] = '\0';
	return name;
}

static void
default_names(struct loader *ld)
{
	char		*base = cfg_file_name(ld->path);
	size_t		 i;
	struct config	*c;

	for (i = 0; i < ld->list.n; i++) {
		c = &ld->list.v[i];
		if (keyset_has(&c->given, KEY_NAME))
			continue;
		if (ld->is_list)
			xasprintf(&c->name, "%s#%d", base, c->doc_index);
		else
			c->name = xstrdup(base);
	}
	free(base);
}

static int
read_file(struct loader *ld, unsigned char **text, size_t *len)
{
	FILE		*f;
	unsigned char	*buf = NULL;
	size_t		 cap = 0, n = 0, got;
	int		 saved;

	if (ld->from_stdin)
		f = stdin;
	else if ((f = fopen(ld->open_path, "rb")) == NULL) {
		reader_report(ld, NULL, (struct cfg_mark){ 0, 0 }, NULL,
		    "cannot open: %s", strerror(errno));
		return -1;
	}
	for (;;) {
		if (n == cap) {
			cap = cap == 0 ? 4096 : cap * 2;
			buf = xreallocarray(buf, cap, 1);
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
		/* /dev/zero or a huge file is no configuration. */
		if (n > CFG_MAX_FILE_BYTES) {
			if (f != stdin)
				fclose(f);
			free(buf);
			reader_report(ld, NULL, (struct cfg_mark){ 0, 0 }, NULL,
			    "larger than %d MiB: not a configuration",
			    CFG_MAX_FILE_BYTES >> 20);
			return -1;
		}
	}
	if (ferror(f)) {
		saved = errno;
		if (f != stdin)
			fclose(f);
		free(buf);
		reader_report(ld, NULL, (struct cfg_mark){ 0, 0 }, NULL,
		    "cannot read: %s", strerror(saved));
		return -1;
	}
	if (f != stdin)
		fclose(f);
	*text = buf;
	*len = n;
	return 0;
}

/* One key without effect, where it was written. */
struct no_effect_at {
	struct cfg_mark			 mark;	/* line 0: by --set */
	const struct cfg_override	*ovr;	/* that --set, or NULL */
	enum cfg_key			 key;
	const char			*without;
};

/* In the file's order, as a compiler's; the --set ones after, in theirs. */
static int
no_effect_order(const void *a, const void *b)
{
	const struct no_effect_at *x = a, *y = b;

	if ((x->ovr != NULL) != (y->ovr != NULL))
		return x->ovr != NULL ? 1 : -1;
	if (x->ovr != NULL)
		return x->ovr < y->ovr ? -1 : x->ovr > y->ovr;
	if (x->mark.line != y->mark.line)
		return x->mark.line < y->mark.line ? -1 : 1;
	return x->mark.col < y->mark.col ? -1 : x->mark.col > y->mark.col;
}

/*
 * Warn about the keys config c writes that have no effect in it
 * (cfg_find_no_effect): "gradaudit: FILE:LINE:COL: warning: KEY has no
 * effect without ...", at the key, or at the --set that wrote it last.
 * Only once the whole file has loaded, so that a file with an error
 * prints that error alone; the exit status is the audit's.
 */
static void
warn_no_effect(const struct loader *ld, const struct config *c)
{
	struct no_effect_at	*v = NULL, *w;
	const char		*without;
	enum cfg_key		 k;
	char			 set[CFG_SET_TEXT_SIZE];
	size_t			 i, n = 0;
	int			 row = -1;

	while ((row = cfg_find_no_effect(c, ld->varying, row + 1, &k,
	    &without)) != -1) {
		v = xreallocarray(v, n + 1, sizeof(*v));
		w = &v[n++];
		w->mark = cfg_key_mark(c, k);
		w->ovr = NULL;
		w->key = k;
		w->without = without;
		for (i = 0; w->mark.line == 0 && i < ld->novrs; i++)
			if (ld->ovr_keys[i] == k)
				w->ovr = &ld->ovrs[i];
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), no_effect_order);
	for (i = 0; i < n; i++) {
		w = &v[i];
		if (w->ovr != NULL) {
			cfg_override_text(w->ovr, set, sizeof set);
			fprintf(stderr, "%s: %s: warning: %s has no effect "
			    "without %s\n", progname, set,
			    cfg_keys[w->key].path, w->without);
		} else
			fprintf(stderr, "%s: %s:%d:%d: warning: %s has no "
			    "effect without %s\n", progname, ld->path,
			    w->mark.line, w->mark.col, cfg_keys[w->key].path,
			    w->without);
	}
	free(v);
}

/* The configurations of ld->text, ld->len bytes, appended to out. */
static int
load_text(struct loader *ld, struct config_list *out)
{
	yaml_parser_t	 parser;
	uint64_t	 digest;
	size_t		 i;
	int		 rc;

	if (!yaml_parser_initialize(&parser))
		fatal("yaml_parser_initialize");
	yaml_parser_set_input_string(&parser, ld->text, ld->len);
	ld->parser = &parser;
	rc = load_stream(ld);
	yaml_parser_delete(&parser);
	if (rc == 0) {
		/*
		 * Whether the file was a list is known only once it has been
		 * read to the end (a second document may follow the first).
		 */
		digest = hash_bytes(ld->text, ld->len);
		for (i = 0; i < ld->list.n; i++) {
			ld->list.v[i].in_list = ld->is_list;
			ld->list.v[i].source_digest = digest;
		}
		default_names(ld);
		for (i = 0; !ld->quiet && i < ld->list.n; i++)
			warn_no_effect(ld, &ld->list.v[i]);
		if (out->n == 0) {
			/* No copy: a list of 100,000 configs is 50 MB. */
			free(out->v);
			out->v = ld->list.v;
			out->n = ld->list.n;
		} else {
			out->v = xreallocarray(out->v, out->n + ld->list.n,
			    sizeof(*out->v));
			memcpy(out->v + out->n, ld->list.v,
			    ld->list.n * sizeof(*ld->list.v));
			out->n += ld->list.n;
			free(ld->list.v);
		}
		ld->list.v = NULL;
		ld->list.n = 0;
	}
	config_list_free(&ld->list);
	return rc;
}

int
cfg_load(struct fw_registry *reg, const char *path,
    const struct cfg_override *ovrs, size_t novrs, struct config_list *out)
{
	return cfg_load_as(reg, path, NULL, ovrs, novrs, out);
}

int
cfg_load_as(struct fw_registry *reg, const char *path, const char *copy,
    const struct cfg_override *ovrs, size_t novrs, struct config_list *out)
{
	return cfg_load_varying(reg, path, copy, ovrs, novrs, NULL, out);
}

int
cfg_load_varying(struct fw_registry *reg, const char *path,
    const char *copy, const struct cfg_override *ovrs, size_t novrs,
    const struct keyset *varying, struct config_list *out)
{
	struct loader	 ld;
	unsigned char	*text = NULL;
	size_t		 i;
	int		 rc = -1;

	memset(&ld, 0, sizeof(ld));
	ld.frameworks = reg;
	ld.error = &out->error;
	/*
	 * "-" is the standard input, named in messages as a compiler does,
	 * and so is the copy of it that run gives its MPI job (jobdir.h).
	 */
	ld.from_stdin = copy == NULL && strcmp(path, "-") == 0;
	ld.open_path = copy != NULL ? copy : path;
	ld.path = strcmp(path, "-") == 0 ? "<stdin>" : path;
	ld.ovrs = ovrs;
	ld.novrs = novrs;
	ld.varying = varying;
	ld.ovr_keys = xreallocarray(NULL, novrs, sizeof(*ld.ovr_keys));
	for (i = 0; i < novrs; i++)
		if (reader_resolve_override(ovrs[i].key, &ld.ovr_keys[i],
		    &out->error) == -1)
			goto out;
	if (read_file(&ld, &text, &ld.len) == -1)
		goto out;
	ld.text = text;
	rc = load_text(&ld, out);
out:
	config_list_free(&ld.list);
	free(ld.ovr_keys);
	free(text);
	return rc;
}

int
cfg_load_quietly(struct fw_registry *reg, const char *name, const char *text,
    size_t len, struct config_list *out)
{
	struct loader	 ld;

	memset(&ld, 0, sizeof(ld));
	ld.frameworks = reg;
	ld.error = &out->error;
	ld.error_key = &out->error_key;
	ld.quiet = true;
	ld.path = ld.open_path = name;
	ld.text = (const unsigned char *)text;
	ld.len = len;
	return load_text(&ld, out);
}

void
cfg_error_at(const struct config *c, struct cfg_mark m, char **keep,
    const char *fmt, ...)
{
	char		 msg[MSG_SIZE], *line;
	va_list		 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	xasprintf(&line, "%s: %s:%d:%d: %s", progname, c->file, m.line, m.col,
	    msg);
	reader_emit(keep, line, false);
	free(line);
}

void
cfg_error(const struct config *c, enum cfg_key k, char **keep,
    const char *fmt, ...)
{
	struct cfg_mark	 m = cfg_key_mark(c, k);
	char		 msg[MSG_SIZE], *line, set[CFG_SET_TEXT_SIZE];
	va_list		 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m.line == 0 && cfg_key_set_text(c, k, set, sizeof set)) {
		/*
		 * As the loader's errors name it (reader_report), after the
		 * file: the --set applies to every config named, and what
		 * refuses it here is this one (a batch printed the same
		 * line for each file, naming none).
		 */
		xasprintf(&line, "%s: %s: %s: %s: %s", progname, c->file, set,
		    cfg_keys[k].path, msg);
		reader_emit(keep, line, false);
		free(line);
		return;
	}
	if (m.line == 0)
		m = c->doc_mark;
	if (m.line > 0)
		xasprintf(&line, "%s: %s:%d:%d: %s: %s", progname, c->file,
		    m.line, m.col, cfg_keys[k].path, msg);
	else
		xasprintf(&line, "%s: %s: %s: %s", progname, c->file,
		    cfg_keys[k].path, msg);
	reader_emit(keep, line, false);
	free(line);
}
