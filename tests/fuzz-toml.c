/*
 * Deterministic mutation fuzzing of the TOML reader (src/import/toml.c), TAP, as
 * tests/fuzz-config.c does for the configuration loader.
 *
 * Seeds shaped like torchtitan's train configs are mutated thousands of
 * times (bit flips, deletions, TOML punctuation, escapes, numbers at the
 * edges of their range, junk bytes, repeated and swapped lines, several
 * of these at once), and each result is parsed in-process.  The reader
 * must keep its contract (tests/toml-check.h): one message with a line
 * and column that exist on failure; on success entries without
 * duplicates, which written back as TOML read back the same.  Under ASan
 * and valgrind, the absence of crashes and leaks is checked too.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-text.h"
#include "tap.h"
#include "toml-check.h"
#include "import/toml.h"
#include "base/xmalloc.h"

#define CASES	200	/* mutations per seed and kind */

static const char *const seeds[] = {
	"# NOTE: a preset for 64 GPUs.\n"
	"\n"
	"[job]\n"
	"dump_folder = \"./outputs\"\n"
	"description = \"Llama 3 8B training\"\n"
	"\n"
	"[model]\n"
	"name = \"llama3\"\n"
	"flavor = \"8B\"\n"
	"# converters = [\"float8\"]\n"
	"\n"
	"[optimizer]\n"
	"lr = 3e-4\n"
	"eps = 1e-8\n"
	"\n"
	"[training]\n"
	"local_batch_size = 1\n"
	"seq_len = 8192\n"
	"max_norm = 1.0  # grad norm clipping\n"
	"steps = 10_000\n"
	"\n"
	"[parallelism]\n"
	"data_parallel_replicate_degree = 1\n"
	"data_parallel_shard_degree = -1\n"
	"tensor_parallel_degree = 8  # 8-way TP\n"
	"\n"
	"[compile]\n"
	"enable=false\n"
	"components = [\"model\", \"loss\"]\n"
	"\n"
	"[activation_checkpoint]\n"
	"selective_ac_option = 'op'\n"
	"\n"
	"[quantize.linear.float8]\n"
	"filter_fqns = [\"output\", \"router.gate\"]\n",

	"title = \"t\\u00e9st \\U0001F600 \\\"q\\\" \\\\ \\t\"\n"
	"\"quoted key\" = 'lit\\eral'\n"
	"a.b.\"c.d\" = +inf\n"
	"a.e = -0.0\n"
	"a.f = nan\n"
	"[x . y]\n"
	"n = -9_223_372_036_854_775_808\n"
	"m = 9223372036854775807\n"
	"f = 6.02e+23\n"
	"t = true\n"
	"arr = [\n"
	"  1,   # one\n"
	"  'two',\n"
	"  3.0,\n"
	"]\n"
	"empty = []\n"
	"[x]\n"
	"z = false\r\n"
	"[x.y.w]\n"
	"v = \"\"\n",
};
#define NSEEDS	(sizeof(seeds) / sizeof(seeds[0]))

static const char *const pieces[] = {
	"[", "]", "[[", "]]", "=", " = ", ".", "\"", "'", "\"\"\"", "'''",
	"#", "\n", "\r\n", "\r", "\t", " ", ",", "{", "}", "\\", "\\u",
	"\\U", "\\u00e9", "\\uD800", "\\U00110000", "\\x", "_", "__", "e",
	"E+", "-", "+", "0", "00", "0x1", "0o7", "0b1", "1979-05-27",
	"07:32:00", "inf", "nan", "true", "false", "9223372036854775808",
	"-9223372036854775809", "1e309", "1.", ".5", "\0", "\x7f", "\x01",
	"\xff", "\xc3", "\xc3\xa9", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	"a.b", "\"a.b\"", "[model]\n", "[model.x]\n", "a = 1\n",
};
#define NPIECES	(sizeof(pieces) / sizeof(pieces[0]))

static int	 parsed, rejected;

/* A piece; "\0" is one byte. */
static void
insert_piece(struct text *t)
{
	const char	*p = pieces[pick(NPIECES)];

	text_insert(t, pick(t->len + 1), p, *p == '\0' ? 1 : strlen(p));
}

