/*
 * Reading plan: (plan.h) from libyaml events in the reader's manner:
 * stop at the first node that does not fit, with its mark and the step's
 * path ("plan[2].params[1]"), one line on stderr.  reader.c's load_value
 * hands the sequence here (reader_load_plan, reader.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "base/suggest.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/plan.h"
#include "config/planexpr.h"
#include "config/reader.h"

/*
 * The keys of a step's mapping; item_op() says which are operations.
 * reduce-scatter, all-gather and to-partial move a gradient between
 * layouts and placements (plan_layout_item), as the preset's steps do;
 * reset and micro-batches: schedule a step among the micro-batches;
 * accumulate and dtype: say which dtype's buffer holds a gradient;
 * gather-loss and term: act on a loss term before its backward;
 * activation: has a declare speak of an activation's gradient inside the
 * backward instead of parameters'.
 */
enum item_key { IK_SCALE, IK_ALL_REDUCE, IK_REDUCE_SCATTER, IK_ALL_GATHER,
	IK_TO_PARTIAL, IK_RESET, IK_ACCUMULATE, IK_DECLARE, IK_GATHER_LOSS,
	IK_AVERAGE, IK_PARAMS, IK_STAGES, IK_BUFFER, IK_REPLICATE, IK_DTYPE,
	IK_MICRO_BATCHES, IK_TERM, IK_AUTOGRAD, IK_ACTIVATION, IK__COUNT };
static const char *const item_keys[IK__COUNT + 1] = {
	"scale", "all-reduce", "reduce-scatter", "all-gather", "to-partial",
	"reset", "accumulate", "declare", "gather-loss", "average", "params",
	"stages", "buffer", "replicate", "dtype", "micro-batches", "term",
	"autograd", "activation", NULL
};

/* The operation a key names, or -1 for a selector or an option. */
static int
item_op(int k)
{
	switch (k) {
	case IK_SCALE:
		return PLAN_SCALE;
	case IK_ALL_REDUCE:
		return PLAN_ALL_REDUCE;
	case IK_REDUCE_SCATTER:
		return PLAN_REDUCE_SCATTER;
	case IK_ALL_GATHER:
		return PLAN_ALL_GATHER;
	case IK_TO_PARTIAL:
		return PLAN_TO_PARTIAL;
	case IK_RESET:
		return PLAN_RESET;
	case IK_ACCUMULATE:
		return PLAN_ACCUMULATE;
	case IK_DECLARE:
		return PLAN_DECLARE;
	case IK_GATHER_LOSS:
		return PLAN_GATHER_LOSS;
	default:
		return -1;
	}
}

#define OP_WORDS	"scale, all-reduce, reduce-scatter, all-gather, " \
			"to-partial, reset, accumulate, declare or " \
			"gather-loss"

/* "plan[15]", and with a key and an index: "plan[15].params[63]". */
#define ITEM_PATH_SIZE	16
#define PATH_SIZE	48

static void
quoted(char *buf, size_t size, const yaml_event_t *ev)
{
	char	 esc[QUOTE_SIZE];

	text_escape(esc, sizeof esc, ev->data.scalar.value,
	    ev->data.scalar.length);
	snprintf(buf, size, "\"%s\"", esc);
}

static bool
scalar_is(const yaml_event_t *ev, const char *word)
{
	return ev->type == YAML_SCALAR_EVENT &&
	    ev->data.scalar.length == strlen(word) &&
	    memcmp(ev->data.scalar.value, word, strlen(word)) == 0;
}

/* A scalar with no control character and no alias (empty is the caller's). */
static int
want_scalar(struct loader *ld, const yaml_event_t *ev, const char *path,
    const char *what)
{
	char	 got[GOT_SIZE];
	size_t	 i;

	if (ev->type == YAML_SCALAR_EVENT && !reader_is_null_scalar(ev)) {
		for (i = 0; i < ev->data.scalar.length; i++)
			if (ev->data.scalar.value[i] < 0x20 ||
			    ev->data.scalar.value[i] == 0x7f)
				break;
		if (i == ev->data.scalar.length)
			return 0;
	}
	reader_describe(got, sizeof got, ev);
	reader_error_at(ld, &ev->start_mark, path, "expected %s, got %s", what,
	    got);
	return -1;
}

static char *
scalar_dup(const yaml_event_t *ev)
{
	char	*s = xmalloc(ev->data.scalar.length + 1);

	memcpy(s, ev->data.scalar.value, ev->data.scalar.length);
	s[ev->data.scalar.length] = '\0';
	return s;
}

/*
 * The factor: read at once with every size 1, which finds each error but
 * an overflow with the real sizes (plan_violation).  The column counts
 * from the scalar's first character, inside its quotes.
 */
