"""The tables of a Kineto trace with runtime calls, device work (kernels, copies, memsets) or Python frames, made
slice by slice.

The linker (``_kineto_link.build_trace``) builds every table whole; here the same tables come as
`TableSlices`, each record batch made as `write_trace` writes it, with bounded working state:

* nesting (which operator encloses each operator and each runtime call, which Python frames are open over
  each operator): the sweep of the linker, by time buckets. Operators, frames and runtime calls are
  distributed into temporary files by start time (bounds from a sample of the times, ~1M events a bucket);
  each bucket is sorted as the linker sorts the whole trace (thread, start, longest first, frames before
  operators before runtime calls, index) and swept with each thread's open operators and frames carried
  from bucket to bucket. Buckets are disjoint ranges of start time, so every thread's events are swept in
  the linker's order: the same parents, whatever the order of the file.
* call sites: keyed by the names of the open frames; stacks are interned (ids, frames table) in the order
  the linker's one thread-by-thread sweep first meets each key, not the buckets' time order.
* device work -> runtime call: correlation ids, as the linker joins them (`CorrelationIndex`).
* what every batch of a table shares: Arrow dictionaries. The ops table's are known from code counts; the
  other tables' batches are made twice, the first time only to gather each text column's values in order of
  first appearance (what the whole table's dictionary holds: the builder's order, and the host lanes'
  values before the device lanes' as the linker's concatenation unifies them).

Kept whole in memory, a few bytes an event (~25 MB per GB of a GPU trace): per operator its parent, region,
name code and call-site key (int32 each) and whether it launched device work; per runtime call its operator
(int32); the correlation index (12 bytes a call); per device slice its runtime call (a copy without bytes of
its own: its call's size too). The events' own columns (operators, frames, runtime calls, device work) spill
to temporary files past 1M rows and are read back one slice at a time.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from .. import schema
from ..builder import TableBuilder, TraceBuilder
from ..catalog import (
    BOOL_INDEX_OPS,
    NO_WORK_OPS,
    SYNC_OPS,
    SYNC_RUNTIME_CALLS,
    Cause,
    OpCall,
    cause_hint,
    copy_direction,
    sync_cause,
)
from ..schema import Direction, EngineKind, Placement, SignalKind, SliceKind
from ..trace import TableSlices
from ._kineto_events import KinetoEvents
from ._kineto_link import _DMA, _PLACEMENTS, _call_site, _Coder, _ns, _Regions, _table
from ._kineto_rows import NONE_INT, CorrelationIndex, RowColumns
from ._kineto_slices import OpTable, ns_times

BUCKET_EVENTS = 1 << 20  # operators and runtime calls sorted and swept at a time
CHUNK_ROWS = 1 << 18  # runtime calls or device slices made into one record batch
_SWEEP_SLICE = 1 << 16  # sorted rows turned into Python values at a time
_SAMPLES = 1 << 16  # start times sampled to place the buckets' bounds
_FRAME, _OP, _CALL = 0, 1, 2  # kinds in the sweep's order (the linker's: Python frames, operators, runtime calls)
_RECORD = np.dtype([("thread", "<i4"), ("kind", "<i1"), ("index", "<i8"), ("ts", "<f8"), ("nd", "<f8"), ("name", "<i4")])
_TS, _DUR, _NAME, _PID, _TID = 0, 1, 2, 3, 4  # the fields runtime calls and Python frames share
_RUNTIME_TS, _RUNTIME_DUR, _RUNTIME_NAME, _RUNTIME_PID, _RUNTIME_TID, _RUNTIME_CORR, _RUNTIME_SIZE = 0, 1, 2, 3, 4, 5, 7
_DEV_TS, _DEV_DUR, _DEV_CAT, _DEV_NAME, _DEV_DEVICE, _DEV_STREAM, _DEV_CORR, _DEV_BYTES = range(8)


def gpu_slices(b: TraceBuilder, ev: KinetoEvents, t0: float, regions: _Regions, root_device: str, devices: list, *,
               infer_fallback: bool = False) -> dict[str, TableSlices] | None:  # fmt: skip
    """ops, engine_slices (host then device lanes), transfers, signals and runtime_calls of a trace with runtime
    calls, device work or Python frames, as slices equal to the linker's whole tables (stacks interned into b);
    None where this path does not apply (a value kept aside: an unhashable name, an id that is not an int64):
    the caller links the trace whole. infer_fallback: as the linker's (leaf operators of a GPU trace that launched
    no device work placed as fallbacks, a cpu_fallback signal each)."""
    runtime, device, ops = ev.runtime, ev.device, ev.ops
    if not all(isinstance(rows, RowColumns) for rows in (runtime, device, ev.python)):
        return None
    if runtime.kept_aside() or device.kept_aside() or ev.python.kept_aside():
        return None
    link = _Link(ev, t0, regions, b)
    index = CorrelationIndex(_column(runtime, _RUNTIME_CORR))  # no value aside: every id is an int64 or None
    device_call = np.concatenate([np.zeros(0, dtype=np.int32), *(index.find(part[_DEV_CORR]) for _, part in device.chunks(CHUNK_ROWS))])
    del index
    launched = link.launched(device_call)
    placement = np.where(launched, _DEVICE, _HOST).astype(np.int8)  # codes into _PLACEMENTS
    if infer_fallback and len(device):
        placement[_fallback_guess(link, launched)] = _FALLBACK
    fallbacks = int(np.count_nonzero(placement == _FALLBACK))
    host = _HostLanes(link, placement)
    signals = _sync_signals(link, launched) if len(device) else TableBuilder("signals").build()  # syncs: GPU traces only
    work = _DeviceWork(link, device_call, multi_device=len(devices) > 1)
    return {
        "ops": TableSlices(len(ops), lambda: _op_batches(link, placement, root_device)),
        "engine_slices": _unified("engine_slices", host.rows + len(device),
                                  lambda: _chain(host.batches(), work.batches(_Table.LANES))),
        "transfers": _unified("transfers", work.copies, lambda: work.batches(_Table.TRANSFERS)),
        "signals": _unified("signals", fallbacks + signals.num_rows + work.copies,
                            lambda: _chain(_fallback_batches(link, placement), signals.to_batches(), work.batches(_Table.SIGNALS))),
        "runtime_calls": _unified("runtime_calls", len(runtime), lambda: _runtime_batches(link)),
    }  # fmt: skip


_HOST, _DEVICE, _FALLBACK = (_PLACEMENTS.index(p) for p in (Placement.HOST, Placement.DEVICE, Placement.FALLBACK))


def _fallback_guess(link: _Link, launched: np.ndarray) -> np.ndarray:
    """The linker's --infer-fallback guess per operator: launched nothing, holds no operator, is not an operator that
    does no device work by design, has a typed tensor input, and runs on a thread that launched device work."""
    ev = link.ev
    ops = ev.ops
    has_child = np.zeros(len(launched), dtype=bool)
    has_child[link.op_parent[link.op_parent >= 0]] = True
    name_ok = np.array([n not in NO_WORK_OPS for n in ops.names] or [False], dtype=bool)
    sig_ok = np.array([bool(s[2]) and any(s[2].split(";")) for s in ops.signatures], dtype=bool)
    values, gpu_threads = ev.runtime.values, set()
    for lo, part in ev.runtime.chunks(CHUNK_ROWS):
        inside = link.runtime_op[lo : lo + len(part[0])] >= 0
        pairs = np.unique(part[_RUNTIME_PID][inside].astype(np.int64) << 32 | part[_RUNTIME_TID][inside].astype(np.int64))
        gpu_threads.update((values[p >> 32], values[p & 0xFFFFFFFF]) for p in pairs.tolist())
    thread_ok = np.array([t in gpu_threads for t in ops.threads] or [False], dtype=bool)
    guess = ~launched & ~has_child & name_ok[link.op_name]
    first = 0
    for part in ops.slices():
        n = len(part["ts"])
        guess[first : first + n] &= sig_ok[part["signature"]] & thread_ok[part["thread"]]
        first += n
    return guess


def _fallback_batches(link: _Link, placement: np.ndarray) -> Iterator[pa.RecordBatch]:
    """The cpu_fallback signals of the guessed operators (`_kineto_link.build_trace`), a slice of operators at a time."""
    ops = link.ev.ops
    bytes_in = np.array([s[3] for s in ops.signatures], dtype=np.int64)
    names, note = ops.names, cause_hint(Cause.NO_DEVICE_WORK)
    first = 0
    for part in ops.slices():
        n = len(part["ts"])
        rows = np.flatnonzero(placement[first : first + n] == _FALLBACK)
        if len(rows):
            ids = rows + first
            zeros = np.zeros(len(rows), dtype=np.int64)
            site, stack = link.site_columns(ids)
            yield _table("signals", {
                "region_id": link.op_region[ids], "op_id": ids,
                "kind": _text(zeros, lambda k: SignalKind.CPU_FALLBACK.value),
                "reason": _text(zeros, lambda k: Cause.NO_DEVICE_WORK.value),
                "op_name": _text(part["name"][rows].astype(np.int64), lambda k: names[k]),
                "count": np.ones(len(rows), dtype=np.int64), "bytes": bytes_in[part["signature"][rows]],
                "call_site": site, "stack_id": stack, "note": _text(zeros, lambda k: note),
                "time_ns": _ns(part["ts"][rows], link.t0)}).to_batches()[0]  # fmt: skip
        first += n


class _Table:
    LANES, TRANSFERS, SIGNALS = "engine_slices", "transfers", "signals"


def _column(rows: RowColumns, k: int) -> np.ndarray:
    """One field of every row, read chunk by chunk (a spilled column too)."""
    parts = [part[k] for _, part in rows.chunks(CHUNK_ROWS)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


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


def _chain(*parts: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for part in parts:
        yield from part


class _Link:
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

    def site_columns(self, ops: np.ndarray, site: Callable[[np.ndarray], pa.Array] | None = None) -> tuple[pa.Array | None, ...]:
        """(call_site, stack_id) of some operators (ids, -1: none), None without Python frames; site: how a key
        column (-1: none) becomes the call_site column (default: a dictionary in order of first appearance)."""
        if not len(self.op_key):
            return None, None
        key = np.where(ops >= 0, self.op_key[np.maximum(ops, 0)], -1)
        stack = np.array([-1 if s is None else s for s in self.key_stack] or [-1], dtype=np.int32)[np.maximum(key, 0)]
        stack[key < 0] = -1
        sites = self.key_site
        column = site(key) if site is not None else _text(key, lambda k: sites[k], null=key < 0)
        return column, pa.array(stack, mask=stack < 0)

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


def _op_batches(link: _Link, placement: np.ndarray, root_device: str) -> Iterator[pa.RecordBatch]:
    """The ops table, one record batch per slice of the operators' columns (placement: launched device work)."""
    ops = link.ev.ops
    used = np.bincount(placement, minlength=len(_PLACEMENTS)) > 0
    table = OpTable(ops, np.bincount(link.op_name, minlength=len(ops.names)) > 0, used, root_device,
                    ops.code_counts()["signature"] > 0)  # fmt: skip
    site = _op_sites(link)
    first = 0
    for part in ops.slices():
        n = len(part["ts"])
        start, dur = ns_times(part["ts"], part["dur"], link.t0)
        codes = placement[first : first + n].astype(np.int32)
        call_site, stack_id = link.site_columns(np.arange(first, first + n), site)
        yield from table.table(part, first, start, dur, link.op_region[first : first + n], codes, call_site=call_site,
                               stack_id=stack_id).to_batches()  # fmt: skip
        first += n


