"""Events kept in temporary files (`EventColumns(spill=True)`), linked chunk by chunk, and the rules' findings as
columns: tiny hand-written events, every expected figure worked out by hand from them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from portscope.ingest import assemble as assemble_module
from portscope.ingest import link_nesting, spill
from portscope.ingest.assemble import assemble
from portscope.ingest.engine_lanes import factorize
from portscope.ingest.events import EventColumns, EventKind, Translated
from portscope.ingest.link import link
from portscope.ingest.rules import Columns
from portscope.ingest.trace import RunInfo, read_trace, write_trace


@pytest.fixture
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rows a chunk, a column's first three values held: every chunk boundary and file path is taken."""
    monkeypatch.setattr(link_nesting, "CHUNK_ROWS", 2)
    monkeypatch.setattr(spill, "HOLD_ROWS", 3)


def _nested(spill_: bool) -> EventColumns:
    ev = EventColumns(spill=spill_)
    # thread 1: a 0-100 [b 10-50 [c 10-20]], d 60-70 (in a); thread 2: e 10-90 [f 30-40]; rows 0..5 in start order
    for name, tid, start, dur in (("a", 1, 0, 100), ("b", 1, 10, 40), ("c", 1, 10, 10), ("e", 2, 10, 80),
                                  ("f", 2, 30, 10), ("d", 1, 60, 10)):  # fmt: skip
        ev.extend(EventKind.OP, 1, texts={"name": ([name], np.zeros(1, np.int64))}, threads=([(1, tid)], np.zeros(1, np.int64)),
                  start_ns=np.array([start]), dur_ns=np.array([dur]))  # fmt: skip
    return ev


@pytest.mark.usefixtures("tiny_chunks")
@pytest.mark.parametrize("spill_", [False, True])
def test_nesting_in_chunks_carries_open_operators(spill_: bool) -> None:
    a = _nested(spill_).arrays(release=True)
    assert isinstance(a["start_ns"], spill.DiskColumn) is spill_
    # b and c start together (a tie cut into one chunk: longest first), e's thread is its own
    assert np.asarray(link(a).op).tolist() == [-1, 0, 1, -1, 3, 0]


@pytest.mark.usefixtures("tiny_chunks")
def test_out_of_order_rows_on_disk_are_linked_as_in_memory() -> None:
    ev = EventColumns(spill=True)
    for name, start, dur in (("inner", 5, 2), ("outer", 0, 10), ("later", 20, 1)):  # inner listed first
        ev.add(EventKind.OP, name, 1, 1, start, dur)
    assert np.asarray(link(ev.arrays()).op).tolist() == [1, -1, -1]


def _kernels(spill_: bool, n: int = 7) -> EventColumns:
    """n kernels as torch_npu's kernel_details lists them: an operator and the kernel it ran as, joined by an id;
    every third kernel (0, 3, 6) on the AI CPU."""
    ev = EventColumns(spill=spill_)
    ids = np.arange(n)
    start, dur = ids * 10, np.full(n, 5)
    thread = ([("NPU", "stream 2")], np.zeros(n, np.int64))
    ev.extend(EventKind.OP, n, start_ns=start, dur_ns=dur, correlation=ids, threads=thread,
              texts={"name": (["Cast", "MatMul"], (ids % 3 != 0).astype(np.int64))})  # fmt: skip
    ev.extend(EventKind.KERNEL, n, start_ns=start, dur_ns=dur, correlation=ids, device=np.zeros(n, np.int64),
              threads=thread, texts={"name": ([f"k{i}" for i in range(n)], ids),
                                     "unit": (["AI_CPU", "AI_CORE"], (ids % 3 != 0).astype(np.int64)),
                                     "lane": (["NPU stream 2"], np.zeros(n, np.int64))})  # fmt: skip
    return ev


@pytest.mark.usefixtures("tiny_chunks")
@pytest.mark.parametrize("spill_", [False, True])
def test_kernels_join_the_operators_they_ran_as(spill_: bool) -> None:
    links = link(_kernels(spill_).arrays())
    assert np.asarray(links.op).tolist() == [-1] * 7 + [0, 1, 2, 3, 4, 5, 6]


@pytest.mark.usefixtures("tiny_chunks")
@pytest.mark.parametrize("spill_", [False, True])
def test_ai_cpu_kernels_are_fallback_signals_and_slices(spill_: bool) -> None:
    trace = assemble(Translated(_kernels(spill_), RunInfo(), root_name="k", root_device="npu:0",
                                device_names={0: "npu:0"}))  # fmt: skip
    s = trace["signals"].to_pydict()
    assert s["kind"] == ["dispatch/cpu_fallback"] * 3 and s["reason"] == ["ai-cpu"] * 3
    assert s["op_name"] == ["Cast"] * 3 and s["op_id"] == [0, 3, 6] and s["time_ns"] == [0, 30, 60]
    lanes = trace["engine_slices"].to_pydict()
    assert lanes["engine"] == ["NPU stream 2"] * 7 and lanes["op_id"] == list(range(7))
    assert lanes["kind"] == ["fallback", "compute", "compute", "fallback", "compute", "compute", "fallback"]
    assert lanes["correlation"] == [None] * 7  # the reader's own ids are not written
    ops = trace["ops"].to_pydict()
    assert ops["name"] == ["Cast", "MatMul", "MatMul", "Cast", "MatMul", "MatMul", "Cast"]
    assert ops["placement"] == ["device"] * 7


