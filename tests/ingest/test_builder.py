"""TableBuilder: rows compacted into arrays every few rows build the same table as rows held whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest import builder as builder_module
from portscope.ingest.builder import TableBuilder, TraceBuilder
from portscope.ingest.errors import ColumnValueError, TraceFormatError
from portscope.ingest.schema import Direction, EngineKind, Mode, SignalKind, SliceKind


def _lanes(compact_rows: int) -> TableBuilder:
    lanes = TableBuilder("engine_slices", compact_rows=compact_rows)
    rows = [("stream 7", "gemm", 10), ("DMA h2d", "copy", 20), ("stream 7", "relu", 30), ("stream 7", "gemm", 40),
            ("stream 9", "softmax", 50)]  # fmt: skip
    for engine, name, start in rows:
        lanes.append(engine=engine, engine_kind=EngineKind.STREAM, kind=SliceKind.COMPUTE, name=name, start=start, dur=1,
                     module="layers.0" if start == 30 else None)  # fmt: skip
    lanes.extend({"engine": ["DMA d2h", "stream 7"], "engine_kind": [EngineKind.DMA_D2H, EngineKind.STREAM],
                  "kind": [SliceKind.TRANSFER, SliceKind.COMPUTE], "name": ["copy", "add"], "start": [60, 70], "dur": [2, 3],
                  "bytes": [4096, None]})  # fmt: skip
    return lanes


@pytest.mark.parametrize(("compact_rows", "held"), [(1, 0), (2, 0), (4, 3), (1000, 7)])
def test_compacted_rows_build_the_table_of_every_row(compact_rows: int, held: int) -> None:
    lanes = _lanes(compact_rows)  # 5 rows appended, then 2 extended: compacted once `compact_rows` rows are held
    assert len(lanes) == 7
    assert len(lanes.columns["name"]) == held  # the others are arrays already
    table = lanes.build()
    engine, name, module, kind = (table.column(c).combine_chunks() for c in ("engine", "name", "module", "kind"))
    # dictionaries in order of first appearance over all rows, whichever part a value first came in
    assert engine.dictionary.to_pylist() == ["stream 7", "DMA h2d", "stream 9", "DMA d2h"]
    assert engine.indices.to_pylist() == [0, 1, 0, 0, 2, 3, 0]
    assert name.dictionary.to_pylist() == ["gemm", "copy", "relu", "softmax", "add"]
    assert name.indices.to_pylist() == [0, 1, 2, 0, 3, 1, 4]
    assert kind.dictionary.to_pylist() == ["compute", "transfer"] and kind.indices.to_pylist() == [0, 0, 0, 0, 0, 1, 0]
    assert module.to_pylist() == [None, None, "layers.0", None, None, None, None] and module.dictionary.to_pylist() == ["layers.0"]
    assert table.column("start").to_pylist() == [10, 20, 30, 40, 50, 60, 70]
    assert table.column("bytes").to_pylist() == [None] * 5 + [4096, None]
    assert table.column("region_id").null_count == 7
    assert table.schema == lanes.schema and table.column("name").num_chunks == 1


def test_build_changes_nothing_and_rows_may_follow() -> None:
    lanes = _lanes(2)
    first = lanes.build()
    assert lanes.build().equals(first)
    lanes.append(engine="stream 11", engine_kind=EngineKind.STREAM, kind=SliceKind.COMPUTE, name="relu", start=80, dur=1)
    table = lanes.build()
    assert table.column("engine").combine_chunks().dictionary.to_pylist() == ["stream 7", "DMA h2d", "stream 9", "DMA d2h", "stream 11"]
    assert table.column("name").combine_chunks().indices.to_pylist()[-1] == 2  # "relu", numbered when first seen
    assert table.column("start").to_pylist()[-2:] == [70, 80]


def test_set_overwrites_held_and_compacted_rows() -> None:
    sigs = TableBuilder("signals", compact_rows=2)
    for i, reason in enumerate(["a", "b", "c", "d", "e"]):
        sigs.append(region_id=i, kind=SignalKind.SYNC, reason=reason, count=1, bytes=0)
    sigs.set(0, reason="d", count=7)  # compacted: "d" now appears first (row 0)
    sigs.set(3, kind=SignalKind.TRANSFER_D2H)  # compacted, in the second part
    sigs.set(4, reason=None, bytes=64)  # still held
    table = sigs.build()
    reason, kind = (table.column(c).combine_chunks() for c in ("reason", "kind"))
    assert reason.to_pylist() == ["d", "b", "c", "d", None]
    assert reason.dictionary.to_pylist() == ["d", "b", "c"] and reason.indices.to_pylist()[:4] == [0, 1, 2, 0]
    assert kind.to_pylist() == ["sync", "sync", "sync", "transfer/d2h", "sync"]
    assert table.column("count").to_pylist() == [7, 1, 1, 1, 1]
    assert table.column("bytes").to_pylist() == [0, 0, 0, 0, 64]
    with pytest.raises(IndexError):
        sigs.set(5, count=1)
    with pytest.raises(KeyError):
        sigs.set(0, nonsense=1)


def test_regions_compacted_by_the_trace_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builder_module, "COMPACT_ROWS", 2)
    b = TraceBuilder()
    root = b.add_region("trace", start_ns=0, dur_ns=100, mode=Mode.UNKNOWN, device="cuda:0")
    for k in range(4):
        b.add_region(f"ProfilerStep#{k}", start_ns=10 * k, dur_ns=9, parent_id=root, mode=Mode.EAGER, device="cuda:0")
    b.regions.set(2, device="cpu")
    b.transfers.append(region_id=1, direction=Direction.H2D, bytes=8)
    regions = b.build().tables["regions"]
    assert regions.column("name").to_pylist() == ["trace", "ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert regions.column("parent_id").to_pylist() == [None, 0, 0, 0, 0]
    assert regions.column("start_ns").to_pylist() == [0, 0, 10, 20, 30]
    assert regions.column("device").to_pylist() == ["cuda:0", "cuda:0", "cpu", "cuda:0", "cuda:0"]
    mode = regions.column("mode").combine_chunks()
    assert mode.dictionary.to_pylist() == ["unknown", "eager"] and mode.indices.to_pylist() == [0, 1, 1, 1, 1]


def test_a_value_the_column_cannot_hold_names_table_and_column() -> None:
    wrong = TableBuilder("engine_slices", compact_rows=1)
    wrong.append(engine=7, engine_kind="stream", kind="compute", name="k", start=0, dur=1)  # a lane name not text
    with pytest.raises(ColumnValueError, match=r"engine_slices\.engine cannot hold") as err:
        wrong.build()
    assert (err.value.table, err.value.column) == ("engine_slices", "engine")
    with pytest.raises(ColumnValueError, match=r"engine_slices\.start cannot hold"):
        TableBuilder("engine_slices", compact_rows=1).append(engine="e", engine_kind="stream", kind="compute", name="k",
                                                              start="not a number", dur=1)  # fmt: skip
    held = TableBuilder("regions")  # not compacted: the value meets Arrow at build
    held.append(region_id=0, name="r", mode="eager", dur_ns=2**70)
    with pytest.raises(ColumnValueError, match=r"regions\.dur_ns cannot hold"):
        held.build()


def test_load_any_names_the_file_when_a_number_overflows_its_column(tmp_path: Path) -> None:
    """A reader letting an out-of-range number through (a fuzzer's find in the RBLN explain reader) still ends in a
    TraceFormatError that names the file, not an OverflowError from Arrow."""
    from portscope.ingest.convert import load_any

    dump = tmp_path / "explain.json"
    dump.write_text(json.dumps({"hidden_host_bounce": {"by_site": {"model.py:3": {"count": 2**70, "bytes": 16}}}}))
    with pytest.raises(TraceFormatError, match=r"explain\.json: "):
        load_any(dump, format="rbln-explain")
