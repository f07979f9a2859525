#!/usr/bin/python3
"""HF transformers #34191 for real: gradient accumulation over uneven micro-batches.

    /usr/bin/python3 tests/trace/hf_34191.py OUT_DIR [--fixed]

One process (testdata/hf-34191.yaml's mesh is dp 1), 4 micro-batches of 2 x 8
token slots whose valid tokens are gradaudit's uneven counts, 15, 8, 10 and
12 (45 in the step).  Before the fix each micro-batch's loss is the model's,
the mean cross-entropy over that micro-batch's own valid tokens, divided by
the 4 accumulation steps: a mean of means.  --fixed sums the token losses
and divides by the valid tokens of the whole step
(testdata/hf-34191-fixed.yaml).

The hook records the gradient of the loss the code backpropagates, so each
micro-batch's contribution carries that code's loss factor: 1/(4*n_m) of
the summed token loss before the fix, 1/45 after.  gradaudit's atom g0m<m>
is the summed token loss over the chunk's 16 slots; so the contributions are
16/(4*n_m) times gradaudit's atoms (bug) or 16/45 times (fixed), and the
final gradient is their plain sum in both runs.  The reference runs the 8
samples as one batch through the same loss, the mean over its 45 valid
tokens: the objective, which the fixed run matches and the bug does not.
"""

import common

K = 4


def parallel(rank, world, out, opts):
    model = common.TinyLM(layers=[0])
    trace = common.Trace(out, mesh={"dp": 1}, coords={"dp": 0},
                         micro_batches=K)
    common.add_params(trace, model)
    trace.save_weights()
    chunks = [common.chunk(m, common.uneven_valid(m)) for m in range(K)]
    step_tokens = sum(int(mask.sum()) for _, _, mask in chunks)
    for m, (tokens, targets, mask) in enumerate(chunks):
        n = int(mask.sum())
        with trace.micro_batch(m, tokens=n):
            summed = (common.token_losses(model(tokens), targets) * mask).sum()
            if opts["fixed"]:
                loss = summed / step_tokens
            else:
                loss = summed / n / K
            loss.backward()
    trace.finals_from_grads()
    trace.close()


def reference(out, parallel_dir, opts):
    common.token_mean_reference(
        out, parallel_dir, common.TinyLM(layers=[0]),
        (common.chunk(m, common.uneven_valid(m)) for m in range(K))).close()


if __name__ == "__main__":
    common.main(1, parallel, reference)
