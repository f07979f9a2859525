/*
 * The reference of the numeric audit (numeric.c): the same interpreter on
 * the single-rank model.
 */
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/syncplan.h"
#include "numeric/interpret.h"
#include "numeric/numdata.h"
#include "numeric/numengine.h"
#include "numeric/numvalue.h"
#include "numeric/reference.h"

/*
 * The reference: the same interpreter on the single-rank model (mesh
 * 1x1x1, a cp rank's share of the sequence), once per chunk of the step
 * (every micro-batch of every dp and cp rank) with that chunk's inputs and
 * valid tokens, summed with the weight tokens/N of lossnorm.h: the
 * gradient of the mean loss over every valid token of the step.  The
 * result is one global gradient per logical parameter of the audited
 * model, matched by name.
 */
int
logical_by_name(const struct model *m, const char *name)
{
	int	 i;

	for (i = 0; i < m->nlogical; i++)
		if (strcmp(m->logical[i].name, name) == 0)
			return i;
	return -1;
}

/*
 * The objective's counts of a load-balancing loss over the dp group
 * (lossnorm.h aux_global): a pass over every chunk adds each chunk's
 * counts into its micro-batch's, and micro-batch m's become the mean of
 * those of micro-batches 0..m, which the step's pass then reads.
 */
static void
objective_counts(struct engine *eng, const struct loss_norm *ln)
{
	const struct model	*m = eng->model;
	struct rank_state	*rs = &eng->ranks[0];
	union num		 sum, *c;
	int64_t			 e, n;
	int			 d, k, mb;

	eng->aux_counting = AUX_COUNT_ADD;
	for (d = 0; d < ln->chunks; d++) {
		rank_clear(eng, rs);
		rs->batch = d;
		run_model(eng, NULL);
	}
	eng->aux_counting = AUX_COUNT_KEEP;
	for (k = 0; rs->aux_counts != NULL && k < m->nparams; k++) {
		if ((c = rs->aux_counts[k]) == NULL)
			continue;
		n = m->params[k].local_shape[0];
		for (e = 0; e < n; e++) {
			memset(&sum, 0, sizeof sum);
			for (mb = 0; mb < ln->micro_batches; mb++) {
				sum = num_add(eng->arith, sum, c[mb * n + e]);
				c[mb * n + e] = num_mul(eng->arith, sum,
				    num_from_rational(eng->arith, q_make(1,
				    mb + 1)));
			}
		}
	}
}

union num **
reference_gradients(const struct model *audited, const struct weight_source *ws,
    struct progress_count *pc)
{
	enum arith		 arith = ws->arith;
	struct config		 cfg;
	struct model		 ref;
	struct engine		 eng;
	const struct param	*p;
	union num		**out, **mtp, factor, w;
	int64_t			 i, g, elems;
	int			*key, k, d, s, rank0 = 0;

	cfg_one_rank(&cfg, audited->config);
	model_build(&ref, &cfg);
	key = xcalloc((size_t)ref.nparams, sizeof(*key));
	for (k = 0; k < ref.nparams; k++) {
		key[k] = logical_by_name(audited,
		    ref.logical[ref.params[k].logical].name);
		if (key[k] < 0)
			fatalx("numeric: reference parameter %s is not in the "
			    "audited model", ref.params[k].name);
	}
	out = xcalloc((size_t)audited->nlogical, sizeof(*out));
	for (k = 0; k < audited->nlogical; k++) {
		p = &audited->params[audited->logical[k].instance[0]];
		elems = p->elems;
		out[k] = xcalloc((size_t)elems, sizeof(*out[k]));
	}
	engine_init(&eng, &ref, NULL, &rank0, 1, ws, key);
	eng.loss = &audited->loss;
	/*
	 * The objective's counts of a load-balancing loss over the dp group
	 * first: the auxiliary passes below read them (and nothing counts
	 * in the passes after).
	 */
	eng.aux_counting = AUX_COUNT_KEEP;
	if (audited->loss.aux_global)
		objective_counts(&eng, &audited->loss);
	/*
	 * The multi-token prediction losses' and the auxiliary losses'
	 * (SEED_AUX, with 1/chunks: lossnorm.h), weighed as they go.  The
	 * auxiliary pass reaches whatever its gradient reaches, every
	 * parameter upstream of a router (issue 25), whichever the
	 * engines' atoms say.
	 */
	mtp = xcalloc((size_t)audited->nlogical, sizeof(*mtp));
	for (d = 0; d < audited->loss.chunks; d++)
		for (s = audited->loss.aux_source >= 0 ? SEED_AUX : 1;
		    s <= audited->loss.mtp; s++) {
			if (s == 0)
				continue;
			w = num_from_rational(arith, s == SEED_AUX ?
			    audited->loss.aux_expected :
			    audited->loss.mtp_expected[s - 1]);
			rank_clear(&eng, &eng.ranks[0]);
			eng.ranks[0].batch = d;
			for (k = 0; k < ref.nparams; k++)
				memset(eng.ranks[0].pgrad[k], 0,
				    (size_t)ref.params[k].local_elems *
				    sizeof(union num));
			eng.seed = s;
			run_model(&eng, NULL);
			eng.seed = 0;
			for (k = 0; k < ref.nparams; k++) {
				const union num *pg = eng.ranks[0].pgrad[k];
				union num **acc = &mtp[key[k]];

				if (*acc == NULL)
					*acc = xcalloc((size_t)ref.params[
					    k].elems, sizeof(union num));
				for (i = 0; i < ref.params[k].local_elems;
				    i++) {
					g = model_global_index(&ref,
					    &ref.params[k], 0, i);
					(*acc)[g] = num_add(arith, (*acc)[g],
					    num_mul(arith, w, pg[i]));
				}
			}
		}
	for (d = 0; d < audited->loss.chunks; d++) {
		rank_clear(&eng, &eng.ranks[0]);
		eng.ranks[0].batch = d;
		for (k = 0; k < ref.nparams; k++)
			memset(eng.ranks[0].pgrad[k], 0,
			    (size_t)ref.params[k].local_elems *
			    sizeof(union num));
		run_model(&eng, NULL);
		/* The objective's weight of this chunk (lossnorm.h). */
		factor = num_from_rational(arith,
		    lossnorm_weight(&audited->loss, d));
		for (k = 0; k < ref.nparams; k++)
			for (i = 0; i < ref.params[k].local_elems; i++) {
				g = model_global_index(&ref, &ref.params[k], 0,
				    i);
				out[key[k]][g] = num_add(arith, out[key[k]][g],
				    num_mul(arith, factor,
				    eng.ranks[0].pgrad[k][i]));
			}
		progress_tick(pc);
	}
	for (k = 0; k < audited->nlogical; k++) {
		p = &audited->params[audited->logical[k].instance[0]];
		elems = p->elems;
		for (i = 0; mtp[k] != NULL && i < elems; i++)
			out[k][i] = num_add(arith, out[k][i], mtp[k][i]);
		free(mtp[k]);
	}
	free(mtp);
	engine_free(&eng);
	free(key);
	model_free(&ref);
	cfg_free(&cfg);
	return out;
}

