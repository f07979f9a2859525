/*
 * Gradient buffers and buckets, built the way Megatron's
 * DistributedDataParallel builds them (see layout.h for why the order
 * matters).
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "layout.h"
#include "mesh.h"
#include "model.h"
#include "xmalloc.h"

enum buffer_kind
layout_buffer_of(const struct model *m, int param)
{
	return m->params[param].expert ? BUFFER_EXPERT : BUFFER_DENSE;
}

static void
close_bucket(struct buffer_layout *buf, int64_t *open_lo, int64_t end, int n)
{
	struct bucket	*b;

	if (end == *open_lo)
		return;
	buf->buckets = xreallocarray(buf->buckets, buf->nbuckets + 1,
	    sizeof *buf->buckets);
	b = &buf->buckets[buf->nbuckets++];
	b->lo = *open_lo;
	b->hi = end;
	b->group_size = n;
	/* Padded to a multiple of the group size, then split evenly. */
	b->shard = (end - *open_lo + n - 1) / n;
	*open_lo = end;
}

/*
 * With sync.embedding_grad: separate-bucket the tied weight gets a bucket
 * of its own on both stages, so both stages shard it at the same element
 * ranges (Megatron commit daf0006, the fix for Megatron-LM #844).
 */
static bool
wants_own_bucket(const struct model *m, const struct param *p)
{
	return m->config->sync.embedding_grad == EMBEDDING_SEPARATE_BUCKET &&
	    m->logical[p->logical].ninstances == 2;
}

static void
build_buffer(struct layout *lay, const struct model *m, int stage,
    enum buffer_kind kind)
{
	struct buffer_layout *buf = &lay->stages[stage].buffer[kind];
	int64_t		 pos = 0, open_lo = 0;
	int64_t		 limit = m->config->training.bucket_elems;
	int		 n, i;

	n = kind == BUFFER_EXPERT ? m->mesh.edp : m->mesh.dp;
	/* Reverse registration order: backward produces gradients that way. */
	for (i = m->nparams - 1; i >= 0; i--) {
		const struct param *p = &m->params[i];

		if (p->stage != stage || layout_buffer_of(m, i) != kind)
			continue;
		if (wants_own_bucket(m, p))
			close_bucket(buf, &open_lo, pos, n);
		lay->offset[i] = pos;
		pos += p->local_elems;
		if (wants_own_bucket(m, p) ||
		    (limit > 0 && pos - open_lo >= limit))
			close_bucket(buf, &open_lo, pos, n);
	}
	close_bucket(buf, &open_lo, pos, n);
	buf->size = pos;
}

void
layout_build(struct layout *lay, const struct model *m)
{
	int	s, k;

	lay->nstages = m->mesh.pp;
	lay->stages = xcalloc(m->mesh.pp, sizeof *lay->stages);
	lay->offset = xcalloc(m->nparams, sizeof *lay->offset);
	for (s = 0; s < m->mesh.pp; s++)
		for (k = 0; k < BUFFER__COUNT; k++)
			build_buffer(lay, m, s, k);
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
	const struct stage_layout *sl = &lay->stages[p->stage];
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
