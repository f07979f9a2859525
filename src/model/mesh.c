/*
 * Rank arithmetic for the mesh of SPEC section 5.  Everything here is a
 * closed formula: no tables over ranks, no allocation, O(1) per coordinate and
 * O(group size) per listed group, so that meshes of a million ranks cost
 * nothing to describe.
 *
 * Dense layout: rank = tp_i + tp * (dp_i + dp * pp_i) (Megatron's order),
 * where dp_i = cp_i + cp * pure_dp_i.
 * Expert layout within a stage: s = tp_i + tp * dp_i is split as
 * s = etp_i + etp * (ep_i + ep * edp_i).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "model/mesh.h"

static const char *const group_names[GROUP__COUNT] = {
	[GROUP_DP] = "dp",
	[GROUP_TP] = "tp",
	[GROUP_PP] = "pp",
	[GROUP_EP] = "ep",
	[GROUP_ETP] = "etp",
	[GROUP_EDP] = "edp",
	[GROUP_EMBEDDING] = "embedding",
	[GROUP_CP] = "cp",
	[GROUP_PURE_DP] = "pure-dp",
	[GROUP_DP_SHARD] = "dp_shard",
	[GROUP_DP_REPLICATE] = "dp_replicate",
	[GROUP_EFSDP] = "efsdp",
	[GROUP_EDP_REPLICATE] = "edp_replicate",
	[GROUP_GTP] = "gtp",
	[GROUP_GTP_REPLICATE] = "gtp_replicate",
	[GROUP_EGTP] = "egtp",
	[GROUP_EGTP_REPLICATE] = "egtp_replicate",
	[GROUP_CP_TP] = "[cp, tp]",
	[GROUP_PURE_DP_TP] = "[pure-dp, tp]",
	[GROUP_DP_TP] = "[dp, tp]",
	[GROUP_EP_ETP] = "[ep, etp]",
	[GROUP_EDP_ETP] = "[edp, etp]",
	[GROUP_EDP_EP] = "[edp, ep]",
	[GROUP_EDP_EP_ETP] = "[edp, ep, etp]",
	[GROUP_GTP_TP] = "[gtp, tp]",
	[GROUP_GTP_CP] = "[gtp, cp]",
	[GROUP_GTP_CP_TP] = "[gtp, cp, tp]",
	[GROUP_GTP_REPLICATE_TP] = "[gtp_replicate, tp]",
	[GROUP_EGTP_ETP] = "[egtp, etp]",
	[GROUP_EGTP_EP] = "[egtp, ep]",
	[GROUP_EGTP_EP_ETP] = "[egtp, ep, etp]",
	[GROUP_EGTP_REPLICATE_ETP] = "[egtp_replicate, etp]",
	[GROUP_EGTP_REPLICATE_EP] = "[egtp_replicate, ep]",
	[GROUP_EGTP_REPLICATE_EP_ETP] = "[egtp_replicate, ep, etp]",
};

/*
 * A plan's group is a group kind: the words, then the products, in the
 * config's order (config.h), which lossterm_group reads by name and
 * tests/unit-mesh.c holds name by name and size by size.
 */
_Static_assert(GROUP_CP_TP == CFG_PLAN_PRODUCT &&
    GROUP__COUNT == CFG_PLAN_PRODUCT + CFG_PLAN_NPRODUCTS,
    "the plan's groups are the group kinds, in order");

/*
 * A product's axes, fastest first, as a mixed radix: the coordinate
 * along the product is the axes' coordinates read as its digits.
 */
enum axis { AXIS_TP, AXIS_CP, AXIS_PURE_DP, AXIS_ETP, AXIS_EP, AXIS_EDP,
	AXIS_GTP, AXIS_GTP_REPLICA, AXIS_EGTP, AXIS_EGTP_REPLICA, AXIS_NONE };

