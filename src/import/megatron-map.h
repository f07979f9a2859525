/*
 * Mapping the values of Megatron's arguments onto configuration keys
 * (megatron-map.c).
 */
#ifndef GRADAUDIT_MEGATRON_MAP_H
#define GRADAUDIT_MEGATRON_MAP_H

#include "import/megatron-state.h"

/*
 * Refuse, all in one run, the arguments whose values gradaudit cannot
 * model (multi-latent attention's, the auxiliary losses'), before any
 * value is read.
 */
void	 megatron_map_check(struct import_state *);
/* Read the values and set the keys of st->mi->cfg, or refuse. */
void	 megatron_map(struct import_state *);

#endif
