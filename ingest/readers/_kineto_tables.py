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
from ..catalog import BOOL_INDEX_OPS, SYNC_OPS, Cause, OpCall, cause_hint, sync_cause
from ..kineto_vocabulary import SYNC_RUNTIME_CALLS, copy_direction
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
    RUNTIME_TS,
    Link,
    take,
)
from ._spill import DiskColumn, release_memory

HOST, DEVICE, FALLBACK = (_PLACEMENTS.index(p) for p in (Placement.HOST, Placement.DEVICE, Placement.FALLBACK))


class Table:
    LANES, TRANSFERS, SIGNALS = "engine_slices", "transfers", "signals"


def chain(*parts: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for part in parts:
        yield from part


def site_columns(link: Link, ops: np.ndarray, site: Callable[[np.ndarray], pa.Array] | None = None,
                 key: np.ndarray | None = None) -> tuple[pa.Array | None, ...]:  # fmt: skip
    """(call_site, stack_id) of some operators (ids, -1: none), None without Python frames; site: how a key
    column (-1: none) becomes the call_site column (default: a dictionary in order of first appearance); key:
    the operators' keys where the caller has them."""
    if not len(link.op_key):
        return None, None
    key = link.keys(ops) if key is None else key
    stack = np.array([-1 if s is None else s for s in link.key_stack] or [-1], dtype=np.int32)[np.maximum(key, 0)]
    stack[key < 0] = -1
    sites = link.key_site
    column = site(key) if site is not None else text(key, lambda k: sites[k], null=key < 0)
    return column, pa.array(stack, mask=stack < 0)


def _parts(link: Link) -> Iterator[tuple[dict[str, np.ndarray], int, int]]:
    """(the operators' columns, first operator, rows) slice by slice."""
    first = 0
    for part in link.ev.ops.slices():
        n = len(part["ts"])
        yield part, first, n
        first += n


def fallback_batches(link: Link, placement: DiskColumn) -> Iterator[pa.RecordBatch]:
    """The cpu_fallback signals of the guessed operators (`_kineto_link.build_trace`), a slice of operators at a time."""
    ops = link.ev.ops
    bytes_in = np.array([s[3] for s in ops.signatures], dtype=np.int64)
    names, note = ops.names, cause_hint(Cause.NO_DEVICE_WORK)
    for part, first, n in _parts(link):
        rows = np.flatnonzero(placement.read(first, first + n) == FALLBACK)
        if len(rows):
            ids = rows + first
            zeros = np.zeros(len(rows), dtype=np.int64)
            site, stack = site_columns(link, ids)
            yield _table("signals", {
                "region_id": link.op_region.read(first, first + n)[rows], "op_id": ids,
                "kind": text(zeros, lambda k: SignalKind.CPU_FALLBACK.value),
                "reason": text(zeros, lambda k: Cause.NO_DEVICE_WORK.value),
                "op_name": text(part["name"][rows].astype(np.int64), lambda k: names[k]),
                "count": np.ones(len(rows), dtype=np.int64), "bytes": bytes_in[part["signature"][rows]],
                "call_site": site, "stack_id": stack, "note": text(zeros, lambda k: note),
                "time_ns": _ns(part["ts"][rows], link.t0)}).to_batches()[0]  # fmt: skip


def op_batches(link: Link, placement: DiskColumn, used: np.ndarray, root_device: str) -> Iterator[pa.RecordBatch]:
    """The ops table, one record batch per slice of the operators' columns (placement: codes into _PLACEMENTS, used:
    which codes some operator has)."""
    ops = link.ev.ops
    counts = ops.code_counts()
    table = OpTable(ops, counts["name"] > 0, used, root_device, counts["signature"] > 0)
    site = _op_sites(link)
    for part, first, n in _parts(link):
        start, dur = ns_times(part["ts"], part["dur"], link.t0)
        codes = placement.read(first, first + n).astype(np.int32)
        ids = np.arange(first, first + n)
        call_site, stack_id = site_columns(link, ids, site, link.keys(ids) if len(link.op_key) else None)
        yield from table.table(part, first, start, dur, link.op_region.read(first, first + n), codes, call_site=call_site,
                               stack_id=stack_id).to_batches()  # fmt: skip
        release_memory()


def _op_sites(link: Link) -> Callable[[np.ndarray], pa.Array]:
    """The ops table's call_site column from a key column: one dictionary, the sites in order of first appearance
    over the operators (as the whole table's dictionary holds them), found a block of keys at a time."""
    words: dict[str, int] = {}
    remap = np.full(len(link.key_site) + 1, -1, dtype=np.int32)  # the last: no key
    seen = np.zeros(len(link.key_site) + 1, dtype=bool)
    for lo, _ in link.op_key.blocks(sweep.HOLD_ROWS) if len(link.key_site) else ():
        key = link.keys(np.arange(lo, min(lo + sweep.HOLD_ROWS, len(link.op_key))))
        key = key[key >= 0]
        used, first = np.unique(key, return_index=True)
        for k in used[np.argsort(first, kind="stable")].tolist():
            if not seen[k]:
                seen[k] = True
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

    def __init__(self, link: Link, placement: DiskColumn) -> None:
        ops = link.ev.ops
        self.link, self.placement = link, placement
        tids = [t for _, t in ops.threads]
        tid_code: dict[object, int] = {}
        counts: dict[object, int] = {}
        for t, c in zip(tids, ops.code_counts()["thread"].tolist(), strict=True):
            tid_code.setdefault(t, len(tid_code))
            counts[t] = counts.get(t, 0) + c
        self.by_tid = np.array([tid_code[t] for t in tids], dtype=np.int32)
        main_tid = max(counts, key=counts.__getitem__)
        self.rows = 0
        lanes_used = np.zeros(len(tid_code), dtype=bool)
        kinds = np.zeros(2, dtype=bool)  # a top-level operator that is not a fallback, one that is
        names = np.zeros(len(ops.names), dtype=bool)
        for part, first, n in _parts(link):
            top = link.op_parent.read(first, first + n) < 0
            fallback = placement.read(first, first + n) == FALLBACK
            self.rows += int(top.sum())
            lanes_used[self.by_tid[part["thread"][top]]] = True
            kinds |= [bool(np.any(top & ~fallback)), bool(np.any(top & fallback))]
            names[part["name"][top]] = True
        self.columns = {
            "engine": _Coder(["host" if t == main_tid else f"host thread {t}" for t in tid_code], lanes_used),
            "engine_kind": _Coder([EngineKind.HOST.value], np.ones(1, dtype=bool)),
            "kind": _Coder([SliceKind.COMPUTE.value, SliceKind.FALLBACK.value], kinds),
            "name": _Coder(ops.names, names),
        }

    def batches(self) -> Iterator[pa.RecordBatch]:
        link, columns = self.link, self.columns
        for part, first, n in _parts(link):
            top = np.flatnonzero(link.op_parent.read(first, first + n) < 0)
            if not len(top):
                continue
            start, dur = ns_times(part["ts"][top], part["dur"][top], link.t0)
            zeros = np.zeros(len(top), dtype=np.int32)
            fallback = self.placement.read(first, first + n)[top] == FALLBACK
            yield from _table("engine_slices", {
                "region_id": link.op_region.read(first, first + n)[top], "engine": columns["engine"](self.by_tid[part["thread"][top]]),
                "engine_kind": columns["engine_kind"](zeros), "kind": columns["kind"](fallback.astype(np.int32)),
                "name": columns["name"](part["name"][top]), "start": start, "dur": dur, "op_id": top + first}).to_batches()  # fmt: skip


def sync_signals(link: Link) -> pa.Table:
    """The linker's sync signals (`_kineto_link._syncs`): sync operators, then runtime sync calls outside them."""
    ev = link.ev
    names = ev.ops.names
    sync_codes = np.array([code for code, name in enumerate(names) if name in SYNC_OPS], dtype=np.int32)
    out = TableBuilder("signals")
    found = [lo + np.flatnonzero(np.isin(codes, sync_codes)) for lo, codes in link.op_name.blocks(sweep.HOLD_ROWS)]
    syncs = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    parents = take(link.op_parent, syncs).astype(np.int64)
    outside = ~link.inside_sync(parents, sync_codes)
    syncs, parents = syncs[outside], parents[outside]
    parent_names = np.where(parents >= 0, take(link.op_name, np.maximum(parents, 0)), -1).tolist()
    at_ops: list[tuple[int, Any]] = []  # (the op a signal is at, its rule)
    for i, name, parent, parent_name in zip(syncs.tolist(), take(link.op_name, syncs).tolist(), parents.tolist(), parent_names,
                                            strict=True):  # fmt: skip
        at = parent if parent >= 0 and names[parent_name] in BOOL_INDEX_OPS else i
        rule = sync_cause(OpCall(names[parent_name if at == parent else name], bool_index=at != i))
        if rule is not None:
            at_ops.append((at, rule))
    at_ids = np.array([at for at, _ in at_ops], dtype=np.int64)
    _append_syncs(out, link, at_ids, [(rule.cause.value, rule.hint) for _, rule in at_ops], _op_starts(link, at_ids))
    runtime = ev.runtime
    values = runtime.values
    sync_calls = [code for code, v in enumerate(values) if type(v) is str and v in SYNC_RUNTIME_CALLS]
    rows, stamps, codes = [], [], []  # the runtime sync calls
    for lo, part in runtime.chunks(sweep.CHUNK_ROWS):
        at = np.flatnonzero(np.isin(part[RUNTIME_NAME], sync_calls))
        rows.append(lo + at)
        stamps += part[RUNTIME_TS][at].tolist()
        codes += part[RUNTIME_NAME][at].tolist()
    call_rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    ops = take(link.runtime_op, call_rows).astype(np.int64)
    outside = ~link.inside_sync(ops, sync_codes)
    starts = [link.ns(ts) for ts, keep in zip(stamps, outside.tolist(), strict=True) if keep]
    reasons = [(values[code], cause_hint(Cause.SYNC_CALL)) for code, keep in zip(codes, outside.tolist(), strict=True) if keep]
    _append_syncs(out, link, ops[outside], reasons, starts)
    return out.build()


def _append_syncs(out: TableBuilder, link: Link, ops: np.ndarray, reasons: list[tuple[str, str]], starts: list[int]) -> None:
    """One sync signal a row: at operator ops[j] (-1: none, then named by its reason, in the region of its start)."""
    names = link.ev.ops.names
    inside = np.maximum(ops, 0)
    region = take(link.op_region, inside).tolist()
    name = take(link.op_name, inside).tolist()
    keys = link.keys(ops).tolist()
    for j, (oi, (reason, note), start) in enumerate(zip(ops.tolist(), reasons, starts, strict=True)):
        site, stack = (link.key_site[keys[j]], link.key_stack[keys[j]]) if keys[j] >= 0 else (None, None)
        out.append(region_id=region[j] if oi >= 0 else link.regions.find(start), op_id=oi if oi >= 0 else None,
                   kind=SignalKind.SYNC, reason=reason, op_name=names[name[j]] if oi >= 0 else reason, count=1, bytes=0,
                   call_site=site, stack_id=stack, note=note, time_ns=start)  # fmt: skip


def _op_starts(link: Link, wanted: np.ndarray) -> list[int]:
    """The start (ns, as the linker rounds one value) of some operators, read from the operators' slices in one pass."""
    found = np.zeros(len(wanted), dtype=np.float64)
    if len(wanted):
        for part, first, n in _parts(link):
            here = (wanted >= first) & (wanted < first + n)
            found[here] = part["ts"][wanted[here] - first]
    return [link.ns(t) for t in found.tolist()]


class DeviceWork:
    """Device lanes, transfers and copy signals of the device slices, a chunk of rows at a time (file order)."""

    def __init__(self, link: Link, device_call: DiskColumn, call_size: DiskColumn, *, multi_device: bool) -> None:
        device = link.ev.device
        values = device.values
        self.link, self.device_call, self.call_size, self.values = link, device_call, call_size, values
        self.copy_code = np.array([v == "gpu_memcpy" for v in values] or [False], dtype=bool)
        self.memset_code = np.array([v == "gpu_memset" for v in values] or [False], dtype=bool)
        self.copies = sum(int(self.copy_code[part[DEV_CAT]].sum()) for _, part in device.chunks(sweep.CHUNK_ROWS))
        self.prefix = (lambda dev: f"cuda:{dev} ") if multi_device else (lambda dev: "")
        self.directions: dict[int, Direction] = {}
        self.signal_rows = self.copies  # rows batches(Table.SIGNALS) gives (a hook adds its own)

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
            start, span = ns_times(part[DEV_TS][rows], part[DEV_DUR][rows], link.t0)
            ri, oi, region = self.launched_by(lo, len(cat), rows, start)
            op_id = pa.array(oi, mask=oi < 0)
            name, dev, stream = part[DEV_NAME][rows], part[DEV_DEVICE][rows], part[DEV_STREAM][rows]
            raw_bytes = part[DEV_BYTES][rows]
            copy = copy[rows]
            size = np.full(len(rows), NONE_INT, dtype=np.int64)  # a copy without bytes of its own: its call's size
            sizeless = np.flatnonzero(copy & (raw_bytes == NONE_INT) & (ri >= 0))
            size[sizeless] = take(self.call_size, ri[sizeless])
            copy_bytes = np.where(raw_bytes != NONE_INT, raw_bytes, np.where(size != NONE_INT, size, 0))
            if table == Table.LANES:
                yield self._lanes(copy, cat[rows], name, dev, stream, raw_bytes, copy_bytes, region, op_id, start, span,
                                  part[DEV_CORR][rows])  # fmt: skip
            elif table == Table.TRANSFERS:
                yield self._transfers(name, dev, copy_bytes, region, op_id, start, span, *site_columns(link, oi))
            else:
                yield self._signals(name, oi, copy_bytes, region, op_id, start, *site_columns(link, oi))

    def launched_by(self, lo: int, n: int, rows: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(runtime call, operator (-1: none), region) of some rows of the chunk of n device slices from lo (start: their
        start in ns): the launching operator's region, else the region open at the start."""
        link = self.link
        ri = self.device_call.read(lo, lo + n)[rows]
        oi = np.where(ri >= 0, take(link.runtime_op, np.maximum(ri, 0)), -1)
        region = np.where(oi >= 0, take(link.op_region, np.maximum(oi, 0)), link.regions.find_many(start)).astype(np.int32)
        return ri, oi, region

    def engines(self, copy, cat, name, dev, stream) -> tuple[pa.Array, pa.Array, pa.Array]:  # noqa: ANN001
        """(engine, engine_kind, kind) columns of device slices (a hook: NPU lanes name them otherwise)."""
        values = self.values
        # the lane: a copy's direction (from its name) or a stream, prefixed by the device where there are several
        key = np.where(copy, name, stream).astype(np.int64) << 33 | dev.astype(np.int64) << 1 | copy
        engine = text(key, lambda k: f"{self.prefix(values[(k >> 1) & 0xFFFFFFFF])}"
                                      + (f"DMA {self.direction(k >> 33).value}" if k & 1 else f"stream {values[k >> 33]}"))  # fmt: skip
        kind_key = np.where(copy, name.astype(np.int64) + 1, 0)
        engine_kind = text(kind_key, lambda k: _DMA[self.direction(k - 1)].value if k else EngineKind.STREAM.value)
        slice_kind = text(copy.astype(np.int64), lambda k: SliceKind.TRANSFER.value if k else SliceKind.COMPUTE.value)
        return engine, engine_kind, slice_kind

    def _lanes(self, copy, cat, name, dev, stream, raw_bytes, copy_bytes, region, op_id, start, span, corr) -> pa.RecordBatch:  # noqa: ANN001
        values = self.values
        engine, engine_kind, slice_kind = self.engines(copy, cat, name, dev, stream)
        memset = self.memset_code[cat]
        nbytes = np.where(copy, copy_bytes, raw_bytes)
        return _table("engine_slices", {
            "region_id": region, "engine": engine, "engine_kind": engine_kind, "kind": slice_kind,
            "name": text(name.astype(np.int64), lambda k: values[k]), "start": start, "dur": span, "op_id": op_id,
            "bytes": pa.array(nbytes, mask=~(copy | (memset & (raw_bytes != NONE_INT)))),
            "correlation": pa.array(corr, mask=corr == NONE_INT)}).to_batches()[0]  # fmt: skip

    def device_name(self, dev_code: int) -> str:
        """The device of a device code (a hook: NPU lanes name theirs ``npu:<id>``)."""
        return f"cuda:{self.values[dev_code]}"

    def _transfers(self, name, dev, copy_bytes, region, op_id, start, span, site, stack) -> pa.RecordBatch:  # noqa: ANN001
        direction = text(name.astype(np.int64), lambda k: self.direction(k).value)
        key = name.astype(np.int64) << 32 | dev.astype(np.int64)

        def end(k: int, host: Direction) -> str:
            return "cpu" if self.direction(k >> 32) is host else self.device_name(k & 0xFFFFFFFF)

        return _table("transfers", {
            "region_id": region, "op_id": op_id, "direction": direction, "bytes": copy_bytes,
            "src_device": text(key, lambda k: end(k, Direction.H2D)), "dst_device": text(key, lambda k: end(k, Direction.D2H)),
            "start_ns": start, "dur_ns": span, "cause": text(np.zeros(len(start), dtype=np.int64), lambda k: "explicit"),
            "call_site": site, "stack_id": stack}).to_batches()[0]  # fmt: skip

    def _signals(self, name, oi, copy_bytes, region, op_id, start, site, stack) -> pa.RecordBatch:  # noqa: ANN001
        values, op_names = self.values, self.link.ev.ops.names
        op_name_code = take(self.link.op_name, np.maximum(oi, 0))
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
        op = link.runtime_op.read(lo, lo + len(start))
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
            release_memory()

    return TableSlices(rows, batches)


__all__ = ["DEVICE", "FALLBACK", "HOST", "DeviceWork", "HostLanes", "Table", "chain", "fallback_batches", "op_batches",
           "runtime_batches", "site_columns", "sync_signals", "text", "unified"]  # fmt: skip
