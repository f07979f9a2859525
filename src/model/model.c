/*
 * Building the model description of SPEC section 4 from a config: the
 * parameter instances in registration order and one op program per
 * pipeline stage.  Nothing here computes anything; placement.c and
 * kernels.c (through numeric.c) interpret what is built here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "model/lossnorm.h"
#include "model/mesh.h"
#include "model/model.h"

struct builder {
	struct model	*model;
	int		 cap_params;
	int		 cap_logical;
	/* The program being built for one stage, and every stage's room. */
	struct stage_program *program;
	int		*cap_ops;
	int		 stage, chunk;	/* where parameters go */
};

static int
add_param(struct builder *b, const char *name, int stage, int layer,
    enum param_role role, int ndims, int64_t d0, int64_t d1, int64_t d2)
{
	struct model	*m = b->model;
	struct param	*p;

	if (m->nparams == b->cap_params) {
		b->cap_params = b->cap_params ? 2 * b->cap_params : 32;
		m->params = xreallocarray(m->params, b->cap_params,
		    sizeof *m->params);
	}
	p = &m->params[m->nparams];
	memset(p, 0, sizeof *p);
	p->name = xstrdup(name);
	p->index = m->nparams;
	p->stage = stage;
	p->chunk = b->chunk;
	p->layer = layer;
	p->role = role;
	p->ndims = ndims;
	p->shape[0] = d0;
	p->shape[1] = d1;
	p->shape[2] = d2;
	p->logical = -1;
	p->boundary = -1;
	return m->nparams++;
}

static int
add_logical(struct builder *b, int instance)
{
	struct model		*m = b->model;
	struct logical_param	*l;

	if (m->nlogical == b->cap_logical) {
		b->cap_logical = b->cap_logical ? 2 * b->cap_logical : 32;
		m->logical = xreallocarray(m->logical, b->cap_logical,
		    sizeof *m->logical);
	}
	l = &m->logical[m->nlogical];
	l->name = m->params[instance].name;
	l->tied_with = NULL;
	l->instance[0] = instance;
	l->instance[1] = -1;
	l->ninstances = 1;
	m->params[instance].logical = m->nlogical;
	return m->nlogical++;
}

/*
 * The local (one rank's) shape follows from the role: which dimension is
 * split over tp, or over ep and etp for experts.
 */
static void
set_local_shape(const struct mesh *mesh, struct param *p)
{
	int	i;

	for (i = 0; i < 3; i++)
		p->local_shape[i] = p->shape[i];
	switch (p->role) {
	case ROLE_EMBEDDING:
	case ROLE_OUTPUT:
	case ROLE_COLUMN:
	case ROLE_SINK:
		p->local_shape[0] /= mesh->tp;
		break;
	case ROLE_ROW:
		p->local_shape[1] /= mesh->tp;
		break;
	case ROLE_EXPERT_FC1:
		p->local_shape[0] /= mesh->ep;
		p->local_shape[1] /= mesh->etp;
		p->expert = true;
		break;
	case ROLE_EXPERT_FC2:
		p->local_shape[0] /= mesh->ep;
		p->local_shape[2] /= mesh->etp;
		p->expert = true;
		break;
	case ROLE_NORM:
	case ROLE_HEAD_NORM:
	case ROLE_OUT_NORM:
	case ROLE_KV:
	case ROLE_ROUTER:
	case ROLE_GATE:
	case ROLE_DUPLICATED:
		break;
	}
	p->elems = p->local_elems = 1;
	for (i = 0; i < p->ndims; i++) {
		p->elems *= p->shape[i];
		p->local_elems *= p->local_shape[i];
	}
}

static int
emit(struct builder *b, enum op_kind kind, int param, int in0, int in1,
    const char *label)
{
	struct stage_program	*sp = b->program;
	struct op		*op;
	int			*cap = &b->cap_ops[b->stage];

	if (sp->nops == *cap) {
		*cap = *cap ? 2 * *cap : 64;
		sp->ops = xreallocarray(sp->ops, *cap, sizeof *sp->ops);
	}
	op = &sp->ops[sp->nops++];
	op->kind = kind;
	op->param = param;
	op->param2 = -1;
	op->in[0] = in0;
	op->in[1] = in1;
	op->label = label;
	op->moe_input = false;
	op->output_input = false;
	op->mixer_input = false;
	op->reduce_only = false;
	op->shift = 0;
	if (kind == OP_LOSS || kind == OP_SEND)
		op->out = -1;
	else
		op->out = sp->nslots++;
	return op->out;
}