static const enum axis product_axes[GROUP__COUNT][3] = {
	[GROUP_CP_TP] = { AXIS_TP, AXIS_CP, AXIS_NONE },
	[GROUP_PURE_DP_TP] = { AXIS_TP, AXIS_PURE_DP, AXIS_NONE },
	[GROUP_DP_TP] = { AXIS_TP, AXIS_CP, AXIS_PURE_DP },
	[GROUP_EP_ETP] = { AXIS_ETP, AXIS_EP, AXIS_NONE },
	[GROUP_EDP_ETP] = { AXIS_ETP, AXIS_EDP, AXIS_NONE },
	[GROUP_EDP_EP] = { AXIS_EP, AXIS_EDP, AXIS_NONE },
	[GROUP_EDP_EP_ETP] = { AXIS_ETP, AXIS_EP, AXIS_EDP },
	[GROUP_GTP_TP] = { AXIS_TP, AXIS_GTP, AXIS_NONE },
	[GROUP_GTP_CP] = { AXIS_CP, AXIS_GTP, AXIS_NONE },
	[GROUP_GTP_CP_TP] = { AXIS_TP, AXIS_CP, AXIS_GTP },
	[GROUP_GTP_REPLICATE_TP] = { AXIS_TP, AXIS_CP, AXIS_GTP_REPLICA },
	[GROUP_EGTP_ETP] = { AXIS_ETP, AXIS_EGTP, AXIS_NONE },
	[GROUP_EGTP_EP] = { AXIS_EP, AXIS_EGTP, AXIS_NONE },
	[GROUP_EGTP_EP_ETP] = { AXIS_ETP, AXIS_EP, AXIS_EGTP },
	[GROUP_EGTP_REPLICATE_ETP] = { AXIS_ETP, AXIS_EGTP_REPLICA, AXIS_NONE },
	[GROUP_EGTP_REPLICATE_EP] = { AXIS_EP, AXIS_EGTP_REPLICA, AXIS_NONE },
	[GROUP_EGTP_REPLICATE_EP_ETP] = { AXIS_ETP, AXIS_EP,
	    AXIS_EGTP_REPLICA },
};

static bool
is_product(enum group_kind kind)
{
	return kind >= GROUP_CP_TP && kind < GROUP__COUNT;
}

static int
axis_size(const struct mesh *m, enum axis a)
{
	switch (a) {
	case AXIS_TP:
		return m->tp;
	case AXIS_CP:
		return m->cp;
	case AXIS_PURE_DP:
		return m->pure_dp;
	case AXIS_ETP:
		return m->etp;
	case AXIS_EP:
		return m->ep;
	case AXIS_EDP:
		return m->edp;
	case AXIS_GTP:
		return m->gtp;
	case AXIS_GTP_REPLICA:
		return m->pure_dp / m->gtp;
	case AXIS_EGTP:
		return m->egtp;
	case AXIS_EGTP_REPLICA:
		return m->edp / m->egtp;
	case AXIS_NONE:
		break;
	}
	return 1;
}

static int *
axis_coord(struct coord *c, enum axis a)
{
	switch (a) {
	case AXIS_TP:
		return &c->tp;
	case AXIS_CP:
		return &c->cp;
	case AXIS_PURE_DP:
		return &c->pure_dp;
	case AXIS_ETP:
		return &c->etp;
	case AXIS_EP:
		return &c->ep;
	case AXIS_EDP:
		return &c->edp;
	case AXIS_GTP:
		return &c->gtp;
	case AXIS_GTP_REPLICA:
		return &c->gtp_replica;
	case AXIS_EGTP:
		return &c->egtp;
	case AXIS_EGTP_REPLICA:
		return &c->egtp_replica;
	case AXIS_NONE:
		break;
	}
	fatalx("mesh: no coordinate for a missing axis");
}

static int
product_size(const struct mesh *m, enum group_kind kind)
{
	int	 n = 1, j;

	for (j = 0; j < 3; j++)
		n *= axis_size(m, product_axes[kind][j]);
	return n;
}

/* c with its coordinates along the product's axes the digits of i. */
static int
product_member(const struct mesh *m, enum group_kind kind,
    const struct coord *c, int i)
{
	struct coord	 d = *c;
	enum axis	 a;
	int		 j;
	bool		 dense = false;

	for (j = 0; j < 3 && (a = product_axes[kind][j]) != AXIS_NONE;
	    j++) {
		*axis_coord(&d, a) = i % axis_size(m, a);
		i /= axis_size(m, a);
		dense |= a == AXIS_TP || a == AXIS_CP || a == AXIS_PURE_DP ||
		    a == AXIS_GTP || a == AXIS_GTP_REPLICA;
	}
	/* A gtp axis set pure_dp's (edp's) digits: put them together. */
	if (dense) {
		if (kind >= GROUP_GTP_TP)
			d.pure_dp = d.gtp + m->gtp * d.gtp_replica;
		return mesh_rank_of(m, d.pp, d.cp + m->cp * d.pure_dp, d.tp);
	}
	if (kind >= GROUP_EGTP_ETP)
		d.edp = d.egtp + m->egtp * d.egtp_replica;
	return mesh_rank_of_expert(m, d.pp, d.ep, d.etp, d.edp);
}

