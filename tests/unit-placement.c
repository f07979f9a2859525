/*
 * Unit tests of the placement algebra (placement.c), table-driven: the sum
 * of two placements, the normalization of sub-dimensions of size one, which
 * ranks keep a Replicate part that joins a Partial one (the decision both
 * engines run, issue 22), and the names the reports print.  A wrong entry
 * here is a wrong reduction in every audit that meets it: a Replicate
 * gradient summed over tp counts it tp times (the router of torchtitan
 * #2416's fixed code under an etp replica), a Partial one kept as it is
 * misses the other ranks' shares (#2387).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "model/mesh.h"
#include "model/placement.h"
#include "tap.h"

#define R	PLACE_REPLICATE
#define P	PLACE_PARTIAL

static struct placement
pl(enum place slice, enum place etp)
{
	struct placement p = { slice, etp };

	return p;
}

/* The sum of two placements, sub-dimension by sub-dimension. */
static void
test_join(void)
{
	static const struct {
		enum place	a, b, want;
	} cases[] = {
		{ R, R, R },	/* two complete values: complete */
		{ P, P, P },	/* two shares: a share */
		{ R, P, P },	/* a complete value and a share: a share */
		{ P, R, P },
	};
	size_t	i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct placement j = pl_join(pl(cases[i].a, R),
		    pl(R, cases[i].b));

		tap_ok(j.slice == cases[i].a && j.etp == cases[i].b,
		    "join keeps each sub-dimension apart (%zu)", i);
		j = pl_join(pl(cases[i].a, cases[i].a),
		    pl(cases[i].b, cases[i].b));
		tap_ok(pl_equal(j, pl(cases[i].want, cases[i].want)),
		    "join of %d and %d is %d", cases[i].a, cases[i].b,
		    cases[i].want);
	}
}

/*
 * Which rank keeps its value when a Replicate part joins a Partial sum: on
 * coordinate 0 of each sub-dimension that changes, zero elsewhere, so the
 * sum counts it once.
 */
static void
test_keeps_value(void)
{
	static const struct {
		int		 slice, etp;	/* the rank's coordinates */
		struct placement from, to;
		bool		 keeps;
	} cases[] = {
		/* Partial to Partial, Replicate to Replicate: nothing to do. */
		{ 1, 1, { P, P }, { P, P }, true },
		{ 1, 1, { R, R }, { R, R }, true },
		/* Replicate to Partial: only coordinate 0 keeps it. */
		{ 0, 0, { R, R }, { P, P }, true },
		{ 1, 0, { R, R }, { P, P }, false },
		{ 0, 1, { R, R }, { P, P }, false },
		/* Over one sub-dimension only: the other does not decide. */
		{ 0, 1, { R, P }, { P, P }, true },
		{ 1, 0, { R, P }, { P, P }, false },
		{ 1, 0, { P, R }, { P, P }, true },
		{ 0, 1, { P, R }, { P, P }, false },
	};
	struct coord	c;
	size_t		i;

	memset(&c, 0, sizeof c);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		c.slice = cases[i].slice;
		c.etp = cases[i].etp;
		tap_ok(pl_keeps_value(&c, cases[i].from, cases[i].to) ==
		    cases[i].keeps, "slice %d etp %d keeps the value: %s (%zu)",
		    c.slice, c.etp, cases[i].keeps ? "yes" : "no", i);
	}
}

/* A sub-dimension of size 1 is Replicate: a group of one sums nothing. */
static void
test_normalize_and_format(void)
{
	struct mesh	 m;
	char		 buf[80];

	/* tp 4 = 2 token slices x etp 2. */
	mesh_init(&m, 1, 1, 1, 4, 2, 2);
	tap_ok(pl_equal(pl_normalize(&m, pl(P, R)), pl(P, R)),
	    "tp 4, etp 2: both sub-dimensions kept");
	tap_ok_str_eq(pl_format(&m, pl(P, R), buf, sizeof buf),
	    "Partial over the token slices, Replicate over etp",
	    "a mixed placement is named by sub-dimension");
	tap_ok_str_eq(pl_format(&m, pl(P, P), buf, sizeof buf), "Partial",
	    "a uniform placement by one word");
	/* tp 2 = etp 2: one token slice. */
	mesh_init(&m, 1, 1, 1, 2, 1, 2);
	tap_ok(pl_equal(pl_normalize(&m, pl(P, P)), pl(R, P)),
	    "tp = etp: the one token slice is Replicate");
	tap_ok_str_eq(pl_format(&m, pl(R, P), buf, sizeof buf), "Partial",
	    "and the name leaves it out");
	/* tp 2, etp 1: two token slices, no etp. */
	mesh_init(&m, 2, 1, 1, 2, 2, 1);
	tap_ok(pl_equal(pl_normalize(&m, pl(P, P)), pl(P, R)),
	    "etp 1: etp is Replicate");
	tap_ok_str_eq(pl_format(&m, pl(P, R), buf, sizeof buf), "Partial",
	    "and the name leaves it out");
	tap_ok(m.slices == 2, "tp 2, etp 1: two token slices");
}

int
main(void)
{
	test_join();
	test_keeps_value();
	test_normalize_and_format();
	return tap_done();
}
