"""What the real training steps of tests/trace/ share.

Each program there runs one training step of a tiny language model on W gloo
processes, traced with python/gradaudit_trace.py into OUT_DIR/parallel, then
the same global batch in one process from the weights that trace saved into
OUT_DIR/reference.  The model has gradaudit's default sizes (vocab 32,
hidden 8, ffn 16, 4 experts of 8, micro-batches of 2 x 8 token slots) and
its parameter names, so a trace's parameters are those of `gradaudit check`
on the testdata case the program reproduces; ranks are numbered as Megatron
numbers them (tp fastest, then cp, dp, pp).  Everything is float64 and
deterministic: the weights come from generators seeded by the parameter's
name, the data from generators seeded by the chunk's index.

Tensor parallelism is Megatron's: a vocabulary-parallel embedding and output
layer, column- then row-parallel MLPs, and with sequence parallelism the
norms on each tp rank's slice of the sequence.  Its collectives are autograd
functions that are the identity without a tp group, so the reference runs
the same code on one process.  Processes are forked and meet through a
file (init_method file://), so no port is used.
"""

import math
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import zlib

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, "python"))

from gradaudit_trace import Trace, read_trace  # noqa: E402,F401

VOCAB = 32
HIDDEN = 8
FFN = 16
SEQ = 8
MICRO_BATCH = 2
SLOTS = MICRO_BATCH * SEQ
EXPERTS = 4
TOP_K = 2
EXPERT_FFN = 8

ORDER = ("tp", "cp", "dp", "pp")


# --- ranks and groups --------------------------------------------------------

def megatron_coords(rank, mesh):
    """The coordinates of `rank` in Megatron's order (tp fastest)."""
    coords = {}
    for d in ORDER:
        n = mesh.get(d, 1)
        coords[d] = rank % n
        rank //= n
    return {d: c for d, c in coords.items() if d in mesh}


def groups_over(mesh, dims):
    """Create, on every rank in the same order, the groups of ranks that
    differ only along `dims`; return (group, ranks) of this rank's."""
    world = math.prod(mesh.values())
    members = {}
    for r in range(world):
        c = megatron_coords(r, mesh)
        key = tuple(c.get(d, 0) for d in ORDER if d not in dims)
        members.setdefault(key, []).append(r)
    mine = None
    me = dist.get_rank()
    for key in sorted(members):
        ranks = members[key]
        group = dist.new_group(ranks)
        if me in ranks:
            mine = (group, ranks)
    return mine


class Par:
    """A tensor-parallel group: rank `rank` of `size`, with sequence
    parallelism when `sp`.  Par() is no parallelism at all."""

    def __init__(self, group=None, rank=0, size=1, sp=False):
        self.group, self.rank, self.size, self.sp = group, rank, size, sp


NOPAR = Par()


def _all_reduce(x, par):
    y = x.clone()
    dist.all_reduce(y, group=par.group)
    return y


def _all_gather(x, par, dim):
    parts = [torch.empty_like(x) for _ in range(par.size)]
    dist.all_gather(parts, x.contiguous(), group=par.group)
    return torch.cat(parts, dim)


def _own(x, par, dim):
    n = x.shape[dim] // par.size
    return x.narrow(dim, par.rank * n, n).contiguous()


class _CopyToTP(torch.autograd.Function):
    """Forward: the identity; backward: sum over tp (Megatron's copy_to)."""

    @staticmethod
    def forward(ctx, x, par):
        ctx.par = par
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return _all_reduce(g, ctx.par), None


class _ReduceFromTP(torch.autograd.Function):
    """Forward: sum over tp; backward: the identity."""

    @staticmethod
    def forward(ctx, x, par):
        return _all_reduce(x, par)

    @staticmethod
    def backward(ctx, g):
        return g, None


class _GatherSeq(torch.autograd.Function):
    """Forward: all-gather the sequence; backward: reduce-scatter it."""

    @staticmethod
    def forward(ctx, x, par):
        ctx.par = par
        return _all_gather(x, par, 1)

    @staticmethod
    def backward(ctx, g):
        return _own(_all_reduce(g, ctx.par), ctx.par, 1), None


