"""Record one real training step for `gradaudit compare` (trace format version 1).

A trace is a directory with one safetensors file per rank and a manifest.json
(the format is described in gradaudit's trace specification).  A *parallel*
trace is written by every rank of the real job; a *reference* trace by one
process that runs the same global batch without parallelism, from the
weights the parallel trace saved.  This module needs the standard library and
torch only; `make install` puts it in $(pkgdatadir)/python (by default
/usr/local/share/gradaudit/python), for a script's sys.path.

Usage, in the training script of every rank (after init_process_group)::

    from gradaudit_trace import Trace

    trace = Trace("trace/parallel", model.named_parameters(),
                  mesh={"dp": 2, "tp": 2}, coords={"dp": dp_rank, "tp": tp_rank})
    # or mesh="megatron" (after Megatron's initialize_model_parallel), or
    # mesh, coords = device_mesh_coords(world_mesh) with torchtitan's
    trace.add_param("output.weight", shard, shape=[32, 8], offset=[16, 0])
    trace.save_weights()                      # before the optimizer steps
    for m, batch in enumerate(micro_batches):
        with trace.micro_batch(m, tokens=valid_tokens(batch)):
            loss_of(batch).backward()
    ...  # the job's own gradient synchronization
    trace.finals_from_grads()                 # or trace.final(name, tensor, ...)
    trace.grad_norm(norm, clip_coef)
    trace.close()

and in one process, for the reference::

    trace = Trace("trace/reference", model.named_parameters(), mode="reference")
    trace.load_weights(model, "trace/parallel")
    with trace.micro_batch(0, tokens=n):
        loss_of(global_batch).backward()
    trace.finals_from_grads()
    trace.close()

API

Trace(out_dir, params, *, mode="parallel", rank=None, world=None, step=None,
      coords=None, mesh=None, micro_batches=None, reference_of=None)
    params: an iterable of (name, tensor) pairs or a dict, registered with
    add_param's defaults.  rank and world default to torch.distributed's (0
    and 1 without it; a reference trace is always rank 0 of 1).  step is the
    step id: by default rank 0 of a parallel trace makes a uuid4 hex and
    broadcasts it (torch.distributed.broadcast_object_list), so the
    constructor is a collective there.  mesh: sizes of the mesh dimensions
    (dp, pp, tp, cp, ep, etp): dp x pp x tp x cp must be the world size (ep
    and etp regroup those ranks for the experts); coords: this rank's
    coordinates in it, in Megatron's order (tp fastest, then cp, dp, pp).
    mesh="megatron" takes both from megatron_mesh() (coords if not given).
    micro_batches: how many the step runs (default: one more than the
    highest seen).  reference_of: the parallel trace's step id
    (load_weights reads it).  Without torch.distributed a parallel trace of
    several ranks needs rank, world and step, and rank 0 must be closed
    last: it writes the manifest.

megatron_mesh() -> (mesh, coords)
    This rank's from Megatron-LM's megatron.core.parallel_state, once it is
    initialized: dp is the pure data-parallel size (without cp); ep and etp
    only when they regroup the ranks otherwise than tp does (ep > 1 or an
    etp other than tp).  ValueError if Megatron is not importable, not
    initialized, or has gtp_remat ranks (no dimension here).
device_mesh_coords(device_mesh, rank=None) -> (mesh, coords)
    The same from a torch DeviceMesh's mesh_dim_names, sizes and
    get_coordinate() (or the rank's place in device_mesh.mesh), with
    torchtitan's names: pp, dp, cp, tp, ep, etp, and dp_replicate x
    dp_shard joined into dp (dp = replicate * dp_shard + shard).  A
    flattened one (dp, batch, fsdp, dp_shard_cp, dp_cp, loss) is skipped
    when the mesh also has its parts; any other name, or a flattened one
    that cannot be split, raises ValueError.

add_param(name, tensor, shape=None, offset=None)
    Trace a parameter whose local tensor is `tensor`, the box of the logical
    (unsharded) parameter of shape `shape` starting at `offset` (defaults:
    the local shape, zeros).  For a DTensor (torch.distributed._tensor, or
    any object with to_local(), placements and device_mesh) both are derived
    from its Shard(d)/Replicate/Partial placements and its device mesh, with
    torch.chunk's split of uneven dimensions.  Registers a gradient hook
    (tensor.register_hook), which runs when the parameter's gradient has been
    computed: before it is accumulated into .grad, before DDP's reducer and
    before any collective the script runs afterwards.  A tied weight is one
    parameter: register it once.

micro_batch(m, tokens=None)    (a context manager)
    The gradients computed inside belong to micro-batch m (0-based): each
    hook call adds grad.detach().clone() to contrib[m][name], so that
    several calls are summed (autograd already sums the two uses of a tied
    weight within one graph; separate backward passes, such as a pipeline's
    two stages on one rank or a second loss, call the hook again).  This
    costs one extra copy of every traced gradient per micro-batch, held
    until close().  tokens: the micro-batch's valid tokens (give them for
    all micro-batches or none).  A gradient outside any micro_batch block
    raises ValueError.  The same m may be entered again (a pipeline
    schedule's separate backward).  A contribution is the gradient of the
    loss the script backpropagates, so it carries that loss's factors (a
    1/micro-batches for accumulation, a division by a token count): with
    gradaudit's atoms (a chunk's summed token loss over its token slots) it
    agrees only where those factors are 1/slots.  A sparse gradient
    (nn.Embedding(sparse=True)) is stored dense, as is a sparse final.

final(name, tensor, offset=None, box=None, flat=None)
    The gradient this rank holds for `name` when the optimizer steps: the
    whole local box (default: the registered one), or with flat=(lo, hi) the
    1-D elements [lo, hi) of the box flattened row-major (a distributed
    optimizer's or FSDP's flat shard).  A DTensor gives its own placement.
finals_from_grads()
    final() of p.grad for every registered parameter that has a gradient and
    no final yet (a DTensor gradient: its local shard and placement).
weight(name, tensor, offset=None, box=None, flat=None)
    Record a piece of the parameter's value, placed as in final() (parallel
    mode); save_weights() records every registered tensor whole.
grad_norm(norm, clip_coef=None)
    The gradient norm the step used, and its clipping coefficient.
load_weights(model_or_params, from_dir)
    Reference mode: assemble each parameter's logical tensor from the
    "weight/<name>" pieces of every rank of the parallel trace in from_dir,
    check the shapes and that every element is covered, copy it into the
    model's tensor (a module's named_parameters(), a dict or (name, tensor)
    pairs); sets reference_of to that trace's step id.
close()
    Write OUT_DIR/rank-R.safetensors, then barrier, then rank 0 writes
    OUT_DIR/manifest.json.  Removes the hooks.  A Trace is also a context
    manager that closes on a normal exit.

read_trace(dir) -> {"manifest": {...}, "ranks": [{"meta": {...}, "tensors":
    {key: tensor}}, ...]}, and read_safetensors(path) -> (tensors, metadata),
write_safetensors(path, tensors, metadata) read and write the files.
assemble(pieces, shape) places (tensor, meta) pieces into a logical tensor
    and says which elements they cover; dtensor_placement(t, rank) is the
    (logical shape, offset, box) add_param derives from a DTensor.

Tensors are stored little-endian, in the dtype recorded (float32, float64,
bfloat16 or float16); the manifest's dtype is the widest one of the
gradients.  Mistakes the caller can make (unknown parameter, wrong shapes,
a gradient outside a micro-batch, a second final) raise ValueError.
"""

