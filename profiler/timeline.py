"""Measured timelines: `explain(timeline=True)` runs torch.profiler (Kineto) and turns its events into engine slices.

Host lanes: the top-level operators of each host thread ("host" for the thread
the region ran on, "host thread N" for others). On GPUs: one lane per CUDA
stream ("stream 7") with its kernels, one per copy direction ("DMA h2d") with
its memcpys and bytes. Slices link to the region's recorded operators: a
Kineto operator matches the recorded operator of the same name whose span it
contains (clocks aligned by wall time, then refined on the matches); device
work links through its correlation id to the runtime call that launched it and
the operator around that call.
"""

from __future__ import annotations

import bisect
import dataclasses
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from portscope.ingest.kineto_vocabulary import (
    KINETO_DEVICE_CATEGORIES,
    KINETO_RUNTIME_CATEGORIES,
    copy_direction,
)
from portscope.ingest.schema import Direction, EngineKind, SliceKind

from .events import OpEvent

_DMA = {Direction.H2D: EngineKind.DMA_H2D, Direction.D2H: EngineKind.DMA_D2H, Direction.D2D: EngineKind.DMA_D2D}
_active: list[Any] = []  # the torch profiler running for a region (one at a time)


@dataclasses.dataclass
class MeasuredTimeline:
    """Kineto events on one clock (ns). ops: (start, dur, name, thread); runtime: (start, dur, name, thread,
    correlation); device: (start, dur, cat, name, device, stream, correlation, bytes)."""

    ops: list[tuple] = dataclasses.field(default_factory=list)
    runtime: list[tuple] = dataclasses.field(default_factory=list)
    device: list[tuple] = dataclasses.field(default_factory=list)
    main_thread: Any = None


class TimelineRecorder:
    """torch.profiler around a region; stop() returns its events on the recorder's clock (perf_counter ns)."""

    def __init__(self) -> None:
        self._prof: Any = None

    def start(self) -> bool:
        """Start the profiler; False when another region's profiler already runs (nested regions share it)."""
        if _active:
            return False
        import torch
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self._prof = profile(activities=activities)
        self._prof.__enter__()
        _active.append(self)
        return True

    def stop(self) -> MeasuredTimeline:
        self._prof.__exit__(None, None, None)
        _active.remove(self)
        offset = time.perf_counter_ns() - time.time_ns()  # Kineto times are wall-clock ns
        return from_kineto_results(self._prof.profiler.kineto_results.events(), offset)


def activity_of(event: Any) -> str:
    """Kineto's activity category; torch < 2.6 events have no `activity_type`, so it is inferred."""
    if hasattr(event, "activity_type"):
        return str(event.activity_type())
    name = event.name()
    if str(event.device_type()).rsplit(".", 1)[-1] != "CPU":
        lowered = name.lower()
        return "gpu_memcpy" if "memcpy" in lowered else "gpu_memset" if "memset" in lowered else "kernel"
    if event.is_user_annotation():
        return "user_annotation"
    if name.startswith(("cuda", "hip")) and event.correlation_id():
        return "cuda_runtime"
    return "cpu_op"


def from_kineto_results(events: Any, offset_ns: int) -> MeasuredTimeline:
    """A live profiler's `_KinetoEvent`s, shifted by offset_ns onto the recorder's clock."""
    tl = MeasuredTimeline()
    counts: dict[Any, int] = {}
    for e in events:
        cat = activity_of(e)
        start, dur = e.start_ns() + offset_ns, max(e.duration_ns(), 0)
        if cat == "cpu_op":
            thread = e.device_resource_id()
            tl.ops.append((start, dur, e.name(), thread))
            counts[thread] = counts.get(thread, 0) + 1
        elif cat in KINETO_RUNTIME_CATEGORIES:
            tl.runtime.append((start, dur, e.name(), e.device_resource_id(), e.correlation_id()))
        elif cat in KINETO_DEVICE_CATEGORIES:
            tl.device.append((start, dur, cat, e.name(), e.device_index(), e.device_resource_id(), e.correlation_id(),
                              e.nbytes() or None))
    tl.main_thread = max(counts, key=counts.__getitem__) if counts else None
    return tl


