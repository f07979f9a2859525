/*
 * TAP unit test of json.c: a nested document in both layouts compared with
 * the exact expected text, string escaping (control characters, quotes,
 * valid and invalid UTF-8), number syntax, and that misuse is an internal
 * error (exit 3) rather than malformed output.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L	/* fork, waitpid */
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/json.h"
#include "tap.h"

/* Everything written to fp so far, as a malloc'd string. */
static char *
slurp(FILE *fp)
{
	char	*buf;
	long	 len;

	fflush(fp);
	len = ftell(fp);
	if (len < 0 || (buf = malloc((size_t)len + 1)) == NULL)
		abort();
	rewind(fp);
	if (fread(buf, 1, (size_t)len, fp) != (size_t)len)
		abort();
	buf[len] = '\0';
	return buf;
}

static int
text_is(const char *got, const char *want)
{
	if (strcmp(got, want) == 0)
		return 1;
	tap_diag("got:\n%swant:\n%s", got, want);
	return 0;
}

/* A cut-down report object, in the shape of SPEC section 9. */
static void
emit_document(struct json *j)
{
	jsonw_begin_object(j);
	jsonw_key_string(j, "tool", "gradaudit");
	jsonw_key(j, "mesh");
	jsonw_begin_object(j);
	jsonw_key_int(j, "dp", 2);
	jsonw_key_int(j, "pp", 2);
	jsonw_end_object(j);
	jsonw_key_bool(j, "consistent", false);
	jsonw_key(j, "params");
	jsonw_begin_array(j);
	jsonw_begin_object(j);
	jsonw_key_string(j, "name", "embedding.weight");
	jsonw_key(j, "region");
	jsonw_begin_array(j);
	jsonw_int(j, 0);
	jsonw_int(j, 256);
	jsonw_end_array(j);
	jsonw_key_null(j, "ok");
	jsonw_key(j, "terms");
	jsonw_begin_object(j);
	jsonw_key_string(j, "g0", "1/2");
	jsonw_end_object(j);
	jsonw_key(j, "ulps");
	jsonw_raw_number(j, "-1.5e-3");
	jsonw_end_object(j);
	jsonw_end_array(j);
	jsonw_key(j, "findings");
	jsonw_begin_array(j);
	jsonw_end_array(j);
	jsonw_key(j, "extra");
	jsonw_begin_object(j);
	jsonw_end_object(j);
	jsonw_key_int(j, "min", INT64_MIN);
	jsonw_end_object(j);
}

static void
test_document(void)
{
	static const char pretty[] =
	    "{\n"
	    "  \"tool\": \"gradaudit\",\n"
	    "  \"mesh\": {\n"
	    "    \"dp\": 2,\n"
	    "    \"pp\": 2\n"
	    "  },\n"
	    "  \"consistent\": false,\n"
	    "  \"params\": [\n"
	    "    {\n"
	    "      \"name\": \"embedding.weight\",\n"
	    "      \"region\": [\n"
	    "        0,\n"
	    "        256\n"
	    "      ],\n"
	    "      \"ok\": null,\n"
	    "      \"terms\": {\n"
	    "        \"g0\": \"1/2\"\n"
	    "      },\n"
	    "      \"ulps\": -1.5e-3\n"
	    "    }\n"
	    "  ],\n"
	    "  \"findings\": [],\n"
	    "  \"extra\": {},\n"
	    "  \"min\": -9223372036854775808\n"
	    "}\n";
	static const char compact[] =
	    "{\"tool\":\"gradaudit\",\"mesh\":{\"dp\":2,\"pp\":2},"
	    "\"consistent\":false,\"params\":[{\"name\":\"embedding.weight\","
	    "\"region\":[0,256],\"ok\":null,\"terms\":{\"g0\":\"1/2\"},"
	    "\"ulps\":-1.5e-3}],\"findings\":[],\"extra\":{},"
	    "\"min\":-9223372036854775808}\n";
	struct json	 j;
	FILE		*fp;
	char		*s;

	if ((fp = tmpfile()) == NULL)
		abort();
	jsonw_init(&j, fp, false);
	emit_document(&j);
	s = slurp(fp);
	tap_ok(text_is(s, pretty), "pretty nested document");
	free(s);
	fclose(fp);

	if ((fp = tmpfile()) == NULL)
		abort();
	jsonw_init(&j, fp, true);
	emit_document(&j);
	s = slurp(fp);
	tap_ok(text_is(s, compact), "compact nested document");
	free(s);
	fclose(fp);

	if ((fp = tmpfile()) == NULL)
		abort();
	jsonw_init(&j, fp, false);
	jsonw_begin_array(&j);
	jsonw_bool(&j, true);
	jsonw_begin_array(&j);
	jsonw_begin_array(&j);
	jsonw_end_array(&j);
	jsonw_end_array(&j);
	jsonw_end_array(&j);
	s = slurp(fp);
	tap_ok(text_is(s, "[\n  true,\n  [\n    []\n  ]\n]\n"),
	    "nested arrays, pretty");
	free(s);
	fclose(fp);
}

