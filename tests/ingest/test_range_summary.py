"""Range summaries: busy time per engine (clipped, overlaps once), operator totals and signals inside a range."""

from __future__ import annotations

import pyarrow as pa
import pytest

from portscope.ingest.builder import TableBuilder
from portscope.ingest.flows import slice_flows
from portscope.ingest.range_summary import range_summary
from portscope.ingest.viewport import build_lanes

ROWS = [  # engine, kind, name, start, dur, op_id
    ("matrix", "matrix", "aten::mm", 0, 100, 1),
    ("matrix", "matrix", "aten::mm", 50, 100, 2),  # overlaps the first: 0..150 busy once
    ("matrix", "matrix", "aten::addmm", 400, 100, 3),
    ("vector", "vector", "aten::pow", 120, 60, 4),
    ("vector", "vector", "aten::pow", 900, 10, 5),
    ("host", "host", "aten::rsqrt", 140, 20, 6),
]


def slices() -> pa.Table:
    b = TableBuilder("engine_slices")
    for engine, engine_kind, name, start, dur, op in ROWS:
        b.append(engine=engine, engine_kind=engine_kind, kind="compute", name=name, start=start, dur=dur, op_id=op)
    return b.build()


def signals() -> pa.Table:
    b = TableBuilder("signals")
    b.append(kind="dispatch/cpu_fallback", op_id=4, op_name="aten::pow", count=1, bytes=0, region_id=0)
    b.append(kind="transfer/d2h", op_id=6, op_name="aten::rsqrt", count=2, bytes=512, region_id=0)
    b.append(kind="transfer/d2h", op_id=5, op_name="aten::pow", count=1, bytes=64, region_id=0)  # outside the range
    return b.build()


def test_busy_time_is_clipped_and_overlaps_count_once() -> None:
    table = slices()
    summary = range_summary(table, build_lanes(table), signals(), 100, 450)  # 350 units
    engines = summary.engines.to_pylist()
    # matrix: mm 0..150 -> 100..150 (50), addmm 400..500 -> 400..450 (50); vector: pow 120..180 (60); host: 140..160 (20)
    assert [(e["engine"], e["busy"], e["slices"]) for e in engines] == [("host", 20, 1), ("matrix", 100, 3), ("vector", 60, 1)]
    assert engines[1]["share"] == pytest.approx(100 / 350)
    assert summary.slices == 5
    # operators by clipped time: aten::mm 0..100 touches the range (100..100: 0) and 50..150 gives 100..150 (50)
    assert summary.operators.to_pylist() == [
        {"name": "aten::pow", "count": 1, "time": 60.0},
        {"name": "aten::addmm", "count": 1, "time": 50.0},
        {"name": "aten::mm", "count": 2, "time": 50.0},
        {"name": "aten::rsqrt", "count": 1, "time": 20.0},
    ]
    assert summary.signals.to_pylist() == [{"signal": "transfer/d2h", "count": 2, "bytes": 512},
                                           {"signal": "dispatch/cpu_fallback", "count": 1, "bytes": 0}]


def test_an_empty_range_has_empty_tables() -> None:
    table = slices()
    summary = range_summary(table, build_lanes(table), signals(), 600, 800)
    assert summary.slices == 0 and summary.engines.num_rows == 0 and summary.operators.num_rows == 0 and summary.signals.num_rows == 0


def test_memory_levels_are_neither_busy_time_nor_operators_nor_flows() -> None:
    # the table above plus aten::pow's (op 4) allocation: an "allocated" level on "memory npu:0" from 120 to 1000
    b = TableBuilder("engine_slices")
    for engine, engine_kind, name, start, dur, op in ROWS:
        b.append(engine=engine, engine_kind=engine_kind, kind="compute", name=name, start=start, dur=dur, op_id=op)
    b.append(engine="memory npu:0", engine_kind="other", kind="annotation", name="allocated", start=120, dur=880, op_id=4,
             bytes=4096)
    table = b.build()
    summary = range_summary(table, build_lanes(table), signals(), 100, 450)
    assert [e["engine"] for e in summary.engines.to_pylist()] == ["host", "matrix", "vector"]  # no memory lane
    assert "allocated" not in summary.operators.column("name").to_pylist()
    assert summary.slices == 5
    pow_slice, memory_slice = 3, len(ROWS)  # aten::pow at 120 and its allocation, one operator
    assert slice_flows(table, memory_slice) == [] and slice_flows(table, pow_slice) == []
