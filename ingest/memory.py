"""Memory per region, from a trace's memory lanes (FORMAT.md; `schema.MEMORY_ENGINE_PREFIX`): per device the peak
of allocated bytes, the bytes live when the region ends, its allocations and the call sites that allocated most;
and two regions' memory compared.

A memory lane's allocated slices hold the allocator's running total; an event's own bytes are the change from the
slice before it (the lane starts with a slice of no length holding the total before its first event). An event
belongs to a region when it happens inside the region's time (its start in [start, end]), as the region's peak in
the regions table is computed; an allocation (bytes > 0) is attributed to the call site of the operator around it.
In a multi-rank run a region's memory is its rank's only: each rank's lanes are its own devices (``memory rank 1 ·
cuda:0``, `rank_merge.rank_lane`), the other ranks' run at the same time.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from . import arrow_compute as pc
from .callsites import site_line
from .rank_merge import LANE_RANK, lane_rank, rank_of_regions
from .region_tree import descendants
from .schema import MEMORY_ALLOCATED, MEMORY_RESERVED, memory_device
from .trace import Trace
from .viewport import dictionary_codes

__all__ = ["DEVICE_COLUMNS", "SITE_COLUMNS", "Levels", "MemoryAt", "MemoryDiff", "MemoryLane", "RegionMemory", "RunMemory", "allocator_lanes",
           "levels", "memory_at", "memory_diff", "region_memory"]

DEVICE_COLUMNS = ["device", "peak_bytes", "live_at_exit_bytes", "allocations", "allocated_bytes", "peak_reserved_bytes"]
SITE_COLUMNS = ["device", "call_site", "allocations", "allocated_bytes"]
NO_SITE = "(no call site)"


@dataclasses.dataclass(frozen=True)
class MemoryLane:
    """One device's allocator events in time order: the time, the total allocated after it, its own bytes (the
    change; NaN-free: 0 for the leading slice), the operator around it (-1: none); and the reserved totals."""

    device: str
    start: np.ndarray
    total: np.ndarray
    delta: np.ndarray
    op_id: np.ndarray
    region_id: np.ndarray
    reserved_start: np.ndarray
    reserved: np.ndarray


def allocator_lanes(trace: Trace) -> list[MemoryLane]:
    """The trace's memory lanes, one per device, by device name."""
    slices = trace["engine_slices"]
    if not slices.num_rows:
        return []
    engine, engines = dictionary_codes(slices.column("engine"))
    devices = [memory_device(e) for e in engines]
    lanes = [k for k, d in enumerate(devices) if d is not None]
    if not lanes:
        return []
    rows = np.flatnonzero(np.isin(engine, lanes))
    picked = slices.take(rows)
    name_codes, names = dictionary_codes(picked.column("name"))
    name = np.array([*names, None], dtype=object)[name_codes]
    start, nbytes = (pc.int_values(picked.column(c).combine_chunks()) for c in ("start", "bytes"))
    op = pc.int_values(picked.column("op_id").combine_chunks())
    region = pc.int_values(picked.column("region_id").combine_chunks())
    out = []
    for k in lanes:
        on = engine[rows] == k
        alloc, res = on & (name == MEMORY_ALLOCATED), on & (name == MEMORY_RESERVED)
        order = np.flatnonzero(alloc)[np.argsort(start[alloc], kind="stable")]
        total = nbytes[order]
        delta = np.diff(total, prepend=total[:1])
        r_order = np.flatnonzero(res)[np.argsort(start[res], kind="stable")]
        out.append(MemoryLane(device=devices[k], start=start[order], total=total, delta=delta,
                              op_id=op[order], region_id=region[order], reserved_start=start[r_order],
                              reserved=nbytes[r_order]))  # fmt: skip
    return sorted(out, key=lambda lane: lane.device)


@dataclasses.dataclass(frozen=True)
class RegionMemory:
    """devices: one row per device with memory events (DEVICE_COLUMNS); sites: per device, the call sites of the
    allocations inside the region by bytes allocated (SITE_COLUMNS)."""

    devices: pd.DataFrame
    sites: pd.DataFrame


def _window(trace: Trace, region_id: int) -> tuple[int, int]:
    regions = trace["regions"]
    at = regions.column("region_id").to_pylist().index(region_id)
    start = regions.column("start_ns")[at].as_py()
    return start, start + regions.column("dur_ns")[at].as_py()


