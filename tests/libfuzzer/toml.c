/*
 * libFuzzer harness of the TOML reader (src/import/toml.c) and of what import
 * torchtitan does with what it reads (src/import/torchtitan.c): the input is a
 * train config.
 *
 * The contract checked, as tests/fuzz-toml.c checks it on its own
 * mutations (tests/toml-check.h): toml_parse returns 0 or -1; on -1 one
 * line "NAME:LINE:COL: ..." whose line and column exist; on 0 entries
 * without duplicates that, written back as TOML, read back the same.  A
 * file that parses is then imported at --world 8: torchtitan_import
 * returns 0 or -1, and whatever it prints is lines that start
 * "gradaudit: import: ".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "toml-check.h"
#include "import/toml.h"
#include "import/torchtitan.h"
#include "base/xmalloc.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define NAME	"fuzz.toml"

static void
check_import(const struct toml_doc *doc)
{
	struct torchtitan_import ti;
	char			*said;
	size_t			 len, n;
	int			 rc;

	memset(&ti, 0, sizeof(ti));
	ti.world = 8;
	ti.version = "0.2.2";
	harness_capture_begin();
	rc = torchtitan_import(&ti, doc);
	said = harness_capture_end(&len, NULL, NULL);
	if (rc != 0 && rc != -1)
		harness_fail(said, "torchtitan_import returned %d", rc);
	if (len > 0 && !harness_lines(said, len, "gradaudit: import: ", &n))
		harness_fail(said, "a line that is not \"gradaudit: import: "
		    "...\"");
	if (rc == -1 && len == 0)
		harness_fail(said, "a refusal without a message");
	torchtitan_import_free(&ti);
	free(said);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct toml_doc	 doc;
	const char	*why;
	char		 err[1024];
	int		 rc;

	err[0] = '\0';
	rc = toml_parse(NAME, (const char *)data, size, &doc, err,
	    sizeof(err));
	if ((why = toml_check_result(NAME, (const char *)data, size, rc, err,
	    &doc)) != NULL)
		harness_fail(err, "%s", why);
	if (rc == 0) {
		if ((why = toml_check_round_trip(&doc)) != NULL)
			harness_fail(NULL, "%s", why);
		check_import(&doc);
		toml_free(&doc);
	}
	return 0;
}
