#!/usr/bin/env python3
"""Write a small gradaudit trace and its reference, for the tests.

    python3 tests/trace/mktrace.py [--dp D] [--tp T] [--micro-batches K]
        [--dtype F32|F64] [--ref-dtype F32|F64] [--ulp-copies] [--sparse]
        [--seed S] [--bug NAME] [--defect NAME] OUT

writes OUT/parallel (D x T ranks, tp fastest as Megatron numbers them) and
OUT/reference (one rank), in the format of gradaudit-trace(5).  The step
synchronizes three parameters the ways real jobs do, so that compare sees
each kind of final:

  embedding.weight [4T, W]  vocabulary-parallel: each tp rank holds a box of
                            4 rows, averaged over dp (a tp-box final);
  layer.weight [5, 2W]      sequence-parallel contributions summed over tp
                            and averaged over dp, each dp rank holding a
                            flat range of it (the distributed optimizer);
  norm.weight [3W]          tp copies of one computation, averaged over dp,
                            held whole on every rank;

W is D x T x K, so that every region has more elements than contributions
(fewer could not be fitted).

--ref-dtype writes the reference in another dtype than the step (a reference
run without the step's default dtype).  --ulp-copies makes the tp copies of
norm.weight differ from tp rank 0's in the last bit of every third element,
as copies computed by kernels that sum in another order do: they are then
not identical, only nearly.  --sparse makes W 40 times larger, so that
compare fits a sample of each region's elements, and rank 0's micro-batch 0
contribution to layer.weight zero but on elements 1001 and 1003, as an
embedding row that one micro-batch's tokens alone touch.

--bug makes the step wrong (missing, double, noise, huge, overflow,
unowned, speck, small, local, block, clip);
--defect makes the trace itself bad (see DEFECTS), for gradaudit compare
to refuse with exit 2.
Standard library only: this is a test fixture, not the trace hook.
"""

import argparse
import json
import os
import random
import struct
import sys

STEP = "5f1e0c3a9b7d4e2f8a6c1b0d3e5f7a9c"
PACK = {"F32": "f", "F64": "d"}
NAMES = {"F32": "float32", "F64": "float64"}


class Rank:
    """One rank file: the gradaudit metadata and the tensors, in order."""

    def __init__(self, meta):
        self.meta = meta
        self.tensors = []       # [key, dtype, shape, values]
        self.meta["tensors"] = {}

    def add(self, key, desc, dtype, shape, values):
        self.meta["tensors"][key] = desc
        self.tensors.append([key, dtype, shape, values])

    def find(self, key):
        return next(t for t in self.tensors if t[0] == key)


class Trace:
    def __init__(self, manifest):
        self.manifest = manifest
        self.ranks = []


def box_values(rng, n):
    return [rng.uniform(-1, 1) for _ in range(n)]


def rounded(dtype, values):
    """values as stored: float32 rounds, float64 keeps them."""
    fmt = "<%d%s" % (len(values), PACK[dtype])
    return list(struct.unpack(fmt, struct.pack(fmt, *values)))


def next_up(dtype, v):
    """The next value of dtype above v (v finite and stored in dtype)."""
    code = {"F32": ("<f", "<i"), "F64": ("<d", "<q")}[dtype]
    bits = struct.unpack(code[1], struct.pack(code[0], v))[0]
    bits += 1 if v >= 0 else -1
    if v == 0:
        bits = 1
    return struct.unpack(code[0], struct.pack(code[1], bits))[0]


def combine(terms):
    """sum of coef * vector over (coef, vector) pairs."""
    out = [0.0] * len(terms[0][1])
    for coef, vec in terms:
        for i, v in enumerate(vec):
            out[i] += coef * v
    return out


