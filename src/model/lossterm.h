/*
 * The loss terms a plan acts on before the backward (issue 25): a scale:
 * with term: multiplies one term's gradient, and a gather-loss: makes
 * each rank's loss the sum of the losses gathered over a group.  Both
 * act on a loss before its backward, where the terms are still apart:
 * after it they are mixed in the gradient buffer, so a step written
 * among the collectives could not reach one of them there.  So the
 * factor they make is decided here, once, and lossnorm_build multiplies
 * it into the term's loss factor (coef, aux_coef, mtp_coef), which both
 * engines read; the steps themselves run as SYNC_LOSS_TERM, which
 * changes no gradient (syncplan.h).
 */
#ifndef GRADAUDIT_LOSSTERM_H
#define GRADAUDIT_LOSSTERM_H

#include "base/rational.h"
#include "config/config.h"
#include "model/mesh.h"

/*
 * The factor plan item it puts on term t's gradient (1 when it does not
 * act on t): a scale with term: t its factor; a gather-loss on t (or on
 * every term) the one its collective's backward makes.
 */
struct rational	 lossterm_item_factor(const struct config *,
		    const struct mesh *, const struct plan_item *,
		    enum plan_term);

/* The product of every plan item's factor on term t (1 without plan:). */
struct rational	 lossterm_factor(const struct config *,
		    const struct mesh *, enum plan_term);

/* The group a collective plan item names (mesh_group_name's words). */
enum group_kind	 lossterm_group(const struct plan_item *);

#endif
