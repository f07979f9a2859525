/*
 * A plan step's factor (planexpr.h): a strict recursive-descent reader
 * that evaluates as it reads, in exact rationals.
 *
 *	expr	:= term { ("*" | "/") term }
 *	term	:= integer | name | "(" expr ")"
 *
 * Spaces may stand between tokens.  There is no minus and no addition: a
 * gradient's factor is a product of sizes, and a sum of them has no
 * meaning a framework's code gives it.  Every size is at least 1, so a
 * divisor is zero only through a literal 0, which the load-time reading
 * (every size 1) finds; overflow, which depends on the sizes, is found
 * again with the config's own when the constraints are checked.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/rational.h"
#include "config/planexpr.h"

const char *const plan_expr_names[PLAN_NAME__COUNT + 1] = {
	[PLAN_NAME_DP] = "dp",
	[PLAN_NAME_CP] = "cp",
	[PLAN_NAME_PP] = "pp",
	[PLAN_NAME_TP] = "tp",
	[PLAN_NAME_EP] = "ep",
	[PLAN_NAME_ETP] = "etp",
	[PLAN_NAME_EDP] = "edp",
	[PLAN_NAME_VPP] = "vpp",
	[PLAN_NAME_DP_SHARD] = "dp_shard",
	[PLAN_NAME_DP_REPLICATE] = "dp_replicate",
	[PLAN_NAME_MICRO_BATCHES] = "micro_batches",
	[PLAN_NAME_GTP] = "gtp",
	[PLAN_NAME_EGTP] = "egtp",
	[PLAN_NAME__COUNT] = NULL
};

struct reading {
	const char	*s;
	size_t		 len, pos;
	const int64_t	*values;
	int		 depth;
	size_t		 at;	/* where the error is */
	char		*why;
	size_t		 whylen;
};

static int
fail(struct reading *r, size_t at, const char *msg)
{
	r->at = at;
	snprintf(r->why, r->whylen, "%s", msg);
	return -1;
}

static void
skip_spaces(struct reading *r)
{
	while (r->pos < r->len && (r->s[r->pos] == ' ' ||
	    r->s[r->pos] == '\t'))
		r->pos++;
}

static bool
is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || c == '_';
}

static int	read_expr(struct reading *, struct rational *);

static int
read_integer(struct reading *r, struct rational *v)
{
	size_t	 start = r->pos;
	int64_t	 n = 0;

	while (r->pos < r->len && r->s[r->pos] >= '0' &&
	    r->s[r->pos] <= '9') {
		n = n * 10 + (r->s[r->pos] - '0');
		r->pos++;
		if (n > PLAN_EXPR_MAX_INT)
			return fail(r, start, "an integer larger than "
			    "1000000000");
	}
	/* "08" reads as octal in some YAML: say what is meant instead. */
	if (r->s[start] == '0' && r->pos - start > 1)
		return fail(r, start, "an integer with a leading zero");
	*v = q_make(n, 1);
	return 0;
}

static int
read_name(struct reading *r, struct rational *v)
{
	size_t	 start = r->pos, n;
	char	 msg[160];
	int	 i;

	while (r->pos < r->len && is_name_char(r->s[r->pos]))
		r->pos++;
	n = r->pos - start;
	for (i = 0; i < PLAN_NAME__COUNT; i++)
		if (strlen(plan_expr_names[i]) == n &&
		    memcmp(plan_expr_names[i], r->s + start, n) == 0) {
			*v = q_make(r->values != NULL ? r->values[i] : 1, 1);
			return 0;
		}
	snprintf(msg, sizeof msg, "unknown size \"%.*s\" (sizes: dp, cp, pp, "
	    "tp, ep, etp, edp, vpp, dp_shard, dp_replicate, micro_batches, "
	    "gtp, egtp)",
	    n > 40 ? 40 : (int)n, r->s + start);
	return fail(r, start, msg);
}

static int
read_term(struct reading *r, struct rational *v)
{
	size_t	 open;
	char	 c;

	skip_spaces(r);
	if (r->pos == r->len)
		return fail(r, r->pos, "expected an integer, a size or \"(\", "
		    "got the end of the expression");
	c = r->s[r->pos];
	if (c >= '0' && c <= '9')
		return read_integer(r, v);
	if (is_name_char(c))
		return read_name(r, v);
	if (c != '(')
		return fail(r, r->pos, "expected an integer, a size or \"(\"");
	if (++r->depth > PLAN_EXPR_MAX_DEPTH)
		return fail(r, r->pos, "parentheses nested more than 32 deep");
	open = r->pos++;
	if (read_expr(r, v) == -1)
		return -1;
	skip_spaces(r);
	if (r->pos == r->len || r->s[r->pos] != ')')
		return fail(r, r->pos == r->len ? open : r->pos,
		    r->pos == r->len ? "unclosed \"(\"" :
		    "expected \"*\", \"/\" or \")\"");
	r->pos++;
	r->depth--;
	return 0;
}

static int
read_expr(struct reading *r, struct rational *v)
{
	struct rational	 t;
	size_t		 op;
	char		 c;

	if (read_term(r, v) == -1)
		return -1;
	for (;;) {
		skip_spaces(r);
		if (r->pos == r->len)
			return 0;
		c = r->s[r->pos];
		if (c != '*' && c != '/')
			return 0;
		op = r->pos++;
		if (read_term(r, &t) == -1)
			return -1;
		if (c == '/') {
			if (q_is_zero(t))
				return fail(r, op, "division by zero");
			t = q_make(t.den, t.num);
		}
		if (!q_mul_try(*v, t, v))
			return fail(r, op, "the factor does not fit in 64 "
			    "bits");
	}
}

int
plan_expr_eval(const char *s, size_t len, const int64_t *values,
    struct rational *out, size_t *at, char *why, size_t whylen)
{
	struct reading	 r;

	memset(&r, 0, sizeof r);
	r.s = s;
	r.len = len;
	r.values = values;
	r.why = why;
	r.whylen = whylen;
	if (len > PLAN_EXPR_MAX_LEN) {
		*at = 0;
		snprintf(why, whylen, "an expression longer than %d "
		    "characters", PLAN_EXPR_MAX_LEN);
		return -1;
	}
	if (read_expr(&r, out) == -1) {
		*at = r.at;
		return -1;
	}
	if (r.pos != r.len) {
		*at = r.pos;
		snprintf(why, whylen, r.s[r.pos] == ')' ? "unmatched \")\"" :
		    "expected \"*\" or \"/\"");
		return -1;
	}
	return 0;
}
