"""Mobilint qbruntime core trace (``npu_core_trace.json``) -> Trace.

What qbruntime writes: a bare JSON array of ``B``/``E`` pairs ``{"name", "cat": "", "ph", "pid",
"tid", "ts"}`` with ``ts`` in integer microseconds and no metadata events. The main thread runs
``infer``, ``acquire output data``, ``convert to buffer``, ``convert from buffer``, ``reposition
data``; a worker thread per core runs ``lock core``, ``copy to npu``, ``write device``, ``init
rmem``, ``copy npu binary``, ``run npu``, ``wait core``, ``unlock core``, ``copy from npu``,
``read device``. The device's compute shows only as ``wait core`` (the host waiting for the core).

Lanes: ``host`` (the thread that runs ``infer``), ``core worker <tid>`` (other threads), plus the
device-facing spans drawn apart: ``NPU h2d`` (``copy to npu``, ``write device``, ``copy npu binary``),
``NPU d2h`` (``copy from npu``, ``read device``) and ``NPU core`` (``run npu``, ``wait core``).
Copies to and from the NPU are transfers (no byte counts in the trace); ``wait core`` is a sync.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..builder import TraceBuilder
from ..catalog import Cause
from ..errors import TraceFormatError
from ..schema import Direction, EngineKind, Mode, SignalKind, SliceKind
from ..trace import Trace
from ._chrome_events import collect
from ._source import DEFAULT_CAPS, SizeCaps
from .chrome_generic import Lane, base_info, run_extent, slice_table, sorted_lanes, with_slices

FORMAT = "mobilint-trace"
MAIN_SPANS = frozenset({"infer", "acquire output data", "convert to buffer", "convert from buffer", "reposition data"})
WORKER_SPANS = frozenset({"lock core", "copy to npu", "write device", "init rmem", "copy npu binary", "run npu",
                          "wait core", "unlock core", "copy from npu", "read device"})  # fmt: skip
H2D = frozenset({"copy to npu", "write device", "copy npu binary"})
D2H = frozenset({"copy from npu", "read device"})
CORE = frozenset({"run npu", "wait core"})
# The outermost copy of each direction is the transfer; the spans nested in it are its parts.
_TRANSFER_SPANS = {"copy to npu": Direction.H2D, "copy npu binary": Direction.H2D, "copy from npu": Direction.D2H}
_LANES = {**dict.fromkeys(H2D, Lane("NPU h2d", EngineKind.DMA_H2D, SliceKind.TRANSFER)),
          **dict.fromkeys(D2H, Lane("NPU d2h", EngineKind.DMA_D2H, SliceKind.TRANSFER)),
          "run npu": Lane("NPU core", EngineKind.STREAM, SliceKind.COMPUTE),
          "wait core": Lane("NPU core", EngineKind.STREAM, SliceKind.SYNC)}  # fmt: skip


def sniff(text: str) -> bool:
    """True for a bare array of B/E events named like qbruntime's core trace."""
    if text.lstrip()[:1] != "[" or '"ph"' not in text:
        return False
    return sum(f'"{n}"' in text for n in ("run npu", "wait core", "lock core", "copy to npu", "copy from npu",
                                           "acquire output data", "convert to buffer")) >= 2  # fmt: skip


def read_mobilint_trace(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert a qbruntime core trace into host and NPU lanes, transfers and waits."""
    path = Path(path)
    ev = collect(path, caps=caps)
    if not len(ev):
        raise TraceFormatError(path, f"no B/E span pairs among {ev.events} events: nothing to convert")
    vals = ev.values.values
    names = [vals[c] for c in ev.name]
    known = sum(1 for n in names if n in MAIN_SPANS or n in WORKER_SPANS)
    if not known:
        raise TraceFormatError(path, f"none of the {len(ev)} spans has a qbruntime span name (infer, run npu, wait core...)")
    t0, end = run_extent(ev)
    infer_threads = {ev.lane_key(i) for i, n in enumerate(names) if n == "infer"}

    def lane_of(pid: Any, tid: Any) -> Lane:
        if (pid, tid) in infer_threads:
            return Lane("host", EngineKind.HOST, SliceKind.COMPUTE)
        return Lane(f"core worker {tid}", EngineKind.HOST, SliceKind.DISPATCH)

    lanes = sorted_lanes(ev, lane_of)
    info = base_info(ev, FORMAT, ["transfer bytes (the core trace has no sizes)",
                                  "operators and dispatch/cpu_fallback (a runtime trace has no dispatcher events)",
                                  "device compute time (shown only as 'wait core': the host waiting for the core)"])  # fmt: skip
    info.devices = ["cpu", "npu:0"]
    b = TraceBuilder(info)
    rid = b.add_region(path.name.split(".")[0], dur_ns=end - t0, mode=Mode.UNKNOWN, device="npu:0")
    device_spans = np.array([i for i, n in enumerate(names) if n in _LANES], dtype=np.int64)
    host_spans = np.array([i for i, n in enumerate(names) if n not in _LANES], dtype=np.int64)
    tables = [slice_table(ev, rid, t0, lanes, host_spans)]
    for lane in {lane.engine: lane for lane in _LANES.values()}.values():
        idx = np.array([i for i in device_spans.tolist() if _LANES[names[i]].engine == lane.engine], dtype=np.int64)
        kinds = {i: _LANES[names[i]].slice_kind for i in idx.tolist()}
        tables.append(slice_table(ev, rid, t0, {k: lane for k in lanes}, idx, kinds=kinds))
    counts: dict[str, int] = {}
    for i, name in enumerate(names):
        when = ev.start[i] - t0
        direction = _TRANSFER_SPANS.get(name)
        if direction is not None:
            dst, src = ("npu:0", "cpu") if direction is Direction.H2D else ("cpu", "npu:0")
            b.transfers.append(region_id=rid, direction=direction, bytes=0, src_device=src, dst_device=dst,
                               start_ns=when, dur_ns=ev.dur[i], cause="explicit")  # fmt: skip
            b.signals.append(region_id=rid, kind=direction.signal, reason=Cause.EXPLICIT_COPY.value, op_name=name,
                             count=1, bytes=0, time_ns=when)  # fmt: skip
        elif name == "wait core":
            b.signals.append(region_id=rid, kind=SignalKind.SYNC, reason=Cause.SYNC_CALL.value, op_name=name, count=1,
                             bytes=0, time_ns=when)  # fmt: skip
        if name in MAIN_SPANS or name in WORKER_SPANS:
            counts[name] = counts.get(name, 0) + 1
    b.run_info.extra["spans_by_name"] = dict(sorted(counts.items()))
    return with_slices(b.build(), tables)


__all__ = ["FORMAT", "read_mobilint_trace", "sniff"]
