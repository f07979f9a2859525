/*
 * Megatron-LM's command line, read as a gradaudit configuration: what
 * `gradaudit import megatron` does with a launch line.
 *
 * Every Megatron argument gradaudit knows is in one table (megatron-args.c),
 * with its arity and one of three fates: it sets configuration keys, it
 * cannot change gradient synchronization and is ignored, or it changes the
 * synchronization in a way gradaudit cannot model yet and the import is
 * refused.  An argument the table does not know is refused too: an unknown
 * argument could change anything.
 */
#ifndef GRADAUDIT_MEGATRON_H
#define GRADAUDIT_MEGATRON_H

#include <stdbool.h>
#include <stddef.h>

#include "import/megatron-import.h"

/*
 * Read Megatron's arguments: words as a shell would pass them, optionally
 * preceded by the program that runs Megatron (python, torchrun and its
 * options, pretrain_gpt.py).  Errors, notes and the list of ignored
 * arguments go to stderr, each line starting with "gradaudit: import: ".
 * Returns 0, or -1 when an argument is refused or invalid: then nothing
 * but the refusals was printed, and cfg is not to be used.
 */
int	 megatron_import(struct megatron_import *, char *const *words,
	    size_t nwords);
void	 megatron_import_free(struct megatron_import *);

#endif
