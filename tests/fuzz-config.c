/*
 * Deterministic mutation fuzzing of the configuration loader (TAP).
 *
 * A few valid seed configurations are mutated thousands of times (bit flips,
 * deletions, YAML punctuation, absurd numbers, truncated keys, junk bytes,
 * and several of these at once), some with --set overrides, and each result
 * goes through cfg_load in-process.  The loader must return 0 or -1 and
 * never crash (built with ASan that is the real check); on -1 it must have
 * written exactly one "gradaudit: ..." line to stderr and left the list as
 * it was, on 0 nothing to stderr but warnings about keys without effect
 * ("gradaudit: WHERE: warning: KEY has no effect without ..."), one a
 * line, and appended configs that pass cfg_check_constraints.
 *
 * stderr is redirected to a scratch file for the whole run, so a crash
 * report from a sanitizer lands there: the paths of that file and of the
 * input being loaded are printed first, as TAP comments, and are kept when
 * the program does not finish.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "config/constraints.h"
#include "config/framework.h"
#include "config/load.h"
#include "fuzz-text.h"
#include "tap.h"

#define CASES	80	/* mutations per seed and kind */

static const char *const seeds[] = {
	"name: megatron-844\n"
	"mesh:\n  dp: 2\n  pp: 2\n  tp: 1\n"
	"model:\n  vocab: 32\n  hidden: 8\n  layers: 4\n"
	"  tie_embeddings: true\n"
	"training:\n  distributed_optimizer: true\n  bucket_elems: 0\n"
	"sync:\n  embedding_grad: after-dp\n",

	"mesh:\n  dp: 2\n  pp: 2\n  tp: 4\n  ep: 4\n  etp: 2\n"
	"model:\n  vocab: 64\n  ffn: 32\n  layers: 6\n"
	"  moe:\n    experts: 8\n    top_k: 2\n    expert_ffn: 16\n"
	"    score_before_experts: true\n    shared_experts: 1\n"
	"    score_func: sigmoid\n    every: 2\n"
	"training: {sequence_parallel: on, average_in_collective: no}\n"
	"sync: {router_grad: none, expert_grad_divisor: edp}\n",

	"- mesh: {dp: 2, pp: 2}\n"
	"- name: tp2\n  mesh: {tp: 2}\n  model: {moe: {experts: 2, top_k: 1}}\n"
	"- mesh:\n    dp: 4\n",

	"mesh: {dp: 2}\n---\nmesh: {pp: 4}\nmodel:\n  layers: 8\n...\n"
	"---\n- mesh: {tp: 2}\n",

	"{mesh: {dp: 4, tp: 2, ep: 4, etp: 2}, model: {moe: {}}, "
	"training: {bucket_elems: 9223372036854775807}}\n",

	/* plan: (issue 25), every spelling of a step. */
	"mesh: {dp: 2, tp: 2, pp: 2}\ntraining: {micro_batches: 4}\n"
	"plan:\n  - preset\n  - scale: 1/(micro_batches*dp)\n"
	"    params: \"*\"\n    stages: [0, 1]\n"
	"  - {all-reduce: tp, average: yes, params: [\"*norm*\", x]}\n"
	"  - all-reduce: embedding\n    stages: 1\n",

	/* Mixed-precision buffers: accumulate: and buffer: (NeMo #6958). */
	"mesh: {dp: 2, pp: 2}\nmodel: {tie_embeddings: true}\n"
	"plan:\n  - accumulate: bf16\n"
	"  - {accumulate: fp32, params: [embedding.weight, output.weight]}\n"
	"  - all-reduce: embedding\n    dtype: fp32\n"
	"    params: [embedding.weight, output.weight]\n"
	"  - scale: 1/dp\n    dtype: \"fp16\"\n  - all-reduce: dp\n",
	/* plan: schedules and resets (issue 25), every spelling. */
	"mesh: {dp: 2, pp: 2}\ntraining: {micro_batches: 3}\n"
	"plan:\n  - reset: grads\n  - reset: grads\n    micro-batches: [0, 2]\n"
	"    stages: 1\n  - preset\n  - scale: 1/micro_batches\n"
	"    micro-batches: every\n"
	"  - {all-reduce: dp, average: true, micro-batches: first}\n"
	"  - {scale: 2, micro-batches: none}\n"
	"  - all-reduce: dp\n    micro-batches: 1\n"
	"  - {all-reduce: dp, micro-batches: last}\n",
	/* plan: the steps that move a gradient between layouts (issue 25). */
	"mesh: {dp: 2, tp: 4, ep: 2, etp: 2}\nmodel: {moe: {experts: 2}}\n"
	"training: {distributed_optimizer: true}\n"
	"plan:\n  - {scale: 1/dp, buffer: dense}\n"
	"  - reduce-scatter: dp\n    average: no\n    buffer: dense\n"
	"  - {reduce-scatter: edp, buffer: expert}\n"
	"  - all-gather: dp\n    params: [embedding.weight]\n"
	"  - to-partial: tp\n    replicate: [slices, etp]\n"
	"    params: \"*.router.weight\"\n",

	"# comment\nname: \"quoted \\u00e9\"\nmesh:\n  dp: 1\n"
	"model:\n  vocab: 1048576\n  hidden: 1048576\n  seq: 1\n",
};
#define NSEEDS	(sizeof(seeds) / sizeof(seeds[0]))

