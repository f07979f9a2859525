/*
 * What compare checks of its traces before comparing them (tracepair.c).
 * Each check returns 0, or -1 with a message in err naming the file that
 * says otherwise.
 */
#ifndef GRADAUDIT_TRACEPAIR_H
#define GRADAUDIT_TRACEPAIR_H

#include <stddef.h>

#include "compare/trace.h"

struct mesh;

/* The mesh a trace's tables show: its own in Megatron's order, else flat. */
void		 build_mesh(const struct trace *t, struct mesh *m);
/* The traced step t and its reference ref belong together. */
int		 check_pair(const struct trace *t, const struct trace *ref,
		    char *err, size_t errlen);
/* The coarsest dtype of t's finals not finer than dt. */
enum trace_dtype coarsest_final(const struct trace *t, enum trace_dtype dt);
/* The config's mesh m describes the traced ranks. */
int		 check_config_mesh(const struct trace *t, const struct mesh *m,
		    const char *config_file, char *err, size_t errlen);

#endif
