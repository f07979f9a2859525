/*
 * The numeric step as a trace (tracewrite.h), in the layout of
 * gradaudit-trace(5): a directory of safetensors files, float64, and their
 * manifest.  Each rank's local tensor is a box of its logical parameter
 * (model_global_index says which elements it holds); its contribution of
 * a micro-batch is its atom of that micro-batch, the gradient of the
 * chunk's loss before the chunk's loss factor (what a hook sees in a
 * program that applies its loss factors after the backward); its finals
 * are the regions its optimizer uses (the audit's used cells), as a
 * distributed optimizer's shard is.  Expressions over such contributions
 * are the symbolic engine's, atom for atom.
 */
#define _POSIX_C_SOURCE 200809L		/* open_memstream */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json.h"
#include "base/xmalloc.h"
#include "model/model.h"
#include "numeric/numcheck.h"
#include "numeric/numvalue.h"
#include "numeric/tracewrite.h"
#include "symbolic/audit.h"

#define STEP_ID		"gradaudit-run"
#define MAX_DIMS	3

/* One tensor of a rank file: its values and what the metadata says. */
struct tensor_out {
	char		*key;
	const char	*param;
	const char	*kind;		/* "contrib" or "final" */
	int		 mb;		/* contributions: the micro-batch */
	int		 ndims;
	int64_t		 offset[MAX_DIMS], box[MAX_DIMS];
	int64_t		 lo, hi;	/* flat range of the box; lo < 0: whole */
	double		*v;
	int64_t		 n;
};

struct rank_file {
	struct tensor_out	*t;
	int			 n, cap;
};

static struct tensor_out *
tensor_new(struct rank_file *f)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 16;
		f->t = xreallocarray(f->t, (size_t)f->cap, sizeof(*f->t));
	}
	memset(&f->t[f->n], 0, sizeof(f->t[f->n]));
	f->t[f->n].lo = -1;
	return &f->t[f->n++];
}

static void
rank_file_free(struct rank_file *f)
{
	int	 i;

	for (i = 0; i < f->n; i++) {
		free(f->t[i].key);
		free(f->t[i].v);
	}
	free(f->t);
	memset(f, 0, sizeof(*f));
}

/*
 * The box of parameter p that rank r's local tensor is, in its local
 * order (row-major in the box); false when it is none, as a shard with
 * padding past the logical size would be.
 */
static bool
local_box(const struct model *m, const struct param *p, int r,
    int64_t offset[MAX_DIMS], int64_t box[MAX_DIMS])
{
	int64_t	 i, g, c[MAX_DIMS], hi[MAX_DIMS], x, n = 1;
	int	 d;

	for (d = 0; d < p->ndims; d++) {
		offset[d] = INT64_MAX;
		hi[d] = -1;
	}
	for (i = 0; i < p->local_elems; i++) {
		if ((g = model_global_index(m, p, r, i)) < 0 || g >= p->elems)
			return false;
		for (d = p->ndims - 1; d >= 0; d--) {
			c[d] = g % p->shape[d];
			g /= p->shape[d];
			if (c[d] < offset[d])
				offset[d] = c[d];
			if (c[d] > hi[d])
				hi[d] = c[d];
		}
	}
	for (d = 0; d < p->ndims; d++) {
		box[d] = hi[d] - offset[d] + 1;
		n *= box[d];
	}
	if (n != p->local_elems)
		return false;
	for (i = 0; i < p->local_elems; i++) {
		g = model_global_index(m, p, r, i);
		for (x = 0, d = 0; d < p->ndims; d++) {
			int64_t below = 1, e;

			for (e = d + 1; e < p->ndims; e++)
				below *= p->shape[e];
			x = x * box[d] + (g / below % p->shape[d] - offset[d]);
		}
		if (x != i)
			return false;
	}
	return true;
}

static int
logical_of(const struct model *m, const char *name)
{
	int	 lp;

	for (lp = 0; lp < m->nlogical; lp++)
		if (strcmp(m->logical[lp].name, name) == 0)
			return lp;
	return -1;
}

static void
json_dims(struct json *j, const char *key, const int64_t *v, int n)
{
	int	 i;

	jsonw_key(j, key);
	jsonw_begin_array(j);
	for (i = 0; i < n; i++)
		jsonw_int(j, v[i]);
	jsonw_end_array(j);
}

