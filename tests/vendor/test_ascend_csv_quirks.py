"""torch_npu (Ascend) CSV tables as other tools save them: one device other than 0, quoted headers (an Excel or
pandas QUOTE_ALL export), a spreadsheet's blank rows (``,,,,``), op_statistic of several devices. Expected figures
are worked out by hand in the comments (times in ns from the earliest kernel)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest.convert import detect, load_any
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.readers import ascend_csv, memory_table

MIB = 1 << 20
BLANK = "1 empty row (every cell empty, as a spreadsheet saves a blank row): skipped"


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ascend_csv, "BLOCK_BYTES", 40)  # a block: 4x the header line
    monkeypatch.setattr(memory_table, "BLOCK_BYTES", 40)


def _slices(trace) -> list[tuple]:  # noqa: ANN001
    return [(s["engine"], s["start"], s["dur"], s["kind"]) for s in trace["engine_slices"].to_pylist()]


# ---- one device, not device 0 ------------------------------------------------------------------------------

# MatMul 100..110 us, Cast (AI CPU) 105.5..107.75 us: from 100 us, 0 + 10 us and 5.5 + 2.25 us; the run 10 us long
@pytest.mark.parametrize("device", ["1", "3"])
def test_kernel_details_of_one_device_other_than_0(tmp_path: Path, device: str) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text("Device_id,Step Id,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
                    f"{device},1,2,MatMul_1,MatMul,AI_CORE,100,10\n{device},1,2,Cast_2,Cast,AI_CPU,105.5,2.25\n")  # fmt: skip
    trace = load_any(path)
    assert trace.run_info.devices == ["cpu", f"npu:{device}"]
    assert [o["device"] for o in trace["ops"].to_pylist()] == [f"npu:{device}"] * 2
    assert _slices(trace) == [("NPU stream 2", 0, 10_000, "compute"), ("NPU stream 2", 5_500, 2_250, "fallback")]
    root = trace["regions"].to_pylist()[0]
    assert (root["name"], root["dur_ns"], root["device"]) == ("kernel_details", 10_000, f"npu:{device}")
    assert [(s["op_name"], s["reason"]) for s in trace["signals"].to_pylist()] == [("Cast", "ai-cpu")]


# ---- quoted headers --------------------------------------------------------------------------------------------

KERNELS_QUOTED = ('"Step Id","Stream ID","Name","Type","Accelerator Core","Start Time(us)","Duration(us)"\n'
                  '"1","2","MatMul_1","MatMul","AI_CORE","100","10"\n"1","2","Cast_2","Cast","AI_CPU","105.5","2.25"\n')  # fmt: skip
STATISTIC_QUOTED = ('"OP Type","Core Type","Count","Total Time(us)","Ratio(%)"\n'
                    '"Cast","AI_CPU","7","812.5","45.8"\n"Add","AI_VECTOR_CORE","48","960.0","54.2"\n')  # fmt: skip
SAVED = {"quoted": lambda t: t, "bom": lambda t: "\ufeff" + t, "crlf": lambda t: t.replace("\n", "\r\n"),
         "spaces": lambda t: t.replace('","', '", "')}  # fmt: skip


@pytest.mark.parametrize("saved", sorted(SAVED))
def test_kernel_details_with_a_quoted_header_is_detected(tmp_path: Path, saved: str) -> None:
    path = tmp_path / "export.csv"
    path.write_bytes(SAVED[saved](KERNELS_QUOTED).encode())
    assert detect(path) == "ascend-kernels"
    trace = load_any(path)
    assert _slices(trace) == [("NPU stream 2", 0, 10_000, "compute"), ("NPU stream 2", 5_500, 2_250, "fallback")]
    assert [o["name"] for o in trace["ops"].to_pylist()] == ["MatMul", "Cast"]
    assert trace["regions"].column("name").to_pylist() == ["export", "step 1"]


# Cast 812.5 us + Add 960 us on the one device: a region of 1_772_500 ns; Cast's 7 AI CPU runs one counted fallback
@pytest.mark.parametrize("saved", sorted(SAVED))
def test_op_statistic_with_a_quoted_header_is_detected(tmp_path: Path, saved: str) -> None:
    path = tmp_path / "export.csv"
    path.write_bytes(SAVED[saved](STATISTIC_QUOTED).encode())
    assert detect(path) == "ascend-op-statistic"
    trace = load_any(path)
    assert [(s["op_name"], s["count"]) for s in trace["signals"].to_pylist()] == [("Cast", 7)]
    assert trace["regions"].column("dur_ns").to_pylist() == [1_772_500]


# ---- a spreadsheet's blank rows ----------------------------------------------------------------------------------

# Blank rows: line 2 (every cell), 4 (one cell short of the header: a ragged row), 5 (quoted empties), 6-65 (sixty:
# a block of nothing but them), 67 (spaces): 64 skipped; the two kernels as above.
KERNELS_BLANK = ("Step Id,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n,,,,,,\n"
                 "1,2,MatMul_1,MatMul,AI_CORE,100,10\n,,,,,\n" + '"","","","","","",""\n' + ",,,,,,\n" * 60 +
                 "1,2,Cast_2,Cast,AI_CPU,105.5,2.25\n , ,,,,,\n")  # fmt: skip


@pytest.mark.parametrize("sliced", [False, True])
def test_kernel_details_blank_rows_are_skipped_and_counted(tmp_path: Path, tiny: None, sliced: bool) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(KERNELS_BLANK)
    trace = ascend_csv.read_kernel_details(path, sliced=sliced)
    rows = trace.slices["engine_slices"].batches() if sliced else [trace["engine_slices"]]
    assert [(s["start"], s["dur"], s["kind"]) for b in rows for s in b.to_pylist()] == [
        (0, 10_000, "compute"), (5_500, 2_250, "fallback")]  # fmt: skip
    assert trace.run_info.extra["kernels"] == 2 and trace.run_info.extra["empty_rows"] == 64
    assert trace.run_info.missing_signals[-1] == BLANK.replace("1 empty row ", "64 empty rows ")


def test_kernel_details_a_row_with_a_cell_but_no_name_or_time_stays_malformed(tmp_path: Path) -> None:
    # line 3 blank (skipped: 3 rows with a cell), line 4 only its Task ID (a column not read), line 5 no start time
    path = tmp_path / "kernel_details.csv"
    path.write_text("Task ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n1,A,Add,AI_CORE,10,1\n,,,,,\n"
                    "7,,,,,\n,X,Add,AI_CORE,,1\n")  # fmt: skip
    with pytest.raises(TraceFormatError) as err:
        load_any(path)
    text = str(err.value)
    assert "2 of 3 rows are malformed" in text and "line 4 (None)" in text and "line 5 ('X')" in text
    assert "line 3" not in text


def test_kernel_details_of_blank_rows_only(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text("Name,Type,Accelerator Core,Start Time(us),Duration(us)\n,,,,\n,,,,\n")
    with pytest.raises(TraceFormatError, match=r"a header but no rows \(2 empty: every cell empty\)"):
        load_any(path)


def test_op_statistic_blank_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "op_statistic.csv"
    path.write_text("OP Type,Core Type,Count,Total Time(us)\nCast,AI_CPU,7,812.5\n,,,\n,,\nAdd,AI_VECTOR_CORE,48,960.0\n")
    trace = load_any(path)
    assert [(s["op_name"], s["count"]) for s in trace["signals"].to_pylist()] == [("Cast", 7)]
    assert trace["regions"].column("dur_ns").to_pylist() == [1_772_500]  # 812.5 + 960 us
    assert trace.run_info.extra["empty_rows"] == 2
    assert trace.run_info.missing_signals[-1] == BLANK.replace("1 empty row ", "2 empty rows ")
    path.write_text("OP Type,Core Type,Count,Total Time(us)\n,,,\nCast,AI_CPU,seven,812.5\n")
    with pytest.raises(TraceFormatError) as err:
        load_any(path)
    assert "1 of 1 rows are malformed" in str(err.value) and "line 3 ('Cast')" in str(err.value)


# PTA 1 MiB at 100 us, 3 MiB at 101.5 us (reserved 2 and 4 MiB); line 3 blank
def test_memory_record_blank_rows_are_not_records(tmp_path: Path, tiny: None) -> None:
    path = tmp_path / "memory_record.csv"
    path.write_text("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\n"
                    "PTA,100,1.0,2.0,NPU:0\n,,,,\nPTA,101.5,3.0,4.0,NPU:0\n")  # fmt: skip
    trace = load_any(path)
    extra = trace.run_info.extra
    assert (extra["rows"], extra["empty_rows"]) == (2, 1)
    assert [(c["component"], c["records"], c["peak_allocated_bytes"]) for c in extra["memory_components"]] == [("PTA", 2, 3 * MIB)]
    assert trace.run_info.missing_signals[-1] == BLANK
    assert not any("without a time" in m for m in trace.run_info.missing_signals)


OPERATOR_HEADER = ("Name,Size(KB),Allocation Time(us),Release Time(us),Allocation Total Allocated(MB),"
                   "Allocation Total Reserved(MB),Release Total Allocated(MB),Release Total Reserved(MB),Device Type\n")  # fmt: skip


def test_operator_memory_blank_rows_are_skipped(tmp_path: Path, tiny: None) -> None:
    # aten::empty: 1 MiB allocated at 100 us, released at 110 us; line 3 blank, line 4 blank and short
    path = tmp_path / "operator_memory.csv"
    path.write_text(OPERATOR_HEADER + "aten::empty,1024,100,110,1.0,2.0,0.0,2.0,NPU:0\n,,,,,,,,\n,,\n")
    trace = load_any(path)
    extra = trace.run_info.extra
    assert (extra["rows"], extra["empty_rows"]) == (1, 2)
    assert extra["operator_memory"] == [{"name": "aten::empty", "blocks": 1, "allocated_bytes": MIB, "releases": 1}]
    assert trace.run_info.missing_signals[-1] == BLANK.replace("1 empty row ", "2 empty rows ")
    assert not any("outside the collection" in m for m in trace.run_info.missing_signals)
    # a row with a cell filled but no size stays malformed, at its own line past the blank ones
    path.write_text(OPERATOR_HEADER + "aten::empty,1024,100,110,1.0,2.0,0.0,2.0,NPU:0\n,,\n,,,,,,,,\naten::mm,,100,,,,,,NPU:0\n")
    with pytest.raises(TraceFormatError) as err:
        load_any(path)
    assert "1 of 2 rows are malformed" in str(err.value) and "line 5: no Size(KB)" in str(err.value)
    assert "line 3" not in str(err.value)


# ---- op_statistic of several devices ----------------------------------------------------------------------------

# npu:0 100 + 20.5 = 120.5 us, npu:1 150 + 0.25 = 150.25 us: side by side, the region is npu:1's 150_250 ns (not
# their sum, 270_750); Cast's AI CPU runs: 7 on npu:0, 5 on npu:1
def test_op_statistic_of_two_devices_is_as_long_as_the_busiest(tmp_path: Path) -> None:
    path = tmp_path / "op_statistic.csv"
    path.write_text("Device_id,OP Type,Core Type,Count,Total Time(us)\n0,MatMulV2,AI_CORE,24,100\n0,Cast,AI_CPU,7,20.5\n"
                    "1,MatMulV2,AI_CORE,24,150\n1,Cast,AI_CPU,5,0.25\n")  # fmt: skip
    trace = load_any(path)
    region = trace["regions"].to_pylist()[0]
    assert region["dur_ns"] == 150_250
    assert "npu:1" in json.loads(region["tags"])["note"]
    assert trace.run_info.extra["device_time_ns"] == {"npu:0": 120_500, "npu:1": 150_250}
    assert sorted((s["op_name"], s["count"]) for s in trace["signals"].to_pylist()) == [("Cast", 5), ("Cast", 7)]


def test_kernel_details_lines_past_a_short_blank_row(tmp_path: Path) -> None:
    # line 3 a blank row one cell short (the CSV reader skips it), line 4 blank, line 5 no start time
    path = tmp_path / "kernel_details.csv"
    path.write_text("Name,Type,Accelerator Core,Start Time(us),Duration(us)\nA,Add,AI_CORE,10,1\n,,,\n,,,,\nX,Add,AI_CORE,,1\n")
    with pytest.raises(TraceFormatError) as err:
        load_any(path)
    assert "1 of 2 rows are malformed" in str(err.value) and "line 5 ('X')" in str(err.value)


# ---- figures with thousands marks (a spreadsheet's "1,200") -------------------------------------------------------

# Cast 1,200 AI CPU runs in 1,234.5 us, Add 48 in 960 us: a region of 2_194_500 ns; MatMul starts at 1,000 us and
# lasts 1,500.25 us, Cast starts 250 us later: slices at 0 and 250_000 ns
def test_op_statistic_counts_with_thousands_marks(tmp_path: Path) -> None:
    path = tmp_path / "op_statistic.csv"
    path.write_text('OP Type,Core Type,Count,Total Time(us)\nCast,AI_CPU,"1,200","1,234.5"\nAdd,AI_VECTOR_CORE,48,960\n')
    trace = load_any(path)
    assert [(s["op_name"], s["count"]) for s in trace["signals"].to_pylist()] == [("Cast", 1200)]
    assert trace["regions"].column("dur_ns").to_pylist() == [2_194_500]


def test_kernel_details_times_with_thousands_marks(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text('Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n'
                    '2,MatMul_1,MatMul,AI_CORE,"1,000","1,500.25"\n2,Cast_2,Cast,AI_CPU,"1,250",2\n')
    assert _slices(load_any(path)) == [("NPU stream 2", 0, 1_500_250, "compute"), ("NPU stream 2", 250_000, 2_000, "fallback")]


def test_a_comma_that_is_no_thousands_mark_stays_malformed(tmp_path: Path) -> None:
    path = tmp_path / "op_statistic.csv"
    path.write_text('OP Type,Core Type,Count,Total Time(us)\nCast,AI_CPU,"12,00",5\n')
    with pytest.raises(TraceFormatError, match=r"line 2 \('Cast'\): needs an OP Type, an integer Count"):
        load_any(path)
