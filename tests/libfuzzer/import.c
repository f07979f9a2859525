/*
 * libFuzzer harness of `gradaudit import megatron --args-file FILE`: the
 * input is the argument file, split as sh splits words (shellwords.c),
 * read as Megatron's arguments (megatron.c) and printed as a
 * configuration (cmd-import.c), by the command itself (command_exec),
 * with the --world, --framework and --eod-document-tokens that its first
 * "# options:" line gives, as tests/import.test runs testdata/import/.
 *
 * The contract checked: the splitter's words read back through
 * shellwords_quote, one by one and joined, as the same words, with and
 * without comments; a command's length is within the text.  import
 * exits 0 or 2 and every line it prints on stderr starts with
 * "gradaudit: import: " (a word holding a newline once split a message,
 * issue 26); exit 0 prints a configuration that loads and passes its
 * constraints, exit 2 says why.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exitcode.h"
#include "base/shellwords.h"
#include "base/xmalloc.h"
#include "cmd/commands.h"
#include "config/config.h"
#include "config/constraints.h"
#include "config/framework.h"
#include "config/load.h"
#include "harness.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/*
 * import's options besides --args-file that an input may give on its
 * "# options:" line, as the .args files of testdata/import do: not
 * --script, which would run a program.
 */
static const char *const allowed[] = {
	"--world", "--framework", "--eod-document-tokens"
};
#define NALLOWED	(sizeof allowed / sizeof allowed[0])
#define MAX_OPTIONS	8

static const char	*path;

static bool
same_words(char **a, size_t na, char **b, size_t nb)
{
	size_t	 i;

	if (a == NULL || b == NULL || na != nb)
		return false;
	for (i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return b[nb] == NULL;
}

/*
 * The allowed options of the first "# options:" line of text, with their
 * values, into argv (words then owned by *words); their number.
 */
static int
options_line(const char *text, char ***words, size_t *nwords, char **argv)
{
	const char	*line = strstr(text, "# options:");
	char		*copy;
	size_t		 i, k, n;
	int		 argc = 0;

	*words = NULL;
	*nwords = 0;
	if (line == NULL)
		return 0;
	line += strlen("# options:");
	n = strcspn(line, "\n");
	copy = xmalloc(n + 1);
	memcpy(copy, line, n);
	copy[n] = '\0';
	*words = shellwords_split(copy, 0, nwords);
	free(copy);
	if (*words == NULL) {
		*nwords = 0;
		return 0;
	}
	for (i = 0; i + 1 < *nwords && argc + 2 <= MAX_OPTIONS; i++)
		for (k = 0; k < NALLOWED; k++)
			if (strcmp((*words)[i], allowed[k]) == 0) {
				argv[argc++] = (*words)[i];
				argv[argc++] = (*words)[++i];
				break;
			}
	return argc;
}

/* The words of text, quoted back and split again, are the same words. */
static void
check_words(const char *text, unsigned flags)
{
	char	**words, **again, *q, *joined;
	size_t	 n, m, i, len = 0;

	if ((words = shellwords_split(text, flags, &n)) == NULL)
		return;
	joined = xstrdup("");
	for (i = 0; i < n; i++) {
		q = shellwords_quote(words[i]);
		again = shellwords_split(q, flags, &m);
		if (!same_words(words + i, 1, again, m))
			harness_fail(NULL, "word %zu does not read back from "
			    "%s", i, q);
		shellwords_free(again, m);
		len += strlen(q) + 1;
		joined = xreallocarray(joined, len + 1, 1);
		strcat(joined, q);
		strcat(joined, " ");
		free(q);
	}
	again = shellwords_split(joined, flags, &m);
	if (!same_words(words, n, again, m))
		harness_fail(NULL, "the words quoted and joined read back "
		    "otherwise: %s", joined);
	shellwords_free(again, m);
	shellwords_free(words, n);
	free(joined);
}

static void
check_import(int rc, const char *err, size_t len, const char *out,
    size_t outlen)
{
	struct config_list	 list;
	struct fw_registry	*frameworks;
	char			 why[CFG_WHY_SIZE];
	size_t			 n, i, k;

	/*
	 * A value of the "# options:" line the option parser refuses is
	 * the harness's input, not import's: its usage message follows.
	 */
	for (k = 0; k < NALLOWED; k++)
		if (rc == EXIT_USAGE && strncmp(err, "gradaudit: ", 11) == 0 &&
		    strncmp(err + 11, allowed[k], strlen(allowed[k])) == 0 &&
		    err[11 + strlen(allowed[k])] == ':')
			return;
	if (!harness_lines(err, len, "gradaudit: import: ", &n))
		harness_fail(err, "stderr is not lines of \"gradaudit: "
		    "import: \"");
	if (rc == EXIT_USAGE) {
		if (n == 0)
			harness_fail(err, "exit 2 without a message");
		if (outlen != 0)
			harness_fail(err, "exit 2 with a configuration");
		return;
	}
	if (rc != EXIT_OK)
		harness_fail(err, "import exited %d", rc);
	memset(&list, 0, sizeof list);
	/* Its own registry, as the command had: the configs point into it. */
	frameworks = fw_registry_open();
	if (cfg_load_quietly(frameworks, "import", out, outlen, &list) != 0)
		harness_fail(err, "import exited 0, but what it printed does "
		    "not load: %s\n%.*s", list.error != NULL ? list.error :
		    "", (int)outlen, out);
	for (i = 0; i < list.n; i++)
		if (cfg_check_constraints(&list.v[i], why, sizeof why) != NULL)
			harness_fail(err, "the configuration imported fails "
			    "its constraints: %s", why);
	config_list_free(&list);
	fw_registry_close(frameworks);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	*text, *argv[8 + MAX_OPTIONS], *err, *out, **words;
	size_t	 len, outlen, cmdlen, nwords;
	int	 argc = 0, rc;

	if (path == NULL)
		path = harness_path("args");

	/* The splitter on its own, on the text up to a NUL. */
	text = xmalloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	check_words(text, SHELLWORDS_COMMENTS);
	check_words(text, 0);
	if ((cmdlen = shellwords_command_len(text)) > strlen(text))
		harness_fail(NULL, "a command of %zu bytes in %zu", cmdlen,
		    strlen(text));

	/* The command, as gradaudit's main() runs it. */
	harness_write(path, data, size);
	argv[argc++] = "gradaudit";
	argv[argc++] = "import";
	argv[argc++] = "--args-file";
	argv[argc++] = (char *)path;
	argc += options_line(text, &words, &nwords, argv + argc);
	free(text);
	argv[argc++] = "megatron";
	argv[argc] = NULL;
	harness_capture_begin();
	rc = command_exec(&cmd_import_entry, argc, argv);
	err = harness_capture_end(&len, &out, &outlen);
	check_import(rc, err, len, out, outlen);
	shellwords_free(words, nwords);
	free(err);
	free(out);
	return 0;
}
