/*
 * The fix of each finding as settings, checked by auditing the config
 * again (fix.h): the driver, which searches each finding's fix, makes the
 * fixes agree with each other and writes them into the findings.  Which
 * settings bear on which finding is data: the families and the launch
 * flags of the frameworks in the search (fixer.c), one sentence per
 * setting for the prose in the sentences (fixtext.c).
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/constraints.h"
#include "config/framework.h"
#include "model/lossnorm.h"
#include "model/mesh.h"
#include "symbolic/audit.h"
#include "symbolic/context.h"
#include "symbolic/fix.h"
#include "symbolic/fixer.h"
#include "symbolic/fixtext.h"
#include "symbolic/symbolic.h"

/*
 * An audit larger than this is freed while its fixes are audited, and
 * audited again after: a second audit held beside it doubled the memory
 * of check on 32,768 ranks (tests/memory.test).
 */
#define FIX_FRUGAL_BYTES	((size_t)8 << 20)

static size_t
owner_of(const struct audit *a, const struct finding *r, const bool *have)
{
	size_t	 i, k, first = a->nfindings;

	for (i = 0; i < a->nfindings; i++) {
		if (!have[i])
			continue;
		if (first == a->nfindings)
			first = i;
		for (k = 0; k < r->nparams; k++)
			if (fixer_holds(&a->findings[i], r->params[k]))
				return i;
	}
	return first;
}

/* Is f gone from outcome o: its kind and op on none of its parameters? */
static bool
gone(const struct finding *f, const struct outcome *o)
{
	size_t	i;

	if (!o->valid)
		return false;
	for (i = 0; i < o->nseen; i++)
		if (fixer_still_there(f, &o->seen[i]))
			return false;
	return true;
}

static bool
passes(struct fixer *fx, const struct candidate *c)
{
	const struct outcome *o = fixer_evaluate(fx, c);

	return o->valid && o->passes;
}

/*
 * The fix of f on top of base (f's own, when base already removes it),
 * judged against what base leaves rather than the config: what base
 * fixed must stay fixed.
 */
static bool
search_after(struct fixer *fx, const struct finding *f,
    const struct candidate *base, struct candidate *x)
{
	const struct outcome *o = fixer_evaluate(fx, base);
	struct seen	*orig = fx->orig, *left;
	size_t		 norig = fx->norig, nleft, i;
	bool		 found;

	if (!o->valid)
		return false;
	if (gone(f, o)) {
		*x = *base;
		return true;
	}
	nleft = o->nseen;
	left = xcalloc(nleft + 1, sizeof *left);
	for (i = 0; i < nleft; i++) {
		left[i] = o->seen[i];
		left[i].op = xstrdup(o->seen[i].op);
		left[i].param = xstrdup(o->seen[i].param);
	}
	fx->orig = left;
	fx->norig = nleft;
	found = fixer_search(fx, f, base, x);
	fx->orig = orig;
	fx->norig = norig;
	fixer_free_seen(left, nleft);
	return found;
}

/*
 * Fix, on top of all, what all still leaves: a finding one of the fixes
 * masked (the auxiliary losses' part of a router whose whole gradient
 * was weighted wrongly).  Its settings go to the finding that masked it.
 */
static void
close_over(struct fixer *fx, struct candidate *all, struct candidate *fixes,
    const bool *have)
{
	struct audit	*a = fx->audit, b;
	const struct outcome *o;
	struct candidate m, x;
	struct config	 cfg;
	size_t		 i, owner;
	int		 round;
	bool		 valid, progress;

	for (round = 0; round < FIX_DEPTH && all->n > 0; round++) {
		/*
		 * Nothing to close over when the memo says all passes or
		 * cannot be audited: the audit below would say so again
		 * (issue 24: the fix of a 4,096-rank config audited twice).
		 */
		if ((o = fixer_audited(fx, all)) != NULL &&
		    (!o->valid || o->passes))
			break;
		valid = fixer_audit_candidate(fx, all, &cfg, &b);
		progress = false;
		for (i = 0; valid && !audit_passes(&b) && !progress &&
		    i < b.nfindings; i++) {
			if (!search_after(fx, &b.findings[i], all, &x) ||
			    (owner = owner_of(a, &b.findings[i], have)) ==
			    a->nfindings || !fixer_merge(&m, &fixes[owner], &x))
				continue;
			m.flag = fixes[owner].flag;
			fixes[owner] = m;
			*all = x;
			progress = true;
		}
		audit_free(&b);
		cfg_free(&cfg);
		if (!progress)
			break;
	}
}

