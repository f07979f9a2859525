/*
 * Deterministic mutation fuzzing of the baseline reader (TAP), as
 * tests/fuzz-config.c does for the configuration loader.
 *
 * A few valid baselines are mutated thousands of times (bit flips,
 * deletions, YAML punctuation, mangled keys and dates, junk bytes,
 * repeated lines, and several of these at once), and each result goes
 * through baseline_load in-process.  The reader must return 0 or -1 and
 * never crash (under ASan that is the real check); on -1 it must have
 * written exactly one "gradaudit: FILE..." line to stderr and left the
 * baseline empty; on 0 nothing to stderr, and entries that keep the
 * file's promises (a kind, a reason of one line, at least one parameter
 * glob, a date or none).  Every baseline that loads is then applied to a
 * small audit, and the baseline --write-baseline makes of the result must
 * read back and accept each finding the first one accepted: the writer
 * quotes whatever reason the mutations produced.
 *
 * stderr goes to a scratch file for the whole run, so that a crash report
 * lands there: both paths are printed first, as TAP comments.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "model/mesh.h"
#include "report/baseline.h"
#include "symbolic/audit.h"
#include "fuzz-text.h"
#include "tap.h"

#define CASES	80	/* mutations per seed and kind */
#define TODAY	"2026-06-15"

static const char *const seeds[] = {
	"- config: megatron-844\n"
	"  kind: wrong-order\n"
	"  params: embedding.weight\n"
	"  reason: tied embeddings reduced after dp on purpose\n",

	"# two entries, a list of globs, a mechanism and dates\n"
	"- config: \"gpt3-*\"\n"
	"  kind: wrong-weights\n"
	"  params:\n"
	"    - \"layers.*\"\n"
	"    - 'embedding.weight'\n"
	"  mechanism: \"*loss*\"\n"
	"  reason: Megatron averages micro-batch means\n"
	"  expires: 2027-01-31\n"
	"- config: testdata/*.yaml\n"
	"  kind: over-count\n"
	"  params: [\"*\"]\n"
	"  reason: >\n"
	"    folded over\n"
	"    two lines\n"
	"  expires: 2026-06-16\n",

	"[{config: \"*\", kind: double-count, params: [\"w?0?*\", layers.*], "
	"reason: \"quoted \\\"\\u00e9\\\" \\\\ text\"}]\n",

	"---\n- config: 'a''b'\n  kind: wrong-value\n  params: \"*\"\n"
	"  reason: x\n...\n",

	"- config: \"fuzz*\"\n  kind: missing-reduction\n  params: \"*\"\n"
	"  reason: \"everything\"\n"
	"- config: \"*\"\n  kind: inconsistent-clip\n  params: \"*\"\n"
	"  reason: stale here\n  expires: 2024-02-29\n",
};
#define NSEEDS	(sizeof(seeds) / sizeof(seeds[0]))

static const char *const punctuation[] = {
	":", ": ", "-", "- ", "{", "}", "[", "]", ",", "&a ", "*a", "!!str ",
	"|", ">", "'", "\"", "#", "%YAML 1.1\n", "? ", "\n", "\t", "  ",
	"---\n", "...\n", "<<: ", "~", "\\", "\0", "\xff", "\xc3",
	"\xef\xbb\xbf", "*", "?", "[!", "\\u0000", "\\x07", "null",
};

static const char *const words[] = {
	"config", "kind", "params", "mechanism", "reason", "expires",
	"wrong-order", "wrong-weight", "over-count", "2026-02-29",
	"2028-02-29", "2026-13-01", "9999-12-31", "0000-01-01", "2026-06-14",
	"2026-06-16", "\"\"", "[]", "{}", "- x", "*",
};

static char	 input_path[] = "/tmp/fuzz-baseline-in.XXXXXX";
static char	 draft_path[] = "/tmp/fuzz-baseline-out.XXXXXX";
static char	 errors_path[] = "/tmp/fuzz-baseline-err.XXXXXX";
static int	 input_fd, draft_fd, errors_fd;
static int	 loaded, rejected, accepting;

