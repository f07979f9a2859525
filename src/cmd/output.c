/*
 * Loading configs and printing reports for the commands that audit.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exitcode.h"
#include "base/json.h"
#include "base/suggest.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "cmd/output.h"
#include "config/load.h"
#include "report/json-report.h"
#include "report/junit.h"
#include "report/report.h"
#include "report/summary.h"
#include "report/text-report.h"
#include "symbolic/symbolic.h"

/*
 * Nothing was audited: with --junit, every operand becomes an error case,
 * so that CI never reads an old report, or none, as a pass.
 */
void
output_junit_not_audited(const struct options *o, const char *why)
{
	struct audited	*v;
	char		*md = NULL;
	size_t		 len = 0;
	FILE		*fp;
	int		 i;

	if (o->junit == NULL && o->summary == NULL)
		return;
	v = xcalloc((size_t)o->nargs + 1, sizeof *v);
	for (i = 0; i < o->nargs; i++) {
		v[i].label = o->args[i];
		v[i].file = o->args[i];
		v[i].why_not = why;
	}
	if (o->junit != NULL)
		output_junit(o->junit, v, (size_t)o->nargs, "gradaudit");
	if (o->summary != NULL) {
		if ((fp = open_memstream(&md, &len)) == NULL)
			fatal("open_memstream");
		output_summary_write(fp, v, (size_t)o->nargs, "gradaudit");
		if (fclose(fp) != 0)
			fatal("memory stream");
		output_summary_bytes(o->summary, md, len);
		free(md);
	}
	free(v);
}

/*
 * The file a write to path lands in, into file (PATH_MAX bytes): links
 * are followed, a dangling last one too, since fopen creates its target.
 * False, errno set, for a chain of links longer than the kernel follows
 * or a name past PATH_MAX.
 */
static bool
link_target(const char *path, char *file)
{
	char		 target[PATH_MAX], *slash;
	struct stat	 st;
	ssize_t		 n;
	int		 hops;

	if ((size_t)snprintf(file, PATH_MAX, "%s", path) >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return false;
	}
	/* Bounded as the kernel bounds a chain of links (ELOOP). */
	for (hops = 0; lstat(file, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
		if (hops == 40) {
			errno = ELOOP;
			return false;
		}
		if ((n = readlink(file, target, sizeof target - 1)) == -1)
			return false;
		target[n] = '\0';
		if (target[0] != '/' && (slash = strrchr(file, '/')) != NULL)
			slash[1] = '\0';
		else
			file[0] = '\0';
		if (strlen(file) + strlen(target) >= PATH_MAX) {
			errno = ENAMETOOLONG;
			return false;
		}
		strcat(file, target);
	}
	return true;
}

/*
 * Whether path can be written, found before an audit that may take
 * minutes: an existing file is opened for writing without truncating it,
 * a new one is created and removed again, so that a failed run leaves no
 * empty report for CI to read.  A file that opens may still refuse every
 * write (/proc/version to root, /dev/full): a write of no bytes asks its
 * driver, and changes nothing.  Those were found only after the audit,
 * exit 3 (issue 26).
 */
static int
check_writable(const char *path, const char *what)
{
	struct stat	 st;
	char		 file[PATH_MAX];
	int		 fd;

	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			errno = EISDIR;
			goto fail;
		}
		/* Opening a FIFO could wait for its reader. */
		if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
			return EXIT_OK;
		if ((fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK |
		    O_CLOEXEC)) == -1)
			goto fail;
		if (write(fd, "", 0) == -1) {
			close(fd);
			goto fail;
		}
		close(fd);
		return EXIT_OK;
	}
	/*
	 * A dangling link: fopen creates the file it names, and O_EXCL on
	 * the link itself said "File exists" (--junit latest.xml, a link to
	 * a report not yet written, exit 2).  The file is tried instead.
	 */
	if (!link_target(path, file))
		goto fail;
	if ((fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0666)) == -1)
		goto fail;
	close(fd);
	unlink(file);
	return EXIT_OK;
fail:
	fprintf(stderr, "%s: %s: cannot write %s: %s\n", progname, path, what,
	    strerror(errno));
	return EXIT_USAGE;
}

/*
 * Whether path is an existing regular file that is the same file as
 * other (a name of it, a link to it).
 */