def from_kineto_file(path: str | Path) -> MeasuredTimeline:
    """A recorded Kineto Chrome trace (.json / .json.gz), times in ns from its first event."""
    from portscope.ingest.readers import collect_kineto_file

    path = Path(path)
    ev, _lanes = collect_kineto_file(path)
    t0 = ev.t_min if ev.t_min != float("inf") else 0.0

    def ns(ts: float) -> int:
        return int(round((ts - t0) * 1000.0))

    tl = MeasuredTimeline()
    counts: dict[Any, int] = {}
    for ts, dur, name, _pid, tid, *_ in ev.ops:
        tl.ops.append((ns(ts), max(ns(ts + dur) - ns(ts), 0), name, tid))
        counts[tid] = counts.get(tid, 0) + 1
    for ts, dur, name, _pid, tid, corr, *_ in ev.runtime:  # then external id, bytes, copy kind
        tl.runtime.append((ns(ts), max(ns(ts + dur) - ns(ts), 0), name, tid, corr))
    for ts, dur, cat, name, dev, stream, corr, nbytes in ev.device:
        tl.device.append((ns(ts), max(ns(ts + dur) - ns(ts), 0), cat, name, dev, stream, corr, nbytes))
    tl.main_thread = max(counts, key=counts.__getitem__) if counts else None
    return tl


def _match_ops(tl: MeasuredTimeline, events: Sequence[OpEvent], shift: int, tol: int) -> tuple[dict[int, int], list[int]]:
    """Kineto op index -> recorded op_id (innermost same-name op containing the recorded span); the offsets seen."""
    by_name: dict[str, list[tuple[int, int]]] = {}
    for k, (s, _d, name, _t) in enumerate(tl.ops):
        by_name.setdefault(name, []).append((s, k))
    for v in by_name.values():
        v.sort()
    matched: dict[int, int] = {}
    offsets: list[int] = []
    for ev in events:
        cands = by_name.get(ev.name) or by_name.get(ev.packet)  # Kineto names carry no overload
        if not cands:
            continue
        t0, t1 = ev.start_ns + shift, ev.start_ns + ev.dur_ns + shift
        hi = bisect.bisect_right(cands, (t0 + tol, 1 << 62))
        best = None
        for s, k in reversed(cands[max(hi - 64, 0):hi]):
            d = tl.ops[k][1]
            if s + d >= t1 - tol and k not in matched and (best is None or d < tl.ops[best][1]):
                best = k
        if best is not None:
            matched[best] = ev.op_id
            offsets.append(tl.ops[best][0] - (ev.start_ns + shift))
    return matched, offsets


