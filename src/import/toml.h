/*
 * A strict reader of the TOML subset torchtitan's train_configs use
 * (issue 28): tables ([a] and [a.b]), bare, quoted and dotted keys, basic
 * and literal strings on one line, decimal integers, floats, booleans,
 * arrays of those, and comments.  Debian bookworm has no C TOML library,
 * hence this one.  Everything else TOML has (multi-line strings, inline
 * tables, arrays of tables, dates, hexadecimal integers, nested arrays) is
 * refused as outside the subset, and malformed input (duplicate keys,
 * redefined tables, bad escapes, overflow, bytes that are no UTF-8) is
 * refused, each with FILE:LINE:COL, the column counted in characters.
 */
#ifndef GRADAUDIT_TOML_H
#define GRADAUDIT_TOML_H

#include <stdbool.h>
#include <stddef.h>

/* Keys nest at most this deep: [a.b.c] with d.e = 1 is 5. */
#define TOML_MAX_DEPTH	16
/* A document is a config file, not data. */
#define TOML_MAX_SIZE	(1 << 20)

enum toml_type {
	TOML_STRING,
	TOML_INTEGER,
	TOML_FLOAT,
	TOML_BOOLEAN,
	TOML_ARRAY
};

struct toml_value {
	enum toml_type		 type;
	char			*string;	/* TOML_STRING: UTF-8, no NUL */
	long long		 integer;
	double			 number;
	bool			 boolean;
	struct toml_value	*items;		/* TOML_ARRAY: scalars only */
	size_t			 nitems;
	int			 line, col;	/* where the value starts */
};

/* One key = value, with the tables it is in: parallelism.tensor_..._degree. */
struct toml_entry {
	char			**keys;		/* the path, one key a level */
	size_t			 nkeys;
	char			*path;		/* the keys joined by '.' */
	struct toml_value	 value;
	int			 line, col;	/* where the key starts */
	/*
	 * Where an entry that no file holds came from (torchtitan main's
	 * registry entry or command line, torchtitan-args.h), for messages
	 * instead of NAME:LINE:COL; NULL for a file's.
	 */
	char			*origin;
};

struct toml_doc {
	char			*name;		/* the file, for messages */
	struct toml_entry	*entries;	/* in the order of the file */
	size_t			 n;
};

/*
 * Parse text (len bytes, NUL bytes refused) of the file name.  Returns 0,
 * or -1 with "NAME:LINE:COL: what" in err and doc empty.
 */
int	 toml_parse(const char *name, const char *text, size_t len,
	    struct toml_doc *doc, char *err, size_t errsize);
void	 toml_free(struct toml_doc *);
/* One entry's keys, path, origin and value (not the entry itself). */
void	 toml_entry_free(struct toml_entry *);

/* "a string", "an integer" ... for messages. */
const char *toml_type_name(enum toml_type);

#endif
