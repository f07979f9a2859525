#!/usr/bin/python3
"""Megatron-LM #1446 for real: dp 2 x tp 2 with sequence parallelism.

    /usr/bin/python3 tests/trace/megatron_1446.py OUT_DIR [--fixed]

Ranks in Megatron's order: rank = tp + 2*dp.  With sequence parallelism the
norms run on each tp rank's half of the sequence: their weights are
replicated over tp but each tp rank's gradient covers its own tokens only
(Partial).  finalize_model_grads sums over tp the gradients of the
parameters marked sequence_parallel (_allreduce_layernorm_grads), then
averages every gradient over dp.  The layers' norms are marked; the final
norm is not (TransformerEngine 1.13 to 2.1 set the mark before
self.sequence_parallel existed): so rank 0 holds (g0+g2)/2 of
final_norm.weight and rank 1 (g1+g3)/2, as `gradaudit check --param
final_norm.weight testdata/megatron-1446-final-norm.yaml` says, and the
layers' norms (g0+g1+g2+g3)/2.  --fixed marks the final norm too
(testdata/megatron-1446-final-norm-fixed.yaml).

The embedding is vocabulary-parallel and reduce-scattered into the sequence
shards, the mixer and MLP gather the sequence and are column- then
row-parallel, and the output layer is vocabulary-parallel after a gather of
the sequence.
"""

import common

MESH = {"dp": 2, "tp": 2}
SP_MARKED = {"layers.0.norm1.weight", "layers.0.norm2.weight"}


def parallel(rank, world, out, opts):
    coords = common.megatron_coords(rank, MESH)
    tp_group, _ = common.groups_over(MESH, ("tp",))
    dp_group, _ = common.groups_over(MESH, ("dp",))
    par = common.Par(tp_group, coords["tp"], MESH["tp"], sp=True)
    model = common.TinyLM(par, layers=[0])
    trace = common.Trace(out, mesh=MESH, coords=coords, micro_batches=1)
    common.add_params(trace, model)
    trace.save_weights()

    tokens, targets, mask = common.chunk(coords["dp"])
    with trace.micro_batch(0, tokens=int(mask.sum())):
        loss = (common.token_losses(model(tokens), targets) * mask).sum() / mask.sum()
        loss.backward()

    marked = SP_MARKED | ({"final_norm.weight"} if opts["fixed"] else set())
    common.all_reduce_grads(model, tp_group, names=marked)
    common.all_reduce_grads(model, dp_group, divide=MESH["dp"])
    trace.finals_from_grads()
    trace.close()


def reference(out, parallel_dir, opts):
    common.token_mean_reference(
        out, parallel_dir, common.TinyLM(layers=[0]),
        (common.chunk(i) for i in range(MESH["dp"]))).close()


if __name__ == "__main__":
    common.main(4, parallel, reference)
