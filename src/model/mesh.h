/*
 * The rank layout of SPEC section 5: Megatron's order (tp fastest, then cp,
 * then dp, then pp) for dense parameters, and within one stage the
 * dp*cp*tp ranks regrouped as etp (fastest), ep, then edp for expert
 * parameters.
 *
 * Context parallelism splits every sequence over cp ranks that hold the
 * same weights: for the gradients a cp rank is one more data-parallel
 * rank, and Megatron reduces them over its dp_cp group.  So the mesh keeps
 * dp as the width of that group, dp * cp, and its coordinate dp as the
 * index in it (cp fastest); pure_dp and cp are its two factors, for the
 * token counts and the groups that see only one of them.
 *
 * Generalized tensor parallelism (Megatron's gtp_remat, core_v0.19.0
 * parallel_state.py) splits the data-parallel ranks once more: gtp ranks
 * hold distinct tokens, as dp's do, and each a shard of the weights
 * model.gtp_sharded names.  gtp is the fastest factor of pure_dp (pure_dp
 * coordinate = gtp coordinate + gtp * replica), so dp keeps counting every
 * rank with tokens of its own and the loss normalization needs nothing
 * new; its complement, gtp_replicate (cp and the replicas), is Megatron's
 * dp_cp group without gtp_remat, the one DDP reduces over.  Megatron puts
 * gtp_remat before cp ('tp-gtp_remat-cp-ep-dp-pp'); with cp 1 the ranks
 * are the same, with cp > 1 the groups are Megatron's with other rank
 * numbers.  egtp (expert_gtp_weight_remat_size) is the fastest factor of
 * edp, as Megatron's expert order 'tp-cp-ep-gtp_remat-dp-pp' has it.
 *
 * Every group is returned in the order of its own coordinate, so that
 * "member i of the group" is the rank whose coordinate along that dimension
 * is i: that is the order in which a reduce-scatter hands out shards.
 */
#ifndef GRADAUDIT_MESH_H
#define GRADAUDIT_MESH_H

#include <stdbool.h>
#include <stddef.h>

struct config;

struct mesh {
	int	dp, pp, tp, ep, etp;
	int	pure_dp, cp;	/* dp = pure_dp * cp */
	int	edp;		/* dp * tp / (ep * etp) */
	/*
	 * The token slices of tp: expert-tensor-parallel groups of etp ranks
	 * see the same tokens, tp / etp groups see different ones (slices).
	 * A tp coordinate is slice * etp plus its etp coordinate (struct coord).
	 */
	int	slices;		/* tp / etp */
	/*
	 * FSDP2/HSDP (layout.dp_engine fsdp2, fsdp1): pure_dp is
	 * dp_replicate * dp_shard, replicate slowest as in torchtitan's
	 * ParallelDims (pp, dp_replicate, dp_shard, cp, tp), which is
	 * Megatron's order with dp split in two.  Parameters are sharded
	 * over dp_shard * cp (torchtitan's dp_shard_cp), experts over efsdp
	 * (its dp_shard_mod_ep), and both are replicated over dp_replicate.
	 */
	int	dp_replicate, dp_shard;
	int	efsdp;		/* edp / dp_replicate */
	int	gtp;		/* divides pure_dp; 1: no gtp */
	int	egtp;		/* divides edp; 1: no expert gtp */
	int	world;		/* dp * pp * tp */
};

struct coord {
	int	pp, dp, tp;	/* dense coordinates */
	int	pure_dp, cp;	/* dp = cp + mesh.cp * pure_dp */
	int	ep, etp, edp;	/* expert coordinates within the stage */
	int	slice;		/* tp / mesh.etp: the token slice */
	/* pure_dp = gtp + mesh.gtp * gtp_replica, edp likewise with egtp. */
	int	gtp, gtp_replica, egtp, egtp_replica;
};

