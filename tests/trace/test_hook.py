"""Unit tests of python/gradaudit_trace.py (tests/trace-hook.test runs them).

    /usr/bin/python3 tests/trace/test_hook.py [-v]

Prints one line per test, "PASS name" or "FAIL name", the failures' reports
on stderr, and exits 1 if any failed.  Everything runs in one process but the
last test, which forks two gloo processes to see the step id broadcast and
the manifest written after the barrier.
"""

import json
import math
import multiprocessing
import os
import shutil
import struct
import sys
import tempfile
import traceback
import types
import unittest
from unittest import mock
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, "python"))

import torch  # noqa: E402

import gradaudit_trace as gt  # noqa: E402
from gradaudit_trace import Trace, read_trace  # noqa: E402

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def leaf(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).requires_grad_()


class FakeShard:
    def __init__(self, dim):
        self.dim = dim

    def is_shard(self):
        return True

    def is_replicate(self):
        return False

    def is_partial(self):
        return False


class Replicate:            # recognized by its name alone
    pass


class _Partial:
    pass


class FakeMesh:
    """A device mesh: `ranks` laid out in its shape; get_coordinate() only
    when `coordinate` is given (else the trace searches the mesh)."""

    def __init__(self, ranks, coordinate=None):
        self.mesh = ranks
        if coordinate is not None:
            self.get_coordinate = lambda: list(coordinate)


class FakeDTensor:
    def __init__(self, local, shape, mesh, placements):
        self._local = local
        self.shape = torch.Size(shape)
        self.device_mesh = mesh
        self.placements = tuple(placements)

    def to_local(self):
        return self._local

    @property
    def requires_grad(self):
        return self._local.requires_grad

    @property
    def grad(self):
        g = self._local.grad
        return None if g is None else FakeDTensor(g, self.shape, self.device_mesh,
                                                  self.placements)

    def register_hook(self, fn):
        return self._local.register_hook(
            lambda g: fn(FakeDTensor(g, self.shape, self.device_mesh,
                                     self.placements)))


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="trace-hook-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)


class SafetensorsTest(Base):
    def test_round_trip_and_layout(self):
        tensors = {
            "f64": torch.arange(6, dtype=torch.float64).reshape(2, 3) / 7,
            "f32": torch.tensor([1.5, -2.25, 3e-8], dtype=torch.float32),
            "bf16": torch.tensor([1.0, -0.5, 3.0], dtype=torch.bfloat16),
            "f16": torch.tensor([[0.25], [65504.0]], dtype=torch.float16),
            "empty": torch.zeros(0, 4, dtype=torch.float64),
            "scalar": torch.tensor(2.5, dtype=torch.float64),
        }
        meta = {"gradaudit": json.dumps({"rank": 0, "x": [1, 2]})}
        f = self.path("t.safetensors")
        gt.write_safetensors(f, tensors, meta)
        back, back_meta = gt.read_safetensors(f)
        self.assertEqual(back_meta, meta)
        self.assertEqual(sorted(back), sorted(tensors))
        for k, t in tensors.items():
            self.assertEqual(back[k].dtype, t.dtype, k)
            self.assertEqual(back[k].shape, t.shape, k)
            self.assertTrue(torch.equal(back[k], t), k)
        # The layout, read by hand: u64 length, a JSON header padded with
        # spaces to 8 bytes, then the data, contiguous and little-endian.
        raw = open(f, "rb").read()
        (n,) = struct.unpack_from("<Q", raw, 0)
        self.assertEqual(n % 8, 0)
        text = raw[8:8 + n].decode()
        self.assertTrue(text.startswith("{"))
        header = json.loads(text)
        self.assertEqual(header["__metadata__"], meta)
        self.assertEqual(header["f64"]["dtype"], "F64")
        self.assertEqual(header["bf16"]["dtype"], "BF16")
        spans = sorted(e["data_offsets"] for k, e in header.items()
                       if k != "__metadata__")
        at = 0
        for b, e in spans:
            self.assertEqual(b, at)
            at = e
        self.assertEqual(8 + n + at, len(raw))
        b, e = header["f64"]["data_offsets"]
        first = struct.unpack_from("<6d", raw, 8 + n + b)
        self.assertEqual(list(first), tensors["f64"].reshape(-1).tolist())
        b, e = header["f32"]["data_offsets"]
        self.assertEqual(struct.unpack_from("<3f", raw, 8 + n + b)[1], -2.25)

    def test_reader_rejects_damage(self):
        f = self.path("t.safetensors")
        gt.write_safetensors(f, {"a": torch.ones(4), "b": torch.ones(2)}, {})
        raw = open(f, "rb").read()
        with open(f, "wb") as out:
            out.write(raw[:-3])
        with self.assertRaises(ValueError):
            gt.read_safetensors(f)
        header = json.dumps({"a": {"dtype": "F64", "shape": [1],
                                   "data_offsets": [8, 16]}}).encode()
        header += b" " * (-len(header) % 8)
        with open(f, "wb") as out:
            out.write(struct.pack("<Q", len(header)) + header + bytes(16))
        with self.assertRaisesRegex(ValueError, "hole"):
            gt.read_safetensors(f)


