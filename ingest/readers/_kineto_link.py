"""Link Kineto events (nesting, correlation) and build the portscope tables."""

from __future__ import annotations

import datetime
import itertools
import math
import re
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from .. import schema
from ..builder import TraceBuilder
from ..callsites import relative_frames, site_of_frames
from ..catalog import BOOL_INDEX_OPS, NO_WORK_OPS, SYNC_OPS, Cause, OpCall, cause_hint, sync_cause
from ..errors import TraceFormatError
from ..kineto_vocabulary import KINETO_READ_CATEGORIES, SYNC_RUNTIME_CALLS, copy_direction
from ..schema import Direction, EngineKind, Mode, Placement, SignalKind, SliceKind, Source
from ..trace import RunInfo, TableSlices, Trace
from ._kineto_events import FORMAT, KinetoEvents
from ._kineto_rows import CorrelationIndex, RowColumns
from .npu_kineto import NpuLayout  # hook: lanes of NPU processes

_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
_PLACEMENTS = (Placement.HOST, Placement.DEVICE, Placement.FALLBACK)  # codes of the placement column
_SWEEP_SLICE = 1 << 16  # rows of the per-thread sweep turned into Python values at a time
_DMA = {Direction.H2D: EngineKind.DMA_H2D, Direction.D2H: EngineKind.DMA_D2H, Direction.D2D: EngineKind.DMA_D2D}


