"""Mobilint qbruntime core trace (``npu_core_trace.json``) -> events (`events.EventColumns`) -> Trace.

What qbruntime writes: a bare JSON array of ``B``/``E`` pairs ``{"name", "cat": "", "ph", "pid",
"tid", "ts"}`` with ``ts`` in integer microseconds and no metadata events. The main thread runs
``infer``, ``acquire output data``, ``convert to buffer``, ``convert from buffer``, ``reposition
data``; a worker thread per core runs ``lock core``, ``copy to npu``, ``write device``, ``init
rmem``, ``copy npu binary``, ``run npu``, ``wait core``, ``unlock core``, ``copy from npu``,
``read device``. The device's compute shows only as ``wait core`` (the host waiting for the core).

Events: the spans of the thread that runs ``infer`` are SPAN events on the ``host`` lane (engine kind host),
those of other threads SPAN events on ``core worker <tid>`` (dispatch: they drive the cores); the device-facing
spans are drawn apart: ``copy to npu`` and ``copy npu binary`` are copies to the NPU (COPY, HtoD, lane ``NPU
h2d``), ``copy from npu`` a copy from it (COPY, DtoH, ``NPU d2h``), the spans nested in them (``write device``,
``read device``) SPAN events on the same lanes; ``run npu`` is device work (KERNEL) and ``wait core`` the host
waiting for the core (WAIT), both on ``NPU core``. The trace has no byte counts. `assemble` and its rules make the
transfers and the sync.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import TraceFormatError
from ..events import KIND_CODES, NONE, EventColumns, EventKind, Translated
from ..schema import EngineKind
from ..trace import Trace
from .chrome_events import ChromeEvents, convert
from .chrome_generic import add_spans, base_info, run_extent
from .source import DEFAULT_CAPS, SizeCaps

FORMAT = "mobilint-trace"
MAIN_SPANS = frozenset({"infer", "acquire output data", "convert to buffer", "convert from buffer", "reposition data"})
WORKER_SPANS = frozenset({"lock core", "copy to npu", "write device", "init rmem", "copy npu binary", "run npu",
                          "wait core", "unlock core", "copy from npu", "read device"})  # fmt: skip
H2D = frozenset({"copy to npu", "write device", "copy npu binary"})
D2H = frozenset({"copy from npu", "read device"})
CORE = frozenset({"run npu", "wait core"})
# the device-facing spans: (event, lane, engine kind, copy kind). The outermost copy of each direction is the copy;
# the spans nested in it are its parts, drawn on its lane.
_DEVICE = {"copy to npu": (EventKind.COPY, "NPU h2d", EngineKind.DMA_H2D, 1),
           "copy npu binary": (EventKind.COPY, "NPU h2d", EngineKind.DMA_H2D, 1),
           "write device": (EventKind.SPAN, "NPU h2d", EngineKind.DMA_H2D, None),
           "copy from npu": (EventKind.COPY, "NPU d2h", EngineKind.DMA_D2H, 2),
           "read device": (EventKind.SPAN, "NPU d2h", EngineKind.DMA_D2H, None),
           "run npu": (EventKind.KERNEL, "NPU core", EngineKind.STREAM, None),
           "wait core": (EventKind.WAIT, "NPU core", EngineKind.STREAM, None)}  # fmt: skip
_MISSING = ["transfer bytes (the core trace has no sizes)",
            "operators and dispatch/cpu_fallback (a runtime trace has no dispatcher events)",
            "device compute time (shown only as 'wait core': the host waiting for the core)"]  # fmt: skip


def sniff(text: str) -> bool:
    """True for a bare array of B/E events named like qbruntime's core trace."""
    if text.lstrip()[:1] != "[" or '"ph"' not in text:
        return False
    return sum(f'"{n}"' in text for n in ("run npu", "wait core", "lock core", "copy to npu", "copy from npu",
                                           "acquire output data", "convert to buffer")) >= 2  # fmt: skip


def read_mobilint_trace(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, sliced: bool = False) -> Trace:
    """Convert a qbruntime core trace into host and NPU lanes, transfers and waits.

    sliced: the big tables as `Trace.slices`, made as they are written (converting never holds them whole)."""
    return convert(path, translate, caps=caps, sliced=sliced)


def translate(path: Path, ev: ChromeEvents) -> Translated:
    """The events of one collected core trace in the one event model."""
    n = len(ev)
    if not n:
        raise TraceFormatError(path, f"no B/E span pairs among {ev.events} events: nothing to convert")
    vals = ev.values.values
    col = {c: ev.read(c, 0, n) for c in ("start", "dur", "name", "pid", "tid")}
    text = [v if type(v) is str else "" for v in vals]
    counts = np.bincount(col["name"], minlength=len(vals))
    counts[[t not in MAIN_SPANS and t not in WORKER_SPANS for t in text]] = 0
    if not counts.any():
        raise TraceFormatError(path, f"none of the {n} spans has a qbruntime span name (infer, run npu, wait core...)")
    t0, _ = run_extent(ev)
    out = EventColumns()
    device = np.array([_DEVICE.get(t, (None,))[0] is not None for t in text], dtype=bool)[col["name"]]

    def part(rows: np.ndarray) -> dict[str, np.ndarray]:
        return {c: v[rows] for c, v in col.items()}

    # host spans: the thread that runs infer is the host; the others drive the cores
    rows = np.flatnonzero(~device)
    thread = (col["pid"][rows].astype(np.int64) << 32) | col["tid"][rows]
    infer = ev.values.codes.get("infer", -1)
    hosts = np.unique(thread[col["name"][rows] == infer])
    keys, at = np.unique(thread, return_inverse=True)
    at = at.reshape(-1).astype(np.int64)
    lanes = [("host", EngineKind.HOST.value) if k in hosts else (f"core worker {vals[k & 0xFFFFFFFF]}", EngineKind.DISPATCH.value)
             for k in keys.tolist()]  # fmt: skip
    add_spans(out, EventKind.SPAN, vals, part(rows), t0, texts={"lane": ([lane for lane, _ in lanes], at),
                                                                "engine_kind": ([kind for _, kind in lanes], at)})  # fmt: skip
    # the device-facing spans on their lanes, in the file's order (their transfers in that order)
    rows = np.flatnonzero(device)
    what = np.array([list(_DEVICE).index(t) if t in _DEVICE else 0 for t in text], dtype=np.int64)[col["name"][rows]]
    kinds, lanes, engine_kinds, copy_kinds = zip(*_DEVICE.values(), strict=True)
    copy_kind = np.array([NONE if k is None else k for k in copy_kinds], dtype=np.int64)[what]
    add_spans(out, np.array([KIND_CODES[k] for k in kinds])[what], vals, part(rows), t0, copy_kind=copy_kind,
              device=np.zeros(len(rows), dtype=np.int64),
              texts={"lane": (list(lanes), what), "engine_kind": ([k.value for k in engine_kinds], what)})  # fmt: skip
    info = base_info(ev, FORMAT, list(_MISSING))
    info.devices = ["cpu", "npu:0"]
    info.extra["spans_by_name"] = dict(sorted((text[c], int(counts[c])) for c in np.flatnonzero(counts).tolist()))
    return Translated(out, info, root_name=path.name.split(".")[0], root_device="npu:0", device_names={0: "npu:0"})


__all__ = ["CORE", "D2H", "FORMAT", "H2D", "MAIN_SPANS", "WORKER_SPANS", "read_mobilint_trace", "sniff", "translate"]
