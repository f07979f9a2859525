/*
 * Running a launch script with its launchers replaced (capture.h).
 *
 * Everything the run needs lives in one private directory made for it
 * (mode 0700): bin/ with the stand-ins, bash_env with the functions, and
 * launches, the file the stand-ins append to.  It is removed afterwards,
 * whatever the script did.
 *
 * The supervision follows launch.c's: the script's process group is its
 * own, so that one kill(2) reaches it and the terminal's Ctrl-C reaches
 * only gradaudit, which ends the script before it goes; this process is a
 * subreaper meanwhile (proctree.h), so that a process the script put in
 * the background and that left its group is still found and killed.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE	200809L
#endif
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE	700
#endif

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/shellwords.h"
#include "base/xmalloc.h"
#include "launch/capture.h"
#include "launch/launch.h"
#include "launch/proctree.h"

extern char **environ;

/*
 * torchrun, python and python3 (which also run `python -m
 * torch.distributed.run` and `launch`), srun and deepspeed start
 * training; mpirun and mpiexec start it too.  sbatch and salloc would
 * submit a job to the cluster for real: they are replaced so that no job
 * is submitted, and their launches, which run no Python script here, are
 * named when nothing else was launched.
 */
const char *const capture_launchers[] = {
	"torchrun", "python", "python3", "srun", "deepspeed", "mpirun",
	"mpiexec", "sbatch", "salloc", NULL
};

/* How long the script may take to end after SIGTERM before SIGKILL. */
#define CAPTURE_GRACE		1.0
/* How long killed processes may take to be gone. */
#define CAPTURE_KILL_WAIT	5.0
#define CAPTURE_POLL_MSEC	20
/* How long the output of killed processes may trickle in. */
#define CAPTURE_DRAIN		1.0
/* A launch's words; more is not a launch line. */
#define CAPTURE_WORDS_MAX	100000

struct capture_run {
	char		*dir;		/* the private directory */
	char		*launches;	/* dir/launches */
	int		 fd;		/* the script's output, -1 at its end */
	size_t		 shown;		/* output bytes passed on */
	bool		 midline;	/* the last of them ended no line */
	struct capture	*cap;
};

