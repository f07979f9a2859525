/*
 * gradaudit frameworks [NAME[@VERSION]]: the framework profiles, with the
 * versions each covers and the code it was read from.  Naming a profile
 * (or -v) also lists every setting it applies and the commit each setting
 * was read from, which is what an audit under that profile assumes.
 */
#include <stdio.h>
#include <string.h>

#include "base/exitcode.h"
#include "base/json.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "cmd/options.h"
#include "config/framework.h"

static void
print_settings(FILE *fp, const struct fw_profile *p)
{
	char	 value[64];
	int	 k;

	for (k = 0; k < KEY__COUNT; k++) {
		if (!keyset_has(&p->settings.given, k))
			continue;
		cfg_key_value(&p->settings, k, value, sizeof(value));
		fprintf(fp, "      %s: %s\n        read from %s\n",
		    cfg_key_path(k), value, p->source[k]);
	}
}

static void
print_text(FILE *fp, const struct framework *fws, int n,
    const struct fw_profile *only, bool verbose)
{
	char	 range[64], window[160];
	int	 i, j;

	for (i = 0; i < n; i++) {
		const struct framework *fw = &fws[i];

		if (only != NULL && only->framework != fw)
			continue;
		fprintf(fp, "%s (%s)\n", fw->name, fw->file);
		if (fw->description != NULL)
			fprintf(fp, "  %s\n", fw->description);
		for (j = 0; j < fw->nprofiles; j++) {
			const struct fw_profile *p = &fw->profiles[j];

			if (only != NULL && only != p)
				continue;
			fw_profile_range(p, range, sizeof(range));
			fprintf(fp, "  %s@%s: profile %s, read at %s\n",
			    fw->name, range, p->label, p->read_at);
			if (fw_profile_window(p, window, sizeof(window)))
				fprintf(fp, "    window: %s\n", window);
			if (p->summary != NULL)
				fprintf(fp, "    %s\n", p->summary);
			if (verbose || only != NULL)
				print_settings(fp, p);
		}
	}
}

static void
print_json(FILE *fp, const struct framework *fws, int n,
    const struct fw_profile *only)
{
	struct json	 j;
	char		 buf[64], window[160];
	int		 i, k, q;

	jsonw_init(&j, fp, false);
	jsonw_begin_array(&j);
	for (i = 0; i < n; i++) {
		const struct framework *fw = &fws[i];

		if (only != NULL && only->framework != fw)
			continue;
		jsonw_begin_object(&j);
		jsonw_key_string(&j, "framework", fw->name);
		jsonw_key_string(&j, "file", fw->file);
		if (fw->description != NULL)
			jsonw_key_string(&j, "description", fw->description);
		fw_version_format(&fw->latest, buf, sizeof(buf));
		jsonw_key_string(&j, "latest", buf);
		jsonw_key(&j, "profiles");
		jsonw_begin_array(&j);
		for (q = 0; q < fw->nprofiles; q++) {
			const struct fw_profile *p = &fw->profiles[q];

			if (only != NULL && only != p)
				continue;
			jsonw_begin_object(&j);
			jsonw_key_string(&j, "label", p->label);
			fw_version_format(&p->since, buf, sizeof(buf));
			jsonw_key_string(&j, "since", buf);
			fw_profile_range(p, buf, sizeof(buf));
			jsonw_key_string(&j, "versions", buf);
			jsonw_key_string(&j, "read_at", p->read_at);
			if (fw_profile_window(p, window, sizeof(window))) {
				jsonw_key_string(&j, "commit", p->commit);
				jsonw_key_string(&j, "window", window);
			}
			if (p->summary != NULL)
				jsonw_key_string(&j, "summary", p->summary);
			jsonw_key(&j, "settings");
			jsonw_begin_array(&j);
			for (k = 0; k < KEY__COUNT; k++) {
				if (!keyset_has(&p->settings.given, k))
					continue;
				jsonw_begin_object(&j);
				jsonw_key_string(&j, "key", cfg_key_path(k));
				cfg_key_value(&p->settings, k, buf,
				    sizeof(buf));
				jsonw_key_string(&j, "value", buf);
				jsonw_key_string(&j, "source", p->source[k]);
				jsonw_end_object(&j);
			}
			jsonw_end_array(&j);
			jsonw_end_object(&j);
		}
		jsonw_end_array(&j);
		jsonw_end_object(&j);
	}
	jsonw_end_array(&j);
	fputc('\n', fp);
}

static int
cmd_frameworks_exec(struct options *o)
{
	const struct framework	*fws;
	const struct fw_profile	*only = NULL;
	char			 err[1024], newest[160];
	bool			 newer;
	int			 n;

	if ((n = fw_all(o->frameworks, &fws)) < 0)
		return EXIT_USAGE;
	if (o->nargs == 1) {
		if ((only = fw_resolve(o->frameworks, o->args[0], &newer,
		    err, sizeof(err))) == NULL) {
			fprintf(stderr, "%s: frameworks: %s\n", progname, err);
			return EXIT_USAGE;
		}
		if (newer) {
			fw_newest_read(only, o->args[0], newest,
			    sizeof(newest));
			fprintf(stderr, "%s: frameworks: %s is newer than %s: "
			    "showing the newest profile\n", progname,
			    o->args[0], newest);
		}
	}
	if (o->format == FORMAT_JSON)
		print_json(stdout, fws, n, only);
	else
		print_text(stdout, fws, n, only, o->verbose);
	return EXIT_OK;
}

const struct command cmd_frameworks_entry = {
	.name = "frameworks",
	.operands = "[NAME@VERSION]",
	.summary = "list the framework profiles and the code each was "
	    "read from",
	.scope = SCOPE_FRAMEWORKS,
	.min_args = 0,
	.max_args = 1,
	.exec = cmd_frameworks_exec
};