static int
product_index(const struct mesh *m, enum group_kind kind, struct coord *c)
{
	enum axis	 a;
	int		 j, i = 0;

	for (j = 2; j >= 0; j--)
		if ((a = product_axes[kind][j]) != AXIS_NONE)
			i = i * axis_size(m, a) + *axis_coord(c, a);
	return i;
}

void
mesh_init(struct mesh *m, int pure_dp, int cp, int pp, int tp, int ep,
    int etp)
{
	int	dp = pure_dp * cp;

	/* The configuration loader has checked every constraint already. */
	m->pure_dp = pure_dp;
	m->cp = cp;
	m->dp = dp;
	m->pp = pp;
	m->tp = tp;
	m->ep = ep;
	m->etp = etp;
	m->edp = dp * tp / (ep * etp);
	m->slices = tp / etp;
	m->world = dp * pp * tp;
	mesh_set_replicate(m, 1);
	mesh_set_gtp(m, 1, 1);
}

void
mesh_set_gtp(struct mesh *m, int gtp, int egtp)
{
	/* The configuration loader has checked that they divide. */
	m->gtp = gtp;
	m->egtp = egtp;
}

void
mesh_set_replicate(struct mesh *m, int dp_replicate)
{
	/* The configuration loader has checked that it divides both. */
	m->dp_replicate = dp_replicate;
	m->dp_shard = m->pure_dp / dp_replicate;
	m->efsdp = m->edp / dp_replicate;
}

void
mesh_from_config(struct mesh *m, const struct config *cfg)
{
	mesh_init(m, cfg->mesh.dp, cfg->mesh.cp, cfg->mesh.pp, cfg->mesh.tp,
	    cfg->mesh.ep, cfg->mesh.etp);
	mesh_set_replicate(m, cfg->mesh.dp_replicate);
	mesh_set_gtp(m, cfg->mesh.gtp, cfg->mesh.egtp);
}

bool
mesh_dispatch_replicated(const struct mesh *m, const struct config *cfg)
{
	return cfg->model.has_moe &&
	    cfg->model.moe.ep_on == MOE_EP_TP_REPLICATED && m->slices > 1;
}

int
mesh_rank_of(const struct mesh *m, int pp, int dp, int tp)
{
	return tp + m->tp * (dp + m->dp * pp);
}

void
mesh_coord_of(const struct mesh *m, int rank, struct coord *c)
{
	int	 stage_size = m->dp * m->tp, s;

	if (rank < 0 || rank >= m->world)
		fatalx("mesh_coord_of: rank %d outside world of %d", rank,
		    m->world);
	s = rank % stage_size;
	c->pp = rank / stage_size;
	c->dp = s / m->tp;
	c->tp = s % m->tp;
	/*
	 * Without cp or etp their divisions are by 1: skipped, as the
	 * readers of a large audit's cells ask for millions of coordinates
	 * (issue 24).
	 */
	if (m->cp == 1) {
		c->cp = 0;
		c->pure_dp = c->dp;
	} else {
		c->cp = c->dp % m->cp;
		c->pure_dp = c->dp / m->cp;
	}
	if (m->gtp == 1) {
		c->gtp = 0;
		c->gtp_replica = c->pure_dp;
	} else {
		c->gtp = c->pure_dp % m->gtp;
		c->gtp_replica = c->pure_dp / m->gtp;
	}
	if (m->etp == 1) {
		c->etp = 0;
		c->slice = c->tp;
		c->ep = s % m->ep;
		c->edp = s / m->ep;
	} else {
		c->etp = s % m->etp;
		c->slice = c->tp / m->etp;
		c->ep = (s / m->etp) % m->ep;
		c->edp = s / (m->etp * m->ep);
	}
	if (m->egtp == 1) {
		c->egtp = 0;
		c->egtp_replica = c->edp;
	} else {
		c->egtp = c->edp % m->egtp;
		c->egtp_replica = c->edp / m->egtp;
	}
}

