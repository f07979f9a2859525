/*
 * The reports of an audit rendered to a stream, for tests/fuzz-trace.c:
 * it parses JSON with jansson, whose jsonw_string and jsonw_null are also
 * the names of src/base/json.h's emitter, so the two cannot meet in one file.
 */
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "fuzz-render.h"
#include "report/json-report.h"
#include "report/report.h"
#include "report/text-report.h"

void
fuzz_render(FILE *fp, const struct audit *a)
{
	struct report_options	o;
	struct json		j;

	memset(&o, 0, sizeof o);
	report_text(fp, a, &o);
	o.verbose = true;
	report_text(fp, a, &o);
	jsonw_init(&j, fp, false);
	report_json(&j, a, &o);
	o.expand = true;
	jsonw_init(&j, fp, true);
	report_json(&j, a, &o);
}
