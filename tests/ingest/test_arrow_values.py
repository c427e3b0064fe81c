"""Arrow arrays made without pandas (`ingest/arrow_values.py`), and conversions that never import pandas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from portscope.ingest.arrow_values import array, numbers, strings, values_of

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def test_numbers_with_nulls_from_numpy() -> None:
    got = numbers(np.array([5, -1, 7], dtype=np.int64), mask=np.array([False, True, False]))
    assert got.type == pa.int64()
    assert got.to_pylist() == [5, None, 7]
    assert got.null_count == 1


def test_a_list_of_ints_with_none_into_int32() -> None:
    got = array([3, None, -2, 2**31 - 1], pa.int32())
    assert got.type == pa.int32()
    assert got.to_pylist() == [3, None, -2, 2147483647]


def test_booleans_pack_into_bits() -> None:
    got = numbers(np.array([True, False, False, True, True, False, True, False, True]))
    assert got.type == pa.bool_()
    assert got.to_pylist() == [True, False, False, True, True, False, True, False, True]


def test_strings_count_bytes_not_characters() -> None:
    got = strings(["µs", None, "", "aten::mm"])
    assert got.type == pa.string()
    assert got.to_pylist() == ["µs", None, "", "aten::mm"]
    assert np.frombuffer(got.buffers()[1], np.int32).tolist() == [0, 3, 3, 3, 11]  # "µs" is 3 bytes of UTF-8


def test_lists_of_ints_and_of_strings() -> None:
    assert array([[1, 2], [], None, [3]], pa.list_(pa.int32())).to_pylist() == [[1, 2], [], None, [3]]
    assert array([["a"], None, ["b", "c"]], pa.list_(pa.string())).to_pylist() == [["a"], None, ["b", "c"]]


def test_values_out_of_range_or_of_another_type_are_worded_by_pyarrow() -> None:
    with pytest.raises((OverflowError, pa.ArrowInvalid)):
        array([2**40], pa.int32())
    with pytest.raises((OverflowError, pa.ArrowInvalid)):
        array(np.array([2**40], dtype=np.int64), pa.int32())
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, TypeError)):
        array(["7"], pa.int64())
    with pytest.raises(pa.ArrowInvalid):  # a float into an integer column is not truncated
        array(np.array([1.5]), pa.int64())
    with pytest.raises(pa.ArrowInvalid):  # an int past 2^53 into a float column would lose digits
        array([2**53 + 1], pa.float64())
    with pytest.raises((OverflowError, pa.ArrowInvalid)):  # past int64
        array(np.array([2**63], dtype=np.uint64), pa.int64())
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate (msgspec lets one through) is no UTF-8
        strings(["a\ud800"])


def test_an_arrow_array_is_cast_to_the_type() -> None:
    got = array(numbers(np.array([1, 2], dtype=np.int64)), pa.int32())
    assert got.type == pa.int32() and got.to_pylist() == [1, 2]


def test_values_of_reads_slices_and_chunks() -> None:
    column = pa.chunked_array([numbers(np.arange(5, dtype=np.int32)).slice(2), numbers(np.array([9], dtype=np.int32))])
    assert values_of(column).tolist() == [2, 3, 4, 9]
    assert values_of(numbers(np.array([True, False, True])).slice(1)).tolist() == [False, True]


def test_values_of_fills_nulls_only_when_told() -> None:
    column = array([4, None, 6, None, 8, 9, 10, 11, 12], pa.int32()).slice(1)
    assert values_of(column, null=-1).tolist() == [-1, 6, -1, 8, 9, 10, 11, 12]
    assert values_of(array([True, None, True], pa.bool_()), null=False).tolist() == [True, False, True]
    with pytest.raises(ValueError, match="1 nulls"):
        values_of(array([1, None], pa.int64()))


CONVERT = r"""
import sys
from portscope.ingest.convert import load_any
from portscope.ingest.trace import write_trace
write_trace(load_any(sys.argv[1]), sys.argv[2])
print("pandas imported" if "pandas" in sys.modules else "no pandas")
"""


# torch_npu's kernel_details.csv (a TAB inside a quoted time, as torch_npu writes it) and memory_record.csv
KERNELS = (
    "Step Id,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),Input Shapes\n"
    '1,2,aclnnMatmul_MatMulV2,MatMulV2,AI_CORE,"1736413971558972.912\t",185.504,"""8,4;4,2"""\n'
    "1,2,aclnnCast_Cast,Cast,AI_CPU,1736413971559200.5,3.25,8\n"
)
MEMORY = (
    "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n"
    "PTA,1704161511420306.491,1.0,2.0,1.0,187650,NPU:0\nPTA,1704161511420310.000,3.5,4.0,3.5,187650,NPU:0\n"
)
WRITTEN = {"kernel_details.csv": KERNELS, "memory_record.csv": MEMORY}


@pytest.mark.parametrize("name", ["kineto/cuda_alexnet_small.json.gz", "kineto/rocm_mi250_small.json.gz",
                                  "kineto/mtia_inference.json.gz", "torch_trace/graph_breaks_small.log",
                                  "kernel_details.csv", "memory_record.csv"])
def test_converting_never_imports_pandas(name: str, tmp_path: Path) -> None:
    """pandas costs a small trace's conversion a fifth of its time, and the converter never uses it."""
    path = FIXTURES / name
    if name in WRITTEN:
        path = tmp_path / name
        path.write_text(WRITTEN[name])
    out = subprocess.run([sys.executable, "-c", CONVERT, str(path), str(tmp_path / "t.arrow")],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout.split() == ["no", "pandas"]


@pytest.mark.parametrize("name", ["kineto/cuda_alexnet_small.json.gz", "kineto/rocm_mi250_small.json.gz",
                                  "kineto/mtia_inference.json.gz", "torch_trace/graph_breaks_small.log"])
def test_converting_json_never_imports_pyarrow_compute(name: str, tmp_path: Path) -> None:
    """`pyarrow.compute` wraps hundreds of kernels when imported (~25 ms, a twentieth of a small trace's whole
    conversion): only the CSV readers' parsers use it, imported where they run."""
    script = CONVERT.replace('"pandas" in sys.modules', '"pyarrow.compute" in sys.modules')
    out = subprocess.run([sys.executable, "-c", script, str(FIXTURES / name), str(tmp_path / "t.arrow")],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout.split() == ["no", "pandas"]
