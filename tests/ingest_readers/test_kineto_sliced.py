"""Bounded-memory conversion: a Kineto CPU trace's ops table and host lanes made and written slice by slice."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from portscope.ingest import batches as batches_module
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.readers import _kineto_ops
from portscope.ingest.readers.kineto import read_kineto
from portscope.ingest.trace import TableSlices, read_trace, write_trace


def _op(name: str, tid: int, ts: float, dur: float, dims: list | None = None, dtype: str = "float") -> dict:
    event = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}
    if dims is not None:
        event["args"] = {"External id": 1, "Input Dims": dims, "Input type": [dtype] * len(dims), "Ev Idx": 0}
    return event


# Two threads in file order of start; thread 1: A [0, 10) holds B and C, D [12, 16) holds E (same start,
# shorter, after it); thread 2: F [2, 7), G [8, 9). A user annotation "step" covers [4, 14).
OPS = [
    _op("A", 1, 0, 10),
    _op("B", 1, 1, 3, [[2, 3]]),  # float32 2x3: 24 bytes
    _op("F", 2, 2, 5),
    _op("C", 1, 5, 2, [[4]], "c10::Half"),  # float16 4: 8 bytes
    _op("G", 2, 8, 1),
    _op("D", 1, 12, 4),
    _op("E", 1, 12, 1),
]
STEP = {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 4, "dur": 10}


def _write(path: Path, events: list) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "t"}, indent=1))
    return path


def _converted(tmp_path: Path, source: Path, name: str, *, sliced: bool) -> tuple[object, Path]:
    trace = read_kineto(source, sliced=sliced)
    return trace, write_trace(trace, tmp_path / name)


def test_slices_write_the_same_trace_as_one_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batches_module, "_BATCH_ROWS", 2)  # every table written in 2-row record batches
    source = _write(tmp_path / "cpu.json", [*OPS, STEP])
    whole, whole_path = _converted(tmp_path, source, "whole.arrow", sliced=False)
    assert not whole.slices
    monkeypatch.setattr(_kineto_ops, "SPILL_ROWS", 3)  # 7 operators: slices of 3, 3 and 1
    sliced, sliced_path = _converted(tmp_path, source, "sliced.arrow", sliced=True)
    assert set(sliced.slices) == {"ops", "engine_slices"} and "ops" not in sliced.tables
    assert (sliced.num_rows("ops"), sliced.num_rows("engine_slices")) == (7, 4)
    in_memory_hash = sliced.content_hash()

    got, want = read_trace(sliced_path), read_trace(whole_path)
    # slices of 3, 3, 1 operators (lanes A F | G D | none) written as batches of 2 rows, as the whole tables are
    assert [len(b) for b in got["ops"].to_batches()] == [2, 2, 2, 1]
    assert [len(b) for b in got["engine_slices"].to_batches()] == [2, 2]
    for name in want.tables:
        assert got[name].equals(want[name]), name
    assert got.content_hash() == in_memory_hash == want.content_hash() == whole.content_hash()
    with zipfile.ZipFile(sliced_path) as a, zipfile.ZipFile(whole_path) as b:
        assert [a.read(n) == b.read(n) for n in a.namelist()] == [True] * len(a.namelist())  # byte for byte

    ops = got["ops"].to_pydict()
    assert ops["op_id"] == [0, 1, 2, 3, 4, 5, 6]
    assert ops["name"] == ["A", "B", "F", "C", "G", "D", "E"]
    assert ops["region_id"] == [0, 0, 0, 1, 1, 1, 1]  # started inside "step" [4, 14): C, G, D, E
    assert ops["start_ns"] == [0, 1000, 2000, 5000, 8000, 12000, 12000]
    assert sum(ops["dur_ns"]) == (10 + 3 + 5 + 2 + 1 + 4 + 1) * 1000
    assert ops["bytes_in"] == [0, 24, 0, 8, 0, 0, 0]
    assert ops["input_dtypes"] == [None, "float32", None, "float16", None, None, None]
    assert ops["thread"] == [1, 1, 2, 1, 2, 1, 1]
    assert set(ops["placement"]) == {"host"} and set(ops["device"]) == {"cpu"}
    lanes = got["engine_slices"].to_pydict()
    assert lanes["op_id"] == [0, 2, 4, 5]  # A, F, G, D: no other operator of their thread encloses them
    assert lanes["engine"] == ["host", "host thread 2", "host thread 2", "host"]  # thread 1 has 5 operators
    assert lanes["name"] == ["A", "F", "G", "D"] and lanes["region_id"] == [0, 0, 1, 1]
    assert sum(lanes["dur"]) == (10 + 5 + 1 + 4) * 1000
    assert got["regions"].column("name").to_pylist() == ["t", "step"]


def test_a_thread_out_of_order_is_linked_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # E (shorter) before D at the same start: the sweep would call E top-level; the whole linker sorts them
    source = _write(tmp_path / "unordered.json", [*OPS[:5], OPS[6], OPS[5]])
    monkeypatch.setattr(_kineto_ops, "SPILL_ROWS", 3)
    trace = read_kineto(source, sliced=True)
    assert not trace.slices
    lanes = trace["engine_slices"].to_pydict()
    assert lanes["name"] == ["A", "F", "G", "D"] and lanes["op_id"] == [0, 2, 4, 6]


def test_a_bad_slice_stops_the_write_and_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kineto_ops, "SPILL_ROWS", 3)
    trace = read_kineto(_write(tmp_path / "cpu.json", [*OPS, STEP]), sliced=True)
    good = trace.slices["ops"]

    def bad_second_slice():  # noqa: ANN202
        for i, batch in enumerate(good.batches()):
            if i == 1:
                batch = batch.set_column(batch.schema.get_field_index("dur_ns"), "dur_ns", pa.array([-1] * batch.num_rows, pa.int64()))
            yield batch

    trace.slices["ops"] = TableSlices(good.num_rows, bad_second_slice)
    out = tmp_path / "bad.arrow"
    with pytest.raises(TraceFormatError, match="3 rows have a negative 'dur_ns'"):
        write_trace(trace, out)
    assert list(tmp_path.glob("bad.arrow*")) == [] and list(tmp_path.glob(".bad.arrow*")) == []


def test_op_columns_spill_in_exact_slices_and_read_back(tmp_path: Path) -> None:
    ops = _kineto_ops.OpColumns(spill_rows=4)
    for i in range(10):
        ops.append(float(i), 0.5, f"n{i % 3}", 1, i % 2)
    assert len(ops) == 10
    assert [len(part["ts"]) for part in ops.slices()] == [4, 4, 2]
    assert ops.code_counts()["name"].tolist() == [4, 3, 3] and ops.code_counts()["thread"].tolist() == [5, 5]
    assert ops[9][:5] == (9.0, 0.5, "n0", 1, 1)  # whole-column access reads the spilled slices back
    assert [len(part["ts"]) for part in ops.slices()] == [4, 4, 2]
