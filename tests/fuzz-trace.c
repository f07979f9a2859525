/*
 * Deterministic mutation fuzzing of the trace reader (TAP).
 *
 * Three seed traces are written here, each with its reference: a dp x tp
 * step in float64 whose finals are tp boxes, flat ranges of the
 * distributed optimizer and whole replicated tensors; Megatron-LM #844's
 * dp x pp step in float32, with a scalar; a float16 step with bfloat16
 * contributions.  Each is mutated thousands of times (bit flips,
 * truncations, header lengths, JSON punctuation, numbers and deletions,
 * JSON values replaced, tensors cloned, special floats in the data, and
 * several of these at once) and read with trace_open, which must return
 * 0 or -1 with one line that names a file of the trace, and never crash:
 * built with ASan and UBSan that is the real check.  A trace it opens is
 * compared with the seed's reference, which must return, and its reports
 * are rendered; a mutated reference is compared with the seed's trace.
 *
 *	tests/fuzz-trace [CASES [SEED]]
 *
 * CASES is the number of mutations per seed and kind (default 120), SEED
 * the random generator's.  The directory of the inputs is printed first,
 * as a TAP comment, and kept when the program does not finish; the input
 * of a failed check is kept in a directory of its own, named in its TAP
 * comment.
 */
#define _XOPEN_SOURCE 700

#include <sys/stat.h>

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/xmalloc.h"
#include "compare/compare.h"
#include "compare/trace.h"
#include "fuzz-render.h"
#include "fuzz-text.h"
#include "tap.h"

#define DEFAULT_CASES	120
#define MAX_FILES	5	/* the manifest and up to 4 ranks */

struct blob {
	unsigned char	*b;
	size_t		 len, cap;
};

/* A trace's files: f[0] is manifest.json, f[1 + r] rank r's file. */
struct files {
	struct blob	 f[MAX_FILES];
	int		 n;
};

struct seed {
	const char	*name;
	struct files	 trace, reference;
	bool		 correct;	/* the verdict compare must give */
};

static char	 top[] = "/tmp/fuzz-trace.XXXXXX";
static FILE	*devnull;
static int	 opened, refused, compared, mismatched;
static bool	 keep;		/* a check failed: keep the inputs */

/*
 * jansson's json_string and json_null share their names with src/base/json.h's
 * emitter, which libgradaudit.a links first: a call here would reach the
 * emitter.  Strings and nulls are made with json_pack.
 */
static json_t *
jstring(const char *s)
{
	return json_pack("s", s);
}

static void
blob_insert(struct blob *b, size_t at, const void *p, size_t n)
{
	if (n == 0)
		return;
	if (at > b->len)
		at = b->len;
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->b = xreallocarray(b->b, b->cap, 1);
	}
	memmove(b->b + at + n, b->b + at, b->len - at);
	memcpy(b->b + at, p, n);
	b->len += n;
}

static void
blob_add(struct blob *b, const void *p, size_t n)
{
	blob_insert(b, b->len, p, n);
}

static void
blob_delete(struct blob *b, size_t at, size_t n)
{
	if (at >= b->len)
		return;
	if (n > b->len - at)
		n = b->len - at;
	memmove(b->b + at, b->b + at + n, b->len - at - n);
	b->len -= n;
}

static void
blob_copy(struct blob *to, const struct blob *from)
{
	to->len = 0;
	blob_add(to, from->b, from->len);
}

