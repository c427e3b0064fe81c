"""The nesting sweep of a Kineto trace's operators, Python frames and runtime calls, by time buckets (the sliced
path of ``_kineto_gpu``).

Which operator encloses each operator and each runtime call, which Python frames are open over each operator:
the sweep of the linker (``_kineto_link._nest``), by time buckets. Operators, frames and runtime calls are
distributed into temporary files by start time (bounds from a sample of the times, ~1M events a bucket); each
bucket is sorted as the linker sorts the whole trace (thread, start, longest first, frames before operators
before runtime calls, index) and swept with each thread's open operators and frames carried from bucket to
bucket. Buckets are disjoint ranges of start time, so every thread's events are swept in the linker's order: the
same parents, whatever the order of the file. Call sites are keyed by the names of the open frames; stacks are
interned (ids, frames table) in the order the linker's one thread-by-thread sweep first meets each key, not the
buckets' time order.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np

from ..builder import TraceBuilder
from ._kineto_events import KinetoEvents
from ._kineto_link import _call_site, _ns, _Regions
from ._spill import DiskColumn

BUCKET_EVENTS = 1 << 20  # operators and runtime calls sorted and swept at a time (and runtime calls joined)
HOLD_ROWS = 1 << 20  # values of a per-event column (parents, regions, keys...) held in memory before it spills
WINDOW_ROWS = 1 << 21  # values of a spilled column read at a time by a gather or a scatter
CHUNK_ROWS = 1 << 18  # runtime calls or device slices made into one record batch
_SWEEP_SLICE = 1 << 16  # sorted rows turned into Python values at a time
_SAMPLES = 1 << 16  # start times sampled to place the buckets' bounds
_FRAME, _OP, _CALL = 0, 1, 2  # kinds in the sweep's order (the linker's: Python frames, operators, runtime calls)
_RECORD = np.dtype([("thread", "<i4"), ("kind", "<i1"), ("index", "<i8"), ("ts", "<f8"), ("nd", "<f8"), ("name", "<i4")])
_TS, _DUR, _NAME, _PID, _TID = 0, 1, 2, 3, 4  # the fields runtime calls and Python frames share
RUNTIME_TS, RUNTIME_DUR, RUNTIME_NAME, RUNTIME_PID, RUNTIME_TID, RUNTIME_CORR, RUNTIME_SIZE = 0, 1, 2, 3, 4, 5, 7
DEV_TS, DEV_DUR, DEV_CAT, DEV_NAME, DEV_DEVICE, DEV_STREAM, DEV_CORR, DEV_BYTES = range(8)


def _threads(pid: np.ndarray, tid: np.ndarray, values: list, codes: dict) -> np.ndarray:
    """The sweep's thread code of each row (pid, tid codes into values): new (pid, tid) pairs get the next codes in
    order of first appearance, as the linker's sweep numbers them."""
    pair = pid.astype(np.int64) << 32 | tid.astype(np.int64)
    distinct, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    thread = np.zeros(len(distinct), dtype=np.int32)
    for j in np.argsort(first, kind="stable").tolist():
        p = int(distinct[j])
        thread[j] = codes.setdefault((values[p >> 32], values[p & 0xFFFFFFFF]), len(codes))
    return thread[inverse.reshape(-1)]


