"""torch_npu (Ascend) profiler ``ASCEND_PROFILER_OUTPUT/trace_view.json`` -> events (`events.EventColumns`) -> Trace.

What torch_npu writes (its profiler's trace view): a bare JSON array of Chrome
events; ``ts`` is a quoted decimal of microseconds with a nanosecond fraction
(``"1704161511420306.491"``, kept exact), ``dur`` a number; flow ids are integers
beyond 2^53 or strings. Processes (``process_name`` metadata):

* ``Python`` — host operators (cat ``cpu_op``, ``aten::*``, args ``Input Dims``/``Input type``
  when shapes were recorded), task-queue spans ``Enqueue`` / ``Dequeue@<op>``;
* ``CANN`` (pid = host pid x 100 + 2) — ``AscendCL@...`` runtime calls on the host thread that made them (the
  same tid as the Python thread);
* ``Ascend Hardware`` — threads ``Stream N``, one span per kernel (``aclnnMm_MatMulCommon_MatMulV2``),
  args ``Task Type`` (``AI_CORE``, ``AI_VECTOR_CORE``, ``MIX_AIC``, ``AI_CPU``...), ``Stream Id``, ``Task Id``;
* ``Overlap Analysis`` — threads Computing / Communication / Communication(Not Overlapped) / Free.

Flows (``s``/``f``): cat ``async_npu`` name ``torch_to_npu`` (host operator -> kernel), ``HostToDevice`` (CANN
call -> kernel), ``async_task_queue`` (``enqueue_to_dequeue``) and ``fwdbwd`` (counted only).

The translation (`translate`), and nothing else: host operators -> OP (shapes, strides and dtypes from their
args); ``AscendCL@<call>`` -> RUNTIME ``<call>`` on the Python process and the calling thread (so the linker nests
it in the operator that made it), drawn too as a SPAN on the ``CANN`` lane; kernels -> KERNEL (unit: ``Task
Type``, stream: ``Stream N``, device: the process's, lane ``NPU Stream N``); ``ProfilerStep#N`` spans of the
Python process -> ANNOTATION (step regions); a ``torch_to_npu`` flow's start -> a zero-length RUNTIME
``torch_to_npu`` holding the flow's id, a flow point of its own (the linker moves it to the start of the host span
it binds to), its end on a device stream -> a FLOW point (the linker binds it to the kernel there, which takes the
id: the kernel then joins that runtime call, and the operator around it); Enqueue /
Dequeue -> SPAN on ``host queue``; overlap analysis and any other process -> SPAN on their lanes. Links, syncs,
transfers, compiles and fallbacks are the linker's and the rule layer's (`assemble`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TraceFormatError
from ..events import NONE, EventColumns, EventKind, FlowBinding, FlowPhase, Translated, flow_point
from ..schema import EngineKind
from ..trace import Trace
from ._kineto_events import tensor_args
from .chrome_events import PHASES, ChromeEvents, convert
from .chrome_generic import base_info, epoch_iso, flow_points, lane_label, run_extent
from .source import DEFAULT_CAPS, SizeCaps

FORMAT = "ascend-trace"
LAUNCH_FLOW = "torch_to_npu"  # the RUNTIME event a launch flow's start becomes
_KEEP_ARGS = ("Input Dims", "Input type", "Input Strides", "Task Type", "kind")
_STREAM = re.compile(r"^\s*Stream\s*(\S+)")
_QUOTED_TS = re.compile(r'"ts":\s*"\d+\.\d')
_DEVICE = re.compile(r"(?:NPU|Ascend|device)\s*:?\s*(\d+)", re.IGNORECASE)
_ACL = "AscendCL@"
_ROLES = ("other", "python", "cann", "hardware", "overlap")
_DISPATCH, _OTHER = EngineKind.DISPATCH.value, EngineKind.OTHER.value


def sniff(text: str) -> bool:
    """True for a torch_npu trace view: a bare array naming Ascend processes, AscendCL calls or torch_to_npu flows,
    or host operators with quoted decimal timestamps (what torch_npu writes first; the PyTorch profiler never quotes them)."""
    if text.lstrip()[:1] != "[":
        return False
    if any(w in text for w in ('"Ascend Hardware"', '"AscendCL@', '"torch_to_npu"', '"async_npu"', '"Overlap Analysis"')):
        return True
    return ('"cpu_op"' in text or '"aten::' in text) and _QUOTED_TS.search(text) is not None


def _role(name: str) -> str:
    low = name.lower()
    if low.startswith("python") or low.startswith("pytorch"):
        return "python"
    if low.startswith("cann"):
        return "cann"
    if "ascend hardware" in low:
        return "hardware"
    if "overlap analysis" in low:
        return "overlap"
    return "other"


def read_ascend_trace(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, sliced: bool = False) -> Trace:
    """Convert a torch_npu ``trace_view.json`` into a Trace (host ops, CANN lane, NPU streams, signals).

    sliced: the big tables as `Trace.slices`, made as they are written (converting never holds them whole)."""
    # a bare array the recorder did not close (a killed process) reads to its last whole event, said so
    return convert(path, lambda p, ev: translate(p, ev)[0], caps=caps, sliced=sliced, keep_args=_KEEP_ARGS)


def _codes(vals: list[Any], codes: np.ndarray, value: Any = None) -> tuple[list[Any], np.ndarray]:
    """(values, int codes into them) of the value codes `codes`: only the values used, each `value(v)` if given."""
    used, inverse = np.unique(codes, return_inverse=True)
    return [value(vals[c]) if value else vals[c] for c in used.tolist()], inverse.astype(np.int64)


def translate(path: Path, ev: ChromeEvents) -> tuple[Translated, set[str]]:
    """The events of one collected trace view in the one event model, and the names of its kernel lanes."""
    n = len(ev)
    if not n:
        raise TraceFormatError(path, f"no spans among {ev.events} events: nothing to convert")
    vals, codes = ev.values.values, ev.values.codes
    col = {c: ev.read(c, 0, n) for c in ("start", "dur", "name", "cat", "pid", "tid", "args")}
    roles = {pid: _role(name) for pid, name in ev.process_names.items()}
    cpu_op = codes.get("cpu_op", -1)
    if "python" not in roles.values():  # no process_name metadata (a cut trace): the processes with cpu_op spans
        host = np.unique(col["pid"][col["cat"] == cpu_op]).tolist()
        roles.update({vals[c]: "python" for c in host if vals[c] not in roles})
    role = np.zeros(len(vals), dtype=np.int8)  # per value code (of a pid)
    for pid, r in roles.items():
        if pid in codes:
            role[codes[pid]] = _ROLES.index(r)
    text = [v if type(v) is str else "" for v in vals]
    aten = np.array([v.startswith("aten::") for v in text], dtype=bool)
    acl = np.array([v.startswith(_ACL) for v in text], dtype=bool)
    span_role = role[col["pid"]]
    python = span_role == _ROLES.index("python")
    step = python & np.array([v.startswith("ProfilerStep#") for v in text], dtype=bool)[col["name"]]  # a step range
    is_op = python & (aten[col["name"]] | (col["cat"] == cpu_op)) & ~step
    other = span_role == _ROLES.index("other")
    cann = (span_role == _ROLES.index("cann")) | (other & acl[col["name"]])  # unnamed processes: by the call's prefix
    hardware = span_role == _ROLES.index("hardware")
    t0, _ = run_extent(ev)
    start = col["start"] - t0
    out = EventColumns()
    python_pids = sorted((p for p, r in roles.items() if r == "python"), key=str)

    def add(kind: EventKind, rows: np.ndarray, **columns: Any) -> None:
        texts = {"name": _codes(vals, col["name"][rows]), **columns.pop("texts", {})}
        lanes = columns.pop("lanes", None) or {"pid": _codes(vals, col["pid"][rows]), "tid": _codes(vals, col["tid"][rows])}
        out.extend(kind, len(rows), start_ns=start[rows], dur_ns=col["dur"][rows], texts=texts, lanes=lanes, **columns)

    # host operators: their tensor arguments from their args
    ops = np.flatnonzero(is_op)
    args, sig = _codes([None, *vals], col["args"][ops] + 1)  # code 0: no args
    sigs = [tensor_args(a) if type(a) is dict else (None, None, None, 0) for a in args]
    add(EventKind.OP, ops, bytes_in=np.array([s[3] for s in sigs] or [0], dtype=np.int64)[sig],
        texts={"shapes": ([s[0] for s in sigs], sig), "strides": ([s[1] for s in sigs], sig), "dtypes": ([s[2] for s in sigs], sig)})
    # runtime calls: on the Python process (pid = host pid x 100 + 2) and the calling thread; drawn on the CANN lane
    calls = np.flatnonzero(cann & acl[col["name"]])
    kind_arg = [(a.get("kind") if type(a) is dict else None) for a in [None, *vals]]
    copy_kind = np.array([k if type(k) is int and 0 <= k <= 4 else NONE for k in kind_arg], dtype=np.int64)
    cann_pids = sorted({vals[c] for c in np.unique(col["pid"][cann]).tolist()}, key=str)

    def cann_lane(p: Any) -> str:
        return "CANN" if len(cann_pids) == 1 else f"CANN {p}"

    add(EventKind.RUNTIME, calls, copy_kind=copy_kind[col["args"][calls] + 1],
        texts={"name": _codes(vals, col["name"][calls], lambda v: v[len(_ACL):]),
               "lane": _codes(vals, col["pid"][calls], cann_lane),
               "engine_kind": ([_DISPATCH], np.zeros(len(calls), dtype=np.int64))},
        lanes={"pid": _codes(vals, col["pid"][calls], lambda p: _host_pid(p, python_pids)),
               "tid": _codes(vals, col["tid"][calls])})  # fmt: skip
    rows = np.flatnonzero(cann & ~acl[col["name"]])  # other CANN spans: drawn only
    add(EventKind.SPAN, rows, texts={
        "lane": _codes(vals, col["pid"][rows], cann_lane),
        "engine_kind": ([_DISPATCH], np.zeros(len(rows), dtype=np.int64))})  # fmt: skip
    add(EventKind.ANNOTATION, np.flatnonzero(step))  # ProfilerStep#N: a region, as in a PyTorch-profiler trace
    # task-queue spans (Enqueue, Dequeue@<op>) and any other span of the Python process
    rows = np.flatnonzero(python & ~is_op & ~step)
    add(EventKind.SPAN, rows, texts={"lane": (["host queue"], np.zeros(len(rows), dtype=np.int64)),
                                     "engine_kind": ([_DISPATCH], np.zeros(len(rows), dtype=np.int64))})  # fmt: skip
    # kernels: unit, stream, device, lane and the launch flow's correlation
    kernels = np.flatnonzero(hardware)
    hardware_pids = sorted((p for p, r in roles.items() if r == "hardware" and p in codes), key=str)
    device = {p: _device_id(ev, p, i) for i, p in enumerate(hardware_pids)}
    _launches(ev, out, t0, role == _ROLES.index("hardware"))
    task_type = [(a.get("Task Type") if type(a) is dict else None) for a in [None, *vals]]
    unit = _codes([t if type(t) is str else None for t in task_type], col["args"][kernels] + 1)
    lane_key = (col["pid"][kernels].astype(np.int64) << 32) | col["tid"][kernels]
    keys, lane_code = np.unique(lane_key, return_inverse=True)
    lanes = [_kernel_lane(ev, vals[k >> 32], vals[k & 0xFFFFFFFF], device, len(hardware_pids)) for k in keys.tolist()]
    add(EventKind.KERNEL, kernels,
        device=np.array([device.get(lane[0], 0) for lane in lanes] or [0], dtype=np.int64)[lane_code],
        stream=np.array([lane[1] for lane in lanes] or [0], dtype=np.int64)[lane_code],
        texts={"unit": unit, "lane": ([lane[2] for lane in lanes], lane_code.astype(np.int64))})
    # overlap analysis and other processes: spans on their lanes
    rows = np.flatnonzero(~python & ~cann & ~hardware)  # overlap analysis and the rest
    lane_key = (col["pid"][rows].astype(np.int64) << 32) | col["tid"][rows]
    keys, lane_code = np.unique(lane_key, return_inverse=True)
    named = [_other_lane(ev, roles, vals[k >> 32], vals[k & 0xFFFFFFFF]) for k in keys.tolist()]
    add(EventKind.SPAN, rows, texts={"lane": ([x[0] for x in named], lane_code.astype(np.int64)),
                                     "engine_kind": ([x[1] for x in named], lane_code.astype(np.int64))})  # fmt: skip

    names = {i: f"npu:{i}" for i in device.values()}
    shapes = any(type(vals[c]) is dict and "Input Dims" in vals[c] for c in np.unique(col["args"][ops]).tolist() if c >= 0)
    info = base_info(ev, FORMAT, _missing(len(ops), shapes), kernels=len(kernels), flows_by_name=_flows_by_name(ev))
    info.start_time = epoch_iso(t0)
    info.devices = ["cpu", *(names[i] for i in sorted(names))] if names else ["cpu", "npu:0"]
    root = names[min(names)] if names else "npu:0"
    return Translated(out, info, root_name=path.name, root_device=root, device_names=names), {x[2] for x in lanes}


def _host_pid(cann_pid: Any, python_pids: list[Any]) -> Any:
    """The Python process of a CANN process (torch_npu numbers it host pid x 100 + 2); the first one if none matches."""
    if type(cann_pid) is int and cann_pid // 100 in python_pids:
        return cann_pid // 100
    return python_pids[0] if python_pids else cann_pid


def _launches(ev: ChromeEvents, out: EventColumns, t0: int, device: np.ndarray) -> None:
    """The launch flows (``torch_to_npu``, cat ``async_npu``): each start a zero-length RUNTIME ``torch_to_npu`` at
    its time on its thread with its flow point (the launching call: the linker moves it to the start of the span the
    point binds to), each end on a thread of a device process (`device`: per value code of a pid) a FLOW point
    (`chrome_generic.flow_points`), both holding the flow's id (an id that is not an int64, or negative, moved to
    2^62..2^63)."""
    flows = ev.flows
    m = len(flows)
    if not m:
        return
    codes = ev.values.codes
    name, cat, phase, enclosing = (flows.read(c, 0, m) for c in ("name", "cat", "phase", "enclosing"))
    launch = (name == codes.get(LAUNCH_FLOW, -1)) | (cat == codes.get("async_npu", -1))
    if not launch.any():
        return
    starts = np.flatnonzero(launch & (phase == PHASES.index("s")))
    key = flows.read("key", 0, m)[starts]
    key = np.where(key < 0, key + 2**62 + 2**62, key)  # ids that are not int64 (a hash below 0): 2^62 up, as drawn before
    vals = ev.values.values
    pids, pid_code = _codes(vals, flows.read("pid", 0, m)[starts])
    tids, tid_code = _codes(vals, flows.read("tid", 0, m)[starts])
    out.extend(EventKind.RUNTIME, len(starts), start_ns=flows.read("ts", 0, m)[starts] - t0,
               dur_ns=np.zeros(len(starts), dtype=np.int64), correlation=key, flow=np.where(
                   enclosing[starts] != 0, flow_point(FlowPhase.START, FlowBinding.ENCLOSING),
                   flow_point(FlowPhase.START, FlowBinding.NEXT)),
               texts={"name": ([LAUNCH_FLOW], np.zeros(len(starts), dtype=np.int64))},
               lanes={"pid": (pids, pid_code), "tid": (tids, tid_code)})  # fmt: skip
    flow_points(out, ev, t0, keep=launch & (phase == PHASES.index("f")) & device[flows.read("pid", 0, m)])


def _kernel_lane(ev: ChromeEvents, pid: Any, tid: Any, device: dict[Any, int], processes: int) -> tuple[Any, int, str]:
    """(pid, stream number or NONE, lane name) of a kernel thread: ``NPU Stream 3`` (``NPU 1 Stream 3`` with several
    devices)."""
    thread = ev.thread_names.get((pid, tid), "")
    m = _STREAM.match(thread)
    label = f"Stream {m.group(1)}" if m else (thread or f"tid {tid}")
    stream = int(m.group(1)) if m and m.group(1).isdigit() else NONE
    prefix = "NPU" if processes == 1 else f"NPU {device.get(pid, 0)}"
    return pid, stream, f"{prefix} {label}"


def _other_lane(ev: ChromeEvents, roles: dict[Any, str], pid: Any, tid: Any) -> tuple[str, str]:
    """(lane, engine kind) of a span of neither the host, CANN nor the device."""
    if roles.get(pid) == "overlap":
        return f"overlap {ev.thread_names.get((pid, tid)) or tid}", _OTHER
    return lane_label(ev, pid, tid), _OTHER


def _device_id(ev: ChromeEvents, pid: Any, n: int) -> int:
    for text in (ev.process_names.get(pid, ""), *(v for (p, _), v in ev.thread_names.items() if p == pid)):
        m = _DEVICE.search(text)
        if m:
            return int(m.group(1))
    return n


def _flows_by_name(ev: ChromeEvents) -> dict[str, int]:
    """How many flows start with each name."""
    m = len(ev.flows)
    names = ev.flows.read("name", 0, m)[ev.flows.read("phase", 0, m) == PHASES.index("s")]
    found, counts = np.unique(names, return_counts=True)
    out: dict[str, int] = {}
    for c, k in zip(found.tolist(), counts.tolist(), strict=True):
        out[str(ev.values.values[c])] = out.get(str(ev.values.values[c]), 0) + k
    return out


def _missing(ops: int, shapes: bool) -> list[str]:
    missing = ["host_bounce/* (the trace view names no tensor devices)",
               "transfer bytes and directions (aclrtMemcpy* calls carry no size or kind in the trace view)",
               "dispatch/cpu_fallback on the host (torch_npu does not mark host fallbacks; AI CPU kernels are "
               "counted as device-side fallbacks, reason ai-cpu)"]  # fmt: skip
    if not ops:
        missing.append("operators (no cpu_op spans on a Python process)")
    elif not shapes:
        missing.append("shapes and dtypes (recorded without record_shapes=True)")
    return missing


__all__ = ["FORMAT", "read_ascend_trace", "sniff", "translate"]
