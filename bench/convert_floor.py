"""Converting a trace against its floor: a typed decode of the same file with the fields the readers use.

For each FILE, in fresh processes of the same run (the machine is noisy: compare the ratio, not the seconds):

* floor: read the file (gunzip when compressed) and decode its events with msgspec into structs holding only
  ``ph cat name pid tid ts dur`` and the raw ``args`` and ``id`` (what portscope's readers look at), nothing kept;
* convert: ``portscope convert FILE -o OUT.arrow``, the whole process as a user runs it (imports, reading,
  linking, the rules, writing);
* and both in process, past the imports: the decode alone against converting and writing (``load_any`` +
  ``write_trace``).

Prints wall seconds and peak RSS of each, and convert / floor, whole processes and in process.

    python bench/convert_floor.py ../shared/fixtures/kineto/cuda_diff_control.json.gz /tmp/cpu_base.json
    python bench/convert_floor.py FILE --repeat 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bytecode import compile_portscope  # bench/, the script's folder, is on sys.path

_FLOOR = textwrap.dedent(
    """
    import gzip, sys, msgspec

    class Event(msgspec.Struct, gc=False):
        ph: str | None = None
        cat: str | None = None
        name: str | None = None
        pid: int | str | None = None
        tid: int | str | None = None
        ts: float | str | None = None
        dur: float | None = 0.0
        args: msgspec.Raw = msgspec.Raw(b"")
        id: msgspec.Raw = msgspec.Raw(b"")

    class Document(msgspec.Struct, gc=False):
        traceEvents: list[Event] = []

    import time
    start = time.perf_counter()
    raw = open(sys.argv[1], "rb").read()
    if raw[:2] == b"\\x1f\\x8b":
        raw = gzip.decompress(raw)
    events = msgspec.json.decode(raw, type=Document if raw.lstrip()[:1] == b"{" else list[Event])
    print(time.perf_counter() - start, len(events.traceEvents if isinstance(events, Document) else events))
    """
)
_IN_PROCESS = textwrap.dedent(
    """
    import sys, tempfile, time
    from portscope.ingest.convert import load_any
    from portscope.ingest.trace import write_trace
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_trace(load_any(sys.argv[1], sliced=True), tmp + "/out.arrow")
    print(time.perf_counter() - start)
    """
)


def _run(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of one child process (GNU time's report, else resource usage)."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    peak_kb = int(done.stderr.strip().splitlines()[-1])
    return wall, peak_kb / 1024, done.stdout


def floor(path: Path, repeat: int = 1) -> tuple[float, float, float]:
    """(wall seconds of the whole process, its peak RSS in MB, seconds of the decode alone) of the floor: a
    typed decode of `path` with the fields the readers use, best of `repeat` fresh processes."""
    runs = [_run([sys.executable, "-c", _FLOOR, str(path)]) for _ in range(repeat)]
    return min(r[0] for r in runs), max(r[1] for r in runs), min(float(r[2].split()[0]) for r in runs)


def measure(path: Path, repeat: int) -> dict[str, float | str]:
    """Best-of-`repeat` floor and convert figures for one file."""
    floor = [_run([sys.executable, "-c", _FLOOR, str(path)]) for _ in range(repeat)]
    with tempfile.TemporaryDirectory(prefix="portscope-floor-") as tmp:
        out = Path(tmp) / "out.arrow"
        convert = [_run([sys.executable, "-m", "portscope.app.cli", "convert", str(path), "-o", str(out)]) for _ in range(repeat)]
    inside = [_run([sys.executable, "-c", _IN_PROCESS, str(path)]) for _ in range(repeat)]
    f_wall, f_rss = min(r[0] for r in floor), max(r[1] for r in floor)
    c_wall, c_rss = min(r[0] for r in convert), max(r[1] for r in convert)
    f_in = min(float(r[2].split()[0]) for r in floor)
    c_in = min(float(r[2].split()[0]) for r in inside)
    return {"file": path.name, "mb": round(path.stat().st_size / 1e6, 1), "events": int(floor[0][2].split()[-1]),
            "floor_s": round(f_wall, 2), "floor_rss_mb": round(f_rss), "convert_s": round(c_wall, 2),
            "convert_rss_mb": round(c_rss), "ratio": round(c_wall / f_wall, 1), "floor_in_process_s": round(f_in, 3),
            "convert_in_process_s": round(c_in, 3), "ratio_in_process": round(c_in / f_in, 1)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (the best time, the largest peak)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    compile_portscope()  # whole processes run from bytecode, as an installed copy does
    rows = [measure(p, args.repeat) for p in args.files]
    print(f"{'file':28} {'MB':>7} {'events':>10} | whole processes: {'floor s':>7} {'MB':>5} {'convert s':>9} {'MB':>5} "
          f"{'ratio':>6} | in process: {'floor s':>7} {'convert s':>9} {'ratio':>6}")  # fmt: skip
    for r in rows:
        print(f"{r['file']:28} {r['mb']:>7} {r['events']:>10,} | {'':16} {r['floor_s']:>7} {r['floor_rss_mb']:>5} "
              f"{r['convert_s']:>9} {r['convert_rss_mb']:>5} {r['ratio']:>5}x | {'':11} {r['floor_in_process_s']:>7} "
              f"{r['convert_in_process_s']:>9} {r['ratio_in_process']:>5}x")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
