"""torch_npu (Ascend) profiler ``ASCEND_PROFILER_OUTPUT/trace_view.json`` -> Trace.

What torch_npu writes (its profiler's trace view): a bare JSON array of Chrome
events; ``ts`` is a quoted decimal of microseconds with a nanosecond fraction
(``"1704161511420306.491"``, kept exact), ``dur`` a number; flow ids are integers
beyond 2^53 or strings. Processes (``process_name`` metadata):

* ``Python`` — host operators (cat ``cpu_op``, ``aten::*``, args ``Input Dims``/``Input type``
  when shapes were recorded), task-queue spans ``Enqueue`` / ``Dequeue@<op>``;
* ``CANN`` (pid = host pid x 100 + 2) — ``AscendCL@...`` runtime calls: ``aclrtSynchronize*``
  are the host waiting for the device (sync), ``AscendCL@opCompile`` and
  ``AscendCL@aclopCompileAndExecute`` compile an operator online (dispatch/recompile);
* ``Ascend Hardware`` — threads ``Stream N``, one span per kernel (``aclnnMm_MatMulCommon_MatMulV2``),
  args ``Task Type`` (``AI_CORE``, ``AI_VECTOR_CORE``, ``MIX_AIC``, ``AI_CPU``...), ``Stream Id``,
  ``Task Id``. ``AI_CPU`` kernels ran on the device's AI CPU, not its AI Cores: a device-side
  fallback, counted as ``dispatch/cpu_fallback`` with reason ``ai-cpu`` (not a host fallback);
* ``Overlap Analysis`` — threads Computing / Communication / Communication(Not Overlapped) / Free.

Flows (``s``/``f``): cat ``async_npu`` name ``torch_to_npu`` (host operator -> kernel: the kernel's
``op_id``, and the operator is placed on the device), ``HostToDevice`` (CANN call -> kernel),
``async_task_queue`` (``enqueue_to_dequeue``) and ``fwdbwd`` (counted only). Lanes: ``host``
(top-level operators of the main thread), ``host thread N``, ``host queue`` (Enqueue/Dequeue),
``CANN``, ``NPU <stream>`` (kernels), ``overlap <thread>``; any other process as generic lanes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..builder import TraceBuilder
from ..catalog import (
    ONLINE_COMPILE_CALLS,
    SYNC_OPS,
    SYNC_RUNTIME_CALLS,
    Cause,
    OpCall,
    cause_hint,
    sync_cause,
)
from ..errors import TraceFormatError
from ..schema import CompileKind, EngineKind, Mode, Placement, SignalKind, SliceKind
from ..trace import TableSlices, Trace
from . import _chrome_events, _chrome_slices
from ._chrome_bind import Scatter, bind_flows, bind_points
from ._chrome_events import PHASES, ChromeEvents, blocks, collect
from ._chrome_slices import SliceRows, finish
from ._kineto_events import _tensor_args
from ._kineto_link import _coded, _Coder, _table
from ._source import DEFAULT_CAPS, SizeCaps
from ._spill import DiskColumn
from .chrome_generic import (
    Lane,
    base_info,
    epoch_iso,
    flow_links,
    lane_label,
    run_extent,
    sorted_lanes,
)

FORMAT = "ascend-trace"
AI_CPU = "AI_CPU"
AI_CPU_NOTE = "the device ran this kernel on its AI CPU (no AI Core kernel for its dtype or shape): try another dtype or shape"
_KEEP_ARGS = ("Input Dims", "Input type", "Input Strides", "Task Type")
_STREAM = re.compile(r"^\s*Stream\s*(\S+)")
_QUOTED_TS = re.compile(r'"ts":\s*"\d+\.\d')
_ROLES = ("other", "python", "cann", "hardware", "overlap")
_DEVICE = re.compile(r"(?:NPU|Ascend|device)\s*:?\s*(\d+)", re.IGNORECASE)


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

    sliced: give the ops and engine slices as slices, made as they are written (`Trace.slices`)."""
    path = Path(path)
    ev = collect(path, caps=caps, keep_args=_KEEP_ARGS)
    roles = {pid: _role(name) for pid, name in ev.process_names.items()}
    if not len(ev):
        raise TraceFormatError(path, f"no spans among {ev.events} events: nothing to convert")
    vals, codes = ev.values.values, ev.values.codes
    cpu_op = codes.get("cpu_op", -1)
    if "python" not in roles.values():  # no process_name metadata (a cut trace): the processes with cpu_op spans are the host
        host: set[int] = set()
        for lo, hi in blocks(len(ev)):
            host.update(np.unique(ev.read("pid", lo, hi)[ev.read("cat", lo, hi) == cpu_op]).tolist())
        roles.update({vals[c]: "python" for c in sorted(host) if vals[c] not in roles})
    # per interned value, then per span by indexing, a block of spans at a time: no Python object per span
    role_of = np.zeros(len(vals), dtype=np.int8)
    for pid, r in roles.items():
        if pid in codes:
            role_of[codes[pid]] = _ROLES.index(r)
    text = [v if type(v) is str else "" for v in vals]
    aten = np.array([v.startswith("aten::") for v in text], dtype=bool)
    call = [v.split("@", 1)[-1] if v.startswith("AscendCL@") else "" for v in text]
    sync_call = np.array([c in SYNC_RUNTIME_CALLS for c in call], dtype=bool)
    compile_call = np.array([c in ONLINE_COMPILE_CALLS for c in call], dtype=bool)
    ai_cpu_args = np.array([False, *(type(v) is dict and v.get("Task Type") == AI_CPU for v in vals)], dtype=bool)
    del text, call
    spans = _Spans.split(ev, role_of, aten, cpu_op, sync_call, compile_call, ai_cpu_args)
    ops = spans.ops
    t0, end = run_extent(ev)
    hardware_pids = sorted((p for p, r in roles.items() if r == "hardware" and p in codes), key=str)
    device = {pid: f"npu:{_device_id(ev, pid, n)}" for n, pid in enumerate(hardware_pids)}
    root_device = next(iter(device.values()), "npu:0")

    # operators: nesting per thread, which launched kernels (torch_to_npu flows), signals
    parent = _parents(ev, ops)
    bound = bind_flows(ev)  # every flow endpoint's span, once: the launches below and the lanes' correlations
    kernel_op, launcher, flow_starts = _launches(ev, bound, spans.op_of_span)
    launched = np.zeros(len(ops), dtype=bool)
    for o in np.unique(launcher[launcher >= 0]).tolist():
        while o >= 0 and not launched[o]:
            launched[o] = True
            o = int(parent[o])
    del launcher
    info = base_info(ev, FORMAT, _missing(ev, ops))
    info.start_time = epoch_iso(t0)
    info.devices = ["cpu", *sorted(set(device.values()))] if device else ["cpu", "npu:0"]
    b = TraceBuilder(info)
    rid = b.add_region(path.name.split(".")[0], dur_ns=end - t0, mode=Mode.UNKNOWN, device=root_device)
    ops_rows = _op_slices(ev, ops, launched, t0, rid, root_device)

    # lanes
    main_tid = vals[spans.main_tid] if spans.main_tid >= 0 else None

    def lane_of(pid: Any, tid: Any) -> Lane:
        role = roles.get(pid, "other")
        thread = ev.thread_names.get((pid, tid), "")
        if role == "python":
            return Lane("host" if tid == main_tid else f"host thread {tid}", EngineKind.HOST, SliceKind.COMPUTE)
        if role == "cann":
            return Lane("CANN" if list(roles.values()).count("cann") == 1 else f"CANN {pid}", EngineKind.DISPATCH, SliceKind.DISPATCH)
        if role == "hardware":
            m = _STREAM.match(thread)
            label = f"Stream {m.group(1)}" if m else (thread or f"tid {tid}")
            prefix = "NPU" if len(hardware_pids) == 1 else device[pid].upper().replace(":", " ")
            return Lane(f"{prefix} {label}", EngineKind.STREAM, SliceKind.COMPUTE)
        if role == "overlap":
            return Lane(f"overlap {thread or tid}", EngineKind.OTHER, SliceKind.ANNOTATION)
        return Lane(lane_label(ev, pid, tid))

    lanes = sorted_lanes(ev, lane_of)
    top = DiskColumn("q", _chrome_events.HOLD_ROWS)  # the operators no other encloses
    for lo, hi in blocks(len(ops)):
        top.extend(ops.read(lo, hi)[parent[lo:hi] < 0])
    lanes_queue = {k: Lane("host queue", EngineKind.DISPATCH, SliceKind.DISPATCH) for k, v in lanes.items()
                   if v.engine_kind is EngineKind.HOST}  # fmt: skip
    syncs, compiles, ai_cpu = spans.syncs, spans.compiles, spans.ai_cpu
    kinds = {**dict.fromkeys(syncs.tolist(), SliceKind.SYNC), **dict.fromkeys(compiles.tolist(), SliceKind.COMPILE),
             **dict.fromkeys(ai_cpu.tolist(), SliceKind.FALLBACK)}  # fmt: skip
    python_pids = [p for p, r in roles.items() if r == "python"]
    _signals(b, ev, rid, t0, ops, parent, kernel_op, spans.op_of_span, np.sort(np.concatenate([syncs, compiles])),
             ai_cpu.tolist(), python_pids)  # fmt: skip
    rows = SliceRows(ev, rid, t0)
    rows.add(lanes, top, op_ids=spans.op_of_span)
    del top, parent
    rows.add(lanes_queue, spans.queue)  # Enqueue / Dequeue: Python spans, not operators
    rows.add(lanes, spans.device, correlation=flow_links(ev, bound), kinds=kinds, op_ids=kernel_op)  # fmt: skip
    bound.close()
    linked = sum(int(np.count_nonzero(block >= 0)) for _, block in kernel_op.blocks())
    names = sorted(flow_starts)
    b.run_info.extra.update({
        "kernels": spans.kernels, "ai_cpu_kernels": len(ai_cpu),
        "kernels_linked_to_operators": linked,
        "flows_by_name": _count([vals[c] for c in names], [flow_starts[c] for c in names]),
    })  # fmt: skip
    return finish(b.build(), {"ops": ops_rows, "engine_slices": rows.slices()}, sliced=sliced)