/*
 * The mixer's parameters that act on its heads, each -1 when the model
 * has none: the stand-in of attention (or of Gated DeltaNet) is the
 * tensor-parallel block with these between fc1 and fc2.
 */
struct head_params {
	int	kv, qk_norm, sink, out_norm;
};

static int	emit_tp_block(struct builder *, int, int,
		    const struct head_params *, int, const char *);

/*
 * A tensor-parallel two-layer block (the mixer, a dense MLP, a shared
 * expert): Megatron's column-parallel fc1, activation, row-parallel fc2.
 * Returns the slot of its Partial output, before the tp reduction.
 */
static int
emit_tp_mlp(struct builder *b, int in, int fc1, int fc2, const char *label)
{
	return emit_tp_block(b, in, fc1, NULL, fc2, label);
}

/*
 * The same block with the mixer's head parameters, the heads split over
 * tp.  With kv >= 0 each head first adds its key/value head, a
 * projection of the block input: the stand-in of grouped-query
 * attention, whose query heads read the keys and values of their group.
 * qk_norm is a norm shared by every head between fc1 and the activation
 * (one [head_dim] weight for all heads).  sink scales each head by its
 * own value, as a learnable attention sink weighs each head's
 * attention (Megatron's softmax_offset, one value a head).  out_norm is
 * a norm shared by every head on the heads' outputs before fc2, Gated
 * DeltaNet's out_norm over each value head.
 */
static int
emit_tp_block(struct builder *b, int in, int fc1, const struct head_params *hp,
    int fc2, const char *label)
{
	const struct param *params = b->model->params;
	int	x;

	x = emit(b, OP_LINEAR_COL, fc1, in, -1, label);
	if (hp != NULL && hp->kv >= 0)
		x = emit(b, OP_KV, hp->kv, x, in, params[hp->kv].name);
	if (hp != NULL && hp->qk_norm >= 0)
		x = emit(b, OP_HEAD_NORM, hp->qk_norm, x, -1,
		    params[hp->qk_norm].name);
	if (hp != NULL && hp->sink >= 0)
		x = emit(b, OP_SINK, hp->sink, x, -1, params[hp->sink].name);
	x = emit(b, OP_ACT, -1, x, -1, label);
	if (hp != NULL && hp->out_norm >= 0)
		x = emit(b, OP_HEAD_NORM, hp->out_norm, x, -1,
		    params[hp->out_norm].name);
	return emit(b, OP_LINEAR_ROW, fc2, x, -1, label);
}

/*
 * A shared expert: a tensor-parallel MLP on the gathered tokens.  Without
 * a gate its Partial output joins the routed experts' before the block's
 * tp reduction.  With one (Megatron 1fa9464e7c, SharedExpertMLP) the
 * output is reduced first and scaled per token by s(x w_g^T), where x is
 * the block's input as this rank holds it: its sequence shard under
 * sequence parallelism.  That is why the gate's gradient is Partial over
 * tp exactly when sequence parallelism is on, and why Megatron marks it
 * sequence_parallel then.  Returns the slot to add after the block's
 * reduction, or -1 when the output was added to *routed.
 */
