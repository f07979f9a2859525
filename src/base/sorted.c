/* A set as a sorted array (sorted.h). */
#include <stdlib.h>
#include <string.h>

#include "base/sorted.h"

size_t
sort_unique(void *v, size_t n, size_t size,
    int (*cmp)(const void *, const void *))
{
	char	*p = v;
	size_t	 i, k = 0;

	if (n == 0)
		return 0;
	qsort(v, n, size, cmp);
	for (i = 1; i < n; i++)
		if (cmp(p + k * size, p + i * size) != 0 && ++k != i)
			memcpy(p + k * size, p + i * size, size);
	return k + 1;
}