import contextlib
import ctypes
import importlib
import json
import math
import os
import struct
import sys
import uuid
import warnings

import torch

__all__ = ["Trace", "read_trace", "read_safetensors", "write_safetensors",
           "assemble", "dtensor_placement", "megatron_mesh",
           "device_mesh_coords", "FORMAT", "VERSION"]

FORMAT = "gradaudit-trace"
VERSION = 1
MESH_DIMS = ("dp", "pp", "tp", "cp", "ep", "etp")

_CODES = {torch.float32: "F32", torch.float64: "F64",
          torch.bfloat16: "BF16", torch.float16: "F16"}
_DTYPES = {code: dtype for dtype, code in _CODES.items()}
_NAMES = {"F32": "float32", "F64": "float64", "BF16": "bfloat16",
          "F16": "float16"}
_WIDTH = {"F64": 3, "F32": 2, "BF16": 1, "F16": 0}


def _little_endian():
    if sys.byteorder != "little":
        raise RuntimeError("gradaudit_trace: traces are little-endian and "
                           "this host is not; not supported")


# --- safetensors -----------------------------------------------------------

def _tensor_bytes(t):
    t = t.detach().to("cpu").contiguous()
    if t.dtype not in _CODES:
        raise ValueError("cannot store a tensor of dtype %s (float32, "
                         "float64, bfloat16 or float16)" % t.dtype)
    n = t.numel() * t.element_size()
    if n == 0:
        return b""
    return ctypes.string_at(t.data_ptr(), n)