static int
emit_shared_expert(struct builder *b, const struct config *cfg, int stage,
    int layer, int k, int x_local, int x, int *routed)
{
	struct model	*m = b->model;
	char		 name[128], base[64];
	int		 s1, s2, g, y, hid = cfg->model.hidden;
	int		 sffn = cfg_shared_expert_ffn(cfg);

	if (cfg->model.moe.shared_experts == 1)
		snprintf(base, sizeof base, "layers.%d.moe.shared", layer);
	else
		snprintf(base, sizeof base, "layers.%d.moe.shared.%d", layer, k);
	/*
	 * Registration order is buffer order (reversed): gate_weight is
	 * SharedExpertMLP's own parameter, so named_parameters() yields it
	 * before those of its linear_fc1 and linear_fc2.
	 */
	g = -1;
	if (cfg->model.moe.shared_expert_gate) {
		snprintf(name, sizeof name, "%s.gate.weight", base);
		g = add_param(b, name, stage, layer, ROLE_GATE, 2, 1, hid, 0);
	}
	snprintf(name, sizeof name, "%s.fc1.weight", base);
	s1 = add_param(b, name, stage, layer, ROLE_COLUMN, 2, sffn, hid, 0);
	snprintf(name, sizeof name, "%s.fc2.weight", base);
	s2 = add_param(b, name, stage, layer, ROLE_ROW, 2, hid, sffn, 0);
	/*
	 * Where the block boundary declares its input's gradient Replicate,
	 * the framework's shared expert reduces its own (torchtitan before
	 * PR #2416: ColwiseParallel() on w1 and w3), so that its part reaches
	 * the boundary whole.
	 */
	if (cfg_moe_input_sync(cfg) == MOE_INPUT_REPLICATE) {
		x = emit(b, OP_TP_GATHER, -1, x, -1, m->params[s1].name);
		b->program->ops[b->program->nops - 1].reduce_only = true;
	}
	y = emit_tp_mlp(b, x, s1, s2, m->params[s1].name);
	if (g < 0) {
		*routed = emit(b, OP_ADD, -1, *routed, y, m->params[s1].name);
		return -1;
	}
	y = emit(b, OP_TP_REDUCE, -1, y, -1, m->params[s2].name);
	return emit(b, OP_GATE, g, x_local, y, m->params[g].name);
}