def timeline_columns(tl: MeasuredTimeline, regions: Sequence[tuple[int, int, int, Sequence[OpEvent]]]) -> dict[str, list]:
    """Engine-slice columns of a measured timeline. regions: (region_id, start_ns, end_ns, recorded ops),
    outermost first, on the timeline's clock; events outside every region are dropped."""
    events = [ev for r in regions for ev in r[3]]
    matched, offsets = _match_ops(tl, events, 0, 2_000_000)
    if offsets:  # refine the clock offset on the first matches, then match tightly
        matched, _ = _match_ops(tl, events, int(statistics.median(offsets)), 50_000)
    spans = sorted((s, e, rid) for rid, s, e, _ in regions)
    lo, hi = (min(s for s, _, _ in spans), max(e for _, e, _ in spans)) if spans else (0, 1 << 62)

    def region_of(t: int) -> int | None:
        inner = None
        for s, e, rid in spans:
            if s <= t <= e:
                inner = rid
        return inner

    cols: dict[str, list] = {k: [] for k in ("region_id", "engine", "engine_kind", "kind", "name", "start", "dur", "op_id",
                                             "bytes", "correlation", "module", "waited_on")}  # fmt: skip
    module_of = {ev.op_id: ev.module for ev in events}

    def add(rid: Any, engine: str, ekind: EngineKind, kind: SliceKind, name: str, s: int, d: int, op: Any, nbytes: Any,
            corr: Any, wait: str | None) -> None:
        for key, value in (("region_id", rid), ("engine", engine), ("engine_kind", ekind.value), ("kind", kind.value),
                           ("name", name), ("start", s), ("dur", d), ("op_id", op), ("bytes", nbytes),
                           ("correlation", corr if type(corr) is int else None),
                           ("module", module_of.get(op)), ("waited_on", wait)):  # fmt: skip
            cols[key].append(value)

    # host lanes: top-level operators per thread; an operator links to its own match or its first matched descendant
    order = sorted(range(len(tl.ops)), key=lambda k: (tl.ops[k][3] if type(tl.ops[k][3]) is int else 0, tl.ops[k][0],
                                                      -tl.ops[k][1]))  # fmt: skip
    top = [-1] * len(tl.ops)
    open_: list[tuple[int, int, Any]] = []  # (end, top index, thread)
    for k in order:
        s, d, name, thread = tl.ops[k]
        while open_ and (open_[-1][2] != thread or open_[-1][0] <= s):
            open_.pop()
        top[k] = open_[0][1] if open_ else k
        open_.append((s + d, top[k], thread))
    top_op: dict[int, int] = {}
    for k in sorted(matched, key=lambda k: tl.ops[k][0]):
        top_op.setdefault(top[k], matched[k])
    for k in order:
        if top[k] != k:
            continue
        s, d, name, thread = tl.ops[k]
        if lo <= s <= hi:
            lane = "host" if thread == tl.main_thread else f"host thread {thread}"
            add(region_of(s), lane, EngineKind.HOST, SliceKind.COMPUTE, name, s, d, top_op.get(k), None, None, None)
    # device work: correlation -> runtime call -> the (top-level) operator around it
    starts = {}
    for k in order:
        starts.setdefault(tl.ops[k][3], []).append((tl.ops[k][0], k))
    launch: dict[Any, tuple[int, Any]] = {}  # correlation -> (launch end, op_id)
    for s, d, _name, thread, corr in tl.runtime:
        ops_t = starts.get(thread, [])
        p = bisect.bisect_right(ops_t, (s, 1 << 62)) - 1
        op = None
        if p >= 0:
            k = ops_t[p][1]
            op = matched.get(k, top_op.get(top[k]))
        if corr is not None:
            launch[corr] = (s + d, op)
    multi = len({x[4] for x in tl.device}) > 1
    last_end: dict[str, int] = {}
    for s, d, cat, name, dev, stream, corr, nbytes in sorted(tl.device, key=lambda x: x[0]):
        if not lo <= s <= hi:
            continue
        prefix = f"cuda:{dev} " if multi else ""
        if cat == "gpu_memcpy":
            direction = copy_direction(name) or Direction.D2D
            engine, ekind, kind = f"{prefix}DMA {direction.value}", _DMA[direction], SliceKind.TRANSFER
        else:
            engine, ekind, kind = f"{prefix}stream {stream}", EngineKind.STREAM, SliceKind.COMPUTE
        launched_at, op = launch.get(corr, (None, None))
        prev = last_end.get(engine)
        wait = "dispatch" if prev is not None and s > prev and launched_at is not None and launched_at >= prev else None
        last_end[engine] = max(prev or 0, s + d)
        add(region_of(s), engine, ekind, kind, name, s, d, op, nbytes if cat != "kernel" else None, corr, wait)
    return cols



def add_timeline(builder: Any, region: Any, decoded: dict[int, tuple[int, list[OpEvent]]], t_base: int) -> None:
    """Append the slices of `region.timeline` (it and its nested regions) to builder.engine_slices."""
    tl: MeasuredTimeline = region.timeline
    shifted = MeasuredTimeline(
        [(s - t_base, *rest) for s, *rest in tl.ops], [(s - t_base, *rest) for s, *rest in tl.runtime],
        [(s - t_base, *rest) for s, *rest in tl.device], tl.main_thread)
    regions, todo = [], [region]
    while todo:
        r = todo.pop(0)
        if id(r) in decoded:
            rid, events = decoded[id(r)]
            regions.append((rid, r.start_ns - t_base, r.end_ns - t_base, events))
        todo.extend(r.children)
    builder.engine_slices.extend(timeline_columns(shifted, regions))


__all__ = ["MeasuredTimeline", "TimelineRecorder", "activity_of", "add_timeline", "from_kineto_file", "from_kineto_results",
           "timeline_columns"]
