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
#include "symbolic/fixer.h"
#include "symbolic/fixtext.h"

/* The longest sentence of a fix. */
#define FIX_TEXT_SIZE		2048

/*
 * What changing a setting does, for the prose of a fix whose own sentence
 * (the step's) does not name it; value NULL: any value, which stands
 * for "%s" in the text.
 */
static const struct {
	enum cfg_key	 key;
	const char	*value;
	const char	*text;
} key_texts[] = {
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
};

#define NKEY_TEXTS	(sizeof key_texts / sizeof key_texts[0])

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

/* One setting's sentence, from key_texts, the value in place of "%s". */
static void
key_text(enum cfg_key k, const char *value, char *buf, size_t len)
{
	const char	*t, *mark;
	size_t		 i;

	for (i = 0; i < NKEY_TEXTS; i++) {
		if (key_texts[i].key != k || (key_texts[i].value != NULL &&
		    strcmp(key_texts[i].value, value) != 0))
			continue;
		for (t = key_texts[i].text; (mark = strstr(t, "%s")) != NULL;
		    t = mark + 2)
			append(buf, len, "%.*s%s", (int)(mark - t), t, value);
		append(buf, len, "%s", t);
		return;
	}
	append(buf, len, "set %s to %s", cfg_key_path(k), value);
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
		    fixer_judge(fx, f, fixer_evaluate(fx, &t)) == FIX_YES) {
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
	if (f->cause < KEY__COUNT)
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
