"""Rows kept on disk until written (_disk_rows.DiskRows), and flow ids that are not int64 (_chrome_events.other_key).

Expected rows, dictionaries and keys are written by hand from the rows added and the documented key formula.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pytest

from portscope.ingest.readers import _chrome_events, _chrome_slices, _disk_rows
from portscope.ingest.readers._chrome_events import collect, other_key
from portscope.ingest.readers._disk_rows import DiskRows
from portscope.ingest.schema import SignalKind


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    """Columns spilled past 2 values, tables made 2 rows a slice."""
    monkeypatch.setattr(_disk_rows, "SPILL_HOLD", 2)
    monkeypatch.setattr(_chrome_slices, "SLICE_ROWS", 2)


def _signals() -> DiskRows:
    rows = DiskRows("signals", numbers={"op_id": "q", "time_ns": "q"}, texts=("kind", "reason", "op_name", "note"),
                    optional=("op_id",), fixed={"region_id": 3, "count": 1, "bytes": 0})  # fmt: skip
    rows.add(2, kind=SignalKind.SYNC, op_id=[7, -1], reason=["item", "sync-call"], op_name=["aten::item", "wait"],
             note=None, time_ns=[10, 20])  # fmt: skip
    rows.add(0, kind=SignalKind.SYNC, op_id=[], reason=[], op_name=[], note=None, time_ns=[])
    rows.add(3, kind=[SignalKind.CPU_FALLBACK.value, SignalKind.SYNC.value, SignalKind.CPU_FALLBACK.value],
             op_id=[-1, 9, 8], reason="ai-cpu", op_name=["Cast", "aten::item", "Cast"], note="try another dtype",
             time_ns=[30, 40, 50])  # fmt: skip
    return rows


def test_rows_on_disk_come_back_in_slices_with_first_appearance_dictionaries(tiny: None) -> None:
    rows = _signals()
    assert len(rows) == 5 and rows.numbers["time_ns"].on_disk == 5  # blocks of 2 or more rows go to the file
    table = rows.slices()
    assert table.num_rows == 5
    batches = list(table.batches())
    assert [b.num_rows for b in batches] == [2, 2, 1]
    got = pa.Table.from_batches(batches)
    assert got.column("kind").chunk(0).dictionary.to_pylist() == ["sync", "dispatch/cpu_fallback"]
    assert got.column("reason").chunk(0).dictionary.to_pylist() == ["item", "sync-call", "ai-cpu"]
    assert got.column("op_name").chunk(0).dictionary.to_pylist() == ["aten::item", "wait", "Cast"]
    assert got.column("note").chunk(0).dictionary.to_pylist() == ["try another dtype"]
    assert [(r["region_id"], r["op_id"], r["kind"], r["reason"], r["op_name"], r["count"], r["bytes"], r["note"],
             r["time_ns"], r["call_site"], r["stack_id"]) for r in got.to_pylist()] == [  # fmt: skip
        (3, 7, "sync", "item", "aten::item", 1, 0, None, 10, None, None),
        (3, None, "sync", "sync-call", "wait", 1, 0, None, 20, None, None),
        (3, None, "dispatch/cpu_fallback", "ai-cpu", "Cast", 1, 0, "try another dtype", 30, None, None),
        (3, 9, "sync", "ai-cpu", "aten::item", 1, 0, "try another dtype", 40, None, None),
        (3, 8, "dispatch/cpu_fallback", "ai-cpu", "Cast", 1, 0, "try another dtype", 50, None, None),
    ]
    assert got.column("op_id").chunk(0).null_count == 1


def test_plain_text_columns_and_unknown_columns() -> None:
    rows = DiskRows("compiles", numbers={"compile_ns": "q", "time_ns": "q"}, texts=("key", "reason"), fixed={"region_id": 0,
                    "kind": "program"})  # fmt: skip
    rows.add(2, key=["aten::mm", None], compile_ns=[5, 6], reason="opCompile", time_ns=[1, 2])
    got = pa.Table.from_batches(list(rows.slices().batches()))
    assert got.column("key").type == pa.string()
    assert [(r["kind"], r["key"], r["compile_ns"], r["reason"], r["time_ns"]) for r in got.to_pylist()] == [
        ("program", "aten::mm", 5, "opCompile", 1), ("program", None, 6, "opCompile", 2)]  # fmt: skip
    with pytest.raises(KeyError, match="no columns"):
        DiskRows("compiles", numbers={"bytes": "q"}, texts=())
    with pytest.raises(ValueError, match="3 values for 2 rows"):
        rows.add(2, key=["a", "b", "c"], compile_ns=0, reason=None, time_ns=0)


def _blake(text: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 2


def test_other_flow_ids_are_hashed_not_numbered() -> None:
    assert other_key("x1") == -(2**62) + _blake(b"sx1")
    assert other_key(2**64) == -(2**62) + _blake(b"i18446744073709551616")
    assert other_key(1.0) == other_key(True) == -(2**62) + _blake(b"i1")  # equal in Python: one key
    assert other_key(1.5) == -(2**62) + _blake(b"f1.5")
    assert other_key("1") != other_key(1.0)  # a string never shares a key with a number
    assert -(2**62) <= other_key("any") < 0


def test_string_flow_ids_pair_without_a_table_of_every_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_chrome_events, "_RECENT_IDS", 2)  # the recent ids are forgotten after 2
    events = [{"ph": "s", "name": "f", "cat": "c", "id": fid, "pid": 1, "tid": 1, "ts": n} for n, fid in enumerate("abc")]
    events += [{"ph": "f", "name": "f", "cat": "c", "id": "a", "pid": 1, "tid": 2, "ts": 9, "bp": "e"},
               {"ph": "t", "name": "f", "cat": "c", "id2": {"global": "b"}, "pid": 1, "tid": 2, "ts": 10},
               {"ph": "f", "name": "f", "cat": "c", "id2": {"local": "c"}, "pid": 1, "tid": 2, "ts": 11},
               {"ph": "f", "name": "f", "cat": "c", "id2": {"local": "c"}, "pid": 2, "tid": 2, "ts": 12},
               {"ph": "X", "name": "x", "cat": "c", "pid": 1, "tid": 1, "ts": 0, "dur": 20}]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    ev = collect(path)
    keys = ev.flows.read("key", 0, len(ev.flows)).tolist()
    a, b, c = (-(2**62) + _blake(b"s" + x) for x in (b"a", b"b", b"c"))
    local_c = [-(2**62) + _blake(f"sid2.local {pid} 'c'".encode()) for pid in (1, 2)]
    assert keys == [a, b, c, a, b, *local_c]  # id2.global is the id; id2.local an id of its process only
    assert len(ev.flows.recent_ids) <= 2
