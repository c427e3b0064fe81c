"""Run ids and files do not depend on how a table's rows arrived (one table, a converter's slices, a mapped
file), and a file's run id, once computed, is not computed again for the same bytes (ingest/run_ids.py)."""

from __future__ import annotations

import os
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from portscope.ingest import RunInfo, Trace, TraceBuilder, run_ids
from portscope.ingest import batches as batches_module
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.schema import EngineKind, Placement, SignalKind, SliceKind
from portscope.ingest.trace import TableSlices, fixed_batches, read_trace, write_run, write_trace


@pytest.fixture(autouse=True)
def _ids_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "run-ids"
    monkeypatch.setenv("PORTSCOPE_RUN_IDS", str(folder))
    return folder


def _trace() -> Trace:
    """11 operators (nulls, repeated names, a boolean-free mix of types) and 9 lane slices in one region."""
    b = TraceBuilder(RunInfo(devices=["cpu"], command="batches"))
    region = b.add_region("step", start_ns=0, dur_ns=1000)
    for i in range(11):
        b.ops.append(op_id=i, region_id=region, name=f"aten::op{i % 3}", start_ns=10 * i, dur_ns=5 + i,
                     placement=Placement.HOST, device="cpu", input_shapes=None if i % 4 else f"{i}x8",
                     bytes_in=i * 32, bytes_out=8, module=None if i % 5 else "model.layer", thread=1 + i % 2)
    for i in range(9):
        b.engine_slices.append(region_id=region, engine=f"host thread {1 + i % 2}", engine_kind=EngineKind.HOST,
                               kind=SliceKind.COMPUTE, name=f"aten::op{i % 3}", start=10 * i, dur=5, op_id=i)
    return b.build()


def _sliced(whole: Trace, size: int) -> Trace:
    """The same run with its ops and lanes given as slices of `size` rows (zero-copy slices of the tables)."""
    tables = {name: table for name, table in whole.tables.items() if name not in ("ops", "engine_slices")}

    def slices(table: pa.Table) -> TableSlices:
        return TableSlices(table.num_rows, lambda: (b for at in range(0, table.num_rows, size)
                                                    for b in table.slice(at, size).to_batches()))

    return Trace(run_info=whole.run_info, tables=tables,
                 slices={"ops": slices(whole["ops"]), "engine_slices": slices(whole["engine_slices"])})


def test_fixed_batches_cut_and_carry_rows() -> None:
    table = pa.table({"x": pa.array(range(7), pa.int64()), "s": pa.array(["a", None, "b", "c", None, "d", "e"])})
    pieces = [table.slice(0, 3).to_batches()[0], table.slice(3, 3).to_batches()[0], table.slice(6, 1).to_batches()[0]]
    got = list(fixed_batches(pieces, 2))
    assert [b.num_rows for b in got] == [2, 2, 2, 1]
    assert [v for b in got for v in b.column("x").to_pylist()] == [0, 1, 2, 3, 4, 5, 6]
    assert got[1].column("s").to_pylist() == ["b", "c"]  # rows 2 and 3: the end of one slice and the start of the next
    assert [b.num_rows for b in fixed_batches(pieces, 5)] == [5, 2]
    assert [b.num_rows for b in fixed_batches([pieces[0].slice(0, 0), *pieces], 7)] == [7]
    assert list(fixed_batches([], 2)) == []
    # a slice taken from inside a bigger batch serialises as the same rows built afresh
    assert got[2].serialize().equals(pa.record_batch({"x": pa.array([4, 5], pa.int64()), "s": pa.array([None, "d"])}).serialize())


