/*
 * Unit tests for the text and JSON reports and the grid (TAP).  The audit
 * is built by hand as the Megatron-LM #844 report describes it (dp=2,
 * pp=2, tied embedding, distributed optimizer, embedding all-reduce after
 * the dp reduce-scatter): owners hold g3+(g0+g1)/2 and g0+(g2+g3)/2
 * instead of (g0+g1+g2+g3)/2.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L		/* open_memstream, popen */
#endif

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/json.h"
#include "config/config.h"
#include "model/mesh.h"
#include "report/grid.h"
#include "report/json-report.h"
#include "report/report.h"
#include "report/text-report.h"
#include "symbolic/atom.h"
#include "symbolic/audit.h"
#include "symbolic/lincomb.h"
#include "tap.h"

static void
ok_contains(const char *text, const char *needle, const char *name)
{
	if (!tap_ok(strstr(text, needle) != NULL, "%s", name))
		tap_diag("missing: %s", needle);
}

static void
ok_lacks(const char *text, const char *needle, const char *name)
{
	if (!tap_ok(strstr(text, needle) == NULL, "%s", name))
		tap_diag("unexpected: %s", needle);
}

static struct config	 megatron_config;

static const struct lincomb *
atoms_sum(struct arena *ar, const uint32_t *atoms, size_t n,
    struct rational scale)
{
	const struct lincomb	*x = &lincomb_zero;
	size_t			 i;

	for (i = 0; i < n; i++)
		x = lc_add(ar, x, lc_atom(ar, atoms[i]));
	return lc_scale(ar, x, scale);
}

/*
 * After the reduce-scatter and the embedding all-reduce, per the report:
 * pp0: g0+(g2+g3)/2, g3+(g0+g1)/2; pp1: the same.  Ranks 1 (pp0 dp1) and
 * 2 (pp1 dp0) own the embedding's shard and use it.
 */
static void
build_megatron(struct audit *a, bool numeric)
{
	static const uint32_t	 g01[] = { 0, 1 }, g23[] = { 2, 3 };
	static const uint32_t	 all[] = { 0, 1, 2, 3 };
	static const int	 wrong_ranks[] = { 1, 2 };
	static const char	*params[] = { "embedding.weight" };
	struct arena		*ar = &a->arena;
	struct param_result	*p;
	struct finding		*f;
	const struct lincomb	*half = NULL, *expected, *v[2];
	struct rational		 h = q_make(1, 2);
	struct coord		 co;
	int			 r;

	memset(a, 0, sizeof(*a));
	arena_init(ar);
	megatron_config.file = "testdata/megatron-844.yaml";
	megatron_config.name = "megatron-844";
	a->config = &megatron_config;
	mesh_init(&a->mesh, 2, 1, 2, 1, 1, 1);
	atom_space_init(&a->atoms);
	a->atoms.mesh = a->mesh;

	expected = atoms_sum(ar, all, 4, h);
	half = atoms_sum(ar, g23, 2, h);
	v[0] = lc_add(ar, lc_atom(ar, 0), half);	/* g0+(g2+g3)/2 */
	half = atoms_sum(ar, g01, 2, h);
	v[1] = lc_add(ar, lc_atom(ar, 3), half);	/* g3+(g0+g1)/2 */

	p = a->params = arena_alloc(ar, sizeof(*p));
	a->nparams = 1;
	p->name = "embedding.weight";
	p->tied_with = "output.weight";
	p->elems = 256;
	p->has_hash = numeric;
	p->reference_hash = UINT64_C(0xfedcba9876543210);
	p->cells = arena_alloc(ar, 4 * sizeof(*p->cells));
	p->ncells = 4;
	for (r = 0; r < 4; r++) {
		struct cell *c = &p->cells[r];

		c->rank = r;
		c->lo = 0;
		c->hi = 256;
		c->used = r == 1 || r == 2;
		c->ok = false;
		mesh_coord_of(&a->mesh, r, &co);
		c->value = v[co.dp];
		c->expected = expected;
		c->has_hash = numeric;
		c->hash = UINT64_C(0x0123456789abcdef) + ((uint64_t)r << 32);
		/* Each region's own reference, unlike the whole one. */
		c->reference_hash = UINT64_C(0xa5a5a5a5a5a5a500) + (uint64_t)r;
	}

	f = a->findings = arena_alloc(ar, sizeof(*f));
	a->nfindings = 1;
	f->kind = FINDING_WRONG_ORDER;
	f->param = "embedding.weight";
	f->params = params;
	f->nparams = 1;
	f->ranks = (int *)wrong_ranks;
	f->nranks = 2;
	f->op = "embedding all-reduce";
	f->dim = "pp";
	f->message = "the dp reduce-scatter ran before the embedding "
	    "all-reduce";
	f->fix = "set sync.embedding_grad: before-dp";

	a->numeric = numeric;
	a->arith = ARITH_EXACT;
	a->procs = 4;
}

