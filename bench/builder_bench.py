"""Memory a row costs in the row builder (ingest/builder.py TableBuilder) while it is held: RSS growth per row
appended, regions as the Kineto reader adds them (one a profiler step) or sync signals, in this process.

    .venv/bin/python bench/builder_bench.py --rows 400000 800000 --table regions   # the slope between the two
    # before: PYTHONPATH=/copy/of/an/older/tree .venv/bin/python bench/builder_bench.py ...
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from portscope.ingest import schema
from portscope.ingest.builder import TraceBuilder


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def held_bytes(rows: int, table: str) -> int:
    """RSS growth (bytes) of this process while `rows` rows are appended to one builder (imports and Arrow's
    conversion paths warmed up first)."""
    warm = TraceBuilder()
    warm.add_region("warm-up")
    warm.signals.append(region_id=0, kind=schema.SignalKind.SYNC, count=1, bytes=0)
    warm.build()
    b = TraceBuilder()
    before = _rss()
    if table == "regions":
        for i in range(rows):
            b.add_region(f"ProfilerStep#{i}", start_ns=i * 1_000_000_123, dur_ns=999_000 + i, parent_id=0, device="cuda:0")
    else:
        for i in range(rows):
            b.signals.append(region_id=i // 10, op_id=i * 3, kind=schema.SignalKind.SYNC, reason="cudaStreamSynchronize",
                             op_name="aten::item", count=1, bytes=0, time_ns=i * 12345)  # fmt: skip
    return _rss() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs=2, default=[400_000, 800_000], metavar=("SMALL", "LARGE"))
    parser.add_argument("--table", choices=["regions", "signals"], default="regions")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process: print its figure
    args = parser.parse_args()
    if args.one is not None:
        print(held_bytes(args.one, args.table))
        return
    grown = [int(subprocess.run([sys.executable, __file__, "--one", str(n), "--table", args.table], check=True,
                                capture_output=True, text=True).stdout) for n in args.rows]  # fmt: skip
    small, large = args.rows
    print(f"{args.table}: {grown[0] / small:.0f} / {grown[1] / large:.0f} bytes a row at {small} / {large} rows; "
          f"{(grown[1] - grown[0]) / (large - small):.0f} bytes a row between them")


if __name__ == "__main__":
    main()
