/*
 * libFuzzer harness of the framework profile reader (framework.c, with
 * config.c's reader of a profile's settings): the input is a profile
 * file, frameworks/NAME.yaml, read by fw_read as fw_all reads each file
 * of $GRADAUDIT_FRAMEWORKS.
 *
 * The contract checked: fw_read returns 0 or -1; on -1 it printed exactly
 * one line "gradaudit: FILE:LINE:COL: ..." and left the framework empty;
 * on 0 nothing, and a framework that keeps gradaudit-frameworks(5)'s
 * promises: a name, from 1 to 256 profiles in strictly increasing release
 * order, each with a label and where it was read, and every setting a
 * profile holds cited.  Each profile is then laid over a small
 * configuration, as a config's `framework:` lays it, and the result
 * checked against the constraints (whatever they say), and its range of
 * versions printed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "config/config.h"
#include "config/constraints.h"
#include "config/framework.h"
#include "config/load.h"
#include "harness.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const char base_text[] =
    "name: base\n"
    "mesh: {dp: 2, pp: 2, tp: 2, ep: 2}\n"
    "model:\n  layers: 4\n  moe: {experts: 4, top_k: 2}\n"
    "training: {sequence_parallel: true}\n";

static struct config_list	 base;
static const char		*path;

static void
check_framework(const struct framework *fw, const char *err)
{
	const struct fw_profile	*p;
	struct config		 c;
	char			 buf[CFG_WHY_SIZE];
	int			 i, k;

	if (fw->name == NULL || fw->file == NULL || strcmp(fw->file, path) != 0)
		harness_fail(err, "the framework lacks its name or file");
	if (fw->nprofiles < 1 || fw->nprofiles > 256)
		harness_fail(err, "%d profiles", fw->nprofiles);
	for (i = 0; i < fw->nprofiles; i++) {
		p = &fw->profiles[i];
		if (p->framework != fw || p->label == NULL ||
		    p->read_at == NULL)
			harness_fail(err, "profile %d lacks its framework, "
			    "label or read_at", i);
		if (i > 0 && fw_version_cmp(&fw->profiles[i - 1].since,
		    &p->since) >= 0)
			harness_fail(err, "profile %d is not later than the "
			    "one before", i);
		for (k = 0; k < KEY__COUNT; k++)
			if (keyset_has(&p->settings.given, k) &&
			    cfg_key_is_setting(k) && p->source[k] == NULL)
				harness_fail(err, "profile %s sets %s without "
				    "a source", p->label, cfg_key_path(k));
		fw_profile_range(p, buf, sizeof buf);
		cfg_copy(&c, &base.v[0]);
		c.profile = p;
		c.from_profile = cfg_merge_settings(&c, &p->settings, true);
		(void)cfg_check_constraints(&c, buf, sizeof buf);
		cfg_free(&c);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct framework	 fw;
	char			*err, *want;
	size_t			 len, n;
	int			 rc;

	if (path == NULL) {
		path = harness_path("fuzz.yaml");
		if (cfg_load_quietly(NULL, "base", base_text, sizeof base_text - 1,
		    &base) != 0)
			harness_fail(base.error, "the base config does not "
			    "load");
	}
	harness_write(path, data, size);
	harness_capture_begin();
	rc = fw_read(path, &fw);
	err = harness_capture_end(&len, NULL, NULL);
	xasprintf(&want, "gradaudit: %s", path);
	if (rc == -1) {
		if (fw.name != NULL || fw.profiles != NULL ||
		    fw.nprofiles != 0 || fw.file != NULL)
			harness_fail(err, "a failed read left a framework");
		if (!harness_lines(err, len, want, &n) || n != 1 ||
		    !harness_at_place(err, path))
			harness_fail(err, "not one line \"%s:LINE:COL: ...\"",
			    path);
	} else if (rc == 0) {
		if (len != 0)
			harness_fail(err, "fw_read returned 0 with a message");
		check_framework(&fw, err);
		fw_free(&fw);
	} else
		harness_fail(err, "fw_read returned %d", rc);
	free(want);
	free(err);
	return 0;
}