static bool
same_file(const char *path, const char *other)
{
	struct stat	 a, b;

	return other != NULL && strcmp(other, "-") != 0 &&
	    stat(path, &a) == 0 && S_ISREG(a.st_mode) &&
	    stat(other, &b) == 0 && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino;
}

/*
 * The directory a write to path lands in, resolved into dir (PATH_MAX
 * bytes), the last link followed as link_target does.  False when that
 * directory does not exist, which check_writable reports.
 */
static bool
landing_dir(const char *path, char *dir)
{
	char		 cur[PATH_MAX], *slash;

	if (!link_target(path, cur))
		return false;
	if ((slash = strrchr(cur, '/')) == NULL)
		snprintf(cur, sizeof cur, ".");
	else if (slash == cur)
		slash[1] = '\0';
	else
		*slash = '\0';
	return realpath(cur, dir) != NULL;
}

/*
 * The directory operand (compare's trace, --reference) that holds the
 * directory st, or NULL; *what says which.
 */
static const char *
dir_operand_of(const struct options *o, const struct stat *st,
    const char **what)
{
	struct stat	 op;
	int		 k;

	for (k = 0; k < o->nargs; k++)
		if (stat(o->args[k], &op) == 0 && S_ISDIR(op.st_mode) &&
		    op.st_dev == st->st_dev && op.st_ino == st->st_ino) {
			*what = "the operand";
			return o->args[k];
		}
	if (o->reference != NULL && stat(o->reference, &op) == 0 &&
	    S_ISDIR(op.st_mode) && op.st_dev == st->st_dev &&
	    op.st_ino == st->st_ino) {
		*what = "the --reference";
		return o->reference;
	}
	return NULL;
}

/*
 * The directory operand a report at path would be written into, at any
 * depth, or NULL.  "compare --junit T/parallel/manifest.json ..." replaced
 * the trace's manifest with JUnit XML and exited 0: each directory the
 * write lands in, and each above it, is compared by device and inode
 * with the directory operands, so that links and other spellings count.
 */
