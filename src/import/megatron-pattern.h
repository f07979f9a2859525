/*
 * Megatron's --moe-layer-freq as a list of MoE layers (megatron-pattern.c).
 */
#ifndef GRADAUDIT_MEGATRON_PATTERN_H
#define GRADAUDIT_MEGATRON_PATTERN_H

#include <stdbool.h>

/*
 * The MoE layers that --moe-layer-freq s gives a model of `layers`
 * layers, into moe[]; returns NULL or what is wrong with s.
 */
const char *megatron_layer_pattern(const char *s, int layers, bool *moe);

#endif
