/*
 * TAP unit test of mesh.c: the rank layout of SPEC section 5, checked
 * against enumeration in Megatron's order, against hand-computed
 * coordinates and groups of the meshes from the bug reports, and for the
 * structural promises of mesh.h (group order, ids, partitions).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/mesh.h"
#include "tap.h"

/* Meshes as dp, pp, tp, ep, etp; each satisfies SPEC section 5. */
static const int meshes[][5] = {
	{ 1, 1, 1, 1, 1 },
	{ 2, 2, 1, 1, 1 },	/* Megatron #844 */
	{ 4, 1, 2, 4, 1 },
	{ 2, 1, 4, 2, 2 },
	{ 2, 2, 4, 2, 2 },
	{ 3, 3, 2, 2, 1 },
	{ 2, 4, 4, 1, 4 },
	{ 8, 2, 2, 8, 2 },
	{ 1, 3, 1, 1, 1 },
	{ 4, 2, 4, 2, 4 },
};

/* Compare a group listing with the expected members and index. */
static int
group_is(const struct mesh *m, enum group_kind kind, int rank,
    const int *want, int nwant, int want_index)
{
	int	 got[64], i, n, idx;

	n = mesh_group_size(m, kind);
	if (n != nwant) {
		tap_diag("%s group size %d, want %d", mesh_group_name(kind),
		    n, nwant);
		return 0;
	}
	idx = mesh_group(m, kind, rank, got);
	for (i = 0; i < n; i++) {
		if (got[i] != want[i]) {
			tap_diag("%s group of %d: member %d is %d, want %d",
			    mesh_group_name(kind), rank, i, got[i], want[i]);
			return 0;
		}
	}
	if (idx != want_index || mesh_group_index(m, kind, rank) != idx) {
		tap_diag("%s group of %d: index %d, want %d",
		    mesh_group_name(kind), rank, idx, want_index);
		return 0;
	}
	return 1;
}

static int
coord_is(const struct mesh *m, int rank, int pp, int dp, int tp, int ep,
    int etp, int edp)
{
	struct coord	 c;

	mesh_coord_of(m, rank, &c);
	if (c.pp == pp && c.dp == dp && c.tp == tp && c.ep == ep &&
	    c.etp == etp && c.edp == edp)
		return 1;
	tap_diag("rank %d: pp %d dp %d tp %d ep %d etp %d edp %d", rank,
	    c.pp, c.dp, c.tp, c.ep, c.etp, c.edp);
	return 0;
}

static void
test_megatron_844(void)
{
	struct mesh	 m;

	mesh_init(&m, 2, 1, 2, 1, 1, 1);
	tap_ok(m.world == 4 && m.edp == 2, "dp=2 pp=2 tp=1: world 4, edp 2");
	tap_ok(coord_is(&m, 0, 0, 0, 0, 0, 0, 0) &&
	    coord_is(&m, 1, 0, 1, 0, 0, 0, 1), "ranks 0 and 1 are stage 0");
	tap_ok(coord_is(&m, 2, 1, 0, 0, 0, 0, 0) &&
	    coord_is(&m, 3, 1, 1, 0, 0, 0, 1), "ranks 2 and 3 are stage 1");
	tap_ok(group_is(&m, GROUP_DP, 2, (int[]){ 2, 3 }, 2, 0),
	    "dp group of 2");
	tap_ok(group_is(&m, GROUP_PP, 1, (int[]){ 1, 3 }, 2, 0),
	    "pp group of 1");
	tap_ok(group_is(&m, GROUP_TP, 3, (int[]){ 3 }, 1, 0), "tp group of 3");
	tap_ok(group_is(&m, GROUP_EMBEDDING, 0, (int[]){ 0, 2 }, 2, 0),
	    "embedding group of 0");
	tap_ok(group_is(&m, GROUP_EMBEDDING, 3, (int[]){ 1, 3 }, 2, 1),
	    "embedding group of 3");
	tap_ok(group_is(&m, GROUP_EDP, 3, (int[]){ 2, 3 }, 2, 1),
	    "edp group of 3");
	tap_ok(mesh_group_id(&m, GROUP_EMBEDDING, 3) == 1 &&
	    mesh_group_id(&m, GROUP_EMBEDDING, 1) == 1 &&
	    mesh_group_id(&m, GROUP_EMBEDDING, 2) == 0,
	    "embedding group ids");
}

static void
test_moe_ep4(void)
{
	struct mesh	 m;

	/* dp=4 tp=2 ep=4 etp=1: s = rank, ep = s % 4, edp = s / 4. */
	mesh_init(&m, 4, 1, 1, 2, 4, 1);
	tap_ok(m.world == 8 && m.edp == 2, "dp=4 tp=2 ep=4: world 8, edp 2");
	tap_ok(coord_is(&m, 5, 0, 2, 1, 1, 0, 1),
	    "rank 5: dp 2 tp 1 ep 1 edp 1");
	tap_ok(coord_is(&m, 6, 0, 3, 0, 2, 0, 1),
	    "rank 6: dp 3 tp 0 ep 2 edp 1");
	tap_ok(coord_is(&m, 3, 0, 1, 1, 3, 0, 0),
	    "rank 3: dp 1 tp 1 ep 3 edp 0");
	tap_ok(mesh_rank_of_expert(&m, 0, 2, 0, 1) == 6, "expert (2,0,1) is 6");
	tap_ok(group_is(&m, GROUP_EP, 5, (int[]){ 4, 5, 6, 7 }, 4, 1),
	    "ep group of 5");
	tap_ok(group_is(&m, GROUP_EDP, 5, (int[]){ 1, 5 }, 2, 1),
	    "edp group of 5");
	tap_ok(group_is(&m, GROUP_ETP, 5, (int[]){ 5 }, 1, 0),
	    "etp group of 5");
	tap_ok(group_is(&m, GROUP_TP, 5, (int[]){ 4, 5 }, 2, 1),
	    "tp group of 5");
	tap_ok(group_is(&m, GROUP_DP, 5, (int[]){ 1, 3, 5, 7 }, 4, 2),
	    "dp group of 5");
	tap_ok(group_is(&m, GROUP_EMBEDDING, 5, (int[]){ 5 }, 1, 0),
	    "pp=1: the embedding group is the rank itself");
}