static const char *
inside_dir_operand(const struct options *o, const char *path,
    const char **what)
{
	char		 dir[PATH_MAX], *slash;
	const char	*found;
	struct stat	 st;

	if (!landing_dir(path, dir))
		return NULL;
	for (;;) {
		if (stat(dir, &st) == 0 &&
		    (found = dir_operand_of(o, &st, what)) != NULL)
			return found;
		if ((slash = strrchr(dir, '/')) == NULL || dir[1] == '\0')
			return NULL;
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
}

/*
 * A report written over a file the run reads or writes besides: a
 * configuration or the baseline, clobbered by a misplaced operand such as
 * "--junit a.yaml a.yaml b.yaml", or two reports into one file,
 * the second overwriting the first, or into a trace directory that is
 * an operand.  Each was done without a word.
 */
static int
check_distinct(const struct options *o, const char *path, const char *opt)
{
	const char	*outs[] = { o->junit, o->summary, o->write_baseline };
	const char	*opts[] = { "--junit", "--summary", "--write-baseline" };
	const char	*other = NULL, *what = NULL;
	size_t		 i;
	int		 k;

	if (strcmp(path, "-") != 0 &&
	    (other = inside_dir_operand(o, path, &what)) != NULL) {
		fprintf(stderr, "%s: %s %s would write into %s %s: write it "
		    "elsewhere\n", progname, opt, path, what, other);
		return EXIT_USAGE;
	}

	for (k = 0; k < o->nargs && other == NULL; k++)
		if (same_file(path, o->args[k])) {
			other = o->args[k];
			what = "the operand";
		}
	/* Rewriting the baseline read is --write-baseline's to do. */
	if (other == NULL && path != o->write_baseline &&
	    same_file(path, o->baseline_file)) {
		other = o->baseline_file;
		what = "the --baseline";
	}
	for (i = 0; i < sizeof outs / sizeof outs[0] && other == NULL; i++)
		if (outs[i] != path && same_file(path, outs[i])) {
			other = outs[i];
			what = opts[i];
		}
	if (other == NULL)
		return EXIT_OK;
	fprintf(stderr, "%s: %s %s would overwrite %s %s: write it "
	    "elsewhere\n", progname, opt, path, what, other);
	return EXIT_USAGE;
}

int
output_check_paths(const struct options *o)
{
	if ((o->junit != NULL &&
	    check_distinct(o, o->junit, "--junit") != EXIT_OK) ||
	    (o->summary != NULL &&
	    check_distinct(o, o->summary, "--summary") != EXIT_OK) ||
	    (o->write_baseline != NULL &&
	    check_distinct(o, o->write_baseline, "--write-baseline") !=
	    EXIT_OK))
		return EXIT_USAGE;
	if (o->junit != NULL &&
	    check_writable(o->junit, "JUnit report") != EXIT_OK)
		return EXIT_USAGE;
	if (o->summary != NULL &&
	    check_writable(o->summary, "summary") != EXIT_OK)
		return EXIT_USAGE;
	if (o->write_baseline != NULL &&
	    check_writable(o->write_baseline, "baseline") != EXIT_OK)
		return EXIT_USAGE;
	return EXIT_OK;
}

/*
 * With --write-baseline alone the baseline is empty: it only holds
 * today's date, found before the audit like any other error, and accepts
 * nothing (output_accept looks at --baseline).
 */
int
output_read_baseline(struct options *o, bool reports)
{
	char	 today[BASELINE_DATE_SIZE];

	if (o->baseline != NULL ||
	    (o->baseline_file == NULL && o->write_baseline == NULL))
		return EXIT_OK;
	if (baseline_today(today) < 0)
		goto fail;
	o->baseline = xcalloc(1, sizeof *o->baseline);
	if (o->baseline_file == NULL) {
		snprintf(o->baseline->today, sizeof o->baseline->today, "%s",
		    today);
		return EXIT_OK;
	}
	if (baseline_load(o->baseline, o->baseline_file, today) == 0)
		return EXIT_OK;
	free(o->baseline);
	o->baseline = NULL;
fail:
	if (reports)
		output_junit_not_audited(o, "baseline error, see stderr");
	return EXIT_USAGE;
}

void
output_accept(const struct options *o, const struct audited *v)
{
	if (o->baseline_file != NULL && o->baseline != NULL &&
	    v->audit != NULL)
		baseline_apply(o->baseline, v->audit, v->label, v->file);
}

static const char *
baseline_today_of(const struct options *o)
{
	if (o->baseline == NULL)
		fatalx("--write-baseline before output_read_baseline");
	return o->baseline->today;
}

static void
baseline_not_written(const struct options *o)
{
	fprintf(stderr, "%s: %s: baseline not written: not every "
	    "configuration was audited\n", progname, o->write_baseline);
}

bool
output_baseline_complete(const struct options *o, const struct audited *v,
    size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		if (v[i].audit == NULL) {
			baseline_not_written(o);
			return false;
		}
	return true;
}

void
output_baseline_write(FILE *fp, const struct options *o,
    const struct audited *v, size_t n)
{
	struct baseline_draft	 d;
	size_t			 i;

	memset(&d, 0, sizeof d);
	for (i = 0; i < n; i++)
		if (v[i].audit != NULL)
			baseline_draft_add(&d, v[i].audit, v[i].label);
	baseline_draft_write(fp, &d, baseline_today_of(o));
	baseline_draft_free(&d);
}

static int
write_draft(const struct options *o, const struct baseline_draft *d)
{
	FILE	*fp;

	if ((fp = output_open(o->write_baseline, "w", "baseline")) == NULL)
		return EXIT_RUNTIME;
	baseline_draft_write(fp, d, baseline_today_of(o));
	return output_close(fp, o->write_baseline);
}

int
output_baseline_bytes(const char *path, const char *yaml, size_t len)
{
	FILE	*fp;

	/* Bytes the MPI job already rendered. */
	if ((fp = output_open(path, "w", "baseline")) == NULL)
		return EXIT_RUNTIME;
	fwrite(yaml, 1, len, fp);
	return output_close(fp, path);
}

static void
batch_push(struct batch *b, const struct batch_item *it)
{
	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 16;
		b->items = xreallocarray(b->items, b->cap, sizeof *b->items);
	}
	b->items[b->n++] = *it;
}

