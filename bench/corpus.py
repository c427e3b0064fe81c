"""Convert every trace in a folder, each in its own process, and print one row per file.

    .venv/bin/python bench/corpus.py DIR            # a table: file, format, events, seconds, peak RSS, refused, why
    .venv/bin/python bench/corpus.py DIR --json     # the same rows as a JSON list

So "portscope converts every trace of X" is a command anyone can rerun on X's files. Each file goes through
`detect` and `load_any` (sliced, as `portscope convert` reads it) and is written to a temporary .arrow file,
then deleted: a file that only fails while its tables are written counts as refused too. Files are taken
from the folder and its subfolders, sorted, skipping hidden ones. The exit status is 0 whatever the files
hold (2 for a bad command line).

Columns: `format` is what `detect` recognised (empty when nothing was); `events` is the reader's own count
of events read (`run_info.extra["events"]`) where it keeps one, else the rows of every table; `seconds` the
conversion inside the child (detection, reading, writing; not the interpreter's start); `peak_rss_mb` the
child's peak resident memory (its own high-water mark, or what psutil saw every 20 ms when it died
before reporting). `refused` is true when portscope said no with a `TraceFormatError`, whose message is
`why`; a file that crashed the child (another exception, a signal) or ran past `--timeout` is not refused:
`outcome` says `crashed` or `timed out` and `why` what happened.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

OUTCOMES = ("converted", "refused", "crashed", "timed out")
_POLL_S = 0.02


def trace_files(folder: Path) -> list[Path]:
    """Every regular file under `folder`, sorted by its path, skipping hidden files and folders."""
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def convert_one(path: Path) -> dict[str, Any]:
    """Detect, read and write one file in this process; the child's row without file name and peak."""
    from portscope.ingest import TraceFormatError, detect, load_any, write_trace

    row: dict[str, Any] = {"format": "", "events": None, "outcome": "converted", "refused": False, "why": ""}
    start = time.perf_counter()
    try:
        row["format"] = detect(path)
        trace = load_any(path, format=row["format"], sliced=True)
        with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
            write_trace(trace, Path(tmp) / "out.arrow")
        events = trace.run_info.extra.get("events")
        row["events"] = int(events) if events is not None else sum(trace.num_rows(t) for t in (*trace.tables, *trace.slices))
    except TraceFormatError as exc:
        row.update(outcome="refused", refused=True, why=str(exc))
    except Exception as exc:  # a reader's bug: reported as a crash, never as a refusal
        row.update(outcome="crashed", why=f"{type(exc).__name__}: {exc}")
    row["seconds"] = round(time.perf_counter() - start, 3)
    row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB
    return row


def run_child(path: Path, folder: Path, *, timeout_s: float) -> dict[str, Any]:
    """Convert `path` in a child process; its row, with the peak RSS psutil saw should the child die first."""
    child = psutil.Popen([sys.executable, __file__, "--one", str(path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    sampled_mb, deadline, timed_out = 0.0, time.monotonic() + timeout_s, False
    while child.poll() is None:
        try:
            sampled_mb = max(sampled_mb, child.memory_info().rss / 2**20)
        except psutil.Error:  # exited between poll() and the read
            pass
        if time.monotonic() > deadline:
            child.kill()
            timed_out = True
            break
        time.sleep(_POLL_S)
    out, err = child.communicate()
    name = str(path.relative_to(folder))
    lines = out.strip().splitlines()
    if not timed_out and child.returncode == 0 and lines:
        row = json.loads(lines[-1])
        row["peak_rss_mb"] = max(row["peak_rss_mb"], round(sampled_mb, 1))
        return {"file": name, **row}
    last = (err.strip().splitlines() or [""])[-1]
    why = f"ran past {timeout_s:g} s" if timed_out else f"the child exited with status {child.returncode}: {last}".rstrip(": ")
    return {"file": name, "format": "", "events": None, "outcome": "timed out" if timed_out else "crashed",
            "refused": False, "why": why, "seconds": None, "peak_rss_mb": round(sampled_mb, 1)}


def _short_why(row: dict[str, Any]) -> str:
    """The message's first line (and first listed problem), without the path TraceFormatError puts first."""
    lines = (row["why"] or "").splitlines() or [""]
    why = lines[0] if len(lines) == 1 else f"{lines[0]} {lines[1].strip().removeprefix('- ')}"
    head, sep, rest = why.partition(": ")
    return rest if sep and head.endswith(row["file"]) else why


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as an aligned text table, with one line of totals."""
    header = ("file", "format", "events", "seconds", "peak RSS MB", "refused", "why")
    cells = [(r["file"], r["format"] or "-", "-" if r["events"] is None else f"{r['events']:,}",
              "-" if r["seconds"] is None else f"{r['seconds']:.2f}", f"{r['peak_rss_mb']:.0f}",
              "yes" if r["refused"] else ("no" if r["outcome"] == "converted" else r["outcome"]), _short_why(r))
             for r in rows]  # fmt: skip
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header) - 1)]
    right = {2, 3, 4}
    lines = ["  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row[:-1], widths, strict=True))) + "  " + row[-1]
             for row in [header, *cells]]  # fmt: skip
    counts = {o: sum(r["outcome"] == o for r in rows) for o in OUTCOMES}
    lines.append(f"{len(rows)} files: " + ", ".join(f"{n} {o}" for o, n in counts.items()))
    return "\n".join(line.rstrip() for line in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="convert every trace in a folder, each in its own process")
    parser.add_argument("folder", nargs="?", type=Path, help="a folder of traces (searched with its subfolders)")
    parser.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a file may take (default 600)")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # the child's side: one file, one JSON line
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(convert_one(args.one)))
        return 0
    if args.folder is None or not args.folder.is_dir():
        parser.error(f"not a folder: {args.folder}")
    rows = [run_child(path, args.folder, timeout_s=args.timeout) for path in trace_files(args.folder)]
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
