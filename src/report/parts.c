/*
 * Pieces shared by the reports (parts.h): a parameter table's row axes,
 * rank lists, a finding's subject and acceptance, plurals, and the memory
 * streams the writers build lines in.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L		/* open_memstream */
#endif

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/text.h"
#include "base/xmalloc.h"
#include "config/config.h"
#include "config/framework.h"
#include "model/lossnorm.h"
#include "report/baseline.h"
#include "report/parts.h"
#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/lincomb.h"
#include "symbolic/meshsum.h"

/* Parameter names listed in one finding line before "and N more". */
#define FINDING_PARAMS_MAX	3

/*
 * The layout of a parameter's table (see report.h for the rule).  Rows are
 * a mixed-radix number over up to three axes, the first one always pp.
 */

static void
add_axis(struct row_axes *ax, const char *name, int size, bool always)
{
	if (!always && size <= 1)
		return;
	ax->name[ax->naxes] = name;
	ax->size[ax->naxes] = size > 0 ? size : 1;
	ax->naxes++;
}

void
rp_row_axes_of(const struct audit *a, const struct param_result *p,
    struct row_axes *ax)
{
	memset(ax, 0, sizeof(*ax));
	add_axis(ax, "pp", a->mesh.pp, true);
	if (p->is_expert) {
		add_axis(ax, "ep", a->mesh.ep, false);
		add_axis(ax, "etp", a->mesh.etp, false);
		ax->col_name = "edp";
		ax->ncols = a->mesh.edp;
	} else {
		add_axis(ax, "tp", a->mesh.tp, false);
		ax->col_name = "dp";
		ax->ncols = a->mesh.dp;
	}
	/*
	 * HSDP: the replicas are rows and the columns the shard group
	 * (dp_shard*cp, or efsdp for experts), in torchtitan's names.
	 */
	ax->col_div = ax->ncols;
	if (a->mesh.dp_replicate > 1 && ax->ncols >= a->mesh.dp_replicate) {
		add_axis(ax, "dp_replicate", a->mesh.dp_replicate, true);
		ax->ncols /= a->mesh.dp_replicate;
		ax->col_div = ax->ncols;
		ax->col_name = p->is_expert ? "efsdp" : "dp_shard";
	}
	if (ax->ncols < 1)
		ax->ncols = 1;
}

int
rp_coord_on_axis(const struct row_axes *ax, const struct param_result *p,
    const struct coord *c, const char *name)
{
	if (strcmp(name, "dp_replicate") == 0)
		return (p->is_expert ? c->edp : c->dp) / ax->col_div;
	if (strcmp(name, "pp") == 0)
		return c->pp;
	if (strcmp(name, "tp") == 0)
		return c->tp;
	if (strcmp(name, "ep") == 0)
		return c->ep;
	return c->etp;
}

int
rp_row_count(const struct row_axes *ax)
{
	int	 i, n = 1;

	for (i = 0; i < ax->naxes; i++)
		n *= ax->size[i];
	return n;
}

/* "pp1 tp0" for a row index: the digits of the mixed-radix number. */
void
rp_row_label(const struct row_axes *ax, int row, char *buf, size_t len)
{
	int	 digit[4], i;
	size_t	 off = 0;

	for (i = ax->naxes - 1; i >= 0; i--) {
		digit[i] = row % ax->size[i];
		row /= ax->size[i];
	}
	if (len > 0)
		buf[0] = '\0';
	for (i = 0; i < ax->naxes && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s%d",
		    i > 0 ? " " : "", ax->name[i], digit[i]);
}

/*
 * Pieces shared by the text report and the JUnit failure text.
 */

bool
rp_cell_wrong(const struct cell *c)
{
	return c->used && !c->ok;
}

/*
 * Ranks as a short list: runs of three or more consecutive ranks become
 * "a-b", so a stage of 512 wrong ranks takes one line ("ranks 0-511").
 */
void
rp_put_rank_list(FILE *fp, const int *ranks, size_t n)
{
	size_t	 i, j;

	fputs(n == 1 ? "rank " : "ranks ", fp);
	for (i = 0; i < n; i = j + 1) {
		for (j = i; j + 1 < n && ranks[j + 1] == ranks[j] + 1; j++)
			continue;
		if (i > 0)
			fputs(", ", fp);
		if (j - i >= 2)
			fprintf(fp, "%d-%d", ranks[i], ranks[j]);
		else if (j > i)
			fprintf(fp, "%d, %d", ranks[i], ranks[j]);
		else
			fprintf(fp, "%d", ranks[i]);
	}
}

/* "wrong-order: embedding.weight (ranks 1, 2)" */
void
rp_put_finding_subject(FILE *fp, const struct finding *f)
{
	size_t	 i, n = f->nparams;

	fprintf(fp, "%s: ", finding_kind_name(f->kind));
	if (n == 0)
		fputs(f->param != NULL ? f->param : "(no parameter)", fp);
	for (i = 0; i < n && i < FINDING_PARAMS_MAX; i++)
		fprintf(fp, "%s%s", i > 0 ? ", " : "", f->params[i]);
	if (n > FINDING_PARAMS_MAX)
		fprintf(fp, " and %zu more", n - FINDING_PARAMS_MAX);
	if (f->nranks > 0) {
		fputs(" (", fp);
		rp_put_rank_list(fp, f->ranks, f->nranks);
		putc(')', fp);
	}
}

/* The baseline entry that accepted it: "(accepted.yaml:3:3, until ...)". */
void
rp_put_acceptance(FILE *fp, const struct finding *f)
{
	fprintf(fp, ": %s (%s", f->reason, f->baseline_at);
	if (f->expires != NULL)
		fprintf(fp, ", expires %s", f->expires);
	putc(')', fp);
}

void
rp_put_finding(FILE *fp, const struct finding *f)
{
	rp_put_finding_subject(fp, f);
	fprintf(fp, ": %s", f->message != NULL ? f->message : "");
	if (f->op != NULL && f->dim != NULL)
		fprintf(fp, " [op: %s, dim: %s]", f->op, f->dim);
	else if (f->op != NULL)
		fprintf(fp, " [op: %s]", f->op);
	else if (f->dim != NULL)
		fprintf(fp, " [dim: %s]", f->dim);
	if (f->effect.kind != EFFECT_NONE) {
		char effect[128];

		effect_format(&f->effect, effect, sizeof effect);
		fprintf(fp, " (effect: %s)", effect);
	}
}

FILE *
rp_memstream(char **buf, size_t *len)
{
	FILE	*fp;

	if ((fp = open_memstream(buf, len)) == NULL)
		fatal("open_memstream");
	return fp;
}

char *
rp_memstream_close(FILE *fp, char **buf)
{
	if (fclose(fp) != 0)
		fatal("memory stream");
	return *buf;
}

/* The plural of the report's nouns: "1 rank", "2 ranks", "0 ranks". */
const char *
rp_plural(int64_t n)
{
	return n == 1 ? "" : "s";
}
