#!/usr/bin/python3
"""torchtitan #2416, case 1 (TP2EP, etp 1) for real: dp 2 x tp 2.

    /usr/bin/python3 tests/trace/torchtitan_2416.py OUT_DIR [--fixed]

Ranks in Megatron's order: rank = tp + 2*dp.  One MoE layer: the router's
gate is replicated over tp and the four experts are split over ep = tp, two
on each tp rank.  Each tp rank weights only its own experts' outputs by
their routing scores (score after the experts), and the outputs are summed
over tp; so the gradient of the scores, and with it the router weight's, is
Partial over tp: each tp rank holds its experts' share.  Before the fix the
gate was NoParallel(), declared Replicate, and its gradient was never
reduced over tp: rank 0 ends with (g0+g2)/2 after the data-parallel average,
as `gradaudit check --param layers.0.moe.router.weight
testdata/torchtitan-2416-tp2ep.yaml` says.  --fixed all-reduces the router's
weight gradient over tp before the data-parallel average
(testdata/torchtitan-2416-tp2ep-fixed.yaml): (g0+g1+g2+g3)/2 everywhere.

torchtitan's own fix reduces the scores' gradient over tp inside backward,
before the router's weight gradient exists: the hook would then see the
reduced gradient on both tp ranks, and the trace's atoms would not be the
per-rank shares gradaudit's expressions are made of.  Reducing the weight's
gradient after backward gives the same final gradient with those atoms.

The rest is Megatron-style tensor parallelism without sequence parallelism
(vocabulary-parallel embedding and output, column- then row-parallel
mixer); every gradient is averaged over dp (the experts' over edp = dp).
"""

import common

MESH = {"dp": 2, "tp": 2}
ROUTER = "layers.0.moe.router.weight"


def parallel(rank, world, out, opts):
    coords = common.megatron_coords(rank, MESH)
    tp_group, _ = common.groups_over(MESH, ("tp",))
    dp_group, _ = common.groups_over(MESH, ("dp",))
    par = common.Par(tp_group, coords["tp"], MESH["tp"])
    model = common.TinyLM(par, layers=[0], moe=True)
    trace = common.Trace(out, mesh=MESH, coords=coords, micro_batches=1)
    common.add_params(trace, model)
    trace.save_weights()

    tokens, targets, mask = common.chunk(coords["dp"])
    with trace.micro_batch(0, tokens=int(mask.sum())):
        loss = (common.token_losses(model(tokens), targets) * mask).sum() / mask.sum()
        loss.backward()

    if opts["fixed"]:
        common.all_reduce_grads(model, tp_group, names={ROUTER})
    common.all_reduce_grads(model, dp_group, divide=MESH["dp"])
    trace.finals_from_grads()
    trace.close()


def reference(out, parallel_dir, opts):
    common.token_mean_reference(
        out, parallel_dir, common.TinyLM(layers=[0], moe=True),
        (common.chunk(i) for i in range(MESH["dp"]))).close()


if __name__ == "__main__":
    common.main(4, parallel, reference)