static void
test_moe_etp2(void)
{
	struct mesh	 m;

	/*
	 * dp=2 pp=2 tp=4 ep=2 etp=2: s = tp + 4 dp, etp = s % 2,
	 * ep = (s / 2) % 2, edp = s / 4.
	 */
	mesh_init(&m, 2, 1, 2, 4, 2, 2);
	tap_ok(m.world == 16 && m.edp == 2, "dp=2 pp=2 tp=4 ep=2 etp=2");
	tap_ok(coord_is(&m, 14, 1, 1, 2, 1, 0, 1),
	    "rank 14: pp 1 dp 1 tp 2 ep 1 etp 0 edp 1");
	tap_ok(coord_is(&m, 3, 0, 0, 3, 1, 1, 0),
	    "rank 3: pp 0 dp 0 tp 3 ep 1 etp 1 edp 0");
	tap_ok(coord_is(&m, 9, 1, 0, 1, 0, 1, 0),
	    "rank 9: pp 1 dp 0 tp 1 ep 0 etp 1 edp 0");
	tap_ok(mesh_rank_of_expert(&m, 1, 1, 0, 1) == 14,
	    "expert (1,0,1) on pp 1");
	tap_ok(mesh_rank_of(&m, 1, 1, 2) == 14, "dense (1,1,2) is 14");
	tap_ok(group_is(&m, GROUP_ETP, 14, (int[]){ 14, 15 }, 2, 0),
	    "etp group of 14");
	tap_ok(group_is(&m, GROUP_EP, 14, (int[]){ 12, 14 }, 2, 1),
	    "ep group of 14");
	tap_ok(group_is(&m, GROUP_EDP, 14, (int[]){ 10, 14 }, 2, 1),
	    "edp group of 14");
	tap_ok(group_is(&m, GROUP_TP, 14, (int[]){ 12, 13, 14, 15 }, 4, 2),
	    "tp group of 14");
	tap_ok(group_is(&m, GROUP_DP, 14, (int[]){ 10, 14 }, 2, 1),
	    "dp group of 14");
	tap_ok(group_is(&m, GROUP_PP, 14, (int[]){ 6, 14 }, 2, 1),
	    "pp group of 14");
	tap_ok(group_is(&m, GROUP_ETP, 3, (int[]){ 2, 3 }, 2, 1),
	    "etp group of 3");
	tap_ok(group_is(&m, GROUP_EP, 3, (int[]){ 1, 3 }, 2, 1),
	    "ep group of 3");
	tap_ok(group_is(&m, GROUP_EDP, 3, (int[]){ 3, 7 }, 2, 0),
	    "edp group of 3");
	tap_ok(group_is(&m, GROUP_EMBEDDING, 9, (int[]){ 1, 9 }, 2, 1),
	    "embedding group of 9");
}

/* Enumerating tp fastest, then dp, then pp must count 0, 1, 2, ... */
static int
check_dense_order(const struct mesh *m)
{
	struct coord	 c;
	int		 pp, dp, tp, expect = 0;

	for (pp = 0; pp < m->pp; pp++)
		for (dp = 0; dp < m->dp; dp++)
			for (tp = 0; tp < m->tp; tp++, expect++) {
				if (mesh_rank_of(m, pp, dp, tp) != expect)
					return 0;
				mesh_coord_of(m, expect, &c);
				if (c.pp != pp || c.dp != dp || c.tp != tp)
					return 0;
			}
	return expect == m->world;
}

/* Within a stage, etp fastest, then ep, then edp must count the stage. */
static int
check_expert_order(const struct mesh *m)
{
	struct coord	 c;
	int		 pp, ep, etp, edp, expect = 0;

	for (pp = 0; pp < m->pp; pp++)
		for (edp = 0; edp < m->edp; edp++)
			for (ep = 0; ep < m->ep; ep++)
				for (etp = 0; etp < m->etp; etp++, expect++) {
					if (mesh_rank_of_expert(m, pp, ep, etp,
					    edp) != expect)
						return 0;
					mesh_coord_of(m, expect, &c);
					if (c.pp != pp || c.ep != ep ||
					    c.etp != etp || c.edp != edp)
						return 0;
				}
	return expect == m->world;
}

/*
 * The gtp coordinates by counting, not by mesh.c's formulas: within a
 * stage tp is fastest, then cp, then gtp, then the rest of pure_dp
 * (gtp_replica); experts count etp, ep, egtp, then egtp_replica.  The
 * group oracles below read these coordinates, so they rest on this count.
 */
