"""The tables of a Kineto trace with runtime calls, device work or Python frames, made a slice of rows at a time
from the sweep's `Link` (the sliced path of ``_kineto_gpu``): ops, host and device lanes, transfers, signals and
runtime calls.

What every batch of a table shares: Arrow dictionaries. The ops table's are known from code counts; the other
tables' batches are made twice (`unified`), the first time only to gather each text column's values in order of
first appearance (what the whole table's dictionary holds: the builder's order, and the host lanes' values before
the device lanes' as the linker's concatenation unifies them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from .. import schema
from ..builder import TableBuilder
from ..catalog import (
    BOOL_INDEX_OPS,
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
from . import _kineto_sweep as sweep
from ._kineto_link import _DMA, _PLACEMENTS, _Coder, _ns, _table
from ._kineto_rows import NONE_INT
from ._kineto_slices import OpTable, ns_times
from ._kineto_sweep import (
    DEV_BYTES,
    DEV_CAT,
    DEV_CORR,
    DEV_DEVICE,
    DEV_DUR,
    DEV_NAME,
    DEV_STREAM,
    DEV_TS,
    RUNTIME_CORR,
    RUNTIME_DUR,
    RUNTIME_NAME,
    RUNTIME_SIZE,
    RUNTIME_TS,
    Link,
)

HOST, DEVICE, FALLBACK = (_PLACEMENTS.index(p) for p in (Placement.HOST, Placement.DEVICE, Placement.FALLBACK))


class Table:
    LANES, TRANSFERS, SIGNALS = "engine_slices", "transfers", "signals"


def chain(*parts: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for part in parts:
        yield from part


def site_columns(link: Link, ops: np.ndarray, site: Callable[[np.ndarray], pa.Array] | None = None) -> tuple[pa.Array | None, ...]:
    """(call_site, stack_id) of some operators (ids, -1: none), None without Python frames; site: how a key
    column (-1: none) becomes the call_site column (default: a dictionary in order of first appearance)."""
    if not len(link.op_key):
        return None, None
    key = np.where(ops >= 0, link.op_key[np.maximum(ops, 0)], -1)
    stack = np.array([-1 if s is None else s for s in link.key_stack] or [-1], dtype=np.int32)[np.maximum(key, 0)]
    stack[key < 0] = -1
    sites = link.key_site
    column = site(key) if site is not None else text(key, lambda k: sites[k], null=key < 0)
    return column, pa.array(stack, mask=stack < 0)


def fallback_batches(link: Link, placement: np.ndarray) -> Iterator[pa.RecordBatch]:
    """The cpu_fallback signals of the guessed operators (`_kineto_link.build_trace`), a slice of operators at a time."""
    ops = link.ev.ops
    bytes_in = np.array([s[3] for s in ops.signatures], dtype=np.int64)
    names, note = ops.names, cause_hint(Cause.NO_DEVICE_WORK)
    first = 0
    for part in ops.slices():
        n = len(part["ts"])
        rows = np.flatnonzero(placement[first : first + n] == FALLBACK)
        if len(rows):
            ids = rows + first
            zeros = np.zeros(len(rows), dtype=np.int64)
            site, stack = site_columns(link, ids)
            yield _table("signals", {
                "region_id": link.op_region[ids], "op_id": ids,
                "kind": text(zeros, lambda k: SignalKind.CPU_FALLBACK.value),
                "reason": text(zeros, lambda k: Cause.NO_DEVICE_WORK.value),
                "op_name": text(part["name"][rows].astype(np.int64), lambda k: names[k]),
                "count": np.ones(len(rows), dtype=np.int64), "bytes": bytes_in[part["signature"][rows]],
                "call_site": site, "stack_id": stack, "note": text(zeros, lambda k: note),
                "time_ns": _ns(part["ts"][rows], link.t0)}).to_batches()[0]  # fmt: skip
        first += n


def op_batches(link: Link, placement: np.ndarray, root_device: str) -> Iterator[pa.RecordBatch]:
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
        call_site, stack_id = site_columns(link, np.arange(first, first + n), site)
        yield from table.table(part, first, start, dur, link.op_region[first : first + n], codes, call_site=call_site,
                               stack_id=stack_id).to_batches()  # fmt: skip
        first += n


def _op_sites(link: Link) -> Callable[[np.ndarray], pa.Array]:
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


class HostLanes:
    """The host lanes: one slice per top-level operator (no operator of its thread encloses it), in operator order."""

    def __init__(self, link: Link, placement: np.ndarray) -> None:
        ops = link.ev.ops
        self.link, self.fallback = link, placement == FALLBACK
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


def sync_signals(link: Link, launched: np.ndarray) -> pa.Table:
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
    for lo, part in runtime.chunks(sweep.CHUNK_ROWS):
        at = np.flatnonzero(np.isin(part[RUNTIME_NAME], sync_calls))
        calls += zip((lo + at).tolist(), part[RUNTIME_TS][at].tolist(), part[RUNTIME_NAME][at].tolist(), strict=True)
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


def _op_starts(link: Link, wanted: np.ndarray) -> list[int]:
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


class DeviceWork:
    """Device lanes, transfers and copy signals of the device slices, a chunk of rows at a time (file order)."""

    def __init__(self, link: Link, device_call: np.ndarray, *, multi_device: bool) -> None:
        device = link.ev.device
        values = device.values
        self.link, self.device_call, self.values = link, device_call, values
        self.copy_code = np.array([v == "gpu_memcpy" for v in values] or [False], dtype=bool)
        self.memset_code = np.array([v == "gpu_memset" for v in values] or [False], dtype=bool)
        self.copies = 0
        sizeless: list[np.ndarray] = []  # copies without bytes of their own: they take their runtime call's size
        for lo, part in device.chunks(sweep.CHUNK_ROWS):
            copy = self.copy_code[part[DEV_CAT]]
            self.copies += int(copy.sum())
            sizeless.append(lo + np.flatnonzero(copy & (part[DEV_BYTES] == NONE_INT)))
        rows = np.concatenate(sizeless) if sizeless else np.zeros(0, dtype=np.int64)
        self.size_rows, self.sizes = rows, np.full(len(rows), NONE_INT, dtype=np.int64)  # sorted rows, their calls' sizes
        calls = device_call[rows]
        for lo, part in link.ev.runtime.chunks(sweep.CHUNK_ROWS) if len(rows) else ():
            here = np.flatnonzero((calls >= lo) & (calls < lo + len(part[0])))
            self.sizes[here] = part[RUNTIME_SIZE][calls[here] - lo]
        self.prefix = (lambda dev: f"cuda:{dev} ") if multi_device else (lambda dev: "")
        self.directions: dict[int, Direction] = {}

    def direction(self, name_code: int) -> Direction:
        found = self.directions.get(name_code)
        if found is None:
            found = self.directions[name_code] = copy_direction(self.values[name_code]) or Direction.D2D
        return found

    def batches(self, table: str) -> Iterator[pa.RecordBatch]:
        device, link = self.link.ev.device, self.link
        for lo, part in device.chunks(sweep.CHUNK_ROWS):
            cat = part[DEV_CAT]
            copy = self.copy_code[cat]
            if table != Table.LANES:
                if not copy.any():
                    continue
                rows = np.flatnonzero(copy)
            else:
                rows = np.arange(len(cat))
            at = lo + rows
            start, span = ns_times(part[DEV_TS][rows], part[DEV_DUR][rows], link.t0)
            ri = self.device_call[at]
            oi = np.where(ri >= 0, link.runtime_op[np.maximum(ri, 0)], -1)
            region = np.where(oi >= 0, link.op_region[np.maximum(oi, 0)], link.regions.find_many(start)).astype(np.int32)
            op_id = pa.array(oi, mask=oi < 0)
            name, dev, stream = part[DEV_NAME][rows], part[DEV_DEVICE][rows], part[DEV_STREAM][rows]
            raw_bytes = part[DEV_BYTES][rows]
            copy = copy[rows]
            size = np.full(len(at), NONE_INT, dtype=np.int64)
            if len(self.size_rows):
                pos = np.minimum(np.searchsorted(self.size_rows, at), len(self.size_rows) - 1)
                found = self.size_rows[pos] == at
                size[found] = self.sizes[pos[found]]
            copy_bytes = np.where(raw_bytes != NONE_INT, raw_bytes, np.where(size != NONE_INT, size, 0))
            if table == Table.LANES:
                yield self._lanes(copy, cat[rows], name, dev, stream, raw_bytes, copy_bytes, region, op_id, start, span,
                                  part[DEV_CORR][rows])  # fmt: skip
            elif table == Table.TRANSFERS:
                yield self._transfers(name, dev, copy_bytes, region, op_id, start, span, *site_columns(link, oi))
            else:
                yield self._signals(name, oi, copy_bytes, region, op_id, start, *site_columns(link, oi))

    def _lanes(self, copy, cat, name, dev, stream, raw_bytes, copy_bytes, region, op_id, start, span, corr) -> pa.RecordBatch:  # noqa: ANN001
        values = self.values
        # the lane: a copy's direction (from its name) or a stream, prefixed by the device where there are several
        key = np.where(copy, name, stream).astype(np.int64) << 33 | dev.astype(np.int64) << 1 | copy
        engine = text(key, lambda k: f"{self.prefix(values[(k >> 1) & 0xFFFFFFFF])}"
                                      + (f"DMA {self.direction(k >> 33).value}" if k & 1 else f"stream {values[k >> 33]}"))  # fmt: skip
        kind_key = np.where(copy, name.astype(np.int64) + 1, 0)
        engine_kind = text(kind_key, lambda k: _DMA[self.direction(k - 1)].value if k else EngineKind.STREAM.value)
        slice_kind = text(copy.astype(np.int64), lambda k: SliceKind.TRANSFER.value if k else SliceKind.COMPUTE.value)
        memset = self.memset_code[cat]
        nbytes = np.where(copy, copy_bytes, raw_bytes)
        return _table("engine_slices", {
            "region_id": region, "engine": engine, "engine_kind": engine_kind, "kind": slice_kind,
            "name": text(name.astype(np.int64), lambda k: values[k]), "start": start, "dur": span, "op_id": op_id,
            "bytes": pa.array(nbytes, mask=~(copy | (memset & (raw_bytes != NONE_INT)))),
            "correlation": pa.array(corr, mask=corr == NONE_INT)}).to_batches()[0]  # fmt: skip

    def _transfers(self, name, dev, copy_bytes, region, op_id, start, span, site, stack) -> pa.RecordBatch:  # noqa: ANN001
        values = self.values
        direction = text(name.astype(np.int64), lambda k: self.direction(k).value)
        key = name.astype(np.int64) << 32 | dev.astype(np.int64)

        def end(k: int, host: Direction) -> str:
            return "cpu" if self.direction(k >> 32) is host else f"cuda:{values[k & 0xFFFFFFFF]}"

        return _table("transfers", {
            "region_id": region, "op_id": op_id, "direction": direction, "bytes": copy_bytes,
            "src_device": text(key, lambda k: end(k, Direction.H2D)), "dst_device": text(key, lambda k: end(k, Direction.D2H)),
            "start_ns": start, "dur_ns": span, "cause": text(np.zeros(len(start), dtype=np.int64), lambda k: "explicit"),
            "call_site": site, "stack_id": stack}).to_batches()[0]  # fmt: skip

    def _signals(self, name, oi, copy_bytes, region, op_id, start, site, stack) -> pa.RecordBatch:  # noqa: ANN001
        values, op_names = self.values, self.link.ev.ops.names
        op_name_code = self.link.op_name[np.maximum(oi, 0)]
        # an op's name (code + 1, negative) or the copy's own name (its code)
        key = np.where(oi >= 0, -(op_name_code.astype(np.int64) + 1), name.astype(np.int64))
        return _table("signals", {
            "region_id": region, "op_id": op_id, "kind": text(name.astype(np.int64), lambda k: self.direction(k).signal.value),
            "reason": text(name.astype(np.int64), lambda k: values[k]),
            "op_name": text(key, lambda k: op_names[-k - 1] if k < 0 else values[k]),
            "count": np.ones(len(start), dtype=np.int64), "bytes": copy_bytes, "call_site": site, "stack_id": stack,
            "time_ns": start}).to_batches()[0]  # fmt: skip


def runtime_batches(link: Link) -> Iterator[pa.RecordBatch]:
    """One row per runtime or driver call (`_kineto_link._runtime_calls`), a chunk at a time."""
    runtime = link.ev.runtime
    values = runtime.values
    for lo, part in runtime.chunks(sweep.CHUNK_ROWS):
        start, dur = ns_times(part[RUNTIME_TS], part[RUNTIME_DUR], link.t0)
        op = link.runtime_op[lo : lo + len(start)]
        corr = part[RUNTIME_CORR]
        yield from _table("runtime_calls", {
            "region_id": link.regions.find_many(start).astype(np.int32), "op_id": pa.array(op, mask=op < 0),
            "name": text(part[RUNTIME_NAME].astype(np.int64), lambda k: values[k]),
            "start_ns": start, "dur_ns": dur, "correlation": pa.array(corr, mask=corr == NONE_INT)}).to_batches()  # fmt: skip


def text(keys: np.ndarray, word: Callable[[int], str | None], null: np.ndarray | None = None) -> pa.DictionaryArray:
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


def unified(name: str, rows: int, make: Callable[[], Iterator[pa.RecordBatch]]) -> TableSlices:
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


__all__ = ["DEVICE", "FALLBACK", "HOST", "DeviceWork", "HostLanes", "Table", "chain", "fallback_batches", "op_batches",
           "runtime_batches", "site_columns", "sync_signals", "text", "unified"]  # fmt: skip
