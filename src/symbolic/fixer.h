/*
 * The fixer (fix.h): the state of the fix search of one audit, and the
 * search itself (fixer.c), which the driver (fix.c) and the sentences
 * (fixtext.c) share.
 */
#ifndef GRADAUDIT_FIXER_H
#define GRADAUDIT_FIXER_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "symbolic/audit.h"

/* The most settings one fix changes (a flag's, or two of a family). */
#define FIX_MAX_SETTINGS	8
/* The most settings a completed fix has, besides a flag's. */
#define FIX_DEPTH		3
/* The most loss recipes kept (lossnorm's checks pass for them). */
#define FIX_MAX_RECIPES		64

struct candidate {
	enum cfg_key	 key[FIX_MAX_SETTINGS];
	const char	*value[FIX_MAX_SETTINGS];	/* cfg_key_words' */
	int		 n;
	const char	*flag;	/* the framework flag it stands for, or NULL */
};

/* A finding as the judgement of a fix sees it: its kind on a parameter. */
struct seen {
	enum finding_kind kind;
	enum cfg_key	 cause;
	char		*op;
	char		*param;
	bool		 probed;	/* of a parameter audited alone */
};

/*
 * What an audit of the config with a candidate applied found, once
 * audited (fixer_evaluate); before, what the audits of some of its
 * parameters alone found on them (fixer_verdict), each also in seen.
 */
struct outcome {
	char		*id;		/* "k=v;k=v", the memo's key */
	bool		 audited;	/* valid, passes and seen are known */
	bool		 valid;		/* loads and can be audited */
	bool		 passes;
	struct seen	*seen;
	size_t		 nseen;
	char		**probes;	/* the parameters audited alone */
	size_t		 nprobes;
	struct seen	*probed;	/* what they found on them */
	size_t		 nprobed;
};

struct fixer {
	struct audit	*audit;
	const struct config *config;
	struct seen	*orig;		/* the findings being fixed */
	size_t		 norig;
	/* The fixes of the findings before this one. */
	struct candidate *chosen;
	size_t		 nchosen;
	int		 tries;		/* audits of this finding's search */
	/*
	 * What the fixes found at first left when applied together and
	 * could not fix on top (its kind and op), to be left to fix by each
	 * fix on its own even where another finding explained its parameter
	 * first; with strict, anything the config did not have.
	 */
	struct seen	*avoid;
	size_t		 navoid;
	bool		 strict;
	struct candidate failed;	/* those fixes together */
	/* The loss's own fixes (loss_recipes), once; -1: not yet. */
	struct candidate recipes[FIX_MAX_RECIPES];
	int		 nrecipes;
	struct outcome	*memo;
	size_t		 nmemo, capmemo;
	/*
	 * The candidates whose audits went past GRADAUDIT_MAX_MEMORY, each
	 * then no fix (audit_with): fix_derive says how many.
	 */
	int		 over_limit;
	/*
	 * Audit every candidate whole, never one parameter alone first
	 * (fixer_verdict): the test suite sets GRADAUDIT_TEST_WHOLE_AUDITS
	 * to check that the fixes found are the same either way.
	 */
	bool		 whole;
};

enum verdict { FIX_NO, FIX_PARTIAL, FIX_YES };

bool	 fixer_audit_candidate(struct fixer *fx,
	    const struct candidate *c, struct config *cfg, struct audit *a);
/* The memo's outcome of candidate c when audited whole, else NULL. */
const struct outcome *fixer_audited(const struct fixer *fx,
	    const struct candidate *c);
bool	 fixer_candidate_add(struct candidate *c, enum cfg_key k,
	    const char *v);
bool	 fixer_candidate_has(const struct candidate *c, enum cfg_key k);
void	 fixer_collect_seen(const struct audit *a, struct seen **out,
	    size_t *n);
bool	 fixer_current_is(const struct config *c, enum cfg_key k,
	    const char *v);
const struct outcome *fixer_evaluate(struct fixer *fx,
	    const struct candidate *c);
bool	 fixer_fixes(struct fixer *fx, const struct finding *f,
	    const struct candidate *c);
void	 fixer_free_memo(struct fixer *fx);
void	 fixer_free_seen(struct seen *s, size_t n);
bool	 fixer_from_profile(const struct config *c, enum cfg_key k);
bool	 fixer_had(const struct fixer *fx, const struct seen *s);
bool	 fixer_holds(const struct finding *f, const char *param);
enum verdict	 fixer_judge(const struct fixer *fx, const struct finding *f,
	    const struct outcome *o);
int	 fixer_keys_to_try(const struct config *c, enum cfg_key cause,
	    enum finding_kind kind, enum cfg_key *out, int n, int max);
bool	 fixer_merge(struct candidate *t, const struct candidate *a,
	    const struct candidate *b);
void	 fixer_minimize(struct fixer *fx, const struct finding *f,
	    struct candidate *c);
bool	 fixer_search(struct fixer *fx, const struct finding *f,
	    const struct candidate *base, struct candidate *best);
bool	 fixer_search_objective(struct fixer *fx, const struct finding *f,
	    struct candidate *best);
bool	 fixer_settable(const struct config *c, enum cfg_key k);
bool	 fixer_still_there(const struct finding *f, const struct seen *s);
int	 fixer_values_of(const struct config *c, enum cfg_key k,
	    const char **out, int max);
enum verdict	 fixer_verdict(struct fixer *fx, const struct finding *f,
	    const struct candidate *c);
const char *fixer_word_of(enum cfg_key k, const char *s);

#endif
