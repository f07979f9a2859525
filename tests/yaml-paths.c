/*
 * yaml-paths: parse a YAML document with libyaml, as a CI service would,
 * and print every scalar as one "PATH<TAB>VALUE" line, so that a shell test
 * can check the CI snippets of the README (tests/readme.test) without a
 * YAML library of its own.  A mapping key extends the path with ".KEY", a
 * list item with "[N]"; newlines and tabs in a value are printed as \n and
 * \t.  Aliases are refused: the snippets have no use for them.
 *
 * usage: yaml-paths FILE
 *
 * Exits 0 when the input is one well-formed document, 1 (with libyaml's
 * message and position on stderr) when it is not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#define PATH_MAX_DEPTH	64
#define PATH_LEN	1024

struct level {
	int	 mapping;	/* 1: a mapping, 0: a list */
	int	 want_key;	/* mapping: the next scalar is a key */
	long	 index;		/* list: the next item's index */
	size_t	 len;		/* the path's length at this level */
};

static char		 path[PATH_LEN];
static struct level	 stack[PATH_MAX_DEPTH];
static int		 depth;

static void
die(const char *what, const yaml_parser_t *p)
{
	fprintf(stderr, "yaml-paths: %s: %s at line %lu column %lu\n", what,
	    p->problem != NULL ? p->problem : "error",
	    (unsigned long)p->problem_mark.line + 1,
	    (unsigned long)p->problem_mark.column + 1);
	exit(1);
}

/* Extend the path for the node that starts now (key already appended). */
static void
enter_item(void)
{
	struct level	*l;
	size_t		 n;

	if (depth == 0)
		return;
	l = &stack[depth - 1];
	if (!l->mapping) {
		n = strlen(path);
		snprintf(path + n, sizeof(path) - n, "[%ld]", l->index++);
	}
}

/* The node that started in enter_item() (or after its key) has ended. */
static void
leave_item(void)
{
	struct level	*l;

	if (depth == 0)
		return;
	l = &stack[depth - 1];
	path[l->len] = '\0';
	if (l->mapping)
		l->want_key = 1;
}

static void
print_value(const unsigned char *v, size_t len)
{
	size_t	 i;

	fputs(path[0] == '.' ? path + 1 : path, stdout);
	putchar('\t');
	for (i = 0; i < len; i++)
		if (v[i] == '\n')
			fputs("\\n", stdout);
		else if (v[i] == '\t')
			fputs("\\t", stdout);
		else
			putchar(v[i]);
	putchar('\n');
}

static void
push(int mapping)
{
	if (depth == PATH_MAX_DEPTH) {
		fprintf(stderr, "yaml-paths: nested too deep\n");
		exit(1);
	}
	stack[depth].mapping = mapping;
	stack[depth].want_key = 1;
	stack[depth].index = 0;
	stack[depth].len = strlen(path);
	depth++;
}

int
main(int argc, char **argv)
{
	yaml_parser_t	 parser;
	yaml_event_t	 ev;
	struct level	*l;
	size_t		 n;
	FILE		*fp;
	int		 done = 0, docs = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: yaml-paths FILE\n");
		return 2;
	}
	if ((fp = fopen(argv[1], "r")) == NULL) {
		perror(argv[1]);
		return 1;
	}
	if (!yaml_parser_initialize(&parser))
		return 1;
	yaml_parser_set_input_file(&parser, fp);
	while (!done) {
		if (!yaml_parser_parse(&parser, &ev))
			die("not YAML", &parser);
		l = depth > 0 ? &stack[depth - 1] : NULL;
		switch (ev.type) {
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1) {
				fprintf(stderr, "yaml-paths: more than one "
				    "document\n");
				return 1;
			}
			break;
		case YAML_MAPPING_START_EVENT:
		case YAML_SEQUENCE_START_EVENT:
			enter_item();
			push(ev.type == YAML_MAPPING_START_EVENT);
			break;
		case YAML_MAPPING_END_EVENT:
		case YAML_SEQUENCE_END_EVENT:
			depth--;
			leave_item();
			break;
		case YAML_SCALAR_EVENT:
			if (l != NULL && l->mapping && l->want_key) {
				n = strlen(path);
				snprintf(path + n, sizeof(path) - n, ".%s",
				    (const char *)ev.data.scalar.value);
				l->want_key = 0;
				break;
			}
			enter_item();
			print_value(ev.data.scalar.value,
			    ev.data.scalar.length);
			leave_item();
			break;
		case YAML_ALIAS_EVENT:
			fprintf(stderr, "yaml-paths: an alias\n");
			return 1;
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	fclose(fp);
	if (docs != 1) {
		fprintf(stderr, "yaml-paths: no document\n");
		return 1;
	}
	return 0;
}
