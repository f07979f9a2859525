/*
 * The finding catalogue (findings.h): for every fact the diagnosis can
 * establish, the kind of finding, the setting at fault, the op and mesh
 * dimension it names, the mechanism in words and the fix, each with the
 * reports it models.  A mechanism is a template whose $-fields the fact's
 * parameters fill:
 *
 *	$L	the step's label, or the backward reduction's (what)
 *	$C	" (the step's citation)", or nothing without one
 *	$c	the backward reduction's citation
 *	$T	the true placement, $D the declared one (the step's or the
 *		reduction's)
 *	$d	the reduction's mesh dimension
 *	$G	the step's group, "dp" without a step
 *	$N	the reduction's layer
 *	$Q	the factor found
 *	$S	the step's valid tokens
 *	$R	" (the reports)", or nothing under another framework's
 *		profile than the one whose code they are about: a report on
 *		Megatron's loss path says nothing of torchtitan's (the
 *		verdict is the same; only the words depend on the profile)
 *	$W	the rows and ranks a fact is about
 *	$B	the dtype of the gradient buffer the step ran on
 *	$H	the dtype of the buffer that held the gradient instead
 *	$P	the step of the plan that declared a boundary
 */
#include <stdio.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "model/mesh.h"
#include "model/placement.h"
#include "model/syncplan.h"
#include "symbolic/audit.h"
#include "symbolic/findings.h"

/* The reports the backward reductions model (placement.h). */
static const char *const reduction_cites[] = {
	[REDUCTION_CITE_EXPERT_INPUT] = "torchtitan #1878",
	[REDUCTION_CITE_MOE_BOUNDARY] = "torchtitan #2387 / PR #2416",
	[REDUCTION_CITE_OUTPUT_BOUNDARY] = "torchtitan PR #3412",
	[REDUCTION_CITE_ROUTER_SHARE] = "transformers PR #48205",
	[REDUCTION_CITE_MIXER_INPUT] = "slime PR #1748",
	[REDUCTION_CITE_SCORES_DETACHED] = "NeMo Automodel PR #2995",
};

/*
 * A finding's words.  cause KEY__COUNT: the fact's (the engine decided
 * it from the plan).  op NULL: the step's label or the reduction's; a
 * given op is the one without a step.  dim NULL: the step's group (or
 * the reduction's dimension), "dp" without either.  fix: the one
 * without a fix_step; a fact's fix_step gives its own.
 */