/* A top-level string holding in, compact. */
static int
string_is(const char *in, const char *want)
{
	struct json	 j;
	FILE		*fp;
	char		*s;
	int		 good;

	if ((fp = tmpfile()) == NULL)
		abort();
	jsonw_init(&j, fp, true);
	jsonw_string(&j, in);
	s = slurp(fp);
	good = text_is(s, want);
	free(s);
	fclose(fp);
	return good;
}

static void
test_escaping(void)
{
	tap_ok(string_is("plain", "\"plain\"\n"), "plain string");
	tap_ok(string_is("", "\"\"\n"), "empty string");
	tap_ok(string_is("a\"b\\c/d", "\"a\\\"b\\\\c/d\"\n"),
	    "quote and backslash escaped, slash not");
	tap_ok(string_is("\n\t\r\b\f", "\"\\n\\t\\r\\b\\f\"\n"),
	    "short escapes for common control characters");
	tap_ok(string_is("\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\"\n"),
	    "other control characters as \\u00XX; DEL passes");
	tap_ok(string_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	    "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"\n"),
	    "valid 2, 3 and 4-byte UTF-8 passes through");
	tap_ok(string_is("\xef\xbf\xbf\xf4\x8f\xbf\xbf",
	    "\"\xef\xbf\xbf\xf4\x8f\xbf\xbf\"\n"),
	    "U+FFFF and U+10FFFF pass through");
	tap_ok(string_is("a\xff" "b", "\"a\\ufffdb\"\n"), "0xff replaced");
	tap_ok(string_is("\x80x", "\"\\ufffdx\"\n"),
	    "lone continuation replaced");
	tap_ok(string_is("\xc0\xaf", "\"\\ufffd\\ufffd\"\n"),
	    "overlong 2-byte form replaced");
	tap_ok(string_is("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"\n"),
	    "overlong 3-byte form replaced");
	tap_ok(string_is("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"\n"),
	    "UTF-16 surrogate replaced");
	tap_ok(string_is("\xf4\x90\x80\x80",
	    "\"\\ufffd\\ufffd\\ufffd\\ufffd\"\n"),
	    "code point above U+10FFFF replaced");
	tap_ok(string_is("x\xe2\x82", "\"x\\ufffd\\ufffd\"\n"),
	    "sequence truncated by the end of the string");
	tap_ok(string_is("\xe2\x82" "a", "\"\\ufffd\\ufffda\"\n"),
	    "sequence truncated by ASCII");
}

static int
number_is(const char *in, const char *want)
{
	struct json	 j;
	FILE		*fp;
	char		*s;
	int		 good;

	if ((fp = tmpfile()) == NULL)
		abort();
	jsonw_init(&j, fp, true);
	jsonw_begin_array(&j);
	jsonw_raw_number(&j, in);
	jsonw_int(&j, -7);
	jsonw_end_array(&j);
	s = slurp(fp);
	good = text_is(s, want);
	free(s);
	fclose(fp);
	return good;
}

static void
test_numbers(void)
{
	tap_ok(number_is("0", "[0,-7]\n"), "raw 0");
	tap_ok(number_is("-0.25", "[-0.25,-7]\n"), "raw -0.25");
	tap_ok(number_is("6.02E+23", "[6.02E+23,-7]\n"), "raw 6.02E+23");
	tap_ok(number_is("17", "[17,-7]\n"), "raw 17");
}

/*
 * Run one misuse in a child; it must die with exit status 3 (internal
 * error) and print nothing on its standard output.
 */
static int
dies(void (*fn)(struct json *))
{
	struct json	 j;
	FILE		*fp;
	pid_t		 pid;
	int		 status;

	fflush(stdout);
	if ((pid = fork()) == -1)
		abort();
	if (pid == 0) {
		if (freopen("/dev/null", "w", stderr) == NULL ||
		    (fp = tmpfile()) == NULL)
			_exit(99);
		jsonw_init(&j, fp, false);
		fn(&j);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid)
		abort();
	return WIFEXITED(status) && WEXITSTATUS(status) == 3;
}

static void
misuse_value_without_key(struct json *j)
{
	jsonw_begin_object(j);
	jsonw_int(j, 1);
}

static void
misuse_key_in_array(struct json *j)
{
	jsonw_begin_array(j);
	jsonw_key(j, "k");
}

static void
misuse_two_keys(struct json *j)
{
	jsonw_begin_object(j);
	jsonw_key(j, "a");
	jsonw_key(j, "b");
}

static void
misuse_end_with_key(struct json *j)
{
	jsonw_begin_object(j);
	jsonw_key(j, "a");
	jsonw_end_object(j);
}

static void
misuse_wrong_end(struct json *j)
{
	jsonw_begin_object(j);
	jsonw_end_array(j);
}

static void
misuse_end_at_top(struct json *j)
{
	jsonw_end_object(j);
}

static void
misuse_second_value(struct json *j)
{
	jsonw_int(j, 1);
	jsonw_int(j, 2);
}

static void
misuse_too_deep(struct json *j)
{
	int	 i;

	for (i = 0; i <= JSON_MAX_DEPTH; i++)
		jsonw_begin_array(j);
}

static void
misuse_nan(struct json *j)
{
	jsonw_raw_number(j, "nan");
}

static void
misuse_bad_numbers(struct json *j)
{
	static const char *const bad[] = { "01", "1.", ".5", "1e", "+1",
	    "-", "1 ", "inf", "0x10" };
	size_t	 i;

	/* Only reached exit 0 if every bad number was let through. */
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pid_t	 pid;
		int	 status;

		if ((pid = fork()) == -1)
			_exit(99);
		if (pid == 0) {
			jsonw_raw_number(j, bad[i]);
			_exit(0);
		}
		if (waitpid(pid, &status, 0) != pid ||
		    !WIFEXITED(status) || WEXITSTATUS(status) != 3)
			_exit(1);
	}
	_exit(3);
}

static void
fine_depth(struct json *j)
{
	int	 i;

	for (i = 0; i < JSON_MAX_DEPTH; i++)
		jsonw_begin_array(j);
	for (i = 0; i < JSON_MAX_DEPTH; i++)
		jsonw_end_array(j);
}

static void
test_misuse(void)
{
	tap_ok(dies(misuse_value_without_key), "value without key dies");
	tap_ok(dies(misuse_key_in_array), "key in an array dies");
	tap_ok(dies(misuse_two_keys), "two keys in a row die");
	tap_ok(dies(misuse_end_with_key), "object ending after a key dies");
	tap_ok(dies(misuse_wrong_end), "mismatched end dies");
	tap_ok(dies(misuse_end_at_top), "end with nothing open dies");
	tap_ok(dies(misuse_second_value), "second top-level value dies");
	tap_ok(dies(misuse_too_deep), "nesting deeper than the bound dies");
	tap_ok(dies(misuse_nan), "nan as a number dies");
	tap_ok(dies(misuse_bad_numbers), "malformed numbers die");
	tap_ok(!dies(fine_depth), "nesting exactly to the bound is fine");
}

int
main(void)
{
	test_document();
	test_escaping();
	test_numbers();
	test_misuse();
	return tap_done();
}