static int
read_scale(struct loader *ld, struct plan_item *it, const yaml_event_t *ev,
    const char *path)
{
	struct rational	 v;
	yaml_mark_t	 at = ev->start_mark;
	char		 why[MSG_SIZE];
	size_t		 off;
	bool		 quoted_style;

	if (want_scalar(ld, ev, path, "a factor such as 1/micro_batches") ==
	    -1)
		return -1;
	quoted_style = ev->data.scalar.style ==
	    YAML_SINGLE_QUOTED_SCALAR_STYLE ||
	    ev->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
	if (ev->data.scalar.style == YAML_LITERAL_SCALAR_STYLE ||
	    ev->data.scalar.style == YAML_FOLDED_SCALAR_STYLE) {
		reader_error_at(ld, &at, path, "expected a factor on one "
		    "line, got a block scalar");
		return -1;
	}
	if (plan_expr_eval((const char *)ev->data.scalar.value,
	    ev->data.scalar.length, NULL, &v, &off, why, sizeof why) == -1) {
		/*
		 * The offset is into the scalar's value: it is a column of
		 * the file only where the value is the text as written, on
		 * one line (no escape, no folded line); else the error
		 * points at the scalar.
		 */
		if (ev->end_mark.line == at.line && ev->end_mark.index -
		    at.index == ev->data.scalar.length + (quoted_style ? 2 : 0))
			at.column += off + (quoted_style ? 1 : 0);
		reader_error_at(ld, &at, path, "%s", why);
		return -1;
	}
	it->expr = scalar_dup(ev);
	return 0;
}

/*
 * What a reset zeroes: the selected gradients, accumulated so far (a
 * framework's zero_grad, or param.grad = None, between micro-batches).
 * The word says what is reset, so that a step reads as the code it
 * stands for; it is the only one.
 */
static int
read_reset(struct loader *ld, const yaml_event_t *ev, const char *path)
{
	char	 q[QUOTED_SIZE];

	if (want_scalar(ld, ev, path, "\"grads\"") == -1)
		return -1;
	if (scalar_is(ev, "grads"))
		return 0;
	quoted(q, sizeof q, ev);
	reader_error_at(ld, &ev->start_mark, path, "unknown reset %s (a reset "
	    "zeroes \"grads\")", q);
	return -1;
}

/*
 * A plain decimal of at most 8 digits below `limit` into *v, or -1.
 */
static int
plain_index(const yaml_event_t *ev, int64_t limit, int64_t *v)
{
	size_t	 i;

	*v = 0;
	if (ev->type != YAML_SCALAR_EVENT || !reader_is_plain(ev) ||
	    ev->data.scalar.length == 0 || ev->data.scalar.length > 8 ||
	    (ev->data.scalar.length > 1 && ev->data.scalar.value[0] == '0'))
		return -1;
	for (i = 0; i < ev->data.scalar.length; i++) {
		if (ev->data.scalar.value[i] < '0' ||
		    ev->data.scalar.value[i] > '9')
			return -1;
		*v = *v * 10 + (ev->data.scalar.value[i] - '0');
	}
	return *v < limit ? 0 : -1;
}

/*
 * Is v already in a list of stages or micro-batches?  A step runs once
 * per stage and micro-batch it names: a second mention would read as a
 * second run that the engines do not make.
 */
static bool
listed_twice(struct loader *ld, const yaml_event_t *ev, const char *path,
    const char *what, const int *list, int n, int64_t v)
{
	int	 i;

	for (i = 0; i < n; i++)
		if (list[i] == v) {
			reader_error_at(ld, &ev->start_mark, path, "%s %lld "
			    "is listed twice", what, (long long)v);
			return true;
		}
	return false;
}

/*
 * One element of params:, stages: or micro-batches:, at index n of its
 * list (-1: the value was a scalar, not a list).
 */
static int
read_element(struct loader *ld, struct plan_item *it, enum item_key k,
    const yaml_event_t *ev, const char *path, int n)
{
	char	 p[PATH_SIZE + 8], got[GOT_SIZE];
	int64_t	 v = 0;

	if (n >= 0)
		snprintf(p, sizeof p, "%s[%d]", path, n);
	else
		snprintf(p, sizeof p, "%s", path);
	if (n >= PLAN_MAX_LIST) {
		reader_error_at(ld, &ev->start_mark, p, "more than %d "
		    "elements", PLAN_MAX_LIST);
		return -1;
	}
	if (k == IK_PARAMS) {
		if (want_scalar(ld, ev, p, "a glob over parameter names") == -1)
			return -1;
		it->globs = xreallocarray(it->globs, it->nglobs + 1,
		    sizeof *it->globs);
		it->glob_marks = xreallocarray(it->glob_marks, it->nglobs + 1,
		    sizeof *it->glob_marks);
		it->glob_marks[it->nglobs] = reader_mark(&ev->start_mark);
		it->globs[it->nglobs++] = scalar_dup(ev);
		return 0;
	}
	if (k == IK_MICRO_BATCHES) {
		/* An index below the most micro-batches a config may run. */
		if (plain_index(ev, CFG_MAX_MICRO_BATCHES, &v) == 0) {
			if (listed_twice(ld, ev, p, "micro-batch",
			    it->micro_batches, it->nmicro_batches, v))
				return -1;
			it->micro_batches = xreallocarray(it->micro_batches,
			    it->nmicro_batches + 1, sizeof *it->micro_batches);
			it->micro_batch_marks = xreallocarray(
			    it->micro_batch_marks, it->nmicro_batches + 1,
			    sizeof *it->micro_batch_marks);
			it->micro_batch_marks[it->nmicro_batches] =
			    reader_mark(&ev->start_mark);
			it->micro_batches[it->nmicro_batches++] = (int)v;
			it->when = PLAN_WHEN_LIST;
			return 0;
		}
		reader_describe(got, sizeof got, ev);
		reader_error_at(ld, &ev->start_mark, p, "expected a "
		    "micro-batch, an integer from 0 to %d, got %s",
		    CFG_MAX_MICRO_BATCHES - 1, got);
		return -1;
	}
	/* A stage: a plain decimal, at most the largest mesh size. */
	if (plain_index(ev, CFG_MAX_MESH_DIM, &v) == 0) {
		if (listed_twice(ld, ev, p, "stage", it->stages, it->nstages,
		    v))
			return -1;
		it->stages = xreallocarray(it->stages, it->nstages + 1,
		    sizeof *it->stages);
		it->stage_marks = xreallocarray(it->stage_marks,
		    it->nstages + 1, sizeof *it->stage_marks);
		it->stage_marks[it->nstages] = reader_mark(&ev->start_mark);
		it->stages[it->nstages++] = (int)v;
		return 0;
	}
	reader_describe(got, sizeof got, ev);
	reader_error_at(ld, &ev->start_mark, p, "expected a pipeline stage, "
	    "a non-negative integer, got %s", got);
	return -1;
}

