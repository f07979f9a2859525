/*
 * The sync plan (syncplan.h) executed by the numeric engine (numeric.c) on
 * the real local gradients: the steps as syncplan.h defines them and
 * symbolic.c executes them on expressions, each a real collective over its
 * mesh group or a local scale or mask.
 */
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/placement.h"
#include "model/syncplan.h"
#include "numeric/collective.h"
#include "numeric/interpret.h"
#include "numeric/numengine.h"
#include "numeric/numsync.h"
#include "numeric/numvalue.h"
#include "symbolic/lincomb.h"

/*
 * SYNC_MASK_REPLICAS (the plan emits it over tp only): keep the value on
 * coordinate 0 of every sub-dimension `replicate` marks Replicate.
 */
static bool
mask_keeps(const struct sync_step *st, const struct rank_state *rs)
{
	return pl_keeps_value(&rs->coord, st->replicate,
	    pl_uniform(PLACE_PARTIAL));
}

/*
 * The buffer of `kind` of a rank's model chunk, gathered from its
 * parameters: each chunk has buffers of its own (one DDP a chunk).
 */
static union num *
buffer_pack(const struct engine *eng, const struct layout *layout,
    const struct rank_state *rs, enum buffer_kind kind, int chunk)
{
	const struct model		*m = eng->model;
	const struct stage_layout	*sl = &layout->stages[rs->coord.pp *
					    m->chunks + chunk];
	union num			*buf;
	int				 p;

	if (sl->buffer[kind].size == 0)
		return NULL;
	buf = xcalloc((size_t)sl->buffer[kind].size, sizeof(*buf));
	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && layout_buffer_of(m, p) == kind &&
		    m->params[p].chunk == chunk)
			memcpy(buf + layout->offset[p], rs->pgrad[p],
			    (size_t)m->params[p].local_elems * sizeof(*buf));
	return buf;
}

static void
buffer_unpack(const struct engine *eng, const struct layout *layout,
    struct rank_state *rs, enum buffer_kind kind, int chunk,
    const union num *buf)
{
	const struct model		*m = eng->model;
	int				 p;

	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && layout_buffer_of(m, p) == kind &&
		    m->params[p].chunk == chunk)
			memcpy(rs->pgrad[p], buf + layout->offset[p],
			    (size_t)m->params[p].local_elems * sizeof(*buf));
}

/* The parameters a TARGET_PARAMS step selects on a rank, concatenated. */
static union num *
params_pack(const struct engine *eng, const struct sync_step *st,
    const struct rank_state *rs, int64_t *len)
{
	const struct model	*m = eng->model;
	union num		*v = NULL;
	int64_t			 n = 0;
	int			 p;

	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && syncplan_touches(st, m, p))
			n += m->params[p].local_elems;
	*len = n;
	if (n == 0)
		return NULL;
	v = xcalloc((size_t)n, sizeof(*v));
	for (n = 0, p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && syncplan_touches(st, m, p)) {
			memcpy(v + n, rs->pgrad[p],
			    (size_t)m->params[p].local_elems * sizeof(*v));
			n += m->params[p].local_elems;
		}
	return v;
}

static void
params_unpack(const struct engine *eng, const struct sync_step *st,
    struct rank_state *rs, const union num *v)
{
	const struct model	*m = eng->model;
	int64_t			 n = 0;
	int			 p;

	for (p = 0; p < m->nparams; p++)
		if (rs->pgrad[p] != NULL && syncplan_touches(st, m, p)) {
			memcpy(rs->pgrad[p], v + n,
			    (size_t)m->params[p].local_elems * sizeof(*v));
			n += m->params[p].local_elems;
		}
}

static void
sync_local(struct engine *eng, const struct sync_step *st)
{
	enum arith		 arith = eng->arith;
	const struct model	*m = eng->model;
	struct rank_state	*rs;
	union num		 scale = num_from_rational(arith, st->scale);
	int64_t			 k;
	int			 i, p;

	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		for (p = 0; p < m->nparams; p++) {
			if (rs->pgrad[p] == NULL || !syncplan_touches(st, m, p))
				continue;
			/* A reset zeroes what a mask zeroes, on every rank. */
			if (st->op == SYNC_RESET ||
			    st->op == SYNC_MASK_REPLICAS) {
				if (st->op == SYNC_RESET || !mask_keeps(st, rs))
					memset(rs->pgrad[p], 0, (size_t)m->
					    params[p].local_elems *
					    sizeof(*rs->pgrad[p]));
				continue;
			}
			for (k = 0; k < m->params[p].local_elems; k++)
				rs->pgrad[p][k] = num_mul(arith,
				    rs->pgrad[p][k], scale);
		}
	}
}

