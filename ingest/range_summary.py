"""What happened inside a time range of a timeline: per-engine busy time, per-operator totals, signals.

A pure query on a timeline's slices (sorted as `Lanes`) and the trace's signals; returns
Arrow tables. Slices are clipped to the range: a slice half inside counts half its time.
Busy time is the union of a lane's clipped slices (overlaps count once). Signals are
those of the operators whose slices touch the range (signals without an operator are not
placed on a timeline, so they are left out).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .columns import memory_slices
from .viewport import Lanes, dictionary_codes, group_window


@dataclasses.dataclass(frozen=True)
class RangeSummary:
    """Tables for the range [x0, x1] (times in the timeline's unit)."""

    x0: float
    x1: float
    slices: int  # slices touching the range
    engines: pa.Table  # engine, busy, share (busy / range), slices; timeline lane order
    operators: pa.Table  # name, count, time (clipped), largest time first
    signals: pa.Table  # signal, count, bytes


def _clipped(lanes: Lanes, x0: float, x1: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows, lanes, clipped starts and ends of the slices touching [x0, x1]."""
    rows, lane, cs, ce = [], [], [], []
    for g in range(len(lanes.group_lane)):
        lo, hi = group_window(lanes, g, x0, x1)
        if hi <= lo:
            continue
        s, e = np.asarray(lanes.start[lo:hi]), np.asarray(lanes.end[lo:hi])
        keep = e >= x0
        rows.append(np.asarray(lanes.row[lo:hi])[keep])
        lane.append(np.full(int(keep.sum()), lanes.group_lane[g], np.int64))
        cs.append(np.maximum(s[keep], x0))
        ce.append(np.minimum(e[keep], x1))
    if not rows:
        empty = np.zeros(0)
        return np.zeros(0, np.int64), np.zeros(0, np.int64), empty, empty
    return np.concatenate(rows), np.concatenate(lane), np.concatenate(cs), np.concatenate(ce)


def _union(start: np.ndarray, end: np.ndarray) -> float:
    """Length of the union of intervals."""
    if not len(start):
        return 0.0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    before = np.concatenate([[-np.inf], np.maximum.accumulate(e)[:-1]])
    return float(np.maximum(e - np.maximum(s, before), 0).sum())


def range_summary(slices: pa.Table, lanes: Lanes, signals: pa.Table, x0: float, x1: float, *, top: int = 25) -> RangeSummary:
    """The range [x0, x1] of a timeline: `slices` is the table `lanes` was built from, `signals` the trace's."""
    if x1 < x0:
        x0, x1 = x1, x0
    rows, lane, cs, ce = _clipped(lanes, x0, x1)
    work = ~memory_slices(slices.column("engine"))[rows]  # a memory lane holds levels, not busy time or operators
    rows, lane, cs, ce = rows[work], lane[work], cs[work], ce[work]
    span = max(x1 - x0, 1e-9)
    busy = [_union(cs[lane == k], ce[lane == k]) for k in range(len(lanes.lanes))]
    counts = np.bincount(lane, minlength=len(lanes.lanes))
    engines = pa.table({
        "engine": lanes.lanes,
        "busy": pa.array(busy, pa.float64()),
        "share": pa.array([b / span for b in busy], pa.float64()),
        "slices": pa.array(counts.tolist(), pa.int64()),
    }).filter(pa.array(counts > 0))
    column = slices.column("name")
    if pa.types.is_dictionary(column.type):
        codes, names = _indices(column)
        picked = codes[rows]
    else:  # plain strings (names too many for a dictionary): the range's rows only are coded
        picked, names = dictionary_codes(column.take(pa.array(rows, pa.int64())))
    count = np.bincount(picked, minlength=len(names))
    time = np.bincount(picked, weights=ce - cs, minlength=len(names))
    used = np.flatnonzero(count)
    order = used[np.lexsort((np.array([names[i] or "" for i in used], object), -time[used]))][:top]
    operators = pa.table({
        "name": pa.array([names[i] for i in order], pa.string()),
        "count": pa.array(count[order].tolist(), pa.int64()),
        "time": pa.array(time[order].tolist(), pa.float64()),
    })
    return RangeSummary(x0, x1, len(rows), engines, operators, _signals_of(slices, rows, signals))


def _indices(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes (without a copy when the column is one chunk) and values of a string column."""
    if pa.types.is_dictionary(column.type) and not column.null_count and column.num_chunks:
        column = column.unify_dictionaries()  # one dictionary for every chunk: their codes concatenate
        codes = [chunk.indices.to_numpy() for chunk in column.chunks]
        return (codes[0] if len(codes) == 1 else np.concatenate(codes)), column.chunk(0).dictionary.to_pylist()
    return dictionary_codes(column)


def _ids(column: pa.ChunkedArray) -> np.ndarray:
    """An integer id column as numpy, -1 for nulls."""
    return pc.fill_null(column, -1).to_numpy() if column.null_count else column.to_numpy()


def _signals_of(slices: pa.Table, rows: np.ndarray, signals: pa.Table) -> pa.Table:
    empty = pa.table({"signal": pa.array([], pa.string()), "count": pa.array([], pa.int64()), "bytes": pa.array([], pa.int64())})
    if not len(rows) or not signals.num_rows or "op_id" not in slices.column_names:
        return empty
    op_ids = _ids(slices.column("op_id"))[rows]
    op_ids = op_ids[op_ids >= 0]
    if not len(op_ids):
        return empty
    touched = np.zeros(int(op_ids.max()) + 1, bool)  # a bitmap of the operators in range: O(n), no sort
    touched[op_ids] = True
    wanted = _ids(signals.column("op_id"))
    inside = (wanted >= 0) & (wanted < len(touched))
    inside[inside] = touched[wanted[inside]]
    hit = signals.filter(pa.array(inside))
    if not hit.num_rows:
        return empty
    kind = hit.column("kind")
    if pa.types.is_dictionary(kind.type):
        kind = kind.cast(pa.string())
    grouped = (
        pa.table({"signal": kind, "count": hit.column("count"), "bytes": hit.column("bytes")})
        .group_by("signal")
        .aggregate([("count", "sum"), ("bytes", "sum")])
    )
    out = pa.table({"signal": grouped.column("signal"), "count": grouped.column("count_sum"), "bytes": grouped.column("bytes_sum")})
    return out.sort_by([("count", "descending"), ("signal", "ascending")])