/*
 * The next element of a sequence into *e: 1, or 0 at its end (nothing
 * left to free), or -1 on a reading error.
 */
static int
sequence_next(struct loader *ld, yaml_event_t *e)
{
	if (reader_next_event(ld, e) == -1)
		return -1;
	if (e->type == YAML_SEQUENCE_END_EVENT) {
		yaml_event_delete(e);
		return 0;
	}
	return 1;
}

/* params:, stages: or micro-batches:, one value or a list of them. */
static int
read_list(struct loader *ld, struct plan_item *it, enum item_key k,
    const yaml_event_t *ev, const char *path)
{
	yaml_event_t	 e;
	int		 n = 0, rc;

	if (ev->type != YAML_SEQUENCE_START_EVENT) {
		it->stages_scalar = it->stages_scalar || k == IK_STAGES;
		it->micro_batches_scalar = it->micro_batches_scalar ||
		    k == IK_MICRO_BATCHES;
		return read_element(ld, it, k, ev, path, -1);
	}
	for (;;) {
		if ((rc = sequence_next(ld, &e)) <= 0) {
			if (rc == -1)
				return -1;
			break;
		}
		rc = read_element(ld, it, k, &e, path, n++);
		yaml_event_delete(&e);
		if (rc == -1)
			return -1;
	}
	if (n == 0) {
		if (k == IK_MICRO_BATCHES)
			reader_error_at(ld, &ev->start_mark, path, "an empty "
			    "list: write \"none\" for a step that never runs");
		else
			reader_error_at(ld, &ev->start_mark, path, "an empty "
			    "list: leave %s out for every %s", item_keys[k],
			    k == IK_PARAMS ? "parameter" : "stage");
		return -1;
	}
	return 0;
}

/*
 * micro-batches: a keyword (last, first, every, none), an index, or a
 * list of indexes.
 */
static int
read_schedule(struct loader *ld, struct plan_item *it, const yaml_event_t *ev,
    const char *path)
{
	char	 got[GOT_SIZE];
	int64_t	 v;
	int	 w;

	/* A keyword may be quoted, as a group may; an index may not. */
	if (ev->type == YAML_SCALAR_EVENT)
		for (w = 0; w <= PLAN_WHEN_LIST; w++)
			if (cfg_plan_when_words[w] != NULL &&
			    scalar_is(ev, cfg_plan_when_words[w])) {
				it->when = (enum plan_when)w;
				return 0;
			}
	if (ev->type == YAML_SEQUENCE_START_EVENT ||
	    plain_index(ev, CFG_MAX_MICRO_BATCHES, &v) == 0)
		return read_list(ld, it, IK_MICRO_BATCHES, ev, path);
	reader_describe(got, sizeof got, ev);
	reader_error_at(ld, &ev->start_mark, path, "expected last, first, "
	    "every, none or a list of micro-batches (0 to %d), got %s",
	    CFG_MAX_MICRO_BATCHES - 1, got);
	return -1;
}

/* average: and autograd:, a boolean into *v. */
static int
read_bool(struct loader *ld, bool *v, struct cfg_mark *mark,
    const yaml_event_t *ev, const char *path)
{
	char	 got[GOT_SIZE];

	*mark = reader_mark(&ev->start_mark);
	if (ev->type == YAML_SCALAR_EVENT && reader_bool(ev, v) == 0)
		return 0;
	reader_describe(got, sizeof got, ev);
	reader_error_at(ld, &ev->start_mark, path, "expected %s, got %s",
	    BOOL_WORDS, got);
	return -1;
}

/*
 * A word of a short table (the groups, buffers, dtypes, the replicate
 * sub-dimensions) into *out, or an error that names the nearest.
 */
static int
read_word(struct loader *ld, const yaml_event_t *ev, const char *path,
    const char *what, const char *const *words, int *out)
{
	struct suggestion sg;
	char	 q[QUOTED_SIZE], list[128] = "", article[160];
	int	 i;

	for (i = 0; words[i] != NULL; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list),
		    "%s%s", i > 0 ? ", " : "", words[i]);
	snprintf(article, sizeof article, "a %s (%s)", what, list);
	if (want_scalar(ld, ev, path, article) == -1)
		return -1;
	for (i = 0; words[i] != NULL; i++)
		if (scalar_is(ev, words[i])) {
			*out = i;
			return 0;
		}
	suggest_init(&sg, (const char *)ev->data.scalar.value,
	    ev->data.scalar.length);
	for (i = 0; words[i] != NULL; i++)
		suggest_consider(&sg, words[i]);
	quoted(q, sizeof q, ev);
	if (suggest_best(&sg) != NULL)
		reader_error_at(ld, &ev->start_mark, path, "unknown %s %s "
		    "(did you mean \"%s\"?)", what, q, suggest_best(&sg));
	else
		reader_error_at(ld, &ev->start_mark, path, "unknown %s %s "
		    "(%ss: %s)", what, q, what, list);
	return -1;
}

