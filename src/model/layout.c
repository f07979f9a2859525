/*
 * Gradient buffers and buckets, built the way Megatron's
 * DistributedDataParallel builds them (see layout.h for why the order
 * matters).
 */
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "model/layout.h"
#include "model/mesh.h"
#include "model/model.h"

const enum cfg_key layout_setting_keys[] = {
	KEY_OVERLAP_GRAD_REDUCE, KEY_BUCKET_ELEMS, KEY_BUCKET_ELEMS_PER_DP,
	KEY_BUCKET_STAGES, KEY_BUCKET_NEEDS_OVERLAP, KEY_BUCKET_MIN_PARAMS,
	KEY_BUCKET_PADDING, KEY_PARAM_ALIGNMENT, KEY_EXPERT_BUFFER,
	KEY_TIED_EMBEDDING_BUCKET, KEY_TIED_BUCKET_START, KEY_BUCKET_CHUNKS,
	KEY_FSDP_FLATTEN,
};
const size_t layout_nsetting_keys = sizeof layout_setting_keys /
    sizeof layout_setting_keys[0];

/*
 * Expert parameters (Megatron's allreduce=False) go to a buffer of their
 * own, reduced over edp.  Megatron does that only when the expert mesh
 * differs from the dense one (ep > 1 or etp != tp): otherwise edp is dp and
 * they sit in the dense buffer, where they shift every offset after them.
 */
enum buffer_kind
layout_buffer_of(const struct model *m, int param)
{
	const struct config *c = m->config;

	if (!m->params[param].expert)
		return BUFFER_DENSE;
	/*
	 * torchtitan wraps the routed experts in a fully_shard of their own,
	 * over the mesh ep leaves (dp_shard_mod_ep), with ep > 1; otherwise
	 * they shard with their transformer block.  An expert mesh with ep 1
	 * and etp != tp, which torchtitan refuses, needs the same: its
	 * gradients are partial over the tp slices.
	 */
	if (c->layout.dp_engine != DP_ENGINE_MEGATRON)
		return m->mesh.ep > 1 || m->mesh.etp != m->mesh.tp ?
		    BUFFER_EXPERT : BUFFER_DENSE;
	switch (c->layout.expert_buffer) {
	case EXPERT_BUFFER_IF_EXPERT_MESH:
		/* Megatron cd4afffa64 (core 0.19): ep > 1 or etp != tp. */
		if (m->mesh.ep == 1 && m->mesh.etp == m->mesh.tp)
			return BUFFER_DENSE;
		break;
	case EXPERT_BUFFER_IF_EP:
		/*
		 * Megatron 0.6 to 0.18 marks experts allreduce=False only
		 * with ep > 1: with ep = 1 and etp != tp they are reduced
		 * over the dense dp group (Megatron PR #1622).
		 */
		if (m->mesh.ep == 1)
			return BUFFER_DENSE;
		break;
	case EXPERT_BUFFER_ALL_REDUCE:
		/*
		 * Megatron 0.4 and 0.5 keep allreduce=False parameters, the
		 * experts with ep > 1, out of the buffers; with ep = 1 they
		 * are ordinary dense parameters.
		 */
		if (m->mesh.ep == 1)
			return BUFFER_DENSE;
		break;
	case EXPERT_BUFFER_ALWAYS:
		break;
	}
	return BUFFER_EXPERT;
}

static int64_t
round_up(int64_t v, int64_t to)
{
	return (v + to - 1) / to * to;
}