static void
batch_error(struct batch *b, const char *file, const char *name,
    const char *msg)
{
	struct batch_item	 it;

	it.config = -1;
	it.file = xstrdup(file);
	it.name = name != NULL ? xstrdup(name) : cfg_file_name(file);
	it.error = xstrdup(msg != NULL ? msg : "configuration error");
	batch_push(b, &it);
	b->nerrors++;
}

/* Move a loaded config into the batch: the struct, not its strings. */
static void
batch_config(struct batch *b, struct config *c)
{
	struct batch_item	 it;

	if (b->list.n == b->listcap) {
		b->listcap = b->listcap ? 2 * b->listcap : 16;
		b->list.v = xreallocarray(b->list.v, b->listcap,
		    sizeof *b->list.v);
	}
	b->list.v[b->list.n] = *c;
	memset(&it, 0, sizeof it);
	it.config = (long)b->list.n++;
	batch_push(b, &it);
}

/*
 * The batch's first configs are the array cfg_load made, moved in place:
 * a copy held the configs of a file twice, as long as it took to load it
 * (issue 26: 2.6 GB for a list of 932,000).
 */
static void
batch_adopt(struct batch *b, struct config_list *one)
{
	if (b->list.n > 0 || one->n == 0)
		return;
	free(b->list.v);
	b->list.v = one->v;
	b->listcap = one->n;
	one->v = NULL;
}

size_t
output_load_batch(const struct options *o, struct batch *b)
{
	struct config_list	 one;
	struct config		*v;
	const char		*why;
	enum cfg_key		 blame;
	struct cfg_mark		 at;
	char			 whybuf[SYM_WHY_SIZE];
	size_t			 k;
	int			 i;

	memset(b, 0, sizeof *b);
	for (i = 0; i < o->nargs; i++) {
		memset(&one, 0, sizeof one);
		if (cfg_load_as(o->frameworks, o->args[i],
		    o->read_from != NULL ? o->read_from[i] : NULL, o->sets,
		    o->nsets, &one) < 0) {
			batch_error(b, o->args[i], NULL, one.error);
			config_list_free(&one);
			continue;
		}
		/*
		 * Adopted, one.v is b->list.v: config k moves to place
		 * b->list.n, which is never past it.
		 */
		batch_adopt(b, &one);
		v = one.v != NULL ? one.v : b->list.v;
		for (k = 0; k < one.n; k++) {
			if ((why = sym_unauditable_at(&v[k], &blame, &at,
			    whybuf, sizeof whybuf)) == NULL) {
				batch_config(b, &v[k]);
				continue;
			}
			if (at.line > 0)
				cfg_error_at(&v[k], at, &one.error, "%s", why);
			else
				cfg_error(&v[k], blame, &one.error, "%s", why);
			batch_error(b, v[k].file, v[k].name, one.error);
			cfg_free(&v[k]);
		}
		free(one.v);
		free(one.error);
	}
	return b->nerrors;
}

void
batch_free(struct batch *b)
{
	size_t	 i;

	for (i = 0; i < b->n; i++) {
		free(b->items[i].file);
		free(b->items[i].name);
		free(b->items[i].error);
	}
	free(b->items);
	config_list_free(&b->list);
	memset(b, 0, sizeof *b);
}

void
batch_entry_unaudited(const struct batch *b, size_t i, struct audited *v,
    bool loud)
{
	batch_entry(b, i, v);
	if (v->why_not != NULL)
		return;
	v->why_not = "not audited: a config before it in the batch went "
	    "past GRADAUDIT_MAX_MEMORY";
	if (loud)
		fprintf(stderr, "%s: %s: %s\n", progname, v->file, v->why_not);
}

void
batch_entry(const struct batch *b, size_t i, struct audited *v)
{
	const struct batch_item	*it = &b->items[i];

	memset(v, 0, sizeof *v);
	if (it->config < 0) {
		v->label = it->name;
		v->file = it->file;
		v->why_not = it->error;
	} else {
		v->label = b->list.v[it->config].name;
		v->file = b->list.v[it->config].file;
	}
}

int
output_load_configs(const struct options *o, const struct keyset *varying,
    struct config_list *list)
{
	const char	*why;
	enum cfg_key	 blame;
	struct cfg_mark	 at;
	char		 whybuf[SYM_WHY_SIZE];
	size_t		 k;
	int		 i;

