#!/usr/bin/env python3
"""Pack a trace directory, and its reference, into one input of the trace
harness (tests/libfuzzer/trace.c describes the format):

    python3 tests/libfuzzer/pack-trace.py [--raw] STEP [REFERENCE] > OUT

The rank files are written as their header JSON, a newline and their data,
which the harness turns back into safetensors with the header's length in
front; with --raw they are packed as they are, length and all.
Standard library only, as tests/trace/mktrace.py.
"""

import json
import os
import struct
import sys

FILE_SEP = b"\n@@FILE@@\n"
REF_SEP = b"\n@@REFERENCE@@\n"


def pack_rank(path, raw):
    with open(path, "rb") as f:
        blob = f.read()
    if raw:
        return blob
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.dumps(json.loads(blob[8:8 + n]), separators=(",", ":"))
    return header.encode() + b"\n" + blob[8 + n:]


def pack_dir(d, raw):
    with open(os.path.join(d, "manifest.json"), "rb") as f:
        manifest = f.read()
    files = json.loads(manifest)["files"]
    parts = [manifest]
    for name in files:
        parts.append(pack_rank(os.path.join(d, name), raw))
    return FILE_SEP.join(parts)


def main(argv):
    raw = "--raw" in argv
    dirs = [a for a in argv if a != "--raw"]
    if not 1 <= len(dirs) <= 2:
        sys.exit(__doc__)
    out = REF_SEP.join(pack_dir(d, raw) for d in dirs)
    sys.stdout.buffer.write(out)


if __name__ == "__main__":
    main(sys.argv[1:])