def make_step(args):
    """The parallel trace and its reference, correct unless args.bug."""
    dp, tp, k, dt = args.dp, args.tp, args.micro_batches, args.dtype
    world = dp * tp
    rng = random.Random(args.seed)
    w = world * k * (40 if args.sparse else 1)
    shapes = {"embedding.weight": [4 * tp, w], "layer.weight": [5, 2 * w],
              "norm.weight": [3 * w]}
    boxes = [{"embedding.weight": ([4 * t, 0], [4, w]),
              "layer.weight": ([0, 0], [5, 2 * w]),
              "norm.weight": ([0], [3 * w])} for t in range(tp)]
    size = {name: box[0] * (box[1] if len(box) > 1 else 1)
            for name, (_, box) in boxes[0].items()}

    # Contributions: contrib[name][rank][mb], as stored.
    contrib = {name: [[None] * k for _ in range(world)] for name in shapes}
    for r in range(world):
        for m in range(k):
            for name in ("embedding.weight", "layer.weight"):
                contrib[name][r][m] = rounded(dt, box_values(rng, size[name]))
            # The tp ranks compute one value: copies of rank tp 0's.
            contrib["norm.weight"][r][m] = (
                rounded(dt, box_values(rng, size["norm.weight"]))
                if r % tp == 0
                else contrib["norm.weight"][r - r % tp][m])
            if r % tp != 0 and args.ulp_copies:
                contrib["norm.weight"][r][m] = [
                    next_up(dt, v) if i % 3 == 0 else v
                    for i, v in enumerate(contrib["norm.weight"][r][m])]

    if args.sparse:
        contrib["layer.weight"][0][0] = [
            v if i in (1001, 1003) else 0.0
            for i, v in enumerate(contrib["layer.weight"][0][0])]

    def rank(d, t):
        return d * tp + t

    def mean_dp(name, t, ranks_of=None):
        return combine([(1.0 / dp, contrib[name][rank(d, u)][m])
                        for d in range(dp) for u in (ranks_of or [t])
                        for m in range(k)])

    emb = [mean_dp("embedding.weight", t) for t in range(tp)]
    layer = mean_dp("layer.weight", 0, range(tp))
    norms = mean_dp("norm.weight", 0)
    cuts = [size["layer.weight"] * d // dp for d in range(dp + 1)]

    par = Trace({"format": "gradaudit-trace", "version": 1,
                 "mode": "parallel", "step": STEP, "world": world,
                 "micro_batches": k, "dtype": NAMES[dt],
                 "mesh": {"dp": dp, "tp": tp}})
    ref_norm = sum(v * v for vec in emb + [layer, norms] for v in vec) ** 0.5
    for d in range(dp):
        for t in range(tp):
            r = rank(d, t)
            rk = Rank({"rank": r, "world": world, "step": STEP,
                       "mode": "parallel", "micro_batches": k,
                       "coords": {"dp": d, "tp": t},
                       "tokens": [8] * k, "grad_norm": ref_norm,
                       "clip_coef": min(1.0, 1.0 / (ref_norm + 1e-6)),
                       "params": {n: {"shape": s}
                                  for n, s in shapes.items()}})
            for m in range(k):
                for name, (off, box) in boxes[t].items():
                    rk.add("contrib/%d/%s" % (m, name),
                           {"param": name, "kind": "contrib", "mb": m,
                            "offset": off, "box": box},
                           dt, box, contrib[name][r][m])
            lo, hi = cuts[d], cuts[d + 1]
            finals = {"embedding.weight": (emb[t], None),
                      "layer.weight": (layer[lo:hi], [lo, hi]),
                      "norm.weight": (norms, None)}
            gathered = args.bug == "block" and tp > 1
            if gathered:
                # The embedding all-gathered over tp: each rank holds it
                # whole, a box its contributions cover only in part, and
                # tp rank 1's rows summed over dp, never averaged.
                finals["embedding.weight"] = ([
                    v * (dp if u == 1 else 1) for u in range(tp)
                    for v in emb[u]], None)
            for name, (values, flat) in finals.items():
                off, box = boxes[t][name]
                if gathered and name == "embedding.weight":
                    off, box = [0, 0], shapes[name]
                desc = {"param": name, "kind": "final", "offset": off,
                        "box": box}
                if flat is not None:
                    desc["flat"] = flat
                rk.add("final/" + name, desc, dt,
                       box if flat is None else [hi - lo],
                       rounded(dt, values))
            for name, (off, box) in boxes[t].items():
                rk.add("weight/" + name, {"param": name, "kind": "weight",
                                          "offset": off, "box": box},
                       dt, box, rounded(dt, box_values(rng, size[name])))
            par.ranks.append(rk)
    lo, hi = cuts[dp - 1], cuts[dp]
    if args.bug == "missing" and dp > 1 and lo < hi:
        # Megatron-LM #844's shape: the last shard misses rank 0's share.
        rk = par.ranks[-1]
        gone = combine([(1.0 / dp, contrib["layer.weight"][0][m])
                        for m in range(k)])
        rk.find("final/layer.weight")[3] = rounded(dt, [
            v - g for v, g in zip(layer[lo:hi], gone[lo:hi])])
    elif args.bug == "unowned" and dp > 1:
        # Rank 0 steps with the whole layer.weight, as a distributed
        # optimizer's buffer after its reduce-scatter: its own shard
        # reduced, the rest only its own dp rank's contributions.  Its
        # final then has two expressions, split where rank tp's shard
        # (another rank's final) starts inside it.
        own = combine([(1.0 / dp, contrib["layer.weight"][u][m])
                       for u in range(tp) for m in range(k)])
        x = par.ranks[0].find("final/layer.weight")
        x[2] = boxes[0]["layer.weight"][1]
        x[3] = rounded(dt, layer[:cuts[1]] + own[cuts[1]:])
        del par.ranks[0].meta["tensors"]["final/layer.weight"]["flat"]
    elif args.bug == "clip":
        # Rank 1 clipped by another coefficient than the others.
        par.ranks[1].meta["clip_coef"] *= 2
    elif args.bug == "small":
        # One element of rank 0's norm.weight off by 1e-4 of the largest:
        # ten times float32's value tolerance, far under a gross bug's.
        x = par.ranks[0].find("final/norm.weight")
        x[3][1] += 1e-4 * max(abs(v) for v in x[3])
        x[3] = rounded(dt, x[3])
    elif args.bug == "speck":
        # One element of rank 0's layer.weight off by a tenth of the
        # largest value: an odd element, which the strided sample of a
        # --sparse trace skips, so only the residual over every element
        # can refuse the expression that fits the sample.
        x = par.ranks[0].find("final/layer.weight")
        x[3][1999 % len(x[3])] += 0.1 * max(abs(v) for v in x[3])
        x[3] = rounded(dt, x[3])
    elif args.bug == "local":
        # Never all-reduced: each rank steps with the mean of its own
        # tokens, dp times its share of the reference's mean
        # (kohya-ss/sd-scripts #924).
        for d in range(dp):
            for t in range(tp):
                x = par.ranks[rank(d, t)].find("final/embedding.weight")
                x[3] = rounded(dt, combine([
                    (1.0, contrib["embedding.weight"][rank(d, t)][m])
                    for m in range(k)]))
    elif args.bug == "double":
        # Summed over dp and never averaged.
        for rk in par.ranks:
            x = rk.find("final/embedding.weight")
            x[3] = rounded(dt, [dp * v for v in x[3]])
    elif args.bug == "noise":
        # Something outside the recorded contributions touched it.
        x = par.ranks[0].find("final/norm.weight")
        x[3] = rounded(dt, [v + 0.25 * (i % 2) for i, v in enumerate(x[3])])
    elif args.bug == "huge":
        # Finite, but its square is not: the fit must not pass on a NaN.
        x = par.ranks[0].find("final/norm.weight")
        x[3][0] = 1e300 if dt == "F64" else 3e38
    elif args.bug == "overflow":
        # A step diverged on one element, against a reference of small
        # gradients: both finite, the relative difference is not.
        x = par.ranks[0].find("final/norm.weight")
        x[3][0] = 1e300 if dt == "F64" else 3e38

    rdt = args.ref_dtype or dt
    ref = Trace({"format": "gradaudit-trace", "version": 1,
                 "mode": "reference", "step": "ref-" + STEP,
                 "reference_of": STEP, "world": 1, "micro_batches": 1,
                 "dtype": NAMES[rdt], "files": ["rank-0.safetensors"]})
    rk = Rank({"rank": 0, "world": 1, "step": "ref-" + STEP,
               "mode": "reference", "micro_batches": 1,
               "grad_norm": ref_norm,
               "clip_coef": min(1.0, 1.0 / (ref_norm + 1e-6)),
               "params": {n: {"shape": s} for n, s in shapes.items()}})
    whole = {"embedding.weight": [v for box in emb for v in box],
             "layer.weight": layer, "norm.weight": norms}
    for name, values in whole.items():
        rk.add("final/" + name, {"param": name, "kind": "final",
                                 "offset": [0] * len(shapes[name]),
                                 "box": shapes[name]},
               rdt, shapes[name], rounded(rdt, values))
    if args.bug == "overflow":
        # The reference's gradients of --bug overflow (above) are small.
        x = rk.find("final/norm.weight")
        x[3] = rounded(rdt, [1e-10 * v for v in x[3]])
    ref.ranks.append(rk)
    return par, ref


def encode(rank):
    """The header (a dict) and the data of a rank file."""
    header, data = {}, b""
    for key, dtype, shape, values in rank.tensors:
        blob = struct.pack("<%d%s" % (len(values), PACK.get(dtype, "f")),
                           *values)
        header[key] = {"dtype": dtype, "shape": shape,
                       "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    header["__metadata__"] = {"gradaudit": json.dumps(rank.meta)}
    return header, data


def header_bytes(header):
    raw = json.dumps(header).encode()
    return raw + b" " * (-len(raw) % 8)


def write(trace, out, hack=None):
    """Write trace to directory out; hack(index, header, data) may edit."""
    os.makedirs(out, exist_ok=True)
    files = []
    for r, rank in enumerate(trace.ranks):
        header, data = encode(rank)
        raw = header_bytes(header)
        if hack is not None:
            raw, data = hack(r, raw, data)
        name = "rank-%d.safetensors" % r
        with open(os.path.join(out, name), "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw + data)
        files.append(name)
    manifest = dict(trace.manifest)
    manifest.setdefault("files", files)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


# The defects: NAME -> (what it does, a function of (par, ref) that edits
# them before writing, a function of the directories run after).


def tensor_desc(trace, rank, key):
    return trace.ranks[rank].meta["tensors"][key]


def set_value(trace, rank, key, i, v):
    trace.ranks[rank].find(key)[3][i] = v


def rank_path(out, r=1):
    return os.path.join(out, "parallel", "rank-%d.safetensors" % r)


def truncate(path, size):
    with open(path, "r+b") as f:
        f.truncate(size)


def header_len(path):
    with open(path, "rb") as f:
        return struct.unpack("<Q", f.read(8))[0]


def after_missing_rank(out):
    os.remove(rank_path(out))


def after_truncated_header(out):
    truncate(rank_path(out), 8 + header_len(rank_path(out)) // 2)


def after_truncated_data(out):
    truncate(rank_path(out), os.path.getsize(rank_path(out)) - 4)


def after_header_length(out):
    path = rank_path(out)
    with open(path, "r+b") as f:
        f.write(struct.pack("<Q", os.path.getsize(path)))


def after_manifest_json(out):
    path = os.path.join(out, "parallel", "manifest.json")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace('"version": 1,', '"version": 1', 1))


def after_manifest_duplicate(out):
    # "world" written twice, the same both times: JSON parsers differ on
    # duplicate keys (most keep the later one), so a trace is refused.
    path = os.path.join(out, "parallel", "manifest.json")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace('"world": 4,', '"world": 4,\n "world": 4,', 1))


def after_manifest_fifo(out):
    path = os.path.join(out, "parallel", "manifest.json")
    os.remove(path)
    os.mkfifo(path)


def after_rank_dir(out):
    os.remove(rank_path(out))
    os.mkdir(rank_path(out))


def after_rank_fifo(out):
    os.remove(rank_path(out))
    os.mkfifo(rank_path(out))


def hack_header_json(r, raw, data):
    # A ':' turned into ';' inside the header object.
    return (raw.replace(b'"dtype":', b'"dtype";', 1) if r == 1 else raw,
            data)


def hack_key_newline(r, raw, data):
    # A header key with a newline (JSON's \n) that the metadata lacks.
    if r != 1:
        return raw, data
    raw = raw.replace(b'"final/norm.weight": {', b'"final/norm\\nweight": {',
                      1)
    return header_bytes(json.loads(raw)), data


def hack_header_duplicate(r, raw, data):
    # A tensor's header entry written twice, alike.
    if r != 1:
        return raw, data
    header = json.loads(raw)
    again = header["final/norm.weight"]
    text = json.dumps(header)
    text = text[:-1] + ', "final/norm.weight": ' + json.dumps(again) + "}"
    return text.encode() + b" " * (-len(text) % 8), data


def hack_metadata_duplicate(r, raw, data):
    # The gradaudit metadata (a JSON string in the header) giving "rank"
    # twice, alike.
    if r != 1:
        return raw, data
    header = json.loads(raw)
    meta = header["__metadata__"]["gradaudit"]
    header["__metadata__"]["gradaudit"] = meta.replace('"rank": 1,',
                                                       '"rank": 1, "rank": 1,',
                                                       1)
    return header_bytes(header), data


def hack_offsets(r, raw, data):
    if r != 1:
        return raw, data
    header = json.loads(raw)
    header["final/norm.weight"]["data_offsets"][1] = len(data) + 8
    return header_bytes(header), data


def edit_shape_box(par, ref):
    x = par.ranks[1].find("final/embedding.weight")
    x[2] = [2, len(x[3]) // 2]


def edit_dtype(par, ref):
    par.ranks[1].find("final/norm.weight")[1] = "I32"


def edit_step(par, ref):
    par.ranks[1].meta["step"] = "0" * 32


def edit_ref_step(par, ref):
    ref.manifest["reference_of"] = "0" * 32


def edit_ref_param(par, ref):
    rk = ref.ranks[0]
    del rk.meta["params"]["norm.weight"]
    del rk.meta["tensors"]["final/norm.weight"]
    rk.tensors = [t for t in rk.tensors if t[0] != "final/norm.weight"]


def edit_ref_shape(par, ref):
    rk = ref.ranks[0]
    x = rk.find("final/norm.weight")
    shape = [3, len(x[3]) // 3]
    rk.meta["params"]["norm.weight"]["shape"] = shape
    rk.meta["tensors"]["final/norm.weight"].update(offset=[0, 0], box=shape)
    x[2] = shape


def edit_ref_part(par, ref):
    # The reference holds the first half of norm.weight only.
    rk = ref.ranks[0]
    x = rk.find("final/norm.weight")
    half = len(x[3]) // 2
    x[2], x[3] = [half], x[3][:half]
    rk.meta["tensors"]["final/norm.weight"]["flat"] = [0, half]


def edit_ref_mode(par, ref):
    ref.manifest["mode"] = "parallel"
    del ref.manifest["reference_of"]


def edit_world_files(par, ref):
    par.manifest["files"] = ["rank-%d.safetensors" % r
                             for r in range(len(par.ranks) - 1)]


def edit_manifest_dtype(par, ref):
    # A dtype gradaudit-trace(5) does not list: not what the hook wrote.
    par.manifest["dtype"] = "int8"


def edit_mesh(par, ref):
    par.manifest["mesh"] = {"dp": par.manifest["world"], "tp": 2}


def edit_mb(par, ref):
    tensor_desc(par, 1, "contrib/0/layer.weight")["mb"] = \
        par.manifest["micro_batches"]


def edit_overlap(par, ref):
    # A second piece of the rank's embedding box, one row lower: the
    # rows they share would be held twice.
    rk = par.ranks[1]
    desc = dict(tensor_desc(par, 1, "final/embedding.weight"))
    desc["offset"] = [desc["offset"][0] + 1, 0]
    desc["box"] = [1, desc["box"][1]]
    rk.add("final/embedding.weight.piece", desc, rk.find(
        "final/embedding.weight")[1], desc["box"], [0.5] * desc["box"][1])


def edit_missing_final(par, ref):
    # The last dp rank's shard of layer.weight held by none of its ranks.
    tp = par.manifest["mesh"]["tp"]
    for rk in par.ranks[-tp:]:
        rk.tensors = [t for t in rk.tensors if t[0] != "final/layer.weight"]
        del rk.meta["tensors"]["final/layer.weight"]


def nonfinite(kind, v):
    key = {"contrib": "contrib/0/layer.weight", "final": "final/norm.weight"}

    def edit(par, ref):
        set_value(par, 1, key[kind], 2, v)
    return edit


DEFECTS = {
    "missing-rank": (None, after_missing_rank, None),
    "truncated-header": (None, after_truncated_header, None),
    "truncated-data": (None, after_truncated_data, None),
    "header-length": (None, after_header_length, None),
    "manifest-json": (None, after_manifest_json, None),
    "manifest-fifo": (None, after_manifest_fifo, None),
    "manifest-duplicate": (None, after_manifest_duplicate, None),
    "header-duplicate": (None, None, hack_header_duplicate),
    "metadata-duplicate": (None, None, hack_metadata_duplicate),
    "header-json": (None, None, hack_header_json),
    "shape-box": (edit_shape_box, None, None),
    "dtype-i32": (edit_dtype, None, None),
    "data-offsets": (None, None, hack_offsets),
    "key-newline": (None, None, hack_key_newline),
    "nan-contrib": (nonfinite("contrib", float("nan")), None, None),
    "inf-contrib": (nonfinite("contrib", float("inf")), None, None),
    "nan-final": (nonfinite("final", float("nan")), None, None),
    "inf-final": (nonfinite("final", float("-inf")), None, None),
    "mixed-step": (edit_step, None, None),
    "reference-step": (edit_ref_step, None, None),
    "reference-param": (edit_ref_param, None, None),
    "reference-shape": (edit_ref_shape, None, None),
    "reference-mode": (edit_ref_mode, None, None),
    "reference-part": (edit_ref_part, None, None),
    "world-files": (edit_world_files, None, None),
    "rank-dir": (None, after_rank_dir, None),
    "rank-fifo": (None, after_rank_fifo, None),
    "mesh-product": (edit_mesh, None, None),
    "manifest-dtype": (edit_manifest_dtype, None, None),
    "mb-range": (edit_mb, None, None),
    "overlap-final": (edit_overlap, None, None),
    "missing-final": (edit_missing_final, None, None),
}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--micro-batches", type=int, default=2)
    ap.add_argument("--dtype", choices=sorted(PACK), default="F64")
    ap.add_argument("--ref-dtype", choices=sorted(PACK))
    ap.add_argument("--ulp-copies", action="store_true")
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bug", choices=["none", "missing", "double", "noise",
                                      "huge", "overflow", "unowned", "speck",
                                      "small", "local", "block",
                                      "clip"],
                    default="none")
    ap.add_argument("--defect", choices=sorted(DEFECTS))
    ap.add_argument("--list-defects", action="store_true")
    ap.add_argument("out", nargs="?")
    args = ap.parse_args(argv)
    if args.list_defects:
        print("\n".join(sorted(DEFECTS)))
        return 0
    if args.out is None or args.dp < 1 or args.tp < 1 or \
            args.micro_batches < 1:
        ap.error("give OUT, and sizes of at least 1")
    par, ref = make_step(args)
    edit, after, hack = DEFECTS.get(args.defect, (None, None, None))
    if edit is not None:
        edit(par, ref)
    write(par, os.path.join(args.out, "parallel"), hack)
    write(ref, os.path.join(args.out, "reference"))
    if after is not None:
        after(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
