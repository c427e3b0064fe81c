"""A torch_npu trace view's signals and compiles made on disk and written slice by slice (issue 19).

The trace is written here by hand; the expected rows are worked out by hand from it (times in ns from the
earliest span, 1000 us). Columns hold 1 value before they spill, tables are made 1 row a slice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest import read_trace, write_trace
from portscope.ingest.readers import _chrome_events, _chrome_slices, _disk_rows
from portscope.ingest.readers.ascend_trace import AI_CPU_NOTE, COMPILE_NOTE, read_ascend_trace


def _x(name: str, pid: int, tid: int, ts: str, dur: float, cat: str = "", args: dict | None = None) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, **({"args": args} if args else {})}


TRACE = [
    {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "Python"}},
    {"ph": "M", "name": "process_name", "pid": 10002, "tid": 0, "args": {"name": "CANN"}},
    {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Ascend Hardware"}},
    {"ph": "M", "name": "thread_name", "pid": 7, "tid": 3, "args": {"name": "Stream 3"}},
    _x("aten::mm", 100, 100, "1000.000", 50, "cpu_op"),
    _x("aten::item", 100, 100, "1100.000", 20, "cpu_op"),
    _x("AscendCL@aclopCompileAndExecute", 10002, 100, "1010.000", 4),  # inside aten::mm
    _x("AscendCL@aclrtSynchronizeStream", 10002, 100, "1105.000", 10),  # inside aten::item: its wait, no signal
    _x("AscendCL@aclrtSynchronizeDevice", 10002, 100, "1200.000", 3),  # inside no operator
    _x("AscendCL@opCompile", 10002, 100, "1300.000", 2),  # inside no operator
    _x("K1", 7, 3, "1020.000", 8, "", {"Task Type": "AI_CPU"}),  # launched by aten::mm
    _x("K2", 7, 3, "1400.000", 1, "", {"Task Type": "AI_CPU"}),  # launched by nothing
    {"ph": "s", "name": "torch_to_npu", "cat": "async_npu", "id": "m", "pid": 100, "tid": 100, "ts": "1000.000"},
    {"ph": "f", "name": "torch_to_npu", "cat": "async_npu", "id": "m", "pid": 7, "tid": 3, "ts": "1020.000", "bp": "e"},
]


def test_trace_view_signals_and_compiles_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_chrome_slices, "SLICE_ROWS", 1)
    monkeypatch.setattr(_disk_rows, "SPILL_HOLD", 1)
    monkeypatch.setattr(_chrome_events, "HOLD_ROWS", 1)
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(TRACE))
    whole, sliced = read_ascend_trace(path), read_ascend_trace(path, sliced=True)
    assert {"ops", "engine_slices", "signals", "compiles"} <= set(sliced.slices)
    assert [b.num_rows for b in sliced.slices["signals"].batches()] == [1] * 6
    write_trace(whole, tmp_path / "whole.arrow")
    write_trace(sliced, tmp_path / "sliced.arrow")
    a, got = read_trace(tmp_path / "whole.arrow"), read_trace(tmp_path / "sliced.arrow")
    for name in ("signals", "compiles", "ops", "engine_slices"):
        assert a[name].to_pylist() == got[name].to_pylist(), name
    signals = [(s["kind"], s["reason"], s["op_name"], s["op_id"], s["time_ns"], s["count"], s["region_id"])
               for s in got["signals"].to_pylist()]  # fmt: skip
    assert signals == [  # operators that wait, then the calls in file order, then the AI CPU kernels
        ("sync", "item", "aten::item", 1, 100_000, 1, 0),
        ("dispatch/recompile", "online-aclopCompileAndExecute", "aten::mm", 0, 10_000, 1, 0),
        ("sync", "sync-call", "aclrtSynchronizeDevice", None, 200_000, 1, 0),
        ("dispatch/recompile", "online-opCompile", "opCompile", None, 300_000, 1, 0),
        ("dispatch/cpu_fallback", "ai-cpu", "aten::mm", 0, 20_000, 1, 0),
        ("dispatch/cpu_fallback", "ai-cpu", "K2", None, 400_000, 1, 0),
    ]
    notes = [s["note"] for s in got["signals"].to_pylist()]
    assert notes[1] == notes[3] == COMPILE_NOTE and notes[4] == notes[5] == AI_CPU_NOTE
    assert notes[2].startswith("aclrtSynchronizeDevice: ")
    compiles = [(c["kind"], c["key"], c["compile_ns"], c["reason"], c["time_ns"]) for c in got["compiles"].to_pylist()]
    assert compiles == [("program", "aten::mm", 4_000, "aclopCompileAndExecute", 10_000),
                        ("program", "opCompile", 2_000, "opCompile", 300_000)]  # fmt: skip
    kinds = {(s["name"], s["kind"]) for s in got["engine_slices"].to_pylist() if s["engine"] in ("CANN", "NPU Stream 3")}
    assert kinds == {("AscendCL@aclopCompileAndExecute", "compile"), ("AscendCL@aclrtSynchronizeStream", "sync"),
                     ("AscendCL@aclrtSynchronizeDevice", "sync"), ("AscendCL@opCompile", "compile"),
                     ("K1", "fallback"), ("K2", "fallback")}  # fmt: skip
