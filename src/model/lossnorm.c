/*
 * Valid tokens, the reference objective and a framework's loss
 * normalization as numbers per chunk (lossnorm.h).  Everything a knob
 * changes here is a factor on a chunk's loss; the audit finds out what the
 * factors do by running them through both engines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rational.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/plan.h"
#include "model/lossnorm.h"
#include "model/lossterm.h"

/*
 * The default valid-token counts, "uneven": chunk i keeps tokens -
 * (s i + 1) mod (tokens/2 + 1) of its slots, between tokens/2 and all of
 * them, s the first of 7, 5, 3, 2 prime to tokens/2 + 1 (else 1), so that
 * the counts run through every value of the span and neighbouring chunks
 * (cp ranks, dp ranks, micro-batches) differ: every mean of means, every
 * count taken over the wrong group, is a different number from the global
 * token mean.  (With a step sharing a factor with the span, 7 with
 * tokens = 12, every count was the same and the audit passed real bugs.)
 * Only a chunk of one token has nothing to vary.  The counts depend on the
 * chunk only, not on --seed: the symbolic audit, which has no seed, must
 * see the numeric audit's counts.
 */
int
lossnorm_uneven_count(int64_t tokens, int chunk)
{
	static const int64_t steps[] = { 7, 5, 3, 2 };
	int64_t	 span = tokens / 2 + 1, step = 1;
	size_t	 i;

	for (i = 0; i < sizeof steps / sizeof steps[0]; i++)
		if (span % steps[i] != 0) {
			step = steps[i];
			break;
		}
	return (int)(tokens - (step * (int64_t)chunk + 1) % span);
}

/*
 * floor(slots num/den), without the overflow of slots * num: the slots of
 * a step times a den of up to 10^9.
 */
static int64_t
masked_before(int64_t slots, int64_t num, int64_t den)
{
	return slots / den * num + slots % den * num / den;
}

/*
 * loss.valid_tokens "eod:N" and "fraction:F" (cfg_token_mask gives the
 * share num/den, 1/N or F): the chunks of the step, in the order the
 * counts are listed, are laid end to end as one stream of token slots,
 * chunk c holding slots [c T, (c + 1) T), and slot k is masked when
 * floor((k + 1) num/den) > floor(k num/den).  So chunk c loses
 *
 *	floor((c + 1) T num/den) - floor(c T num/den)
 *
 * slots, floor(T num/den) or one more, and the first c chunks together
 * lose floor(c T num/den): the share, spread as evenly as whole tokens
 * allow.  For eod:N (num/den = 1/N) the masked slots are N - 1, 2N - 1,
 * ...: the last token of each document of N tokens, as Megatron's
 * --eod-mask-loss masks each document's end-of-document token.  The
 * counts depend on the chunk only, like the "uneven" ones, and differ
 * between chunks unless T num/den is a whole number.
 */
int64_t
lossnorm_masked_count(int64_t tokens, int chunk, int64_t num, int64_t den)
{
	return masked_before(tokens * (chunk + 1), num, den) -
	    masked_before(tokens * chunk, num, den);
}

static void
read_counts(struct loss_norm *ln, const char *spec)
{
	const char	*p = spec;
	char		*end;
	int		 i;

	for (i = 0; i < ln->chunks; i++) {
		while (*p == ' ' || *p == ',')
			p++;
		/* The loader checked the list (valid_tokens_fit). */
		ln->valid[i] = (int)strtol(p, &end, 10);
		p = end;
	}
}

/* The size KEY_SCALE and KEY_DP_DIVISOR name. */
int
lossnorm_size(const struct mesh *mesh, enum data_size s)
{
	switch (s) {
	case SIZE_DP_CP:
		return mesh->dp;
	case SIZE_DP:
		return mesh->pure_dp;
	case SIZE_CP:
		return mesh->cp;
	case SIZE_ONE:
		break;
	}
	return 1;
}