class CaptureTest(Base):
    def test_micro_batches_and_a_tied_weight_used_twice(self):
        w = leaf(4, 3, seed=1)
        b = leaf(3, seed=2)
        x = torch.randn(5, 4)
        t = Trace(self.path("p"), [("w", w), ("b", b)], micro_batches=2,
                  mesh={"dp": 1}, coords={"dp": 0}, step="s1")
        calls = []
        w.register_hook(lambda g: calls.append(1))
        with t.micro_batch(0, tokens=7):
            # w is used twice, as a tied embedding is: autograd sums the two
            # uses of one graph before the hook; a second backward pass in
            # the same micro-batch (a pipeline's separate stage, a second
            # loss) calls the hook again, and the trace sums the calls.
            ((x @ w).sum() + (w * w).sum() + b.sum()).backward()
            (w.sum() * 0.5).backward()
        self.assertEqual(len(calls), 2)
        expect0 = x.sum(0).unsqueeze(1).expand(4, 3) + 2 * w.detach() + 0.5
        with t.micro_batch(1, tokens=3):
            (3 * (x @ w).sum()).backward()
        expect1 = 3 * x.sum(0).unsqueeze(1).expand(4, 3)
        t.finals_from_grads()
        t.grad_norm(2.5, clip_coef=0.4)
        t.close()
        d = read_trace(self.path("p"))
        m = d["manifest"]
        self.assertEqual(m["format"], "gradaudit-trace")
        self.assertEqual(m["version"], 1)
        self.assertEqual((m["mode"], m["step"], m["world"], m["micro_batches"]),
                         ("parallel", "s1", 1, 2))
        self.assertEqual(m["dtype"], "float64")
        self.assertEqual(m["mesh"], {"dp": 1})
        self.assertEqual(m["files"], ["rank-0.safetensors"])
        self.assertNotIn("reference_of", m)
        r = d["ranks"][0]
        ts, meta = r["tensors"], r["meta"]
        self.assertTrue(torch.allclose(ts["contrib/0/w"], expect0))
        self.assertTrue(torch.allclose(ts["contrib/1/w"], expect1))
        self.assertTrue(torch.equal(ts["contrib/0/b"], torch.ones(3)))
        self.assertTrue(torch.allclose(w.grad, expect0 + expect1))
        self.assertNotIn("contrib/1/b", ts)       # no gradient: no entry
        self.assertTrue(torch.allclose(ts["final/w"], expect0 + expect1))
        self.assertEqual(meta["tokens"], [7, 3])
        self.assertEqual((meta["grad_norm"], meta["clip_coef"]), (2.5, 0.4))
        self.assertEqual(meta["coords"], {"dp": 0})
        self.assertEqual(meta["params"], {"w": {"shape": [4, 3]},
                                          "b": {"shape": [3]}})
        self.assertEqual(meta["tensors"]["contrib/1/w"],
                         {"param": "w", "kind": "contrib", "mb": 1,
                          "offset": [0, 0], "box": [4, 3]})
        self.assertEqual(meta["tensors"]["final/b"]["kind"], "final")
        self.assertEqual((meta["rank"], meta["world"], meta["step"],
                          meta["mode"], meta["micro_batches"]),
                         (0, 1, "s1", "parallel", 2))

    def test_capture_is_before_accumulation_and_a_copy(self):
        w = leaf(3, seed=3)
        t = Trace(self.path("p"), {"w": w}, step="s")
        with t.micro_batch(0):
            (2 * w).sum().backward()
        with t.micro_batch(1):
            (5 * w).sum().backward()
        w.grad.mul_(100)                 # a collective would change .grad
        t.close()
        ts = read_trace(self.path("p"))["ranks"][0]["tensors"]
        self.assertTrue(torch.equal(ts["contrib/0/w"], torch.full((3,), 2.0)))
        self.assertTrue(torch.equal(ts["contrib/1/w"], torch.full((3,), 5.0)))
        self.assertEqual(read_trace(self.path("p"))["manifest"]["micro_batches"], 2)

    def test_sparse_gradients_are_stored_dense(self):
        # nn.Embedding(sparse=True): a sparse gradient per backward, and a
        # sparse .grad for the final.
        emb = torch.nn.Embedding(5, 2, sparse=True)
        t = Trace(self.path("p"), emb.named_parameters(), step="s")
        t.save_weights()
        with t.micro_batch(0):
            emb(torch.tensor([1, 3, 3])).sum().backward()
        with t.micro_batch(1):
            emb(torch.tensor([3])).sum().backward()
        t.finals_from_grads()
        t.close()
        ts = read_trace(self.path("p"))["ranks"][0]["tensors"]
        rows = torch.zeros(5, 2)
        rows[1], rows[3] = 1, 2
        self.assertTrue(torch.equal(ts["contrib/0/weight"], rows))
        rows[1], rows[3] = 0, 1
        self.assertTrue(torch.equal(ts["contrib/1/weight"], rows))
        rows[1], rows[3] = 1, 3
        self.assertTrue(torch.equal(ts["final/weight"], rows))

    def test_float32_gradients_and_hooks_removed(self):
        w = torch.ones(2, dtype=torch.float32, requires_grad=True)
        t = Trace(self.path("p"), {"w": w}, step="s")
        with t.micro_batch(0):
            w.sum().backward()
        t.close()
        self.assertEqual(read_trace(self.path("p"))["manifest"]["dtype"], "float32")
        w.sum().backward()               # no block, but the hook is gone

    def test_box_and_flat_finals(self):
        # Rows 2..4 of a [6, 4] parameter.
        w = leaf(3, 4, seed=4)
        t = Trace(self.path("p"), step="s")
        t.add_param("w", w, shape=[6, 4], offset=[2, 0])
        v = leaf(2, 5, seed=5)
        t.add_param("v", v)
        with t.micro_batch(0):
            ((w * w).sum() + (v * v).sum()).backward()
        t.final("w", w.grad[1:2], offset=[3, 0], box=[1, 4])
        t.final("v", v.grad.reshape(-1)[3:8], flat=(3, 8))
        t.close()
        r = read_trace(self.path("p"))["ranks"][0]
        meta = r["meta"]["tensors"]
        self.assertEqual(r["meta"]["params"]["w"], {"shape": [6, 4]})
        self.assertEqual((meta["contrib/0/w"]["offset"], meta["contrib/0/w"]["box"]),
                         ([2, 0], [3, 4]))
        self.assertEqual(meta["final/w"], {"param": "w", "kind": "final",
                                           "offset": [3, 0], "box": [1, 4]})
        self.assertEqual(meta["final/v"], {"param": "v", "kind": "final",
                                           "offset": [0, 0], "box": [2, 5],
                                           "flat": [3, 8]})
        self.assertEqual(list(r["tensors"]["final/v"].shape), [5])
        values, covered, _ = gt.assemble(
            [(r["tensors"]["final/w"], meta["final/w"])], [6, 4])
        self.assertTrue(torch.equal(values[3], 2 * w.detach()[1]))
        self.assertEqual(int(covered.sum()), 4)
        values, covered, _ = gt.assemble(
            [(r["tensors"]["final/v"], meta["final/v"])], [2, 5])
        self.assertTrue(torch.equal(values.reshape(-1)[3:8],
                                    2 * v.detach().reshape(-1)[3:8]))
        self.assertEqual(covered.reshape(-1).tolist(),
                         [False] * 3 + [True] * 5 + [False] * 2)


