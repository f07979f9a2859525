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
	/*
	 * A window of main (since: main): the first commit of main's
	 * first-parent history whose code it models, as the profile writes
	 * it, and that commit's place in the framework's history (the index
	 * of struct fw_history's commits) and date.  -1 for a release.
	 */
	char			*commit;
	int			 first;
};

/*
 * A framework's main history: the first-parent commits of its main branch
 * after the newest release profile, oldest first, as scripts/main-commits
 * writes them to frameworks/NAME.commits.  NAME@COMMIT and NAME@DATE
 * resolve through it to the window a commit or a day falls in.
 */
struct fw_commit {
	char	hash[41];
	char	date[11];	/* YYYY-MM-DD, the committer's own */
};

struct fw_history {
	char			*file;
	char			*release;	/* "v0.2.2" */
	struct fw_commit	 base;		/* where main forked from it */
	struct fw_commit	*commits;
	int			 ncommits;
};

struct framework {
	char			*name;		/* "megatron-core" */
	char			*file;		/* the profile file it came from */
	char			*description;
	struct fw_version	 latest;	/* newest release checked */
	struct fw_profile	*profiles;	/* in release order */
	int			 nprofiles;
	struct fw_history	*history;	/* NULL: no windows of main */
};

/*
 * The directory profile files are read from: $GRADAUDIT_FRAMEWORKS when
 * set, else the source tree's frameworks/ when the program runs from its
 * build tree, else the installed $(pkgdatadir)/frameworks.
 */
const char	*fw_dir(void);

/*
 * The frameworks of fw_dir(), read on first use.  An object its owner
 * opens and closes, not a static of framework.c (STYLE.md: no process-wide
 * mutable state): command_exec opens one per command and passes it down
 * (struct options) to where profiles are resolved, and a config's profile
 * points into it, so it is closed only after every config loaded with it
 * is freed.  Opening reads nothing: a command whose configs name no
 * framework never reads the directory.
 */
struct fw_registry;

struct fw_registry *fw_registry_open(void);
void		 fw_registry_close(struct fw_registry *);	/* NULL: none */

/*
 * Every framework of the registry's directory, read at the first call and
 * kept.  Returns the number of frameworks, or -1 after printing a
 * diagnostic (file:line:col) for a profile file that does not load, or
 * for the directory; the diagnostic is printed once, and every later call
 * returns -1 without a word.
 */
int		 fw_all(struct fw_registry *, const struct framework **);
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
 * Resolve "NAME@VERSION", "NAME@main", "NAME@COMMIT" (7 to 40 hex digits
 * of a commit in the framework's main history) or "NAME@YYYY-MM-DD" (the
 * window in effect at the end of that day).  Returns the profile, or NULL
 * with a message in err (which lists what is known).
 * *newer is set when the version is newer than the newest release the
 * profiles were checked against: the newest profile applies, and the
 * caller says so on stderr.  A NULL registry (a unit test's, whose
 * configs name no framework) resolves nothing.
 */
const struct fw_profile *fw_resolve(struct fw_registry *, const char *spec,
		    bool *newer, char *err, size_t errlen);

/*
 * The commits of h whose hash starts with the hex digits of s: the index
 * of the one, or -1 for none and -2 for more than one.
 */
int		 fw_history_find(const struct fw_history *h, const char *s);
/*
 * The commit of main's history that spec names, as an index into the
 * history of p's framework (p being what fw_resolve gave for spec): the
 * commit of NAME@COMMIT, the newest commit dated on or before the day of
 * NAME@YYYY-MM-DD, else the first commit of p's window.  -1 for a release
 * profile.  A window models its code from that first commit; what else
 * changed inside it (a key of the command line moved) is placed by this.
 */
int		 fw_history_at(const struct fw_profile *p, const char *spec);

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
 * A window's commits, "ecae62f15 (2026-08-05) to b5bcd76c6 (2026-08-21),
 * the newest read", as the reports say which code of main they audit;
 * false, with buf empty, for a release profile.
 */
bool		 fw_profile_window(const struct fw_profile *, char *, size_t);
/*
 * What a spec fw_resolve marked newer is newer than, for the note that
 * the newest profile p applies to it: "torchtitan 0.2.2, the newest release
 * ...", or for a date after main's history "the newest commit of
 * torchtitan main read, b5bcd76c66 (2026-08-21)".
 */
void		 fw_newest_read(const struct fw_profile *, const char *spec,
		    char *, size_t);

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
