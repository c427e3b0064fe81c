"""kernel_details.csv with more distinct names than a dictionary may hold (issue 19, `_kernel_names.DICT_MAX_BYTES`
made tiny): `engine_slices.name` is written as plain strings gathered from disk slice by slice; below the limit the
dictionary is kept. Expected names written by hand from the table below; the viewer's timeline path and the
summaries read the plain column."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from portscope.ingest.op_diff import op_totals
from portscope.ingest.range_summary import range_summary
from portscope.ingest.readers import _chrome_slices, _kernel_columns, _kernel_names, _kernel_order
from portscope.ingest.readers.ascend_csv import read_kernel_details
from portscope.ingest.schedule_summary import schedule_summary
from portscope.ingest.slice_search import find_slices
from portscope.ingest.summary import summarize
from portscope.ingest.trace import read_trace, write_trace
from portscope.ingest.viewport import build_lanes, reduce_viewport

# file order: MatMul_b Add_a MatMul_b Cast_c Add_a "Cast_c" Relu_d; by start: 10 Add_a, 20 MatMul_b, 30 MatMul_b,
# 40 Cast_c, 50 Add_a, 60 Cast_c, 70 Relu_d ("Cast_c" is Cast_c once its quotes are cleaned)
KERNELS = (
    "Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
    "MatMul_b,,AI_CORE,30,1\nAdd_a,Add,AI_CORE,10,1\nMatMul_b,,AI_CORE,20,1\nCast_c,,AI_CPU,40,2\n"
    'Add_a,Add,AI_CORE,50,1\n"Cast_c",,AI_CPU,60,3\nRelu_d,Relu,AI_VECTOR_CORE,70,1\n'
)
BY_START = ["Add_a", "MatMul_b", "MatMul_b", "Cast_c", "Add_a", "Cast_c", "Relu_d"]
STARTS = [0, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000]


def _tiny(monkeypatch: pytest.MonkeyPatch, dict_max: int, gap: int, window: int) -> None:
    monkeypatch.setattr(_kernel_names, "DICT_MAX_BYTES", dict_max)
    monkeypatch.setattr(_kernel_names, "GAP_BYTES", gap)
    monkeypatch.setattr(_kernel_names, "TEXT_WINDOW", window)
    monkeypatch.setattr(_kernel_columns, "_BLOCK_BYTES", 40)  # a few rows a block: names met again in later blocks
    monkeypatch.setattr(_chrome_slices, "SLICE_ROWS", 3)  # slices of 3 kernels: names far apart on disk in one slice
    monkeypatch.setattr(_kernel_columns, "_HOLD", 2)  # columns: 2 values in memory, the rest on disk
    monkeypatch.setattr(_kernel_names, "SWEEP_ROWS", 2)
    monkeypatch.setattr(_kernel_order, "RUN_ROWS", 2)
    monkeypatch.setattr(_kernel_order, "MERGE_ROWS", 3)


def _rows(trace, name: str) -> list[dict]:  # noqa: ANN001
    if name in trace.slices:
        return [r for b in trace.slices[name].batches() for r in b.to_pylist()]
    return trace.tables[name].to_pylist()


@pytest.mark.parametrize(("gap", "window"), [(0, 1), (1 << 16, 1), (1 << 16, 1 << 24)])
def test_plain_names_in_start_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gap: int, window: int) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(KERNELS)
    _tiny(monkeypatch, 0, gap, window)
    for sliced in (False, True):
        trace = read_kernel_details(path, sliced=sliced)
        if sliced:
            batches = list(trace.slices["engine_slices"].batches())
            assert [b.num_rows for b in batches] == [3, 3, 1]
            assert all(b.schema.field("name").type == pa.string() for b in batches)
        else:
            assert trace.tables["engine_slices"].schema.field("name").type == pa.string()
        slices = _rows(trace, "engine_slices")
        assert [s["name"] for s in slices] == BY_START
        assert [s["start"] for s in slices] == STARTS
        assert [s["kind"] for s in slices] == ["compute", "compute", "compute", "fallback", "compute", "fallback", "compute"]
        assert [o["name"] for o in _rows(trace, "ops")] == ["Add", "MatMul_b", "MatMul_b", "Cast_c", "Add", "Cast_c", "Relu"]
        assert [(s["op_name"], s["op_id"]) for s in _rows(trace, "signals")] == [("Cast_c", 3), ("Cast_c", 5)]
        out = tmp_path / f"plain_{sliced}.arrow"
        write_trace(trace, out)
        back = read_trace(out)
        names = back["engine_slices"].column("name")
        if sliced:  # written slice by slice: plain strings in the file
            assert names.type == pa.string()
        assert names.to_pylist() == BY_START


def test_dictionary_below_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(KERNELS)
    # the dictionary: 4 names (5 + 8 + 6 + 6 = 25 bytes of text) and 5 offsets of 4 bytes = 45 bytes
    _tiny(monkeypatch, 45, 1 << 16, 1 << 24)
    trace = read_kernel_details(path, sliced=True)
    write_trace(trace, tmp_path / "dict.arrow")
    names = read_trace(tmp_path / "dict.arrow")["engine_slices"].column("name").combine_chunks()
    assert pa.types.is_dictionary(names.type)
    assert names.dictionary.to_pylist() == ["Add_a", "MatMul_b", "Cast_c", "Relu_d"]  # in order of first start
    assert names.indices.to_pylist() == [0, 1, 1, 2, 0, 2, 3]
    _tiny(monkeypatch, 44, 1 << 16, 1 << 24)  # one byte less: plain
    trace = read_kernel_details(path, sliced=True)
    assert trace.slices["engine_slices"].schema.field("name").type == pa.string()


def test_viewer_and_summaries_on_plain_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(KERNELS)
    _tiny(monkeypatch, 0, 1 << 16, 1 << 24)
    write_trace(read_kernel_details(path, sliced=True), tmp_path / "plain.arrow")
    trace = read_trace(tmp_path / "plain.arrow")
    slices = trace["engine_slices"]
    assert slices.schema.field("name").type == pa.string()
    lanes = build_lanes(slices)
    assert sorted(lanes.lanes) == ["NPU AI_CORE", "NPU AI_CPU", "NPU AI_VECTOR_CORE"]
    view = reduce_viewport(lanes, 0, 61_000, 800)
    assert view is not None
    found = find_slices(slices, "CAST", lanes)  # case-insensitive, any part
    assert found.rows.tolist() == [3, 5]
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
    region = summarize(trace, root)
    assert region.op_count == 7
    schedule = schedule_summary(trace, root)
    assert sorted((e.engine, e.slices, e.busy) for e in schedule.engines) == [
        ("NPU AI_CORE", 4, 4000), ("NPU AI_CPU", 2, 5000), ("NPU AI_VECTOR_CORE", 1, 1000)]  # fmt: skip
    totals, _ = op_totals(trace, root)  # `portscope diff --ops`: kernels counted by name
    kernels = totals[totals["kind"] == "kernel"]
    assert sorted(zip(kernels["name"], kernels["count"], kernels["total_ns"], strict=True)) == [
        ("Add_a", 2, 2000), ("Cast_c", 2, 5000), ("MatMul_b", 2, 2000), ("Relu_d", 1, 1000)]  # fmt: skip


def test_plain_names_each_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every name its own and in start order (the biggest tables): a slice's names lie one after the other on disk."""
    path = tmp_path / "kernel_details.csv"
    path.write_text("Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
                    "k0,T,AI_CORE,1,1\nkernel_1,T,AI_CORE,2,1\nk2,T,AI_CORE,3,1\nk_3,T,AI_CORE,4,1\nk4,T,AI_CORE,5,1\n")  # fmt: skip
    _tiny(monkeypatch, 0, 0, 1)
    monkeypatch.setattr(_chrome_slices, "SLICE_ROWS", 2)  # slices [k0 kernel_1] [k2 k_3] [k4]: from the first entry and not
    trace = read_kernel_details(path, sliced=True)
    assert [s["name"] for s in _rows(trace, "engine_slices")] == ["k0", "kernel_1", "k2", "k_3", "k4"]