	memset(list, 0, sizeof *list);
	for (i = 0; i < o->nargs; i++)
		if (cfg_load_varying(o->frameworks, o->args[i], NULL, o->sets,
		    o->nsets, varying, list) < 0)
			goto fail;
	for (k = 0; k < list->n; k++) {
		if ((why = sym_unauditable_at(&list->v[k], &blame, &at,
		    whybuf, sizeof whybuf)) != NULL) {
			if (at.line > 0)
				cfg_error_at(&list->v[k], at, NULL, "%s", why);
			else
				cfg_error(&list->v[k], blame, NULL, "%s", why);
			goto fail;
		}
	}
	return 0;
fail:
	config_list_free(list);
	output_junit_not_audited(o, "configuration error, see stderr");
	return -1;
}

bool
output_as_array(const struct config_list *list)
{
	size_t	i;

	for (i = 0; i < list->n; i++)
		if (list->v[i].in_list)
			return true;
	return list->n > 1;
}


/* run --shrink: which config the numeric audit proved, for system-out. */
static char *
shrunk_text(const struct audit *a)
{
	char	*buf = NULL;
	size_t	 len = 0, i;
	FILE	*fp;

	if ((fp = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	if (a->shrunk) {
		fprintf(fp, "numeric: proven on a shrunk config with the same "
		    "symbolic verdict, world %lld:", (long long)a->shrunk_world);
		for (i = 0; i < a->nshrunk_sets; i++)
			fprintf(fp, " --set %s", a->shrunk_sets[i]);
	} else
		fprintf(fp, "numeric: %s; the full config is proven",
		    a->shrink_note);
	if (fclose(fp) != 0)
		fatal("open_memstream");
	return buf;
}

/*
 * The JUnit test case of one entry, with copies of its strings: a stream
 * keeps the case after the audit is freed.
 */
static void
case_of(const struct audited *v, struct junit_case *c)
{
	const struct audit	*a = v->audit;

	memset(c, 0, sizeof *c);
	c->name = xstrdup(v->label);
	c->file = v->file != NULL ? xstrdup(v->file) : NULL;
	c->seconds = v->seconds;
	if (a != NULL && a->numeric_skipped != NULL)
		xasprintf((char **)&c->system_out, "numeric: skipped (%s)%s%s",
		    a->numeric_skipped, a->shrink_note != NULL ? "; " : "",
		    a->shrink_note != NULL ? a->shrink_note : "");
	else if (a != NULL && (a->shrunk || a->shrink_note != NULL))
		c->system_out = shrunk_text(a);
	if (a == NULL) {
		c->error = true;
		c->failure_message = xstrdup(v->why_not ? v->why_not :
		    "not audited");
		/* The message names file:line:col; the body keeps it whole. */
		c->failure_text = xstrdup(c->failure_message);
		return;
	}
	/* Accepted: skipped, with the reasons, and the findings as text. */
	if (audit_accepted(a)) {
		c->skipped = true;
		c->failure_text = junit_failure_text(a);
		c->failure_message = junit_skipped_message(a);
		return;
	}
	if (audit_passes(a))
		return;
	c->failed = true;
	c->failure_text = junit_failure_text(a);
	c->failure_message = junit_failure_message(a);
}

static void
cases_free(struct junit_case *cases, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		free((char *)cases[i].name);
		free((char *)cases[i].failure_message);
		free((char *)cases[i].failure_text);
		free((char *)cases[i].file);
		free((char *)cases[i].system_out);
	}
	free(cases);
}

void
output_junit_write(FILE *fp, const struct audited *v, size_t n,
    const char *suite)
{
	struct junit_case *cases = xcalloc(n + 1, sizeof *cases);
	size_t	 i;

	for (i = 0; i < n; i++)
		case_of(&v[i], &cases[i]);
	junit_write(fp, suite, cases, n);
	cases_free(cases, n);
}

FILE *
output_open(const char *path, const char *mode, const char *what)
{
	FILE	*fp;

	if ((fp = fopen(path, mode)) == NULL)
		fprintf(stderr, "%s: %s: cannot write %s: %s\n", progname,
		    path, what, strerror(errno));
	return fp;
}

int
output_close(FILE *fp, const char *path)
{
	if (ferror(fp) | (fclose(fp) != 0)) {
		fprintf(stderr, "%s: %s: write error\n", progname, path);
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* Write a JUnit file of the given test cases: EXIT_OK or EXIT_RUNTIME. */
static int
write_junit_file(const char *path, const struct junit_case *cases, size_t n,
    const char *suite)
{
	FILE	*fp;

	if ((fp = output_open(path, "w", "JUnit report")) == NULL)
		return EXIT_RUNTIME;
	junit_write(fp, suite, cases, n);
	return output_close(fp, path);
}

int
output_junit(const char *path, const struct audited *v, size_t n,
    const char *suite)
{
	struct junit_case *cases = xcalloc(n + 1, sizeof *cases);
	size_t	 i;
	int	 status;

	for (i = 0; i < n; i++)
		case_of(&v[i], &cases[i]);
	status = write_junit_file(path, cases, n, suite);
	cases_free(cases, n);
	return status;
}

int
output_junit_bytes(const char *path, const char *xml, size_t len)
{
	FILE	*fp;

	/* Bytes the MPI job already rendered. */
	if ((fp = output_open(path, "w", "JUnit report")) == NULL)
		return EXIT_RUNTIME;
	fwrite(xml, 1, len, fp);
	return output_close(fp, path);
}

/* "gradaudit.run" is the summary's heading "gradaudit run". */
static void
summary_of(FILE *fp, const struct summary_row *rows, size_t n,
    const char *suite)
{
	char	*title = xstrdup(suite), *dot;

	if ((dot = strchr(title, '.')) != NULL)
		*dot = ' ';
	summary_write(fp, title, rows, n);
	free(title);
}

void
output_summary_write(FILE *fp, const struct audited *v, size_t n,
    const char *suite)
{
	struct summary_row	*rows = xcalloc(n + 1, sizeof *rows);
	size_t			 i;

	for (i = 0; i < n; i++)
		summary_row_of(&rows[i], v[i].label, v[i].audit, v[i].why_not);
	summary_of(fp, rows, n, suite);
	summary_rows_free(rows, n);
}

/*
 * Appended, never truncated: GitHub's $GITHUB_STEP_SUMMARY is one file for
 * every step of a job, and the summaries of several runs follow each other.
 */
static int
append_summary(const char *path, const struct summary_row *rows, size_t n,
    const char *suite)
{
	FILE	*fp;

	if ((fp = output_open(path, "a", "summary")) == NULL)
		return EXIT_RUNTIME;
	summary_of(fp, rows, n, suite);
	return output_close(fp, path);
}

int
output_summary_bytes(const char *path, const char *md, size_t len)
{
	FILE	*fp;

	/* Bytes the MPI job already rendered, appended as above. */
	if ((fp = output_open(path, "a", "summary")) == NULL)
		return EXIT_RUNTIME;
	fwrite(md, 1, len, fp);
	return output_close(fp, path);
}

/* A config not audited, in a JSON array: which, and why. */
void
jsonw_not_audited(struct json *j, const struct audited *v)
{
	jsonw_begin_object(j);
	jsonw_key_string(j, "tool", "gradaudit");
	jsonw_key_string(j, "version", REPORT_VERSION);
	if (v->file != NULL)
		jsonw_key_string(j, "config", v->file);
	if (v->label != NULL)
		jsonw_key_string(j, "name", v->label);
	jsonw_key_string(j, "error", v->why_not != NULL ? v->why_not :
	    "not audited");
	/*
	 * No findings, but the key all objects have: jq '.findings[]' over
	 * a batch goes on past a config that did not load.
	 */
	jsonw_key(j, "findings");
	jsonw_begin_array(j);
	jsonw_end_array(j);
	jsonw_end_object(j);
}

/* The statuses of a batch combine to the most severe: 3 > 2 > 1 > 0. */
static int
entry_status(const struct audited *v)
{
	if (v->audit == NULL)
		return EXIT_USAGE;
	return audit_passes(v->audit) ? EXIT_OK : EXIT_WRONG;
}

/*
 * Whether any report asked for shows a finding's fix: -q text alone
 * prints the summary line, and deriving fixes audits the config again
 * once per candidate setting (30 times for MTP with cp at 4,096 ranks,
 * two thirds of its check).
 */
bool
output_wants_fixes(const struct options *o)
{
	return !(o->format == FORMAT_TEXT && o->quiet) || o->junit != NULL;
}

/*
 * --expand of an audit whose expanded report would pass REPORT_EXPAND_MAX,
 * unforced: said on stderr with the size, and nothing written for it.
 */
bool
output_expand_refused(const struct options *o, const struct audit *a,
    const char *what)
{
	uint64_t	 size;

	if (!o->expand || o->force_expand)
		return false;
	if ((size = report_expand_size(a)) <= REPORT_EXPAND_MAX)
		return false;
	fprintf(stderr, "%s: %s: --expand would write about %llu MiB of JSON "
	    "for this configuration, over its bound of %llu MiB: leave out "
	    "--expand (the report groups ranks and atoms), or give "
	    "--force-expand\n", progname, what,
	    (unsigned long long)(size >> 20),
	    (unsigned long long)(REPORT_EXPAND_MAX >> 20));
	return true;
}

void
output_begin(struct output_stream *s, const struct options *o, bool array,
    size_t n)
{
	memset(s, 0, sizeof *s);
	s->options = o;
	s->array = array;
	s->status = EXIT_OK;
	s->report.verbose = o->verbose;
	s->report.quiet = o->quiet;
	s->report.color = options_use_color(o, stdout);
	s->report.name_summary = n > 1;
	s->report.expand = o->expand;
	s->report.param = o->param;
	s->report.select_rank = o->select_rank;
	s->report.rank = o->rank;
	if (o->format == FORMAT_JSON) {
		jsonw_init(&s->json, stdout, false);
		if (array)
			jsonw_begin_array(&s->json);
	}
}

/*
 * --param and --rank name something of each audited config; a name or rank
 * it lacks is a usage error, said on stderr with the closest name, not a
 * report line a script would read past.
 */
static int
check_selection(const struct options *o, const struct audit *a,
    const char *file)
{
	struct suggestion	 sg;
	size_t			 i;
	int			 rc = EXIT_OK;

	if (o->param != NULL) {
		suggest_init(&sg, o->param, strlen(o->param));
		for (i = 0; i < a->nparams; i++) {
			const struct param_result *p = &a->params[i];

			if (strcmp(p->name, o->param) == 0 ||
			    (p->tied_with != NULL &&
			    strcmp(p->tied_with, o->param) == 0))
				break;
			suggest_consider(&sg, p->name);
			if (p->tied_with != NULL)
				suggest_consider(&sg, p->tied_with);
		}
		if (i == a->nparams) {
			char q[TEXT_QUOTE_SIZE];

			/* Quoted as all input is: it held raw escapes. */
			text_cut(q, sizeof q, o->param, strlen(o->param));
			fprintf(stderr, "%s: %s: --param %s: no such parameter",
			    progname, file, q);
			if (suggest_best(&sg) != NULL)
				fprintf(stderr, " (did you mean %s?)",
				    suggest_best(&sg));
			fputc('\n', stderr);
			rc = EXIT_USAGE;
		}
	}
	if (o->select_rank && o->rank >= a->mesh.world) {
		fprintf(stderr, "%s: %s: --rank %d: the mesh has ranks 0 to %d\n",
		    progname, file, o->rank, a->mesh.world - 1);
		rc = EXIT_USAGE;
	}
	return rc;
}

void
output_add(struct output_stream *s, const struct audited *v)
{
	const struct options	*o = s->options;
	const struct audit	*a = v->audit;
	/*
	 * What JUnit and the summary record: a config refused for its
	 * selection or --expand is an error there too, as in JSON, not a
	 * pass beside an exit status of 2.
	 */
	const struct audited	*shown = v;
	struct audited		 refused;
	int			 st, sel;

	output_accept(o, v);
	st = entry_status(v);
	s->unaudited |= a == NULL;
	/*
	 * A --param or --rank the config lacks is a usage error, checked
	 * before its report: printing the report's header first left a
	 * script a report to read where nothing was selected.
	 */
	if (a != NULL && (sel = check_selection(o, a, v->file != NULL ?
	    v->file : "-")) != EXIT_OK) {
		refused = *v;
		refused.audit = NULL;
		refused.why_not = "--param or --rank names nothing in it";
		shown = &refused;
		st = sel;
		if (o->format == FORMAT_JSONL) {
			jsonw_init(&s->json, stdout, true);
			jsonw_not_audited(&s->json, &refused);
		} else if (o->format == FORMAT_JSON && s->array)
			jsonw_not_audited(&s->json, &refused);
	} else if (a != NULL && o->format == FORMAT_JSON &&
	    output_expand_refused(o, a, v->file != NULL ? v->file : "-")) {
		refused = *v;
		refused.audit = NULL;
		refused.why_not = "--expand past its size bound";
		shown = &refused;
		st = EXIT_USAGE;
		if (s->array)
			jsonw_not_audited(&s->json, &refused);
	} else if (a != NULL && o->format == FORMAT_JSON)
		report_json(&s->json, a, &s->report);
	else if (o->format == FORMAT_JSONL) {
		/* A line per config: the same shape for one config or many. */
		jsonw_init(&s->json, stdout, true);
		if (a != NULL)
			report_json_summary(&s->json, a);
		else
			jsonw_not_audited(&s->json, v);
	} else if (o->format == FORMAT_JSON && s->array)
		jsonw_not_audited(&s->json, v);
	else if (a != NULL) {
		if (s->count > 0 && !o->quiet)
			fputc('\n', stdout);
		report_text(stdout, a, &s->report);
	}
	s->count++;
	if (st > s->status)
		s->status = st;
	/* A config refused here, as one not audited, drafts nothing. */
	if (shown->audit != NULL && o->write_baseline != NULL)
		baseline_draft_add(&s->draft, shown->audit, v->label);
	if (o->junit == NULL && o->summary == NULL)
		return;
	if (s->ncases == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->cases = xreallocarray(s->cases, s->cap, sizeof *s->cases);
		s->rows = xreallocarray(s->rows, s->cap, sizeof *s->rows);
	}
	if (o->junit != NULL)
		case_of(shown, &s->cases[s->ncases]);
	if (o->summary != NULL)
		summary_row_of(&s->rows[s->ncases], shown->label,
		    shown->audit, shown->why_not);
	s->ncases++;
}

int
output_end(struct output_stream *s, const char *suite)
{
	const struct options	*o = s->options;
	int			 status = s->status;

	if (o->format == FORMAT_JSON && s->array)
		jsonw_end_array(&s->json);
	if (o->junit != NULL && write_junit_file(o->junit, s->cases,
	    s->ncases, suite) != EXIT_OK)
		status = EXIT_RUNTIME;
	if (o->summary != NULL && append_summary(o->summary, s->rows,
	    s->ncases, suite) != EXIT_OK)
		status = EXIT_RUNTIME;
	if (o->junit != NULL)
		cases_free(s->cases, s->ncases);
	else
		free(s->cases);
	if (o->summary != NULL)
		summary_rows_free(s->rows, s->ncases);
	else
		free(s->rows);
	/*
	 * A stale entry names an audited config but matches no finding of
	 * it: the finding was fixed, or the entry never matched.  Said, not
	 * failed, unless --strict-baseline.
	 */
	if (o->baseline_file != NULL && o->baseline != NULL &&
	    baseline_report_stale(o->baseline, stderr) > 0 &&
	    o->strict_baseline && status == EXIT_OK)
		status = EXIT_WRONG;
	if (o->write_baseline != NULL && s->unaudited)
		baseline_not_written(o);
	else if (o->write_baseline != NULL &&
	    write_draft(o, &s->draft) != EXIT_OK)
		status = EXIT_RUNTIME;
	baseline_draft_free(&s->draft);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: error writing the report to stdout\n",
		    progname);
		status = EXIT_RUNTIME;
	}
	memset(s, 0, sizeof *s);
	return status;
}

int
output_audits(const struct options *o, const struct audited *v, size_t n,
    bool array, const char *suite)
{
	struct output_stream	 s;
	size_t			 i;

	output_begin(&s, o, array, n);
	for (i = 0; i < n; i++)
		output_add(&s, &v[i]);
	return output_end(&s, suite);
}
