"""Any Chrome / Perfetto trace JSON -> events (`events.EventColumns`) -> Trace: one lane per thread.

The fallback for Chrome JSON that no specific reader claims (object with ``traceEvents`` or a bare array).
The shared streaming pass (``chrome_events.collect``) keeps the events compactly; `translate` turns them into
the one event model, a block at a time: complete (``X``) spans, ``B``/``E`` pairs and async spans become SPAN
events on lanes named ``<process name> / <thread name>`` (metadata ``process_name``/``thread_name``; ``pid N``/
``tid N`` where none is given) with no engine kind named (drawn as work); instants (``i``) zero-length SPAN events
on their thread's lane, engine kind other (drawn as annotations); flow points (``s``/``t``/``f``, and flow events
v2's) FLOW events, their ids (int64, else 2^62 + their hash) as correlations (`flow_points`): the linker binds them
to spans by Chrome's rules and each span takes the id of its last one. `assemble` writes the tables. A generic
trace names no operators, devices, copies or compiles, so the run says it cannot provide any signal. The readers
of traces whose producers are known build on the helpers here.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..events import EventColumns, EventKind, FlowBinding, FlowPhase, Translated, flow_point
from ..schema import EngineKind, Source
from ..trace import RunInfo, Trace
from .chrome_events import ChromeEvents, blocks, convert
from .source import DEFAULT_CAPS, SizeCaps

FORMAT = "chrome"
GENERIC_MISSING = [
    "operators (a generic Chrome trace names no operators; spans are drawn as engine lanes only)",
    "dispatch/cpu_fallback, host_bounce/*, dispatch/recompile, compile/* (no dispatcher or compiler events)",
    "transfers and syncs (no known copy or wait events, no devices)",
]


def sniff(text: str) -> bool:
    """True for Chrome trace JSON: an object with ``traceEvents`` or an array of objects with ``ph``."""
    stripped = text.lstrip()
    if stripped[:1] == "{":
        return '"traceEvents"' in text
    return stripped[:1] == "[" and '"ph"' in text


def lane_label(ev: ChromeEvents, pid: Any, tid: Any) -> str:
    """``<process name> / <thread name>`` of a thread (``pid N`` / ``tid N`` where the trace names none)."""
    process = ev.process_names.get(pid) or f"pid {pid}"
    thread = ev.thread_names.get((pid, tid)) or (tid if _is_async_lane(tid) else f"tid {tid}")
    return f"{process} / {thread}"


def _is_async_lane(tid: Any) -> bool:
    """A lane the collector made for a process's async spans of one name (``async <name>``)."""
    return type(tid) is str and (tid == "async" or tid.startswith("async "))


def run_extent(ev: ChromeEvents) -> tuple[int, int]:
    """(first start, last end) in ns as written, over spans and instants."""
    t0 = ev.t0()
    ends = [int((ev.read("start", lo, hi) + ev.read("dur", lo, hi)).max()) for lo, hi in blocks(len(ev))]
    ends += [int(ev.instants.read("ts", lo, hi).max()) for lo, hi in blocks(len(ev.instants))]
    return t0, max(ends, default=t0)


def epoch_iso(t_ns: int) -> str | None:
    """ISO 8601 (UTC) of a time in ns when it is plausibly since the epoch (2001-2286), else None."""
    if not 10**18 <= t_ns < 10**19:
        return None
    return datetime.datetime.fromtimestamp(t_ns // 1000 / 1e6, datetime.UTC).isoformat()


def base_info(ev: ChromeEvents, fmt: str, missing: list[str], **extra: Any) -> RunInfo:
    """The run info every Chrome-based converter shares."""
    return RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=fmt, missing_signals=missing,
                   extra={"events": ev.events, "flows": len(ev.flows), "unmatched_begins": ev.unmatched_begins,
                          "unmatched_async_ends": ev.unmatched_async_ends,
                          "processes": {str(k): v for k, v in ev.process_names.items()}, **extra})  # fmt: skip


def value_codes(vals: list[Any], codes: np.ndarray, value: Callable[[Any], Any] | None = None) -> tuple[list[Any], np.ndarray]:
    """(values, int codes into them) of value codes of a `ChromeEvents`: only the values used, each `value(v)` if
    given (what `EventColumns.extend` takes as a text or a lane column)."""
    used, inverse = np.unique(codes, return_inverse=True)
    return [value(vals[c]) if value else vals[c] for c in used.tolist()], inverse.reshape(-1).astype(np.int64)


