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
from ..catalog import SYNC_OPS, Cause, OpCall, cause_hint, sync_cause
from ..columns import Coder, coded_column, table_of
from ..errors import TraceFormatError
from ..kineto_vocabulary import ONLINE_COMPILE_CALLS, SYNC_RUNTIME_CALLS
from ..schema import CompileKind, EngineKind, Mode, Placement, SignalKind, SliceKind
from ..trace import TableSlices, Trace
from . import _chrome_events, _chrome_slices
from ._ascend_ops import ROLES, Spans, launches, nest
from ._chrome_bind import bind_flows, bind_points
from ._chrome_events import ChromeEvents, blocks, collect
from ._chrome_slices import SliceRows, finish
from ._disk_rows import DiskRows
from ._kineto_events import _tensor_args
from ._source import DEFAULT_CAPS, SizeCaps
from ._spill import DiskColumn, release_memory
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
COMPILE_NOTE = ("an operator compiled online (no pre-built binary for its shapes): try static shapes or binary kernels "
                "(torch_npu.npu.set_compile_mode(jit_compile=False))")
_KEEP_ARGS = ("Input Dims", "Input type", "Input Strides", "Task Type")
_STREAM = re.compile(r"^\s*Stream\s*(\S+)")
_QUOTED_TS = re.compile(r'"ts":\s*"\d+\.\d')
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

    sliced: give the ops, engine slices, signals and compiles as slices, made as they are written (`Trace.slices`)."""
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
            role_of[codes[pid]] = ROLES.index(r)
    text = [v if type(v) is str else "" for v in vals]
    aten = np.array([v.startswith("aten::") for v in text], dtype=bool)
    call = [v.split("@", 1)[-1] if v.startswith("AscendCL@") else "" for v in text]
    sync_call = np.array([c in SYNC_RUNTIME_CALLS for c in call], dtype=bool)
    compile_call = np.array([c in ONLINE_COMPILE_CALLS for c in call], dtype=bool)
    ai_cpu_args = np.array([False, *(type(v) is dict and v.get("Task Type") == AI_CPU for v in vals)], dtype=bool)
    del text, call
    spans = Spans.split(ev, role_of, aten, cpu_op, sync_call, compile_call, ai_cpu_args)
    ops = spans.ops
    t0, end = run_extent(ev)
    hardware_pids = sorted((p for p, r in roles.items() if r == "hardware" and p in codes), key=str)
    device = {pid: f"npu:{_device_id(ev, pid, n)}" for n, pid in enumerate(hardware_pids)}
    root_device = next(iter(device.values()), "npu:0")

    # operators: nesting per thread, which launched kernels (torch_to_npu flows), signals
    bound = bind_flows(ev)  # every flow endpoint's span, once: the launches below and the lanes' correlations
    kernel_op, launcher, flow_starts = launches(ev, bound, spans.op_of_span, len(ops))
    parent, launched = nest(ev, ops, launcher)
    launcher.close()
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
        top.extend(ops.read(lo, hi)[parent.read(lo, hi) < 0])
    lanes_queue = {k: Lane("host queue", EngineKind.DISPATCH, SliceKind.DISPATCH) for k, v in lanes.items()
                   if v.engine_kind is EngineKind.HOST}  # fmt: skip
    python_pids = [p for p, r in roles.items() if r == "python"]
    signals, compiles = _signals(ev, rid, t0, ops, parent, kernel_op, spans, python_pids)
    rows = SliceRows(ev, rid, t0)
    rows.add(lanes, top, op_ids=spans.op_of_span)
    del top, parent
    rows.add(lanes_queue, spans.queue)  # Enqueue / Dequeue: Python spans, not operators
    rows.add(lanes, spans.device, correlation=flow_links(ev, bound), kinds=spans.kinds, op_ids=kernel_op)  # fmt: skip
    bound.close()
    linked = sum(int(np.count_nonzero(block >= 0)) for _, block in kernel_op.blocks())
    names = sorted(flow_starts)
    b.run_info.extra.update({
        "kernels": spans.kernels, "ai_cpu_kernels": len(spans.ai_cpu),
        "kernels_linked_to_operators": linked,
        "flows_by_name": _count([vals[c] for c in names], [flow_starts[c] for c in names]),
    })  # fmt: skip
    spans.calls.close()
    spans.ai_cpu.close()
    tables = {"ops": ops_rows, "engine_slices": rows.slices()}
    tables.update({name: table.slices() for name, table in (("signals", signals), ("compiles", compiles)) if len(table)})
    return finish(b.build(), tables, sliced=sliced)


def _device_id(ev: ChromeEvents, pid: Any, n: int) -> int:
    for text in (ev.process_names.get(pid, ""), *(v for (p, _), v in ev.thread_names.items() if p == pid)):
        m = _DEVICE.search(text)
        if m:
            return int(m.group(1))
    return n


def _op_slices(ev: ChromeEvents, ops: DiskColumn, launched: DiskColumn, t0: int, rid: int, device: str) -> TableSlices:
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
    signature = [Coder([sigs[c][k] if c in sigs else None for c in range(len(vals) + 1)], args_used) for k in range(3)]
    bytes_in = np.zeros(len(vals) + 1, dtype=np.int64)
    bytes_in[list(sigs)] = [sig[3] for sig in sigs.values()]
    name = Coder([v if name_used[c] else None for c, v in enumerate(vals)], name_used)
    thread = [vals[c] if tid_used[c] and type(vals[c]) is int and -(2**31) <= vals[c] < 2**31 else None for c in range(len(vals))]
    placement = Coder([Placement.HOST.value, Placement.DEVICE.value], np.ones(2, dtype=bool))
    on = Coder(["cpu", device], np.ones(2, dtype=bool))

    def batches() -> Iterator[pa.RecordBatch]:
        for lo in range(0, n, rows):
            release_memory()  # the previous slice's arrays are written and dropped: their pages go back
            part = ops.read(lo, lo + rows)
            args = ev.gather("args", part) + 1
            where = launched.read(lo, lo + rows).astype(np.int32)
            table = table_of("ops", {
                "op_id": np.arange(lo, lo + len(part), dtype=np.int64), "region_id": np.full(len(part), rid, dtype=np.int32),
                "name": name(ev.gather("name", part)), "start_ns": ev.gather("start", part) - t0, "dur_ns": ev.gather("dur", part),
                "placement": placement(where), "device": on(where), "input_shapes": signature[0](args),
                "input_strides": signature[1](args), "input_dtypes": signature[2](args), "bytes_in": bytes_in[args],
                "bytes_out": np.zeros(len(part), dtype=np.int64),
                "thread": coded_column(thread, ev.gather("tid", part), dictionary=False)})  # fmt: skip
            yield from table.to_batches()

    return TableSlices(n, batches)


def _signals(ev: ChromeEvents, rid: int, t0: int, ops: DiskColumn, parent: DiskColumn, kernel_op: DiskColumn,
             spans: Spans, python_pids: list[Any]) -> tuple[DiskRows, DiskRows]:  # fmt: skip
    """The signals (syncs: operators and aclrtSynchronize* calls; online compiles: calls; AI CPU kernels) and the
    compiles, on disk, found a block of operators, calls or kernels at a time."""
    vals = ev.values.values
    sync_value = np.array([type(v) is str and v in SYNC_OPS for v in vals] or [False], dtype=bool)
    signals = DiskRows("signals", numbers={"op_id": "q", "time_ns": "q"}, texts=("kind", "reason", "op_name", "note"),
                       optional=("op_id",), fixed={"region_id": rid, "count": 1, "bytes": 0})  # fmt: skip
    compiles = DiskRows("compiles", numbers={"compile_ns": "q", "time_ns": "q"}, texts=("key", "reason"),
                        fixed={"region_id": rid, "kind": CompileKind.PROGRAM})  # fmt: skip

    def op_names(o: int) -> str:
        return vals[ev.name[ops[o]]]

    def inside(o: int, test: Any) -> bool:
        while o >= 0:
            if test(op_names(o)):
                return True
            o = int(parent[o])
        return False

    def is_sync(name: str) -> bool:
        return name in SYNC_OPS

    for lo, hi in blocks(len(ops), _chrome_slices.SLICE_ROWS):  # operators that wait: few
        waits = lo + np.flatnonzero(sync_value[ev.gather("name", ops.read(lo, hi))])
        found: list[tuple[int, str, str, str, int]] = []
        for o, start in zip(waits.tolist(), ev.gather("start", ops.take(waits)).tolist(), strict=True):
            rule = sync_cause(OpCall(op_names(o)))
            if rule is not None and not inside(int(parent[o]), is_sync):
                found.append((o, rule.cause.value, op_names(o), rule.hint, start - t0))
        signals.add(len(found), kind=SignalKind.SYNC, op_id=[f[0] for f in found], reason=[f[1] for f in found],
                    op_name=[f[2] for f in found], note=[f[3] for f in found], time_ns=[f[4] for f in found])  # fmt: skip
    for _, calls in spans.calls.blocks(_chrome_slices.SLICE_ROWS):
        names, starts, durs = (ev.gather(c, calls).tolist() for c in ("name", "start", "dur"))
        syncs: list[tuple[int, str, str, int]] = []
        compiled: list[tuple[int, str, str, int, int]] = []
        for n, o in enumerate(_enclosing_ops(ev, calls.tolist(), spans.op_of_span, python_pids)):
            call = vals[names[n]].split("@", 1)[-1]
            op_name = op_names(o) if o >= 0 else None
            if call in SYNC_RUNTIME_CALLS and not (o >= 0 and inside(o, is_sync)):
                syncs.append((n, call, op_name or call, o))
            elif call in ONLINE_COMPILE_CALLS:
                compiled.append((n, call, op_name or call, o, durs[n]))
        # the calls' signals in span order, syncs and compiles interleaved
        both = sorted([(s[0], s[1], s[2], s[3], SignalKind.SYNC) for s in syncs] +
                      [(c[0], c[1], c[2], c[3], SignalKind.RECOMPILE) for c in compiled])  # fmt: skip
        signals.add(len(both), kind=[s[4].value for s in both], op_id=[s[3] for s in both], op_name=[s[2] for s in both],
                    reason=[Cause.SYNC_CALL.value if s[4] is SignalKind.SYNC else f"online-{s[1]}" for s in both],
                    note=[f"{s[1]}: " + cause_hint(Cause.SYNC_CALL) if s[4] is SignalKind.SYNC else COMPILE_NOTE for s in both],
                    time_ns=[starts[s[0]] - t0 for s in both])  # fmt: skip
        compiles.add(len(compiled), key=[c[2] for c in compiled], compile_ns=[c[4] for c in compiled],
                     reason=[c[1] for c in compiled], time_ns=[starts[c[0]] - t0 for c in compiled])  # fmt: skip
    for _, at in spans.ai_cpu.blocks(_chrome_slices.SLICE_ROWS):
        o, name = kernel_op.take(at), ev.gather("name", at)
        launched = o >= 0
        name[launched] = ev.gather("name", ops.take(o[launched]))  # the operator's name where one launched it
        signals.add(len(at), kind=SignalKind.CPU_FALLBACK, op_id=o, reason="ai-cpu", op_name=[vals[c] for c in name.tolist()],
                    note=AI_CPU_NOTE, time_ns=ev.gather("start", at) - t0)  # fmt: skip
    return signals, compiles


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
