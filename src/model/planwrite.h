/*
 * A sync step written back as a step of a plan: section (issue 25), so
 * that the preset's steps can be printed as YAML a user pastes in its
 * place (explain --plan) and that read back gives the same step.  A
 * selection of parameters becomes globs that match exactly it.
 */
#ifndef GRADAUDIT_PLANWRITE_H
#define GRADAUDIT_PLANWRITE_H

#include <stdbool.h>
#include <stdio.h>

#include "model/model.h"
#include "model/syncplan.h"

/*
 * Globs (fnmatch(3), as params: reads them) that match exactly the
 * parameters sel[] flags, none if it flags every one: into *globs, a
 * NULL-terminated array of strings that planwrite_free_globs frees;
 * returns how many.  Short where one glob covers several parameters
 * and nothing else ("layers.*.norm1.weight"); a parameter's own name
 * otherwise.
 */
int	 planwrite_globs(const struct model *, const bool *sel, char ***globs);
void	 planwrite_free_globs(char **globs);

/*
 * Write step s as an item of a YAML plan: sequence ("  - reduce-scatter:
 * dp" and its keys on the lines after, indented under it); -1 when the
 * vocabulary cannot say it (a negative factor), with why.
 */
int	 planwrite_step(FILE *, const struct sync_step *, const struct model *,
	    char *why, size_t len);

/*
 * Write what a rule declared over tp as a declare: step of its
 * parameters: a reduction declared away (a sync_plan's skipped record,
 * the gradient declared Replicate), or the sum over tp (with its mask
 * of the Replicate part) of a gradient declared Partial; -1 as
 * planwrite_step.
 */
int	 planwrite_declare(FILE *, const struct sync_step *,
	    const struct model *, char *why, size_t len);

/*
 * Write a step of the config's own plan: as it is written: the factor's
 * expression, the globs and stages as given, the group, buffer and
 * options by name.  It expands to the very step it was read as.
 */
void	 planwrite_item(FILE *, const struct plan_item *);

#endif
