"""A traced DDP step for scripts/bench: 4 gloo processes train one step of
a float32 model of about PARAMS parameters (default 10 million), traced
with python/gradaudit_trace.py, then its one-process reference.  Prints
the step's wall time without and with the hook (the hook's cost: one
copy of every gradient per micro-batch) as two lines "untraced S" and
"traced S".

    /usr/bin/python3 scripts/bench-trace.py OUT_DIR [PARAMS]
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
from gradaudit_trace import Trace  # noqa: E402

WORLD = 4
BATCH = 8


def model(params):
    torch.manual_seed(0)
    width = max(1, int((params / 2) ** 0.5))
    return torch.nn.Sequential(torch.nn.Linear(width, width),
                               torch.nn.Linear(width, width))


def data(rank, width):
    return torch.randn(BATCH, width,
                       generator=torch.Generator().manual_seed(rank + 1))


def parallel(rank, out, params, init):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init,
                            rank=rank, world_size=WORLD)
    m = model(params)
    ddp = torch.nn.parallel.DistributedDataParallel(m)
    x = data(rank, m[0].in_features)
    times = []
    for _ in range(3):
        dist.barrier()
        t0 = time.monotonic()
        ddp(x).square().mean().backward()
        times.append(time.monotonic() - t0)
        m.zero_grad(set_to_none=True)
    trace = Trace(out, m.named_parameters(), mesh={"dp": WORLD},
                  coords={"dp": rank})
    trace.save_weights()
    dist.barrier()
    t0 = time.monotonic()
    with trace.micro_batch(0, tokens=BATCH):
        ddp(x).square().mean().backward()
    traced = time.monotonic() - t0
    trace.finals_from_grads()
    trace.close()
    if rank == 0:
        print("untraced %.3f" % sorted(times)[1])
        print("traced %.3f" % traced)
    dist.destroy_process_group()


def main():
    out = os.path.abspath(sys.argv[1])
    params = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
    init = os.path.join(out, "init")
    os.makedirs(out, exist_ok=True)
    if os.path.exists(init):
        os.remove(init)
    mp.spawn(parallel, args=(os.path.join(out, "parallel"), params, init),
             nprocs=WORLD)
    m = model(params)
    trace = Trace(os.path.join(out, "reference"), m.named_parameters(),
                  mode="reference")
    trace.load_weights(m, os.path.join(out, "parallel"))
    x = torch.cat([data(r, m[0].in_features) for r in range(WORLD)])
    with trace.micro_batch(0, tokens=BATCH * WORLD):
        m(x).square().mean().backward()
    trace.finals_from_grads()
    trace.close()


if __name__ == "__main__":
    main()