class _Spans:
    """The spans split by what they are, in one pass a block at a time: operators (span numbers, on disk), each
    span's operator number (-1: none, on disk), queue spans and device-side spans (span numbers, on disk),
    the few syncs, online compiles and AI CPU kernels (in memory), the kernel count and the host's main thread."""

    def __init__(self) -> None:
        hold = _chrome_events.HOLD_ROWS
        self.ops, self.queue, self.device = DiskColumn("q", hold), DiskColumn("q", hold), DiskColumn("q", hold)
        self.op_of_span = DiskColumn("i", hold)
        self.syncs = self.compiles = self.ai_cpu = np.zeros(0, dtype=np.int64)
        self.kernels, self.main_tid = 0, -1

    @classmethod
    def split(cls, ev: ChromeEvents, role_of: np.ndarray, aten: np.ndarray, cpu_op: int, sync_call: np.ndarray,
              compile_call: np.ndarray, ai_cpu_args: np.ndarray) -> _Spans:  # fmt: skip
        out = cls()
        syncs, compiles, ai_cpu = [], [], []
        op_tids: dict[int, int] = {}
        for lo, hi in blocks(len(ev)):
            name, role = ev.read("name", lo, hi), role_of[ev.read("pid", lo, hi)]
            number = np.arange(lo, hi, dtype=np.int64)
            python = role == _ROLES.index("python")
            is_op = python & (aten[name] | (ev.read("cat", lo, hi) == cpu_op))
            first = len(out.ops)
            out.ops.extend(number[is_op])
            op_id = np.full(hi - lo, -1, dtype=np.int32)
            op_id[is_op] = np.arange(first, len(out.ops), dtype=np.int32)
            out.op_of_span.extend(op_id)
            out.queue.extend(number[python & ~is_op])
            out.device.extend(number[~python])
            cann = role == _ROLES.index("cann")
            syncs.append(number[cann & sync_call[name]])
            compiles.append(number[cann & compile_call[name]])
            hardware = role == _ROLES.index("hardware")
            ai_cpu.append(number[hardware & ai_cpu_args[ev.read("args", lo, hi) + 1]])
            out.kernels += int(np.count_nonzero(hardware))
            tids, counts = np.unique(ev.read("tid", lo, hi)[is_op], return_counts=True)
            for t, c in zip(tids.tolist(), counts.tolist(), strict=True):
                op_tids[t] = op_tids.get(t, 0) + c
        out.syncs, out.compiles, out.ai_cpu = (np.concatenate(x) if x else np.zeros(0, dtype=np.int64) for x in (syncs, compiles, ai_cpu))
        if op_tids:  # the thread with the most operators (the lowest code of those tied)
            out.main_tid = max(sorted(op_tids), key=lambda t: op_tids[t])
        return out