/* What divides the summed loss of chunk (m, d): loss.normalize_by. */
static int64_t
divisor_of(const struct loss_norm *ln, const struct config *cfg,
    const struct mesh *mesh, int m, int d)
{
	int	 K = ln->micro_batches, cp = mesh->cp, i, c;
	int	 pure = d / cp, mine = d % cp;
	int64_t	 n = 0;
	enum loss_divisor by = cfg->loss.normalize_by;

	/*
	 * torchtitan v0.2.2 to 786e26f8e (#2972): with pp > 1 the pipeline
	 * schedule back-propagates its loss_fn, the summed cross entropy;
	 * only the loss reported is divided by the step's valid tokens.
	 */
	if (mesh->pp > 1 && cfg->loss.pp_normalize_by == PP_NORMALIZE_NONE)
		by = LOSS_NONE;
	switch (by) {
	case LOSS_GLOBAL:
		return ln->total;
	case LOSS_GLOBAL_WITHOUT_CP:
		/* verl #5993: summed over dp only, so over one cp rank's. */
		for (i = 0; i < K; i++)
			for (c = 0; c < mesh->pure_dp; c++)
				n += ln->valid[lossnorm_chunk(mesh, i,
				    c * cp + mine)];
		return n;
	case LOSS_GLOBAL_CP_DUPLICATED:
		/*
		 * prime-rl #2562: every cp rank counts its micro-batch's
		 * whole sequence, and the sum over dp_cp counts it cp times.
		 */
		return (int64_t)cp * ln->total;
	case LOSS_RANK:
		for (i = 0; i < K; i++)
			n += ln->valid[lossnorm_chunk(mesh, i, d)];
		return n;
	case LOSS_MICRO_BATCH:
		return (int64_t)K * ln->valid[lossnorm_chunk(mesh, m, d)];
	case LOSS_MICRO_BATCH_CP:
		/* Megatron's loss_func all-reduces [loss, count] over cp. */
		for (c = 0; c < cp; c++)
			n += ln->valid[lossnorm_chunk(mesh, m, pure * cp + c)];
		return (int64_t)K * n;
	case LOSS_MICRO_BATCH_OWN:
		/*
		 * Each micro-batch's own token mean, back-propagated at full
		 * weight and summed by accumulation: no 1/K (verl's
		 * distillation_loss before 594c51bc0, verl #7200).
		 */
		return ln->valid[lossnorm_chunk(mesh, m, d)];
	case LOSS_NONE:
		break;
	}
	return 1;
}

/*
 * Do the ep group `members` scale micro-batch m's loss of multi-token
 * prediction layer k + 1 differently?  Megatron-LM #7452's local counts
 * (loss.mtp_scale tokens-local) do so with uneven tokens even where the
 * main loss is scaled alike, and an expert owner's one atom of the layer
 * then gave every source's tokens the owner's factor in both engines.
 * A chunk whose rolled mask keeps no token counts too: its factor is 0
 * (mtp_factor), and an owner with such a chunk dropped the tokens its
 * group sent it (a right step called wrong-scale, dp 2, ep 2, valid
 * tokens "1, 8", tests/mtp-empty-chunk.test).
 */
static bool
mtp_factors_differ(const struct loss_norm *ln, const struct mesh *mesh,
    const int *members, int m, int k)
{
	const struct rational *coef = ln->mtp_coef + k * ln->chunks;
	int	 i, first = 0;
	struct coord c;

	for (i = 0; i < mesh->ep; i++) {
		mesh_coord_of(mesh, members[i], &c);
		if (i == 0)
			first = lossnorm_chunk(mesh, m, c.dp);
		else if (!q_equal(coef[first], coef[lossnorm_chunk(mesh, m,
		    c.dp)]))
			return true;
	}
	return false;
}

int
lossnorm_source_chunk(const struct mesh *mesh, const struct coord *c, int j,
    int m)
{
	struct coord	 src;

	mesh_coord_of(mesh, mesh_rank_of_expert(mesh, c->pp, j, c->etp,
	    c->edp), &src);
	return lossnorm_chunk(mesh, m, src.dp);
}

/*
 * Do the ranks of some ep group scale the same micro-batch differently,
 * or does the objective weigh their tokens differently?  Then one atom per
 * expert owner and micro-batch cannot say what the owner holds, or what
 * it should hold, and expert atoms are kept per source.  The weights
 * count as much as the factors: under loss.objective micro-batch-mean
 * with uneven tokens and a global normalization, every chunk's factor is
 * one, but an expert's tokens from a short micro-batch weigh more, and
 * with one atom per owner the expected value gave all of them its own
 * chunk's weight (tests/agree-loss.test, seed 8080, found it).
 */
