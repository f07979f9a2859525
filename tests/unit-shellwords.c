/*
 * TAP unit test of shellwords.c: each input is split as sh(1) splits the
 * words of one command (checked with `eval "set -- INPUT"`), except that
 * nothing is expanded ($TP stays "$TP") and a newline separates words like
 * a blank instead of ending the command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/shellwords.h"
#include "tap.h"

struct split_case {
	const char	*input;
	unsigned	 flags;
	const char	*want;	/* the words, each in brackets; NULL: an error */
};

static const struct split_case cases[] = {
	{ "", 0, "" },
	{ "  mpiexec   -f hosts ", 0, "[mpiexec][-f][hosts]" },
	{ "a 'b c' \"d e\"", 0, "[a][b c][d e]" },
	{ "'it'\\''s' \"q\\\"q\" \"\\$TP\" '$TP' $TP", 0,
	  "[it's][q\"q][$TP][$TP][$TP]" },
	{ "\"\" ''", 0, "[][]" },
	/* A continued line: the backslash and the newline vanish. */
	{ "--num-layers 32 \\\n    --hidden-size 4096", 0,
	  "[--num-layers][32][--hidden-size][4096]" },
	{ "ab\\\ncd \"e\\\nf\" 'g\\\nh'", 0, "[abcd][ef][g\\\nh]" },
	{ "a \\\n", 0, "[a]" },
	/* Newlines separate words like blanks. */
	{ "a\nb\n\n c", 0, "[a][b][c]" },
	/* Comments only when asked for, and only at the start of a word. */
	{ "--lr 1e-4  # the rate\n--bf16", SHELLWORDS_COMMENTS,
	  "[--lr][1e-4][--bf16]" },
	{ "--lr 1e-4  # the rate \\\n--bf16", SHELLWORDS_COMMENTS,
	  "[--lr][1e-4][--bf16]" },
	{ "a#b '#c'", SHELLWORDS_COMMENTS, "[a#b][#c]" },
	{ "a # b", 0, "[a][#][b]" },
	/* Unterminated quotes. */
	{ "a 'b", 0, NULL },
	{ "a \"b", 0, NULL },
};

static char *
joined(char **words, size_t n)
{
	size_t	 i, len = 1;
	char	*s;

	for (i = 0; i < n; i++)
		len += strlen(words[i]) + 2;
	s = malloc(len);
	if (s == NULL)
		abort();
	s[0] = '\0';
	for (i = 0; i < n; i++) {
		strcat(s, "[");
		strcat(s, words[i]);
		strcat(s, "]");
	}
	return s;
}

/* Words that shellwords_quote must give back unchanged through a split. */
static const char *const quote_cases[] = {
	"plain", "testdata/megatron-844.yaml", "mesh.dp=4", "",
	"a b", "it's", "'", "$TP", "a\\b", "semi;colon", "new\nline", "~x",
	"*.yaml",
};

/* shellwords_command_len: the first command of a line, what it leaves. */
static const struct {
	const char	*line;
	const char	*first;
} command_cases[] = {
	{ "python pretrain_gpt.py --a 1", "python pretrain_gpt.py --a 1" },
	{ "cd /x; python p.py", "cd /x" },
	{ "\ncd /x;\npython p.py", "" },
	{ "git rev-parse HEAD && python p.py", "git rev-parse HEAD " },
	{ "python p.py 2>&1 | tee log", "python p.py 2>&1 " },
	{ "echo 'a;b' \"c|d\" e\\;f; g", "echo 'a;b' \"c|d\" e\\;f" },
	{ "sleep 1 & wait", "sleep 1 " },
};

int
main(void)
{
	size_t	 i, n;
	char	**words, *got, *q;

	for (i = 0; i < sizeof(quote_cases) / sizeof(quote_cases[0]); i++) {
		q = shellwords_quote(quote_cases[i]);
		words = shellwords_split(q, 0, &n);
		tap_ok(words != NULL && n == 1 &&
		    strcmp(words[0], quote_cases[i]) == 0,
		    "quote case %zu: %s reads back as one word", i, q);
		shellwords_free(words, n);
		free(q);
	}
	q = shellwords_quote("mesh.dp=4");
	tap_ok_str_eq(q, "mesh.dp=4", "a plain word is not quoted");
	free(q);

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct split_case *c = &cases[i];

		words = shellwords_split(c->input, c->flags, &n);
		if (c->want == NULL) {
			tap_ok(words == NULL, "case %zu: unterminated quote is "
			    "an error", i);
			shellwords_free(words, n);
			continue;
		}
		if (!tap_ok(words != NULL, "case %zu: splits", i))
			continue;
		tap_ok(words[n] == NULL, "case %zu: NULL-terminated", i);
		got = joined(words, n);
		tap_ok_str_eq(got, c->want, "case %zu: words", i);
		free(got);
		shellwords_free(words, n);
	}
	for (i = 0; i < sizeof(command_cases) / sizeof(command_cases[0]); i++) {
		n = shellwords_command_len(command_cases[i].line);
		tap_ok(n == strlen(command_cases[i].first) &&
		    strncmp(command_cases[i].line, command_cases[i].first, n) ==
		    0, "command case %zu: the first command is \"%s\"", i,
		    command_cases[i].first);
	}
	return tap_done();
}