static char *
render_text_opt(const struct audit *a, const struct report_options *opt)
{
	char	*buf = NULL;
	size_t	 len;
	FILE	*fp = open_memstream(&buf, &len);

	report_text(fp, a, opt);
	fclose(fp);
	return buf;
}

static char *
render_text(const struct audit *a, bool verbose, bool quiet)
{
	struct report_options	 opt = { .verbose = verbose, .quiet = quiet };
	char			*buf = NULL;
	size_t			 len;
	FILE			*fp = open_memstream(&buf, &len);

	report_text(fp, a, &opt);
	fclose(fp);
	return buf;
}

static char *
render_json(const struct audit *a, bool expand)
{
	struct report_options	 opt = { .expand = expand };
	struct json		 j;
	char			*buf = NULL;
	size_t			 len;
	FILE			*fp = open_memstream(&buf, &len);

	jsonw_init(&j, fp, false);
	report_json(&j, a, &opt);
	fclose(fp);
	return buf;
}

static void
test_text_symbolic(void)
{
	struct audit	 a;
	char		*s;

	build_megatron(&a, false);
	tap_ok(audit_wrong_ranks(&a) == 2,
	    "audit_wrong_ranks counts ranks 1, 2");
	tap_ok(audit_wrong_params(&a) == 1, "audit_wrong_params is 1");
	s = render_text(&a, false, false);
	ok_contains(s, "config: testdata/megatron-844.yaml (megatron-844)\n",
	    "header names the config");
	ok_contains(s, "mesh: dp=2 pp=2 tp=1 ep=1 etp=1 edp=2 world=4\n",
	    "header gives the mesh");
	ok_contains(s, "arithmetic: symbolic only\n", "symbolic arithmetic");
	ok_contains(s, "embedding.weight (tied with output.weight): "
	    "inconsistent, wrong on ranks 1, 2\n", "title line");
	ok_contains(s,
	    "pp \\ dp  dp0                dp1\n"
	    "-------  -----------------  -----------------\n"
	    "pp0      -                  g3+(g0+g1)/2 DIFF\n"
	    "pp1      g0+(g2+g3)/2 DIFF  -\n",
	    "diff table like the Megatron report, expressions in the cells");
	ok_contains(s, "rank 1 [0,256): g3+(g0+g1)/2  expected "
	    "(g0+g1+g2+g3)/2\n", "rank 1 expression");
	ok_contains(s, "rank 2 [0,256): g0+(g2+g3)/2  expected "
	    "(g0+g1+g2+g3)/2\n", "rank 2 expression");
	ok_lacks(s, "rank 0 [", "no expression for a rank that uses nothing");
	ok_contains(s, "finding: wrong-order: embedding.weight (ranks 1, 2): "
	    "the dp reduce-scatter ran before the embedding all-reduce "
	    "[op: embedding all-reduce, dim: pp]\n"
	    "  fix: set sync.embedding_grad: before-dp\n", "finding and fix");
	ok_contains(s, "\n1 of 1 parameter wrong on 2 of 4 ranks\n",
	    "summary line");
	tap_ok(strstr(s, "finding: ") != NULL && strstr(s, "pp \\ dp") !=
	    NULL && strstr(s, "finding: ") < strstr(s, "pp \\ dp"),
	    "the findings come before the tables");
	tap_ok(strlen(s) > 40 && strcmp(s + strlen(s) - 40,
	    "\n1 of 1 parameter wrong on 2 of 4 ranks\n") == 0,
	    "the summary line comes last");
	ok_lacks(s, "consistent and correct", "no count of correct "
	    "parameters when there is none");
	ok_lacks(s, "\033[", "no colour unless asked");
	free(s);

	s = render_text(&a, false, true);
	tap_ok_str_eq(s, "1 of 1 parameter wrong on 2 of 4 ranks\n",
	    "quiet prints the summary line only");
	free(s);
	audit_free(&a);
}

/* Occurrences of needle in text. */
static size_t
count(const char *text, const char *needle)
{
	size_t		 n = 0;

	while ((text = strstr(text, needle)) != NULL) {
		n++;
		text += strlen(needle);
	}
	return n;
}

/*
 * The count line of correct parameters, and the summary: the count only
 * when some parameter is wrong, plural nouns for any number but one.
 */