class DTensorTest(Base):
    def test_shard_and_replicate_placements(self):
        ranks = torch.arange(4).reshape(2, 2)
        # Shard(0) over mesh dim 0 of a 5-row tensor: torch.chunk gives 3 + 2.
        mesh = FakeMesh(ranks)          # rank 3: coordinate [1, 1], searched
        dt = FakeDTensor(leaf(2, 3), [5, 3], mesh, [FakeShard(0), Replicate()])
        self.assertEqual(gt.dtensor_placement(dt, rank=3),
                         ([5, 3], [3, 0], [2, 3]))
        # Shard(0) on both mesh dims: nested, left to right.
        mesh = FakeMesh(ranks, coordinate=[1, 0])
        dt = FakeDTensor(leaf(2, 2), [8, 2], mesh, [FakeShard(0), FakeShard(0)])
        self.assertEqual(gt.dtensor_placement(dt, rank=2),
                         ([8, 2], [4, 0], [2, 2]))
        # Shard(-1) and a Partial.
        mesh = FakeMesh(ranks, coordinate=[0, 1])
        dt = FakeDTensor(leaf(4, 3), [4, 6], mesh, [_Partial(), FakeShard(-1)])
        self.assertEqual(gt.dtensor_placement(dt, rank=1),
                         ([4, 6], [0, 3], [4, 3]))
        # A local tensor that is not the shard.
        dt = FakeDTensor(leaf(4, 2), [4, 6], mesh, [_Partial(), FakeShard(1)])
        with self.assertRaisesRegex(ValueError, "local shape"):
            gt.dtensor_placement(dt, rank=1)

    def test_hook_and_finals_of_a_dtensor(self):
        mesh = FakeMesh(torch.arange(2), coordinate=[1])
        local = leaf(2, 3, seed=6)
        dt = FakeDTensor(local, [4, 3], mesh, [FakeShard(0)])
        t = Trace(self.path("p"), {"emb": dt}, step="s")
        with t.micro_batch(0):
            (local * local).sum().backward()
        t.finals_from_grads()
        t.close()
        r = read_trace(self.path("p"))["ranks"][0]
        meta = r["meta"]
        self.assertEqual(meta["params"]["emb"], {"shape": [4, 3]})
        for key in ("contrib/0/emb", "final/emb"):
            self.assertEqual((meta["tensors"][key]["offset"],
                              meta["tensors"][key]["box"]), ([2, 0], [2, 3]))
            self.assertTrue(torch.equal(r["tensors"][key], 2 * local.detach()))


