"""Trace format speed: writing op events, and loading a 1M-op trace and printing its report.

Usage: python bench/format_bench.py [--ops 5000000] [--report-ops 1000000]
Writes a synthetic trace through the real writer (TraceBuilder -> write_trace) and reads it back.
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pyarrow as pa

from portscope.ingest import RunInfo, Trace, read_trace, write_trace
from portscope.ingest.report import format_trace
from portscope.ingest.schema import OPS, SIGNALS, TABLES
from portscope.ingest.trace import empty_table

NAMES = ["aten::mm", "aten::add.Tensor", "aten::mul.Tensor", "aten::pow.Tensor_Scalar", "aten::_to_copy", "aten::rsqrt"]


def synthetic(n_ops: int, n_regions: int = 4) -> Trace:
    """A run with n_ops operators and one signal per 10 operators, columnar (as converters build them)."""
    rng = np.random.default_rng(0)
    region = np.repeat(np.arange(n_regions, dtype=np.int32), -(-n_ops // n_regions))[:n_ops]
    start = np.arange(n_ops, dtype=np.int64) * 1000
    name_idx = rng.integers(0, len(NAMES), n_ops).astype(np.int32)
    names = pa.DictionaryArray.from_arrays(pa.array(name_idx), pa.array(NAMES))
    placement = pa.DictionaryArray.from_arrays(pa.array((name_idx % 3 == 0).astype(np.int32)), pa.array(["device", "fallback"]))
    shapes = pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, 3, n_ops).astype(np.int32)),
                                            pa.array(["1x7x64;64x64", "1x7x64", "1x7x128;1x7x128"]))
    cols = {f.name: pa.nulls(n_ops, f.type) for f in OPS}
    cols.update(op_id=pa.array(np.arange(n_ops, dtype=np.int64)), region_id=pa.array(region), name=names,
                start_ns=pa.array(start), dur_ns=pa.array(rng.integers(100, 900, n_ops)), placement=placement,
                input_shapes=shapes, bytes_in=pa.array(rng.integers(0, 1 << 16, n_ops)),
                bytes_out=pa.array(rng.integers(0, 1 << 16, n_ops)))
    ops = pa.Table.from_arrays([cols[f.name] for f in OPS], schema=OPS)
    sig_rows = np.arange(0, n_ops, 10)
    scols = {f.name: pa.nulls(len(sig_rows), f.type) for f in SIGNALS}
    scols.update(region_id=pa.array(region[sig_rows]), op_id=pa.array(sig_rows.astype(np.int64)),
                 kind=pa.DictionaryArray.from_arrays(pa.array((sig_rows % 2).astype(np.int32)),
                                                     pa.array(["dispatch/cpu_fallback", "host_bounce/dtype_cast"])),
                 reason=pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(sig_rows), np.int32)), pa.array(["dtype-not-supported"])),
                 op_name=names.take(pa.array(sig_rows)), count=pa.array(np.ones(len(sig_rows), np.int64)),
                 bytes=pa.array(rng.integers(0, 4096, len(sig_rows))))
    signals = pa.Table.from_arrays([scols[f.name] for f in SIGNALS], schema=SIGNALS)
    regions = empty_table("regions")
    from portscope.ingest.builder import TableBuilder
    rb = TableBuilder("regions")
    for r in range(n_regions):
        rb.append(region_id=r, name=f"region {r}", start_ns=0, dur_ns=int(start[-1]), mode="eager", phase="none")
    regions = rb.build()
    tables = {name: empty_table(name) for name in TABLES}
    tables.update(ops=ops, signals=signals, regions=regions)
    return Trace(RunInfo(), tables)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ops", type=int, default=5_000_000)
    p.add_argument("--report-ops", type=int, default=1_000_000)
    p.add_argument("--json")
    args = p.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        trace = synthetic(args.ops)
        for compression in (None, "lz4", "zstd"):
            path = Path(tmp) / f"big-{compression}.arrow"
            t0 = time.perf_counter()
            write_trace(trace, path, compression=compression)
            dt = time.perf_counter() - t0
            out[f"write_ops_per_s_{compression or 'uncompressed'}"] = args.ops / dt
            print(f"write {args.ops:,} ops ({compression or 'uncompressed'}): {dt:.2f} s = "
                  f"{args.ops / dt / 1e6:.1f}M ops/s ({path.stat().st_size / 1e6:.0f} MB, fsync included)")
            path.unlink()
        small = Path(tmp) / "1m.arrow"
        write_trace(synthetic(args.report_ops), small)
        t0 = time.perf_counter()
        loaded = read_trace(small)
        with redirect_stdout(io.StringIO()):
            print(format_trace(loaded))
        dt = time.perf_counter() - t0
        out["load_and_report_1m_s"] = dt
        print(f"load + report of a {args.report_ops:,}-op trace: {dt:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
