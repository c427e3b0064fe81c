"""torch_npu trace view -> events -> the one linker and rule layer (issue 29): the reader only translates.

Each trace is a few events written here by hand (a bare array as torch_npu writes it: quoted decimal ``ts`` in
microseconds, ``dur`` a number; Python process 100, CANN process 10002 = 100 x 100 + 2 calling on the Python
thread 100, device process 7 with thread ``Stream 3``); the expected counts and rows are worked out by hand
(times in ns from the earliest span, 1000 us).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from portscope.ingest.readers.ascend_trace import read_ascend_trace
from portscope.ingest.rules import AI_CPU_NOTE, COMPILE_NOTE
from portscope.ingest.trace import Trace

HEADER = [
    {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "Python"}},
    {"ph": "M", "name": "process_name", "pid": 10002, "tid": 0, "args": {"name": "CANN"}},
    {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Ascend Hardware"}},
    {"ph": "M", "name": "thread_name", "pid": 7, "tid": 3, "args": {"name": "Stream 3"}},
]


def _op(name: str, ts: str, dur: float, args: dict | None = None) -> dict:
    return {"ph": "X", "name": name, "cat": "cpu_op", "pid": 100, "tid": 100, "ts": ts, "dur": dur, **({"args": args} if args else {})}


def _acl(call: str, ts: str, dur: float) -> dict:
    return {"ph": "X", "name": f"AscendCL@{call}", "pid": 10002, "tid": 100, "ts": ts, "dur": dur}


def _kernel(name: str, ts: str, dur: float, task_type: str = "AI_CORE") -> dict:
    return {"ph": "X", "name": name, "pid": 7, "tid": 3, "ts": ts, "dur": dur, "args": {"Task Type": task_type}}


def _flow(fid: int | str, host_ts: str, kernel_ts: str) -> list[dict]:
    return [{"ph": "s", "name": "torch_to_npu", "cat": "async_npu", "id": fid, "pid": 100, "tid": 100, "ts": host_ts},
            {"ph": "f", "name": "torch_to_npu", "cat": "async_npu", "id": fid, "pid": 7, "tid": 3, "ts": kernel_ts, "bp": "e"}]  # fmt: skip


def _read(tmp_path: Path, events: list[dict]) -> Trace:
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps([*HEADER, *events]))
    return read_ascend_trace(path)


def _signals(trace: Trace, kind: str | None = None) -> list[tuple]:
    return [(s["kind"], s["reason"], s["op_name"], s["op_id"], s["time_ns"]) for s in trace["signals"].to_pylist()
            if kind is None or s["kind"] == kind]  # fmt: skip


# (a) a sync needs device evidence: aten::item on a CPU tensor waits for nothing
ITEM = [
    _op("aten::mm", "1000.000", 50),
    _kernel("MatMul", "1020.000", 8),
    *_flow(1, "1000.000", "1020.000"),
    _op("aten::item", "1100.000", 20),  # op 1
    _op("aten::_local_scalar_dense", "1101.000", 18),  # op 2, inside aten::item
]


def test_item_without_a_runtime_wait_is_no_sync(tmp_path: Path) -> None:
    trace = _read(tmp_path, ITEM)
    assert _signals(trace, "sync") == []
    assert trace["signals"].num_rows == 0


def test_item_around_a_stream_synchronize_is_one_sync(tmp_path: Path) -> None:
    trace = _read(tmp_path, [*ITEM, _acl("aclrtSynchronizeStream", "1102.000", 10)])  # inside _local_scalar_dense
    assert _signals(trace, "sync") == [("sync", "item", "aten::item", 1, 100_000)]  # the outermost sync operator


def test_synchronize_outside_operators_is_a_sync_named_after_the_call(tmp_path: Path) -> None:
    trace = _read(tmp_path, [*ITEM, _acl("aclrtSynchronizeDevice", "1200.000", 3)])
    assert _signals(trace, "sync") == [("sync", "aclrtSynchronizeDevice", "aclrtSynchronizeDevice", None, 200_000)]


# (b) an online compile recorded inside a compile-and-execute call is one compile
def test_op_compile_inside_compile_and_execute_counts_once(tmp_path: Path) -> None:
    trace = _read(tmp_path, [
        _op("aten::argmax", "1000.000", 300),
        _acl("aclopCompileAndExecute", "1010.000", 250),
        _acl("opCompile", "1020.000", 200),  # inside aclopCompileAndExecute: the same compile
        _kernel("ArgMaxV2", "1280.000", 5),
        *_flow(1, "1000.000", "1280.000"),
    ])  # fmt: skip
    assert _signals(trace) == [("dispatch/recompile", "online-aclopCompileAndExecute", "aten::argmax", 0, 0)]
    assert trace["signals"].to_pylist()[0]["note"] == COMPILE_NOTE
    compiles = [(c["kind"], c["key"], c["compile_ns"], c["reason"], c["time_ns"]) for c in trace["compiles"].to_pylist()]
    assert compiles == [("program", "aten::argmax", 250_000, "aclopCompileAndExecute", 10_000)]


def test_op_compile_alone_counts_once(tmp_path: Path) -> None:
    trace = _read(tmp_path, [_op("aten::argmax", "1000.000", 300), _acl("opCompile", "1020.000", 200)])
    assert _signals(trace) == [("dispatch/recompile", "online-opCompile", "aten::argmax", 0, 0)]
    assert trace["compiles"].num_rows == 1


# (c) a runtime copy call is a transfer (the trace view shows no device copy for it)
def test_runtime_memcpy_inside_copy_is_one_transfer(tmp_path: Path) -> None:
    trace = _read(tmp_path, [
        _op("aten::to", "1000.000", 40),
        _op("aten::copy_", "1005.000", 30),  # op 1
        _acl("aclrtMemcpy", "1010.000", 20),
    ])  # fmt: skip
    transfers = [(t["op_id"], t["direction"], t["start_ns"], t["dur_ns"]) for t in trace["transfers"].to_pylist()]
    assert transfers == [(1, "unknown", 10_000, 20_000)]  # the trace view gives no copy kind
    assert _signals(trace) == [("transfer/unknown", "aclrtMemcpy", "aten::copy_", 1, 5_000)]
    assert [(c["name"], c["op_id"]) for c in trace["runtime_calls"].to_pylist()] == [("aclrtMemcpy", 1)]


# (d) a kernel the device ran on its AI CPU is a device-side fallback of the operator that launched it
def test_ai_cpu_kernel_linked_by_flow_is_a_fallback_of_its_operator(tmp_path: Path) -> None:
    trace = _read(tmp_path, [
        _op("aten::cumsum", "1000.000", 15),  # op 0: launches the AI CPU kernel
        _op("aten::add", "1050.000", 5),  # op 1: launches an AI Core kernel
        _kernel("Cumsum", "1010.000", 40, "AI_CPU"),
        _kernel("Add", "1060.000", 2, "AI_VECTOR_CORE"),
        *_flow("cumsum-7", "1000.000", "1010.000"),
        *_flow(2, "1050.000", "1060.000"),
    ])  # fmt: skip
    assert _signals(trace) == [("dispatch/cpu_fallback", "ai-cpu", "aten::cumsum", 0, 0)]
    assert trace["signals"].to_pylist()[0]["note"] == AI_CPU_NOTE
    assert [o["placement"] for o in trace["ops"].to_pylist()] == ["device", "device"]


def test_ai_cpu_kernel_without_a_flow_is_named_after_itself(tmp_path: Path) -> None:
    trace = _read(tmp_path, [_op("aten::cumsum", "1000.000", 15), _kernel("Cumsum", "1010.000", 40, "AI_CPU")])
    assert _signals(trace) == [("dispatch/cpu_fallback", "ai-cpu", "Cumsum", None, 10_000)]
    assert [o["placement"] for o in trace["ops"].to_pylist()] == ["host"]


# what the reader translates into: operators, lanes, correlations

NPU = [
    _op("aten::mm", "1000.000", 50, {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}),
    {"ph": "X", "name": "Enqueue", "cat": "enqueue", "pid": 100, "tid": 100, "ts": "1001.000", "dur": 1},
    _op("aten::add", "1010.500", 5),
    _op("aten::item", "1100.000", 20),
    _acl("aclrtSynchronizeStream", "1105.000", 10),  # inside aten::item: the wait item made
    _acl("aclrtSynchronizeDevice", "1200.000", 3),  # inside no operator
    _kernel("MatMul", "1020.250", 8),
    _kernel("AddCpu", "1030.000", 2, "AI_CPU"),
    *_flow(9007199254740993, "1000.000", "1020.250"),
    *_flow("x1", "1012.000", "1030.000"),  # starts inside aten::add (inside aten::mm)
]
# a string flow id's correlation: 2^62 plus the top 62 bits of the little-endian 64-bit BLAKE2b of "s" + its UTF-8
X1_CORRELATION = 2**62 + (int.from_bytes(hashlib.blake2b(b"sx1", digest_size=8).digest(), "little") >> 2)


def test_translated_tables(tmp_path: Path) -> None:
    trace = _read(tmp_path, NPU)
    ops = [(o["op_id"], o["name"], o["start_ns"], o["dur_ns"], o["placement"], o["device"], o["input_shapes"],
            o["input_dtypes"], o["bytes_in"], o["thread"]) for o in trace["ops"].to_pylist()]  # fmt: skip
    assert ops == [  # t0 = 1000 us; mm and add launched kernels (torch_to_npu), item did not
        (0, "aten::mm", 0, 50_000, "device", "npu:0", "2x3;3x4", "float32;float32", (6 + 12) * 4, 100),
        (1, "aten::add", 10_500, 5_000, "device", "npu:0", None, None, 0, 100),
        (2, "aten::item", 100_000, 20_000, "host", "cpu", None, None, 0, 100),
    ]
    slices = [(s["engine"], s["engine_kind"], s["name"], s["start"], s["dur"], s["kind"], s["op_id"], s["correlation"])
              for s in trace["engine_slices"].to_pylist()]  # fmt: skip
    assert sorted(slices, key=str) == sorted([
        ("host", "host", "aten::mm", 0, 50_000, "compute", 0, None),  # top-level operators (add is inside mm)
        ("host", "host", "aten::item", 100_000, 20_000, "compute", 2, None),
        ("host queue", "dispatch", "Enqueue", 1_000, 1_000, "dispatch", 0, None),  # inside aten::mm on its thread
        ("CANN", "dispatch", "aclrtSynchronizeStream", 105_000, 10_000, "sync", 2, None),  # a wait call: sync
        ("CANN", "dispatch", "aclrtSynchronizeDevice", 200_000, 3_000, "sync", None, None),
        ("NPU Stream 3", "stream", "MatMul", 20_250, 8_000, "compute", 0, 9007199254740993),
        ("NPU Stream 3", "stream", "AddCpu", 30_000, 2_000, "fallback", 1, X1_CORRELATION),  # AI_CPU  # a string id: 2^62 + its hash
    ], key=str)  # fmt: skip
    calls = [(c["name"], c["op_id"], c["start_ns"], c["correlation"]) for c in trace["runtime_calls"].to_pylist()]
    assert sorted(calls, key=str) == sorted([  # AscendCL@ removed; each launch flow's start a call holding its id
        ("aclrtSynchronizeStream", 2, 105_000, None), ("aclrtSynchronizeDevice", None, 200_000, None),
        ("torch_to_npu", 0, 0, 9007199254740993), ("torch_to_npu", 1, 10_500, X1_CORRELATION),
    ], key=str)  # fmt: skip
    assert sorted(_signals(trace), key=str) == sorted([
        ("sync", "item", "aten::item", 2, 100_000),
        ("sync", "aclrtSynchronizeDevice", "aclrtSynchronizeDevice", None, 200_000),
        ("dispatch/cpu_fallback", "ai-cpu", "aten::add", 1, 10_500),
    ], key=str)  # fmt: skip
    regions = trace["regions"].to_pylist()
    assert [(r["name"], r["dur_ns"], r["device"]) for r in regions] == [("trace_view.json", 200_000 + 3_000, "npu:0")]
    assert trace.run_info.devices == ["cpu", "npu:0"]
    assert trace.run_info.extra["kernels_linked_to_operators"] == 2
    assert trace.run_info.extra["flows_by_name"] == {"torch_to_npu": 2}


def test_a_trace_view_the_recorder_did_not_close_reads_to_its_last_whole_event(tmp_path: Path) -> None:
    # the fixture's 41 events cut 30 bytes into its last one (the enqueue_to_dequeue flow's end, ph "f"), no "]":
    # every operator, kernel and lane as in the whole file, the cut event dropped and said
    whole = Path(__file__).parent / "fixtures" / "ascend_trace_view.json"
    text = whole.read_text().rstrip().removesuffix("]").rstrip()
    last = text.rindex('{"ph": "f"')
    cut = tmp_path / "trace_view.json"
    cut.write_text(text[: last + 30])
    a, b = read_ascend_trace(whole), read_ascend_trace(cut)
    for table in ("ops", "engine_slices", "signals", "transfers"):
        assert b[table].equals(a[table]), table
    assert ("1 event cut mid-way at the end of the file (the JSON array is not closed: the recording stopped "
            "mid-write): dropped") in b.run_info.missing_signals
