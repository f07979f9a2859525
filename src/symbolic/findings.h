/*
 * The finding catalogue (issue 22): every kind of finding the symbolic
 * audit reports, with the mechanism it tells, the fix it proposes and the
 * reports it cites.  The engines say what happened, a fact with its
 * parameters (the step, the backward reduction, the factor found); this
 * catalogue alone says it in words, and alone names the settings a fix
 * changes, so that no engine source mentions a `sync.` key.
 */
#ifndef GRADAUDIT_FINDINGS_H
#define GRADAUDIT_FINDINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/arena.h"
#include "config/config.h"
#include "model/mesh.h"
#include "model/placement.h"
#include "model/syncplan.h"
#include "symbolic/audit.h"

/* What the diagnosis of a parameter's wrong values found. */
enum fact {
	/* A step's gradient is Partial over tp but declared Replicate. */
	FACT_PARTIAL_DECLARED_REPLICATE,
	/* Part of tp declared Replicate, masked, then summed: shares lost. */
	FACT_PARTIAL_MASKED_REPLICATE,
	/* A step's gradient is Replicate over tp but declared Partial. */
	FACT_REPLICATE_DECLARED_PARTIAL,
	/* The experts' input gradient's etp all-reduce is skipped. */
	FACT_EXPERT_INPUT_SKIPPED,
	/* The router's input gradient is all-reduced although complete. */
	FACT_ROUTER_INPUT_TWICE,
	/* A MoE block boundary sums a part already all-reduced inside. */
	FACT_BOUNDARY_SUMMED_WHOLE,
	/* A MoE block boundary never sums its input gradient over tp. */
	FACT_BOUNDARY_NOT_SUMMED,
	/* The plan declares the output layer's input gradient Replicate. */
	FACT_OUTPUT_NOT_SUMMED,
	/* The plan declares a duplicated mixer's whole input gradient Partial. */
	FACT_MIXER_SUMMED_WHOLE,
	/* A collective combined copies in different states (#844). */
	FACT_STATES_MIXED,
	/* The right contributions, all times one wrong factor. */
	FACT_WRONG_FACTOR,
	FACT_REPEATED_SUM,
	/* The main loss's part right, the auxiliary losses' part missing. */
	FACT_AUX_ABSENT,
	/* The main loss's part right, the auxiliary losses' part a factor. */
	FACT_AUX_FACTOR,
	/* The same, with a plan's step on the aux term to carry it. */
	FACT_AUX_TERM_FACTOR,
	/* The same, with the dp group's counts (a global load-balancing loss). */
	FACT_AUX_GLOBAL_FACTOR,
	/* The main loss's part right, the MTP losses' part a factor. */
	FACT_MTP_FACTOR,
	/* The MTP losses' atoms of a micro-batch unequal over its cp ranks. */
	FACT_MTP_UNEQUAL_OVER_CP,
	/* The MTP losses' atoms weighed unequally. */
	FACT_MTP_UNEQUAL,
	/* Every chunk, unequal weights, from the pipeline's normalization. */
	FACT_PP_UNEQUAL_WEIGHTS,
	/* Every chunk, unequal weights, from per-chunk token counts. */
	FACT_UNEQUAL_WEIGHTS,
	/* Partial sums: the reduction's group is too small. */
	FACT_PARTIAL_SUM,
	/* Partial sums of expert parameters kept in the dense buffer. */
	FACT_PARTIAL_SUM_DENSE_EXPERT,
	/* Replicas that must agree disagree, nothing else found. */
	FACT_REPLICAS_DISAGREE,
	/* The values combine the wrong ranks, nothing else found. */
	FACT_WRONG_RANKS,
	/* Rows of a tied weight no update reaches (model/stale.h). */
	FACT_STALE_ROWS,
	/*
	 * A step ran on a gradient buffer of another dtype than the one
	 * holding the gradient, and so never reached it (NeMo PR #6958).
	 */
	FACT_BUFFER_NOT_HELD,
	/* A scale of plan: on a buffer that did not hold the gradient. */
	FACT_BUFFER_SCALE_NOT_HELD,
	/* Micro-batches weighed unequally, with a step of plan: scheduled. */
	FACT_SCHEDULE_UNEQUAL,
	/*
	 * Experts masked over tp: the router's share of the block input's
	 * gradient is never summed over tp (transformers PR #48205).
	 */
	FACT_ROUTER_SHARE_NOT_SUMMED,
	/*
	 * The router's scores gathered with no backward: the main loss's
	 * score gradient never reaches the router (NeMo Automodel PR #2995).
	 */
	FACT_SCORES_DETACHED,
	/*
	 * A plan without "preset" that no step of reduces a parameter over
	 * its data-parallel replicas (kohya-ss/sd-scripts #924).
	 */
	FACT_PLAN_UNREDUCED,
	/*
	 * A plan without "preset" that never sums a tied weight's copies
	 * over the embedding group.
	 */
	FACT_PLAN_UNTIED,
	/*
	 * The same, where a step of the plan would reduce it but runs at no
	 * micro-batch (micro-batches: none).
	 */
	FACT_PLAN_NEVER_RUNS,
	FACT__COUNT
};