static int
write_file(const char *path, const char *text, mode_t mode)
{
	size_t	 len = strlen(text), done = 0;
	ssize_t	 n;
	int	 fd;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)) ==
	    -1)
		return -1;
	while (done < len) {
		if ((n = write(fd, text + done, len - done)) == -1) {
			if (errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	return close(fd);
}

/*
 * The stand-in for `name`: the count of its words, its name and its
 * arguments, each ended by a NUL, in one printf, then exit 0.  Without
 * GRADAUDIT_LAUNCHES (a script that cleared its environment) it still
 * finds the file.
 */
static char *
shim_text(const char *name, const char *launches)
{
	char	*quoted = shellwords_quote(launches), *text;

	xasprintf(&text, "#!/bin/sh\n"
	    "# A stand-in for %s, written by gradaudit import --script: it\n"
	    "# records the arguments it was given and runs nothing.\n"
	    "printf '%%s\\0' \"$(($# + 1))\" %s \"$@\" "
	    ">>\"${GRADAUDIT_LAUNCHES:-%s}\"\n"
	    "exit 0\n", name, name, quoted);
	free(quoted);
	return text;
}

/*
 * BASH_ENV: the user's own BASH_ENV first, as bash would read it, then a
 * function for each launcher, which a change of PATH cannot bypass.  The
 * function has sh read its stand-in rather than execute it, so that it
 * works where the temporary directory is mounted noexec.
 */
static char *
bash_env_text(const char *bin)
{
	char		*text, *more, *quoted;
	size_t		 i;

	text = xstrdup("# gradaudit import --script: the launchers, replaced "
	    "(gradaudit(1)).\n"
	    "if [ -n \"${GRADAUDIT_USER_BASH_ENV-}\" ]; then\n"
	    "\t. \"$GRADAUDIT_USER_BASH_ENV\"\n"
	    "fi\n");
	for (i = 0; capture_launchers[i] != NULL; i++) {
		xasprintf(&more, "%s/%s", bin, capture_launchers[i]);
		quoted = shellwords_quote(more);
		free(more);
		xasprintf(&more, "%s%s() { /bin/sh %s \"$@\"; }\n", text,
		    capture_launchers[i], quoted);
		free(quoted);
		free(text);
		text = more;
	}
	return text;
}

static int
remove_entry(const char *path, const struct stat *sb, int flag,
    struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static void
remove_dir(const char *dir)
{
	/* FTW_PHYS: a link the script left is removed, never followed. */
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The private directory with its stand-ins; -1 after a message. */
static int
make_dir(struct capture_run *r)
{
	const char	*tmp = getenv("TMPDIR");
	char		*bin, *path, *text;
	size_t		 i;
	int		 rc = 0;

	xasprintf(&r->dir, "%s/gradaudit-script.XXXXXX", tmp != NULL &&
	    *tmp == '/' ? tmp : "/tmp");
	if (mkdtemp(r->dir) == NULL) {
		fprintf(stderr, "%s: import: cannot make a directory for the "
		    "launchers' stand-ins, %s: %s\n", progname, r->dir,
		    strerror(errno));
		free(r->dir);
		r->dir = NULL;
		return -1;
	}
	xasprintf(&r->launches, "%s/launches", r->dir);
	xasprintf(&bin, "%s/bin", r->dir);
	if (mkdir(bin, 0700) == -1 || write_file(r->launches, "", 0600) == -1)
		rc = -1;
	for (i = 0; rc == 0 && capture_launchers[i] != NULL; i++) {
		xasprintf(&path, "%s/%s", bin, capture_launchers[i]);
		text = shim_text(capture_launchers[i], r->launches);
		rc = write_file(path, text, 0700);
		free(text);
		free(path);
	}
	if (rc == 0) {
		xasprintf(&path, "%s/bash_env", r->dir);
		text = bash_env_text(bin);
		rc = write_file(path, text, 0600);
		free(text);
		free(path);
	}
	if (rc == -1)
		fprintf(stderr, "%s: import: cannot write the launchers' "
		    "stand-ins in %s: %s\n", progname, r->dir, strerror(errno));
	free(bin);
	return rc;
}

/*
 * The script's environment: the user's, with the stand-ins first on PATH,
 * GRADAUDIT_LAUNCHES, and BASH_ENV ours (the user's is kept in
 * GRADAUDIT_USER_BASH_ENV, which ours reads).  The strings are in *owned.
 */
static char **
script_environment(const struct capture_run *r, char ***owned)
{
	static const char *const replaced[] = {
		"PATH=", "GRADAUDIT_LAUNCHES=", "BASH_ENV=",
		"GRADAUDIT_USER_BASH_ENV=", NULL
	};
	const char	*path = getenv("PATH"), *user = getenv("BASH_ENV");
	char		**env, **mine;
	size_t		 n = 0, i, j = 0, k, m = 0;

	while (environ[n] != NULL)
		n++;
	env = xreallocarray(NULL, n + 5, sizeof(*env));
	mine = xcalloc(5, sizeof(*mine));
	for (i = 0; i < n; i++) {
		for (k = 0; replaced[k] != NULL; k++)
			if (strncmp(environ[i], replaced[k],
			    strlen(replaced[k])) == 0)
				break;
		if (replaced[k] == NULL)
			env[j++] = environ[i];
	}
	/* An empty PATH entry is the current directory: none is added. */
	xasprintf(&mine[m++], "PATH=%s/bin%s%s", r->dir,
	    path != NULL && *path != '\0' ? ":" : "",
	    path != NULL && *path != '\0' ? path : "");
	xasprintf(&mine[m++], "GRADAUDIT_LAUNCHES=%s", r->launches);
	xasprintf(&mine[m++], "BASH_ENV=%s/bash_env", r->dir);
	if (user != NULL && *user != '\0')
		xasprintf(&mine[m++], "GRADAUDIT_USER_BASH_ENV=%s", user);
	for (k = 0; k < m; k++)
		env[j++] = mine[k];
	env[j] = NULL;
	*owned = mine;
	return env;
}

/*
 * The child: a group of its own, the signal dispositions gradaudit started
 * with, /dev/null for stdin (a script waiting for input would hang until
 * the time limit), the pipe for stdout and stderr, then bash.
 */
static void __attribute__((noreturn))
script_child(char **argv, char **envp, const struct launch_signals *old,
    int out, int errfd)
{
	int	 fd;

	setpgid(0, 0);
	launch_signals_restore(old);
	signal(SIGPIPE, SIG_DFL);
	if ((fd = open("/dev/null", O_RDONLY)) == -1 ||
	    dup2(fd, STDIN_FILENO) == -1 || dup2(out, STDOUT_FILENO) == -1 ||
	    dup2(out, STDERR_FILENO) == -1)
		goto fail;
	proctree_exec(argv, envp, errfd);
fail:
	proctree_exec_fail(errfd);
}

/* Pass on what the script wrote, up to CAPTURE_OUTPUT_MAX bytes. */
static void
pump(struct capture_run *r, int msec)
{
	struct pollfd	 pfd;
	char		 buf[8192];
	ssize_t		 n;
	size_t		 room, shown;

	if (r->fd == -1) {
		if (msec > 0)
			poll(NULL, 0, msec);
		return;
	}
	pfd.fd = r->fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, msec) <= 0)
		return;
	for (;;) {
		n = read(r->fd, buf, sizeof(buf));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close(r->fd);
			r->fd = -1;
			return;
		}
		room = CAPTURE_OUTPUT_MAX - r->shown;
		shown = (size_t)n < room ? (size_t)n : room;
		if (shown > 0 && write(STDERR_FILENO, buf, shown) == -1) {
			/* Output that cannot be shown is not the script's fault. */
		}
		if (shown > 0)
			r->midline = buf[shown - 1] != '\n';
		r->shown += shown;
		r->cap->output_cut += (size_t)n - shown;
	}
}

/* Ask the script's group to end, then kill whatever is left, anywhere. */
static void
end_script(struct capture_run *r, pid_t pid, int sig, int *status)
{
	double	 deadline = clock_seconds() + CAPTURE_GRACE;

	kill(-pid, sig);
	kill(-pid, SIGCONT);
	while (!proctree_exited(pid) && clock_seconds() < deadline)
		pump(r, CAPTURE_POLL_MSEC);
	proctree_kill_all(pid, status, CAPTURE_KILL_WAIT);
}

/* Run bash FILE ARGS until it ends, the time limit, or a signal. */
static int
supervise(struct capture_run *r, const struct capture_options *opts,
    char **argv, char **envp)
{
	struct launch_signals	 old;
	struct capture		*cap = r->cap;
	double			 start, deadline;
	pid_t			 pid;
	int			 out[2], errpipe[2], child_errno = 0, sig;

	if (pipe(out) == -1 || pipe(errpipe) == -1)
		fatal("pipe");
	if (fcntl(out[0], F_SETFD, FD_CLOEXEC) == -1 ||
	    fcntl(out[1], F_SETFD, FD_CLOEXEC) == -1 ||
	    fcntl(errpipe[0], F_SETFD, FD_CLOEXEC) == -1 ||
	    fcntl(errpipe[1], F_SETFD, FD_CLOEXEC) == -1 ||
	    fcntl(out[0], F_SETFL, O_NONBLOCK) == -1)
		fatal("fcntl");
	fflush(stdout);
	fflush(stderr);
	launch_signals_catch(&old);
	proctree_adopt();
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid == 0) {
		close(out[0]);
		close(errpipe[0]);
		script_child(argv, envp, &old, out[1], errpipe[1]);
	}
	/* Both sides set the group, so neither order of events races. */
	setpgid(pid, pid);
	start = clock_seconds();
	close(out[1]);
	close(errpipe[1]);
	r->fd = out[0];
	if ((child_errno = proctree_exec_errno(errpipe[0])) != 0) {
		cap->status = proctree_wait(pid);
		proctree_release();
		launch_signals_restore(&old);
		close(r->fd);
		fprintf(stderr, "%s: import: cannot run bash for the script: "
		    "%s\n", progname, strerror(child_errno));
		return -1;
	}
	deadline = start + opts->timeout;
	while (!proctree_exited(pid)) {
		if ((sig = launch_signals_caught()) != 0) {
			end_script(r, pid, sig, &cap->status);
			cap->interrupted = sig;
			break;
		}
		if (clock_seconds() >= deadline) {
			end_script(r, pid, SIGTERM, &cap->status);
			cap->timed_out = true;
			break;
		}
		pump(r, CAPTURE_POLL_MSEC);
	}
	/* Nothing the script started outlives it. */
	if (!cap->timed_out && cap->interrupted == 0)
		proctree_kill_all(pid, &cap->status, CAPTURE_KILL_WAIT);
	deadline = clock_seconds() + CAPTURE_DRAIN;
	while (r->fd != -1 && clock_seconds() < deadline)
		pump(r, CAPTURE_POLL_MSEC);
	if (r->fd != -1)
		close(r->fd);
	r->fd = -1;
	/* Half a line of the script's would run into our messages. */
	if (r->midline && write(STDERR_FILENO, "\n", 1) == -1) {
		/* As above. */
	}
	proctree_release();
	launch_signals_restore(&old);
	return 0;
}