static void
put_le(unsigned char *p, uint64_t v, size_t size)
{
	size_t	i;

	for (i = 0; i < size; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t
get_le(const unsigned char *p, size_t size)
{
	uint64_t	v = 0;

	while (size-- > 0)
		v = v << 8 | p[size];
	return v;
}

static uint64_t
bits_f64(double d)
{
	uint64_t	u;

	memcpy(&u, &d, sizeof u);
	return u;
}

static uint32_t
bits_f32(float f)
{
	uint32_t	u;

	memcpy(&u, &f, sizeof u);
	return u;
}

/* A normal or zero value, exact in half precision (the seeds' are). */
static uint16_t
bits_f16(double v)
{
	uint16_t	sign = v < 0 ? 0x8000 : 0;
	double		m;
	int		e;

	if (v == 0)
		return sign;
	m = frexp(fabs(v), &e);
	return sign | (uint16_t)((e + 14) << 10) |
	    (uint16_t)lround((2 * m - 1) * 1024);
}

static size_t
dtype_size(const char *dtype)
{
	return strcmp(dtype, "F64") == 0 ? 8 : strcmp(dtype, "F32") == 0 ? 4 :
	    2;
}

static void
put_value(struct blob *b, const char *dtype, double v)
{
	unsigned char	p[8];
	size_t		size = dtype_size(dtype);

	if (size == 8)
		put_le(p, bits_f64(v), 8);
	else if (size == 4)
		put_le(p, bits_f32((float)v), 4);
	else if (strcmp(dtype, "BF16") == 0)
		put_le(p, bits_f32((float)v) >> 16, 2);
	else
		put_le(p, bits_f16(v), 2);
	blob_add(b, p, size);
}

/*
 * Writing the seeds.  Values are multiples of 1/64 of at most 1, and the
 * finals means over two replicas, so that every dtype holds them exactly.
 */
struct writer {
	json_t		*header;	/* the tensors' entries */
	json_t		*meta;		/* the gradaudit metadata */
	struct blob	 data;
};

static uint64_t	 seed_rng = 1;

static double
seed_value(void)
{
	seed_rng = seed_rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)((int)(seed_rng >> 33) % 129 - 64) / 64;
}

static void
writer_begin(struct writer *w, int rank, int world, const char *step,
    const char *mode, int k)
{
	w->header = json_object();
	w->meta = json_pack("{s:i, s:i, s:s, s:s, s:i, s:{}, s:{}}", "rank",
	    rank, "world", world, "step", step, "mode", mode, "micro_batches",
	    k, "params", "tensors");
	memset(&w->data, 0, sizeof w->data);
}

static void
writer_param(struct writer *w, const char *name, json_t *shape)
{
	json_object_set_new(json_object_get(w->meta, "params"), name,
	    json_pack("{s:o}", "shape", shape));
}

/*
 * Tensor key of n values in dtype, its metadata desc (taken), stored with
 * shape (taken).
 */
static void
writer_tensor(struct writer *w, const char *key, const char *dtype,
    json_t *shape, json_t *desc, const double *v, size_t n)
{
	size_t	begin = w->data.len, i;

	for (i = 0; i < n; i++)
		put_value(&w->data, dtype, v[i]);
	json_object_set_new(w->header, key, json_pack("{s:s, s:o, s:[I, I]}",
	    "dtype", dtype, "shape", shape, "data_offsets", (json_int_t)begin,
	    (json_int_t)w->data.len));
	json_object_set_new(json_object_get(w->meta, "tensors"), key, desc);
}

/* A rank file from a header (taken) and its data. */
static void
rank_file(struct blob *out, json_t *header, const struct blob *data)
{
	unsigned char	 len[8];
	char		*head;
	size_t		 n;

	if ((head = json_dumps(header, JSON_COMPACT)) == NULL)
		head = xstrdup("");
	n = strlen(head);
	out->len = 0;
	put_le(len, n + (8 - n % 8) % 8, 8);
	blob_add(out, len, 8);
	blob_add(out, head, n);
	while (out->len % 8 != 0)
		blob_add(out, " ", 1);
	blob_add(out, data->b, data->len);
	free(head);
	json_decref(header);
}

static void
writer_end(struct writer *w, struct blob *out)
{
	char	*meta = json_dumps(w->meta, JSON_COMPACT);

	json_object_set_new(w->header, "__metadata__", json_pack("{s:s}",
	    "gradaudit", meta));
	rank_file(out, w->header, &w->data);
	free(meta);
	free(w->data.b);
	json_decref(w->meta);
}

static void
write_manifest(struct files *fs, json_t *m)
{
	json_t	*files = json_array();
	char	*s, name[64];
	int	 r;

	for (r = 0; r + 1 < fs->n; r++) {
		snprintf(name, sizeof name, "rank-%d.safetensors", r);
		json_array_append_new(files, jstring(name));
	}
	json_object_set_new(m, "format", jstring("gradaudit-trace"));
	json_object_set_new(m, "version", json_integer(1));
	json_object_set_new(m, "files", files);
	s = json_dumps(m, JSON_INDENT(1));
	fs->f[0].len = 0;
	blob_add(&fs->f[0], s, strlen(s));
	blob_add(&fs->f[0], "\n", 1);
	free(s);
	json_decref(m);
}

static json_t *
contrib_desc(const char *param, int mb, json_t *offset, json_t *box)
{
	return json_pack("{s:s, s:s, s:i, s:o, s:o}", "param", param, "kind",
	    "contrib", "mb", mb, "offset", offset, "box", box);
}

static json_t *
final_desc(const char *param, const char *kind, json_t *offset, json_t *box,
    int64_t lo, int64_t hi)
{
	json_t	*d = json_pack("{s:s, s:s, s:o, s:o}", "param", param, "kind",
		    kind, "offset", offset, "box", box);

	if (lo >= 0)
		json_object_set_new(d, "flat", json_pack("[I, I]",
		    (json_int_t)lo, (json_int_t)hi));
	return d;
}

static void
random_values(double *v, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		v[i] = seed_value();
}

/* The reference: one rank holding every parameter's mean whole. */
static void
write_reference(struct files *fs, const char *step, const char *dtype,
    int nparams, const char *const *names, json_t *const *shapes,
    double *const *values, const size_t *sizes)
{
	struct writer	 w;
	char		 key[64];
	int		 i;

	fs->n = 2;
	writer_begin(&w, 0, 1, "ref", "reference", 1);
	for (i = 0; i < nparams; i++) {
		json_t *zero = json_array();
		size_t d;

		for (d = 0; d < json_array_size(shapes[i]); d++)
			json_array_append_new(zero, json_integer(0));
		writer_param(&w, names[i], json_deep_copy(shapes[i]));
		snprintf(key, sizeof key, "final/%s", names[i]);
		writer_tensor(&w, key, dtype, json_deep_copy(shapes[i]),
		    final_desc(names[i], "final", zero,
		    json_deep_copy(shapes[i]), -1, -1), values[i], sizes[i]);
	}
	json_object_set_new(w.meta, "grad_norm", json_real(1.5));
	writer_end(&w, &fs->f[1]);
	/* The manifest names the dtype as gradaudit-trace(5) does. */
	write_manifest(fs, json_pack("{s:s, s:s, s:s, s:i, s:i, s:s}", "mode",
	    "reference", "step", "ref", "reference_of", step, "world", 1,
	    "micro_batches", 1, "dtype", strcmp(dtype, "F64") == 0 ? "float64" :
	    strcmp(dtype, "F32") == 0 ? "float32" : strcmp(dtype, "BF16") == 0 ?
	    "bfloat16" : "float16"));
}

/*
 * Seed 0: dp 2 x tp 2 (tp fastest), two micro-batches, float64.
 * embedding.weight [8, 8] in tp boxes of 4 rows, averaged over dp;
 * layer.weight [5, 16] summed over every rank and averaged over dp, each
 * dp rank holding a flat half; norm.weight [24], tp copies of one value,
 * averaged over dp and held whole.
 */
static void
seed_tp_dp(struct seed *s)
{
	static const char *const names[] = { "embedding.weight",
	    "layer.weight", "norm.weight" };
	double	 emb[4][2][32], layer[4][2][80], norm[4][2][24];
	double	 femb[2][32], flayer[80], fnorm[24], ref_emb[64];
	double	*values[3] = { ref_emb, flayer, fnorm };
	json_t	*shapes[3];
	size_t	 sizes[3] = { 64, 80, 24 }, i;
	char	 key[64];
	int	 r, m, d, t;

	s->name = "dp2 tp2 float64";
	s->correct = true;
	memset(femb, 0, sizeof femb);
	memset(flayer, 0, sizeof flayer);
	memset(fnorm, 0, sizeof fnorm);
	for (r = 0; r < 4; r++)
		for (m = 0; m < 2; m++) {
			random_values(emb[r][m], 32);
			random_values(layer[r][m], 80);
			if (r % 2 == 0)
				random_values(norm[r][m], 24);
			else
				memcpy(norm[r][m], norm[r - 1][m],
				    sizeof norm[r][m]);
			for (i = 0; i < 32; i++)
				femb[r % 2][i] += emb[r][m][i] / 2;
			for (i = 0; i < 80; i++)
				flayer[i] += layer[r][m][i] / 2;
			for (i = 0; r % 2 == 0 && i < 24; i++)
				fnorm[i] += norm[r][m][i] / 2;
		}
	memcpy(ref_emb, femb[0], sizeof femb[0]);
	memcpy(ref_emb + 32, femb[1], sizeof femb[1]);
	s->trace.n = 5;
	for (r = 0; r < 4; r++) {
		struct writer w;

		d = r / 2;
		t = r % 2;
		writer_begin(&w, r, 4, "step0", "parallel", 2);
		writer_param(&w, names[0], json_pack("[i, i]", 8, 8));
		writer_param(&w, names[1], json_pack("[i, i]", 5, 16));
		writer_param(&w, names[2], json_pack("[i]", 24));
		json_object_set_new(w.meta, "coords", json_pack("{s:i, s:i}",
		    "dp", d, "tp", t));
		json_object_set_new(w.meta, "tokens", json_pack("[i, i]", 8,
		    7));
		json_object_set_new(w.meta, "grad_norm", json_real(1.5));
		json_object_set_new(w.meta, "clip_coef", json_real(0.5));
		for (m = 0; m < 2; m++) {
			snprintf(key, sizeof key, "contrib/%d/%s", m, names[0]);
			writer_tensor(&w, key, "F64", json_pack("[i, i]", 4, 8),
			    contrib_desc(names[0], m, json_pack("[i, i]", 4 * t,
			    0), json_pack("[i, i]", 4, 8)), emb[r][m], 32);
			snprintf(key, sizeof key, "contrib/%d/%s", m, names[1]);
			writer_tensor(&w, key, "F64", json_pack("[i, i]", 5,
			    16), contrib_desc(names[1], m, json_pack("[i, i]",
			    0, 0), json_pack("[i, i]", 5, 16)), layer[r][m],
			    80);
			snprintf(key, sizeof key, "contrib/%d/%s", m, names[2]);
			writer_tensor(&w, key, "F64", json_pack("[i]", 24),
			    contrib_desc(names[2], m, json_pack("[i]", 0),
			    json_pack("[i]", 24)), norm[r][m], 24);
		}
		writer_tensor(&w, "final/embedding.weight", "F64",
		    json_pack("[i, i]", 4, 8), final_desc(names[0], "final",
		    json_pack("[i, i]", 4 * t, 0), json_pack("[i, i]", 4, 8),
		    -1, -1), femb[t], 32);
		writer_tensor(&w, "final/layer.weight", "F64",
		    json_pack("[i]", 40), final_desc(names[1], "final",
		    json_pack("[i, i]", 0, 0), json_pack("[i, i]", 5, 16),
		    40 * d, 40 * d + 40), flayer + 40 * d, 40);
		writer_tensor(&w, "final/norm.weight", "F64", json_pack("[i]",
		    24), final_desc(names[2], "final", json_pack("[i]", 0),
		    json_pack("[i]", 24), -1, -1), fnorm, 24);
		writer_tensor(&w, "weight/norm.weight", "F64", json_pack("[i]",
		    24), final_desc(names[2], "weight", json_pack("[i]", 0),
		    json_pack("[i]", 24), -1, -1), norm[0][0], 24);
		writer_end(&w, &s->trace.f[1 + r]);
	}
	write_manifest(&s->trace, json_pack("{s:s, s:s, s:i, s:i, s:s, "
	    "s:{s:i, s:i}}", "mode", "parallel", "step", "step0", "world", 4,
	    "micro_batches", 2, "dtype", "float64", "mesh", "dp", 2, "tp", 2));
	shapes[0] = json_pack("[i, i]", 8, 8);
	shapes[1] = json_pack("[i, i]", 5, 16);
	shapes[2] = json_pack("[i]", 24);
	write_reference(&s->reference, "step0", "F64", 3, names, shapes,
	    values, sizes);
	for (i = 0; i < 3; i++)
		json_decref(shapes[i]);
}

/*
 * Seed 1: Megatron-LM #844 on dp 2 x pp 2 (dp fastest), float32: the
 * owners of the tied embedding, ranks 1 and 2, miss one contribution each.
 * A scalar, every rank's mean, is right.
 */
static void
seed_844(struct seed *s)
{
	static const char *const names[] = { "embedding.weight", "scale" };
	double	 g[4][16], c[4], full[16], scale = 0, fin[4][16];
	double	*values[2] = { full, &scale };
	json_t	*shapes[2];
	size_t	 sizes[2] = { 16, 1 }, i;
	int	 r;

	s->name = "844 dp2 pp2 float32";
	s->correct = false;
	memset(full, 0, sizeof full);
	for (r = 0; r < 4; r++) {
		random_values(g[r], 16);
		random_values(&c[r], 1);
		scale += c[r] / 2;
		for (i = 0; i < 16; i++)
			full[i] += g[r][i] / 2;
	}
	for (i = 0; i < 16; i++) {
		fin[1][i] = (g[0][i] + g[1][i] + g[3][i]) / 2;
		fin[2][i] = (g[0][i] + g[2][i] + g[3][i]) / 2;
	}
	s->trace.n = 5;
	for (r = 0; r < 4; r++) {
		struct writer w;

		writer_begin(&w, r, 4, "step844", "parallel", 1);
		writer_param(&w, names[0], json_pack("[i, i]", 4, 4));
		writer_param(&w, names[1], json_array());
		json_object_set_new(w.meta, "coords", json_pack("{s:i, s:i}",
		    "dp", r % 2, "pp", r / 2));
		writer_tensor(&w, "contrib/0/embedding.weight", "F32",
		    json_pack("[i, i]", 4, 4), contrib_desc(names[0], 0,
		    json_pack("[i, i]", 0, 0), json_pack("[i, i]", 4, 4)),
		    g[r], 16);
		writer_tensor(&w, "contrib/0/scale", "F32", json_array(),
		    contrib_desc(names[1], 0, json_array(), json_array()),
		    &c[r], 1);
		if (r == 1 || r == 2)
			writer_tensor(&w, "final/embedding.weight", "F32",
			    json_pack("[i, i]", 4, 4), final_desc(names[0],
			    "final", json_pack("[i, i]", 0, 0),
			    json_pack("[i, i]", 4, 4), -1, -1), fin[r], 16);
		writer_tensor(&w, "final/scale", "F32", json_array(),
		    final_desc(names[1], "final", json_array(), json_array(),
		    -1, -1), &scale, 1);
		writer_end(&w, &s->trace.f[1 + r]);
	}
	write_manifest(&s->trace, json_pack("{s:s, s:s, s:i, s:i, s:s, "
	    "s:{s:i, s:i}}", "mode", "parallel", "step", "step844", "world",
	    4, "micro_batches", 1, "dtype", "float32", "mesh", "dp", 2, "pp",
	    2));
	shapes[0] = json_pack("[i, i]", 4, 4);
	shapes[1] = json_array();
	write_reference(&s->reference, "step844", "F32", 2, names, shapes,
	    values, sizes);
	for (i = 0; i < 2; i++)
		json_decref(shapes[i]);
}

/*
 * Seed 2: dp 2, one micro-batch, bfloat16 contributions and float16
 * finals: w [3, 4] held in flat halves, b [4] whole.
 */
static void
seed_half(struct seed *s)
{
	static const char *const names[] = { "w", "b" };
	double	 w[2][12], b[2][4], fw[12], fb[4];
	double	*values[2] = { fw, fb };
	json_t	*shapes[2];
	size_t	 sizes[2] = { 12, 4 }, i;
	int	 r;

	s->name = "dp2 bfloat16 and float16";
	s->correct = true;
	for (r = 0; r < 2; r++) {
		random_values(w[r], 12);
		random_values(b[r], 4);
	}
	for (i = 0; i < 12; i++)
		fw[i] = (w[0][i] + w[1][i]) / 2;
	for (i = 0; i < 4; i++)
		fb[i] = (b[0][i] + b[1][i]) / 2;
	s->trace.n = 3;
	for (r = 0; r < 2; r++) {
		struct writer wr;

		writer_begin(&wr, r, 2, "stephalf", "parallel", 1);
		writer_param(&wr, names[0], json_pack("[i, i]", 3, 4));
		writer_param(&wr, names[1], json_pack("[i]", 4));
		writer_tensor(&wr, "contrib/0/w", "BF16", json_pack("[i, i]",
		    3, 4), contrib_desc(names[0], 0, json_pack("[i, i]", 0, 0),
		    json_pack("[i, i]", 3, 4)), w[r], 12);
		writer_tensor(&wr, "contrib/0/b", "BF16", json_pack("[i]", 4),
		    contrib_desc(names[1], 0, json_pack("[i]", 0),
		    json_pack("[i]", 4)), b[r], 4);
		writer_tensor(&wr, "final/w", "F16", json_pack("[i]", 6),
		    final_desc(names[0], "final", json_pack("[i, i]", 0, 0),
		    json_pack("[i, i]", 3, 4), 6 * r, 6 * r + 6), fw + 6 * r,
		    6);
		writer_tensor(&wr, "final/b", "F16", json_pack("[i]", 4),
		    final_desc(names[1], "final", json_pack("[i]", 0),
		    json_pack("[i]", 4), -1, -1), fb, 4);
		writer_tensor(&wr, "weight/w", "BF16", json_pack("[i, i]", 3,
		    4), final_desc(names[0], "weight", json_pack("[i, i]", 0,
		    0), json_pack("[i, i]", 3, 4), -1, -1), w[0], 12);
		writer_end(&wr, &s->trace.f[1 + r]);
	}
	write_manifest(&s->trace, json_pack("{s:s, s:s, s:i, s:i, s:s, "
	    "s:{s:i}}", "mode", "parallel", "step", "stephalf", "world", 2,
	    "micro_batches", 1, "dtype", "float16", "mesh", "dp", 2));
	shapes[0] = json_pack("[i, i]", 3, 4);
	shapes[1] = json_pack("[i]", 4);
	write_reference(&s->reference, "stephalf", "F16", 2, names, shapes,
	    values, sizes);
	for (i = 0; i < 2; i++)
		json_decref(shapes[i]);
}

/*
 * Overwrite the files of dir in place: reopening them with truncation
 * would make ext4 flush them on every close (auto_da_alloc).
 */
static void
write_files(const char *dir, const struct files *fs)
{
	char	path[512];
	int	i, fd;

	for (i = 0; i < fs->n; i++) {
		if (i == 0)
			snprintf(path, sizeof path, "%s/manifest.json", dir);
		else
			snprintf(path, sizeof path, "%s/rank-%d.safetensors",
			    dir, i - 1);
		if ((fd = open(path, O_WRONLY | O_CREAT, 0600)) == -1)
			fatal("%s", path);
		if (pwrite(fd, fs->f[i].b, fs->f[i].len, 0) !=
		    (ssize_t)fs->f[i].len || ftruncate(fd,
		    (off_t)fs->f[i].len) == -1)
			fatal("%s", path);
		close(fd);
	}
}

/*
 * A rank file split into its header text and the rest; the header length
 * is believed as far as the file goes.
 */
static void
split_rank(const struct blob *f, struct blob *head, struct blob *rest)
{
	uint64_t	n = f->len >= 8 ? get_le(f->b, 8) : 0;

	head->len = rest->len = 0;
	if (f->len < 8) {
		blob_add(head, f->b, f->len);
		return;
	}
	if (n > f->len - 8)
		n = f->len - 8;
	blob_add(head, f->b + 8, (size_t)n);
	blob_add(rest, f->b + 8 + n, f->len - 8 - (size_t)n);
}

static void
join_rank(struct blob *f, const struct blob *head, const struct blob *rest)
{
	unsigned char	len[8];

	put_le(len, head->len, 8);
	f->len = 0;
	blob_add(f, len, 8);
	blob_add(f, head->b, head->len);
	blob_add(f, rest->b, rest->len);
}

/* Apply a mutation of JSON text to file i, keeping a header's length. */
static void
mutate_text(struct files *fs, int i, void (*apply)(struct blob *))
{
	struct blob	head = { NULL, 0, 0 }, rest = { NULL, 0, 0 };

	if (i == 0) {
		apply(&fs->f[0]);
		return;
	}
	split_rank(&fs->f[i], &head, &rest);
	apply(&head);
	join_rank(&fs->f[i], &head, &rest);
	free(head.b);
	free(rest.b);
}

/* The file a mutation hits: a rank file four times in five. */
static int
pick_file(const struct files *fs)
{
	return pick(5) == 0 ? 0 : 1 + (int)pick((size_t)fs->n - 1);
}

static void
text_flip(struct blob *t)
{
	if (t->len > 0)
		t->b[pick(t->len)] ^= (unsigned char)(1u << pick(8));
}

static void
blob_cut(struct blob *t)
{
	blob_delete(t, pick(t->len), 1 + pick(6));
}

static const char *const punctuation[] = {
	"{", "}", "[", "]", ",", ":", "\"", "\\", "\\\"", "-", ".", "e",
	"\\u0000", "\\ud800", "\xff", "\xc3", " ", "\n", "null", "[]", "{}",
	"\"a\":", "/", "0", "1e999", "NaN",
};

static void
text_punctuation(struct blob *t)
{
	const char	*p = punctuation[pick(sizeof(punctuation) /
			    sizeof(punctuation[0]))];

	blob_insert(t, pick(t->len + 1), p, strlen(p));
}

static const char *const numbers[] = {
	"0", "-1", "-0", "1", "2", "3", "4", "7", "8", "15", "16", "24",
	"40", "41", "80", "1024", "1025", "4096", "4097", "2147483648",
	"1099511627776", "1099511627777", "9223372036854775807",
	"9223372036854775808", "-9223372036854775808", "1e3", "0.5", "1e308",
	"99999999999999999999", "",
};

/* Replace a run of digits (most are sizes, offsets and ranks). */
static void
text_number(struct blob *t)
{
	const char	*n = numbers[pick(sizeof numbers / sizeof numbers[0])];
	size_t		 i, start = 0, end, found = 0, which;

	for (i = 0; i < t->len; i++)
		if (t->b[i] >= '0' && t->b[i] <= '9' && (i == 0 ||
		    t->b[i - 1] < '0' || t->b[i - 1] > '9'))
			found++;
	if (found == 0)
		return;
	which = pick(found);
	for (i = 0; i < t->len; i++)
		if (t->b[i] >= '0' && t->b[i] <= '9' && (i == 0 ||
		    t->b[i - 1] < '0' || t->b[i - 1] > '9') && which-- == 0) {
			start = i;
			break;
		}
	for (end = start; end < t->len && t->b[end] >= '0' &&
	    t->b[end] <= '9'; end++)
		continue;
	blob_delete(t, start, end - start);
	blob_insert(t, start, n, strlen(n));
}

/* v + d, wrapping as the machine does: a mutation must not overflow. */
static json_int_t
add_wrap(json_int_t v, json_int_t d)
{
	return (json_int_t)((uint64_t)v + (uint64_t)d);
}

/* Every value of a JSON document, with its container. */
struct node {
	json_t		*parent;	/* NULL for the root */
	const char	*key;		/* in an object */
	size_t		 index;		/* in an array */
	json_t		*value;
};

struct nodes {
	struct node	*v;
	size_t		 n, cap;
};

static void
collect(struct nodes *ns, json_t *parent, const char *key, size_t index,
    json_t *v)
{
	const char	*k;
	json_t		*x;
	size_t		 i;

	if (ns->n == ns->cap) {
		ns->cap = ns->cap ? 2 * ns->cap : 64;
		ns->v = xreallocarray(ns->v, ns->cap, sizeof(*ns->v));
	}
	ns->v[ns->n++] = (struct node){ parent, key, index, v };
	if (json_is_object(v))
		json_object_foreach(v, k, x)
			collect(ns, v, k, 0, x);
	else if (json_is_array(v))
		json_array_foreach(v, i, x)
			collect(ns, v, NULL, i, x);
}

/* An awkward value for a member of a trace. */
static json_t *
awkward(json_t *root)
{
	static const char *const strings[] = { "", "F32", "F64", "BF16",
	    "F16", "I32", "contrib", "final", "weight", "parallel",
	    "reference", "step0", "embedding.weight", "norm.weight", "scale",
	    "w", "dp", "tp", "gradaudit-trace", "rank-0.safetensors", "..",
	    "contrib/0/w", "final/norm.weight" };
	static const json_int_t ints[] = { 0, -1, 1, 2, 3, 4, 7, 8, 16, 24,
	    40, 41, 80, 4096, 4097, INT64_C(1) << 31, INT64_C(1) << 40,
	    (INT64_C(1) << 40) + 1, INT64_MAX, INT64_MIN };
	json_t	*a;
	size_t	 n, i;

	switch (pick(9)) {
	case 0:
	case 1:
		return json_integer(ints[pick(sizeof ints / sizeof ints[0])]);
	case 2:
		return jstring(strings[pick(sizeof strings /
		    sizeof strings[0])]);
	case 3:
		return json_real(pick(2) ? 0.5 : 1e308);
	case 4:
		return json_pack(pick(2) ? "n" : "b", 1);
	case 5:
		return json_object();
	case 6:
		/* A copy of another part of the document. */
		{
			struct nodes ns = { NULL, 0, 0 };

			collect(&ns, NULL, NULL, 0, root);
			a = json_deep_copy(ns.v[pick(ns.n)].value);
			free(ns.v);
			return a;
		}
	default:
		a = json_array();
		n = pick(TRACE_MAX_DIMS + 2);
		for (i = 0; i < n; i++)
			json_array_append_new(a, json_integer(ints[pick(
			    pick(2) ? 8 : sizeof ints / sizeof ints[0])]));
		return a;
	}
}

/* Replace, tweak or delete one value of the document (never the root). */
static void
mutate_tree(json_t *root)
{
	struct nodes	 ns = { NULL, 0, 0 };
	struct node	*x;

	collect(&ns, NULL, NULL, 0, root);
	if (ns.n < 2) {
		free(ns.v);
		return;
	}
	x = &ns.v[1 + pick(ns.n - 1)];
	switch (pick(4)) {
	case 0:
		if (json_is_object(x->parent))
			json_object_del(x->parent, x->key);
		else
			json_array_remove(x->parent, x->index);
		break;
	case 1:
		if (json_is_integer(x->value)) {
			json_integer_set(x->value, add_wrap(
			    json_integer_value(x->value), pick(2) ? 1 : -1));
			break;
		}
		/* FALLTHROUGH */
	default:
		if (json_is_object(x->parent))
			json_object_set_new(x->parent, x->key, awkward(root));
		else
			json_array_set_new(x->parent, x->index, awkward(root));
		break;
	}
	free(ns.v);
}

/*
 * A JSON value of file i replaced or deleted: in a rank file, of the
 * metadata three times in four (where the boxes and ranks are), else of
 * the header itself.
 */
static void
mutate_json(struct files *fs, int i)
{
	struct blob	 head = { NULL, 0, 0 }, rest = { NULL, 0, 0 };
	json_t		*doc, *meta = NULL, *md;
	const char	*s;
	char		*out;

	if (i == 0) {
		if ((doc = json_loadb((const char *)fs->f[0].b, fs->f[0].len,
		    0, NULL)) == NULL)
			return;
		mutate_tree(doc);
		out = json_dumps(doc, JSON_INDENT(1) | JSON_ENCODE_ANY);
		fs->f[0].len = 0;
		blob_add(&fs->f[0], out, strlen(out));
		free(out);
		json_decref(doc);
		return;
	}
	split_rank(&fs->f[i], &head, &rest);
	doc = json_loadb((const char *)head.b, head.len, 0, NULL);
	md = json_object_get(doc, "__metadata__");
	s = json_string_value(json_object_get(md, "gradaudit"));
	if (s != NULL && pick(4) != 0 &&
	    (meta = json_loads(s, 0, NULL)) != NULL) {
		mutate_tree(meta);
		out = json_dumps(meta, JSON_COMPACT | JSON_ENCODE_ANY);
		json_object_set_new(md, "gradaudit", jstring(out));
		free(out);
		json_decref(meta);
	} else if (doc != NULL)
		mutate_tree(doc);
	if (doc != NULL) {
		rank_file(&fs->f[i], doc, &rest);
		doc = NULL;
	}
	json_decref(doc);
	free(head.b);
	free(rest.b);
}

/*
 * Split tensor key (header entry e, description desc) into two flat
 * pieces at a random element, the second under newkey: a final or weight
 * that a rank holds in two parts, which must read as the whole.
 */
static void
split_tensor(json_t *doc, json_t *tensors, const char *key, json_t *e,
    json_t *desc, const char *newkey)
{
	json_t		*offs = json_object_get(e, "data_offsets"), *flat;
	const char	*dtype = json_string_value(json_object_get(e, "dtype"));
	json_int_t	 begin, end, lo, n, mid, size;

	begin = json_integer_value(json_array_get(offs, 0));
	end = json_integer_value(json_array_get(offs, 1));
	size = dtype != NULL ? (json_int_t)dtype_size(dtype) : 8;
	flat = json_object_get(desc, "flat");
	lo = json_integer_value(json_array_get(flat, 0));
	/* Only what a seed or a mild mutation holds: no overflow below. */
	if (begin < 0 || end < begin || end - begin > INT32_MAX || lo < 0 ||
	    lo > INT32_MAX || !json_is_object(desc))
		return;
	if ((n = (end - begin) / size) < 2)
		return;
	mid = 1 + (json_int_t)pick((size_t)n - 1);
	desc = json_deep_copy(desc);
	e = json_deep_copy(e);
	json_object_set_new(json_object_get(tensors, key), "flat",
	    json_pack("[I, I]", lo, lo + mid));
	json_object_set_new(json_object_get(doc, key), "shape",
	    json_pack("[I]", mid));
	json_object_set_new(json_object_get(doc, key), "data_offsets",
	    json_pack("[I, I]", begin, begin + mid * size));
	json_object_set_new(desc, "flat", json_pack("[I, I]", lo + mid,
	    lo + n));
	json_object_set_new(e, "shape", json_pack("[I]", n - mid));
	json_object_set_new(e, "data_offsets", json_pack("[I, I]", begin +
	    mid * size, end));
	json_object_set_new(tensors, newkey, desc);
	json_object_set_new(doc, newkey, e);
}

/*
 * A tensor of file i stored twice under a new key, in the header and the
 * metadata: split in two pieces that fit together, or copied with its
 * second description changed a little (a second contribution,
 * overlapping pieces).
 */
static void
mutate_clone(struct files *fs, int i)
{
	struct blob	 head = { NULL, 0, 0 }, rest = { NULL, 0, 0 };
	json_t		*doc, *md, *meta, *tensors, *desc, *x = NULL, *a;
	const char	*s, *key = NULL, *field;
	char		*out, *newkey;
	size_t		 n, which, k;

	if (i == 0)
		i = 1;
	split_rank(&fs->f[i], &head, &rest);
	doc = json_loadb((const char *)head.b, head.len, 0, NULL);
	md = json_object_get(doc, "__metadata__");
	s = json_string_value(json_object_get(md, "gradaudit"));
	meta = s != NULL ? json_loads(s, 0, NULL) : NULL;
	tensors = json_object_get(meta, "tensors");
	n = json_is_object(doc) ? json_object_size(tensors) : 0;
	if (n > 0) {
		which = pick(n);
		json_object_foreach(tensors, key, x)
			if (which-- == 0)
				break;
		xasprintf(&newkey, "%s~%zu", key, pick(10));
		field = pick(2) ? "split" : pick(3) == 0 ? "mb" :
		    pick(2) ? "offset" : "flat";
		desc = json_deep_copy(x);
		a = json_object_get(desc, field);
		if (strcmp(field, "split") == 0) {
			json_decref(desc);
			desc = NULL;
			split_tensor(doc, tensors, key, json_object_get(doc,
			    key), x, newkey);
		} else if (strcmp(field, "mb") == 0)
			json_object_set_new(desc, "mb", json_integer(
			    (json_int_t)pick(3)));
		else if (json_array_size(a) > 0) {
			k = pick(json_array_size(a));
			json_array_set_new(a, k, json_integer(
			    add_wrap(json_integer_value(json_array_get(a, k)),
			    (json_int_t)pick(3) - 1)));
		}
		if (desc != NULL) {
			json_object_set_new(tensors, newkey, desc);
			if (json_object_get(doc, key) != NULL)
				json_object_set_new(doc, newkey,
				    json_deep_copy(json_object_get(doc, key)));
		}
		out = json_dumps(meta, JSON_COMPACT);
		json_object_set_new(md, "gradaudit", jstring(out));
		free(out);
		free(newkey);
		rank_file(&fs->f[i], doc, &rest);
		doc = NULL;
	}
	json_decref(meta);
	json_decref(doc);
	free(head.b);
	free(rest.b);
}

/* Bit patterns of special and extreme values, by element size. */
static uint64_t
special_bits(size_t size)
{
	static const uint64_t f64[] = { 0x7ff8000000000000ULL,
	    0x7ff0000000000000ULL, 0xfff0000000000000ULL,
	    0x7fefffffffffffffULL, 0xffefffffffffffffULL, 1,
	    0x8000000000000000ULL, 0x5fe0000000000000ULL,
	    0x2000000000000000ULL };
	static const uint64_t f32[] = { 0x7fc00000, 0x7f800000, 0xff800000,
	    0x7f7fffff, 1, 0x80000000, 0x5f800000, 0x1f800000 };
	static const uint64_t f16[] = { 0x7e00, 0x7c00, 0xfc00, 0x7bff, 1,
	    0x8000, 0x7f80, 0x7fc0, 0x7f7f };

	if (size == 8)
		return f64[pick(sizeof f64 / sizeof f64[0])];
	if (size == 4)
		return f32[pick(sizeof f32 / sizeof f32[0])];
	return f16[pick(sizeof f16 / sizeof f16[0])];
}

/* An element of a tensor of file i overwritten with a special value. */
static void
mutate_data(struct files *fs, int i)
{
	struct blob	 head = { NULL, 0, 0 }, rest = { NULL, 0, 0 };
	json_t		*doc, *x = NULL, *offs;
	const char	*key, *dtype;
	size_t		 n, which, size;
	json_int_t	 begin, end;

	if (i == 0)
		i = 1;
	split_rank(&fs->f[i], &head, &rest);
	doc = json_loadb((const char *)head.b, head.len, 0, NULL);
	n = json_object_size(doc);
	if (n > 0) {
		which = pick(n);
		json_object_foreach(doc, key, x)
			if (which-- == 0)
				break;
		dtype = json_string_value(json_object_get(x, "dtype"));
		offs = json_object_get(x, "data_offsets");
		begin = json_integer_value(json_array_get(offs, 0));
		end = json_integer_value(json_array_get(offs, 1));
		size = dtype != NULL ? dtype_size(dtype) : 8;
		if (begin >= 0 && end > begin && (size_t)end <= rest.len &&
		    (size_t)(end - begin) >= size) {
			size_t e = pick((size_t)(end - begin) / size);

			put_le(rest.b + begin + e * size, special_bits(size),
			    size);
			join_rank(&fs->f[i], &head, &rest);
		}
	}
	json_decref(doc);
	free(head.b);
	free(rest.b);
}

static void
mutate_flips(struct files *fs)
{
	struct blob	*f = &fs->f[pick_file(fs)];
	size_t		 k, n = 1 + pick(4);

	for (k = 0; k < n && f->len > 0; k++)
		f->b[pick(f->len)] ^= (unsigned char)(1u << pick(8));
}

static void
mutate_truncate(struct files *fs)
{
	struct blob	*f = &fs->f[pick_file(fs)];

	f->len = pick(f->len + 1);
}

static void
mutate_header_length(struct files *fs)
{
	struct blob	*f = &fs->f[1 + pick((size_t)fs->n - 1)];
	uint64_t	 n, v;

	if (f->len < 8)
		return;
	n = get_le(f->b, 8);
	switch (pick(8)) {
	case 0:
		v = 0;
		break;
	case 1:
		v = n + 1 + pick(16);
		break;
	case 2:
		v = n - 1 - pick(n > 16 ? 16 : n > 0 ? n : 1);
		break;
	case 3:
		v = f->len - 8 + pick(2);
		break;
	case 4:
		v = (uint64_t)TRACE_MAX_HEADER + pick(2);
		break;
	case 5:
		v = UINT64_MAX - pick(16);
		break;
	case 6:
		v = UINT64_C(1) << (32 + pick(32));
		break;
	default:
		v = rng();
		break;
	}
	put_le(f->b, v, 8);
}

static void
mutate_punctuation(struct files *fs)
{
	mutate_text(fs, pick_file(fs), text_punctuation);
}

static void
mutate_number(struct files *fs)
{
	mutate_text(fs, pick_file(fs), text_number);
}

static void
mutate_delete(struct files *fs)
{
	mutate_text(fs, pick_file(fs), pick(2) ? blob_cut : text_flip);
}

static void
mutate_value(struct files *fs)
{
	mutate_json(fs, pick_file(fs));
}

static void
mutate_tensor(struct files *fs)
{
	mutate_clone(fs, pick_file(fs));
}

static void
mutate_special(struct files *fs)
{
	mutate_data(fs, pick_file(fs));
}

static void	mutate_mixed(struct files *);

static const struct mutation {
	const char	 *name;
	void		(*apply)(struct files *);
	bool		  reference;	/* mutate the reference instead */
} mutations[] = {
	{ "bit flips", mutate_flips, false },
	{ "truncations", mutate_truncate, false },
	{ "header lengths", mutate_header_length, false },
	{ "JSON punctuation", mutate_punctuation, false },
	{ "JSON numbers", mutate_number, false },
	{ "JSON deletions", mutate_delete, false },
	{ "JSON values", mutate_value, false },
	{ "cloned tensors", mutate_tensor, false },
	{ "special floats", mutate_special, false },
	{ "mixed", mutate_mixed, false },
	{ "mixed, of the reference", mutate_mixed, true },
};
#define NMUTATIONS	(sizeof(mutations) / sizeof(mutations[0]))
#define NSIMPLE		(NMUTATIONS - 2)

static void
mutate_mixed(struct files *fs)
{
	size_t	k, n = 2 + pick(4);

	for (k = 0; k < n; k++)
		mutations[pick(NSIMPLE)].apply(fs);
}

/*
 * A message of trace_open or compare_traces: one line that starts with
 * one of the directories read.
 */
static const char *
check_message(const char *err, const char *dir, const char *other)
{
	size_t	n = strlen(dir), m = strlen(other);

	if (err[0] == '\0')
		return "returned -1 without a message";
	if (strchr(err, '\n') != NULL)
		return "the message is more than one line";
	if ((strncmp(err, dir, n) != 0 || (err[n] != '/' && err[n] != ':')) &&
	    (strncmp(err, other, m) != 0 || (err[m] != '/' && err[m] != ':')))
		return "the message does not name a file of the trace";
	return NULL;
}

/*
 * Open dir (mutated) and compare it with other, or other with it when it
 * is the reference; a description of the first broken rule, or NULL.
 */
static const char *
check_case(const char *dir, struct trace *other, bool is_reference,
    int *verdict)
{
	struct trace	 t;
	struct audit	 a;
	const char	*why;
	char		 err[TRACE_ERROR_SIZE];
	int		 rc;

	*verdict = -1;
	err[0] = '\0';
	rc = trace_open(&t, dir, err, sizeof err);
	if (rc == -1) {
		refused++;
		return check_message(err, dir, other->dir);
	}
	if (rc != 0)
		return "trace_open returned neither 0 nor -1";
	opened++;
	err[0] = '\0';
	rc = is_reference ? compare_traces(other, &t, &a, err, sizeof err) :
	    compare_traces(&t, other, &a, err, sizeof err);
	if (rc == -1) {
		mismatched++;
		why = check_message(err, dir, other->dir);
	} else if (rc != 0)
		why = "compare_traces returned neither 0 nor -1";
	else {
		compared++;
		why = a.nparams != (is_reference ? other : &t)->nparams ?
		    "the audit has another number of parameters" : NULL;
		fuzz_render(devnull, &a);
		*verdict = a.correct && a.consistent;
		audit_free(&a);
	}
	trace_close(&t);
	return why;
}

static void
fuzz(const struct seed *s, const struct mutation *m, size_t cases,
    const char *seeddir)
{
	struct files	 fs;
	struct trace	 other;
	const struct files *base = m->reference ? &s->reference : &s->trace;
	const char	*why = NULL;
	char		 dir[1024], odir[1024], err[TRACE_ERROR_SIZE];
	char		 kept[1100];
	static size_t	 kept_count;
	size_t		 c, i;
	int		 verdict, before = compared;

	memset(&fs, 0, sizeof fs);
	snprintf(dir, sizeof dir, "%s/%s", top, m->reference ? "case-ref" :
	    "case");
	snprintf(odir, sizeof odir, "%s/%s", seeddir, m->reference ?
	    "parallel" : "reference");
	if (trace_open(&other, odir, err, sizeof err) != 0)
		fatalx("%s", err);
	for (c = 0; c < cases && why == NULL; c++) {
		fs.n = base->n;
		for (i = 0; i < (size_t)base->n; i++)
			blob_copy(&fs.f[i], &base->f[i]);
		m->apply(&fs);
		write_files(dir, &fs);
		why = check_case(dir, &other, m->reference, &verdict);
	}
	if (!tap_ok(why == NULL, "%s: %zu %s (%d compared)", s->name, cases,
	    m->name, compared - before)) {
		/* Moved where the next mutations do not overwrite it. */
		keep = true;
		snprintf(kept, sizeof kept, "%s-%zu", dir, kept_count++);
		if (rename(dir, kept) != 0 || mkdir(dir, 0700) != 0)
			fatal("keeping %s", dir);
		tap_diag("case %zu: %s; its files are in %s", c - 1, why, kept);
	}
	trace_close(&other);
	for (i = 0; i < MAX_FILES; i++)
		free(fs.f[i].b);
}

static int
remove_entry(const char *path, const struct stat *st, int flag,
    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void
make_dir(const char *path)
{
	if (mkdir(path, 0700) == -1)
		fatal("mkdir %s", path);
}

int
main(int argc, char **argv)
{
	static void (*const build[])(struct seed *) = { seed_tp_dp, seed_844,
	    seed_half };
	struct seed	 seeds[3];
	struct trace	 ref;
	const size_t	 nseeds = sizeof seeds / sizeof seeds[0];
	size_t		 cases = DEFAULT_CASES, s, m, i;
	uint64_t	 seed = 0, state;
	char		 dir[512], sub[1024], err[TRACE_ERROR_SIZE];
	int		 verdict;

	if (argc > 1)
		cases = strtoul(argv[1], NULL, 10);
	if (argc > 2)
		seed = strtoull(argv[2], NULL, 0);
	/* Any seed, 0 included, gives a state of its own, never 0. */
	state = 0x9e3779b97f4a7c15ULL ^ seed * 0xbf58476d1ce4e5b9ULL;
	fuzz_seed(state != 0 ? state : 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((devnull = fopen("/dev/null", "w")) == NULL)
		fatal("/dev/null");
	if (mkdtemp(top) == NULL)
		fatal("mkdtemp");
	tap_plan((int)(2 * nseeds + nseeds * NMUTATIONS + 1));
	tap_diag("inputs in %s; %zu cases per seed and mutation, random "
	    "seed %" PRIu64, top, cases, seed);
	snprintf(sub, sizeof sub, "%s/case", top);
	make_dir(sub);
	snprintf(sub, sizeof sub, "%s/case-ref", top);
	make_dir(sub);

	memset(seeds, 0, sizeof seeds);
	for (s = 0; s < nseeds; s++) {
		build[s](&seeds[s]);
		snprintf(dir, sizeof dir, "%s/seed%zu", top, s);
		make_dir(dir);
		snprintf(sub, sizeof sub, "%s/parallel", dir);
		make_dir(sub);
		write_files(sub, &seeds[s].trace);
		snprintf(sub, sizeof sub, "%s/reference", dir);
		make_dir(sub);
		write_files(sub, &seeds[s].reference);
		if (!tap_ok(trace_open(&ref, sub, err, sizeof err) == 0,
		    "seed %s: the reference opens", seeds[s].name))
			fatalx("%s", err);
		snprintf(sub, sizeof sub, "%s/parallel", dir);
		tap_ok(check_case(sub, &ref, false, &verdict) == NULL &&
		    verdict == seeds[s].correct, "seed %s: compare says %s",
		    seeds[s].name, seeds[s].correct ? "right" : "wrong");
		trace_close(&ref);
	}
	for (s = 0; s < nseeds; s++)
		for (m = 0; m < NMUTATIONS; m++) {
			snprintf(dir, sizeof dir, "%s/seed%zu", top, s);
			fuzz(&seeds[s], &mutations[m], cases, dir);
		}

	/* Mutations that never open, or never fail, would test little. */
	tap_diag("%d mutated traces opened (%d compared, %d refused by "
	    "compare), %d refused", opened, compared, mismatched, refused);
	tap_ok(compared > (int)cases && refused > (int)cases,
	    "mutations are both compared and refused, many times each");

	for (s = 0; s < nseeds; s++)
		for (i = 0; i < MAX_FILES; i++) {
			free(seeds[s].trace.f[i].b);
			free(seeds[s].reference.f[i].b);
		}
	fclose(devnull);
	if (!keep && nftw(top, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
		tap_diag("could not remove %s", top);
	return tap_done();
}
