"""Benchmark: peak memory and time of converting big generic Chrome and torch_npu traces, one process per file.

Makes the inputs (torch_npu kernel_details.csv tables; a generic Chrome trace object of the size asked: per thread of several processes, nested
``X`` spans, ``B``/``E`` pairs, instants and flows between threads; torch_npu trace views through
``npu_trace_bench.make_trace``), then runs ``portscope convert`` on each under ``/usr/bin/time -v`` and
prints the wall time, events/s and peak RSS. Inputs are written into --dir and removed after unless --keep.

    .venv/bin/python bench/chrome_scale_bench.py --kind chrome npu --sizes 0.5 1 2 --dir /tmp/scale

--string-ids gives the generic traces and trace views string flow ids (one distinct id per flow). --kind mobilint
furiosa repeat the Mobilint / Furiosa test fixtures to the size asked.

--before DIR also converts each file with the portscope found in DIR (a folder holding ``portscope/``, e.g.
links to an older tree's app/, ingest/, profiler/), right after the run of this tree, so both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from npu_trace_bench import make_trace as make_npu_trace  # noqa: E402

PROCESSES = (("renderer", 3), ("gpu process", 2), ("browser", 4))


def make_chrome_trace(path: Path, megabytes: float, *, string_ids: bool = False) -> int:
    """Write a generic Chrome trace object of about `megabytes` MB; returns the number of events written.
    string_ids: flow ids are strings (``"0x<step>"``, one distinct id per flow), not integers."""
    target = int(megabytes * 1e6)
    meta = [{"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": name}}
            for p, (name, _) in enumerate(PROCESSES, 1)]  # fmt: skip
    meta += [{"ph": "M", "name": "thread_name", "pid": p, "tid": t, "args": {"name": f"worker {t}"}}
             for p, (_, threads) in enumerate(PROCESSES, 1) for t in range(1, threads + 1)]  # fmt: skip
    threads = [(p, t) for p, (_, n) in enumerate(PROCESSES, 1) for t in range(1, n + 1)]
    written, events, step = 0, 0, 0
    with open(path, "w") as f:
        head = '{"displayTimeUnit": "ns", "traceEvents": [' + ", ".join(json.dumps(m) for m in meta)
        f.write(head)
        while written < target:
            block = []
            for _ in range(200):
                t0 = 1_000_000 + step * 50
                for n, (p, t) in enumerate(threads):
                    ts = t0 + n
                    block += [
                        {"ph": "X", "name": f"Task{step % 97}", "cat": "toplevel", "pid": p, "tid": t, "ts": ts, "dur": 40,
                         "args": {"step": step}},
                        {"ph": "X", "name": f"Run{step % 13}", "cat": "v8", "pid": p, "tid": t, "ts": ts + 2, "dur": 10.5},
                        {"ph": "B", "name": "Layout", "cat": "blink", "pid": p, "tid": t, "ts": ts + 20},
                        {"ph": "E", "pid": p, "tid": t, "ts": ts + 31.25},
                    ]  # fmt: skip
                    if n % 3 == 0:
                        block.append({"ph": "i", "name": "Mark", "cat": "blink", "pid": p, "tid": t, "ts": ts + 35, "s": "t"})
                fid = f"0x{step:x}" if string_ids else step
                block += [{"ph": "s", "name": "post", "cat": "ipc", "id": fid, "pid": 1, "tid": 1, "ts": t0 + 3},
                          {"ph": "f", "name": "post", "cat": "ipc", "id": fid, "pid": 3, "tid": 2, "ts": t0 + 25, "bp": "e"}]  # fmt: skip
                step += 1
            text = ", " + ", ".join(json.dumps(e) for e in block)
            events += len(block)
            f.write(text)
            written += len(text)
        f.write('], "traceName": "synthetic"}')
    return events


FIXTURES = Path(__file__).parent.parent / "tests" / "vendor" / "fixtures"


def make_vendor_trace(path: Path, megabytes: float, kind: str) -> int:
    """Write a Mobilint core trace or a Furiosa runtime trace of about `megabytes` MB by repeating the test fixture
    (``mobilint_core_trace.json``, ``furiosa_runtime_trace.json``) with shifted times (and, for Furiosa, a new
    execution index each repeat); returns the number of events written."""
    if kind == "mobilint":
        meta, events = [], json.loads((FIXTURES / "mobilint_core_trace.json").read_text())
    else:
        every = json.loads((FIXTURES / "furiosa_runtime_trace.json").read_text())["traceEvents"]
        meta, events = [e for e in every if e["ph"] == "M"], [e for e in every if e["ph"] != "M"]
    period = max(e["ts"] + e.get("dur", 0) for e in events) - min(e["ts"] for e in events) + 10
    target, written, step, n = int(megabytes * 1e6), 0, 0, 0
    with open(path, "w") as f:
        f.write("[" + "".join(json.dumps(m) + ",\n" for m in meta))
        while written < target:
            parts = []
            for _ in range(200):
                for e in events:
                    moved = {**e, "ts": e["ts"] + step * period}
                    if "execution_index" in e.get("args", {}):
                        moved["args"] = {**e["args"], "execution_index": step}
                    parts.append(json.dumps(moved))
                step += 1
            text = ("" if not n else ",\n") + ",\n".join(parts)
            n += len(parts)
            f.write(text)
            written += len(text)
        f.write("]\n")
    return n


KERNEL_HEADER = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),"
                 "Block Dim,Mix Block Dim,Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,"
                 "Output Formats\n")  # fmt: skip
KERNEL_TYPES = (("MatMulV2", "AI_CORE", '"""8192,4096;4096,512"""', "DT_BF16;DT_BF16"), ("Add", "AI_VECTOR_CORE", '"""4096;4096"""',
                "FLOAT16;FLOAT16"), ("Cast", "AI_CPU", '"""4096"""', "FLOAT"), ("hcom_allReduce_", "HCCL", "N/A", "N/A"))  # fmt: skip


def make_kernel_details(path: Path, megabytes: float, names: int = 0, ai_cpu: bool = True) -> int:
    """Write a torch_npu kernel_details.csv of about `megabytes` MB (quoted start times with a TAB, tripled
    quotes, N/A cells, as the real files have); returns the number of kernels. `names`: that many distinct kernel
    names, repeated (0: every kernel's name its own). ai_cpu: 2 in 7 kernels on the AI CPU (else on the AI Core)."""
    types = KERNEL_TYPES if ai_cpu else tuple((k, "AI_CORE" if c == "AI_CPU" else c, s, d) for k, c, s, d in KERNEL_TYPES)
    target = int(megabytes * 1e6)
    written, n = 0, 0
    with open(path, "w") as f:
        f.write(KERNEL_HEADER)
        while written < target:
            lines = []
            for _ in range(10_000):
                kind, core, shapes, dtypes = types[n % 7 % len(types)]
                stream = "N/A" if core == "HCCL" else "2"
                lines.append(f'{n // 100_000 + 1},4294967295,{n},{stream},{kind}_{n % names if names else n},{kind},{core},"{1736413971411629 + n * 3}.{n % 1000:03d}\t",'
                             f"{1 + n % 17}.5,0,48,0,{shapes},{dtypes},FORMAT_ND,{shapes},{dtypes},FORMAT_ND\n")  # fmt: skip
                n += 1
            text = "".join(lines)
            f.write(text)
            written += len(text)
    return n


def convert(path: Path, out: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    """Seconds and peak RSS (bytes) of `portscope convert path -o out` in a fresh process."""
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "portscope.app.cli", "convert", str(path), "-o", str(out)]
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(f"convert failed:\n{done.stderr[-3000:]}")
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1)) * 1024
    return {"seconds": seconds, "peak_rss": peak, "stdout": done.stdout.strip()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", nargs="+", choices=["chrome", "npu", "kernels", "mobilint", "furiosa"],
                        default=["chrome", "npu", "kernels"])  # fmt: skip
    parser.add_argument("--sizes", nargs="+", type=float, default=[0.5, 1, 2], help="input sizes in GB")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/chrome_scale"))
    parser.add_argument("--keep", action="store_true", help="keep the inputs (reused when present)")
    parser.add_argument("--kernel-names", type=int, default=0, help="kernels: this many distinct names, repeated "
                        "(default 0: every kernel's name its own, the worst case)")
    parser.add_argument("--no-ai-cpu", action="store_true", help="kernels: none on the AI CPU (default: 2 in 7)")
    parser.add_argument("--string-ids", action="store_true", help="chrome, npu: flow ids are strings, one distinct id "
                        "per flow (default: integers)")
    parser.add_argument("--before", type=Path, help="a folder holding an older portscope/: each file converted by it too")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    for kind in args.kind:
        for gb in args.sizes:
            names = f"_{args.kernel_names}names" if kind == "kernels" and args.kernel_names else ""
            names += "_noaicpu" if kind == "kernels" and args.no_ai_cpu else ""
            names += "_strids" if kind in ("chrome", "npu") and args.string_ids else ""
            path = args.dir / f"{kind}_{gb:g}gb{names}.{'csv' if kind == 'kernels' else 'json'}"
            if not path.exists():
                make = {"chrome": lambda p, mb: make_chrome_trace(p, mb, string_ids=args.string_ids),
                        "npu": lambda p, mb: make_npu_trace(p, mb, string_ids=args.string_ids),
                        "kernels": lambda p, mb: make_kernel_details(p, mb, args.kernel_names, not args.no_ai_cpu),
                        "mobilint": lambda p, mb: make_vendor_trace(p, mb, "mobilint"),
                        "furiosa": lambda p, mb: make_vendor_trace(p, mb, "furiosa")}[kind]  # fmt: skip
                print(f"made {path} ({make(path, gb * 1000)} {'operators' if kind == 'npu' else 'events'})", flush=True)
            size = path.stat().st_size
            runs = [("", dict(os.environ))]
            if args.before:
                runs.append(("before: ", {**os.environ, "PYTHONPATH": str(args.before)}))
            try:
                for label, env in runs:
                    r = convert(path, args.dir / f"{kind}_{gb:g}gb.arrow", env)
                    (args.dir / f"{kind}_{gb:g}gb.arrow").unlink(missing_ok=True)
                    print(f"{label}{kind} {size / 1e9:.2f} GB: {r['seconds']:.1f} s, peak RSS {r['peak_rss'] / 1e9:.2f} GB "
                          f"({r['peak_rss'] / size:.2f}x the file) | {r['stdout'].splitlines()[0]}", flush=True)  # fmt: skip
            finally:
                (args.dir / f"{kind}_{gb:g}gb.arrow").unlink(missing_ok=True)
                if not args.keep:
                    path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
