/*
 * --moe-layer-freq's values (megatron-pattern.h): an integer, or the
 * Python list expression Megatron evaluates, read by a small parser of
 * just what Megatron's _eval_pattern allows.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "import/megatron-pattern.h"

/*
 * --moe-layer-freq (megatron/training/arguments.py moe_freq_type): an
 * integer N puts experts in layers i with i % N == 0
 * (megatron/core/models/gpt/gpt_layer_specs.py); a string with a '[' is a
 * Python list expression of 0s and 1s, one per layer, built from lists,
 * integers, +, * and parentheses (_eval_pattern allows nothing else).
 */
struct py_value {
	bool	 is_list;
	long	 n;		/* an integer */
	long	*items;		/* a list of integers */
	size_t	 len;
};

struct py_parser {
	const char	*s;
	const char	*error;	/* what went wrong, once it has */
	int		 depth;	/* of brackets and parentheses */
};

/* Deeper nesting is no layer pattern, and would only use up the stack. */
#define PY_MAX_DEPTH	32

/* Longest list and largest integer an expression may build. */
#define PY_MAX_LEN	CFG_MAX_LAYERS
#define PY_MAX_INT	(1L << 24)

static bool	py_expr(struct py_parser *, struct py_value *);

static void
py_free(struct py_value *v)
{
	free(v->items);
	memset(v, 0, sizeof(*v));
}

static bool
py_fail(struct py_parser *pp, const char *error)
{
	if (pp->error == NULL)
		pp->error = error;
	return false;
}

static bool
py_append(struct py_parser *pp, struct py_value *list, long item)
{
	if (list->len >= PY_MAX_LEN)
		return py_fail(pp, "the list is longer than any model's layers");
	list->items = xreallocarray(list->items, list->len + 1,
	    sizeof(*list->items));
	list->items[list->len++] = item;
	return true;
}

static bool
py_atom(struct py_parser *pp, struct py_value *v)
{
	struct py_value	 item;
	char		*end;

	memset(v, 0, sizeof(*v));
	if ((*pp->s == '(' || *pp->s == '[') && pp->depth >= PY_MAX_DEPTH)
		return py_fail(pp, "brackets nested too deep");
	if (isdigit((unsigned char)*pp->s)) {
		errno = 0;
		v->n = strtol(pp->s, &end, 10);
		pp->s = end;
		if (errno != 0 || v->n > PY_MAX_INT)
			return py_fail(pp, "an integer is too large");
		return true;
	}
	if (*pp->s == '(') {
		pp->s++;
		pp->depth++;
		if (!py_expr(pp, v))
			return false;
		if (*pp->s != ')') {
			py_free(v);
			return py_fail(pp, "expected ')'");
		}
		pp->s++;
		pp->depth--;
		return true;
	}
	if (*pp->s != '[')
		return py_fail(pp, "expected a number, '[' or '('");
	pp->s++;
	pp->depth++;
	v->is_list = true;
	while (*pp->s != ']') {
		if (!py_expr(pp, &item))
			break;
		if (item.is_list) {
			py_free(&item);
			py_fail(pp, "a list inside a list");
			break;
		}
		if (!py_append(pp, v, item.n))
			break;
		if (*pp->s == ',')
			pp->s++;
		else if (*pp->s != ']') {
			py_fail(pp, "expected ',' or ']'");
			break;
		}
	}
	if (pp->error != NULL) {
		py_free(v);
		return false;
	}
	pp->s++;
	pp->depth--;
	return true;
}

/* a * b: integers multiply, a list repeats (Python's semantics). */
static bool
py_mul(struct py_parser *pp, struct py_value *a, struct py_value *b)
{
	struct py_value	*list, *times, out;
	long		 i;
	size_t		 j;

	if (!a->is_list && !b->is_list) {
		if (a->n != 0 && b->n > PY_MAX_INT / a->n)
			return py_fail(pp, "an integer is too large");
		a->n *= b->n;
		return true;
	}
	if (a->is_list && b->is_list)
		return py_fail(pp, "a list times a list");
	list = a->is_list ? a : b;
	times = a->is_list ? b : a;
	memset(&out, 0, sizeof(out));
	out.is_list = true;
	for (i = 0; i < times->n; i++)
		for (j = 0; j < list->len; j++)
			if (!py_append(pp, &out, list->items[j])) {
				py_free(&out);
				return false;
			}
	py_free(a);
	*a = out;
	return true;
}

/* a + b: integers add, lists concatenate. */
static bool
py_add(struct py_parser *pp, struct py_value *a, struct py_value *b)
{
	size_t	 j;

	if (a->is_list != b->is_list)
		return py_fail(pp, "a list plus an integer");
	if (!a->is_list) {
		if (a->n > PY_MAX_INT - b->n)
			return py_fail(pp, "an integer is too large");
		a->n += b->n;
		return true;
	}
	for (j = 0; j < b->len; j++)
		if (!py_append(pp, a, b->items[j]))
			return false;
	return true;
}

/*
 * expr := term ('+' term)*; term := atom ('*' atom)*.  On failure each
 * function has freed its value and pp->error says why.
 */
static bool
py_term(struct py_parser *pp, struct py_value *v)
{
	struct py_value	 b;
	bool		 ok;

	if (!py_atom(pp, v))
		return false;
	while (*pp->s == '*') {
		pp->s++;
		if (!py_atom(pp, &b)) {
			py_free(v);
			return false;
		}
		ok = py_mul(pp, v, &b);
		py_free(&b);
		if (!ok) {
			py_free(v);
			return false;
		}
	}
	return true;
}

static bool
py_expr(struct py_parser *pp, struct py_value *v)
{
	struct py_value	 b;
	bool		 ok;

	if (!py_term(pp, v))
		return false;
	while (*pp->s == '+') {
		pp->s++;
		if (!py_term(pp, &b)) {
			py_free(v);
			return false;
		}
		ok = py_add(pp, v, &b);
		py_free(&b);
		if (!ok) {
			py_free(v);
			return false;
		}
	}
	return true;
}

/*
 * The MoE layers that --moe-layer-freq s gives a model of `layers` layers,
 * into moe[]; returns NULL or what is wrong with s.
 */
const char *
megatron_layer_pattern(const char *s, int layers, bool *moe)
{
	struct py_parser	 pp = { s, NULL, 0 };
	struct py_value		 v;
	char			*end;
	long			 n;
	int			 i;

	if (strchr(s, '[') == NULL) {
		errno = 0;
		n = strtol(s, &end, 10);
		if (!isdigit((unsigned char)*s) || *end != '\0' || errno != 0 ||
		    n < 1)
			return "expected a positive integer or a Python list "
			    "expression";
		for (i = 0; i < layers; i++)
			moe[i] = i % n == 0;
		return NULL;
	}
	if (!py_expr(&pp, &v) || (*pp.s != '\0' && !py_fail(&pp, "expected "
	    "'+', '*' or the end"))) {
		py_free(&v);
		return pp.error;
	}
	if (!v.is_list || v.len != (size_t)layers) {
		py_free(&v);
		return "the pattern must be a list with one 0 or 1 per layer "
		    "(--num-layers)";
	}
	for (i = 0; i < layers; i++) {
		if (v.items[i] != 0 && v.items[i] != 1) {
			py_free(&v);
			return "the pattern's items must be 0 or 1";
		}
		moe[i] = v.items[i] == 1;
	}
	py_free(&v);
	return NULL;
}