static const struct entry {
	enum finding_kind	 kind;
	enum cfg_key		 cause;
	const char		*op;
	const char		*dim;
	const char		*mechanism;
	const char		*fix;
} catalogue[FACT__COUNT] = {
	[FACT_PARTIAL_DECLARED_REPLICATE] = {
	  FINDING_MISSING_REDUCTION, KEY__COUNT, NULL, "tp",
	  "over tp the gradient is $T (each tp rank holds only its share) "
	  "but is declared $D, so the $L never runs$C",
	  NULL },
	[FACT_PARTIAL_MASKED_REPLICATE] = {
	  FINDING_MISSING_REDUCTION, KEY__COUNT, NULL, "tp",
	  "over tp the gradient is $T (each tp rank holds only its share) "
	  "but is declared $D, so the $L keeps its Replicate part on one "
	  "rank of each sub-group before the sum and the other ranks' "
	  "shares never reach it$C",
	  NULL },
	[FACT_REPLICATE_DECLARED_PARTIAL] = {
	  FINDING_DOUBLE_COUNT, KEY__COUNT, NULL, "tp",
	  "over tp the gradient is $T but is declared $D and reduced over "
	  "tp, which counts its replicated part once per replica",
	  NULL },
	/* torchtitan #1878: the router's score gradient stays Partial. */
	[FACT_EXPERT_INPUT_SKIPPED] = {
	  FINDING_MISSING_REDUCTION, KEY_EXPERT_INPUT_GRAD, NULL, NULL,
	  "the $L is $T over $d but declared $D, so its all-reduce over $d "
	  "($c) is skipped and the router's score gradient stays Partial",
	  "all-reduce the routed expert input gradient over etp in "
	  "backward (sync.expert_input_grad: etp-all-reduce)" },
	[FACT_ROUTER_INPUT_TWICE] = {
	  FINDING_DOUBLE_COUNT, KEY_ROUTER_INPUT_GRAD, NULL, NULL,
	  "in the MoE block of layer $N the router's input gradient is "
	  "all-reduced over tp although it is complete on every tp rank "
	  "already, so it is counted tp times in every gradient computed "
	  "before the block (norms, mixer, embedding, earlier layers) "
	  "(torchtitan de329200b's from_local(Replicate) of the gate's "
	  "input)",
	  "leave the router's input gradient as its placement says "
	  "(sync.router_input_grad: none; torchtitan PR #3386 stops "
	  "wrapping the gate's input in from_local(Replicate))" },
	[FACT_BOUNDARY_SUMMED_WHOLE] = {
	  FINDING_DOUBLE_COUNT, KEY_ROUTER_INPUT_GRAD, NULL, NULL,
	  "at the boundary of the MoE block of layer $N the block input's "
	  "gradient is declared Partial and summed over tp as it is, but "
	  "part of it was all-reduced over tp inside the block already, so "
	  "that part is counted tp times in every gradient computed before "
	  "the block (norms, mixer, embedding, earlier layers) (torchtitan "
	  "de329200b, until 963c20cba, PR #3386)",
	  "keep the input gradients inside the block Partial, so that the "
	  "boundary sums them once (sync.router_input_grad: none and "
	  "sync.expert_input_grad: none; torchtitan PR #3386 stops "
	  "wrapping the gate's input in from_local(Replicate))" },
	/* torchtitan #2387 / PR #2416. */
	[FACT_BOUNDARY_NOT_SUMMED] = {
	  FINDING_MISSING_REDUCTION, KEY_MOE_INPUT_GRAD, NULL, NULL,
	  "at the boundary of the MoE block of layer $N the block input's "
	  "gradient is $T over tp but declared $D, so it is never summed "
	  "over tp: each tp rank keeps its own share, and every gradient "
	  "computed before the block (norms, mixer, embedding, earlier "
	  "layers) misses the other tp ranks' contributions ($c)",
	  "declare the MoE block input's gradient Partial and reduce it "
	  "over tp at the block boundary (sync.moe_input_grad: auto; "
	  "torchtitan PR #2416, to_local(grad_placements=(Partial(),)))" },
	/*
	 * transformers before PR #48205: the experts' hook sums their
	 * input gradient over tp, the ep_router's masked scores are summed
	 * by nothing.
	 */
	[FACT_ROUTER_SHARE_NOT_SUMMED] = {
	  FINDING_MISSING_REDUCTION, KEY_MOE_INPUT_GRAD, NULL, NULL,
	  "in the MoE block of layer $N the experts are spread over tp by "
	  "masking (model.moe.ep_on: tp-mask), so each tp rank's router "
	  "input gradient is its own experts' share of the scores' "
	  "gradient; the block input's gradient is then $T over tp but "
	  "declared $D at the block boundary, and nothing sums the "
	  "router's share: every gradient computed before the block "
	  "(norms, mixer, embedding, earlier layers) misses the other tp "
	  "ranks' shares ($c)",
	  "declare the router's score gradient Partial so that it is "
	  "summed over tp before the router's backward (plan: declare: "
	  "partial, activation: router-scores; transformers PR #48205's "
	  "_AllReduceBackward on the ep_router's scores), or reduce the "
	  "block input's gradient over tp at the boundary "
	  "(sync.moe_input_grad: auto)" },
	/*
	 * NeMo Automodel before PR #2995: GroupedExperts gathered the
	 * routing weights over ep with a plain dist.all_gather, which has
	 * no backward.  The gather's backward is the sum that brings each
	 * token's score gradient back from the experts' owners: missing.
	 */
	[FACT_SCORES_DETACHED] = {
	  FINDING_MISSING_REDUCTION, KEY_PLAN, NULL, NULL,
	  "in the MoE block of layer $N the routing weights reach the "
	  "experts through a gather that has no backward, as $P declares: "
	  "the sum over $d that would bring each token's score gradient "
	  "back from the experts' owners never runs, and nothing of the "
	  "scores' gradient reaches the router, the auxiliary losses' "
	  "included where they enter at the scores: its weight gets no "
	  "gradient from them, and every gradient computed before the "
	  "block (norms, mixer, embedding, earlier layers) misses the "
	  "router's share of the block input's gradient ($c)",
	  "gather the routing weights with an all-gather whose backward "
	  "sums their gradient over the group back to each token's rank, "
	  "as the tokens' own gather does (NeMo Automodel PR #2995's "
	  "_AllGatherConcatVarlenFn), and leave the declare out" },
	/*
	 * kohya-ss/sd-scripts #924 (fixed by PR #989, db845300): fine_tune.py
	 * replaced its DDP-wrapped models by their .module after
	 * accelerator.prepare, so DDP's forward, which readies the reducer
	 * for the backward, never ran: no gradient was ever all-reduced and
	 * each process trained on its own data.  A plan without "preset" is
	 * exactly its steps, and none of them reduces these parameters.
	 */
	[FACT_PLAN_UNREDUCED] = {
	  FINDING_MISSING_REDUCTION, KEY_PLAN, "gradient synchronization",
	  NULL,
	  "no step of $P reduces this gradient over its $G replicas: each "
	  "rank keeps the contributions of its own tokens, and every other "
	  "rank's never reach it (kohya-ss/sd-scripts #924: a script that "
	  "unwrapped its DDP module ran no all-reduce at all)",
	  "add the reduction the framework runs to the plan: an all-reduce "
	  "over $G that selects these parameters (params:, average: as the "
	  "framework averages) or a reduce-scatter of their buffer; or write "
	  "\"preset\" for the profile's own" },
	/*
	 * The step is there, scheduled at no micro-batch: the plan
	 * describes a reduction that never runs, and the step's schedule,
	 * not a missing step, is what to correct.
	 */
	[FACT_PLAN_NEVER_RUNS] = {
	  FINDING_MISSING_REDUCTION, KEY_PLAN, NULL, NULL,
	  "$L runs at no micro-batch, and no other step of the plan reduces "
	  "this gradient over its $G replicas: each rank keeps the "
	  "contributions of its own tokens, and every other rank's never "
	  "reach it",
	  "run the step where the gradients of every micro-batch are "
	  "accumulated: after the last micro-batch's backward "
	  "(micro-batches: last)" },
	/*
	 * The tied weight's copies, the lookup's on the first stage and the
	 * output layer's on the last, are one parameter only if their
	 * gradients are summed before either steps (the preset's
	 * embedding_grad rule); a plan without "preset" that has no such
	 * step leaves each stage its own use's gradient.
	 */
	[FACT_PLAN_UNTIED] = {
	  FINDING_MISSING_REDUCTION, KEY_PLAN, "gradient synchronization",
	  "embedding",
	  "no step of the plan sums the tied weight's two copies, the "
	  "embedding lookup's on the first stage and the output layer's on "
	  "the last: each stage steps with its own use's gradient, and the "
	  "copies of one weight drift apart",
	  "add an all-reduce over embedding of both copies to the plan "
	  "(params: [embedding.weight, output.weight]), or write \"preset\" "
	  "for the profile's own" },
	/*
	 * torchtitan PR #3412: ChunkedCELoss wrapped the chunks' Partial
	 * input gradients as the hidden states' Replicate DTensor.
	 */
	[FACT_OUTPUT_NOT_SUMMED] = {
	  FINDING_MISSING_REDUCTION, KEY_PLAN, NULL, NULL,
	  "the gradient of the output layer's input is $T over tp (each tp "
	  "rank's share of a sum over its vocabulary shard) but $P declares "
	  "it $D, so it is never summed over tp: each tp rank keeps its own "
	  "share, and every gradient computed before the output layer (the "
	  "final norm, the layers, the embedding) misses the other tp "
	  "ranks' contributions ($c)",
	  "declare the output layer input's gradient Partial, or leave the "
	  "declare out, so that it is summed over tp as the output layer's "
	  "backward sums it (torchtitan PR #3412 takes the placement of the "
	  "accumulated gradient from the chunks' gradients)" },
	/*
	 * slime PR #1748: HuggingfaceAttention gathered its input with
	 * gather_from_sequence_parallel_region's default
	 * tensor_parallel_output_grad=True.
	 */
	[FACT_MIXER_SUMMED_WHOLE] = {
	  FINDING_DOUBLE_COUNT, KEY_PLAN, NULL, NULL,
	  "every tp rank computes the whole mixer of layer $N on the "
	  "gathered sequence, so the gradient of its input is $T over tp, "
	  "complete and alike on every rank, but $P declares it $D, so the "
	  "gather's backward sums it over tp as it is and every gradient "
	  "computed before the mixer (its norm, earlier layers, the "
	  "embedding) counts the mixer's part tp times",
	  "declare the duplicated mixer's input gradient Replicate, so that "
	  "the gather's backward only keeps each rank's shard of it (slime "
	  "PR #1748: gather_from_sequence_parallel_region with "
	  "tensor_parallel_output_grad=False)" },
	/* Megatron-LM #844, found by the simulation (steps.c). */
	[FACT_STATES_MIXED] = {
	  FINDING_WRONG_ORDER, KEY__COUNT, NULL, NULL,
	  "the $L combined copies in different states: parts of one were "
	  "already reduced by an earlier collective and parts of the other "
	  "were not, so the owners' values mix reduced and unreduced "
	  "gradients$C",
	  NULL },
	[FACT_WRONG_FACTOR] = {
	  FINDING_WRONG_SCALE, KEY__COUNT, "gradient scaling", NULL,
	  "the used values are $Q times the expected gradient: the right "
	  "contributions with the wrong factor (the data-parallel divisor, "
	  "or the loss's own normalization and scale)",
	  "make the loss factor times the data-parallel divisor 1/N for "
	  "every token (loss.normalize_by, loss.scale, sync.dp_divisor)" },
	/*
	 * A plan: sum over members that held one value already (issue 25:
	 * the sync that a wrapper and the user's own hook both run).
	 */
	[FACT_REPEATED_SUM] = {
	  FINDING_WRONG_SCALE, KEY__COUNT, "gradient scaling", NULL,
	  "the used values are $Q times the expected gradient: the "
	  "operation summed over $G a value its members already held in "
	  "common, so each holds it once per member",
	  "make the loss factor times the data-parallel divisor 1/N for "
	  "every token (loss.normalize_by, loss.scale, sync.dp_divisor)" },
	/* The auxiliary losses' normalization (catalogue class AUX). */
	[FACT_AUX_ABSENT] = {
	  FINDING_WRONG_SCALE, KEY_AUX_SCALE, "auxiliary loss scaling", "dp",
	  "the gradient holds the main loss's part but none of the "
	  "auxiliary losses' (load balancing, z-loss), which reach the "
	  "routers and every parameter before them: their gradient never "
	  "reaches the router's scores (NeMo Automodel #1408)",
	  "scale the auxiliary losses' gradient so that each micro-batch's "
	  "term weighs 1/(micro-batches x dp) after the data-parallel "
	  "reduction (loss.aux_scale)" },
	[FACT_AUX_FACTOR] = {
	  FINDING_WRONG_SCALE, KEY_AUX_SCALE, "auxiliary loss scaling", "dp",
	  "the main loss's part of the gradient is right, but the "
	  "auxiliary losses' part (load balancing, z-loss, through the "
	  "routers) is $Q times the expected one: their backward scale or "
	  "token count is wrong for this mesh$R",
	  "scale the auxiliary losses' gradient so that each micro-batch's "
	  "term weighs 1/(micro-batches x dp) after the data-parallel "
	  "reduction (loss.aux_scale)" },
	/*
	 * A plan's factor on the aux term says more than the preset's
	 * aux_scale: Megatron #7452 finding 10, whose aliased count the
	 * testdata writes as such a step (megatron-7481-aux-count-aliased).
	 */
	[FACT_AUX_TERM_FACTOR] = {
	  FINDING_WRONG_SCALE, KEY__COUNT, NULL, "dp",
	  "the main loss's part of the gradient is right, but the "
	  "auxiliary losses' part (load balancing, z-loss, through the "
	  "routers) is $Q times the expected one, the factor the plan's "
	  "step on the aux term puts on it",
	  NULL },
	/*
	 * Megatron-LM #3672: global_aux_loss divides by the dp group's
	 * token count squared while each rank's scores are its own.
	 */
	[FACT_AUX_GLOBAL_FACTOR] = {
	  FINDING_WRONG_SCALE, KEY__COUNT, "auxiliary loss scaling", "dp",
	  "the main loss's part of the gradient is right, but the "
	  "auxiliary losses' part (through the routers), a load-balancing "
	  "loss with the dp group's counts (loss.aux_type: global-aux-loss), is $Q times the "
	  "expected one: it divides by the group's token count squared "
	  "while each rank's scores are its own$R",
	  "multiply the global load-balancing loss by the data-parallel "
	  "size, a plan step on the aux term (scale: dp, term: aux; "
	  "Megatron-LM PR #3769, proposed)" },
	/* Megatron #3943, #2417, #7452 finding 3 (catalogue class AUX). */
	[FACT_MTP_FACTOR] = {
	  FINDING_WRONG_SCALE, KEY_MTP_SCALE,
	  "multi-token prediction loss scaling", "dp",
	  "the main loss's part is right, but the multi-token prediction "
	  "losses' part is $Q times the expected one: their backward scale "
	  "or token count is wrong$R",
	  "scale the MTP losses' gradient so that layer k's term weighs "
	  "mtp_loss_scaling_factor / depth over the step's valid tokens of "
	  "its rolled mask (loss.mtp_scale)" },
	[FACT_MTP_UNEQUAL_OVER_CP] = {
	  FINDING_WRONG_WEIGHTS, KEY_MTP_SCALE,
	  "multi-token prediction loss normalization", "cp",
	  "the main loss's part is right, but the multi-token prediction "
	  "losses' atoms of one micro-batch weigh differently on its cp "
	  "ranks: each cp rank divides its loss by its own rolled count, "
	  "which differs over the cp ranks (the roll across them leaves the "
	  "one holding a sequence's end k tokens a sample fewer: Megatron "
	  "core 0.14 on, roll_tensor and process_mtp_loss)",
	  "divide each MTP layer's summed loss by the step's rolled count "
	  "(loss.mtp_scale: tokens-global) or, where every cp group counts "
	  "as many, by its micro-batch's count over the cp group, times cp "
	  "(loss.mtp_scale: micro-batches-cp-group)" },
	[FACT_MTP_UNEQUAL] = {
	  FINDING_WRONG_WEIGHTS, KEY_MTP_SCALE,
	  "multi-token prediction loss normalization", "dp",
	  "the main loss's part is right, but the multi-token prediction "
	  "losses' atoms are weighted unequally: their losses are divided "
	  "by token counts other than the step's valid tokens of each "
	  "layer's rolled mask$R",
	  "divide each MTP layer's summed loss by the valid tokens of its "
	  "rolled mask over the whole step (loss.mtp_scale: tokens-global)" },
	/* torchtitan #2972: loss.pp_normalize_by decides it with pp > 1. */
	[FACT_PP_UNEQUAL_WEIGHTS] = {
	  FINDING_WRONG_WEIGHTS, KEY_PP_NORMALIZE_BY, "loss normalization",
	  "dp",
	  "the used values hold every chunk's contribution, but weighted "
	  "unequally for the stated objective: with pp > 1 the loss the "
	  "pipeline back-propagates is normalized otherwise than without it "
	  "(torchtitan #2972)",
	  "divide the loss the pipeline schedule back-propagates as without "
	  "pp (loss.pp_normalize_by: same; torchtitan 786e26f8e, #2972)" },
	[FACT_UNEQUAL_WEIGHTS] = {
	  FINDING_WRONG_WEIGHTS, KEY_NORMALIZE_BY, "loss normalization", "dp",
	  "the used values hold every chunk's contribution (a micro-batch of "
	  "a dp or cp rank), but weighted unequally: the chunks' losses are "
	  "divided by token counts of their own rank, micro-batch or cp "
	  "share, not by the valid tokens of the whole step ($S), so tokens "
	  "in short chunks weigh more",
	  "sum the token losses and divide by the valid tokens of the whole "
	  "step, counted over dp, cp and the micro-batches "
	  "(loss.normalize_by: global; HF #34191, torchtitan #2206)" },
	[FACT_PARTIAL_SUM] = {
	  FINDING_WRONG_GROUP, KEY__COUNT, "gradient synchronization", NULL,
	  "each wrong rank holds a partial sum: contributions computed on "
	  "other ranks never reach it, so the reduction over $G runs over "
	  "too small a group",
	  "reduce this gradient over every rank that computes a part of it; "
	  "explain shows which ranks each one misses" },
	/* Megatron cd4afffa64: expert parameters need a buffer of their own. */
	[FACT_PARTIAL_SUM_DENSE_EXPERT] = {
	  FINDING_WRONG_GROUP, KEY_EXPERT_BUFFER, "gradient synchronization",
	  NULL,
	  "each wrong rank holds a partial sum: contributions computed on "
	  "other ranks never reach it, so the reduction over $G runs over "
	  "too small a group (expert parameters in the dense buffer are "
	  "reduced over dp, but the tp group's tokens are split over the "
	  "etp groups: they need edp)",
	  "give expert parameters their own buffer, reduced over edp, "
	  "whenever etp differs from tp (layout.expert_buffer: "
	  "if-expert-mesh; Megatron cd4afffa64)" },
	[FACT_REPLICAS_DISAGREE] = {
	  FINDING_REPLICA_MISMATCH, KEY__COUNT, "gradient synchronization",
	  "dp",
	  "replicas that must hold the same gradient disagree",
	  "run gradaudit explain on this parameter to see which collective "
	  "separates them" },
	[FACT_WRONG_RANKS] = {
	  FINDING_WRONG_GROUP, KEY__COUNT, "gradient synchronization", "dp",
	  "the used values combine contributions of the wrong set of ranks",
	  "run gradaudit explain on this parameter to see which collective "
	  "gathers the wrong ranks" },
	/*
	 * pytorch #176076 (model/stale.h), torchtitan v0.2.2's qwen3
	 * (torchtitan #2817): not a gradient value, the rows themselves.
	 */
	[FACT_STALE_ROWS] = {
	  FINDING_STALE_ROWS, KEY_TIED_FSDP_GROUPS, "optimizer update", "dp",
	  "the tied weight is in two fully_shard groups (the embedding's and "
	  "the output layer's) and re-tied after sharding, and its rows do "
	  "not split evenly over the shard group: for $W, a short shard, "
	  "the output group's lazy init pads a copy of its own and moves the "
	  "parameter onto it (FSDP2's reset_sharded_param), so the optimizer "
	  "updates that copy while the embedding's group keeps all-gathering "
	  "the first: these rows of the embedding lookup never change, though "
	  "every gradient is right (pytorch #176076)",
	  "put both uses of the tied weight in one fully_shard group, "
	  "fully_shard([tok_embeddings, norm, output]) "
	  "(layout.tied_fsdp_groups: one; torchtitan 29e27d038, PR #2522), "
	  "or make its rows a multiple of the shard group" },
	/*
	 * NeMo PR #6958 (and #6340 before it): the fp32 main_grad of the
	 * embeddings and the bf16 param.grad the backward filled.
	 */
	[FACT_BUFFER_NOT_HELD] = {
	  FINDING_MISSING_REDUCTION, KEY__COUNT, NULL, NULL,
	  "the $L ran on the $B gradient buffer, but this gradient was in "
	  "its $H buffer and the $B one held zeros, so the reduction over "
	  "$G never reached it: each rank kept its own part (NeMo PR #6958: "
	  "the tied embedding's all-reduce over the first and last stage ran "
	  "on its fp32 main_grad while the backward had left the gradient in "
	  "bf16)",
	  "run the reduction on the buffer that holds the gradient, or "
	  "accumulate the gradient into the $B buffer before it runs (NeMo "
	  "PR #6958 adds each fp32-optimized parameter's gradient into its "
	  "fp32 main_grad in a post-backward hook)" },
	[FACT_BUFFER_SCALE_NOT_HELD] = {
	  FINDING_WRONG_SCALE, KEY__COUNT, NULL, NULL,
	  "the $L ran on the $B gradient buffer, but this gradient was in "
	  "its $H buffer and the $B one held zeros, so its factor never "
	  "reached it",
	  "run the scale on the buffer that holds the gradient, or "
	  "accumulate the gradient into the $B buffer before it runs" },
	/*
	 * A step of plan: run at other micro-batches than after the last
	 * one (issue 25): DDP's no_sync window (build-nanogpt PR #30), grads
	 * dropped between micro-batches (NeMo Automodel PR #3530).
	 */
	[FACT_SCHEDULE_UNEQUAL] = {
	  FINDING_WRONG_WEIGHTS, KEY__COUNT, NULL, "micro-batch",
	  "the micro-batches weigh unequally in the used values: the step "
	  "runs $M, on the gradients accumulated so far, so it meets the "
	  "micro-batches before it and not those after it (a reduction or a "
	  "scale applied more than once to the first, a reset dropping them, "
	  "a reduction the last ones never reach)",
	  "run the step where the gradients of every micro-batch are "
	  "accumulated: once, after the last micro-batch's backward "
	  "(micro-batches: last), and reset only before the first" },
};