static int
read_term(struct loader *ld, struct plan_item *it, const yaml_event_t *ev,
    const char *path)
{
	it->term_mark = reader_mark(&ev->start_mark);
	return read_word(ld, ev, path, "loss term", cfg_plan_term_words,
	    &it->term);
}

static int
read_buffer(struct loader *ld, struct plan_item *it, const yaml_event_t *ev,
    const char *path)
{
	it->buffer_mark = reader_mark(&ev->start_mark);
	return read_word(ld, ev, path, "buffer", cfg_plan_buffer_words,
	    &it->buffer);
}

/* replicate: one tp sub-dimension or a list of them, each once. */
static int
read_replicate(struct loader *ld, struct plan_item *it,
    const yaml_event_t *ev, const char *path)
{
	yaml_event_t	 e;
	char		 p[PATH_SIZE + 16];
	int		 n = 0, w, rc;

	it->replicate_mark = reader_mark(&ev->start_mark);
	if (ev->type != YAML_SEQUENCE_START_EVENT) {
		if (read_word(ld, ev, path, "sub-dimension",
		    cfg_plan_replicate_words, &w) == -1)
			return -1;
		it->replicate = 1u << w;
		return 0;
	}
	for (;; n++) {
		if ((rc = sequence_next(ld, &e)) <= 0) {
			if (rc == -1)
				return -1;
			break;
		}
		snprintf(p, sizeof p, "%s[%d]", path, n);
		rc = read_word(ld, &e, p, "sub-dimension",
		    cfg_plan_replicate_words, &w);
		if (rc == 0 && (it->replicate & (1u << w)) != 0) {
			reader_error_at(ld, &e.start_mark, p, "\"%s\" twice",
			    cfg_plan_replicate_words[w]);
			rc = -1;
		}
		yaml_event_delete(&e);
		if (rc == -1)
			return -1;
		it->replicate |= 1u << w;
	}
	if (n == 0) {
		reader_error_at(ld, &ev->start_mark, path, "an empty list: "
		    "leave replicate out for the whole of tp");
		return -1;
	}
	return 0;
}

/*
 * A group: a word, or a product of axes written as a list of them
 * (config.h), which only a sum over the product's members means: a
 * reduce-scatter or an all-gather hands shards out along one group's
 * coordinate, and a to-partial masks tp's sub-dimensions.
 */
static int
read_group(struct loader *ld, struct plan_item *it, enum item_key k,
    const yaml_event_t *ev, const char *path)
{
	yaml_event_t	 e;
	char		 p[PATH_SIZE + 16], got[GOT_SIZE];
	unsigned	 axes = 0, a;
	int		 n = 0, w, j, rc;

	if (ev->type != YAML_SEQUENCE_START_EVENT)
		return read_word(ld, ev, path, "group", cfg_plan_group_words,
		    &it->group);
	if (k != IK_ALL_REDUCE && k != IK_GATHER_LOSS) {
		reader_error_at(ld, &ev->start_mark, path, "a product of axes "
		    "is for all-reduce and gather-loss: %s works along one "
		    "group", item_keys[k]);
		return -1;
	}
	for (;; n++) {
		if ((rc = sequence_next(ld, &e)) <= 0) {
			if (rc == -1)
				return -1;
			break;
		}
		snprintf(p, sizeof p, "%s[%d]", path, n);
		if (e.type != YAML_SCALAR_EVENT) {
			reader_describe(got, sizeof got, &e);
			reader_error_at(ld, &e.start_mark, p, "expected an axis "
			    "(dp, pure-dp, cp, tp, gtp, gtp_replicate; edp, ep, "
			    "etp, egtp, egtp_replicate), got %s", got);
			yaml_event_delete(&e);
			return -1;
		}
		rc = read_word(ld, &e, p, "group", cfg_plan_group_words, &w);
		a = rc == 0 ? cfg_plan_group_axes[w] : 0;
		if (rc == 0 && a == 0) {
			reader_error_at(ld, &e.start_mark, p, "%s is no axis "
			    "of a product (axes: dp, pure-dp, cp, tp, gtp, "
			    "gtp_replicate; edp, ep, etp, egtp, "
			    "egtp_replicate)%s", cfg_plan_group_words[w],
			    strcmp(cfg_plan_group_words[w], "pp") == 0 ?
			    ": a parameter lives on one stage" : "");
			rc = -1;
		} else if (rc == 0 && (axes & a) != 0) {
			reader_error_at(ld, &e.start_mark, p, "%s repeats an "
			    "axis named before it (dp is pure-dp and cp, "
			    "pure-dp gtp and gtp_replicate without cp)",
			    cfg_plan_group_words[w]);
			rc = -1;
		} else if (rc == 0 && (((axes | a) & PLAN_AXES_DENSE) != 0 &&
		    ((axes | a) & PLAN_AXES_EXPERT) != 0)) {
			reader_error_at(ld, &e.start_mark, p, "%s is an axis "
			    "of the %s layout, and the axes before it of the "
			    "%s one", cfg_plan_group_words[w],
			    (a & PLAN_AXES_EXPERT) != 0 ? "expert" : "dense",
			    (a & PLAN_AXES_EXPERT) != 0 ? "dense" : "expert");
			rc = -1;
		}
		yaml_event_delete(&e);
		if (rc == -1)
			return -1;
		axes |= a;
	}
	if (n == 0) {
		reader_error_at(ld, &ev->start_mark, path, "an empty list: "
		    "name a group or the axes of one");
		return -1;
	}
	for (w = 0; w < CFG_PLAN_PRODUCT; w++)
		if (cfg_plan_group_axes[w] == axes) {
			it->group = w;
			return 0;
		}
	for (j = 0; j < CFG_PLAN_NPRODUCTS; j++)
		if (cfg_plan_products[j].axes == axes) {
			it->group = CFG_PLAN_PRODUCT + j;
			return 0;
		}
	fatalx("plan: axes %#x have no group", axes);
}

