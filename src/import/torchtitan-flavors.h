/*
 * torchtitan's model flavours, as `gradaudit import torchtitan` needs
 * them: the sizes that [model] name and flavor stand for in a train
 * config, read from torchtitan's own flavour tables at each release
 * (torchtitan-flavors.c cites file and tag for every entry).
 */
#ifndef GRADAUDIT_TORCHTITAN_FLAVORS_H
#define GRADAUDIT_TORCHTITAN_FLAVORS_H

#include <stdbool.h>
#include <stddef.h>

struct tt_flavor {
	const char	*model;		/* [model] name: "llama3" */
	const char	*flavor;	/* [model] flavor: "8B" */
	/* The releases whose tables hold these values: since..until. */
	const char	*since, *until;	/* "0.1.0", "0.2.2" */
	const char	*source;	/* file and tag read */
	int		 vocab, dim, ffn, layers;
	int		 head_dim;	/* with qk_norm */
	bool		 qk_norm, tied, mla;
	/* MoE: experts 0 for a dense model. */
	int		 experts, top_k, expert_ffn;
	int		 shared_ffn;	/* moe_inter_dim * num_shared_experts */
	bool		 sigmoid, score_before_experts;
	int		 dense_first;	/* DeepSeek's n_dense_layers */
	/* llama4's interleave_moe_layer_step: experts where (i + 1) % it
	 * is 0; 0 or 1: every layer after dense_first. */
	int		 moe_step;
	/*
	 * Where main's model registry (the registry import, version
	 * "main") has the same sizes, read at the windows it names; NULL:
	 * not read there, so not offered at main.
	 */
	const char	*main;
};

/*
 * The flavour of model name and flavor at release version ("0.2.2"), or
 * NULL.  *known is set when the pair is in some release's table.  Version
 * "main" is the registry of main (torchtitan-registry.h): only flavours
 * read there; NULL: any release's.
 */
const struct tt_flavor *tt_flavor_find(const char *model, const char *flavor,
	    const char *version, bool *known);

/*
 * "llama3: 8B 70B 405B" for model, or every model's when the tables have
 * no flavour of it, into buf: what a refusal offers instead.
 */
void	 tt_flavor_names(const char *model, char *buf, size_t size);

#endif