static void
test_counts(void)
{
	struct audit		 a;
	struct param_result	*p;
	char			*s;
	size_t			 i;

	build_megatron(&a, true);
	p = arena_alloc(&a.arena, 3 * sizeof(*p));
	memset(p, 0, 3 * sizeof(*p));
	p[0] = a.params[0];
	p[1].name = "final_norm.weight";
	p[2].name = "layers.0.norm1.weight";
	p[1].consistent = p[1].correct = true;
	p[2].consistent = p[2].correct = true;
	a.params = p;
	a.nparams = 3;
	s = render_text(&a, false, false);
	ok_contains(s, "\n2 parameters consistent and correct\n"
	    "1 of 3 parameters wrong on 2 of 4 ranks\n",
	    "count of the correct parameters, then the summary");
	free(s);

	for (i = 0; i < p[0].ncells; i++)
		p[0].cells[i].ok = true;
	p[0].consistent = p[0].correct = true;
	a.consistent = a.correct = true;
	a.nfindings = 0;
	s = render_text(&a, false, false);
	tap_ok_str_eq(strstr(s, "\n\n") != NULL ? strstr(s, "\n\n") : s,
	    "\n\nall 3 parameters consistent and correct on 4 ranks\n",
	    "all correct: no count line, the summary alone");
	free(s);
	a.mesh.world = 1;
	s = render_text(&a, false, true);
	tap_ok_str_eq(s, "all 3 parameters consistent and correct on 1 rank\n",
	    "all correct on one rank");
	free(s);
	audit_free(&a);
}

static void
test_text_numeric(void)
{
	struct audit	 a;
	char		*s;
	size_t		 i;

	build_megatron(&a, true);
	s = render_text(&a, false, false);
	ok_contains(s, "arithmetic: exact GF(2^61-1), 4 processes\n",
	    "exact arithmetic header");
	ok_contains(s, "pp0      -              01234568 DIFF\n",
	    "short hash before DIFF");
	ok_contains(s, "pp1      01234569 DIFF  -\n", "second row");
	free(s);

	/* The same audit, repaired. */
	for (i = 0; i < a.params[0].ncells; i++)
		a.params[0].cells[i].ok = true;
	a.params[0].consistent = a.params[0].correct = true;
	a.consistent = a.correct = true;
	a.nfindings = 0;
	s = render_text(&a, false, false);
	tap_ok_str_eq(strstr(s, "\n\n") != NULL ? strstr(s, "\n\n") : s,
	    "\n\n1 parameter consistent and correct on 4 ranks\n",
	    "a correct audit: the summary line alone after the header");
	ok_lacks(s, "DIFF", "no table for a correct parameter");
	free(s);
	s = render_text(&a, true, false);
	ok_contains(s, "\n\nok  embedding.weight\n"
	    "1 parameter consistent and correct on 4 ranks\n",
	    "-v lists correct params, then the summary");
	free(s);
	a.mesh.world = 1;
	s = render_text(&a, false, true);
	tap_ok_str_eq(s, "1 parameter consistent and correct on 1 rank\n",
	    "one rank is singular");
	free(s);
	a.mesh.world = 4;
	audit_free(&a);
}

/* Is the text valid JSON?  -1 when python3 is not there to tell. */
static int
jsonw_valid(const char *text)
{
	FILE	*p;
	int	 status;

	if (system("command -v python3 >/dev/null 2>&1") != 0)
		return -1;
	p = popen("python3 -c 'import json, sys; json.load(sys.stdin)'", "w");
	if (p == NULL)
		return -1;
	fputs(text, p);
	status = pclose(p);
	return status == 0;
}

