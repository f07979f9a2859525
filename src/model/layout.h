/*
 * The gradient buffers of one pipeline stage (SPEC section 6, "Gradient
 * buffer layout"), as Megatron's DistributedDataParallel builds them:
 * parameters laid out contiguously in reverse registration order, expert
 * parameters in a buffer of their own, buckets closed when they reach
 * bucket_elems, each bucket padded to a multiple of the reducing group's
 * size n and split into n equal shards, shard i owned by member i.
 *
 * Every rank of a stage has the same layout (tp shards have equal sizes), so
 * one layout per stage serves all its ranks.  The order matters: it is why
 * the first and the last stage shard a tied embedding at different element
 * ranges (Megatron-LM #844), and why a bucket of its own fixes it (Megatron
 * commit daf0006).
 */
#ifndef GRADAUDIT_LAYOUT_H
#define GRADAUDIT_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

struct model;

/*
 * The settings that decide where a buffer's buckets and shards fall, which
 * is what a reduce-scatter's result depends on beyond the step itself.
 */
extern const enum cfg_key layout_setting_keys[];
extern const size_t layout_nsetting_keys;

enum buffer_kind { BUFFER_DENSE, BUFFER_EXPERT, BUFFER__COUNT };

struct bucket {
	int64_t	lo, hi;		/* element range of real data in the buffer */
	int64_t	shard;		/* shard size: padded bucket size / group size */
	int	group_size;	/* n: dp for the dense buffer, edp for experts */
};

struct buffer_layout {
	struct bucket	*buckets;
	int		 nbuckets;
	int64_t		 size;		/* elements, without padding */
};

struct stage_layout {
	struct buffer_layout	 buffer[BUFFER__COUNT];
};

struct layout {
	/*
	 * One per model chunk of every stage, pp * vpp entries, stage-major
	 * (model_unit): each chunk has a DDP and buffers of its own.
	 */
	struct stage_layout	*stages;
	int			 nstages;
	/*
	 * Per model parameter: its offset in its buffer on its own stage
	 * (every parameter lives on exactly one stage).
	 */
	int64_t			*offset;
	/*
	 * When and why the framework would stop on this layout, "at
	 * start-up: ..." (an assert of Megatron's buffers or distributed
	 * optimizer) or "at the first backward: ..." (FSDP2's), or NULL.
	 */
	char			*refusal;
};

void	 layout_build(struct layout *, const struct model *);
void	 layout_free(struct layout *);

enum buffer_kind layout_buffer_of(const struct model *, int param);
/* The FSDP engines' shard group size for a buffer (dp_shard*cp, efsdp). */
int	 layout_shard_group_size(const struct model *, enum buffer_kind);
/*
 * How many shards every bucket of a buffer is cut into, with either
 * engine: the members of the group a reduce-scatter of the buffer, or an
 * all-gather of its parameters, must run over (a plan's steps too).
 */
int	 layout_buffer_shards(const struct model *, enum buffer_kind);

/*
 * Shard k of a bucket, in buffer elements, clipped to the bucket's real
 * (unpadded) data: member k of the reducing group owns [*lo, *hi), which
 * is empty for members whose shard lies wholly in the padding.
 */
void	 layout_bucket_shard(const struct bucket *, int k, int64_t *lo,
	    int64_t *hi);

/*
 * The owned part of a parameter for the member `member` of its reducing
 * group: element ranges [lo, hi) in the parameter's local coordinates.
 * Fills at most `max` ranges; returns how many (0 if it owns none).
 */
int	 layout_owned_ranges(const struct layout *, const struct model *,
	    int param, int member, int64_t (*ranges)[2], int max);

#endif