static int
check_gtp_order(const struct mesh *m)
{
	struct coord	 c;
	int		 pp, rep, g, cp, tp, ep, etp, expect;

	for (expect = 0, pp = 0; pp < m->pp; pp++)
		for (rep = 0; rep < m->pure_dp / m->gtp; rep++)
			for (g = 0; g < m->gtp; g++)
				for (cp = 0; cp < m->cp; cp++)
					for (tp = 0; tp < m->tp; tp++) {
						mesh_coord_of(m, expect++, &c);
						if (c.pp != pp || c.tp != tp ||
						    c.cp != cp || c.gtp != g ||
						    c.gtp_replica != rep)
							return 0;
					}
	if (expect != m->world)
		return 0;
	for (expect = 0, pp = 0; pp < m->pp; pp++)
		for (rep = 0; rep < m->edp / m->egtp; rep++)
			for (g = 0; g < m->egtp; g++)
				for (ep = 0; ep < m->ep; ep++)
					for (etp = 0; etp < m->etp; etp++) {
						mesh_coord_of(m, expect++, &c);
						if (c.pp != pp || c.ep != ep ||
						    c.etp != etp || c.egtp != g ||
						    c.egtp_replica != rep)
							return 0;
					}
	return expect == m->world;
}

/* The coordinate a group of this kind varies. */
static int
varying(const struct mesh *m, const struct coord *c, enum group_kind kind)
{
	switch (kind) {
	/* A product's coordinate: its axes' as digits, the fastest last. */
	case GROUP_CP_TP:
		return c->tp + m->tp * c->cp;
	case GROUP_PURE_DP_TP:
		return c->tp + m->tp * c->pure_dp;
	case GROUP_DP_TP:
		return c->tp + m->tp * c->dp;
	case GROUP_EP_ETP:
		return c->etp + m->etp * c->ep;
	case GROUP_EDP_ETP:
		return c->etp + m->etp * c->edp;
	case GROUP_EDP_EP:
		return c->ep + m->ep * c->edp;
	case GROUP_EDP_EP_ETP:
		return c->etp + m->etp * (c->ep + m->ep * c->edp);
	case GROUP_GTP_TP:
		return c->tp + m->tp * c->gtp;
	case GROUP_GTP_CP:
		return c->cp + m->cp * c->gtp;
	case GROUP_GTP_CP_TP:
		return c->tp + m->tp * (c->cp + m->cp * c->gtp);
	case GROUP_GTP_REPLICATE_TP:
		return c->tp + m->tp * (c->cp + m->cp * c->gtp_replica);
	case GROUP_EGTP_ETP:
		return c->etp + m->etp * c->egtp;
	case GROUP_EGTP_EP:
		return c->ep + m->ep * c->egtp;
	case GROUP_EGTP_EP_ETP:
		return c->etp + m->etp * (c->ep + m->ep * c->egtp);
	case GROUP_EGTP_REPLICATE_ETP:
		return c->etp + m->etp * c->egtp_replica;
	case GROUP_EGTP_REPLICATE_EP:
		return c->ep + m->ep * c->egtp_replica;
	case GROUP_EGTP_REPLICATE_EP_ETP:
		return c->etp + m->etp * (c->ep + m->ep * c->egtp_replica);
	case GROUP_DP:
		return c->dp;
	case GROUP_TP:
		return c->tp;
	case GROUP_PP:
		return c->pp;
	case GROUP_EP:
		return c->ep;
	case GROUP_ETP:
		return c->etp;
	case GROUP_EDP:
		return c->edp;
	/* The gtp coordinates as check_gtp_order counted them. */
	case GROUP_GTP:
		return c->gtp;
	case GROUP_GTP_REPLICATE:
		return c->cp + m->cp * c->gtp_replica;
	case GROUP_EGTP:
		return c->egtp;
	case GROUP_EGTP_REPLICATE:
		return c->egtp_replica;
	default:
		abort();
	}
}