/*
 * What the layout and placement steps allow, once the step is read.  A
 * buffer is every stage's whole buffer, so it takes no selector, and it
 * is what a reduce-scatter cuts; an all-gather and a to-partial work on
 * parameters; the stages' buffers differ, so no buffer goes over pp or
 * embedding, and an all-gather there would have members with nothing to
 * send.  A to-partial zeroes over tp's sub-dimensions, its only group.
 */
static int
plan_layout_item(struct loader *ld, struct plan_item *it,
    const struct cfg_mark *seen, const char *ipath)
{
	const char	*g = cfg_plan_group_name(it->group);
	char		 path[PATH_SIZE];
	bool		 stage_group = it->op != PLAN_SCALE &&
			    (strcmp(g, "pp") == 0 ||
			    strcmp(g, "embedding") == 0);
	int		 sel = seen[IK_PARAMS].line > 0 ? IK_PARAMS : IK_STAGES;
	int		 k;

	if (seen[IK_REPLICATE].line > 0 && it->op != PLAN_TO_PARTIAL &&
	    !(it->op == PLAN_DECLARE &&
	    it->declare == PLAN_DECLARE_PARTIAL)) {
		snprintf(path, sizeof path, "%s.replicate", ipath);
		reader_report(ld, NULL, seen[IK_REPLICATE], path, "only a "
		    "to-partial or a declare: partial names the "
		    "sub-dimensions a value is Replicate over");
		return -1;
	}
	if (it->op == PLAN_DECLARE && it->replicate ==
	    (PLAN_REPLICATE_SLICES | PLAN_REPLICATE_ETP)) {
		snprintf(path, sizeof path, "%s.replicate", ipath);
		reader_report(ld, NULL, seen[IK_REPLICATE], path, "Partial "
		    "over no sub-dimension of tp is Replicate: write declare: "
		    "replicate");
		return -1;
	}
	if (it->op == PLAN_TO_PARTIAL && it->replicate == 0)
		it->replicate = PLAN_REPLICATE_SLICES | PLAN_REPLICATE_ETP;
	if (it->op == PLAN_TO_PARTIAL && strcmp(g, "tp") != 0) {
		snprintf(path, sizeof path, "%s.to-partial", ipath);
		reader_report(ld, NULL, it->value_mark, path, "a to-partial "
		    "works over tp only (name its sub-dimensions in "
		    "replicate: slices, etp), got \"%s\"", g);
		return -1;
	}
	if (seen[IK_BUFFER].line == 0) {
		if (it->op == PLAN_REDUCE_SCATTER) {
			reader_report(ld, NULL, it->mark, ipath, "a "
			    "reduce-scatter needs buffer: dense or expert: it "
			    "cuts a whole gradient buffer into the model's "
			    "shards");
			return -1;
		}
		if (it->op == PLAN_ALL_GATHER && stage_group) {
			snprintf(path, sizeof path, "%s.all-gather", ipath);
			reader_report(ld, NULL, it->value_mark, path, "an "
			    "all-gather over %s: its members are different "
			    "stages, whose shards hold different parameters",
			    g);
			return -1;
		}
		return 0;
	}
	snprintf(path, sizeof path, "%s.buffer", ipath);
	if (it->op == PLAN_ALL_GATHER || it->op == PLAN_TO_PARTIAL ||
	    it->op == PLAN_RESET || it->op == PLAN_ACCUMULATE ||
	    it->op == PLAN_DECLARE) {
		reader_report(ld, NULL, seen[IK_BUFFER], path, "a%s works on "
		    "parameters, not a buffer: select them with params and "
		    "stages", it->op == PLAN_ALL_GATHER ? "n all-gather" :
		    it->op == PLAN_TO_PARTIAL ? " to-partial" : it->op ==
		    PLAN_RESET ? " reset" : it->op == PLAN_DECLARE ?
		    " declare" : "n accumulate");
		return -1;
	}
	if (seen[IK_PARAMS].line > 0 || seen[IK_STAGES].line > 0) {
		snprintf(path, sizeof path, "%s.%s", ipath, item_keys[sel]);
		reader_report(ld, NULL, seen[sel], path, "a buffer is every "
		    "stage's whole buffer: write %s or buffer, not both",
		    item_keys[sel]);
		return -1;
	}
	if (stage_group) {
		for (k = 0; item_op(k) != (int)it->op; k++)
			continue;
		snprintf(path, sizeof path, "%s.%s", ipath, item_keys[k]);
		reader_report(ld, NULL, it->value_mark, path, "a buffer over "
		    "%s: its members are different stages, whose buffers "
		    "hold different parameters", g);
		return -1;
	}
	return 0;
}

