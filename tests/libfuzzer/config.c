/*
 * libFuzzer harness of the configuration loader (config.c): the input is
 * a configuration file.  Each input is loaded three ways, as the commands
 * load one: by cfg_load from its file, by cfg_load_quietly from memory
 * (import's way), and by cfg_load with --set overrides, some of which
 * name a framework profile (the profiles of the source tree are applied).
 *
 * The contract checked, besides no crash, leak or undefined behaviour:
 * cfg_load returns 0 or -1; on -1 it printed one "gradaudit: FILE:LINE:COL:
 * ..." or "gradaudit: --set ..." line, after at most the notes that a framework
 * release is newer than its profiles, and left the caller's list as it
 * was; on 0 it printed nothing but such notes and appended configs that
 * name their file and pass cfg_check_constraints.  The quiet load agrees:
 * the same result, the same number of configs, and as its error the line
 * the loud one printed.  The --set of the third load are the input's own
 * when it has lines "#set KEY=VALUE" (a YAML comment: the file loads as
 * it would without them), else a few chosen by its hash.  Each config loaded is written back as YAML, the
 * keys it wrote with the values cfg_key_value gives ("as it would be
 * written in YAML"), and that must load as one config with the same
 * value for every key.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "config/constraints.h"
#include "config/framework.h"
#include "config/load.h"
#include "model/planwrite.h"
#include "harness.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* The --set sets an input is loaded with, chosen by its hash. */
static const struct cfg_override overrides[][2] = {
	{ { "framework", "megatron-core@0.13.0" }, { NULL, NULL } },
	{ { "framework", "megatron-core@0.5.0" }, { "mesh.dp", "2" } },
	{ { "framework", "torchtitan@0.2.2" }, { NULL, NULL } },
	{ { "framework", "megatron-core@main" }, { "model.moe", "{}" } },
	{ { "framework", "megatron-core@99.0.0" }, { NULL, NULL } },
	{ { "mesh.tp", "2" }, { "model.moe.experts", "8" } },
	{ { "sync.router_grad", "none" }, { "mesh.etp", "2" } },
	{ { "training", "{bucket_elems: 40}" }, { "loss.normalize_by", "rank" } },
};
#define NOVERRIDES	(sizeof overrides / sizeof overrides[0])

static const char base_text[] =
    "name: base\nmesh: {dp: 2, pp: 2}\nmodel: {layers: 4}\n";

static struct config_list	 list;	/* base, then what each input adds */
static const char		*path;
/* The profiles every input's framework: resolves in, read once. */
static struct fw_registry	*frameworks;

static void	check_round_trip(const struct config *);

/* The note apply_framework prints for a release newer than its profiles. */
static bool
is_newer_note(const char *line, size_t len)
{
	static const char	 note[] = " is newer than ";
	size_t			 i;

	for (i = 0; i + sizeof note - 1 <= len; i++)
		if (memcmp(line + i, note, sizeof note - 1) == 0)
			return true;
	return false;
}

/*
 * A warning about a key without effect (load.c's warn_no_effect), which a
 * file that loads may print, one a line, at a place of the file or a --set.
 */
static bool
is_no_effect_warning(const char *line, size_t len)
{
	static const char	 w[] = ": warning: ", tail[] = " has no effect "
				     "without ";
	size_t			 i;
	bool			 seen = false;

	for (i = 0; i + sizeof w - 1 <= len; i++)
		if (memcmp(line + i, w, sizeof w - 1) == 0) {
			seen = true;
			break;
		}
	for (; seen && i + sizeof tail - 1 <= len; i++)
		if (memcmp(line + i, tail, sizeof tail - 1) == 0)
			return true;
	return false;
}

/*
 * Check what one loud cfg_load did; *last is set to the start of its
 * last line of stderr.
 */