/*
 * Each ep group of the first stage is visited once, from its member of ep
 * index 0: from every member, the loop took ep times the work, 65 s of an
 * 89 s check at dp 1,048,576 and ep 4,096 (issue 26).  The stages repeat
 * the first one's dp coordinates.
 */
static bool
sources_differ(const struct loss_norm *ln, const struct config *cfg,
    const struct mesh *mesh)
{
	int	*members, g, i, k, m, n = mesh->ep;
	int	 groups = mesh->edp * mesh->etp;
	struct coord c;
	bool	 differ = false;

	if (!cfg->model.has_moe || n == 1)
		return false;
	members = xcalloc((size_t)n, sizeof *members);
	for (g = 0; g < groups && !differ; g++) {
		mesh_group(mesh, GROUP_EP, mesh_rank_of_expert(mesh, 0, 0,
		    g % mesh->etp, g / mesh->etp), members);
		for (m = 0; m < ln->micro_batches && !differ; m++) {
			int first, chunk;

			mesh_coord_of(mesh, members[0], &c);
			first = lossnorm_chunk(mesh, m, c.dp);
			for (i = 1; i < n && !differ; i++) {
				mesh_coord_of(mesh, members[i], &c);
				chunk = lossnorm_chunk(mesh, m, c.dp);
				differ = !q_equal(ln->coef[first],
				    ln->coef[chunk]) || !q_equal(
				    lossnorm_weight(ln, first),
				    lossnorm_weight(ln, chunk));
			}
			for (k = 0; k < ln->mtp && !differ; k++)
				differ = mtp_factors_differ(ln, mesh, members,
				    m, k);
		}
	}
	free(members);
	return differ;
}

/*
 * The framework's factor on the auxiliary losses' gradient, on top of the
 * 1/cp of their own normalization: each rank divides its share of the
 * micro-batch's auxiliary loss by the token count of the whole sequence,
 * summed over the tp_cp group (Megatron's switch_load_balancing_loss_func
 * with total_num_tokens from get_tokens_per_expert_and_token_count, and
 * z_loss_func with moe_z_loss_coeff / tp_cp_group.size()), so a rank's
 * aux atom counts 1/cp of a micro-batch's whole term.  What follows is
 * MoEAuxLossAutoScaler's backward scale, which the schedule sets, and
 * under --calculate-per-token-loss the router's pre-multiplication by its
 * local tokens T_r (the sequence-parallel shard, tokens/tp) and
 * finalize_model_grads' division of every gradient by the step's valid
 * tokens N.  The data-parallel average of the sync plan comes after.
 */
static struct rational
aux_factor(const struct loss_norm *ln, const struct config *cfg,
    const struct mesh *mesh)
{
	int64_t	 K = ln->micro_batches, cp = mesh->cp, tp = mesh->tp;
	int64_t	 local = ln->tokens /
	    (cfg->training.sequence_parallel ? tp : 1);

	switch (cfg->loss.aux_scale) {
	case AUX_SCALE_MICRO_BATCHES_CP:
		/* schedules.py after PR #2217: loss_scale * cp / K. */
		return q_make(cp, K * cp);
	case AUX_SCALE_MICRO_BATCHES:
		/* Before it: loss_scale / K, the gradient divided by cp. */
		return q_make(1, K * cp);
	case AUX_SCALE_TOKENS_TP_CP:
		/* router.py after PR #5047: x num_local_tokens * tp_cp. */
		return q_make(local * tp * cp, cp * ln->total);
	case AUX_SCALE_TOKENS_LOCAL:
		/* Before it: x num_local_tokens, the local count only. */
		return q_make(local, cp * ln->total);
	case AUX_SCALE_NONE:
		break;
	}
	return q_make(0, 1);
}

