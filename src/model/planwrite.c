/*
 * Sync steps written back as plan: steps (planwrite.h).  The reader
 * (config/plan-read.c) and the expansion (syncplan.c's emit_plan_item)
 * are the other half: a step written here and read back is the same
 * step, which tests/plan-preset.test checks on every testdata case.
 */
#include <stdlib.h>
#include <string.h>

#include "base/rational.h"
#include "base/xmalloc.h"
#include "config/plan.h"
#include "model/mesh.h"
#include "model/planwrite.h"

/* A parameter's name as a glob that matches it alone: *?[\ escaped. */
static char *
literal(const char *name, size_t n)
{
	char	*g = xmalloc(2 * n + 1), *o = g;
	size_t	 i;

	for (i = 0; i < n; i++) {
		if (strchr("*?[\\", name[i]) != NULL)
			*o++ = '\\';
		*o++ = name[i];
	}
	*o = '\0';
	return g;
}

static void
add(char ***v, int *n, char *s)
{
	*v = xreallocarray(*v, *n + 1, sizeof **v);
	(*v)[(*n)++] = s;
}

/* Is every character of [s, e) a digit (and is there one)? */
static bool
all_digits(const char *s, const char *e)
{
	if (s == e)
		return false;
	for (; s < e; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/*
 * The globs worth trying for one name: the name, the name with every
 * layer number a star ("layers.*.norm1.weight"), every part between dots
 * without its number, inside stars ("*norm*"), and every tail and head
 * at a dot ("*.norm1.weight", "layers.3.*").
 */
static void
candidates(const char *name, char ***v, int *n)
{
	const char	*dot, *s, *e;
	char		*g, *o;
	size_t		 len = strlen(name);
	bool		 any = false;

	add(v, n, literal(name, len));
	g = o = xmalloc(2 * len + 2);
	for (s = name; ; s = dot + 1) {
		dot = strchr(s, '.');
		if (dot == NULL)
			dot = s + strlen(s);
		if (all_digits(s, dot)) {
			*o++ = '*';
			any = true;
		} else {
			char *l = literal(s, dot - s);

			strcpy(o, l);
			o += strlen(l);
			free(l);
		}
		if (*dot == '\0')
			break;
		*o++ = '.';
	}
	*o = '\0';
	if (any)
		add(v, n, g);
	else
		free(g);
	for (s = name; ; s = dot + 1) {
		dot = strchr(s, '.');
		if (dot == NULL)
			dot = s + strlen(s);
		e = dot;
		while (e > s && e[-1] >= '0' && e[-1] <= '9')
			e--;
		if (e > s) {
			g = literal(s, e - s);
			o = xmalloc(strlen(g) + 3);
			snprintf(o, strlen(g) + 3, "*%s*", g);
			free(g);
			add(v, n, o);
		}
		if (*dot == '\0')
			break;
	}
	for (dot = strchr(name, '.'); dot != NULL; dot = strchr(dot + 1, '.')) {
		g = literal(dot, strlen(dot));
		o = xmalloc(strlen(g) + 2);
		o[0] = '*';
		strcpy(o + 1, g);
		free(g);
		add(v, n, o);
		g = literal(name, dot - name + 1);
		o = xmalloc(strlen(g) + 2);
		strcpy(o, g);
		strcat(o, "*");
		free(g);
		add(v, n, o);
	}
}

static int
by_text(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Is glob a better pick than best: more new names, then shorter, then first? */
static bool
better(int gain, const char *glob, int best_gain, const char *best)
{
	if (gain != best_gain)
		return gain > best_gain;
	if (strlen(glob) != strlen(best))
		return strlen(glob) < strlen(best);
	return strcmp(glob, best) < 0;
}

int
planwrite_globs(const struct model *m, const bool *sel, char ***out)
{
	char	**cand = NULL, **globs = NULL;
	bool	 *hits, *covered;
	int	  ncand = 0, nglobs = 0, nsel = 0, i, j, p, best, gain, bgain;
	int	  left;

	*out = NULL;
	for (p = 0; p < m->nparams; p++)
		if (sel[p]) {
			nsel++;
			candidates(m->params[p].name, &cand, &ncand);
		}
	if (nsel == m->nparams || nsel == 0) {
		for (i = 0; i < ncand; i++)
			free(cand[i]);
		free(cand);
		*out = xcalloc(1, sizeof **out);
		return 0;
	}
	qsort(cand, ncand, sizeof *cand, by_text);
	/* Keep each glob once, and only those that match no other name. */
	hits = xcalloc((size_t)ncand * m->nparams, sizeof *hits);
	for (i = j = 0; i < ncand; i++) {
		if (j > 0 && strcmp(cand[j - 1], cand[i]) == 0) {
			free(cand[i]);
			continue;
		}
		for (p = 0; p < m->nparams; p++) {
			hits[(size_t)j * m->nparams + p] =
			    plan_glob_match(cand[i], m->params[p].name);
			if (hits[(size_t)j * m->nparams + p] && !sel[p])
				break;
		}
		if (p < m->nparams) {
			free(cand[i]);
			continue;
		}
		cand[j++] = cand[i];
	}
	ncand = j;
	covered = xcalloc(m->nparams, sizeof *covered);
	for (left = nsel; left > 0; left -= bgain) {
		best = -1;
		bgain = 0;
		for (i = 0; i < ncand; i++) {
			gain = 0;
			for (p = 0; p < m->nparams; p++)
				gain += hits[(size_t)i * m->nparams + p] &&
				    !covered[p];
			if (gain > 0 && (best < 0 ||
			    better(gain, cand[i], bgain, cand[best]))) {
				best = i;
				bgain = gain;
			}
		}
		/* Two parameters of one name, one selected: no glob says it. */
		if (best < 0)
			break;
		/* A glob for one name says less than the name. */
		for (p = 0; p < m->nparams; p++) {
			if (hits[(size_t)best * m->nparams + p] && !covered[p] &&
			    bgain == 1)
				add(&globs, &nglobs, literal(m->params[p].name,
				    strlen(m->params[p].name)));
			covered[p] = covered[p] ||
			    hits[(size_t)best * m->nparams + p];
		}
		if (bgain > 1)
			add(&globs, &nglobs, xstrdup(cand[best]));
	}
	for (i = 0; i < ncand; i++)
		free(cand[i]);
	free(cand);
	free(hits);
	free(covered);
	add(&globs, &nglobs, NULL);
	*out = globs;
	if (left > 0) {
		planwrite_free_globs(globs);
		*out = NULL;
		return -1;
	}
	qsort(globs, nglobs - 1, sizeof *globs, by_text);
	return nglobs - 1;
}

void
planwrite_free_globs(char **globs)
{
	char	**g;

	if (globs == NULL)
		return;
	for (g = globs; *g != NULL; g++)
		free(*g);
	free(globs);
}

/* A glob as a YAML double-quoted scalar (a plain * would be an alias). */
static void
write_quoted(FILE *fp, const char *s)
{
	fputc('"', fp);
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', fp);
		fputc(*s, fp);
	}
	fputc('"', fp);
}

/* params: [...], folded before column 78 under its first glob. */
static void
write_params(FILE *fp, char **globs)
{
	int	 col, i;

	col = fprintf(fp, "    params: [");
	for (i = 0; globs[i] != NULL; i++) {
		if (i > 0 && col + (int)strlen(globs[i]) + 4 > 78) {
			fprintf(fp, ",\n      ");
			col = 6;
		} else if (i > 0)
			col += fprintf(fp, ", ");
		write_quoted(fp, globs[i]);
		col += (int)strlen(globs[i]) + 2;
	}
	fprintf(fp, "]\n");
}

/* The op line, or NULL with why when the vocabulary has no such step. */
static const char *
op_word(const struct sync_step *s)
{
	switch (s->op) {
	case SYNC_SCALE:
		return "scale";
	case SYNC_MASK_REPLICAS:
		return "to-partial";
	case SYNC_ALL_REDUCE:
		return "all-reduce";
	case SYNC_REDUCE_SCATTER:
		return "reduce-scatter";
	case SYNC_ALL_GATHER:
		return "all-gather";
	case SYNC_ACCUMULATE:
		return "accumulate";
	case SYNC_RESET:
		return "reset";
	case SYNC_LOSS_TERM:
		/* Only a plan: writes one, which planwrite_item copies. */
		break;
	}
	return NULL;
}

/*
 * What the reader would refuse or read as another step: a factor that
 * is not positive, a mask over another group, a buffer for an op that
 * works on parameters or parameters for a reduce-scatter, AVG where
 * only a reduction has it.
 */
static const char *
unsayable(const struct sync_step *s, const struct model *m)
{
	if (s->op == SYNC_SCALE && (s->scale.num <= 0 || s->scale.den <= 0))
		return "a factor that is not positive";
	if (s->op == SYNC_MASK_REPLICAS && s->group != GROUP_TP)
		return "a to-partial over another group than tp";
	if (s->op == SYNC_MASK_REPLICAS && m->mesh.slices > 1 &&
	    m->mesh.etp > 1 && s->replicate.slice != PLACE_REPLICATE &&
	    s->replicate.etp != PLACE_REPLICATE)
		return "a to-partial that zeroes nowhere";
	if (s->target == TARGET_BUFFER && (s->op == SYNC_MASK_REPLICAS ||
	    s->op == SYNC_ALL_GATHER))
		return "a buffer for a step that works on parameters";
	if (s->target != TARGET_BUFFER && s->op == SYNC_REDUCE_SCATTER)
		return "a reduce-scatter of parameters, not of a buffer";
	if (s->average && s->op != SYNC_ALL_REDUCE &&
	    s->op != SYNC_REDUCE_SCATTER)
		return "an average in a step that does not reduce";
	return NULL;
}

/*
 * The sub-dimensions a mask zeroes over, as replicate: names them: only
 * one of more than one rank zeroes any, so a Replicate one of size 1 is
 * left out where that is shorter, and named where the step zeroes
 * nothing (a to-partial without replicate: is the whole of tp).
 */
static int
mask_words(const struct sync_step *s, const struct model *m)
{
	int	 n = 0;

	if (s->replicate.slice == PLACE_REPLICATE && m->mesh.slices > 1)
		n |= PLAN_REPLICATE_SLICES;
	if (s->replicate.etp == PLACE_REPLICATE && m->mesh.etp > 1)
		n |= PLAN_REPLICATE_ETP;
	if (n == 0)
		n = m->mesh.etp == 1 ? PLAN_REPLICATE_ETP :
		    PLAN_REPLICATE_SLICES;
	return n;
}

/*
 * A step's schedule, where it is not the default of its kind (after the
 * last micro-batch; a reset, before every one), as the indexes it runs
 * at: the reader takes them back as the same bits.
 */
static void
write_schedule(FILE *fp, const struct sync_step *s, const struct model *m)
{
	int		 K = m->loss.micro_batches, j, n = 0;
	uint32_t	 all = K == 32 ? UINT32_MAX : ((uint32_t)1 << K) - 1;
	uint32_t	 want = s->op == SYNC_RESET ? all :
			    (uint32_t)1 << (K - 1);

	if (s->micro_batches == want)
		return;
	if (s->micro_batches == 0) {
		fprintf(fp, "    micro-batches: none\n");
		return;
	}
	for (j = 0; j < K; j++)
		if (s->micro_batches >> j & 1)
			n += fprintf(fp, "%s%d", n == 0 ?
			    "    micro-batches: [" : ", ", j);
	fprintf(fp, "]\n");
}

/*
 * A factor needs quotes in YAML unless it is digits, names, /, * and
 * parentheses, and does not start with *, an alias.
 */
static void
write_factor(FILE *fp, const char *expr)
{
	if (expr[0] != '*' && strspn(expr, "0123456789abcdefghijklmnopqrstu"
	    "vwxyz_/*()") == strlen(expr))
		fprintf(fp, "%s", expr);
	else
		write_quoted(fp, expr);
}

/*
 * A scale as the rule named it over the mesh's sizes, so that the plan
 * written follows --set and sweep as the preset does; as its number where
 * the rule named none, or where the name does not evaluate to the value
 * here (a name must not say what the step does not do).
 */
static const char *
scale_text(const struct sync_step *s, const struct model *m, char *buf,
    size_t len)
{
	int64_t		 sizes[PLAN_NAME__COUNT];
	struct rational	 q;
	char		 why[64];
	size_t		 at;

	plan_sizes(m->config, sizes);
	if (s->scale_text[0] != '\0' && plan_expr_eval(s->scale_text,
	    strlen(s->scale_text), sizes, &q, &at, why, sizeof why) == 0 &&
	    q_equal(q, s->scale))
		return s->scale_text;
	q_format(s->scale, buf, len);
	return buf;
}

int
planwrite_step(FILE *fp, const struct sync_step *s, const struct model *m,
    char *why, size_t len)
{
	const char	*no = unsayable(s, m);
	char		 q[48], **globs = NULL;
	int		 n = 0;

	/*
	 * A step on a loss term selects no gradient (syncplan.h): only a
	 * plan: writes one, and it is written as its item was.
	 */
	if (s->op == SYNC_LOSS_TERM) {
		planwrite_item(fp, &m->config->plan[s->plan_item]);
		return 0;
	}
	if (no == NULL && s->target == TARGET_PARAMS &&
	    planwrite_globs(m, s->params, &globs) == -1)
		no = "parameters of one name that it selects and leaves";
	if (no != NULL) {
		snprintf(why, len, "%s", no);
		return -1;
	}
	if (s->op == SYNC_SCALE) {
		fprintf(fp, "  - scale: ");
		write_factor(fp, scale_text(s, m, q, sizeof q));
		fprintf(fp, "\n");
	} else if (s->op == SYNC_RESET)
		fprintf(fp, "  - reset: grads\n");
	else if (s->op == SYNC_ACCUMULATE)
		fprintf(fp, "  - accumulate: %s\n",
		    cfg_plan_dtype_words[s->dtype]);
	else
		fprintf(fp, "  - %s: %s\n", op_word(s),
		    mesh_group_name(s->group));
	if (s->op == SYNC_MASK_REPLICAS && (n = mask_words(s, m)) !=
	    (PLAN_REPLICATE_SLICES | PLAN_REPLICATE_ETP))
		fprintf(fp, "    replicate: %s\n",
		    cfg_plan_replicate_words[n == PLAN_REPLICATE_ETP]);
	if (s->average)
		fprintf(fp, "    average: true\n");
	if (s->dtype >= 0 && s->op != SYNC_ACCUMULATE)
		fprintf(fp, "    dtype: %s\n", cfg_plan_dtype_words[s->dtype]);
	if (s->target == TARGET_BUFFER)
		fprintf(fp, "    buffer: %s\n", syncplan_buffer_name(s->buffer));
	else if (globs[0] != NULL)
		write_params(fp, globs);
	write_schedule(fp, s, m);
	planwrite_free_globs(globs);
	return 0;
}


int
planwrite_declare(FILE *fp, const struct sync_step *s, const struct model *m,
    char *why, size_t len)
{
	char	**globs = NULL;
	bool	  partial;
	int	  n = 0;

	if (planwrite_globs(m, s->params, &globs) == -1) {
		snprintf(why, len, "parameters of one name that it selects "
		    "and leaves");
		planwrite_free_globs(globs);
		return -1;
	}
	partial = pl_any(s->declared, PLACE_PARTIAL);
	fprintf(fp, "  - declare: %s\n", cfg_plan_declare_words[partial ?
	    PLAN_DECLARE_PARTIAL : PLAN_DECLARE_REPLICATE]);
	/* The Replicate sub-dimensions of tp that have more than one rank. */
	if (partial && s->declared.slice == PLACE_REPLICATE &&
	    m->mesh.slices > 1)
		n |= PLAN_REPLICATE_SLICES;
	if (partial && s->declared.etp == PLACE_REPLICATE && m->mesh.etp > 1)
		n |= PLAN_REPLICATE_ETP;
	if (n != 0)
		fprintf(fp, "    replicate: %s\n", cfg_plan_replicate_words[
		    n == PLAN_REPLICATE_ETP]);
	if (globs[0] != NULL)
		write_params(fp, globs);
	planwrite_free_globs(globs);
	return 0;
}

void
planwrite_item(FILE *fp, const struct plan_item *it)
{
	static const char *const ops[] = {
		[PLAN_SCALE] = "scale", [PLAN_ALL_REDUCE] = "all-reduce",
		[PLAN_REDUCE_SCATTER] = "reduce-scatter",
		[PLAN_ALL_GATHER] = "all-gather",
		[PLAN_TO_PARTIAL] = "to-partial",
		[PLAN_RESET] = "reset", [PLAN_ACCUMULATE] = "accumulate",
		[PLAN_DECLARE] = "declare",
		[PLAN_GATHER_LOSS] = "gather-loss",
	};
	char	**globs;
	int	  j, n = 0;

	if (it->op == PLAN_PRESET) {
		fprintf(fp, "  - preset\n");
		return;
	}
	fprintf(fp, "  - %s: ", ops[it->op]);
	if (it->op == PLAN_SCALE)
		write_factor(fp, it->expr);
	else if (it->op == PLAN_RESET)
		fprintf(fp, "grads");
	else if (it->op == PLAN_DECLARE)
		fprintf(fp, "%s", cfg_plan_declare_words[it->declare]);
	else if (it->op == PLAN_ACCUMULATE)
		fprintf(fp, "%s", cfg_plan_dtype_words[it->dtype]);
	else
		fprintf(fp, "%s", cfg_plan_group_name(it->group));
	fprintf(fp, "\n");
	if (it->op != PLAN_ACCUMULATE && it->dtype >= 0)
		fprintf(fp, "    dtype: %s\n", cfg_plan_dtype_words[it->dtype]);
	if (it->op == PLAN_TO_PARTIAL && it->replicate !=
	    (PLAN_REPLICATE_SLICES | PLAN_REPLICATE_ETP))
		fprintf(fp, "    replicate: %s\n", cfg_plan_replicate_words[
		    it->replicate == PLAN_REPLICATE_ETP]);
	if (it->op == PLAN_DECLARE && it->activation >= 0)
		fprintf(fp, "    activation: %s\n",
		    cfg_plan_activation_words[it->activation]);
	if (it->op == PLAN_DECLARE && it->replicate != 0)
		fprintf(fp, "    replicate: %s\n", it->replicate ==
		    PLAN_REPLICATE_ETP ? "etp" : it->replicate ==
		    PLAN_REPLICATE_SLICES ? "slices" : "[slices, etp]");
	if (it->average)
		fprintf(fp, "    average: true\n");
	if (it->op == PLAN_GATHER_LOSS && !it->autograd)
		fprintf(fp, "    autograd: false\n");
	if (it->term >= 0)
		fprintf(fp, "    term: %s\n", cfg_plan_term_words[it->term]);
	if (it->buffer_mark.line > 0)
		fprintf(fp, "    buffer: %s\n",
		    cfg_plan_buffer_words[it->buffer]);
	if (it->nglobs > 0) {
		globs = xcalloc(it->nglobs + 1, sizeof *globs);
		for (j = 0; j < it->nglobs; j++)
			globs[j] = it->globs[j];
		write_params(fp, globs);
		free(globs);
	}
	for (j = 0; j < it->nstages; j++)
		n += fprintf(fp, "%s%d", j == 0 ? "    stages: [" : ", ",
		    it->stages[j]);
	if (n > 0)
		fprintf(fp, "]\n");
	if (cfg_plan_when_words[it->when] != NULL)
		fprintf(fp, "    micro-batches: %s\n",
		    cfg_plan_when_words[it->when]);
	for (j = 0, n = 0; j < it->nmicro_batches; j++)
		n += fprintf(fp, "%s%d", j == 0 ? "    micro-batches: [" :
		    ", ", it->micro_batches[j]);
	if (n > 0)
		fprintf(fp, "]\n");
}