def _launches(ev: ChromeEvents, bound: DiskColumn, op_of_span: DiskColumn) -> tuple[DiskColumn, np.ndarray, dict[int, int]]:
    """(per span: the operator that launched it through a torch_to_npu flow, or -1 (on disk); the launching
    operators; per flow name code: how many flows start with it)."""
    codes, flows = ev.values.codes, ev.flows
    to_npu, async_npu = codes.get("torch_to_npu", -1), codes.get("async_npu", -1)
    s_key, s_span, f_key, f_span = [], [], [], []
    flow_starts: dict[int, int] = {}
    for lo, hi in blocks(len(flows)):
        name, phase, span = flows.read("name", lo, hi), flows.read("phase", lo, hi), bound.read(lo, hi)
        names, counts = np.unique(name[phase == PHASES.index("s")], return_counts=True)
        for c, k in zip(names.tolist(), counts.tolist(), strict=True):
            flow_starts[c] = flow_starts.get(c, 0) + k
        launch = ((name == to_npu) | (flows.read("cat", lo, hi) == async_npu)) & (span >= 0)
        key = flows.read("key", lo, hi)
        starts, ends = launch & (phase != PHASES.index("f")), launch & (phase == PHASES.index("f"))
        s_key.append(key[starts])
        s_span.append(span[starts])
        f_key.append(key[ends])
        f_span.append(span[ends])
    s_key_a, s_span_a, f_key_a, f_span_a = (np.concatenate(x) if x else np.zeros(0, dtype=np.int64) for x in (s_key, s_span, f_key, f_span))
    del s_key, s_span, f_key, f_span
    order = np.argsort(s_key_a, kind="stable")
    s_key_a, s_span_a = s_key_a[order], s_span_a[order]
    del order
    at = np.minimum(np.searchsorted(s_key_a, f_key_a), max(len(s_key_a) - 1, 0))
    paired = (s_key_a[at] == f_key_a) if len(s_key_a) else np.zeros(len(f_key_a), dtype=bool)
    launcher = op_of_span.take(s_span_a[at[paired]]).astype(np.int64) if len(s_key_a) else np.zeros(0, dtype=np.int64)
    kernel_op = Scatter(len(ev), "i", ordered=True)  # a kernel two flows end at: the later one's operator
    kernel_op.put(f_span_a[paired], launcher, np.flatnonzero(paired))
    return kernel_op.column(), launcher, flow_starts


