"""kernel_details.csv kernels on disk, put in start order by an external sort (issue 19): runs of a few kernels,
merged with a few kernels held, ties kept in file order. Expected rows written by hand from the tables below."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from portscope.ingest.readers import _chrome_slices, _kernel_columns, _kernel_order
from portscope.ingest.readers.ascend_csv import read_kernel_details
from portscope.ingest.spill import DiskColumn
from portscope.ingest.trace import read_trace, write_trace


def _column(typecode: str, values: list[int]) -> DiskColumn:
    column = DiskColumn(typecode, hold=2)
    column.extend(np.array(values))
    return column


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kernel_order, "RUN_ROWS", 2)  # runs of two kernels
    monkeypatch.setattr(_kernel_order, "MERGE_ROWS", 3)  # one kernel of each run held while merging
    monkeypatch.setattr(_kernel_columns, "_HOLD", 2)  # two values of a column in memory, the rest on disk
    monkeypatch.setattr(_kernel_columns, "_BLOCK_BYTES", 40)  # CSV blocks of a row or two
    monkeypatch.setattr(_chrome_slices, "SLICE_ROWS", 3)


def test_sort_by_start_is_stable(tiny: None) -> None:
    # rows:  0  1  2  3  4  5  6
    start = [5, 3, 5, 1, 3, 5, 0]
    columns = {"start": _column("q", start), "dur": _column("q", [10, 11, 12, 13, 14, 15, 16]),
               "name": _column("i", [0, 1, 0, 2, 1, 0, 3])}  # fmt: skip
    out = _kernel_order.sort_by_start(columns, hold=2)
    assert out["start"].read(0, 7).tolist() == [0, 1, 3, 3, 5, 5, 5]
    assert out["dur"].read(0, 7).tolist() == [16, 13, 11, 14, 10, 12, 15]  # rows 6 3 1 4 0 2 5: ties in file order
    assert out["name"].read(0, 7).tolist() == [3, 2, 1, 1, 0, 0, 0]
    assert out["start"].on_disk >= 5  # at most `hold` values held in memory
    assert not any(len(c) for c in columns.values())  # the unsorted columns let go


def test_sort_by_start_all_ties_and_one_run(tiny: None, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _kernel_order.sort_by_start({"start": _column("q", [7] * 5), "dur": _column("q", [1, 2, 3, 4, 5])}, hold=2)
    assert out["dur"].read(0, 5).tolist() == [1, 2, 3, 4, 5]
    monkeypatch.setattr(_kernel_order, "RUN_ROWS", 100)
    out = _kernel_order.sort_by_start({"start": _column("q", [3, 1, 2]), "dur": _column("q", [1, 2, 3])}, hold=2)
    assert out["dur"].read(0, 3).tolist() == [2, 3, 1]


def test_in_order_and_first_seen() -> None:
    assert _kernel_order.in_order(_column("q", [1, 2, 2, 3, 5]), 2)
    assert not _kernel_order.in_order(_column("q", [1, 2, 1, 3]), 2)  # falls across a block boundary
    assert not _kernel_order.in_order(_column("q", [1, 3, 2, 4]), 2)  # inside a block
    renumber, order = _kernel_order.first_seen(_column("i", [2, 2, 0, 3, 0, 2]), 5, 2)
    assert renumber.tolist() == [1, -1, 0, 2, -1] and order.tolist() == [2, 0, 3]


# file order: rows 0..6; by start: row 3 (5 us), rows 1 and 5 (20 us, a tie: file order), row 6 (25), rows 0, 2 and 4
# (30 us, a tie). Names B, A, B, D, C, A, "B" (quotes cleaned); row 4 has no Type, row 2 is an AI CPU kernel.
KERNELS = (
    "Step Id,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
    "1,2,B,MatMul,AI_CORE,30,1\n"
    "1,2,A,Add,AI_VECTOR_CORE,20,2\n"
    "1,3,B,Cast,AI_CPU,30.000,3\n"
    "1,2,D,MatMul,AI_CORE,5,4\n"
    "2,2,C,,AI_CORE,30,5\n"
    "2,2,A,Add,AI_VECTOR_CORE,20,6\n"
    '2,N/A,"B",hcom_,HCCL,25,7\n'
)


@pytest.mark.parametrize("sliced", [False, True])
def test_kernels_out_of_order_sorted_on_disk(tiny: None, tmp_path: Path, sliced: bool) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(KERNELS)
    trace = read_kernel_details(path, sliced=sliced)
    assert bool(trace.slices) == sliced
    write_trace(trace, tmp_path / "k.arrow")
    got = read_trace(tmp_path / "k.arrow")
    slices = [(s["name"], s["start"], s["dur"], s["engine"], s["kind"], s["op_id"]) for s in got["engine_slices"].to_pylist()]
    assert slices == [("D", 0, 4000, "NPU stream 2", "compute", 0),
                      ("A", 15_000, 2000, "NPU stream 2", "compute", 1), ("A", 15_000, 6000, "NPU stream 2", "compute", 2),
                      ("B", 20_000, 7000, "NPU HCCL", "compute", 3),
                      ("B", 25_000, 1000, "NPU stream 2", "compute", 4), ("B", 25_000, 3000, "NPU stream 3", "fallback", 5),
                      ("C", 25_000, 5000, "NPU stream 2", "compute", 6)]  # fmt: skip
    names = got["engine_slices"]["name"].combine_chunks()
    assert names.dictionary.to_pylist() == ["D", "A", "B", "C"]  # in order of first start
    regions = {r["region_id"]: r["name"] for r in got["regions"].to_pylist()}
    ops = [(o["op_id"], o["name"], regions[o["region_id"]], o["start_ns"]) for o in got["ops"].to_pylist()]
    assert ops == [(0, "MatMul", "step 1", 0), (1, "Add", "step 1", 15_000), (2, "Add", "step 2", 15_000),
                   (3, "hcom_", "step 2", 20_000), (4, "MatMul", "step 1", 25_000), (5, "Cast", "step 1", 25_000),
                   (6, "C", "step 2", 25_000)]  # fmt: skip
    signals = [(s["op_id"], s["op_name"], s["time_ns"], regions[s["region_id"]]) for s in got["signals"].to_pylist()]
    assert signals == [(5, "Cast", 25_000, "step 1")]
    assert {r["name"]: (r["start_ns"], r["dur_ns"]) for r in got["regions"].to_pylist()} == {
        "kernel_details": (0, 30_000), "step 1": (0, 28_000), "step 2": (15_000, 15_000)}  # fmt: skip