class WeightsTest(Base):
    def parallel_trace(self, name, skip_b_on_1=False, differ=False):
        """A world of 2 without torch.distributed: a is split by rows, b
        flat-sharded, c replicated."""
        a = torch.arange(12.0).reshape(4, 3)
        b = torch.arange(10.0).reshape(2, 5) + 100
        c = torch.tensor([7.0, 8.0])
        for rank in (1, 0):          # rank 0 last: it writes the manifest
            t = Trace(self.path(name), rank=rank, world=2, step="par-step",
                      mesh={"dp": 2}, coords={"dp": rank})
            t.add_param("a", a[2 * rank:2 * rank + 2].clone().requires_grad_(),
                        shape=[4, 3], offset=[2 * rank, 0])
            t.add_param("b", b.clone().requires_grad_())
            cc = c.clone()
            if differ and rank == 1:
                cc += 1
            t.add_param("c", cc.requires_grad_())
            t.weight("a", a[2 * rank:2 * rank + 2], offset=[2 * rank, 0])
            if not (skip_b_on_1 and rank == 1):
                lo, hi = (0, 6) if rank == 0 else (6, 10)
                t.weight("b", b.reshape(-1)[lo:hi], flat=(lo, hi))
            t.weight("c", cc)
            t.close()
        return a, b, c

    def test_load_weights_assembles_pieces(self):
        a, b, c = self.parallel_trace("p")
        m = read_trace(self.path("p"))["manifest"]
        self.assertEqual((m["world"], m["mesh"], m["step"]),
                         (2, {"dp": 2}, "par-step"))
        target = {"a": torch.zeros(4, 3, requires_grad=True),
                  "b": torch.zeros(2, 5, requires_grad=True),
                  "c": torch.zeros(2, requires_grad=True)}
        t = Trace(self.path("r"), target, mode="reference")
        t.load_weights(target, self.path("p"))
        self.assertTrue(torch.equal(target["a"].detach(), a))
        self.assertTrue(torch.equal(target["b"].detach(), b))
        self.assertTrue(torch.equal(target["c"].detach(), c))
        self.assertEqual(t.reference_of, "par-step")
        with t.micro_batch(0, tokens=4):
            sum(v.sum() for v in target.values()).backward()
        t.finals_from_grads()
        t.close()
        ref = read_trace(self.path("r"))
        self.assertEqual(ref["manifest"]["mode"], "reference")
        self.assertEqual(ref["manifest"]["reference_of"], "par-step")
        self.assertEqual(ref["manifest"]["world"], 1)
        self.assertNotEqual(ref["manifest"]["step"], "par-step")
        self.assertNotIn("weight/a", ref["ranks"][0]["tensors"])

    def test_save_weights_of_a_module(self):
        model = torch.nn.Linear(3, 2)
        t = Trace(self.path("p"), model.named_parameters(), step="s")
        t.save_weights()
        t.close()
        other = torch.nn.Linear(3, 2)
        r = Trace(self.path("r"), other.named_parameters(), mode="reference")
        r.load_weights(other, self.path("p"))
        self.assertTrue(torch.equal(other.weight, model.weight))
        self.assertTrue(torch.equal(other.bias, model.bias))

    def test_load_weights_refuses_what_does_not_fit(self):
        self.parallel_trace("p", skip_b_on_1=True)
        ref = Trace(self.path("r"), mode="reference")
        with self.assertRaisesRegex(ValueError, "cover 6 of its 10"):
            ref.load_weights({"b": torch.zeros(2, 5)}, self.path("p"))
        with self.assertRaisesRegex(ValueError, "shape"):
            ref.load_weights({"a": torch.zeros(3, 4)}, self.path("p"))
        with self.assertRaisesRegex(ValueError, "no weight of 'zz'"):
            ref.load_weights({"zz": torch.zeros(1)}, self.path("p"))
        with self.assertRaisesRegex(ValueError, "reference_of"):
            Trace(self.path("r2"), mode="reference", reference_of="other") \
                .load_weights({"c": torch.zeros(2)}, self.path("p"))
        with self.assertRaisesRegex(ValueError, "reference_of"):
            Trace(self.path("r3"), mode="reference").close()

    def test_disagreeing_copies_warn(self):
        self.parallel_trace("p", differ=True)
        ref = Trace(self.path("r"), mode="reference")
        c = torch.zeros(2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ref.load_weights({"c": c}, self.path("p"))
        self.assertTrue(any("differ in 2" in str(w.message) for w in caught))
        self.assertEqual(c.tolist(), [7.0, 8.0])


class ErrorsTest(Base):
    def trace(self, **kw):
        kw.setdefault("step", "s")
        return Trace(self.path("p"), **kw)

    def test_gradient_outside_a_micro_batch(self):
        w = leaf(3)
        self.trace().add_param("w", w)
        with self.assertRaisesRegex(ValueError, "outside a micro_batch"):
            w.sum().backward()

    def test_finals(self):
        w = leaf(2, 3)
        t = self.trace()
        t.add_param("w", w)
        with self.assertRaisesRegex(ValueError, "unknown parameter 'x'"):
            t.final("x", torch.zeros(2, 3))
        with self.assertRaisesRegex(ValueError, "shape"):
            t.final("w", torch.zeros(3, 2), box=[2, 3])
        with self.assertRaisesRegex(ValueError, "needs its offset"):
            t.final("w", torch.zeros(1, 3))
        with self.assertRaisesRegex(ValueError, "does not fit"):
            t.final("w", torch.zeros(1, 3), offset=[2, 0])
        with self.assertRaisesRegex(ValueError, "outside the box"):
            t.final("w", torch.zeros(4), flat=(4, 8))
        with self.assertRaisesRegex(ValueError, "1-D tensor of 2"):
            t.final("w", torch.zeros(3), flat=(1, 3))
        with self.assertRaisesRegex(ValueError, "dtype"):
            t.final("w", torch.zeros(2, 3, dtype=torch.int64))
        t.final("w", torch.zeros(2, 3))
        with self.assertRaisesRegex(ValueError, "second final"):
            t.final("w", torch.zeros(2, 3))

    def test_params(self):
        t = self.trace()
        w = leaf(2)
        t.add_param("w", w)
        with self.assertRaisesRegex(ValueError, "twice"):
            t.add_param("w", leaf(2))
        with self.assertRaisesRegex(ValueError, "tied weight"):
            t.add_param("w2", w)
        with self.assertRaisesRegex(ValueError, "does not require grad"):
            t.add_param("z", torch.zeros(2))
        with self.assertRaisesRegex(ValueError, "does not fit"):
            t.add_param("s", leaf(3, 2), shape=[4, 2], offset=[2, 0])
        with self.assertRaisesRegex(ValueError, "differ in rank"):
            t.add_param("s", leaf(3, 2), shape=[4])

    def test_micro_batch_blocks(self):
        t = self.trace(micro_batches=2)
        with self.assertRaisesRegex(ValueError, "micro-batch 2 of a step of 2"):
            with t.micro_batch(2):
                pass
        with self.assertRaisesRegex(ValueError, "inside micro_batch"):
            with t.micro_batch(0):
                with t.micro_batch(1):
                    pass
        with t.micro_batch(0, tokens=3):
            pass
        with self.assertRaisesRegex(ValueError, "had 3 tokens"):
            with t.micro_batch(0, tokens=4):
                pass
        with self.assertRaisesRegex(ValueError, "not for \\[1\\]"):
            t.close()

    def test_construction(self):
        with self.assertRaisesRegex(ValueError, "mode"):
            self.trace(mode="serial")
        with self.assertRaisesRegex(ValueError, "has 4 ranks, the world 1"):
            self.trace(mesh={"dp": 2, "pp": 2})
        t = self.trace(mesh={"dp": 1, "ep": 2, "etp": 2},
                       coords={"ep": 1, "etp": 0})
        self.assertEqual(t.mesh["ep"], 2)
        with self.assertRaisesRegex(ValueError, "unknown mesh dimension"):
            self.trace(mesh={"zz": 1})
        with self.assertRaisesRegex(ValueError, "outside the mesh"):
            self.trace(mesh={"dp": 1}, coords={"dp": 1})
        with self.assertRaisesRegex(ValueError, "needs the step id"):
            Trace(self.path("p"), rank=0, world=2)
        with self.assertRaisesRegex(ValueError, "rank 0 of world 1"):
            Trace(self.path("p"), mode="reference", world=2)
        with self.assertRaisesRegex(ValueError, "reference_of is for"):
            self.trace(reference_of="x")

    def test_modes_and_closing(self):
        ref = Trace(self.path("r"), mode="reference", reference_of="x")
        ref.add_param("w", leaf(2))
        with self.assertRaisesRegex(ValueError, "parallel trace"):
            ref.save_weights()
        t = self.trace()
        with self.assertRaisesRegex(ValueError, "for a reference trace"):
            t.load_weights({}, self.path("r"))
        t1 = Trace(self.path("q"), rank=0, world=2, step="s")
        with self.assertRaisesRegex(ValueError, "close rank 0 last"):
            t1.close()
        t.close()
        with self.assertRaisesRegex(ValueError, "closed"):
            t.close()


def fake_parallel_state(rank, tp=1, cp=1, dp=1, pp=1, ep=None, etp=None,
                        initialized=True, with_cp=True, cp_arg=True,
                        gtp=None):
    """A megatron.core.parallel_state for global `rank` of a job laid out
    in Megatron's order (tp fastest, then cp, dp, pp; the experts of a
    stage etp fastest, then ep).  with_cp=False: a version before context
    parallelism; cp_arg=False: one whose data-parallel functions take no
    with_context_parallel (and whose dp group holds the cp ranks)."""
    ps = types.ModuleType("megatron.core.parallel_state")
    t, c = rank % tp, rank // tp % cp
    d, p = rank // (tp * cp) % dp, rank // (tp * cp * dp)
    ps.model_parallel_is_initialized = lambda: initialized
    ps.get_tensor_model_parallel_world_size = lambda: tp
    ps.get_tensor_model_parallel_rank = lambda: t
    ps.get_pipeline_model_parallel_world_size = lambda: pp
    ps.get_pipeline_model_parallel_rank = lambda: p
    if with_cp:
        ps.get_context_parallel_world_size = lambda: cp
        ps.get_context_parallel_rank = lambda: c
    if cp_arg:
        ps.get_data_parallel_world_size = (
            lambda with_context_parallel=False:
            dp * cp if with_context_parallel else dp)
        ps.get_data_parallel_rank = (
            lambda with_context_parallel=False:
            c + cp * d if with_context_parallel else d)
    else:
        ps.get_data_parallel_world_size = lambda: dp * cp
        ps.get_data_parallel_rank = lambda: c + cp * d
    if ep is not None:
        local = rank % (tp * cp * dp)
        ps.get_expert_model_parallel_world_size = lambda: ep
        ps.get_expert_model_parallel_rank = lambda: local // (etp or tp) % ep
    if etp is not None:
        ps.get_expert_tensor_parallel_world_size = lambda: etp
        ps.get_expert_tensor_parallel_rank = lambda: local % etp
    if gtp is not None:
        ps.get_gtp_weight_remat_world_size = lambda: gtp
        ps.get_gtp_weight_remat_rank = lambda: 0
    return ps


class MegatronMeshTest(Base):
    def mesh(self, ps):
        with mock.patch.dict(sys.modules,
                             {"megatron.core.parallel_state": ps}):
            return gt.megatron_mesh()

    def test_coordinates_follow_megatrons_order(self):
        sizes = {"tp": 2, "cp": 2, "dp": 2, "pp": 2}
        for rank in (0, 1, 2, 5, 6, 11, 15):
            mesh, coords = self.mesh(fake_parallel_state(rank, **sizes))
            self.assertEqual(mesh, sizes)
            self.assertEqual(rank, coords["tp"] + 2 * (coords["cp"] + 2 * (
                coords["dp"] + 2 * coords["pp"])), coords)
        mesh, coords = self.mesh(fake_parallel_state(6, tp=2, dp=4))
        self.assertEqual(mesh, {"tp": 2, "cp": 1, "dp": 4, "pp": 1})
        self.assertEqual(coords, {"tp": 0, "cp": 0, "dp": 3, "pp": 0})

    def test_old_versions(self):
        # Before context parallelism: no cp functions, dp without argument.
        mesh, coords = self.mesh(fake_parallel_state(
            5, tp=2, dp=2, pp=2, with_cp=False, cp_arg=False))
        self.assertEqual(mesh, {"tp": 2, "cp": 1, "dp": 2, "pp": 2})
        self.assertEqual(coords, {"tp": 1, "cp": 0, "dp": 0, "pp": 1})
        # cp, but a dp group holding it and no with_context_parallel.
        mesh, coords = self.mesh(fake_parallel_state(
            13, tp=2, cp=2, dp=2, pp=2, cp_arg=False))
        self.assertEqual(mesh, {"tp": 2, "cp": 2, "dp": 2, "pp": 2})
        self.assertEqual(coords, {"tp": 1, "cp": 0, "dp": 1, "pp": 1})

    def test_expert_dimensions(self):
        # Dense, Megatron's etp defaulting to tp: nothing more to record.
        mesh, _ = self.mesh(fake_parallel_state(3, tp=2, dp=2, ep=1, etp=2))
        self.assertEqual(sorted(mesh), ["cp", "dp", "pp", "tp"])
        # ep 2 x etp 1 over the tp 2 x dp 2 ranks: etp fastest, then ep.
        for rank, ep in ((0, 0), (1, 1), (2, 0), (3, 1)):
            mesh, coords = self.mesh(fake_parallel_state(
                rank, tp=2, dp=2, ep=2, etp=1))
            self.assertEqual((mesh["ep"], mesh["etp"]), (2, 1))
            self.assertEqual((coords["ep"], coords["etp"]), (ep, 0))
        # No expert-tensor functions: etp is tp.
        mesh, _ = self.mesh(fake_parallel_state(0, tp=2, dp=2, ep=2))
        self.assertEqual((mesh["ep"], mesh["etp"]), (2, 2))
        # Megatron's fallback before its expert groups exist: None.
        ps = fake_parallel_state(1, tp=2, dp=2, ep=2, etp=1)
        ps.get_expert_tensor_parallel_world_size = lambda: None
        ps.get_expert_tensor_parallel_rank = lambda: None
        mesh, coords = self.mesh(ps)
        self.assertEqual((mesh["etp"], coords["etp"]), (2, 1))

    def test_refusals(self):
        with self.assertRaisesRegex(ValueError, "not initialized"):
            self.mesh(fake_parallel_state(0, initialized=False))
        with self.assertRaisesRegex(ValueError, "cannot import"):
            self.mesh(None)         # None in sys.modules: ImportError
        with self.assertRaisesRegex(ValueError, "gtp_remat"):
            self.mesh(fake_parallel_state(0, gtp=2))
        mesh, _ = self.mesh(fake_parallel_state(0, gtp=1))
        self.assertEqual(mesh["dp"], 1)

    def test_trace_mesh_megatron(self):
        ps = fake_parallel_state(6, tp=2, cp=2, dp=2, pp=2, ep=4, etp=1)
        with mock.patch.dict(sys.modules,
                             {"megatron.core.parallel_state": ps}):
            t = Trace(self.path("p"), mesh="megatron", rank=6, world=16,
                      step="s")
            self.assertEqual(t.mesh, {"tp": 2, "cp": 2, "dp": 2, "pp": 2,
                                      "ep": 4, "etp": 1})
            self.assertEqual(t.coords, {"tp": 0, "cp": 1, "dp": 1, "pp": 0,
                                        "ep": 2, "etp": 0})
            t = Trace(self.path("q"), mesh="megatron", coords={"dp": 0},
                      rank=6, world=16, step="s")
            self.assertEqual(t.coords, {"dp": 0})
            with self.assertRaisesRegex(ValueError, "16 ranks, the world 8"):
                Trace(self.path("r"), mesh="megatron", rank=6, world=8,
                      step="s")
        with self.assertRaisesRegex(ValueError, "dict of sizes"):
            Trace(self.path("r"), mesh="titan", step="s")
        with mock.patch.dict(sys.modules,
                             {"megatron.core.parallel_state": None}):
            with self.assertRaisesRegex(ValueError, "cannot import"):
                Trace(self.path("r"), mesh="megatron", step="s")


class FakeDeviceMesh:
    """A DeviceMesh: ranks 0..n-1 row-major in `shape`, named; with
    get_coordinate() only when `coordinate` is given."""

    def __init__(self, names, shape, coordinate=None):
        self.mesh_dim_names = None if names is None else tuple(names)
        self.mesh = torch.arange(math.prod(shape)).reshape(shape)
        if coordinate is not None:
            self.get_coordinate = lambda: list(coordinate)


class DeviceMeshTest(Base):
    def test_one_dimension(self):
        m = FakeDeviceMesh(["dp"], [4])
        self.assertEqual(gt.device_mesh_coords(m, rank=2),
                         ({"dp": 4}, {"dp": 2}))

    def test_replicate_and_shard_join_into_dp(self):
        m = FakeDeviceMesh(["dp_replicate", "dp_shard"], [2, 3])
        for rank in range(6):
            mesh, coords = gt.device_mesh_coords(m, rank=rank)
            self.assertEqual(mesh, {"dp": 6})
            # torchtitan's replicate-slowest is Megatron's dp order.
            self.assertEqual(coords, {"dp": rank})
        m = FakeDeviceMesh(["pp", "dp_replicate", "dp_shard", "cp", "tp"],
                           [2, 2, 2, 1, 2])
        mesh, coords = gt.device_mesh_coords(m, rank=11)
        self.assertEqual(mesh, {"pp": 2, "dp": 4, "cp": 1, "tp": 2})
        self.assertEqual(coords, {"pp": 1, "dp": 1, "cp": 0, "tp": 1})

    def test_pp_dp_tp_in_megatrons_order(self):
        m = FakeDeviceMesh(["pp", "dp", "tp"], [2, 2, 2])
        for rank in range(8):
            mesh, c = gt.device_mesh_coords(m, rank=rank)
            self.assertEqual(mesh, {"pp": 2, "dp": 2, "tp": 2})
            self.assertEqual(rank, c["tp"] + 2 * (c["dp"] + 2 * c["pp"]))
        # This process's coordinate, from get_coordinate().
        m = FakeDeviceMesh(["pp", "batch", "cp", "tp"], [2, 2, 1, 2],
                           coordinate=[1, 0, 0, 1])
        self.assertEqual(gt.device_mesh_coords(m)[1],
                         {"pp": 1, "dp": 0, "cp": 0, "tp": 1})
        t = Trace(self.path("p"), mesh=gt.device_mesh_coords(m)[0],
                  coords=gt.device_mesh_coords(m)[1], rank=5, world=8,
                  step="s")
        self.assertEqual(t.coords["pp"], 1)

    def test_flattened_dimensions(self):
        # Beside their parts, skipped (the mesh tensor is only a stand-in).
        m = FakeDeviceMesh(["dp_replicate", "dp_shard", "cp", "dp",
                            "dp_shard_cp", "dp_cp"], [2, 2, 2, 4, 4, 8],
                           coordinate=[1, 0, 1, 2, 1, 5])
        self.assertEqual(gt.device_mesh_coords(m),
                         ({"dp": 4, "cp": 2}, {"dp": 2, "cp": 1}))
        # fsdp = dp_shard x cp alone cannot be split, unless it is 1.
        m = FakeDeviceMesh(["pp", "dp_replicate", "fsdp", "tp"], [1, 2, 2, 2])
        with self.assertRaisesRegex(ValueError, "'fsdp' flattens dp_shard x"):
            gt.device_mesh_coords(m, rank=0)
        m = FakeDeviceMesh(["dp_replicate", "fsdp"], [2, 1])
        self.assertEqual(gt.device_mesh_coords(m, rank=1),
                         ({"dp": 2}, {"dp": 1}))

    def test_refusals(self):
        with self.assertRaisesRegex(ValueError, "cannot map .*'efsdp'"):
            gt.device_mesh_coords(
                FakeDeviceMesh(["pp", "efsdp", "ep"], [1, 2, 2]), rank=0)
        with self.assertRaisesRegex(ValueError, "needs mesh_dim_names"):
            gt.device_mesh_coords(FakeDeviceMesh(None, [2]), rank=0)
        with self.assertRaisesRegex(ValueError, "not in the device mesh"):
            gt.device_mesh_coords(FakeDeviceMesh(["dp"], [2]), rank=2)


def _gloo_rank(rank, out, rendezvous):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + rendezvous,
                            rank=rank, world_size=2)
    w = torch.full((2,), float(rank + 1), requires_grad=True)
    t = Trace(out, {"w": w}, mesh={"dp": 2}, coords={"dp": rank})
    with t.micro_batch(0):
        (w * w).sum().backward()
    dist.all_reduce(w.grad)
    t.finals_from_grads()
    t.close()
    dist.destroy_process_group()