static int
emit_layer(struct builder *b, const struct config *cfg, int stage, int layer,
    int h)
{
	struct model	*m = b->model;
	char		 name[128];
	int		 n1, f1, f2, n2, x, r, k, rt, e1, e2, xl;
	struct head_params hp;
	int		 ngated;
	int		*gated;
	bool		 moe = cfg_layer_is_moe(cfg, layer);
	bool		 dup;
	int		 hid = cfg->model.hidden;

#define PNAME(suffix) (snprintf(name, sizeof name, "layers.%d.%s", layer, \
	(suffix)), name)
	n1 = add_param(b, PNAME("norm1.weight"), stage, layer, ROLE_NORM, 1,
	    hid, 0, 0);
	/*
	 * A duplicated mixer holds its weights whole on every tp rank
	 * (slime's HuggingfaceAttention: a Hugging Face module Megatron
	 * does not split).
	 */
	dup = cfg->model.duplicated_mixer;
	f1 = add_param(b, PNAME("mixer.fc1.weight"), stage, layer,
	    dup ? ROLE_DUPLICATED : ROLE_COLUMN, 2, cfg->model.ffn, hid, 0);
	f2 = add_param(b, PNAME("mixer.fc2.weight"), stage, layer,
	    dup ? ROLE_DUPLICATED : ROLE_ROW, 2, hid, cfg->model.ffn, 0);
	hp.qk_norm = hp.kv = hp.sink = hp.out_norm = -1;
	if (cfg->model.qk_norm)
		hp.qk_norm = add_param(b, PNAME("mixer.qk_norm.weight"), stage,
		    layer, ROLE_HEAD_NORM, 1, cfg->model.head_dim, 0, 0);
	/*
	 * Grouped-query attention's key/value projection: with fewer
	 * key/value heads than tp ranks every rank holds all of them
	 * (replicated, its gradient a sum over the rank's own query heads),
	 * otherwise each rank holds its share, column-parallel.
	 */
	if (cfg->model.kv_heads > 0)
		hp.kv = add_param(b, PNAME("mixer.kv.weight"), stage, layer,
		    cfg->model.kv_heads < cfg->mesh.tp ? ROLE_KV : ROLE_COLUMN,
		    2, cfg->model.kv_heads * cfg->model.head_dim, hid, 0);
	/*
	 * Megatron's learnable softmax_offset (DotProductAttention,
	 * --softmax-type learnable): one value a query head, each tp rank
	 * holding those of its own heads.
	 */
	if (cfg->model.attention_sink)
		hp.sink = add_param(b, PNAME("mixer.softmax_offset"), stage,
		    layer, ROLE_SINK, 1, cfg->model.ffn / cfg->model.head_dim,
		    0, 0);
	/*
	 * Gated DeltaNet's out_norm: a norm over head_dim that every value
	 * head shares, replicated over tp while the heads are split.
	 */
	if (cfg->model.out_norm)
		hp.out_norm = add_param(b, PNAME("mixer.out_norm.weight"),
		    stage, layer, ROLE_OUT_NORM, 1, cfg->model.head_dim, 0, 0);
	n2 = add_param(b, PNAME("norm2.weight"), stage, layer, ROLE_NORM, 1,
	    hid, 0, 0);

	/*
	 * Op labels point at parameter names, which live as long as the
	 * model.  Attention stand-in: token-wise, tensor-parallel like the MLP.
	 */
	x = emit(b, OP_NORM, n1, h, -1, m->params[n1].name);
	x = emit(b, OP_TP_GATHER, -1, x, -1, m->params[f1].name);
	/*
	 * Duplicated, the same linears compute a Replicate output, which
	 * the OP_TP_REDUCE only cuts back to the rank's sequence shard
	 * (scatter_to_sequence_parallel_region); the gradient of the
	 * gathered input is what the plan declares of mixer-input.
	 */
	b->program->ops[b->program->nops - 1].mixer_input = dup;
	x = emit_tp_block(b, x, f1, &hp, f2, m->params[f1].name);
	x = emit(b, OP_TP_REDUCE, -1, x, -1, m->params[f2].name);
	h = emit(b, OP_ADD, -1, h, x, m->params[f2].name);

	xl = emit(b, OP_NORM, n2, h, -1, m->params[n2].name);
	x = emit(b, OP_TP_GATHER, -1, xl, -1, m->params[n2].name);
	/* The gradient of x is what the MoE block boundary declares. */
	b->program->ops[b->program->nops - 1].moe_input = moe;
	gated = NULL;
	ngated = 0;
	if (moe) {
		int E = cfg->model.moe.experts, EF = cfg->model.moe.expert_ffn;
		struct op *op;

		rt = add_param(b, PNAME("moe.router.weight"), stage, layer,
		    ROLE_ROUTER, 2, E, hid, 0);
		e1 = add_param(b, PNAME("moe.experts.fc1.weight"), stage, layer,
		    ROLE_EXPERT_FC1, 3, E, EF, hid);
		e2 = add_param(b, PNAME("moe.experts.fc2.weight"), stage, layer,
		    ROLE_EXPERT_FC2, 3, E, hid, EF);
		int scores = emit(b, OP_ROUTE, rt, x, -1, m->params[rt].name);
		r = emit(b, OP_EXPERTS, e1, x, scores, m->params[e1].name);
		op = &b->program->ops[b->program->nops - 1];
		op->param2 = e2;
		gated = xcalloc(cfg->model.moe.shared_experts + 1,
		    sizeof *gated);
		for (k = 0; k < cfg->model.moe.shared_experts; k++) {
			int y = emit_shared_expert(b, cfg, stage, layer, k, xl,
			    x, &r);

			if (y >= 0)
				gated[ngated++] = y;
		}
	} else {
		f1 = add_param(b, PNAME("mlp.fc1.weight"), stage, layer,
		    ROLE_COLUMN, 2, cfg->model.ffn, hid, 0);
		f2 = add_param(b, PNAME("mlp.fc2.weight"), stage, layer,
		    ROLE_ROW, 2, hid, cfg->model.ffn, 0);
		r = emit_tp_mlp(b, x, f1, f2, m->params[f1].name);
	}
#undef PNAME
	r = emit(b, OP_TP_REDUCE, -1, r, -1, "block output");
	for (k = 0; k < ngated; k++)
		r = emit(b, OP_ADD, -1, r, gated[k], "gated shared expert");
	free(gated);
	return emit(b, OP_ADD, -1, h, r, "residual");
}

/*
 * Multi-token prediction layer k (1-based) on the last stage, as
 * Megatron's MultiTokenPredictionLayer (multi_token_prediction.py, from
 * core_v0.12.0): the embedding of the token ids rolled by k and the
 * hidden states of the layer before (the main model's after its final
 * norm) each through a norm of its own (enorm, hnorm), combined by
 * eh_proj, a transformer layer, a final norm and the shared output layer,
 * and the loss over the labels and the mask rolled by k.  The stand-in
 * adds the two normed inputs where Megatron concatenates them, and the
 * transformer layer is a tensor-parallel MLP (eh_proj its column-parallel
 * half) with a residual.  Returns the layer's output, the next one's
 * hidden states.
 */
