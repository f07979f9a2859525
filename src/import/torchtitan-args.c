/*
 * torchtitan main's command line (torchtitan-args.h): --module, --config
 * and tyro's overrides, as entries for torchtitan.c's key table.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "base/xmalloc.h"
#include "import/torchtitan-args.h"

static void	problem(struct tt_args *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

static void
problem(struct tt_args *a, const char *fmt, ...)
{
	va_list	 ap;
	char	*line, *shown, *more;

	va_start(ap, fmt);
	xvasprintf(&line, fmt, ap);
	va_end(ap);
	/* A word of the command line may hold anything: one line. */
	shown = text_visible(line);
	xasprintf(&more, "%s%s\n", a->problems != NULL ? a->problems : "",
	    shown);
	free(shown);
	free(line);
	free(a->problems);
	a->problems = more;
	a->nproblems++;
}

static bool
is_option(const char *w)
{
	return w[0] == '-' && w[1] == '-';
}

/*
 * --module and --config, the words ConfigManager._load_config takes out
 * before tyro sees the rest: "--module=X" or "--module X".  Returns the
 * words it took (0: not one of them).
 */
static size_t
take_selector(struct tt_args *a, char *const *words, size_t n, size_t i)
{
	static const char *const names[] = { "module", "config" };
	char		**slot;
	const char	*w = words[i] + 2;
	size_t		 k, len;

	for (k = 0; k < 2; k++) {
		len = strlen(names[k]);
		if (strncmp(w, names[k], len) != 0 ||
		    (w[len] != '\0' && w[len] != '='))
			continue;
		slot = k == 0 ? &a->module : &a->config;
		free(*slot);
		*slot = NULL;
		if (w[len] == '=') {
			*slot = xstrdup(w + len + 1);
			return 1;
		}
		if (i + 1 == n) {
			/* torchtitan's own words (ValueError). */
			problem(a, "--%s requires a value", names[k]);
			return 1;
		}
		*slot = xstrdup(words[i + 1]);
		return 2;
	}
	return 0;
}

/* A word as tyro turns it into a value: integer, boolean or string. */
static void
scalar(const char *w, struct toml_value *v)
{
	char		*end;
	long long	 n;
	const char	*d = w + (*w == '-' || *w == '+');

	memset(v, 0, sizeof(*v));
	if (*d >= '0' && *d <= '9' && strspn(d, "0123456789") ==
	    strlen(d)) {
		errno = 0;
		n = strtoll(w, &end, 10);
		if (errno == 0 && *end == '\0') {
			v->type = TOML_INTEGER;
			v->integer = n;
			return;
		}
	}
	if (strcmp(w, "true") == 0 || strcmp(w, "True") == 0 ||
	    strcmp(w, "false") == 0 || strcmp(w, "False") == 0) {
		v->type = TOML_BOOLEAN;
		v->boolean = w[0] == 't' || w[0] == 'T';
		return;
	}
	v->type = TOML_STRING;
	v->string = xstrdup(w);
}

/*
 * "parallelism.tensor-parallel_degree" as keys, "-" read as "_" (tyro
 * takes both); false, with nothing set, when it is no dotted name.
 */
static bool
split_name(const char *name, size_t len, struct toml_entry *e)
{
	char	*copy, *part, *next;
	size_t	 i;

	if (len == 0 || name[0] == '.' || name[len - 1] == '.')
		return false;
	for (i = 0; i < len; i++)
		if (!(name[i] == '.' || name[i] == '_' || name[i] == '-' ||
		    (name[i] >= 'a' && name[i] <= 'z') ||
		    (name[i] >= 'A' && name[i] <= 'Z') ||
		    (name[i] >= '0' && name[i] <= '9')) ||
		    (name[i] == '.' && name[i + 1] == '.'))
			return false;
	copy = xmalloc(len + 1);
	memcpy(copy, name, len);
	copy[len] = '\0';
	for (i = 0; i < len; i++)
		if (copy[i] == '-')
			copy[i] = '_';
	e->nkeys = 1;
	for (i = 0; i < len; i++)
		e->nkeys += copy[i] == '.';
	if (e->nkeys > TOML_MAX_DEPTH) {
		free(copy);
		e->nkeys = 0;
		return false;
	}
	e->keys = xcalloc(e->nkeys, sizeof(*e->keys));
	for (i = 0, part = copy; i < e->nkeys; i++, part = next + 1) {
		next = strchr(part, '.');
		if (next == NULL)
			next = part + strlen(part);
		e->keys[i] = xmalloc((size_t)(next - part) + 1);
		memcpy(e->keys[i], part, (size_t)(next - part));
		e->keys[i][next - part] = '\0';
	}
	e->path = copy;
	return true;
}