/* The next word of the launches' file, or NULL at its end. */
static const char *
next_word(const char **p, const char *end)
{
	const char	*w = *p, *nul;

	if (w >= end || (nul = memchr(w, '\0', (size_t)(end - w))) == NULL)
		return NULL;
	*p = nul + 1;
	return w;
}

/*
 * The launches, record by record.  A record cut short, or whose count is
 * not a number (two stand-ins writing at once), ends the reading: what
 * came before it is sound.
 */
static void
read_launches(struct capture_run *r)
{
	struct capture		*cap = r->cap;
	struct capture_launch	*l;
	const char		*p, *end, *w;
	char			*text, *stop;
	size_t			 len, i;
	long			 count;
	FILE			*fp;

	if ((fp = fopen(r->launches, "r")) == NULL)
		return;
	text = xmalloc(CAPTURE_FILE_MAX + 1);
	len = fread(text, 1, CAPTURE_FILE_MAX + 1, fp);
	fclose(fp);
	if (len > CAPTURE_FILE_MAX) {
		len = CAPTURE_FILE_MAX;
		cap->file_cut = true;
	}
	p = text;
	end = text + len;
	while ((w = next_word(&p, end)) != NULL) {
		count = strtol(w, &stop, 10);
		if (*w == '\0' || *stop != '\0' || count < 1 ||
		    count > CAPTURE_WORDS_MAX) {
			cap->file_cut = true;
			break;
		}
		cap->launches = xreallocarray(cap->launches, cap->n + 1,
		    sizeof(*cap->launches));
		l = &cap->launches[cap->n];
		l->argv = xcalloc((size_t)count + 1, sizeof(*l->argv));
		l->argc = 0;
		for (i = 0; i < (size_t)count; i++) {
			if ((w = next_word(&p, end)) == NULL)
				break;
			l->argv[l->argc++] = xstrdup(w);
		}
		if (l->argc < (size_t)count) {
			shellwords_free(l->argv, l->argc);
			cap->file_cut = true;
			break;
		}
		cap->n++;
	}
	free(text);
}

