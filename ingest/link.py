"""The one linker: what encloses what (operators, runtime calls, Python frames, regions) and what launched what.

Every reader's events (`events.EventColumns`) are linked by `link` and nowhere else, in this order:

* flows (`link_flows`): every flow point binds to a span of its thread (Chrome's rules, `bind_flows`), and the
  spans a flow binds share one id before the launches are joined (`bound_flows`); an event of another kind with a
  flow point of its own (torch_npu's launch) moves to the start of the span it binds to.
* nesting by time on a thread (`link_nesting`): an event's enclosing span is the most recently started span of the
  wanted kind on the same (pid, tid) that is still open at the event's start (``end > start``); spans sort by
  (start, longest first, then kind: frames, operators, runtime calls, instants, then file order). This is the stack
  sweep of a profiler's own viewer, computed for all events at once (`enclosing`).
* launches (`link_launches`): device work -> the runtime call that holds the same correlation id (the last one in
  file order when a broken file repeats an id), a sort-merge join (`launches`). Device work no runtime call
  launched joins the operator that holds its correlation id, where a format lists device work with the operator it
  ran as (`ran_as`).
* regions (here): user annotations nest by time across threads; an event belongs to the innermost one open at its
  start.

`CHUNK_ROWS`, the rows every part reads of a column at a time, is `link_nesting.CHUNK_ROWS`.
"""

from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from . import link_nesting
from .events import DEVICE_KINDS, KIND_CODES, EventKind
from .link_flows import bind_flows, bound_flows
from .link_launches import launches, ran_as
from .link_nesting import enclosing

_MIN = np.iinfo(np.int64).min
_RANK = {EventKind.PYTHON: 0, EventKind.ANNOTATION: 0, EventKind.OP: 1, EventKind.RUNTIME: 2}  # others: 3


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
    op = ran_as(a["correlation"], is_(EventKind.OP), device & (launcher < 0), op)
    del device
    anns, parent, times, rows = _regions(start, dur, is_(EventKind.ANNOTATION))
    flow = KIND_CODES[EventKind.FLOW]  # a flow's point is no end of the run
    step = link_nesting.CHUNK_ROWS
    end_ns = max((int(np.max(np.where(kind[lo : lo + step] == flow, _MIN, start[lo : lo + step] + dur[lo : lo + step]),
                             initial=_MIN)) for lo in range(0, n, step)), default=0)  # fmt: skip
    return Links(op=op, launcher=launcher, frame=frame, frame_parent=frame_parent, call_parent=call_parent,
                 annotations=anns, annotation_parent=parent, region_times=times, region_rows=rows,
                 end_ns=max(end_ns, 0))  # fmt: skip


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


# `link` and `Links`, and names tests and the profiler take from here (defined in the modules above)
__all__ = ["Links", "bind_flows", "bound_flows", "enclosing", "launches", "link"]