/* The audited parameters and their logical shapes. */
static void
json_params(struct json *j, const struct model *m, const struct audit *audit)
{
	size_t	 a;
	int	 lp;

	jsonw_key(j, "params");
	jsonw_begin_object(j);
	for (a = 0; a < audit->nparams; a++) {
		const struct param *p;

		if ((lp = logical_of(m, audit->params[a].name)) < 0)
			continue;
		p = &m->params[m->logical[lp].instance[0]];
		jsonw_key(j, m->logical[lp].name);
		jsonw_begin_object(j);
		json_dims(j, "shape", p->shape, p->ndims);
		jsonw_end_object(j);
	}
	jsonw_end_object(j);
}

static FILE *
open_or_die(const char *path, const char *mode)
{
	FILE	*fp;

	if ((fp = fopen(path, mode)) == NULL)
		fatal("%s", path);
	return fp;
}

static void
close_or_die(FILE *fp, const char *path)
{
	if (ferror(fp) || fclose(fp) != 0)
		fatal("%s", path);
}

/* One safetensors file: the header (with the metadata), then the data. */
static void
write_rank(const char *path, const struct model *m, const struct audit *audit,
    int rank, int world, const char *step, const char *mode, int K,
    const struct rank_file *f)
{
	struct json	 j;
	FILE		*fp, *mfp, *hfp;
	char		*meta = NULL, *head = NULL;
	size_t		 metalen = 0, headlen = 0, pad;
	uint64_t	 off = 0, len, bits;
	unsigned char	 le[8];
	int64_t		 k;
	int		 i, b;

	if ((mfp = open_memstream(&meta, &metalen)) == NULL)
		fatal("open_memstream");
	jsonw_init(&j, mfp, true);
	jsonw_begin_object(&j);
	jsonw_key_int(&j, "rank", rank);
	jsonw_key_int(&j, "world", world);
	jsonw_key_string(&j, "step", step);
	jsonw_key_string(&j, "mode", mode);
	jsonw_key_int(&j, "micro_batches", K);
	json_params(&j, m, audit);
	jsonw_key(&j, "tensors");
	jsonw_begin_object(&j);
	for (i = 0; i < f->n; i++) {
		const struct tensor_out *t = &f->t[i];

		jsonw_key(&j, t->key);
		jsonw_begin_object(&j);
		jsonw_key_string(&j, "param", t->param);
		jsonw_key_string(&j, "kind", t->kind);
		if (strcmp(t->kind, "contrib") == 0)
			jsonw_key_int(&j, "mb", t->mb);
		json_dims(&j, "offset", t->offset, t->ndims);
		json_dims(&j, "box", t->box, t->ndims);
		if (t->lo >= 0) {
			int64_t flat[2] = { t->lo, t->hi };

			json_dims(&j, "flat", flat, 2);
		}
		jsonw_end_object(&j);
	}
	jsonw_end_object(&j);
	jsonw_end_object(&j);
	fclose(mfp);

	if ((hfp = open_memstream(&head, &headlen)) == NULL)
		fatal("open_memstream");
	jsonw_init(&j, hfp, true);
	jsonw_begin_object(&j);
	for (i = 0; i < f->n; i++) {
		const struct tensor_out *t = &f->t[i];
		int64_t span[2] = { (int64_t)off, (int64_t)(off + 8 * t->n) };

		jsonw_key(&j, t->key);
		jsonw_begin_object(&j);
		jsonw_key_string(&j, "dtype", "F64");
		if (t->lo >= 0)
			json_dims(&j, "shape", &t->n, 1);
		else
			json_dims(&j, "shape", t->box, t->ndims);
		json_dims(&j, "data_offsets", span, 2);
		jsonw_end_object(&j);
		off += 8 * (uint64_t)t->n;
	}
	jsonw_key(&j, "__metadata__");
	jsonw_begin_object(&j);
	jsonw_key_string(&j, "gradaudit", meta);
	jsonw_end_object(&j);
	jsonw_end_object(&j);
	fclose(hfp);
	free(meta);

	/* The header padded with spaces to 8 bytes, as safetensors does. */
	pad = (8 - headlen % 8) % 8;
	len = headlen + pad;
	fp = open_or_die(path, "wb");
	for (b = 0; b < 8; b++)
		le[b] = (unsigned char)(len >> (8 * b));
	fwrite(le, 1, 8, fp);
	fwrite(head, 1, headlen, fp);
	for (; pad > 0; pad--)
		fputc(' ', fp);
	free(head);
	for (i = 0; i < f->n; i++)
		for (k = 0; k < f->t[i].n; k++) {
			memcpy(&bits, &f->t[i].v[k], 8);
			for (b = 0; b < 8; b++)
				le[b] = (unsigned char)(bits >> (8 * b));
			fwrite(le, 1, 8, fp);
		}
	close_or_die(fp, path);
}