static int
emit_mtp_layer(struct builder *b, const struct config *cfg, int stage, int k,
    int h, int emb, int out)
{
	struct model	*m = b->model;
	char		 name[128];
	int		 en, hn, f1, f2, fn, e, x, y;
	int		 hid = cfg->model.hidden;

#define MNAME(suffix) (snprintf(name, sizeof name, "mtp.%d.%s", k - 1, \
	(suffix)), name)
	en = add_param(b, MNAME("enorm.weight"), stage, -1, ROLE_NORM, 1, hid,
	    0, 0);
	hn = add_param(b, MNAME("hnorm.weight"), stage, -1, ROLE_NORM, 1, hid,
	    0, 0);
	f1 = add_param(b, MNAME("eh_proj.weight"), stage, -1, ROLE_COLUMN, 2,
	    cfg->model.ffn, hid, 0);
	f2 = add_param(b, MNAME("layer.fc2.weight"), stage, -1, ROLE_ROW, 2,
	    hid, cfg->model.ffn, 0);
	fn = add_param(b, MNAME("final_norm.weight"), stage, -1, ROLE_NORM, 1,
	    hid, 0, 0);
#undef MNAME
	e = emit(b, OP_TOKENS, -1, -1, -1, "mtp tokens");
	b->program->ops[b->program->nops - 1].shift = k;
	e = emit(b, OP_EMBED, emb, e, -1, "mtp embedding");
	e = emit(b, OP_TP_REDUCE, -1, e, -1, "mtp embedding");
	e = emit(b, OP_NORM, en, e, -1, m->params[en].name);
	x = emit(b, OP_NORM, hn, h, -1, m->params[hn].name);
	x = emit(b, OP_ADD, -1, e, x, m->params[f1].name);
	y = emit(b, OP_TP_GATHER, -1, x, -1, m->params[f1].name);
	y = emit_tp_mlp(b, y, f1, f2, m->params[f1].name);
	y = emit(b, OP_TP_REDUCE, -1, y, -1, m->params[f2].name);
	x = emit(b, OP_ADD, -1, x, y, m->params[f2].name);
	h = emit(b, OP_NORM, fn, x, -1, m->params[fn].name);
	x = emit(b, OP_TP_GATHER, -1, h, -1, "mtp output");
	x = emit(b, OP_OUTPUT, out, x, -1, "mtp output");
	emit(b, OP_LOSS, -1, x, -1, "mtp loss");
	b->program->ops[b->program->nops - 1].shift = k;
	return h;
}

/*
 * The parameters the MoE auxiliary losses' gradient reaches (issue 25):
 * each router's, and, backward from the router's input, every op's whose
 * output gradient carries it, across the pipeline from a chunk's RECV to
 * the previous chunk's SEND.  Virtual stages run backward in reverse
 * order (placement.c pl_mark_boundaries walks them the same way).  The
 * losses are not a gradient source: the main and the MTP losses' seeds
 * carry no aux part.
 */
static void
mark_aux(struct model *m)
{
	int	 nv = m->mesh.pp * m->chunks, v, i, k;
	bool	 carry = false, t;

	for (v = nv - 1; v >= 0; v--) {
		const struct stage_program *sp = &m->stages[v % m->mesh.pp];
		int	 lo = sp->chunk_start[v / m->mesh.pp];
		int	 hi = sp->chunk_start[v / m->mesh.pp + 1];
		bool	*reached = xcalloc(sp->nslots + 1, sizeof *reached);

		for (i = hi - 1; i >= lo; i--) {
			const struct op *op = &sp->ops[i];

			if (op->kind == OP_LOSS)
				continue;
			t = op->kind == OP_SEND ? carry : reached[op->out];
			if (op->kind == OP_RECV) {
				carry = t;
				continue;
			}
			t = t || op->kind == OP_ROUTE;
			if (!t)
				continue;
			if (op->param >= 0)
				m->params[op->param].aux = true;
			if (op->param2 >= 0)
				m->params[op->param2].aux = true;
			for (k = 0; k < 2; k++)
				if (op->in[k] >= 0)
					reached[op->in[k]] = true;
		}
		free(reached);
	}
}

/* The output layer of the MTP layers, registered after them. */
static void
fix_output(struct builder *b, int out)
{
	int	 i;

	for (i = 0; i < b->program->nops; i++)
		if (b->program->ops[i].param == -2)
			b->program->ops[i].param = out;
}

