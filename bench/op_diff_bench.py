"""Bench: the full operator diff of the real CUDA eager/compiled pair after conversion (target: <= 1 s).

Reads the two converted traces (memory-mapped Arrow) and diffs every operator, runtime call, kernel and
annotation: the first ProfilerStep against the first (HTA's default pair) and the whole runs. The baseline,
measured in the same run, is what `portscope diff` already did before --ops on the same pair: the two
regions' signal reports and their diff.

Run: .venv/bin/python bench/op_diff_bench.py [CONTROL.arrow TEST.arrow]   (default: the bundled samples)
     .venv/bin/python bench/op_diff_bench.py --synthetic 1000000   (two synthetic runs of N operators, N/2 runtime
     calls and N/2 kernels each, 300 operator names, 500 call sites, 1000 kernel names: the scale, not a target)
     .venv/bin/python bench/op_diff_bench.py --mb 100 A.json.gz B.json.gz   (each Kineto trace repeated, shifted, to
     about 100 MB of JSON by bench/scale_bench.py's repeat_trace, converted; then the port diff and the operator
     diff of the two whole runs, reading included: the "two 100 MB traces under 1 s" target)
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from portscope.ingest import schema
from portscope.ingest.diff import diff_operators, diff_signals
from portscope.ingest.op_diff import change_sets, op_diff
from portscope.ingest.port_diff import port_diff
from portscope.ingest.region_tree import region_ids, top_level_ids
from portscope.ingest.report import region_report_data
from portscope.ingest.summary import summarize
from portscope.ingest.trace import RunInfo, Trace, read_trace

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


def _table(name: str, columns: dict[str, pa.Array]) -> pa.Table:
    fields = schema.TABLES[name]
    n = len(next(iter(columns.values())))
    return pa.Table.from_arrays([columns.get(f.name, pa.nulls(n, f.type)) for f in fields], schema=fields)


def _coded(words: list[str], codes: np.ndarray) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(words))


def synthetic(n: int, seed: int) -> Trace:
    """A run of n operators (half of them in region 1, nested in region 0) with call sites, n/2 runtime calls
    and the n/2 kernels they launched."""
    rng = np.random.default_rng(seed)
    m = n // 2
    regions = _table("regions", {
        "region_id": pa.array([0, 1], pa.int32()), "parent_id": pa.array([None, 0], pa.int32()),
        "name": pa.array(["run", "step"]), "start_ns": pa.array([0, 0]), "dur_ns": pa.array([10**12, 10**11]),
        "mode": _coded(["eager"], np.zeros(2)), "phase": _coded(["none"], np.zeros(2))})  # fmt: skip
    ops = _table("ops", {
        "op_id": pa.array(np.arange(n)), "region_id": pa.array(rng.integers(0, 2, n).astype(np.int32)),
        "name": _coded([f"aten::op{i}" for i in range(300)], rng.integers(0, 300, n)), "start_ns": pa.array(np.arange(n)),
        "dur_ns": pa.array(rng.integers(0, 10_000, n)),
        "call_site": _coded([f"model.py:{i} (f) <- run.py:{i % 7} (g)" for i in range(500)], rng.integers(0, 500, n))})  # fmt: skip
    calls = _table("runtime_calls", {
        "region_id": pa.array(rng.integers(0, 2, m).astype(np.int32)), "op_id": pa.array(rng.integers(0, n, m)),
        "name": _coded(["cudaLaunchKernel", "cudaMemcpyAsync"], rng.integers(0, 2, m)), "start_ns": pa.array(np.arange(m)),
        "dur_ns": pa.array(rng.integers(0, 1000, m)), "correlation": pa.array(np.arange(m))})  # fmt: skip
    kernels = _table("engine_slices", {
        "region_id": pa.array(rng.integers(0, 2, m).astype(np.int32)), "engine": _coded(["stream 7"], np.zeros(m)),
        "engine_kind": _coded(["stream"], np.zeros(m)), "kind": _coded(["compute"], np.zeros(m)),
        "name": _coded([f"kernel{i}" for i in range(1000)], rng.integers(0, 1000, m)), "start": pa.array(np.arange(m)),
        "dur": pa.array(rng.integers(0, 1000, m)), "op_id": pa.array(rng.integers(0, n, m)), "correlation": pa.array(np.arange(m))})  # fmt: skip
    return Trace(RunInfo(), {"regions": regions, "ops": ops, "runtime_calls": calls, "engine_slices": kernels})


def scale(n: int) -> int:
    a, b = synthetic(n, 0), synthetic(n, 1)
    for rid, what in ((1, "the nested region (half the rows)"), (0, "the whole run")):
        seconds = best(lambda rid=rid: op_diff(a, rid, b, rid))
        print(f"{n:,} operators a side, {what}: {seconds:.2f} s")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


def big_pair(mb: float, sources: list[Path]) -> int:
    """Two Kineto traces repeated to `mb` MB of JSON each, converted, then diffed (port diff and by name)."""
    import tempfile

    from scale_bench import repeat_trace

    from portscope.ingest import write_trace
    from portscope.ingest.readers import read_kineto

    with tempfile.TemporaryDirectory() as tmp:
        converted = []
        for k, source in enumerate(sources):
            big = Path(tmp) / f"{k}.json"
            copies, events = repeat_trace(source, big, int(mb * 1e6))
            converted.append(write_trace(read_kineto(big), Path(tmp) / f"{k}.arrow"))
            print(f"{source.name}: {copies} copies, {events:,} events, {big.stat().st_size / 1e6:.0f} MB of JSON")
            big.unlink()

        def port() -> object:
            a, b = (read_trace(p) for p in converted)
            return port_diff(a, None, b, None)

        def by_name() -> object:
            a, b = (read_trace(p) for p in converted)
            return op_diff(a, top_level_ids(a)[0], b, top_level_ids(b)[0])

        a = read_trace(converted[0])
        print(f"{a.num_rows('ops'):,} operators and {a.num_rows('engine_slices'):,} engine slices in A")
        seconds = best(port)
        print(f"port diff, whole runs       {seconds * 1000:7.0f} ms  (target <= 1 s: {'met' if seconds <= 1 else 'NOT met'})")
        print(f"op diff by name, whole runs {best(by_name) * 1000:7.0f} ms")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "--synthetic":
        return scale(int(argv[2]))
    if len(argv) == 5 and argv[1] == "--mb":
        return big_pair(float(argv[2]), [Path(argv[3]), Path(argv[4])])
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
    def port_runs() -> object:
        a, b = (read_trace(p) for p in paths)
        return port_diff(a, None, b, None)

    base, step, whole, port = best(signal_diff), best(step_pair), best(whole_runs), best(port_runs)
    print(f"pair: {paths[0].name} / {paths[1].name}; ProfilerStep#1009 sets: {sets}")
    print(f"signal diff (baseline)      {base * 1000:7.0f} ms")
    print(f"op diff, first step pair    {step * 1000:7.0f} ms  ({step / base:.2f}x the baseline)")
    print(f"op diff, whole runs         {whole * 1000:7.0f} ms  ({whole / base:.2f}x the baseline)")
    print(f"port diff, whole runs       {port * 1000:7.0f} ms  ({port / base:.2f}x the baseline)")
    print(f"target <= 1 s: {'met' if max(step, whole, port) <= 1.0 else 'NOT met'} (min of {REPEAT} runs, trace reading included)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
