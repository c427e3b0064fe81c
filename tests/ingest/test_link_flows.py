"""Flow points bound to spans by the linker (`link_flows.bind_flows`, `bound_flows`), by Chrome's rules.

The events are written here by hand and the span of each point worked out by hand: a point that binds to the
enclosing span -> the innermost span open at its time on its thread (start <= time <= end); other points, and
enclosing points no span covers -> the first span of their thread starting at or after them, the longest first of
those starting together; none -> -1. A span bound takes the id of its last `flow` event; another event with a flow
point of its own moves to the start of its span.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from portscope.ingest import link_nesting
from portscope.ingest.events import NONE, EventColumns, EventKind, FlowBinding, FlowPhase, flow_point
from portscope.ingest.link import bind_flows, bound_flows, link
from portscope.ingest.readers.ascend_trace import read_ascend_trace
from portscope.ingest.readers.chrome_generic import read_chrome

ENCLOSING, NEXT = FlowBinding.ENCLOSING, FlowBinding.NEXT
S, T, F = FlowPhase.START, FlowPhase.STEP, FlowPhase.END

SPANS = [  # rows 0..11: (name, tid, start, dur), all of pid 1
    ("A", 1, 0, 100),  # 0: 0..100 around B..G
    ("B", 1, 10, 5),  # 1
    ("C", 1, 20, 5),  # 2
    ("D", 1, 30, 5),  # 3
    ("E", 1, 40, 5),  # 4: 40..45
    ("F", 1, 60, 30),  # 5: 60..90
    ("G", 1, 70, 5),  # 6: 70..75, inside F inside A
    ("H", 1, 120, 5),  # 7
    ("K", 2, 50, 10),  # 8: thread 2
    ("L", 4, 300, 50),  # 9: thread 4, the longer of two starting together
    ("M", 4, 300, 10),  # 10: ... the shorter (innermost)
    ("Z", 5, 200, 0),  # 11: thread 5, zero-length
]
POINTS = [  # rows 12..: (phase, binding, tid, time, expected span row), id 100 + its index
    (S, ENCLOSING, 1, 42, 4),  # 0: inside E (inside A)
    (S, ENCLOSING, 1, 47, 0),  # 1: B..E closed, inside A only
    (F, NEXT, 1, 100, 7),  # 2: not enclosing: the next span starting at or after it, H
    (F, ENCLOSING, 1, 72, 6),  # 3: inside G inside F inside A: the innermost
    (F, ENCLOSING, 1, 95, 0),  # 4: F closed at 90, A still open
    (T, ENCLOSING, 2, 55, 8),  # 5: a step inside K
    (S, ENCLOSING, 2, 200, -1),  # 6: no span covers it and none starts later on thread 2
    (S, ENCLOSING, 3, 5, -1),  # 7: a thread without spans
    (S, ENCLOSING, 4, 305, 10),  # 8: inside both L and M: the innermost, M
    (F, NEXT, 4, 299, 9),  # 9: L and M start together after it: the longest first, L
    (S, ENCLOSING, 1, 110, 7),  # 10: enclosing, but no span covers it (A ended at 100): the next one, H
    (S, ENCLOSING, 1, 100, 0),  # 11: at A's very end: A still holds it
    (F, ENCLOSING, 5, 200, 11),  # 12: a zero-length span holds its own time
    (F, NEXT, 1, 60, 5),  # 13: a span starting at its time is the next one: F
    (S, ENCLOSING, 4, 300, 10),  # 14: at the start of L and M: the innermost, M
]


def _events(spill: bool = False) -> EventColumns:
    ev = EventColumns(spill=spill)
    for name, tid, start, dur in SPANS:
        ev.add(EventKind.SPAN, name, 1, tid, start, dur)
    for i, (phase, binding, tid, time, _) in enumerate(POINTS):
        ev.add(EventKind.FLOW, "flow", 1, tid, time, correlation=100 + i, flow=flow_point(phase, binding))
    return ev


EXPECTED = [p[4] for p in POINTS]
# per span, the id of the last point (file order) bound to it: A 1, 4, 11 -> 111; H 2, 10 -> 110; M 8, 14 -> 114
CORRELATIONS = {"A": 111, "B": None, "C": None, "D": None, "E": 100, "F": 113, "G": 103, "H": 110, "K": 105, "L": 109,
                "M": 114, "Z": 112}  # fmt: skip


def test_points_bind_by_chromes_rules() -> None:
    points, spans = bind_flows(_events().arrays())
    assert points.tolist() == list(range(12, 12 + len(POINTS)))
    assert spans.tolist() == EXPECTED


@pytest.mark.parametrize("sort_rows", [4_000_000, 5], ids=["numpy-sort", "duckdb-sort"])
@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 1 << 20])
def test_points_in_files_bind_the_same_a_chunk_at_a_time(monkeypatch: pytest.MonkeyPatch, chunk: int, sort_rows: int) -> None:
    """The spans and points sorted and bound a chunk at a time (a point's next span, or the group of spans starting
    with it, in another chunk than its own), sorted in numpy or by DuckDB."""
    monkeypatch.setattr(link_nesting, "CHUNK_ROWS", chunk)
    monkeypatch.setattr(link_nesting, "SORT_ROWS", sort_rows)
    a = _events(spill=True).arrays()
    assert not isinstance(a["start_ns"], np.ndarray)  # the columns are in files
    assert bind_flows(a)[1].tolist() == EXPECTED
    bound_flows(a)  # the ids written into the file's column
    assert [int(a["correlation"][r]) if a["correlation"][r] != NONE else None for r in range(len(SPANS))] == [
        CORRELATIONS[name] for name, *_ in SPANS]


def test_bound_spans_take_their_last_flows_id() -> None:
    a = _events().arrays()
    links = link(a)
    got = {name: int(a["correlation"][r]) if a["correlation"][r] != NONE else None for r, (name, *_) in enumerate(SPANS)}
    assert got == CORRELATIONS
    assert links.end_ns == 350  # L's end; no flow point ends the run


@pytest.mark.parametrize("spill", [False, True])
def test_a_call_with_a_flow_point_moves_to_the_start_of_its_span(spill: bool) -> None:
    ev = EventColumns(spill=spill)
    ev.add(EventKind.OP, "aten::outer", 1, 1, 0, 100)  # row 0
    ev.add(EventKind.OP, "aten::inner", 1, 1, 10, 20)  # row 1
    ev.add(EventKind.KERNEL, "k", 7, 3, 50, 5)  # row 2: device work
    ev.add(EventKind.RUNTIME, "launch", 1, 1, 15, correlation=9, flow=flow_point(S, ENCLOSING))  # row 3: inside inner
    ev.add(EventKind.RUNTIME, "lost", 1, 1, 500, correlation=8, flow=flow_point(S, ENCLOSING))  # row 4: no span
    ev.add(EventKind.FLOW, "launch", 7, 3, 50, correlation=9, flow=flow_point(F, ENCLOSING))  # row 5: at k
    a = ev.arrays()
    links = link(a)
    assert a["start_ns"][3] == 10 and a["start_ns"][4] == 500  # moved to inner's start; the other stays
    assert a["correlation"][2] == 9 and a["correlation"][1] == NONE  # the kernel took the id, not the operator
    assert links.launcher[2] == 3 and links.op[2] == 1  # the kernel launched by the call, in aten::inner


def test_a_flow_carries_the_id_of_its_starts_span_and_spans_keep_their_own() -> None:
    """Rows by hand: the call "run" (id 21 of its own) holds flow 501's start; the flow's end sits in kernel "k1"
    (no id): k1 takes 21, not 501, and is launched by "run"; kernel "k2" (its own id 22) holds flow 502's end: it
    keeps 22. Flow 503 starts in the operator aten::x (no id) and ends in "k3": the operator takes no id (it did not
    run as k3), k3 takes the flow's own id 503 and no call launched it."""
    ev = EventColumns()
    ev.add(EventKind.OP, "aten::mm", 1, 1, 0, 100)  # row 0
    ev.add(EventKind.RUNTIME, "run", 1, 1, 10, 0, correlation=21)  # row 1
    ev.add(EventKind.KERNEL, "k1", 7, 1, 30, 10)  # row 2
    ev.add(EventKind.KERNEL, "k2", 7, 1, 50, 10, correlation=22)  # row 3
    ev.add(EventKind.OP, "aten::x", 1, 1, 200, 50)  # row 4
    ev.add(EventKind.KERNEL, "k3", 7, 1, 220, 10)  # row 5
    for fid, tid, time, phase in ((501, 1, 10, S), (501, 1, 30, F), (502, 1, 10, S), (502, 1, 55, F), (503, 1, 210, S),
                                  (503, 1, 220, F)):  # fmt: skip
        ev.add(EventKind.FLOW, "ac2g", 7 if phase is F else 1, tid, time, correlation=fid, flow=flow_point(phase, ENCLOSING))
    a = ev.arrays()
    links = link(a)
    assert [int(a["correlation"][r]) if a["correlation"][r] != NONE else None for r in range(6)] == [
        None, 21, 21, 22, None, 503]
    assert links.launcher[2] == 1 and links.op[2] == 0  # k1 launched by "run", in aten::mm
    assert links.launcher[3] == -1 and links.launcher[5] == -1 and links.op[5] == -1  # k3: no call, no operator