/* Do two ranks agree on every coordinate the group holds fixed? */
static int
same_fixed(const struct coord *a, const struct coord *b,
    enum group_kind kind)
{
	switch (kind) {
	case GROUP_GTP:
		return a->pp == b->pp && a->tp == b->tp && a->cp == b->cp &&
		    a->gtp_replica == b->gtp_replica;
	case GROUP_GTP_REPLICATE:
		return a->pp == b->pp && a->tp == b->tp && a->gtp == b->gtp;
	case GROUP_EGTP:
		return a->pp == b->pp && a->ep == b->ep && a->etp == b->etp &&
		    a->egtp_replica == b->egtp_replica;
	case GROUP_EGTP_REPLICATE:
		return a->pp == b->pp && a->ep == b->ep && a->etp == b->etp &&
		    a->egtp == b->egtp;
	case GROUP_GTP_TP:
		return a->pp == b->pp && a->cp == b->cp &&
		    a->gtp_replica == b->gtp_replica;
	case GROUP_GTP_CP:
		return a->pp == b->pp && a->tp == b->tp &&
		    a->gtp_replica == b->gtp_replica;
	case GROUP_GTP_CP_TP:
		return a->pp == b->pp && a->gtp_replica == b->gtp_replica;
	case GROUP_GTP_REPLICATE_TP:
		return a->pp == b->pp && a->gtp == b->gtp;
	case GROUP_EGTP_ETP:
		return a->pp == b->pp && a->ep == b->ep &&
		    a->egtp_replica == b->egtp_replica;
	case GROUP_EGTP_EP:
		return a->pp == b->pp && a->etp == b->etp &&
		    a->egtp_replica == b->egtp_replica;
	case GROUP_EGTP_EP_ETP:
		return a->pp == b->pp && a->egtp_replica == b->egtp_replica;
	case GROUP_EGTP_REPLICATE_ETP:
		return a->pp == b->pp && a->ep == b->ep && a->egtp == b->egtp;
	case GROUP_EGTP_REPLICATE_EP:
		return a->pp == b->pp && a->etp == b->etp && a->egtp == b->egtp;
	case GROUP_EGTP_REPLICATE_EP_ETP:
		return a->pp == b->pp && a->egtp == b->egtp;
	case GROUP_DP:
		return a->pp == b->pp && a->tp == b->tp;
	case GROUP_TP:
		return a->pp == b->pp && a->dp == b->dp;
	case GROUP_PP:
	case GROUP_EMBEDDING:
		return a->dp == b->dp && a->tp == b->tp;
	case GROUP_EP:
		return a->pp == b->pp && a->etp == b->etp && a->edp == b->edp;
	case GROUP_ETP:
		return a->pp == b->pp && a->ep == b->ep && a->edp == b->edp;
	case GROUP_EDP:
		return a->pp == b->pp && a->ep == b->ep && a->etp == b->etp;
	case GROUP_CP_TP:
		return a->pp == b->pp && a->pure_dp == b->pure_dp;
	case GROUP_PURE_DP_TP:
		return a->pp == b->pp && a->cp == b->cp;
	case GROUP_DP_TP:
	case GROUP_EDP_EP_ETP:
		return a->pp == b->pp;
	case GROUP_EP_ETP:
		return a->pp == b->pp && a->edp == b->edp;
	case GROUP_EDP_ETP:
		return a->pp == b->pp && a->ep == b->ep;
	case GROUP_EDP_EP:
		return a->pp == b->pp && a->etp == b->etp;
	default:
		abort();
	}
}

/*
 * For one kind of group (not embedding): every rank's listing is ordered
 * by the varying coordinate, holds the other coordinates fixed, contains
 * the rank at the returned index, has the lowest member as id, and the
 * groups of the leaders cover every rank exactly once.
 */
static int
check_groups(const struct mesh *m, enum group_kind kind)
{
	struct coord	 cr, cm;
	int		*members, *cover, r, i, n, idx, id, good = 1;

	n = mesh_group_size(m, kind);
	members = calloc((size_t)n, sizeof(*members));
	cover = calloc((size_t)m->world, sizeof(*cover));
	if (members == NULL || cover == NULL)
		abort();
	for (r = 0; r < m->world && good; r++) {
		mesh_coord_of(m, r, &cr);
		idx = mesh_group(m, kind, r, members);
		id = mesh_group_id(m, kind, r);
		if (idx != varying(m, &cr, kind) || members[idx] != r ||
		    mesh_group_index(m, kind, r) != idx || id != members[0])
			good = 0;
		for (i = 0; i < n && good; i++) {
			mesh_coord_of(m, members[i], &cm);
			if (varying(m, &cm, kind) != i ||
			    !same_fixed(&cr, &cm, kind) ||
			    (i > 0 && members[i] <= members[i - 1]) ||
			    mesh_group_id(m, kind, members[i]) != id)
				good = 0;
			if (id == r)
				cover[members[i]]++;
		}
	}
	for (r = 0; r < m->world && good; r++)
		if (cover[r] != 1)
			good = 0;
	free(members);
	free(cover);
	return good;
}

static int
check_embedding(const struct mesh *m)
{
	struct coord	 c;
	int		 members[2], r, idx, want;

	for (r = 0; r < m->world; r++) {
		mesh_coord_of(m, r, &c);
		idx = mesh_group(m, GROUP_EMBEDDING, r, members);
		if (m->pp == 1) {
			if (mesh_group_size(m, GROUP_EMBEDDING) != 1 ||
			    members[0] != r || idx != 0)
				return 0;
			continue;
		}
		want = c.pp == 0 ? 0 : c.pp == m->pp - 1 ? 1 : -1;
		if (mesh_group_size(m, GROUP_EMBEDDING) != 2 || idx != want ||
		    mesh_group_index(m, GROUP_EMBEDDING, r) != want ||
		    members[0] != mesh_rank_of(m, 0, c.dp, c.tp) ||
		    members[1] != mesh_rank_of(m, m->pp - 1, c.dp, c.tp) ||
		    mesh_group_id(m, GROUP_EMBEDDING, r) != members[0])
			return 0;
	}
	return 1;
}

/*
 * Every rank's coordinates against the layout they come from, worked out
 * without mesh_coord_of's divisions: dense (tp fastest, then dp, then
 * pp), dp split as cp fastest then pure_dp, tp as slice then etp, and a
 * stage's ranks as etp fastest, then ep, then edp.  mesh_coord_of skips
 * the divisions by a cp or etp of 1 (issue 24).
 */
