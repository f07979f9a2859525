/*
 * Which ranks hold rows of a tied weight that no update reaches, and
 * which rows (stale.h, pytorch #176076): read off the FSDP2 layout, where
 * each member of the shard group owns ceil(rows / n) rows, the trailing
 * member fewer.
 */
#include <stdlib.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "model/layout.h"
#include "model/mesh.h"
#include "model/model.h"
#include "model/stale.h"

/* The tied weight both fully_shard groups manage, or -1. */
static int
split_param(const struct model *m)
{
	int	 i;

	if (!cfg_tied_split(m->config))
		return -1;
	for (i = 0; i < m->nparams; i++)
		if (m->params[i].role == ROLE_EMBEDDING &&
		    m->logical[m->params[i].logical].tied_with != NULL)
			return i;
	return -1;
}

/* The bucket (one per parameter under FSDP2) holding param's elements. */
static const struct bucket *
param_bucket(const struct model *m, const struct layout *lay, int param)
{
	const struct buffer_layout *buf = &lay->stages[model_unit(m,
	    &m->params[param])].buffer[layout_buffer_of(m, param)];
	int64_t	 off = lay->offset[param];
	int	 b;

	for (b = 0; b < buf->nbuckets; b++)
		if (buf->buckets[b].lo == off)
			return &buf->buckets[b];
	fatalx("stale rows: no bucket starts at %s", m->params[param].name);
}

size_t
stale_rows_find(const struct model *m, const struct layout *lay,
    struct stale_rows **out)
{
	const struct bucket	*bk;
	const struct param	*p;
	struct stale_rows	*v = NULL;
	int64_t			 lo, hi, row;
	size_t			 n = 0;
	int			 param, r, k;

	if (out != NULL)
		*out = NULL;
	if ((param = split_param(m)) < 0)
		return 0;
	p = &m->params[param];
	bk = param_bucket(m, lay, param);
	row = p->local_elems / p->local_shape[0];
	for (r = 0; r < m->mesh.world; r++) {
		k = mesh_group_index(&m->mesh, GROUP_DP_SHARD, r);
		layout_bucket_shard(bk, k, &lo, &hi);
		/*
		 * A full shard shares the first group's storage; an empty
		 * one holds no row: only a short one is stale.
		 */
		if (hi - lo == bk->shard || hi == lo)
			continue;
		if (out != NULL) {
			v = xreallocarray(v, n + 1, sizeof *v);
			v[n].rank = r;
			v[n].param = param;
			v[n].member = k;
			v[n].lo = lo - bk->lo;
			v[n].hi = hi - bk->lo;
			v[n].row_lo = model_global_index(m, p, r, v[n].lo) /
			    p->shape[1];
			v[n].row_hi = v[n].row_lo + (hi - lo) / row;
		}
		n++;
	}
	if (out != NULL)
		*out = v;
	return n;
}
