/*
 * The sentences of the fixes: the step's own sentence for the settings it
 * names and one per other setting, what the framework's profile decided
 * and which later release changes it, the alternative objective, and the
 * options that check the fix.
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
#include "symbolic/findings.h"
#include "symbolic/fixer.h"
#include "symbolic/fixtext.h"

/* The longest sentence of a fix. */
#define FIX_TEXT_SIZE		2048

const struct fix_setting *
fixtext_settings(struct audit *a, const struct candidate *c)
{
	struct fix_setting *s;
	int	 i;

	s = arena_alloc(&a->arena, (c->n + 1) * sizeof *s);
	for (i = 0; i < c->n; i++) {
		s[i].key = cfg_key_path(c->key[i]);
		s[i].value = c->value[i];
	}
	return s;
}

static void
append(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
append(char *buf, size_t len, const char *fmt, ...)
{
	size_t	 n = strlen(buf);
	va_list	 ap;

	if (n + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

/* Where a profile's setting was read: its source up to the first colon. */
static void
source_head(const char *source, char *buf, size_t len)
{
	const char	*colon = source != NULL ? strchr(source, ':') : NULL;
	size_t		 n = source == NULL ? 0 : colon != NULL ?
			    (size_t)(colon - source) : strlen(source);

	if (n >= len)
		n = len - 1;
	memcpy(buf, source != NULL ? source : "", n);
	buf[n] = '\0';
}

/* One setting's sentence (findings.c), the value in place of "%s". */
static void
key_text(enum cfg_key k, const char *value, char *buf, size_t len)
{
	const char	*t = setting_fix_text(k, value), *mark;

	if (t == NULL) {
		append(buf, len, "set %s to %s", cfg_key_path(k), value);
		return;
	}
	for (; (mark = strstr(t, "%s")) != NULL; t = mark + 2)
		append(buf, len, "%.*s%s", (int)(mark - t), t, value);
	append(buf, len, "%s", t);
}

/* Does text name key with value ("sync.embedding_grad: before-dp, ...")? */
static bool
names_value(const char *text, const char *key, const char *value)
{
	const char	*p, *q, *end;
	char		 k[128];
	size_t		 n = strlen(value);

	snprintf(k, sizeof k, "%s: ", key);
	for (p = text; (p = strstr(p, k)) != NULL; p = end) {
		p += strlen(k);
		end = p + strcspn(p, ";)");
		for (q = p; (q = strstr(q, value)) != NULL && q < end; q += n)
			if ((q == p || q[-1] == ' ') && q[n] != '-' &&
			    !(q[n] >= 'a' && q[n] <= 'z'))
				return true;
	}
	return false;
}

/*
 * The first release after the config's own that sets the fix's setting i
 * to a value with which the fix still removes f (that value in place of
 * the fix's), or NULL; *value is that value.
 */
static const struct fw_profile *
fixing_release(struct fixer *fx, const struct finding *f,
    const struct candidate *fix, int i, const char **value)
{
	const struct config *c = fx->config;
	const struct framework *fw = c->profile->framework;
	const struct fw_profile *p;
	struct candidate t;
	char	 v[64];
	int	 j;

	for (j = (int)(c->profile - fw->profiles) + 1; j < fw->nprofiles;
	    j++) {
		p = &fw->profiles[j];
		if (!keyset_has(&p->settings.given, fix->key[i]))
			continue;
		cfg_key_value(&p->settings, fix->key[i], v, sizeof v);
		if (fixer_current_is(c, fix->key[i], v))
			continue;
		t = *fix;
		if ((t.value[i] = fixer_word_of(fix->key[i], v)) != NULL &&
		    fixer_fixes(fx, f, &t)) {
			*value = t.value[i];
			return p;
		}
	}
	return NULL;
}

/* "k: v (where the profile read it)", of setting k of the config. */
static void
profile_setting(const struct config *c, enum cfg_key k, char *buf,
    size_t len)
{
	char	 cur[64], head[256];

	cfg_key_value(c, k, cur, sizeof cur);
	source_head(c->profile->source[k], head, sizeof head);
	append(buf, len, "%s: %s (%s)", cfg_key_path(k), cur, head);
}

/*
 * Under a profile, what the framework decided of the fix's settings,
 * where that was read, and what changes it: a later release, or the
 * framework's code.
 */
static void
profile_text(struct fixer *fx, const struct finding *f,
    const struct candidate *fix, char *buf, size_t len)
{
	const struct config *c = fx->config;
	const struct fw_profile *later;
	const char	*value;
	char		 head[256], version[32];
	int		 i;

	for (i = 0; i < fix->n; i++) {
		if (!fixer_from_profile(c, fix->key[i]))
			continue;
		append(buf, len, ". %s sets ", c->framework);
		profile_setting(c, fix->key[i], buf, len);
		if ((later = fixing_release(fx, f, fix, i, &value)) != NULL) {
			fw_version_format(&later->since, version,
			    sizeof version);
			source_head(later->source[fix->key[i]], head,
			    sizeof head);
			append(buf, len, ", which %s %s changes to %s (%s)",
			    c->profile->framework->name, version, value, head);
		} else
			append(buf, len, ", which no later release with a "
			    "profile changes to a value that fixes this");
	}
}

/* Pass the flag: what the profile does without it. */
static void
flag_text(const struct config *c, const struct candidate *fix, char *buf,
    size_t len)
{
	int	 i, n = 0;

	append(buf, len, "pass %s", fix->flag);
	for (i = 0; i < fix->n; i++) {
		if (!fixer_from_profile(c, fix->key[i]))
			continue;
		append(buf, len, "%s", n == 0 ? ": without it, " : " and ");
		if (n++ == 0)
			append(buf, len, "%s sets ", c->framework);
		profile_setting(c, fix->key[i], buf, len);
	}
}

static void
options_text(const struct candidate *c, char *buf, size_t len)
{
	int	i;

	for (i = 0; i < c->n; i++)
		append(buf, len, "%s--set %s=%s", i > 0 ? " " : "",
		    cfg_key_path(c->key[i]), c->value[i]);
}

/*
 * The sentence of a fix: the framework's flag, or the step's own sentence
 * for the settings it names and each other setting's; what the profile
 * decided; the alternative; and the options that check it.
 */
const char *
fixtext_fix(struct fixer *fx, const struct finding *f,
    const struct candidate *fix, const struct candidate *alt)
{
	char	 buf[FIX_TEXT_SIZE];
	int	 i, own = 0;

	buf[0] = '\0';
	if (fix->flag != NULL)
		flag_text(fx->config, fix, buf, sizeof buf);
	else {
		for (i = 0; i < fix->n; i++) {
			if (names_value(f->fix, cfg_key_path(fix->key[i]),
			    fix->value[i])) {
				if (own++ > 0)
					continue;
				append(buf, sizeof buf, "%s%s", i > 0 ? "; " :
				    "", f->fix);
				continue;
			}
			if (i > 0)
				append(buf, sizeof buf, "; ");
			key_text(fix->key[i], fix->value[i], buf, sizeof buf);
		}
		profile_text(fx, f, fix, buf, sizeof buf);
	}
	if (alt != NULL) {
		append(buf, sizeof buf, "; or, if %s is what the step means "
		    "to minimize, state it (", alt->value[0]);
		options_text(alt, buf, sizeof buf);
		append(buf, sizeof buf, ")");
	}
	append(buf, sizeof buf, "; check it with ");
	options_text(fix, buf, sizeof buf);
	return arena_strdup(&fx->audit->arena, buf);
}

/* A finding no setting fixes: its prose, and the setting that bears on it. */
const char *
fixtext_prose(struct audit *a, const struct finding *f)
{
	char	 buf[FIX_TEXT_SIZE];

	buf[0] = '\0';
	append(buf, sizeof buf, "%s", f->fix != NULL ? f->fix : "");
	/* A step of plan: is fixed by editing it, which the text says. */
	if (f->cause < KEY__COUNT && f->cause != KEY_PLAN)
		append(buf, sizeof buf, "; no setting gradaudit models "
		    "removes it without leaving another finding (%s bears on "
		    "it)", cfg_key_path(f->cause));
	return arena_strdup(&a->arena, buf);
}

/* The alternative alone, when no framework setting fixes the finding. */
const char *
fixtext_alternative(struct audit *a, const struct finding *f,
    const struct candidate *alt)
{
	char	 buf[FIX_TEXT_SIZE];

	buf[0] = '\0';
	if (f->fix != NULL)
		append(buf, sizeof buf, "%s; ", f->fix);
	append(buf, sizeof buf, "or, if %s is what the step means to "
	    "minimize, state it: ", alt->value[0]);
	options_text(alt, buf, sizeof buf);
	return arena_strdup(&a->arena, buf);
}

/*
 * The finding of the config that owns r, a finding the fixes together
 * left: the first whose parameters r is on (it masked r), else the
 * first with a fix.
 */
