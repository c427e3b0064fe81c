"""Regions by annotation nesting, on a tiny hand-written trace whose annotations overlap without nesting."""

from __future__ import annotations

import json
from pathlib import Path

from portscope.ingest.convert import load_any


def _event(cat: str, name: str, tid: int, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def test_an_annotation_that_ends_under_another_changes_no_region(tmp_path: Path) -> None:
    # Thread 1 annotates "A" [0, 100) us; thread 2 annotates "B" [50, 200) us: B opens inside A and outlives it.
    # Operators on thread 1: at 20 (only A open: A), at 60 (B opened last: B), at 120 (A has ended, B is open: B),
    # at 250 (none open: the run's own region, named after the file).
    path = tmp_path / "overlap.json"
    path.write_text(json.dumps({"traceEvents": [
        _event("user_annotation", "A", 1, 0, 100), _event("user_annotation", "B", 2, 50, 150),
        _event("cpu_op", "aten::add", 1, 20, 5), _event("cpu_op", "aten::mul", 1, 60, 5),
        _event("cpu_op", "aten::sub", 1, 120, 5), _event("cpu_op", "aten::div", 1, 250, 5),
    ]}))  # fmt: skip
    trace = load_any(path)
    names = dict(zip(trace["regions"].column("region_id").to_pylist(), trace["regions"].column("name").to_pylist(),
                     strict=True))  # fmt: skip
    ops = trace["ops"].to_pydict()
    assert {op: names[r] for op, r in zip(ops["name"], ops["region_id"], strict=True)} == {
        "aten::add": "A", "aten::mul": "B", "aten::sub": "B", "aten::div": "overlap.json"}
