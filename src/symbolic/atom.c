/*
 * Gradient atoms (atom.h): the space of one audit's atoms, their ids and
 * names, and the linear combinations written in them.  The fraction and
 * combination arithmetic of lincomb.c knows nothing of atoms; this file
 * names them, so that lincomb.c needs no part of the loss normalization.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "symbolic/atom.h"

void
atom_space_build(struct atom_space *space, const struct loss_norm *ln,
    const struct mesh *mesh)
{
	size_t	 i, n;
	int	 c;

	atom_space_init(space);
	space->sources = ln->sources;
	space->aux_source = ln->aux_source;
	space->aux_global = ln->aux_global;
	space->mtp_source = ln->mtp_source;
	space->mtp = ln->mtp;
	space->mtp_split_source = ln->mtp_split_source;
	space->expert_sources = ln->split ? mesh->ep : 0;
	space->micro_batches = ln->micro_batches;
	space->mesh = *mesh;
	space->nfactors = ln->chunks;
	space->factor = xreallocarray(NULL, ln->chunks, sizeof *space->factor);
	memcpy(space->factor, ln->coef, ln->chunks * sizeof *space->factor);
	/*
	 * Weighted pieces only make sense when the factors differ and none
	 * is zero.
	 */
	for (c = 0; c < ln->chunks; c++) {
		if (q_is_zero(ln->coef[c])) {
			space->weighted = false;
			break;
		}
		if (!q_equal(ln->coef[c], ln->coef[0]))
			space->weighted = true;
	}
	/*
	 * A layer's factors differ from chunk to chunk under local counts
	 * (Megatron-LM #7452): one term per chunk, a 543 MB JSON report of
	 * the DeepSeek-V3 shape at 2,048 ranks and 8 micro-batches.  A chunk
	 * whose rolled mask keeps no token has factor 0 and no atom to
	 * weigh (atom_weighs).
	 */
	if (ln->mtp == 0)
		return;
	n = (size_t)ln->mtp * ln->chunks;
	space->mtp_factor = xreallocarray(NULL, n, sizeof *space->mtp_factor);
	memcpy(space->mtp_factor, ln->mtp_coef, n * sizeof *space->mtp_factor);
	for (i = 0; i < n; i++)
		if (!q_equal(ln->mtp_coef[i], ln->mtp_coef[i - i %
		    ln->chunks]))
			space->mtp_weighted = true;
}

/* The space of a config without atoms beyond its ranks, holding nothing. */
void
atom_space_init(struct atom_space *space)
{
	memset(space, 0, sizeof *space);
	space->sources = 1;
	space->aux_source = -1;
	space->mtp_source = -1;
	space->mtp_split_source = -1;
	space->micro_batches = 1;
}

void
atom_space_free(struct atom_space *space)
{
	free(space->factor);
	free(space->mtp_factor);
	atom_space_init(space);
}

void
atom_space_copy(struct atom_space *dst, const struct atom_space *src,
    struct arena *arena)
{
	struct rational	*factor = NULL, *mtp = NULL;
	size_t		 n = (size_t)src->mtp * (size_t)src->nfactors;

	*dst = *src;
	if (src->nfactors > 0) {
		factor = arena_alloc(arena,
		    (size_t)src->nfactors * sizeof *factor);
		memcpy(factor, src->factor,
		    (size_t)src->nfactors * sizeof *factor);
	}
	if (src->mtp_factor != NULL && n > 0) {
		mtp = arena_alloc(arena, n * sizeof *mtp);
		memcpy(mtp, src->mtp_factor, n * sizeof *mtp);
	}
	dst->factor = factor;
	dst->mtp_factor = mtp;
}

bool
atom_space_weighted(const struct atom_space *space)
{
	return space->weighted || space->mtp_weighted;
}

bool
atom_space_main_weighted(const struct atom_space *space)
{
	return space->weighted;
}

bool
atom_space_mtp_weighted(const struct atom_space *space)
{
	return space->mtp_weighted;
}

