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
import pyarrow as pa

from ..builder import TraceBuilder
from ..schema import TABLES, Mode, SliceKind, Source
from ..trace import RunInfo, Trace
from ._chrome_bind import bind_flows, flow_ids
from ._chrome_events import ChromeEvents, blocks, collect, lane_keys
from ._chrome_slices import Lane, SliceRows, finish
from ._source import DEFAULT_CAPS, SizeCaps
from ._spill import DiskColumn

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
    thread = ev.thread_names.get((pid, tid)) or f"tid {tid}"
    return f"{process} / {thread}"


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


def slice_table(ev: ChromeEvents, rid: int, t0: int, lanes: dict[tuple[int, int], Lane], index: np.ndarray | None = None,
                *, correlation: np.ndarray | None = None, kinds: dict[int, SliceKind] | None = None,
                op_ids: np.ndarray | None = None) -> pa.Table:  # fmt: skip
    """The engine slices of the spans `index` (default all) on their lanes, as a table built from columns.

    No Python object per span: lanes, names and kinds are dictionary-encoded from the interned codes.
    `kinds` overrides a span's slice kind (default: its lane's).
    """
    all_start = ev.col("start")
    if index is None:
        index = np.arange(len(ev), dtype=np.int64)
    index = np.asarray(index, dtype=np.int64)
    pid = ev.col("pid")[index].astype(np.int64)
    tid = ev.col("tid")[index].astype(np.int64)
    key = (pid << 32) | tid
    engines = sorted({lane.engine for lane in lanes.values()})
    engine_code = {e: n for n, e in enumerate(engines)}
    keys = np.array([(p << 32) | t for p, t in lanes], dtype=np.int64)
    lane_list = list(lanes.values())
    order = np.argsort(keys)
    pos = np.searchsorted(keys[order], key) if len(keys) else np.zeros(len(key), dtype=np.int64)
    pos = np.minimum(pos, max(len(keys) - 1, 0))
    found = keys[order][pos] == key if len(keys) else np.zeros(len(key), dtype=bool)
    index, pos = index[found], order[pos[found]]
    lane_engine = np.array([engine_code[lane.engine] for lane in lane_list], dtype=np.int32)
    kind_values = [k.value for k in SliceKind]
    lane_kind = np.array([kind_values.index(lane.slice_kind.value) for lane in lane_list], dtype=np.int32)
    lane_ekind = [lane.engine_kind.value for lane in lane_list]
    ekinds = sorted(set(lane_ekind))
    lane_ekind_code = np.array([ekinds.index(k) for k in lane_ekind], dtype=np.int32)
    kind = lane_kind[pos] if len(pos) else np.zeros(0, dtype=np.int32)
    if kinds and len(index):
        where = np.argsort(index, kind="stable")
        ordered = index[where]
        spans = np.fromiter(kinds.keys(), dtype=np.int64, count=len(kinds))
        values = np.array([kind_values.index(k.value) for k in kinds.values()], dtype=np.int32)
        at = np.minimum(np.searchsorted(ordered, spans), len(ordered) - 1)
        hit = ordered[at] == spans
        kind[where[at[hit]]] = values[hit]
    names, name_idx = np.unique(ev.col("name")[index], return_inverse=True) if len(index) else (
        np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    vals = ev.values.values

    def dictionary(codes: np.ndarray, values: list[str]) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32), pa.int32()), pa.array(values, pa.string()))

    def optional(column: np.ndarray | None) -> pa.Array:
        if column is None:
            return pa.nulls(len(index), pa.int64())
        values = column[index]
        return pa.array(values, pa.int64(), mask=values < 0)

    n = len(index)
    columns = {
        "region_id": pa.array(np.full(n, rid, dtype=np.int32)),
        "engine": dictionary(lane_engine[pos] if n else np.zeros(0, dtype=np.int32), engines),
        "engine_kind": dictionary(lane_ekind_code[pos] if n else np.zeros(0, dtype=np.int32), ekinds),
        "kind": dictionary(kind, kind_values),
        "name": dictionary(name_idx, [vals[c] for c in names.tolist()]),
        "start": pa.array(all_start[index] - t0 if n else np.zeros(0, dtype=np.int64)),
        "dur": pa.array(ev.col("dur")[index]),
        "op_id": optional(op_ids),
        "correlation": optional(correlation),
    }
    schema = TABLES["engine_slices"]
    return pa.Table.from_arrays([columns.get(f.name, pa.nulls(n, f.type)) for f in schema], schema=schema)


def with_slices(trace: Trace, tables: list[pa.Table]) -> Trace:
    """The trace with slice tables appended to its engine slices (one dictionary per column, as IPC files need)."""
    parts = [trace.tables["engine_slices"], *tables]
    merged = pa.concat_tables([t.cast(parts[0].schema) for t in parts if t.num_rows] or [parts[0]])
    trace.tables["engine_slices"] = merged.unify_dictionaries().combine_chunks()
    return trace


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
           "read_chrome", "run_extent", "slice_table", "sniff", "sorted_lanes", "with_slices"]  # fmt: skip