def _op_sites(link: _Link) -> Callable[[np.ndarray], pa.Array]:
    """The ops table's call_site column from a key column: one dictionary, the sites in order of first appearance
    over the operators (as the whole table's dictionary holds them)."""
    key = link.op_key
    used, first = np.unique(key[key >= 0], return_index=True) if len(key) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    words: dict[str, int] = {}
    remap = np.full(len(link.key_site) + 1, -1, dtype=np.int32)  # the last: no key
    for k in used[np.argsort(np.flatnonzero(key >= 0)[first], kind="stable")].tolist():
        if link.key_site[k] is not None:
            remap[k] = words.setdefault(link.key_site[k], len(words))
    dictionary = pa.array(list(words), pa.string())

    def column(keys: np.ndarray) -> pa.Array:
        codes = remap[keys]
        nulls = codes < 0
        return pa.DictionaryArray.from_arrays(pa.array(np.maximum(codes, 0), mask=nulls if nulls.any() else None), dictionary)

    return column


class _HostLanes:
    """The host lanes: one slice per top-level operator (no operator of its thread encloses it), in operator order."""

    def __init__(self, link: _Link, placement: np.ndarray) -> None:
        ops = link.ev.ops
        self.link, self.fallback = link, placement == _FALLBACK
        tids = [t for _, t in ops.threads]
        tid_code: dict[object, int] = {}
        counts: dict[object, int] = {}
        for t, c in zip(tids, ops.code_counts()["thread"].tolist(), strict=True):
            tid_code.setdefault(t, len(tid_code))
            counts[t] = counts.get(t, 0) + c
        self.by_tid = np.array([tid_code[t] for t in tids], dtype=np.int32)
        main_tid = max(counts, key=counts.__getitem__)
        top = link.op_parent < 0
        self.rows = int(top.sum())
        lanes_used = np.zeros(len(tid_code), dtype=bool)
        for part, lo in self._parts():
            lanes_used[self.by_tid[part["thread"][top[lo : lo + len(part["ts"])]]]] = True
        self.columns = {
            "engine": _Coder(["host" if t == main_tid else f"host thread {t}" for t in tid_code], lanes_used),
            "engine_kind": _Coder([EngineKind.HOST.value], np.ones(1, dtype=bool)),
            "kind": _Coder([SliceKind.COMPUTE.value, SliceKind.FALLBACK.value],
                           np.array([np.any(top & ~self.fallback), np.any(top & self.fallback)])),
            "name": _Coder(ops.names, np.bincount(link.op_name[top], minlength=len(ops.names)) > 0),
        }

    def _parts(self) -> Iterator[tuple[dict[str, np.ndarray], int]]:
        first = 0
        for part in self.link.ev.ops.slices():
            yield part, first
            first += len(part["ts"])

    def batches(self) -> Iterator[pa.RecordBatch]:
        link, columns = self.link, self.columns
        for part, first in self._parts():
            n = len(part["ts"])
            top = np.flatnonzero(link.op_parent[first : first + n] < 0)
            if not len(top):
                continue
            start, dur = ns_times(part["ts"][top], part["dur"][top], link.t0)
            zeros = np.zeros(len(top), dtype=np.int32)
            yield from _table("engine_slices", {
                "region_id": link.op_region[first + top], "engine": columns["engine"](self.by_tid[part["thread"][top]]),
                "engine_kind": columns["engine_kind"](zeros), "kind": columns["kind"](self.fallback[first + top].astype(np.int32)),
                "name": columns["name"](part["name"][top]), "start": start, "dur": dur, "op_id": top + first}).to_batches()  # fmt: skip