static int
unknown_item_key(struct loader *ld, const yaml_event_t *ev, const char *path)
{
	struct suggestion sg;
	char	 q[QUOTED_SIZE];
	int	 i;

	quoted(q, sizeof q, ev);
	suggest_init(&sg, (const char *)ev->data.scalar.value,
	    ev->data.scalar.length);
	for (i = 0; i < IK__COUNT; i++)
		suggest_consider(&sg, item_keys[i]);
	if (suggest_best(&sg) != NULL)
		reader_error_at(ld, &ev->start_mark, path, "unknown key %s "
		    "(did you mean \"%s\"?)", q, suggest_best(&sg));
	else
		reader_error_at(ld, &ev->start_mark, path, "unknown key %s "
		    "(a step is one of " OP_WORDS ", with average, params, "
		    "stages, buffer, replicate, dtype, micro-batches, term, "
		    "autograd and activation)", q);
	return -1;
}

/* One key and its value in step i's mapping. */
static int
read_pair(struct loader *ld, struct plan_item *it, const yaml_event_t *kev,
    const char *ipath, struct cfg_mark *seen, bool *has_op,
    struct cfg_mark *op_mark)
{
	yaml_event_t	 vev;
	char		 path[PATH_SIZE], got[GOT_SIZE];
	int		 k, rc = -1;

	if (kev->type != YAML_SCALAR_EVENT) {
		reader_describe(got, sizeof got, kev);
		reader_error_at(ld, &kev->start_mark, ipath, "expected a key "
		    "name, got %s", got);
		return -1;
	}
	for (k = 0; k < IK__COUNT; k++)
		if (scalar_is(kev, item_keys[k]))
			break;
	if (k == IK__COUNT)
		return unknown_item_key(ld, kev, ipath);
	snprintf(path, sizeof path, "%s.%s", ipath, item_keys[k]);
	if (seen[k].line > 0) {
		reader_error_at(ld, &kev->start_mark, path, "duplicate key "
		    "\"%s\" (first at line %d column %d)", item_keys[k],
		    seen[k].line, seen[k].col);
		return -1;
	}
	seen[k] = reader_mark(&kev->start_mark);
	if (item_op(k) >= 0) {
		if (*has_op) {
			reader_error_at(ld, &kev->start_mark, ipath, "two "
			    "operations in one step (the first at line %d "
			    "column %d): write each as a step of its own",
			    op_mark->line, op_mark->col);
			return -1;
		}
		*has_op = true;
		*op_mark = seen[k];
		it->op = item_op(k);
	}
	if (reader_next_event(ld, &vev) == -1)
		return -1;
	if (vev.type == YAML_ALIAS_EVENT)
		reader_error_at(ld, &vev.start_mark, path, "aliases are not "
		    "supported: write the value out");
	else {
		if (item_op(k) >= 0)
			it->value_mark = reader_mark(&vev.start_mark);
		switch (k) {
		case IK_SCALE:
			rc = read_scale(ld, it, &vev, path);
			break;
		case IK_ALL_REDUCE:
		case IK_REDUCE_SCATTER:
		case IK_ALL_GATHER:
		case IK_TO_PARTIAL:
		case IK_GATHER_LOSS:
			rc = read_group(ld, it, k, &vev, path);
			break;
		case IK_TERM:
			rc = read_term(ld, it, &vev, path);
			break;
		case IK_AUTOGRAD:
			rc = read_bool(ld, &it->autograd, &it->autograd_mark,
			    &vev, path);
			break;
		case IK_RESET:
			rc = read_reset(ld, &vev, path);
			break;
		case IK_DECLARE:
			rc = read_word(ld, &vev, path, "declared placement",
			    cfg_plan_declare_words, &it->declare);
			break;
		case IK_ACTIVATION:
			it->activation_mark = reader_mark(&vev.start_mark);
			rc = read_word(ld, &vev, path, "named activation",
			    cfg_plan_activation_words, &it->activation);
			break;
		case IK_BUFFER:
			rc = read_buffer(ld, it, &vev, path);
			break;
		case IK_REPLICATE:
			rc = read_replicate(ld, it, &vev, path);
			break;
		case IK_AVERAGE:
			rc = read_bool(ld, &it->average, &it->average_mark,
			    &vev, path);
			break;
		case IK_ACCUMULATE:
		case IK_DTYPE:
			it->dtype_mark = reader_mark(&vev.start_mark);
			rc = read_word(ld, &vev, path, "buffer dtype",
			    cfg_plan_dtype_words, &it->dtype);
			break;
		case IK_MICRO_BATCHES:
			rc = read_schedule(ld, it, &vev, path);
			break;
		default:
			rc = read_list(ld, it, k, &vev, path);
			break;
		}
	}
	yaml_event_delete(&vev);
	return rc;
}

/*
 * What a step on the loss allows: a scale with term: and a gather-loss
 * act at the backward, on a term's loss factor (model/lossterm.c), so
 * they reach every parameter at every micro-batch and take no selector,
 * buffer or dtype.  A gather over pp or embedding would gather from
 * stages that compute no loss (only the last does).
 */
