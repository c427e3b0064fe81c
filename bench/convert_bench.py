"""Benchmark: convert a large Kineto CPU trace with portscope and with Holistic Trace Analysis.

Makes the trace with torch.profiler (record_shapes=True) on a small random-init Llama
generating tokens, then, in the same run, loads it in fresh subprocesses with
portscope's Kineto reader and with HTA's ``TraceAnalysis`` (HTA lives in its own
virtual environment: --hta-python). Prints both wall times, their ratio, and each
subprocess's peak RSS next to the file size. Then the same comparison as a user meets it,
whole processes from start to exit: `portscope convert FILE -o OUT.arrow` against a
`python -c` that loads the same folder with HTA (imports, reading, writing included).

    python bench/convert_bench.py --tokens 400 --layers 8     # ~130 MB, ~300k events (the issue's size)
    python bench/convert_bench.py                              # default: smaller, a couple of minutes
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

_MAKE = textwrap.dedent(
    """
    import sys, torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import LlamaConfig, LlamaForCausalLM
    out, tokens, layers, stack = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=128, max_position_embeddings=tokens + 64)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (1, 16))
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=stack) as prof:
        model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0)
    prof.export_chrome_trace(out)
    """
)

# Each loader runs in a fresh interpreter; it prints {"seconds", "peak_rss", "rss_before"} as JSON.
_PORTSCOPE = textwrap.dedent(
    """
    import json, resource, sys, time
    from portscope.ingest.readers.kineto import read_kineto
    def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096
    before = rss()
    t = time.perf_counter()
    trace = read_kineto(sys.argv[1])
    seconds = time.perf_counter() - t
    print(json.dumps({"seconds": seconds, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "rss_before": before, "ops": trace["ops"].num_rows}))
    """
)
_HTA = textwrap.dedent(
    """
    import json, resource, sys, time
    from hta.trace_analysis import TraceAnalysis
    def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096
    before = rss()
    t = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=sys.argv[1])
    seconds = time.perf_counter() - t
    df = analysis.t.get_trace(0)
    peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(json.dumps({"seconds": seconds, "peak_rss": peak * 1024,
                      "rss_before": before, "events": len(df)}))
    """
)


def make_trace(path: Path, *, tokens: int, layers: int, with_stack: bool) -> None:
    """Profile a tiny Llama generating `tokens` tokens and export the Chrome trace to `path`."""
    subprocess.run([sys.executable, "-c", _MAKE, str(path), str(tokens), str(layers), "1" if with_stack else "0"],
                   check=True)  # fmt: skip


def run_loader(python: str, script: str, target: Path, env: dict[str, str] | None = None) -> dict:
    """Run a loader script in a fresh interpreter and return its JSON line."""
    done = subprocess.run([python, "-c", script, str(target)], check=True, capture_output=True, text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


_HTA_PROCESS = "import sys; from hta.trace_analysis import TraceAnalysis; TraceAnalysis(trace_dir=sys.argv[1])"


def whole_process(argv: list[str], env: dict[str, str] | None = None) -> float:
    """Wall seconds of one process as a user runs it, start to exit."""
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def _mb(n: float) -> str:
    return f"{n / 1e6:.0f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=120, help="tokens to generate (default 120: ~40 MB with 8 layers)")
    parser.add_argument("--layers", type=int, default=8, help="decoder layers of the tiny Llama")
    parser.add_argument("--with-stack", action="store_true", help="profile with with_stack=True (python_function events)")
    parser.add_argument("--trace", type=Path, help="use this existing trace instead of making one")
    parser.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/htavenv/bin/python"),
                        help="python of a virtual environment with HolisticTraceAnalysis installed")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="runs of each loader (the best is reported)")
    parser.add_argument("--keep", type=Path, help="copy the trace made here to this path (for later --trace runs)")
    args = parser.parse_args(argv)
    from convert_floor import floor  # bench/, the script's folder, is on sys.path


    with tempfile.TemporaryDirectory(prefix="convert_bench_") as tmp:
        folder = Path(tmp) / "rank_trace"
        folder.mkdir()
        trace = folder / "rank-0.json"
        if args.trace:
            os.symlink(args.trace.resolve(), trace)
        else:
            print(f"making a trace: {args.tokens} tokens, {args.layers} layers ...", flush=True)
            make_trace(trace, tokens=args.tokens, layers=args.layers, with_stack=args.with_stack)
            if args.keep:
                shutil.copyfile(trace, args.keep)
        size = trace.stat().st_size
        with open(trace, "rb") as f:
            events = f.read().count(b'"ph":')
        print(f"trace: {_mb(size)}, {events} events")

        ours = min((run_loader(sys.executable, _PORTSCOPE, trace) for _ in range(args.repeat)), key=lambda r: r["seconds"])
        print(f"portscope: {ours['seconds']:.2f} s, {ours['ops']} ops, peak RSS {_mb(ours['peak_rss'])} "
              f"({ours['peak_rss'] / size:.2f}x the file; {(ours['peak_rss'] - ours['rss_before']) / size:.2f}x "
              f"above the {_mb(ours['rss_before'])} of the interpreter and imports)")  # fmt: skip
        if not Path(args.hta_python).exists():
            print(f"HTA: skipped ({args.hta_python} not found; pip install HolisticTraceAnalysis in its own venv)")
            return 0
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        hta = min((run_loader(args.hta_python, _HTA, folder, env) for _ in range(args.repeat)), key=lambda r: r["seconds"])
        print(f"HTA TraceAnalysis: {hta['seconds']:.2f} s, {hta['events']} events, peak RSS {_mb(hta['peak_rss'])} "
              f"({hta['peak_rss'] / size:.2f}x the file)")  # fmt: skip
        print(f"speed-up: {hta['seconds'] / ours['seconds']:.1f}x (portscope vs HTA, same file, same run)")

        script = shutil.which("portscope", path=str(Path(sys.executable).parent)) or "portscope"
        out = Path(tmp) / "converted.arrow"
        ours_whole = min(whole_process([script, "convert", str(trace), "-o", str(out)]) for _ in range(args.repeat))
        hta_whole = min(whole_process([args.hta_python, "-c", _HTA_PROCESS, str(folder)], env) for _ in range(args.repeat))
        print(f"whole process, as a user runs it: portscope convert {ours_whole:.2f} s, HTA {hta_whole:.2f} s: "
              f"{hta_whole / ours_whole:.1f}x")
        floor_whole, _, floor_decode = floor(trace, args.repeat)
        print(f"floor (a typed decode of the same file, bench/convert_floor.py): {floor_whole:.2f} s whole process, "
              f"{floor_decode:.2f} s decoding: portscope convert {ours_whole / floor_whole:.1f}x, in process "
              f"{ours['seconds'] / floor_decode:.1f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