def _sync_signals(link: _Link, launched: np.ndarray) -> pa.Table:
    """The linker's sync signals (`_kineto_link._syncs`): sync operators, then runtime sync calls outside them."""
    ev = link.ev
    names = ev.ops.names
    sync_codes = {code for code, name in enumerate(names) if name in SYNC_OPS}
    out = TableBuilder("signals")
    at_ops: list[tuple[int, int, Any]] = []  # (the op a signal is at, the op it came from, its rule)
    for i in np.flatnonzero(np.isin(link.op_name, list(sync_codes))).tolist():
        parent = int(link.op_parent[i])
        if link.inside_sync(parent, sync_codes):
            continue
        at = parent if parent >= 0 and names[link.op_name[parent]] in BOOL_INDEX_OPS else i
        rule = sync_cause(OpCall(names[link.op_name[at]], bool_index=at != i))
        if rule is not None:
            at_ops.append((at, i, rule))
    starts = _op_starts(link, np.array([at for at, _, _ in at_ops], dtype=np.int64))
    for (at, _, rule), start in zip(at_ops, starts, strict=True):
        site, stack = link.site(at)
        out.append(region_id=int(link.op_region[at]), op_id=at, kind=SignalKind.SYNC, reason=rule.cause.value,
                   op_name=names[link.op_name[at]], count=1, bytes=0, call_site=site, stack_id=stack, note=rule.hint,
                   time_ns=start)  # fmt: skip
    runtime = ev.runtime
    values = runtime.values
    sync_calls = [code for code, v in enumerate(values) if type(v) is str and v in SYNC_RUNTIME_CALLS]
    calls = []  # (row, start, name code) of the runtime sync calls
    for lo, part in runtime.chunks(CHUNK_ROWS):
        at = np.flatnonzero(np.isin(part[_RUNTIME_NAME], sync_calls))
        calls += zip((lo + at).tolist(), part[_RUNTIME_TS][at].tolist(), part[_RUNTIME_NAME][at].tolist(), strict=True)
    for ri, ts, code in calls:
        oi = int(link.runtime_op[ri])
        if oi >= 0 and link.inside_sync(oi, sync_codes):
            continue
        start = link.ns(ts)
        name = values[code]
        site, stack = link.site(oi)
        out.append(region_id=int(link.op_region[oi]) if oi >= 0 else link.regions.find(start), op_id=oi if oi >= 0 else None,
                   kind=SignalKind.SYNC, reason=name, op_name=names[link.op_name[oi]] if oi >= 0 else name, count=1, bytes=0,
                   call_site=site, stack_id=stack, note=cause_hint(Cause.SYNC_CALL), time_ns=start)  # fmt: skip
    return out.build()