static int
plan_loss_item(struct loader *ld, struct plan_item *it,
    const struct cfg_mark *seen, const char *ipath)
{
	static const enum item_key selectors[] = { IK_PARAMS, IK_STAGES,
		IK_MICRO_BATCHES, IK_BUFFER, IK_DTYPE };
	const char	*g = cfg_plan_group_name(it->group);
	char		 path[PATH_SIZE];
	size_t		 j;

	if (seen[IK_TERM].line > 0 && it->op != PLAN_SCALE &&
	    it->op != PLAN_GATHER_LOSS) {
		snprintf(path, sizeof path, "%s.term", ipath);
		reader_report(ld, NULL, seen[IK_TERM], path, "only a scale "
		    "or a gather-loss acts on one loss term");
		return -1;
	}
	if (seen[IK_AUTOGRAD].line > 0 && it->op != PLAN_GATHER_LOSS) {
		snprintf(path, sizeof path, "%s.autograd", ipath);
		reader_report(ld, NULL, seen[IK_AUTOGRAD], path, "only a "
		    "gather-loss says whether its gather carries gradient");
		return -1;
	}
	if (it->op == PLAN_GATHER_LOSS && seen[IK_AUTOGRAD].line == 0)
		it->autograd = true;
	if (it->op != PLAN_GATHER_LOSS && it->term < 0)
		return 0;
	for (j = 0; j < sizeof selectors / sizeof selectors[0]; j++) {
		if (seen[selectors[j]].line == 0)
			continue;
		snprintf(path, sizeof path, "%s.%s", ipath,
		    item_keys[selectors[j]]);
		reader_report(ld, NULL, seen[selectors[j]], path, "a %s acts "
		    "on the loss at the backward, for every parameter and "
		    "micro-batch: it takes no %s", it->op == PLAN_SCALE ?
		    "scale of a term" : "gather-loss",
		    item_keys[selectors[j]]);
		return -1;
	}
	if (it->op == PLAN_GATHER_LOSS && (strcmp(g, "pp") == 0 ||
	    strcmp(g, "embedding") == 0)) {
		snprintf(path, sizeof path, "%s.gather-loss", ipath);
		reader_report(ld, NULL, it->value_mark, path, "a gather-loss "
		    "over %s: its members are different stages, and only the "
		    "last computes a loss", g);
		return -1;
	}
	return 0;
}

/*
 * What a declare of an activation's gradient allows: it speaks of one
 * tensor inside the backward, on the stage that holds it, so it takes no
 * selector of parameters, and the output layer's input is no MoE block
 * input, whose tp sub-dimensions replicate: would name.
 */
static int
plan_activation_item(struct loader *ld, struct plan_item *it,
    const struct cfg_mark *seen, const char *ipath)
{
	static const enum item_key selectors[] = { IK_PARAMS, IK_STAGES,
		IK_BUFFER, IK_REPLICATE };
	char	 path[PATH_SIZE];
	size_t	 j;

	if (seen[IK_ACTIVATION].line == 0)
		return 0;
	if (it->op != PLAN_DECLARE) {
		snprintf(path, sizeof path, "%s.activation", ipath);
		reader_report(ld, NULL, seen[IK_ACTIVATION], path, "only a "
		    "declare speaks of an activation's gradient");
		return -1;
	}
	for (j = 0; j < sizeof selectors / sizeof selectors[0]; j++) {
		if (seen[selectors[j]].line == 0)
			continue;
		snprintf(path, sizeof path, "%s.%s", ipath,
		    item_keys[selectors[j]]);
		reader_report(ld, NULL, seen[selectors[j]], path, "a declare "
		    "of an activation's gradient selects no parameters: it "
		    "takes no %s", item_keys[selectors[j]]);
		return -1;
	}
	return 0;
}

static int
read_mapping_item(struct loader *ld, struct plan_item *it,
    const yaml_event_t *start, const char *ipath)
{
	yaml_event_t	 ev;
	struct cfg_mark	 seen[IK__COUNT], op_mark = { 0, 0 };
	bool		 has_op = false;
	char		 path[PATH_SIZE];
	int		 rc;

	memset(seen, 0, sizeof seen);
	for (;;) {
		if (reader_next_event(ld, &ev) == -1)
			return -1;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		rc = read_pair(ld, it, &ev, ipath, seen, &has_op, &op_mark);
		yaml_event_delete(&ev);
		if (rc == -1)
			return -1;
	}
	if (!has_op) {
		reader_error_at(ld, &start->start_mark, ipath, "a step needs "
		    "an operation: " OP_WORDS);
		return -1;
	}
	if (seen[IK_DTYPE].line > 0 && it->op == PLAN_ACCUMULATE) {
		snprintf(path, sizeof path, "%s.dtype", ipath);
		reader_report(ld, NULL, seen[IK_DTYPE], path, "accumulate "
		    "names the dtype it accumulates into: leave dtype out");
		return -1;
	}
	/*
	 * dtype: picks the parameters' gradients in one dtype's buffer;
	 * buffer: is a whole gradient buffer of the model's layout, which
	 * has one dtype of its own.
	 */
	if (seen[IK_DTYPE].line > 0 && seen[IK_BUFFER].line > 0) {
		snprintf(path, sizeof path, "%s.dtype", ipath);
		reader_report(ld, NULL, seen[IK_DTYPE], path, "a step runs "
		    "on one dtype's gradients (dtype) or on a whole buffer "
		    "(buffer), not both");
		return -1;
	}
	/*
	 * Which buffer holds a gradient is followed in plan order for the
	 * whole step (syncplan.c), not micro-batch by micro-batch.
	 */
	if (seen[IK_MICRO_BATCHES].line > 0 && it->op == PLAN_ACCUMULATE) {
		snprintf(path, sizeof path, "%s.micro-batches", ipath);
		reader_report(ld, NULL, seen[IK_MICRO_BATCHES], path,
		    "accumulate moves gradients into a buffer for the whole "
		    "step: it takes no micro-batches");
		return -1;
	}
	/*
	 * A declaration runs nothing: it says what the framework takes a
	 * gradient to be, once, whatever buffer or micro-batch.
	 */
	if (it->op == PLAN_DECLARE && (seen[IK_DTYPE].line > 0 ||
	    seen[IK_MICRO_BATCHES].line > 0)) {
		int k = seen[IK_DTYPE].line > 0 ? IK_DTYPE : IK_MICRO_BATCHES;

		snprintf(path, sizeof path, "%s.%s", ipath, item_keys[k]);
		reader_report(ld, NULL, seen[k], path, "a declare runs no "
		    "collective: it takes %s", seen[IK_ACTIVATION].line > 0 ?
		    "its activation only" : "params and stages only");
		return -1;
	}
	if (seen[IK_AVERAGE].line > 0 && it->op != PLAN_ALL_REDUCE &&
	    it->op != PLAN_REDUCE_SCATTER) {
		snprintf(path, sizeof path, "%s.average", ipath);
		reader_report(ld, NULL, seen[IK_AVERAGE], path, "only an "
		    "all-reduce or a reduce-scatter averages: write the factor "
		    "into a scale");
		return -1;
	}
	if (plan_loss_item(ld, it, seen, ipath) == -1 ||
	    plan_activation_item(ld, it, seen, ipath) == -1)
		return -1;
	return plan_layout_item(ld, it, seen, ipath);
}