/*
 * The sync plan's citations (syncplan.h): the report each rule, or a
 * variant of it, models.
 */
static const char *const cite_texts[SYNC_CITE__COUNT] = {
	[SYNC_CITE_NONE] = NULL,
	[SYNC_CITE_ROUTER_GRAD] = "torchtitan #2416",
	[SYNC_CITE_TIED_ORDER] = "Megatron-LM #844",
	[SYNC_CITE_DDP_AVERAGE] = "torchtitan #2318",
	[SYNC_CITE_ONE_MEMBER_REPLICATE] = "verl #7493",
	[SYNC_CITE_ONE_MEMBER_FACTOR] = "pytorch PR #167178",
	[SYNC_CITE_RS_DIVIDE_FACTOR] = "pytorch #155903",
	[SYNC_CITE_SP_PARAM_NONE] = "NeMo PR #7184",
	[SYNC_CITE_SP_PARAM_STANDALONE] = "Megatron #1446",
	[SYNC_CITE_TIED_BUCKET_START] = "Megatron ba8f2de, fixed by afb755f548",
	[SYNC_CITE_TIED_FLAT_UNITS] = "Megatron PR #6500",
	[SYNC_CITE_OUT_NORM] = "Megatron-LM #7452",
};

/*
 * What to change when a step of the plan goes wrong, one sentence each,
 * naming the setting (and the change upstream that fixed it).
 */
