"""The one linker: what encloses what (operators, runtime calls, Python frames, regions) and what launched what.

Every reader's events (`events.EventColumns`) are linked here and nowhere else:

* nesting by time on a thread: an event's enclosing span is the most recently started span of the wanted kind on
  the same (pid, tid) that is still open at the event's start (``end > start``); spans sort by (start, longest
  first, then kind: frames, operators, runtime calls, instants, then file order). This is the stack sweep of a
  profiler's own viewer, computed for all events at once (`enclosing`).
* launches: device work -> the runtime call that holds the same correlation id (the last one in file order when a
  broken file repeats an id), a sort-merge join (measured faster than DuckDB's at every size tried, and linear
  where a broken file repeats one id on many calls). Device work no runtime call launched joins the
  operator that holds its correlation id, where a format lists device work with the operator it ran as.
* flows: every flow point binds to a span of its thread (Chrome's rules, `bind_flows`), and the spans a flow binds
  share one id before the launches are joined: the correlation of the span its start binds to where that span has
  one of its own (a launch id the format numbers itself), else the flow's id. A span with a correlation of its own
  keeps it, an operator takes none (an operator's correlation names the device work it ran as), any other span
  takes that of its last `flow` event (file order): a flow's end at device work is a launch by the runtime call
  at its start. An event of another kind with a flow point of its own (torch_npu's launch: a runtime call where
  its flow starts) moves to the start of the span it binds to.
* regions: user annotations nest by time across threads; an event belongs to the innermost one open at its start.
"""

from __future__ import annotations

import dataclasses
import heapq
import tempfile
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from .events import (
    DEVICE_KINDS,
    KIND_CODES,
    NONE,
    EventKind,
    SparseColumn,
    flow_binds_enclosing,
    flow_starts,
    rows_where,
)
from .spill import DiskColumn

_MIN = np.iinfo(np.int64).min
_RANK = {EventKind.PYTHON: 0, EventKind.ANNOTATION: 0, EventKind.OP: 1, EventKind.RUNTIME: 2}  # others: 3
# what a flow point binds to: every event with a span (zero-length ones too), not the points of flows, memory or logs
FLOW_TARGETS = tuple(k for k in EventKind if k not in (EventKind.FLOW, EventKind.MEMORY, EventKind.PLACEMENT,
                                                       EventKind.COMPILE))  # fmt: skip


@dataclasses.dataclass
class Links:
    """Per event row (-1: none): what the linker found."""

    op: np.ndarray  # the innermost operator enclosing it (device work: the one enclosing its launching call, or the
    # operator it ran as)
    launcher: np.ndarray  # device work: the runtime call that launched it
    frame: np.ndarray  # operators: the innermost Python frame open at their start
    frame_parent: np.ndarray  # Python frames: the frame that called them
    call_parent: np.ndarray  # runtime calls: the runtime call enclosing them (a compile inside a compile)
    annotations: np.ndarray  # the annotation rows, in order of (start, longest first)
    annotation_parent: np.ndarray  # per annotation (that order): the annotation row around it (-1: none)
    region_times: np.ndarray  # times where the innermost open annotation changes ...
    region_rows: np.ndarray  # ... and the annotation row open from each (-1: none)
    end_ns: int  # the run's last end

    def region_change(self, start_ns: np.ndarray) -> np.ndarray:
        """The index into `region_times` / `region_rows` of the last change at or before each time (an event's
        region by its start: `region_rows` there is the innermost annotation row open then, -1 none)."""
        return np.searchsorted(self.region_times, start_ns, side="right") - 1


CHUNK_ROWS = 1 << 19  # sorted rows searched at a time: what a chunk holds is bounded whatever the trace's size (2 GB
# with_stack trace: 0.44 GB peak at 1M rows, 0.42 at 512k, no slower)
SORT_ROWS = 4_000_000  # rows `enclosing` sorts itself (~50 bytes a row at once); more: DuckDB sorts them, spilling
SORT_MEMORY = "64MB"  # DuckDB's memory_limit for that sort (2 GB with_stack trace: 0.49 GB peak at 128 MB, 0.43 at 64, no slower)


