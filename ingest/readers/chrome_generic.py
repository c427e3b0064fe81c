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

import dataclasses
import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..builder import TraceBuilder
from ..schema import EngineKind, Mode, SliceKind, Source
from ..trace import RunInfo, Trace
from ._chrome_events import ChromeEvents, bind_flows, collect
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


@dataclasses.dataclass(frozen=True)
class Lane:
    """Where the spans of one thread go: lane name, engine kind and slice kind."""

    engine: str
    engine_kind: EngineKind = EngineKind.OTHER
    slice_kind: SliceKind = SliceKind.COMPUTE


def lane_label(ev: ChromeEvents, pid: Any, tid: Any) -> str:
    """``<process name> / <thread name>`` of a thread (``pid N`` / ``tid N`` where the trace names none)."""
    process = ev.process_names.get(pid) or f"pid {pid}"
    thread = ev.thread_names.get((pid, tid)) or f"tid {tid}"
    return f"{process} / {thread}"


def flow_correlations(ev: ChromeEvents, flows: list | None = None) -> np.ndarray:
    """Per span: the id of a flow bound to it (ids that are not int64 are numbered), or -1."""
    corr = np.full(len(ev), -1, dtype=np.int64)
    numbered: dict[Any, int] = {}
    for flow, i in bind_flows(ev, ev.flows if flows is None else flows):
        fid = flow.id
        if type(fid) is not int or not 0 <= fid < 2**63:
            fid = numbered.setdefault(fid, 2**62 + len(numbered))  # strings and ids beyond int64: numbered apart
        corr[i] = fid
    return corr


def sorted_lanes(ev: ChromeEvents, lane_of: Callable[[Any, Any], Lane]) -> dict[tuple[int, int], Lane]:
    """(pid code, tid code) -> Lane for every thread with spans, in display order (sort index, pid, tid)."""
    vals = ev.values.values
    keys = set(zip(ev.pid, ev.tid, strict=True)) | {(ev.values.codes[p], ev.values.codes[t]) for _, _, _, p, t in ev.instants
                                                     if p in ev.values.codes and t in ev.values.codes}  # fmt: skip

    def order(key: tuple[int, int]) -> tuple:
        pid, tid = vals[key[0]], vals[key[1]]
        return (ev.process_sort.get(pid, 0), str(type(pid)), str(pid), str(type(tid)), str(tid))

    return {k: lane_of(vals[k[0]], vals[k[1]]) for k in sorted(keys, key=order)}


def add_slices(b: TraceBuilder, ev: ChromeEvents, rid: int, t0: int, lanes: dict[tuple[int, int], Lane],
               index: np.ndarray | None = None, *, correlation: np.ndarray | None = None,
               kinds: dict[int, SliceKind] | None = None, op_ids: np.ndarray | None = None) -> None:  # fmt: skip
    """Engine slices of the spans `index` (default all) on their lanes; `kinds` overrides a span's slice kind."""
    if index is None:
        index = np.arange(len(ev), dtype=np.int64)
    vals = ev.values.values
    pids, tids, names = ev.pid, ev.tid, ev.name
    engines, engine_kinds, slice_kinds, slice_names = [], [], [], []
    keep = []
    for i in index.tolist():
        lane = lanes.get((pids[i], tids[i]))
        if lane is None:
            continue
        keep.append(i)
        engines.append(lane.engine)
        engine_kinds.append(lane.engine_kind.value)
        slice_kinds.append((kinds.get(i) if kinds else None) or lane.slice_kind)
        slice_names.append(vals[names[i]])
    if not keep:
        return
    at = np.asarray(keep, dtype=np.int64)
    start = np.frombuffer(ev.start, dtype=np.int64)[at] - t0
    dur = np.frombuffer(ev.dur, dtype=np.int64)[at]
    columns: dict[str, Any] = {
        "region_id": [rid] * len(keep), "engine": engines, "engine_kind": engine_kinds,
        "kind": [k.value for k in slice_kinds], "name": slice_names, "start": start.tolist(), "dur": dur.tolist(),
    }  # fmt: skip
    if correlation is not None:
        c = correlation[at]
        columns["correlation"] = [int(x) if x >= 0 else None for x in c.tolist()]
    if op_ids is not None:
        o = op_ids[at]
        columns["op_id"] = [int(x) if x >= 0 else None for x in o.tolist()]
    b.engine_slices.extend(columns)


def add_instants(b: TraceBuilder, ev: ChromeEvents, rid: int, t0: int, lanes: dict[tuple[int, int], Lane]) -> None:
    """Instant events as zero-length annotation slices on their thread's lane."""
    codes = ev.values.codes
    for ts, name, _cat, pid, tid in ev.instants:
        lane = lanes.get((codes.get(pid, -1), codes.get(tid, -1)))
        if lane is not None:
            b.engine_slices.append(region_id=rid, engine=lane.engine, engine_kind=lane.engine_kind,
                                   kind=SliceKind.ANNOTATION, name=name, start=ts - t0, dur=0)  # fmt: skip


def run_extent(ev: ChromeEvents) -> tuple[int, int]:
    """(first start, last end) in ns as written, over spans and instants."""
    t0 = ev.t0()
    end = int((np.frombuffer(ev.start, dtype=np.int64) + np.frombuffer(ev.dur, dtype=np.int64)).max()) if len(ev) else t0
    end = max([end, *(x[0] for x in ev.instants)])
    return t0, end


def epoch_iso(t_ns: int) -> str | None:
    """ISO 8601 (UTC) of a time in ns when it is plausibly since the epoch (2001-2286), else None."""
    if not 10**18 <= t_ns < 10**19:
        return None
    return datetime.datetime.fromtimestamp(t_ns // 1000 / 1e6, datetime.UTC).isoformat()


def base_info(ev: ChromeEvents, fmt: str, missing: list[str], **extra: Any) -> RunInfo:
    """The run info every Chrome-based converter shares."""
    return RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=fmt, missing_signals=missing,
                   extra={"events": ev.events, "flows": len(ev.flows), "unmatched_begins": ev.unmatched_begins,
                          "processes": {str(k): v for k, v in ev.process_names.items()}, **extra})  # fmt: skip


def read_chrome(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert any Chrome/Perfetto JSON trace into engine lanes named by process and thread."""
    path = Path(path)
    ev = collect(path, caps=caps)
    t0, end = run_extent(ev)
    b = TraceBuilder(base_info(ev, FORMAT, list(GENERIC_MISSING)))
    rid = b.add_region(str(ev.metadata.get("traceName") or path.name), dur_ns=end - t0, mode=Mode.UNKNOWN)
    lanes = sorted_lanes(ev, lambda pid, tid: Lane(lane_label(ev, pid, tid)))
    add_slices(b, ev, rid, t0, lanes, correlation=flow_correlations(ev))
    add_instants(b, ev, rid, t0, lanes)
    b.run_info.extra["lanes"] = len({lane.engine for lane in lanes.values()})
    return b.build()


__all__ = ["FORMAT", "GENERIC_MISSING", "Lane", "add_instants", "add_slices", "base_info", "epoch_iso", "flow_correlations",
           "lane_label", "read_chrome", "run_extent", "sniff", "sorted_lanes"]  # fmt: skip