def test_slices_and_whole_tables_give_one_run_id_and_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batches_module, "_BATCH_ROWS", 4)
    whole = _trace()
    sliced = _sliced(_trace(), 3)  # 11 ops as 3 + 3 + 3 + 2, 9 lanes as 3 + 3 + 3
    assert sliced.content_hash() == whole.content_hash()
    a, b = write_trace(whole, tmp_path / "whole.arrow"), write_trace(sliced, tmp_path / "sliced.arrow")
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        assert za.namelist() == zb.namelist()
        assert [n for n in za.namelist() if za.read(n) != zb.read(n)] == []  # every member byte for byte
    back = read_trace(b)
    assert [len(x) for x in back["ops"].to_batches()] == [4, 4, 3]
    assert [len(x) for x in back["engine_slices"].to_batches()] == [4, 4, 1]
    assert back.content_hash() == whole.content_hash()
    # slices of other sizes, and the batches of a file written with other batch sizes, hash the same
    assert _sliced(_trace(), 5).content_hash() == whole.content_hash()
    monkeypatch.setattr(batches_module, "_BATCH_ROWS", 1 << 20)
    other = read_trace(write_trace(_sliced(_trace(), 2), tmp_path / "other.arrow"))
    assert [len(x) for x in other["ops"].to_batches()] == [11]
    monkeypatch.setattr(batches_module, "_BATCH_ROWS", 4)
    assert other.content_hash() == whole.content_hash()


def test_write_run_gives_the_id_of_the_written_file_and_remembers_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batches_module, "_BATCH_ROWS", 4)
    path = tmp_path / "run.arrow"
    run_id = write_run(_sliced(_trace(), 3), path)
    assert run_id == read_trace(path).content_hash() == _trace().content_hash()
    assert run_ids.recall(run_ids.file_key(path)) == run_id
    # a copy (another inode) is not known; the same bytes written back with the old mtime are not either
    copy = Path(shutil.copy2(path, tmp_path / "copy.arrow"))
    assert run_ids.recall(run_ids.file_key(copy)) is None
    st = path.stat()
    time.sleep(0.05)  # file times move in clock ticks (a few ms)
    path.write_bytes(path.read_bytes())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime set back; ctime cannot be
    assert path.stat().st_mtime_ns == st.st_mtime_ns and run_ids.recall(run_ids.file_key(path)) is None


def test_remembered_ids_are_only_believed_from_a_private_folder(tmp_path: Path, _ids_here: Path) -> None:
    path = write_trace(_trace(), tmp_path / "run.arrow")
    key = run_ids.file_key(path)
    run_ids.remember(key, "0123456789abcdef")
    assert run_ids.recall(key) == "0123456789abcdef"
    assert oct(_ids_here.stat().st_mode & 0o777) == "0o700"
    _ids_here.chmod(0o777)  # anyone could have put an entry there
    assert run_ids.recall(key) is None
    _ids_here.chmod(0o700)
    (entry,) = [p for p in _ids_here.iterdir()]
    entry.write_text("fedcba9876543210\nanother file's key\n")  # an entry that does not name this file's key
    assert run_ids.recall(key) is None
    with pytest.raises(ValueError, match="not a run id"):
        run_ids.remember(key, "../../etc")


def test_what_lies_under_nulls_is_not_hashed_or_written() -> None:
    # the same rows [7, null, 9] etc., once with zeros under the null slot and once with other bytes there
    validity = pa.py_buffer(bytes([0b101]))

    def rows(under: int, text_under: bytes) -> pa.RecordBatch:
        ints = pa.Array.from_buffers(pa.int64(), 3, [validity, pa.py_buffer(np.array([7, under, 9], np.int64))])
        flags = pa.Array.from_buffers(pa.bool_(), 3, [validity, pa.py_buffer(bytes([0b111 if under else 0b101]))])
        codes = pa.Array.from_buffers(pa.int32(), 3, [validity, pa.py_buffer(np.array([0, under % 2, 1], np.int32))])
        names = pa.DictionaryArray.from_arrays(codes, pa.array(["a", "b"]))
        offsets = np.array([0, 1, 1 + len(text_under), 2 + len(text_under)], np.int32)
        texts = pa.Array.from_buffers(pa.string(), 3, [validity, pa.py_buffer(offsets), pa.py_buffer(b"x" + text_under + b"z")])
        return pa.record_batch([ints, flags, names, texts], names=["i", "f", "n", "s"])

    clean, dirty = rows(0, b""), rows(12345, b"hidden")
    assert clean.to_pylist() == dirty.to_pylist() == [
        {"i": 7, "f": True, "n": "a", "s": "x"}, {"i": None, "f": None, "n": None, "s": None}, {"i": 9, "f": True, "n": "b", "s": "z"}]
    assert not clean.serialize().equals(dirty.serialize())  # Arrow writes what lies under a null
    (a,), (b,) = fixed_batches([clean], 4), fixed_batches([dirty], 4)
    assert a.serialize().equals(b.serialize())
    assert b.to_pylist() == clean.to_pylist()


