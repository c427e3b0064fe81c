"""Bench: comparing two schedules of N slices each (ingest/schedule_diff.py) and laying both out aligned.

A synthetic tiled kernel on four engines: per tile a load (DMA h2d), a matrix product waiting on it, a vector
op waiting on that, a store (DMA d2h); B is the same with the DMA twice as fast (a baseline and one change).
Times: the diff (two summaries with their critical paths, the tables), and per side what the compare page
does for the aligned timelines (slices from 0, sorted lanes, one full-view reduction). Best of --repeat.
Run: .venv/bin/python bench/schedule_diff_bench.py [--slices 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from portscope.ingest.builder import TraceBuilder
from portscope.ingest.schedule_diff import aligned_slices, diff_schedules
from portscope.ingest.slice_depth import nest_slices
from portscope.ingest.trace import Trace
from portscope.ingest.viewport import build_lanes, reduce_viewport

STAGES = [  # engine, engine kind, slice kind, name, waited_on
    ("DMA h2d", "dma_h2d", "transfer", "load", None),
    ("matrix", "matrix", "compute", "mm", "transfer"),
    ("vector", "vector", "compute", "add", "dependency"),
    ("DMA d2h", "dma_d2h", "transfer", "store", "dependency"),
]


def tiled(tiles: int, dma_ns: int) -> dict[str, list]:
    """Columns of a pipelined schedule: each engine starts a tile when its input is ready and it is free."""
    durs = [dma_ns, 40, 20, dma_ns]
    free = np.zeros(len(STAGES), np.int64)
    starts = np.zeros((tiles, len(STAGES)), np.int64)
    for t in range(tiles):
        ready = 0
        for s in range(len(STAGES)):
            starts[t, s] = max(ready, free[s])
            ready = free[s] = starts[t, s] + durs[s]
    cols: dict[str, list] = {k: [] for k in ("engine", "engine_kind", "kind", "name", "start", "dur", "waited_on")}
    for s, (engine, ekind, kind, name, waited) in enumerate(STAGES):
        cols["engine"] += [engine] * tiles
        cols["engine_kind"] += [ekind] * tiles
        cols["kind"] += [kind] * tiles
        cols["name"] += [name] * tiles
        cols["start"] += starts[:, s].tolist()
        cols["dur"] += [durs[s]] * tiles
        cols["waited_on"] += [waited] * tiles
    return cols


def pair(slices: int) -> Trace:
    b = TraceBuilder()
    for name, dma_ns in (("baseline", 60), ("changed", 30)):
        rid = b.add_region(name, dur_ns=1)
        cols = tiled(slices // len(STAGES), dma_ns)
        cols["region_id"] = [rid] * len(cols["start"])
        b.engine_slices.extend(cols)
    return b.build()


def best(fn, repeat: int) -> tuple[float, object]:  # noqa: ANN001
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slices", type=int, default=1_000_000, help="slices per schedule")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    trace = pair(args.slices)
    seconds, diff = best(lambda: diff_schedules(trace, 0, trace, 1), args.repeat)
    print(f"{args.slices:,} slices per schedule: diff {seconds:.2f} s "
          f"(critical path {len(diff.a.critical_rows):,} / {len(diff.b.critical_rows):,} slices)")
    for side in (0, 1):
        def layout(side: int = side) -> int:
            lanes = build_lanes(nest_slices(aligned_slices(trace, side)))
            return reduce_viewport(lanes, *lanes.extent, 2000).drawn
        seconds, drawn = best(layout, args.repeat)
        print(f"  aligned timeline {'AB'[side]}: {seconds:.2f} s ({drawn:,} bars drawn)")
    print(f"  busy: {[(e.engine, e.busy_a, e.busy_b) for e in diff.engines]}")
    print(f"  span {diff.a.total:,} -> {diff.b.total:,} ns")


if __name__ == "__main__":
    main()