static void
check_loud(int rc, const char *err, size_t len, const char **last)
{
	const char	*line, *nl;
	char		 why[CFG_WHY_SIZE];
	size_t		 n, i, llen, warnings = 0;

	if (!harness_lines(err, len, "gradaudit: ", &n))
		harness_fail(err, "stderr is not lines of \"gradaudit: \"");
	*last = NULL;
	for (line = err; line < err + len; line = nl + 1) {
		nl = strchr(line, '\n');
		llen = (size_t)(nl - line);
		*last = line;
		if (is_no_effect_warning(line, llen)) {
			warnings++;
			if (!harness_at_place(line, path) &&
			    strncmp(line, "gradaudit: --set ", 17) != 0)
				harness_fail(err, "a warning names neither a "
				    "place of the file nor a --set");
			continue;
		}
		if (nl + 1 < err + len && !is_newer_note(line, llen))
			harness_fail(err, "a line before the last is no note "
			    "of a newer release");
	}
	/* Warnings come once the whole file has loaded, not before its error. */
	if (rc == -1 && warnings > 0)
		harness_fail(err, "cfg_load failed and warned too");
	if (rc == -1) {
		if (list.n != 1)
			harness_fail(err, "a failed cfg_load changed the list");
		if (n == 0)
			harness_fail(err, "cfg_load returned -1 without a "
			    "message");
		if (!harness_at_place(*last, path) &&
		    strncmp(*last, "gradaudit: --set ", 17) != 0)
			harness_fail(err, "the message names neither a place "
			    "of the file nor a --set");
		return;
	}
	if (rc != 0)
		harness_fail(err, "cfg_load returned %d", rc);
	if (n > 0 && !is_newer_note(*last, strlen(*last)) &&
	    !is_no_effect_warning(*last, strlen(*last)))
		harness_fail(err, "cfg_load returned 0 with a message");
	if (list.n < 2)
		harness_fail(err, "cfg_load returned 0 and added no config");
	for (i = 1; i < list.n; i++) {
		if (list.v[i].name == NULL || list.v[i].file == NULL ||
		    strcmp(list.v[i].file, path) != 0)
			harness_fail(NULL, "config %zu lacks its name or file",
			    i);
		if (cfg_check_constraints(&list.v[i], why, sizeof why) != NULL)
			harness_fail(NULL, "config %zu fails its constraints: "
			    "%s", i, why);
		check_round_trip(&list.v[i]);
	}
}

/* Whether k is a key of the section prefix (len bytes; "" the top). */
static bool
is_under(enum cfg_key k, const char *prefix, size_t len)
{
	const char	*path = cfg_key_path(k);

	if (len == 0)
		return strchr(path, '.') == NULL;
	return strncmp(path, prefix, len) == 0 && path[len] == '.' &&
	    strchr(path + len + 1, '.') == NULL;
}

/* Whether c wrote a key under section k. */
static bool
written_below(const struct config *c, enum cfg_key k)
{
	const char	*path = cfg_key_path(k);
	size_t		 len = strlen(path);
	int		 j;

	for (j = 0; j < KEY__COUNT; j++)
		if (keyset_has(&c->given, j) &&
		    strncmp(cfg_key_path(j), path, len) == 0 &&
		    cfg_key_path(j)[len] == '.')
			return true;
	return false;
}

/* A string value in YAML's double quotes, escaped as YAML reads it back. */
static void
put_quoted(FILE *fp, const char *s)
{
	fputc('"', fp);
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(fp, "\\%c", *s);
		else if ((unsigned char)*s < 0x20 || *s == 0x7f)
			fprintf(fp, "\\x%02x", (unsigned char)*s);
		else
			fputc(*s, fp);
	}
	fputc('"', fp);
}

/* The keys c wrote in section prefix (len bytes; "" the top). */
static void
put_keys(FILE *fp, const struct config *c, const char *prefix, size_t len,
    int depth)
{
	const char	*path;
	char		 value[8192];
	int		 k;

	for (k = 0; k < KEY__COUNT; k++) {
		path = cfg_key_path(k);
		if (!is_under(k, prefix, len) || (!keyset_has(&c->given, k) &&
		    !written_below(c, k)))
			continue;
		fprintf(fp, "%*s%s:", 2 * depth, "", len > 0 ?
		    path + len + 1 : path);
		/*
		 * The plan as explain --plan writes the config's own steps:
		 * its value is a one-line summary, which reads as no plan.
		 */
		if (k == KEY_PLAN) {
			int	i;

			fputc('\n', fp);
			for (i = 0; i < c->nplan; i++)
				planwrite_item(fp, &c->plan[i]);
			continue;
		}
		if (cfg_key_is_section(k)) {
			/* A section written empty ("moe: {}") stays so. */
			if (!written_below(c, k))
				fputs(" {}\n", fp);
			else {
				fputc('\n', fp);
				put_keys(fp, c, path, strlen(path), depth + 1);
			}
			continue;
		}
		cfg_key_value(c, k, value, sizeof value);
		fputc(' ', fp);
		if (cfg_key_words(k) == NULL &&
		    cfg_key_value_type(k) == CFG_VALUE_STRING)
			put_quoted(fp, value);
		else
			fputs(value, fp);
		fputc('\n', fp);
	}
}

/*
 * Write c back as the YAML of the keys it wrote, load that, and compare
 * every key's value.
 */
