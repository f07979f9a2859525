/*
 * The processes a job started, wherever they went.
 *
 * MPICH's hydra runs its proxy and every rank in a session of their own,
 * out of reach of a signal to the launcher's process group; with the proxy
 * stopped or killed, a timeout that ended the group left the proxy and
 * every rank alive, adopted by init (issue 8).  So on Linux the process
 * that supervises a job becomes a child subreaper (prctl(2)): a process of
 * the job whose parent dies is adopted by it instead of init, and every
 * process of the job stays one of its descendants, which /proc lists.
 * Where there is no /proc, only the launcher's group can be reached, and
 * the functions say so.
 */
#ifndef GRADAUDIT_PROCTREE_H
#define GRADAUDIT_PROCTREE_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * True once child pid has exited; it stays a zombie, its status kept,
 * until proctree_wait.  The launcher of a numeric audit and the shell of
 * an import's launch script are watched alike.
 */
bool	 proctree_exited(pid_t);
/* Reap child pid, waiting for it; its wait status. */
int	 proctree_wait(pid_t);

/*
 * The end of a forked child, and its parent's side.  The parent makes a
 * close-on-exec pipe before fork(); the child runs argv with environment
 * envp, and if that fails (or it calls proctree_exec_fail after a failed
 * set-up step), writes errno to the pipe and exits 127.  The parent then
 * reads the pipe with proctree_exec_errno: 0 when the exec happened (the
 * pipe closed on it), else the child's errno.  The launcher of a numeric
 * audit and the shell of an import's launch script start alike.
 */
void	 proctree_exec(char **argv, char **envp, int errfd)
	    __attribute__((noreturn));
void	 proctree_exec_fail(int errfd) __attribute__((noreturn));
/* Read, then close, the parent's end of the pipe. */
int	 proctree_exec_errno(int errfd);

/* Adopt the orphans among this process's descendants, from now on. */
void	 proctree_adopt(void);
/* Undo proctree_adopt, once the job is gone. */
void	 proctree_release(void);

/*
 * The start time of pid, which with the pid names one process for good (a
 * pid alone may be reused): 0 when pid is gone or a zombie, or where there
 * is no /proc.  Async-signal-safe.
 */
unsigned long long proctree_start_time(pid_t);
/*
 * Whether the process of that pid and start time is alive; with start 0,
 * whether any process of that pid is.  Async-signal-safe.
 */
bool	 proctree_alive(pid_t, unsigned long long start);

/*
 * Send sig to every descendant of this process, parents before their
 * children.  False when /proc cannot be read (nothing was sent).
 */
bool	 proctree_signal(int sig);

/*
 * Kill the process group of `leader` (a child of this process, not yet
 * reaped, so that its group ID cannot have been reused) and every
 * descendant of this process, reap them all, and wait until none is left,
 * at most `wait` seconds.  Call it only where every child of this process
 * belongs to the job: it reaps any.  *leader_status gets the leader's wait
 * status.  Returns how many processes are left: 0 when every one is gone,
 * -1 when that cannot be known (no /proc: only the group was killed).
 */
long	 proctree_kill_all(pid_t leader, int *leader_status, double wait);

#endif