def enclosing(group: np.ndarray, start: np.ndarray, dur: np.ndarray, rank: np.ndarray, container: np.ndarray,
              query: np.ndarray) -> np.ndarray:
    """For each row where `query`: the row index of the innermost `container` row of the same `group` open at its
    start (-1: none); other rows get -1. Rows sort by (group, start, -dur, rank, row); a container is open at a
    later row's start while its end is greater than that start. Searched `CHUNK_ROWS` sorted rows at a time, each
    chunk with the containers still open where the previous one ended (at most the nesting depth)."""
    if not container.any() or not query.any():
        return np.broadcast_to(np.int32(-1), (len(group),))
    rows = rows_where(container | query)
    if not isinstance(start, np.ndarray) and _in_start_order(start, rows):  # columns in files: never gathered whole
        return _enclosing_in_order(group, start, dur, rank, container, query, rows)
    return _sweep(_sorted(group, start, dur, rank, container, query, rows), len(rank))


def _sorted(group: Any, start: Any, dur: Any, rank: Any, container: Any, query: Any, rows: Any) -> Iterator[_Sorted]:
    """`rows` with their values in `enclosing`'s order, `CHUNK_ROWS` at a time: sorted in numpy, or by DuckDB
    (spilling to disk: a few bytes a row held, not ~50) past `SORT_ROWS` rows."""
    if len(rows) > SORT_ROWS:
        return _sorted_by_duckdb(group, start, dur, rank, container, query, rows)
    rows = np.asarray(rows[: len(rows)])
    group, start, dur = (v if isinstance(v, np.ndarray) else _Gathered(v, rows) for v in (group, start, dur))
    order = rows[np.lexsort((np.asarray(rank[rows]), -dur[rows], start[rows], group[rows]))]  # stable: file order
    del rows
    return (_Sorted(c, np.asarray(group[c]), np.asarray(start[c]), np.asarray(dur[c]), np.asarray(container[c]),
                    np.asarray(query[c])) for c in (order[lo : lo + CHUNK_ROWS] for lo in range(0, len(order), CHUNK_ROWS)))


class _Sorted(NamedTuple):
    """Rows in order of (group, start, longest first, rank, row), with what the sweep reads of them."""

    row: np.ndarray
    group: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    container: np.ndarray
    query: np.ndarray

    def take(self, index: np.ndarray) -> _Sorted:
        """These positions' rows."""
        return _Sorted(*(v[index] for v in self))

    @staticmethod
    def concat(a: _Sorted, b: _Sorted) -> _Sorted:
        return _Sorted(*(np.concatenate([x, y]) for x, y in zip(a, b, strict=True)))


def _sweep(chunks: Iterator[_Sorted], n: int) -> np.ndarray:
    """`enclosing`'s answer from its rows in sorted order, a chunk at a time, each with the containers of the chunks
    before it still open (at most the nesting depth); the next chunk is read ahead (where a group ends)."""
    out = np.full(n, -1, dtype=np.int32)
    chunks = (c for c in chunks if len(c.row))  # (a reader may hand an empty batch)
    chunk = next(chunks, None)
    carry: _Sorted | None = None
    while chunk is not None:
        following = next(chunks, None)
        if carry is not None and len(carry.row) and carry.group[0] != chunk.group[0]:
            carry = None
        seq = chunk if carry is None else _Sorted.concat(carry, chunk)
        first = len(seq.row) - len(chunk.row)
        ends = np.where(seq.container, seq.start + seq.dur, _MIN)
        asked = first + np.flatnonzero(chunk.query)
        found = _rightmost_greater(ends, seq.start[asked], asked)
        hit = found >= 0
        ok = np.zeros(len(asked), dtype=bool)
        ok[hit] = seq.group[found[hit]] == seq.group[asked[hit]]
        out[seq.row[asked[ok]]] = seq.row[found[ok]]
        if following is not None:
            same = seq.group == following.group[0]
            carry = seq.take(_still_open(np.arange(len(seq.row)), ends, same, int(following.start[0])))
        chunk = following
    return out


