"""PyTorch profiler / Kineto Chrome JSON -> Trace.

One pass over the events keeps compact tuples per category; ``_kineto_link``
then nests them per thread (ops in ops, Python frames, runtime calls), links
device work to the operator that launched it (correlation -> runtime call ->
innermost enclosing cpu_op) and builds the tables.
"""

from __future__ import annotations

import gc
import re
from pathlib import Path
from typing import Any

from ..catalog import KINETO_DEVICE_CATEGORIES, KINETO_RUNTIME_CATEGORIES
from ..errors import TraceFormatError
from ..trace import Trace
from ._kineto_events import FORMAT, KinetoEvents, _int, _tensor_args
from ._source import DEFAULT_CAPS, SizeCaps, read_bytes
from .chrome_json import ChromeDocument, _SplitFailed, whole

__all__ = ["FORMAT", "KinetoEvents", "collect", "read_kineto"]

_MAX_PROBLEMS = 10


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


