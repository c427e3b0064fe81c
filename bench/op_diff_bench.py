"""Bench: the full operator diff of the real CUDA eager/compiled pair after conversion (target: <= 1 s).

Reads the two converted traces (memory-mapped Arrow) and diffs every operator, runtime call, kernel and
annotation: the first ProfilerStep against the first (HTA's default pair) and the whole runs. The baseline,
measured in the same run, is what `portscope diff` already did before --ops on the same pair: the two
regions' signal reports and their diff.

Run: .venv/bin/python bench/op_diff_bench.py [CONTROL.arrow TEST.arrow]   (default: the bundled samples)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from portscope.ingest.diff import diff_operators, diff_signals
from portscope.ingest.op_diff import change_sets, op_diff
from portscope.ingest.region_tree import region_ids, top_level_ids
from portscope.ingest.report import region_report_data
from portscope.ingest.summary import summarize
from portscope.ingest.trace import read_trace

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
REPEAT = 7


def best(work: Callable[[], object]) -> float:
    """The fastest of REPEAT runs, in seconds (the machine is shared: min, not mean)."""
    times = []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv[1:3]] or [SAMPLES / "cuda_diff_control.arrow", SAMPLES / "cuda_diff_test.arrow"]

    def step_pair() -> object:
        a, b = (read_trace(p) for p in paths)
        return op_diff(a, region_ids(a, "ProfilerStep#1009")[0], b, region_ids(b, "ProfilerStep#1009")[0])

    def whole_runs() -> object:
        a, b = (read_trace(p) for p in paths)
        return op_diff(a, top_level_ids(a)[0], b, top_level_ids(b)[0])

    def signal_diff() -> object:  # the baseline: `portscope diff` without --ops
        a, b = (read_trace(p) for p in paths)
        ra = region_report_data(summarize(a, region_ids(a, "ProfilerStep#1009")[0]))
        rb = region_report_data(summarize(b, region_ids(b, "ProfilerStep#1009")[0]))
        return diff_signals(ra, rb), diff_operators(ra, rb)

    sets = {c.value: len(v) for c, v in change_sets(step_pair().ops).items()}  # type: ignore[attr-defined]
    base, step, whole = best(signal_diff), best(step_pair), best(whole_runs)
    print(f"pair: {paths[0].name} / {paths[1].name}; ProfilerStep#1009 sets: {sets}")
    print(f"signal diff (baseline)      {base * 1000:7.0f} ms")
    print(f"op diff, first step pair    {step * 1000:7.0f} ms  ({step / base:.2f}x the baseline)")
    print(f"op diff, whole runs         {whole * 1000:7.0f} ms  ({whole / base:.2f}x the baseline)")
    print(f"target <= 1 s: {'met' if max(step, whole) <= 1.0 else 'NOT met'} (min of {REPEAT} runs, trace reading included)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