static void
aux_build(struct loss_norm *ln, const struct config *cfg,
    const struct mesh *mesh)
{
	int64_t	 n, d;

	ln->aux_source = -1;
	if (!cfg->model.has_moe)
		return;
	/* The loader checked both (aux_coeff_fits, z_coeff_fits). */
	(void)cfg_decimal(cfg->model.moe.aux_loss_coeff, &n, &d);
	ln->aux_loss_coeff = q_make(n, d);
	(void)cfg_decimal(cfg->model.moe.z_loss_coeff, &n, &d);
	ln->z_loss_coeff = q_make(n, d);
	if (ln->aux_loss_coeff.num == 0 && ln->z_loss_coeff.num == 0)
		return;
	ln->aux_source = ln->sources++;
	ln->aux_coef = aux_factor(ln, cfg, mesh);
	ln->aux_expected = q_make(1, ln->chunks);
	/*
	 * router.py _apply_global_aux_loss: total_num_tokens is the local
	 * count times tp_dp_cp_group.size() while the scores stay local,
	 * so against the atom's T_G T the loss carries T / T_G, 1/pure_dp
	 * on top of the tp_cp part (Megatron-LM #3672).  With no
	 * load-balancing loss it returns early, and a z-loss is alone
	 * with the sequence's count.
	 */
	ln->aux_global = cfg->loss.aux_type == AUX_TYPE_GLOBAL &&
	    ln->aux_loss_coeff.num != 0;
	if (ln->aux_global)
		ln->aux_coef = q_mul(ln->aux_coef, q_make(1, mesh->pure_dp));
}

/*
 * The framework's factor on the summed loss of multi-token prediction
 * layer k over chunk c's rolled mask (v_k tokens, the step's nk), in atom
 * units, before mtp_loss_scaling_factor / D and the data-parallel average
 * of the sync plan.  Megatron's process_mtp_loss divides the masked loss by the
 * rolled mask's count on the rank and MTPLossAutoScaler multiplies its
 * gradient by the schedule's scale, 1/K (schedules.py forward_step);
 * under --calculate-per-token-loss the scale is 1 and the loss is not
 * divided, finalize_model_grads dividing every gradient by the main
 * loss's N.
 */
static struct rational
mtp_factor(const struct loss_norm *ln, const struct config *cfg,
    const struct mesh *mesh, int k, int c, int64_t nk)
{
	int64_t	 K = ln->micro_batches, v = ln->valid[c];
	int64_t	 vk = ln->mtp_valid[(k - 1) * ln->chunks + c], ng = 0;
	int	 i, r = lossnorm_chunk_cp(ln, c);

	for (i = 0; i < mesh->cp; i++)
		ng += ln->mtp_valid[(k - 1) * ln->chunks + c - r + i];
	/*
	 * A mask with nothing left: clamp(num_tokens, min=1) of a zero sum
	 * from core 0.17 on; 0.14 to 0.16 divide by the 0 (NaN), which the
	 * cp roll makes reachable: a cp rank whose valid tokens all lose
	 * their label.  gradaudit takes the clamped release's 0.
	 */
	if (vk == 0)
		return q_make(0, 1);
	switch (cfg->loss.mtp_scale) {
	case MTP_SCALE_MICRO_BATCHES:
		return q_make(ln->tokens, K * vk);
	case MTP_SCALE_MICRO_BATCHES_CP:
		/* Megatron PR #3959 (proposed, not merged): x cp. */
		return q_make(ln->tokens * mesh->cp, K * vk);
	case MTP_SCALE_TOKENS:
		/* Before PR #3159: the main loss's count divides all. */
		return q_make(ln->tokens, ln->total);
	case MTP_SCALE_TOKENS_LOCAL:
		/* PR #3159: x original_num_tokens / num_tokens, local. */
		return q_make(ln->tokens * v, vk * ln->total);
	case MTP_SCALE_TOKENS_GLOBAL:
		/* The global counts (Megatron #7452 finding 3). */
		return q_make(ln->tokens, nk);
	case MTP_SCALE_MICRO_BATCHES_CP_GROUP:
		/*
		 * The rolled count all-reduced over the cp group, times cp
		 * against DDP's average over dp*cp, as the main loss was
		 * before 0.13 (loss.normalize_by: micro-batch-cp): no release
		 * does this for MTP.
		 */
		return ng == 0 ? q_make(0, 1) :
		    q_make(ln->tokens * mesh->cp, K * ng);
	}
	return q_make(0, 1);
}

/* ---- the roll of multi-token prediction (lossnorm.h) ------------------- */