class _ReduceScatterSeq(torch.autograd.Function):
    """Forward: reduce-scatter the sequence; backward: all-gather it."""

    @staticmethod
    def forward(ctx, x, par):
        ctx.par = par
        return _own(_all_reduce(x, par), par, 1)

    @staticmethod
    def backward(ctx, g):
        return _all_gather(g, ctx.par, 1), None


class _GatherLast(torch.autograd.Function):
    """Forward: all-gather the last dimension (the vocabulary shards of the
    logits); backward: this rank's part (each tp rank computes the same loss
    from the whole logits)."""

    @staticmethod
    def forward(ctx, x, par):
        ctx.par = par
        return _all_gather(x, par, x.dim() - 1)

    @staticmethod
    def backward(ctx, g):
        return _own(g, ctx.par, g.dim() - 1), None


def _tp(fn, x, par):
    return x if par.size == 1 else fn.apply(x, par)


def copy_to(x, par):
    return _tp(_CopyToTP, x, par)


def reduce_from(x, par):
    return _tp(_ReduceFromTP, x, par)


def gather_seq(x, par):
    return _tp(_GatherSeq, x, par)


def reduce_scatter_seq(x, par):
    return _tp(_ReduceScatterSeq, x, par)


def gather_last(x, par):
    return _tp(_GatherLast, x, par)


# --- the model ---------------------------------------------------------------

def init_full(name, shape):
    """The logical value of a parameter: the same on every rank and run."""
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if name.endswith("norm.weight") or ".norm" in name:
        return 1 + 0.1 * x
    if name == "embedding.weight":
        return x
    return x / math.sqrt(shape[-1])


class Weight(nn.Module):
    """One parameter, `weight`: the box `box` at `offset` of the logical
    parameter `name` of shape `shape` (default: all of it)."""

    def __init__(self, name, shape, offset=None, box=None):
        super().__init__()
        offset = offset or [0] * len(shape)
        box = box or list(shape)
        full = init_full(name, shape)
        part = full[tuple(slice(o, o + b) for o, b in zip(offset, box))]
        self.weight = nn.Parameter(part.clone())
        self.trace_name, self.shape, self.offset = name, list(shape), offset


class Norm(Weight):
    def __init__(self, name):
        super().__init__(name, [HIDDEN])

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class MLP(nn.Module):
    """fc1 column-parallel, fc2 row-parallel over tp."""

    def __init__(self, prefix, par):
        super().__init__()
        n = FFN // par.size
        self.par = par
        self.fc1 = Weight(prefix + ".fc1.weight", [FFN, HIDDEN],
                          [par.rank * n, 0], [n, HIDDEN])
        self.fc2 = Weight(prefix + ".fc2.weight", [HIDDEN, FFN],
                          [0, par.rank * n], [HIDDEN, n])

    def forward(self, x):
        par = self.par
        x = gather_seq(x, par) if par.sp else copy_to(x, par)
        out = torch.tanh(x @ self.fc1.weight.t()) @ self.fc2.weight.t()
        return reduce_scatter_seq(out, par) if par.sp else reduce_from(out, par)


class MoE(nn.Module):
    """A router replicated over tp and the experts split over ep = tp (TP2EP,
    etp 1).  Each tp rank weights its own experts' outputs by their routing
    scores (score after the experts), and the outputs are summed over tp:
    so each tp rank's router gradient holds only its experts' share."""

    def __init__(self, prefix, par):
        super().__init__()
        assert not par.sp
        self.par = par
        self.router = Weight(prefix + ".router.weight", [EXPERTS, HIDDEN])
        e = EXPERTS // par.size
        self.first = par.rank * e
        self.experts = nn.Module()
        self.experts.fc1 = Weight(prefix + ".experts.fc1.weight",
                                  [EXPERTS, EXPERT_FFN, HIDDEN],
                                  [self.first, 0, 0], [e, EXPERT_FFN, HIDDEN])
        self.experts.fc2 = Weight(prefix + ".experts.fc2.weight",
                                  [EXPERTS, HIDDEN, EXPERT_FFN],
                                  [self.first, 0, 0], [e, HIDDEN, EXPERT_FFN])

    def forward(self, x):
        x = copy_to(x, self.par)
        scores = torch.softmax(x @ self.router.weight.t(), dim=-1)
        top, idx = scores.topk(TOP_K, dim=-1)
        out = torch.zeros_like(x)
        for j in range(self.experts.fc1.weight.shape[0]):
            weight = (top * (idx == self.first + j)).sum(-1, keepdim=True)
            h = torch.tanh(x @ self.experts.fc1.weight[j].t())
            out = out + weight * (h @ self.experts.fc2.weight[j].t())
        return reduce_from(out, self.par)


