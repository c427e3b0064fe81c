"""Flows: every flow point binds to a span of its thread (Chrome's rules, `bind_flows`), and what the points say is
written into the events' columns before the launches are joined (`bound_flows`).

The spans a flow binds share one id: the correlation of the span its start binds to where that span has one of its
own (a launch id the format numbers itself), else the flow's id. A span with a correlation of its own keeps it, an
operator takes none (an operator's correlation names the device work it ran as), any other span takes that of its
last `flow` event (file order): a flow's end at device work is a launch by the runtime call at its start. An event of
another kind with a flow point of its own (torch_npu's launch: a runtime call where its flow starts) moves to the
start of the span it binds to. The binding is one pass of `link_nesting`'s sweep over the spans and points of the
points' threads, the columns read `link_nesting.CHUNK_ROWS` rows at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import link_nesting
from .events import KIND_CODES, NONE, EventKind, SparseColumn, flow_binds_enclosing, flow_starts
from .link_nesting import SortedRows, sorted_chunks, sweep
from .spill import DiskColumn

# what a flow point binds to: every event with a span (zero-length ones too), not the points of flows, memory or logs
FLOW_TARGETS = tuple(k for k in EventKind if k not in (EventKind.FLOW, EventKind.MEMORY, EventKind.PLACEMENT,
                                                       EventKind.COMPILE))  # fmt: skip


def bound_flows(a: dict[str, np.ndarray]) -> None:
    """What the flow points say, written into the events' columns (a new column where it is not a file's): the
    spans a flow's `flow` events bind to share its id (`_flow_correlations`); an event of another kind with a flow
    point of its own (its `flow` code) is moved to the start of the span it binds to, on its thread (where it binds
    to none, it stays)."""
    points, spans = bind_flows(a)
    bound = spans >= 0
    points, spans = points[bound], spans[bound]
    if not len(points):
        return
    flow = np.asarray(a["kind"][points]) == KIND_CODES[EventKind.FLOW]
    a["correlation"] = _flow_correlations(a, points[flow], spans[flow])
    moved, to = points[~flow], spans[~flow]
    if len(moved):
        a["start_ns"] = _written(a["start_ns"], moved, np.asarray(a["start_ns"][to]))


def _written(column: Any, rows: np.ndarray, values: np.ndarray) -> Any:
    """A column (in a file, or in memory: a copy where it may not be written) with `values` at `rows`."""
    if isinstance(column, DiskColumn):
        column.put(rows, values)
        return column
    out = column if column.flags.writeable else np.array(column)
    out[rows] = values
    return out


def bind_flows(a: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(the rows of the flow points: the events with a `flow` code, in order; the row of the span each binds to, -1:
    none), by Chrome's rules: a point that binds to the enclosing span goes to the innermost span (`FLOW_TARGETS`, not
    a point) of its thread open at its time (start <= time <= end: the latest start, the shortest of those starting
    together, still open); other points, and those no span encloses, to the first span of their thread starting at
    or after them (the longest first of those starting together, then file order).
    Both from one pass over the spans and points of the points' threads in `enclosing`'s order (spans' ends made
    inclusive, a point after the spans starting with it): `sweep` finds the enclosing span, `_NextSpans` the next
    one. What is held is a few integers per span of those threads and per point; the values are read from the
    columns (in files or not) a chunk at a time as they are sorted."""
    kind = a["kind"]
    flows = _flow_rows(a["flow"])
    if not len(flows):
        return flows, flows
    thread, start, dur = a["thread"], a["start_ns"], a["dur_ns"]
    f_thread, f_time = np.asarray(thread[flows]), np.asarray(start[flows])
    enclosed = flow_binds_enclosing(np.asarray(a["flow"][flows]))
    threads = np.unique(f_thread)
    targets = [KIND_CODES[k] for k in FLOW_TARGETS]
    row_type = np.int32 if len(kind) < 2**31 else np.int64  # 4 bytes a span where the rows fit
    chunk = link_nesting.CHUNK_ROWS
    spans = np.concatenate([(lo + np.flatnonzero(np.isin(kind[lo : lo + chunk], targets)
                                                 & np.isin(np.asarray(thread[lo : lo + chunk]), threads))).astype(row_type)
                            for lo in range(0, len(kind), chunk)])  # fmt: skip
    at = np.minimum(np.searchsorted(flows, spans), len(flows) - 1)  # both ascending: a merge, no sort
    spans = spans[flows[at] != spans]  # a point is no span to bind to
    del at
    bound = np.full(len(flows), -1, dtype=np.int64)
    if not len(spans):
        return flows, bound
    m, k = len(spans), len(flows)
    # positions 0..m-1: the spans, m..m+k-1: the points; their values read where sorted
    chunks = sorted_chunks(_SpansThenPoints(thread, spans, f_thread), _SpansThenPoints(start, spans, f_time),
                     _SpansThenPoints(dur, spans, np.zeros(k, dtype=np.int64), add=1),
                     np.broadcast_to(np.int8(0), (m + k,)), _Within(0, m), _Within(m, m + k), _Range(m + k))
    nexts = _NextSpans(m, k)
    seen = (nexts.feed(c) for c in chunks)
    if enclosed.any():
        found = sweep(seen, m + k)[m:]
        inside = enclosed & (found >= 0)
        bound[inside] = spans[found[inside]]
        del found, inside
    else:
        for _ in seen:
            pass
    later = (bound < 0) & (nexts.out >= 0)
    bound[later] = spans[nexts.out[later]]
    return flows, bound