def _device_id(ev: ChromeEvents, pid: Any, n: int) -> int:
    for text in (ev.process_names.get(pid, ""), *(v for (p, _), v in ev.thread_names.items() if p == pid)):
        m = _DEVICE.search(text)
        if m:
            return int(m.group(1))
    return n


def _parents(ev: ChromeEvents, ops: DiskColumn) -> np.ndarray:
    """Per operator (index into ops): the operator that encloses it on its thread, or -1."""
    parent = np.full(len(ops), -1, dtype=np.int64)
    if not len(ops):
        return parent
    index = ops.read(0, len(ops))  # in memory: ~40 bytes an operator while sorting
    start = ev.gather("start", index)
    end = start + ev.gather("dur", index)
    thread = (ev.gather("pid", index).astype(np.int64) << 32) | ev.gather("tid", index)
    del index
    order = np.lexsort((-(end - start), start, thread))
    open_: list[tuple[int, int]] = []
    last_thread = None
    for k in order.tolist():
        if thread[k] != last_thread:
            open_.clear()
            last_thread = thread[k]
        while open_ and open_[-1][0] <= start[k]:
            open_.pop()
        if open_:
            parent[k] = open_[-1][1]
        open_.append((int(end[k]), k))
    return parent


def _op_slices(ev: ChromeEvents, ops: DiskColumn, launched: np.ndarray, t0: int, rid: int, device: str) -> TableSlices:
    """The operators as a table made slice by slice: names, shapes and dtypes dictionary-encoded per distinct value."""
    vals = ev.values.values
    n = len(ops)
    name_used = np.zeros(len(vals), dtype=bool)
    args_used = np.zeros(len(vals) + 1, dtype=bool)  # by code + 1 (-1: no args)
    tid_used = np.zeros(len(vals), dtype=bool)
    rows = _chrome_slices.SLICE_ROWS
    for lo in range(0, n, rows):
        part = ops.read(lo, lo + rows)
        name_used[ev.gather("name", part)] = True
        args_used[ev.gather("args", part) + 1] = True
        tid_used[ev.gather("tid", part)] = True
    sigs = {c: _tensor_args(vals[c - 1]) if c > 0 else (None, None, None, 0) for c in np.flatnonzero(args_used).tolist()}
    signature = [_Coder([sigs[c][k] if c in sigs else None for c in range(len(vals) + 1)], args_used) for k in range(3)]
    bytes_in = np.zeros(len(vals) + 1, dtype=np.int64)
    bytes_in[list(sigs)] = [sig[3] for sig in sigs.values()]
    name = _Coder([v if name_used[c] else None for c, v in enumerate(vals)], name_used)
    thread = [vals[c] if tid_used[c] and type(vals[c]) is int and -(2**31) <= vals[c] < 2**31 else None for c in range(len(vals))]
    placement = _Coder([Placement.HOST.value, Placement.DEVICE.value], np.ones(2, dtype=bool))
    on = _Coder(["cpu", device], np.ones(2, dtype=bool))

    def batches() -> Iterator[pa.RecordBatch]:
        for lo in range(0, n, rows):
            part = ops.read(lo, lo + rows)
            args = ev.gather("args", part) + 1
            where = launched[lo : lo + rows].astype(np.int32)
            table = _table("ops", {
                "op_id": np.arange(lo, lo + len(part), dtype=np.int64), "region_id": np.full(len(part), rid, dtype=np.int32),
                "name": name(ev.gather("name", part)), "start_ns": ev.gather("start", part) - t0, "dur_ns": ev.gather("dur", part),
                "placement": placement(where), "device": on(where), "input_shapes": signature[0](args),
                "input_strides": signature[1](args), "input_dtypes": signature[2](args), "bytes_in": bytes_in[args],
                "bytes_out": np.zeros(len(part), dtype=np.int64),
                "thread": _coded(thread, ev.gather("tid", part), dictionary=False)})  # fmt: skip
            yield from table.to_batches()

    return TableSlices(n, batches)


