/*
 * libFuzzer harness of the trace reader (trace.c) and of compare
 * (compare.c): the input is a traced step and, optionally, its
 * reference, each a directory of gradaudit-trace(5) files packed into
 * one byte string:
 *
 *	STEP [ "\n@@REFERENCE@@\n" REFERENCE ]
 *
 * where each of STEP and REFERENCE is manifest.json, then the files
 * rank-0.safetensors, rank-1.safetensors ... in order, each after the
 * separator "\n@@FILE@@\n" (tests/libfuzzer/pack-trace.py packs a
 * directory so).  A rank file that starts with '{' is written as
 * safetensors with its header length put in front: its header is the JSON
 * up to the first newline, its data what follows that newline.  The fuzzer
 * can then change a header without breaking its length; a file that does
 * not start with '{' is written as it is, length and all.
 *
 * The contract checked: trace_open returns 0 or -1, with one line that
 * names a file of the trace (or the directory) and nothing to free; on 0
 * a trace that keeps trace.h's promises: every tensor of a known
 * parameter and rank, its box inside the parameter, its elements inside
 * its rank's file, the tensors sorted so that trace_tensors_of finds
 * each.  When both traces open, compare_traces returns 0 or -1 in the
 * same manner, and on 0 an audit of every parameter of the step, whose
 * text and JSON reports are rendered.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/xmalloc.h"
#include "compare/compare.h"
#include "compare/trace.h"
#include "fuzz-render.h"
#include "harness.h"
#include "symbolic/audit.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define MAX_FILES	9	/* the manifest and up to 8 ranks */

static const char	 ref_sep[] = "\n@@REFERENCE@@\n";
static const char	 file_sep[] = "\n@@FILE@@\n";

static const char	*step_dir, *ref_dir;
static FILE		*devnull;

/* The first occurrence of needle in [p, end), or end. */
static const uint8_t *
find(const uint8_t *p, const uint8_t *end, const char *needle)
{
	size_t	 n = strlen(needle);

	for (; (size_t)(end - p) >= n; p++)
		if (memcmp(p, needle, n) == 0)
			return p;
	return end;
}

static void
write_file(const char *dir, int i, const uint8_t *p, size_t len)
{
	char		 name[64];
	const uint8_t	*nl;
	uint8_t		*buf;
	uint64_t	 n;
	int		 k;

	if (i == 0)
		snprintf(name, sizeof name, "%s/manifest.json", dir);
	else
		snprintf(name, sizeof name, "%s/rank-%d.safetensors", dir,
		    i - 1);
	if (i == 0 || len == 0 || p[0] != '{') {
		harness_write(harness_path(name), p, len);
		return;
	}
	if ((nl = memchr(p, '\n', len)) == NULL)
		nl = p + len;
	n = (uint64_t)(nl - p);
	buf = xmalloc(len + 8);
	for (k = 0; k < 8; k++)
		buf[k] = (uint8_t)(n >> (8 * k));
	memcpy(buf + 8, p, n);
	if (nl < p + len)
		memcpy(buf + 8 + n, nl + 1, len - n - 1);
	harness_write(harness_path(name), buf, nl < p + len ? len + 7 :
	    len + 8);
	free(buf);
}

/* Write the files of [p, end) into dir ("step" or "ref"). */
static void
write_trace(const char *dir, const uint8_t *p, const uint8_t *end)
{
	const uint8_t	*q;
	char		 name[64];
	int		 i;

	for (i = 0; i < MAX_FILES && p <= end; i++) {
		q = find(p, end, file_sep);
		write_file(dir, i, p, (size_t)(q - p));
		p = q + strlen(file_sep);
	}
	/* The files of a longer input before this one. */
	for (; i < MAX_FILES; i++) {
		if (i == 0)
			snprintf(name, sizeof name, "%s/manifest.json", dir);
		else
			snprintf(name, sizeof name, "%s/rank-%d.safetensors",
			    dir, i - 1);
		harness_remove(harness_path(name));
	}
}

/* A message names one of the trace directories, then a file or ':'. */
static void
check_message(const char *what, const char *err)
{
	const char *const dirs[] = { step_dir, ref_dir };
	size_t		 i, n;

	if (err[0] == '\0')
		harness_fail(NULL, "%s returned -1 without a message", what);
	if (strchr(err, '\n') != NULL)
		harness_fail(err, "%s: the message is not one line", what);
	for (i = 0; i < 2; i++) {
		n = strlen(dirs[i]);
		if (strncmp(err, dirs[i], n) == 0 && (err[n] == '/' ||
		    err[n] == ':'))
			return;
	}
	harness_fail(err, "%s: the message names no file of the traces",
	    what);
}