static const char *const fix_texts[SYNC_FIX__COUNT] = {
	[SYNC_FIX_NONE] = NULL,
	[SYNC_FIX_ROUTER_GRAD] =
	  "reduce the router weight gradient over tp exactly where it is "
	  "Partial (sync.router_grad: auto, as torchtitan does since #2416)",
	[SYNC_FIX_EMBEDDING_BEFORE_DP] =
	  "all-reduce the tied embedding gradient before the data-parallel "
	  "reduce-scatter, or give it a bucket of its own "
	  "(sync.embedding_grad: before-dp or separate-bucket)",
	[SYNC_FIX_EXPERT_GRAD_DIVISOR] =
	  "scale every gradient, expert buffers included, by 1/dp "
	  "(sync.expert_grad_divisor: dp; torchtitan #1551, pytorch #160285)",
	[SYNC_FIX_SP_PARAM_GRAD] =
	  "all-reduce the gradients of the norm weights and shared-expert "
	  "gates over tp when sequence parallelism is on "
	  "(sync.sp_param_grad: tp-all-reduce)",
	[SYNC_FIX_QK_NORM_GRAD] =
	  "all-reduce the qk-norm weight gradients over tp whether or not "
	  "sequence parallelism is on (sync.qk_norm_grad: tp-all-reduce)",
	[SYNC_FIX_KV_GRAD] =
	  "all-reduce the gradients of the key/value weights that every tp "
	  "rank holds over tp (sync.kv_grad: tp-all-reduce)",
	[SYNC_FIX_OUT_NORM_GRAD] =
	  "all-reduce the out-norm weight gradients over tp whether or not "
	  "sequence parallelism is on, as Megatron does for q_layernorm and "
	  "k_layernorm (sync.out_norm_grad: tp-all-reduce)",
	[SYNC_FIX_EMBEDDING_AFTER_DP] =
	  "all-reduce the tied embedding gradient before the data-parallel "
	  "reduce-scatter, or give it a bucket of its own, or gather the "
	  "full gradient before the all-reduce (sync.embedding_grad: "
	  "before-dp, separate-bucket or full-after-dp)",
	[SYNC_FIX_FSDP_DIVISOR] =
	  "divide by the data-parallel size (FSDP2's default average), or "
	  "by nothing when the loss is divided by the valid tokens of the "
	  "whole step (sync.dp_divisor; torchtitan PR #2206)",
	[SYNC_FIX_FSDP_ONE_MEMBER_FACTOR] =
	  "apply the gradient divide factor when the reduce-scatter group "
	  "has one member (pytorch PR #167178; sync.fsdp_one_member: full)",
	[SYNC_FIX_FSDP_ONE_MEMBER_REPLICATE] =
	  "all-reduce over the replicate dimension when the shard group has "
	  "one member, or use a 1-D mesh (verl PR #7494; "
	  "sync.fsdp_one_member: full)",
	[SYNC_FIX_FSDP_DIVIDE_FACTOR] =
	  "let the custom divide factor divide the whole reduction and sum "
	  "over the replicas (set_gradient_divide_factor, pytorch PR #155915; "
	  "sync.fsdp_divide_factor: gradient)",
	[SYNC_FIX_REPLICATE_ONLY] =
	  "sum over the replicas when the loss is divided by the valid "
	  "tokens of the whole step: replicate with the gradient division "
	  "off (sync.replicate_only: fsdp; torchtitan e1847f439, PR #2458)",
	[SYNC_FIX_DP_DIVISOR] =
	  "divide the gradients by the size of the group they are reduced "
	  "over, dp*cp, or by nothing when the loss is divided by the valid "
	  "tokens of the whole step (sync.dp_divisor; Megatron 3bdcbbbe5d "
	  "for #906)",
	[SYNC_FIX_DP_GROUP] =
	  "reduce the data-parallel gradients over dp x cp, every rank that "
	  "holds the same weights, not over dp alone (sync.dp_group: dp-cp; "
	  "VeOmni #1115)",
	[SYNC_FIX_PER_TOKEN_AVG] =
	  "with a per-token loss, sum the gradients over their group "
	  "instead of averaging them: drop --ddp-average-in-collective "
	  "(training.average_in_collective: false), which Megatron requires "
	  "from 5946e24b37, core_v0.12.0",
	[SYNC_FIX_EXPERT_AVG_SCALE] =
	  "pre-scale the expert buffers by edp/dp before the AVG over edp, "
	  "so that the net factor is 1/dp for any etp "
	  "(sync.expert_avg_scale: edp-over-dp; Megatron 4f8974a400)",
	[SYNC_FIX_TIED_BUCKET_START] =
	  "start the tied weight's own bucket at the padded end of the "
	  "bucket before it, on every stage (layout.tied_bucket_start: "
	  "padded)",
	[SYNC_FIX_TIED_FLAT_UNITS] =
	  "gather the tied weight's full reduced gradient before the "
	  "all-reduce over the embedding group and keep the owned slice, or "
	  "all-reduce it before the data-parallel step "
	  "(sync.embedding_grad: full-after-dp or before-dp)",
	[SYNC_FIX_EXPERT_GTP_DIVISOR] =
	  "prescale the expert buffers by 1/(dp*cp/egtp), so that the mean "
	  "over egtp completes 1/(dp*cp) as the dense buffers' over gtp does "
	  "(sync.expert_gtp_divisor: egtp; Megatron-LM PR #7165)",
	[SYNC_FIX_EXPERT_TP_DIVISOR] =
	  "divide the expert gradients by tp only where every tp rank "
	  "dispatches the same tokens (sync.expert_tp_divisor: none unless "
	  "model.moe.ep_on: tp-replicated)",
	/* No setting decides a step the user wrote: the step is the fix. */
	[SYNC_FIX_PLAN] =
	  "correct or remove the step of plan: that the operation names "
	  "(its factor, group, average or selection); no sync: setting "
	  "decides it",
};

