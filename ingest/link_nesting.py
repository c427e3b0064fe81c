"""Nesting by time on a thread: for each event, the innermost span of a wanted kind open at its start (`enclosing`).

An event's enclosing span is the most recently started span of the wanted kind in the same group (a thread) that is
still open at the event's start (``end > start``); rows sort by (group, start, longest first, rank, file order). This
is the stack sweep of a profiler's own viewer, computed for all events at once: a max segment tree searched
`CHUNK_ROWS` sorted rows at a time, each chunk with the containers still open where the previous one ended (at most
the nesting depth). Up to `SORT_ROWS` rows are sorted in memory by numpy; more are sorted by DuckDB within
`SORT_MEMORY`, spilling to a temporary folder; rows already in start order in files are never sorted.

`CHUNK_ROWS` bounds what every part of the linker (`link`, `link_flows`, `link_launches`) reads of a column at a
time; they read it here when they run, so a test that sets it here sets it for all of them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from .events import rows_where

_MIN = np.iinfo(np.int64).min
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
    return sweep(sorted_chunks(group, start, dur, rank, container, query, rows), len(rank))


def sorted_chunks(group: Any, start: Any, dur: Any, rank: Any, container: Any, query: Any,
                  rows: Any) -> Iterator[SortedRows]:
    """`rows` with their values in `enclosing`'s order, `CHUNK_ROWS` at a time: sorted in numpy, or by DuckDB
    (spilling to disk: a few bytes a row held, not ~50) past `SORT_ROWS` rows. (`link_flows.bind_flows` sorts its
    spans and points with it, for `sweep`.)"""
    if len(rows) > SORT_ROWS:
        return _sorted_by_duckdb(group, start, dur, rank, container, query, rows)
    rows = np.asarray(rows[: len(rows)])
    group, start, dur = (v if isinstance(v, np.ndarray) else _Gathered(v, rows) for v in (group, start, dur))
    order = rows[np.lexsort((np.asarray(rank[rows]), -dur[rows], start[rows], group[rows]))]  # stable: file order
    del rows
    return (SortedRows(c, np.asarray(group[c]), np.asarray(start[c]), np.asarray(dur[c]), np.asarray(container[c]),
                       np.asarray(query[c])) for c in (order[lo : lo + CHUNK_ROWS] for lo in range(0, len(order), CHUNK_ROWS)))


class SortedRows(NamedTuple):
    """Rows in order of (group, start, longest first, rank, row), with what the sweep reads of them."""

    row: np.ndarray
    group: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    container: np.ndarray
    query: np.ndarray

    def take(self, index: np.ndarray) -> SortedRows:
        """These positions' rows."""
        return SortedRows(*(v[index] for v in self))

    @staticmethod
    def concat(a: SortedRows, b: SortedRows) -> SortedRows:
        """The rows of `a`, then those of `b`."""
        return SortedRows(*(np.concatenate([x, y]) for x, y in zip(a, b, strict=True)))


def sweep(chunks: Iterator[SortedRows], n: int) -> np.ndarray:
    """`enclosing`'s answer from its rows in sorted order (`sorted_chunks`), a chunk at a time, each with the
    containers of the chunks before it still open (at most the nesting depth); the next chunk is read ahead (where a
    group ends)."""
    out = np.full(n, -1, dtype=np.int32)
    chunks = (c for c in chunks if len(c.row))  # (a reader may hand an empty batch)
    chunk = next(chunks, None)
    carry: SortedRows | None = None
    while chunk is not None:
        following = next(chunks, None)
        if carry is not None and len(carry.row) and carry.group[0] != chunk.group[0]:
            carry = None
        seq = chunk if carry is None else SortedRows.concat(carry, chunk)
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
                      rows: np.ndarray) -> Iterator[SortedRows]:
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
                yield SortedRows(row, g, s, d, c, q)
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


__all__ = ["CHUNK_ROWS", "SORT_MEMORY", "SORT_ROWS", "SortedRows", "enclosing", "sorted_chunks", "sweep"]