static int64_t
gcd(int64_t a, int64_t b)
{
	while (b != 0) {
		int64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * Where a bucket of this buffer may end.  Only the distributed optimizer
 * pads (its reduce-scatter needs equal shards): to a multiple of the group
 * size (Megatron a8a5512), later of lcm(group, 128) so that every bucket
 * starts 256-byte aligned (4b44f0a).
 */
static int64_t
bucket_quantum(const struct model *m, int n)
{
	if (!m->config->training.distributed_optimizer)
		return 1;
	if (m->config->layout.bucket_padding == PAD_GROUP_LCM_128)
		return (int64_t)n / gcd(n, 128) * 128;
	return n;
}

/*
 * The element count at which a stage's buffer starts a new bucket, or 0 for
 * one bucket.  Megatron turns bucketing off without overlap_grad_reduce and
 * on every pipeline stage but the first, whose reduction is not on the
 * critical path (distributed_data_parallel.py since 0203a13).
 */
static int64_t
bucket_limit(const struct model *m, int stage, int chunk)
{
	const struct config *c = m->config;

	if (c->layout.bucket_needs_overlap && !c->training.overlap_grad_reduce)
		return 0;
	if (c->layout.bucket_stages == BUCKET_STAGES_NONE ||
	    (c->layout.bucket_stages == BUCKET_STAGES_FIRST && stage > 0))
		return 0;
	/*
	 * With a virtual pipeline, Megatron's training.py builds the DDP of
	 * every model chunk but the first with disable_bucketing (since
	 * core_v0.4.0): their reduction overlaps compute anyway.
	 */
	if (c->layout.bucket_chunks == BUCKET_STAGES_FIRST && chunk > 0)
		return 0;
	/*
	 * A bucket size the config leaves to the framework grows with dp:
	 * max(40M, 1M * dp) in Megatron 0.7 to 0.18 (0fda386c04).
	 */
	if (!keyset_has(&c->given, KEY_BUCKET_ELEMS) &&
	    c->layout.bucket_elems_per_dp * m->mesh.dp > c->training.bucket_elems)
		return c->layout.bucket_elems_per_dp * m->mesh.dp;
	return c->training.bucket_elems;
}

/*
 * Whether the tied weight sits in a bucket of its own on both stages, so
 * that both stages shard it at the same element ranges: Megatron daf0006,
 * the fix for Megatron-LM #844, does it with the distributed optimizer
 * (the only case whose shards matter) and pp > 1 (the only case with two
 * copies).  EMBEDDING_SEPARATE_BUCKET asks for it directly.
 */
static bool
wants_own_bucket(const struct model *m, const struct param *p)
{
	const struct config *c = m->config;

	if (m->logical[p->logical].ninstances != 2)
		return false;
	if (c->sync.embedding_grad == EMBEDDING_SEPARATE_BUCKET)
		return true;
	switch (c->layout.tied_embedding_bucket) {
	case TIED_BUCKET_OWN:
		return true;
	case TIED_BUCKET_OWN_DISTOPT_PP:
		return c->training.distributed_optimizer;
	case TIED_BUCKET_SHARED:
		break;
	}
	return false;
}

struct bucketer;
static int64_t	close_bucket(struct bucketer *, int64_t);

struct bucketer {
	char			*refusal;	/* first start-up assert */
	struct buffer_layout	*buf;
	int64_t			 open_lo;	/* start of the open bucket */
	int			 nparams;	/* parameters in it */
	int			 n;		/* the reducing group's size */
	int64_t			 quantum;	/* bucket ends are multiples */
};

/* Close the open bucket at `end`; returns where the next one starts. */
static int64_t
close_bucket(struct bucketer *bk, int64_t end)
{
	struct buffer_layout	*buf = bk->buf;
	struct bucket		*b;
	int64_t			 padded = round_up(end, bk->quantum);

	if (bk->nparams == 0)
		return end;
	if (end <= bk->open_lo) {
		/* Its data all lies in the padding of the bucket before. */
		bk->nparams = 0;
		return bk->open_lo;
	}
	buf->buckets = xreallocarray(buf->buckets, buf->nbuckets + 1,
	    sizeof *buf->buckets);
	b = &buf->buckets[buf->nbuckets++];
	b->lo = bk->open_lo;
	b->hi = end;
	b->group_size = bk->n;
	/*
	 * Split into n equal shards; the distributed optimizer's padding makes
	 * the bucket a multiple of n, the shard of the last members may lie
	 * wholly in it.
	 */
	b->shard = (padded - bk->open_lo + bk->n - 1) / bk->n;
	bk->open_lo = padded;
	bk->nparams = 0;
	return padded;
}

/*
 * Close the bucket before a weight that needs one of its own, at the
 * weight's (aligned) start `pos`; returns where the weight starts.  The
 * new bucket starts at the padded end of the previous one.  Megatron
 * 0.7 and 0.8 left the weight where it was (an assert checked pos % dp):
 * when pos is not a multiple of the padding quantum, the weight's first
 * elements lie in the previous bucket's padding and are reduce-scattered
 * and owned with it.  ba8f2de (0.9) pads pos first only when dp does not
 * divide it; afb755f548 (0.13) always starts the weight with its bucket.
 */
static int64_t
open_own_bucket(const struct model *m, struct bucketer *bk, int64_t pos,
    int64_t len)
{
	enum tied_bucket_start how = m->config->layout.tied_bucket_start;
	struct bucket	*prev;
	int64_t		 next;

	if (how == TIED_START_PAD_IF_UNALIGNED && pos % bk->n != 0)
		pos = round_up(pos, bk->quantum);
	/* Megatron 0.6 to 0.8: assert data_start_index % dp == 0. */
	if (m->config->layout.tied_start_asserted && bk->nparams > 0 &&
	    pos % bk->n != 0 && bk->refusal == NULL)
		xasprintf(&bk->refusal, "at start-up: the tied weight's own "
		    "bucket would start at element %lld of a stage's buffer, "
		    "which the data parallel size %d does not divide: the "
		    "gradient buffer asserts it does", (long long)pos, bk->n);
	next = close_bucket(bk, pos);
	if (how == TIED_START_PADDED || next == pos || bk->buf->nbuckets == 0)
		return next;
	/* The previous bucket's padding now holds the weight's head. */
	prev = &bk->buf->buckets[bk->buf->nbuckets - 1];
	prev->hi = pos + len < next ? pos + len : next;
	return pos;
}

static void
build_buffer(struct layout *lay, const struct model *m, int unit,
    enum buffer_kind kind)
{
	const struct config *c = m->config;
	struct bucketer	 bk;
	int64_t		 pos = 0;
	int64_t		 limit = bucket_limit(m, unit / m->chunks,
			    unit % m->chunks);
	int64_t		 align = c->training.distributed_optimizer ?
			    c->layout.param_alignment : 1;
	int		 i;

	memset(&bk, 0, sizeof bk);
	bk.buf = &lay->stages[unit].buffer[kind];
	bk.n = layout_buffer_shards(m, kind);
	bk.quantum = bucket_quantum(m, bk.n);
	/* Reverse registration order: backward produces gradients that way. */
	for (i = m->nparams - 1; i >= 0; i--) {
		const struct param *p = &m->params[i];
		bool own;

		if (model_unit(m, p) != unit || layout_buffer_of(m, i) != kind)
			continue;
		own = wants_own_bucket(m, p);
		pos = round_up(pos, align);
		if (own)
			pos = open_own_bucket(m, &bk, pos, p->local_elems);
		lay->offset[i] = pos;
		pos += p->local_elems;
		bk.nparams++;
		/*
		 * Between Megatron f048bf8 and daf0006 a bucket also had to
		 * hold two parameters before it could close.
		 */
		if (own || (limit > 0 && pos - bk.open_lo >= limit &&
		    bk.nparams >= c->layout.bucket_min_params))
			pos = close_bucket(&bk, pos);
	}
	pos = close_bucket(&bk, pos);
	bk.buf->size = pos;
	if (bk.refusal != NULL && lay->refusal == NULL)
		lay->refusal = bk.refusal;
	else
		free(bk.refusal);
}

/*
 * The FSDP engines shard every parameter on its own (layout.dp_engine), so
 * each parameter is a "bucket" of its own, or several, and the rest of
 * gradaudit (owned ranges, the bucketed reduce-scatter of both engines)
 * works on them unchanged.
 */
static void
add_bucket(struct buffer_layout *buf, int64_t lo, int64_t hi, int64_t shard,
    int n)
{
	struct bucket	*b;

	buf->buckets = xreallocarray(buf->buckets, buf->nbuckets + 1,
	    sizeof *buf->buckets);
	b = &buf->buckets[buf->nbuckets++];
	b->lo = lo;
	b->hi = hi;
	b->shard = shard;
	b->group_size = n;
}

/* The size of the group the FSDP engine shards a buffer over. */
int
layout_shard_group_size(const struct model *m, enum buffer_kind kind)
{
	return mesh_group_size(&m->mesh, kind == BUFFER_EXPERT ? GROUP_EFSDP :
	    GROUP_DP_SHARD);
}

int
layout_buffer_shards(const struct model *m, enum buffer_kind kind)
{
	if (m->config->layout.dp_engine != DP_ENGINE_MEGATRON)
		return layout_shard_group_size(m, kind);
	/*
	 * The distributed optimizer shards over DDP's group, which leaves
	 * gtp_remat (egtp_remat) out: dp/gtp (edp/egtp) shards, the same
	 * on every gtp peer (core_v0.19.0 setup_process_groups_for_ddp).
	 */
	return kind == BUFFER_EXPERT ? m->mesh.edp / m->mesh.egtp :
	    m->mesh.dp / m->mesh.gtp;
}

/* The elements of one dim-0 row of a parameter's shard (1 for a vector). */
static int64_t
row_elems(const struct param *p)
{
	return p->local_shape[0] > 0 ? p->local_elems / p->local_shape[0] : 1;
}

/* Whether fragment a sorts before b: larger first, then in tensor order. */
static int
fragment_compare(const void *a, const void *b, const struct model *m)
{
	int64_t	na = m->params[*(const int *)a].local_elems;
	int64_t	nb = m->params[*(const int *)b].local_elems;

	if (na != nb)
		return na > nb ? -1 : 1;
	return *(const int *)a - *(const int *)b;
}

/*
 * Megatron-FSDP v2 (layout.fsdp_flatten: unit) flattens every parameter
 * of a fully_shard unit into one DBuffer and cuts that buffer in n equal
 * flat shards, so where a parameter's shard boundaries fall depends on
 * what else its unit holds: GlobalLayout.build in
 * megatron/core/distributed/fsdp/src/megatron_fsdp/experimental/layout.py
 * at Megatron d98e8a64dd.  Its chunk is the lcm of the row sizes; a
 * tensor smaller than a chunk is a fragment, held back to fill the gaps
 * that the others leave before the next chunk boundary; a tensor whose
 * size is not a multiple of the chunk may share its last chunk with the
 * first later tensor whose remainder fits (its "conjugate"); the buffer
 * is padded to a multiple of chunk * n.  The parameters are `idx`, in the
 * unit's registration order; returns the unit's padded size and sets
 * each one's offset in it.
 */
static int64_t
flat_unit_layout(struct layout *lay, const struct model *m, const int *idx,
    int k, int n, int64_t base)
{
	int	*regular = xcalloc(k, sizeof *regular);
	int	*frag = xcalloc(k, sizeof *frag);
	int64_t	 chunk = 1, next = 0, numel, gap, gap_end, rem, crem, at;
	int	 nreg = 0, nfrag = 0, i, j, t;

	for (i = 0; i < k; i++)
		chunk = chunk / gcd(chunk, row_elems(&m->params[idx[i]])) *
		    row_elems(&m->params[idx[i]]);
	for (i = 0; i < k; i++) {
		if (m->params[idx[i]].local_elems < chunk)
			frag[nfrag++] = idx[i];
		else
			regular[nreg++] = idx[i];
	}
	/* Python's stable sort by size, largest first: insertion sort. */
	for (i = 1; i < nfrag; i++)
		for (j = i; j > 0 && fragment_compare(&frag[j], &frag[j - 1],
		    m) < 0; j--) {
			t = frag[j];
			frag[j] = frag[j - 1];
			frag[j - 1] = t;
		}
	for (i = 0; i < nreg; i++) {
		if (regular[i] < 0)
			continue;	/* an earlier one's conjugate */
		t = regular[i];
		numel = m->params[t].local_elems;
		lay->offset[t] = base + next;
		if (numel % chunk == 0) {
			next += numel;
			continue;
		}
		gap = next + numel;
		next += round_up(numel, chunk);
		gap_end = next;
		rem = numel % chunk;
		for (j = i + 1; j < nreg; j++) {
			if (regular[j] < 0)
				continue;
			crem = m->params[regular[j]].local_elems % chunk;
			if (crem == 0 || rem + crem > chunk)
				continue;
			lay->offset[regular[j]] = base + next - crem;
			gap_end = next - crem;
			next += m->params[regular[j]].local_elems / chunk *
			    chunk;
			regular[j] = -1;
			break;
		}
		for (j = 0; j < nfrag; j++) {
			if (frag[j] < 0)
				continue;
			at = round_up(gap, row_elems(&m->params[frag[j]]));
			if (at + m->params[frag[j]].local_elems > gap_end)
				continue;
			lay->offset[frag[j]] = base + at;
			gap = at + m->params[frag[j]].local_elems;
			frag[j] = -1;
		}
	}
	/* Fragments that fit no gap go at the tail. */
	for (j = 0; j < nfrag; j++) {
		if (frag[j] < 0)
			continue;
		next = round_up(next, row_elems(&m->params[frag[j]]));
		lay->offset[frag[j]] = base + next;
		next += m->params[frag[j]].local_elems;
	}
	free(regular);
	free(frag);
	return round_up(next, chunk * n);
}

/*
 * The fully_shard units of Megatron-FSDP v2 under Megatron core: one per
 * transformer layer (fsdp_unit_modules) and the DDP root, the model chunk,
 * for everything else (embedding, final norm, output layer).
 */
static void
build_flat_units(struct layout *lay, const struct model *m, int unit,
    enum buffer_kind kind)
{
	struct buffer_layout	*buf = &lay->stages[unit].buffer[kind];
	int			*idx = xcalloc(m->nparams, sizeof *idx);
	bool			*done = xcalloc(m->nparams, sizeof *done);
	int64_t			 pos = 0, size;
	int			 i, j, k, n = layout_shard_group_size(m, kind);

	for (i = 0; i < m->nparams; i++) {
		const struct param *p = &m->params[i];

		if (done[i] || model_unit(m, p) != unit ||
		    layout_buffer_of(m, i) != kind)
			continue;
		/* Layers are registered in order, one after the other. */
		for (k = 0, j = i; j < m->nparams && (p->layer < 0 ||
		    m->params[j].layer <= p->layer); j++)
			if (!done[j] && model_unit(m, &m->params[j]) == unit &&
			    layout_buffer_of(m, j) == kind &&
			    m->params[j].layer == p->layer) {
				idx[k++] = j;
				done[j] = true;
			}
		size = flat_unit_layout(lay, m, idx, k, n, pos);
		add_bucket(buf, pos, pos + size, size / n, n);
		pos += size;
	}
	buf->size = pos;
	free(done);
	free(idx);
}

/*
 * Megatron-FSDP v1 (layout.fsdp_flatten: group), the MegatronFSDP that
 * megatron-core runs for --use-megatron-fsdp up to core_v0.19.0
 * (5be9626709), megatron/core/distributed/fsdp/src/megatron_fsdp/
 * param_and_grad_buffer.py.  The functions below follow that file:
 * group_chunk and group_layout its _get_parameter_groups step 3 and
 * build_data_parallel_buffer_index, build_param_groups steps 1 and 2.
 *
 * Step 3 sorts a bucket's parameters by row size (shape[1:].numel()),
 * largest first, Python's stable sort, and derives the chunk: the first
 * row size, widened to the lcm with each later row size that does not
 * divide it, unless that parameter is smaller than the chunk so far.  (It
 * means to split the bucket by chunk, but never fills remaining_params:
 * every parameter stays in the one group.)
 */
static int64_t
group_chunk(const struct model *m, const int *idx, int k)
{
	int64_t	chunk = row_elems(&m->params[idx[0]]), row, numel;
	int	i;

	for (i = 0; i < k; i++) {
		row = row_elems(&m->params[idx[i]]);
		numel = m->params[idx[i]].local_elems;
		if (row == chunk || (chunk % row == 0 && numel % chunk == 0) ||
		    numel < chunk)
			continue;
		chunk = chunk / gcd(chunk, row) * row;
	}
	return chunk;
}

/*
 * build_data_parallel_buffer_index: the parameters `idx` (k of them, in
 * step 3's order) packed from `base`.  A parameter smaller than the chunk
 * is a fragment; the others go in order, each at the running index; one
 * the chunk does not divide ends a chunk early, and the first later one
 * whose remainder fits takes the end of that chunk, then fragments fill
 * what space is left after the first, in order and unaligned (the code's
 * sort of the fragments discards its result), and the rest go at the
 * end.  The bucket is padded to a multiple of chunk * n, n equal shards.
 * Returns the unpadded size.
 */
static int64_t
group_layout(struct layout *lay, const struct model *m, int *idx, int k,
    int64_t chunk, int64_t base)
{
	int	*frag = xcalloc(k, sizeof *frag);
	int	 nfrag = 0, nreg = 0, i, j;
	int64_t	 data = 0, numel, gap, space, rem, crem;

	for (i = 0; i < k; i++) {
		if (m->params[idx[i]].local_elems < chunk)
			frag[nfrag++] = idx[i];
		else
			idx[nreg++] = idx[i];
	}
	for (i = 0; i < nreg; i++) {
		if (idx[i] < 0)
			continue;	/* an earlier one's partner */
		numel = m->params[idx[i]].local_elems;
		lay->offset[idx[i]] = base + data;
		if (numel % chunk == 0) {
			data += numel;
			continue;
		}
		gap = data + numel;
		data += (numel / chunk + 1) * chunk;
		rem = numel % chunk;
		space = chunk - rem;
		for (j = i + 1; j < nreg; j++) {
			if (idx[j] < 0)
				continue;
			crem = m->params[idx[j]].local_elems % chunk;
			if (crem == 0 || crem + rem > chunk)
				continue;
			lay->offset[idx[j]] = base + data - crem;
			space -= crem;
			data += m->params[idx[j]].local_elems / chunk * chunk;
			idx[j] = -1;
			break;
		}
		for (j = 0; j < nfrag; j++) {
			if (frag[j] < 0 ||
			    m->params[frag[j]].local_elems > space)
				continue;
			lay->offset[frag[j]] = base + gap;
			space -= m->params[frag[j]].local_elems;
			gap += m->params[frag[j]].local_elems;
			frag[j] = -1;
		}
	}
	for (j = 0; j < nfrag; j++) {
		if (frag[j] < 0)
			continue;
		lay->offset[frag[j]] = base + data;
		data += m->params[frag[j]].local_elems;
	}
	free(frag);
	return data;
}

/* Whether parameter a sorts before b in step 3: larger rows first. */
static bool
row_before(const struct model *m, int a, int b)
{
	return row_elems(&m->params[a]) > row_elems(&m->params[b]);
}

/* Close one of step 2's buckets: sort, chunk, lay out, pad, shard. */
static int64_t
close_group(struct layout *lay, const struct model *m, int unit,
    enum buffer_kind kind, int *idx, int k, int64_t pos)
{
	int	n = layout_shard_group_size(m, kind), i, j, t;
	int64_t	chunk, data, padded;

	if (k == 0)
		return pos;
	for (i = 1; i < k; i++)
		for (j = i; j > 0 && row_before(m, idx[j], idx[j - 1]); j--) {
			t = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
	chunk = group_chunk(m, idx, k);
	data = group_layout(lay, m, idx, k, chunk, pos);
	padded = round_up(data, chunk * n);
	add_bucket(&lay->stages[unit].buffer[kind], pos, pos + data,
	    padded / n, n);
	return pos + padded;
}

/*
 * Steps 1 and 2 of _get_parameter_groups.  Step 1 groups a model chunk's
 * parameters, in named_parameters order, by dtype (one here: Float16Module
 * casts them all), by ".experts." in the name (the routed experts), and by
 * FSDP unit: with optim_grads_params, the FullyShardedDataParallel of
 * mcore_fsdp_adapter.py makes every TransformerLayer one; the parameters
 * outside the layers share the group of no unit.  Step 2 cuts a group
 * into buckets: a shared_embedding weight (the tied or MTP copy of the
 * embedding with pp > 1, LanguageModule.setup_embeddings_and_output_layer)
 * gets one of its own, and the group of no unit closes a bucket once its
 * parameters reach the DDP bucket size (training.py get_model,
 * resolve_ddp_bucket_size: the Megatron rule of bucket_limit).  Each
 * bucket is a DataParallelBuffer of its own, reduce-scattered over the
 * FSDP group (dp*cp, or the expert data-parallel group).
 */
static void
build_param_groups(struct layout *lay, const struct model *m, int unit,
    enum buffer_kind kind)
{
	int	*idx = xcalloc(m->nparams, sizeof *idx);
	bool	*done = xcalloc(m->nparams, sizeof *done);
	int64_t	 pos = 0, limit = bucket_limit(m, unit / m->chunks,
		    unit % m->chunks), sum;
	int	 i, j, k;

	for (i = 0; i < m->nparams; i++) {
		const struct param *p = &m->params[i];

		if (done[i] || model_unit(m, p) != unit ||
		    layout_buffer_of(m, i) != kind)
			continue;
		k = 0;
		sum = 0;
		for (j = i; j < m->nparams; j++) {
			const struct param *q = &m->params[j];

			if (done[j] || model_unit(m, q) != unit ||
			    layout_buffer_of(m, j) != kind ||
			    q->expert != p->expert || q->layer != p->layer)
				continue;
			done[j] = true;
			if (m->logical[q->logical].ninstances == 2) {
				pos = close_group(lay, m, unit, kind, idx, k,
				    pos);
				idx[0] = j;
				pos = close_group(lay, m, unit, kind, idx, 1,
				    pos);
				k = 0;
				sum = 0;
				continue;
			}
			idx[k++] = j;
			sum += q->local_elems;
			if (q->layer < 0 && limit > 0 && sum >= limit) {
				pos = close_group(lay, m, unit, kind, idx, k,
				    pos);
				k = 0;
				sum = 0;
			}
		}
		pos = close_group(lay, m, unit, kind, idx, k, pos);
	}
	lay->stages[unit].buffer[kind].size = pos;
	free(done);
	free(idx);
}

/*
 * FSDP2's fully_shard (torch/distributed/fsdp/_fully_shard/_fsdp_param.py
 * at pytorch 8fc2039dec): torch.chunk on dim 0 gives every member
 * ceil(rows / n) rows, the trailing members fewer or none, and each
 * shard is padded to that size, so member k owns rows [k*c, (k+1)*c).
 * torchtitan shards routed experts on dim 1 when efsdp * ep > experts
 * (llama4 parallelize.py apply_fsdp at v0.2.0, 29624e37fa): each local
 * expert's slab is then cut evenly, and FSDP2's foreach_reduce asserts
 * that n divides dim 1.  FSDP1 flattens a wrapped module's parameters into
 * one FlatParameter padded to a multiple of n; here every parameter is a
 * unit of its own, cut in n equal flat shards.
 */
/*
 * What torchtitan compares with the experts to shard them on dim 1: the
 * experts' FSDP mesh times ep.  That mesh is efsdp from 183a0d2e7
 * (v0.2.1, edp_mesh["efsdp"].size() * ep_degree); at v0.2.0 it was
 * dp_mod_ep_mesh, which under HSDP holds dp_replicate too (29624e37fa
 * apply_fsdp), though the replicas do not shard: so dim 1 was chosen for
 * meshes whose shard group alone does not exceed the experts.
 */
static int64_t
dim1_sharders(const struct model *m)
{
	int64_t	 n = (int64_t)m->mesh.efsdp * m->mesh.ep;

	if (m->config->layout.expert_dim_mesh ==
	    EXPERT_DIM_REPLICATE_EFSDP)
		n *= m->config->mesh.dp_replicate;
	return n;
}

static void
build_fsdp_buffer(struct layout *lay, const struct model *m, int unit,
    enum buffer_kind kind)
{
	const struct config	*c = m->config;
	struct buffer_layout	*buf = &lay->stages[unit].buffer[kind];
	int64_t			 pos = 0, rows, row, per, e;
	int			 i, n = layout_shard_group_size(m, kind);

	if (c->layout.fsdp_flatten == FSDP_FLATTEN_UNIT) {
		build_flat_units(lay, m, unit, kind);
		return;
	}
	if (c->layout.fsdp_flatten == FSDP_FLATTEN_GROUP) {
		build_param_groups(lay, m, unit, kind);
		return;
	}
	for (i = 0; i < m->nparams; i++) {
		const struct param *p = &m->params[i];

		if (model_unit(m, p) != unit || layout_buffer_of(m, i) != kind)
			continue;
		lay->offset[i] = pos;
		if (c->layout.dp_engine == DP_ENGINE_FSDP1) {
			per = (p->local_elems + n - 1) / n;
			add_bucket(buf, pos, pos + p->local_elems, per, n);
			pos += per * n;
			continue;
		}
		if (kind == BUFFER_EXPERT && p->ndims == 3 &&
		    dim1_sharders(m) > c->model.moe.experts) {
			rows = p->local_shape[1];
			row = p->local_shape[2];
			if (rows % n != 0 && lay->refusal == NULL)
				xasprintf(&lay->refusal, "at the first backward: "
				    "FSDP2 shards %s on "
				    "dim 1 (%s %lld > %d experts) and "
				    "asserts that efsdp %d divides that "
				    "dimension, %lld", p->name,
				    c->layout.expert_dim_mesh ==
				    EXPERT_DIM_EFSDP ? "efsdp*ep" :
				    "dp_replicate*efsdp*ep",
				    (long long)dim1_sharders(m),
				    c->model.moe.experts, n, (long long)rows);
			per = rows * row;
			for (e = 0; e < p->local_shape[0]; e++)
				add_bucket(buf, pos + e * per, pos + (e + 1) *
				    per, (rows + n - 1) / n * row, n);
			pos += p->local_shape[0] * per;
			continue;
		}
		rows = p->local_shape[0];
		row = p->local_elems / rows;
		per = (rows + n - 1) / n * row;
		add_bucket(buf, pos, pos + p->local_elems, per, n);
		pos += per * n;
	}
	buf->size = pos;
}

/*
 * Megatron's DistributedOptimizer maps every parameter to one bucket and
 * asserts that no rank owns a parameter in two ("each param only belongs
 * to a single bucket"): a tied weight whose head lies in the padding of
 * the bucket before its own (0.7 to 0.12, see open_own_bucket) stops
 * training at start-up rather than giving wrong gradients.
 */
static void
check_single_bucket(struct layout *lay, const struct model *m)
{
	const struct param	*p;
	const struct buffer_layout *buf;
	int64_t			 lo, hi, off, end;
	int			 i, b, k, n, owner_buckets;

	if (!m->config->training.distributed_optimizer || lay->refusal != NULL)
		return;
	for (i = 0; i < m->nparams; i++) {
		p = &m->params[i];
		buf = &lay->stages[model_unit(m, p)].buffer[
		    layout_buffer_of(m, i)];
		off = lay->offset[i];
		end = off + p->local_elems;
		n = buf->nbuckets > 0 ? buf->buckets[0].group_size : 1;
		for (k = 0; k < n; k++) {
			owner_buckets = 0;
			for (b = 0; b < buf->nbuckets; b++) {
				layout_bucket_shard(&buf->buckets[b], k, &lo,
				    &hi);
				if (lo < end && hi > off && lo < hi)
					owner_buckets++;
			}
			if (owner_buckets > 1) {
				xasprintf(&lay->refusal, "at start-up: data "
				    "parallel rank %d "
				    "would own parts of %s in two buckets, and "
				    "the distributed optimizer asserts each "
				    "parameter belongs to a single bucket", k,
				    p->name);
				return;
			}
		}
	}
}


void
layout_build(struct layout *lay, const struct model *m)
{
	int	s, k;

	lay->nstages = m->mesh.pp * m->chunks;
	lay->refusal = NULL;
	lay->stages = xcalloc(lay->nstages, sizeof *lay->stages);
	lay->offset = xcalloc(m->nparams, sizeof *lay->offset);
	for (s = 0; s < lay->nstages; s++)
		for (k = 0; k < BUFFER__COUNT; k++) {
			if (m->config->layout.dp_engine != DP_ENGINE_MEGATRON)
				build_fsdp_buffer(lay, m, s, k);
			else
				build_buffer(lay, m, s, k);
		}
	if (m->config->layout.dp_engine == DP_ENGINE_MEGATRON)
		check_single_bucket(lay, m);
}

void
layout_free(struct layout *lay)
{
	int	s, k;

	for (s = 0; s < lay->nstages; s++) {
		for (k = 0; k < BUFFER__COUNT; k++)
			free(lay->stages[s].buffer[k].buckets);
	}
	free(lay->stages);
	free(lay->offset);
	free(lay->refusal);
	memset(lay, 0, sizeof *lay);
}

void
layout_bucket_shard(const struct bucket *b, int k, int64_t *lo, int64_t *hi)
{
	*lo = b->lo + (int64_t)k * b->shard;
	*hi = *lo + b->shard;
	if (*hi > b->hi)
		*hi = b->hi;
	if (*lo > *hi)
		*lo = *hi;
}

int
layout_owned_ranges(const struct layout *lay, const struct model *m,
    int param, int member, int64_t (*ranges)[2], int max)
{
	const struct param	*p = &m->params[param];
	const struct stage_layout *sl = &lay->stages[model_unit(m, p)];
	const struct buffer_layout *buf = &sl->buffer[layout_buffer_of(m, param)];
	int64_t			 off = lay->offset[param];
	int64_t			 end = off + p->local_elems, lo, hi;
	int			 b, n = 0;

	for (b = 0; b < buf->nbuckets; b++) {
		const struct bucket *bk = &buf->buckets[b];

		if (bk->hi <= off || bk->lo >= end)
			continue;
		layout_bucket_shard(bk, member, &lo, &hi);
		if (lo < off)
			lo = off;
		if (hi > end)
			hi = end;
		if (lo >= hi)
			continue;
		if (n == max)
			fatalx("too many owned ranges for %s", p->name);
		ranges[n][0] = lo - off;
		ranges[n][1] = hi - off;
		n++;
	}
	return n;
}
