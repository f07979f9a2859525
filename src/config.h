/*
 * A parallel configuration as read from YAML (SPEC section 3), with the
 * defaults filled in and every constraint of SPEC section 5 checked.
 *
 * The loader is strict: unknown keys, wrong types, out-of-range integers,
 * unknown enum values and impossible meshes are errors that name
 * file:line:col and the key, and make the command exit 2 before anything is
 * audited.
 */
#ifndef GRADAUDIT_CONFIG_H
#define GRADAUDIT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Upper bounds that make "absurd sizes" a configuration error, not a crash. */
#define CFG_MAX_MESH_DIM	(1 << 20)	/* any one of dp, pp, tp, ep, etp */
#define CFG_MAX_WORLD		(1 << 20)	/* dp * pp * tp */
#define CFG_MAX_MODEL_DIM	(1 << 20)	/* vocab, hidden, ffn, seq, ... */
#define CFG_MAX_LAYERS		4096
#define CFG_MAX_EXPERTS		4096
#define CFG_MAX_PARAM_ELEMS	((int64_t)1 << 40)	/* elements of one parameter */
#define CFG_MAX_FILE_BYTES	(16 << 20)		/* a config file */

enum embedding_sync {		/* sync.embedding_grad */
	EMBEDDING_BEFORE_DP,	/* "before-dp" */
	EMBEDDING_AFTER_DP,	/* "after-dp" */
	EMBEDDING_SEPARATE_BUCKET /* "separate-bucket" */
};

enum router_sync {		/* sync.router_grad */
	ROUTER_AUTO,		/* "auto" */
	ROUTER_TP_ALL_REDUCE,	/* "tp-all-reduce" */
	ROUTER_NONE		/* "none" */
};

enum expert_input_sync {	/* sync.expert_input_grad */
	EXPERT_INPUT_ETP_ALL_REDUCE,	/* "etp-all-reduce" */
	EXPERT_INPUT_NONE		/* "none" */
};

enum sp_param_sync {		/* sync.sp_param_grad */
	SP_PARAM_TP_ALL_REDUCE,	/* "tp-all-reduce" */
	SP_PARAM_NONE		/* "none" */
};

enum expert_divisor {		/* sync.expert_grad_divisor */
	EXPERT_DIVISOR_DP,	/* "dp" */
	EXPERT_DIVISOR_EDP	/* "edp" */
};

enum score_func {		/* model.moe.score_func */
	SCORE_SOFTMAX,		/* "softmax" */
	SCORE_SIGMOID		/* "sigmoid" */
};

/* Where a key was written: libyaml marks, 1-based.  line 0 = not written. */
struct cfg_mark {
	int	line;
	int	col;
};

/*
 * Which keys the user wrote (or set with --set), as bits, so that sweep can
 * adjust only the model sizes a config leaves to their defaults.
 */
enum cfg_key {
	KEY_NAME, KEY_MESH, KEY_DP, KEY_PP, KEY_TP, KEY_EP, KEY_ETP,
	KEY_MODEL, KEY_VOCAB, KEY_HIDDEN, KEY_FFN, KEY_LAYERS, KEY_SEQ,
	KEY_MICRO_BATCH, KEY_TIE_EMBEDDINGS, KEY_MOE, KEY_EXPERTS, KEY_TOP_K,
	KEY_EXPERT_FFN, KEY_SCORE_BEFORE_EXPERTS, KEY_SHARED_EXPERTS,
	KEY_SCORE_FUNC, KEY_EVERY, KEY_TRAINING, KEY_DISTRIBUTED_OPTIMIZER,
	KEY_SEQUENCE_PARALLEL, KEY_AVERAGE_IN_COLLECTIVE, KEY_BUCKET_ELEMS,
	KEY_SYNC, KEY_EMBEDDING_GRAD, KEY_ROUTER_GRAD, KEY_EXPERT_INPUT_GRAD,
	KEY_SP_PARAM_GRAD, KEY_EXPERT_GRAD_DIVISOR,
	KEY__COUNT
};