struct rational
atom_mtp_chunk_factor(const struct atom_space *space, int layer, int chunk)
{
	return space->mtp_factor[(layer - 1) * space->nfactors + chunk];
}

int
atom_space_chunks(const struct atom_space *space)
{
	return space->nfactors;
}

struct rational
atom_chunk_factor(const struct atom_space *space, int chunk)
{
	return space->factor[chunk];
}

/*
 * An expert atom kept per source holds the tokens of its source rank,
 * scaled as that rank's chunk: the factor is the source's.
 */
struct rational
atom_loss_factor(const struct atom_space *space, uint32_t a)
{
	struct coord	 c;
	int		 j = atom_expert_source(space, a), chunk;
	int		 layer = atom_mtp_layer(space, a);

	mesh_coord_of(&space->mesh, atom_rank(space, a), &c);
	chunk = j >= 0 ? lossnorm_source_chunk(&space->mesh, &c, j,
	    atom_micro_batch(space, a)) : lossnorm_chunk(&space->mesh,
	    atom_micro_batch(space, a), c.dp);
	if (layer > 0 && space->mtp_factor != NULL)
		return atom_mtp_chunk_factor(space, layer, chunk);
	return space->factor[chunk];
}

bool
atom_weight(const struct atom_space *space, uint32_t a,
    struct rational *factor)
{
	if (atom_source(space, a) == space->aux_source)
		return false;
	if (atom_mtp_layer(space, a) > 0) {
		if (!space->mtp_weighted)
			return false;
		*factor = atom_loss_factor(space, a);
		return !q_is_zero(*factor);
	}
	if (space->weighted)
		*factor = atom_loss_factor(space, a);
	return space->weighted;
}

bool
atom_weighs(const struct atom_space *space, uint32_t a)
{
	struct rational	 factor;

	return atom_weight(space, a, &factor);
}

int
atom_space_aux_source(const struct atom_space *space)
{
	return space->aux_source;
}

int
atom_mtp_layer(const struct atom_space *space, uint32_t a)
{
	int	 j = atom_source(space, a);

	if (space->mtp_split_source >= 0 && j >= space->mtp_split_source)
		return (j - space->mtp_split_source) /
		    space->expert_sources + 1;
	if (space->mtp_source < 0 || j < space->mtp_source ||
	    j >= space->mtp_source + space->mtp)
		return 0;
	return j - space->mtp_source + 1;
}

/*
 * Sources 1 to ep are the main loss's per source, and from
 * mtp_split_source on each layer's (lossnorm.h).
 */
int
atom_expert_source(const struct atom_space *space, uint32_t a)
{
	int	 j = atom_source(space, a);

	if (space->expert_sources == 0)
		return -1;
	if (space->mtp_split_source >= 0 && j >= space->mtp_split_source)
		return (j - space->mtp_split_source) % space->expert_sources;
	if (j >= 1 && j <= space->expert_sources)
		return j - 1;
	return -1;
}

int
atom_space_expert_sources(const struct atom_space *space)
{
	return space->expert_sources;
}

bool
atom_space_trivial(const struct atom_space *space)
{
	return space->sources == 1 && space->micro_batches == 1;
}

int
atom_space_micro_batches(const struct atom_space *space)
{
	return space->micro_batches;
}

int
atom_space_sources(const struct atom_space *space)
{
	return space->sources;
}

uint32_t
atom_id(const struct atom_space *space, int rank, int source, int m)
{
	return ((uint32_t)rank * (uint32_t)space->sources + (uint32_t)source) *
	    (uint32_t)space->micro_batches + (uint32_t)m;
}

static uint32_t
held_base(const struct atom_space *space)
{
	return (uint32_t)space->mesh.world * (uint32_t)space->sources *
	    (uint32_t)space->micro_batches;
}

uint32_t
atom_held(const struct atom_space *space, uint32_t a)
{
	return a + held_base(space);
}

