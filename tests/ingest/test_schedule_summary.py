"""Schedule summaries on hand-made engine slices (ingest/schedule_summary.py): busy, idle by cause, critical path."""

from __future__ import annotations

import pyarrow as pa

from portscope.ingest.builder import TraceBuilder
from portscope.ingest.schedule_summary import format_schedule, schedule_summaries, summarize_slices
from portscope.ingest.schema import EngineKind, SliceKind


def _trace():  # noqa: ANN202
    b = TraceBuilder()
    rid = b.add_region("step", dur_ns=100)
    rows = [  # engine, kind, start, dur, waited_on
        ("dispatch", EngineKind.DISPATCH, 0, 10, None),
        ("compiler", EngineKind.COMPILER, 10, 40, "dispatch"),
        ("matrix", EngineKind.MATRIX, 50, 20, "compile"),
        ("dispatch", EngineKind.DISPATCH, 50, 10, "compile"),
        ("vector", EngineKind.VECTOR, 70, 5, "dependency"),
        ("matrix", EngineKind.MATRIX, 70, 10, None),
        ("matrix", EngineKind.MATRIX, 75, 10, None),  # overlaps the previous one: counted once
    ]
    for engine, kind, start, dur, wait in rows:
        b.engine_slices.append(region_id=rid, engine=engine, engine_kind=kind, kind=SliceKind.COMPUTE, name="x",
                               start=start, dur=dur, waited_on=wait)
    return b.build()


def test_busy_utilisation_idle_and_critical_path() -> None:
    (s,) = schedule_summaries(_trace())
    assert (s.start, s.end, s.total) == (0, 85, 85)
    use = {e.engine: e for e in s.engines}
    assert use["matrix"].busy == 35 and use["matrix"].slices == 3
    assert abs(use["matrix"].utilisation - 35 / 85) < 1e-9
    assert use["matrix"].idle_by_cause == {"compile": 50}
    assert use["dispatch"].idle_by_cause == {"compile": 40}
    assert use["vector"].idle_by_cause == {"dependency": 70}
    # last end 85 (matrix) <- matrix 70..80 overlaps; the walk goes matrix -> ... -> compiler -> dispatch
    assert s.critical_path == 85
    assert s.critical_by_engine["compiler"] == 40 and s.critical_by_engine["dispatch"] == 10
    assert [e.engine_kind for e in s.engines][:2] == ["dispatch", "compiler"]
    assert s.idle_by_cause() == {"compile": 50, "dependency": 70}
    table = s.engines_table()
    assert table.column("engine").to_pylist()[0] == "dispatch" and "idle_compile" in table.column_names


def test_text_and_ratio_line() -> None:
    trace = _trace()
    summaries = schedule_summaries(trace)
    text = format_schedule(summaries, modes={0: ("eager", "warm")})
    assert "region 'step': schedule 85 ns" in text and "compiler 47.1%" in text
    both = format_schedule(summaries + summaries, modes={0: ("eager", "warm")})
    assert "eager/compiled" not in both


def test_measured_slices_without_causes_are_unknown() -> None:
    table = pa.table({"engine": ["stream 7", "stream 7"], "engine_kind": ["stream", "stream"], "kind": ["compute"] * 2,
                      "start": [0, 30], "dur": [10, 10], "waited_on": [None, None]})
    s = summarize_slices(table)
    assert s.engines[0].idle_by_cause == {"unknown": 20}
    assert s.critical_by_engine == {"stream 7": 20, "idle": 20}


def test_empty() -> None:
    s = summarize_slices(pa.table({"engine": pa.array([], pa.string()), "engine_kind": pa.array([], pa.string()),
                                   "kind": pa.array([], pa.string()), "start": pa.array([], pa.int64()),
                                   "dur": pa.array([], pa.int64())}))
    assert s.total == 0 and s.engines == []
