/*
 * The private directory through which `gradaudit run` hands the MPI job it
 * starts what the job must read: its arguments, and a copy of each
 * configuration that cannot be read twice.
 *
 * The job's command line is `LAUNCHER -n P gradaudit run DIR/args`, one
 * path whatever the number of configurations: with every config path on
 * it, hydra's mpiexec crashed from 997 paths on (issue 26).  The job reads
 * every configuration again, after its parent checked them, and the
 * standard input can be read once: the parent reads it into DIR/config.N,
 * and both parent and job load that copy, still named <stdin>.  DIR is in
 * $TMPDIR, which a job over several hosts must share, as it shares the
 * configurations.
 */
#ifndef GRADAUDIT_JOBDIR_H
#define GRADAUDIT_JOBDIR_H

#include <stdbool.h>

struct jobdir {
	char	*path;		/* the directory (mkdtemp), or NULL */
	char	*args;		/* its file of the job's arguments */
	/* Per operand: the copy to read instead of it, or NULL. */
	char	**copies;
	int	 ncopies;
};

/*
 * Make the directory in $TMPDIR (or /tmp), copy into it the operand "-"
 * of args[0..nargs), the operands of argv, and write the job's argument
 * vector argv[1..argc) with the copy's place.  Returns 0, or -1 after a
 * message (nothing is left behind).
 */
int	 jobdir_make(struct jobdir *, int argc, char **argv, int nargs,
	    char **args);

/*
 * In the job: read the arguments jobdir_make wrote to path.  *argv (with
 * argv[0] the program, argv[1] "run") and *copies, per operand index in
 * the order options_parse finds the operands, live in *buf; free all
 * three.  Returns 0, or -1 after a message.
 */
int	 jobdir_read(const char *path, const char *argv0, int *argc,
	    char ***argv, char ***copies, int *ncopies, char **buf);

/* Remove the directory and what is in it, and free the struct's memory. */
void	 jobdir_remove(struct jobdir *);

#endif
