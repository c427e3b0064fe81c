"""PyTorch profiler / Kineto Chrome JSON -> Trace.

One pass over the events keeps compact tuples per category; ``_kineto_link``
then nests them per thread (ops in ops, Python frames, runtime calls), links
device work to the operator that launched it (correlation -> runtime call ->
innermost enclosing cpu_op) and builds the tables.
"""

from __future__ import annotations

import dataclasses
import gc
import re
from pathlib import Path
from typing import Any

from ..catalog import KINETO_DEVICE_CATEGORIES, KINETO_RUNTIME_CATEGORIES
from ..errors import TraceFormatError
from ..trace import Trace
from ._source import DEFAULT_CAPS, SizeCaps, read_bytes
from .chrome_json import ChromeDocument, _SplitFailed, whole

FORMAT = "kineto"

# C++ scalar type names in "Input type" -> torch dtype names.
DTYPES = {
    "float": "float32",
    "double": "float64",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
    "long int": "int64",
    "long": "int64",
    "int": "int32",
    "short int": "int16",
    "short": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "bool": "bool",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    "c10::complex<c10::Half>": "complex32",
    "c10::Float8_e4m3fn": "float8_e4m3fn",
    "c10::Float8_e5m2": "float8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz",
    "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
    "unsigned int": "uint32",
    "unsigned long": "uint64",
}
ITEMSIZE = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16, "complex32": 4, "float8_e4m3fn": 1,
    "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "uint32": 4, "uint64": 8,
}  # fmt: skip

_MAX_PROBLEMS = 10


@dataclasses.dataclass
class KinetoEvents:
    """Compact per-category tuples of one Kineto trace (times in microseconds as read)."""

    metadata: dict[str, Any]
    # (ts, dur, name, pid, tid, None (reserved), shapes, strides, dtypes, bytes_in)
    ops: list[tuple] = dataclasses.field(default_factory=list)
    # (ts, dur, name, pid, tid)
    annotations: list[tuple] = dataclasses.field(default_factory=list)
    # (ts, dur, name, pid, tid)
    python: list[tuple] = dataclasses.field(default_factory=list)
    # (ts, dur, name, pid, tid, correlation, ext_id, size)
    runtime: list[tuple] = dataclasses.field(default_factory=list)
    # (ts, dur, cat, name, device, stream, correlation, bytes)
    device: list[tuple] = dataclasses.field(default_factory=list)
    t_min: float = float("inf")
    t_max: float = float("-inf")
    events: int = 0
    categories: dict[str, int] = dataclasses.field(default_factory=dict)


def read_kineto(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, infer_fallback: bool = False) -> Trace:
    """Convert a PyTorch profiler Chrome trace (.json or .json.gz) into a Trace.

    infer_fallback: mark leaf operators of a GPU trace that launched no GPU work as cpu_fallback
    (Kineto records no tensor devices, so this is a guess: host-side bookkeeping ops count too).
    """
    from ._kineto_fast import fast_collect
    from ._kineto_link import build_trace

    path = Path(path)
    raw = read_bytes(path, caps)
    doc = _document(path, raw)
    collecting = gc.isenabled()
    gc.disable()  # millions of small tuples, no cycles: the collector would only rescan them
    try:
        events = fast_collect(doc)
        if events is None:
            try:
                events = collect(path, doc)
            except _SplitFailed:
                events = collect(path, whole(doc))
        from . import npu_kineto  # hook: NPU lanes (e.g. RBLN's Kineto plugin); None for other traces

        lanes = npu_kineto.npu_layout(doc)
        if lanes is not None:
            npu_kineto.link(events, lanes)
        del raw, doc
        trace = build_trace(path, events, infer_fallback=infer_fallback, lanes=lanes)
        return npu_kineto.finish(trace, lanes, events) if lanes is not None else trace
    finally:
        if collecting:
            gc.enable()


def _document(path: Path, raw: bytes) -> ChromeDocument:
    first = re.compile(rb"\s*").match(raw).end()
    if raw[first : first + 1] not in (b"{", b"["):
        raise TraceFormatError(path, "not a JSON document (does not start with '{' or '[')")
    return ChromeDocument(path, raw)


