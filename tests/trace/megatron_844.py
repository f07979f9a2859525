#!/usr/bin/python3
"""Megatron-LM #844 for real: pp 2 x dp 2, tied embedding, distributed optimizer.

    /usr/bin/python3 tests/trace/megatron_844.py OUT_DIR [--fixed]

Ranks in Megatron's order: rank = dp + 2*pp.  Stage 0 holds the embedding and
layer 0, stage 1 layer 1, the final norm and its copy of the embedding as the
output layer (traced as embedding.weight).  One micro-batch goes through the
pipeline with send/recv.  Then, as megatron-core 0.5.0's finalize_model_grads
without --overlap-grad-reduce: each stage's gradients form one flat buffer,
laid out in reverse registration order and padded to a multiple of dp; the
buffer is scaled by 1/dp in place and reduce-scattered over dp (each dp rank
sums its half; the rest keeps its own scaled values), and only then the
tied embedding's gradient is all-reduced over the first and last stage of
each dp rank.  The layouts differ between the stages: the embedding is the
last 256 of stage 0's 784 elements, owned by dp rank 1 (rank 1), and the first
256 of stage 1's 792, owned by dp rank 0 (rank 2).  So rank 1 holds
(g0+g1+g3)/2 and rank 2 (g0+g2+g3)/2, as `gradaudit check
testdata/megatron-844.yaml` says.  --fixed all-reduces the tied embedding
first (testdata/megatron-844-fixed-before-dp.yaml): both hold (g0+g1+g2+g3)/2.

Each rank records as its final only the elements of the buffer it owns, as
flat ranges of each parameter; the gradient norm is the distributed
optimizer's, over the owned elements of every rank, the copy of the tied
weight on the last stage left out.
"""

import math

import torch
import torch.distributed as dist

import common

MESH = {"dp": 2, "pp": 2}
DP = MESH["dp"]


def parallel(rank, world, out, opts):
    coords = common.megatron_coords(rank, MESH)
    dp, pp = coords["dp"], coords["pp"]
    first, last = pp == 0, pp == MESH["pp"] - 1
    dp_group, _ = common.groups_over(MESH, ("dp",))
    emb_group, _ = common.groups_over(MESH, ("pp",))
    model = common.TinyLM(layers=[pp], first=first, last=last, tied=True)
    trace = common.Trace(out, mesh=MESH, coords=coords, micro_batches=1)
    common.add_params(trace, model)
    trace.save_weights()

    tokens, targets, mask = common.chunk(dp)
    peer = rank + 2 if first else rank - 2
    shape = (common.MICRO_BATCH, common.SEQ, common.HIDDEN)
    with trace.micro_batch(0, tokens=int(mask.sum())):
        if first:
            h = model(tokens)
            dist.send(h.detach().contiguous(), peer)
            dh = torch.empty(shape)
            dist.recv(dh, peer)
            h.backward(dh)
        else:
            h = torch.empty(shape)
            dist.recv(h, peer)
            h.requires_grad_()
            loss = (common.token_losses(model(h), targets) * mask).sum() / mask.sum()
            loss.backward()
            dist.send(h.grad, peer)

    # The stage's grad buffer: reverse registration order, padded to dp.
    params = [(name, t) for name, t, _, _ in common.traced(model)]
    ranges = {}
    at = 0
    for name, t in reversed(params):
        ranges[name] = (at, at + t.numel())
        at += t.numel()
    size = -(-at // DP) * DP
    buf = torch.zeros(size)
    for name, t in params:
        lo, hi = ranges[name]
        buf[lo:hi] = t.grad.reshape(-1)

    def allreduce_embedding():
        lo, hi = ranges["embedding.weight"]
        part = buf[lo:hi].clone()
        dist.all_reduce(part, group=emb_group)
        buf[lo:hi] = part

    if opts["fixed"]:
        allreduce_embedding()
    buf /= DP
    shard = size // DP
    own_lo, own_hi = dp * shard, (dp + 1) * shard
    reduced = buf.clone()
    dist.all_reduce(reduced, group=dp_group)
    buf[own_lo:own_hi] = reduced[own_lo:own_hi]
    if not opts["fixed"]:
        allreduce_embedding()

    squares = torch.zeros(1)
    for name, (lo, hi) in ranges.items():
        a, b = max(lo, own_lo), min(hi, own_hi)
        if a >= b:
            continue
        trace.final(name, buf[a:b], flat=(a - lo, b - lo))
        if not (name == "embedding.weight" and not first):
            squares += buf[a:b].pow(2).sum()
    dist.all_reduce(squares)
    trace.grad_norm(math.sqrt(float(squares)))
    trace.close()


def reference(out, parallel_dir, opts):
    model = common.TinyLM(layers=[0, 1], tied=True)
    trace = common.token_mean_reference(
        out, parallel_dir, model, (common.chunk(i) for i in range(DP)))
    # The norm the parallel step should clip by: every element once.
    trace.grad_norm(math.sqrt(sum(float(p.grad.pow(2).sum())
                                  for p in model.parameters())))
    trace.close()


if __name__ == "__main__":
    common.main(4, parallel, reference)