class _Range:
    """0..n-1 as rows (read a slice at a time, never made whole)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: slice) -> np.ndarray:
        lo, hi, _ = index.indices(self.n)
        return np.arange(lo, hi, dtype=np.int64)


class _Within:
    """Per position: whether it lies in lo..hi-1 (the spans, or the points), read at given positions."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def __getitem__(self, at: np.ndarray) -> np.ndarray:
        at = np.asarray(at)
        return (at >= self.lo) & (at < self.hi)


class _SpansThenPoints:
    """A column's values at `spans` (plus `add`), then the points' own values: what `bind_flows` sorts, read at
    sorted positions (a chunk at a time), never made whole."""

    def __init__(self, column: Any, spans: np.ndarray, points: np.ndarray, add: int = 0) -> None:
        self.column, self.spans, self.points, self.add = column, spans, points, add

    def __getitem__(self, at: np.ndarray) -> np.ndarray:
        at = np.asarray(at)
        m = len(self.spans)
        out = np.empty(len(at), dtype=np.int64)
        span = at < m
        rows = self.spans[at[span]]
        order = np.argsort(rows, kind="stable")  # a column in a file is read in order of row
        values = np.empty(len(rows), dtype=np.int64)
        values[order] = np.asarray(self.column[rows[order]], dtype=np.int64)
        out[span] = values + self.add
        out[~span] = self.points[at[~span] - m]
        return out