static const char *const punctuation[] = {
	":", ": ", "-", "- ", "{", "}", "[", "]", ",", "&a ", "*a", "!!str ",
	"!!map ", "|", ">", "'", "\"", "#", "%YAML 1.1\n", "@", "`", "? ",
	"\n", "\t", "  ", "---\n", "...\n", "<<: ", "~", "\\", "\0", "\xff",
	"\xc3", "\xef\xbb\xbf", "mesh: {}\n", "moe: {}",
};

static const char *const numbers[] = {
	"0", "-1", "-0", "+3", "3", "7", "1048576", "1048577", "4096", "4097",
	"2147483648", "9223372036854775807", "9223372036854775808",
	"99999999999999999999", "1e3", "0x10", "2.0", "1_000", "", "-",
};

static const struct cfg_override overrides[][2] = {
	{ { "mesh.dp", "2" }, { "model.moe.experts", "8" } },
	{ { "mesh.tp", "two" }, { "mesh.dp", "1" } },
	{ { "sync.router_grad", "none" }, { "mesh.etp", "2" } },
	{ { "model.moe", "{}" }, { "mesh.tpp", "1" } },
	{ { "name", "" }, { "mesh", "{dp: [1" } },
	{ { "training", "{bucket_elems: -1}" }, { "mesh.ep", "*a" } },
};
#define NOVERRIDES	(sizeof(overrides) / sizeof(overrides[0]))

static char	 input_path[] = "/tmp/fuzz-config-in.XXXXXX";
static char	 errors_path[] = "/tmp/fuzz-config-err.XXXXXX";
static int	 input_fd;
static int	 errors_fd;
static struct config_list list;	/* one config loaded before every case */
static int	 loaded, rejected;
/* The profiles a mutated framework: resolves in, read once for all cases. */
static struct fw_registry *frameworks;

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

/* Replace a run of digits (or insert at random) with an awkward number. */
static void
mutate_number(struct text *t)
{
	const char	*n = numbers[pick(sizeof(numbers) / sizeof(numbers[0]))];
	size_t		 i, start, end, found = 0, which;

	for (i = 0; i < t->len; i++)
		if (t->s[i] >= '0' && t->s[i] <= '9' &&
		    (i == 0 || t->s[i - 1] < '0' || t->s[i - 1] > '9'))
			found++;
	if (found == 0) {
		text_insert(t, pick(t->len + 1), n, strlen(n));
		return;
	}
	which = pick(found);
	for (i = 0, start = 0; i < t->len; i++) {
		if (t->s[i] >= '0' && t->s[i] <= '9' &&
		    (i == 0 || t->s[i - 1] < '0' || t->s[i - 1] > '9')) {
			if (which-- == 0) {
				start = i;
				break;
			}
		}
	}
	for (end = start; end < t->len && t->s[end] >= '0' &&
	    t->s[end] <= '9'; end++)
		continue;
	text_delete(t, start, end - start);
	text_insert(t, start, n, strlen(n));
}

/* Shorten or misspell a key: the word before a ':'. */
static void
mutate_key(struct text *t)
{
	size_t	 i, colons = 0, which, end, start;

	for (i = 1; i < t->len; i++)
		if (t->s[i] == ':' && t->s[i - 1] >= 'a' && t->s[i - 1] <= 'z')
			colons++;
	if (colons == 0)
		return;
	which = pick(colons);
	for (i = 1, end = 0; i < t->len; i++)
		if (t->s[i] == ':' && t->s[i - 1] >= 'a' &&
		    t->s[i - 1] <= 'z' && which-- == 0) {
			end = i;
			break;
		}
	for (start = end; start > 0 && ((t->s[start - 1] >= 'a' &&
	    t->s[start - 1] <= 'z') || t->s[start - 1] == '_'); start--)
		continue;
	switch (pick(3)) {
	case 0:
		text_delete(t, end - 1 - pick(end - start), 1 + pick(2));
		break;
	case 1:
		t->s[start + pick(end - start)] = (char)('a' + pick(26));
		break;
	default:
		text_insert(t, start + pick(end - start + 1), "p", 1);
		break;
	}
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
	{ "number tweaks", mutate_number },
	{ "key truncation", mutate_key },
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

/*
 * Overwrite the input file in place: reopening it with truncation would make
 * ext4 flush it to disk on every close (auto_da_alloc), which turns a
 * one-second test into a minute on a busy machine.
 */
static void
write_input(const struct text *t)
{
	if (pwrite(input_fd, t->s, t->len, 0) != (ssize_t)t->len ||
	    ftruncate(input_fd, (off_t)t->len) == -1)
		fatal("%s", input_path);
}

/* What cfg_load wrote to stderr since the last call, NUL-terminated. */
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
	n = pread(errors_fd, buf, (size_t)st.st_size, 0);
	if (n < 0)
		fatal("pread");
	buf[n] = '\0';
	*len = (size_t)n;
	if (ftruncate(errors_fd, 0) == -1 || lseek(2, 0, SEEK_SET) == -1)
		fatal("truncating %s", errors_path);
	return buf;
}