static int
check_coords(const struct mesh *m)
{
	struct coord	 c;
	int		 r, pp, dp, tp, etp, ep, edp, want = 0;

	for (pp = 0; pp < m->pp; pp++)
		for (edp = 0; edp < m->edp; edp++)
			for (ep = 0; ep < m->ep; ep++)
				for (etp = 0; etp < m->etp; etp++, want++) {
					mesh_coord_of(m, want, &c);
					if (c.pp != pp || c.edp != edp ||
					    c.ep != ep || c.etp != etp)
						return 0;
				}
	for (r = 0, pp = 0; pp < m->pp; pp++)
		for (dp = 0; dp < m->dp; dp++)
			for (tp = 0; tp < m->tp; tp++, r++) {
				mesh_coord_of(m, r, &c);
				if (c.pp != pp || c.dp != dp || c.tp != tp ||
				    c.cp != dp % m->cp ||
				    c.cp + m->cp * c.pure_dp != dp ||
				    c.slice * m->etp + c.etp != tp)
					return 0;
			}
	return 1;
}

static void
test_all_meshes(void)
{
	struct mesh	 m;
	size_t		 i;
	int		 k;
	static const enum group_kind kinds[] = { GROUP_DP, GROUP_TP,
	    GROUP_PP, GROUP_EP, GROUP_ETP, GROUP_EDP };

	for (i = 0; i < sizeof(meshes) / sizeof(meshes[0]); i++) {
		const int	*d = meshes[i];

		mesh_init(&m, d[0], 1, d[1], d[2], d[3], d[4]);
		tap_ok(m.world == d[0] * d[1] * d[2] &&
		    m.edp * d[3] * d[4] == d[0] * d[2],
		    "mesh dp=%d pp=%d tp=%d ep=%d etp=%d: world and edp",
		    d[0], d[1], d[2], d[3], d[4]);
		tap_ok(check_dense_order(&m), "  dense rank order round trip");
		tap_ok(check_expert_order(&m),
		    "  expert rank order round trip");
		for (k = 0; k < 6; k++)
			tap_ok(check_groups(&m, kinds[k]),
			    "  %s groups ordered and partitioning",
			    mesh_group_name(kinds[k]));
		for (k = GROUP_CP_TP; k < GROUP__COUNT; k++)
			tap_ok(check_groups(&m, (enum group_kind)k),
			    "  %s groups ordered and partitioning",
			    mesh_group_name((enum group_kind)k));
		tap_ok(mesh_group_size(&m, GROUP_DP) == d[0] &&
		    mesh_group_size(&m, GROUP_PP) == d[1] &&
		    mesh_group_size(&m, GROUP_TP) == d[2] &&
		    mesh_group_size(&m, GROUP_EP) == d[3] &&
		    mesh_group_size(&m, GROUP_ETP) == d[4] &&
		    mesh_group_size(&m, GROUP_EDP) == m.edp,
		    "  group sizes");
		tap_ok(check_embedding(&m), "  embedding groups");
		tap_ok(check_coords(&m), "  coordinates of every rank");
		mesh_init(&m, d[0], 2, d[1], d[2], d[3], d[4]);
		tap_ok(check_coords(&m), "  coordinates of every rank with "
		    "cp=2");
	}
}

static void
test_config_and_names(void)
{
	struct config	 cfg;
	struct mesh	 m;

	memset(&cfg, 0, sizeof(cfg));
	cfg.mesh.dp = 2;
	cfg.mesh.pp = 3;
	cfg.mesh.tp = 4;
	cfg.mesh.ep = 4;
	cfg.mesh.etp = 2;
	cfg.mesh.cp = 1;
	cfg.mesh.dp_replicate = 1;
	mesh_from_config(&m, &cfg);
	tap_ok(m.dp == 2 && m.pp == 3 && m.tp == 4 && m.ep == 4 && m.etp == 2 &&
	    m.edp == 1 && m.world == 24, "mesh_from_config");

	/*
	 * Megatron's order with cp (parallel_state.py, RankGenerator
	 * "tp-cp-ep-dp-pp"): tp fastest, then cp, then dp, then pp.  dp=2
	 * cp=2 tp=2 pp=2: rank 13 = tp 1 + 2 * (cp 0 + 2 * (dp 1 + 2 * pp 1)).
	 */
	mesh_init(&m, 2, 2, 2, 2, 2, 1);
	{
		struct coord	 c;
		int		 g[4];

		mesh_coord_of(&m, 13, &c);
		tap_ok(m.world == 16 && m.dp == 4 && m.edp == 4 &&
		    c.pp == 1 && c.tp == 1 && c.cp == 0 && c.pure_dp == 1 &&
		    c.dp == 2, "cp: rank 13 is pp 1 dp 1 cp 0 tp 1");
		mesh_group(&m, GROUP_CP, 13, g);
		tap_ok(mesh_group_size(&m, GROUP_CP) == 2 && g[0] == 13 &&
		    g[1] == 15, "cp group of rank 13: 13 15");
		mesh_group(&m, GROUP_PURE_DP, 13, g);
		tap_ok(mesh_group_size(&m, GROUP_PURE_DP) == 2 && g[0] == 9 &&
		    g[1] == 13, "pure dp group of rank 13: 9 13");
		mesh_group(&m, GROUP_DP, 13, g);
		tap_ok(g[0] == 9 && g[1] == 11 && g[2] == 13 && g[3] == 15,
		    "dp_cp group of rank 13: 9 11 13 15");
		mesh_group(&m, GROUP_EP, 13, g);
		tap_ok(g[0] == 12 && g[1] == 13, "experts regroup dp*cp*tp: "
		    "ep group of rank 13: 12 13");
	}

	tap_ok(strcmp(mesh_group_name(GROUP_DP), "dp") == 0 &&
	    strcmp(mesh_group_name(GROUP_TP), "tp") == 0 &&
	    strcmp(mesh_group_name(GROUP_PP), "pp") == 0 &&
	    strcmp(mesh_group_name(GROUP_EP), "ep") == 0 &&
	    strcmp(mesh_group_name(GROUP_ETP), "etp") == 0 &&
	    strcmp(mesh_group_name(GROUP_EDP), "edp") == 0 &&
	    strcmp(mesh_group_name(GROUP_EMBEDDING), "embedding") == 0 &&
	    strcmp(mesh_group_name(GROUP_CP), "cp") == 0 &&
	    strcmp(mesh_group_name(GROUP_PURE_DP), "pure-dp") == 0,
	    "group names");
}