/* all = every fix that has one, at once; false when two disagree. */
static bool
union_of(const struct audit *a, const struct candidate *fixes,
    const bool *have, struct candidate *all)
{
	struct candidate m;
	size_t	 i;

	memset(all, 0, sizeof *all);
	for (i = 0; i < a->nfindings; i++) {
		if (!have[i])
			continue;
		if (!fixer_merge(&m, all, &fixes[i]))
			return false;
		*all = m;
	}
	return true;
}

/*
 * Make the fixes agree, so that every fix applied at once makes the
 * config pass.  When the fixes each finding has alone do not (two set one
 * key, or the expert gradients' fix changes a factor the dense ones
 * carry too), the findings are fixed one after the other, each on top of
 * the fixes before it, and each finding's fix is then its share of the
 * whole: the fewest of those settings that remove it alone.
 */
static bool
agree(struct fixer *fx, struct candidate *fixes, bool *have)
{
	struct audit	*a = fx->audit;
	struct candidate all, x, u, *scratch;
	size_t		 i, n = a->nfindings;
	int		 k, j;
	bool		 ok = false;

	/* What close_over adds is kept only when the whole passes. */
	scratch = xcalloc(n, sizeof *scratch);
	memcpy(scratch, fixes, n * sizeof *fixes);
	if (union_of(a, scratch, have, &all)) {
		close_over(fx, &all, scratch, have);
		if (passes(fx, &all)) {
			memcpy(fixes, scratch, n * sizeof *fixes);
			free(scratch);
			return true;
		}
	}
	memset(&all, 0, sizeof all);
	for (i = 0; i < n; i++)
		if (have[i] && search_after(fx, &a->findings[i], &all, &x))
			all = x;
	memcpy(scratch, fixes, n * sizeof *fixes);
	close_over(fx, &all, scratch, have);
	if (all.n == 0 || !passes(fx, &all)) {
		fx->failed = all;
		free(scratch);
		return false;	/* each finding keeps the fix it has alone */
	}
	for (i = 0; i < n; i++) {
		if (!have[i])
			continue;
		x = all;
		x.flag = NULL;
		if (!fixer_fixes(fx, &a->findings[i], &x))
			continue;
		fixer_minimize(fx, &a->findings[i], &x);
		/* A flag's settings, or some of them, are still the flag. */
		for (k = 0; k < x.n && fixes[i].flag != NULL; k++)
			if (!fixer_candidate_has(&fixes[i], x.key[k]))
				break;
		if (k == x.n)
			x.flag = fixes[i].flag;
		fixes[i] = x;
	}
	/*
	 * What no finding needs alone but the whole does goes to the first
	 * finding whose fix still removes it with them.
	 */
	if (union_of(a, fixes, have, &u) && !(ok = passes(fx, &u)))
		for (i = 0; i < n && !ok; i++) {
			if (!have[i])
				continue;
			x = fixes[i];
			for (j = 0; j < all.n; j++)
				if (!fixer_candidate_has(&u, all.key[j]))
					(void)fixer_candidate_add(&x, all.key[j],
					    all.value[j]);
			if (fixer_fixes(fx, &a->findings[i], &x)) {
				fixes[i] = x;
				ok = true;
			}
		}
	free(scratch);
	return ok;
}

/*
 * For a finding no setting fixes: the first of the settings that bear
 * on it (keys_to_try) with an effect on what the audit finds, which its
 * prose then names; KEY__COUNT when none has.
 */
