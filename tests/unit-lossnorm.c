/*
 * TAP unit test of lossnorm.c: every loss.normalize_by, loss.scale and the
 * default counts, checked against factors worked out by hand on a mesh
 * where dp, cp and the micro-batches all differ (dp 3, cp 2, K 2), so
 * that no rule can swap two of them unseen; the default "uneven"
 * counts, which must differ for every chunk size but one token; and the
 * masks of the data, "eod:N" and "fraction:F".
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/lossnorm.h"
#include "model/mesh.h"
#include "tap.h"

/*
 * Chunks in order (micro-batch, dp rank, cp rank), cp fastest: micro-batch
 * 0 then 1, each dp 0..2 with cp 0 and 1.  tokens = micro_batch*seq/cp =
 * 1*16/2 = 8 slots a chunk.
 */
static const char counts[] = "1 2 3 4 5 6 7 8 1 3 5 7";
#define N_TOTAL	52	/* their sum */

static void
setup(struct config *c, struct mesh *m, enum loss_divisor by,
    enum data_size scale)
{
	memset(c, 0, sizeof *c);
	c->mesh.dp = 3;
	c->mesh.cp = 2;
	c->mesh.pp = c->mesh.tp = c->mesh.ep = c->mesh.etp = 1;
	c->model.micro_batch = 1;
	c->model.seq = 16;
	c->training.micro_batches = 2;
	c->loss.valid_tokens = (char *)counts;
	c->loss.normalize_by = by;
	c->loss.scale = scale;
	mesh_init(m, 3, 2, 1, 1, 1, 1);
}

/* The factor of chunk (m, dp rank d, cp rank c), as num/den. */
static bool
coef_is(const struct loss_norm *ln, int mb, int d, int c, int64_t num,
    int64_t den)
{
	struct rational q = ln->coef[mb * 6 + d * 2 + c];

	return q_equal(q, q_make(num, den));
}

static void
test_divisors(void)
{
	struct config	 c;
	struct mesh	 m;
	struct loss_norm ln;

	setup(&c, &m, LOSS_GLOBAL, SIZE_DP_CP);
	lossnorm_build(&ln, &c, &m);
	tap_ok(ln.tokens == 8 && ln.total == N_TOTAL && ln.chunks == 12,
	    "12 chunks of 8 slots, 52 valid tokens");
	tap_ok(q_equal(ln.expected, q_make(8, N_TOTAL)),
	    "every atom's expected weight is tokens/N = 8/52");
	/* global, times dp*cp = 6: 8 * 6 / 52. */
	tap_ok(coef_is(&ln, 1, 2, 1, 48, N_TOTAL) &&
	    coef_is(&ln, 0, 0, 0, 48, N_TOTAL), "global, scale dp-cp: 48/52");
	lossnorm_free(&ln);

	/*
	 * verl #5993: each cp rank's own chunks over dp and K.  cp 0 holds
	 * 1, 3, 5 (micro-batch 0) and 7, 1, 5 (1): 22; cp 1 holds 2, 4, 6
	 * and 8, 3, 7: 30.
	 */
	setup(&c, &m, LOSS_GLOBAL_WITHOUT_CP, SIZE_ONE);
	lossnorm_build(&ln, &c, &m);
	tap_ok(coef_is(&ln, 0, 1, 0, 8, 22),
	    "global-without-cp: cp rank 0 counts its chunks, 22");
	tap_ok(coef_is(&ln, 1, 2, 1, 8, 30),
	    "global-without-cp: cp rank 1 counts its chunks, 30");
	lossnorm_free(&ln);

	setup(&c, &m, LOSS_GLOBAL_CP_DUPLICATED, SIZE_ONE);
	lossnorm_build(&ln, &c, &m);
	tap_ok(coef_is(&ln, 0, 0, 0, 8, 2 * N_TOTAL),
	    "global-cp-duplicated: cp * N = 104");
	lossnorm_free(&ln);

	/* rank: dp 1 cp 1 holds chunks (0,1,1) = 4 and (1,1,1) = 3. */
	setup(&c, &m, LOSS_RANK, SIZE_ONE);
	lossnorm_build(&ln, &c, &m);
	tap_ok(coef_is(&ln, 0, 1, 1, 8, 7) && coef_is(&ln, 1, 1, 1, 8, 7),
	    "rank: the rank's own tokens over both micro-batches, 4 + 3");
	lossnorm_free(&ln);

	/* micro-batch: K * n; chunk (1, 2, 0) = 5, chunk (0, 0, 1) = 2. */
	setup(&c, &m, LOSS_MICRO_BATCH, SIZE_ONE);
	lossnorm_build(&ln, &c, &m);
	tap_ok(coef_is(&ln, 1, 2, 0, 8, 10) && coef_is(&ln, 0, 0, 1, 8, 4),
	    "micro-batch: K times the chunk's own count");
	lossnorm_free(&ln);

	/* micro-batch-own: n alone, no K; (1, 2, 0) = 5, (0, 0, 1) = 2. */
	setup(&c, &m, LOSS_MICRO_BATCH_OWN, SIZE_ONE);
	lossnorm_build(&ln, &c, &m);
	tap_ok(coef_is(&ln, 1, 2, 0, 8, 5) && coef_is(&ln, 0, 0, 1, 8, 2),
	    "micro-batch-own: the chunk's own count, not times K");
	lossnorm_free(&ln);

	/* micro-batch-cp, times cp: (0, 2, *) = 5 + 6, K = 2. */
	setup(&c, &m, LOSS_MICRO_BATCH_CP, SIZE_CP);
	lossnorm_build(&ln, &c, &m);
	tap_ok(coef_is(&ln, 0, 2, 1, 16, 22) && coef_is(&ln, 0, 2, 0, 16, 22),
	    "micro-batch-cp, scale cp: K times the count over cp, times cp");
	lossnorm_free(&ln);

	setup(&c, &m, LOSS_NONE, SIZE_DP);
	lossnorm_build(&ln, &c, &m);
	tap_ok(coef_is(&ln, 1, 0, 0, 24, 1), "none, scale dp: 8 * 3");
	tap_ok(lossnorm_size(&m, SIZE_DP_CP) == 6 &&
	    lossnorm_size(&m, SIZE_DP) == 3 && lossnorm_size(&m, SIZE_CP) == 2 &&
	    lossnorm_size(&m, SIZE_ONE) == 1, "the sizes dp-cp, dp, cp, none");
	lossnorm_free(&ln);
}