/*
 * torchtitan's ParallelDims order pp, dp_replicate, dp_shard, cp, tp is
 * Megatron's with dp split as shard*cp fastest and replicate slowest:
 * dp 4 = dp_replicate 2 * dp_shard 2, cp 2, tp 2, rank 13 = tp 1 +
 * 2 * (cp 0 + 2 * (dp_shard 1 + 2 * dp_replicate 1)).  With ep 2, etp 2
 * the experts regroup the 16 ranks as edp 4 = dp_replicate 2 * efsdp 2.
 */
static void
test_hsdp(void)
{
	struct mesh	 m;
	int		 g[4];

	mesh_init(&m, 4, 2, 1, 2, 2, 2);
	mesh_set_replicate(&m, 2);
	tap_ok(m.dp_shard == 2 && m.efsdp == 2 &&
	    mesh_group_size(&m, GROUP_DP_SHARD) == 4 &&
	    mesh_group_size(&m, GROUP_DP_REPLICATE) == 2 &&
	    mesh_group_size(&m, GROUP_EFSDP) == 2 &&
	    mesh_group_size(&m, GROUP_EDP_REPLICATE) == 2,
	    "hsdp: group sizes dp_shard*cp 4, replicate 2, efsdp 2");
	tap_ok(mesh_group(&m, GROUP_DP_SHARD, 13, g) == 2 && g[0] == 9 &&
	    g[1] == 11 && g[2] == 13 && g[3] == 15,
	    "hsdp: dp_shard_cp group of rank 13: 9 11 13 15, index 2");
	tap_ok(mesh_group(&m, GROUP_DP_REPLICATE, 13, g) == 1 && g[0] == 5 &&
	    g[1] == 13, "hsdp: dp_replicate group of rank 13: 5 13");
	tap_ok(mesh_group(&m, GROUP_EFSDP, 13, g) == 1 && g[0] == 9 &&
	    g[1] == 13, "hsdp: efsdp group of rank 13: 9 13");
	tap_ok(mesh_group(&m, GROUP_EDP_REPLICATE, 13, g) == 1 &&
	    g[0] == 5 && g[1] == 13 &&
	    mesh_group_id(&m, GROUP_EDP_REPLICATE, 13) == 5,
	    "hsdp: expert replicate group of rank 13: 5 13");
}

/*
 * Products of axes (a plan's all-reduce: [cp, tp]), worked by hand on
 * dp 2 cp 2 pp 2 tp 2 ep 2: rank 13 is stage 1's s = 5, tp 1, cp 0,
 * pure_dp 1; in the expert layout (edp 4) etp 0, ep 1, edp 2.  A group's
 * index reads the axes' coordinates as digits, the fastest axis last.
 */