def _op_starts(link: _Link, wanted: np.ndarray) -> list[int]:
    """The start (ns, as the linker rounds one value) of some operators, read from the operators' slices in one pass."""
    found = np.zeros(len(wanted), dtype=np.float64)
    if len(wanted):
        first = 0
        for part in link.ev.ops.slices():
            n = len(part["ts"])
            here = (wanted >= first) & (wanted < first + n)
            found[here] = part["ts"][wanted[here] - first]
            first += n
    return [link.ns(t) for t in found.tolist()]


class _DeviceWork:
    """Device lanes, transfers and copy signals of the device slices, a chunk of rows at a time (file order)."""

    def __init__(self, link: _Link, device_call: np.ndarray, *, multi_device: bool) -> None:
        device = link.ev.device
        values = device.values
        self.link, self.device_call, self.values = link, device_call, values
        self.copy_code = np.array([v == "gpu_memcpy" for v in values] or [False], dtype=bool)
        self.memset_code = np.array([v == "gpu_memset" for v in values] or [False], dtype=bool)
        self.copies = 0
        sizeless: list[np.ndarray] = []  # copies without bytes of their own: they take their runtime call's size
        for lo, part in device.chunks(CHUNK_ROWS):
            copy = self.copy_code[part[_DEV_CAT]]
            self.copies += int(copy.sum())
            sizeless.append(lo + np.flatnonzero(copy & (part[_DEV_BYTES] == NONE_INT)))
        rows = np.concatenate(sizeless) if sizeless else np.zeros(0, dtype=np.int64)
        self.size_rows, self.sizes = rows, np.full(len(rows), NONE_INT, dtype=np.int64)  # sorted rows, their calls' sizes
        calls = device_call[rows]
        for lo, part in link.ev.runtime.chunks(CHUNK_ROWS) if len(rows) else ():
            here = np.flatnonzero((calls >= lo) & (calls < lo + len(part[0])))
            self.sizes[here] = part[_RUNTIME_SIZE][calls[here] - lo]
        self.prefix = (lambda dev: f"cuda:{dev} ") if multi_device else (lambda dev: "")
        self.directions: dict[int, Direction] = {}

    def direction(self, name_code: int) -> Direction:
        found = self.directions.get(name_code)
        if found is None:
            found = self.directions[name_code] = copy_direction(self.values[name_code]) or Direction.D2D
        return found

    def batches(self, table: str) -> Iterator[pa.RecordBatch]:
        device, link = self.link.ev.device, self.link
        for lo, part in device.chunks(CHUNK_ROWS):
            cat = part[_DEV_CAT]
            copy = self.copy_code[cat]
            if table != _Table.LANES:
                if not copy.any():
                    continue
                rows = np.flatnonzero(copy)
            else:
                rows = np.arange(len(cat))
            at = lo + rows
            start, span = ns_times(part[_DEV_TS][rows], part[_DEV_DUR][rows], link.t0)
            ri = self.device_call[at]
            oi = np.where(ri >= 0, link.runtime_op[np.maximum(ri, 0)], -1)
            region = np.where(oi >= 0, link.op_region[np.maximum(oi, 0)], link.regions.find_many(start)).astype(np.int32)
            op_id = pa.array(oi, mask=oi < 0)
            name, dev, stream = part[_DEV_NAME][rows], part[_DEV_DEVICE][rows], part[_DEV_STREAM][rows]
            raw_bytes = part[_DEV_BYTES][rows]
            copy = copy[rows]
            size = np.full(len(at), NONE_INT, dtype=np.int64)
            if len(self.size_rows):
                pos = np.minimum(np.searchsorted(self.size_rows, at), len(self.size_rows) - 1)
                found = self.size_rows[pos] == at
                size[found] = self.sizes[pos[found]]
            copy_bytes = np.where(raw_bytes != NONE_INT, raw_bytes, np.where(size != NONE_INT, size, 0))
            if table == _Table.LANES:
                yield self._lanes(copy, cat[rows], name, dev, stream, raw_bytes, copy_bytes, region, op_id, start, span,
                                  part[_DEV_CORR][rows])  # fmt: skip
            elif table == _Table.TRANSFERS:
                yield self._transfers(name, dev, copy_bytes, region, op_id, start, span, *link.site_columns(oi))
            else:
                yield self._signals(name, oi, copy_bytes, region, op_id, start, *link.site_columns(oi))

    def _lanes(self, copy, cat, name, dev, stream, raw_bytes, copy_bytes, region, op_id, start, span, corr) -> pa.RecordBatch:  # noqa: ANN001
        values = self.values
        # the lane: a copy's direction (from its name) or a stream, prefixed by the device where there are several
        key = np.where(copy, name, stream).astype(np.int64) << 33 | dev.astype(np.int64) << 1 | copy
        engine = _text(key, lambda k: f"{self.prefix(values[(k >> 1) & 0xFFFFFFFF])}"
                                      + (f"DMA {self.direction(k >> 33).value}" if k & 1 else f"stream {values[k >> 33]}"))  # fmt: skip
        kind_key = np.where(copy, name.astype(np.int64) + 1, 0)
        engine_kind = _text(kind_key, lambda k: _DMA[self.direction(k - 1)].value if k else EngineKind.STREAM.value)
        slice_kind = _text(copy.astype(np.int64), lambda k: SliceKind.TRANSFER.value if k else SliceKind.COMPUTE.value)
        memset = self.memset_code[cat]
        nbytes = np.where(copy, copy_bytes, raw_bytes)
        return _table("engine_slices", {
            "region_id": region, "engine": engine, "engine_kind": engine_kind, "kind": slice_kind,
            "name": _text(name.astype(np.int64), lambda k: values[k]), "start": start, "dur": span, "op_id": op_id,
            "bytes": pa.array(nbytes, mask=~(copy | (memset & (raw_bytes != NONE_INT)))),
            "correlation": pa.array(corr, mask=corr == NONE_INT)}).to_batches()[0]  # fmt: skip

    def _transfers(self, name, dev, copy_bytes, region, op_id, start, span, site, stack) -> pa.RecordBatch:  # noqa: ANN001
        values = self.values
        direction = _text(name.astype(np.int64), lambda k: self.direction(k).value)
        key = name.astype(np.int64) << 32 | dev.astype(np.int64)

        def end(k: int, host: Direction) -> str:
            return "cpu" if self.direction(k >> 32) is host else f"cuda:{values[k & 0xFFFFFFFF]}"

        return _table("transfers", {
            "region_id": region, "op_id": op_id, "direction": direction, "bytes": copy_bytes,
            "src_device": _text(key, lambda k: end(k, Direction.H2D)), "dst_device": _text(key, lambda k: end(k, Direction.D2H)),
            "start_ns": start, "dur_ns": span, "cause": _text(np.zeros(len(start), dtype=np.int64), lambda k: "explicit"),
            "call_site": site, "stack_id": stack}).to_batches()[0]  # fmt: skip

    def _signals(self, name, oi, copy_bytes, region, op_id, start, site, stack) -> pa.RecordBatch:  # noqa: ANN001
        values, op_names = self.values, self.link.ev.ops.names
        op_name_code = self.link.op_name[np.maximum(oi, 0)]
        # an op's name (code + 1, negative) or the copy's own name (its code)
        key = np.where(oi >= 0, -(op_name_code.astype(np.int64) + 1), name.astype(np.int64))
        return _table("signals", {
            "region_id": region, "op_id": op_id, "kind": _text(name.astype(np.int64), lambda k: self.direction(k).signal.value),
            "reason": _text(name.astype(np.int64), lambda k: values[k]),
            "op_name": _text(key, lambda k: op_names[-k - 1] if k < 0 else values[k]),
            "count": np.ones(len(start), dtype=np.int64), "bytes": copy_bytes, "call_site": site, "stack_id": stack,
            "time_ns": start}).to_batches()[0]  # fmt: skip


