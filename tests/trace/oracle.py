#!/usr/bin/env python3
"""Hold gradaudit compare's reading of a step against the symbolic engine.

    python3 tests/trace/oracle.py RUN_JSON COMPARE_JSON TRACE_DIR

RUN_JSON is `gradaudit run --numerics float64 --format json --expand` of a
config, run with GRADAUDIT_TEST_TRACE_DIR=TRACE_DIR, which wrote the step
as a trace (src/numeric/tracewrite.c); COMPARE_JSON is `gradaudit compare
--format json --expand` of that trace against its reference.  compare sees
only what a real job records; the symbolic engine knows what ran.  So:

  - for every parameter and rank, compare's verdict is the numeric audit's
    (the same numbers against the same reference);
  - where compare leaves a region undetermined, its contributions there,
    identical ones once (compare sums tp copies of one computation),
    outnumber its elements or are not independent, as gradaudit(1) says
    they must be;
  - compare's regions hold the elements the audit uses, each once;
  - on each piece of a compare region that a symbolic cell covers,
    compare's expression is the cell's, once the atoms whose contributions
    are zero over the piece are left out (an embedding row no token of
    a rank touched, an expert no token chose: no numbers can show such
    an atom, and the reference lacks it too); compare names no atom zero
    over its whole region.  Cells whose
    symbolic atoms are not a rank's micro-batches (atoms per source, of
    an auxiliary or a multi-token loss) have no trace counterpart and are
    counted, not compared.

Prints one line per disagreement and a summary; exits 1 on any
disagreement, 0 otherwise.  Standard library only.
"""

import array
import json
import os
import re
import struct
import sys

PLAIN = re.compile(r"^g(\d+)(?:m(\d+))?$")


def read_rank(path):
    """A rank file's metadata and its tensors as arrays of doubles."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = json.loads(header.pop("__metadata__")["gradaudit"])
    data = blob[8 + n:]
    tensors = {}
    for key, desc in header.items():
        if desc["dtype"] != "F64":
            raise SystemExit("%s: %s is %s, not F64" % (path, key, desc["dtype"]))
        lo, hi = desc["data_offsets"]
        a = array.array("d")
        a.frombytes(data[lo:hi])
        if sys.byteorder != "little":
            a.byteswap()
        tensors[key] = a
    return meta, tensors


def global_index(shape, offset, box, i):
    """Element i of a box, row-major, as an index of its parameter."""
    coords = []
    for b in reversed(box):
        coords.append(i % b)
        i //= b
    coords.reverse()
    g = 0
    for d, size in enumerate(shape):
        g = g * size + offset[d] + coords[d]
    return g


class Trace:
    def __init__(self, directory):
        with open(os.path.join(directory, "manifest.json")) as f:
            manifest = json.load(f)
        self.k = manifest["micro_batches"]
        self.shape = {}
        self.box = {}        # (rank, param) -> (offset, box)
        self.contrib = {}    # (rank, mb, param) -> {global index: value}
        for r, name in enumerate(manifest["files"]):
            meta, tensors = read_rank(os.path.join(directory, name))
            for p, d in meta["params"].items():
                self.shape[p] = d["shape"]
            for key, d in meta["tensors"].items():
                if d["kind"] != "contrib":
                    continue
                p = d["param"]
                self.box[(r, p)] = (d["offset"], d["box"])
                values = tensors[key]
                self.contrib[(r, d["mb"], p)] = {
                    global_index(self.shape[p], d["offset"], d["box"], i): v
                    for i, v in enumerate(values) if v != 0.0}

    def columns(self, param, rank, lo, hi):
        """The contributions that are not zero on rank's local elements
        lo..hi, each as a list of values there, identical ones once:
        compare sums those on the lowest (gradaudit(1)), so they leave
        no region undetermined."""
        offset, box = self.box[(rank, param)]
        shape = self.shape[param]
        where = [global_index(shape, offset, box, i) for i in range(lo, hi)]
        cols = []
        for (r, mb, p), nonzero in self.contrib.items():
            if p == param and nonzero:
                col = [nonzero.get(g, 0.0) for g in where]
                if any(col) and col not in cols:
                    cols.append(col)
        return cols

    def zero_over(self, atom_rank, mb, param, rank, lo, hi):
        """Is atom (atom_rank, mb) zero on rank's local elements lo..hi?"""
        nonzero = self.contrib.get((atom_rank, mb, param))
        if not nonzero:
            return True
        offset, box = self.box[(rank, param)]
        shape = self.shape[param]
        return not any(global_index(shape, offset, box, i) in nonzero
                       for i in range(lo, hi))