static void
sync_collective(struct engine *eng, const struct layout *layout,
    const struct sync_step *st, int chunk)
{
	const struct buffer_layout	**bl;
	struct rank_state		*rs;
	union num			**vec;
	int64_t				*len;
	int				 i;

	vec = xcalloc((size_t)eng->nranks, sizeof(*vec));
	len = xcalloc((size_t)eng->nranks, sizeof(*len));
	bl = xcalloc((size_t)eng->nranks, sizeof(*bl));
	for (i = 0; i < eng->nranks; i++) {
		rs = &eng->ranks[i];
		if (st->target == TARGET_BUFFER) {
			vec[i] = buffer_pack(eng, layout, rs, st->buffer,
			    chunk);
			bl[i] = &layout->stages[rs->coord.pp *
			    eng->model->chunks + chunk].buffer[st->buffer];
			len[i] = bl[i]->size;
		} else
			vec[i] = params_pack(eng, st, rs, &len[i]);
	}
	if (st->op == SYNC_REDUCE_SCATTER) {
		if (st->target != TARGET_BUFFER)
			fatalx("numeric: reduce-scatter of loose parameters");
		coll_reduce_scatter(&eng->comm, st->group, vec, bl,
		    st->average);
	} else
		coll_all_reduce(&eng->comm, st->group, vec, len, st->average);
	for (i = 0; i < eng->nranks; i++) {
		if (vec[i] == NULL)
			continue;
		if (st->target == TARGET_BUFFER)
			buffer_unpack(eng, layout, &eng->ranks[i], st->buffer,
			    chunk, vec[i]);
		else
			params_unpack(eng, st, &eng->ranks[i], vec[i]);
		free(vec[i]);
	}
	free(bl);
	free(len);
	free(vec);
}

/* Is p one of the step's, in buffer k of chunk c, and held by rs? */
static bool
step_holds(const struct model *m, const struct rank_state *rs,
    const struct sync_step *st, int p, int c, int k)
{
	return rs->pgrad[p] != NULL && st->params[p] &&
	    m->params[p].chunk == c && (int)layout_buffer_of(m, p) == k;
}

/*
 * An all-gather of the selected parameters' shards: each rank's buffer of
 * every chunk and kind goes through the collective (every process takes
 * part in each round), and only the selected parameters are written back.
 */
static void
sync_all_gather(struct engine *eng, const struct layout *layout,
    const struct sync_step *st)
{
	const struct model		*m = eng->model;
	const struct buffer_layout	**bl;
	struct rank_state		*rs;
	union num			**vec;
	int				 i, p, c, k;
	bool				 holds;

	vec = xcalloc((size_t)eng->nranks, sizeof(*vec));
	bl = xcalloc((size_t)eng->nranks, sizeof(*bl));
	for (c = 0; c < m->chunks; c++)
		for (k = 0; k < BUFFER__COUNT; k++) {
			for (i = 0; i < eng->nranks; i++) {
				rs = &eng->ranks[i];
				holds = false;
				for (p = 0; p < m->nparams; p++)
					holds = holds ||
					    step_holds(m, rs, st, p, c, k);
				vec[i] = holds ? buffer_pack(eng, layout, rs,
				    k, c) : NULL;
				bl[i] = &layout->stages[rs->coord.pp *
				    m->chunks + c].buffer[k];
			}
			coll_all_gather(&eng->comm, st->group, vec, bl);
			for (i = 0; i < eng->nranks; i++) {
				if (vec[i] == NULL)
					continue;
				rs = &eng->ranks[i];
				for (p = 0; p < m->nparams; p++)
					if (step_holds(m, rs, st, p, c, k))
						memcpy(rs->pgrad[p], vec[i] +
						    layout->offset[p],
						    (size_t)m->params[p].
						    local_elems *
						    sizeof(*vec[i]));
				free(vec[i]);
			}
		}
	free(bl);
	free(vec);
}

void
run_sync(struct engine *eng, const struct layout *layout,
    const struct sync_plan *plan, int mb, bool before,
    struct progress_count *pc)
{
	const struct sync_step	*st;
	int			 s, c;

	for (s = 0; s < plan->nsteps; s++) {
		st = &plan->steps[s];
		/* Resets run before the backward, every other step after. */
		if ((st->op == SYNC_RESET) != before ||
		    !syncplan_runs_at(st, mb))
			continue;
		switch (st->op) {
		case SYNC_SCALE:
		case SYNC_MASK_REPLICAS:
		case SYNC_RESET:
			sync_local(eng, st);
			break;
		case SYNC_ALL_REDUCE:
		case SYNC_REDUCE_SCATTER:
			/* A buffer step runs in every chunk's DDP. */
			for (c = 0; c < (st->target == TARGET_BUFFER ?
			    eng->model->chunks : 1); c++)
				sync_collective(eng, layout, st, c);
			break;
		case SYNC_ALL_GATHER:
			sync_all_gather(eng, layout, st);
			break;
		case SYNC_ACCUMULATE:
			/* Into zeros: the value stays; syncplan.h. */
			break;
		case SYNC_LOSS_TERM:
			/* At the backward, in the loss factors; syncplan.h. */
			break;
		}
		progress_tick(pc);
	}
}
