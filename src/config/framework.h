/*
 * Framework profiles: what a given release of a training framework really
 * does to gradients, as configuration settings read from its code.
 *
 * A profile file (frameworks/NAME.yaml, installed under
 * $(pkgdatadir)/frameworks) names one framework and lists its profiles in
 * release order.  Each profile applies from its `since:` version up to the
 * next profile's, and holds a mapping of configuration keys in the schema
 * of gradaudit.yaml(5) (training, sync, layout and model defaults), each
 * with the commit and code it was read from.  A profile starts from the
 * settings of the one before it, so the file reads as the framework's
 * history: what changed, when, and where.
 *
 * A config that says `framework: megatron-core@0.5.0` gets the settings of
 * the profile that version falls in, for every key it does not write
 * itself (config.c applies them); without `framework:` nothing is applied
 * and gradaudit audits the ideal synchronization, the `reference`.
 */
#ifndef GRADAUDIT_FRAMEWORK_H
#define GRADAUDIT_FRAMEWORK_H

#include <stdbool.h>
#include <stdio.h>

#include "config/config.h"

/* A release number: major.minor.patch; `main` sorts after every release. */
struct fw_version {
	int	major, minor, patch;
	bool	main;
	bool	pre;	/* a pre-release: 0.9.0rc1, 0.7.0.beta */
};

struct fw_profile {
	const struct framework	*framework;
	char			*label;		/* "core_v0.5.0" */
	char			*summary;	/* one line: what this era does */
	struct fw_version	 since;
	char			*read_at;	/* "core_v0.5.0 (0acc240)" */
	/*
	 * The settings, cumulative over the profiles before this one, in a
	 * config whose `given` bits say which keys the profile sets, and for
	 * each such key the commit and code it was read from.
	 */
	struct config		 settings;
	char			*source[KEY__COUNT];
};

struct framework {
	char			*name;		/* "megatron-core" */
	char			*file;		/* the profile file it came from */
	char			*description;
	struct fw_version	 latest;	/* newest release checked */
	struct fw_profile	*profiles;	/* in release order */
	int			 nprofiles;
};

/*
 * The directory profile files are read from: $GRADAUDIT_FRAMEWORKS when
 * set, else the source tree's frameworks/ when the program runs from its
 * build tree, else the installed $(pkgdatadir)/frameworks.
 */
const char	*fw_dir(void);

/*
 * Every framework of fw_dir(), loaded once per process (and freed at exit).
 * Returns the number of frameworks, or -1 after printing a diagnostic
 * (file:line:col) for a profile file that does not load.
 */
int		 fw_all(const struct framework **);
/*
 * Read the one profile file at path into fw, as fw_all reads each of
 * fw_dir()'s: 0, or -1 after printing one "gradaudit: path:line:col: ..."
 * line, with fw left empty.  fw_free frees what a read filled in; the
 * profile reader's fuzz harness (tests/libfuzzer/profile.c) calls both
 * on files of its own.
 */
int		 fw_read(const char *path, struct framework *fw);
void		 fw_free(struct framework *fw);

/*
 * Resolve "NAME@VERSION".  Returns the profile, or NULL with a message in
 * err (which lists what is known).
 * *newer is set when the version is newer than the newest release the
 * profiles were checked against: the newest profile applies, and the
 * caller says so on stderr.
 */
const struct fw_profile *fw_resolve(const char *spec, bool *newer,
		    char *err, size_t errlen);

int		 fw_version_parse(const char *, struct fw_version *);
int		 fw_version_cmp(const struct fw_version *,
		    const struct fw_version *);
/* "0.5.0", or "main". */
void		 fw_version_format(const struct fw_version *, char *, size_t);
/*
 * The versions a profile covers, "0.6.0 - 0.7.x" or "0.9.0 - 0.19.x, main",
 * as `gradaudit frameworks` lists them.
 */
void		 fw_profile_range(const struct fw_profile *, char *, size_t);

/*
 * Where the value of k came from, for explain: "FILE:LINE:COL", "--set",
 * "megatron-core@0.5.0 (profile core_v0.4.0): read from COMMIT ..." or
 * "the reference default".
 */
void	 fw_key_origin(const struct config *, enum cfg_key, char *buf,
	    size_t len);
/*
 * The keys the config writes over its framework profile's settings, with
 * another value than the profile's.
 */
struct keyset fw_profile_overridden(const struct config *);

#endif
