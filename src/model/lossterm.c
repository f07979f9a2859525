/*
 * The factor a plan puts on each loss term's gradient (lossterm.h).
 */
#include <string.h>

#include "base/xmalloc.h"
#include "base/rational.h"
#include "config/config.h"
#include "config/plan.h"
#include "model/lossterm.h"
#include "model/mesh.h"

enum group_kind
lossterm_group(const struct plan_item *it)
{
	const char	*w = cfg_plan_group_name(it->group);
	int		 k;

	for (k = 0; k < GROUP__COUNT; k++)
		if (strcmp(mesh_group_name((enum group_kind)k), w) == 0)
			return (enum group_kind)k;
	fatalx("plan group %s has no group kind", w);
}

/*
 * A gather-loss: every member's loss is the sum of the losses gathered
 * over the group, so each member computes the same total.  The gradient
 * that reaches a rank's own loss is the sum, over the members, of each
 * member's gradient of its gathered copy of that loss:
 *
 *   autograd	torch.distributed.nn.functional.all_gather, whose
 *		_AllGather.backward reduce-scatters (sums) the gradients
 *		of the gathered list, so each of the n members sends the
 *		owner a 1 and the owner's loss gradient is n, the group's
 *		size (prime-rl's cp loss at 1d9ca9255 rl/train.py, the
 *		catalogue's #21, gathers its log-probs so);
 *   plain	dist.all_gather into a list of fresh tensors, the rank's
 *		own slice put back as its live loss (open_clip's
 *		gather_features without gather_with_grad, at b01786f069):
 *		the gathered copies carry no gradient, and only the rank's
 *		own term in its own total does, 1.  (prime-rl's
 *		gather_for_cp_wo_grad does not put the slice back: nothing
 *		it gathers carries gradient, and it gathers no loss.)
 *
 * A framework that means the mean divides the total by the group's size,
 * which a plan writes as a scale of the term: the two together give 1
 * with autograd and 1/n without.
 */
static struct rational
gather_factor(const struct mesh *mesh, const struct plan_item *it)
{
	if (!it->autograd)
		return q_make(1, 1);
	return q_make(mesh_group_size(mesh, lossterm_group(it)), 1);
}

struct rational
lossterm_item_factor(const struct config *c, const struct mesh *mesh,
    const struct plan_item *it, enum plan_term t)
{
	struct rational	 q;

	if (it->op == PLAN_SCALE && it->term == (int)t) {
		/* The constraints evaluated it with these sizes already. */
		if (plan_factor(c, it, &q) == -1)
			fatalx("plan: factor %s cannot be evaluated", it->expr);
		return q;
	}
	if (it->op == PLAN_GATHER_LOSS && (it->term < 0 ||
	    it->term == (int)t))
		return gather_factor(mesh, it);
	return q_make(1, 1);
}

struct rational
lossterm_factor(const struct config *c, const struct mesh *mesh,
    enum plan_term t)
{
	struct rational	 q = q_make(1, 1);
	int		 i;

	if (!plan_given(c))
		return q;
	for (i = 0; i < c->nplan; i++)
		q = q_mul(q, lossterm_item_factor(c, mesh, &c->plan[i], t));
	return q;
}