def _runtime_batches(link: _Link) -> Iterator[pa.RecordBatch]:
    """One row per runtime or driver call (`_kineto_link._runtime_calls`), a chunk at a time."""
    runtime = link.ev.runtime
    values = runtime.values
    for lo, part in runtime.chunks(CHUNK_ROWS):
        start, dur = ns_times(part[_RUNTIME_TS], part[_RUNTIME_DUR], link.t0)
        op = link.runtime_op[lo : lo + len(start)]
        corr = part[_RUNTIME_CORR]
        yield from _table("runtime_calls", {
            "region_id": link.regions.find_many(start).astype(np.int32), "op_id": pa.array(op, mask=op < 0),
            "name": _text(part[_RUNTIME_NAME].astype(np.int64), lambda k: values[k]),
            "start_ns": start, "dur_ns": dur, "correlation": pa.array(corr, mask=corr == NONE_INT)}).to_batches()  # fmt: skip


def _text(keys: np.ndarray, word: Callable[[int], str | None], null: np.ndarray | None = None) -> pa.DictionaryArray:
    """A text column from an int64 key a row: word(key) (None: null), dictionary-encoded in order of first
    appearance; rows flagged in `null` are null whatever their key."""
    if null is not None and null.any():
        keys = np.where(null, keys[~null][0] if (~null).any() else 0, keys)  # a key some other row has: never a new word
    if not len(keys) or (null is not None and null.all()):
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(keys), dtype=np.int32), mask=np.ones(len(keys), dtype=bool)),
                                              pa.array([], pa.string()))  # fmt: skip
    distinct, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    words: dict[str, int] = {}
    remap = np.full(len(distinct), -1, dtype=np.int32)
    for j, k in zip(order.tolist(), distinct[order].tolist(), strict=True):
        text = word(k)
        if text is not None:
            remap[j] = words.setdefault(text, len(words))
    codes = remap[inverse.reshape(-1)]
    nulls = codes < 0 if null is None else (codes < 0) | null
    return pa.DictionaryArray.from_arrays(pa.array(np.maximum(codes, 0), mask=nulls if nulls.any() else None),
                                          pa.array(list(words), pa.string()))  # fmt: skip


