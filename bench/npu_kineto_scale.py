"""Benchmark: peak memory and time of converting big Kineto traces with NPU lanes (torch-rbln's Kineto plugin layout).

A synthetic trace repeats the step of tests/vendor/fixtures/npu_kineto_eager.json (two operators, two ``rbln_run``
launch markers, a runtime call, a kernel, a copy and a driver sync on the device row pid 0, an ``ac2g`` flow): every
repeat's timestamps shifted by 200 us and its ``External id``, ``launch_id`` and flow id past the previous repeat's;
every 200 repeats sit in one ``ProfilerStep#N`` annotation. Process and thread metadata (device row: sort index
5000000, lanes by thread name) come once, after the events, as Kineto writes them. Each file is converted by
``portscope convert`` under ``/usr/bin/time -v`` (peak RSS) in a fresh process, then by an older tree with --before.

    .venv/bin/python bench/npu_kineto_scale.py --sizes 0.5 1 2 --dir /tmp/h3_scale --before /tmp/h3_base_pkg
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from chrome_scale_bench import convert  # noqa: E402

REPEATS_PER_STEP = 200
PERIOD_US = 200
# one repeat of the fixture's step: %(t)d is the repeat's time origin, %(e)d its first External id, %(l)d its first
# launch id, %(f)d its flow id
_REPEAT = (
    '{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 100, "tid": 100, "ts": %(t10)d.0, "dur": 40.0, "args": {"External id": %(e)d}},\n'
    '{"ph": "X", "cat": "privateuse1_runtime", "name": "rbln_run", "pid": 100, "tid": 100, "ts": %(t20)d.0, "dur": 0, "args": {"launch_id": %(l)d}},\n'
    '{"ph": "X", "cat": "cpu_op", "name": "aten::_to_copy", "pid": 100, "tid": 100, "ts": %(t60)d.0, "dur": 50.0, "args": {"External id": %(e1)d}},\n'
    '{"ph": "X", "cat": "privateuse1_runtime", "name": "rbln_run", "pid": 100, "tid": 100, "ts": %(t70)d.0, "dur": 0, "args": {"launch_id": %(l1)d}},\n'
    '{"ph": "X", "cat": "privateuse1_runtime", "name": "rbln_submit", "pid": 0, "tid": 4, "ts": %(t22)d.0, "dur": 6.0, "args": {"launch_id": %(l)d}},\n'
    '{"ph": "X", "cat": "kernel", "name": "add_fp16", "pid": 0, "tid": 1, "ts": %(t30)d.0, "dur": 15.0, "args": {"launch_id": %(l)d}},\n'
    '{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH", "pid": 0, "tid": 2, "ts": %(t80)d.0, "dur": 10.0, "args": {"launch_id": %(l1)d, "bytes": 256}},\n'
    '{"ph": "X", "cat": "privateuse1_driver", "name": "rbln_sync", "pid": 0, "tid": 3, "ts": %(t90)d.0, "dur": 5.0, "args": {"launch_id": %(l1)d}},\n'
    '{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": %(f)d, "pid": 100, "tid": 100, "ts": %(t20)d.0},\n'
    '{"ph": "f", "cat": "ac2g", "name": "ac2g", "id": %(f)d, "pid": 0, "tid": 1, "ts": %(t30)d.0, "bp": "e"},\n'
)  # fmt: skip
_EVENTS_PER_REPEAT = 10
_METADATA = (
    '{"name": "process_name", "ph": "M", "ts": 0, "pid": 100, "tid": 0, "args": {"name": "python3"}},\n'
    '{"name": "process_name", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"name": "rbln 0"}},\n'
    '{"name": "process_sort_index", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"sort_index": 5000000}},\n'
    '{"name": "thread_name", "ph": "M", "ts": 0, "pid": 0, "tid": 1, "args": {"name": "compute"}},\n'
    '{"name": "thread_name", "ph": "M", "ts": 0, "pid": 0, "tid": 2, "args": {"name": "dma"}},\n'
    '{"name": "thread_name", "ph": "M", "ts": 0, "pid": 0, "tid": 3, "args": {"name": "driver"}},\n'
    '{"name": "thread_name", "ph": "M", "ts": 0, "pid": 0, "tid": 4, "args": {"name": "runtime"}}\n'
)  # fmt: skip


def make_npu_kineto(path: Path, megabytes: float) -> int:
    """Write a Kineto trace with an NPU row of about `megabytes` MB; returns the number of events written."""
    target = int(megabytes * 1e6)
    events = 0
    with open(path, "w", buffering=1 << 22) as f:
        f.write('{"schemaVersion": 1, "deviceProperties": [], "traceName": "rbln_eager_scale", "traceEvents": [\n')
        step = 0
        while f.tell() < target:
            t0 = 1000 + step * REPEATS_PER_STEP * PERIOD_US
            f.write(f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": 100, "tid": 100, '
                    f'"ts": {t0}.0, "dur": {REPEATS_PER_STEP * PERIOD_US}.0, "args": {{}}}},\n')  # fmt: skip
            parts = []
            for k in range(REPEATS_PER_STEP):
                n = step * REPEATS_PER_STEP + k
                t = t0 + k * PERIOD_US
                parts.append(_REPEAT % {"t10": t + 10, "t20": t + 20, "t22": t + 22, "t30": t + 30, "t60": t + 60, "t70": t + 70,
                                        "t80": t + 80, "t90": t + 90, "e": 2 * n + 1, "e1": 2 * n + 2, "l": 2 * n + 7,
                                        "l1": 2 * n + 8, "f": n + 7})  # fmt: skip
            f.write("".join(parts))
            events += 1 + REPEATS_PER_STEP * _EVENTS_PER_REPEAT
            step += 1
        f.write(_METADATA)
        f.write("]}\n")
    return events + 7


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=float, default=[0.5, 1, 2], help="input sizes in GB")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/npu_kineto_scale"))
    parser.add_argument("--keep", action="store_true", help="keep the inputs (reused when present)")
    parser.add_argument("--before", type=Path, help="a folder holding an older portscope/: each file converted by it too")
    parser.add_argument("--only-before", action="store_true", help="convert with the --before tree only")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    for gb in args.sizes:
        path = args.dir / f"npu_kineto_{gb:g}gb.json"
        if not path.exists():
            print(f"made {path} ({make_npu_kineto(path, gb * 1000):,} events)", flush=True)
        size = path.stat().st_size
        runs = [] if args.only_before else [("", dict(os.environ))]
        if args.before:
            runs.append(("before: ", {**os.environ, "PYTHONPATH": str(args.before)}))
        out = args.dir / f"npu_kineto_{gb:g}gb.arrow"
        try:
            for label, env in runs:
                r = convert(path, out, env)
                out.unlink(missing_ok=True)
                print(f"{label}npu-kineto {size / 1e9:.2f} GB: {r['seconds']:.1f} s, peak RSS {r['peak_rss'] / 1e9:.2f} GB "
                      f"({r['peak_rss'] / size:.2f}x the file) | {r['stdout'].splitlines()[0] if r['stdout'] else ''}", flush=True)  # fmt: skip
        finally:
            out.unlink(missing_ok=True)
            if not args.keep:
                path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
