/*
 * The cores this process may run on, for the work a command spreads over
 * processes: run's MPI job and sweep's workers.
 */
#ifndef GRADAUDIT_CORES_H
#define GRADAUDIT_CORES_H

/*
 * Its affinity mask, which a CI runner's container or taskset narrows,
 * else the online processors; at least 1.
 */
int	 cores_available(void);

#endif