static void
check_round_trip(const struct config *c)
{
	struct config_list	 back;
	FILE			*fp;
	char			*text, a[8192], b[8192];
	size_t			 len;
	int			 k;

	if ((fp = open_memstream(&text, &len)) == NULL)
		harness_fail(NULL, "open_memstream");
	put_keys(fp, c, "", 0, 0);
	if (fclose(fp) != 0)
		harness_fail(NULL, "open_memstream");
	memset(&back, 0, sizeof back);
	if (cfg_load_quietly(frameworks, "written back", text, len,
	    &back) != 0 || back.n != 1)
		harness_fail(text, "config %s written back does not load as "
		    "one: %s", c->name, back.error != NULL ? back.error : "");
	for (k = 0; k < KEY__COUNT; k++) {
		if (k == KEY_NAME && !keyset_has(&c->given, k))
			continue;
		if (cfg_key_is_active(c, k) != cfg_key_is_active(&back.v[0], k))
			harness_fail(text, "written back, %s is %sactive",
			    cfg_key_path(k), cfg_key_is_active(c, k) ? "in" :
			    "");
		if (!cfg_key_is_active(c, k) || cfg_key_is_section(k))
			continue;
		cfg_key_value(c, k, a, sizeof a);
		cfg_key_value(&back.v[0], k, b, sizeof b);
		if (strcmp(a, b) != 0)
			harness_fail(text, "written back, %s is %s, not %s",
			    cfg_key_path(k), b, a);
	}
	config_list_free(&back);
	free(text);
}

/*
 * The overrides of the input's "#set KEY=VALUE" lines, at most
 * MAX_SETS, into ovr (their strings into *buf); their number.
 */
#define MAX_SETS	4
static size_t
input_sets(const uint8_t *data, size_t size, struct cfg_override *ovr,
    char **buf)
{
	char	*s, *line, *eq, *next;
	size_t	 n = 0;

	s = *buf = xmalloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	for (line = s; line != NULL && n < MAX_SETS; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if (strncmp(line, "#set ", 5) != 0 ||
		    (eq = strchr(line + 5, '=')) == NULL)
			continue;
		*eq = '\0';
		ovr[n].key = line + 5;
		ovr[n++].value = eq + 1;
	}
	return n;
}

/* Drop the configs an input added, after copying each once. */
static void
trim_list(void)
{
	struct config	 c;
	size_t		 i;

	for (i = 1; i < list.n; i++) {
		cfg_copy(&c, &list.v[i]);
		cfg_free(&c);
		cfg_free(&list.v[i]);
	}
	list.n = 1;
}

static void
init(void)
{
	size_t	 len;
	char	*err;

	path = harness_path("fuzz.yaml");
	frameworks = fw_registry_open();
	harness_write(path, base_text, sizeof base_text - 1);
	harness_capture_begin();
	if (cfg_load(frameworks, path, NULL, 0, &list) != 0 || list.n != 1) {
		err = harness_capture_end(&len, NULL, NULL);
		harness_fail(err, "the base config does not load");
	}
	free(harness_capture_end(&len, NULL, NULL));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct cfg_override *ovr;
	struct cfg_override	 sets[MAX_SETS];
	char			*setbuf;
	struct config_list	 quiet;
	const char		*last;
	char			*err;
	size_t			 len, loud_n, novr;
	int			 rc, qrc;

	if (path == NULL)
		init();
	harness_write(path, data, size);

	harness_capture_begin();
	rc = cfg_load(frameworks, path, NULL, 0, &list);
	err = harness_capture_end(&len, NULL, NULL);
	check_loud(rc, err, len, &last);
	loud_n = list.n - 1;
	trim_list();

	/* The quiet load of the same bytes, named as the file is. */
	memset(&quiet, 0, sizeof quiet);
	harness_capture_begin();
	qrc = cfg_load_quietly(frameworks, path, (const char *)data, size,
	    &quiet);
	free(harness_capture_end(&len, NULL, NULL));
	if (len != 0)
		harness_fail(err, "cfg_load_quietly printed something");
	if (qrc != rc)
		harness_fail(err, "cfg_load returned %d, cfg_load_quietly %d",
		    rc, qrc);
	if (rc == 0 && quiet.n != loud_n)
		harness_fail(err, "cfg_load loaded %zu configs, "
		    "cfg_load_quietly %zu", loud_n, quiet.n);
	if (rc == -1 && (quiet.error == NULL ||
	    strncmp(last + 11, quiet.error, strlen(quiet.error)) != 0 ||
	    last[11 + strlen(quiet.error)] != '\n'))
		harness_fail(err, "cfg_load_quietly kept another error: %s",
		    quiet.error != NULL ? quiet.error : "(none)");
	config_list_free(&quiet);
	free(err);

	/* With --set, a framework's profile among them. */
	if ((novr = input_sets(data, size, sets, &setbuf)) > 0)
		ovr = sets;
	else {
		ovr = overrides[harness_hash(data, size) % NOVERRIDES];
		novr = ovr[1].key != NULL ? 2 : 1;
	}
	harness_capture_begin();
	rc = cfg_load(frameworks, path, ovr, novr, &list);
	err = harness_capture_end(&len, NULL, NULL);
	check_loud(rc, err, len, &last);
	trim_list();
	free(setbuf);
	free(err);
	return 0;
}
