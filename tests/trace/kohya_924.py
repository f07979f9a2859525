#!/usr/bin/python3
"""kohya-ss/sd-scripts #924: a DDP-wrapped model trained through its .module.

    /usr/bin/python3 tests/trace/kohya_924.py OUT_DIR [--fixed]

fine_tune.py (at 2a23713f71) let accelerate wrap its models in
DistributedDataParallel and then replaced each by its .module
(train_util.transform_if_model_is_DDP), so the training loop never called
DDP's forward, which readies the reducer for the backward: no gradient
was all-reduced, and each of the 4 ranks stepped with the mean loss of its
own batch.  --fixed calls the DDP module, as PR #989 (db845300) does: its
backward averages every gradient over the ranks.  Every token is valid and
each rank's loss is the mean over its own chunk, so a contribution is
gradaudit's atom under testdata/kohya-924-ddp-unwrapped.yaml's loss.
"""

from torch.nn.parallel import DistributedDataParallel

import common

WORLD = 4


def parallel(rank, world, out, opts):
    model = common.TinyLM(layers=[0])
    trace = common.Trace(out, mesh={"dp": WORLD}, coords={"dp": rank},
                         micro_batches=1)
    common.add_params(trace, model)
    trace.save_weights()
    ddp = DistributedDataParallel(model)
    # The bug: the loop holds the unwrapped module, as the script did.
    step_model = ddp if opts["fixed"] else ddp.module
    tokens, targets, mask = common.chunk(rank)
    with trace.micro_batch(0, tokens=int(mask.sum())):
        loss = (common.token_losses(step_model(tokens), targets) * mask).sum() / mask.sum()
        loss.backward()
    trace.finals_from_grads()
    trace.close()


def reference(out, parallel_dir, opts):
    common.token_mean_reference(
        out, parallel_dir, common.TinyLM(layers=[0]),
        (common.chunk(i) for i in range(WORLD))).close()


if __name__ == "__main__":
    common.main(WORLD, parallel, reference)
