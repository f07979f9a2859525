/*
 * libFuzzer harness of the baseline reader (baseline.c): the input is a
 * baseline file (--baseline FILE, gradaudit-baseline(5)), read with a
 * fixed today.
 *
 * The contract checked, as tests/fuzz-baseline.c checks it on its own
 * mutations: baseline_load returns 0 or -1; on -1 it printed exactly one
 * line "gradaudit: FILE:LINE:COL: ..." and left the baseline empty; on 0
 * nothing, and entries that keep the file's promises (a kind, a config,
 * at least one parameter glob, a reason of one line, a date or none,
 * where the entry is).  A baseline that loads is applied to an audit
 * with findings of every kind, and the baseline --write-baseline writes
 * of what it accepted must read back and accept the same findings with
 * the same reasons.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/xmalloc.h"
#include "harness.h"
#include "model/mesh.h"
#include "report/baseline.h"
#include "symbolic/audit.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define TODAY	"2026-06-15"
#define CONFIG	"fuzz \"q\" [x]*"

/* Parameters whose names hold glob characters, and one without any. */
static const char *const names[] = {
	"embedding.weight", "layers.0.mlp.weight", "w[0]*?\\odd",
	"layers.1.attn.qkv.weight",
};

static const char	*path, *draft_path;

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

static void
check_entries(const struct baseline *b)
{
	const struct baseline_entry *e;
	size_t	 i, k;

	for (i = 0; i < b->n; i++) {
		e = &b->entries[i];
		if ((unsigned)e->kind >= FINDING__COUNT)
			harness_fail(NULL, "entry %zu has no kind", i);
		if (e->config == NULL || *e->config == '\0')
			harness_fail(NULL, "entry %zu has no config", i);
		if (e->nparams == 0)
			harness_fail(NULL, "entry %zu has no glob", i);
		for (k = 0; k < e->nparams; k++)
			if (e->params[k] == NULL || *e->params[k] == '\0')
				harness_fail(NULL, "entry %zu has an empty "
				    "glob", i);
		if (e->reason == NULL || *e->reason == '\0' ||
		    strchr(e->reason, '\n') != NULL)
			harness_fail(NULL, "entry %zu's reason is not one "
			    "line", i);
		if (e->expires[0] != '\0' && (strlen(e->expires) != 10 ||
		    e->expired != (strcmp(e->expires, TODAY) <= 0)))
			harness_fail(NULL, "entry %zu's date or expiry is "
			    "wrong", i);
		if (e->expires[0] == '\0' && e->expired)
			harness_fail(NULL, "entry %zu expired without a date",
			    i);
		if (e->at == NULL || strncmp(e->at, path, strlen(path)) != 0)
			harness_fail(NULL, "entry %zu does not say where it "
			    "is", i);
	}
}

/*
 * Apply b, write the draft of what it accepted, read that back and apply
 * it to a fresh audit: the same findings must be accepted.
 */
static void
check_round_trip(struct baseline *b)
{
	struct audit		 a, again;
	struct baseline_draft	 d;
	struct baseline		 back;
	FILE			*fp;
	char			*text, *err;
	size_t			 i, len, errlen;

	make_audit(&a);
	baseline_apply(b, &a, CONFIG, "testdata/fuzz.yaml");
	for (i = 0; i < a.nfindings; i++)
		if (a.findings[i].accepted && a.findings[i].reason == NULL)
			harness_fail(NULL, "a finding accepted without a "
			    "reason");
	(void)audit_accepted_findings(&a);
	memset(&d, 0, sizeof(d));
	baseline_draft_add(&d, &a, CONFIG);
	if ((fp = open_memstream(&text, &len)) == NULL)
		harness_fail(NULL, "open_memstream");
	baseline_draft_write(fp, &d, TODAY);
	if (fclose(fp) != 0)
		harness_fail(NULL, "fclose");
	baseline_draft_free(&d);
	harness_write(draft_path, text, len);
	harness_capture_begin();
	if (baseline_load(&back, draft_path, TODAY) != 0) {
		err = harness_capture_end(&errlen, NULL, NULL);
		harness_fail(err, "the written baseline does not read back:\n"
		    "%s", text);
	}
	free(harness_capture_end(&errlen, NULL, NULL));
	free(text);
	make_audit(&again);
	baseline_apply(&back, &again, CONFIG, NULL);
	for (i = 0; i < a.nfindings; i++) {
		if (!again.findings[i].accepted)
			harness_fail(NULL, "the written baseline does not "
			    "accept finding %zu", i);
		if (a.findings[i].accepted &&
		    strcmp(again.findings[i].reason, a.findings[i].reason) != 0)
			harness_fail(NULL, "the written baseline changed "
			    "a reason");
	}
	if (again.nstale != 0)
		harness_fail(NULL, "the written baseline has a stale entry");
	baseline_free(&back);
	audit_free(&again);
	audit_free(&a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct baseline	 b;
	char		*err, *want;
	size_t		 len, n;
	int		 rc;

	if (path == NULL) {
		path = harness_path("baseline.yaml");
		draft_path = harness_path("draft.yaml");
	}
	harness_write(path, data, size);
	harness_capture_begin();
	rc = baseline_load(&b, path, TODAY);
	err = harness_capture_end(&len, NULL, NULL);
	xasprintf(&want, "gradaudit: %s", path);
	if (rc == -1) {
		if (b.n != 0 || b.entries != NULL || b.path != NULL)
			harness_fail(err, "a failed load left entries");
		if (!harness_lines(err, len, want, &n) || n != 1 ||
		    !harness_at_place(err, path))
			harness_fail(err, "not one line \"%s:LINE:COL: ...\"",
			    path);
	} else if (rc == 0) {
		if (len != 0)
			harness_fail(err, "baseline_load returned 0 with a "
			    "message");
		check_entries(&b);
		check_round_trip(&b);
		baseline_free(&b);
	} else
		harness_fail(err, "baseline_load returned %d", rc);
	free(want);
	free(err);
	return 0;
}
