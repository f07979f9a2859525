/*
 * The one JSON emitter of gradaudit (SPEC section 9): every JSON byte the
 * tool prints goes through here, so strings are always escaped and commas
 * always placed by the same code.  It streams to a FILE as it goes; the
 * caller checks ferror() on the stream at the end, as for any output.
 *
 * Misuse (a value where a key is due, an unbalanced end, nesting deeper
 * than JSON_MAX_DEPTH, two top-level values) is an internal error.
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

void	 json_init(struct json *, FILE *, bool compact);

void	 json_begin_object(struct json *);
void	 json_end_object(struct json *);
void	 json_begin_array(struct json *);
void	 json_end_array(struct json *);

void	 json_key(struct json *, const char *);
void	 json_string(struct json *, const char *);
void	 json_int(struct json *, int64_t);
void	 json_bool(struct json *, bool);
void	 json_null(struct json *);
/* A number already formatted (e.g. "%.17g"); checked against JSON syntax. */
void	 json_raw_number(struct json *, const char *);

void	 json_key_string(struct json *, const char *key, const char *);
void	 json_key_int(struct json *, const char *key, int64_t);
void	 json_key_bool(struct json *, const char *key, bool);
void	 json_key_null(struct json *, const char *key);

#endif