void
model_build(struct model *m, const struct config *cfg)
{
	struct builder	 b;
	int		 pp = cfg->mesh.pp, first, count, stage, layer, h, emb;
	int		 out_param, fn, i, v, nv, k, x, mtp_emb = -1;
	bool		 tied = cfg->model.tie_embeddings;
	/*
	 * The embedding and the output layer have the padded vocabulary's
	 * rows.  Token ids stay below model.vocab (numdata.c), so the
	 * padded embedding rows are never looked up and get no gradient;
	 * the padded logits are in the loss, as in Megatron's
	 * vocab_parallel_cross_entropy (a softmax over the whole padded
	 * vocabulary), so the padded output rows do get one.
	 */
	int64_t		 vocab = cfg_padded_vocab(cfg);

	memset(m, 0, sizeof *m);
	memset(&b, 0, sizeof b);
	b.model = m;
	m->config = cfg;
	mesh_from_config(&m->mesh, cfg);
	/* A cp rank holds 1/cp of every sequence (Megatron's CP slicing). */
	m->tokens = cfg->model.micro_batch * cfg->model.seq / m->mesh.cp;
	lossnorm_build(&m->loss, cfg, &m->mesh);
	m->stages = xcalloc(pp, sizeof *m->stages);
	m->chunks = cfg->mesh.vpp > 0 ? cfg->mesh.vpp : 1;
	b.cap_ops = xcalloc(pp, sizeof *b.cap_ops);
	for (stage = 0; stage < pp; stage++)
		m->stages[stage].chunk_start = xcalloc(m->chunks + 1,
		    sizeof *m->stages[stage].chunk_start);

	/*
	 * Virtual stage v is chunk v / pp of stage v % pp (Megatron's
	 * interleaved schedule): the embedding on the first chunk of the
	 * first stage, the output layer on the last chunk of the last.
	 */
	emb = -1;
	nv = pp * m->chunks;
	for (v = 0; v < nv; v++) {
		stage = b.stage = v % pp;
		b.chunk = v / pp;
		b.program = &m->stages[stage];
		b.program->chunk_start[b.chunk] = b.program->nops;
		if (v == 0) {
			emb = add_param(&b, "embedding.weight", 0, -1,
			    ROLE_EMBEDDING, 2, vocab, cfg->model.hidden, 0);
			h = emit(&b, OP_TOKENS, -1, -1, -1, "tokens");
			h = emit(&b, OP_EMBED, emb, h, -1, "embedding");
			h = emit(&b, OP_TP_REDUCE, -1, h, -1, "embedding");
		} else
			h = emit(&b, OP_RECV, -1, -1, -1, "pipeline recv");
		/*
		 * With multi-token prediction the last stage builds an
		 * embedding of its own (gpt_model.py: pre_process or
		 * mtp_process), registered before its layers: untied, a copy
		 * that finalize_model_grads all-reduces over the embedding
		 * group with the first stage's (mtp_num_layers); tied, the
		 * weight the output layer also uses.
		 */
		out_param = -1;
		if (v == nv - 1 && cfg->model.mtp > 0 && pp > 1) {
			if (tied)
				out_param = mtp_emb = add_param(&b,
				    "output.weight", stage, -1, ROLE_OUTPUT,
				    2, vocab, cfg->model.hidden, 0);
			else
				mtp_emb = add_param(&b,
				    "mtp.embedding.weight", stage, -1,
				    ROLE_EMBEDDING, 2, vocab,
				    cfg->model.hidden, 0);
		}
		cfg_chunk_layers(cfg, stage, b.chunk, &first, &count);
		for (layer = first; layer < first + count; layer++)
			h = emit_layer(&b, cfg, stage, layer, h);
		if (v < nv - 1) {
			emit(&b, OP_SEND, -1, h, -1, "pipeline send");
			b.program->chunk_start[b.chunk + 1] = b.program->nops;
			continue;
		}
		fn = add_param(&b, "final_norm.weight", stage, -1, ROLE_NORM, 1,
		    cfg->model.hidden, 0, 0);
		/*
		 * With tied embeddings and one stage the output layer is the
		 * embedding itself: one parameter used twice.  With several
		 * stages the last stage holds its own copy, output.weight.
		 */
		if (tied && pp == 1)
			out_param = emb;
		else if (out_param < 0 && cfg->model.mtp == 0)
			out_param = add_param(&b, "output.weight", stage, -1,
			    ROLE_OUTPUT, 2, vocab, cfg->model.hidden, 0);
		h = emit(&b, OP_NORM, fn, h, -1, "final_norm.weight");
		x = emit(&b, OP_TP_GATHER, -1, h, -1, "output");
		b.program->ops[b.program->nops - 1].output_input = true;
		/*
		 * The MTP block is registered between the decoder and the
		 * output layer (GPTModel.__init__).
		 */
		if (cfg->model.mtp > 0) {
			int o = out_param;

			if (o < 0)
				o = -2;	/* registered after the layers */
			for (k = 1; k <= cfg->model.mtp; k++)
				h = emit_mtp_layer(&b, cfg, stage, k, h,
				    pp == 1 ? emb : mtp_emb, o);
			if (out_param < 0)
				out_param = add_param(&b, "output.weight",
				    stage, -1, ROLE_OUTPUT, 2, vocab,
				    cfg->model.hidden, 0);
			fix_output(&b, out_param);
		}
		x = emit(&b, OP_OUTPUT, out_param, x, -1, "output");
		emit(&b, OP_LOSS, -1, x, -1, "loss");
		b.program->chunk_start[b.chunk + 1] = b.program->nops;
	}
	free(b.cap_ops);

	for (i = 0; i < m->nparams; i++) {
		struct param *p = &m->params[i];

		set_local_shape(&m->mesh, p);
		p->sequence_parallel = (p->role == ROLE_NORM ||
		    p->role == ROLE_GATE) && cfg->training.sequence_parallel;
		/*
		 * Norms that are modules of their own rather than fused into
		 * the next linear (TELayerNormColumnParallelLinear): the final
		 * norm, and the pre-MLP norm of a MoE layer (TENorm in
		 * Megatron's layer specs when num_experts is set).
		 */
		p->standalone = p->role == ROLE_NORM && (p->layer < 0 ||
		    (cfg_layer_is_moe(cfg, p->layer) &&
		    strstr(p->name, ".norm2.") != NULL));
		if ((p->role == ROLE_OUTPUT && tied) || (i == mtp_emb &&
		    !tied)) {
			struct logical_param *l = &m->logical[
			    m->params[emb].logical];

			l->tied_with = p->name;
			l->instance[1] = i;
			l->ninstances = 2;
			p->logical = m->params[emb].logical;
		} else
			add_logical(&b, i);
	}
	/*
	 * Tied with one stage: one parameter used twice, still tied to the
	 * output layer it also is (SPEC section 4), though no copy exists.
	 */
	if (tied && pp == 1)
		m->logical[m->params[emb].logical].tied_with = "output.weight";
	if (m->loss.aux_source >= 0)
		mark_aux(m);
}

