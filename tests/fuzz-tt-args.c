/*
 * Deterministic mutation fuzzing of torchtitan main's command-line reader
 * (src/import/torchtitan-args.c), TAP, as tests/fuzz-toml.c does for the
 * TOML reader.
 *
 * Seeds are command lines as users pass them to torchtitan.train (one
 * word a line), mutated thousands of times: option pieces, bit flips,
 * deleted bytes, repeated and moved words, several at once.  The reader
 * must keep its contract: as many problem lines as problems, each one
 * line of visible text; entries whose path is their keys joined by '.'
 * with no '-' left, no two of one path, each with its origin; and the
 * entries, written back as "--PATH=VALUE" words, read back the same.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-text.h"
#include "tap.h"
#include "import/torchtitan-args.h"
#include "base/xmalloc.h"

#define CASES	300	/* mutations per seed and kind */

static const char *const seeds[] = {
	"--module\nllama3\n--config\nllama3_8b\n"
	"--parallelism.tensor_parallel_degree\n2\n"
	"--parallelism.data_parallel_shard_degree=-1\n"
	"--training.steps\n100\n--compile.enable\n"
	"--profiler.no-enable-memory-snapshot\n"
	"--compile.components\nmodel\nloss\n",

	"--module=deepseek_v3\n--config=deepseek_v3_16b\n"
	"--parallelism.expert-parallel-degree\n8\n"
	"--parallelism.pipeline_parallel_schedule=Interleaved1F1B\n"
	"--training.global_batch_size\n+64\n--metrics.no_enable_tensorboard\n"
	"--checkpoint.folder=\n--debug.seed\n-9223372036854775808\n"
	"--a.b.c.d=True\n",
};
#define NSEEDS	(sizeof(seeds) / sizeof(seeds[0]))

static const char *const pieces[] = {
	"--", "-", "=", ".", "..", "no_", "no-", "_", "\n", "--module\n",
	"--config\n", "--model.flavor\n8B\n", "--parallelism.", "x", "1",
	"-1", "+", "9223372036854775808", "true", "False", "\t", " ", "\x01",
	"\x7f", "\xff", "\xc3\xa9", "\\", "\"", "'",
};
#define NPIECES	(sizeof(pieces) / sizeof(pieces[0]))

static int	 parsed, refused;

static void
insert_piece(struct text *t)
{
	const char	*p = pieces[pick(NPIECES)];

	text_insert(t, pick(t->len + 1), p, strlen(p));
}

static void
delete_some(struct text *t)
{
	text_delete_some(t, 6);
}

static void
several(struct text *t)
{
	static void (*const one[])(struct text *) = {
		insert_piece, text_flip_bit, delete_some, text_repeat_line,
		text_move_line
	};
	size_t	 n = 2 + pick(5);

	while (n-- > 0)
		one[pick(sizeof(one) / sizeof(one[0]))](t);
}

struct mutation {
	const char	*name;
	void		(*apply)(struct text *);
};

static const struct mutation mutations[] = {
	{ "insert option pieces", insert_piece },
	{ "flip bits", text_flip_bit },
	{ "delete bytes", delete_some },
	{ "repeat words", text_repeat_line },
	{ "move words", text_move_line },
	{ "several at once", several },
};
#define NMUTATIONS	(sizeof(mutations) / sizeof(mutations[0]))

/* The words of t, one a line; a NUL byte ends its word, as in argv. */
static char **
split_words(const struct text *t, size_t *n)
{
	char	**w = NULL;
	size_t	 i, start = 0, len;

	*n = 0;
	for (i = 0; i <= t->len; i++) {
		if (i < t->len && t->s[i] != '\n')
			continue;
		if (i == t->len && i == start)
			break;
		len = i - start;
		w = xreallocarray(w, *n + 1, sizeof(*w));
		w[*n] = xmalloc(len + 1);
		memcpy(w[*n], t->s + start, len);
		w[*n][len] = '\0';
		(*n)++;
		start = i + 1;
	}
	return w;
}

static void
free_words(char **w, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		free(w[i]);
	free(w);
}

/* "2", "true", "x": a scalar as the reader made it, for writing back. */
static char *
scalar_word(const char *path, const struct toml_value *v)
{
	char	*s;

	if (v->type == TOML_INTEGER)
		xasprintf(&s, "--%s=%lld", path, v->integer);
	else if (v->type == TOML_BOOLEAN)
		xasprintf(&s, "--%s=%s", path, v->boolean ? "true" : "false");
	else
		xasprintf(&s, "--%s=%s", path, v->string);
	return s;
}