int
mesh_rank_of_expert(const struct mesh *m, int pp, int ep, int etp, int edp)
{
	return pp * m->dp * m->tp + etp + m->etp * (ep + m->ep * edp);
}

int
mesh_group_size(const struct mesh *m, enum group_kind kind)
{
	switch (kind) {
	case GROUP_DP:
		return m->dp;
	case GROUP_TP:
		return m->tp;
	case GROUP_PP:
		return m->pp;
	case GROUP_EP:
		return m->ep;
	case GROUP_ETP:
		return m->etp;
	case GROUP_EDP:
		return m->edp;
	case GROUP_EMBEDDING:
		return m->pp > 1 ? 2 : 1;
	case GROUP_CP:
		return m->cp;
	case GROUP_PURE_DP:
		return m->pure_dp;
	case GROUP_DP_SHARD:
		return m->dp / m->dp_replicate;
	case GROUP_DP_REPLICATE:
	case GROUP_EDP_REPLICATE:
		return m->dp_replicate;
	case GROUP_EFSDP:
		return m->efsdp;
	case GROUP_GTP:
		return m->gtp;
	case GROUP_GTP_REPLICATE:
		return m->dp / m->gtp;
	case GROUP_EGTP:
		return m->egtp;
	case GROUP_EGTP_REPLICATE:
		return m->edp / m->egtp;
	default:
		if (is_product(kind))
			return product_size(m, kind);
		break;
	}
	fatalx("mesh_group_size: bad group kind %d", (int)kind);
}

/*
 * The rank that is member i of the group of kind containing the rank at c:
 * c with the group's own coordinate replaced by i.
 */
static int
member(const struct mesh *m, enum group_kind kind, const struct coord *c,
    int i)
{
	int	shard_cp = m->dp / m->dp_replicate;

	switch (kind) {
	case GROUP_DP:
		return mesh_rank_of(m, c->pp, i, c->tp);
	case GROUP_TP:
		return mesh_rank_of(m, c->pp, c->dp, i);
	case GROUP_PP:
		return mesh_rank_of(m, i, c->dp, c->tp);
	case GROUP_EP:
		return mesh_rank_of_expert(m, c->pp, i, c->etp, c->edp);
	case GROUP_ETP:
		return mesh_rank_of_expert(m, c->pp, c->ep, i, c->edp);
	case GROUP_EDP:
		return mesh_rank_of_expert(m, c->pp, c->ep, c->etp, i);
	case GROUP_EMBEDDING:
		/* Member 0 on the first stage, member 1 on the last. */
		return mesh_rank_of(m, i == 0 ? 0 : m->pp - 1, c->dp, c->tp);
	case GROUP_CP:
		return mesh_rank_of(m, c->pp, i + m->cp * c->pure_dp, c->tp);
	case GROUP_PURE_DP:
		return mesh_rank_of(m, c->pp, c->cp + m->cp * i, c->tp);
	/*
	 * The dp coordinate is shard_cp + (dp_shard * cp) * replicate, and
	 * the edp coordinate efsdp_i + efsdp * replicate (see mesh.h).
	 */
	case GROUP_DP_SHARD:
		return mesh_rank_of(m, c->pp, i + shard_cp * (c->dp / shard_cp),
		    c->tp);
	case GROUP_DP_REPLICATE:
		return mesh_rank_of(m, c->pp, c->dp % shard_cp + shard_cp * i,
		    c->tp);
	case GROUP_EFSDP:
		return mesh_rank_of_expert(m, c->pp, c->ep, c->etp, i +
		    m->efsdp * (c->edp / m->efsdp));
	case GROUP_EDP_REPLICATE:
		return mesh_rank_of_expert(m, c->pp, c->ep, c->etp,
		    c->edp % m->efsdp + m->efsdp * i);
	/*
	 * The pure_dp coordinate is gtp_i + gtp * replica and the edp
	 * coordinate egtp_i + egtp * replica (mesh.h); gtp_replicate's
	 * member i has cp coordinate i % cp and replica i / cp, cp fastest
	 * as in dp.
	 */
	case GROUP_GTP:
		return mesh_rank_of(m, c->pp, c->cp + m->cp * (i + m->gtp *
		    (c->pure_dp / m->gtp)), c->tp);
	case GROUP_GTP_REPLICATE:
		return mesh_rank_of(m, c->pp, i % m->cp + m->cp *
		    (c->pure_dp % m->gtp + m->gtp * (i / m->cp)), c->tp);
	case GROUP_EGTP:
		return mesh_rank_of_expert(m, c->pp, c->ep, c->etp, i +
		    m->egtp * (c->edp / m->egtp));
	case GROUP_EGTP_REPLICATE:
		return mesh_rank_of_expert(m, c->pp, c->ep, c->etp,
		    c->edp % m->egtp + m->egtp * i);
	default:
		if (is_product(kind))
			return product_member(m, kind, c, i);
		break;
	}
	fatalx("mesh group: bad group kind %d", (int)kind);
}

