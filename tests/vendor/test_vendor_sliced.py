"""Mobilint core traces and Furiosa runtime traces converted a block at a time, rows on disk (issue 19).

The traces are written here by hand and the expected rows worked out by hand from them (times in ns from
the earliest span). Knobs are tiny: columns spill past 1 value, tables are made 2 rows a slice, Furiosa's
spans are put in start order 2 spans a time bucket; the sliced conversion written to a file must equal the
whole one, row for row and in order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest import read_trace, write_trace
from portscope.ingest.readers import _chrome_bind, _chrome_events, _chrome_slices, _disk_rows
from portscope.ingest.readers.furiosa_trace import read_furiosa_trace
from portscope.ingest.readers.mobilint_trace import read_mobilint_trace
from portscope.ingest.trace import Trace


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_chrome_slices, "SLICE_ROWS", 2)
    monkeypatch.setattr(_disk_rows, "SPILL_HOLD", 1)
    monkeypatch.setattr(_chrome_events, "HOLD_ROWS", 1)
    monkeypatch.setattr(_chrome_bind, "BUCKET_ROWS", 2)
    monkeypatch.setattr(_chrome_bind, "SPILL_HOLD", 1)


def _written(whole: Trace, sliced: Trace, tmp_path: Path) -> Trace:
    assert {"engine_slices", "transfers", "signals"} <= set(sliced.slices)
    write_trace(whole, tmp_path / "whole.arrow")
    write_trace(sliced, tmp_path / "sliced.arrow")
    a, b = read_trace(tmp_path / "whole.arrow"), read_trace(tmp_path / "sliced.arrow")
    for name in ("engine_slices", "transfers", "signals", "regions"):
        assert a[name].to_pylist() == b[name].to_pylist(), name
    assert a.run_info.extra == b.run_info.extra
    return b


def _be(name: str, tid: int, begin: int, end: int) -> list[dict]:
    return [{"name": name, "cat": "", "ph": "B", "pid": 1, "tid": tid, "ts": begin},
            {"name": name, "cat": "", "ph": "E", "pid": 1, "tid": tid, "ts": end}]  # fmt: skip


MOBILINT = sorted(
    _be("infer", 1, 100, 200) + _be("convert to buffer", 1, 101, 105) + _be("copy to npu", 2, 110, 120)
    + _be("write device", 2, 111, 115) + _be("wait core", 2, 130, 150) + _be("copy from npu", 2, 160, 170),
    key=lambda e: (e["ts"], e["ph"] == "E"),
)  # spans close in this order: convert to buffer, write device, copy to npu, wait core, copy from npu, infer


def test_mobilint_rows_on_disk(tmp_path: Path, tiny: None) -> None:
    path = tmp_path / "npu_core_trace.json"
    path.write_text(json.dumps(MOBILINT))
    whole, sliced = read_mobilint_trace(path), read_mobilint_trace(path, sliced=True)
    assert [b.num_rows for b in sliced.slices["engine_slices"].batches()] == [2, 2, 2]
    got = _written(whole, sliced, tmp_path)
    rows = [(s["engine"], s["engine_kind"], s["kind"], s["name"], s["start"], s["dur"]) for s in got["engine_slices"].to_pylist()]
    assert rows == [  # the host spans on their threads' lanes, then each device lane's spans, in the order they closed
        ("host", "host", "compute", "convert to buffer", 1_000, 4_000),
        ("host", "host", "compute", "infer", 0, 100_000),
        ("NPU h2d", "dma_h2d", "transfer", "write device", 11_000, 4_000),
        ("NPU h2d", "dma_h2d", "transfer", "copy to npu", 10_000, 10_000),
        ("NPU d2h", "dma_d2h", "transfer", "copy from npu", 60_000, 10_000),
        ("NPU core", "stream", "sync", "wait core", 30_000, 20_000),
    ]
    transfers = [(t["direction"], t["bytes"], t["src_device"], t["dst_device"], t["start_ns"], t["dur_ns"], t["cause"])
                 for t in got["transfers"].to_pylist()]  # fmt: skip
    assert transfers == [("h2d", 0, "cpu", "npu:0", 10_000, 10_000, "explicit"), ("d2h", 0, "npu:0", "cpu", 60_000, 10_000, "explicit")]
    signals = [(s["kind"], s["reason"], s["op_name"], s["time_ns"], s["count"]) for s in got["signals"].to_pylist()]
    assert signals == [("transfer/h2d", "explicit-copy", "copy to npu", 10_000, 1), ("sync", "sync-call", "wait core", 30_000, 1),
                       ("transfer/d2h", "explicit-copy", "copy from npu", 60_000, 1)]  # fmt: skip
    assert got.run_info.extra["spans_by_name"] == {"convert to buffer": 1, "copy from npu": 1, "copy to npu": 1, "infer": 1,
                                                   "wait core": 1, "write device": 1}  # fmt: skip


def _x(name: str, pid: int, tid: int, ts: float, dur: float, args: dict, cat: str = "") -> dict:
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


FURIOSA = {"traceEvents": [
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "runtime"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 10000000, "args": {"name": "NPU 0"}},
    _x("Execution", 1, 10000000, 20, 30, {"pe_index": 0, "execution_index": 1}),
    _x("submit", 1, 1, 10, 5, {"execution_index": 1}),
    _x("Load", 1, 10000000, 15, 5, {"pe_index": 0, "execution_index": 1, "bytes": 4096}),
    _x("MatMul", 1, 10000000, 20, 10, {"pe_index": 0, "execution_index": 1, "operator_index": 0}),
    _x("Store", 1, 10000000, 50, 2, {"pe_index": 0, "execution_index": "x"}),  # no size; an index that is no int
    _x("Load", 2, 5, 60, 1, {"pe_index": 3, "size": 128, "begin_cycle": 100, "end_cycle": 1100}, "NPU"),  # an NPU span by its cat
    _x("Quantize", 2, 6, 5, 1, {}, "Nux"),
]}  # fmt: skip


def test_furiosa_rows_on_disk_in_start_order(tmp_path: Path, tiny: None) -> None:
    path = tmp_path / "furiosa.json"
    path.write_text(json.dumps(FURIOSA))
    whole, sliced = read_furiosa_trace(path), read_furiosa_trace(path, sliced=True)
    got = _written(whole, sliced, tmp_path)
    rows = [(s["engine"], s["engine_kind"], s["kind"], s["name"], s["start"], s["dur"], s["correlation"], s["bytes"])
            for s in got["engine_slices"].to_pylist()]  # fmt: skip
    assert rows == [  # by start, the longest first; t0 = 5 us
        ("host Nux", "host", "dispatch", "Quantize", 0, 1_000, None, None),
        ("runtime", "host", "dispatch", "submit", 5_000, 5_000, 1, None),
        ("NPU 0 load", "dma_h2d", "transfer", "Load", 10_000, 5_000, 1, 4096),
        ("NPU 0", "stream", "compute", "Execution", 15_000, 30_000, 1, None),
        ("NPU 0 operators", "other", "compute", "MatMul", 15_000, 10_000, 1, None),
        ("NPU 0 store", "dma_d2h", "transfer", "Store", 45_000, 2_000, None, None),
        ("NPU 3 load", "dma_h2d", "transfer", "Load", 55_000, 1_000, None, 128),
    ]
    transfers = [(t["direction"], t["bytes"], t["src_device"], t["dst_device"], t["start_ns"], t["dur_ns"])
                 for t in got["transfers"].to_pylist()]  # fmt: skip
    assert transfers == [("h2d", 4096, "cpu", "npu:0", 10_000, 5_000), ("d2h", 0, "npu:0", "cpu", 45_000, 2_000),
                         ("h2d", 128, "cpu", "npu:3", 55_000, 1_000)]  # fmt: skip
    signals = [(s["kind"], s["reason"], s["op_name"], s["bytes"], s["time_ns"]) for s in got["signals"].to_pylist()]
    assert signals == [("transfer/h2d", "Load", "Load", 4096, 10_000), ("transfer/d2h", "Store", "Store", 0, 45_000),
                       ("transfer/h2d", "Load", "Load", 128, 55_000)]  # fmt: skip
    assert got.run_info.devices == ["cpu", "npu:0", "npu:3"]
    assert got.run_info.extra["npu_rows"] == ["NPU 0", "NPU 3"]
    assert got.run_info.extra["npu_cycles"] == {"spans": 1, "cycles": 1000, "cycles_per_us": 1000.0}
    assert "transfer bytes (Load/Store spans carry no size)" in got.run_info.missing_signals