def _sorted_by_duckdb(group: Any, start: Any, dur: Any, rank: np.ndarray, container: np.ndarray, query: np.ndarray,
                      rows: np.ndarray) -> Iterator[_Sorted]:
    """The rows with their values in `enclosing`'s order, sorted by DuckDB (imported here) within `SORT_MEMORY` and
    spilling to a temporary folder, read `CHUNK_ROWS` at a time as it sorts (the values are sent a chunk at a time)."""
    import duckdb
    import pyarrow as pa

    fields = pa.schema([("row", pa.int64()), ("g", pa.int64()), ("s", pa.int64()), ("d", pa.int64()), ("r", pa.int8()),
                        ("c", pa.bool_()), ("q", pa.bool_())])  # fmt: skip

    def batches() -> Iterator[pa.RecordBatch]:
        for lo in range(0, len(rows), CHUNK_ROWS):
            at = rows[lo : lo + CHUNK_ROWS]
            yield pa.record_batch([np.asarray(at, dtype=np.int64), *(np.asarray(c[at], dtype=np.int64) for c in (group, start, dur)),
                                   np.asarray(rank[at], dtype=np.int8), np.asarray(container[at]), np.asarray(query[at])],
                                  schema=fields)  # fmt: skip

    with tempfile.TemporaryDirectory(prefix="portscope-sort-") as spill:
        con = duckdb.connect(config={"memory_limit": SORT_MEMORY, "temp_directory": spill, "preserve_insertion_order": False})
        try:
            given = pa.RecordBatchReader.from_batches(fields, batches())  # noqa: F841 (DuckDB reads it by name)
            reader = con.sql("SELECT * FROM given ORDER BY g, s, d DESC, r, row").to_arrow_reader(CHUNK_ROWS)
            for batch in reader:
                row, g, s, d, _, c, q = (batch.column(i).to_numpy(zero_copy_only=False) for i in range(7))
                yield _Sorted(row, g, s, d, c, q)
        finally:
            con.close()


class _Gathered:
    """The values of a column kept in a file (`spill.DiskColumn`) at some rows, indexed by event row as the column
    would be (what `enclosing` reads of rows out of start order: those rows only, not the column)."""

    def __init__(self, column: Any, rows: np.ndarray) -> None:
        self.rows, self.values = rows, column[rows]

    def __getitem__(self, index: Any) -> Any:
        return self.values[np.searchsorted(self.rows, index)]


def _in_start_order(start: Any, rows: np.ndarray) -> bool:
    """Whether the starts of these rows never decrease, read `CHUNK_ROWS` at a time."""
    last = _MIN
    for lo in range(0, len(rows), CHUNK_ROWS):
        s = start[rows[lo : lo + CHUNK_ROWS]]
        if s[0] < last or (s[1:] < s[:-1]).any():
            return False
        last = s[-1]
    return True