static void
mutate_flip(struct text *t)
{
	if (t->len > 0)
		t->s[pick(t->len)] ^= (char)(1u << pick(8));
}

static void
mutate_delete(struct text *t)
{
	text_delete(t, pick(t->len), 1 + pick(8));
}

static void
mutate_punctuation(struct text *t)
{
	const char	*p = punctuation[pick(sizeof(punctuation) /
			    sizeof(punctuation[0]))];

	/* "\0" is one byte long: strlen would make it empty. */
	text_insert(t, pick(t->len + 1), p, p[0] == '\0' ? 1 : strlen(p));
}

/* Replace a word (a run of letters, digits and '-') with another. */
static void
mutate_word(struct text *t)
{
	const char	*w = words[pick(sizeof(words) / sizeof(words[0]))];
	size_t		 at = pick(t->len + 1), end;

	while (at > 0 && (t->s[at - 1] == '-' || (t->s[at - 1] >= 'a' &&
	    t->s[at - 1] <= 'z') || (t->s[at - 1] >= '0' &&
	    t->s[at - 1] <= '9')))
		at--;
	for (end = at; end < t->len && (t->s[end] == '-' ||
	    (t->s[end] >= 'a' && t->s[end] <= 'z') ||
	    (t->s[end] >= '0' && t->s[end] <= '9')); end++)
		continue;
	text_delete(t, at, end - at);
	text_insert(t, at, w, strlen(w));
}

static void
mutate_junk(struct text *t)
{
	char	 junk[4];
	size_t	 i, n = 1 + pick(4);

	for (i = 0; i < n; i++)
		junk[i] = (char)pick(256);
	text_insert(t, pick(t->len + 1), junk, n);
}

/* Repeat a whole line somewhere: duplicate keys, odd indentation. */
static void
mutate_line(struct text *t)
{
	size_t	 start = pick(t->len), end;
	char	*line;

	while (start > 0 && t->s[start - 1] != '\n')
		start--;
	for (end = start; end < t->len && t->s[end] != '\n'; end++)
		continue;
	if (end < t->len)
		end++;
	line = xmalloc(end - start + 1);
	memcpy(line, t->s + start, end - start);
	text_insert(t, pick(t->len + 1), line, end - start);
	free(line);
}

static void	mutate_mixed(struct text *);

static const struct mutation {
	const char	 *name;
	void		(*apply)(struct text *);
} mutations[] = {
	{ "bit flips", mutate_flip },
	{ "deletions", mutate_delete },
	{ "YAML punctuation", mutate_punctuation },
	{ "words, kinds and dates", mutate_word },
	{ "junk bytes", mutate_junk },
	{ "repeated lines", mutate_line },
	{ "mixed", mutate_mixed },
};
#define NMUTATIONS	(sizeof(mutations) / sizeof(mutations[0]))

static void
mutate_mixed(struct text *t)
{
	size_t	 i, n = 2 + pick(4);

	for (i = 0; i < n; i++)
		mutations[pick(NMUTATIONS - 1)].apply(t);
}

/* Overwrite in place: see tests/fuzz-config.c on ext4 and truncation. */
static void
write_input(const struct text *t)
{
	if (pwrite(input_fd, t->s, t->len, 0) != (ssize_t)t->len ||
	    ftruncate(input_fd, (off_t)t->len) == -1)
		fatal("%s", input_path);
}

/* What the reader wrote to stderr since the last call, NUL-terminated. */
static char *
take_errors(size_t *len)
{
	struct stat	 st;
	char		*buf;
	ssize_t		 n;

	fflush(stderr);
	if (fstat(errors_fd, &st) == -1)
		fatal("fstat");
	buf = xmalloc((size_t)st.st_size + 1);
	if ((n = pread(errors_fd, buf, (size_t)st.st_size, 0)) < 0)
		fatal("pread");
	buf[n] = '\0';
	*len = (size_t)n;
	if (ftruncate(errors_fd, 0) == -1 || lseek(2, 0, SEEK_SET) == -1)
		fatal("truncating %s", errors_path);
	return buf;
}

/*
 * The audit every baseline is applied to: findings of every kind, over
 * parameters whose names hold glob characters, and one without any.
 */