static bool
same_value(const struct toml_value *a, const struct toml_value *b)
{
	size_t	 i;

	if (a->type != b->type)
		return false;
	switch (a->type) {
	case TOML_INTEGER:
		return a->integer == b->integer;
	case TOML_BOOLEAN:
		return a->boolean == b->boolean;
	case TOML_STRING:
		return strcmp(a->string, b->string) == 0;
	case TOML_ARRAY:
		if (a->nitems != b->nitems)
			return false;
		for (i = 0; i < a->nitems; i++)
			if (!same_value(&a->items[i], &b->items[i]))
				return false;
		return true;
	default:
		return false;
	}
}

/*
 * The entries written back: a scalar as "--PATH=VALUE", an array as
 * "--PATH" and its items (none starts with "--", or it would have been
 * an option).  They must read back as the same entries, in order.
 */
static const char *
round_trip(const struct tt_args *a)
{
	struct tt_args	 b;
	char		**w = NULL;
	size_t		 i, k, n = 0;
	const char	*why = NULL;

	for (i = 0; i < a->doc.n; i++) {
		const struct toml_entry *e = &a->doc.entries[i];

		w = xreallocarray(w, n + 1 + e->value.nitems, sizeof(*w));
		if (e->value.type != TOML_ARRAY) {
			w[n++] = scalar_word(e->path, &e->value);
			continue;
		}
		xasprintf(&w[n++], "--%s", e->path);
		for (k = 0; k < e->value.nitems; k++) {
			if (e->value.items[k].type == TOML_STRING)
				w[n++] = xstrdup(e->value.items[k].string);
			else if (e->value.items[k].type == TOML_INTEGER)
				xasprintf(&w[n++], "%lld",
				    e->value.items[k].integer);
			else
				w[n++] = xstrdup(e->value.items[k].boolean ?
				    "true" : "false");
		}
	}
	memset(&b, 0, sizeof(b));
	tt_args_parse(w, n, NULL, true, &b);
	if (b.nproblems != 0)
		why = "the entries written back are refused";
	else if (b.doc.n != a->doc.n)
		why = "the entries written back read back as more or fewer";
	for (i = 0; why == NULL && i < a->doc.n; i++)
		if (strcmp(b.doc.entries[i].path, a->doc.entries[i].path) != 0 ||
		    !same_value(&b.doc.entries[i].value,
		    &a->doc.entries[i].value))
			why = "an entry written back reads back otherwise";
	tt_args_free(&b);
	free_words(w, n);
	return why;
}

/* The reader's contract on one command line. */
static const char *
check_result(const struct tt_args *a)
{
	const struct toml_entry	*e;
	const char		*p;
	size_t			 i, j, k, len;
	int			 lines = 0;

	for (p = a->problems; p != NULL && *p != '\0'; p++) {
		if (*p == '\n')
			lines++;
		else if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return "a problem holds a control character";
	}
	if (lines != a->nproblems)
		return "problems and problem lines differ in number";
	if (a->problems != NULL && a->problems[strlen(a->problems) - 1] !=
	    '\n')
		return "the problems do not end their line";
	for (i = 0; i < a->doc.n; i++) {
		e = &a->doc.entries[i];
		if (e->nkeys == 0 || e->origin == NULL ||
		    strncmp(e->origin, "--", 2) != 0 ||
		    strcmp(e->origin + 2, e->path) != 0)
			return "an entry has no keys or no origin";
		if (strchr(e->path, '-') != NULL)
			return "a '-' is left in a path";
		for (k = 0, len = 0; k < e->nkeys; k++) {
			if (e->keys[k][0] == '\0' || strncmp(e->path + len,
			    e->keys[k], strlen(e->keys[k])) != 0)
				return "a path is not its keys";
			len += strlen(e->keys[k]);
			if (e->path[len] != (k + 1 < e->nkeys ? '.' : '\0'))
				return "a path is not its keys joined by '.'";
			len++;
		}
		if (strcmp(e->keys[0], "model") == 0)
			return "model.* is taken from the command line";
		for (j = 0; j < i; j++)
			if (strcmp(a->doc.entries[j].path, e->path) == 0)
				return "two entries of one path";
	}
	return NULL;
}

