/*
 * How many cores this process may use (see cores.h).
 */
#define _GNU_SOURCE		/* sched_getaffinity, CPU_COUNT */

#include <sched.h>
#include <unistd.h>

#include "base/cores.h"

int
cores_available(void)
{
	cpu_set_t	 set;
	long		 n;

	if (sched_getaffinity(0, sizeof set, &set) == 0 &&
	    CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}
