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

BUCKET_EVENTS = 1 << 20  # operators and runtime calls sorted and swept at a time
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
        self.op_name = np.zeros(n_ops, dtype=np.int32)
        self.op_region = np.zeros(n_ops, dtype=np.int32)
        index = np.int32 if n_ops < 2**31 else np.int64  # 4 bytes an operator or call where ids fit
        self.op_parent = np.full(n_ops, -1, dtype=index)
        self.runtime_op = np.full(n_calls, -1, dtype=index)
        self.op_key = np.full(n_ops if len(ev.python) else 0, -1, dtype=np.int32)  # -1: no Python frame open
        self.key_site: list[str | None] = []  # per key: the call site and the stack id, interned as the linker does
        self.key_stack: list[int | None] = []
        codes = {t: i for i, t in enumerate(ops.threads)}  # the linker's sweep groups by (pid, tid)
        buckets = _Buckets(n_ops + n_calls + len(ev.python), self._start_samples)
        first = 0
        for part in ops.slices():
            n = len(part["ts"])
            start = _ns(part["ts"], t0)
            self.op_name[first : first + n] = part["name"]
            self.op_region[first : first + n] = regions.find_many(start)
            buckets.add(part["thread"], _OP, first, part["ts"], part["dur"])
            first += n
        for rows, kind in ((ev.python, _FRAME), (ev.runtime, _CALL)):  # threads new to the sweep: frames' first, as it does
            for lo, part in rows.chunks(CHUNK_ROWS):
                thread = _threads(part[_PID], part[_TID], rows.values, codes)
                buckets.add(thread, kind, lo, part[_TS], part[_DUR], part[_NAME] if kind == _FRAME else None)
        self._sweep(buckets, b)

    def _start_samples(self) -> np.ndarray:
        ev = self.ev
        step = max(1, (len(ev.ops) + len(ev.runtime) + len(ev.python)) // _SAMPLES)
        samples = [part["ts"][::step] for part in ev.ops.slices()]
        samples += [part[_TS][::step] for rows in (ev.python, ev.runtime) for _, part in rows.chunks(CHUNK_ROWS)]
        return np.concatenate(samples)

    def _sweep(self, buckets: _Buckets, b: TraceBuilder) -> None:
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
            op_parent[np.array(op_rows, dtype=np.int64)] = np.array(op_parents, dtype=np.int64)
            runtime_op[np.array(call_rows, dtype=np.int64)] = np.array(call_ops, dtype=np.int64)
            op_key[np.array(key_rows, dtype=np.int64)] = np.array(key_ids, dtype=np.int32)
        stacks = list(keys)
        renumber = np.zeros(len(stacks), dtype=np.int32)
        names, cache = self.ev.python.values if len(stacks) else [], {}
        for new, old in enumerate(sorted(range(len(stacks)), key=first_seen.__getitem__)):
            renumber[old] = new
            site, stack_id = _call_site(b, [names[c] for c in stacks[old]], cache)
            self.key_site.append(site)
            self.key_stack.append(stack_id)
        if len(op_key):
            op_key[op_key >= 0] = renumber[op_key[op_key >= 0]]

    def site(self, oi: int) -> tuple[str | None, int | None]:
        """(call site, stack id) of one operator (-1: none)."""
        key = int(self.op_key[oi]) if oi >= 0 and len(self.op_key) else -1
        return (self.key_site[key], self.key_stack[key]) if key >= 0 else (None, None)

    def launched(self, device_call: np.ndarray) -> np.ndarray:
        """Per operator: it or an operator inside it launched device work (the linker's `launched`)."""
        launched = np.zeros(len(self.op_parent), dtype=bool)
        calls = device_call[device_call >= 0]
        frontier = self.runtime_op[calls]
        frontier = np.unique(frontier[frontier >= 0])
        while len(frontier):
            frontier = frontier[~launched[frontier]]
            launched[frontier] = True
            parents = self.op_parent[frontier]
            frontier = np.unique(parents[parents >= 0])
        return launched

    def ns(self, ts: float) -> int:
        return int(round((ts - self.t0) * 1000.0))

    def inside_sync(self, oi: int, sync_codes: set[int]) -> bool:
        while oi >= 0:
            if int(self.op_name[oi]) in sync_codes:
                return True
            oi = int(self.op_parent[oi])
        return False


class _Buckets:
    """Events (operators, runtime calls) distributed by start time: one array in memory when they fit in one
    bucket, else one temporary file a bucket, bounds at quantiles of a sample of the start times."""

    def __init__(self, total: int, samples: Callable[[], np.ndarray]) -> None:
        self.count = max(1, -(-total // BUCKET_EVENTS))
        self.bounds = np.zeros(0)
        if self.count > 1:
            self.bounds = np.unique(np.quantile(samples(), np.linspace(0, 1, self.count + 1)[1:-1]))
        self.count = len(self.bounds) + 1
        self._held: list[np.ndarray] = []
        self._files: list[BinaryIO] = []
        if self.count > 1:
            self._files = [tempfile.TemporaryFile(prefix="portscope-sweep-") for _ in range(self.count)]  # noqa: SIM115

    def add(self, thread: np.ndarray, kind: int, first: int, ts: np.ndarray, dur: np.ndarray, name: np.ndarray | None = None) -> None:
        rec = np.empty(len(ts), dtype=_RECORD)
        rec["thread"], rec["kind"], rec["index"], rec["ts"], rec["nd"] = thread, kind, np.arange(first, first + len(ts)), ts, -dur
        rec["name"] = name if name is not None else -1
        if not self._files:
            self._held.append(rec)
            return
        which = np.searchsorted(self.bounds, ts, side="right")
        order = np.argsort(which, kind="stable")
        cuts = np.searchsorted(which[order], np.arange(self.count + 1))
        for k in range(self.count):
            if cuts[k] < cuts[k + 1]:
                rec[order[cuts[k] : cuts[k + 1]]].tofile(self._files[k])

    def __iter__(self) -> Iterator[np.ndarray]:
        if not self._files:
            yield np.concatenate(self._held) if self._held else np.zeros(0, dtype=_RECORD)
            self._held = []
            return
        for f in self._files:
            f.seek(0)
            rec = np.fromfile(f, dtype=_RECORD)
            f.close()
            yield rec
        self._files = []


__all__ = ["BUCKET_EVENTS", "CHUNK_ROWS", "DEV_BYTES", "DEV_CAT", "DEV_CORR", "DEV_DEVICE", "DEV_DUR", "DEV_NAME",
           "DEV_STREAM", "DEV_TS", "RUNTIME_CORR", "RUNTIME_DUR", "RUNTIME_NAME", "RUNTIME_PID", "RUNTIME_SIZE",
           "RUNTIME_TID", "RUNTIME_TS", "Link"]  # fmt: skip