/*
 * What changing a setting does, for the prose of a fix whose own sentence
 * (the step's) does not name it (fixtext.c); value NULL: any value, which
 * stands for "%s" in the text.
 */
static const struct {
	enum cfg_key	 key;
	const char	*value;
	const char	*text;
} setting_texts[] = {
	{ KEY_NORMALIZE_BY, "global", "divide the summed token losses by "
	  "the valid tokens of the whole step, counted over dp, cp and the "
	  "micro-batches (loss.normalize_by: global; HF #34191, torchtitan "
	  "#2206)" },
	{ KEY_NORMALIZE_BY, NULL, "divide each rank's summed loss by the "
	  "token count that matches the stated objective "
	  "(loss.normalize_by: %s)" },
	{ KEY_SCALE, NULL, "multiply the loss by the size its gradients are "
	  "divided by in the data-parallel reduction, so that the two cancel "
	  "(loss.scale: %s)" },
	{ KEY_DP_DIVISOR, "none", "do not divide the gradients in the "
	  "data-parallel reduction, as the loss is divided by the valid "
	  "tokens of the whole step (sync.dp_divisor: none; torchtitan PR "
	  "#2206)" },
	{ KEY_DP_DIVISOR, NULL, "divide the gradients in the data-parallel "
	  "reduction by the size the loss's factor assumes "
	  "(sync.dp_divisor: %s; Megatron 3bdcbbbe5d for #906)" },
	{ KEY_EXPERT_GRAD_DIVISOR, NULL, "scale every gradient, expert "
	  "buffers included, by the dense divisor (sync.expert_grad_divisor: "
	  "%s; torchtitan #1551, pytorch #160285)" },
	{ KEY_EXPERT_TP_DIVISOR, "tp", "divide the expert gradients by tp "
	  "as well, for the tp copies of every token their experts ran "
	  "(sync.expert_tp_divisor: tp; NeMo Automodel PR #2995's "
	  "expert_tp_replication_factor)" },
	{ KEY_EXPERT_TP_DIVISOR, "none", "do not divide the expert "
	  "gradients by tp (sync.expert_tp_divisor: none)" },
	{ KEY_EXPERT_AVG_SCALE, NULL, "pre-scale the expert buffers so that "
	  "the net factor after the AVG over edp is the dense one "
	  "(sync.expert_avg_scale: %s; Megatron 4f8974a400)" },
	{ KEY_AVERAGE_IN_COLLECTIVE, "true", "divide by the data-parallel "
	  "size inside the collective (training.average_in_collective: "
	  "true)" },
	{ KEY_AVERAGE_IN_COLLECTIVE, "false", "divide by the data-parallel "
	  "size before a summing collective (training.average_in_collective: "
	  "false)" },
	{ KEY_FSDP_ONE_MEMBER, NULL, "apply the divide factor and reduce "
	  "over the replicas when a reduce-scatter group has one member "
	  "(sync.fsdp_one_member: %s; pytorch PR #167178, verl PR #7494)" },
	{ KEY_FSDP_DIVIDE_FACTOR, NULL, "let FSDP2's custom divide factor "
	  "divide the whole reduction, the replicas summed "
	  "(sync.fsdp_divide_factor: %s; pytorch PR #155915)" },
	{ KEY_REPLICATE_ONLY, "fsdp", "sum over the replicas when the loss is "
	  "divided by the valid tokens of the whole step: replicate with the "
	  "gradient division off (sync.replicate_only: fsdp; torchtitan "
	  "e1847f439, PR #2458)" },
	{ KEY_PP_NORMALIZE_BY, "same", "divide the loss the pipeline "
	  "schedule back-propagates as without pp, by the valid tokens of "
	  "the whole step (loss.pp_normalize_by: same; torchtitan "
	  "786e26f8e, #2972)" },
	{ KEY_DP_GROUP, NULL, "reduce the data-parallel gradients over every "
	  "rank that holds the same weights, the cp ranks included "
	  "(sync.dp_group: %s; VeOmni #1115)" },
	{ KEY_EXPERT_BUFFER, NULL, "give expert parameters their own buffer, "
	  "reduced over edp, whenever the expert mesh differs "
	  "(layout.expert_buffer: %s; Megatron cd4afffa64)" },
	{ KEY_AUX_SCALE, NULL, "scale the auxiliary losses' gradient so that "
	  "each micro-batch's term weighs 1/(micro-batches x dp) after the "
	  "data-parallel reduction (loss.aux_scale: %s)" },
	{ KEY_MTP_SCALE, NULL, "scale the MTP losses' gradient so that layer "
	  "k's term weighs mtp_loss_scaling_factor / depth over the step's "
	  "valid tokens of its rolled mask (loss.mtp_scale: %s)" },
	{ KEY_OBJECTIVE, NULL, "state what the step means to minimize "
	  "(loss.objective: %s)" },
	{ KEY_SP_PARAM_GRAD, "tp-all-reduce", "all-reduce the gradients of "
	  "the norm weights and shared-expert gates over tp when sequence "
	  "parallelism is on (sync.sp_param_grad: tp-all-reduce)" },
	{ KEY_ROUTER_GRAD, "auto", "reduce the router weight gradient over tp "
	  "exactly where it is Partial (sync.router_grad: auto, as torchtitan "
	  "does since #2416)" },
	{ KEY_EMBEDDING_GRAD, NULL, "all-reduce the tied embedding gradient "
	  "where its two copies are in one state (sync.embedding_grad: %s; "
	  "Megatron-LM #844)" },
	{ KEY_QK_NORM_GRAD, "tp-all-reduce", "all-reduce the qk-norm weight "
	  "gradients over tp (sync.qk_norm_grad: tp-all-reduce)" },
	{ KEY_KV_GRAD, "tp-all-reduce", "all-reduce the replicated key/value "
	  "weight gradients over tp (sync.kv_grad: tp-all-reduce)" },
	{ KEY_OUT_NORM_GRAD, "tp-all-reduce", "all-reduce the out-norm "
	  "weight gradients over tp (sync.out_norm_grad: tp-all-reduce)" },
};