int
capture_script(const struct capture_options *opts, struct capture *cap)
{
	struct capture_run	 r;
	char			**argv, **envp, **owned;
	size_t			 i;
	int			 rc;

	memset(cap, 0, sizeof(*cap));
	memset(&r, 0, sizeof(r));
	r.cap = cap;
	r.fd = -1;
	if (make_dir(&r) == -1) {
		if (r.dir != NULL)
			remove_dir(r.dir);
		free(r.dir);
		free(r.launches);
		return -1;
	}
	argv = xcalloc(opts->nargs + 3, sizeof(*argv));
	argv[0] = (char *)"bash";
	argv[1] = (char *)opts->script;
	for (i = 0; i < opts->nargs; i++)
		argv[2 + i] = opts->args[i];
	envp = script_environment(&r, &owned);
	rc = supervise(&r, opts, argv, envp);
	if (rc == 0)
		read_launches(&r);
	for (i = 0; owned[i] != NULL; i++)
		free(owned[i]);
	free(owned);
	free(envp);
	free(argv);
	remove_dir(r.dir);
	free(r.dir);
	free(r.launches);
	return rc;
}

void
capture_free(struct capture *cap)
{
	size_t	 i;

	for (i = 0; i < cap->n; i++)
		shellwords_free(cap->launches[i].argv, cap->launches[i].argc);
	free(cap->launches);
	memset(cap, 0, sizeof(*cap));
}