static void
test_json(void)
{
	struct audit	 a;
	char		*s, want[128];
	int		 valid, r;

	build_megatron(&a, false);
	s = render_json(&a, true);
	ok_contains(s, "\"tool\": \"gradaudit\"", "tool");
	ok_contains(s, "\"config\": \"testdata/megatron-844.yaml\"", "config");
	ok_contains(s, "\"dp\": 2", "mesh dp");
	ok_contains(s, "\"tied_with\": \"output.weight\"", "tied_with");
	ok_contains(s, "\"expr\": \"g3+(g0+g1)/2\"", "expr of rank 1");
	ok_contains(s, "\"expected_expr\": \"(g0+g1+g2+g3)/2\"",
	    "expected_expr");
	ok_contains(s, "\"terms\": {", "terms object");
	ok_contains(s, "\"g0\": \"1/2\"", "coefficient as a fraction");
	ok_contains(s, "\"g3\": \"1\"", "unit coefficient");
	ok_contains(s, "\"ok\": null", "ok is null on unused cells");
	ok_contains(s, "\"ok\": false", "ok is false on wrong used cells");
	ok_contains(s, "\"kind\": \"wrong-order\"", "finding kind");
	ok_lacks(s, "\"numerics\"", "no numerics for a symbolic audit");
	ok_lacks(s, "\"hash\"", "no hashes for a symbolic audit");
	ok_lacks(s, "\"reference_hash\"",
	    "no reference hashes for a symbolic audit");
	valid = jsonw_valid(s);
	if (valid < 0)
		tap_skip("no python3", "JSON well-formed");
	else
		tap_ok(valid, "JSON well-formed");
	free(s);
	audit_free(&a);

	build_megatron(&a, true);
	s = render_json(&a, true);
	ok_contains(s, "\"numerics\": {\n    \"arith\": \"exact\",\n"
	    "    \"procs\": 4,\n    \"correct\": false\n  }",
	    "numerics object, with the numeric verdict");
	ok_contains(s, "\"hash\": \"0123456889abcdef\"", "16-digit hash");
	ok_contains(s, "\"reference_hash\": \"fedcba9876543210\"",
	    "reference hash");
	tap_ok(count(s, "\"reference_hash\": ") == 1 + a.params[0].ncells,
	    "a reference hash for the parameter and every cell");
	for (r = 0; r < 4; r++) {
		snprintf(want, sizeof(want), "\"hash\": \"%016llx\",\n"
		    "          \"reference_hash\": \"%016llx\",\n",
		    (unsigned long long)a.params[0].cells[r].hash,
		    (unsigned long long)a.params[0].cells[r].reference_hash);
		ok_contains(s, want, "cell hash next to its region's reference");
	}
	free(s);
	audit_free(&a);
}

/*
 * A rank's own atom reads "self" plus the rest of its name, and two ranks
 * share a grouped cell only when that rest is the same: here dp 4 with two
 * micro-batches and a multi-token prediction layer, rank 1 holding its
 * micro-batch 0 of the main loss, rank 2 its micro-batch 1, rank 3 its
 * micro-batch 1 of the MTP loss, rank 0 like rank 2 (issue 24).
 */
static void
test_self_classes(void)
{
	static const int	 source[4] = { 0, 0, 0, 1 }, mb[4] = { 1, 0, 1, 1 };
	struct audit		 a;
	struct param_result	*p;
	char			*s;
	int			 r;

	memset(&a, 0, sizeof(a));
	arena_init(&a.arena);
	mesh_init(&a.mesh, 4, 1, 1, 1, 1, 1);
	atom_space_init(&a.atoms);
	a.atoms.mesh = a.mesh;
	a.atoms.micro_batches = 2;
	a.atoms.sources = 2;
	a.atoms.mtp_source = 1;
	a.atoms.mtp = 1;
	p = a.params = arena_alloc(&a.arena, sizeof(*p));
	a.nparams = 1;
	p->name = "layers.0.norm1.weight";
	p->elems = 8;
	p->cells = arena_alloc(&a.arena, 4 * sizeof(*p->cells));
	p->ncells = 4;
	for (r = 0; r < 4; r++) {
		struct cell *c = &p->cells[r];

		c->rank = r;
		c->lo = 0;
		c->hi = 8;
		c->used = true;
		c->ok = true;
		c->value = c->expected = lc_atom(&a.arena,
		    atom_id(&a.atoms, r, source[r], mb[r]));
	}
	s = render_json(&a, false);
	ok_contains(s, "\"ranks\": \"0,2\"", "self atoms: ranks 0 and 2 share a cell");
	ok_contains(s, "\"ranks\": \"1\"",
	    "self atoms: another micro-batch, another cell");
	ok_contains(s, "\"ranks\": \"3\"",
	    "self atoms: another loss, another cell");
	ok_contains(s, "\"of\": \"selfm0\"", "self atoms: selfm0");
	ok_contains(s, "\"of\": \"selft1m1\"", "self atoms: selft1m1");
	free(s);
	audit_free(&a);
}