/*
 * A flag: "--a.b" is true, "--a.no_b" false (tyro's negated boolean; the
 * leaf "no_b" names b).
 */
static void
flag(struct toml_entry *e)
{
	char	*leaf = e->keys[e->nkeys - 1], *dot;

	memset(&e->value, 0, sizeof(e->value));
	e->value.type = TOML_BOOLEAN;
	e->value.boolean = true;
	if (strncmp(leaf, "no_", 3) != 0 || leaf[3] == '\0')
		return;
	memmove(leaf, leaf + 3, strlen(leaf + 3) + 1);
	dot = strrchr(e->path, '.');
	dot = dot != NULL ? dot + 1 : e->path;
	memmove(dot, dot + 3, strlen(dot + 3) + 1);
	e->value.boolean = false;
}

void
tt_args_put(struct toml_doc *doc, struct toml_entry *e)
{
	size_t	 i;

	for (i = 0; i < doc->n; i++)
		if (strcmp(doc->entries[i].path, e->path) == 0) {
			toml_entry_free(&doc->entries[i]);
			doc->entries[i] = *e;
			return;
		}
	doc->entries = xreallocarray(doc->entries, doc->n + 1,
	    sizeof(*doc->entries));
	doc->entries[doc->n++] = *e;
}

/* The values of the option at words[i]: returns the words taken. */
static size_t
take_override(struct tt_args *a, char *const *words, size_t n, size_t i,
    const char *prefix, bool allow_model)
{
	struct toml_entry	 e;
	const char		*w = words[i] + 2, *eq = strchr(w, '=');
	size_t			 len = eq != NULL ? (size_t)(eq - w) : strlen(w);
	size_t			 k, nvalues = 0;

	memset(&e, 0, sizeof(e));
	if (!split_name(w, len, &e)) {
		problem(a, "%s: not an option of torchtitan's command line "
		    "(--SECTION.KEY VALUE)", words[i]);
		return 1;
	}
	if (eq == NULL)
		while (i + 1 + nvalues < n && !is_option(words[i + 1 +
		    nvalues]))
			nvalues++;
	if (strcmp(e.keys[0], "model") == 0 && !allow_model) {
		problem(a, "%.*s: the model is the --config entry's "
		    "model_spec, which is no option of the command line "
		    "(tyro.conf.Suppress in Trainer.Config): choose another "
		    "--config", (int)len + 2, words[i]);
		toml_entry_free(&e);
		return 1 + nvalues;
	}
	if (eq != NULL)
		scalar(eq + 1, &e.value);
	else {
		if (nvalues == 0)
			flag(&e);
		else if (nvalues == 1)
			scalar(words[i + 1], &e.value);
		else {
			e.value.type = TOML_ARRAY;
			e.value.nitems = nvalues;
			e.value.items = xcalloc(nvalues,
			    sizeof(*e.value.items));
			for (k = 0; k < nvalues; k++)
				scalar(words[i + 1 + k], &e.value.items[k]);
		}
	}
	if (prefix != NULL)
		xasprintf(&e.origin, "%s%s", prefix, e.path);
	else
		xasprintf(&e.origin, "--%s", e.path);
	tt_args_put(&a->doc, &e);
	return 1 + nvalues;
}

int
tt_args_parse(char *const *words, size_t n, const char *origin_prefix,
    bool allow_model, struct tt_args *a)
{
	size_t	 i = 0, took;

	while (i < n) {
		if (!is_option(words[i]) || words[i][2] == '\0') {
			problem(a, "%s: not an option of torchtitan's command "
			    "line (tyro takes no operands)", words[i]);
			i++;
			continue;
		}
		if ((took = take_selector(a, words, n, i)) == 0)
			took = take_override(a, words, n, i, origin_prefix,
			    allow_model);
		i += took;
	}
	return a->nproblems;
}

void
tt_args_free(struct tt_args *a)
{
	free(a->module);
	free(a->config);
	free(a->problems);
	toml_free(&a->doc);
	memset(a, 0, sizeof(*a));
}