def collect(path: Path, doc: ChromeDocument) -> KinetoEvents:
    """Validate and keep what the converter uses from every event; one TraceFormatError lists the problems."""
    out = KinetoEvents(metadata=dict(doc.metadata))
    problems: list[str] = []
    bad = 0
    index = 0
    ops, annotations, python, runtime, device = out.ops, out.annotations, out.python, out.runtime, out.device
    categories = out.categories
    t_min, t_max = out.t_min, out.t_max
    for batch in doc.batches():
        for ev in batch:
            index += 1
            if type(ev) is not dict:
                bad += 1
                if len(problems) < _MAX_PROBLEMS:
                    problems.append(f"event {index - 1} is a {type(ev).__name__}, expected an object")
                continue
            ph = ev.get("ph")
            if ph != "X":
                continue
            cat = ev.get("cat")
            ts = ev.get("ts")
            dur = ev.get("dur", 0)
            name = ev.get("name")
            if not (type(ts) in (float, int) and type(dur) in (float, int) and type(name) is str and dur >= 0):
                bad += 1
                if len(problems) < _MAX_PROBLEMS:
                    problems.append(f"event {index - 1} ({name!r:.60}): {_why_bad(ts, dur, name)}")
                continue
            categories[cat] = categories.get(cat, 0) + 1
            args = ev.get("args")
            if type(args) is not dict:
                args = {}
            end = ts + dur
            if cat == "Trace" or cat is None:
                continue
            if ts < t_min:
                t_min = ts
            if end > t_max:
                t_max = end
            pid, tid = ev.get("pid"), ev.get("tid")
            if cat == "cpu_op":
                shapes, strides, dtypes, nbytes = _tensor_args(args)
                ops.append((ts, dur, name, pid, tid, None, shapes, strides, dtypes, nbytes))
            elif cat == "user_annotation":
                annotations.append((ts, dur, name, pid, tid))
            elif cat == "python_function":
                python.append((ts, dur, name, pid, tid))
            elif cat in KINETO_RUNTIME_CATEGORIES:
                size = args.get("bytes", args.get("size"))
                runtime.append((ts, dur, name, pid, tid, args.get("correlation"), args.get("External id"), _int(size)))
            elif cat in KINETO_DEVICE_CATEGORIES:
                dev = args.get("device", pid)
                stream = args.get("stream", tid)
                device.append((ts, dur, cat, name, dev, stream, args.get("correlation"), _int(args.get("bytes"))))
    out.t_min, out.t_max, out.events = t_min, t_max, index
    if bad:
        more = f" (and {bad - len(problems)} more)" if bad > len(problems) else ""
        raise TraceFormatError(path, [f"{bad} of {index} events are malformed{more}", *problems])
    if not index:
        raise TraceFormatError(path, "'traceEvents' is empty: nothing to convert")
    if not (ops or device or annotations):
        raise TraceFormatError(path, f"no cpu_op, user_annotation or GPU events among {index} events: not a PyTorch profiler trace")
    return out


def _why_bad(ts: Any, dur: Any, name: Any) -> str:
    if type(name) is not str:
        return f"'name' is {type(name).__name__}, expected a string"
    if type(ts) not in (float, int):
        return "'ts' is missing" if ts is None else f"'ts' is {type(ts).__name__}, expected a number"
    if type(dur) not in (float, int):
        return f"'dur' is {type(dur).__name__}, expected a number"
    return f"'dur' is negative ({dur})"


def _int(value: Any) -> int | None:
    """A non-negative int64 from an int, a digit string or a float; None for anything else."""
    if type(value) is str and value.isdigit():
        value = int(value)
    elif type(value) is float and 0 <= value < 2**63:
        value = int(value)
    return value if type(value) is int and 0 <= value < 2**63 else None


def _tensor_args(args: dict) -> tuple[str | None, str | None, str | None, int]:
    """(shapes, strides, dtypes, bytes_in) in the trace format's notation from a cpu_op's args."""
    dims = args.get("Input Dims")
    if type(dims) is not list:
        shapes = args.get("input_shapes")  # a portscope export
        if type(shapes) is str:
            strides = args.get("input_strides")
            dtypes = args.get("input_dtypes")
            return shapes, strides if type(strides) is str else None, dtypes if type(dtypes) is str else None, 0
        return None, None, None, 0
    types = args.get("Input type")
    if type(types) is not list:
        types = []
    strides_in = args.get("Input Strides")
    if type(strides_in) is not list:
        strides_in = None
    shapes, dtypes, strides = [], [], []
    nbytes = 0
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        dtype = DTYPES.get(t, "") if type(t) is str else ""
        is_tensor = dtype != "" and type(d) is list and all(type(x) is int for x in d)
        if is_tensor:
            shapes.append("x".join(map(str, d)) if d else "()")
            dtypes.append(dtype)
            numel = 1
            for x in d:
                numel *= x
            nbytes += numel * ITEMSIZE.get(dtype, 0)
        else:
            shapes.append("")
            dtypes.append("")
        if strides_in is not None:
            s = strides_in[i] if i < len(strides_in) else None
            ok = is_tensor and type(s) is list and all(type(x) is int for x in s)
            strides.append(("x".join(map(str, s)) if s else "()") if ok else "")
    nbytes = min(max(nbytes, 0), 2**63 - 1)  # negative or absurd dims in a broken file
    return ";".join(shapes), (";".join(strides) if strides_in is not None else None), ";".join(dtypes), nbytes
