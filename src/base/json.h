/*
 * The one JSON emitter of gradaudit (SPEC section 9): every JSON byte the
 * tool prints goes through here, so strings are always escaped and commas
 * always placed by the same code.  It streams to a FILE as it goes; the
 * caller checks ferror() on the stream at the end, as for any output.
 *
 * Misuse (a value where a key is due, an unbalanced end, nesting deeper
 * than JSON_MAX_DEPTH, two top-level values) is an internal error.
 *
 * The names are jsonw_, not json_: jansson, which reads traces
 * (trace.c), exports json_string and json_null, and an executable that
 * defines them too can take over the library's own calls to them.
 */
#ifndef GRADAUDIT_JSON_H
#define GRADAUDIT_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH	64

struct json {
	FILE	*fp;
	bool	 compact;	/* one line instead of 2-space indentation */
	int	 depth;		/* open containers */
	bool	 key_pending;	/* a key was written, its value is due */
	bool	 done;		/* the top-level value is complete */
	struct {
		bool	 object;	/* else array */
		bool	 nonempty;	/* a member was written: comma next */
	}	 stack[JSON_MAX_DEPTH];
};

void	 jsonw_init(struct json *, FILE *, bool compact);

void	 jsonw_begin_object(struct json *);
void	 jsonw_end_object(struct json *);
void	 jsonw_begin_array(struct json *);
void	 jsonw_end_array(struct json *);

void	 jsonw_key(struct json *, const char *);
void	 jsonw_string(struct json *, const char *);
void	 jsonw_int(struct json *, int64_t);
void	 jsonw_bool(struct json *, bool);
void	 jsonw_null(struct json *);
/* A number already formatted (e.g. "%.17g"); checked against JSON syntax. */
void	 jsonw_raw_number(struct json *, const char *);

void	 jsonw_key_string(struct json *, const char *key, const char *);
void	 jsonw_key_int(struct json *, const char *key, int64_t);
void	 jsonw_key_bool(struct json *, const char *key, bool);
void	 jsonw_key_null(struct json *, const char *key);

#endif