def add_spans(out: EventColumns, kind: EventKind | np.ndarray, vals: list[Any], col: dict[str, np.ndarray], t0: int, *,
              texts: dict[str, tuple[list, np.ndarray]] | None = None, **columns: np.ndarray) -> None:  # fmt: skip
    """Spans read from a `ChromeEvents` (columns "start", "dur", "name", "pid", "tid" of the same rows; instants:
    "ts" and no "dur") as events of one kind (or per row, `KIND_CODES`), times in ns from t0; `texts` and `columns`
    as `EventColumns.extend` takes them."""
    start = col["start"] if "start" in col else col["ts"]
    n = len(start)
    dur = col["dur"] if "dur" in col else np.zeros(n, dtype=np.int64)
    out.extend(kind, n, start_ns=start - t0, dur_ns=dur, texts={"name": value_codes(vals, col["name"]), **(texts or {})},
               lanes={"pid": value_codes(vals, col["pid"]), "tid": value_codes(vals, col["tid"])}, **columns)  # fmt: skip


def read_chrome(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, sliced: bool = False) -> Trace:
    """Convert any Chrome/Perfetto JSON trace into engine lanes named by process and thread.

    sliced: the big tables as `Trace.slices`, made as they are written (converting never holds them whole)."""
    return convert(path, translate, caps=caps, sliced=sliced, lean=True)


def translate(path: Path, ev: ChromeEvents) -> Translated:
    """The events of one collected generic Chrome trace in the one event model."""
    t0, _ = run_extent(ev)
    vals = ev.values.values
    out = EventColumns()
    labels: dict[tuple[Any, Any], str] = {}

    def lanes(col: dict[str, np.ndarray]) -> tuple[list[str], np.ndarray]:
        keys, at = np.unique((col["pid"].astype(np.int64) << 32) | col["tid"], return_inverse=True)
        named = []
        for k in keys.tolist():
            thread = (vals[k >> 32], vals[k & 0xFFFFFFFF])
            named.append(labels.setdefault(thread, lane_label(ev, *thread)))
        return named, at.reshape(-1).astype(np.int64)

    other = [EngineKind.OTHER.value]
    for lo, hi in blocks(len(ev.instants)):  # instants: zero-length spans on their thread's lane, drawn as annotations
        col = {c: ev.instants.read(c, lo, hi) for c in ("ts", "name", "pid", "tid")}
        add_spans(out, EventKind.SPAN, vals, col, t0, texts={"lane": lanes(col), "engine_kind": (other, np.zeros(hi - lo, np.int64))})
    for lo, hi in blocks(len(ev)):  # spans: no engine kind named (drawn as work)
        col = {c: ev.read(c, lo, hi) for c in ("start", "dur", "name", "pid", "tid")}
        add_spans(out, EventKind.SPAN, vals, col, t0, texts={"lane": lanes(col)})
    flow_points(out, ev, t0)
    info = base_info(ev, FORMAT, list(GENERIC_MISSING), lanes=len(set(labels.values())))
    # no device is named: the regions say none (a str type widened to None here)
    return Translated(out, info, root_name=path.name, root_device=None)


# the `flow` code of a point by its phase (chrome_events.PHASES: s, t, f) and whether it binds to the enclosing span
_FLOW_CODES = np.array([[flow_point(phase, binding) for binding in (FlowBinding.NEXT, FlowBinding.ENCLOSING)]
                        for phase in (FlowPhase.START, FlowPhase.STEP, FlowPhase.END)], dtype=np.int64)  # fmt: skip


def flow_points(out: EventColumns, ev: ChromeEvents, t0: int, keep: np.ndarray | None = None) -> None:
    """The flow points of a `ChromeEvents` (those where `keep`, per point, if given) as FLOW events in file order:
    time in ns from t0, thread, name, phase and binding (`events.flow_point`), the id as correlation: itself when an
    int64 of at least 0, else moved to 2^62..2^63 (a string, an int past 2^63 or a float: 2^62 + its 62-bit hash,
    `chrome_events.other_key`; a negative int: 2^63 + it)."""
    f, vals = ev.flows, ev.values.values
    for lo, hi in blocks(len(f)):
        col = {c: f.read(c, lo, hi) for c in ("ts", "name", "pid", "tid", "key", "phase", "enclosing")}
        rows = np.flatnonzero(keep[lo:hi]) if keep is not None else np.arange(hi - lo)
        if not len(rows):
            continue
        col = {c: v[rows] for c, v in col.items()}
        key = col.pop("key")
        code = _FLOW_CODES[col.pop("phase"), col.pop("enclosing").astype(np.int64)]
        add_spans(out, EventKind.FLOW, vals, col, t0, correlation=np.where(key < 0, key + 2**62 + 2**62, key),
                  flow=code)


__all__ = ["FORMAT", "GENERIC_MISSING", "add_spans", "base_info", "epoch_iso", "flow_points", "lane_label", "read_chrome",
           "run_extent", "sniff", "translate", "value_codes"]  # fmt: skip