bool
atom_is_held(const struct atom_space *space, uint32_t a)
{
	return space->mesh.world > 0 && a >= held_base(space);
}

uint32_t
atom_plain(const struct atom_space *space, uint32_t a)
{
	return atom_is_held(space, a) ? a - held_base(space) : a;
}

int
atom_rank(const struct atom_space *space, uint32_t a)
{
	a = atom_plain(space, a);
	return (int)(a / ((uint32_t)space->micro_batches *
	    (uint32_t)space->sources));
}

int
atom_source(const struct atom_space *space, uint32_t a)
{
	a = atom_plain(space, a);
	return (int)((a / (uint32_t)space->micro_batches) %
	    (uint32_t)space->sources);
}

int
atom_micro_batch(const struct atom_space *space, uint32_t a)
{
	a = atom_plain(space, a);
	return (int)(a % (uint32_t)space->micro_batches);
}

void
atom_name(const struct atom_space *space, char *buf, size_t size,
    const char *prefix, uint32_t a)
{
	int	 rank = atom_rank(space, a), j = atom_source(space, a);
	int	 n;
	struct coord c;

	if (atom_is_held(space, a))
		prefix = "h";
	n = snprintf(buf, size, "%s%d", prefix, rank);
	/* The dp group's counts make another atom (lossnorm.h): "ad". */
	if (j > 0 && j == space->aux_source && n >= 0 && (size_t)n < size)
		n += snprintf(buf + n, size - n, "%s", space->aux_global ?
		    "ad" : "a");
	if (atom_expert_source(space, a) >= 0 && n >= 0 && (size_t)n < size) {
		mesh_coord_of(&space->mesh, rank, &c);
		n += snprintf(buf + n, size - n, "s%d",
		    mesh_rank_of_expert(&space->mesh, c.pp,
		    atom_expert_source(space, a), c.etp, c.edp));
	}
	if (atom_mtp_layer(space, a) > 0 && n >= 0 && (size_t)n < size)
		n += snprintf(buf + n, size - n, "t%d",
		    atom_mtp_layer(space, a));
	if (space->micro_batches > 1 && n >= 0 && (size_t)n < size)
		snprintf(buf + n, size - n, "m%d", atom_micro_batch(space, a));
}

/* ---- combinations written in atoms ------------------------------------ */

/* lc_select's test: a plain atom from `first` on (held ones too). */
struct from_atom {
	const struct atom_space	*sp;
	uint32_t		 first;
};

static bool
keep_from(uint32_t atom, const void *arg)
{
	const struct from_atom	*f = arg;

	return atom_plain(f->sp, atom) >= f->first;
}

const struct lincomb *
lc_from_atom(struct arena *a, const struct atom_space *sp,
    const struct lincomb *x, uint32_t first)
{
	struct from_atom	 f = { sp, first };

	/* Held atoms (atom_held) come after every plain one. */
	return lc_select(a, x, keep_from, &f);
}

const struct lincomb *
lc_plain(struct arena *a, const struct atom_space *sp, const struct lincomb *x)
{
	/* Held atoms follow every plain one, a fixed distance on. */
	if (sp->mesh.world == 0)
		return x;
	return lc_fold(a, x, held_base(sp), held_base(sp));
}

/* lc_select's test: an atom of another source than `source`. */
struct other_source {
	const struct atom_space	*sp;
	int			 source;
};

static bool
keep_other_source(uint32_t atom, const void *arg)
{
	const struct other_source	*o = arg;

	return atom_source(o->sp, atom) != o->source;
}

const struct lincomb *
lc_without_source(struct arena *a, const struct atom_space *sp,
    const struct lincomb *x, int source)
{
	struct other_source	 o = { sp, source };

	return lc_select(a, x, keep_other_source, &o);
}

/* Write v in decimal at p; return the number of characters. */
static size_t
put_u64(char *p, uint64_t v)
{
	char	 tmp[20];
	size_t	 n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = 0; i < n; i++)
		p[i] = tmp[n - 1 - i];
	return n;
}