def test_disk_columns_index_as_arrays() -> None:
    column = spill.DiskColumn("q", hold=2)
    column.extend(np.arange(10, 17))  # 10..16, most of it in the file
    assert column[np.array([6, 0, 3])].tolist() == [16, 10, 13]
    assert column[np.arange(7) % 2 == 0].tolist() == [10, 12, 14, 16]
    assert column[2:5].tolist() == [12, 13, 14] and column[-1] == 16 and column[np.int64(1)] == 11


def test_factorize_gives_what_unique_gives() -> None:
    used, at = factorize(np.array([7, -1, 7, 3, -1]))
    assert used.tolist() == [-1, 3, 7] and at.tolist() == [2, 0, 2, 1, 0]
    used, at = factorize(np.array([2**40, 5, 2**40]))  # a range too wide for a table: sorted
    assert used.tolist() == [5, 2**40] and at.tolist() == [1, 0, 1]


def test_columns_keep_rows_and_chunks_in_order() -> None:
    c = Columns({"event": "q", "kind": "b"})
    c.append(event=4, kind=1)
    c.extend(2, event=np.array([7, 9]), kind=3)
    c.append(event=11, kind=2)
    got = c.arrays()
    assert got["event"].tolist() == [4, 7, 9, 11] and got["kind"].tolist() == [1, 3, 3, 2] and len(c) == 4


@pytest.mark.usefixtures("tiny_chunks")
def test_many_signals_wait_in_a_file_until_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(assemble_module, "SLICE_ROWS", 2)  # 3 signals: more than a slice
    trace = assemble(Translated(_kernels(True), RunInfo(), root_name="k", root_device="npu:0",
                                device_names={0: "npu:0"}), sliced=True)  # fmt: skip
    assert "signals" in trace.slices and trace.num_rows("signals") == 3
    write_trace(trace, tmp_path / "k.arrow")
    s = read_trace(tmp_path / "k.arrow")["signals"].to_pydict()
    assert s["op_id"] == [0, 3, 6] and s["reason"] == ["ai-cpu"] * 3 and s["op_name"] == ["Cast"] * 3


@pytest.mark.usefixtures("tiny_chunks")
@pytest.mark.parametrize(("op_ids", "work_ids", "expected"), [
    ([0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]),  # in order: merged a chunk at a time
    ([3, 2, 1, 0], [0, 1, 2, 3], [3, 2, 1, 0]),  # operators' ids decrease: sorted instead
    ([0, 1, 2, 3], [3, 2, 1, 0], [3, 2, 1, 0]),  # work asks below the window: sorted instead
    ([0, 1, 1, 3], [1, 3, 0, 2], [2, 3, 0, -1]),  # a repeated id: its last operator; an id no operator holds
])  # fmt: skip
def test_kernels_join_by_id_whatever_the_order(op_ids: list[int], work_ids: list[int], expected: list[int]) -> None:
    ev = EventColumns(spill=True)
    thread = ([("NPU", "s")], np.zeros(4, np.int64))
    ev.extend(EventKind.OP, 4, start_ns=np.arange(4) * 10, dur_ns=np.full(4, 5), correlation=np.array(op_ids),
              threads=thread, texts={"name": (["op"], np.zeros(4, np.int64))})  # fmt: skip
    ev.extend(EventKind.KERNEL, 4, start_ns=np.arange(4) * 10, dur_ns=np.full(4, 5), correlation=np.array(work_ids),
              threads=thread, texts={"name": (["k"], np.zeros(4, np.int64))})  # fmt: skip
    assert np.asarray(link(ev.arrays()).op)[4:].tolist() == expected


@pytest.mark.parametrize("spill_", [False, True])
def test_device_work_with_ids_no_operator_holds(spill_: bool) -> None:
    ev = EventColumns(spill=spill_)  # operators without ids (a host trace's), kernels with ids: nothing joined
    ev.add(EventKind.OP, "aten::mm", 1, 1, 0, 10)
    ev.add(EventKind.KERNEL, "gemm", 0, 7, 2, 5, correlation=4)
    assert np.asarray(link(ev.arrays()).op).tolist() == [-1, -1]


def test_columns_keep_one_value_for_all_as_one() -> None:
    c = Columns({"event": "q", "kind": "b"})
    c.extend(3, event=np.array([1, 2, 3]), kind=5)
    c.extend(2, event=np.array([8, 9]), kind=5)
    got = c.arrays()
    assert got["kind"].tolist() == [5] * 5 and got["kind"].strides == (0,) and got["event"].tolist() == [1, 2, 3, 8, 9]
