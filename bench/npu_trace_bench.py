"""Benchmark: convert a large synthetic torch_npu trace_view.json within the Kineto reader's memory cap.

Writes a bare JSON array shaped like torch_npu's trace view (one line, as json.dump writes it): per
operator a Python ``cpu_op`` span with recorded shapes, an ``AscendCL@`` call on the CANN process,
a kernel on an ``Ascend Hardware`` stream (every 50th on the AI CPU), a ``torch_to_npu`` flow pair with
ids beyond 2^53, and now and then an ``aclrtSynchronizeStream``; ``ts`` are quoted decimals with a ns
fraction. Then converts it in a fresh interpreter and prints the wall time and peak RSS next to the
file size; the cap is the Kineto reader's (docs/performance.md, Converting): peak RSS at most 3x the file.

    .venv/bin/python bench/npu_trace_bench.py --mb 500
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

CAP = 3.0  # peak RSS / file size, as the Kineto reader's

_LOAD = textwrap.dedent(
    """
    import json, resource, sys, time
    from portscope.ingest.convert import load_any
    def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096
    before = rss()
    t = time.perf_counter()
    trace = load_any(sys.argv[1])
    seconds = time.perf_counter() - t
    print(json.dumps({"seconds": seconds, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "rss_before": before, "format": trace.run_info.converted_from, "ops": trace["ops"].num_rows,
                      "slices": trace["engine_slices"].num_rows, "signals": trace["signals"].num_rows}))
    """
)


def _group(i: int, t_us: int, string_ids: bool = False) -> list[str]:
    ts = f"{t_us}.{i % 1000:03d}"
    flow: int | str = 1704161511420306491 + i
    if string_ids:  # as some torch_npu versions write them: the number quoted
        flow = str(flow)
    events = [
        {"ph": "X", "name": "aten::add", "cat": "cpu_op", "pid": 12345, "tid": 12345, "ts": ts, "dur": 20.5,
         "args": {"Sequence number": i, "Fwd thread id": 0, "Input Dims": [[2, 3], [2, 3], []],
                  "Input type": ["c10::Half", "c10::Half", "Scalar"]}},
        {"ph": "X", "name": "AscendCL@aclnnInplaceAdd", "pid": 1234502, "tid": 12345, "ts": f"{t_us + 2}.{i % 997:03d}", "dur": 4.0},
        {"ph": "X", "name": "aclnnAdd_AddAiCore_Add", "pid": 2077, "tid": 2, "ts": f"{t_us + 25}.001", "dur": 3.2,
         "args": {"Model Id": 4294967295, "Task Type": "AI_CPU" if i % 50 == 0 else "AI_CORE", "Stream Id": 2,
                  "Task Id": i, "connection_id": i}},
        {"ph": "s", "name": "torch_to_npu", "cat": "async_npu", "id": flow, "pid": 12345, "tid": 12345, "ts": ts},
        {"ph": "f", "name": "torch_to_npu", "cat": "async_npu", "id": flow, "pid": 2077, "tid": 2, "ts": f"{t_us + 25}.001", "bp": "e"},
    ]  # fmt: skip
    if i % 100 == 99:
        events.append({"ph": "X", "name": "AscendCL@aclrtSynchronizeStream", "pid": 1234502, "tid": 12345,
                       "ts": f"{t_us + 30}.000", "dur": 5.0})  # fmt: skip
    return [json.dumps(e) for e in events]


def make_trace(path: Path, megabytes: float, *, string_ids: bool = False) -> int:
    """Write a synthetic trace view of about `megabytes` MB; returns the number of operators.
    string_ids: the torch_to_npu flow ids are strings (one distinct id per operator), not integers."""
    target = int(megabytes * 1e6)
    meta = [{"name": "process_name", "ph": "M", "pid": 12345, "tid": 0, "args": {"name": "Python"}},
            {"name": "process_name", "ph": "M", "pid": 1234502, "tid": 0, "args": {"name": "CANN"}},
            {"name": "process_name", "ph": "M", "pid": 2077, "tid": 0, "args": {"name": "Ascend Hardware"}},
            {"name": "thread_name", "ph": "M", "pid": 2077, "tid": 2, "args": {"name": "Stream 2"}}]  # fmt: skip
    written, i = 0, 0
    with open(path, "w") as f:
        f.write("[" + ", ".join(json.dumps(m) for m in meta))
        while written < target:
            block = []
            for _ in range(1000):
                block += _group(i, 1704161511000000 + i * 40, string_ids)
                i += 1
            text = ", " + ", ".join(block)
            f.write(text)
            written += len(text)
        f.write("]")
    return i


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=500, help="size of the synthetic trace (default 500 MB)")
    parser.add_argument("--keep", type=Path, help="write the trace here and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="npu_bench_") as tmp:
        path = args.keep or Path(tmp) / "trace_view.json"
        ops = make_trace(path, args.mb)
        size = path.stat().st_size
        print(f"trace: {size / 1e6:.0f} MB, {ops} operators", flush=True)
        done = subprocess.run([sys.executable, "-c", _LOAD, str(path)], check=True, capture_output=True, text=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        ratio = r["peak_rss"] / size
        print(f"{r['format']}: {r['seconds']:.1f} s, {r['ops']} ops, {r['slices']} slices, {r['signals']} signals, "
              f"peak RSS {r['peak_rss'] / 1e6:.0f} MB = {ratio:.2f}x the file "
              f"({(r['peak_rss'] - r['rss_before']) / size:.2f}x above the interpreter and imports); cap {CAP}x")  # fmt: skip
        return 0 if ratio <= CAP else 1


if __name__ == "__main__":
    sys.exit(main())
