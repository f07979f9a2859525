/*
 * Exact linear combinations of gradient atoms with rational coefficients:
 * the values of the symbolic audit (SPEC section 7).
 *
 * An atom is a rank number: atom r stands for "the local gradient that rank
 * r accumulated for this parameter before synchronization".  A lincomb is an
 * immutable array of terms sorted by atom with no zero coefficients, so two
 * lincombs are equal exactly when their term arrays are equal.  They are
 * allocated in an arena and shared freely (all members of a group after an
 * all-reduce point at the same lincomb).
 */
#ifndef GRADAUDIT_LINCOMB_H
#define GRADAUDIT_LINCOMB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rational.h"

struct arena;

struct term {
	uint32_t	atom;
	struct rational	coef;
};

struct lincomb {
	uint32_t	nterms;
	/*
	 * lc_hash32 of the value once lc_intern or lc_hash32 has taken it,
	 * else 0: it fills the padding before the terms.  The norm audit
	 * orders and classes values by it without reading their terms again.
	 */
	uint32_t	hash;
	struct term	terms[];	/* sorted by atom, no zero coefficient */
};

/* The empty combination (zero), shared. */
extern const struct lincomb lincomb_zero;

const struct lincomb *lc_atom(struct arena *, uint32_t atom);
const struct lincomb *lc_scale(struct arena *, const struct lincomb *,
		    struct rational);
const struct lincomb *lc_add(struct arena *, const struct lincomb *,
		    const struct lincomb *);
/* Sum of n combinations, each multiplied by scale: one pass, one result. */
const struct lincomb *lc_sum(struct arena *, const struct lincomb *const *,
		    size_t n, struct rational scale);
/*
 * The combination of n terms in any order, an atom perhaps more than once
 * (their coefficients add up): t is sorted and merged in place.  One
 * allocation where scaling each atom and summing them took n + 1.
 */
const struct lincomb *lc_terms(struct arena *, struct term *t, size_t n);
/*
 * coef times the sum of the distinct atoms of a sorted array (equal
 * neighbours count once): a group's sum in one pass, without building a
 * combination per atom.
 */
const struct lincomb *lc_atoms(struct arena *, const uint32_t *atoms,
		    size_t n, struct rational coef);
bool		 lc_equal(const struct lincomb *, const struct lincomb *);
/* The coefficient of an atom in x, 0 when absent. */
struct rational	 lc_coef(const struct lincomb *x, uint32_t atom);
/*
 * The terms of x whose atom keep(atom, arg) accepts, in order: x itself
 * when it keeps them all.
 */
const struct lincomb *lc_select(struct arena *, const struct lincomb *x,
		    bool (*keep)(uint32_t atom, const void *arg),
		    const void *arg);
/*
 * x with each term of an atom from `from` on moved down to atom - by
 * (by <= from) and added to the term there, if any: the held atoms of
 * atom.h written as their plain ones.  x itself when it has no atom from
 * `from` on.
 */
const struct lincomb *lc_fold(struct arena *, const struct lincomb *x,
		    uint32_t from, uint32_t by);

/*
 * Combinations by value (hash-consing): equal combinations built apart,
 * such as the sums over the dp groups of two parameters, which hold the
 * same atoms, become one, so that a large mesh keeps each distinct value
 * once and compares shared ones by address.
 */
struct lc_table {
	const struct lincomb	**slot;
	uint64_t		 *hash;
	size_t			  cap, n;
};

/*
 * A hash of x's value (equal combinations hash alike), from all its
 * terms: a match must still be confirmed with lc_equal.
 */
uint64_t	 lc_hash(const struct lincomb *x);
/*
 * 32 bits of lc_hash(x), never 0: the one lc_intern stored, or computed
 * and stored.  Equal combinations have equal ones, interned or not.
 */
uint32_t	 lc_hash32(const struct lincomb *x);
void		 lc_table_init(struct lc_table *);
void		 lc_table_free(struct lc_table *);
/*
 * x itself, or the equal combination the table already holds, in which
 * case x, which must be the last allocation of the arena, is given back.
 */
const struct lincomb *lc_intern(struct lc_table *, struct arena *,
		    const struct lincomb *x);
/*
 * If a == c * b for one rational c != 0 (same atoms, proportional
 * coefficients), store c and return true.
 */
bool		 lc_proportional(const struct lincomb *a,
		    const struct lincomb *b, struct rational *c);

/*
 * True when a is part of b: every term of a is a term of b with the same
 * coefficient, and b has more (a partial sum of the right contributions).
 */
bool		 lc_strict_part(const struct lincomb *a,
		    const struct lincomb *b);
/* True when a and b hold the same atoms, whatever their coefficients. */
bool		 lc_same_atoms(const struct lincomb *a,
		    const struct lincomb *b);


/*
 * qsort order of struct term as lc_format prints them: decreasing
 * coefficient, then increasing atom.
 */
int	 lc_cmp_format_order(const void *, const void *);

#endif