/*
 * Is every line of errors, len bytes, a warning about a key without effect
 * (load.c's warn_no_effect)?
 */
static bool
only_warnings(const char *errors, size_t len)
{
	const char	*line = errors, *nl, *w;

	if (strlen(errors) != len)
		return false;
	while (*line != '\0') {
		if ((nl = strchr(line, '\n')) == NULL)
			return false;
		if (strncmp(line, "gradaudit: ", 11) != 0 ||
		    (w = strstr(line, ": warning: ")) == NULL || w > nl ||
		    (w = strstr(w, " has no effect without ")) == NULL ||
		    w > nl)
			return false;
		line = nl + 1;
	}
	return true;
}

/*
 * Load the current input and check the contract; returns a description of
 * the first broken rule, or NULL.
 */
static const char *
check_case(const struct cfg_override *ovr, size_t novr)
{
	const char	*why = NULL;
	char		*errors, *nl, whybuf[CFG_WHY_SIZE];
	size_t		 len, i;
	int		 rc;

	rc = cfg_load(frameworks, input_path, ovr, novr, &list);
	errors = take_errors(&len);
	if (rc == -1) {
		rejected++;
		nl = strchr(errors, '\n');
		if (list.n != 1)
			why = "failed cfg_load changed the list";
		else if (len == 0)
			why = "cfg_load returned -1 without a message";
		else if (strncmp(errors, "gradaudit: ", 11) != 0)
			why = "message does not start with \"gradaudit: \"";
		else if (nl == NULL || nl != errors + len - 1 ||
		    strlen(errors) != len)
			why = "message is not exactly one line";
	} else if (rc == 0) {
		loaded++;
		if (!only_warnings(errors, len))
			why = "cfg_load returned 0 but wrote more than warnings";
		else if (list.n < 2)
			why = "cfg_load returned 0 but added no config";
		for (i = 1; why == NULL && i < list.n; i++) {
			if (list.v[i].name == NULL || list.v[i].file == NULL ||
			    strcmp(list.v[i].file, input_path) != 0)
				why = "loaded config lacks its name or file";
			else if (cfg_check_constraints(&list.v[i], whybuf,
			    sizeof whybuf) != NULL)
				why = "loaded config fails its constraints";
		}
		for (i = 1; i < list.n; i++)
			cfg_free(&list.v[i]);
		list.n = 1;
	} else
		why = "cfg_load returned neither 0 nor -1";
	free(errors);
	return why;
}

/*
 * Sweep edits loaded configs and asks cfg_check_constraints; the loader
 * must describe the same mesh with the same words.  Each case is a file
 * the loader rejects and the same change made to the first seed's config
 * (dp=2, pp=2, tp=1, layers=4, dense).
 */
static void
edit_etp(struct config *c)
{
	c->mesh.tp = 4;
	c->mesh.etp = 3;
}

static void
edit_world(struct config *c)
{
	c->mesh.dp = 1 << 20;
	c->mesh.pp = 2;
	c->model.layers = 2;
}

static void
edit_layers(struct config *c)
{
	c->mesh.pp = 8192;
	c->model.layers = 8192;
}

static void
edit_experts(struct config *c)
{
	c->mesh.dp = 4;
	c->mesh.ep = 4;
	c->model.has_moe = true;
	c->model.moe.experts = 6;
}

static void
edit_dense_ep(struct config *c)
{
	c->mesh.dp = 4;
	c->mesh.ep = 4;
	c->model.moe.experts = 6;	/* ignored: the model is dense */
}

