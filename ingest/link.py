"""The one linker: what encloses what (operators, runtime calls, Python frames, regions) and what launched what.

Every reader's events (`events.EventColumns`) are linked here and nowhere else:

* nesting by time on a thread: an event's enclosing span is the most recently started span of the wanted kind on
  the same (pid, tid) that is still open at the event's start (``end > start``); spans sort by (start, longest
  first, then kind: frames, operators, runtime calls, instants, then file order). This is the stack sweep of a
  profiler's own viewer, computed for all events at once (`enclosing`).
* launches: device work -> the runtime call that holds the same correlation id (the last one in file order when a
  broken file repeats an id), a relational join done by DuckDB.
* regions: user annotations nest by time across threads; an event belongs to the innermost one open at its start.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .events import KIND_CODES, NONE, EventKind

_MIN = np.iinfo(np.int64).min
_RANK = {EventKind.PYTHON: 0, EventKind.ANNOTATION: 0, EventKind.OP: 1, EventKind.RUNTIME: 2}  # others: 3


@dataclasses.dataclass
class Links:
    """Per event row (-1: none): what the linker found."""

    op: np.ndarray  # the innermost operator enclosing it (device work: the one enclosing its launching call)
    launcher: np.ndarray  # device work: the runtime call that launched it
    frame: np.ndarray  # operators: the innermost Python frame open at their start
    frame_parent: np.ndarray  # Python frames: the frame that called them
    call_parent: np.ndarray  # runtime calls: the runtime call enclosing them (a compile inside a compile)
    region: np.ndarray  # the innermost annotation open at its start (-1: only the run's root region)
    end_ns: int  # the run's last end


def enclosing(group: np.ndarray, start: np.ndarray, dur: np.ndarray, rank: np.ndarray, container: np.ndarray,
              query: np.ndarray) -> np.ndarray:
    """For each row where `query`: the row index of the innermost `container` row of the same `group` open at its
    start (-1: none); other rows get -1. Rows sort by (group, start, -dur, rank, row); a container is open at a
    later row's start while its end is greater than that start."""
    rows = np.flatnonzero(container | query)
    out = np.full(len(group), -1, dtype=np.int64)
    if not len(rows) or not container.any():
        return out
    order = rows[np.lexsort((rows, rank[rows], -dur[rows], start[rows], group[rows]))]
    ends = np.where(container[order], start[order] + dur[order], _MIN)
    asked = np.flatnonzero(query[order])
    found = _rightmost_greater(ends, start[order][asked], asked)
    hit = found >= 0
    same = np.zeros(len(asked), dtype=bool)
    same[hit] = group[order[found[hit]]] == group[order[asked[hit]]]
    out[order[asked[same]]] = order[found[same]]
    return out


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


def link(a: dict[str, np.ndarray], n_lanes: int) -> Links:
    """Link the events of `events.EventColumns.arrays` (`n_lanes` distinct pid/tid codes)."""
    kind = a["kind"]
    n = len(kind)
    start, dur = a["start_ns"], a["dur_ns"]
    group = a["pid"].astype(np.int64) * max(n_lanes, 1) + a["tid"]
    rank = np.full(n, 3, dtype=np.int8)
    is_ = {k: kind == KIND_CODES[k] for k in EventKind}
    for k, r in _RANK.items():
        rank[is_[k]] = r
    device = is_[EventKind.KERNEL] | is_[EventKind.COPY] | is_[EventKind.MEMSET] | is_[EventKind.WAIT]
    host_query = is_[EventKind.OP] | is_[EventKind.RUNTIME] | is_[EventKind.MEMORY] | is_[EventKind.SPAN]
    op = enclosing(group, start, dur, rank, is_[EventKind.OP], host_query)
    frames = enclosing(group, start, dur, rank, is_[EventKind.PYTHON], is_[EventKind.PYTHON] | is_[EventKind.OP])
    frame = np.where(is_[EventKind.OP], frames, -1)
    frame_parent = np.where(is_[EventKind.PYTHON], frames, -1)
    call_parent = enclosing(group, start, dur, rank, is_[EventKind.RUNTIME], is_[EventKind.RUNTIME])
    launcher = _launches(a["correlation"], is_[EventKind.RUNTIME], device | is_[EventKind.SPAN])
    launched = launcher >= 0
    op[launched] = op[launcher[launched]]
    everything = np.ones(n, dtype=bool)
    region = enclosing(np.zeros(n, dtype=np.int64), start, dur, rank, is_[EventKind.ANNOTATION], everything)
    end_ns = int((start + dur).max()) if n else 0
    return Links(op=op, launcher=launcher, frame=frame, frame_parent=frame_parent, call_parent=call_parent,
                 region=region, end_ns=max(end_ns, 0))  # fmt: skip


def _launches(correlation: np.ndarray, calls: np.ndarray, work: np.ndarray) -> np.ndarray:
    """Per row: for device work, the last runtime call (file order) with its correlation id; else -1."""
    out = np.full(len(correlation), -1, dtype=np.int64)
    call_rows = np.flatnonzero(calls & (correlation != NONE))
    work_rows = np.flatnonzero(work & (correlation != NONE))
    if not len(call_rows) or not len(work_rows):
        return out
    import duckdb  # lazily: the CLI's start-up and the viewer's first page never pay for it
    import pyarrow as pa

    con = duckdb.connect(config={"threads": 2, "enable_external_access": False})
    try:
        con.register("calls", pa.table({"row": call_rows, "correlation": correlation[call_rows]}))
        con.register("work", pa.table({"row": work_rows, "correlation": correlation[work_rows]}))
        joined = con.sql("SELECT w.row, max(c.row) AS call FROM work w JOIN calls c USING (correlation) "
                         "GROUP BY w.row").to_arrow_table()  # fmt: skip
    finally:
        con.close()
    if joined.num_rows:
        out[joined.column("row").to_numpy()] = joined.column("call").to_numpy()
    return out


__all__ = ["Links", "enclosing", "link"]
