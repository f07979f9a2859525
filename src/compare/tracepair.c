/*
 * What compare (compare.c) checks of the traces before it compares them:
 * that a traced step and its reference belong together and hold every
 * element, that a config describes the traced ranks, and the mesh the
 * tables show.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "compare/region.h"
#include "compare/tracepair.h"
#include "model/mesh.h"
#include "symbolic/measure.h"

void
build_mesh(const struct trace *t, struct mesh *m)
{
	const int	*s = t->mesh;
	int		 r, d;

	if (!t->has_mesh || s[TRACE_DIM_EP] > 1 || s[TRACE_DIM_ETP] > 1) {
		mesh_init(m, t->world, 1, 1, 1, 1, 1);
		return;
	}
	mesh_init(m, s[TRACE_DIM_DP], s[TRACE_DIM_CP], s[TRACE_DIM_PP],
	    s[TRACE_DIM_TP], 1, 1);
	/*
	 * The tables place ranks by Megatron's order; a trace whose ranks
	 * say otherwise is shown flat rather than misplaced.
	 */
	for (r = 0; r < t->world; r++) {
		struct coord c;
		const struct trace_rank *k = &t->ranks[r];
		int want[TRACE_DIM__COUNT];

		mesh_coord_of(m, r, &c);
		want[TRACE_DIM_DP] = c.pure_dp;
		want[TRACE_DIM_PP] = c.pp;
		want[TRACE_DIM_TP] = c.tp;
		want[TRACE_DIM_CP] = c.cp;
		want[TRACE_DIM_EP] = want[TRACE_DIM_ETP] = 0;
		for (d = 0; d < TRACE_DIM__COUNT; d++)
			if (k->has_coord[d] && k->coord[d] != want[d]) {
				mesh_init(m, t->world, 1, 1, 1, 1, 1);
				return;
			}
	}
}

/*
 * The first element of parameter pi that no rank's final holds, or -1.
 * An element no rank holds would go unaudited, and a parameter with a
 * missing final pass as correct.
 */
static int64_t
first_unheld(const struct trace *t, int pi)
{
	const struct trace_param *p = &t->params[pi];
	unsigned char	*held;
	size_t		 n, first, j;
	int64_t		 e, i;

	held = xcalloc((size_t)p->elems / 8 + 1, 1);
	n = trace_tensors_of(t, pi, TRACE_FINAL, &first);
	for (j = first; j < first + n; j++) {
		const struct trace_tensor *f = &t->tensors[j];

		for (e = f->lo; e < f->hi; e++) {
			i = logical_index(p, f, e);
			held[i / 8] |= (unsigned char)(1u << (i % 8));
		}
	}
	for (i = 0; i < p->elems && (held[i / 8] >> (i % 8) & 1); i++)
		;
	free(held);
	return i < p->elems ? i : -1;
}

/*
 * The two traces belong together: same step, same parameters.  Each
 * message names the file that says otherwise: a manifest for the modes
 * and the step, the reference's rank file for its parameters.
 */
int
check_pair(const struct trace *t, const struct trace *ref, char *err,
    size_t errlen)
{
	const char	*rfile = ref->ranks[0].file;
	char		 a[32 * TRACE_MAX_DIMS], b[32 * TRACE_MAX_DIMS];
	size_t		 i, first;
	int64_t		 e;
	int		 k;

	if (t->reference) {
		snprintf(err, errlen, "%s/manifest.json: mode is \"reference"
		    "\": give the traced step first and its reference with "
		    "--reference", t->dir);
		return -1;
	}
	if (!ref->reference) {
		snprintf(err, errlen, "%s/manifest.json: mode is \"parallel\", "
		    "not \"reference\": --reference takes the step run again "
		    "on one process", ref->dir);
		return -1;
	}
	if (strcmp(ref->reference_of, t->step) != 0) {
		snprintf(err, errlen, "%s/manifest.json: the reference of step "
		    "%s, not of step %s (%s): record it with the weights of "
		    "that step", ref->dir, ref->reference_of, t->step, t->dir);
		return -1;
	}
	for (i = 0; i < t->nparams; i++) {
		const struct trace_param *p = &t->params[i];

		k = trace_param_index(ref, p->name);
		if (k < 0) {
			snprintf(err, errlen, "%s: parameter %s is missing: a "
			    "reference of another model", rfile, p->name);
			return -1;
		}
		if (ref->params[k].ndim != p->ndim ||
		    memcmp(ref->params[k].shape, p->shape, p->ndim *
		    sizeof(p->shape[0])) != 0) {
			snprintf(err, errlen, "%s: parameter %s has the shape "
			    "%s, %s in the traced step: a reference of another "
			    "model", rfile, p->name, trace_format_dims(a,
			    sizeof a, ref->params[k].shape,
			    ref->params[k].ndim), trace_format_dims(b,
			    sizeof b, p->shape, p->ndim));
			return -1;
		}
		/* The reference must hold every element of it. */
		{
			size_t n = trace_tensors_of(ref, k, TRACE_FINAL,
			    &first), j;
			int64_t total = 0;

			for (j = first; j < first + n; j++)
				total += ref->tensors[j].hi -
				    ref->tensors[j].lo;
			if (total != p->elems) {
				snprintf(err, errlen, "%s: tensor final/%s: "
				    "holds %" PRId64 " of the parameter's %"
				    PRId64 " elements; the reference must "
				    "hold it whole", rfile, p->name, total,
				    p->elems);
				return -1;
			}
		}
		/* Bounded: the reference holds as many elements. */
		if ((e = first_unheld(t, (int)i)) >= 0) {
			snprintf(err, errlen, "%s: parameter %s: no rank holds "
			    "the final gradient of element %" PRId64 " (of %"
			    PRId64 "): a rank's final/%s is missing, and what "
			    "no rank holds cannot be audited", t->dir, p->name,
			    e, p->elems, p->name);
			return -1;
		}
	}
	for (i = 0; i < ref->nparams; i++)
		if (trace_param_index(t, ref->params[i].name) < 0) {
			snprintf(err, errlen, "%s: parameter %s is not in the "
			    "traced step %s: a reference of another model",
			    rfile, ref->params[i].name, t->dir);
			return -1;
		}
	return 0;
}

