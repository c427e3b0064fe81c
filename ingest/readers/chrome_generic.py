"""Any Chrome / Perfetto trace JSON -> events (`events.EventColumns`) -> Trace: one lane per thread.

The fallback for Chrome JSON that no specific reader claims (object with ``traceEvents`` or a bare array).
The shared streaming pass (``chrome_events.collect``) keeps the events compactly; `translate` turns them into
the one event model, a block at a time: complete (``X``) spans, ``B``/``E`` pairs and async spans become SPAN
events on lanes named ``<process name> / <thread name>`` (metadata ``process_name``/``thread_name``; ``pid N``/
``tid N`` where none is given) with no engine kind named (drawn as work); instants (``i``) zero-length SPAN events
on their thread's lane, engine kind other (drawn as annotations); flow (``s``/``t``/``f``) ids the ``correlation``
of the spans they bind to (Chrome's binding rules, ``chrome_bind``). `assemble` writes the tables. A generic
trace names no operators, devices, copies or compiles, so the run says it cannot provide any signal. The readers
of traces whose producers are known build on the helpers here.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..events import NONE, EventColumns, EventKind, Translated
from ..schema import EngineKind, Source
from ..trace import RunInfo, Trace
from .chrome_bind import bind_flows
from .chrome_events import OTHER_ID, ChromeEvents, blocks, convert
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
    spans, ids = flow_ids(ev)
    for lo, hi in blocks(len(ev)):  # spans: no engine kind named (drawn as work), a bound flow's id as correlation
        col = {c: ev.read(c, lo, hi) for c in ("start", "dur", "name", "pid", "tid")}
        correlation = np.full(hi - lo, NONE, dtype=np.int64)
        first, last = np.searchsorted(spans, [lo, hi]).tolist()
        correlation[spans[first:last] - lo] = ids[first:last]
        add_spans(out, EventKind.SPAN, vals, col, t0, texts={"lane": lanes(col)}, correlation=correlation)
    info = base_info(ev, FORMAT, list(GENERIC_MISSING), lanes=len(set(labels.values())))
    # no device is named: the regions say none (a str type widened to None here)
    return Translated(out, info, root_name=path.name, root_device=None)


def flow_ids(ev: ChromeEvents) -> tuple[np.ndarray, np.ndarray]:
    """(span numbers, sorted; the id of the flow bound to each): per span the last endpoint in the file bound to it
    (`chrome_bind.bind_flows`); an id that is not an int64, or negative, moved to 2^62..2^63 (2^62 + its 62-bit
    hash, `chrome_events.other_key`)."""
    m = len(ev.flows)
    if not m:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    column = bind_flows(ev)
    bound = column.read(0, m)
    column.close()
    ends = np.flatnonzero(bound >= 0)[::-1]  # the last endpoint in the file first
    spans, first = np.unique(bound[ends], return_index=True)
    key = ev.flows.read("key", 0, m)[ends[first]]
    return spans, np.where(key < 0, key - OTHER_ID + 2**62, key)


__all__ = ["FORMAT", "GENERIC_MISSING", "add_spans", "base_info", "epoch_iso", "flow_ids", "lane_label", "read_chrome",
           "run_extent", "sniff", "translate", "value_codes"]  # fmt: skip