class GlooTest(Base):
    def test_two_processes(self):
        out = self.path("p")
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=_gloo_rank,
                             args=(r, out, self.path("rendezvous")))
                 for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            if p.exitcode is None:
                p.terminate()
                p.join()
        self.assertEqual([p.exitcode for p in procs], [0, 0])
        d = read_trace(out)
        steps = {d["manifest"]["step"]} | {r["meta"]["step"] for r in d["ranks"]}
        self.assertEqual(len(steps), 1)
        self.assertEqual(len(d["manifest"]["step"]), 32)   # a uuid4 hex
        for r in range(2):
            ts = d["ranks"][r]["tensors"]
            self.assertTrue(torch.equal(ts["contrib/0/w"],
                                        torch.full((2,), 2.0 * (r + 1))))
            self.assertTrue(torch.equal(ts["final/w"], torch.full((2,), 6.0)))


class _Lines(unittest.TestResult):
    def __init__(self, verbose):
        super().__init__()
        self.verbose = verbose

    def addSuccess(self, test):
        print("PASS %s" % test.id().split(".", 1)[1], flush=True)

    def _fail(self, test, err):
        print("FAIL %s" % test.id().split(".", 1)[1], flush=True)
        sys.stderr.write("== %s\n%s\n" % (test.id(), "".join(
            traceback.format_exception(*err))))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err)


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = _Lines("-v" in sys.argv)
    suite.run(result)
    sys.exit(0 if result.wasSuccessful() and result.testsRun else 1)