class Layer(nn.Module):
    def __init__(self, i, par, moe):
        super().__init__()
        p = "layers.%d" % i
        self.norm1 = Norm(p + ".norm1.weight")
        self.mixer = MLP(p + ".mixer", par)
        self.norm2 = Norm(p + ".norm2.weight")
        if moe:
            self.moe = MoE(p + ".moe", par)
        else:
            self.mlp = MLP(p + ".mlp", par)

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        ffn = self.moe if hasattr(self, "moe") else self.mlp
        return x + ffn(self.norm2(x))


class TinyLM(nn.Module):
    """The layers `layers` of the model, with the embedding when `first` and
    the final norm and output layer when `last` (a pipeline stage).  With
    `tied` the output layer is the embedding; on a last stage without the
    embedding it is a copy, traced as embedding.weight as gradaudit names
    it.  forward takes token ids on a first stage, hidden states otherwise,
    and returns the logits on a last stage, hidden states otherwise."""

    def __init__(self, par=NOPAR, layers=(0,), first=True, last=True,
                 moe=False, tied=False):
        super().__init__()
        self.par, self.first, self.last = par, first, last
        v = VOCAB // par.size
        if first:
            self.embedding = Weight("embedding.weight", [VOCAB, HIDDEN],
                                    [par.rank * v, 0], [v, HIDDEN])
        self.layers = nn.ModuleDict({str(i): Layer(i, par, moe) for i in layers})
        if last:
            self.final_norm = Norm("final_norm.weight")
            if tied and first:
                self.output = self.embedding
            else:
                self.output = Weight("embedding.weight" if tied else
                                     "output.weight", [VOCAB, HIDDEN],
                                     [par.rank * v, 0], [v, HIDDEN])

    def embed(self, tokens):
        par = self.par
        w = self.embedding.weight
        local = tokens - par.rank * w.shape[0]
        inside = ((local >= 0) & (local < w.shape[0])).unsqueeze(-1)
        e = w[local.clamp(0, w.shape[0] - 1)] * inside
        return reduce_scatter_seq(e, par) if par.sp else reduce_from(e, par)

    def forward(self, inp):
        h = self.embed(inp) if self.first else inp
        for layer in self.layers.values():
            h = layer(h)
        if not self.last:
            return h
        h = self.final_norm(h)
        h = gather_seq(h, self.par) if self.par.sp else copy_to(h, self.par)
        return gather_last(h @ self.output.weight.t(), self.par)


def traced(model):
    """(name, tensor, logical shape, offset) of every parameter, once."""
    seen = set()
    for m in model.modules():
        if isinstance(m, Weight) and id(m) not in seen:
            seen.add(id(m))
            yield m.trace_name, m.weight, m.shape, m.offset


def add_params(trace, model):
    for name, tensor, shape, offset in traced(model):
        trace.add_param(name, tensor, shape=shape, offset=offset)
    return trace


def token_losses(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           targets.reshape(-1),
                           reduction="none").reshape(targets.shape)


# --- data --------------------------------------------------------------------

