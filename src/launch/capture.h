/*
 * Running a launch script with its launchers replaced, to learn the
 * arguments it would start training with: `gradaudit import megatron
 * --script FILE ARGS...`.
 *
 * The script really runs: bash FILE ARGS, in the current directory, with
 * the user's environment, as the user would run it.  Only the programs
 * that start training are replaced.  A private directory, first on PATH,
 * holds a stand-in for each of them (capture_launchers), and BASH_ENV
 * defines each as a shell function calling its stand-in, so that a script
 * that puts another directory first on PATH (conda activate, a virtual
 * environment) still reaches it.  A stand-in appends the argument vector
 * it was given to the file that GRADAUDIT_LAUNCHES names, as the decimal
 * count of its words and then the words, each ended by a NUL byte, and
 * exits 0 without running anything.
 *
 * The script runs in a process group of its own with /dev/null as its
 * standard input, its output passed to gradaudit's standard error up to a
 * bound, and a time limit; when it exits or the limit is reached, its
 * process group and every process it started are killed.
 */
#ifndef GRADAUDIT_CAPTURE_H
#define GRADAUDIT_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>

/* The programs replaced, NULL-terminated. */
extern const char *const capture_launchers[];

/* What the script's output may fill on gradaudit's stderr. */
#define CAPTURE_OUTPUT_MAX	(64 * 1024)
/* The launches' file: launch lines are a few KiB each. */
#define CAPTURE_FILE_MAX	(4 * 1024 * 1024)

struct capture_options {
	const char	*script;
	char *const	*args;		/* the script's positional parameters */
	size_t		 nargs;
	double		 timeout;	/* seconds */
};

/* One launch: the argument vector a stand-in received, its name first. */
struct capture_launch {
	char		**argv;		/* NULL-terminated */
	size_t		  argc;
};

struct capture {
	struct capture_launch	*launches;	/* in the order they ran */
	size_t			 n;
	/* How the script ended. */
	bool			 timed_out;	/* killed at the time limit */
	int			 interrupted;	/* the signal that ended it, or 0 */
	int			 status;	/* its wait status otherwise */
	size_t			 output_cut;	/* bytes of output not shown */
	bool			 file_cut;	/* launches past the bound lost */
};

/*
 * Run the script as described above and collect its launches.  Returns 0,
 * or -1 after a message when the script could not be run at all (no bash,
 * no temporary directory); the script's own failures are in cap.
 */
int	 capture_script(const struct capture_options *, struct capture *);
void	 capture_free(struct capture *);
/*
 * The words of launch l that run a Python script, NULL-terminated, and
 * the index of the script's word in *script: l's own words when one ends
 * in ".py"; else, when l runs a shell on a command line (srun ... bash -c
 * 'cd X; python X/pretrain_gpt.py ...', as cluster wrappers do), the
 * words before the shell followed by those of the line's first command
 * that names a ".py", without its redirections.  The line's words are
 * split as sh(1) would, with nothing expanded: the script's shell
 * expanded what it could.  NULL when l runs no Python script.
 */
char	**capture_python_command(const struct capture_launch *l,
	    size_t *nwords, size_t *script);

#endif