static void
delete_some(struct text *t)
{
	text_delete_some(t, 8);
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
	{ "insert TOML pieces", insert_piece },
	{ "flip bits", text_flip_bit },
	{ "delete bytes", delete_some },
	{ "repeat lines", text_repeat_line },
	{ "move lines", text_move_line },
	{ "several at once", several },
};
#define NMUTATIONS	(sizeof(mutations) / sizeof(mutations[0]))

static const char *
check_case(const struct text *t)
{
	struct toml_doc	 doc;
	const char	*why;
	char		 err[1024];
	int		 rc;

	err[0] = '\0';
	rc = toml_parse("fuzz.toml", t->s, t->len, &doc, err, sizeof(err));
	why = toml_check_result("fuzz.toml", t->s, t->len, rc, err, &doc);
	if (rc == 0) {
		parsed++;
		if (why == NULL)
			why = toml_check_round_trip(&doc);
		toml_free(&doc);
	} else
		rejected++;
	if (why != NULL && rc != 0)
		tap_diag("reader said: %s", err);
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
		tap_diag("case %d: %s; input:\n%.*s", bad, why, (int)t.len,
		    t.s);
	free(t.s);
}

/*
 * What the reader makes of each construct, known in advance: the round
 * trip alone would pass a reader and a writer wrong the same way.
 */
static void
known_answers(void)
{
	static const char text[] =
	    "s = \"\\b\\t\\n\\f\\r\\\"\\\\\\u00e9\\U0001F600\"\n"
	    "l = 'a\\tb'\n"
	    "[t . \"u.v\"]\n"
	    "i = -1_024\n"
	    "f = 2.5e-3\n"
	    "b = true\n"
	    "a = [1, 'x', ]\n";
	struct toml_doc	 doc;
	char		 err[1024];
	int		 rc;

	rc = toml_parse("k.toml", text, strlen(text), &doc, err, sizeof(err));
	if (!tap_ok(rc == 0 && doc.n == 6, "the known document parses")) {
		tap_diag("%s", err);
		return;
	}
	tap_ok_str_eq(doc.entries[0].value.string,
	    "\b\t\n\f\r\"\\\xc3\xa9\xf0\x9f\x98\x80",
	    "basic string escapes decode, \\u and \\U to UTF-8");
	tap_ok_str_eq(doc.entries[1].value.string, "a\\tb",
	    "a literal string keeps its backslash");
	tap_ok(doc.entries[2].nkeys == 3 &&
	    strcmp(doc.entries[2].keys[1], "u.v") == 0 &&
	    doc.entries[2].value.integer == -1024 &&
	    doc.entries[2].line == 4 && doc.entries[2].col == 1 &&
	    doc.entries[2].value.col == 5,
	    "a quoted key is one key; -1_024 is -1024, at 4:1 and 4:5");
	tap_ok(doc.entries[3].value.type == TOML_FLOAT &&
	    doc.entries[3].value.number == 2.5e-3, "2.5e-3 is a float");
	tap_ok(doc.entries[4].value.type == TOML_BOOLEAN &&
	    doc.entries[4].value.boolean, "true is a boolean");
	tap_ok(doc.entries[5].value.nitems == 2 &&
	    doc.entries[5].value.items[1].type == TOML_STRING,
	    "an array with a trailing comma holds its two items");
	toml_free(&doc);
}

int
main(void)
{
	struct text	 t;
	size_t		 s, m;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tap_plan((int)(NSEEDS + 1 + NSEEDS * NMUTATIONS + 7));
	known_answers();
	for (s = 0; s < NSEEDS; s++) {
		t = (struct text){ NULL, 0, 0 };
		text_insert(&t, 0, seeds[s], strlen(seeds[s]));
		tap_ok(check_case(&t) == NULL && parsed == (int)s + 1,
		    "seed %zu parses and reads back", s);
		free(t.s);
	}
	for (s = 0; s < NSEEDS; s++)
		for (m = 0; m < NMUTATIONS; m++)
			fuzz(s, &mutations[m]);
	/* Mutations that never parse, or never fail, would test little. */
	tap_diag("%d mutated inputs parsed, %d rejected", parsed, rejected);
	tap_ok(parsed > CASES && rejected > CASES,
	    "mutations parse and fail, many times each");
	return tap_done();
}
