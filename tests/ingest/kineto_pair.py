"""A tiny hand-written Kineto pair (eager step A, compiled step B) whose operator diff is worked out by hand
in tests/ingest/test_op_diff.py; the compare page's browser test shows it too."""

from __future__ import annotations

import json
from pathlib import Path

from portscope.ingest import write_trace
from portscope.ingest.readers import read_kineto

HOST, DEVICE, STREAM = 1, 0, 7


def event(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
    gpu = cat in ("kernel", "gpu_memcpy", "gpu_memset")
    pid, tid = (DEVICE, STREAM) if gpu else (HOST, HOST)
    if gpu:
        args = {"device": DEVICE, "stream": STREAM, **args}
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _launch(op: str, ts: float, dur: float, call: str, corr: int, kernels: list[str]) -> list[dict]:
    """An operator, the runtime call it makes one µs in, and the kernels that call launched."""
    events = [event("cpu_op", op, ts, dur), event("cuda_runtime", call, ts + 1, 2, correlation=corr)]
    return events + [event("kernel", k, 200 + corr % 100 + 10 * i, 4, correlation=corr) for i, k in enumerate(kernels)]


# A: the eager step. model.py:12 calls aten::mm (one kernel), model.py:20 aten::add twice (a kernel each) and
# aten::relu once (host only); aten::zeros runs after the step (outside it).
CONTROL = [
    event("user_annotation", "ProfilerStep#1", 0, 100),
    event("python_function", "model.py(12): forward", 2, 30), event("python_function", "model.py(20): forward", 40, 50),
    *_launch("aten::mm", 5, 10, "cudaLaunchKernel", 100, ["gemm_a"]),
    *_launch("aten::add", 45, 10, "cudaLaunchKernel", 101, ["add_kernel"]),
    *_launch("aten::add", 60, 10, "cudaLaunchKernel", 102, ["add_kernel"]),
    event("cpu_op", "aten::relu", 75, 5),
    event("cpu_op", "aten::zeros", 150, 5),
]
# B: the compiled step. model.py:12 calls CompiledFunction, whose one cudaGraphLaunch runs gemm_b and
# add_kernel; model.py:20 aten::add once and aten::relu twice; a kernel launched before the trace began.
TEST = [
    event("user_annotation", "ProfilerStep#1", 0, 100),
    event("python_function", "model.py(12): forward", 2, 64), event("python_function", "model.py(20): forward", 68, 30),
    *_launch("CompiledFunction", 5, 60, "cudaGraphLaunch", 200, ["gemm_b", "add_kernel"]),
    *_launch("aten::add", 70, 10, "cudaLaunchKernel", 201, ["add_kernel"]),
    event("cpu_op", "aten::relu", 82, 5), event("cpu_op", "aten::relu", 88, 5),
    event("kernel", "stale_kernel", 1, 2, correlation=50),
]


def convert(tmp_path: Path, name: str, events: list[dict]) -> Path:
    """The events as a Kineto JSON file in tmp_path, converted to NAME.arrow."""
    source = tmp_path / f"{name}.json"
    source.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": name}))
    return write_trace(read_kineto(source), tmp_path / f"{name}.arrow")
