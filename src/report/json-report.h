/*
 * The JSON report of one audit (json-report.c).
 */
#ifndef GRADAUDIT_JSON_REPORT_H
#define GRADAUDIT_JSON_REPORT_H

#include <stdint.h>

#include "report/report.h"

struct json;

/* One JSON object (SPEC section 9); the caller wraps several in an array. */
void	 report_json(struct json *, const struct audit *,
	    const struct report_options *);
/*
 * --expand writes a cell per rank and region and every atom of its terms:
 * its size grows with the square of the world.  Above this many bytes, as
 * report_expand_size estimates them, it is refused unless forced
 * (--force-expand), since one such report of a 4,096-rank mesh was 11.6
 * GB (issue 26).
 */
#define REPORT_EXPAND_MAX	((uint64_t)256 << 20)
uint64_t report_expand_size(const struct audit *);
/*
 * The same object without "params": verdicts, counts, settings and
 * findings, for --format jsonl and explain.
 */
void	 report_json_summary(struct json *, const struct audit *);

#endif
