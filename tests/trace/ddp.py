#!/usr/bin/python3
"""torch DistributedDataParallel with gradient accumulation, on 2 ranks.

    /usr/bin/python3 tests/trace/ddp.py OUT_DIR [--fixed]

Two micro-batches per step, each loss the mean over the micro-batch's tokens
divided by 2.  DDP all-reduces (and averages) .grad in the backward that runs
outside no_sync(), so that must be the last micro-batch's.  Without --fixed
no_sync() sits on the wrong micro-batch, the last one: the first
micro-batch's gradient is averaged over the ranks, the last one's stays
local, and rank r holds (c0m0+c1m0)/2 + c<r>m1 (c: the trace's
contributions).  --fixed puts no_sync() on the first micro-batch: every rank
holds (c0m0+c0m1+c1m0+c1m1)/2, which the reference (the 4 chunks as one
batch, mean over their tokens) holds too.  With every token valid each
contribution is half gradaudit's atom (the chunk's summed loss over its 16
slots): the loss's 1/2 for the accumulation.
"""

import contextlib

from torch.nn.parallel import DistributedDataParallel

import common

WORLD = 2
K = 2


def parallel(rank, world, out, opts):
    model = common.TinyLM(layers=[0])
    trace = common.Trace(out, mesh={"dp": WORLD}, coords={"dp": rank},
                         micro_batches=K)
    common.add_params(trace, model)
    trace.save_weights()
    ddp = DistributedDataParallel(model)
    unsynced = 0 if opts["fixed"] else K - 1
    for m in range(K):
        tokens, targets, mask = common.chunk(rank + WORLD * m)
        sync = ddp.no_sync() if m == unsynced else contextlib.nullcontext()
        with sync, trace.micro_batch(m, tokens=int(mask.sum())):
            loss = (common.token_losses(ddp(tokens), targets) * mask).sum() / mask.sum() / K
            loss.backward()
    trace.finals_from_grads()
    trace.close()


def reference(out, parallel_dir, opts):
    common.token_mean_reference(
        out, parallel_dir, common.TinyLM(layers=[0]),
        (common.chunk(i) for i in range(WORLD * K))).close()


if __name__ == "__main__":
    common.main(WORLD, parallel, reference)