static void
write_manifest(const char *dir, const char *mode, const char *step,
    const char *reference_of, int world, int K)
{
	struct json	 j;
	char		*path, name[32];
	FILE		*fp;
	int		 r;

	xasprintf(&path, "%s/manifest.json", dir);
	fp = open_or_die(path, "w");
	jsonw_init(&j, fp, false);
	jsonw_begin_object(&j);
	jsonw_key_string(&j, "format", "gradaudit-trace");
	jsonw_key_int(&j, "version", 1);
	jsonw_key_string(&j, "mode", mode);
	jsonw_key_string(&j, "step", step);
	if (reference_of != NULL)
		jsonw_key_string(&j, "reference_of", reference_of);
	jsonw_key_int(&j, "world", world);
	jsonw_key_int(&j, "micro_batches", K);
	jsonw_key_string(&j, "dtype", "float64");
	jsonw_key(&j, "files");
	jsonw_begin_array(&j);
	for (r = 0; r < world; r++) {
		snprintf(name, sizeof name, "rank-%d.safetensors", r);
		jsonw_string(&j, name);
	}
	jsonw_end_array(&j);
	jsonw_end_object(&j);
	fputc('\n', fp);
	close_or_die(fp, path);
	free(path);
}

static void
make_dir(const char *path)
{
	if (mkdir(path, 0777) != 0 && errno != EEXIST)
		fatal("%s", path);
}

/*
 * Rank r's tensors: a contribution per micro-batch and held instance, its
 * one atom of that micro-batch (a parameter with several atoms a chunk is
 * refused below: their sum would weigh each loss or source alike), and a
 * final per run of used cells.
 */
static int
rank_tensors(const struct model *m, const struct gathered *gv,
    const struct audit *audit, int r, struct rank_file *f, bool **covered,
    char *why, size_t len)
{
	const int	 K = m->loss.micro_batches;
	struct tensor_out *t;
	int64_t		 offset[MAX_DIMS], box[MAX_DIMS];
	int64_t		 e, i, lo, hi, boxn;
	size_t		 a, c;
	int		 lp, mb, d, piece;

	for (a = 0; a < audit->nparams; a++) {
		const struct param_result *pr = &audit->params[a];
		const struct param *p;
		int inst;

		if ((lp = logical_of(m, pr->name)) < 0)
			continue;
		inst = model_instance_on(m, m->logical[lp].instance[0], r);
		if (inst < 0 || gv->synced[r][inst] == NULL)
			continue;
		p = &m->params[inst];
		if (p->boundary >= 0) {
			snprintf(why, len, "%s has two atoms a chunk (a MoE "
			    "block boundary's)", p->name);
			return 1;
		}
		if (!local_box(m, p, r, offset, box)) {
			snprintf(why, len, "rank %d's %s is no box of the "
			    "parameter", r, p->name);
			return 1;
		}
		/*
		 * A chunk's atoms of several losses or sources enter the
		 * gradient at weights of their own (lossnorm.h): a trace
		 * has one contribution a micro-batch, which could not
		 * give them back.
		 */
		if (model_atoms_per_rank(m, p) != K) {
			snprintf(why, len, "%s has several atoms a chunk "
			    "(losses or sources)", p->name);
			return 1;
		}
		e = p->local_elems;
		for (mb = 0; mb < K; mb++) {
			t = tensor_new(f);
			xasprintf(&t->key, "contrib/%d/%s", mb, pr->name);
			t->param = pr->name;
			t->kind = "contrib";
			t->mb = mb;
			t->ndims = p->ndims;
			memcpy(t->offset, offset, sizeof(offset));
			memcpy(t->box, box, sizeof(box));
			t->n = e;
			t->v = xcalloc((size_t)e, sizeof(*t->v));
			for (i = 0; i < e; i++)
				t->v[i] = gv->atom[r][inst][mb * e + i].d;
		}
		for (boxn = 1, d = 0; d < p->ndims; d++)
			boxn *= box[d];
		/* The used cells, in order, merged where they touch. */
		piece = 0;
		for (c = 0; c < pr->ncells; c++) {
			if (pr->cells[c].rank != r || !pr->cells[c].used)
				continue;
			lo = pr->cells[c].lo;
			hi = pr->cells[c].hi;
			while (c + 1 < pr->ncells &&
			    pr->cells[c + 1].rank == r &&
			    pr->cells[c + 1].used && pr->cells[c + 1].lo == hi)
				hi = pr->cells[++c].hi;
			t = tensor_new(f);
			if (piece++ == 0)
				xasprintf(&t->key, "final/%s", pr->name);
			else
				xasprintf(&t->key, "final/%s#%d", pr->name,
				    piece);
			t->param = pr->name;
			t->kind = "final";
			t->ndims = p->ndims;
			memcpy(t->offset, offset, sizeof(offset));
			memcpy(t->box, box, sizeof(box));
			if (lo > 0 || hi < boxn) {
				t->lo = lo;
				t->hi = hi;
			}
			t->n = hi - lo;
			t->v = xcalloc((size_t)t->n, sizeof(*t->v));
			for (i = lo; i < hi; i++) {
				t->v[i - lo] = gv->synced[r][inst][i].d;
				covered[lp][model_global_index(m, p, r, i)] =
				    true;
			}
		}
	}
	return 0;
}