def _enclosing_in_order(group: Any, start: Any, dur: Any, rank: np.ndarray, container: np.ndarray, query: np.ndarray,
                        rows: np.ndarray) -> np.ndarray:  # fmt: skip
    """`enclosing` of rows already in order of start, read `CHUNK_ROWS` at a time (a chunk ends where a start does,
    so ties are sorted together): each chunk sorted by (group, start, -dur, rank, row) with the containers of
    earlier chunks still open at its first start (what a sweep's stacks would hold, every group's)."""
    out = np.full(len(rank), -1, dtype=np.int32)
    carry = {c: np.zeros(0, dtype=np.int64) for c in ("row", "group", "start", "dur")}
    lo = 0
    while lo < len(rows):
        hi = min(lo + CHUNK_ROWS, len(rows))
        s = start[rows[lo:hi]]
        while hi < len(rows) and start[int(rows[hi])] == s[-1]:  # a start's ties in one chunk
            cut = int(np.searchsorted(s, s[-1]))
            if cut:
                hi, s = lo + cut, s[:cut]
                break
            more = start[rows[hi : hi + CHUNK_ROWS]]
            hi += len(more)
            s = np.concatenate([s, more])
        chunk = rows[lo:hi]
        seq = {"row": np.concatenate([carry["row"], chunk]), "start": np.concatenate([carry["start"], s]),
               "group": np.concatenate([carry["group"], group[chunk]]), "dur": np.concatenate([carry["dur"], dur[chunk]])}
        order = np.lexsort((seq["row"], rank[seq["row"]], -seq["dur"], seq["start"], seq["group"]))
        seq = {c: v[order] for c, v in seq.items()}
        del order
        row, g = seq["row"], seq["group"]
        ends = np.where(container[row], seq["start"] + seq["dur"], _MIN)
        asked = np.flatnonzero(query[row] & (row >= (chunk[0] if len(chunk) else 0)))  # carried rows were answered
        found = _rightmost_greater(ends, seq["start"][asked], asked)
        hit = found >= 0
        ok = np.zeros(len(asked), dtype=bool)
        ok[hit] = g[found[hit]] == g[asked[hit]]
        out[row[asked[ok]]] = row[found[ok]]
        lo = hi
        if lo < len(rows):  # containers still open where the next chunk starts (a hidden one is never found: kept)
            keep = ends > start[int(rows[lo])]
            carry = {c: v[keep] for c, v in seq.items()}
    return out


def _still_open(seq: np.ndarray, ends: np.ndarray, same_group: np.ndarray, next_start: int) -> np.ndarray:
    """The containers of `seq` that a later row of the same group may still find: open after `next_start` and not
    hidden by a later container that ends no earlier (what a sweep's stack would hold)."""
    later = np.maximum.accumulate(ends[::-1])[::-1]  # the greatest end from each position on
    after = np.r_[later[1:], _MIN]  # ... strictly after it
    return seq[same_group & (ends > after) & (ends > next_start)]


