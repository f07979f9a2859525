/*
 * Deterministic data for the numeric engine.  Every value is drawn from a
 * generator state mixed from the seed and the value's indices, never from
 * a running stream, so any rank can compute any element on its own.
 */
#include <math.h>

#include "model/model.h"
#include "numeric/field.h"
#include "numeric/numdata.h"
#include "numeric/numvalue.h"

enum draw_kind {
	DRAW_WEIGHT = 1,
	DRAW_TOKEN,
	DRAW_TARGET
};

static uint64_t
draw_state(uint64_t seed, enum draw_kind kind, uint64_t a, uint64_t b,
    uint64_t c)
{
	uint64_t	 s = seed, parts[4] = { (uint64_t)kind, a, b, c };
	int		 i;

	for (i = 0; i < 4; i++) {
		s ^= parts[i];
		s = rng_next(&s);
	}
	return s;
}

static union num
draw_value(enum arith arith, uint64_t state, double scale)
{
	union num	 r;

	if (arith == ARITH_EXACT)
		r.f = f_random(&state);
	else
		r.d = num_round(arith, d_random(&state) * scale);
	return r;
}

double
weight_scale(const struct param *p)
{
	switch (p->role) {
	case ROLE_EMBEDDING:
	case ROLE_NORM:
	case ROLE_HEAD_NORM:
	case ROLE_OUT_NORM:
	case ROLE_SINK:
		return 1.0;
	case ROLE_COLUMN:
	case ROLE_KV:
	case ROLE_ROW:
	case ROLE_ROUTER:
	case ROLE_GATE:
	case ROLE_DUPLICATED:
	case ROLE_OUTPUT:
		return 1.0 / sqrt((double)p->shape[1]);
	case ROLE_EXPERT_FC1:
	case ROLE_EXPERT_FC2:
		return 1.0 / sqrt((double)p->shape[2]);
	}
	return 1.0;
}

union num
weight_value(const struct weight_source *ws, int key, int64_t global)
{
	return draw_value(ws->arith, draw_state(ws->seed, DRAW_WEIGHT,
	    (uint64_t)key, (uint64_t)global, 0), ws->scale[key]);
}

/*
 * Token t of a micro-batch of `tokens` draws its id from the t-th of
 * `tokens` equal blocks of the vocabulary (or, with a vocabulary smaller
 * than the batch, the first tokens take every id once).  Since tokens is a
 * multiple of tp, every vocab-parallel shard of the embedding, for every
 * tp, is looked up in every micro-batch: no rank's embedding gradient is
 * zero, which would make a wrong combination of it numerically invisible.
 */
int64_t
token_id(uint64_t seed, int batch, int64_t t, int64_t tokens, int vocab)
{
	uint64_t	 s;
	int64_t		 lo, hi;

	s = draw_state(seed, DRAW_TOKEN, (uint64_t)batch, (uint64_t)t, 0);
	if (vocab < tokens) {
		if (t < vocab)
			return t;
		return (int64_t)(rng_next(&s) % (uint64_t)vocab);
	}
	lo = t * vocab / tokens;
	hi = (t + 1) * vocab / tokens;
	return lo + (int64_t)(rng_next(&s) % (uint64_t)(hi - lo));
}

union num
target_value(const struct weight_source *ws, int batch, int64_t t,
    int64_t column)
{
	return draw_value(ws->arith, draw_state(ws->seed, DRAW_TARGET,
	    (uint64_t)batch, (uint64_t)t, (uint64_t)column), 1.0);
}