struct config {
	char	*file;		/* path as given on the command line */
	char	*name;		/* name:, or the file's base name without .yaml */
	int	 doc_index;	/* position in a list of documents, 0-based */

	struct {
		int	dp, pp, tp, ep, etp;
	} mesh;

	struct {
		int	vocab, hidden, ffn, layers, seq, micro_batch;
		bool	tie_embeddings;
		bool	has_moe;	/* model.moe present */
		struct {
			int		experts, top_k, expert_ffn;
			bool		score_before_experts;
			int		shared_experts;
			enum score_func	score_func;
			int		every;
		} moe;
	} model;

	struct {
		bool	distributed_optimizer;
		bool	sequence_parallel;
		bool	average_in_collective;
		int64_t	bucket_elems;	/* 0 = one bucket per stage buffer */
	} training;

	struct {
		enum embedding_sync	embedding_grad;
		enum router_sync	router_grad;
		enum expert_input_sync	expert_input_grad;
		enum sp_param_sync	sp_param_grad;
		enum expert_divisor	expert_grad_divisor;
	} sync;

	/* Where each key was written (line 0 if defaulted or from --set). */
	struct cfg_mark	 marks[KEY__COUNT];
	/* Bit k set when key k was written in the file or by --set. */
	uint64_t	 given;
	/* The mark of the document itself (used for whole-config errors). */
	struct cfg_mark	 doc_mark;
	bool		 in_list; /* came from a sequence or a multi-document file */
	/*
	 * XXH3-64 of the bytes of the file, as read: run's MPI job checks
	 * that it read what its parent checked (issue 8).
	 */
	uint64_t	 source_digest;
};

/* One --set KEY=VALUE, in command-line order. */
struct cfg_override {
	const char	*key;	/* dotted path, e.g. "mesh.dp" */
	const char	*value;	/* parsed as a YAML scalar */
};

struct config_list {
	struct config	*v;
	size_t		 n;
};

/*
 * Load every configuration in path (one document, or a sequence of
 * documents), apply the overrides in order, fill in defaults and validate.
 * On error, print "gradaudit: FILE:LINE:COL: KEY: what is wrong" to stderr
 * and return -1 (the caller exits EXIT_USAGE); the list is left empty.
 * Appends to *out on success and returns 0.
 */
int	 cfg_load(const char *path, const struct cfg_override *, size_t,
	    struct config_list *out);

/*
 * Check the constraints of SPEC section 5 on an already loaded config whose
 * mesh or flags were changed (sweep).  Returns NULL when valid, otherwise a
 * static description of the failing constraint ("etp must divide tp").
 */
const char *cfg_check_constraints(const struct config *);

/*
 * Report a problem found in a loaded config after loading (an audit too
 * large to hold) as the loader reports its own: "gradaudit:
 * FILE:LINE:COL: KEY: message" at key k, or at the document when the file
 * does not write k.
 */
void	 cfg_error(const struct config *, enum cfg_key, const char *, ...)
	    __attribute__((format(printf, 3, 4)));

/* Deep copy and free; config_list_free frees the configs and the array. */
void	 cfg_copy(struct config *dst, const struct config *src);
void	 cfg_free(struct config *);
void	 config_list_free(struct config_list *);

/* Keyword spellings, for reports ("before-dp", "tp-all-reduce", ...). */
const char *cfg_embedding_sync_name(enum embedding_sync);
const char *cfg_router_sync_name(enum router_sync);
const char *cfg_expert_input_sync_name(enum expert_input_sync);
const char *cfg_sp_param_sync_name(enum sp_param_sync);
const char *cfg_expert_divisor_name(enum expert_divisor);
const char *cfg_score_func_name(enum score_func);

/* True when layer i (0-based) is a MoE layer (SPEC section 4). */
bool	 cfg_layer_is_moe(const struct config *, int layer);

#endif
