/*
 * The data of the numeric engine: weights and inputs as pure functions of
 * (seed, indices), so shards, replicas, both instances of a tied weight and
 * the reference all agree without exchanging anything.
 */
#ifndef GRADAUDIT_NUMDATA_H
#define GRADAUDIT_NUMDATA_H

#include <stdint.h>

#include "numeric/numvalue.h"

struct param;

/*
 * Weights are keyed by the logical parameter of the audited model, so both
 * instances of a tied weight, and the reference's single copy, get the
 * same values; scale[key] keeps float activations near 1 (1/sqrt(fan_in)).
 */
struct weight_source {
	uint64_t	 seed;
	double		*scale;		/* per logical parameter */
	enum arith	 arith;		/* the numerics values are drawn in */
};

/* The scale of a parameter's float weights: 1/sqrt(fan_in), or 1. */
double		 weight_scale(const struct param *);
/* Element `global` (model_global_index()) of the parameter keyed `key`. */
union num	 weight_value(const struct weight_source *, int key,
		    int64_t global);
/*
 * The token id of token t of micro-batch `batch` (of `tokens` tokens), in
 * [0, vocab); every tp shard of the vocabulary gets a token.
 */
int64_t		 token_id(uint64_t seed, int batch, int64_t t, int64_t tokens,
		    int vocab);
/* The loss target of token t of micro-batch `batch` at logit `column`. */
union num	 target_value(const struct weight_source *, int batch,
		    int64_t t, int64_t column);

#endif
