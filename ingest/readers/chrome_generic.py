"""Any Chrome / Perfetto trace JSON -> Trace: one lane per thread, named by its process and thread.

The fallback for Chrome JSON that no specific reader claims (object with
``traceEvents`` or a bare array): complete (``X``) spans, ``B``/``E`` pairs and
instants (``i``) become engine slices on lanes named ``<process name> / <thread
name>`` (metadata ``process_name``/``thread_name``; ``pid N``/``tid N`` where none
is given), ordered by ``process_sort_index``; flow (``s``/``t``/``f``) ids become
the ``correlation`` of the spans they bind to. A generic trace names no
operators, devices, copies or compiles, so the run says it cannot provide any
signal. The readers of traces whose producers are known build on the helpers here.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..builder import TraceBuilder
from ..schema import Mode, SliceKind, Source
from ..spill import DiskColumn
from ..trace import RunInfo, Trace
from ._chrome_bind import bind_flows, flow_ids
from ._chrome_events import ChromeEvents, blocks, collect, lane_keys
from ._chrome_slices import Lane, SliceRows, finish
from ._source import DEFAULT_CAPS, SizeCaps

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


def flow_links(ev: ChromeEvents, bound: DiskColumn | None = None, *,
               keep: Callable[[np.ndarray], np.ndarray] | None = None) -> DiskColumn:  # fmt: skip
    """Per span: the id of a flow bound to it (ids that are not int64: 2^62 + a 62-bit hash, `other_key`), or -1; on disk.

    bound: each flow endpoint's span, when the caller has bound them already (`_chrome_bind.bind_flows`);
    keep(spans): which of those spans may have one."""
    own = bound is None
    bound = bind_flows(ev) if bound is None else bound
    ids = flow_ids(ev, bound, keep)
    if own:
        bound.close()
    return ids


def sorted_lanes(ev: ChromeEvents, lane_of: Callable[[Any, Any], Lane]) -> dict[tuple[int, int], Lane]:
    """(pid code, tid code) -> Lane for every thread with spans, in display order (sort index, pid, tid)."""
    vals = ev.values.values
    keys: set[tuple[int, int]] = set()
    for src in (ev, ev.instants):
        for lo, hi in blocks(len(src)):
            pairs = np.unique(lane_keys(src, lo, hi))
            keys.update(zip((pairs >> 32).tolist(), (pairs & 0xFFFFFFFF).tolist(), strict=True))

    def order(key: tuple[int, int]) -> tuple:
        pid, tid = vals[key[0]], vals[key[1]]
        return (ev.process_sort.get(pid, 0), str(type(pid)), str(pid), str(type(tid)), str(tid))

    return {k: lane_of(vals[k[0]], vals[k[1]]) for k in sorted(keys, key=order)}


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


def read_chrome(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, sliced: bool = False) -> Trace:
    """Convert any Chrome/Perfetto JSON trace into engine lanes named by process and thread.

    sliced: give the engine slices as slices, made as they are written (`Trace.slices`), not as one table."""
    path = Path(path)
    ev = collect(path, caps=caps, lean=True)  # no categories or args: a generic lane needs neither
    t0, end = run_extent(ev)
    b = TraceBuilder(base_info(ev, FORMAT, list(GENERIC_MISSING)))
    rid = b.add_region(str(ev.metadata.get("traceName") or path.name), dur_ns=end - t0, mode=Mode.UNKNOWN)
    lanes = sorted_lanes(ev, lambda pid, tid: Lane(lane_label(ev, pid, tid)))
    b.run_info.extra["lanes"] = len({lane.engine for lane in lanes.values()})
    rows = SliceRows(ev, rid, t0)
    annotations = {key: Lane(lane.engine, lane.engine_kind, SliceKind.ANNOTATION) for key, lane in lanes.items()}
    rows.add(annotations, instants=True)  # instants: zero-length annotation slices on their thread's lane
    rows.add(lanes, correlation=flow_links(ev))
    return finish(b.build(), {"engine_slices": rows.slices()}, sliced=sliced)


__all__ = ["FORMAT", "GENERIC_MISSING", "Lane", "base_info", "epoch_iso", "flow_links", "lane_label",
           "read_chrome", "run_extent", "sniff", "sorted_lanes"]  # fmt: skip
