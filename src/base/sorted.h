/*
 * A set as a sorted array: qsort, then each run of equal elements kept
 * once.  The norm's cuts and shrink's classes and roles are such sets.
 */
#ifndef GRADAUDIT_SORTED_H
#define GRADAUDIT_SORTED_H

#include <stddef.h>

/* Sort v's n elements of size bytes by cmp, drop repeats; the new n. */
size_t	 sort_unique(void *v, size_t n, size_t size,
	    int (*cmp)(const void *, const void *));

#endif