def _rightmost_greater(values: np.ndarray, x: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Per query q: the largest position j < before[q] with values[j] > x[q] (-1: none), by a max segment tree
    searched for all queries at once (2 log n vectorized steps)."""
    n = len(values)
    size = 1 << max(1, (n - 1).bit_length())
    tree = np.full(2 * size, _MIN, dtype=np.int64)
    tree[size : size + n] = values
    lo = size
    while lo > 1:
        tree[lo // 2 : lo] = np.maximum(tree[lo : 2 * lo : 2], tree[lo + 1 : 2 * lo : 2])
        lo //= 2
    found = np.zeros(len(x), dtype=np.int64)  # a tree node whose range holds the answer (0: none)
    node = before + size
    live = np.arange(len(x))
    while len(live):  # up: the first left sibling (right to left) whose maximum exceeds x
        cur = node[live]
        sib = cur - 1
        hit = ((cur & 1) == 1) & (tree[sib] > x[live])
        found[live[hit]] = sib[hit]
        up = cur >> 1
        keep = ~hit & (up > 1)
        node[live] = up
        live = live[keep]
    live = np.flatnonzero((found > 0) & (found < size))
    while len(live):  # down: the rightmost child whose maximum exceeds x
        cur = found[live]
        right = 2 * cur + 1
        go_right = tree[right] > x[live]
        found[live] = np.where(go_right, right, 2 * cur)
        live = live[found[live] < size]
    return np.where(found > 0, found - size, -1)


def link(a: dict[str, np.ndarray]) -> Links:
    """Link the events of `events.EventColumns.arrays`. What flows say is written into `a` first (`bound_flows`)."""
    kind = a["kind"]
    n = len(kind)
    bound_flows(a)
    start, dur = a["start_ns"], a["dur_ns"]
    group = a["thread"]
    rank = np.full(n, 3, dtype=np.int8)

    def is_(*kinds: EventKind) -> np.ndarray:  # a flag per event (made when asked: one byte an event each)
        return np.isin(kind, [KIND_CODES[k] for k in kinds]) if len(kinds) > 1 else kind == KIND_CODES[kinds[0]]

    for k, r in _RANK.items():
        rank[is_(k)] = r
    host_query = is_(EventKind.OP, EventKind.RUNTIME, EventKind.MEMORY, EventKind.SPAN)
    op = enclosing(group, start, dur, rank, is_(EventKind.OP), host_query)
    del host_query
    python = is_(EventKind.PYTHON)
    frames = enclosing(group, start, dur, rank, python, python | is_(EventKind.OP))
    frame = np.where(is_(EventKind.OP), frames, np.int32(-1)) if python.any() else frames
    frame_parent = np.where(python, frames, np.int32(-1)) if python.any() else frames
    del frames, python
    call_parent = enclosing(group, start, dur, rank, is_(EventKind.RUNTIME), is_(EventKind.RUNTIME))
    del rank
    device = is_(*DEVICE_KINDS)
    launcher = launches(a["correlation"], is_(EventKind.RUNTIME), device | is_(EventKind.SPAN))
    launched = np.flatnonzero(launcher >= 0)
    if len(launched):
        op = np.array(op, dtype=np.int32)  # writable (a trace without operators links to a constant)
        op[launched] = op[launcher[launched]]
    del launched
    # device work listed with the operator it ran as, no runtime call between (kernel_details): that operator
    op = _ran_as(a["correlation"], is_(EventKind.OP), device & (launcher < 0), op)
    del device
    anns, parent, times, rows = _regions(start, dur, is_(EventKind.ANNOTATION))
    flow = KIND_CODES[EventKind.FLOW]  # a flow's point is no end of the run
    end_ns = max((int(np.max(np.where(kind[lo : lo + CHUNK_ROWS] == flow, _MIN, start[lo : lo + CHUNK_ROWS] +
                                      dur[lo : lo + CHUNK_ROWS]), initial=_MIN)) for lo in range(0, n, CHUNK_ROWS)),
                 default=0)  # fmt: skip
    return Links(op=op, launcher=launcher, frame=frame, frame_parent=frame_parent, call_parent=call_parent,
                 annotations=anns, annotation_parent=parent, region_times=times, region_rows=rows,
                 end_ns=max(end_ns, 0))  # fmt: skip


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
    inclusive, a point after the spans starting with it): `_sweep` finds the enclosing span, `_NextSpans` the next
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
    spans = np.concatenate([(lo + np.flatnonzero(np.isin(kind[lo : lo + CHUNK_ROWS], targets)
                                                 & np.isin(np.asarray(thread[lo : lo + CHUNK_ROWS]), threads))).astype(row_type)
                            for lo in range(0, len(kind), CHUNK_ROWS)])  # fmt: skip
    at = np.minimum(np.searchsorted(flows, spans), len(flows) - 1)  # both ascending: a merge, no sort
    spans = spans[flows[at] != spans]  # a point is no span to bind to
    del at
    bound = np.full(len(flows), -1, dtype=np.int64)
    if not len(spans):
        return flows, bound
    m, k = len(spans), len(flows)
    # positions 0..m-1: the spans, m..m+k-1: the points; their values read where sorted
    chunks = _sorted(_SpansThenPoints(thread, spans, f_thread), _SpansThenPoints(start, spans, f_time),
                     _SpansThenPoints(dur, spans, np.zeros(k, dtype=np.int64), add=1),
                     np.broadcast_to(np.int8(0), (m + k,)), _Within(0, m), _Within(m, m + k), _Range(m + k))
    nexts = _NextSpans(m, k)
    seen = (nexts.feed(c) for c in chunks)
    if enclosed.any():
        found = _sweep(seen, m + k)[m:]
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

    def feed(self, c: _Sorted) -> _Sorted:
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
    """The rows that have a `flow` code, in order (a column in a file read `CHUNK_ROWS` at a time)."""
    if isinstance(flow, SparseColumn):
        return flow.present().astype(np.int64)
    if isinstance(flow, np.ndarray) and flow.strides == (0,):  # a constant: none
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([lo + np.flatnonzero(np.asarray(flow[lo : lo + CHUNK_ROWS]) != NONE)
                           for lo in range(0, len(flow), CHUNK_ROWS)] or [np.zeros(0, dtype=np.int64)]).astype(np.int64)


def _flow_correlations(a: dict[str, Any], flows: np.ndarray, spans: np.ndarray) -> Any:
    """The correlation column once `flows` (`flow` events, in file order) are bound to `spans`: what a flow carries
    is the correlation of the span its last start (file order) binds to where that span has one of its own, else
    the flow's id; a span without a correlation of its own takes what the last of `flows` bound to it carries,
    unless it is an operator (its correlation would say that device work ran as it: `_ran_as`)."""
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


def _ran_as(correlation: Any, ops: np.ndarray, work: np.ndarray, op: np.ndarray) -> np.ndarray:
    """`op` with, for device work, the last operator (file order) holding its correlation id (where one does). A
    merge a million rows at a time where both sides' ids never decrease in file order (a format that lists its
    device work with operators pairs every kernel, in order), else a sort and a binary search (DuckDB's join would
    hold hash tables of them all)."""
    op_rows, work_rows = rows_where(ops), rows_where(work)
    if not len(op_rows) or not len(work_rows):
        return op
    out = op if op.flags.writeable and op.dtype == np.int32 else np.array(op, dtype=np.int32)  # a constant: made
    if not _ran_as_in_order(correlation, op_rows, work_rows, out):
        keys = correlation[op_rows]
        op_rows, keys = op_rows[keys != NONE], keys[keys != NONE]
        order = np.argsort(keys, kind="stable")  # ties in file order: the last of a key is the last in the file
        keys, op_rows = keys[order], op_rows[order]
        del order
        for lo in range(0, len(work_rows), CHUNK_ROWS):
            _join(correlation, work_rows[lo : lo + CHUNK_ROWS], op_rows, keys, out)
    return out


def _join(correlation: Any, part: np.ndarray, op_rows: np.ndarray, keys: np.ndarray, out: np.ndarray) -> None:
    """Work rows `part` -> the last of `op_rows` (by sorted `keys`) with their id, written into `out`."""
    if not len(keys):
        return
    ids = correlation[part]
    at = np.searchsorted(keys, ids, side="right") - 1
    hit = (at >= 0) & (keys[np.maximum(at, 0)] == ids) & (ids != NONE)
    out[part[hit]] = op_rows[at[hit]]


def _ran_as_in_order(correlation: Any, op_rows: np.ndarray, work_rows: np.ndarray, out: np.ndarray) -> bool:
    """The ran-as join as a merge: a window of the operators whose ids a chunk of work asks for, read a million at a
    time. False (stop) where the operators' ids decrease or a chunk asks for ids the window has passed."""
    chunks = (op_rows[lo : lo + CHUNK_ROWS] for lo in range(0, len(op_rows), CHUNK_ROWS))
    rows, keys = op_rows[:0], np.zeros(0, dtype=np.int64)
    floor, more = _MIN, True
    for lo in range(0, len(work_rows), CHUNK_ROWS):
        part = work_rows[lo : lo + CHUNK_ROWS]
        ids = correlation[part]
        given = ids[ids != NONE]
        if not len(given):
            continue
        least, most = int(given.min()), int(given.max())
        if least < floor:
            return False
        cut = int(np.searchsorted(keys, least))  # operators below every id asked from here on (in order): dropped
        rows, keys, floor = rows[cut:], keys[cut:], least
        while more and (not len(keys) or keys[-1] <= most):
            chunk = next(chunks, None)
            if chunk is None:
                more = False
                break
            k = correlation[chunk]
            chunk, k = chunk[k != NONE], k[k != NONE]
            if len(k) and ((k[1:] < k[:-1]).any() or (len(keys) and k[0] < keys[-1])):
                return False
            rows, keys = np.concatenate([rows, chunk]), np.concatenate([keys, k])
        _join(correlation, part, rows, keys, out)
    return True