/* The uneven counts: in range, and not all equal, for any size. */
static void
test_uneven(void)
{
	int64_t	 tokens;
	int	 i, n, first;
	bool	 in_range = true, differ_all = true;

	for (tokens = 2; tokens <= 4096; tokens++) {
		bool differ = false;

		first = lossnorm_uneven_count(tokens, 0);
		for (i = 0; i < 64; i++) {
			n = lossnorm_uneven_count(tokens, i);
			if (n < (tokens + 1) / 2 || n > tokens)
				in_range = false;
			if (i < 2 && n != first)
				differ = true;
		}
		if (!differ)
			differ_all = false;
	}
	tap_ok(in_range, "uneven counts lie between half and all the slots");
	tap_ok(differ_all, "the first two chunks' counts differ for every size "
	    "from 2 to 4096 slots (12 and 26 included)");
}

/*
 * "eod:N" and "fraction:F": a step's chunks laid end to end lose the
 * share of their slots, each floor(T F) or one more, and for eod:N the
 * masked slots are the last of every document of N.
 */
static void
test_masks(void)
{
	struct config	 c;
	struct mesh	 m;
	struct loss_norm ln;
	char		 why[256];
	int64_t		 num, den, sum, n, tokens;
	int		 i, chunks = 50;
	bool		 share = true, spread = true, ends = true;

	for (tokens = 1; tokens <= 40; tokens++)
		for (den = 2; den <= 13; den++)
			for (num = 1; num < den; num++) {
				for (sum = 0, i = 0; i < chunks; i++) {
					n = lossnorm_masked_count(tokens, i,
					    num, den);
					sum += n;
					if (n != tokens * num / den && n !=
					    tokens * num / den + 1)
						spread = false;
				}
				if (sum != tokens * chunks * num / den)
					share = false;
			}
	tap_ok(share, "the chunks together lose floor(slots x share)");
	tap_ok(spread, "each chunk loses floor(T x share) or one more");
	/* eod:5 over chunks of 3 slots: slots 4, 9, 14 are masked. */
	for (i = 0; i < 5; i++)
		if (lossnorm_masked_count(3, i, 1, 5) !=
		    (int64_t)(i == 1 || i == 3 || i == 4))
			ends = false;
	tap_ok(ends, "eod:5 masks slot 4 of every 5, the document's end");
	/*
	 * A share of 10^9 - 1 over 10^9 on a step of 10^12 slots, whose
	 * product would overflow: the first chunk of 10^6 slots loses
	 * floor(999999.999), the last floor(10^12 - 1000) -
	 * floor(10^12 - 10^6 - 999.999), all of them.
	 */
	tap_ok(lossnorm_masked_count(1000000, 0, 999999999, 1000000000) ==
	    999999 && lossnorm_masked_count(1000000, 999999, 999999999,
	    1000000000) == 1000000,
	    "a share in billionths of a large step, exactly");

	tap_ok(cfg_token_mask("eod:511", &num, &den, why, sizeof why) == 1 &&
	    num == 1 && den == 511, "eod:511 is the share 1/511");
	tap_ok(cfg_token_mask("fraction:0.25", &num, &den, why, sizeof why) ==
	    1 && num == 1 && den == 4, "fraction:0.25 is 1/4, in lowest terms");
	tap_ok(cfg_token_mask("fraction:0", &num, &den, why, sizeof why) == 1 &&
	    num == 0, "fraction:0 masks nothing");
	tap_ok(cfg_token_mask("eod:1", &num, &den, why, sizeof why) == -1 &&
	    cfg_token_mask("fraction:1", &num, &den, why, sizeof why) == -1 &&
	    cfg_token_mask("eod:", &num, &den, why, sizeof why) == -1 &&
	    cfg_token_mask("fraction:1e-3", &num, &den, why, sizeof why) == -1,
	    "eod:1, fraction:1, eod: and fraction:1e-3 are malformed");
	tap_ok(cfg_token_mask("uneven", &num, &den, why, sizeof why) == 0 &&
	    cfg_token_mask("3 4", &num, &den, why, sizeof why) == 0,
	    "uneven and a list are not masks");

	/* Through lossnorm_build: 12 chunks of 8 slots, eod:3. */
	setup(&c, &m, LOSS_GLOBAL, SIZE_DP_CP);
	c.loss.valid_tokens = (char *)"eod:3";
	lossnorm_build(&ln, &c, &m);
	tap_ok(ln.valid[0] == 6 && ln.valid[1] == 5 && ln.valid[2] == 5 &&
	    ln.total == 96 - 32, "eod:3 on chunks of 8: 6, 5, 5, ..., 32 "
	    "masked of 96");
	lossnorm_free(&ln);
}

int
main(void)
{
	test_divisors();
	test_uneven();
	test_masks();
	return tap_done();
}