def _signals(b: TraceBuilder, ev: ChromeEvents, rid: int, t0: int, ops: DiskColumn, parent: np.ndarray,
             kernel_op: DiskColumn, op_of_span: DiskColumn, calls: np.ndarray, ai_cpu: list[int],
             python_pids: list[Any]) -> None:  # fmt: skip
    """Syncs (operators and aclrtSynchronize* calls), online compiles (calls) and AI CPU kernels."""
    vals = ev.values.values
    op_name_codes = np.concatenate([ev.gather("name", ops.read(lo, hi)) for lo, hi in blocks(len(ops))] or
                                   [np.zeros(0, dtype=np.int32)])  # one int32 an operator, no string list  # fmt: skip
    sync_value = np.array([type(v) is str and v in SYNC_OPS for v in vals] or [False], dtype=bool)

    def op_names(o: int) -> str:
        return vals[op_name_codes[o]]

    def inside(o: int, test: Any) -> bool:
        while o >= 0:
            if test(op_names(o)):
                return True
            o = int(parent[o])
        return False

    def is_sync(name: str) -> bool:
        return name in SYNC_OPS

    waits = np.flatnonzero(sync_value[op_name_codes])  # the operators that wait: few
    wait_start = ev.gather("start", ops.take(waits)).tolist()
    for o, start in zip(waits.tolist(), wait_start, strict=True):
        rule = sync_cause(OpCall(op_names(o)))
        if rule is not None and not inside(int(parent[o]), is_sync):
            b.signals.append(region_id=rid, op_id=o, kind=SignalKind.SYNC, reason=rule.cause.value, op_name=op_names(o),
                             count=1, bytes=0, note=rule.hint, time_ns=start - t0)  # fmt: skip
    spans = calls.tolist()
    names, starts, durs = (ev.gather(c, calls).tolist() for c in ("name", "start", "dur"))
    for n, o in enumerate(_enclosing_ops(ev, spans, op_of_span, python_pids)):
        call = vals[names[n]].split("@", 1)[-1]
        when = starts[n] - t0
        op_name = op_names(o) if o >= 0 else None
        if call in SYNC_RUNTIME_CALLS and not (o >= 0 and inside(o, is_sync)):
            b.signals.append(region_id=rid, op_id=o if o >= 0 else None, kind=SignalKind.SYNC,
                             reason=Cause.SYNC_CALL.value, op_name=op_name or call, count=1, bytes=0,
                             note=f"{call}: " + cause_hint(Cause.SYNC_CALL), time_ns=when)  # fmt: skip
        elif call in ONLINE_COMPILE_CALLS:
            b.signals.append(region_id=rid, op_id=o if o >= 0 else None, kind=SignalKind.RECOMPILE, reason=f"online-{call}",
                             op_name=op_name or call, count=1, bytes=0, time_ns=when,
                             note="an operator compiled online (no pre-built binary for its shapes): try static "
                                  "shapes or binary kernels (torch_npu.npu.set_compile_mode(jit_compile=False))")  # fmt: skip
            b.compiles.append(region_id=rid, kind=CompileKind.PROGRAM, key=op_name or call, compile_ns=durs[n],
                              reason=call, time_ns=when)  # fmt: skip
    at = np.asarray(ai_cpu, dtype=np.int64)
    for o, name, start in zip(*(c.tolist() for c in (kernel_op.take(at), ev.gather("name", at), ev.gather("start", at))), strict=True):
        b.signals.append(region_id=rid, op_id=o if o >= 0 else None, kind=SignalKind.CPU_FALLBACK, reason="ai-cpu",
                         op_name=op_names(o) if o >= 0 else vals[name], count=1, bytes=0,
                         time_ns=start - t0, note=AI_CPU_NOTE)  # fmt: skip