static enum cfg_key
bearing_key(struct fixer *fx, const struct finding *f)
{
	const struct outcome *o;
	struct candidate t;
	enum cfg_key	 keys[KEY__COUNT];
	const char	*vals[16];
	size_t		 i;
	int		 nkeys, nvals, k, v;

	nkeys = fixer_keys_to_try(fx->config, f->cause, f->kind, keys, 0,
	    KEY__COUNT);
	for (k = 0; k < nkeys; k++) {
		nvals = fixer_values_of(fx->config, keys[k], vals, 16);
		for (v = 0; v < nvals; v++) {
			memset(&t, 0, sizeof t);
			(void)fixer_candidate_add(&t, keys[k], vals[v]);
			o = fixer_evaluate(fx, &t);
			if (!o->valid)
				continue;
			for (i = 0; i < o->nseen && fixer_had(fx, &o->seen[i]); i++)
				;
			if (i < o->nseen || o->nseen != fx->norig)
				return keys[k];
		}
	}
	return KEY__COUNT;
}

/* Each finding's own fix, the earlier ones' first (fix_derive). */
static void
search_all(struct fixer *fx, struct candidate *fixes, bool *have)
{
	struct candidate none;
	size_t		 i;

	memset(&none, 0, sizeof none);
	fx->nchosen = 0;
	for (i = 0; i < fx->audit->nfindings; i++) {
		const struct finding *f = &fx->audit->findings[i];

		if ((have[i] = fixer_search(fx, f, &none, &fixes[i]))) {
			fixer_minimize(fx, f, &fixes[i]);
			fx->chosen[fx->nchosen++] = fixes[i];
		}
	}
}

/* Derive the fixes of a's findings into a (fix_derive). */
static void
derive(struct audit *a)
{
	struct fixer	 fx;
	struct candidate *fixes, alt, none;
	const struct outcome *o;
	struct finding	*f;
	const char	*env;
	bool		*have, have_alt;
	size_t		 i;

	memset(&fx, 0, sizeof fx);
	memset(&none, 0, sizeof none);
	fx.audit = a;
	fx.config = a->config;
	fx.nrecipes = -1;
	env = getenv("GRADAUDIT_TEST_WHOLE_AUDITS");
	fx.whole = env != NULL && *env != '\0';
	fixer_collect_seen(a, &fx.orig, &fx.norig);
	fx.chosen = xcalloc(a->nfindings, sizeof *fx.chosen);
	fixes = xcalloc(a->nfindings, sizeof *fixes);
	have = xcalloc(a->nfindings, sizeof *have);
	search_all(&fx, fixes, have);
	/*
	 * A fix may leave, on its finding's parameters, what another step
	 * got wrong (masked until then); when the fixes together do not
	 * pass for that, each is sought again leaving nothing new at all.
	 */
	for (i = 0; i < a->nfindings && have[i]; i++)
		;
	/* A finding without a fix keeps every union from passing. */
	if (!agree(&fx, fixes, have) && i == a->nfindings &&
	    a->nfindings > 1) {
		o = fixer_evaluate(&fx, &fx.failed);
		fx.strict = fx.failed.n == 0 || !o->valid;
		fx.navoid = o->nseen;
		fx.avoid = xcalloc(fx.navoid + 1, sizeof *fx.avoid);
		for (i = 0; i < fx.navoid; i++) {
			fx.avoid[i] = o->seen[i];
			fx.avoid[i].op = xstrdup(o->seen[i].op);
			fx.avoid[i].param = xstrdup(o->seen[i].param);
		}
		search_all(&fx, fixes, have);
		if (!agree(&fx, fixes, have) && !fx.strict) {
			fx.strict = true;
			search_all(&fx, fixes, have);
			(void)agree(&fx, fixes, have);
		}
	}
	for (i = 0; i < a->nfindings; i++) {
		f = &a->findings[i];
		have_alt = fixer_search_objective(&fx, f, &alt) &&
		    !(have[i] && fixer_candidate_has(&fixes[i], alt.key[0]));
		if (have[i]) {
			f->fix_set = fixtext_settings(a, &fixes[i]);
			f->nfix_set = (size_t)fixes[i].n;
			f->cause = fixes[i].key[0];
			f->fix = fixtext_fix(&fx, f, &fixes[i], have_alt ? &alt :
			    NULL);
		} else {
			/*
			 * A step of plan: is its own cause: no setting bears
			 * on what the user wrote (issue 25).
			 */
			if (!fixer_settable(a->config, f->cause) &&
			    f->cause != KEY_PLAN)
				f->cause = bearing_key(&fx, f);
			f->fix = have_alt ? fixtext_alternative(a, f, &alt) :
			    fixtext_prose(a, f);
		}
		if (have_alt) {
			f->fix_alternative = fixtext_settings(a, &alt);
			f->nfix_alternative = (size_t)alt.n;
		}
	}
	/*
	 * Not an error: the verdict and the findings are the config's, and
	 * only the fixes' search was narrower.
	 */
	if (fx.over_limit > 0)
		fprintf(stderr, "%s: %s: the fix search left out %d candidate "
		    "setting%s whose audit%s went past GRADAUDIT_MAX_MEMORY: "
		    "the fixes given were found without %s\n", progname,
		    a->config->file, fx.over_limit, fx.over_limit == 1 ?
		    "" : "s", fx.over_limit == 1 ? "" : "s",
		    fx.over_limit == 1 ? "it" : "them");
	fixer_free_memo(&fx);
	free(fx.chosen);
	free(fixes);
	free(have);
	if (fx.avoid != NULL)
		fixer_free_seen(fx.avoid, fx.navoid);
	fixer_free_seen(fx.orig, fx.norig);
}