/* A 64-rank average: its expression is cut, its ranks become a range. */
static void
test_long_expression(void)
{
	struct audit		 a;
	struct param_result	*p;
	uint32_t		 atoms[64];
	const struct lincomb	*expected;
	char			*s, *line, *end, *cut;
	int			 r;

	memset(&a, 0, sizeof(a));
	arena_init(&a.arena);
	mesh_init(&a.mesh, 64, 1, 1, 1, 1, 1);
	atom_space_init(&a.atoms);
	a.atoms.mesh = a.mesh;
	for (r = 0; r < 64; r++)
		atoms[r] = (uint32_t)r;
	expected = atoms_sum(&a.arena, atoms, 64, q_make(1, 64));
	p = a.params = arena_alloc(&a.arena, sizeof(*p));
	a.nparams = 1;
	p->name = "final_norm.weight";
	p->consistent = true;
	p->cells = arena_alloc(&a.arena, 64 * sizeof(*p->cells));
	p->ncells = 64;
	for (r = 0; r < 64; r++) {
		p->cells[r].rank = r;
		p->cells[r].hi = 8;
		p->cells[r].used = true;
		p->cells[r].value = lc_scale(&a.arena, expected, q_make(64, 1));
		p->cells[r].expected = expected;
	}
	s = render_text(&a, true, false);
	ok_contains(s,
	    "final_norm.weight: consistent but wrong on ranks 0-63\n",
	    "consecutive ranks print as a range");
	line = strstr(s, "rank 5 [0,8): ");
	tap_ok(line != NULL, "a line per wrong rank with -v");
	if (line != NULL) {
		end = strchr(line, '\n');
		tap_ok(end != NULL && end - line < 300,
		    "long expressions are short");
		cut = strstr(line, "sum_all()  expected sum_all()/64\n");
		tap_ok(cut != NULL && cut < end,
		    "a sum over the world by its name, not 64 atoms cut");
	} else {
		tap_ok(0, "long expressions are short");
		tap_ok(0, "a sum over the world by its name, not 64 atoms cut");
	}
	free(s);
	/*
	 * Without -v, one line for the 64 ranks holding the same thing: the
	 * 4,096-rank report of issue 10 had 16 lines of one rank each and
	 * "... and 160 more".
	 */
	s = render_text(&a, false, false);
	ok_contains(s, "\nranks 0-63 [0,8): sum_all()  expected sum_all()/64\n"
	    "\n", "without -v, a line for all the ranks holding one value");
	ok_lacks(s, "more wrong region", "and nothing left out");
	free(s);
	s = render_json(&a, true);
	ok_contains(s, "+g62+g63)/64\"", "--expand: JSON expressions are whole");
	free(s);
	/*
	 * Grouped (the default): the 64 ranks hold one value, written once,
	 * and a sum over the whole world is one term (issue 10: a 4,096-rank
	 * report listed every atom of every cell).
	 */
	s = render_json(&a, false);
	tap_ok(count(s, "\"nranks\"") == 1, "64 equal cells are one object");
	ok_contains(s, "\"ranks\": \"0-63\",\n", "ranks as a range");
	ok_contains(s, "\"nranks\": 64,", "with their number");
	ok_contains(s, "\"expr\": \"sum_all()\"", "a world sum by name");
	ok_contains(s, "\"expected_expr\": \"sum_all()/64\"",
	    "and its average");
	ok_contains(s, "\"coef\": \"1/64\",\n"
	    "              \"sum\": \"dp\",\n"
	    "              \"of\": \"\",\n"
	    "              \"n\": 64\n", "the term of a world sum");
	ok_lacks(s, "\"g5\"", "no atom listed");
	tap_ok(strlen(s) < 2000, "grouped JSON is small (%zu bytes)",
	    strlen(s));
	free(s);
	audit_free(&a);
}

/*
 * Text that scales (issue 10).  On dp=8 pp=4 tp=2, the ranks of stages 1
 * and 2 at dp 3 to 5 hold twice their dp group's average: the table folds
 * to three columns and three rows, one line tells the wrong value of all
 * twelve ranks, and -v unfolds both.
 */