/* The coarsest dtype of t's finals not finer than dt. */
enum trace_dtype
coarsest_final(const struct trace *t, enum trace_dtype dt)
{
	size_t	i;

	for (i = 0; i < t->ntensors; i++)
		if (t->tensors[i].kind == TRACE_FINAL &&
		    trace_dtype_size(t->tensors[i].dtype) <
		    trace_dtype_size(dt))
			dt = t->tensors[i].dtype;
	return dt;
}

/*
 * The config describes the traced ranks: the same mesh where the trace
 * names one, and each rank where its coordinates place it.  Otherwise the
 * config's rank r is another rank than the trace's r, and every
 * difference would be a finding about the code.
 */
int
check_config_mesh(const struct trace *t, const struct mesh *m,
    const char *config_file, char *err, size_t errlen)
{
	struct coord	 c;
	int		 want[TRACE_DIM__COUNT], r, d;

	want[TRACE_DIM_DP] = m->pure_dp;
	want[TRACE_DIM_PP] = m->pp;
	want[TRACE_DIM_TP] = m->tp;
	want[TRACE_DIM_CP] = m->cp;
	want[TRACE_DIM_EP] = m->ep;
	want[TRACE_DIM_ETP] = m->etp;
	/* ep and etp: a trace leaves them out (1) unless they regroup. */
	for (d = 0; t->has_mesh && d < TRACE_DIM__COUNT; d++)
		if (t->mesh[d] != want[d] && (d < TRACE_DIM_EP ||
		    t->mesh[d] > 1)) {
			snprintf(err, errlen, "%s/manifest.json: mesh dp=%d "
			    "pp=%d tp=%d cp=%d, but %s has dp=%d pp=%d tp=%d "
			    "cp=%d: give the config the traced job's mesh",
			    t->dir, t->mesh[TRACE_DIM_DP], t->mesh[TRACE_DIM_PP],
			    t->mesh[TRACE_DIM_TP], t->mesh[TRACE_DIM_CP],
			    config_file, m->pure_dp, m->pp, m->tp, m->cp);
			return -1;
		}
	for (r = 0; r < t->world; r++) {
		const struct trace_rank *k = &t->ranks[r];

		mesh_coord_of(m, r, &c);
		want[TRACE_DIM_DP] = c.pure_dp;
		want[TRACE_DIM_PP] = c.pp;
		want[TRACE_DIM_TP] = c.tp;
		want[TRACE_DIM_CP] = c.cp;
		for (d = TRACE_DIM_DP; d <= TRACE_DIM_CP; d++)
			if (k->has_coord[d] && k->coord[d] != want[d]) {
				snprintf(err, errlen, "%s: coords: %s %d, but "
				    "%s places rank %d at %s %d: the job "
				    "numbers its ranks otherwise than "
				    "Megatron (tp fastest, then cp, dp, pp)",
				    k->file, trace_dim_name(d), k->coord[d],
				    config_file, r, trace_dim_name(d),
				    want[d]);
				return -1;
			}
	}
	return 0;
}