def build_trace(path: Path, ev: KinetoEvents, *, infer_fallback: bool = False, lanes: NpuLayout | None = None,
                release: bool = False, slice_ops: Callable[..., dict[str, TableSlices] | None] | None = None,
                slice_gpu: Callable[..., dict[str, TableSlices] | None] | None = None) -> Trace:
    """The portscope Trace of one collected Kineto trace.

    release: give the operators' ts/dur columns back as soon as they are read (`ev.ops` cannot be
    indexed afterwards): the converter's peak memory, for a caller that is done with `ev`.
    slice_ops: ``_kineto_slices.op_slices`` (passed in: it imports this module): a trace of operators only (no
    Python frames, runtime calls or device work) gives its ops table and host lanes as `Trace.slices`, made
    slice by slice as they are written.
    slice_gpu: ``_kineto_gpu.gpu_slices`` likewise, for any other trace (Python frames, runtime calls, device work:
    ops, lanes, transfers, signals and runtime calls as slices; call sites interned into the builder's stacks)."""
    t0 = ev.t_min if ev.t_min != float("inf") else 0.0
    if not (math.isfinite(t0) and math.isfinite(ev.t_max)) or (ev.t_max - t0) * 1000.0 >= 2**62:
        raise TraceFormatError(path, f"timestamps span {ev.t_max - t0:g} us: not a profile (ts/dur out of range)")

    def ns(ts: float) -> int:
        return int(round((ts - t0) * 1000.0))

    gpu = bool(ev.device)
    devices = sorted({d[4] for d in ev.device}, key=str)
    multi_device = len(devices) > 1
    gpus = [d for d in devices if not lanes or d not in lanes.processes]  # NPU rows: named by npu_kineto.finish
    b = TraceBuilder(_run_info(path, ev, t0, gpus, infer_fallback))
    root_device = (lanes.device_name(devices[0]) if lanes else f"cuda:{devices[0]}") if gpu else "cpu"
    end_ns = ns(ev.t_max) if ev.t_max != float("-inf") else 0
    root = b.add_region(str(ev.metadata.get("traceName") or path.name), start_ns=0, dur_ns=max(end_ns, 0),
                        mode=Mode.UNKNOWN, device=root_device)  # fmt: skip
    regions = _Regions(root, end_ns)
    for ts, dur, name, *_ in sorted(ev.annotations, key=lambda a: (a[0], -a[1])):
        regions.add(b, name, ns(ts), max(ns(ts + dur) - ns(ts), 0), root_device)
    regions.finish()
    if release:
        ev.annotations = []  # now regions (~0.2 KB a tuple: a GPU trace has one or more per step)

    # Nest ops, Python frames and runtime calls per thread.
    ops = ev.ops
    n_ops = len(ops)
    nest = bool(ev.python or ev.runtime or ev.device)  # else only "top-level or not" is needed: vectorized below
    slices = None
    if slice_ops is not None and not nest and n_ops:
        slices = slice_ops(ops, t0, regions, root_device)
    elif slice_gpu is not None and nest and n_ops:
        slices = slice_gpu(b, ev, t0, regions, root_device, devices, infer_fallback=infer_fallback)
    if slices is not None:
        built = b.build()
        return Trace(run_info=built.run_info, tables={n: t for n, t in built.tables.items() if n not in slices}, slices=slices)
    op_parent, op_site, op_stack, runtime_op = _nest(b, ev) if nest else (array("q", [-1]) * n_ops, None, None, [])

    # Which ops launched device work (directly), and correlation -> runtime call.
    by_corr, device_call = _correlations(ev)
    launched = bytearray(n_ops)
    device_op: list[int] = []
    for ri in device_call:
        oi = runtime_op[ri] if ri >= 0 else -1
        device_op.append(oi)
        while oi >= 0 and not launched[oi]:
            launched[oi] = 1
            oi = op_parent[oi]

    # ops table (+ host lane slices for top-level ops), column by column
    name_codes, thread_codes, sig_codes = ops.numpy("name"), ops.numpy("thread"), ops.numpy("signature")
    ts_a = ops.numpy("ts")
    dur_in = ops.numpy("dur")
    start_a = _ns(ts_a, t0)
    dur_a = _ns(ts_a + dur_in, t0)  # the end first: dur is end - start in ns, as ns(ts + dur) - ns(ts)
    dur_a -= start_a
    np.maximum(dur_a, 0, out=dur_a)
    region_a = regions.find_many(start_a).astype(np.int32)
    op_region = region_a  # read one int at a time (a list of them took ~36 bytes an operator)
    placement = np.zeros(n_ops, dtype=np.int32)  # codes into _PLACEMENTS
    fallback_ops: list[int] = []
    if gpu:
        launched_a = np.frombuffer(launched, dtype=np.uint8).astype(bool)
        parents = np.frombuffer(op_parent, dtype=np.int64)
        has_child = np.zeros(n_ops, dtype=bool)
        has_child[parents[parents >= 0]] = True
        placement[launched_a] = _PLACEMENTS.index(Placement.DEVICE)
        if infer_fallback:
            name_ok = np.array([n not in NO_WORK_OPS for n in ops.names], dtype=bool)
            sig_ok = np.array([bool(s[2]) and any(s[2].split(";")) for s in ops.signatures], dtype=bool)
            gpu_threads = {(r[3], r[4]) for r, oi in zip(ev.runtime, runtime_op, strict=True) if oi >= 0}
            thread_ok = np.array([t in gpu_threads for t in ops.threads], dtype=bool)
            guess = ~launched_a & ~has_child & name_ok[name_codes] & sig_ok[sig_codes] & thread_ok[thread_codes]
            placement[guess] = _PLACEMENTS.index(Placement.FALLBACK)
            fallback_ops = np.flatnonzero(guess).tolist()
    tids = [t for _, t in ops.threads]
    thread_ids = [t if type(t) is int and -(2**31) <= t < 2**31 else None for t in tids]
    # threads by tid (as the sweep groups them), in order of first appearance
    tid_code: dict[object, int] = {}
    counts: dict[object, int] = {}
    per_thread = np.bincount(thread_codes, minlength=len(tids)) if n_ops else np.zeros(len(tids), dtype=np.int64)
    for t, c in zip(tids, per_thread.tolist(), strict=True):
        tid_code.setdefault(t, len(tid_code))
        counts[t] = counts.get(t, 0) + c
    by_tid = np.array([tid_code[t] for t in tids], dtype=np.int32)[thread_codes] if n_ops else np.zeros(0, dtype=np.int32)
    if nest:
        top = np.flatnonzero(np.frombuffer(op_parent, dtype=np.int64) < 0) if n_ops else np.zeros(0, dtype=np.int64)
    else:
        top = _top_level(ts_a, dur_in, by_tid)
    del ts_a, dur_in  # views of the operator columns
    if release and not gpu:  # nothing below reads an operator's times (fallbacks, syncs and device work are GPU-only)
        ops.release_times()
    ops_table = _table("ops", {
        "op_id": np.arange(n_ops, dtype=np.int64), "region_id": region_a,
        "name": _coded(ops.names, name_codes), "start_ns": start_a, "dur_ns": dur_a,
        "placement": _coded([p.value for p in _PLACEMENTS], placement),
        "device": _coded(["cpu", root_device, "cpu"], placement),
        "input_shapes": _coded([s[0] for s in ops.signatures], sig_codes),
        "input_strides": _coded([s[1] for s in ops.signatures], sig_codes),
        "input_dtypes": _coded([s[2] for s in ops.signatures], sig_codes),
        "bytes_in": np.array([s[3] for s in ops.signatures], dtype=np.int64)[sig_codes],
        "bytes_out": np.zeros(n_ops, dtype=np.int64), "call_site": op_site, "stack_id": op_stack,
        "thread": _coded(thread_ids, thread_codes, dictionary=False)})  # fmt: skip
    main_tid = max(counts, key=counts.__getitem__) if counts else None
    lanes_by_tid = ["host" if t == main_tid else f"host thread {t}" for t in tid_code]
    fallback_code = _PLACEMENTS.index(Placement.FALLBACK)
    host_lanes = _table("engine_slices", {
        "region_id": region_a[top], "engine": _coded(lanes_by_tid, by_tid[top]),
        "engine_kind": _coded([EngineKind.HOST.value], np.zeros(len(top), dtype=np.int32)),
        "kind": _coded([SliceKind.COMPUTE.value, SliceKind.FALLBACK.value], (placement[top] == fallback_code).astype(np.int32)),
        "name": _coded(ops.names, name_codes[top]), "start": start_a[top], "dur": dur_a[top], "op_id": top})  # fmt: skip

    for i in fallback_ops:
        b.signals.append(region_id=int(op_region[i]), op_id=i, kind=SignalKind.CPU_FALLBACK, reason=Cause.NO_DEVICE_WORK.value,
                         op_name=ev.ops[i][2], count=1, bytes=ev.ops[i][9], call_site=op_site[i] if op_site else None,
                         stack_id=op_stack[i] if op_stack else None,
                         note=cause_hint(Cause.NO_DEVICE_WORK),
                         time_ns=ns(ev.ops[i][0]))  # fmt: skip
    if gpu:
        _syncs(b, ev, ns, op_parent, op_region, op_site, op_stack, runtime_op, regions)
    _device_work(b, ev, ns, device_op, op_region, op_site, op_stack, by_corr, regions, multi_device, lanes)
    trace = b.build()
    trace.tables["ops"] = ops_table
    trace.tables["runtime_calls"] = _runtime_calls(ev, t0, regions, runtime_op)
    device_lanes = trace.tables["engine_slices"]
    trace.tables["engine_slices"] = pa.concat_tables([host_lanes, device_lanes.cast(host_lanes.schema)]).combine_chunks() \
        if device_lanes.num_rows else host_lanes
    return trace


