"""Bounded-memory conversion of torch_npu kernel tables: tables made slice by slice (issue 19).

The inputs are written here by hand; the expected rows are worked out by hand from them (times in ns
from the earliest kernel). With slices of 2 rows the sliced path writes several record batches per
table: the file must hold the same tables as the whole path.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from portscope.ingest import assemble, read_trace, write_trace
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.readers import ascend_csv
from portscope.ingest.readers.ascend_csv import read_kernel_details
from portscope.ingest.trace import Trace

TABLES = ("ops", "signals", "compiles", "engine_slices", "regions")


def _plain(table: pa.Table) -> list[dict]:
    return table.to_pylist()


def _same_files(whole: Trace, sliced: Trace, tmp_path: Path) -> Trace:
    """Write both; the sliced one wrote its big tables batch by batch. Returns the sliced file read back."""
    assert sliced.slices, "nothing was sliced"
    write_trace(whole, tmp_path / "whole.arrow")
    write_trace(sliced, tmp_path / "sliced.arrow")
    a, b = read_trace(tmp_path / "whole.arrow"), read_trace(tmp_path / "sliced.arrow")
    for name in TABLES:
        assert _plain(a[name]) == _plain(b[name]), name
    return b


KERNELS = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),Input Shapes,"
    "Input Data Types,Output Shapes,Output Data Types\n"
    '1,0,1,2,MatMul_1,MatMul,AI_CORE,"100.500\t",10,"""4,8;8,2""",FLOAT16;DT_BF16,"""4,2""",FLOAT16\n'
    "1,0,2,N/A,hcom_allReduce_1,hcom_allReduce_,HCCL,90,5.25,N/A,N/A,N/A,N/A\n"
    '2,0,3,2,Cast_2,Cast,AI_CPU,200,2,"""4""",FLOAT,"""4""",INT32\n'
    "2,0,4, 2 ,Add_3,,AI_VECTOR_CORE,150.001,1,N/A,N/A,N/A,N/A\n"
)


def test_kernel_details_sliced_equals_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(KERNELS)
    monkeypatch.setattr(assemble, "SLICE_ROWS", 2)
    monkeypatch.setattr(ascend_csv, "BLOCK_BYTES", 100)  # blocks as small as the header allows
    whole, sliced = read_kernel_details(path), read_kernel_details(path, sliced=True)
    assert [b.num_rows for b in sliced.slices["engine_slices"].batches()] == [2, 2]
    got = _same_files(whole, sliced, tmp_path)
    regions = {r["region_id"]: (r["name"], r["start_ns"], r["dur_ns"]) for r in _plain(got["regions"])}
    assert sorted(regions.values()) == [("kernel_details", 0, 112_000),  # t0 = 90 us (the HCCL kernel), end 202 us
                                        ("step 1", 0, 20_500), ("step 2", 60_001, 51_999)]  # fmt: skip
    ops = [(o["op_id"], regions[o["region_id"]][0], o["name"], o["start_ns"], o["dur_ns"], o["device"], o["input_shapes"],
            o["input_dtypes"], o["output_shapes"], o["output_dtypes"]) for o in _plain(got["ops"])]  # fmt: skip
    assert ops == [  # by start time
        (0, "step 1", "hcom_allReduce_", 0, 5_250, "npu:0", None, None, None, None),
        (1, "step 1", "MatMul", 10_500, 10_000, "npu:0", "4x8;8x2", "float16;bfloat16", "4x2", "float16"),
        (2, "step 2", "Add_3", 60_001, 1_000, "npu:0", None, None, None, None),  # no Type: its Name
        (3, "step 2", "Cast", 110_000, 2_000, "npu:0", "4", "float32", "4", "int32"),
    ]
    slices = [(s["engine"], s["engine_kind"], s["kind"], s["name"], s["op_id"]) for s in _plain(got["engine_slices"])]
    assert slices == [("NPU HCCL", "collective", "communication", "hcom_allReduce_1", 0),
                      ("NPU stream 2", "stream", "compute", "MatMul_1", 1),
                      ("NPU stream 2", "stream", "compute", "Add_3", 2),  # " 2 ": the same stream
                      ("NPU stream 2", "stream", "fallback", "Cast_2", 3)]  # fmt: skip
    signals = [(s["kind"], s["reason"], s["op_name"], s["op_id"], s["time_ns"]) for s in _plain(got["signals"])]
    assert signals == [("dispatch/cpu_fallback", "ai-cpu", "Cast", 3, 110_000)]
    assert got.run_info.extra["accelerator_cores"] == {"AI_CORE": 1, "AI_CPU": 1, "AI_VECTOR_CORE": 1, "HCCL": 1}


def test_kernel_details_ragged_row_is_listed(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text("Name,Type,Accelerator Core,Start Time(us),Duration(us)\nA,Add,AI_CORE,10.5,1\nB,Add,AI_CORE,11,2,extra\n")
    with pytest.raises(TraceFormatError, match=r"1 of 2 rows are malformed.*3 cells, the header has 5|6 cells, the header has 5"):
        read_kernel_details(path)