static void
test_text_folding(void)
{
	struct audit		 a;
	struct param_result	*p;
	struct report_options	 opt = { .rank = 0 };
	uint32_t		 members[8];
	int			 r, k, group[8];
	char			*s;
	const struct lincomb	*avg;
	struct coord		 co;

	memset(&a, 0, sizeof(a));
	arena_init(&a.arena);
	mesh_init(&a.mesh, 8, 1, 4, 2, 1, 1);
	atom_space_init(&a.atoms);
	a.atoms.mesh = a.mesh;
	p = a.params = arena_alloc(&a.arena, sizeof(*p));
	a.nparams = 1;
	p->name = "layers.0.fc1.weight";
	p->cells = arena_alloc(&a.arena, 64 * sizeof(*p->cells));
	p->ncells = 64;
	p->correct = false;
	p->consistent = false;
	for (r = 0; r < 64; r++) {
		struct cell *c = &p->cells[r];

		c->rank = r;
		mesh_group(&a.mesh, GROUP_DP, r, group);
		for (k = 0; k < 8; k++)
			members[k] = (uint32_t)group[k];
		avg = atoms_sum(&a.arena, members, 8, q_make(1, 8));
		c->hi = 8;
		c->used = true;
		c->expected = avg;
		mesh_coord_of(&a.mesh, r, &co);
		c->ok = !(co.pp >= 1 && co.pp <= 2 && co.dp >= 3 &&
		    co.dp <= 5);
		c->value = c->ok ? avg : lc_scale(&a.arena, avg, q_make(2, 1));
	}
	s = render_text(&a, false, false);
	ok_contains(s,
	    "pp tp \\ dp   dp0-2  dp3-5  dp6-7\n"
	    "-----------  -----  -----  -----\n"
	    "pp0 tp0-1    ok     ok     ok\n"
	    "pp1-2 tp0-1  ok     DIFF   ok\n"
	    "pp3 tp0-1    ok     ok     ok\n",
	    "identical columns and rows fold");
	ok_contains(s, "\nranks 22-27, 38-43 [0,8): sum_dp(self)/4  expected "
	    "sum_dp(self)/8\n", "one line for the twelve wrong ranks");
	free(s);
	s = render_text(&a, true, false);
	ok_contains(s, "pp tp \\ dp  dp0  dp1  dp2  dp3   dp4   dp5   dp6  dp7\n",
	    "-v: every column");
	ok_contains(s, "\npp1 tp1     ok   ok   ok   DIFF  DIFF  DIFF  ok   ok\n",
	    "-v: every row");
	ok_contains(s, "\nrank 22 [0,8): (g16+g18+g20+g22+g24+g26+g28+g30)/4  "
	    "expected (g16+g18+g20+g22+g24+g26+g28+g30)/8\n",
	    "-v: a line per rank, its atoms");
	free(s);
	opt.select_rank = true;
	opt.rank = 40;
	s = render_text_opt(&a, &opt);
	ok_contains(s, "\nrank 40 [0,8): ", "--rank: that rank's line");
	ok_lacks(s, "ranks 22-27, 38-43 [", "--rank: not the others'");
	free(s);
	opt.rank = 0;
	s = render_text_opt(&a, &opt);
	ok_lacks(s, "layers.0.fc1.weight", "--rank of a right rank: no table");
	free(s);
	opt.select_rank = false;
	opt.param = "layers.0.fc1.weight";
	s = render_text_opt(&a, &opt);
	ok_contains(s, "layers.0.fc1.weight: inconsistent", "--param: its table");
	free(s);
	/* A name the config lacks is the caller's usage error (output.c). */
	opt.param = "nonesuch";
	s = render_text_opt(&a, &opt);
	tap_ok(strstr(s, "inconsistent") == NULL && strstr(s, "no parameter") ==
	    NULL, "--param of no parameter: no table, and no line for it");
	free(s);
	audit_free(&a);
}

/*
 * A long wrong value: what is missing against the expected value, not a
 * cut list of atoms.  On dp=64, g63 never arrives.
 */
static void
test_text_missing(void)
{
	struct audit		 a;
	struct param_result	*p;
	uint32_t		 atoms[64];
	const struct lincomb	*expected, *value;
	char			*s;
	int			 r;

	memset(&a, 0, sizeof(a));
	arena_init(&a.arena);
	mesh_init(&a.mesh, 64, 1, 1, 1, 1, 1);
	atom_space_init(&a.atoms);
	a.atoms.mesh = a.mesh;
	for (r = 0; r < 64; r++)
		atoms[r] = (uint32_t)r;
	expected = atoms_sum(&a.arena, atoms, 64, q_make(1, 64));
	value = atoms_sum(&a.arena, atoms, 63, q_make(1, 64));
	p = a.params = arena_alloc(&a.arena, sizeof(*p));
	a.nparams = 1;
	p->name = "final_norm.weight";
	p->consistent = true;
	p->cells = arena_alloc(&a.arena, 64 * sizeof(*p->cells));
	p->ncells = 64;
	for (r = 0; r < 64; r++) {
		p->cells[r].rank = r;
		p->cells[r].hi = 8;
		p->cells[r].used = true;
		p->cells[r].value = value;
		p->cells[r].expected = expected;
	}
	s = render_text(&a, false, false);
	ok_contains(s, "\nranks 0-63 [0,8): ", "one line for the 64 ranks");
	ok_contains(s, "  expected sum_all()/64: missing 1 of the 64 terms of "
	    "sum_all()\n", "the term missing from the expected sum");
	free(s);
	p->cells[0].value = lc_add(&a.arena, value, lc_scale(&a.arena,
	    lc_atom(&a.arena, 0), q_make(1, 64)));
	s = render_text(&a, true, false);
	ok_contains(s, "rank 0 [0,8): ", "-v: rank 0");
	ok_contains(s, "missing 1 of the 64 terms of sum_all(), wrong "
	    "coefficient on 1 of the 64 terms of sum_all()\n",
	    "a coefficient off is said apart");
	free(s);
	audit_free(&a);
}