def write_safetensors(path, tensors, metadata=None):
    """Write {key: tensor} and {str: str} metadata as a safetensors file."""
    _little_endian()
    header = {}
    blobs = []
    offset = 0
    for key in sorted(tensors):
        t = tensors[key]
        data = _tensor_bytes(t)
        header[key] = {"dtype": _CODES[t.dtype], "shape": list(t.shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        for k, v in metadata.items():
            if not isinstance(v, str):
                raise ValueError("safetensors metadata values are strings: "
                                 "%r is not" % (k,))
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)
    os.replace(tmp, path)


def read_safetensors(path):
    """Read a safetensors file: ({key: tensor}, {str: str} metadata)."""
    _little_endian()
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: too short for a safetensors file" % path)
    (n,) = struct.unpack_from("<Q", raw, 0)
    if 8 + n > len(raw):
        raise ValueError("%s: header of %d bytes runs past the end" % (path, n))
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError("%s: header is not JSON: %s" % (path, e))
    base = 8 + n
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    spans = []
    for key, entry in header.items():
        code = entry.get("dtype")
        if code not in _DTYPES:
            raise ValueError("%s: %s: unsupported dtype %r" % (path, key, code))
        dtype = _DTYPES[code]
        shape = [int(d) for d in entry["shape"]]
        begin, end = (int(x) for x in entry["data_offsets"])
        size = math.prod(shape) * torch.tensor([], dtype=dtype).element_size()
        if end - begin != size or begin < 0 or base + end > len(raw):
            raise ValueError("%s: %s: data_offsets %r do not hold shape %r"
                             % (path, key, [begin, end], shape))
        spans.append((begin, end))
        if size == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(raw[base + begin:base + end]),
                                 dtype=dtype).reshape(shape)
        tensors[key] = t
    at = 0
    for begin, end in sorted(spans):
        if begin != at:
            raise ValueError("%s: the data has a hole or an overlap at byte %d"
                             % (path, at))
        at = end
    if base + at != len(raw):
        raise ValueError("%s: %d bytes after the last tensor"
                         % (path, len(raw) - base - at))
    return tensors, metadata


def read_trace(directory):
    """Read a trace directory: its manifest and every rank's file."""
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise ValueError("%s: not a %s version %d manifest"
                         % (directory, FORMAT, VERSION))
    files = manifest["files"]
    if len(files) != manifest["world"]:
        raise ValueError("%s: %d files for a world of %d"
                         % (directory, len(files), manifest["world"]))
    ranks = []
    for r, name in enumerate(files):
        tensors, metadata = read_safetensors(os.path.join(directory, name))
        meta = json.loads(metadata.get("gradaudit", "null"))
        if not isinstance(meta, dict) or meta.get("rank") != r:
            raise ValueError("%s: %s is not rank %d's file" % (directory, name, r))
        ranks.append({"meta": meta, "tensors": tensors})
    return {"manifest": manifest, "ranks": ranks}


def assemble(pieces, shape, dtype=None):
    """Place pieces into a logical tensor of `shape`.

    pieces: (tensor, meta) pairs, meta with "offset", "box" and optionally
    "flat" as in the trace.  Returns (values, covered, disagree): covered
    is a bool tensor of the elements some piece set; where pieces overlap,
    the first one wins, and disagree counts the elements where a later
    piece holds another value."""
    shape = [int(d) for d in shape]
    numel = math.prod(shape)
    if dtype is None:
        dtype = pieces[0][0].dtype if pieces else torch.float64
    out = torch.zeros(numel, dtype=dtype)
    covered = torch.zeros(numel, dtype=torch.bool)
    index = torch.arange(numel).reshape(shape)
    disagree = 0
    for t, meta in pieces:
        offset, box = meta["offset"], meta["box"]
        sl = tuple(slice(o, o + b) for o, b in zip(offset, box))
        idx = index[sl].reshape(-1)
        if "flat" in meta:
            lo, hi = meta["flat"]
            idx = idx[lo:hi]
        vals = t.reshape(-1).to(dtype)
        if vals.numel() != idx.numel():
            raise ValueError("a piece of %d elements for a place of %d"
                             % (vals.numel(), idx.numel()))
        seen = covered[idx]
        if bool(seen.any()):
            disagree += int((out[idx][seen] != vals[seen]).sum())
        fresh = ~seen
        out[idx[fresh]] = vals[fresh]
        covered[idx] = True
    return out.reshape(shape), covered.reshape(shape), disagree


# --- DTensor ---------------------------------------------------------------

def _is_dtensor(t):
    return (hasattr(t, "to_local") and hasattr(t, "placements")
            and hasattr(t, "device_mesh"))


def _local(t):
    return t.to_local() if _is_dtensor(t) else t


def _dense(t):
    """t, or its dense value if it is sparse (nn.Embedding(sparse=True))."""
    return t.to_dense() if getattr(t, "is_sparse", False) else t


def _placement_kind(p):
    for kind in ("shard", "replicate", "partial"):
        test = getattr(p, "is_" + kind, None)
        if callable(test) and test():
            return kind
    name = type(p).__name__.lower()
    for kind in ("shard", "replicate", "partial"):
        if kind in name:
            return kind
    raise ValueError("unknown DTensor placement %r" % (p,))


def _mesh_coordinate(mesh, rank, ask=True):
    get = getattr(mesh, "get_coordinate", None) if ask else None
    if callable(get):
        coord = get()
        if coord is not None:
            return [int(c) for c in coord]
    ranks = mesh.mesh
    where = (ranks == rank).nonzero()
    if where.numel() == 0:
        raise ValueError("rank %d is not in the device mesh" % rank)
    return [int(c) for c in where[0]]


