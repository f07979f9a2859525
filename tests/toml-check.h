/*
 * The contract of the TOML reader (src/import/toml.h), checked by its two
 * fuzzers: tests/fuzz-toml.c (deterministic, in make check) and
 * tests/libfuzzer/toml.c.  Each function returns NULL when the contract
 * holds, or what broke it.
 */
#ifndef GRADAUDIT_TOML_CHECK_H
#define GRADAUDIT_TOML_CHECK_H

#include <stddef.h>

#include "import/toml.h"

/*
 * After toml_parse(name, text, len) returned rc with err and doc: -1
 * left an empty doc and one line "NAME:LINE:COL: ..." whose line is one
 * of the text's and whose column is on it; 0 left no message, entries
 * with keys, values of the subset, no two with one path.
 */
const char	*toml_check_result(const char *name, const char *text,
		    size_t len, int rc, const char *err,
		    const struct toml_doc *doc);

/*
 * The doc written back as TOML (every key dotted and quoted, at the top)
 * must parse to the same entries: the reader and this writer agree on
 * escapes, numbers and keys.
 */
const char	*toml_check_round_trip(const struct toml_doc *doc);

#endif
