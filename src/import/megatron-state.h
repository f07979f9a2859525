/*
 * The state of one Megatron import (megatron-state.c): the arguments'
 * uses as read from the launch words, and the helpers that refuse, note
 * and explain, shared by reading the words (megatron.c) and mapping the
 * values onto keys (megatron-map.c).
 */
#ifndef GRADAUDIT_MEGATRON_STATE_H
#define GRADAUDIT_MEGATRON_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/text.h"
#include "config/config.h"
#include "import/megatron-args.h"
#include "import/megatron-import.h"

/* What the words said about one argument of megatron_args[]: its last use. */
struct arg_use {
	bool		 given;
	size_t		 at;		/* words[at] is the option */
	const char	*value;		/* the value, or a list's one "--x=v" */
	size_t		 first, count;	/* a list: words[first..first+count) */
	bool		 used;		/* read into a key */
};

struct import_state {
	struct megatron_import	*mi;
	char *const		*words;
	size_t			 nwords;
	struct arg_use		*use;		/* megatron_nargs of them */
	int			 errors;
	/* The ranks the launcher starts (read_launcher), 0: unknown. */
	long			 launch_world;
	const char		*launcher;	/* "torchrun", "srun" ... */
	char			*notes;		/* lines for stderr */
};

/*
 * A word of the launch as messages quote it (text.h): cut after
 * TEXT_QUOTE_MAX characters, with control characters and bytes that are
 * no UTF-8 as \xNN, so that a message stays one line whatever a launch
 * script quoted.  Control characters were '?', which hid what the word
 * held (issue 26).
 */
struct shown {
	char	 s[TEXT_QUOTE_SIZE];
};

/* An argument that stops the import: the message, and exit status 2. */
void	 mg_refuse(struct import_state *, const char *, ...)
	    __attribute__((format(printf, 2, 3)));
/* A note for the user, printed once the import succeeds. */
void	 mg_note(struct import_state *, const char *, ...)
	    __attribute__((format(printf, 2, 3)));
/* Set key k as written, with where its value came from. */
void	 mg_explain(struct import_state *, enum cfg_key, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
/* A word (its first len bytes) as messages quote it, into buf. */
const char *mg_shown_len(struct shown *buf, const char *word, size_t len);
const char *mg_shown(struct shown *buf, const char *word);
/* Value j of a list argument. */
const char *mg_list_value(const struct import_state *,
	    const struct arg_use *, size_t j);
/* True when value is one of the inert words of def. */
bool	 mg_is_inert(const struct arg_def *def, const char *value);
/* The words of a use, for messages: " 2", " 0.01 0.001", or "". */
char	*mg_use_values(const struct import_state *, const struct arg_def *,
	    const struct arg_use *);
/* Whether the release --framework names is older than release. */
bool	 mg_older_than(const struct import_state *, const char *release);
/* An integer argument in [min, max], def when not given; refused if not. */
long	 mg_int_arg(struct import_state *, enum mapped_arg, long min,
	    long max, long def);
/* An integer argument the launch does not use: checked as argparse does. */
void	 mg_int_aside(struct import_state *, enum mapped_arg);
/* Whether a word is one Python's float() takes (argparse's type=float). */
bool	 mg_python_float(const char *);
/* Whether a flag was given (and so read). */
bool	 mg_flag_arg(struct import_state *, enum mapped_arg);
/* Where a value came from, for the comments: the argument or a default. */
const char *mg_given_or(const struct import_state *, enum mapped_arg,
	    const char *arg, const char *dflt);
/* An integer argument as written, def when absent or not a number. */
long	 mg_raw_long(const struct import_state *, enum mapped_arg, long def);

#endif