static bool
ends_with(const char *s, const char *suffix)
{
	size_t	 n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The first word that names a Python script, or n. */
static size_t
find_script(char *const *words, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		if (ends_with(words[i], ".py"))
			break;
	return i;
}

static bool
is_shell(const char *w)
{
	static const char *const shells[] = {
		"bash", "sh", "dash", "zsh", "ksh", NULL
	};
	const char	*base = strrchr(w, '/') != NULL ? strrchr(w, '/') + 1 : w;
	size_t		 i;

	for (i = 0; shells[i] != NULL; i++)
		if (strcmp(base, shells[i]) == 0)
			return true;
	return false;
}

/*
 * The command line of a shell's words starting at words[i] (the shell):
 * the word after the option cluster holding 'c' ("-c", "-xc", "-lc"),
 * other options (-x, -e, -o pipefail, --norc) skipped.
 */
static const char *
shell_command_line(char *const *words, size_t n, size_t i)
{
	const char	*w;

	for (i++; i < n && (words[i][0] == '-' || words[i][0] == '+'); i++) {
		w = words[i];
		if (strcmp(w, "-o") == 0 || strcmp(w, "+o") == 0 ||
		    strcmp(w, "-O") == 0 || strcmp(w, "+O") == 0) {
			i++;
			continue;
		}
		if (w[0] == '-' && w[1] != '-' && strchr(w + 1, 'c') != NULL)
			return i + 1 < n ? words[i + 1] : NULL;
	}
	return NULL;
}

/*
 * A redirection word: digits, then '<' or '>' ("2>&1", ">log", ">>",
 * "<"); *alone when the file is the next word (">", "2>", ">>").
 */
static bool
is_redirection(const char *w, bool *alone)
{
	w += strspn(w, "0123456789");
	if (*w != '<' && *w != '>')
		return false;
	w += strspn(w, "<>|");
	*alone = *w == '\0';
	return true;
}

/* The words of a command, its redirections (and their files) left out. */
static char **
without_redirections(char **words, size_t *n)
{
	size_t	 i, j = 0;
	bool	 alone;

	for (i = 0; i < *n; i++) {
		if (!is_redirection(words[i], &alone)) {
			words[j++] = words[i];
			continue;
		}
		free(words[i]);
		if (alone && i + 1 < *n)
			free(words[++i]);
	}
	words[j] = NULL;
	*n = j;
	return words;
}

/* The first command of line that names a ".py", or NULL. */
static char **
python_command_of_line(const char *line, size_t *n)
{
	char	**words, *command;
	size_t	 len;

	while (*line != '\0') {
		len = shellwords_command_len(line);
		command = xmalloc(len + 1);
		memcpy(command, line, len);
		command[len] = '\0';
		words = shellwords_split(command, SHELLWORDS_COMMENTS, n);
		free(command);
		if (words != NULL) {
			words = without_redirections(words, n);
			if (find_script(words, *n) < *n)
				return words;
			shellwords_free(words, *n);
		}
		line += len;
		/* "&&" and "||" are two separators: skip both. */
		line += strspn(line, ";&|\n");
	}
	return NULL;
}

char **
capture_python_command(const struct capture_launch *l, size_t *nwords,
    size_t *script)
{
	char		**words, **inner;
	const char	*line;
	size_t		 i, j, n;

	if ((*script = find_script(l->argv, l->argc)) < l->argc) {
		words = xcalloc(l->argc + 1, sizeof(*words));
		for (i = 0; i < l->argc; i++)
			words[i] = xstrdup(l->argv[i]);
		*nwords = l->argc;
		return words;
	}
	for (i = 0; i < l->argc; i++) {
		if (!is_shell(l->argv[i]) ||
		    (line = shell_command_line(l->argv, l->argc, i)) == NULL ||
		    (inner = python_command_of_line(line, &n)) == NULL)
			continue;
		words = xcalloc(i + n + 1, sizeof(*words));
		for (j = 0; j < i; j++)
			words[j] = xstrdup(l->argv[j]);
		for (j = 0; j < n; j++)
			words[i + j] = inner[j];
		free(inner);
		*nwords = i + n;
		*script = i + find_script(words + i, n);
		return words;
	}
	return NULL;
}