static void
check_trace(const struct trace *t)
{
	const struct trace_tensor *x;
	const struct trace_param *p;
	const unsigned char	*map;
	size_t			 i, first, n, seen = 0;
	int			 d, param, kind;

	if (t->world < 1 || t->world > TRACE_MAX_WORLD || t->ranks == NULL)
		harness_fail(NULL, "a trace of %d ranks", t->world);
	for (i = 0; i < t->ntensors; i++) {
		x = &t->tensors[i];
		if (x->param < 0 || (size_t)x->param >= t->nparams ||
		    x->rank < 0 || x->rank >= t->world)
			harness_fail(NULL, "tensor %s: parameter %d, rank %d",
			    x->key, x->param, x->rank);
		p = &t->params[x->param];
		for (d = 0; d < p->ndim; d++)
			if (x->offset[d] < 0 || x->box[d] < 0 ||
			    x->offset[d] + x->box[d] > p->shape[d])
				harness_fail(NULL, "tensor %s: its box leaves "
				    "%s", x->key, p->name);
		map = t->ranks[x->rank].map;
		if (x->lo < 0 || x->hi < x->lo || x->data < map ||
		    (size_t)(x->data - map) + (size_t)(x->hi - x->lo) *
		    trace_dtype_size(x->dtype) > t->ranks[x->rank].maplen)
			harness_fail(NULL, "tensor %s: its elements leave its "
			    "file", x->key);
	}
	for (param = 0; (size_t)param < t->nparams; param++)
		for (kind = TRACE_CONTRIB; kind <= TRACE_WEIGHT; kind++) {
			n = trace_tensors_of(t, param, (enum trace_kind)kind,
			    &first);
			for (i = first; i < first + n; i++)
				if (t->tensors[i].param != param ||
				    (int)t->tensors[i].kind != kind)
					harness_fail(NULL, "trace_tensors_of "
					    "found another tensor");
			seen += n;
		}
	if (seen != t->ntensors)
		harness_fail(NULL, "trace_tensors_of found %zu of %zu tensors",
		    seen, t->ntensors);
}

static void
init(void)
{
	step_dir = harness_path("step");
	ref_dir = harness_path("ref");
	if ((mkdir(step_dir, 0700) == -1 && errno != EEXIST) ||
	    (mkdir(ref_dir, 0700) == -1 && errno != EEXIST))
		harness_fail(NULL, "mkdir: %s", strerror(errno));
	if ((devnull = fopen("/dev/null", "w")) == NULL)
		harness_fail(NULL, "/dev/null: %s", strerror(errno));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t	*end = data + size, *mid;
	struct trace	 t, ref;
	struct audit	 a;
	char		 err[TRACE_ERROR_SIZE];
	int		 rc;

	if (step_dir == NULL)
		init();
	mid = find(data, end, ref_sep);
	write_trace("step", data, mid);
	if (mid < end)
		write_trace("ref", mid + strlen(ref_sep), end);
	else
		write_trace("ref", end, end - 1);

	err[0] = '\0';
	rc = trace_open(&t, step_dir, err, sizeof err);
	if (rc == -1) {
		check_message("trace_open", err);
		return 0;
	}
	if (rc != 0)
		harness_fail(NULL, "trace_open returned %d", rc);
	check_trace(&t);
	err[0] = '\0';
	if (trace_open(&ref, ref_dir, err, sizeof err) == -1) {
		check_message("trace_open of the reference", err);
		trace_close(&t);
		return 0;
	}
	err[0] = '\0';
	rc = compare_traces(&t, &ref, &a, err, sizeof err);
	if (rc == -1)
		check_message("compare_traces", err);
	else if (rc != 0)
		harness_fail(NULL, "compare_traces returned %d", rc);
	else {
		if (a.nparams != t.nparams)
			harness_fail(NULL, "the audit has %zu parameters, the "
			    "step %zu", (size_t)a.nparams, t.nparams);
		fuzz_render(devnull, &a);
		audit_free(&a);
	}
	trace_close(&ref);
	trace_close(&t);
	return 0;
}
