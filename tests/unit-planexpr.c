/*
 * TAP unit test of planexpr.c, the factor of a plan: step (issue 25):
 * values with known sizes, precedence left to right, parentheses, and
 * each error with the byte offset it is reported at.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/rational.h"
#include "config/planexpr.h"
#include "tap.h"

/* dp 4, cp 2, pp 3, tp 8, ep 2, etp 1, edp 32, vpp 1, dp_shard 2,
 * dp_replicate 2, micro_batches 6: every size told apart. */
static const int64_t sizes[PLAN_NAME__COUNT] = {
	[PLAN_NAME_DP] = 4, [PLAN_NAME_CP] = 2, [PLAN_NAME_PP] = 3,
	[PLAN_NAME_TP] = 8, [PLAN_NAME_EP] = 2, [PLAN_NAME_ETP] = 1,
	[PLAN_NAME_EDP] = 32, [PLAN_NAME_VPP] = 5, [PLAN_NAME_DP_SHARD] = 7,
	[PLAN_NAME_DP_REPLICATE] = 11, [PLAN_NAME_MICRO_BATCHES] = 6,
};

static void
value(const char *s, int64_t num, int64_t den)
{
	struct rational	 q;
	char		 why[256], got[48], want[48];
	size_t		 at = 0;

	if (plan_expr_eval(s, strlen(s), sizes, &q, &at, why, sizeof why) ==
	    -1) {
		tap_ok(false, "%s = %lld/%lld (error at %zu: %s)", s,
		    (long long)num, (long long)den, at, why);
		return;
	}
	q_format(q, got, sizeof got);
	q_format(q_make(num, den), want, sizeof want);
	tap_ok_str_eq(got, want, "%s = %s", s, want);
}

static void
error(const char *s, const int64_t *v, size_t want_at, const char *want)
{
	struct rational	 q;
	char		 why[256];
	size_t		 at = 999;

	if (plan_expr_eval(s, strlen(s), v, &q, &at, why, sizeof why) == 0) {
		tap_ok(false, "\"%s\" is an error (%s)", s, want);
		return;
	}
	tap_ok(at == want_at && strstr(why, want) != NULL,
	    "\"%s\": %s at %zu (got \"%s\" at %zu)", s, want, want_at, why,
	    at);
}

int
main(void)
{
	int64_t	 huge[PLAN_NAME__COUNT];
	int	 i;

	value("1", 1, 1);
	value("0", 0, 1);
	value("1/micro_batches", 1, 6);
	value("dp*cp", 8, 1);
	value("dp / cp", 2, 1);
	/* Left to right: (8/4)*2, not 8/(4*2). */
	value("tp/dp*cp", 4, 1);
	value("tp/(dp*cp)", 1, 1);
	value(" ( ( pp ) ) ", 3, 1);
	value("1/(dp*cp*micro_batches)", 1, 48);
	value("edp/ep/etp", 16, 1);
	value("vpp*dp_shard*dp_replicate", 385, 1);
	value("1000000000/1000000000", 1, 1);
	value("2*3/4*5/6", 5, 4);

	error("", sizes, 0, "got the end");
	error("1/", sizes, 2, "got the end");
	error("1//2", sizes, 2, "expected an integer");
	error("gas", sizes, 0, "unknown size \"gas\"");
	error("dp*Tp", sizes, 3, "expected an integer");
	error("1/(dp", sizes, 2, "unclosed");
	error("dp)", sizes, 2, "unmatched");
	error("dp tp", sizes, 3, "expected \"*\" or \"/\"");
	error("2-1", sizes, 1, "expected \"*\" or \"/\"");
	error("-1", sizes, 0, "expected an integer");
	error("1/0", sizes, 1, "division by zero");
	error("dp/(tp*0)", sizes, 2, "division by zero");
	error("08", sizes, 0, "leading zero");
	error("1000000001", sizes, 0, "larger than");
	error("((((((((((((((((((((((((((((((((((1))))))))))))))))))))))))))"
	    "))))))))", sizes, 32, "nested");
	/* Found with the real sizes only: the constraint's case. */
	for (i = 0; i < PLAN_NAME__COUNT; i++)
		huge[i] = 1;
	huge[PLAN_NAME_DP] = 1000000000;
	error("dp*dp*dp", huge, 5, "does not fit");
	value("dp*dp*dp", 64, 1);
	return tap_done();
}