static const struct fix_setting *
copy_settings(struct arena *ar, const struct fix_setting *s, size_t n)
{
	struct fix_setting *c = arena_alloc(ar, (n + 1) * sizeof *c);
	size_t		 i;

	for (i = 0; i < n; i++) {
		c[i].key = s[i].key;		/* cfg_key_path's */
		c[i].value = s[i].value;	/* cfg_key_words' */
	}
	return c;
}

static const char *
copy_string(struct arena *ar, const char *s)
{
	return s != NULL ? arena_strdup(ar, s) : NULL;
}

/*
 * The fixes of a large audit: its findings copied, the audit freed, the
 * fixes derived from the copy, and the config audited again, the fixes
 * then given to its findings, which are the same.
 */
static void
derive_frugally(struct audit *a)
{
	const struct config *cfg = a->config;
	struct sym_context ctx;
	struct audit	 view;
	struct finding	*f, *v;
	size_t		 i, k;

	memset(&view, 0, sizeof view);
	/* The audits again use the cache of the audit they replace. */
	arena_init_cached(&view.arena, a->arena.cache);
	view.config = cfg;
	view.nfindings = a->nfindings;
	view.findings = arena_alloc(&view.arena, (a->nfindings + 1) *
	    sizeof *view.findings);
	for (i = 0; i < a->nfindings; i++) {
		f = &a->findings[i];
		v = &view.findings[i];
		v->kind = f->kind;
		v->cause = f->cause;
		v->op = copy_string(&view.arena, f->op);
		v->fix = copy_string(&view.arena, f->fix);
		v->nparams = f->nparams;
		v->params = arena_alloc(&view.arena, (f->nparams + 1) *
		    sizeof *v->params);
		for (k = 0; k < f->nparams; k++)
			v->params[k] = arena_strdup(&view.arena, f->params[k]);
	}
	audit_free(a);
	derive(&view);
	sym_context_build(&ctx, cfg);
	ctx.blocks = view.arena.cache;
	sym_audit(&ctx, a, NULL, NULL);
	sym_context_free(&ctx);
	for (i = 0; i < a->nfindings && a->nfindings == view.nfindings; i++) {
		f = &a->findings[i];
		v = &view.findings[i];
		if (f->kind != v->kind)
			continue;
		f->cause = v->cause;
		f->fix = copy_string(&a->arena, v->fix);
		f->fix_set = copy_settings(&a->arena, v->fix_set, v->nfix_set);
		f->nfix_set = v->nfix_set;
		f->fix_alternative = copy_settings(&a->arena,
		    v->fix_alternative, v->nfix_alternative);
		f->nfix_alternative = v->nfix_alternative;
	}
	arena_free(&view.arena);
}

void
fix_derive(struct audit *a)
{
	if (a->config == NULL || a->trace != NULL || a->nfindings == 0)
		return;
	if (!a->numeric && a->arena.used_bytes > FIX_FRUGAL_BYTES)
		derive_frugally(a);
	else
		derive(a);
}