def _mesh_sizes(mesh):
    if hasattr(mesh, "mesh"):
        return [int(s) for s in mesh.mesh.shape]
    return [int(s) for s in mesh.shape]


def dtensor_placement(t, rank=None):
    """(logical shape, offset, box) of a DTensor's local tensor."""
    if rank is None:
        rank = _dist_rank()
    shape = [int(d) for d in t.shape]
    placements = list(t.placements)
    sizes = _mesh_sizes(t.device_mesh)
    if len(sizes) != len(placements):
        raise ValueError("a DTensor with %d placements on a %d-dimensional "
                         "mesh" % (len(placements), len(sizes)))
    coord = _mesh_coordinate(t.device_mesh, rank)
    offset = [0] * len(shape)
    box = list(shape)
    for mesh_dim, p in enumerate(placements):
        if _placement_kind(p) != "shard":
            continue
        d = int(p.dim)
        if d < 0:
            d += len(shape)
        if not 0 <= d < len(shape):
            raise ValueError("Shard(%d) of a %d-dimensional tensor"
                             % (p.dim, len(shape)))
        k = sizes[mesh_dim]
        chunk = -(-box[d] // k)
        start = min(coord[mesh_dim] * chunk, box[d])
        offset[d] += start
        box[d] = max(0, min(chunk, box[d] - start))
    local = list(_local(t).shape)
    if local != box:
        raise ValueError("DTensor local shape %r is not the shard %r that its "
                         "placements give" % (local, box))
    return shape, offset, box


# --- torch.distributed -----------------------------------------------------

def _dist():
    d = getattr(torch, "distributed", None)
    if d is not None and d.is_available() and d.is_initialized():
        return d
    return None


def _dist_rank():
    d = _dist()
    return d.get_rank() if d else 0


def _ints(v, what):
    try:
        out = [int(x) for x in v]
    except TypeError:
        raise ValueError("%s must be a list of integers, not %r" % (what, v))
    if any(x != y for x, y in zip(out, v)):
        raise ValueError("%s must be a list of integers, not %r" % (what, v))
    return out


# --- the mesh, from Megatron or a DeviceMesh ---------------------------------

def megatron_mesh():
    """(mesh, coords) of this rank from megatron.core.parallel_state."""
    try:
        ps = importlib.import_module("megatron.core.parallel_state")
    except ImportError as e:
        raise ValueError("no Megatron mesh: cannot import "
                         "megatron.core.parallel_state (%s)" % e) from None
    if not ps.model_parallel_is_initialized():
        raise ValueError("no Megatron mesh: parallel_state is not initialized "
                         "(initialize_model_parallel has not run)")

    def get(what, default=(1, 0)):
        size = getattr(ps, "get_%s_world_size" % what, None)
        rank = getattr(ps, "get_%s_rank" % what, None)
        return default if size is None or rank is None else (size(), rank())

    tp = get("tensor_model_parallel")
    pp = get("pipeline_model_parallel")
    cp = get("context_parallel")            # absent before context parallelism
    try:
        dp = (ps.get_data_parallel_world_size(with_context_parallel=False),
              ps.get_data_parallel_rank(with_context_parallel=False))
    except TypeError:
        # No with_context_parallel argument: before context parallelism the
        # group is the pure dp; in the weeks between (Megatron 80590f9894 to
        # 2a552cfbf7, 2023) it held the cp ranks too, cp fastest.
        dp = ps.get_data_parallel_world_size(), ps.get_data_parallel_rank()
        dp = dp[0] // cp[0], dp[1] // cp[0]
    if get("gtp_weight_remat")[0] > 1:
        raise ValueError("Megatron's gtp_remat ranks have no dimension in "
                         "gradaudit's mesh")
    dims = {"dp": dp, "pp": pp, "tp": tp, "cp": cp}
    ep = get("expert_model_parallel")
    etp = get("expert_tensor_parallel", (None, None))
    # Unset, Megatron's etp is the tp; the expert dims are worth recording
    # only when they regroup the ranks otherwise.
    etp = (etp[0] or tp[0], tp[1] if etp[1] is None else etp[1])
    if ep[0] > 1 or etp[0] != tp[0]:
        dims.update(ep=ep, etp=etp)
    return ({k: int(v[0]) for k, v in dims.items()},
            {k: int(v[1]) for k, v in dims.items()})


# DeviceMesh dimension names (torchtitan's) and the dimensions they span;
# one that spans several is a flattened one.
_DEVICE_DIMS = {
    "pp": ("pp",), "tp": ("tp",), "cp": ("cp",), "ep": ("ep",),
    "etp": ("etp",), "dp_replicate": ("dp_replicate",),
    "dp_shard": ("dp_shard",), "dp": ("dp_replicate", "dp_shard"),
    "batch": ("dp_replicate", "dp_shard"), "fsdp": ("dp_shard", "cp"),
    "dp_shard_cp": ("dp_shard", "cp"),
    "dp_cp": ("dp_replicate", "dp_shard", "cp"),
    "loss": ("dp_replicate", "dp_shard", "cp")}


def device_mesh_coords(device_mesh, rank=None):
    """(mesh, coords) of `rank` (default: this one) in a named DeviceMesh."""
    names = list(getattr(device_mesh, "mesh_dim_names", None) or ())
    sizes = _mesh_sizes(device_mesh)
    if len(names) != len(sizes):
        raise ValueError("the device mesh needs mesh_dim_names, one for "
                         "each of its %d dimensions" % len(sizes))
    for name in names:
        if name not in _DEVICE_DIMS:
            raise ValueError("cannot map device mesh dimension %r to "
                             "gradaudit's (%s)" % (name, ", ".join(MESH_DIMS)))
    # get_coordinate() answers for this process only: another rank is
    # looked up in the mesh.
    coord = _mesh_coordinate(device_mesh, _dist_rank() if rank is None
                             else rank, ask=rank is None)
    got = {}
    for name, size, c in zip(names, sizes, coord):
        spans = _DEVICE_DIMS[name]
        finer = {d for n in names if len(_DEVICE_DIMS[n]) < len(spans)
                 for d in _DEVICE_DIMS[n]}
        if set(spans) <= finer:
            continue                # flattened from others in the mesh
        if name in ("dp", "batch"):
            spans = ("dp",)
        elif len(spans) > 1:
            if size == 1:
                continue
            raise ValueError("device mesh dimension %r flattens %s; give the "
                             "mesh with them apart"
                             % (name, " x ".join(spans)))
        got[spans[0]] = (size, c)
    if "dp_replicate" in got or "dp_shard" in got:
        r, rc = got.pop("dp_replicate", (1, 0))
        s, sc = got.pop("dp_shard", (1, 0))
        got["dp"] = (r * s, rc * s + sc)    # replicate the slower
    return ({k: v[0] for k, v in got.items()},
            {k: v[1] for k, v in got.items()})


class _Param:
    __slots__ = ("name", "tensor", "shape", "offset", "box", "handle")


class Trace:
    """One rank's record of one training step; see the module docstring."""

    def __init__(self, out_dir, params=(), *, mode="parallel", rank=None,
                 world=None, step=None, coords=None, mesh=None,
                 micro_batches=None, reference_of=None):
        if mode not in ("parallel", "reference"):
            raise ValueError("mode must be 'parallel' or 'reference', not %r"
                             % (mode,))
        self.mode = mode
        self.out_dir = os.fspath(out_dir)
        d = _dist()
        if mode == "reference":
            if (rank or 0) != 0 or (world or 1) != 1:
                raise ValueError("a reference trace is one process: rank 0 "
                                 "of world 1")
            rank, world = 0, 1
        else:
            if rank is None:
                rank = d.get_rank() if d else 0
            if world is None:
                world = d.get_world_size() if d else 1
        if not isinstance(world, int) or world < 1:
            raise ValueError("world must be a positive integer, not %r" % (world,))
        if not isinstance(rank, int) or not 0 <= rank < world:
            raise ValueError("rank %r is not in 0..%d" % (rank, world - 1))
        if d and mode == "parallel" and (rank != d.get_rank()
                                         or world != d.get_world_size()):
            raise ValueError("rank %d of %d is not torch.distributed's %d of %d"
                             % (rank, world, d.get_rank(), d.get_world_size()))
        self.rank, self.world = rank, world
        self._collective = d is not None and mode == "parallel" and world > 1
        if isinstance(mesh, str):
            if mesh != "megatron":
                raise ValueError("mesh is a dict of sizes or \"megatron\", "
                                 "not %r" % (mesh,))
            mesh, found = megatron_mesh()
            coords = found if coords is None else coords
        self.mesh = self._check_mesh(mesh)
        self.coords = self._check_coords(coords)
        if micro_batches is not None and (not isinstance(micro_batches, int)
                                          or micro_batches < 1):
            raise ValueError("micro_batches must be a positive integer, not %r"
                             % (micro_batches,))
        self.micro_batches = micro_batches
        if reference_of is not None and mode != "reference":
            raise ValueError("reference_of is for a reference trace")
        self.reference_of = reference_of
        if step is None:
            if world > 1 and not self._collective:
                raise ValueError("without torch.distributed, a parallel trace "
                                 "of %d ranks needs the step id" % world)
            step = uuid.uuid4().hex if rank == 0 else None
            if self._collective:
                box = [step]
                d.broadcast_object_list(box, src=0)
                step = box[0]
        if not isinstance(step, str) or not step:
            raise ValueError("step must be a non-empty string, not %r" % (step,))
        self.step = step
        self._params = {}
        self._by_tensor = {}
        self._contrib = {}
        self._tokens = {}
        self._finals = {}
        self._weights = {}
        self._norm = None
        self._clip = None
        self._mb = None
        self._closed = False
        items = params.items() if isinstance(params, dict) else params
        for name, tensor in items:
            self.add_param(name, tensor)

    # -- set-up --

    def _check_mesh(self, mesh):
        if mesh is None:
            return None
        mesh = dict(mesh)
        for k, v in mesh.items():
            if k not in MESH_DIMS:
                raise ValueError("unknown mesh dimension %r (%s)"
                                 % (k, ", ".join(MESH_DIMS)))
            if not isinstance(v, int) or v < 1:
                raise ValueError("mesh size %s=%r is not a positive integer"
                                 % (k, v))
        # ep and etp regroup the dense ranks; they add none (as compare reads).
        n = math.prod(mesh.get(k, 1) for k in ("dp", "pp", "tp", "cp"))
        if n != self.world:
            raise ValueError("the mesh %r has %d ranks, the world %d"
                             % (mesh, n, self.world))
        return mesh

    def _check_coords(self, coords):
        if coords is None:
            return None
        coords = dict(coords)
        for k, v in coords.items():
            if k not in MESH_DIMS:
                raise ValueError("unknown mesh dimension %r in coords" % (k,))
            size = self.mesh.get(k, 1) if self.mesh is not None else None
            if not isinstance(v, int) or v < 0 or (size is not None
                                                   and v >= size):
                raise ValueError("coordinate %s=%r is outside the mesh %r"
                                 % (k, v, self.mesh))
        return coords

    def _open(self):
        if self._closed:
            raise ValueError("the trace is closed")

    def add_param(self, name, tensor, shape=None, offset=None):
        """Trace parameter `name`, whose local tensor is `tensor`."""
        self._open()
        if not isinstance(name, str) or not name:
            raise ValueError("a parameter name must be a non-empty string")
        if name in self._params:
            raise ValueError("parameter %r is registered twice" % name)
        if id(tensor) in self._by_tensor:
            raise ValueError("%r is the tensor already registered as %r: a "
                             "tied weight is one parameter, register it once"
                             % (name, self._by_tensor[id(tensor)]))
        local = _local(tensor)
        if not isinstance(local, torch.Tensor):
            raise ValueError("parameter %r is not a tensor" % name)
        if not tensor.requires_grad:
            raise ValueError("parameter %r does not require grad: it has no "
                             "gradient to trace" % name)
        box = list(local.shape)
        if _is_dtensor(tensor) and shape is None and offset is None:
            shape, offset, box = dtensor_placement(tensor, self.rank)
        shape = box if shape is None else _ints(shape, "shape of %s" % name)
        offset = ([0] * len(box) if offset is None
                  else _ints(offset, "offset of %s" % name))
        self._check_box(name, shape, offset, box)
        p = _Param()
        p.name, p.tensor = name, tensor
        p.shape, p.offset, p.box = shape, offset, box
        p.handle = tensor.register_hook(self._hook(p))
        self._params[name] = p
        self._by_tensor[id(tensor)] = name
        return self

    @staticmethod
    def _check_box(name, shape, offset, box):
        if not (len(shape) == len(offset) == len(box)):
            raise ValueError("%s: shape %r, offset %r and box %r differ in "
                             "rank" % (name, shape, offset, box))
        for s, o, b in zip(shape, offset, box):
            if s < 0 or o < 0 or b < 0 or o + b > s:
                raise ValueError("%s: the box %r at offset %r does not fit "
                                 "in the logical shape %r"
                                 % (name, box, offset, shape))

    def _hook(self, p):
        def hook(grad):
            m = self._mb
            if m is None:
                raise ValueError("gradient of %r outside a micro_batch block "
                                 "(wrap each backward in `with "
                                 "trace.micro_batch(m):`)" % p.name)
            g = _dense(_local(grad).detach())
            if list(g.shape) != p.box:
                raise ValueError("gradient of %r has shape %r, its tensor %r"
                                 % (p.name, list(g.shape), p.box))
            slot = self._contrib.setdefault(m, {})
            if p.name in slot:
                slot[p.name].add_(g)
            else:
                slot[p.name] = g.clone(memory_format=torch.contiguous_format)
            return None
        return hook

    @contextlib.contextmanager
    def micro_batch(self, m, tokens=None):
        """Attribute the gradients computed inside to micro-batch m."""
        self._open()
        if self._mb is not None:
            raise ValueError("micro_batch(%r) inside micro_batch(%r)"
                             % (m, self._mb))
        if not isinstance(m, int) or m < 0:
            raise ValueError("a micro-batch is a non-negative integer, not %r"
                             % (m,))
        if self.micro_batches is not None and m >= self.micro_batches:
            raise ValueError("micro-batch %d of a step of %d" % (m,
                             self.micro_batches))
        if tokens is not None:
            if not isinstance(tokens, int) or tokens < 0:
                raise ValueError("tokens must be a non-negative integer, not %r"
                                 % (tokens,))
            if self._tokens.get(m, tokens) != tokens:
                raise ValueError("micro-batch %d had %d tokens, now %d"
                                 % (m, self._tokens[m], tokens))
            self._tokens[m] = tokens
        self._contrib.setdefault(m, {})
        self._mb = m
        try:
            yield self
        finally:
            self._mb = None

    # -- what the step did --

    def _place(self, name, tensor, offset, box, flat, what):
        p = self._params.get(name)
        if p is None:
            raise ValueError("%s of unknown parameter %r (registered: %s)"
                             % (what, name, ", ".join(self._params) or "none"))
        if _is_dtensor(tensor):
            if offset is None and box is None and flat is None:
                _, offset, box = dtensor_placement(tensor, self.rank)
            tensor = tensor.to_local()
        if not isinstance(tensor, torch.Tensor):
            raise ValueError("%s of %r is not a tensor" % (what, name))
        tensor = _dense(tensor)
        if tensor.dtype not in _CODES:
            raise ValueError("%s of %r has dtype %s (float32, float64, "
                             "bfloat16 or float16)" % (what, name, tensor.dtype))
        shape = list(tensor.shape)
        if box is None:
            box = p.box if flat is not None else shape
        box = _ints(box, "box of %s" % name)
        if offset is None:
            if box != p.box:
                raise ValueError("%s of %r: a box %r other than the "
                                 "registered %r needs its offset"
                                 % (what, name, box, p.box))
            offset = p.offset
        offset = _ints(offset, "offset of %s" % name)
        self._check_box(name, p.shape, offset, box)
        meta = {"param": name, "offset": offset, "box": box}
        if flat is not None:
            lo, hi = _ints(flat, "flat range of %s" % name)
            if not 0 <= lo <= hi <= math.prod(box):
                raise ValueError("%s of %r: flat range [%d,%d) outside the "
                                 "box %r of %d elements"
                                 % (what, name, lo, hi, box, math.prod(box)))
            if shape != [hi - lo]:
                raise ValueError("%s of %r: flat range [%d,%d) needs a 1-D "
                                 "tensor of %d elements, not shape %r"
                                 % (what, name, lo, hi, hi - lo, shape))
            meta["flat"] = [lo, hi]
        elif shape != box:
            raise ValueError("%s of %r has shape %r, its box %r"
                             % (what, name, shape, box))
        value = tensor.detach().clone(memory_format=torch.contiguous_format)
        return value, meta

    def final(self, name, tensor, offset=None, box=None, flat=None):
        """The gradient of `name` this rank holds when the optimizer steps."""
        self._open()
        if name in self._finals:
            raise ValueError("a second final of %r" % name)
        self._finals[name] = self._place(name, tensor, offset, box, flat,
                                         "final")
        return self

    def finals_from_grads(self):
        """final() of .grad of every registered parameter without a final."""
        for name, p in self._params.items():
            if name in self._finals:
                continue
            g = p.tensor.grad
            if g is not None:
                self.final(name, g)
        return self

    def weight(self, name, tensor, offset=None, box=None, flat=None):
        """Record a piece of the value of `name` (parallel mode)."""
        self._open()
        if self.mode != "parallel":
            raise ValueError("weights are recorded by a parallel trace")
        if name in self._weights:
            raise ValueError("a second weight piece of %r" % name)
        self._weights[name] = self._place(name, tensor, offset, box, flat,
                                          "weight")
        return self

    def save_weights(self):
        """Record every registered parameter's local value."""
        for name, p in self._params.items():
            self.weight(name, p.tensor)
        return self

    def grad_norm(self, norm, clip_coef=None):
        """The gradient norm the step used (and its clipping coefficient)."""
        self._open()
        self._norm = float(norm)
        self._clip = None if clip_coef is None else float(clip_coef)
        return self

    def load_weights(self, model_or_params, from_dir):
        """Reference mode: load every parameter from a parallel trace."""
        self._open()
        if self.mode != "reference":
            raise ValueError("load_weights is for a reference trace")
        data = read_trace(from_dir)
        manifest = data["manifest"]
        if manifest["mode"] != "parallel":
            raise ValueError("%s is a %s trace, not a parallel one"
                             % (from_dir, manifest["mode"]))
        if self.reference_of not in (None, manifest["step"]):
            raise ValueError("reference_of %r, but %s is step %r"
                             % (self.reference_of, from_dir, manifest["step"]))
        if hasattr(model_or_params, "named_parameters"):
            targets = list(model_or_params.named_parameters())
        elif isinstance(model_or_params, dict):
            targets = list(model_or_params.items())
        else:
            targets = list(model_or_params)
        for name, tensor in targets:
            pieces = []
            shape = None
            for r, rank in enumerate(data["ranks"]):
                meta = rank["meta"]
                key = "weight/" + name
                if key not in rank["tensors"]:
                    continue
                s = meta["params"][name]["shape"]
                if shape is not None and s != shape:
                    raise ValueError("%s: rank %d gives %r the shape %r, an "
                                     "earlier rank %r" % (from_dir, r, name, s,
                                                          shape))
                shape = s
                pieces.append((rank["tensors"][key], meta["tensors"][key]))
            if not pieces:
                raise ValueError("%s has no weight of %r" % (from_dir, name))
            if list(tensor.shape) != shape:
                raise ValueError("%r has shape %r here and %r in %s"
                                 % (name, list(tensor.shape), shape, from_dir))
            values, covered, disagree = assemble(pieces, shape, tensor.dtype)
            if not bool(covered.all()):
                raise ValueError("the weight pieces of %r in %s cover %d of "
                                 "its %d elements" % (name, from_dir,
                                                      int(covered.sum()),
                                                      covered.numel()))
            if disagree:
                warnings.warn("%s: the ranks' copies of %r differ in %d "
                              "elements; loaded the lowest rank's"
                              % (from_dir, name, disagree))
            with torch.no_grad():
                tensor.copy_(values)
        self.reference_of = manifest["step"]
        return self

    # -- output --

    def _metadata(self, k):
        tensors = {}
        for m, slot in sorted(self._contrib.items()):
            for name, g in slot.items():
                p = self._params[name]
                tensors["contrib/%d/%s" % (m, name)] = (g, {
                    "param": name, "kind": "contrib", "mb": m,
                    "offset": p.offset, "box": p.box})
        for kind, table in (("final", self._finals), ("weight", self._weights)):
            for name, (value, meta) in table.items():
                tensors["%s/%s" % (kind, name)] = (value, dict(meta, kind=kind))
        meta = {"rank": self.rank, "world": self.world, "step": self.step,
                "mode": self.mode, "micro_batches": k}
        if self.coords is not None:
            meta["coords"] = self.coords
        if self._tokens:
            missing = [m for m in range(k) if m not in self._tokens]
            if missing:
                raise ValueError("tokens given for some micro-batches but not "
                                 "for %s" % missing)
            meta["tokens"] = [self._tokens[m] for m in range(k)]
        if self._norm is not None:
            meta["grad_norm"] = self._norm
            if self._clip is not None:
                meta["clip_coef"] = self._clip
        meta["params"] = {n: {"shape": p.shape} for n, p in self._params.items()}
        meta["tensors"] = {key: m for key, (_, m) in tensors.items()}
        return meta, {key: t for key, (t, _) in tensors.items()}

    def _dtype(self):
        codes = [_CODES[t.dtype] for slot in self._contrib.values()
                 for t in slot.values()]
        codes += [_CODES[v.dtype] for v, _ in self._finals.values()]
        if not codes:
            codes = [_CODES.get(_local(p.tensor).dtype, "F32")
                     for p in self._params.values()] or ["F32"]
        return _NAMES[max(codes, key=_WIDTH.get)]

    def close(self):
        """Write this rank's file; rank 0 writes the manifest after a barrier."""
        self._open()
        if self._mb is not None:
            raise ValueError("close() inside micro_batch(%d)" % self._mb)
        if self.mode == "reference" and self.reference_of is None:
            raise ValueError("a reference trace needs reference_of: call "
                             "load_weights or pass it")
        seen = [m for m, slot in self._contrib.items()]
        k = self.micro_batches
        if k is None:
            k = max(seen) + 1 if seen else 1
        meta, tensors = self._metadata(k)
        for p in self._params.values():
            p.handle.remove()
        self._closed = True
        os.makedirs(self.out_dir, exist_ok=True)
        name = "rank-%d.safetensors" % self.rank
        write_safetensors(os.path.join(self.out_dir, name), tensors,
                          {"gradaudit": json.dumps(meta, sort_keys=True)})
        if self._collective:
            _dist().barrier()
        if self.rank != 0:
            return
        files = ["rank-%d.safetensors" % r for r in range(self.world)]
        for f in files:
            if not os.path.exists(os.path.join(self.out_dir, f)):
                raise ValueError("%s has no %s: close rank 0 last"
                                 % (self.out_dir, f))
        manifest = {"format": FORMAT, "version": VERSION, "mode": self.mode,
                    "step": self.step}
        if self.mode == "reference":
            manifest["reference_of"] = self.reference_of
        manifest.update({"world": self.world, "micro_batches": k,
                         "dtype": self._dtype()})
        if self.mesh is not None:
            manifest["mesh"] = self.mesh
        manifest["files"] = files
        path = os.path.join(self.out_dir, "manifest.json")
        tmp = "%s.tmp%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None and not self._closed:
            self.close()
        return False