def _regions(start: np.ndarray, dur: np.ndarray, annotation: np.ndarray) -> tuple[np.ndarray, ...]:
    """(annotation rows in order, the annotation around each, change times, the innermost annotation from each
    change time). Annotations nest by time across threads in order of (start, longest first, file order), open
    while end > time; the innermost open one is the last opened of those still open, so where two overlap without
    nesting (one thread's annotation outlives another's that began first), the first one's end changes nothing and
    the second one's end leaves none of them open."""
    anns = np.flatnonzero(annotation)
    anns = anns[np.lexsort((anns, -dur[anns], start[anns]))]
    times: list[int] = [-(2**62)]
    ids: list[int] = [-1]
    parent = np.full(len(anns), -1, dtype=np.int64)
    rows = anns.tolist()
    stack: list[int] = []  # the annotations opened and not yet found ended, innermost last (the top is open)
    ends: list[tuple[int, int]] = []  # a heap of (end, place in `anns`) of the open annotations
    closed = [False] * len(rows)

    def mark(t: int, row: int) -> None:
        if times[-1] == t:
            ids[-1] = row
        else:
            times.append(t)
            ids.append(row)

    def close_until(t: int) -> None:  # the ends up to t, in order of time
        while ends and ends[0][0] <= t:
            end, i = heapq.heappop(ends)
            closed[i] = True
            if stack[-1] == i:  # the innermost ended: the innermost still open under it is innermost from then
                while stack and closed[stack[-1]]:
                    stack.pop()
                mark(end, rows[stack[-1]] if stack else -1)

    for i, (row, s, d) in enumerate(zip(rows, start[anns].tolist(), dur[anns].tolist(), strict=True)):
        close_until(s)
        parent[i] = rows[stack[-1]] if stack else -1
        stack.append(i)
        heapq.heappush(ends, (s + d, i))
        mark(s, row)
    close_until(2**62)
    return anns, parent, np.asarray(times, dtype=np.int64), np.asarray(ids, dtype=np.int64)