/* The position in its sequence of a sample's slot p on cp rank r. */
static int64_t
sequence_position(const struct loss_norm *ln, int r, int64_t p)
{
	int64_t	 h = ln->piece;

	if (ln->cp == 1)
		return p;
	return p < h ? r * h + p : (2 * ln->cp - 1 - r) * h + p - h;
}

/* The cp rank holding position g of a sequence, and the sample's slot. */
static int
position_owner(const struct loss_norm *ln, int64_t g, int64_t *p)
{
	int64_t	 h = ln->piece, j = g / h;

	if (ln->cp == 1) {
		*p = g;
		return 0;
	}
	if (j < ln->cp) {
		*p = g - j * h;
		return (int)j;
	}
	*p = h + g - j * h;
	return (int)(2 * ln->cp - 1 - j);
}

int64_t
lossnorm_rolled_slot(const struct loss_norm *ln, int c, int64_t t, int k,
    int *from)
{
	int64_t	 per = ln->seq / ln->cp, g, p;
	int	 r = lossnorm_chunk_cp(ln, c), owner;

	*from = c;
	if (k == 0)
		return t;
	/* Rolls need pieces: seq % (2 cp) == 0 with MTP (mtp_pieces_fit). */
	g = sequence_position(ln, r, t % per) + k;
	if (g >= ln->seq)
		return -1;
	owner = position_owner(ln, g, &p);
	*from = c - r + owner;
	return t / per * per + p;
}

bool
lossnorm_slot_counts(const struct loss_norm *ln, int c, int64_t t, int k)
{
	int64_t	 u;
	int	 from;

	u = lossnorm_rolled_slot(ln, c, t, k, &from);
	return u >= 0 && u < ln->valid[from];
}

/*
 * The valid positions of a sample below position x of its sequence, from
 * held[j], the valid positions of piece j (a prefix of it, the chunk's
 * valid slots being a prefix), and below[j], those of the pieces before.
 */
static int64_t
valid_below(const struct loss_norm *ln, const int64_t *held,
    const int64_t *below, int pieces, int64_t x)
{
	int64_t	 j = x / ln->piece, rest = x % ln->piece;

	if (j >= pieces)
		return below[pieces];
	return below[j] + (rest < held[j] ? rest : held[j]);
}

/*
 * The valid tokens of every chunk's mask rolled by k, counted piece by
 * piece rather than slot by slot, in time linear in the chunks and
 * samples: the slots of a piece [a, a + h) count the valid positions of
 * [a + k, a + h + k) in their sequence.  tests/mtp-roll.test counts them
 * slot by slot with roll_tensor's own steps.
 */
static void
count_rolled(struct loss_norm *ln, const struct mesh *mesh, int samples)
{
	int64_t	*held, *below, per = ln->seq / ln->cp, h = ln->piece;
	int64_t	 a, lo, hi, m0, n;
	int	 pieces = ln->cp == 1 ? 1 : 2 * ln->cp;
	int	 m, pure, s, j, r, k, i, c, mine[2];

	held = xcalloc((size_t)pieces, sizeof *held);
	below = xcalloc((size_t)pieces + 1, sizeof *below);
	for (m = 0; m < ln->micro_batches; m++)
		for (pure = 0; pure < mesh->pure_dp; pure++)
			for (s = 0; s < samples; s++) {
				for (j = 0; j < pieces; j++) {
					r = j < ln->cp ? j : pieces - 1 - j;
					c = lossnorm_chunk(mesh, m,
					    pure * ln->cp + r);
					m0 = ln->valid[c] - s * per -
					    (j < ln->cp ? 0 : h);
					held[j] = m0 < 0 ? 0 : m0 > h ? h : m0;
					below[j + 1] = below[j] + held[j];
				}
				for (r = 0; r < ln->cp; r++) {
					c = lossnorm_chunk(mesh, m,
					    pure * ln->cp + r);
					mine[0] = r;
					mine[1] = pieces - 1 - r;
					for (k = 1; k <= ln->mtp; k++)
						for (i = 0; i < (pieces == 1 ?
						    1 : 2); i++) {
							a = mine[i] * h;
							lo = a + k;
							hi = a + h + k;
							if (lo > ln->seq)
								lo = ln->seq;
							if (hi > ln->seq)
								hi = ln->seq;
							n = valid_below(ln, held,
							    below, pieces, hi) -
							    valid_below(ln, held,
							    below, pieces, lo);
							ln->mtp_valid[(k - 1) *
							    ln->chunks + c] +=
							    (int)n;
						}
				}
			}
	free(held);
	free(below);
}