def uneven_valid(i, slots=SLOTS):
    """gradaudit's valid tokens of chunk i with loss.valid_tokens: uneven."""
    return slots - (7 * i + 1) % (slots // 2 + 1)


def chunk(i, valid=SLOTS):
    """Chunk i (cp fastest, then dp, then the micro-batch, as gradaudit
    numbers them): token ids, targets and the mask of its valid tokens,
    which are its first `valid` slots."""
    g = torch.Generator().manual_seed(1000 + i)
    tokens = torch.randint(0, VOCAB, (MICRO_BATCH, SEQ), generator=g)
    targets = torch.randint(0, VOCAB, (MICRO_BATCH, SEQ), generator=g)
    mask = (torch.arange(SLOTS) < valid).to(torch.float64)
    return tokens, targets, mask.reshape(MICRO_BATCH, SEQ)


def batch(chunks):
    """Chunks side by side: the global batch of the reference."""
    parts = list(zip(*chunks))
    return tuple(torch.cat(p, 0) for p in parts)


def token_mean_reference(out, parallel_dir, model, chunks):
    """The one-process reference the programs share: `model` with the
    parallel step's weights, the chunks side by side as one micro-batch,
    its loss the mean over their valid tokens, and its gradients the
    finals.  Returns the trace still open, for the caller to close (after
    adding to it, as megatron_844.py adds the norm)."""
    trace = Trace(out, mode="reference", micro_batches=1)
    add_params(trace, model)
    trace.load_weights(model, parallel_dir)
    tokens, targets, mask = batch(chunks)
    with trace.micro_batch(0, tokens=int(mask.sum())):
        loss = (token_losses(model(tokens), targets) * mask).sum() / mask.sum()
        loss.backward()
    trace.finals_from_grads()
    return trace


# --- gradient synchronization helpers ---------------------------------------

def grads(model):
    return [(name, t.grad) for name, t, _, _ in traced(model)]


def all_reduce_grads(model, group, divide=1, names=None):
    for name, g in grads(model):
        if g is None or (names is not None and name not in names):
            continue
        dist.all_reduce(g, group=group)
        if divide != 1:
            g.div_(divide)


# --- running -----------------------------------------------------------------

def _rank_main(rank, world, rendezvous, fn, args):
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    dist.init_process_group("gloo", init_method="file://" + rendezvous,
                            rank=rank, world_size=world)
    try:
        fn(rank, world, *args)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def launch(world, fn, args=(), timeout=120):
    """Run fn(rank, world, *args) on `world` forked gloo processes."""
    tmpdir = tempfile.mkdtemp(prefix="gradaudit-trace-")
    rendezvous = os.path.join(tmpdir, "rendezvous")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_rank_main, name="rank-%d" % r,
                         args=(r, world, rendezvous, fn, args))
             for r in range(world)]
    failed = None
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        while failed is None:
            bad = [p for p in procs if p.exitcode not in (None, 0)]
            if bad:
                failed = "%s exited with %d" % (bad[0].name, bad[0].exitcode)
            elif all(p.exitcode == 0 for p in procs):
                break
            elif time.monotonic() > deadline:
                failed = "timed out after %d s" % timeout
            else:
                next(p for p in procs if p.exitcode is None).join(0.05)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()
        shutil.rmtree(tmpdir, ignore_errors=True)
    if failed:
        raise SystemExit("%s: %s" % (os.path.basename(sys.argv[0]), failed))


def main(world, parallel, reference, flags=("--fixed",)):
    """The command line of a program: PROGRAM OUT_DIR [FLAG...].  Runs
    parallel(rank, world, OUT_DIR/parallel, opts) on `world` processes, then
    reference(OUT_DIR/reference, OUT_DIR/parallel, opts) here; opts maps
    each flag without its dashes to whether it was given."""
    prog = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    given = [a for a in args if a.startswith("-")]
    rest = [a for a in args if not a.startswith("-")]
    if len(rest) != 1 or any(a not in flags for a in given):
        sys.stderr.write("usage: %s OUT_DIR%s\n"
                         % (prog, "".join(" [%s]" % f for f in flags)))
        sys.exit(2)
    opts = {f.lstrip("-"): f in given for f in flags}
    start = time.monotonic()
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    out = os.path.abspath(rest[0])
    par_dir = os.path.join(out, "parallel")
    ref_dir = os.path.join(out, "reference")
    for d in (par_dir, ref_dir):
        shutil.rmtree(d, ignore_errors=True)
    launch(world, parallel, (par_dir, opts))
    reference(ref_dir, par_dir, opts)
    print("%s%s: %s (%d ranks) and %s in %.2f s"
          % (prog, "".join(" " + f for f in given), par_dir, world, ref_dir,
             time.monotonic() - start))