void
model_free(struct model *m)
{
	int	i;

	lossnorm_free(&m->loss);
	for (i = 0; i < m->nparams; i++)
		free(m->params[i].name);
	free(m->params);
	free(m->logical);
	for (i = 0; i < m->mesh.pp; i++) {
		free(m->stages[i].ops);
		free(m->stages[i].chunk_start);
	}
	free(m->stages);
	memset(m, 0, sizeof *m);
}

const char *
op_kind_name(enum op_kind k)
{
	static const char *const names[] = {
		[OP_TOKENS] = "tokens", [OP_RECV] = "recv",
		[OP_EMBED] = "embed", [OP_TP_REDUCE] = "tp-reduce",
		[OP_TP_GATHER] = "tp-gather", [OP_NORM] = "norm",
		[OP_LINEAR_COL] = "linear-col", [OP_ACT] = "act",
		[OP_HEAD_NORM] = "head-norm", [OP_KV] = "kv",
		[OP_SINK] = "sink",
		[OP_LINEAR_ROW] = "linear-row", [OP_ADD] = "add",
		[OP_ROUTE] = "route", [OP_EXPERTS] = "experts",
		[OP_GATE] = "gate",
		[OP_OUTPUT] = "output", [OP_LOSS] = "loss", [OP_SEND] = "send"
	};

	return names[k];
}

bool
model_rank_holds(const struct model *m, const struct param *p, int rank)
{
	return rank / (m->mesh.dp * m->mesh.tp) == p->stage;
}

