"""Scale bench: synthetic Kineto traces of several GB, converted by portscope and loaded by HTA, then opened
in the viewer, one size at a time, each measurement in its own process.

A synthetic trace repeats a real profile (a Kineto export, e.g. the ~87 MB CPU trace of a tiny Llama
generating tokens made by bench/convert_bench.py --keep) back to back: every copy's timestamps are shifted
past the end of the previous copy and its ``External id`` / ``correlation`` / flow ids past the previous
copy's, in the profile's own text layout (so the reader meets Kineto's formatting, not a re-encoding).

For each size it prints: the file; `portscope convert FILE -o OUT.arrow` (whole process: wall seconds,
events/s, peak RSS); HTA's ``TraceAnalysis(trace_dir=...)`` (whole process, only up to --hta-max-gb: HTA
holds ~8x the file in memory); and the viewer on the converted run (bench/viewer_bench.py --traces: first
page, timeline index, viewport updates and their Patch sizes, peak RSS of the server). Synthetic files are
deleted after each size.

    .venv/bin/python bench/scale_bench.py --base /tmp/bench_trace.json --sizes 0.5 1 2 4 --hta-max-gb 1
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_TS = re.compile(rb'"ts": (\d+)')
_DUR = re.compile(rb'"dur": (\d+)')
_IDS = re.compile(rb'"(External id|correlation|id)": (\d+)')
_HTA = "import sys; from hta.trace_analysis import TraceAnalysis; TraceAnalysis(trace_dir=sys.argv[1])"
_TIME = "/usr/bin/time"


def repeat_trace(base: Path, out: Path, target_bytes: int) -> tuple[int, int]:
    """Write base's events repeated (shifted) until out is about target_bytes; (copies, events) written."""
    raw = base.read_bytes()
    if raw[:2] == b"\x1f\x8b":  # a gzipped base (as PyTorch's profiler writes .json.gz)
        raw = gzip.decompress(raw)
    start = raw.index(b"[", raw.index(b'"traceEvents"')) + 1
    end = raw.rindex(b"]")  # the events' ']' (Kineto writes "traceName" after it)
    head, body, tail = raw[:start], raw[start:end].rstrip().rstrip(b","), raw[end:]
    stamps = [int(t) for t in _TS.findall(body)]
    span = max(stamps) - min(stamps) + max((int(d) for d in _DUR.findall(body)), default=0) + 1000
    id_step = max((int(m[1]) for m in _IDS.findall(body)), default=0) + 1
    per_copy = body.count(b'"ph":')
    copies = max(1, round((target_bytes - len(head) - len(tail)) / (len(body) + 1)))
    with open(out, "wb") as f:
        f.write(head)
        for k in range(copies):
            if k:
                f.write(b",")
            shift, ids = k * span, k * id_step
            text = _TS.sub(lambda m, s=shift: b'"ts": %d' % (int(m[1]) + s), body) if k else body
            f.write(_IDS.sub(lambda m, s=ids: b'"%s": %d' % (m[1], int(m[2]) + s), text) if k else text)
        f.write(tail)
    return copies, copies * per_copy


