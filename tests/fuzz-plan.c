/*
 * Deterministic fuzzing of a plan: step's factor (planexpr.c, TAP).
 *
 * Expressions built from the grammar's own tokens and from junk (every
 * size, digits, operators, parentheses, spaces, bytes that are none of
 * these) go through plan_expr_eval with every size 1 and with large
 * ones.  It must never crash, report an error at an offset inside the
 * text, agree with itself on a second reading, and, with every size 1,
 * accept whatever it accepts with the real sizes unless that overflowed:
 * the load-time reading finds every error that does not depend on them.
 * The plan: section's YAML goes through fuzz-config's mutations.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rational.h"
#include "config/planexpr.h"
#include "fuzz-text.h"
#include "tap.h"

#define CASES	4000

static const char *const tokens[] = {
	"dp", "cp", "pp", "tp", "ep", "etp", "edp", "vpp", "dp_shard",
	"dp_replicate", "micro_batches", "0", "1", "2", "7", "1000000000",
	"1000000001", "08", "*", "/", "(", ")", " ", "\t", "-", "+", ".",
	"Dp", "\xff", "\0", "//", "((", "))", "micro", "_",
};
#define NTOKENS	(sizeof(tokens) / sizeof(tokens[0]))

int
main(void)
{
	struct text	 t = { NULL, 0, 0 };
	int64_t		 ones[PLAN_NAME__COUNT], big[PLAN_NAME__COUNT];
	struct rational	 a, b;
	char		 why[256];
	size_t		 at, at2, n, k;
	int		 i, c, ra, rb, rc, bad = 0, accepted = 0;

	for (i = 0; i < PLAN_NAME__COUNT; i++) {
		ones[i] = 1;
		big[i] = (int64_t)1 << (10 + 2 * i);
	}
	fuzz_seed(0x706c616e);
	for (c = 0; c < CASES; c++) {
		t.len = 0;
		n = 1 + pick(12);
		for (k = 0; k < n; k++) {
			const char *w = tokens[pick(NTOKENS)];

			text_insert(&t, t.len, w, w[0] == '\0' ? 1 : strlen(w));
		}
		at = at2 = 0;
		ra = plan_expr_eval(t.s, t.len, NULL, &a, &at, why,
		    sizeof why);
		rb = plan_expr_eval(t.s, t.len, ones, &b, &at2, why,
		    sizeof why);
		if (ra != rb || (ra == -1 && at != at2) ||
		    (ra == 0 && !q_equal(a, b)) || (ra == -1 && at > t.len)) {
			bad++;
			tap_diag("case %d: NULL sizes and sizes 1 disagree", c);
			continue;
		}
		rc = plan_expr_eval(t.s, t.len, big, &b, &at2, why,
		    sizeof why);
		if (ra == 0)
			accepted++;
		/* Only an overflow is an error that the sizes bring. */
		if (ra == 0 && rc == -1 && strstr(why, "does not fit") == NULL) {
			bad++;
			tap_diag("case %d: an error only with large sizes: %s",
			    c, why);
		}
		if (ra == -1 && rc == 0) {
			bad++;
			tap_diag("case %d: an error with sizes 1 only", c);
		}
	}
	tap_ok(bad == 0, "%d expressions: no crash, offsets inside, the "
	    "load-time reading finds every error but overflow", CASES);
	tap_ok(accepted > CASES / 50, "some expressions are accepted (%d)",
	    accepted);
	free(t.s);
	return tap_done();
}
