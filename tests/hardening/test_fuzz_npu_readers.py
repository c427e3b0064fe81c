"""Fuzz the NPU readers: torch_npu trace view and tables, Mobilint, Furiosa runtime traces and schedules, RBLN
explain dumps and Kineto lanes, generic Chrome JSON.

Every input converts or raises TraceFormatError, within the per-input time bound.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ._fuzzing import FUZZ, check, mutated
from .fuzz_targets import seed

NPU_READERS = ["ascend-trace", "ascend-kernels", "ascend-op-statistic", "ascend-memory-record", "ascend-operator-memory",
               "mobilint-trace", "furiosa-trace", "chrome", "rbln-explain", "furiosa-schedule", "npu-kineto"]
SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=10)
TIMES = st.decimals(-1e3, 1e16, places=3, allow_nan=False).map(str) | st.floats(-1e3, 1e16) | st.integers(-10, 2**60) | SCALARS
IDS = st.integers(0, 2**70) | st.text(max_size=6) | SCALARS
NAMES = ["aten::add", "aten::item", "AscendCL@aclrtSynchronizeStream", "AscendCL@opCompile", "run npu", "wait core",
         "copy to npu", "Load", "Execution", "torch_to_npu", "process_name", "thread_name", "process_sort_index"]  # fmt: skip


@st.composite
def chrome_event(draw: st.DrawFn) -> dict:
    """A Chrome event as the NPU stacks write them, with any field missing, mistyped or absurd."""
    event = {
        "ph": draw(st.sampled_from(["X", "B", "E", "i", "s", "f", "t", "M"]) | SCALARS),
        "name": draw(st.sampled_from(NAMES) | SCALARS),
        "cat": draw(st.sampled_from(["cpu_op", "async_npu", "NPU", "Nux", "", "HostToDevice"]) | SCALARS),
        "pid": draw(st.integers(-1, 3) | SCALARS),
        "tid": draw(st.integers(-1, 10000002) | SCALARS),
        "ts": draw(TIMES),
        "dur": draw(TIMES),
        "id": draw(IDS),
        "bp": draw(st.sampled_from(["e", "s"]) | SCALARS),
        "args": draw(st.dictionaries(st.sampled_from(["name", "sort_index", "Task Type", "pe_index", "begin_cycle", "end_cycle",
                                                      "execution_index", "Input Dims", "Input type", "bytes"]),
                                     st.sampled_from(["AI_CPU", "Python", "CANN", "Ascend Hardware", "Stream 2", "npu:0:0-3"])
                                     | SCALARS, max_size=4) | SCALARS),
    }  # fmt: skip
    for key in draw(st.lists(st.sampled_from(list(event)), max_size=3)):
        event.pop(key, None)
    return event


@pytest.mark.parametrize("reader", ["ascend-trace", "mobilint-trace", "furiosa-trace", "chrome", "npu-kineto"])
@FUZZ
@given(events=st.lists(chrome_event(), max_size=14), bare=st.booleans())
def test_structured_chrome_documents(reader: str, events: list[dict], bare: bool) -> None:
    check(reader, json.dumps(events if bare else {"traceEvents": events}).encode())


@pytest.mark.parametrize("reader", NPU_READERS)
@FUZZ
@given(data=st.data())
def test_mutated_seed_bytes(reader: str, data: st.DataObject) -> None:
    check(reader, data.draw(mutated(seed(reader))))


@FUZZ
@given(st.lists(st.lists(st.sampled_from(["N/A", "", '"12.5\t"', '"""1,2;3"""', "AI_CPU", "HCCL", "-1", "1e400", "x", "7"]),
                         min_size=1, max_size=6), max_size=6))  # fmt: skip
def test_kernel_tables_from_cells(rows: list[list[str]]) -> None:
    header = "Name,Type,Accelerator Core,Start Time(us),Duration(us),Input Shapes\n"
    check("ascend-kernels", (header + "\n".join(",".join(r) for r in rows)).encode())
    header = "OP Type,Core Type,Count,Total Time(us)\n"
    check("ascend-op-statistic", (header + "\n".join(",".join(r) for r in rows)).encode())


MEMORY_CELLS = st.sampled_from(["", "N/A", '"12.5\t"', "-1", "-512", "1e400", "1e-400", "x", "7", "NaN", "NPU:0", "CPU",
                                "NPU", "PTA", "GE", "APP"])  # fmt: skip


@FUZZ
@given(st.lists(st.lists(MEMORY_CELLS, min_size=1, max_size=7), max_size=6), st.sampled_from(["MB", "KB", "B", "GB", "TB", ""]))
def test_memory_tables_from_cells(rows: list[list[str]], unit: str) -> None:
    body = "\n".join(",".join(r) for r in rows)
    header = f"Component,Timestamp(us),Total Allocated({unit}),Total Reserved(MB),Device Type,Device_id,Stream Ptr\n"
    check("ascend-memory-record", (header + body).encode())
    header = (f"Name,Size({unit}),Allocation Time(us),Release Time(us),Duration(us),Allocation Total Allocated(MB),"
              "Release Total Allocated(KB)\n")
    check("ascend-operator-memory", (header + body).encode())


@pytest.mark.parametrize("reader", ["ascend-memory-record", "ascend-operator-memory"])
def test_memory_seeds_convert(reader: str) -> None:
    assert check(reader, seed(reader)) == "ok"