def launches(correlation: np.ndarray, calls: np.ndarray, work: np.ndarray) -> np.ndarray:
    """Per row: for device work, the last runtime call (file order) with its correlation id; else -1.

    A sort-merge join in numpy: the calls sorted by id (stable: equal ids keep file order, so the last one found is
    the latest call), then the device work `CHUNK_ROWS` rows at a time, each chunk sorted by id and searched forward. Against the DuckDB hash join it replaced
    (bench/link_join_bench.py, device work in random id order): 0.01 s against 0.6-1.0 s for 40k launches (DuckDB's
    import and connection), about equal at 2M (~0.9 s), 11.3 s against 8.8 s at 20M (a ~20 GB trace; real files
    list their work nearly in id order, which the stable sort takes in one pass); and a broken file that repeats one
    id on many calls and kernels costs no more (DuckDB's join made every pair: minutes at 2M launches). What is held
    is the calls' sorted ids and rows (16 bytes a call) and one chunk of work."""
    call_rows = np.flatnonzero(calls)
    keys = np.asarray(correlation[call_rows])
    call_rows, keys = call_rows[keys != NONE], keys[keys != NONE]
    if not len(call_rows) or not work.any():
        return np.broadcast_to(np.int32(-1), (len(calls),))
    order = np.argsort(keys, kind="stable")
    keys, call_rows = keys[order], call_rows[order]
    del order
    out = np.full(len(calls), -1, dtype=np.int32)
    for lo in range(0, len(work), CHUNK_ROWS):
        work_rows = lo + np.flatnonzero(work[lo : lo + CHUNK_ROWS])
        wanted = np.asarray(correlation[work_rows])
        work_rows, wanted = work_rows[wanted != NONE], wanted[wanted != NONE]
        by_id = np.argsort(wanted, kind="stable")  # the chunk in id order: the search walks the keys forward
        wanted, work_rows = wanted[by_id], work_rows[by_id]
        at = np.searchsorted(keys, wanted, side="right") - 1
        hit = at >= 0
        hit[hit] = keys[at[hit]] == wanted[hit]
        out[work_rows[hit]] = call_rows[at[hit]]
    return out


__all__ = ["FLOW_TARGETS", "Links", "bind_flows", "bound_flows", "enclosing", "launches", "link"]
