"""Flow endpoints bound to spans in time buckets on disk (chrome_bind), with tiny buckets and columns held.

The trace is written here by hand and the expected span of each point worked out by hand from Chrome's
rules: an enclosing point (``s``, ``t``, ``f`` with ``"bp": "e"``) -> the innermost span open at its time
on its thread; others (and unenclosed enclosing points unless strict) -> the first span of their thread
starting at or after them, the longest first among equal starts. With buckets of 2 spans, span A is open
across several buckets and points inside it come after spans that closed in earlier buckets.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from portscope.ingest.readers import chrome_bind, chrome_events
from portscope.ingest.readers.ascend_trace import read_ascend_trace
from portscope.ingest.readers.chrome_bind import Scatter, bind, bind_flows
from portscope.ingest.readers.chrome_events import collect
from portscope.ingest.readers.chrome_generic import read_chrome


def _x(name: str, tid: int, ts: float, dur: float) -> dict:
    return {"ph": "X", "name": name, "cat": "c", "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def _flow(ph: str, fid: int, tid: int, ts: float, bp: str | None = None) -> dict:
    event = {"ph": ph, "name": "flow", "cat": "c", "id": fid, "pid": 1, "tid": tid, "ts": ts}
    if bp:
        event["bp"] = bp
    return event


SPANS = [  # span numbers 0..10 in this order
    _x("A", 1, 0, 100),  # 0: open from 0 to 100 us, across the buckets of B..G
    _x("B", 1, 10, 5),  # 1
    _x("C", 1, 20, 5),  # 2
    _x("D", 1, 30, 5),  # 3
    _x("E", 1, 40, 5),  # 4: 40..45
    _x("F", 1, 60, 30),  # 5: 60..90
    _x("G", 1, 70, 5),  # 6: 70..75
    _x("H", 1, 120, 5),  # 7
    _x("K", 2, 50, 10),  # 8: thread 2, 50..60
    _x("L", 4, 300, 50),  # 9: thread 4, the longer of two equal starts
    _x("M", 4, 300, 10),  # 10: ... the shorter (innermost)
]
FLOWS = [
    _flow("s", 1, 1, 42),  # inside E (inside A) -> E (4)
    _flow("s", 2, 1, 47),  # after B..E closed, inside A only, whose start is buckets back -> A (0)
    _flow("f", 3, 1, 100.5),  # not enclosing: the next span of thread 1 starting after it, H, buckets later -> 7
    _flow("f", 4, 1, 72, "e"),  # inside G (inside F, inside A) -> G (6)
    _flow("f", 5, 1, 95, "e"),  # F closed at 90, A still open -> A (0)
    _flow("s", 6, 2, 55),  # inside K -> 8
    _flow("s", 7, 2, 200),  # no span covers it and none starts later on thread 2 -> -1
    _flow("s", 8, 3, 5),  # a thread without spans -> -1
    _flow("s", 9, 4, 305),  # inside both L and M: the innermost, M -> 10
    _flow("f", 10, 4, 299),  # not enclosing, L and M start together after it: the longest first, L -> 9
]
EXPECTED = [4, 0, 7, 6, 0, 8, -1, -1, 10, 9]


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    """Buckets of 2 spans, columns holding 2 values, scatter ranges of 3 indices, bucket files holding 1."""
    monkeypatch.setattr(chrome_events, "HOLD_ROWS", 2)
    monkeypatch.setattr(chrome_bind, "BUCKET_ROWS", 2)
    monkeypatch.setattr(chrome_bind, "SAMPLE_ROWS", 4)
    monkeypatch.setattr(chrome_bind, "RANGE_ROWS", 3)
    monkeypatch.setattr(chrome_bind, "SPILL_HOLD", 1)


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "flows.json"
    path.write_text(json.dumps({"traceEvents": [*SPANS, *FLOWS]}))
    return path


@pytest.mark.parametrize("bucket_rows", [2, 3, 1 << 20])
def test_flows_bind_by_chrome_rules_whatever_the_buckets(tmp_path: Path, tiny: None, bucket_rows: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(chrome_bind, "BUCKET_ROWS", bucket_rows)
    ev = collect(_trace(tmp_path))
    assert ev.start.on_disk == 11 and ev.flows.ts.on_disk == 10  # more than 2 held at the batch's end: to the files
    bound = bind_flows(ev)
    assert bound.read(0, len(bound)).tolist() == EXPECTED


def test_buckets_split_the_spans(tmp_path: Path, tiny: None, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    spread = chrome_bind.spread

    def counting(columns: list, bucket: np.ndarray, *values: np.ndarray) -> None:
        seen.append(len(columns))
        spread(columns, bucket, *values)

    monkeypatch.setattr(chrome_bind, "spread", counting)
    ev = collect(_trace(tmp_path))
    assert bind_flows(ev).read(0, len(FLOWS)).tolist() == EXPECTED
    assert min(seen) >= 4  # 11 spans on the points' threads, 2 a bucket: several buckets (sample quantiles may merge some)


def test_enclosing_points_no_span_covers_bind_to_the_next(tmp_path: Path, tiny: None) -> None:
    ev = collect(_trace(tmp_path))
    code = ev.values.codes[1]  # pid 1, tid 1 share the code of the value 1
    ts = np.array([47_000, 100_500, 72_000, 200_000], dtype=np.int64)
    threads = np.full(4, code, dtype=np.int32)
    bound = bind(ev, 4, lambda lo, hi: (threads[lo:hi], threads[lo:hi], ts[lo:hi], np.ones(hi - lo, dtype=np.int8)))
    assert bound.read(0, 4).tolist() == [0, 7, 6, -1]  # 100.5 us: inside no span, the next one (H); 200 us: none after


def test_generic_trace_correlations_with_tiny_buckets(tmp_path: Path, tiny: None) -> None:
    trace = read_chrome(_trace(tmp_path))
    got = {r["name"]: r["correlation"] for r in trace["engine_slices"].to_pylist()}
    # per span the id of the last flow in the file bound to it: A gets 2 then 5 (5 wins), H 3, G 4, E 1, K 6, M 9, L 10
    assert got == {"A": 5, "B": None, "C": None, "D": None, "E": 1, "F": None, "G": 4, "H": 3, "K": 6, "L": 10, "M": 9}


def test_scatter_over_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chrome_bind, "RANGE_ROWS", 2)
    scatter = Scatter(5, "i")
    scatter.put(np.array([4, 1]), np.array([40, 10]))
    scatter.put(np.array([2]), np.array([20]))
    column = scatter.column(hold=1)
    assert column.dtype == np.int32 and column.on_disk == 5
    assert column.read(0, 5).tolist() == [-1, 10, 20, -1, 40]


def _op(name: str, ts: str, dur: float, pid: int = 100, tid: int = 100, cat: str = "cpu_op", args: dict | None = None) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, **({"args": args} if args else {})}


TRACE_VIEW = [  # operators 0..5 on the host thread; kernels on stream 3
    {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "Python"}},
    {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Ascend Hardware"}},
    {"ph": "M", "name": "thread_name", "pid": 7, "tid": 3, "args": {"name": "Stream 3"}},
    _op("aten::outer", "1000.000", 100),  # op 0: open over the buckets of 1 and 2
    _op("aten::a", "1010.000", 10),  # op 1: inside 0, launches nothing
    _op("aten::b", "1050.000", 10),  # op 2: inside 0, launches K1 -> 2 and 0 run on the device
    _op("aten::c", "1200.000", 10),  # op 3: top level, launches nothing
    _op("aten::d", "1300.000", 50),  # op 4: top level
    _op("aten::e", "1310.000", 5),  # op 5: inside 4, launches K3 (AI CPU) -> 5 and 4 on the device
    _op("K1", "1070.000", 5, 7, 3, "", {"Task Type": "AI_CORE"}),
    _op("K2", "1220.000", 2, 7, 3, "", {"Task Type": "AI_CORE"}),  # no flow ends at it
    _op("K3", "1330.000", 3, 7, 3, "", {"Task Type": "AI_CPU"}),
    {"ph": "s", "name": "torch_to_npu", "cat": "async_npu", "id": 11, "pid": 100, "tid": 100, "ts": "1050.000"},
    {"ph": "f", "name": "torch_to_npu", "cat": "async_npu", "id": 11, "pid": 7, "tid": 3, "ts": "1070.000", "bp": "e"},
    {"ph": "s", "name": "torch_to_npu", "cat": "async_npu", "id": "k3", "pid": 100, "tid": 100, "ts": "1311.000"},
    {"ph": "f", "name": "torch_to_npu", "cat": "async_npu", "id": "k3", "pid": 7, "tid": 3, "ts": "1330.000", "bp": "e"},
]


# the string id "k3": 2^62 plus the top 62 bits of the little-endian 64-bit BLAKE2b of "s" + its UTF-8
K3_CORRELATION = 2**62 + (int.from_bytes(hashlib.blake2b(b"sk3", digest_size=8).digest(), "little") >> 2)


def test_trace_view_nesting_and_launches_with_tiny_buckets(tmp_path: Path, tiny: None) -> None:
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(TRACE_VIEW))
    trace = read_ascend_trace(path)  # its flows bound in buckets of 2 spans; nesting and launches by the linker
    ops = [(o["op_id"], o["name"], o["placement"], o["start_ns"]) for o in trace["ops"].to_pylist()]
    assert ops == [(0, "aten::outer", "device", 0), (1, "aten::a", "host", 10_000), (2, "aten::b", "device", 50_000),
                   (3, "aten::c", "host", 200_000), (4, "aten::d", "device", 300_000), (5, "aten::e", "device", 310_000)]  # fmt: skip
    slices = [(s["engine"], s["name"], s["kind"], s["op_id"], s["correlation"])
              for s in trace["engine_slices"].to_pylist()]  # fmt: skip
    assert slices == [("host", "aten::outer", "compute", 0, None), ("host", "aten::c", "compute", 3, None),
                      ("host", "aten::d", "compute", 4, None),  # the top-level operators
                      ("NPU Stream 3", "K1", "compute", 2, 11), ("NPU Stream 3", "K2", "compute", None, None),
                      ("NPU Stream 3", "K3", "fallback", 5, K3_CORRELATION)]  # fmt: skip
    signals = [(s["kind"], s["reason"], s["op_name"], s["op_id"]) for s in trace["signals"].to_pylist()]
    assert signals == [("dispatch/cpu_fallback", "ai-cpu", "aten::e", 5)]  # K3 ran on the AI CPU
    assert trace.run_info.extra["kernels_linked_to_operators"] == 2