def _unified(name: str, rows: int, make: Callable[[], Iterator[pa.RecordBatch]]) -> TableSlices:
    """Slices of one table whose batches carry dictionaries of their own: made once to gather each text column's
    values in order of first appearance (batch by batch, each batch's dictionary in order), then again with
    that one dictionary, as an Arrow IPC file requires (and as the whole table, built at once, holds them)."""
    table_schema = schema.TABLES[name]
    text = [i for i, field in enumerate(table_schema) if pa.types.is_dictionary(field.type)]
    gathered: list[tuple[pa.Array, dict[str, int]]] = []

    def dictionaries() -> list[tuple[pa.Array, dict[str, int]]]:
        if not gathered:
            seen: list[dict[str, int]] = [{} for _ in text]
            for batch in make():
                for j, i in enumerate(text):
                    for word in batch.column(i).dictionary.to_pylist():
                        seen[j].setdefault(word, len(seen[j]))
            gathered.extend((pa.array(list(words), pa.string()), words) for words in seen)
        return gathered

    def batches() -> Iterator[pa.RecordBatch]:
        words = dictionaries()
        for batch in make():
            columns = batch.columns
            for (dictionary, codes), i in zip(words, text, strict=True):
                column = columns[i]
                remap = np.array([codes[w] for w in column.dictionary.to_pylist()] or [0], dtype=np.int32)
                nulls = column.is_null().to_numpy(zero_copy_only=False) if column.null_count else None
                indices = remap[column.indices.fill_null(0).to_numpy(zero_copy_only=False)]
                columns[i] = pa.DictionaryArray.from_arrays(pa.array(indices, mask=nulls), dictionary)
            yield pa.RecordBatch.from_arrays(columns, schema=table_schema)

    return TableSlices(rows, batches)


__all__ = ["BUCKET_EVENTS", "CHUNK_ROWS", "gpu_slices"]
