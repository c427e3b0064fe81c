"""Benchmark: delta dictionaries in the Arrow IPC *file* format (issue 19, kernel tables whose names are all distinct).

Writes N distinct names as B record batches of a dictionary column, once with one dictionary for all batches (what
portscope writes) and once with a growing dictionary written as deltas (``IpcWriteOptions(emit_dictionary_deltas=
True)``), then opens each file as portscope and its viewer do (``pa.ipc.open_file`` on a memory map) in a fresh
process: the time to the first batch, the heap Arrow allocates, whether every batch reads back right.

    .venv/bin/python bench/ipc_delta_bench.py --names 6000000 --batches 6 --dir /tmp
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

SCHEMA = pa.schema([("name", pa.dictionary(pa.int32(), pa.string()))])


def _words(n: int) -> pa.Array:
    return pa.array([f"MatMulV2_{i}" for i in range(n)])


def write(path: Path, n: int, batches: int, deltas: bool) -> None:
    """Batch i holds names i*n/B..(i+1)*n/B; its dictionary is every name (one dictionary) or the names so far."""
    words, per = _words(n), n // batches
    options = pa.ipc.IpcWriteOptions(emit_dictionary_deltas=deltas)
    with pa.ipc.new_file(path, SCHEMA, options=options) as writer:
        for i in range(batches):
            dictionary = words.slice(0, (i + 1) * per) if deltas else words
            codes = pa.array(np.arange(i * per, (i + 1) * per, dtype=np.int32))
            writer.write_batch(pa.record_batch([pa.DictionaryArray.from_arrays(codes, dictionary)], schema=SCHEMA))


def read(path: Path, n: int, batches: int) -> str:
    """Open memory-mapped, read the first batch, then every batch; one line of figures."""
    heap = pa.total_allocated_bytes()
    t = time.perf_counter()
    reader = pa.ipc.open_file(pa.memory_map(str(path)))
    first = reader.get_batch(0)
    seconds = time.perf_counter() - t
    grown = pa.total_allocated_bytes() - heap
    per, right = n // batches, True
    for i in range(reader.num_record_batches):
        column = reader.get_batch(i).column(0)
        right &= column[0].as_py() == f"MatMulV2_{i * per}" and column[per - 1].as_py() == f"MatMulV2_{(i + 1) * per - 1}"
    return (f"open + first batch {seconds:.2f} s, dictionary {len(first.column(0).dictionary)} names, heap +{grown / 1e6:.0f} MB, "
            f"{reader.stats.num_dictionary_batches} dictionary batches ({reader.stats.num_dictionary_deltas} deltas), "
            f"every batch right: {right}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--names", type=int, default=6_000_000)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--dir", type=Path, default=Path("/tmp"))
    parser.add_argument("--step", nargs=2, help=argparse.SUPPRESS)  # (write|read, one|deltas): run in a child
    args = parser.parse_args(argv)
    if args.step:
        step, kind = args.step
        path = args.dir / f"ipc_delta_bench_{kind}.arrow"
        if step == "write":
            write(path, args.names, args.batches, kind == "deltas")
        else:
            print(f"{kind}: {read(path, args.names, args.batches)}", flush=True)
        return 0
    try:
        for step in ("write", "read"):
            for kind in ("one", "deltas"):
                cmd = [sys.executable, __file__, "--names", str(args.names), "--batches", str(args.batches),
                       "--dir", str(args.dir), "--step", step, kind]  # fmt: skip
                subprocess.run(cmd, check=True)
    finally:
        for kind in ("one", "deltas"):
            (args.dir / f"ipc_delta_bench_{kind}.arrow").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