def timed_process(argv: list[str], env: dict[str, str] | None = None) -> dict:
    """Wall seconds, peak RSS (bytes) and exit code of one whole process, from /usr/bin/time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        done = subprocess.run([_TIME, "-f", "%e %M", "-o", report.name, *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
        fields = Path(report.name).read_text().split()
    seconds, peak_kb = float(fields[-2]), int(fields[-1])
    return {"seconds": seconds, "peak_rss": peak_kb * 1024, "rc": done.returncode, "stderr": done.stderr[-400:]}


def viewer_figures(traces: Path) -> dict[str, str]:
    """bench/viewer_bench.py's figures for the runs in a folder (its own process)."""
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("viewer_bench.py")), "--traces", str(traces)],
                          check=True, capture_output=True, text=True)  # fmt: skip
    return dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="a real Kineto trace (.json or .json.gz) to repeat")
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.5, 1, 2], help="synthetic sizes in GB")
    parser.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/htavenv/bin/python"))
    parser.add_argument("--hta-max-gb", type=float, default=1.0, help="run HTA only up to this size (it needs ~8x)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()), help="folder for the synthetic files")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--make", nargs=3, metavar=("BASE", "OUT", "BYTES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from convert_floor import floor  # bench/, the script's folder, is on sys.path

    if args.make:
        print(json.dumps(repeat_trace(Path(args.make[0]), Path(args.make[1]), int(args.make[2]))))
        return 0
    script = shutil.which("portscope", path=str(Path(sys.executable).parent)) or "portscope"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    rows = []
    for gb in args.sizes:
        work = Path(tempfile.mkdtemp(prefix="scale_bench_", dir=args.work))
        try:
            folder = work / "rank_trace"
            folder.mkdir()
            trace = folder / "rank-0.json"
            made = subprocess.run([sys.executable, __file__, "--make", str(args.base), str(trace), str(int(gb * 1e9))],
                                  check=True, capture_output=True, text=True)  # its own process: this one stays small
            copies, events = json.loads(made.stdout)
            size = trace.stat().st_size
            row: dict = {"gb": gb, "file_bytes": size, "copies": copies, "events": events}
            print(f"\n== {_gb(size)}: {copies} copies of {args.base.name}, {events:,} events", flush=True)
            out = work / "runs" / "converted.arrow"
            out.parent.mkdir()
            ours = timed_process([script, "convert", str(trace), "-o", str(out)])
            if ours["rc"]:
                print(f"portscope convert failed: {ours['stderr']}")
                return 1
            floor_s, floor_mb, _ = floor(trace)  # the same file's typed decode, in the same run
            row.update(portscope_s=ours["seconds"], portscope_rss=ours["peak_rss"], arrow_bytes=out.stat().st_size,
                       floor_s=floor_s, floor_rss=floor_mb * 2**20)  # fmt: skip
            print(f"portscope convert: {ours['seconds']:.1f} s, {events / ours['seconds']:,.0f} events/s, "
                  f"peak RSS {_gb(ours['peak_rss'])} ({ours['peak_rss'] / size:.2f}x the file); "
                  f"Arrow {_gb(out.stat().st_size)}; floor (typed decode, whole process) {floor_s:.1f} s: "
                  f"{ours['seconds'] / floor_s:.1f}x", flush=True)  # fmt: skip
            if gb <= args.hta_max_gb and Path(args.hta_python).exists():
                hta = timed_process([args.hta_python, "-c", _HTA, str(folder)], env)
                row.update(hta_s=hta["seconds"], hta_rss=hta["peak_rss"], hta_rc=hta["rc"])
                print(f"HTA TraceAnalysis: {hta['seconds']:.1f} s, {events / hta['seconds']:,.0f} events/s, peak RSS "
                      f"{_gb(hta['peak_rss'])} ({hta['peak_rss'] / size:.2f}x the file), exit {hta['rc']}; "
                      f"portscope {hta['seconds'] / ours['seconds']:.1f}x faster", flush=True)  # fmt: skip
            else:
                print("HTA: not run (it needs ~8x the file in memory)")
            trace.unlink()
            viewer = viewer_figures(out.parent)
            row["viewer"] = viewer
            print("viewer: " + ", ".join(f"{k} {v}" for k, v in viewer.items()), flush=True)
            rows.append(row)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print("\n" + markdown_table(rows))
    return 0


def markdown_table(rows: list[dict]) -> str:
    """The figures of every size as one Markdown table (docs/huge-traces.md, Kineto CPU traces)."""
    lines = ["| Kineto file | events | portscope convert (x its floor) | events/s | peak RSS | HTA load | HTA peak RSS | viewer: first page, "
             "viewport full / 10 % / 1 % (ms, KB), memory over the Arrow file | region op table page: plain, sorted first / next |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in rows:
        v = r.get("viewer", {})
        if "hta_s" in r:
            hta = f"{r['hta_s']:.0f} s ({r['hta_s'] / r['portscope_s']:.1f}x portscope's time)"
            hta_rss = f"{_gb(r['hta_rss'])} ({r['hta_rss'] / r['file_bytes']:.1f}x)"
        else:
            hta, hta_rss = "not run", "-"
        viewer = (f"{v.get('open_run_first_s', '?')} s; {v.get('viewport_full_ms', '?')} / {v.get('viewport_10pct_ms', '?')} / "
                  f"{v.get('viewport_1pct_ms', '?')} ms, {v.get('viewport_full_kb', '?')} / {v.get('viewport_10pct_kb', '?')} / "
                  f"{v.get('viewport_1pct_kb', '?')} KB; {v.get('rss_growth_over_file', '?')}x of {v.get('file_mb', '?')} MB")  # fmt: skip
        pages = (f"{v.get('ops_page_ms', '?')} ms, {v.get('ops_page_sorted_first_ms', '?')} / {v.get('ops_page_sorted_next_ms', '?')} ms "
                 f"({v.get('region_ops', '?')} ops)")  # fmt: skip
        lines.append(f"| {_gb(r['file_bytes'])} | {r['events']:,} | {r['portscope_s']:.0f} s ({r['portscope_s'] / r['floor_s']:.1f}x) | {r['events'] / r['portscope_s']:,.0f} | "
                     f"{_gb(r['portscope_rss'])} ({r['portscope_rss'] / r['file_bytes']:.2f}x) | {hta} | {hta_rss} | {viewer} | {pages} |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