class _NextSpans:
    """Per point (positions m.. of `bind_flows`' sorted stream), fed the stream a chunk at a time: the position of the
    first span of its thread starting at or after it (-1: none). In that order the spans starting with a point come
    before it (longest first: its answer is the first of its (thread, start) group when that is a span) and the
    later ones after it (the first span after it, when of its thread)."""

    def __init__(self, m: int, k: int) -> None:
        self.m = m
        self.out = np.full(k, -1, dtype=np.int64)
        self.last: tuple[int, int, int] | None = None  # the previous chunk's last (thread, start) group and its head
        self.waiting = np.zeros(0, dtype=np.int64)  # points whose next span lies beyond their chunk
        self.waiting_thread = np.zeros(0, dtype=np.int64)

    def feed(self, c: SortedRows) -> SortedRows:
        n = len(c.row)
        if not n:
            return c
        g, s, span = c.group, c.start, np.asarray(c.container)
        new = np.ones(n, dtype=bool)
        new[1:] = (g[1:] != g[:-1]) | (s[1:] != s[:-1])
        head = np.maximum.accumulate(np.where(new, np.arange(n), 0))
        head_span = np.where(span[head], c.row[head], -1)
        if self.last is not None and (g[0], s[0]) == self.last[:2]:  # the first group goes on from the last chunk
            head_span[head == 0] = self.last[2]
        self.last = (int(g[-1]), int(s[-1]), int(head_span[-1]))
        firsts = np.flatnonzero(span)
        if len(self.waiting) and len(firsts):  # the first span of this chunk is theirs, if of their thread
            j = firsts[0]
            mine = self.waiting_thread == g[j]
            self.out[self.waiting[mine]] = c.row[j]
            self.waiting = self.waiting_thread = np.zeros(0, dtype=np.int64)
        points = np.flatnonzero(~span)
        if not len(points):
            return c
        nxt = np.full(n + 1, n, dtype=np.int64)
        nxt[firsts] = firsts
        nxt = np.minimum.accumulate(nxt[::-1])[::-1][points]  # the first span after each point (n: none here)
        ok = nxt < n
        ok[ok] = g[nxt[ok]] == g[points[ok]]
        point = c.row[points] - self.m
        self.out[point] = np.where(head_span[points] >= 0, head_span[points], np.where(ok, c.row[np.minimum(nxt, n - 1)], -1))
        wait = (head_span[points] < 0) & (nxt == n)
        self.waiting = np.concatenate([self.waiting, point[wait]])
        self.waiting_thread = np.concatenate([self.waiting_thread, g[points[wait]]])
        return c


def _flow_rows(flow: Any) -> np.ndarray:
    """The rows that have a `flow` code, in order (a column in a file read `link_nesting.CHUNK_ROWS` at a time)."""
    if isinstance(flow, SparseColumn):
        return flow.present().astype(np.int64)
    if isinstance(flow, np.ndarray) and flow.strides == (0,):  # a constant: none
        return np.zeros(0, dtype=np.int64)
    chunk = link_nesting.CHUNK_ROWS
    return np.concatenate([lo + np.flatnonzero(np.asarray(flow[lo : lo + chunk]) != NONE)
                           for lo in range(0, len(flow), chunk)] or [np.zeros(0, dtype=np.int64)]).astype(np.int64)


def _flow_correlations(a: dict[str, Any], flows: np.ndarray, spans: np.ndarray) -> Any:
    """The correlation column once `flows` (`flow` events, in file order) are bound to `spans`: what a flow carries
    is the correlation of the span its last start (file order) binds to where that span has one of its own, else
    the flow's id; a span without a correlation of its own takes what the last of `flows` bound to it carries,
    unless it is an operator (its correlation would say that device work ran as it: `link_launches.ran_as`)."""
    correlation, n = a["correlation"], len(a["kind"])
    ids = np.asarray(correlation[flows], dtype=np.int64)
    own = np.asarray(correlation[spans], dtype=np.int64)  # the spans' own ids, before any flow's
    start = np.flatnonzero(flow_starts(np.asarray(a["flow"][flows])) & (ids != NONE))[::-1]  # the last start first
    keys, first = np.unique(ids[start], return_index=True)
    if len(keys):  # a flow whose start's span has an id of its own carries that one
        carried = own[start[first]]
        at = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
        take = (keys[at] == ids) & (carried[at] != NONE)
        ids = np.where(take, carried[at], ids)
    takes = (own == NONE) & (np.asarray(a["kind"][spans]) != KIND_CODES[EventKind.OP])
    last = np.flatnonzero((ids != NONE) & takes)[::-1]  # the last point first
    rows, first = np.unique(spans[last], return_index=True)
    if not len(rows):
        return correlation
    ids = ids[last[first]]
    if isinstance(correlation, SparseColumn):
        keep = ~np.isin(correlation.rows, rows)
        all_rows = np.concatenate([correlation.rows[keep], rows])
        order = np.argsort(all_rows, kind="stable")
        return SparseColumn(all_rows[order], np.concatenate([correlation.values[keep], ids])[order], n)
    return _written(correlation, rows, ids)


__all__ = ["FLOW_TARGETS", "bind_flows", "bound_flows"]
