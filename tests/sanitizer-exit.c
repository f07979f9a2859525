/*
 * sanitizer-exit: commit the error its operand names, so that
 * tests/sanitizers.test can show that every way the program can fail on
 * its own exits 3 (runtime failure), never 1, which means "some gradient
 * is wrong".  It links src/base/sanitizer.c, the sanitizer options of the
 * gradaudit program.
 *
 * usage: sanitizer-exit heap-overflow | signed-overflow | leak | mpi-leak |
 *	  fatalx
 *
 * mpi-leak leaks a block between MPI_Init and MPI_Finalize, as the
 * numeric engine would: run under the MPI launcher with the MPI tests'
 * leak suppressions, it shows that those still catch it.  An error that no
 * sanitizer of this build would see is not committed: the program exits
 * 77 (skip) instead.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "base/xmalloc.h"

#ifdef GA_ASAN
/* Where leak() drops its blocks; without ASan nothing is leaked. */
static void *volatile	sink;
#endif

static int
heap_overflow(void)
{
#ifdef GA_ASAN
	char	*volatile p = xmalloc(8);

	return p[8];
#else
	return 77;
#endif
}

static int
signed_overflow(void)
{
#ifdef GA_UBSAN
	volatile int	x = INT_MAX;

	return x + 1 == 0;
#else
	return 77;
#endif
}

static int
leak(void)
{
#ifdef GA_ASAN
	int	i;

	/* Several blocks, so no stale copy on the stack keeps all alive. */
	for (i = 0; i < 8; i++)
		sink = xmalloc(64);
	sink = NULL;
	return 0;
#else
	return 77;
#endif
}

static int
mpi_leak(void)
{
#ifdef GA_ASAN
	MPI_Init(NULL, NULL);
	leak();
	MPI_Finalize();
	return 0;
#else
	return 77;
#endif
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: sanitizer-exit heap-overflow | "
		    "signed-overflow | leak | mpi-leak | fatalx\n");
		return 2;
	}
	if (strcmp(argv[1], "heap-overflow") == 0)
		return heap_overflow();
	if (strcmp(argv[1], "signed-overflow") == 0)
		return signed_overflow();
	if (strcmp(argv[1], "leak") == 0)
		return leak();
	if (strcmp(argv[1], "mpi-leak") == 0)
		return mpi_leak();
	if (strcmp(argv[1], "fatalx") == 0)
		fatalx("deliberate, for tests/sanitizers.test");
	fprintf(stderr, "sanitizer-exit: unknown error \"%s\"\n", argv[1]);
	return 2;
}
