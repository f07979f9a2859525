/* The monotonic clock in seconds (clock.h). */
#include <time.h>

#include "base/clock.h"

double
clock_seconds(void)
{
	struct timespec	 ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1)
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