/*
 * The multi-token prediction layers' rolled counts, factors and weights,
 * before sources_differ reads the factors.
 */
static void
mtp_weigh(struct loss_norm *ln, const struct config *cfg,
    const struct mesh *mesh)
{
	struct rational w;
	int64_t	 n, d, nk;
	int	 k, c, D = cfg->model.mtp;

	ln->mtp_source = ln->mtp_split_source = -1;
	ln->mtp = D;
	if (D == 0)
		return;
	if (cfg->model.mtp_loss_scaling_factor == NULL)
		ln->mtp_factor = q_make(1, 10);	/* Megatron's default */
	else {
		/* The loader checked it (mtp_factor_fits). */
		(void)cfg_decimal(cfg->model.mtp_loss_scaling_factor, &n, &d);
		ln->mtp_factor = q_make(n, d);
	}
	ln->mtp_valid = xcalloc((size_t)D * ln->chunks,
	    sizeof *ln->mtp_valid);
	ln->mtp_coef = xcalloc((size_t)D * ln->chunks, sizeof *ln->mtp_coef);
	ln->mtp_expected = xcalloc((size_t)D, sizeof *ln->mtp_expected);
	count_rolled(ln, mesh, cfg->model.micro_batch);
	/* Each layer weighs mtp_loss_scaling_factor / D (mtp_loss_scale). */
	w = q_mul(ln->mtp_factor, q_make(1, D));
	for (k = 1; k <= D; k++) {
		nk = 0;
		for (c = 0; c < ln->chunks; c++)
			nk += ln->mtp_valid[(k - 1) * ln->chunks + c];
		for (c = 0; c < ln->chunks; c++)
			ln->mtp_coef[(k - 1) * ln->chunks + c] = q_mul(w,
			    mtp_factor(ln, cfg, mesh, k, c, nk));
		/*
		 * The stated objective: each kept token's share of the
		 * layer's weight, over the rolled count or the main one.
		 */
		if (cfg->loss.mtp_objective == MTP_OBJECTIVE_MAIN_COUNT)
			ln->mtp_expected[k - 1] = ln->total == 0 ?
			    q_make(0, 1) : q_mul(w, q_make(ln->tokens,
			    ln->total));
		else
			ln->mtp_expected[k - 1] = nk == 0 ? q_make(0, 1) :
			    q_mul(w, q_make(ln->tokens, nk));
	}
}

/*
 * The layers' atoms: one a layer on every rank, and with expert atoms
 * kept per source one a layer and source on the experts too, which carry
 * each source's tokens at its own chunk's factor, as the main loss's do.
 */
static void
mtp_place(struct loss_norm *ln, const struct mesh *mesh)
{
	if (ln->mtp == 0)
		return;
	/*
	 * Tp-replicated dispatch merges twin sources (symbolic/run.c,
	 * pl_dispatch_twin), which the layers' atoms do not follow: a
	 * limit of this model, which it states for the audit to refuse
	 * (context.c), not a constraint on the config.
	 */
	if (ln->replicated) {
		ln->unmodelled = "model.mtp is not modelled with "
		    "model.moe.ep_on: tp-replicated (its expert gradients "
		    "are kept per source)";
		ln->mtp = 0;
		return;
	}
	ln->mtp_source = ln->sources;
	ln->sources += ln->mtp;
	if (ln->split) {
		ln->mtp_split_source = ln->sources;
		ln->sources += ln->mtp * mesh->ep;
	}
}

/* Indexed by enum loss_objective. */
static const char *const objective_notes[] = {
	[OBJECTIVE_TOKEN_MEAN] = NULL,
	[OBJECTIVE_MICRO_BATCH_MEAN] = "the mean of each micro-batch's mean "
	    "over its own valid tokens: with uneven tokens, a token of a short "
	    "micro-batch weighs more than one of a long one",
	[OBJECTIVE_SAMPLE_MEAN] = "the mean of each sample's mean over its "
	    "own valid tokens: with uneven tokens, a token of a short sample "
	    "weighs more than one of a long one",
	[OBJECTIVE_SUM] = "the sum of the token losses: gradients grow with "
	    "the step's valid tokens, and so does the norm clipping compares",
};