def _op_sites(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(op ids sorted, the model line of each, None when it has no call site) of every operator."""
    ops = trace["ops"]
    if not ops.num_rows:
        return np.zeros(0, np.int64), np.zeros(0, dtype=object)
    ids = pc.int_values(ops.column("op_id").combine_chunks())
    codes, sites = dictionary_codes(ops.column("call_site"))
    lines = np.array([site_line(s) if s is not None else None for s in sites] + [None], dtype=object)[codes]
    order = np.argsort(ids, kind="stable")
    return ids[order], lines[order]


class RunMemory:
    """A run's memory lanes and its operators' call sites, read once for as many regions as are asked."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.lanes = allocator_lanes(trace)
        self.op_ids, self.op_lines = _op_sites(trace) if self.lanes else (np.zeros(0, np.int64), np.zeros(0, dtype=object))
        self.lane_ranks = [lane_rank(lane.device) for lane in self.lanes]
        self.region_ranks = rank_of_regions(trace) if any(r is not None for r in self.lane_ranks) else {}

    def region(self, region_id: int) -> RegionMemory:
        """Memory of one region, per device. A predicted run's lanes are on the predicted time axis, not the
        region's measured span: there an event belongs to the region it was predicted in (or one nested in it)."""
        trace = self.trace
        start, end = _window(trace, region_id)
        subtree = np.asarray(descendants(trace, region_id), dtype=np.int64) if trace.predicted else None
        rank = self.region_ranks.get(region_id)
        rows, sites = [], []
        for lane, lane_of in zip(self.lanes, self.lane_ranks, strict=True):
            if rank is not None and lane_of is not None and lane_of != rank:
                continue  # another rank's device
            entering = None  # the total held when the region began (the last event before it): part of its peak
            if subtree is None:
                inside = (lane.start >= start) & (lane.start <= end)
                before = np.searchsorted(lane.start, end, "right")
                reserved_in = (lane.reserved_start >= start) & (lane.reserved_start <= end)
                k = int(np.searchsorted(lane.start, start, "left"))
                entering = int(lane.total[k - 1]) if k else None
            else:
                inside = np.isin(lane.region_id, subtree)
                before = int(np.flatnonzero(inside)[-1]) + 1 if inside.any() else 0
                reserved_in = np.zeros(len(lane.reserved_start), dtype=bool)
            if not inside.any() and not before:
                continue
            alloc = inside & (lane.delta > 0)
            peaks = [int(lane.total[inside].max())] if inside.any() else []
            peaks += [entering] if entering is not None else []
            rows.append({"device": lane.device, "peak_bytes": max(peaks) if peaks else None,
                         "live_at_exit_bytes": int(lane.total[before - 1]) if before else None,
                         "allocations": int(alloc.sum()), "allocated_bytes": int(lane.delta[alloc].sum()),
                         "peak_reserved_bytes": int(lane.reserved[reserved_in].max()) if reserved_in.any() else None})  # fmt: skip
            if alloc.any():
                sites.append(_sites(lane.device, lane.op_id[alloc], lane.delta[alloc], self.op_ids, self.op_lines))
        devices = pd.DataFrame(rows, columns=DEVICE_COLUMNS)
        return RegionMemory(devices=devices, sites=pd.concat(sites, ignore_index=True) if sites else pd.DataFrame(columns=SITE_COLUMNS))


def region_memory(trace: Trace, region_id: int) -> RegionMemory:
    """Memory of one region, per device (`RunMemory` for several regions of one run)."""
    return RunMemory(trace).region(region_id)


def _sites(device: str, op: np.ndarray, nbytes: np.ndarray, op_ids: np.ndarray, op_lines: np.ndarray) -> pd.DataFrame:
    """Allocations of one device grouped by the call site of their operator, most bytes first."""
    line = np.full(len(op), NO_SITE, dtype=object)
    if len(op_ids):
        at = np.minimum(np.searchsorted(op_ids, op), len(op_ids) - 1)
        found = (op >= 0) & (op_ids[at] == op)
        line[found] = [v if v is not None else NO_SITE for v in op_lines[at[found]]]
    frame = pd.DataFrame({"call_site": line, "nbytes": nbytes})
    grouped = frame.groupby("call_site").agg(allocations=("nbytes", "size"), allocated_bytes=("nbytes", "sum")).reset_index()
    grouped.insert(0, "device", device)
    return grouped.sort_values(["allocated_bytes", "call_site"], ascending=[False, True], kind="stable")[SITE_COLUMNS]


@dataclasses.dataclass(frozen=True)
class MemoryDiff:
    """devices: per device, A's and B's peak and live-at-exit bytes with Δ; sites: per (device, call site), bytes
    allocated in A and B, the ones that grew most first."""

    devices: pd.DataFrame
    sites: pd.DataFrame


def _one_rank(memory: RegionMemory) -> RegionMemory:
    """A region of one rank of a merged run with its devices named as the rank named them (``rank 1 · cuda:0`` ->
    ``cuda:0``), so that two ranks' regions compare device by device; any other region as it is."""
    ranks = {lane_rank(d) for d in memory.devices["device"]}
    if len(ranks) != 1 or None in ranks:
        return memory

    def plain(device: str) -> str:
        return device[LANE_RANK.match(device).end() :]  # type: ignore[union-attr]

    devices, sites = memory.devices.copy(), memory.sites.copy()
    devices["device"] = devices["device"].map(plain)
    if len(sites):
        sites["device"] = sites["device"].map(plain)
    return RegionMemory(devices=devices, sites=sites)


def memory_diff(trace_a: Trace, region_a: int, trace_b: Trace, region_b: int) -> MemoryDiff:
    """Two regions' memory side by side, device by device (by name)."""
    run_a = RunMemory(trace_a)
    a, b = run_a.region(region_a), (run_a if trace_b is trace_a else RunMemory(trace_b)).region(region_b)
    a, b = _one_rank(a), _one_rank(b)
    keep = ["device", "peak_bytes", "live_at_exit_bytes", "allocations", "allocated_bytes"]
    devices = a.devices[keep].merge(b.devices[keep], on="device", how="outer", suffixes=("_a", "_b"))
    devices = devices.rename(columns=lambda c: f"{c[-1]}_{c[:-2]}" if c.endswith(("_a", "_b")) else c)
    devices["delta_peak_bytes"] = devices["b_peak_bytes"] - devices["a_peak_bytes"]
    sites = a.sites.merge(b.sites, on=["device", "call_site"], how="outer", suffixes=("_a", "_b")).fillna(0)
    sites = sites.rename(columns=lambda c: f"{c[-1]}_{c[:-2]}" if c.endswith(("_a", "_b")) else c)
    for c in ("a_allocations", "b_allocations", "a_allocated_bytes", "b_allocated_bytes"):
        sites[c] = sites[c].astype("int64")
    sites["delta_bytes"] = sites["b_allocated_bytes"] - sites["a_allocated_bytes"]
    sites = sites.sort_values(["delta_bytes", "device", "call_site"], ascending=[False, True, True], kind="stable").reset_index(drop=True)
    return MemoryDiff(devices=devices.sort_values("device").reset_index(drop=True), sites=sites)


@dataclasses.dataclass(frozen=True)
class Levels:
    """A memory lane's levels over a window as steps: x (twice per change) and the allocated bytes, and the same
    for the reserved bytes; at most about 2 x `px` points each (the greatest level of each pixel column kept)."""

    x: np.ndarray
    allocated: np.ndarray
    reserved_x: np.ndarray
    reserved: np.ndarray


def _steps(times: np.ndarray, values: np.ndarray, x0: float, x1: float, px: int) -> tuple[np.ndarray, np.ndarray]:
    """Step points of a level series over [x0, x1]: the level at x0, each change inside, held to x1."""
    if not len(times) or x1 <= x0:
        return np.zeros(0), np.zeros(0)
    lo, hi = np.searchsorted(times, x0, "right") - 1, np.searchsorted(times, x1, "right")
    t, v = times[max(lo, 0) : hi].astype(np.float64), values[max(lo, 0) : hi].astype(np.float64)
    if not len(t):
        return np.zeros(0), np.zeros(0)
    t[0] = max(t[0], x0)
    if len(t) > 2 * px:  # a pixel column's greatest level: a peak never vanishes at a coarse zoom
        column = np.minimum(((t - x0) / (x1 - x0) * px).astype(np.int64), px - 1)
        starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
        t, v = t[starts], np.maximum.reduceat(v, starts)
    x = np.repeat(t, 2)[1:]
    return np.r_[x, max(float(x1), x[-1])], np.repeat(v, 2)


def levels(lane: MemoryLane, x0: float, x1: float, px: int) -> Levels:
    """The lane's allocated and reserved levels over [x0, x1] as steps, reduced to about `px` columns."""
    x, allocated = _steps(lane.start, lane.total, x0, x1, px)
    reserved_x, reserved = _steps(lane.reserved_start, lane.reserved, x0, x1, px)
    return Levels(x=x, allocated=allocated, reserved_x=reserved_x, reserved=reserved)


@dataclasses.dataclass(frozen=True)
class MemoryAt:
    """A memory lane at one time: the bytes allocated and reserved then (reserved None: no reserved total recorded
    by then), and the allocator event that last set the allocated total: its time, its bytes (the change it made),
    its operator and region (-1: none)."""

    device: str
    time: int
    allocated: int
    reserved: int | None
    event_start: int
    event_bytes: int
    op_id: int
    region_id: int


def memory_at(lane: MemoryLane, time: float) -> MemoryAt | None:
    """The lane's state at `time` (an event at exactly `time` counts); None before its first event."""
    i = int(np.searchsorted(lane.start, time, "right")) - 1
    if i < 0:
        return None
    j = int(np.searchsorted(lane.reserved_start, time, "right")) - 1
    return MemoryAt(device=lane.device, time=int(time), allocated=int(lane.total[i]),
                    reserved=int(lane.reserved[j]) if j >= 0 else None, event_start=int(lane.start[i]),
                    event_bytes=int(lane.delta[i]), op_id=int(lane.op_id[i]), region_id=int(lane.region_id[i]))  # fmt: skip
