/*
 * The rows of a tied weight that no update reaches, from the one place
 * that decides them (model/stale.c), into an audit: the rows per rank for
 * the reports, and one finding of kind stale-rows worded by the
 * catalogue.  The symbolic audit calls it; the numeric one, whose values
 * cannot show rows that are never updated (every gradient is right),
 * asks stale_rows_find() itself for its verdict, so that both verdicts
 * hold the same fact.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/stale.h"
#include "symbolic/audit.h"
#include "symbolic/findings.h"
#include "symbolic/stalerows.h"

/*
 * The ranks a finding's message names; the others it counts.  The
 * message is cut at 1,024 bytes (findings.c): 128 HSDP replicas each
 * with a short shard filled it with ranks and cut off the explanation
 * after them.  The report's list of stale rows still has every rank.
 */
#define STALE_RANKS_NAMED	4

/*
 * "embedding.weight's rows [24,29) of 29 on rank 3", more ranks as
 * "... on rank 2 and [20,29) on rank 5", past STALE_RANKS_NAMED as
 * "... on rank 15 and those of 124 more ranks".
 */
static void
rows_text(const struct model *m, const struct stale_rows *v, size_t n,
    char *buf, size_t len)
{
	const struct param *p = &m->params[v[0].param];
	size_t	 i, off, named = n > STALE_RANKS_NAMED ? STALE_RANKS_NAMED : n;

	off = (size_t)snprintf(buf, len, "%s's rows [%lld,%lld) of %lld on "
	    "rank %d", p->name, (long long)v[0].row_lo, (long long)v[0].row_hi,
	    (long long)p->shape[0], v[0].rank);
	for (i = 1; i < named && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off,
		    "%s[%lld,%lld) on rank %d", i + 1 == n ? " and " : ", ",
		    (long long)v[i].row_lo, (long long)v[i].row_hi, v[i].rank);
	if (named < n && off < len)
		snprintf(buf + off, len - off, " and those of %zu more rank%s",
		    n - named, n - named == 1 ? "" : "s");
}

size_t
sym_stale_rows(const struct model *m, const struct layout *lay,
    struct audit *a)
{
	struct stale_rows	*v;
	struct finding_words	 w;
	struct fact_args	 args;
	struct finding		*f, *nf;
	char			 rows[1024];
	size_t			 n, i;

	a->stale_rows = NULL;
	a->nstale_rows = 0;
	if ((n = stale_rows_find(m, lay, &v)) == 0)
		return 0;
	a->stale_rows = arena_alloc(&a->arena, n * sizeof *a->stale_rows);
	a->nstale_rows = n;
	/* Right gradients, rows never updated: the step is still wrong. */
	a->correct = false;
	for (i = 0; i < n; i++) {
		a->stale_rows[i].param = arena_strdup(&a->arena,
		    m->params[v[i].param].name);
		a->stale_rows[i].rank = v[i].rank;
		a->stale_rows[i].lo = v[i].lo;
		a->stale_rows[i].hi = v[i].hi;
		a->stale_rows[i].row_lo = v[i].row_lo;
		a->stale_rows[i].row_hi = v[i].row_hi;
	}
	rows_text(m, v, n, rows, sizeof rows);
	memset(&args, 0, sizeof args);
	args.mesh = &m->mesh;
	args.cause = KEY__COUNT;
	args.rows = rows;
	finding_tell(FACT_STALE_ROWS, &args, &a->arena, &w);

	nf = arena_alloc(&a->arena, (a->nfindings + 1) * sizeof *nf);
	if (a->nfindings > 0)
		memcpy(nf, a->findings, a->nfindings * sizeof *nf);
	a->findings = nf;
	f = &a->findings[a->nfindings++];
	memset(f, 0, sizeof *f);
	f->kind = w.kind;
	f->cause = w.cause;
	f->param = a->stale_rows[0].param;
	f->params = arena_alloc(&a->arena, sizeof *f->params);
	f->params[0] = f->param;
	f->nparams = 1;
	f->ranks = arena_alloc(&a->arena, n * sizeof *f->ranks);
	for (i = 0; i < n; i++)
		f->ranks[i] = v[i].rank;
	f->nranks = n;
	f->op = w.op;
	f->dim = w.dim;
	f->message = w.message;
	f->fix = w.fix;
	free(v);
	return n;
}