def _x(name: str, tid: int, ts: float, dur: float) -> dict:
    return {"ph": "X", "name": name, "cat": "c", "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def _flow(ph: str, fid: int, tid: int, ts: float, bp: str | None = None) -> dict:
    return {"ph": ph, "name": "flow", "cat": "c", "id": fid, "pid": 1, "tid": tid, "ts": ts, **({"bp": bp} if bp else {})}


def test_generic_trace_spans_carry_their_flows_ids(tmp_path: Path) -> None:
    spans = [_x(name, tid, start, dur) for name, tid, start, dur in SPANS[:11]]  # in us
    flows = [_flow("s", 1, 1, 42), _flow("s", 2, 1, 47), _flow("f", 3, 1, 100.5), _flow("f", 4, 1, 72, "e"),
             _flow("f", 5, 1, 95, "e"), _flow("s", 6, 2, 55), _flow("s", 7, 2, 200), _flow("s", 8, 3, 5),
             _flow("s", 9, 4, 305), _flow("f", 10, 4, 299)]  # fmt: skip
    path = tmp_path / "flows.json"
    path.write_text(json.dumps({"traceEvents": [*spans, *flows]}))
    trace = read_chrome(path)
    got = {r["name"]: r["correlation"] for r in trace["engine_slices"].to_pylist()}
    # per span the id of the last flow in the file bound to it: A gets 2 then 5 (5 wins), H 3, G 4, E 1, K 6, M 9, L 10
    assert got == {"A": 5, "B": None, "C": None, "D": None, "E": 1, "F": None, "G": 4, "H": 3, "K": 6, "L": 10, "M": 9}
    assert trace["regions"].to_pylist()[0]["dur_ns"] == 350_000  # flow 7 (200 us) is no end


def _op(name: str, ts: str, dur: float, pid: int = 100, tid: int = 100, cat: str = "cpu_op", args: dict | None = None) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, **({"args": args} if args else {})}