int
model_instance_on(const struct model *m, int param, int rank)
{
	const struct logical_param *l = &m->logical[m->params[param].logical];
	int	k;

	for (k = 0; k < l->ninstances; k++)
		if (model_rank_holds(m, &m->params[l->instance[k]], rank))
			return l->instance[k];
	return -1;
}

int64_t
model_global_index(const struct model *m, const struct param *p, int rank,
    int64_t i)
{
	struct coord	c;
	int64_t		r, col, e, f, h, rows_per;

	mesh_coord_of(&m->mesh, rank, &c);
	switch (p->role) {
	case ROLE_EMBEDDING:
	case ROLE_OUTPUT:
	case ROLE_COLUMN:
	case ROLE_SINK:
		/* Row shards are contiguous in row-major order. */
		return c.tp * p->local_elems + i;
	case ROLE_ROW:
		r = i / p->local_shape[1];
		col = i % p->local_shape[1];
		return r * p->shape[1] + c.tp * p->local_shape[1] + col;
	case ROLE_EXPERT_FC1:
		rows_per = p->local_shape[1] * p->local_shape[2];
		e = i / rows_per;
		f = (i % rows_per) / p->local_shape[2];
		h = i % p->local_shape[2];
		return ((c.ep * p->local_shape[0] + e) * p->shape[1] +
		    c.etp * p->local_shape[1] + f) * p->shape[2] + h;
	case ROLE_EXPERT_FC2:
		rows_per = p->local_shape[1] * p->local_shape[2];
		e = i / rows_per;
		h = (i % rows_per) / p->local_shape[2];
		f = i % p->local_shape[2];
		return ((c.ep * p->local_shape[0] + e) * p->shape[1] + h) *
		    p->shape[2] + c.etp * p->local_shape[2] + f;
	case ROLE_NORM:
	case ROLE_HEAD_NORM:
	case ROLE_OUT_NORM:
	case ROLE_KV:
	case ROLE_ROUTER:
	case ROLE_GATE:
	case ROLE_DUPLICATED:
		break;
	}
	return i;
}

bool
model_per_source(const struct model *m, const struct param *p)
{
	return p->expert && m->loss.split;
}

bool
model_has_mtp(const struct model *m, const struct param *p)
{
	(void)p;
	return m->loss.mtp_source >= 0;
}

bool
model_has_aux(const struct model *m, const struct param *p)
{
	return p->aux && m->loss.aux_source >= 0;
}

int
model_atom_slot(const struct model *m, const struct param *p, int source)
{
	int	 aux = model_has_aux(m, p);

	if (model_per_source(m, p)) {
		if (aux && source == m->loss.aux_source)
			return m->mesh.ep;
		/* The layers' atoms per source follow (lossnorm.h). */
		if (m->loss.mtp_split_source >= 0 &&
		    source >= m->loss.mtp_split_source)
			return m->mesh.ep + aux + source -
			    m->loss.mtp_split_source;
		return source - 1;
	}
	if (model_has_mtp(m, p) && source >= m->loss.mtp_source)
		return 1 + aux + source - m->loss.mtp_source;
	return aux && source == m->loss.aux_source;
}

int
model_atoms_per_rank(const struct model *m, const struct param *p)
{
	return m->loss.micro_batches * ((model_per_source(m, p) ? m->mesh.ep :
	    1) * (1 + (model_has_mtp(m, p) ? m->loss.mtp : 0)) +
	    model_has_aux(m, p)) * (p->boundary >= 0 ? 2 : 1);
}

int
model_shard_key(const struct model *m, const struct param *p,
    const struct coord *c)
{
	switch (p->role) {
	case ROLE_SINK:		/* its own heads' values */
	case ROLE_EMBEDDING:
	case ROLE_OUTPUT:
	case ROLE_COLUMN:
	case ROLE_ROW:
		return c->tp;
	case ROLE_EXPERT_FC1:
	case ROLE_EXPERT_FC2:
		return c->ep * m->mesh.etp + c->etp;
	case ROLE_NORM:
	case ROLE_HEAD_NORM:
	case ROLE_OUT_NORM:
	case ROLE_KV:
	case ROLE_ROUTER:
	case ROLE_GATE:
	case ROLE_DUPLICATED:
		break;
	}
	return 0;
}