def test_remembered_ids_are_bounded(_ids_here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_ids, "MAX_ENTRIES", 4)
    for i in range(5):
        run_ids.remember(f"key {i}", f"{i:016x}")
        os.utime(next(p for p in _ids_here.iterdir() if p.read_text().endswith(f"key {i}\n")), ns=(i * 10**9, i * 10**9))
    # the fifth entry made five, over 4: the three oldest went, 4 // 2 = 2 stay (the fourth and the newest)
    assert [run_ids.recall(f"key {i}") for i in range(5)] == [None, None, None, "0000000000000003", "0000000000000004"]


def test_batches_passed_on_whole_serialise_as_their_copies() -> None:
    # the same 10 rows as: built afresh; cut from the middle of bigger arrays; read back from an IPC file;
    # an IPC file's batch cut from a bigger one. Only compact whole batches are passed on uncopied.
    rng = np.random.default_rng(7)

    def rows(lo: int, hi: int) -> pa.RecordBatch:
        r = range(lo, hi)
        return pa.record_batch({
            "i32": pa.array([None if i % 3 == 0 else i for i in r], pa.int32()),
            "f64": pa.array([None if i % 4 == 1 else i / 2 for i in r], pa.float64()),
            "b": pa.array([None if i % 5 == 2 else bool(i % 2) for i in r], pa.bool_()),
            "s": pa.array([None if i % 3 == 1 else "x" * (i % 4) for i in r], pa.string()),
            "d": pa.DictionaryArray.from_arrays(pa.array([None if i % 6 == 0 else i % 3 for i in r], pa.int32()),
                                                pa.array(["p", "q", "r"])),
        })

    def ipc(batch: pa.RecordBatch) -> pa.RecordBatch:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, batch.schema) as writer:
            writer.write_batch(batch)
        return pa.ipc.open_file(sink.getvalue()).get_batch(0)

    def serialised(batch: pa.RecordBatch, size: int) -> list[bytes]:
        return [b.serialize().to_pybytes() for b in fixed_batches([batch], size)]

    start = int(rng.integers(1, 40))
    fresh = rows(start, start + 10)
    forms = [rows(0, 60).slice(start, 10), ipc(rows(start, start + 10)), ipc(rows(0, 60)).slice(start, 10),
             ipc(rows(0, 60).slice(start, 10))]
    for size in (10, 16, 4):
        want = serialised(fresh, size)
        assert [len(b) for b in fixed_batches([fresh], size)] == {10: [10], 16: [10], 4: [4, 4, 2]}[size]
        assert [serialised(form, size) == want for form in forms] == [True] * len(forms), size


def test_a_whole_table_may_point_into_a_sliced_one_written_before_it(tmp_path: Path) -> None:
    """signals (whole) -> ops (sliced): the reference is checked once ops is written, not before."""
    whole = _trace()
    b = TraceBuilder(RunInfo(devices=["cpu"], command="batches"))
    region = b.add_region("step", start_ns=0, dur_ns=1000)
    b.signals.append(region_id=region, op_id=10, kind=SignalKind.CPU_FALLBACK, op_name="aten::op1", count=1, bytes=0)
    signals = b.build()["signals"]
    sliced = _sliced(whole, 3)
    sliced.tables["signals"] = signals
    back = read_trace(write_trace(sliced, tmp_path / "ok.arrow"))
    assert back["signals"].column("op_id").to_pylist() == [10]
    bad = _sliced(_trace(), 3)
    bad.tables["signals"] = signals.set_column(signals.schema.get_field_index("op_id"), "op_id", pa.array([11], pa.int64()))
    with pytest.raises(TraceFormatError, match="points outside 'ops'"):
        write_trace(bad, tmp_path / "bad.arrow")
    assert not (tmp_path / "bad.arrow").exists()