/*
 * Grouped JSON relative to the rank: on dp=4 pp=2 tp=2, every rank holds
 * the average over its own dp group (used) and, in a second region, its
 * own contribution (unused, as a distributed optimizer's other shards).
 * Each region is then one object for all 16 ranks, written "self".
 */
static void
test_json_grouped(void)
{
	struct audit		 a;
	struct param_result	*p;
	const struct lincomb	*avg[16];
	uint32_t		 members[4];
	int			 r, k, group[4];
	char			*s;

	memset(&a, 0, sizeof(a));
	arena_init(&a.arena);
	mesh_init(&a.mesh, 4, 1, 2, 2, 1, 1);
	atom_space_init(&a.atoms);
	a.atoms.mesh = a.mesh;
	p = a.params = arena_alloc(&a.arena, sizeof(*p));
	a.nparams = 1;
	p->name = "layers.0.fc1.weight";
	p->consistent = p->correct = true;
	p->cells = arena_alloc(&a.arena, 32 * sizeof(*p->cells));
	p->ncells = 32;
	for (r = 0; r < 16; r++) {
		mesh_group(&a.mesh, GROUP_DP, r, group);
		for (k = 0; k < 4; k++)
			members[k] = (uint32_t)group[k];
		avg[r] = atoms_sum(&a.arena, members, 4, q_make(1, 4));
	}
	for (r = 0; r < 32; r++) {
		struct cell *c = &p->cells[r];

		c->rank = r / 2;
		c->lo = r % 2 == 0 ? 0 : 8;
		c->hi = c->lo + 8;
		c->used = r % 2 == 0;
		c->ok = true;
		c->value = c->used ? avg[c->rank] : lc_scale(&a.arena,
		    lc_atom(&a.arena, (uint32_t)c->rank), q_make(1, 4));
		c->expected = avg[c->rank];
	}
	s = render_json(&a, false);
	tap_ok(count(s, "\"nranks\"") == 2, "two regions, two objects");
	tap_ok(count(s, "\"ranks\": \"0-15\",") == 2,
	    "each for every rank");
	ok_contains(s, "\"expr\": \"sum_dp(self)/4\"",
	    "the rank's own dp group");
	ok_contains(s, "\"expr\": \"self/4\"", "the rank's own atom");
	ok_contains(s, "\"sum\": \"dp\",\n"
	    "              \"of\": \"self\",\n"
	    "              \"n\": 4\n", "the term of an own-group sum");
	free(s);
	/* Absolute where a group is not the rank's own. */
	p->cells[0].value = avg[15];
	p->cells[0].ok = false;
	s = render_json(&a, false);
	ok_contains(s, "\"ranks\": \"0\",", "rank 0 apart");
	ok_contains(s, "\"ranks\": \"1-15\",", "from the others");
	ok_contains(s, "\"expr\": \"sum_dp(pp1,tp1)/4\"",
	    "another group by its coordinates");
	ok_contains(s, "\"of\": \"pp1 tp1\",", "in the terms too");
	free(s);
	audit_free(&a);
}

/*
 * Distributed optimizer: every rank has an owned and a non-owned region.
 * A rank's cell is DIFF when any region it uses is wrong.
 */
static void
test_regions(void)
{
	struct audit		 a;
	struct param_result	*p;
	struct cell		*c;
	const struct lincomb	*g0, *g1, *avg;
	char			*s;
	int			 i;

	memset(&a, 0, sizeof(a));
	arena_init(&a.arena);
	mesh_init(&a.mesh, 2, 1, 1, 1, 1, 1);
	atom_space_init(&a.atoms);
	a.atoms.mesh = a.mesh;
	g0 = lc_atom(&a.arena, 0);
	g1 = lc_atom(&a.arena, 1);
	avg = lc_scale(&a.arena, lc_add(&a.arena, g0, g1), q_make(1, 2));
	p = a.params = arena_alloc(&a.arena, sizeof(*p));
	a.nparams = 1;
	p->name = "layers.0.norm1.weight";
	p->consistent = true;
	c = p->cells = arena_alloc(&a.arena, 4 * sizeof(*c));
	p->ncells = 4;
	for (i = 0; i < 4; i++) {
		c[i].rank = i / 2;
		c[i].lo = i % 2 == 0 ? 0 : 4;
		c[i].hi = c[i].lo + 4;
		c[i].used = c[i].rank == i % 2;	/* rank r owns shard r */
		c[i].expected = avg;
		c[i].value = c[i].rank == 0 ? g0 : g1;
		c[i].ok = false;
	}
	c[0].value = avg;
	c[0].ok = true;
	s = render_text(&a, false, false);
	ok_contains(s, "pp \\ dp  dp0  dp1\n-------  ---  ----\n"
	    "pp0      ok   DIFF\n",
	    "regions: DIFF when a used region is wrong");
	ok_contains(s, "rank 1 [4,8): g1  expected (g0+g1)/2\n",
	    "regions: the wrong used region's expression");
	ok_lacks(s, "rank 1 [0,4)", "regions: unused region not listed");
	ok_contains(s, "1 of 1 parameter wrong on 1 of 2 ranks\n",
	    "regions: summary");
	free(s);
	audit_free(&a);
}

