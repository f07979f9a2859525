/*
 * The kernels of the numeric engine: forward and backward of every op kind
 * of model.h, in a table that the interpreter (interpret.c) walks.  Rank
 * kernels work on one rank; stage kernels on every local rank of the stage
 * at once, around the rounds of their collective.  Backward kernels read
 * the gradient of the op's output from grad[out] and leave the gradients
 * of its inputs in din[] (numengine.h); the interpreter adds those to the
 * input slots.
 */
#ifndef GRADAUDIT_KERNELS_H
#define GRADAUDIT_KERNELS_H

struct engine;
struct op;
struct rank_state;

/* Kernels of op opi of stage `stage`. */
typedef void rank_kernel(struct engine *, struct rank_state *, int, int);
typedef void stage_kernel(struct engine *, int, int);

struct op_rule {
	rank_kernel	*forward;
	stage_kernel	*forward_stage;
	rank_kernel	*backward;
	stage_kernel	*backward_stage;
	unsigned	 grad_inputs;
};

/*
 * The rule of an op: exactly one of forward and forward_stage is set, and
 * of backward and backward_stage.  grad_inputs: bit j set when backward
 * yields the gradient of in[j] (token ids have none).
 */
const struct op_rule *kernel_rule(const struct op *);

#endif