class Link:
    """What the tables need of every operator and runtime call: the sweep's parents, operators' regions, names and
    call sites (a key per operator into the distinct stacks of open Python frames)."""

    def __init__(self, ev: KinetoEvents, t0: float, regions: _Regions, b: TraceBuilder) -> None:
        self.ev, self.t0, self.regions = ev, t0, regions
        ops = ev.ops
        n_ops, n_calls = len(ops), len(ev.runtime)
        index = "i" if n_ops < 2**31 else "q"  # 4 bytes an operator or call where ids fit
        self.op_name, self.op_region = column("i"), column("i")
        self.op_parent = filled(index, n_ops, -1)
        self.runtime_op = filled(index, n_calls, -1)
        self.op_key = filled("i", n_ops if len(ev.python) else 0, -1)  # -1: no Python frame open (keys as the sweep met them)
        self.key_site: list[str | None] = []  # per key: the call site and the stack id, interned as the linker does
        self.key_stack: list[int | None] = []
        self.renumber = np.zeros(0, dtype=np.int32)  # the sweep's key -> the linker's
        codes = {t: i for i, t in enumerate(ops.threads)}  # the linker's sweep groups by (pid, tid)
        buckets = Buckets(n_ops + n_calls + len(ev.python), self._start_samples, _RECORD)
        first = 0
        for part in ops.slices():
            n = len(part["ts"])
            self.op_name.extend(part["name"])
            self.op_region.extend(regions.find_many(_ns(part["ts"], t0)))
            buckets.add(_records(part["thread"], _OP, first, part["ts"], part["dur"]), part["ts"])
            first += n
        for rows, kind in ((ev.python, _FRAME), (ev.runtime, _CALL)):  # threads new to the sweep: frames' first, as it does
            for lo, part in rows.chunks(CHUNK_ROWS):
                thread = _threads(part[_PID], part[_TID], rows.values, codes)
                buckets.add(_records(thread, kind, lo, part[_TS], part[_DUR], part[_NAME] if kind == _FRAME else None), part[_TS])
        self._sweep(buckets, b)

    def _start_samples(self) -> np.ndarray:
        ev = self.ev
        step = max(1, (len(ev.ops) + len(ev.runtime) + len(ev.python)) // _SAMPLES)
        samples = [part["ts"][::step] for part in ev.ops.slices()]
        samples += [part[_TS][::step] for rows in (ev.python, ev.runtime) for _, part in rows.chunks(CHUNK_ROWS)]
        return np.concatenate(samples)

    def _sweep(self, buckets: Buckets, b: TraceBuilder) -> None:
        """The linker's nesting sweep, bucket by bucket, each thread's open operators and frames carried across
        buckets; then the call sites interned in the order the linker's one sweep of the whole trace meets them."""
        open_ops: dict[int, list[tuple[float, int]]] = {}
        open_frames: dict[int, list[tuple[float, int]]] = {}  # (end, name code)
        keys: dict[tuple[int, ...], int] = {}
        first_seen: list[tuple] = []  # per key: the sort key of the first operator under it
        op_parent, runtime_op, op_key = self.op_parent, self.runtime_op, self.op_key
        for rec in buckets:
            order = np.lexsort((rec["index"], rec["kind"], rec["nd"], rec["ts"], rec["thread"]))
            current = None
            ops_open: list[tuple[float, int]] = []
            py_open: list[tuple[float, int]] = []
            op_rows: list[int] = []
            op_parents: list[int] = []
            call_rows: list[int] = []
            call_ops: list[int] = []
            key_rows: list[int] = []
            key_ids: list[int] = []
            for lo in range(0, len(order), _SWEEP_SLICE):
                part = order[lo : lo + _SWEEP_SLICE]
                for th, t, nd, k, i, name in zip(rec["thread"][part].tolist(), rec["ts"][part].tolist(), rec["nd"][part].tolist(),
                                                 rec["kind"][part].tolist(), rec["index"][part].tolist(), rec["name"][part].tolist(),
                                                 strict=True):  # fmt: skip
                    if th != current:
                        current = th
                        ops_open = open_ops.setdefault(th, [])
                        py_open = open_frames.setdefault(th, [])
                    while ops_open and ops_open[-1][0] <= t:
                        ops_open.pop()
                    while py_open and py_open[-1][0] <= t:
                        py_open.pop()
                    if k == _OP:
                        if ops_open:
                            op_rows.append(i)
                            op_parents.append(ops_open[-1][1])
                        if py_open:
                            stack = tuple(c for _, c in py_open)
                            key = keys.get(stack)
                            if key is None:
                                key = keys[stack] = len(first_seen)
                                first_seen.append((th, t, nd, k, i))
                            elif (th, t, nd, k, i) < first_seen[key]:
                                first_seen[key] = (th, t, nd, k, i)
                            key_rows.append(i)
                            key_ids.append(key)
                        ops_open.append((t - nd, i))
                    elif k == _FRAME:
                        py_open.append((t - nd, name))
                    elif ops_open:
                        call_rows.append(i)
                        call_ops.append(ops_open[-1][1])
            op_parent.put(np.array(op_rows, dtype=np.int64), np.array(op_parents, dtype=np.int64), WINDOW_ROWS)
            runtime_op.put(np.array(call_rows, dtype=np.int64), np.array(call_ops, dtype=np.int64), WINDOW_ROWS)
            op_key.put(np.array(key_rows, dtype=np.int64), np.array(key_ids, dtype=np.int32), WINDOW_ROWS)
        stacks = list(keys)
        renumber = np.zeros(len(stacks), dtype=np.int32)
        names, cache = self.ev.python.values if len(stacks) else [], {}
        for new, old in enumerate(sorted(range(len(stacks)), key=first_seen.__getitem__)):
            renumber[old] = new
            site, stack_id = _call_site(b, [names[c] for c in stacks[old]], cache)
            self.key_site.append(site)
            self.key_stack.append(stack_id)
        self.renumber = renumber

    def keys(self, ops: np.ndarray) -> np.ndarray:
        """The call-site key (into key_site, key_stack) of some operators (ids, -1: none); -1 where no frame was open."""
        ops = np.asarray(ops, dtype=np.int64)
        if not len(self.op_key) or not len(ops):
            return np.full(len(ops), -1, dtype=np.int32)
        key = np.where(ops >= 0, take(self.op_key, np.maximum(ops, 0)), -1)
        return np.where(key >= 0, self.renumber[np.maximum(key, 0)] if len(self.renumber) else -1, -1).astype(np.int32)

    def launched(self, device_call: DiskColumn) -> DiskColumn:
        """Per operator (int8): it or an operator inside it launched device work (the linker's `launched`), walked up
        the parents from the operators of a chunk of device work at a time."""
        launched = filled("b", len(self.op_parent), 0)
        for _, calls in device_call.blocks(CHUNK_ROWS):
            frontier = take(self.runtime_op, calls[calls >= 0])
            frontier = np.unique(frontier[frontier >= 0])
            while len(frontier):
                frontier = frontier[take(launched, frontier) == 0]
                launched.put(frontier, 1, WINDOW_ROWS)
                parents = take(self.op_parent, frontier)
                frontier = np.unique(parents[parents >= 0])
        return launched

    def ns(self, ts: float) -> int:
        return int(round((ts - self.t0) * 1000.0))

    def inside_sync(self, ops: np.ndarray, sync_codes: np.ndarray) -> np.ndarray:
        """Per operator (ids, -1: none): it or an operator around it is a sync operator (its name code in sync_codes)."""
        at = np.asarray(ops, dtype=np.int64).copy()
        inside = np.zeros(len(at), dtype=bool)
        live = np.flatnonzero(at >= 0)
        while len(live):
            hit = np.isin(take(self.op_name, at[live]), sync_codes)
            inside[live[hit]] = True
            live = live[~hit]
            at[live] = take(self.op_parent, at[live])
            live = live[at[live] >= 0]
        return inside


class Buckets:
    """Records distributed by a key (start time, correlation id): one array in memory when they fit in one bucket,
    else one temporary file a bucket, bounds at quantiles of a sample of the keys (~BUCKET_EVENTS records a bucket)."""

    def __init__(self, total: int, samples: Callable[[], np.ndarray], dtype: np.dtype, per_bucket: int | None = None) -> None:
        self.dtype = dtype
        self.count = max(1, -(-total // (per_bucket or BUCKET_EVENTS)))  # per_bucket: records a bucket, if not BUCKET_EVENTS
        self.bounds = np.zeros(0)
        if self.count > 1:
            self.bounds = np.unique(np.quantile(samples(), np.linspace(0, 1, self.count + 1)[1:-1], method="lower"))
        self.count = len(self.bounds) + 1
        self._held: list[np.ndarray] = []
        self._files: list[BinaryIO] = []
        if self.count > 1:
            self._files = [tempfile.TemporaryFile(prefix="portscope-sweep-") for _ in range(self.count)]  # noqa: SIM115

    def add(self, rec: np.ndarray, key: np.ndarray) -> None:
        """Add records (of the buckets' dtype), each to the bucket of its key."""
        if not self._files:
            self._held.append(rec)
            return
        which = np.searchsorted(self.bounds, key, side="right")
        order = np.argsort(which, kind="stable")
        cuts = np.searchsorted(which[order], np.arange(self.count + 1))
        for k in range(self.count):
            if cuts[k] < cuts[k + 1]:
                rec[order[cuts[k] : cuts[k + 1]]].tofile(self._files[k])

    def __iter__(self) -> Iterator[np.ndarray]:
        """Each bucket's records in the order they were added, bucket by bucket in key order (each read once)."""
        if not self._files:
            yield np.concatenate(self._held) if self._held else np.zeros(0, dtype=self.dtype)
            self._held = []
            return
        for f in self._files:
            f.seek(0)
            rec = np.fromfile(f, dtype=self.dtype)
            f.close()
            yield rec
        self._files = []


def _records(thread: np.ndarray, kind: int, first: int, ts: np.ndarray, dur: np.ndarray, name: np.ndarray | None = None) -> np.ndarray:
    """The sweep's records of consecutive events from index `first` on."""
    rec = np.empty(len(ts), dtype=_RECORD)
    rec["thread"], rec["kind"], rec["index"], rec["ts"], rec["nd"] = thread, kind, np.arange(first, first + len(ts)), ts, -dur
    rec["name"] = name if name is not None else -1
    return rec


def column(typecode: str) -> DiskColumn:
    """An empty per-event column, spilled past HOLD_ROWS values."""
    return DiskColumn(typecode, HOLD_ROWS)


def filled(typecode: str, n: int, value: int) -> DiskColumn:
    """A per-event column of n values, each `value`."""
    out = column(typecode)
    for lo in range(0, n, HOLD_ROWS):
        out.extend(np.full(min(HOLD_ROWS, n - lo), value, dtype=out.dtype))
    return out


def take(values: DiskColumn, index: np.ndarray) -> np.ndarray:
    """values[index], a window of WINDOW_ROWS values read at a time. An empty column gives -1 (no link) for each
    index: callers pass np.maximum(link, 0) and mask the links that are -1, which is every one when there is no
    row to link to (e.g. device work whose correlation names no runtime call in a trace with none)."""
    if not len(values):
        return np.full(len(index), -1, dtype=values.dtype)
    return values.take(index, WINDOW_ROWS)


__all__ = ["BUCKET_EVENTS", "CHUNK_ROWS", "DEV_BYTES", "DEV_CAT", "DEV_CORR", "DEV_DEVICE", "DEV_DUR", "DEV_NAME",
           "DEV_STREAM", "DEV_TS", "RUNTIME_CORR", "RUNTIME_DUR", "RUNTIME_NAME", "RUNTIME_PID", "RUNTIME_SIZE",
           "RUNTIME_TID", "RUNTIME_TS", "Buckets", "Link", "column", "filled", "take"]  # fmt: skip
