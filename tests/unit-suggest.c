/*
 * TAP unit test of suggest.c: the edit distance (a swap of neighbours is
 * one edit) and which candidate is suggested, if any.
 */
#include <limits.h>
#include <string.h>

#include "base/suggest.h"
#include "tap.h"

static int
dist(const char *a, const char *b)
{
	return suggest_distance(a, strlen(a), b, strlen(b));
}

static const char *
nearest(const char *word, const char *const *cands)
{
	struct suggestion	 s;

	suggest_init(&s, word, strlen(word));
	for (; *cands != NULL; cands++)
		suggest_consider(&s, *cands);
	return suggest_best(&s);
}

int
main(void)
{
	static const char *const commands[] = {
		"run", "check", "explain", "sweep", "frameworks", "import",
		"help", NULL
	};
	static const char *const mesh[] = { "dp", "tp", "ep", "etp", NULL };
	static const char *const alike[] = { "numerics", "numeric",
		"numeric-max", NULL };
	char	 longer[SUGGEST_MAX_LEN + 2];
	const char *got;

	tap_ok(dist("", "") == 0, "empty strings: 0");
	tap_ok(dist("check", "check") == 0, "equal: 0");
	tap_ok(dist("chek", "check") == 1, "a letter missing: 1");
	tap_ok(dist("chekc", "check") == 1, "two neighbours swapped: 1");
	tap_ok(dist("hlep", "help") == 1, "two neighbours swapped first: 1");
	tap_ok(dist("kitten", "sitting") == 3, "kitten, sitting: 3");
	tap_ok(dist("abc", "") == 3, "against empty: the length");
	memset(longer, 'a', sizeof longer - 1);
	longer[sizeof longer - 1] = '\0';
	tap_ok(dist(longer, "a") == INT_MAX, "longer than %d: INT_MAX",
	    SUGGEST_MAX_LEN);

	got = nearest("chek", commands);
	tap_ok_str_eq(got ? got : "(none)", "check", "chek: check");
	got = nearest("swep", commands);
	tap_ok_str_eq(got ? got : "(none)", "sweep", "swep: sweep");
	got = nearest("frobnicate", commands);
	tap_ok(got == NULL, "frobnicate: nothing");
	got = nearest("pd", mesh);
	tap_ok_str_eq(got ? got : "(none)", "dp", "pd: dp, one swap");
	got = nearest("xy", mesh);
	tap_ok(got == NULL, "xy: nothing (two edits rewrite a two-letter word)");
	got = nearest("tpp", mesh);
	tap_ok_str_eq(got ? got : "(none)", "tp", "tpp: tp");
	got = nearest("hlep", commands);
	tap_ok_str_eq(got ? got : "(none)", "help", "hlep: help");
	got = nearest("ttp", mesh);
	tap_ok_str_eq(got ? got : "(none)", "tp", "ttp: tp");
	got = nearest("numerc", alike);
	tap_ok_str_eq(got ? got : "(none)", "numeric",
	    "numerc: the nearest of several near ones");
	got = nearest("etq", mesh);
	tap_ok_str_eq(got ? got : "(none)", "etp",
	    "etq: of equally near ones, the one that starts alike");
	return tap_done();
}
