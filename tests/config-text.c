/* A configuration written inline in a unit test (config-text.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/xmalloc.h"
#include "config-text.h"
#include "config/load.h"

int
config_text_load(const char *yaml, struct config_list *out)
{
	const char	*dir = getenv("TMPDIR");
	char		*path;
	FILE		*fp;
	int		 fd, rc = -1;

	xasprintf(&path, "%s/gradaudit-unit.XXXXXX",
	    dir != NULL && *dir != '\0' ? dir : "/tmp");
	if ((fd = mkstemp(path)) != -1) {
		if ((fp = fdopen(fd, "w")) == NULL)
			close(fd);
		else {
			fprintf(fp, "name: case\n%s", yaml);
			if (fclose(fp) == 0)
				rc = cfg_load(NULL, path, NULL, 0, out);
		}
		unlink(path);
	}
	free(path);
	return rc;
}