/*
 * A fact's parameters; those a fact does not use stay zero.  step is the
 * step the fact is about (its label, group and citation), fix_step the
 * step whose fix applies, cause the setting at fault where the catalogue
 * does not name one.
 */
struct fact_args {
	const struct mesh		*mesh;
	const struct sync_step		*step;
	const struct sync_step		*fix_step;
	const struct backward_reduction	*reduction;
	enum cfg_key			 cause;
	const char			*factor;	/* formatted */
	const char			*rows;		/* formatted */
	const char			*held;		/* a dtype's word */
	long long			 total;		/* the step's tokens */
	const char			*framework;	/* the profile's, or NULL */
	const char			*schedule;	/* formatted */
	/* "plan[1] (a.yaml:9:5)": the declare: of a boundary, or NULL. */
	const char			*declared_by;
	/*
	 * The parameter's replica group ("edp") where the finding is about
	 * it rather than the step's group, or NULL: the step's, else "dp".
	 */
	const char			*group;
	/* "plan (a.yaml:2:1)": the op where no step or reduction is one. */
	const char			*op;
};

/* A finding's words, the strings in the arena given (or static). */
struct finding_words {
	enum finding_kind	 kind;
	enum cfg_key		 cause;
	const char		*op;
	const char		*dim;
	const char		*message;
	const char		*fix;
};

void	 finding_tell(enum fact, const struct fact_args *, struct arena *,
	    struct finding_words *);

/* A step's citation and fix, in words (NULL for none). */
const char	*sync_cite_text(enum sync_cite);
const char	*sync_fix_text(enum sync_fix);
/* Does fix name key's setting (the fix changes that setting)? */
bool		 sync_fix_names(enum sync_fix, enum cfg_key);
/*
 * What setting k to value does, one sentence for a fix's prose, "%s"
 * standing for the value; NULL when the catalogue has none.
 */
const char	*setting_fix_text(enum cfg_key k, const char *value);

/*
 * The gradient norm's findings.  norm_settings_wrong: the grad_norm:
 * settings of c other than the correct norm's, into keys, and their
 * correct values into good (room for NORM_SETTINGS_MAX); returns how
 * many.  norm_wrong_settings: those of them in in_effect (the audit's
 * filters, steps or clipping ranks differ under them, gradnorm.c) that
 * can cause a finding of kind, "key: value, ..." into names and their
 * fixes into fixes, and the dimension of the first in *dim; returns that
 * setting (KEY__COUNT: none).  The tell functions put a miscounting
 * class's finding (over: more than once) and replicas clipping by
 * `norms` different norms (idle: some never clip) into words, in the
 * arena.
 */
#define NORM_SETTINGS_MAX	8
size_t		 norm_settings_wrong(const struct config *c,
		    enum cfg_key *keys, int *good);
enum cfg_key	 norm_wrong_settings(const struct config *c,
		    const struct keyset *in_effect, enum finding_kind kind,
		    char *names, size_t nlen, char *fixes, size_t flen,
		    const char **dim);
void		 norm_miscount_tell(struct arena *, size_t n, bool over,
		    const char *names, const char *fixes,
		    const char **message, const char **fix);
void		 norm_drift_tell(struct arena *, size_t norms, bool idle,
		    const char *names, const char *fixes,
		    const char **message, const char **fix);

/* A finding kind of a measured step (compare), in words. */
struct measured_text {
	enum finding_kind	 kind;
	const char		*what;
	const char		*fix;
};

/* The kinds a measured step reports, in their order; *n of them. */
const struct measured_text *measured_texts(size_t *n);
/* Every measured finding's words when a config says what should run. */
extern const struct measured_text measured_against_config;

#endif
