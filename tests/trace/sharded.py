#!/usr/bin/python3
"""FSDP-style sharding (ZeRO-3) without torch's FSDP, on dp 3.

    /usr/bin/python3 tests/trace/sharded.py OUT_DIR [--bug]

Each dp rank keeps a flat shard of every parameter, torch FSDP's split: the
flattened parameter padded to a multiple of 3, rank r owning elements
[r*c, (r+1)*c) of it, c = ceil(numel/3), so the shards are uneven (the 8
elements of a norm split 3, 3, 2).  For the step the shards are
all-gathered into the whole parameters, forward and backward run on the
rank's own chunk, and each flattened gradient is reduce-scattered (gloo has
no reduce_scatter: all-reduce, then the own shard) and divided by 3: every
rank's shard holds (g0+g1+g2)/3, recorded as a flat range.  The weights too
are recorded as each rank's flat shard, which the reference assembles.
--bug forgets the division: (g0+g1+g2), three times the reference's;
--fixed is accepted and is the default, the correct step.

The last shard of a norm has 2 elements for 3 atoms: a least-squares fit of
that rank's final over the contributions alone is underdetermined there.
"""

import torch
import torch.distributed as dist

import common

DP = 3


def shard_range(numel, rank):
    c = -(-numel // DP)
    return min(rank * c, numel), min((rank + 1) * c, numel), c


def parallel(rank, world, out, opts):
    model = common.TinyLM(layers=[0])
    params = [(name, t) for name, t, _, _ in common.traced(model)]
    shards = {}
    with torch.no_grad():
        for name, t in params:
            lo, hi, _ = shard_range(t.numel(), rank)
            shards[name] = t.reshape(-1)[lo:hi].clone()
            t.zero_()            # only the shard is kept between steps
    trace = common.Trace(out, mesh={"dp": DP}, coords={"dp": rank},
                         micro_batches=1)
    common.add_params(trace, model)
    for name, t in params:
        lo, hi, _ = shard_range(t.numel(), rank)
        trace.weight(name, shards[name], flat=(lo, hi))

    with torch.no_grad():                      # unshard
        for name, t in params:
            _, _, c = shard_range(t.numel(), rank)
            mine = torch.zeros(c)
            mine[:shards[name].numel()] = shards[name]
            parts = [torch.empty(c) for _ in range(DP)]
            dist.all_gather(parts, mine)
            t.copy_(torch.cat(parts)[:t.numel()].reshape(t.shape))

    tokens, targets, mask = common.chunk(rank)
    with trace.micro_batch(0, tokens=int(mask.sum())):
        loss = (common.token_losses(model(tokens), targets) * mask).sum() / mask.sum()
        loss.backward()

    for name, t in params:                      # reduce-scatter
        lo, hi, c = shard_range(t.numel(), rank)
        flat = torch.zeros(c * DP)
        flat[:t.numel()] = t.grad.reshape(-1)
        dist.all_reduce(flat)
        if not opts["bug"]:
            flat /= DP
        trace.final(name, flat[lo:hi], flat=(lo, hi))
    trace.close()


def reference(out, parallel_dir, opts):
    common.token_mean_reference(
        out, parallel_dir, common.TinyLM(layers=[0]),
        (common.chunk(i) for i in range(DP))).close()


if __name__ == "__main__":
    common.main(DP, parallel, reference, flags=("--bug", "--fixed"))