/* The reports a mechanism's $R names, and the framework of their code. */
static const struct reports {
	const char	*text;
	const char	*framework;
} reports[FACT__COUNT] = {
	[FACT_AUX_FACTOR] = { "Megatron-LM PR #2237, PR #5047",
	  "megatron-core" },
	[FACT_AUX_GLOBAL_FACTOR] = { "Megatron-LM #3672", "megatron-core" },
	[FACT_MTP_FACTOR] = { "Megatron-LM #2417 / PR #3159, #3943 / PR #3959",
	  "megatron-core" },
	[FACT_MTP_UNEQUAL] = { "Megatron-LM #2417 / PR #3159, #7452",
	  "megatron-core" },
};

/* The longest message, as the diagnosis formatted them before. */
#define MESSAGE_MAX	1024

static void
put(char *buf, size_t *n, const char *s)
{
	size_t	len = strlen(s);

	if (*n + 1 >= MESSAGE_MAX)
		return;
	if (len > MESSAGE_MAX - 1 - *n)
		len = MESSAGE_MAX - 1 - *n;
	memcpy(buf + *n, s, len);
	*n += len;
	buf[*n] = '\0';
}

static const char *
step_group(const struct fact_args *f)
{
	return f->group != NULL ? f->group : f->step != NULL ?
	    mesh_group_name(f->step->group) : "dp";
}

/* The mechanism's template with the fact's fields filled in. */
static const char *
fill(const char *t, const struct reports *rep, const struct fact_args *f,
    struct arena *arena)
{
	const struct backward_reduction *r = f->reduction;
	struct placement truth = r != NULL ? r->truth : f->step != NULL ?
			    f->step->truth : (struct placement){ 0 };
	struct placement declared = r != NULL ? r->declared :
			    f->step != NULL ? f->step->declared :
			    (struct placement){ 0 };
	char	 buf[MESSAGE_MAX], field[96];
	size_t	 n = 0;
	const char *cite = f->step != NULL ? sync_cite_text(f->step->cite) :
			    NULL;

