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
from ._chrome_events import ChromeEvents, blocks, collect, lane_keys
from ._chrome_slices import finish
from ._disk_rows import DiskRows
from ._source import DEFAULT_CAPS, SizeCaps
from .chrome_generic import Lane, base_info, run_extent, sorted_lanes

FORMAT = "mobilint-trace"
_ROWS = 1 << 16  # spans turned into rows at a time (Python objects per span live that long)
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


def read_mobilint_trace(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, sliced: bool = False) -> Trace:
    """Convert a qbruntime core trace into host and NPU lanes, transfers and waits.

    Spans are read a block at a time and their rows kept on disk (`DiskRows`): nothing per span is held.
    sliced: give the engine slices, transfers and signals as slices, made as they are written (`Trace.slices`)."""
    path = Path(path)
    ev = collect(path, caps=caps)
    if not len(ev):
        raise TraceFormatError(path, f"no B/E span pairs among {ev.events} events: nothing to convert")
    vals = ev.values.values
    text = [v if type(v) is str else "" for v in vals]
    known = np.array([t in MAIN_SPANS or t in WORKER_SPANS for t in text], dtype=bool)
    device_lanes = list({lane.engine: lane for lane in _LANES.values()}.values())
    device_lane = np.array([next((n for n, d in enumerate(device_lanes) if t in _LANES and _LANES[t].engine == d.engine), -1)
                            for t in text], dtype=np.int8)  # fmt: skip
    counts = np.zeros(len(vals), dtype=np.int64)
    infer = ev.values.codes.get("infer", -1)
    infer_keys: set[int] = set()
    for lo, hi in blocks(len(ev)):
        names = ev.read("name", lo, hi)
        counts += np.bincount(names[known[names]], minlength=len(vals))
        infer_keys.update(np.unique(lane_keys(ev, lo, hi)[names == infer]).tolist())
    if not counts.any():
        raise TraceFormatError(path, f"none of the {len(ev)} spans has a qbruntime span name (infer, run npu, wait core...)")
    t0, end = run_extent(ev)
    infer_threads = {(vals[k >> 32], vals[k & 0xFFFFFFFF]) for k in infer_keys}

    def lane_of(pid: Any, tid: Any) -> Lane:
        if (pid, tid) in infer_threads:
            return Lane("host", EngineKind.HOST, SliceKind.COMPUTE)
        return Lane(f"core worker {tid}", EngineKind.HOST, SliceKind.DISPATCH)

    lanes = {(p << 32) | t: lane for (p, t), lane in sorted_lanes(ev, lane_of).items()}
    info = base_info(ev, FORMAT, ["transfer bytes (the core trace has no sizes)",
                                  "operators and dispatch/cpu_fallback (a runtime trace has no dispatcher events)",
                                  "device compute time (shown only as 'wait core': the host waiting for the core)"])  # fmt: skip
    info.devices = ["cpu", "npu:0"]
    b = TraceBuilder(info)
    rid = b.add_region(path.name.split(".")[0], dur_ns=end - t0, mode=Mode.UNKNOWN, device="npu:0")
    slices = DiskRows("engine_slices", numbers={"start": "q", "dur": "q"}, texts=("engine", "engine_kind", "kind", "name"),
                      fixed={"region_id": rid})  # fmt: skip
    transfers = DiskRows("transfers", numbers={"start_ns": "q", "dur_ns": "q"}, texts=("direction", "src_device", "dst_device"),
                         fixed={"region_id": rid, "bytes": 0, "cause": "explicit"})  # fmt: skip
    signals = DiskRows("signals", numbers={"time_ns": "q"}, texts=("kind", "reason", "op_name"),
                       fixed={"region_id": rid, "count": 1, "bytes": 0})  # fmt: skip
    for part in range(-1, len(device_lanes)):  # the host spans on their threads' lanes, then each device lane's spans
        for lo, hi in blocks(len(ev), _ROWS):
            idx = lo + np.flatnonzero(device_lane[ev.read("name", lo, hi)] == part)
            names = [text[c] for c in ev.gather("name", idx).tolist()]
            if part < 0:
                on = [lanes[k] for k in _lane_keys(ev, idx).tolist()]
                engine, ekind, kind = [x.engine for x in on], [x.engine_kind.value for x in on], [x.slice_kind.value for x in on]
            else:
                engine, ekind = device_lanes[part].engine, device_lanes[part].engine_kind
                kind = [_LANES[n].slice_kind.value for n in names]
            slices.add(len(idx), engine=engine, engine_kind=ekind, kind=kind, name=names,
                       start=ev.gather("start", idx) - t0, dur=ev.gather("dur", idx))  # fmt: skip
    for lo, hi in blocks(len(ev), _ROWS):
        names = [text[c] for c in ev.read("name", lo, hi).tolist()]
        picked = [j for j, n in enumerate(names) if n in _TRANSFER_SPANS or n == "wait core"]
        when = (ev.read("start", lo, hi) - t0)[picked].tolist()
        moved = [(j, _TRANSFER_SPANS[names[j]]) for j in picked if names[j] in _TRANSFER_SPANS]
        h2d = [d is Direction.H2D for _, d in moved]
        transfers.add(len(moved), direction=[d.value for _, d in moved], src_device=["cpu" if h else "npu:0" for h in h2d],
                      dst_device=["npu:0" if h else "cpu" for h in h2d], start_ns=(ev.read("start", lo, hi) - t0)[[j for j, _ in moved]],
                      dur_ns=ev.read("dur", lo, hi)[[j for j, _ in moved]])  # fmt: skip
        direction = [_TRANSFER_SPANS.get(names[j]) for j in picked]  # None: a wait
        signals.add(len(picked), kind=[SignalKind.SYNC.value if d is None else d.signal.value for d in direction],
                    reason=[Cause.SYNC_CALL.value if d is None else Cause.EXPLICIT_COPY.value for d in direction],
                    op_name=[names[j] for j in picked], time_ns=when)  # fmt: skip
    b.run_info.extra["spans_by_name"] = dict(sorted((text[c], int(counts[c])) for c in np.flatnonzero(counts).tolist()))
    ev.close()
    tables = {name: rows.slices() for name, rows in (("engine_slices", slices), ("transfers", transfers), ("signals", signals))
              if len(rows)}  # fmt: skip
    return finish(b.build(), tables, sliced=sliced)


def _lane_keys(ev: ChromeEvents, idx: np.ndarray) -> np.ndarray:
    """(pid code << 32 | tid code) of the spans `idx`."""
    return (ev.gather("pid", idx).astype(np.int64) << 32) | ev.gather("tid", idx)


__all__ = ["FORMAT", "read_mobilint_trace", "sniff"]
