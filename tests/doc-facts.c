/*
 * doc-facts: print what the program's own tables say, so that
 * tests/doc-drift.test holds the manual pages and the README against the
 * program rather than against a copy of it.  One fact a line, its fields
 * separated by tabs:
 *
 *	key	mesh.dp	integer
 *	key	model.moe	mapping
 *	kind	wrong-order
 *
 * The keys are those of the loader's table (src/config/config.c, through
 * cfg_key_path), each with the type gradaudit.yaml(5) writes after it:
 * integer, boolean, keyword, string or mapping; the kinds are every
 * finding kind, as finding_kind_name spells them.  Given a configuration
 * file, it also prints the value of every setting in effect in its first
 * configuration, as the loader resolved it:
 *
 *	value	model.moe.experts	4
 *
 * usage: doc-facts [config]
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/exitcode.h"
#include "config/config.h"
#include "config/framework.h"
#include "config/load.h"
#include "symbolic/audit.h"

/* A key that is not a setting is a mapping when other keys lie under it. */
static bool
has_children(enum cfg_key k)
{
	const char	*path = cfg_key_path(k);
	size_t		 n = strlen(path);
	int		 j;

	for (j = 0; j < KEY__COUNT; j++) {
		const char *other = cfg_key_path((enum cfg_key)j);

		if (strncmp(other, path, n) == 0 && other[n] == '.')
			return true;
	}
	return false;
}

static const char *
key_type(enum cfg_key k)
{
	if (cfg_keys[k].type == CFG_TYPE_PLAN)
		return "sequence";
	if (!cfg_key_is_setting(k))
		return has_children(k) ? "mapping" : "string";
	switch (cfg_key_value_type(k)) {
	case CFG_VALUE_NUMBER:
		return "integer";
	case CFG_VALUE_BOOL:
		return "boolean";
	case CFG_VALUE_STRING:
		break;
	}
	return "keyword";
}

/* The settings in effect in the first configuration of a file. */
static int
print_values(const char *path)
{
	struct config_list	 list;
	struct fw_registry	*frameworks = fw_registry_open();
	char			 value[256];
	int			 k;

	memset(&list, 0, sizeof list);
	if (cfg_load(frameworks, path, NULL, 0, &list) != 0 || list.n == 0) {
		config_list_free(&list);
		fw_registry_close(frameworks);
		return EXIT_USAGE;
	}
	for (k = 0; k < KEY__COUNT; k++) {
		if (!cfg_key_is_setting((enum cfg_key)k) ||
		    !cfg_key_is_active(&list.v[0], (enum cfg_key)k))
			continue;
		cfg_key_value(&list.v[0], (enum cfg_key)k, value,
		    sizeof value);
		printf("value\t%s\t%s\n", cfg_key_path((enum cfg_key)k),
		    value);
	}
	config_list_free(&list);
	fw_registry_close(frameworks);
	return EXIT_OK;
}

int
main(int argc, char **argv)
{
	int	 k, status = EXIT_OK;

	if (argc > 2) {
		fprintf(stderr, "usage: doc-facts [config]\n");
		return EXIT_USAGE;
	}
	for (k = 0; k < KEY__COUNT; k++)
		printf("key\t%s\t%s\n", cfg_key_path((enum cfg_key)k),
		    key_type((enum cfg_key)k));
	for (k = 0; k < FINDING__COUNT; k++)
		printf("kind\t%s\n", finding_kind_name((enum finding_kind)k));
	if (argc == 2)
		status = print_values(argv[1]);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		perror("doc-facts: stdout");
		return EXIT_RUNTIME;
	}
	return status;
}