static const struct agreement {
	const char	 *yaml;		/* NULL: a valid edit */
	void		(*edit)(struct config *);
	const char	 *message;
} agreements[] = {
	{ "mesh: {dp: 2, pp: 2, tp: 4, etp: 3}\nmodel: {layers: 4}\n",
	    edit_etp, "etp (3) must divide tp (4)" },
	{ "mesh: {dp: 1048576, pp: 2}\n", edit_world,
	    "world size dp*cp*pp*tp (2097152) must be at most 1048576" },
	{ "mesh: {dp: 2, pp: 8192}\n", edit_layers,
	    "layers (8192) must be at most 4096" },
	{ "mesh: {dp: 4, pp: 2, ep: 4}\nmodel: {layers: 4, moe: "
	    "{experts: 6}}\n", edit_experts,
	    "experts (6) must be divisible by ep (4)" },
	{ NULL, edit_dense_ep, NULL },
};
#define NAGREEMENTS	(sizeof(agreements) / sizeof(agreements[0]))

static bool	check_agreement(const struct agreement *);

static bool
check_agreement(const struct agreement *a)
{
	struct config	 c;
	struct text	 t = { NULL, 0, 0 };
	const char	*got;
	char		*errors, *want = NULL, whybuf[CFG_WHY_SIZE];
	size_t		 len;
	bool		 good = true;

	if (a->yaml != NULL) {
		text_insert(&t, 0, a->yaml, strlen(a->yaml));
		write_input(&t);
		free(t.s);
		good = cfg_load(frameworks, input_path, NULL, 0, &list) == -1;
		errors = take_errors(&len);
		xasprintf(&want, ": %s\n", a->message);
		good = good && len >= strlen(want) &&
		    strcmp(errors + len - strlen(want), want) == 0;
		if (!good)
			tap_diag("loader said: %s", errors);
		free(errors);
		free(want);
	}
	cfg_copy(&c, &list.v[0]);
	a->edit(&c);
	got = cfg_check_constraints(&c, whybuf, sizeof whybuf);
	if (a->message == NULL ? got != NULL : got == NULL ||
	    strcmp(got, a->message) != 0) {
		tap_diag("cfg_check_constraints said: %s",
		    got != NULL ? got : "(valid)");
		good = false;
	}
	cfg_free(&c);
	return good;
}

static void
fuzz(size_t seed, const struct mutation *m)
{
	struct text	 t = { NULL, 0, 0 };
	const char	*why = NULL;
	size_t		 c, novr;
	int		 first_bad = -1;

	for (c = 0; c < CASES; c++) {
		t.len = 0;
		text_insert(&t, 0, seeds[seed], strlen(seeds[seed]));
		m->apply(&t);
		write_input(&t);
		novr = pick(4) == 0 ? 1 + pick(2) : 0;
		if ((why = check_case(overrides[pick(NOVERRIDES)], novr)) !=
		    NULL) {
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
	struct text	 t = { NULL, 0, 0 };
	size_t		 s, m;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((input_fd = mkstemp(input_path)) == -1)
		fatal("mkstemp");
	if ((errors_fd = mkstemp(errors_path)) == -1)
		fatal("mkstemp");
	tap_plan((int)(NSEEDS + 2 + NAGREEMENTS + NSEEDS * NMUTATIONS));
	tap_diag("inputs in %s, loader diagnostics in %s", input_path,
	    errors_path);
	fflush(stderr);
	if (dup2(errors_fd, 2) == -1)
		fatal("dup2");
	frameworks = fw_registry_open();

	/* The list every case appends to: cfg_load must leave it alone on error. */
	text_insert(&t, 0, seeds[0], strlen(seeds[0]));
	write_input(&t);
	tap_ok(cfg_load(frameworks, input_path, NULL, 0, &list) == 0 &&
	    list.n == 1,
	    "first seed loads into the shared list");
	free(t.s);
	if (list.n != 1) {
		printf("Bail out! cannot load the first seed\n");
		return 1;
	}
	for (s = 0; s < NSEEDS; s++) {
		t = (struct text){ NULL, 0, 0 };
		text_insert(&t, 0, seeds[s], strlen(seeds[s]));
		write_input(&t);
		tap_ok(check_case(NULL, 0) == NULL, "seed %zu is valid", s);
		free(t.s);
	}
	for (s = 0; s < NAGREEMENTS; s++) {
		tap_ok(check_agreement(&agreements[s]),
		    "cfg_check_constraints: %s", agreements[s].message != NULL ?
		    agreements[s].message : "ep on a dense model is valid");
	}
	for (s = 0; s < NSEEDS; s++)
		for (m = 0; m < NMUTATIONS; m++)
			fuzz(s, &mutations[m]);

	/* Mutations that never load, or never fail, would test little. */
	tap_diag("%d mutated inputs loaded, %d rejected", loaded, rejected);
	tap_ok(loaded > CASES && rejected > CASES,
	    "mutations both load and fail, many times each");

	config_list_free(&list);
	fw_registry_close(frameworks);
	close(input_fd);
	unlink(input_path);
	unlink(errors_path);
	return tap_done();
}