static const char *
check_case(const struct text *t)
{
	struct tt_args	 a;
	char		**w;
	size_t		 n;
	const char	*why;

	w = split_words(t, &n);
	memset(&a, 0, sizeof(a));
	tt_args_parse(w, n, NULL, false, &a);
	why = check_result(&a);
	if (why == NULL)
		why = round_trip(&a);
	if (a.nproblems == 0)
		parsed++;
	else
		refused++;
	tt_args_free(&a);
	free_words(w, n);
	return why;
}

static void
fuzz(size_t seed, const struct mutation *m)
{
	struct text	 t = { NULL, 0, 0 };
	const char	*why = NULL;
	int		 c, bad = -1;

	for (c = 0; c < CASES && why == NULL; c++) {
		t.len = 0;
		text_insert(&t, 0, seeds[seed], strlen(seeds[seed]));
		m->apply(&t);
		if ((why = check_case(&t)) != NULL)
			bad = c;
	}
	if (!tap_ok(why == NULL, "seed %zu: %d times %s", seed, CASES,
	    m->name))
		tap_diag("case %d: %s; words:\n%.*s", bad, why, (int)t.len,
		    t.s);
	free(t.s);
}

/* What the reader makes of each form, known in advance. */
static void
known_answers(void)
{
	char *words[] = { "--module=llama3", "stray", "--config", "llama3_8b",
	    "--parallelism.tensor-parallel_degree", "2",
	    "--parallelism.data_parallel_shard_degree=-1",
	    "--profiler.no-enable-memory-snapshot", "--compile.enable",
	    "--compile.components", "model", "loss",
	    "--parallelism.tensor_parallel_degree=4", "--model.flavor", "8B" };
	struct tt_args	 a;
	const struct toml_entry *e;

	memset(&a, 0, sizeof(a));
	tt_args_parse(words, sizeof(words) / sizeof(words[0]), NULL, false,
	    &a);
	tap_ok(a.module != NULL && strcmp(a.module, "llama3") == 0 &&
	    a.config != NULL && strcmp(a.config, "llama3_8b") == 0,
	    "--module=X and --config X are taken out");
	tap_ok(a.doc.n == 5, "five entries, the repeated tp one");
	e = &a.doc.entries[0];
	tap_ok(a.doc.n > 0 && strcmp(e->path,
	    "parallelism.tensor_parallel_degree") == 0 &&
	    e->value.type == TOML_INTEGER && e->value.integer == 4,
	    "'-' is '_'; the later value of a key wins, in its place");
	e = &a.doc.entries[1];
	tap_ok(a.doc.n > 1 && e->value.type == TOML_INTEGER &&
	    e->value.integer == -1, "--KEY=-1 is the integer -1");
	e = &a.doc.entries[2];
	tap_ok(a.doc.n > 2 && strcmp(e->path,
	    "profiler.enable_memory_snapshot") == 0 &&
	    e->value.type == TOML_BOOLEAN && !e->value.boolean,
	    "--a.no-b is b false");
	e = &a.doc.entries[3];
	tap_ok(a.doc.n > 3 && e->value.type == TOML_BOOLEAN &&
	    e->value.boolean, "a flag alone is true");
	e = &a.doc.entries[4];
	tap_ok(a.doc.n > 4 && e->value.type == TOML_ARRAY &&
	    e->value.nitems == 2, "the words up to the next option are a list");
	tap_ok(a.nproblems == 2 && a.problems != NULL &&
	    strstr(a.problems, "--model.flavor: the model is") != NULL &&
	    strstr(a.problems, "stray: not an option") != NULL,
	    "model.* and a stray word: two problems, the model's value taken "
	    "with it");
	tt_args_free(&a);
}

int
main(void)
{
	struct text	 t;
	size_t		 s, m;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tap_plan((int)(8 + NSEEDS + NSEEDS * NMUTATIONS + 1));
	known_answers();
	for (s = 0; s < NSEEDS; s++) {
		t = (struct text){ NULL, 0, 0 };
		text_insert(&t, 0, seeds[s], strlen(seeds[s]));
		tap_ok(check_case(&t) == NULL && parsed == (int)s + 1,
		    "seed %zu reads and reads back", s);
		free(t.s);
	}
	for (s = 0; s < NSEEDS; s++)
		for (m = 0; m < NMUTATIONS; m++)
			fuzz(s, &mutations[m]);
	tap_diag("%d mutated command lines read, %d refused", parsed,
	    refused);
	tap_ok(parsed > CASES && refused > CASES,
	    "mutations read and fail, many times each");
	return tap_done();
}
