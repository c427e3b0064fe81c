"""Benchmark: how long `portscope` takes to start, against a bare interpreter measured in the same run.

Each command runs as a user runs it, a fresh process through the installed `portscope` script, interleaved
with `python -c pass` so machine noise hits both alike. Prints the best and the median of --repeat runs of
each, and each command's excess over the bare interpreter (the figure the target is on: <= 0.35 s).

    python bench/cli_bench.py                  # --help and report on a sample trace, 15 runs each
    python bench/cli_bench.py --repeat 30 --trace run.arrow
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bytecode import compile_portscope  # bench/, the script's folder, is on sys.path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.35


def run_once(argv: list[str]) -> float:
    """Wall seconds of one process, output discarded."""
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def measure(commands: dict[str, list[str]], repeat: int) -> dict[str, list[float]]:
    """Every command `repeat` times, interleaved (one warm-up round first, not counted)."""
    for argv in commands.values():
        run_once(argv)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, argv in commands.items():
            times[name].append(run_once(argv))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15, help="runs of each command (default 15)")
    parser.add_argument("--trace", type=Path, default=ROOT / "sample_traces" / "llama_fp16-npu_forward.arrow",
                        help="the trace `portscope report` reads (default: a bundled sample)")
    args = parser.parse_args(argv)
    script = shutil.which("portscope", path=str(Path(sys.executable).parent)) or shutil.which("portscope")
    if script is None:
        print("portscope is not installed in this environment (pip install -e .)", file=sys.stderr)
        return 2
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "portscope --help": [script, "--help"],
        f"portscope report {args.trace.name}": [script, "report", str(args.trace)],
    }
    compile_portscope()  # each process runs from bytecode, as an installed copy does
    times = measure(commands, args.repeat)
    base_best, base_median = min(times["python -c pass"]), statistics.median(times["python -c pass"])
    print(f"{'command':44s} {'best':>8s} {'median':>8s} {'excess best':>12s} {'excess median':>14s}")
    worst_excess = 0.0
    for name, runs in times.items():
        best, median = min(runs), statistics.median(runs)
        line = f"{name:44s} {best:7.3f}s {median:7.3f}s"
        if name != "python -c pass":
            line += f" {best - base_best:11.3f}s {median - base_median:13.3f}s"
            worst_excess = max(worst_excess, best - base_best)
        print(line)
    verdict = "met" if worst_excess <= TARGET_S else "MISSED"
    print(f"target: start-up <= {TARGET_S} s more than a bare interpreter (best of {args.repeat}): {verdict}")
    return 0 if worst_excess <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