const char *
lossnorm_objective_note(enum loss_objective o)
{
	return objective_notes[o];
}

/*
 * The weight the stated objective gives each chunk's atoms (an atom is
 * 1/tokens of the chunk's summed loss gradient).  A mean of micro-batch
 * means is Megatron's loss without --calculate-per-token-loss: each
 * micro-batch's sum over its valid tokens, all-reduced with its count
 * over cp, averaged over micro-batches and dp.  A sample mean is the same
 * combination wherever it is one (sample_mean_expressible in config.c).
 */
static void
objective_build(struct loss_norm *ln, const struct config *cfg,
    const struct mesh *mesh)
{
	int	 K = ln->micro_batches, cp = mesh->cp, m, d, c, pure;
	int64_t	 n;

	ln->uniform = true;
	if (cfg->loss.objective == OBJECTIVE_TOKEN_MEAN)
		return;		/* lossnorm_weight: every one `expected` */
	ln->weight = xcalloc((size_t)ln->chunks, sizeof *ln->weight);
	for (m = 0; m < K; m++)
		for (d = 0; d < mesh->dp; d++) {
			struct rational *w = &ln->weight[lossnorm_chunk(mesh,
			    m, d)];

			switch (cfg->loss.objective) {
			case OBJECTIVE_TOKEN_MEAN:
				*w = ln->expected;
				break;
			case OBJECTIVE_SUM:
				*w = q_make(ln->tokens, 1);
				break;
			case OBJECTIVE_MICRO_BATCH_MEAN:
			case OBJECTIVE_SAMPLE_MEAN:
				pure = d / cp;
				for (n = 0, c = 0; c < cp; c++)
					n += ln->valid[lossnorm_chunk(mesh, m,
					    pure * cp + c)];
				*w = n == 0 ? q_make(0, 1) : q_make(ln->tokens,
				    (int64_t)K * mesh->pure_dp * n);
				break;
			}
		}
	ln->uniform = true;
	for (c = 1; c < ln->chunks; c++)
		if (!q_equal(ln->weight[c], ln->weight[0]))
			ln->uniform = false;
}

/*
 * The plan's steps on a loss term (a scale with term:, a gather-loss),
 * which act at the backward: their factor on each term (lossterm.c)
 * multiplies that term's loss factor, the one place both engines read
 * it from.  Without plan: every factor is 1.
 */
static void
terms_build(struct loss_norm *ln, const struct config *cfg,
    const struct mesh *mesh)
{
	struct rational	 q;
	int		 c;

	if (!plan_given(cfg))
		return;
	q = lossterm_factor(cfg, mesh, PLAN_TERM_MAIN);
	for (c = 0; c < ln->chunks; c++)
		ln->coef[c] = q_mul(ln->coef[c], q);
	if (ln->aux_source >= 0)
		ln->aux_coef = q_mul(ln->aux_coef, lossterm_factor(cfg, mesh,
		    PLAN_TERM_AUX));
	q = lossterm_factor(cfg, mesh, PLAN_TERM_MTP);
	for (c = 0; c < ln->mtp * ln->chunks; c++)
		ln->mtp_coef[c] = q_mul(ln->mtp_coef[c], q);
}