	buf[0] = '\0';
	for (; *t != '\0'; t++) {
		if (*t != '$') {
			field[0] = *t;
			field[1] = '\0';
			put(buf, &n, field);
			continue;
		}
		switch (*++t) {
		case 'L':
			put(buf, &n, r != NULL ? r->what : f->step->label);
			break;
		case 'C':
			if (cite != NULL) {
				put(buf, &n, " (");
				put(buf, &n, cite);
				put(buf, &n, ")");
			}
			break;
		case 'c':
			put(buf, &n, reduction_cites[r->cite]);
			break;
		case 'T':
			put(buf, &n, pl_format(f->mesh, truth, field,
			    sizeof field));
			break;
		case 'D':
			put(buf, &n, pl_format(f->mesh, declared, field,
			    sizeof field));
			break;
		case 'd':
			put(buf, &n, r->dim);
			break;
		case 'G':
			put(buf, &n, step_group(f));
			break;
		case 'N':
			snprintf(field, sizeof field, "%d", r->layer);
			put(buf, &n, field);
			break;
		case 'Q':
			put(buf, &n, f->factor);
			break;
		case 'S':
			snprintf(field, sizeof field, "%lld", f->total);
			put(buf, &n, field);
			break;
		case 'R':
			if (rep->text == NULL || (f->framework != NULL &&
			    strcmp(f->framework, rep->framework) != 0))
				break;
			put(buf, &n, " (");
			put(buf, &n, rep->text);
			put(buf, &n, ")");
			break;
		case 'W':
			put(buf, &n, f->rows);
			break;
		case 'P':
			put(buf, &n, f->declared_by != NULL ? f->declared_by :
			    "the plan");
			break;
		case 'B':
			put(buf, &n, f->step != NULL && f->step->dtype >= 0 ?
			    cfg_plan_dtype_words[f->step->dtype] : "");
			break;
		case 'H':
			put(buf, &n, f->held != NULL ? f->held : "");
			break;
		case 'M':
			put(buf, &n, f->schedule);
			break;
		}
	}
	return arena_strdup(arena, buf);
}

void
finding_tell(enum fact fact, const struct fact_args *f, struct arena *arena,
    struct finding_words *w)
{
	const struct entry *e = &catalogue[fact];

	w->kind = e->kind;
	w->cause = e->cause != KEY__COUNT ? e->cause : f->cause;
	if (f->reduction != NULL)
		w->op = f->reduction->what;
	else
		/*
		 * A plan: step's label is the sync plan's, which is freed
		 * with its context before the report is written.
		 */
		w->op = f->step != NULL ? f->step->plan_item >= 0 ?
		    arena_strdup(arena, f->step->label) : f->step->label :
		    f->op != NULL ? f->op : e->op;
	if (e->dim != NULL)
		w->dim = e->dim;
	else
		w->dim = f->reduction != NULL ? f->reduction->dim :
		    step_group(f);
	w->message = fill(e->mechanism, &reports[fact], f, arena);
	w->fix = f->fix_step != NULL ? sync_fix_text(f->fix_step->fix) :
	    e->fix;
	if (w->fix != NULL && strchr(w->fix, '$') != NULL)
		w->fix = fill(w->fix, &reports[fact], f, arena);
}

const char *
sync_cite_text(enum sync_cite c)
{
	return cite_texts[c];
}

const char *
sync_fix_text(enum sync_fix x)
{
	return fix_texts[x];
}

bool
sync_fix_names(enum sync_fix x, enum cfg_key k)
{
	return fix_texts[x] != NULL &&
	    strstr(fix_texts[x], cfg_key_path(k)) != NULL;
}

const char *
setting_fix_text(enum cfg_key k, const char *value)
{
	size_t	i;

	for (i = 0; i < sizeof setting_texts / sizeof setting_texts[0]; i++)
		if (setting_texts[i].key == k && (setting_texts[i].value ==
		    NULL || strcmp(setting_texts[i].value, value) == 0))
			return setting_texts[i].text;
	return NULL;
}

/* ---- the gradient norm's findings --------------------------------------- */

/*
 * The settings of the grad_norm: section: the correct value of each, and
 * what a finding says to change when another value makes a norm wrong.
 */
struct gn_setting {
	enum cfg_key	 key;
	int		 good;
	unsigned	 kinds;	/* the findings it can cause, as bits */
	const char	*dim;
	const char	*fix;
};

#define OVER	(1u << FINDING_OVER_COUNT)
#define UNDER	(1u << FINDING_UNDER_COUNT)
#define DRIFT	(1u << FINDING_INCONSISTENT_CLIP)

static int	setting_value(const struct config *, enum cfg_key);

static const struct gn_setting settings[] = {
	{ KEY_TP_DUPLICATES, GN_TP_DUP_ONCE, OVER, "tp",
	  "count parameters replicated over tp on tp rank 0 only "
	  "(grad_norm.tp_duplicates: once), as Megatron's "
	  "param_is_not_tensor_parallel_duplicate does; do not mark "
	  "replicated weights tensor-parallel (TransformerEngine PR #715, "
	  "NeMo-RL PR #3788)" },
	{ KEY_TIED_COPIES, GN_TIED_ONCE, OVER, "pp",
	  "count a tied weight once, on the first stage "
	  "(grad_norm.tied_copies: once): keep the `shared` attribute the "
	  "duplicate filter reads (Megatron-LM PR #7227)" },
	{ KEY_EXPERT_FILTER, GN_EXPERT_FILTER_EXPERT_TP, UNDER, "tp",
	  "filter expert parameters by their expert tensor parallel rank, "
	  "not the dense tp rank (grad_norm.expert_filter: expert-tp; "
	  "Megatron-LM PR #5916)" },
	{ KEY_SINK_FILTER, GN_SINK_FILTER_TP_SHARDED, UNDER, "tp",
	  "mark the attention sinks tensor parallel, so that every tp rank "
	  "counts its own heads' (grad_norm.sink_filter: tp-sharded; "
	  "Megatron-LM PR #7530)" },
	{ KEY_EXPERT_NORM, GN_EXPERT_SUM, UNDER | DRIFT, "ep",
	  "sum the experts' norm squared over ep and add it to the dense one "
	  "(grad_norm.expert_norm: sum; DeepSpeed PR #8478, Colossal-AI "
	  "#2192, DeepSpeed PR #8613)" },
	{ KEY_SHARD_GROUP, GN_SHARD_IF_SHARDED, OVER | UNDER | DRIFT, "dp",
	  "all-reduce the norm squared over the group that shards the "
	  "gradients, and over no replica group (grad_norm.shard_group: "
	  "if-sharded; SpecForge PR #663, VeOmni PR #862)" },
	{ KEY_PP_REDUCE, GN_PP_ALL_REDUCE, UNDER | DRIFT, "pp",
	  "all-reduce the norm squared over the pipeline stages "
	  "(grad_norm.pp_reduce: all-reduce; torchtitan PR #649)" },
	{ KEY_CLIP_RANKS, GN_CLIP_ALL, DRIFT, "tp",
	  "compute the norm and clip on every rank (grad_norm.clip_ranks: "
	  "all; BLOOM-176B)" },
};

