/*
 * Load a configuration written inline in a unit test: the YAML text goes
 * to a temporary file (under $TMPDIR, else /tmp) that cfg_load reads and
 * that is removed at once.  Returns cfg_load's status, -1 also when no
 * temporary file could be written.  With no framework registry: the
 * text names no framework.
 */
#ifndef GRADAUDIT_TESTS_CONFIG_TEXT_H
#define GRADAUDIT_TESTS_CONFIG_TEXT_H

#include "config/config.h"

int	 config_text_load(const char *yaml, struct config_list *out);

#endif