/*
 * Write the atom t[*i] by name, or, when t[*i] starts the atoms of every
 * micro-batch of one rank and source, all of them as one ("g3m*"), and
 * leave *i on the last atom written.
 */
static size_t
put_atoms(char *out, const struct atom_space *sp, const struct term *t,
    size_t n, size_t *i, const char *prefix)
{
	char		 name[ATOM_NAME_SIZE];
	uint32_t	 a = t[*i].atom;
	size_t		 k, K = (size_t)atom_space_micro_batches(sp), len;

	atom_name(sp, name, sizeof name, prefix, a);
	len = strlen(name);
	if (K > 1 && atom_micro_batch(sp, a) == 0 && *i + K <= n) {
		for (k = 1; k < K && t[*i + k].atom == a + k; k++)
			continue;
		if (k == K) {
			/* "g3m0" becomes "g3m*". */
			name[len - 1] = '*';
			*i += K - 1;
		}
	}
	memcpy(out, name, len);
	return len;
}

/* Write one group of terms sharing coefficient q; return the length. */
static size_t
put_group(char *out, const struct atom_space *sp, const struct term *t,
    size_t n, const char *prefix, size_t plen, int first)
{
	struct rational	 q = t[0].coef;
	uint64_t	 p = q.num < 0 ? -(uint64_t)q.num : (uint64_t)q.num;
	int		 parens;
	size_t		 i, len = 0;

	if (q.num < 0)
		out[len++] = '-';
	else if (!first)
		out[len++] = '+';
	if (p != 1) {
		len += put_u64(out + len, p);
		out[len++] = '*';
	}
	parens = n > 1 && (q.den != 1 || p != 1);
	if (parens)
		out[len++] = '(';
	for (i = 0; i < n; i++) {
		if (i > 0)
			out[len++] = '+';
		if (atom_space_trivial(sp) && !atom_is_held(sp, t[i].atom)) {
			memcpy(out + len, prefix, plen);
			len += plen;
			len += put_u64(out + len, t[i].atom);
			continue;
		}
		len += put_atoms(out + len, sp, t, n, &i, prefix);
	}
	if (parens)
		out[len++] = ')';
	if (q.den != 1) {
		out[len++] = '/';
		len += put_u64(out + len, (uint64_t)q.den);
	}
	return len;
}

const char *
lc_format(struct arena *a, const struct atom_space *sp,
    const struct lincomb *x, const char *prefix)
{
	struct term	*t;
	char		*buf, *s;
	size_t		 plen = strlen(prefix), n = x->nterms, i, j, len = 0;
	int		 sorted = 1;

	if (n == 0)
		return arena_strdup(a, "0");

	/*
	 * Grouping needs the terms in decreasing coefficient order.  The
	 * common case of one shared coefficient is already in that order.
	 */
	t = xreallocarray(NULL, n, sizeof(*t));
	memcpy(t, x->terms, n * sizeof(*t));
	for (i = 1; i < n && sorted; i++)
		if (!q_equal(t[i].coef, t[0].coef))
			sorted = 0;
	if (!sorted)
		qsort(t, n, sizeof(*t), lc_cmp_format_order);

	/*
	 * An upper bound on the length, so the string is built in one pass
	 * with no reallocation: per atom its name and a '+'; per group a
	 * sign, "p*", parentheses and "/q" of 20 digits each.
	 */
	if (n > SIZE_MAX / 2 / (plen + ATOM_NAME_SIZE + 45))
		fatalx("lc_format: combination of %zu terms too long", n);
	buf = xmalloc(n * (plen + ATOM_NAME_SIZE + 45) + 1);
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && q_equal(t[j].coef, t[i].coef); j++)
			continue;
		len += put_group(buf + len, sp, t + i, j - i, prefix, plen,
		    i == 0);
	}
	buf[len] = '\0';

	s = arena_alloc(a, len + 1);
	memcpy(s, buf, len + 1);
	free(buf);
	free(t);
	return s;
}