static const char *const names[] = {
	"embedding.weight", "layers.0.mlp.weight", "w[0]*?\\odd",
	"layers.1.attn.qkv.weight",
};

static void
make_audit(struct audit *a)
{
	struct finding	*f;
	int		 k;

	memset(a, 0, sizeof(*a));
	arena_init(&a->arena);
	mesh_init(&a->mesh, 2, 1, 1, 1, 1, 1);
	a->params = arena_alloc(&a->arena, 4 * sizeof(*a->params));
	a->nparams = 4;
	for (k = 0; k < 4; k++)
		a->params[k].name = names[k];
	a->findings = arena_alloc(&a->arena, FINDING__COUNT *
	    sizeof(*a->findings));
	for (k = 0; k < FINDING__COUNT; k++) {
		f = &a->findings[a->nfindings++];
		f->kind = (enum finding_kind)k;
		f->params = (const char **)&names[k % 4];
		f->nparams = k == 3 ? 0 : 1 + (size_t)(k % 4 < 3 && k % 2);
		f->param = k == 3 ? NULL : names[k % 4];
		f->op = k % 3 == 0 ? NULL : "dp loss scaling";
		f->message = "a fuzzed finding";
	}
}

/* The promises of a baseline that loaded. */
static const char *
check_entries(const struct baseline *b)
{
	const struct baseline_entry *e;
	size_t	 i, k;

	for (i = 0; i < b->n; i++) {
		e = &b->entries[i];
		if ((unsigned)e->kind >= FINDING__COUNT)
			return "an entry has no kind";
		if (e->config == NULL || *e->config == '\0')
			return "an entry has no config";
		if (e->nparams == 0)
			return "an entry has no parameter glob";
		for (k = 0; k < e->nparams; k++)
			if (e->params[k] == NULL || *e->params[k] == '\0')
				return "an entry has an empty glob";
		if (e->reason == NULL || *e->reason == '\0' ||
		    strchr(e->reason, '\n') != NULL)
			return "an entry's reason is not one line";
		if (e->expires[0] != '\0' && (strlen(e->expires) != 10 ||
		    e->expired != (strcmp(e->expires, TODAY) <= 0)))
			return "an entry's date or expiry is wrong";
		if (e->expires[0] == '\0' && e->expired)
			return "an entry without a date expired";
		if (e->at == NULL || strncmp(e->at, input_path,
		    strlen(input_path)) != 0)
			return "an entry does not say where it is";
	}
	return NULL;
}

/*
 * Apply b, write the draft of what it accepted, read that back and apply
 * it to a fresh audit: the same findings must be accepted.
 */
static const char *
check_round_trip(struct baseline *b)
{
	struct audit		 a, again;
	struct baseline_draft	 d;
	struct baseline		 back;
	FILE			*fp;
	const char		*why = NULL;
	size_t			 i, n, len;
	char			*errors;

	make_audit(&a);
	baseline_apply(b, &a, "fuzz \"q\" [x]*", "testdata/fuzz.yaml");
	for (i = 0; i < a.nfindings; i++)
		if (a.findings[i].accepted && a.findings[i].reason == NULL)
			why = "a finding accepted without a reason";
	if ((n = audit_accepted_findings(&a)) > 0)
		accepting++;
	memset(&d, 0, sizeof(d));
	baseline_draft_add(&d, &a, "fuzz \"q\" [x]*");
	if ((fp = fopen(draft_path, "w")) == NULL)
		fatal("%s", draft_path);
	baseline_draft_write(fp, &d, TODAY);
	if (fclose(fp) != 0)
		fatal("%s", draft_path);
	baseline_draft_free(&d);
	if (baseline_load(&back, draft_path, TODAY) != 0) {
		errors = take_errors(&len);
		tap_diag("reading the draft back: %s", errors);
		free(errors);
		audit_free(&a);
		return "the written baseline does not read back";
	}
	make_audit(&again);
	baseline_apply(&back, &again, "fuzz \"q\" [x]*", NULL);
	for (i = 0; why == NULL && i < a.nfindings; i++)
		if (!again.findings[i].accepted)
			why = "the written baseline does not accept a finding";
		else if (a.findings[i].accepted &&
		    strcmp(again.findings[i].reason, a.findings[i].reason) != 0)
			why = "the written baseline changed a reason";
	if (why == NULL && again.nstale != 0)
		why = "the written baseline has a stale entry";
	baseline_free(&back);
	audit_free(&again);
	audit_free(&a);
	return why;
}

