/*
 * TAP unit test of meshsum.c: linear combinations written by mesh groups,
 * the largest group first, in the dense and the expert view, relative to
 * a rank ("self"), and printed in report notation.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "model/mesh.h"
#include "symbolic/atom.h"
#include "symbolic/lincomb.h"
#include "symbolic/meshsum.h"
#include "tap.h"

/* The sum of the ranks r with keep(r), times scale. */
static const struct lincomb *
sum_of(struct arena *ar, const struct mesh *m, int (*keep)(const struct
    coord *, int), int arg, struct rational scale)
{
	const struct lincomb	*x = &lincomb_zero;
	struct coord		 c;
	int			 r;

	for (r = 0; r < m->world; r++) {
		mesh_coord_of(m, r, &c);
		if (keep(&c, arg))
			x = lc_add(ar, x, lc_atom(ar, (uint32_t)r));
	}
	return lc_scale(ar, x, scale);
}

static int
all(const struct coord *c, int arg)
{
	(void)c;
	(void)arg;
	return 1;
}

static int
stage(const struct coord *c, int pp)
{
	return c->pp == pp;
}

/* The dp group of pp 1, tp arg. */
static int
dp_group(const struct coord *c, int tp)
{
	return c->pp == 1 && c->tp == tp;
}

/* The edp group of pp 0, ep arg, etp 1. */
static int
edp_group(const struct coord *c, int ep)
{
	return c->pp == 0 && c->ep == ep && c->etp == 1;
}

static const char *
format(struct arena *ar, const struct mesh *m, const struct lincomb *x,
    int rank, size_t *n)
{
	struct atom_space sp;
	struct ms_piece	*p;
	const char	*s;

	/* One source, one micro-batch: every atom a rank. */
	atom_space_init(&sp);
	sp.mesh = *m;
	p = ms_pieces(&sp, x, n);
	s = ms_format(ar, &sp, p, *n, rank);

	free(p);
	return s;
}

int
main(void)
{
	struct arena		 ar;
	struct mesh		 m;
	struct atom_space	 sp;
	struct ms_piece		*p;
	const struct lincomb	*x;
	char			 buf[64];
	size_t			 n;

	arena_init(&ar);
	/* dp=4 pp=2 tp=2, ep=2 etp=2: edp = 2, 16 ranks. */
	mesh_init(&m, 4, 1, 2, 2, 2, 2);
	atom_space_init(&sp);
	sp.mesh = m;

	x = sum_of(&ar, &m, all, 0, q_make(1, 8));
	tap_ok_str_eq(format(&ar, &m, x, -1, &n), "sum_all()/8",
	    "the whole world is one term");
	tap_ok(n == 1, "one piece");

	x = sum_of(&ar, &m, stage, 1, q_make(1, 1));
	tap_ok_str_eq(format(&ar, &m, x, -1, &n), "sum_dp_tp(pp1)",
	    "a stage: the sum over dp and tp");
	tap_ok_str_eq(format(&ar, &m, x, 9, &n), "sum_dp_tp(self)",
	    "relative to a rank of that stage: its own");
	tap_ok_str_eq(format(&ar, &m, x, 3, &n), "sum_dp_tp(pp1)",
	    "relative to a rank of the other stage: by its coordinates");

	x = sum_of(&ar, &m, dp_group, 1, q_make(1, 4));
	p = ms_pieces(&sp, x, &n);
	tap_ok(n == 1 && p[0].n == 4, "a dp group: one piece of 4 atoms");
	ms_piece_sum(&p[0], buf, sizeof buf);
	tap_ok_str_eq(buf, "dp", "summed over dp");
	ms_piece_of(&sp, &p[0], -1, buf, sizeof buf);
	tap_ok_str_eq(buf, "pp1 tp1", "of pp1 tp1");
	tap_ok(ms_piece_has(&sp, &p[0], 11) && !ms_piece_has(&sp, &p[0], 10),
	    "rank 11 (pp1 dp1 tp1) is in it, rank 10 (tp0) not");
	free(p);

	/* g3 + (sum over dp of pp1 tp1)/2: coefficients group as lc_format. */
	x = lc_add(&ar, lc_atom(&ar, 3), sum_of(&ar, &m, dp_group, 1,
	    q_make(1, 2)));
	tap_ok_str_eq(format(&ar, &m, x, -1, &n), "g3+sum_dp(pp1,tp1)/2",
	    "an atom and a group, by coefficient");
	tap_ok_str_eq(format(&ar, &m, x, 3, &n), "self+sum_dp(pp1,tp1)/2",
	    "the rank's own atom is self");
	x = lc_add(&ar, sum_of(&ar, &m, dp_group, 0, q_make(1, 4)),
	    sum_of(&ar, &m, dp_group, 1, q_make(-1, 4)));
	tap_ok_str_eq(format(&ar, &m, x, -1, &n),
	    "sum_dp(pp1,tp0)/4-sum_dp(pp1,tp1)/4", "a negative coefficient");

	/* An expert group: pp0, ep1, etp1, every edp: ranks 3 and 7. */
	x = sum_of(&ar, &m, edp_group, 1, q_make(1, 2));
	p = ms_pieces(&sp, x, &n);
	tap_ok(n == 1 && p[0].n == 2, "an edp group: one piece");
	ms_piece_sum(&p[0], buf, sizeof buf);
	tap_ok_str_eq(buf, "edp", "summed over edp");
	ms_piece_of(&sp, &p[0], -1, buf, sizeof buf);
	tap_ok_str_eq(buf, "pp0 ep1 etp1", "of its expert coordinates");
	free(p);

	/* Atoms that make no group stay atoms. */
	x = lc_add(&ar, lc_atom(&ar, 0), lc_atom(&ar, 5));
	tap_ok_str_eq(format(&ar, &m, x, -1, &n), "g0+g5", "no group: atoms");
	tap_ok(n == 2, "two pieces");
	tap_ok_str_eq(format(&ar, &m, &lincomb_zero, -1, &n), "0", "zero");

	arena_free(&ar);
	return tap_done();
}