void
lossnorm_build(struct loss_norm *ln, const struct config *cfg,
    const struct mesh *mesh)
{
	const char	*spec = cfg->loss.valid_tokens;
	char		 why[256];
	int64_t		 num, den;
	int		 i, m, d, scale;

	memset(ln, 0, sizeof *ln);
	ln->micro_batches = cfg->training.micro_batches;
	ln->chunks = ln->micro_batches * mesh->dp;
	ln->tokens = (int64_t)cfg->model.micro_batch * cfg->model.seq /
	    mesh->cp;
	ln->seq = cfg->model.seq;
	ln->cp = mesh->cp;
	ln->dp_cp = mesh->dp;
	/* Megatron asserts seq % (2 cp) == 0 with cp (mtp_pieces_fit). */
	ln->piece = mesh->cp == 1 ? ln->seq : ln->seq / (2 * mesh->cp);
	ln->valid = xcalloc((size_t)ln->chunks, sizeof *ln->valid);
	if (spec != NULL && strcmp(spec, "all") == 0)
		for (i = 0; i < ln->chunks; i++)
			ln->valid[i] = (int)ln->tokens;
	else if (spec == NULL || strcmp(spec, "uneven") == 0)
		for (i = 0; i < ln->chunks; i++)
			ln->valid[i] = lossnorm_uneven_count(ln->tokens, i);
	/* The loader checked that every chunk keeps a token (valid_tokens_fit). */
	else if (cfg_token_mask(spec, &num, &den, why, sizeof why) == 1)
		for (i = 0; i < ln->chunks; i++)
			ln->valid[i] = (int)(ln->tokens -
			    lossnorm_masked_count(ln->tokens, i, num, den));
	else
		read_counts(ln, spec);
	for (i = 0; i < ln->chunks; i++)
		ln->total += ln->valid[i];
	ln->expected = q_make(ln->tokens, ln->total);
	objective_build(ln, cfg, mesh);
	scale = lossnorm_size(mesh, cfg->loss.scale);
	ln->coef = xcalloc((size_t)ln->chunks, sizeof *ln->coef);
	for (m = 0; m < ln->micro_batches; m++)
		for (d = 0; d < mesh->dp; d++)
			ln->coef[lossnorm_chunk(mesh, m, d)] =
			    q_make(ln->tokens * scale, divisor_of(ln, cfg,
			    mesh, m, d));
	mtp_weigh(ln, cfg, mesh);
	/*
	 * Under tp-replicated an expert owner gets the same tokens from
	 * every tp rank of a source's tp group: kept per source, the
	 * atoms of those sources can be told apart from the tokens they
	 * stand for (symbolic/run.c, pl_dispatch_twin).
	 */
	ln->replicated = mesh->ep > 1 && mesh_dispatch_replicated(mesh, cfg);
	ln->split = sources_differ(ln, cfg, mesh) || ln->replicated;
	ln->sources = ln->split ? 1 + mesh->ep : 1;
	aux_build(ln, cfg, mesh);
	mtp_place(ln, mesh);
	terms_build(ln, cfg, mesh);
}

/*
 * Does every chunk's loss factor, divided by `divisor` in the
 * data-parallel reduction, give its atoms the objective's weight: the
 * main loss's, each multi-token prediction layer's and the auxiliary
 * losses'?  A chunk without valid tokens has no atoms to weigh.
 */
static bool
factors_match(const struct loss_norm *ln, int which, int divisor)
{
	struct rational	 d = q_make(1, divisor);
	int		 c, k;

	switch (which) {
	case 0:
		for (c = 0; c < ln->chunks; c++)
			if (ln->valid[c] > 0 && !q_equal(q_mul(ln->coef[c], d),
			    lossnorm_weight(ln, c)))
				return false;
		return true;
	case 1:
		for (k = 0; k < ln->mtp; k++)
			for (c = 0; c < ln->chunks; c++)
				if (ln->mtp_valid[k * ln->chunks + c] > 0 &&
				    !q_equal(q_mul(ln->mtp_coef[k * ln->chunks +
				    c], d), ln->mtp_expected[k]))
					return false;
		return true;
	default:
		return ln->aux_source < 0 || q_equal(q_mul(ln->aux_coef, d),
		    ln->aux_expected);
	}
}

bool
lossnorm_main_matches(const struct loss_norm *ln, int divisor)
{
	return factors_match(ln, 0, divisor);
}

bool
lossnorm_mtp_matches(const struct loss_norm *ln, int divisor)
{
	return factors_match(ln, 1, divisor);
}

bool
lossnorm_aux_matches(const struct loss_norm *ln, int divisor)
{
	return factors_match(ln, 2, divisor);
}

void
lossnorm_free(struct loss_norm *ln)
{
	free(ln->valid);
	free(ln->weight);
	free(ln->coef);
	free(ln->mtp_valid);
	free(ln->mtp_coef);
	free(ln->mtp_expected);
	memset(ln, 0, sizeof *ln);
}