static char *
render_grid(const struct grid *g)
{
	char	*buf = NULL;
	size_t	 len;
	FILE	*fp = open_memstream(&buf, &len);

	grid_print(fp, g);
	fclose(fp);
	return buf;
}

static void
test_grid(void)
{
	struct grid	*g;
	char		*s;

	g = grid_new(3, 3, "pp \\ dp");
	grid_row_label(g, 0, "pp0");
	grid_row_label(g, 1, "pp1 tp1");
	grid_row_label(g, 2, "pp2");
	grid_col_label(g, 0, "dp0");
	grid_col_label(g, 1, "dp1");
	grid_col_label(g, 2, "dp2");
	grid_set(g, 0, 0, "g0+(g2+g3)/2");
	grid_set(g, 0, 1, "\033[31mDIFF\033[0m");
	grid_set(g, 1, 1, "x");
	grid_set(g, 1, 2, "ok");
	s = render_grid(g);
	tap_ok_str_eq(s,
	    "pp \\ dp  dp0           dp1   dp2\n"
	    "-------  ------------  ----  ---\n"
	    "pp0      g0+(g2+g3)/2  \033[31mDIFF\033[0m\n"
	    "pp1 tp1                x     ok\n"
	    "pp2\n", "grid columns sized first, colour takes no width");
	free(s);
	grid_drop_empty_rows(g);
	grid_set(g, 0, 0, NULL);
	s = render_grid(g);
	tap_ok_str_eq(s,
	    "pp \\ dp  dp0  dp1   dp2\n"
	    "-------  ---  ----  ---\n"
	    "pp0           \033[31mDIFF\033[0m\n"
	    "pp1 tp1       x     ok\n", "empty rows dropped, cells cleared");
	free(s);
	grid_free(g);
}

static void
test_positions(void)
{
	struct audit		 a;
	struct param_result	 dense, expert;
	struct cell		 c;
	struct grid		*g;
	char			 label[32], *s;
	int			 row, col, nrows, ncols, rank;

	memset(&a, 0, sizeof(a));
	memset(&dense, 0, sizeof(dense));
	memset(&expert, 0, sizeof(expert));
	expert.is_expert = true;
	/* dp=2 pp=2 tp=2 ep=2 etp=1: edp = 2. */
	mesh_init(&a.mesh, 2, 1, 2, 2, 2, 1);
	atom_space_init(&a.atoms);
	a.atoms.mesh = a.mesh;
	rank = mesh_rank_of(&a.mesh, 1, 1, 0);
	c.rank = rank;
	report_cell_position(&a, &dense, &c, &row, &col, &nrows, &ncols,
	    label, sizeof(label));
	tap_ok(row == 2 && col == 1 && nrows == 4 && ncols == 2 &&
	    strcmp(label, "pp1 tp0") == 0, "dense rows are (pp, tp)");
	report_cell_position(&a, &expert, &c, &row, &col, &nrows, &ncols,
	    label, sizeof(label));
	/* s = 2: etp 0, ep 0, edp 1. */
	tap_ok(row == 2 && col == 1 && nrows == 4 && ncols == 2 &&
	    strcmp(label, "pp1 ep0") == 0, "expert rows are (pp, ep)");
	g = report_param_grid(&a, &expert);
	s = render_grid(g);
	tap_ok_str_eq(s, "pp ep \\ edp  edp0  edp1\n"
	    "-----------  ----  ----\n"
	    "pp0 ep0\npp0 ep1\npp1 ep0\npp1 ep1\n", "expert grid labels");
	free(s);
	grid_free(g);
}

int
main(void)
{
	test_text_symbolic();
	test_text_numeric();
	test_counts();
	test_json();
	test_long_expression();
	test_self_classes();
	test_json_grouped();
	test_text_folding();
	test_text_missing();
	test_regions();
	test_grid();
	test_positions();
	return tap_done();
}
