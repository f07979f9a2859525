/*
 * The private directory through which `gradaudit run` hands the MPI job it
 * starts what the job must read: its arguments, and a copy of each
 * configuration that cannot be read twice.
 *
 * The job's command line is `LAUNCHER -n P gradaudit run DIR/args`, one
 * path whatever the number of configurations: with every config path on
 * it, hydra's mpiexec crashed from 997 paths on (issue 26).  The job reads
 * every configuration again, after its parent checked them, and the
 * standard input, a FIFO or a process substitution can be read once, and
 * /dev/stdin or /dev/fd/N name another file in another process: the
 * parent reads every operand into DIR/config.N, and both parent and job
 * load that copy, still named as the user named it.  The job's second read
 * of a process substitution was empty (a false "configuration file
 * changed"), and of /dev/stdin or a FIFO waited until the timeout (issue
 * 26); and a file replaced meanwhile can no longer be audited in its new
 * form (issue 8).  DIR is in $TMPDIR, which a job over several hosts
 * must share, as it shares the configurations.
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
 * An operand that cannot be read twice: "-", or an existing file that is
 * neither a regular file nor a directory.  A job the user started, whose
 * processes all read every operand, refuses them.
 */
bool	 jobdir_read_once(const char *operand);

/*
 * Make the directory in $TMPDIR (or /tmp), copy into it each operand
 * (args[0..nargs), the operands of argv), and write the job's argument
 * vector argv[1..argc) with the copies' places.  An operand that does not
 * open or read (a directory) is not copied: the loader says why.  Returns
 * 0, or -1 after a message (nothing is left behind).
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

/*
 * In the job, once every process has read them: remove the arguments'
 * file path, the copies and their directory, so that a parent killed by
 * SIGKILL, which cannot remove them, leaves nothing behind.  What is gone
 * already, or on another host, is no error.
 */
void	 jobdir_discard(const char *path, char *const *copies, int ncopies);

/* Remove the directory and what is in it, and free the struct's memory. */
void	 jobdir_remove(struct jobdir *);

#endif