TRACE_VIEW = [  # operators 0..5 on the host thread; kernels on stream 3
    {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "Python"}},
    {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Ascend Hardware"}},
    {"ph": "M", "name": "thread_name", "pid": 7, "tid": 3, "args": {"name": "Stream 3"}},
    _op("aten::outer", "1000.000", 100),  # op 0
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


def test_trace_view_launches_by_flow(tmp_path: Path) -> None:
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(TRACE_VIEW))
    trace = read_ascend_trace(path)
    ops = [(o["op_id"], o["name"], o["placement"], o["start_ns"]) for o in trace["ops"].to_pylist()]
    assert ops == [(0, "aten::outer", "device", 0), (1, "aten::a", "host", 10_000), (2, "aten::b", "device", 50_000),
                   (3, "aten::c", "host", 200_000), (4, "aten::d", "device", 300_000), (5, "aten::e", "device", 310_000)]  # fmt: skip
    slices = [(s["engine"], s["name"], s["kind"], s["op_id"], s["correlation"])
              for s in trace["engine_slices"].to_pylist()]  # fmt: skip
    assert slices == [("host", "aten::outer", "compute", 0, None), ("host", "aten::c", "compute", 3, None),
                      ("host", "aten::d", "compute", 4, None),  # the top-level operators
                      ("NPU Stream 3", "K1", "compute", 2, 11), ("NPU Stream 3", "K2", "compute", None, None),
                      ("NPU Stream 3", "K3", "fallback", 5, K3_CORRELATION)]  # fmt: skip
    calls = [(c["name"], c["op_id"], c["start_ns"], c["correlation"]) for c in trace["runtime_calls"].to_pylist()]
    # each launch flow's start a call at the start of the operator its point binds to (aten::e: 1310 us, not 1311)
    assert calls == [("torch_to_npu", 2, 50_000, 11), ("torch_to_npu", 5, 310_000, K3_CORRELATION)]
    signals = [(s["kind"], s["reason"], s["op_name"], s["op_id"]) for s in trace["signals"].to_pylist()]
    assert signals == [("dispatch/cpu_fallback", "ai-cpu", "aten::e", 5)]  # K3 ran on the AI CPU
    assert trace.run_info.extra["kernels_linked_to_operators"] == 2


def test_launches_join_the_last_call_with_each_id() -> None:
    from portscope.ingest.link import launches

    # rows 0-3 runtime calls with ids 5, 7, 5, 9; rows 4-8 device work with ids 5, 9, 11 (no call), 7, none; row 9
    # an operator with id 5 (not a call: never a launcher)
    correlation = np.array([5, 7, 5, 9, 5, 9, 11, 7, NONE, 5], dtype=np.int64)
    calls = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0], dtype=bool)
    work = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 0], dtype=bool)
    assert launches(correlation, calls, work).tolist() == [-1, -1, -1, -1, 2, 3, -1, 1, -1, -1]
    # one id on many calls and kernels (a broken file): each kernel gets the last such call, no pair is made
    many = np.full(20_000, 3, dtype=np.int64)
    half = np.arange(20_000) < 10_000
    assert set(launches(many, half, ~half)[10_000:].tolist()) == {9_999}