/*
 * The index along the group's coordinate.  A rank on a middle stage holds
 * no copy of the tied embedding and so is in no embedding group: -1.
 */
static int
index_in(const struct mesh *m, enum group_kind kind, struct coord *c)
{
	switch (kind) {
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
	case GROUP_EMBEDDING:
		if (c->pp == 0)
			return 0;
		return c->pp == m->pp - 1 ? 1 : -1;
	case GROUP_CP:
		return c->cp;
	case GROUP_PURE_DP:
		return c->pure_dp;
	case GROUP_DP_SHARD:
		return c->dp % (m->dp / m->dp_replicate);
	case GROUP_DP_REPLICATE:
		return c->dp / (m->dp / m->dp_replicate);
	case GROUP_EFSDP:
		return c->edp % m->efsdp;
	case GROUP_EDP_REPLICATE:
		return c->edp / m->efsdp;
	case GROUP_GTP:
		return c->pure_dp % m->gtp;
	case GROUP_GTP_REPLICATE:
		return c->cp + m->cp * (c->pure_dp / m->gtp);
	case GROUP_EGTP:
		return c->edp % m->egtp;
	case GROUP_EGTP_REPLICATE:
		return c->edp / m->egtp;
	default:
		if (is_product(kind))
			return product_index(m, kind, c);
		break;
	}
	fatalx("mesh group: bad group kind %d", (int)kind);
}

int
mesh_group(const struct mesh *m, enum group_kind kind, int rank,
    int *members)
{
	struct coord	 c;
	int		 i, n = mesh_group_size(m, kind);

	mesh_coord_of(m, rank, &c);
	for (i = 0; i < n; i++)
		members[i] = member(m, kind, &c, i);
	return index_in(m, kind, &c);
}

int
mesh_group_index(const struct mesh *m, enum group_kind kind, int rank)
{
	struct coord	 c;

	mesh_coord_of(m, rank, &c);
	return index_in(m, kind, &c);
}

int
mesh_group_id(const struct mesh *m, enum group_kind kind, int rank)
{
	struct coord	 c;

	/*
	 * Every member formula is increasing in the group's coordinate, so
	 * member 0 is the lowest rank.  A middle-stage rank gets the id of
	 * the embedding group of its (dp, tp) column, although it is not a
	 * member (mesh_group_index() is -1 for it).
	 */
	mesh_coord_of(m, rank, &c);
	return member(m, kind, &c, 0);
}

void
mesh_format(const struct mesh *m, char *buf, size_t len)
{
	char	cp[32] = "", dp[64];

	if (m->cp > 1)
		snprintf(cp, sizeof cp, " cp=%d", m->cp);
	/* HSDP names the two factors of dp as torchtitan does. */
	if (m->dp_replicate > 1)
		snprintf(dp, sizeof dp, "dp_replicate=%d dp_shard=%d",
		    m->dp_replicate, m->dp_shard);
	else
		snprintf(dp, sizeof dp, "dp=%d", m->pure_dp);
	snprintf(buf, len, "%s%s pp=%d tp=%d ep=%d etp=%d edp=%d world=%d",
	    dp, cp, m->pp, m->tp, m->ep, m->etp, m->edp, m->world);
	/* Named only when present, so that meshes without gtp read as before. */
	if (m->gtp > 1 || m->egtp > 1) {
		size_t	 n = strlen(buf);

		snprintf(buf + n, len - n, " gtp=%d egtp=%d", m->gtp, m->egtp);
	}
}

const char *
mesh_group_name(enum group_kind kind)
{
	if ((int)kind < 0 || kind >= GROUP__COUNT)
		fatalx("mesh_group_name: bad group kind %d", (int)kind);
	return group_names[kind];
}