/* The communication groups a gradient collective can run over. */
enum group_kind {
	GROUP_DP,		/* same pp, tp; varying dp (dp_cp with cp) */
	GROUP_TP,		/* same pp, dp; varying tp */
	GROUP_PP,		/* same dp, tp; varying pp */
	GROUP_EP,		/* same pp, etp, edp; varying ep */
	GROUP_ETP,		/* same pp, ep, edp; varying etp */
	GROUP_EDP,		/* same pp, ep, etp; varying edp */
	GROUP_EMBEDDING,	/* first and last stage, same dp and tp (pp > 1) */
	GROUP_CP,		/* same pp, pure_dp, tp; varying cp */
	GROUP_PURE_DP,		/* same pp, cp, tp; varying pure_dp */
	GROUP_DP_SHARD,		/* same pp, tp, replica; varying dp_shard*cp */
	GROUP_DP_REPLICATE,	/* same pp, tp, dp_shard*cp; varying replica */
	GROUP_EFSDP,		/* same pp, ep, etp, replica; varying efsdp */
	GROUP_EDP_REPLICATE,	/* same pp, ep, etp, efsdp; varying replica */
	GROUP_GTP,		/* same pp, tp, cp, gtp replica; varying gtp */
	GROUP_GTP_REPLICATE,	/* same pp, tp, gtp; varying cp, gtp replica */
	GROUP_EGTP,		/* same pp, ep, etp, replica; varying egtp */
	GROUP_EGTP_REPLICATE,	/* same pp, ep, etp, egtp; varying replica */
	/*
	 * Products of axes, a plan's all-reduce: [cp, tp] (config.h): the
	 * members vary along each axis, the fastest axis fastest, so that
	 * member i is still the i-th lowest rank.  In cfg_plan_products'
	 * order.
	 */
	GROUP_CP_TP,		/* same pp, pure_dp; varying cp, tp */
	GROUP_PURE_DP_TP,	/* same pp, cp; varying pure_dp, tp */
	GROUP_DP_TP,		/* same pp: the stage */
	GROUP_EP_ETP,		/* same pp, edp; varying ep, etp */
	GROUP_EDP_ETP,		/* same pp, ep; varying edp, etp */
	GROUP_EDP_EP,		/* same pp, etp; varying edp, ep */
	GROUP_EDP_EP_ETP,	/* same pp: the stage, in the expert layout */
	GROUP_GTP_TP,		/* same pp, cp, gtp replica; varying gtp, tp */
	GROUP_GTP_CP,		/* same pp, tp, gtp replica; varying gtp, cp */
	GROUP_GTP_CP_TP,	/* same pp, gtp replica; varying gtp, cp, tp */
	GROUP_GTP_REPLICATE_TP,	/* same pp, gtp; varying the rest of dp, tp */
	GROUP_EGTP_ETP,		/* same pp, ep, replica; varying egtp, etp */
	GROUP_EGTP_EP,		/* same pp, etp, replica; varying egtp, ep */
	GROUP_EGTP_EP_ETP,	/* same pp, replica; varying egtp, ep, etp */
	GROUP_EGTP_REPLICATE_ETP, /* same pp, ep, egtp; varying replica, etp */
	GROUP_EGTP_REPLICATE_EP, /* same pp, etp, egtp; varying replica, ep */
	GROUP_EGTP_REPLICATE_EP_ETP, /* same pp, egtp; varying replica, ep, etp */
	GROUP__COUNT
};

void	 mesh_init(struct mesh *, int pure_dp, int cp, int pp, int tp, int ep,
	    int etp);
void	 mesh_from_config(struct mesh *, const struct config *);
/* Split pure_dp into dp_replicate * dp_shard (1 after mesh_init). */
void	 mesh_set_replicate(struct mesh *, int dp_replicate);
/* Take gtp out of pure_dp and egtp out of edp (1 after mesh_init). */
void	 mesh_set_gtp(struct mesh *, int gtp, int egtp);

/*
 * model.moe.ep_on: tp-replicated with more than one token slice: every tp
 * rank dispatches all of its tp group's tokens (placement.h,
 * pl_dispatched_slices, which decides it for the engines; the loss
 * normalization keeps expert atoms per source for it, lossnorm.c).
 */
bool	 mesh_dispatch_replicated(const struct mesh *, const struct config *);

int	 mesh_rank_of(const struct mesh *, int pp, int dp, int tp);
void	 mesh_coord_of(const struct mesh *, int rank, struct coord *);
/* The rank with the given expert coordinates on stage pp. */
int	 mesh_rank_of_expert(const struct mesh *, int pp, int ep, int etp,
	    int edp);

/* Number of members of a group of this kind (2 or 1 for GROUP_EMBEDDING). */
int	 mesh_group_size(const struct mesh *, enum group_kind);
/*
 * Fill members[] (mesh_group_size entries) with the group of `rank`, in the
 * order of the group's coordinate; return the index of `rank` in it.
 */
int	 mesh_group(const struct mesh *, enum group_kind, int rank,
	    int *members);
/* The index of `rank` in its group without listing it. */
int	 mesh_group_index(const struct mesh *, enum group_kind, int rank);
/*
 * A number that is equal for two ranks exactly when they are in the same
 * group of this kind (the lowest member's rank).
 */
int	 mesh_group_id(const struct mesh *, enum group_kind, int rank);

const char *mesh_group_name(enum group_kind);	/* "dp", "tp", ... */
/* "dp=2 cp=2 pp=1 tp=2 ep=1 etp=1 edp=8 world=8" (cp only when > 1). */
void	 mesh_format(const struct mesh *, char *buf, size_t len);

#endif