static void
test_products(void)
{
	struct mesh	 m;
	int		 g[8], k;

	mesh_init(&m, 2, 2, 2, 2, 2, 1);
	tap_ok(mesh_group_size(&m, GROUP_CP_TP) == 4 &&
	    mesh_group_size(&m, GROUP_PURE_DP_TP) == 4 &&
	    mesh_group_size(&m, GROUP_DP_TP) == 8 &&
	    mesh_group_size(&m, GROUP_EP_ETP) == 2 &&
	    mesh_group_size(&m, GROUP_EDP_ETP) == 4 &&
	    mesh_group_size(&m, GROUP_EDP_EP) == 8 &&
	    mesh_group_size(&m, GROUP_EDP_EP_ETP) == 8,
	    "products: sizes are the products of their axes");
	tap_ok(mesh_group(&m, GROUP_CP_TP, 13, g) == 1 && g[0] == 12 &&
	    g[1] == 13 && g[2] == 14 && g[3] == 15 &&
	    mesh_group_id(&m, GROUP_CP_TP, 13) == 12,
	    "products: [cp, tp] of rank 13: 12 13 14 15, index 1");
	tap_ok(mesh_group(&m, GROUP_PURE_DP_TP, 13, g) == 3 && g[0] == 8 &&
	    g[1] == 9 && g[2] == 12 && g[3] == 13,
	    "products: [pure-dp, tp] of rank 13: 8 9 12 13, index 3");
	tap_ok(mesh_group(&m, GROUP_DP_TP, 13, g) == 5 && g[0] == 8 &&
	    g[7] == 15, "products: [dp, tp] of rank 13: stage 1, index 5");
	tap_ok(mesh_group(&m, GROUP_EP_ETP, 13, g) == 1 && g[0] == 12 &&
	    g[1] == 13, "products: [ep, etp] of rank 13: 12 13, index 1");
	tap_ok(mesh_group(&m, GROUP_EDP_ETP, 13, g) == 2 && g[0] == 9 &&
	    g[1] == 11 && g[2] == 13 && g[3] == 15,
	    "products: [edp, etp] of rank 13: 9 11 13 15, index 2");
	tap_ok(mesh_group(&m, GROUP_EDP_EP, 13, g) == 5 && g[0] == 8 &&
	    g[7] == 15 && mesh_group_index(&m, GROUP_EDP_EP_ETP, 13) == 5,
	    "products: [edp, ep] and [edp, ep, etp] of rank 13: stage 1, "
	    "index 5");
	for (k = GROUP_CP_TP; k < GROUP__COUNT; k++)
		tap_ok(check_groups(&m, (enum group_kind)k),
		    "products: with cp 2, %s groups ordered and partitioning",
		    mesh_group_name((enum group_kind)k));
	/*
	 * The plan's words and products are the group kinds in order, by
	 * name, and each with axes is as large as its axes (config.h).
	 */
	for (k = 0; k < GROUP__COUNT; k++) {
		unsigned ax = k < CFG_PLAN_PRODUCT ? cfg_plan_group_axes[k] :
		    cfg_plan_products[k - CFG_PLAN_PRODUCT].axes;
		int	 n = 1;

		n *= (ax & PLAN_AXIS_TP) ? m.tp : 1;
		n *= (ax & PLAN_AXIS_CP) ? m.cp : 1;
		n *= (ax & PLAN_AXIS_GTP) ? m.gtp : 1;
		n *= (ax & PLAN_AXIS_GTP_REPLICA) ? m.pure_dp / m.gtp : 1;
		n *= (ax & PLAN_AXIS_ETP) ? m.etp : 1;
		n *= (ax & PLAN_AXIS_EP) ? m.ep : 1;
		n *= (ax & PLAN_AXIS_EGTP) ? m.egtp : 1;
		n *= (ax & PLAN_AXIS_EGTP_REPLICA) ? m.edp / m.egtp : 1;
		tap_ok(strcmp(mesh_group_name((enum group_kind)k),
		    cfg_plan_group_name(k)) == 0 && (ax == 0 ||
		    mesh_group_size(&m, (enum group_kind)k) == n),
		    "products: plan group %d is %s, as large as its axes", k,
		    cfg_plan_group_name(k));
	}
	tap_ok(strcmp(mesh_group_name(GROUP_CP_TP), "[cp, tp]") == 0 &&
	    strcmp(mesh_group_name(GROUP_EDP_EP_ETP), "[edp, ep, etp]") == 0,
	    "products: named as a plan writes them");
}

/*
 * The world and the one-rank reference are derived once, from the config
 * (issue 22): run counted its processes without cp, and the reference kept
 * dp_replicate 2 on a mesh of one rank, whose dp_shard was then 0.
 */
static void
test_world_and_one_rank(void)
{
	struct config	 c, one;
	struct mesh	 m;

	memset(&c, 0, sizeof c);
	c.mesh.dp = 4;
	c.mesh.dp_replicate = 2;
	c.mesh.cp = 2;
	c.mesh.pp = 2;
	c.mesh.tp = 2;
	c.mesh.ep = c.mesh.etp = 1;
	c.mesh.vpp = 2;
	c.model.seq = 16;
	c.model.vocab_divisible_by = 4;
	c.training.micro_batches = 3;
	tap_ok(cfg_world(&c) == 32, "the world counts cp: 4 x 2 x 2 x 2 = 32");
	cfg_one_rank(&one, &c);
	tap_ok(cfg_world(&one) == 1, "the reference is one rank");
	tap_ok(one.mesh.dp_replicate == 1 && one.mesh.vpp == 1 &&
	    one.mesh.cp == 1, "no replicas, no virtual stages, no cp");
	tap_ok(one.model.seq == 8 && one.training.micro_batches == 1,
	    "a cp rank's share of the sequence, one micro-batch");
	tap_ok(one.model.vocab_divisible_by == 8,
	    "the vocabulary padded as the audited tp pads it");
	mesh_from_config(&m, &one);
	tap_ok(m.world == 1 && m.dp_shard == 1 && m.efsdp == 1,
	    "its mesh shards over one rank, not zero");
	tap_ok(c.mesh.dp_replicate == 2 && c.model.seq == 16,
	    "the audited config is left as it was");
	cfg_free(&one);
}

/*
 * Generalized tensor parallelism (mesh.h): gtp the fastest factor of
 * pure_dp, gtp_replicate the rest of dp with cp (Megatron's dp_cp without
 * gtp_remat), egtp the fastest factor of edp.  With cp 1 the gtp groups
 * are Megatron's ('tp-gtp_remat-cp-ep-dp-pp'): with tp 2, gtp 2, dp 4
 * rank 0's gtp_remat group is 0 2 and its dp_cp group 0 4.
 */
