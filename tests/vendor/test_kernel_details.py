"""torch_npu kernel_details.csv read in small blocks, out of start order: what the tables, the viewer and the
summaries show. Expected rows written by hand from the tables below (times in ns from the earliest kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from portscope.ingest import assemble, link_nesting
from portscope.ingest.op_diff import op_totals
from portscope.ingest.range_summary import range_summary
from portscope.ingest.readers import ascend_csv
from portscope.ingest.readers.ascend_csv import read_kernel_details
from portscope.ingest.schedule_summary import schedule_summary
from portscope.ingest.slice_search import find_slices
from portscope.ingest.summary import summarize
from portscope.ingest.trace import Trace, read_trace, write_trace
from portscope.ingest.viewport import build_lanes, reduce_viewport


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ascend_csv, "BLOCK_BYTES", 40)  # a block: 4x the header line (a few rows)
    monkeypatch.setattr(assemble, "SLICE_ROWS", 3)  # tables written 3 rows a batch
    monkeypatch.setattr(ascend_csv, "SLICE_ROWS", 2)  # kernels made into events 2 at a time
    monkeypatch.setattr(link_nesting, "CHUNK_ROWS", 2)  # and linked 2 rows a chunk


def _rows(trace: Trace, name: str) -> list[dict]:
    if name in trace.slices:
        return [r for b in trace.slices[name].batches() for r in b.to_pylist()]
    return trace.tables[name].to_pylist()


# file order B A B C A "C": by start A(10) B(20) B(30) C(40) A(50) C(60); "C" is C once its quotes are cleaned.
# The formats column (not read) makes a row longer than a third of a block: several blocks.
_F = ";".join(["FORMAT_ND"] * 10)
ACROSS_BLOCKS = (
    "Name,Type,Accelerator Core,Start Time(us),Duration(us),Input Formats\n"
    f"B,,AI_CORE,30,1,{_F}\nA,Add,AI_CORE,10,1,{_F}\nB,,AI_CORE,20,1,{_F}\nC,,AI_CPU,40,2,{_F}\n"
    f'A,Add,AI_CORE,50,1,{_F}\n"C",,AI_CPU,60,3,{_F}\n'
)


@pytest.mark.parametrize("sliced", [False, True])
def test_names_across_blocks_in_start_order(tmp_path: Path, tiny: None, sliced: bool) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(ACROSS_BLOCKS)
    trace = read_kernel_details(path, sliced=sliced)
    assert [(s["name"], s["start"], s["dur"], s["kind"], s["op_id"]) for s in _rows(trace, "engine_slices")] == [
        ("A", 0, 1000, "compute", 0), ("B", 10_000, 1000, "compute", 1), ("B", 20_000, 1000, "compute", 2),
        ("C", 30_000, 2000, "fallback", 3), ("A", 40_000, 1000, "compute", 4), ("C", 50_000, 3000, "fallback", 5)]  # fmt: skip
    assert [o["name"] for o in _rows(trace, "ops")] == ["Add", "B", "B", "C", "Add", "C"]  # Type, or Name where it has none
    assert [(s["op_name"], s["op_id"], s["time_ns"]) for s in _rows(trace, "signals")] == [("C", 3, 30_000), ("C", 5, 50_000)]


# file order: rows 0..6; by start: row 3 (5 us), rows 1 and 5 (20 us, a tie: file order), row 6 (25), rows 0, 2 and 4
# (30 us, a tie). Names B, A, B, D, C, A, "B" (quotes cleaned); row 4 has no Type, row 2 is an AI CPU kernel. Step 2's
# first kernel (20 us) starts before step 1's last ones (30 us): a step is a time range, up to the next step's start.
OUT_OF_ORDER = (
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
def test_kernels_out_of_order_ties_in_file_order(tiny: None, tmp_path: Path, sliced: bool) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(OUT_OF_ORDER)
    write_trace(read_kernel_details(path, sliced=sliced), tmp_path / "k.arrow")
    got = read_trace(tmp_path / "k.arrow")
    slices = [(s["name"], s["start"], s["dur"], s["engine"], s["kind"], s["op_id"]) for s in got["engine_slices"].to_pylist()]
    assert slices == [("D", 0, 4000, "NPU stream 2", "compute", 0),
                      ("A", 15_000, 2000, "NPU stream 2", "compute", 1), ("A", 15_000, 6000, "NPU stream 2", "compute", 2),
                      ("B", 20_000, 7000, "NPU HCCL", "communication", 3),
                      ("B", 25_000, 1000, "NPU stream 2", "compute", 4), ("B", 25_000, 3000, "NPU stream 3", "fallback", 5),
                      ("C", 25_000, 5000, "NPU stream 2", "compute", 6)]  # fmt: skip
    regions = {r["region_id"]: r["name"] for r in got["regions"].to_pylist()}
    ops = [(o["op_id"], o["name"], regions[o["region_id"]], o["start_ns"]) for o in got["ops"].to_pylist()]
    assert ops == [(0, "MatMul", "step 1", 0), (1, "Add", "step 2", 15_000), (2, "Add", "step 2", 15_000),
                   (3, "hcom_", "step 2", 20_000), (4, "MatMul", "step 2", 25_000), (5, "Cast", "step 2", 25_000),
                   (6, "C", "step 2", 25_000)]  # fmt: skip
    signals = [(s["op_id"], s["op_name"], s["time_ns"], regions[s["region_id"]]) for s in got["signals"].to_pylist()]
    assert signals == [(5, "Cast", 25_000, "step 2")]
    assert {r["name"]: (r["parent_id"], r["start_ns"], r["dur_ns"]) for r in got["regions"].to_pylist()} == {
        "kernel_details": (None, 0, 30_000), "step 1": (0, 0, 15_000), "step 2": (0, 15_000, 15_000)}  # fmt: skip


# by start: 10 Add_a, 20 MatMul_b, 30 MatMul_b, 40 Cast_c, 50 Add_a, 60 Cast_c, 70 Relu_d
SEVEN = (
    "Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
    "MatMul_b,,AI_CORE,30,1\nAdd_a,Add,AI_CORE,10,1\nMatMul_b,,AI_CORE,20,1\nCast_c,,AI_CPU,40,2\n"
    'Add_a,Add,AI_CORE,50,1\n"Cast_c",,AI_CPU,60,3\nRelu_d,Relu,AI_VECTOR_CORE,70,1\n'
)


def test_viewer_and_summaries(tmp_path: Path, tiny: None) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(SEVEN)
    write_trace(read_kernel_details(path, sliced=True), tmp_path / "k.arrow")
    trace = read_trace(tmp_path / "k.arrow")
    slices = trace["engine_slices"]
    assert slices.column("name").to_pylist() == ["Add_a", "MatMul_b", "MatMul_b", "Cast_c", "Add_a", "Cast_c", "Relu_d"]
    lanes = build_lanes(slices)
    assert sorted(lanes.lanes) == ["NPU AI_CORE", "NPU AI_CPU", "NPU AI_VECTOR_CORE"]
    assert reduce_viewport(lanes, 0, 61_000, 800) is not None
    assert find_slices(slices, "CAST", lanes).rows.tolist() == [3, 5]  # case-insensitive, any part
    assert find_slices(slices, "matmul_", lanes).rows.tolist() == [1, 2]
    summary = range_summary(slices, lanes, trace["signals"], 0, 61_000)
    assert summary.operators.to_pylist() == [
        {"name": "Cast_c", "count": 2, "time": 5000.0}, {"name": "Add_a", "count": 2, "time": 2000.0},
        {"name": "MatMul_b", "count": 2, "time": 2000.0}, {"name": "Relu_d", "count": 1, "time": 1000.0}]  # fmt: skip
    inside = range_summary(slices, lanes, trace["signals"], 15_000, 35_000)  # MatMul_b at 20 us, Cast_c at 30 us
    assert inside.operators.to_pylist() == [{"name": "Cast_c", "count": 1, "time": 2000.0},
                                            {"name": "MatMul_b", "count": 1, "time": 1000.0}]  # fmt: skip
    assert range_summary(slices, lanes, trace["signals"], 61_500, 70_000).operators.num_rows == 0  # no slice there
    root = trace["regions"].column("region_id")[0].as_py()
    assert summarize(trace, root).op_count == 7
    schedule = schedule_summary(trace, root)
    assert sorted((e.engine, e.slices, e.busy) for e in schedule.engines) == [
        ("NPU AI_CORE", 4, 4000), ("NPU AI_CPU", 2, 5000), ("NPU AI_VECTOR_CORE", 1, 1000)]  # fmt: skip
    totals, _ = op_totals(trace, root)  # `portscope diff --ops`: kernels counted by name
    kernels = totals[totals["kind"] == "kernel"]
    assert sorted(zip(kernels["name"], kernels["count"], kernels["total_ns"], strict=True)) == [
        ("Add_a", 2, 2000), ("Cast_c", 2, 5000), ("MatMul_b", 2, 2000), ("Relu_d", 1, 1000)]  # fmt: skip
    assert [(o["name"], o["placement"], o["device"]) for o in trace["ops"].to_pylist()][:2] == [
        ("Add", "device", "npu:0"), ("MatMul_b", "device", "npu:0")]  # fmt: skip
