/*
 * What the kernel files of the numeric engine share (kernels.c and the
 * kernels-*.c it tables): the helpers several kernels compute with, and
 * each kernel of the op table.  Not for the interpreter, which reaches the
 * kernels through kernel_rule() (kernels.h).
 */
#ifndef GRADAUDIT_KERNELS_INTERNAL_H
#define GRADAUDIT_KERNELS_INTERNAL_H

#include <stdint.h>

#include "numeric/numvalue.h"

struct engine;
struct op;
struct rank_state;
struct slot;

/* The activation and its derivative (kernels.c). */
union num	 act_value(enum arith, union num);
union num	 act_derivative(enum arith, union num);
/* out = x W^T, dx = d W, g += d^T x, with W [nout, nin]. */
void		 mm_x_wt(enum arith, struct tensor *out, const struct tensor *x,
		    const union num *w, int64_t nout, int64_t nin);
void		 mm_d_w(enum arith, struct tensor *dx, const struct tensor *d,
		    const union num *w, int64_t nout, int64_t nin);
void		 mm_acc_dt_x(enum arith, union num *g, const struct tensor *d,
		    const struct tensor *x);
/* The slot of input j of op, which must have one. */
struct slot	*act_in(struct rank_state *, const struct op *, int j);

/* Rank kernels (kernels-dense.c, kernels-moe.c). */
void	 kernel_none(struct engine *, struct rank_state *, int, int);
void	 fwd_tokens(struct engine *, struct rank_state *, int, int);
void	 fwd_embed(struct engine *, struct rank_state *, int, int);
void	 bwd_embed(struct engine *, struct rank_state *, int, int);
void	 fwd_norm(struct engine *, struct rank_state *, int, int);
void	 bwd_norm(struct engine *, struct rank_state *, int, int);
void	 fwd_linear(struct engine *, struct rank_state *, int, int);
void	 bwd_linear(struct engine *, struct rank_state *, int, int);
void	 fwd_act(struct engine *, struct rank_state *, int, int);
void	 bwd_act(struct engine *, struct rank_state *, int, int);
void	 fwd_head_norm(struct engine *, struct rank_state *, int, int);
void	 bwd_head_norm(struct engine *, struct rank_state *, int, int);
void	 fwd_add(struct engine *, struct rank_state *, int, int);
void	 bwd_add(struct engine *, struct rank_state *, int, int);
void	 fwd_kv(struct engine *, struct rank_state *, int, int);
void	 bwd_kv(struct engine *, struct rank_state *, int, int);
void	 fwd_sink(struct engine *, struct rank_state *, int, int);
void	 bwd_sink(struct engine *, struct rank_state *, int, int);
void	 fwd_gate(struct engine *, struct rank_state *, int, int);
void	 bwd_gate(struct engine *, struct rank_state *, int, int);
void	 bwd_loss(struct engine *, struct rank_state *, int, int);
void	 fwd_route_stage(struct engine *, int, int);

/* Stage kernels (kernels-comm.c, kernels-moe.c). */
void	 bwd_route_stage(struct engine *, int, int);
void	 fwd_tp_reduce(struct engine *, int, int);
void	 bwd_tp_reduce(struct engine *, int, int);
void	 fwd_tp_gather(struct engine *, int, int);
void	 bwd_tp_gather(struct engine *, int, int);
void	 fwd_send(struct engine *, int, int);
void	 fwd_recv(struct engine *, int, int);
void	 bwd_recv(struct engine *, int, int);
void	 bwd_send(struct engine *, int, int);
void	 fwd_experts(struct engine *, int, int);
void	 bwd_experts(struct engine *, int, int);

#endif