/* The reference's one rank: every audited parameter whole. */
static void
reference_tensors(const struct model *m, union num **ref,
    const struct audit *audit, struct rank_file *f)
{
	struct tensor_out *t;
	size_t		 a;
	int64_t		 i;
	int		 lp;

	for (a = 0; a < audit->nparams; a++) {
		const struct param *p;

		if ((lp = logical_of(m, audit->params[a].name)) < 0)
			continue;
		p = &m->params[m->logical[lp].instance[0]];
		t = tensor_new(f);
		xasprintf(&t->key, "final/%s", m->logical[lp].name);
		t->param = m->logical[lp].name;
		t->kind = "final";
		t->ndims = p->ndims;
		memcpy(t->box, p->shape, sizeof(t->box));
		t->n = p->elems;
		t->v = xcalloc((size_t)t->n, sizeof(*t->v));
		for (i = 0; i < t->n; i++)
			t->v[i] = ref[lp][i].d;
	}
}

int
trace_write_step(const char *dir, const struct model *m,
    const struct gathered *gv, union num **ref, const struct audit *audit,
    char *why, size_t len)
{
	const int	 K = m->loss.micro_batches, W = m->mesh.world;
	struct rank_file *files, rf = { 0 };
	bool		**covered;
	char		*sub, *path;
	size_t		 a;
	int64_t		 i, n;
	int		 r, lp, status = 0;

	files = xcalloc((size_t)W, sizeof(*files));
	covered = xcalloc((size_t)m->nlogical, sizeof(*covered));
	for (lp = 0; lp < m->nlogical; lp++)
		covered[lp] = xcalloc((size_t)m->params[m->logical[lp].
		    instance[0]].elems, sizeof(**covered));
	for (r = 0; r < W && status == 0; r++)
		status = rank_tensors(m, gv, audit, r, &files[r], covered, why,
		    len);
	/* A trace's finals hold every element (gradaudit-trace(5)). */
	for (a = 0; a < audit->nparams && status == 0; a++) {
		if ((lp = logical_of(m, audit->params[a].name)) < 0)
			continue;
		n = m->params[m->logical[lp].instance[0]].elems;
		for (i = 0; i < n && covered[lp][i]; i++)
			;
		if (i < n) {
			snprintf(why, len, "element %lld of %s is in no "
			    "rank's final", (long long)i,
			    audit->params[a].name);
			status = 1;
		}
	}
	if (status == 0) {
		make_dir(dir);
		xasprintf(&sub, "%s/parallel", dir);
		make_dir(sub);
		for (r = 0; r < W; r++) {
			xasprintf(&path, "%s/rank-%d.safetensors", sub, r);
			write_rank(path, m, audit, r, W, STEP_ID, "parallel", K,
			    &files[r]);
			free(path);
		}
		write_manifest(sub, "parallel", STEP_ID, NULL, W, K);
		free(sub);
		xasprintf(&sub, "%s/reference", dir);
		make_dir(sub);
		reference_tensors(m, ref, audit, &rf);
		xasprintf(&path, "%s/rank-0.safetensors", sub);
		write_rank(path, m, audit, 0, 1, "ref-" STEP_ID, "reference",
		    1, &rf);
		free(path);
		write_manifest(sub, "reference", "ref-" STEP_ID, STEP_ID, 1, 1);
		free(sub);
		rank_file_free(&rf);
	}
	for (r = 0; r < W; r++)
		rank_file_free(&files[r]);
	free(files);
	for (lp = 0; lp < m->nlogical; lp++)
		free(covered[lp]);
	free(covered);
	return status;
}
