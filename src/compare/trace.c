/*
 * Reading a trace (trace.h).  The manifest and every safetensors header are
 * JSON, parsed with jansson, whose errors carry a line and column; the
 * tensors are mapped, never copied, so that memory does not grow with the
 * model.  Everything a comparison relies on is checked here, once: ranks
 * that agree on the step and the parameters' shapes, boxes inside their
 * parameters, data inside the file, finite values.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/text.h"
#include "base/xmalloc.h"
#include "compare/trace.h"

static const char *const dim_names[TRACE_DIM__COUNT] = {
	[TRACE_DIM_DP] = "dp", [TRACE_DIM_PP] = "pp", [TRACE_DIM_TP] = "tp",
	[TRACE_DIM_CP] = "cp", [TRACE_DIM_EP] = "ep", [TRACE_DIM_ETP] = "etp"
};

/* The safetensors dtype names gradaudit reads, and theirs in messages. */
static const struct {
	const char	*st;
	const char	*name;
	size_t		 size;
} dtypes[] = {
	[TRACE_F32] = { "F32", "float32", 4 },
	[TRACE_F64] = { "F64", "float64", 8 },
	[TRACE_BF16] = { "BF16", "bfloat16", 2 },
	[TRACE_F16] = { "F16", "float16", 2 },
};

static const char *const kind_prefix[] = {
	[TRACE_CONTRIB] = "contrib/",
	[TRACE_FINAL] = "final/",
	[TRACE_WEIGHT] = "weight/",
};

const char *
trace_dim_name(enum trace_dim d)
{
	return dim_names[d];
}

const char *
trace_dtype_name(enum trace_dtype t)
{
	return dtypes[t].name;
}

size_t
trace_dtype_size(enum trace_dtype t)
{
	return dtypes[t].size;
}

/* Where reading is: the file and tensor every message names. */
struct reader {
	struct trace	*t;
	char		*err;
	size_t		 errlen;
	const char	*file;
	const char	*tensor;	/* NULL outside a tensor */
	size_t		 cap;		/* of t->tensors */
};

