/*
 * The numeric engine's state: setting up the ranks a process hosts, with
 * their weights drawn from the seed, and the helpers that the kernels and
 * the interpreter share to read it.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "model/mesh.h"
#include "model/model.h"
#include "model/placement.h"
#include "numeric/collective.h"
#include "numeric/numdata.h"
#include "numeric/numengine.h"
#include "numeric/numvalue.h"

const struct op *
engine_op(const struct engine *eng, int stage, int opi)
{
	return &eng->model->stages[stage].ops[opi];
}

bool
rank_on_stage(const struct rank_state *rs, int stage)
{
	return rs->coord.pp == stage;
}

/*
 * Placements.  A tp group inside an MoE layer is tp/etp token slices times
 * etp (placement.h); rank tp_i sits in slice tp_i / etp at etp coordinate
 * tp_i % etp (struct coord).  Which ranks keep a value is pl_keeps_value's
 * decision, the one the symbolic engine's mask step runs too.
 */
void
engine_mask_to(const struct coord *c, struct tensor *t,
    struct placement from, struct placement to)
{
	if (!pl_keeps_value(c, from, to))
		memset(t->v, 0, (size_t)(t->rows * t->cols) * sizeof(*t->v));
}

void
moe_state_free(struct moe_state *st)
{
	free(st->items);
	free(st->o);
	free(st->work);
	free(st->u);
	free(st->h);
	free(st->a);
	memset(st, 0, sizeof(*st));
}

/*
 * Engine set-up: the ranks hosted here with their weights drawn from the
 * seed, zero gradients and empty slots.
 */
void
rank_clear(struct engine *eng, struct rank_state *rs)
{
	const struct stage_program	*sp = &eng->model->stages[rs->coord.pp];
	int				 k;

	for (k = 0; k < sp->nslots; k++) {
		tensor_free(&rs->act[k].t);
		free(rs->act[k].choice);
		rs->act[k].choice = NULL;
		tensor_free(&rs->grad[k]);
	}
	for (k = 0; k < sp->nops; k++)
		moe_state_free(&rs->moe[k]);
}

static void
rank_init(struct engine *eng, struct rank_state *rs, int rank)
{
	const struct model		*m = eng->model;
	const struct stage_program	*sp;
	const struct param		*p;
	int64_t				 i;
	int				 k, j;

	memset(rs, 0, sizeof(*rs));
	rs->rank = rank;
	mesh_coord_of(&m->mesh, rank, &rs->coord);
	rs->batch = rs->coord.dp;
	sp = &m->stages[rs->coord.pp];
	rs->act = xcalloc((size_t)sp->nslots, sizeof(*rs->act));
	rs->grad = xcalloc((size_t)sp->nslots, sizeof(*rs->grad));
	rs->moe = xcalloc((size_t)sp->nops, sizeof(*rs->moe));
	rs->weight = xcalloc((size_t)m->nparams, sizeof(*rs->weight));
	rs->pgrad = xcalloc((size_t)m->nparams, sizeof(*rs->pgrad));
	for (k = 0; k < m->nparams; k++) {
		p = &m->params[k];
		if (!model_rank_holds(m, p, rank))
			continue;
		rs->weight[k] = xcalloc((size_t)p->local_elems,
		    sizeof(*rs->weight[k]));
		rs->pgrad[k] = xcalloc((size_t)p->local_elems,
		    sizeof(*rs->pgrad[k]));
		if (model_per_source(m, p)) {
			if (rs->src_grad == NULL)
				rs->src_grad = xcalloc((size_t)m->nparams,
				    sizeof(*rs->src_grad));
			rs->src_grad[k] = xcalloc((size_t)m->mesh.ep,
			    sizeof(**rs->src_grad));
			for (j = 0; j < m->mesh.ep; j++)
				rs->src_grad[k][j] = xcalloc(
				    (size_t)p->local_elems, sizeof(union num));
		}
		for (i = 0; i < p->local_elems; i++)
			rs->weight[k][i] = weight_value(eng->weights,
			    eng->key[k], model_global_index(m, p, rank, i));
	}
}

static void
rank_free(struct engine *eng, struct rank_state *rs)
{
	int	 k, j;

	rank_clear(eng, rs);
	for (k = 0; k < eng->model->nparams; k++) {
		free(rs->weight[k]);
		free(rs->pgrad[k]);
		if (rs->src_grad != NULL && rs->src_grad[k] != NULL) {
			for (j = 0; j < eng->model->mesh.ep; j++)
				free(rs->src_grad[k][j]);
			free(rs->src_grad[k]);
		}
	}
	free(rs->src_grad);
	if (rs->aux_counts != NULL)
		for (k = 0; k < eng->model->nparams; k++)
			free(rs->aux_counts[k]);
	free(rs->aux_counts);
	free(rs->weight);
	free(rs->pgrad);
	free(rs->act);
	free(rs->grad);
	free(rs->moe);
}

void
engine_init(struct engine *eng, const struct model *m,
    struct transport *transport, const int *ranks, int nranks,
    const struct weight_source *ws, int *key)
{
	int	 s, i;

	memset(eng, 0, sizeof(*eng));
	eng->model = m;
	eng->cfg = m->config;
	eng->arith = ws->arith;
	eng->comm.arith = ws->arith;
	eng->comm.mesh = &m->mesh;
	eng->comm.transport = transport;
	eng->comm.rank = ranks;
	eng->comm.nranks = nranks;
	eng->weights = ws;
	eng->loss = &m->loss;
	eng->key = key;
	eng->nranks = nranks;
	eng->ranks = xcalloc((size_t)nranks, sizeof(*eng->ranks));
	for (i = 0; i < nranks; i++)
		rank_init(eng, &eng->ranks[i], ranks[i]);
	eng->act_place = xcalloc((size_t)m->mesh.pp, sizeof(*eng->act_place));
	eng->grad_place = xcalloc((size_t)m->mesh.pp,
	    sizeof(*eng->grad_place));
	eng->grad_set = xcalloc((size_t)m->mesh.pp, sizeof(*eng->grad_set));
	for (s = 0; s < m->mesh.pp; s++) {
		eng->act_place[s] = xcalloc((size_t)m->stages[s].nslots,
		    sizeof(**eng->act_place));
		eng->grad_place[s] = xcalloc((size_t)m->stages[s].nslots,
		    sizeof(**eng->grad_place));
		eng->grad_set[s] = xcalloc((size_t)m->stages[s].nslots,
		    sizeof(**eng->grad_set));
	}
}

void
engine_free(struct engine *eng)
{
	int	 s, i;

	for (i = 0; i < eng->nranks; i++)
		rank_free(eng, &eng->ranks[i]);
	free(eng->ranks);
	for (s = 0; s < eng->model->mesh.pp; s++) {
		free(eng->act_place[s]);
		free(eng->grad_place[s]);
		free(eng->grad_set[s]);
	}
	free(eng->act_place);
	free(eng->grad_place);
	free(eng->grad_set);
	if (eng->pipe_full)
		coll_release(&eng->comm, &eng->pipe);
	memset(eng, 0, sizeof(*eng));
}