#define NSETTINGS	(sizeof settings / sizeof settings[0])
_Static_assert(NSETTINGS <= NORM_SETTINGS_MAX, "NORM_SETTINGS_MAX");

static int
setting_value(const struct config *c, enum cfg_key k)
{
	switch (k) {
	case KEY_TP_DUPLICATES:
		return c->grad_norm.tp_duplicates;
	case KEY_TIED_COPIES:
		return c->grad_norm.tied_copies;
	case KEY_EXPERT_FILTER:
		return c->grad_norm.expert_filter;
	case KEY_SINK_FILTER:
		return c->grad_norm.sink_filter;
	case KEY_EXPERT_NORM:
		return c->grad_norm.expert_norm;
	case KEY_SHARD_GROUP:
		return c->grad_norm.shard_group;
	case KEY_PP_REDUCE:
		return c->grad_norm.pp_reduce;
	case KEY_CLIP_RANKS:
		return c->grad_norm.clip_ranks;
	default:
		fatalx("gradnorm: %s is not a grad_norm setting",
		    cfg_key_path(k));
	}
}

size_t
norm_settings_wrong(const struct config *c, enum cfg_key *keys, int *good)
{
	size_t	i, n = 0;

	for (i = 0; i < NSETTINGS; i++)
		if (setting_value(c, settings[i].key) != settings[i].good) {
			keys[n] = settings[i].key;
			good[n++] = settings[i].good;
		}
	return n;
}

/*
 * The settings that differ from the correct norm and changed what the
 * audit simulated, for a message; the first is the finding's cause
 * (KEY__COUNT: none).
 */
enum cfg_key
norm_wrong_settings(const struct config *c, const struct keyset *in_effect,
    enum finding_kind kind, char *names, size_t nlen, char *fixes,
    size_t flen, const char **dim)
{
	enum cfg_key cause = KEY__COUNT;
	size_t	i;
	char	v[64];

	names[0] = fixes[0] = '\0';
	*dim = "dp";
	for (i = 0; i < NSETTINGS; i++) {
		if (setting_value(c, settings[i].key) == settings[i].good ||
		    !keyset_has(in_effect, settings[i].key) ||
		    !(settings[i].kinds & (1u << kind)))
			continue;
		cfg_key_value(c, settings[i].key, v, sizeof v);
		if (names[0] == '\0') {
			*dim = settings[i].dim;
			cause = settings[i].key;
		}
		snprintf(names + strlen(names), nlen - strlen(names), "%s%s: %s",
		    names[0] ? ", " : "", cfg_key_path(settings[i].key), v);
		snprintf(fixes + strlen(fixes), flen - strlen(fixes), "%s%s",
		    fixes[0] ? "; " : "", settings[i].fix);
	}
	return cause;
}

void
norm_miscount_tell(struct arena *arena, size_t n, bool over,
    const char *names, const char *fixes, const char **message,
    const char **fix)
{
	char	 buf[2048];

	snprintf(buf, sizeof buf, "the gradient norm of these ranks counts "
	    "the elements of %zu parameter%s %s%s%s%s, so clipping scales "
	    "the update by a wrong factor", n, n == 1 ? "" : "s", over ?
	    "more than once" : "less than once (some not at all)", names[0] ?
	    " (" : "", names, names[0] ? ")" : "");
	*message = arena_strdup(arena, buf);
	*fix = fixes[0] ? arena_strdup(arena, fixes) : "count every element "
	    "of the model once in the norm";
}

void
norm_drift_tell(struct arena *arena, size_t norms, bool idle,
    const char *names, const char *fixes, const char **message,
    const char **fix)
{
	char	 buf[2048];

	snprintf(buf, sizeof buf, "the ranks clip by %zu different gradient "
	    "norms%s: replicas that must stay equal scale their updates by "
	    "different factors and drift apart%s%s%s", norms, idle ?
	    " (these ranks differ from rank 0; a rank that never clips "
	    "counts as a norm of 0)" : " (these ranks differ from rank 0)",
	    names[0] ? " (" : "", names, names[0] ? ")" : "");
	*message = arena_strdup(arena, buf);
	*fix = fixes[0] ? arena_strdup(arena, fixes) : "all-reduce the norm "
	    "squared over every group whose ranks clip the same update";
}

/* ---- findings of a measured step -------------------------------------- */

/*
 * A measured step's findings (compare.c): what each kind means when it
 * is read off what the ranks held, with no setting known to cause it, in
 * the order compare reports them.
 */
static const struct measured_text measured[] = {
	{ FINDING_MISSING_REDUCTION,
	  "contributions of some ranks or micro-batches never reach the value",
	  "find the collective that should add the missing contributions "
	  "(the atoms the reference holds and the rank does not): it is "
	  "skipped, runs over too small a group, or runs before they exist" },
	{ FINDING_WRONG_ORDER,
	  "some contributions are missing and others weigh more than in the "
	  "reference: a collective combined values in different states "
	  "(one already reduced, one not)",
	  "run the collectives in an order where both sides of each hold "
	  "the same kind of value (Megatron-LM #844: the tied embedding "
	  "all-reduce before the data-parallel reduce-scatter)" },
	{ FINDING_WRONG_GROUP,
	  "the value holds contributions the reference does not",
	  "a collective runs over the wrong group of ranks" },
	{ FINDING_WRONG_WEIGHTS,
	  "every contribution is there, but weighted unequally against the "
	  "reference",
	  "normalize the loss as the reference does (for a per-token mean: "
	  "the sum of the token losses over the valid tokens of the whole "
	  "step, HF #34191)" },
	{ FINDING_WRONG_SCALE,
	  "every contribution is there, scaled by one wrong factor",
	  "a divisor is missing, doubled or of the wrong group (the loss "
	  "normalization, the average over dp), or a collective runs twice "
	  "or sums a value that was already replicated" },
	{ FINDING_REPLICA_MISMATCH,
	  "ranks that hold the same elements hold different values",
	  "a rank misses a collective its replicas run" },
	{ FINDING_WRONG_VALUE,
	  "the value differs from the reference and no combination of the "
	  "recorded contributions explains it",
	  "trace the step in float32 or float64 with every backward inside "
	  "trace.micro_batch(), and check what touches the gradient outside "
	  "the recorded contributions" },
	{ FINDING_INCONSISTENT_CLIP,
	  "the ranks clipped by different gradient norms",
	  "every rank must clip by the norm of the whole model's gradient" },
};

/* When a config says what the traced job should do, the fault is theirs. */
const struct measured_text measured_against_config = {
	FINDING__COUNT,
	"the traced job does not do what the config says",
	"correct the config (or the framework profile it names) where it "
	"models this parameter's collectives, or the code if the config says "
	"what it should do"
};

const struct measured_text *
measured_texts(size_t *n)
{
	*n = sizeof measured / sizeof measured[0];
	return measured;
}