static void
test_gtp(void)
{
	static const int shapes[][7] = {
		/* pure_dp, cp, pp, tp, ep, etp, gtp; egtp below */
		{ 4, 1, 1, 2, 1, 1, 2 },
		{ 4, 2, 2, 2, 2, 1, 2 },
		{ 8, 1, 1, 1, 2, 1, 4 },
		{ 6, 2, 1, 2, 2, 2, 3 },
		{ 4, 1, 2, 1, 1, 1, 4 },
	};
	static const enum group_kind kinds[] = { GROUP_GTP,
	    GROUP_GTP_REPLICATE, GROUP_EGTP, GROUP_EGTP_REPLICATE };
	struct mesh	 m;
	int		 g[16], i, k, egtp;

	mesh_init(&m, 4, 1, 1, 2, 1, 1);
	mesh_set_gtp(&m, 2, 1);
	tap_ok(mesh_group_size(&m, GROUP_GTP) == 2 &&
	    mesh_group(&m, GROUP_GTP, 0, g) == 0 && g[0] == 0 && g[1] == 2,
	    "gtp: tp 2 gtp 2 dp 4: rank 0's gtp group is 0 2, as Megatron's");
	tap_ok(mesh_group_size(&m, GROUP_GTP_REPLICATE) == 2 &&
	    mesh_group(&m, GROUP_GTP_REPLICATE, 0, g) == 0 && g[0] == 0 &&
	    g[1] == 4, "gtp: rank 0's gtp_replicate group is 0 4");
	tap_ok(mesh_group(&m, GROUP_GTP, 7, g) == 1 && g[0] == 5 &&
	    g[1] == 7 && mesh_group(&m, GROUP_GTP_REPLICATE, 7, g) == 1 &&
	    g[0] == 3 && g[1] == 7, "gtp: rank 7: gtp 5 7, gtp_replicate 3 7");
	tap_ok(mesh_group_size(&m, GROUP_EGTP) == 1 &&
	    mesh_group_size(&m, GROUP_EGTP_REPLICATE) == m.edp,
	    "gtp: egtp 1 leaves edp whole");
	mesh_init(&m, 4, 2, 1, 1, 1, 1);
	mesh_set_gtp(&m, 2, 1);
	tap_ok(mesh_group(&m, GROUP_GTP, 0, g) == 0 && g[0] == 0 &&
	    g[1] == 2 && mesh_group(&m, GROUP_GTP_REPLICATE, 0, g) == 0 &&
	    g[0] == 0 && g[1] == 1 && g[2] == 4 && g[3] == 5,
	    "gtp: with cp 2 the gtp peers skip the cp ranks; gtp_replicate "
	    "holds cp");
	for (i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++) {
		const int *d = shapes[i];

		mesh_init(&m, d[0], d[1], d[2], d[3], d[4], d[5]);
		egtp = m.edp % 2 == 0 ? 2 : 1;
		mesh_set_gtp(&m, d[6], egtp);
		tap_ok(mesh_group_size(&m, GROUP_GTP) *
		    mesh_group_size(&m, GROUP_GTP_REPLICATE) == m.dp &&
		    mesh_group_size(&m, GROUP_EGTP) *
		    mesh_group_size(&m, GROUP_EGTP_REPLICATE) == m.edp,
		    "gtp: pure_dp %d cp %d tp %d gtp %d egtp %d: gtp times its "
		    "replicate is dp, egtp times its replicate edp", d[0],
		    d[1], d[3], d[6], egtp);
		tap_ok(check_gtp_order(&m), "  gtp and egtp coordinates by "
		    "counting");
		for (k = 0; k < 4; k++)
			tap_ok(check_groups(&m, kinds[k]),
			    "  %s groups ordered and partitioning",
			    mesh_group_name(kinds[k]));
		for (k = GROUP_CP_TP; k < GROUP__COUNT; k++)
			tap_ok(check_groups(&m, (enum group_kind)k),
			    "  %s groups ordered and partitioning",
			    mesh_group_name((enum group_kind)k));
		for (k = 0; k < GROUP__COUNT; k++) {
			unsigned ax = k < CFG_PLAN_PRODUCT ?
			    cfg_plan_group_axes[k] :
			    cfg_plan_products[k - CFG_PLAN_PRODUCT].axes;
			int	 n = 1;

			n *= (ax & PLAN_AXIS_TP) ? m.tp : 1;
			n *= (ax & PLAN_AXIS_CP) ? m.cp : 1;
			n *= (ax & PLAN_AXIS_GTP) ? m.gtp : 1;
			n *= (ax & PLAN_AXIS_GTP_REPLICA) ? m.pure_dp / m.gtp :
			    1;
			n *= (ax & PLAN_AXIS_ETP) ? m.etp : 1;
			n *= (ax & PLAN_AXIS_EP) ? m.ep : 1;
			n *= (ax & PLAN_AXIS_EGTP) ? m.egtp : 1;
			n *= (ax & PLAN_AXIS_EGTP_REPLICA) ? m.edp / m.egtp :
			    1;
			tap_ok(ax == 0 || mesh_group_size(&m,
			    (enum group_kind)k) == n, "  plan group %s is as "
			    "large as its axes", cfg_plan_group_name(k));
		}
	}
	mesh_init(&m, 4, 1, 1, 2, 1, 1);
	mesh_set_gtp(&m, 2, 1);
	tap_ok(mesh_group(&m, GROUP_GTP_TP, 0, g) == 0 && g[0] == 0 &&
	    g[1] == 1 && g[2] == 2 && g[3] == 3 &&
	    mesh_group(&m, GROUP_GTP_REPLICATE_TP, 2, g) == 0 && g[0] == 2 &&
	    g[1] == 3 && g[2] == 6 && g[3] == 7,
	    "gtp: [gtp, tp] of rank 0 is 0 1 2 3, [gtp_replicate, tp] of "
	    "rank 2 is 2 3 6 7");
}

int
main(void)
{
	test_hsdp();
	test_megatron_844();
	test_moe_ep4();
	test_moe_etp2();
	test_all_meshes();
	test_products();
	test_gtp();
	test_config_and_names();
	test_world_and_one_rank();
	return tap_done();
}