def _enclosing_ops(ev: ChromeEvents, spans: list[int], op_of_span: DiskColumn, python_pids: list[Any]) -> list[int]:
    """Per span (a CANN call): the innermost host operator open at its start on a Python thread with the same tid."""
    found = [-1] * len(spans)
    codes = ev.values.codes
    at = np.asarray(spans, dtype=np.int64)
    for pid in python_pids:  # the host process: the same thread id as the CANN call
        if pid not in codes or not len(at):
            continue
        bound = bind_points(ev, np.full(len(at), codes[pid], dtype=np.int64), ev.gather("tid", at),
                            ev.gather("start", at), np.ones(len(at), dtype=np.int8), strict=True)  # fmt: skip
        op = op_of_span.take(np.maximum(bound, 0)).tolist()
        for n, span in enumerate(bound.tolist()):
            if span >= 0 and found[n] < 0 and op[n] >= 0:
                found[n] = int(op[n])
    return found


def _missing(ev: ChromeEvents, ops: DiskColumn) -> list[str]:
    missing = ["host_bounce/* and transfers (the trace view names no tensor devices or copy sizes)",
               "dispatch/cpu_fallback on the host (torch_npu does not mark host fallbacks; AI CPU kernels are "
               "counted as device-side fallbacks, reason ai-cpu)"]  # fmt: skip
    if not len(ops):
        missing.append("operators (no cpu_op spans on a Python process)")
    elif not any(ev.args[i] >= 0 and "Input Dims" in ev.args_of(i) for i in ops.read(0, 1000).tolist()):
        missing.append("shapes and dtypes (recorded without record_shapes=True)")
    return missing


def _count(items: Any, counts: list[int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x, n in zip(items, counts, strict=True):
        out[str(x)] = out.get(str(x), 0) + n
    return out


__all__ = ["AI_CPU", "FORMAT", "read_ascend_trace", "sniff"]