def _correlations(ev: KinetoEvents) -> tuple[CorrelationIndex | dict[object, int], list[int]]:
    """(correlation -> the last runtime call holding it, the runtime call of each device slice or -1): sorted
    int64 arrays where both sides' correlations are int64 ids (as Kineto writes them), else a dict."""
    if isinstance(ev.runtime, RowColumns) and isinstance(ev.device, RowColumns):
        runtime_corr, device_corr = ev.runtime.int_column(5), ev.device.int_column(6)
        if runtime_corr is not None and device_corr is not None:
            index = CorrelationIndex(runtime_corr)
            return index, index.find(device_corr).tolist()
    by_corr: dict[object, int] = {}
    for i, r in enumerate(ev.runtime):
        if r[5] is not None and _hashable(r[5]):
            by_corr[r[5]] = i
    return by_corr, [by_corr.get(d[6], -1) if _hashable(d[6]) else -1 for d in ev.device]


def _hashable(value: object) -> bool:
    """A correlation a dict can hold (another JSON type in a broken file joins nothing)."""
    return type(value) in (int, str, float, bool)


def _runtime_calls(ev: KinetoEvents, t0: float, regions: _Regions, runtime_op: list[int]) -> pa.Table:
    """One row per runtime or driver call: its region (the innermost open at its start, as for an operator),
    the operator it ran inside, its correlation (what joins it to the device work it launched)."""
    n = len(ev.runtime)
    ts = np.fromiter((r[0] for r in ev.runtime), dtype=np.float64, count=n)
    start = _ns(ts, t0)
    dur = _ns(ts + np.fromiter((r[1] for r in ev.runtime), dtype=np.float64, count=n), t0)
    dur -= start
    np.maximum(dur, 0, out=dur)
    names: dict[str, int] = {}
    name_codes = np.fromiter((names.setdefault(r[2], len(names)) for r in ev.runtime), dtype=np.int32, count=n)
    op = np.asarray(runtime_op, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
    corr = [c if type(c) is int and -(2**63) <= c < 2**63 else None for c in (r[5] for r in ev.runtime)]
    return _table("runtime_calls", {
        "region_id": regions.find_many(start).astype(np.int32), "op_id": pa.array(op, mask=op < 0),
        "name": _coded(list(names), name_codes), "start_ns": start, "dur_ns": dur,
        "correlation": pa.array(corr, pa.int64())})  # fmt: skip


def _top_level(ts: np.ndarray, dur: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Indices of the ops no other op on their thread (a code per op) encloses (the sweep's nesting rule, vectorized)."""
    if not len(ts):
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((-dur, ts, thread))
    ends = (ts + dur)[order]
    starts = ts[order]
    top = np.zeros(len(ts), dtype=bool)
    bounds = np.flatnonzero(np.diff(thread[order])) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(ts)], strict=True):
        prev_max = np.maximum.accumulate(ends[lo:hi])
        top[lo:hi] = np.r_[True, starts[lo + 1 : hi] >= prev_max[:-1]]
    return np.sort(order[top])


def _nest(b: TraceBuilder, ev: KinetoEvents) -> tuple[array, list[str | None], list[int | None], list[int]]:
    """(parent op per op, call site per op, stack per op, enclosing op per runtime call): ops, Python frames and
    runtime calls swept per thread in order of (start, longest first, frames before ops before runtime calls)."""
    ops = ev.ops
    n_ops = len(ops)
    op_parent = array("q", [-1]) * n_ops
    op_site: list[str | None] = [None] * n_ops
    op_stack: list[int | None] = [None] * n_ops
    runtime_op = [-1] * len(ev.runtime)
    codes = {t: i for i, t in enumerate(ops.threads)}
    n_others = len(ev.python) + len(ev.runtime)

    def others() -> Iterator[tuple]:  # frames then runtime calls, read as they are made (no list of them all)
        return itertools.chain(ev.python, ev.runtime)

    other_thread = np.fromiter((codes.setdefault((o[3], o[4]), len(codes)) for o in others()), dtype=np.int64, count=n_others)
    thread = np.concatenate([ops.numpy("thread").astype(np.int64), other_thread])
    ts = np.concatenate([ops.numpy("ts"), np.fromiter((o[0] for o in others()), dtype=np.float64, count=n_others)])
    neg_dur = -np.concatenate([ops.numpy("dur"), np.fromiter((o[1] for o in others()), dtype=np.float64, count=n_others)])
    kind = np.concatenate([np.ones(n_ops, dtype=np.int64), np.zeros(len(ev.python), dtype=np.int64),
                           np.full(len(ev.runtime), 2, dtype=np.int64)])  # fmt: skip
    index = np.concatenate([np.arange(n_ops), np.arange(len(ev.python)), np.arange(len(ev.runtime))]).astype(np.int64)
    order = np.lexsort((index, kind, neg_dur, ts, thread))
    frames_cache: dict[str, tuple[str, int, str] | None] = {}
    sites_cache: dict[tuple[int, ...], tuple[str | None, int | None]] = {}
    ops_open: list[tuple[float, int]] = []
    py_open: list[tuple[float, int]] = []
    current = -1
    for lo in range(0, len(order), _SWEEP_SLICE):
        part = order[lo : lo + _SWEEP_SLICE]
        for th, t, nd, k, i in zip(thread[part].tolist(), ts[part].tolist(), neg_dur[part].tolist(), kind[part].tolist(),
                                   index[part].tolist(), strict=True):  # fmt: skip
            if th != current:
                current = th
                ops_open.clear()
                py_open.clear()
            while ops_open and ops_open[-1][0] <= t:
                ops_open.pop()
            while py_open and py_open[-1][0] <= t:
                py_open.pop()
            if k == 1:
                if ops_open:
                    op_parent[i] = ops_open[-1][1]
                if py_open:
                    key = tuple(j for _, j in py_open)
                    site = sites_cache.get(key)
                    if site is None:
                        site = sites_cache[key] = _call_site(b, [ev.python[j][2] for j in key], frames_cache)
                    op_site[i], op_stack[i] = site
                ops_open.append((t - nd, i))
            elif k == 0:
                py_open.append((t - nd, i))
            elif ops_open:
                runtime_op[i] = ops_open[-1][1]
    return op_parent, op_site, op_stack, runtime_op


def _coded(values: list, codes: np.ndarray, *, dictionary: bool = True) -> pa.Array:
    """The column values[codes] (None: null), dictionary-encoded over the distinct values used."""
    if not dictionary:
        present = np.array([v is not None for v in values], dtype=bool)
        filled = np.array([v if v is not None else 0 for v in values], dtype=np.int64)
        return pa.array(filled[codes] if len(values) else np.zeros(0, dtype=np.int64), mask=~present[codes] if len(values) else None)
    return _Coder(values, np.bincount(codes, minlength=len(values)) > 0 if len(values) else np.zeros(0, dtype=bool))(codes)


class _Coder:
    """values[codes] (None: null) as a dictionary column over the distinct values that some row uses (`used`: one
    flag per value); every slice it codes shares one dictionary, as an Arrow IPC file requires."""

    def __init__(self, values: list, used: np.ndarray) -> None:
        distinct: dict[object, int] = {}
        remap = np.array([distinct.setdefault(v, len(distinct)) if v is not None else -1 for v in values] or [-1], dtype=np.int32)
        kept = np.zeros(len(distinct) + 1, dtype=bool)
        kept[remap[used] if len(values) else []] = True  # values some row uses (-1: null)
        compact = (np.cumsum(kept[:-1]) - 1).astype(np.int32)
        self.words = pa.array([v for v, i in distinct.items() if kept[i]], pa.string())
        self.remap = np.where(remap >= 0, compact[np.maximum(remap, 0)] if len(distinct) else 0, -1).astype(np.int32)

    def __call__(self, codes: np.ndarray) -> pa.DictionaryArray:
        indices = self.remap[codes]  # one int32 per row, -1 for null
        nulls = indices < 0
        indices[nulls] = 0
        return pa.DictionaryArray.from_arrays(pa.array(indices, mask=nulls if nulls.any() else None), self.words)


def _ns(ts: np.ndarray, t0: float) -> np.ndarray:
    """Integer ns from t0 of microsecond times, as round((ts - t0) * 1000), with one temporary array."""
    out = ts - t0
    out *= 1000.0
    np.rint(out, out=out)
    return out.astype(np.int64)


def _table(name: str, columns: dict[str, object]) -> pa.Table:
    """An Arrow table of the schema from whole columns (lists or numpy arrays); missing columns are null."""
    table_schema = schema.TABLES[name]
    n = max(len(v) for v in columns.values() if v is not None)  # type: ignore[arg-type]
    arrays = []
    for field in table_schema:
        values = columns.get(field.name)
        if values is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(values, pa.Array):
            arrays.append(values.cast(field.type))
        elif pa.types.is_dictionary(field.type):
            arrays.append(pa.array(values, pa.string()).dictionary_encode())
        else:
            arrays.append(pa.array(values, field.type))
    return pa.Table.from_arrays(arrays, schema=table_schema)


def _syncs(b, ev, ns, op_parent, op_region, op_site, op_stack, runtime_op, regions) -> None:  # noqa: ANN001
    """Sync signals by the catalogue's rules: the outermost sync operator of a nest (``aten::item`` around
    ``aten::_local_scalar_dense``); a data-dependent operator inside an indexing operator is boolean indexing
    (Kineto records no dtypes of index lists: ``x[mask]`` shows as ``aten::index`` around ``aten::nonzero``);
    a runtime sync call outside any sync operator."""
    def inside_sync(oi: int) -> bool:
        while oi >= 0:
            if ev.ops[oi][2] in SYNC_OPS:
                return True
            oi = op_parent[oi]
        return False

    sync_names = [code for code, name in enumerate(ev.ops.names) if name in SYNC_OPS]
    for i in np.flatnonzero(np.isin(ev.ops.numpy("name"), sync_names)).tolist():
        if inside_sync(op_parent[i]):
            continue
        parent = op_parent[i]
        at = parent if parent >= 0 and ev.ops[parent][2] in BOOL_INDEX_OPS else i
        rule = sync_cause(OpCall(ev.ops[at][2], bool_index=at != i))
        if rule is None:
            continue
        b.signals.append(region_id=int(op_region[at]), op_id=at, kind=SignalKind.SYNC, reason=rule.cause.value,
                         op_name=ev.ops[at][2], count=1, bytes=0, call_site=op_site[at], stack_id=op_stack[at],
                         note=rule.hint, time_ns=ns(ev.ops[at][0]))  # fmt: skip
    for ri, r in enumerate(ev.runtime):
        if r[2] in SYNC_RUNTIME_CALLS:
            oi = runtime_op[ri]
            if oi >= 0 and inside_sync(oi):
                continue
            start = ns(r[0])
            b.signals.append(region_id=int(op_region[oi]) if oi >= 0 else regions.find(start), op_id=oi if oi >= 0 else None,
                             kind=SignalKind.SYNC, reason=r[2], op_name=ev.ops[oi][2] if oi >= 0 else r[2], count=1, bytes=0,
                             call_site=op_site[oi] if oi >= 0 else None, stack_id=op_stack[oi] if oi >= 0 else None,
                             note=cause_hint(Cause.SYNC_CALL), time_ns=start)  # fmt: skip


def _device_work(b, ev, ns, device_op, op_region, op_site, op_stack, by_corr, regions, multi_device, lanes=None) -> None:  # noqa: ANN001
    engines: dict[str, str] = {}  # one string per lane name, not one per slice
    for d, oi in zip(ev.device, device_op, strict=True):
        ts, dur, cat, name, dev, stream, corr, nbytes = d
        start = ns(ts)
        span = max(ns(ts + dur) - start, 0)
        rid = int(op_region[oi]) if oi >= 0 else regions.find(start)
        op_id = oi if oi >= 0 else None
        prefix = f"cuda:{dev} " if multi_device else ""
        lane = lanes.lane(cat, name, dev, stream) if lanes else None  # NPU lanes hook
        if cat == "gpu_memcpy":
            direction = (lane.direction if lane else None) or copy_direction(name) or Direction.D2D
            if nbytes is None and _hashable(corr) and corr in by_corr:
                nbytes = ev.runtime[by_corr[corr]][7]
            nbytes = nbytes or 0
            b.engine_slices.append(region_id=rid, engine=lane.engine if lane else engines.setdefault(e := f"{prefix}DMA {direction.value}", e),
                                   engine_kind=lane.engine_kind if lane else _DMA[direction],
                                   kind=SliceKind.TRANSFER, name=name, start=start, dur=span, op_id=op_id, bytes=nbytes,
                                   correlation=corr if type(corr) is int and -(2**63) <= corr < 2**63 else None)  # fmt: skip
            src = "cpu" if direction is Direction.H2D else lane.device if lane else f"cuda:{dev}"
            dst = "cpu" if direction is Direction.D2H else lane.device if lane else f"cuda:{dev}"
            site = op_site[oi] if oi >= 0 else None
            stack = op_stack[oi] if oi >= 0 else None
            b.transfers.append(region_id=rid, op_id=op_id, direction=direction, bytes=nbytes, src_device=src, dst_device=dst,
                               start_ns=start, dur_ns=span, cause="explicit", call_site=site, stack_id=stack)  # fmt: skip
            b.signals.append(region_id=rid, op_id=op_id, kind=direction.signal, reason=name, op_name=ev.ops[oi][2] if oi >= 0 else name,
                             count=1, bytes=nbytes, call_site=site, stack_id=stack, time_ns=start)  # fmt: skip
        else:
            b.engine_slices.append(region_id=rid, engine=lane.engine if lane else engines.setdefault(e := f"{prefix}stream {stream}", e),
                                   engine_kind=lane.engine_kind if lane else EngineKind.STREAM,
                                   kind=lane.slice_kind if lane else SliceKind.COMPUTE, name=name, start=start, dur=span, op_id=op_id,
                                   bytes=nbytes if cat == "gpu_memset" else None,
                                   correlation=corr if type(corr) is int and -(2**63) <= corr < 2**63 else None)  # fmt: skip


def _call_site(b: TraceBuilder, names: list[str], cache: dict) -> tuple[str | None, int | None]:
    """(call site, interned stack id) of the open Python frames' names (outermost first); cache: name -> frame."""
    frames = []
    for name in reversed(names):  # innermost first
        frame = cache.get(name, 0)
        if frame == 0:
            m = _FRAME.match(name)
            frame = cache[name] = (m.group(1), int(m.group(2)), m.group(3)) if m else None
        if frame is not None:
            frames.append(frame)
    if not frames:
        return None, None
    return site_of_frames(frames), b.stacks.intern(relative_frames(frames))


class _Regions:
    """Regions from annotations, nested by time; find(t) is the innermost region open at t."""

    def __init__(self, root: int, end_ns: int) -> None:
        self.root = root
        self._stack: list[tuple[int, int]] = [(2**62, root)]
        self._times: list[int] = [-(2**62)]
        self._ids: list[int] = [root]

    def _mark(self, t: int, rid: int) -> None:
        if self._times[-1] == t:
            self._ids[-1] = rid
        else:
            self._times.append(t)
            self._ids.append(rid)

    def _close_until(self, t: int) -> None:
        while len(self._stack) > 1 and self._stack[-1][0] <= t:
            end, _ = self._stack.pop()
            self._mark(end, self._stack[-1][1])

    def add(self, b: TraceBuilder, name: str, start: int, dur: int, device: str) -> None:
        self._close_until(start)
        rid = b.add_region(name, start_ns=start, dur_ns=dur, parent_id=self._stack[-1][1], device=device)
        self._stack.append((start + dur, rid))
        self._mark(start, rid)

    def finish(self) -> None:
        """Close every region; then `find` and `find_many` answer (from two int64 arrays, 16 bytes a change of region)."""
        self._close_until(2**62 - 1)
        self._times_a, self._ids_a = np.asarray(self._times, dtype=np.int64), np.asarray(self._ids, dtype=np.int64)
        self._times, self._ids = [], []

    def find(self, t: int) -> int:
        return int(self._ids_a[np.searchsorted(self._times_a, t, side="right") - 1])

    def find_many(self, t: np.ndarray) -> np.ndarray:
        return self._ids_a[np.searchsorted(self._times_a, t, side="right") - 1]


def _run_info(path: Path, ev: KinetoEvents, t0: float, devices: list, infer_fallback: bool) -> RunInfo:
    meta = ev.metadata
    base = meta.get("baseTimeNanoseconds")
    start_ns = int(base) + int(t0 * 1000) if isinstance(base, int) else int(t0 * 1000)
    start_time = None
    if 10**17 < start_ns < 10**19:  # plausibly epoch nanoseconds
        start_time = datetime.datetime.fromtimestamp(start_ns / 1e9, datetime.UTC).isoformat()
    missing = ["dispatch/recompile (not in profiler traces)", "host_bounce/* (Kineto records no tensor devices)"]
    if not ev.python:
        missing.append("call sites (recorded without with_stack=True)")
    if not any(s[0] for s in ev.ops.signatures):
        missing.append("shapes and dtypes (recorded without record_shapes=True)")
    unread = {k: n for k, n in ev.categories.items() if k not in KINETO_READ_CATEGORIES}
    if not ev.device:
        missing.append("transfers, syncs and cpu_fallback " + ("(no device activity in the categories read)" if unread
                                                               else "(CPU-only trace: no device activity)"))
    else:
        missing.append("dispatch/cpu_fallback " + ("inferred from operators that launched no GPU work" if infer_fallback
                       else "(Kineto records no tensor devices; operators that launched no GPU work are placed on the host)"))
        if any(d[2] == "gpu_memcpy" and d[7] is None for d in ev.device) and not any(r[7] for r in ev.runtime):
            missing.append("transfer bytes (memcpy events carry no size)")
    if unread:
        listed = sorted(unread.items(), key=lambda kv: (-kv[1], str(kv[0])))
        missing.append("events of categories this reader does not read: " + ", ".join(f"{k} ({n:,})" for k, n in listed))
    return RunInfo(
        source=Source.CONVERTED,
        devices=["cpu", *(f"cuda:{d}" for d in devices)],
        start_time=start_time,
        producer="portscope convert",
        converted_from=FORMAT,
        missing_signals=missing,
        extra={
            "trace_name": meta.get("traceName"),
            "events": ev.events,
            "categories": {str(k): v for k, v in sorted(ev.categories.items(), key=lambda kv: str(kv[0]))},
            "base_time_ns": base if isinstance(base, int) else None,
        },
    )
