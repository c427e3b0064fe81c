"""Fuzz the converters: Kineto JSON, fallback logs, TORCH_TRACE logs and format detection.

Every input converts or raises TraceFormatError, within the per-input time bound.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ._fuzzing import FUZZ, check, mutated
from .fuzz_targets import kineto_gz_seed, seed

SCALARS = st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats() | st.text(max_size=12)
ANY_JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
KINETO_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args", "s", "bp"]
KINETO_ARGS = ["Input Dims", "Input type", "Input Strides", "Concrete Inputs", "External id", "correlation", "bytes", "device", "stream", "Sequence number", "Record function id"]
CATEGORIES = ["cpu_op", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "user_annotation", "gpu_user_annotation", "python_function", "ac2g", "Trace"]


@st.composite
def kineto_event(draw: st.DrawFn) -> dict:
    """An event that looks like Kineto's, with any field possibly missing, mistyped or absurd."""
    event: dict = {
        "ph": draw(st.sampled_from(["X", "i", "s", "f", "M", "B", "E"]) | SCALARS),
        "cat": draw(st.sampled_from(CATEGORIES) | SCALARS),
        "name": draw(st.sampled_from(["aten::mm", "Memcpy DtoH (Device -> Pageable)", "cudaLaunchKernel", "gemm", "forward"]) | SCALARS),
        "pid": draw(st.integers(-1, 3) | SCALARS),
        "tid": draw(st.integers(-1, 9) | SCALARS),
        "ts": draw(st.floats(-1e3, 1e18) | SCALARS),
        "dur": draw(st.floats(-10, 1e9) | SCALARS),
    }
    args = {k: draw(ANY_JSON | st.integers(0, 20) | st.lists(st.lists(st.integers(-1, 8), max_size=3), max_size=3)) for k in draw(st.lists(st.sampled_from(KINETO_ARGS), max_size=4))}
    event["args"] = draw(st.just(args) | SCALARS)
    for key in draw(st.lists(st.sampled_from(KINETO_KEYS), max_size=3)):
        event.pop(key, None)
    return event


@FUZZ
@given(st.lists(kineto_event(), max_size=12), st.dictionaries(st.sampled_from(["schemaVersion", "baseTimeNanoseconds", "deviceProperties", "displayTimeUnit"]), ANY_JSON, max_size=3))
def test_structured_kineto_documents(events: list[dict], top: dict) -> None:
    check("kineto", json.dumps({**top, "traceEvents": events}).encode())


@FUZZ
@given(mutated(seed("kineto")))
def test_mutated_kineto_bytes(data: bytes) -> None:
    check("kineto", data)


REAL_KINETO = kineto_gz_seed()


@FUZZ
@given(mutated(REAL_KINETO, max_edits=3))
def test_mutated_real_kineto_export(data: bytes) -> None:
    check("kineto", data)


LOG_LINES = [
    "[2026-09-14 19:49:00.145][I] `aten::neg` op ran on CPU instead of RBLN",
    "[2026-09-14 19:49:00.146][W] TRACE: /work/model.py:85 in rotate_half",
    "    return torch.cat((-x2, x1), dim=-1)",
    "`sdpa (query sequence length 7 not aligned to 32)` op ran on the CPU instead of npu:0",
    "[2026-13-45 99:99:99.999][I] `x` op ran on host instead of Z",
    '  File "/a/b.py", line 12, in f',
]


@FUZZ
@given(st.lists(st.sampled_from(LOG_LINES) | st.text(max_size=60), max_size=20))
def test_fallback_logs_from_lines(lines: list[str]) -> None:
    check("fallback-log", "\n".join(lines).encode("utf-8", errors="surrogatepass"))


@FUZZ
@given(mutated(seed("fallback-log")))
def test_mutated_fallback_log_bytes(data: bytes) -> None:
    check("fallback-log", data)


ENVELOPE_KEYS = ["dynamo_start", "compilation_metrics", "str", "dynamo_output_graph", "artifact", "guard_added", "recompile_reasons", "dynamo_guards", "inductor_output_code", "bwd_compilation_metrics"]


@st.composite
def torch_trace_line(draw: st.DrawFn) -> str:
    key = draw(st.sampled_from(ENVELOPE_KEYS) | st.text(max_size=8))
    body = {key: draw(ANY_JSON)}
    for extra in draw(st.lists(st.sampled_from(["frame_id", "frame_compile_id", "attempt", "has_payload", "rank"]), max_size=3)):
        body[extra] = draw(st.integers(-2, 5) | SCALARS)
    clock = draw(st.sampled_from(["0403 07:28:48.051000", "1231 23:59:59.999999", "0000 00:00:00.0", "9999 99:99:99.9"]))
    line = f"V{clock} 139877824898048 torch/_logging/structured.py:19] {json.dumps(body)}"
    payload = draw(st.lists(st.text(max_size=30), max_size=3))
    return "\n".join([line, *("\t" + p for p in payload)])


@FUZZ
@given(st.lists(torch_trace_line(), max_size=10))
def test_structured_torch_trace_logs(lines: list[str]) -> None:
    check("torch-trace", "\n".join(lines).encode("utf-8", errors="surrogatepass"))


@FUZZ
@given(mutated(seed("torch-trace")))
def test_mutated_torch_trace_bytes(data: bytes) -> None:
    check("torch-trace", data)


@FUZZ
@given(st.sampled_from(["portscope", "kineto", "fallback-log", "torch-trace"]).flatmap(lambda r: mutated(seed(r), max_edits=4)))
def test_detection_then_conversion(data: bytes) -> None:
    """load_any on unnamed bytes: detection by content, then whichever reader it picked."""
    check("detect", data)
