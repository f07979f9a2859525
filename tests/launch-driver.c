/*
 * A harness for launch.c, driven by tests/launch.test.
 *
 *   launch-driver [-p] LAUNCHER PROCS TIMEOUT -- CMD [ARG ...]
 *	launch_command(): run `LAUNCHER -n PROCS CMD ARG...` and exit with
 *	the status it maps to.  LAUNCHER "-" means the default
 *	($GRADAUDIT_MPIEXEC, else mpiexec); -p asks for the progress line.
 *   launch-driver --self LAUNCHER PROCS TIMEOUT CODE
 *	launch_job() on this very binary; each rank checks that it is under
 *	MPI with PROCS processes and GRADAUDIT_WORKER=1, then exits CODE.
 *   launch-driver --mpi-exit CODE	an MPI program that exits CODE
 *   launch-driver --mpi-abort		rank 1 calls abort(3), the rest wait
 *   launch-driver --mpi-watchdog SECONDS
 *	arm launch_arm_watchdog(), then every rank waits for a message that
 *	never comes
 *   launch-driver --mpi-worker-watchdog SECONDS
 *	the same with launch_arm_worker_watchdog()
 *   launch-driver --under-mpi		print launch_under_mpi()
 *
 * The MPI modes ignore any further arguments: the tests add a unique marker
 * there, to find leftover ranks with pgrep -f.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "base/xmalloc.h"
#include "launch/launch.h"

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: launch-driver [-p] launcher procs timeout -- "
	    "command [arg ...]\n"
	    "       launch-driver --self launcher procs timeout code\n"
	    "       launch-driver --mpi-exit code | --mpi-abort | "
	    "--mpi-watchdog seconds |\n"
	    "           --mpi-worker-watchdog seconds | --under-mpi\n");
	exit(64);
}

static void
parse_options(struct launch_options *opts, char **argv)
{
	char	*end;

	opts->launcher = strcmp(argv[0], "-") == 0 ? NULL : argv[0];
	opts->procs = (int)strtol(argv[1], &end, 10);
	if (*end != '\0')
		usage();
	opts->timeout = strtod(argv[2], &end);
	if (*end != '\0')
		usage();
}

static int
self_worker(int argc, char **argv)
{
	const char	*worker = getenv("GRADAUDIT_WORKER");
	int		 size, rank, want;

	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	want = atoi(argv[3]);
	if (size != want || worker == NULL || strcmp(worker, "1") != 0) {
		fprintf(stderr, "rank %d: size %d (want %d), "
		    "GRADAUDIT_WORKER=%s\n", rank, size, want,
		    worker != NULL ? worker : "(unset)");
		MPI_Finalize();
		return 4;
	}
	if (rank == 0) {
		struct launch_capture cap;

		/* The report and result launch_job requires of a job. */
		if (!launch_report_begin(&cap))
			return 5;
		printf("worker ok: %d processes\n", size);
		if (launch_report_end(&cap) != 0)
			return 6;
		launch_report_status(atoi(argv[5]));
	}
	MPI_Finalize();
	return atoi(argv[5]);
}

static int
mpi_exit(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Finalize();
	return atoi(argv[2]);
}

static int
mpi_abort(int argc, char **argv)
{
	int	 rank;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (rank == 1)
		abort();
	/* Rank 1 never arrives: only the launcher can end this. */
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}

static int
mpi_watchdog(int argc, char **argv)
{
	int	 value;

	MPI_Init(&argc, &argv);
	if (strcmp(argv[1], "--mpi-worker-watchdog") == 0)
		launch_arm_worker_watchdog(atof(argv[2]));
	else
		launch_arm_watchdog(atof(argv[2]));
	MPI_Recv(&value, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD,
	    MPI_STATUS_IGNORE);
	MPI_Finalize();
	return 0;
}

int
main(int argc, char **argv)
{
	struct launch_options	 opts;
	int			 first = 1;

	memset(&opts, 0, sizeof(opts));
	if (argc >= 2 && strcmp(argv[1], "--under-mpi") == 0) {
		puts(launch_under_mpi() ? "yes" : "no");
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "--mpi-exit") == 0)
		return mpi_exit(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "--mpi-abort") == 0)
		return mpi_abort(argc, argv);
	if (argc >= 3 && (strcmp(argv[1], "--mpi-watchdog") == 0 ||
	    strcmp(argv[1], "--mpi-worker-watchdog") == 0))
		return mpi_watchdog(argc, argv);
	if (argc == 6 && strcmp(argv[1], "--self") == 0) {
		if (launch_under_mpi())
			return self_worker(argc, argv);
		parse_options(&opts, argv + 2);
		return launch_job(&opts, argc, argv);
	}
	if (argc >= 2 && strcmp(argv[1], "-p") == 0) {
		opts.progress = true;
		first = 2;
	}
	if (argc - first < 5 || strcmp(argv[first + 3], "--") != 0)
		usage();
	parse_options(&opts, argv + first);
	return launch_command(&opts, argv + first + 4);
}