static int
fail(struct reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
fail(struct reader *r, const char *fmt, ...)
{
	char	msg[TRACE_ERROR_SIZE];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (r->tensor != NULL)
		snprintf(r->err, r->errlen, "%s: tensor %s: %s", r->file,
		    r->tensor, msg);
	else
		snprintf(r->err, r->errlen, "%s: %s", r->file, msg);
	/* File names, keys and JSON quoted back may hold a newline. */
	text_make_visible(r->err, r->errlen);
	return -1;
}

/*
 * A JSON error.  The manifest's lines and columns are the file's, so the
 * message reads file:line:col as a configuration error does; what names
 * the JSON text inside a rank file ("header", "metadata"), whose lines
 * count from its start.
 *
 * jansson's column is that of the last character it read on the line,
 * counted from 1, and 0 when it read none there: a manifest cut short
 * after a newline ("{\n") was "manifest.json:2:0", where every other
 * column gradaudit prints counts from 1.  Nothing read on the line is an
 * error at its first column.
 */
static int
fail_json(struct reader *r, const char *what, const json_error_t *e)
{
	int	col = e->column > 0 ? e->column : 1;

	if (what == NULL) {
		snprintf(r->err, r->errlen, "%s:%d:%d: %s", r->file, e->line,
		    col, e->text);
		text_make_visible(r->err, r->errlen);
		return -1;
	}
	return fail(r, "%s:%d:%d: %s", what, e->line, col, e->text);
}

/*
 * Open r->file for reading.  O_NONBLOCK, so that a FIFO named as a trace
 * file is refused rather than waited on for ever; only regular files are
 * read.  The descriptor, or -1 with the message set; what_missing is added
 * to the message of a file that cannot be opened.
 */
static int
open_regular(struct reader *r, const char *what_missing, struct stat *st)
{
	int	fd, e;

	fd = open(r->file, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return fail(r, "%s%s", strerror(errno), what_missing);
	if (fstat(fd, st) != 0) {
		e = errno;
		close(fd);
		return fail(r, "%s", strerror(e));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return fail(r, "%s, not a regular file",
		    S_ISDIR(st->st_mode) ? "a directory" :
		    S_ISFIFO(st->st_mode) ? "a FIFO" : "a device or socket");
	}
	return fd;
}

const char *
trace_format_dims(char *buf, size_t len, const int64_t *v, int n)
{
	size_t	at;
	int	i;

	at = (size_t)snprintf(buf, len, "[");
	for (i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64,
		    i > 0 ? ", " : "", v[i]);
	if (at < len)
		snprintf(buf + at, len - at, "]");
	return buf;
}

/* An integer member in [min, max]; 1 when absent and optional. */
static int
get_int(struct reader *r, json_t *obj, const char *key, bool required,
    int64_t min, int64_t max, int64_t *v)
{
	json_t	*x = json_object_get(obj, key);

	if (x == NULL) {
		if (required)
			return fail(r, "\"%s\" is missing", key);
		return 1;
	}
	if (!json_is_integer(x))
		return fail(r, "\"%s\" must be an integer", key);
	*v = json_integer_value(x);
	if (*v < min || *v > max)
		return fail(r, "\"%s\" is %" PRId64 ", not in [%" PRId64
		    ", %" PRId64 "]", key, *v, min, max);
	return 0;
}

static int
get_string(struct reader *r, json_t *obj, const char *key, bool required,
    const char **v)
{
	json_t	*x = json_object_get(obj, key);

	if (x == NULL) {
		if (required)
			return fail(r, "\"%s\" is missing", key);
		*v = NULL;
		return 1;
	}
	if (!json_is_string(x))
		return fail(r, "\"%s\" must be a string", key);
	*v = arena_strdup(&r->t->arena, json_string_value(x));
	return 0;
}

/* A finite number member; 1 when absent. */
static int
get_number(struct reader *r, json_t *obj, const char *key, double *v)
{
	json_t	*x = json_object_get(obj, key);

	if (x == NULL || json_is_null(x))
		return 1;
	if (!json_is_number(x))
		return fail(r, "\"%s\" must be a number", key);
	*v = json_number_value(x);
	if (!isfinite(*v))
		return fail(r, "\"%s\" is not finite", key);
	return 0;
}

/* A list of n (or, with n -1, 0..TRACE_MAX_DIMS) integers in [min, max]. */
static int
get_dims(struct reader *r, json_t *obj, const char *key, int n, int64_t min,
    int64_t max, int64_t *out, int *count)
{
	json_t	*x = json_object_get(obj, key), *e;
	size_t	 i;

	if (x == NULL)
		return fail(r, "\"%s\" is missing", key);
	if (!json_is_array(x) || (n >= 0 && json_array_size(x) != (size_t)n) ||
	    json_array_size(x) > TRACE_MAX_DIMS)
		return n >= 0 ? fail(r, "\"%s\" must be a list of %d "
		    "integers", key, n) : fail(r, "\"%s\" must be a list of "
		    "at most %d integers", key, TRACE_MAX_DIMS);
	json_array_foreach(x, i, e) {
		if (!json_is_integer(e) || json_integer_value(e) < min ||
		    json_integer_value(e) > max)
			return fail(r, "\"%s\"[%zu] must be an integer in "
			    "[%" PRId64 ", %" PRId64 "]", key, i, min, max);
		out[i] = json_integer_value(e);
	}
	if (count != NULL)
		*count = (int)json_array_size(x);
	return 0;
}

static int
read_mesh(struct reader *r, json_t *mesh)
{
	struct trace	*t = r->t;
	int64_t		 v, product = 1;
	const char	*key;
	json_t		*x;
	int		 d;

	for (d = 0; d < TRACE_DIM__COUNT; d++)
		t->mesh[d] = 1;
	if (mesh == NULL || json_is_null(mesh))
		return 0;
	if (!json_is_object(mesh))
		return fail(r, "\"mesh\" must be an object of sizes");
	json_object_foreach(mesh, key, x) {
		for (d = 0; d < TRACE_DIM__COUNT; d++)
			if (strcmp(key, dim_names[d]) == 0)
				break;
		if (d == TRACE_DIM__COUNT)
			return fail(r, "mesh: unknown dimension \"%s\" (dp, "
			    "pp, tp, cp, ep or etp)", key);
		if (get_int(r, mesh, key, true, 1, TRACE_MAX_WORLD, &v) != 0)
			return -1;
		t->mesh[d] = (int)v;
	}
	/* ep and etp divide the dense ranks; they add none. */
	for (d = TRACE_DIM_DP; d <= TRACE_DIM_CP; d++)
		product *= t->mesh[d];
	if (product != t->world)
		return fail(r, "mesh: dp x pp x tp x cp is %" PRId64 ", but "
		    "the world is %d", product, t->world);
	t->has_mesh = true;
	return 0;
}

/* The manifest's JSON, or NULL with the message set. */
static json_t *
load_manifest(struct reader *r, const char *dir)
{
	struct stat	 st;
	json_error_t	 e;
	json_t		*m;
	char		*buf, *missing;
	size_t		 len = 0;
	ssize_t		 n;
	int		 fd;

	xasprintf(&missing, " (is %s a trace directory?)", dir);
	fd = open_regular(r, missing, &st);
	free(missing);
	if (fd < 0)
		return NULL;
	if (st.st_size > TRACE_MAX_HEADER) {
		close(fd);
		fail(r, "%jd bytes: larger than a manifest can be (%u MiB)",
		    (intmax_t)st.st_size, TRACE_MAX_HEADER >> 20);
		return NULL;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	while (len < (size_t)st.st_size) {
		n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fail(r, "%s", strerror(errno));
			close(fd);
			free(buf);
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	m = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
	free(buf);
	if (m == NULL)
		fail_json(r, NULL, &e);
	return m;
}

/*
 * The manifest's dtype, optional: informational (the tolerances follow
 * each tensor's own dtype), but a value gradaudit-trace(5) does not list,
 * "int8" or a number, says the file is not what the hook wrote.
 */
static int
read_manifest_dtype(struct reader *r, json_t *m)
{
	const char	*s;
	size_t		 i;
	int		 rc;

	if ((rc = get_string(r, m, "dtype", false, &s)) != 0)
		return rc < 0 ? -1 : 0;
	for (i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
		if (strcmp(s, dtypes[i].name) == 0)
			return 0;
	return fail(r, "\"dtype\" is \"%s\", not float32, float64, bfloat16 "
	    "or float16", s);
}

static int
read_manifest(struct reader *r, const char *dir)
{
	struct trace	*t = r->t;
	json_t		*m, *files;
	const char	*s;
	char		*path;
	int64_t		 v;
	int		 rc = -1;

	xasprintf(&path, "%s/manifest.json", dir);
	r->file = arena_strdup(&t->arena, path);
	free(path);
	if ((m = load_manifest(r, dir)) == NULL)
		return -1;
	if (!json_is_object(m)) {
		fail(r, "not a JSON object");
		goto out;
	}
	if (get_string(r, m, "format", true, &s) != 0)
		goto out;
	if (strcmp(s, "gradaudit-trace") != 0) {
		fail(r, "format is \"%s\", not \"gradaudit-trace\"", s);
		goto out;
	}
	if (get_int(r, m, "version", true, 1, 1, &v) != 0 ||
	    get_string(r, m, "mode", true, &s) != 0)
		goto out;
	if (strcmp(s, "reference") == 0)
		t->reference = true;
	else if (strcmp(s, "parallel") != 0) {
		fail(r, "mode is \"%s\", not \"parallel\" or \"reference\"", s);
		goto out;
	}
	if (get_string(r, m, "step", true, &t->step) != 0 ||
	    get_int(r, m, "world", true, 1, TRACE_MAX_WORLD, &v) != 0)
		goto out;
	t->world = (int)v;
	if (get_int(r, m, "micro_batches", true, 1, TRACE_MAX_MICRO_BATCHES,
	    &v) != 0)
		goto out;
	t->micro_batches = (int)v;
	if (read_manifest_dtype(r, m) != 0)
		goto out;
	if (t->reference) {
		if (get_string(r, m, "reference_of", true,
		    &t->reference_of) != 0)
			goto out;
		if (t->world != 1) {
			fail(r, "a reference trace has one rank, not %d",
			    t->world);
			goto out;
		}
	}
	if (read_mesh(r, json_object_get(m, "mesh")) != 0)
		goto out;
	files = json_object_get(m, "files");
	if (!json_is_array(files) || json_array_size(files) !=
	    (size_t)t->world) {
		fail(r, "\"files\" must list the %d rank files", t->world);
		goto out;
	}
	t->ranks = arena_alloc(&t->arena, t->world * sizeof(*t->ranks));
	for (v = 0; v < t->world; v++) {
		json_t *f = json_array_get(files, v);

		s = json_string_value(f);
		if (s == NULL || *s == '\0' || strchr(s, '/') != NULL ||
		    strcmp(s, "..") == 0) {
			fail(r, "\"files\"[%" PRId64 "] must be a file name in "
			    "the trace directory", v);
			goto out;
		}
		xasprintf(&path, "%s/%s", dir, s);
		t->ranks[v].file = arena_strdup(&t->arena, path);
		free(path);
	}
	rc = 0;
out:
	json_decref(m);
	return rc;
}

static int
parse_dtype(struct reader *r, json_t *desc, enum trace_dtype *out)
{
	const char	*s = json_string_value(json_object_get(desc, "dtype"));
	size_t		 i;

	if (s == NULL)
		return fail(r, "\"dtype\" is missing");
	for (i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
		if (strcmp(s, dtypes[i].st) == 0) {
			*out = (enum trace_dtype)i;
			return 0;
		}
	return fail(r, "dtype %s is not a floating type gradaudit reads "
	    "(F32, F64, BF16, F16)", s);
}

int
trace_param_index(const struct trace *t, const char *name)
{
	size_t	i;

	for (i = 0; i < t->nparams; i++)
		if (strcmp(t->params[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* Add or check a parameter's logical shape, as rank file `rank` gives it. */
static int
declare_param(struct reader *r, int rank, const char *name, json_t *desc,
    size_t *capp)
{
	struct trace		*t = r->t;
	struct trace_param	 p;
	char			 here[32 * TRACE_MAX_DIMS];
	char			 there[32 * TRACE_MAX_DIMS];
	int			 i, k;

	memset(&p, 0, sizeof p);
	r->tensor = NULL;
	if (!json_is_object(desc))
		return fail(r, "params: \"%s\" must be an object", name);
	if (get_dims(r, desc, "shape", -1, 1, INT64_C(1) << 40, p.shape,
	    &p.ndim) != 0)
		return fail(r, "params: \"%s\": shape must be a list of at "
		    "most %d positive sizes", name, TRACE_MAX_DIMS);
	p.elems = 1;
	for (i = 0; i < p.ndim; i++) {
		if (p.shape[i] > (INT64_C(1) << 40) / p.elems)
			return fail(r, "params: \"%s\" has more than 2^40 "
			    "elements", name);
		p.elems *= p.shape[i];
	}
	k = trace_param_index(t, name);
	if (k >= 0) {
		const struct trace_param *q = &t->params[k];

		if (q->ndim != p.ndim || memcmp(q->shape, p.shape,
		    p.ndim * sizeof(p.shape[0])) != 0)
			return fail(r, "params: \"%s\" has the logical shape "
			    "%s here and %s in %s", name,
			    trace_format_dims(here, sizeof here, p.shape,
			    p.ndim), trace_format_dims(there, sizeof there,
			    q->shape, q->ndim), t->ranks[q->rank].file);
		return 0;
	}
	p.rank = rank;
	if (t->nparams == *capp) {
		*capp = *capp ? 2 * *capp : 16;
		t->params = xreallocarray(t->params, *capp, sizeof(p));
	}
	p.name = arena_strdup(&t->arena, name);
	t->params[t->nparams++] = p;
	return 0;
}

void
trace_release(const struct trace_tensor *x)
{
	uintptr_t	page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t	lo = (uintptr_t)x->data, hi;

	hi = lo + (uintptr_t)((x->hi - x->lo) * (int64_t)dtypes[x->dtype].size);
	/* Whole pages inside the tensor only: neighbours may be in use. */
	lo = (lo + page - 1) & ~(page - 1);
	hi &= ~(page - 1);
	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static int
read_tensor(struct reader *r, int rank, const char *key, json_t *desc,
    json_t *meta_tensors, const unsigned char *data, uint64_t datalen)
{
	struct trace		*t = r->t;
	struct trace_tensor	 x;
	const struct trace_param *p;
	json_t			*m, *offs;
	const char		*pname, *kind;
	int64_t			 shape[TRACE_MAX_DIMS], flat[2], v, boxn = 1;
	int64_t			 begin, end, n;
	int			 nd, i;
	char			 dims[32 * TRACE_MAX_DIMS];
	char			 boxdims[32 * TRACE_MAX_DIMS];

	memset(&x, 0, sizeof x);
	x.key = arena_strdup(&t->arena, key);
	r->tensor = x.key;
	x.rank = rank;
	if (!json_is_object(desc))
		return fail(r, "its header entry must be an object");
	if (parse_dtype(r, desc, &x.dtype) != 0)
		return -1;
	if (get_dims(r, desc, "shape", -1, 0, INT64_C(1) << 40, shape,
	    &nd) != 0)
		return -1;
	offs = json_object_get(desc, "data_offsets");
	if (!json_is_array(offs) || json_array_size(offs) != 2 ||
	    !json_is_integer(json_array_get(offs, 0)) ||
	    !json_is_integer(json_array_get(offs, 1)))
		return fail(r, "\"data_offsets\" must be two integers");
	begin = json_integer_value(json_array_get(offs, 0));
	end = json_integer_value(json_array_get(offs, 1));
	if (begin < 0 || end < begin || (uint64_t)end > datalen)
		return fail(r, "data_offsets [%" PRId64 ", %" PRId64 "] are "
		    "outside the file's %" PRIu64 " bytes of data (truncated?)",
		    begin, end, datalen);
	n = 1;
	for (i = 0; i < nd; i++) {
		/* Its parameter has at most 2^40; no more, nor overflow. */
		if (shape[i] > 0 && n > (INT64_C(1) << 40) / shape[i])
			return fail(r, "shape %s has more than 2^40 elements",
			    trace_format_dims(dims, sizeof dims, shape,
			    nd));
		n *= shape[i];
	}
	if ((uint64_t)(end - begin) != (uint64_t)n * dtypes[x.dtype].size)
		return fail(r, "%" PRId64 " bytes hold %" PRId64 " %s elements, "
		    "not %" PRId64 " bytes", end - begin, n,
		    dtypes[x.dtype].name, (int64_t)(n * dtypes[x.dtype].size));
	x.data = data + begin;

	m = json_object_get(meta_tensors, key);
	if (!json_is_object(m))
		return fail(r, "not described in the gradaudit metadata");
	if (get_string(r, m, "param", true, &pname) != 0 ||
	    get_string(r, m, "kind", true, &kind) != 0)
		return -1;
	for (i = 0; i < 3; i++)
		if (strncmp(kind_prefix[i], kind, strlen(kind)) == 0 &&
		    kind_prefix[i][strlen(kind)] == '/')
			break;
	if (i == 3)
		return fail(r, "kind \"%s\" is not contrib, final or weight",
		    kind);
	x.kind = (enum trace_kind)i;
	if (x.kind == TRACE_CONTRIB) {
		if (get_int(r, m, "mb", true, 0, t->micro_batches - 1,
		    &v) != 0)
			return -1;
		x.mb = (int)v;
	}
	x.param = trace_param_index(t, pname);
	if (x.param < 0)
		return fail(r, "parameter \"%s\" is not in \"params\"", pname);
	p = &t->params[x.param];
	if (get_dims(r, m, "offset", p->ndim, 0, INT64_C(1) << 40, x.offset,
	    NULL) != 0 || get_dims(r, m, "box", p->ndim, 0, INT64_C(1) << 40,
	    x.box, NULL) != 0)
		return -1;
	for (i = 0; i < p->ndim; i++) {
		if (x.offset[i] + x.box[i] > p->shape[i])
			return fail(r, "its box ends at %" PRId64 " in "
			    "dimension %d of %s, whose size is %" PRId64,
			    x.offset[i] + x.box[i], i, p->name, p->shape[i]);
		boxn *= x.box[i];
	}
	x.lo = 0;
	x.hi = boxn;
	if (json_object_get(m, "flat") != NULL) {
		if (get_dims(r, m, "flat", 2, 0, boxn, flat, NULL) != 0)
			return -1;
		if (flat[0] >= flat[1])
			return fail(r, "flat range [%" PRId64 ", %" PRId64 ") "
			    "is empty", flat[0], flat[1]);
		x.lo = flat[0];
		x.hi = flat[1];
		if (nd != 1 || shape[0] != x.hi - x.lo)
			return fail(r, "a flat range of %" PRId64 " elements "
			    "must be stored as a list of that length",
			    x.hi - x.lo);
	} else {
		for (i = 0; nd == p->ndim && i < nd; i++)
			if (shape[i] != x.box[i])
				break;
		if (nd != p->ndim || i < nd)
			return fail(r, "shape %s is not its box %s: without "
			    "\"flat\", a tensor holds its whole box",
			    trace_format_dims(dims, sizeof dims, shape,
			    nd), trace_format_dims(boxdims, sizeof boxdims,
			    x.box, p->ndim));
	}
	if (strncmp(key, kind_prefix[x.kind], strlen(kind_prefix[x.kind])) !=
	    0)
		return fail(r, "a %s tensor's key must start with \"%s\"",
		    kind, kind_prefix[x.kind]);
	for (v = 0; v < x.hi - x.lo; v++) {
		double d = trace_value(&x, v);

		if (!isfinite(d))
			return fail(r, "element %" PRId64 " is %s: the step "
			    "overflowed or diverged; trace a step with finite "
			    "gradients", v, isnan(d) ? "NaN" : "infinite");
	}
	trace_release(&x);
	if (t->ntensors == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 64;
		t->tensors = xreallocarray(t->tensors, r->cap, sizeof(x));
	}
	t->tensors[t->ntensors++] = x;
	return 0;
}

/* The metadata of rank file `rank`, checked against the manifest. */
static int
read_rank_meta(struct reader *r, int rank, json_t *meta, size_t *pcap)
{
	struct trace		*t = r->t;
	struct trace_rank	*rk = &t->ranks[rank];
	const char		*s;
	json_t			*params, *coords, *tokens, *x;
	const char		*key;
	int64_t			 v;
	size_t			 i;
	int			 d;

	if (get_int(r, meta, "rank", true, 0, TRACE_MAX_WORLD, &v) != 0)
		return -1;
	if (v != rank)
		return fail(r, "holds rank %" PRId64 ", but the manifest lists "
		    "it as rank %d", v, rank);
	if (get_int(r, meta, "world", true, 1, TRACE_MAX_WORLD, &v) != 0)
		return -1;
	if (v != t->world)
		return fail(r, "is from a world of %" PRId64 " ranks, the "
		    "manifest's of %d", v, t->world);
	if (get_string(r, meta, "step", true, &s) != 0)
		return -1;
	if (strcmp(s, t->step) != 0)
		return fail(r, "is from step %s, the manifest from step %s: "
		    "two steps are mixed in one directory", s, t->step);
	if (get_int(r, meta, "micro_batches", true, 1,
	    TRACE_MAX_MICRO_BATCHES, &v) != 0)
		return -1;
	if (v != t->micro_batches)
		return fail(r, "ran %" PRId64 " micro-batches, the manifest "
		    "says %d", v, t->micro_batches);
	coords = json_object_get(meta, "coords");
	if (coords != NULL && !json_is_null(coords)) {
		if (!json_is_object(coords))
			return fail(r, "\"coords\" must be an object");
		json_object_foreach(coords, key, x) {
			for (d = 0; d < TRACE_DIM__COUNT; d++)
				if (strcmp(key, dim_names[d]) == 0)
					break;
			if (d == TRACE_DIM__COUNT)
				return fail(r, "coords: unknown dimension "
				    "\"%s\"", key);
			if (get_int(r, coords, key, true, 0, t->mesh[d] - 1,
			    &v) != 0)
				return -1;
			rk->has_coord[d] = true;
			rk->coord[d] = (int)v;
		}
	}
	tokens = json_object_get(meta, "tokens");
	if (tokens != NULL && !json_is_null(tokens)) {
		if (!json_is_array(tokens) || json_array_size(tokens) !=
		    (size_t)t->micro_batches)
			return fail(r, "\"tokens\" must list one count per "
			    "micro-batch (%d)", t->micro_batches);
		rk->tokens = arena_alloc(&t->arena, t->micro_batches *
		    sizeof(*rk->tokens));
		json_array_foreach(tokens, i, x) {
			if (!json_is_integer(x) || json_integer_value(x) < 0)
				return fail(r, "\"tokens\"[%zu] must be a "
				    "count", i);
			rk->tokens[i] = json_integer_value(x);
		}
	}
	if ((d = get_number(r, meta, "grad_norm", &rk->grad_norm)) < 0)
		return -1;
	rk->has_norm = d == 0;
	if ((d = get_number(r, meta, "clip_coef", &rk->clip_coef)) < 0)
		return -1;
	rk->has_clip = d == 0;
	params = json_object_get(meta, "params");
	if (!json_is_object(params))
		return fail(r, "\"params\" must be an object of logical "
		    "shapes");
	json_object_foreach(params, key, x)
		if (declare_param(r, rank, key, x, pcap) != 0)
			return -1;
	return 0;
}

static int
read_rank(struct reader *r, int rank, size_t *pcap)
{
	struct trace		*t = r->t;
	struct trace_rank	*rk = &t->ranks[rank];
	struct stat		 st;
	json_error_t		 e;
	json_t			*head = NULL, *meta = NULL, *tensors, *x;
	const unsigned char	*map;
	const char		*key, *s;
	uint64_t		 n;
	int			 fd, rc = -1, i;

	r->file = rk->file;
	r->tensor = NULL;
	if ((fd = open_regular(r, " (a rank's file is missing)", &st)) < 0)
		return -1;
	if (st.st_size < 8) {
		close(fd);
		return fail(r, "%jd bytes: too short for a safetensors file "
		    "(truncated?)", (intmax_t)st.st_size);
	}
	rk->maplen = (size_t)st.st_size;
	rk->map = mmap(NULL, rk->maplen, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (rk->map == MAP_FAILED) {
		rk->map = NULL;
		return fail(r, "cannot map: %s", strerror(errno));
	}
	map = rk->map;
	for (n = 0, i = 7; i >= 0; i--)
		n = n << 8 | map[i];
	if (n > TRACE_MAX_HEADER || n > rk->maplen - 8)
		return fail(r, "header of %" PRIu64 " bytes does not fit the "
		    "file's %zu bytes (truncated, or not safetensors)", n,
		    rk->maplen);
	head = json_loadb((const char *)map + 8, n, JSON_REJECT_DUPLICATES,
	    &e);
	if (head == NULL)
		return fail_json(r, "header", &e);
	if (!json_is_object(head)) {
		fail(r, "header is not a JSON object");
		goto out;
	}
	s = json_string_value(json_object_get(json_object_get(head,
	    "__metadata__"), "gradaudit"));
	if (s == NULL) {
		fail(r, "no gradaudit metadata (__metadata__.gradaudit): not "
		    "written by gradaudit's trace hook");
		goto out;
	}
	meta = json_loads(s, JSON_REJECT_DUPLICATES, &e);
	if (meta == NULL) {
		fail_json(r, "metadata", &e);
		goto out;
	}
	if (!json_is_object(meta)) {
		fail(r, "metadata is not a JSON object");
		goto out;
	}
	if (read_rank_meta(r, rank, meta, pcap) != 0)
		goto out;
	tensors = json_object_get(meta, "tensors");
	if (!json_is_object(tensors)) {
		fail(r, "metadata: \"tensors\" must be an object");
		goto out;
	}
	json_object_foreach(head, key, x) {
		if (strcmp(key, "__metadata__") == 0)
			continue;
		if (read_tensor(r, rank, key, x, tensors, map + 8 + n,
		    rk->maplen - 8 - n) != 0)
			goto out;
	}
	r->tensor = NULL;
	json_object_foreach(tensors, key, x)
		if (json_object_get(head, key) == NULL) {
			fail(r, "metadata describes tensor %s, which the file "
			    "does not hold", key);
			goto out;
		}
	rc = 0;
out:
	json_decref(meta);
	json_decref(head);
	return rc;
}

static int
cmp_tensor(const void *a, const void *b)
{
	const struct trace_tensor *x = a, *y = b;
	int	i;

	if (x->param != y->param)
		return x->param < y->param ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->mb != y->mb)
		return x->mb < y->mb ? -1 : 1;
	for (i = 0; i < TRACE_MAX_DIMS; i++)
		if (x->offset[i] != y->offset[i])
			return x->offset[i] < y->offset[i] ? -1 : 1;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return 0;
}

/* Pieces of one parameter, kind, rank and micro-batch. */
static bool
same_holder(const struct trace_tensor *a, const struct trace_tensor *b)
{
	return a->param == b->param && a->kind == b->kind &&
	    a->rank == b->rank && a->mb == b->mb;
}

/*
 * Whether pieces a and b of parameter p hold an element in common.  Boxes
 * that meet and are not the same box are walked element by element (the
 * smaller piece): a rank holds one piece of a parameter, or a few.
 */
static bool
pieces_overlap(const struct trace_param *p, const struct trace_tensor *a,
    const struct trace_tensor *b)
{
	const struct trace_tensor *x = a, *y = b;
	int64_t	 idx[TRACE_MAX_DIMS], i, j, rest;
	bool	 same = true;
	int	 d;

	for (d = 0; d < p->ndim; d++) {
		if (a->offset[d] >= b->offset[d] + b->box[d] ||
		    b->offset[d] >= a->offset[d] + a->box[d])
			return false;
		if (a->offset[d] != b->offset[d] || a->box[d] != b->box[d])
			same = false;
	}
	if (same)
		return a->lo < b->hi && b->lo < a->hi;
	if (a->hi - a->lo > b->hi - b->lo) {
		x = b;
		y = a;
	}
	for (i = x->lo; i < x->hi; i++) {
		for (rest = i, d = p->ndim - 1; d >= 0; d--) {
			idx[d] = rest % x->box[d] + x->offset[d] - y->offset[d];
			rest /= x->box[d];
		}
		for (j = 0, d = 0; d < p->ndim; d++) {
			if (idx[d] < 0 || idx[d] >= y->box[d])
				break;
			j = j * y->box[d] + idx[d];
		}
		if (d == p->ndim && j >= y->lo && j < y->hi)
			return true;
	}
	return false;
}

/*
 * A rank holds each element of a parameter once per kind: two
 * contributions to one micro-batch, or final or weight pieces that share
 * an element, would be counted twice (and make a reference that looks
 * whole by its element count have a hole).
 */
static int
check_overlaps(struct reader *r)
{
	struct trace	*t = r->t;
	size_t		 i, j, k, end;

	for (i = 0; i < t->ntensors; i = end) {
		for (end = i + 1; end < t->ntensors &&
		    same_holder(&t->tensors[i], &t->tensors[end]); end++)
			;
		for (j = i + 1; j < end; j++)
			for (k = i; k < j; k++) {
				const struct trace_tensor *a = &t->tensors[k];
				const struct trace_tensor *b = &t->tensors[j];

				r->file = t->ranks[b->rank].file;
				r->tensor = b->key;
				if (b->kind == TRACE_CONTRIB)
					return fail(r, "a second contribution "
					    "of %s to micro-batch %d, after %s",
					    t->params[b->param].name, b->mb,
					    a->key);
				if (pieces_overlap(&t->params[b->param], a, b))
					return fail(r, "holds elements of %s "
					    "that %s holds too", t->params[
					    b->param].name, a->key);
			}
	}
	r->tensor = NULL;
	return 0;
}

int
trace_open(struct trace *t, const char *dir, char *err, size_t errlen)
{
	struct reader	 r;
	size_t		 pcap = 0;
	int		 k;

	memset(t, 0, sizeof *t);
	arena_init(&t->arena);
	memset(&r, 0, sizeof r);
	r.t = t;
	r.err = err;
	r.errlen = errlen;
	t->dir = arena_strdup(&t->arena, dir);
	if (read_manifest(&r, dir) != 0)
		goto fail;
	for (k = 0; k < t->world; k++)
		if (read_rank(&r, k, &pcap) != 0)
			goto fail;
	qsort(t->tensors, t->ntensors, sizeof(*t->tensors), cmp_tensor);
	if (check_overlaps(&r) != 0)
		goto fail;
	return 0;
fail:
	trace_close(t);
	return -1;
}

void
trace_close(struct trace *t)
{
	int	k;

	if (t->ranks != NULL)
		for (k = 0; k < t->world; k++)
			if (t->ranks[k].map != NULL)
				munmap(t->ranks[k].map, t->ranks[k].maplen);
	free(t->params);
	free(t->tensors);
	arena_free(&t->arena);
	memset(t, 0, sizeof *t);
}

static float
half_to_float(uint16_t h)
{
	int	exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	float	v;

	if (exp == 0)
		v = ldexpf((float)man, -24);
	else if (exp == 31)
		v = man ? NAN : INFINITY;
	else
		v = ldexpf((float)(man | 0x400), exp - 25);
	return (h & 0x8000) ? -v : v;
}

double
trace_value(const struct trace_tensor *x, int64_t i)
{
	const unsigned char	*p;
	uint64_t		 u = 0;
	double			 d;
	float			 f;
	uint32_t		 w;
	size_t			 k, size = dtypes[x->dtype].size;

	p = x->data + (size_t)i * size;
	for (k = size; k > 0; k--)
		u = u << 8 | p[k - 1];
	switch (x->dtype) {
	case TRACE_F64:
		memcpy(&d, &u, sizeof d);
		return d;
	case TRACE_F32:
		w = (uint32_t)u;
		memcpy(&f, &w, sizeof f);
		return f;
	case TRACE_BF16:
		w = (uint32_t)u << 16;
		memcpy(&f, &w, sizeof f);
		return f;
	case TRACE_F16:
		return half_to_float((uint16_t)u);
	}
	return NAN;
}

size_t
trace_tensors_of(const struct trace *t, int param, enum trace_kind kind,
    size_t *first)
{
	size_t	lo = 0, hi = t->ntensors, i;

	/* Sorted by (param, kind): the first with both not below. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct trace_tensor *x = &t->tensors[mid];

		if (x->param < param || (x->param == param && x->kind < kind))
			lo = mid + 1;
		else
			hi = mid;
	}
	*first = lo;
	for (i = lo; i < t->ntensors && t->tensors[i].param == param &&
	    t->tensors[i].kind == kind; i++)
		;
	return i - lo;
}