/* Load the current input and check the contract. */
static const char *
check_case(void)
{
	struct baseline	 b;
	const char	*why = NULL;
	char		*errors, *nl, *want;
	size_t		 len;
	int		 rc;

	rc = baseline_load(&b, input_path, TODAY);
	errors = take_errors(&len);
	xasprintf(&want, "gradaudit: %s", input_path);
	if (rc == -1) {
		rejected++;
		nl = strchr(errors, '\n');
		if (b.n != 0 || b.entries != NULL || b.path != NULL)
			why = "a failed load left entries";
		else if (len == 0)
			why = "baseline_load returned -1 without a message";
		else if (strncmp(errors, want, strlen(want)) != 0)
			why = "message does not start with \"gradaudit: FILE\"";
		else if (nl == NULL || nl != errors + len - 1 ||
		    strlen(errors) != len)
			why = "message is not exactly one line";
	} else if (rc == 0) {
		loaded++;
		if (len != 0)
			why = "baseline_load returned 0 but wrote to stderr";
		else if ((why = check_entries(&b)) == NULL)
			why = check_round_trip(&b);
		baseline_free(&b);
	} else
		why = "baseline_load returned neither 0 nor -1";
	if (why != NULL && len > 0)
		tap_diag("reader said: %s", errors);
	free(want);
	free(errors);
	return why;
}

static void
fuzz(size_t seed, const struct mutation *m)
{
	struct text	 t = { NULL, 0, 0 };
	const char	*why = NULL;
	size_t		 c;
	int		 first_bad = -1;

	for (c = 0; c < CASES; c++) {
		t.len = 0;
		text_insert(&t, 0, seeds[seed], strlen(seeds[seed]));
		m->apply(&t);
		write_input(&t);
		if ((why = check_case()) != NULL) {
			first_bad = (int)c;
			break;
		}
	}
	if (!tap_ok(why == NULL, "seed %zu: %d %s", seed, CASES, m->name))
		tap_diag("case %d: %s; input:\n%.*s", first_bad, why,
		    (int)t.len, t.s);
	free(t.s);
}

int
main(void)
{
	struct text	 t;
	size_t		 s, m;

	fuzz_seed(0x2545f4914f6cdd1dULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((input_fd = mkstemp(input_path)) == -1 ||
	    (draft_fd = mkstemp(draft_path)) == -1 ||
	    (errors_fd = mkstemp(errors_path)) == -1)
		fatal("mkstemp");
	close(draft_fd);
	tap_plan((int)(NSEEDS + 1 + NSEEDS * NMUTATIONS));
	tap_diag("inputs in %s, reader diagnostics in %s", input_path,
	    errors_path);
	fflush(stderr);
	if (dup2(errors_fd, 2) == -1)
		fatal("dup2");

	for (s = 0; s < NSEEDS; s++) {
		t = (struct text){ NULL, 0, 0 };
		text_insert(&t, 0, seeds[s], strlen(seeds[s]));
		write_input(&t);
		tap_ok(check_case() == NULL && loaded == (int)s + 1,
		    "seed %zu is valid", s);
		free(t.s);
	}
	for (s = 0; s < NSEEDS; s++)
		for (m = 0; m < NMUTATIONS; m++)
			fuzz(s, &mutations[m]);

	/* Mutations that never load, or never fail, would test little. */
	tap_diag("%d mutated inputs loaded (%d accepting a finding), %d "
	    "rejected", loaded, accepting, rejected);
	tap_ok(loaded > CASES && rejected > CASES && accepting > CASES,
	    "mutations load, accept and fail, many times each");

	close(input_fd);
	unlink(input_path);
	unlink(draft_path);
	unlink(errors_path);
	return tap_done();
}
