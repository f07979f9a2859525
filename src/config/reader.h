/*
 * Reading configuration keys from YAML into struct config (reader.c), for
 * documents (load.c) and framework profiles (framework.c).  struct loader
 * is the state of one load; its fields are load.c's and reader.c's alone.
 */
#ifndef GRADAUDIT_READER_H
#define GRADAUDIT_READER_H

#include <stdbool.h>
#include <stddef.h>

#include <yaml.h>

#include "base/text.h"
#include "config/config.h"

/* Room for input quoted back (text.h), and with its quotes. */
#define QUOTE_SIZE	TEXT_QUOTE_SIZE
#define QUOTED_SIZE	(QUOTE_SIZE + 2)
/* Room for describe(): a quoted scalar and a few words. */
#define GOT_SIZE	(QUOTED_SIZE + 48)
/* Room for any message the loader builds. */
#define MSG_SIZE	CFG_WHY_SIZE

/* What a boolean may be spelt as, naming every spelling load_bool takes. */
#define BOOL_WORDS	"true or false (or yes/no, on/off)"


/* The state of one cfg_load call. */
struct loader {
	const char			*path;	/* as messages show it */
	const char			*open_path; /* the file to read */
	bool				 from_stdin; /* path "-" */
	const unsigned char		*text;	/* the file, for reader errors */
	size_t				 len;
	yaml_parser_t			*parser; /* the file's, or a --set value's */
	const struct cfg_override	*ovr;	/* the --set being applied */
	const struct cfg_override	*ovrs;
	size_t				 novrs;
	enum cfg_key			*ovr_keys; /* ovrs[i].key, resolved */
	struct config_list		 list;	/* configs of this file so far */
	char				**error; /* the caller's last error */
	char				**error_key; /* and its key */
	bool				 quiet;	/* keep errors, print none */
	size_t				 cap;	/* allocated length of list.v */
	struct config			*cfg;	/* the one being filled */
	/* Which --set wrote each key of cfg last (NULL: the file did). */
	const struct cfg_override	*origin[KEY__COUNT];
	bool				 is_list;
	/* Keys sweep sets itself: no warning that needs them. */
	const struct keyset		*varying;
	/* Where framework: resolves; the caller's (framework.h). */
	struct fw_registry		*frameworks;
};

/*
 * Print "gradaudit: WHERE: KEY: message" for the load (or keep it, when
 * quiet): WHERE is the --set ovr, mark m of the file, or the file alone.
 */
void	 reader_report(const struct loader *, const struct cfg_override *ovr,
	    struct cfg_mark m, const char *key, const char *fmt, ...)
	    __attribute__((format(printf, 5, 6)));
void reader_apply_defaults(struct config *c);
struct cfg_mark reader_mark(const yaml_mark_t *m);
int reader_load_mapping(struct loader *ld, enum cfg_key parent);
int reader_apply_override(struct loader *ld, size_t i);
int reader_next_event(struct loader *ld, yaml_event_t *ev);
void reader_describe(char *buf, size_t size, const yaml_event_t *ev);
/* reader_report at a libyaml mark of the load's current source. */
void	 reader_error_at(const struct loader *, const yaml_mark_t *m,
	    const char *key, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));
bool reader_is_null_scalar(const yaml_event_t *ev);
/* A plain, untagged scalar (a number, a boolean or null may be one). */
bool	 reader_is_plain(const yaml_event_t *ev);
/*
 * plan:'s value, whose first event is ev, into ld's config (plan-read.c):
 * its own schema, a sequence of steps (plan.h).
 */
int	 reader_load_plan(struct loader *ld, const yaml_event_t *ev);
/* A boolean as load_bool reads one; -1 when ev is none. */
int	 reader_bool(const yaml_event_t *ev, bool *out);
int reader_resolve_override(const char *path, enum cfg_key *out, char **keep);
void reader_emit(char **keep, const char *line, bool quiet);

struct yaml_parser_s;
/*
 * Read a profile's settings: the mapping of configuration keys the parser
 * is at (its start event already read) into c, whose `given` bits then say
 * which keys were set and whose marks where.  Only settings may appear:
 * not the mesh, a name or a framework.  path and text (the whole file the
 * parser reads, len bytes) are for messages.  Returns 0, or -1 after
 * printing "path:line:col: key: what is wrong".
 */
int	 cfg_load_settings(struct yaml_parser_s *, const char *path,
	    const unsigned char *text, size_t len, struct config *c);
/*
 * The place of byte `offset` of text (len bytes), where libyaml's reader
 * reports an encoding error: its line, and its column in characters as
 * libyaml's marks count them.
 */
struct cfg_mark cfg_offset_mark(const unsigned char *text, size_t len,
	    size_t offset);

#endif