def independent(cols):
    """Are the columns clearly independent (Gram-Schmidt, each keeping
    more than 1e-6 of its norm)?  compare calls a region undetermined
    only when they are not, or when they outnumber its elements."""
    basis = []
    for col in cols:
        v = list(col)
        norm = sum(x * x for x in v) ** 0.5
        for b in basis:
            d = sum(x * y for x, y in zip(v, b))
            v = [x - d * y for x, y in zip(v, b)]
        left = sum(x * x for x in v) ** 0.5
        if left <= 1e-6 * norm:
            return False
        basis.append([x / left for x in v])
    return True


def atom_of(name):
    """An atom's rank and micro-batch: g3 is (3, 0), g3m1 is (3, 1)."""
    m = PLAIN.match(name)
    return int(m.group(1)), int(m.group(2) or 0)


def cells(report, key):
    for p in report["params"]:
        for c in p["cells"]:
            if c.get("used") is not False:
                yield p["name"], c


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    with open(argv[1]) as f:
        run = json.load(f)
    with open(argv[2]) as f:
        cmp = json.load(f)
    trace = Trace(os.path.join(argv[3], "parallel"))
    bad = []

    verdict = {}
    for name, c in cells(run, "numeric_ok"):
        k = (name, c["rank"])
        verdict[k] = verdict.get(k, True) and c["numeric_ok"] is True
    seen = {}
    for name, c in cells(cmp, "ok"):
        k = (name, c["rank"])
        seen[k] = seen.get(k, True) and c["ok"] is True
    for k in sorted(set(verdict) | set(seen)):
        if verdict.get(k) != seen.get(k):
            bad.append("%s rank %d: numeric audit %s, compare %s"
                       % (k[0], k[1], verdict.get(k), seen.get(k)))

    # compare cuts a final only where a contribution's coverage or a final
    # piece changes, the symbolic engine where the buffer's cells do: one
    # region of compare may hold several cells (a tied embedding's rows of
    # the vocabulary and its padded rows, which one final holds).  Each
    # piece of a compare region that a symbolic cell covers is held
    # against that cell, so that no region is skipped for not coinciding.
    symbolic = {}
    for name, c in cells(run, "terms"):
        symbolic.setdefault((name, c["rank"]), []).append(
            (c["region"][0], c["region"][1], c["terms"]))
    # And together they hold what the audit uses, each element once: a
    # region compare drops or reads twice is no verdict of its own.
    held = {}
    for name, c in cells(cmp, "terms"):
        held.setdefault((name, c["rank"]), []).append(tuple(c["region"]))
    for k in sorted(set(symbolic) | set(held)):
        regions = sorted(held.get(k, []))
        if (any(a[1] > b[0] for a, b in zip(regions, regions[1:])) or
                sum(b - a for a, b in regions) !=
                sum(b - a for a, b, _ in symbolic.get(k, []))):
            bad.append("%s rank %d: compare's regions %s, the audit's %s"
                       % (k[0], k[1], regions, sorted(
                           (a, b) for a, b, _ in symbolic.get(k, []))))
    compared = other = undetermined = 0
    for name, c in cells(cmp, "terms"):
        lo, hi = c["region"]
        where = "%s rank %d [%d,%d)" % (name, c["rank"], lo, hi)
        pieces = [(max(lo, a), min(hi, b), terms)
                  for a, b, terms in symbolic.get((name, c["rank"]), [])
                  if a < hi and lo < b]
        if sum(b - a for a, b, _ in pieces) != hi - lo:
            bad.append("%s: not within the cells the audit uses" % where)
            continue
        if c.get("expr") is None:
            undetermined += 1
            cols = trace.columns(name, c["rank"], lo, hi)
            if len(cols) <= hi - lo and independent(cols):
                bad.append("%s: undetermined, though its %d "
                           "contributions are independent over %d "
                           "elements" % (where, len(cols), hi - lo))
            continue
        if not all(PLAIN.match(a) for _, _, terms in pieces for a in terms):
            other += 1
            continue
        got = c["terms"]
        # An atom zero over the whole region no number can show.
        unseen = [a for a in got if PLAIN.match(a) and
                  trace.zero_over(*atom_of(a), name, c["rank"], lo, hi)]
        if unseen:
            bad.append("%s: compare names %s, zero there" % (where,
                       ", ".join(sorted(unseen))))
            continue
        compared += 1
        for a, b, terms in pieces:
            want, said = ({x: t[x] for x in t if not PLAIN.match(x) or
                           not trace.zero_over(*atom_of(x), name,
                                               c["rank"], a, b)}
                          for t in (terms, got))
            if want != said:
                bad.append("%s on [%d,%d): symbolic %s, compare %s"
                           % (where, a, b, json.dumps(want, sort_keys=True),
                              json.dumps(said, sort_keys=True)))
    for line in bad:
        print(line)
    print("verdicts %d, expressions compared %d, other atoms %d, "
          "undetermined %d, disagreements %d"
          % (len(verdict), compared, other, undetermined, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
