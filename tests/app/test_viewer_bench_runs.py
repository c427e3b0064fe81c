"""bench/viewer_bench.py drives the viewer's own server-side functions; it must keep running as they change.

A small trace (20,000 events) is enough to call every function the full bench times; the figures themselves are
recorded in docs/performance.md from the 10M-event run, not asserted here (timings belong to benchmarks).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "viewer_bench.py"


def test_the_viewer_bench_runs_and_reports_every_figure() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--events", "20000"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())
    assert figures["events"] == "20000" and figures["engine_slices"] == "20000"
    for label in ("full", "10pct", "1pct"):
        drawn, in_view = (int(v) for v in figures[f"viewport_{label}_bars"].split("/"))
        assert 0 < drawn <= in_view <= 20000
        assert float(figures[f"viewport_search_{label}_kb"]) > 0
    assert int(figures["search_matches"]) > 0