/*
 * An activation's gradient has one placement: a second declare of it
 * would leave which one holds to the order of the steps.
 */
static int
once_declared(struct loader *ld, const struct config *c, int i,
    const char *ipath)
{
	const struct plan_item *it = &c->plan[i];
	char	 path[PATH_SIZE];
	int	 j;

	for (j = 0; it->activation >= 0 && j < i; j++) {
		if (c->plan[j].activation != it->activation)
			continue;
		snprintf(path, sizeof path, "%s.activation", ipath);
		reader_report(ld, NULL, it->activation_mark, path, "the "
		    "gradient of activation %s is declared already by "
		    "plan[%d] (line %d column %d): declare it once",
		    cfg_plan_activation_words[it->activation], j,
		    c->plan[j].mark.line, c->plan[j].mark.col);
		return -1;
	}
	return 0;
}

static int
read_item(struct loader *ld, struct config *c, const yaml_event_t *ev,
    int *preset_at)
{
	struct plan_item *it;
	struct suggestion sg;
	char		 path[ITEM_PATH_SIZE], got[GOT_SIZE];
	int		 i = c->nplan;

	snprintf(path, sizeof path, "plan[%d]", i % 100);
	if (i >= PLAN_MAX_ITEMS) {
		reader_error_at(ld, &ev->start_mark, path, "more than %d "
		    "steps", PLAN_MAX_ITEMS);
		return -1;
	}
	c->plan = xreallocarray(c->plan, c->nplan + 1, sizeof *c->plan);
	it = &c->plan[c->nplan++];
	memset(it, 0, sizeof *it);
	it->dtype = -1;
	it->term = -1;
	it->activation = -1;
	it->mark = reader_mark(&ev->start_mark);
	if (ev->type == YAML_MAPPING_START_EVENT)
		return read_mapping_item(ld, it, ev, path) == -1 ? -1 :
		    once_declared(ld, c, i, path);
	if (ev->type == YAML_SCALAR_EVENT && reader_is_plain(ev) &&
	    scalar_is(ev, "preset")) {
		if (*preset_at >= 0) {
			reader_error_at(ld, &ev->start_mark, path, "a second "
			    "preset (the first is plan[%d]): the preset's "
			    "steps run once", *preset_at);
			return -1;
		}
		*preset_at = i;
		it->op = PLAN_PRESET;
		return 0;
	}
	reader_describe(got, sizeof got, ev);
	if (ev->type == YAML_SCALAR_EVENT) {
		suggest_init(&sg, (const char *)ev->data.scalar.value,
		    ev->data.scalar.length);
		suggest_consider(&sg, "preset");
		if (suggest_best(&sg) != NULL) {
			reader_error_at(ld, &ev->start_mark, path, "unknown "
			    "step %s (did you mean \"preset\"?)", got);
			return -1;
		}
	}
	reader_error_at(ld, &ev->start_mark, path, "expected \"preset\" or "
	    "a mapping such as {scale: 1/micro_batches}, got %s", got);
	return -1;
}

int
reader_load_plan(struct loader *ld, const yaml_event_t *start)
{
	struct config	*c = ld->cfg;
	yaml_event_t	 ev;
	char		 got[GOT_SIZE];
	int		 rc, preset_at = -1;

	if (ld->ovr != NULL) {
		reader_error_at(ld, &start->start_mark, "plan", "plan cannot "
		    "be set with --set: write it in the configuration");
		return -1;
	}
	if (start->type != YAML_SEQUENCE_START_EVENT) {
		reader_describe(got, sizeof got, start);
		reader_error_at(ld, &start->start_mark, "plan", "expected a "
		    "sequence of steps (\"preset\", or mappings such as "
		    "{scale: 1/micro_batches}), got %s", got);
		return -1;
	}
	cfg_plan_free(c);
	for (;;) {
		if (reader_next_event(ld, &ev) == -1)
			return -1;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		rc = read_item(ld, c, &ev, &preset_at);
		yaml_event_delete(&ev);
		if (rc == -1)
			return -1;
	}
}

