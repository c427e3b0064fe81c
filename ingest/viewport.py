"""Level of detail for engine timelines: per-lane sorted bars, reduced per viewport.

A timeline has one lane per engine and one colour per slice kind. `build_lanes`
sorts every (lane, kind) group by start once and keeps the running maximum of
the ends, so `reduce_viewport` finds the bars that touch a viewport with two
binary searches per group and merges bars closer than one pixel. The output
size is bounded by the pixel width, whatever the number of events.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from portscope.ingest import arrow_compute
from portscope.ingest.ranks import lane_rank
from portscope.ingest.schema import EngineKind, SliceKind

KINDS: tuple[str, ...] = tuple(k.value for k in SliceKind)
_ENGINE_ORDER = {k.value: i for i, k in enumerate(EngineKind)}
_ARRAYS = ("start", "end", "reach", "row", "group_offsets", "group_lane", "group_kind")


@dataclasses.dataclass(frozen=True)
class Lanes:
    """Engine slices sorted for viewport queries (times in the run's time unit, as float64).

    Groups are (lane, kind) pairs; group g owns rows group_offsets[g]:group_offsets[g+1]
    of start/end/reach/row. `reach` is the running maximum of `end` inside a group,
    `row` the slice's row in the engine_slices table.
    """

    lanes: list[str]
    lane_kinds: list[str]
    start: np.ndarray
    end: np.ndarray
    reach: np.ndarray
    row: np.ndarray
    group_offsets: np.ndarray
    group_lane: np.ndarray
    group_kind: np.ndarray

    @property
    def extent(self) -> tuple[float, float]:
        if not len(self.start):
            return (0.0, 1.0)
        return (float(self.start.min()), float(self.end.max()))

    def __len__(self) -> int:
        return len(self.start)

    def save(self, folder: Path) -> None:
        """Write the arrays as .npy files (memory-mappable by `load`) and the lane names."""
        folder.mkdir(parents=True, exist_ok=True)
        for name in _ARRAYS:
            np.save(folder / f"{name}.npy", getattr(self, name))
        names = "\n".join(f"{kind}\t{_escape(lane)}" for lane, kind in zip(self.lanes, self.lane_kinds, strict=True))
        (folder / "lanes.txt").write_text(names, encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> Lanes:
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in _ARRAYS}
        text = (folder / "lanes.txt").read_text(encoding="utf-8")
        pairs = [line.split("\t", 1) for line in text.split("\n")] if text else []
        return cls(lanes=[_unescape(p[1]) for p in pairs], lane_kinds=[p[0] for p in pairs], **arrays)


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def dictionary_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes (-1: null) and values of a string column (dictionary-encoded or plain)."""
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    return arrow_compute.int_values(array.indices, fill=-1), array.dictionary.to_pylist()


def _rank_group(lane: str) -> int:
    rank = lane_rank(lane)
    return -1 if rank is None else rank


def build_lanes(slices: pa.Table) -> Lanes:
    """Sort an engine_slices table into (lane, kind) groups; lanes ordered by rank (a multi-rank run), engine kind,
    then name."""
    n = slices.num_rows
    if n == 0:
        empty = np.zeros(0)
        return Lanes([], [], empty, empty, empty, np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    engine_codes, engine_names = dictionary_codes(slices.column("engine"))
    ekind_codes, ekind_names = dictionary_codes(slices.column("engine_kind"))
    kind_codes, kind_names = dictionary_codes(slices.column("kind"))
    # engine -> its engine kind (the first one seen)
    first = np.full(len(engine_names), -1, np.int64)
    seen = np.unique(engine_codes, return_index=True)
    first[seen[0]] = seen[1]
    used = [e for e in range(len(engine_names)) if first[e] >= 0]
    lane_kind = {e: ekind_names[ekind_codes[first[e]]] for e in used}
    # a multi-rank run's lanes (`rank 3 · stream 7`): one group per rank, in rank order, then as any run's
    used.sort(key=lambda e: (_rank_group(engine_names[e]), _ENGINE_ORDER.get(lane_kind[e], 99), _natural(engine_names[e])))
    lane_of = np.full(len(engine_names), -1, np.int64)
    lane_of[used] = np.arange(len(used))
    kind_of = np.array([KINDS.index(k) if k in KINDS else len(KINDS) - 1 for k in kind_names], np.int64)
    # small integer types and early deletes keep the peak near the size of the arrays kept
    key = lane_of.astype(np.int32)[engine_codes] * np.int32(len(KINDS)) + kind_of.astype(np.int32)[kind_codes]
    del engine_codes, ekind_codes, kind_codes
    start = slices.column("start").to_numpy().astype(np.float64)
    order = np.lexsort((start, key))
    key, start = key[order], start[order]
    end = slices.column("dur").to_numpy().astype(np.float64)[order]
    end += start
    bounds = np.flatnonzero(np.diff(key)) + 1
    offsets = np.concatenate([[0], bounds, [n]]).astype(np.int64)
    group_key = key[offsets[:-1]]
    reach = np.empty_like(end)
    for a, b in zip(offsets[:-1], offsets[1:], strict=True):
        np.maximum.accumulate(end[a:b], out=reach[a:b])
    return Lanes(
        lanes=[engine_names[e] for e in used],
        lane_kinds=[lane_kind[e] for e in used],
        start=start,
        end=end,
        reach=reach,
        row=order if order.dtype == np.int64 else order.astype(np.int64),
        group_offsets=offsets,
        group_lane=group_key // len(KINDS),
        group_kind=group_key % len(KINDS),
    )


def _natural(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


@dataclasses.dataclass
class Viewport:
    """The bars of one viewport: per slice kind, x (x0, x1, NaN per bar) and y (lane index)."""

    x0: float
    x1: float
    px: float  # time units per merge step (>= one pixel)
    x: dict[str, np.ndarray]
    y: dict[str, np.ndarray]
    rows: dict[str, np.ndarray]  # slice row of each drawn bar, -1 for merged bars
    in_view: int  # raw slices that touch the viewport
    drawn: int  # bars after merging

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.x.values()) + sum(a.nbytes for a in self.y.values())


def reduce_viewport(lanes: Lanes, x0: float, x1: float, width_px: int, *, max_bars: int = 20_000) -> Viewport:
    """The bars touching [x0, x1], merged when closer than a pixel; at most about `max_bars` bars.

    When more than `max_bars` bars survive merging at one pixel, the merge distance
    doubles until they fit, which bounds the response size.
    """
    if x1 <= x0:
        x1 = x0 + 1.0
    px = (x1 - x0) / max(int(width_px), 1)
    while True:
        out = _reduce(lanes, x0, x1, px)
        if out.drawn <= max_bars:
            return out
        px *= 2


def group_window(lanes: Lanes, g: int, x0: float, x1: float) -> tuple[int, int]:
    """Rows lo:hi of group g that may touch [x0, x1]: two binary searches (a few before x0 may end before it)."""
    a, b = int(lanes.group_offsets[g]), int(lanes.group_offsets[g + 1])
    return a + int(np.searchsorted(lanes.reach[a:b], x0, "left")), a + int(np.searchsorted(lanes.start[a:b], x1, "right"))


def _reduce(lanes: Lanes, x0: float, x1: float, px: float) -> Viewport:
    xs: dict[str, list[np.ndarray]] = {k: [] for k in KINDS}
    ys: dict[str, list[np.ndarray]] = {k: [] for k in KINDS}
    rows: dict[str, list[np.ndarray]] = {k: [] for k in KINDS}
    in_view = drawn = 0
    for g in range(len(lanes.group_lane)):
        lo, hi = group_window(lanes, g, x0, x1)
        if hi <= lo:
            continue
        s = np.asarray(lanes.start[lo:hi])
        e = np.asarray(lanes.end[lo:hi])
        r = np.asarray(lanes.row[lo:hi])
        touching = e >= x0  # after a long bar, `reach` lets through short ones that end before x0
        if not touching.all():
            s, e, r = s[touching], e[touching], r[touching]
            if not len(s):
                continue
        in_view += len(s)
        ce = np.maximum.accumulate(e)
        new = np.empty(len(s), bool)
        new[0] = True
        new[1:] = s[1:] > ce[:-1] + px
        firsts = np.flatnonzero(new)
        gs = s[firsts]
        ge = np.maximum.reduceat(e, firsts)
        counts = np.diff(np.append(firsts, len(s)))
        ge = np.maximum(ge, gs + px)  # every bar at least one pixel wide
        bar_rows = np.where(counts == 1, r[firsts], -1)
        x = np.empty(3 * len(gs))
        x[0::3], x[1::3], x[2::3] = gs, ge, np.nan
        kind = KINDS[int(lanes.group_kind[g])]
        xs[kind].append(x)
        ys[kind].append(np.full(len(x), lanes.group_lane[g], np.uint16))
        rows[kind].append(bar_rows)
        drawn += len(gs)
    return Viewport(
        x0=x0,
        x1=x1,
        px=px,
        x={k: np.concatenate(v) if v else np.zeros(0) for k, v in xs.items()},
        y={k: np.concatenate(v) if v else np.zeros(0, np.uint16) for k, v in ys.items()},
        rows={k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in rows.items()},
        in_view=in_view,
        drawn=drawn,
    )


def slice_at(lanes: Lanes, lane: int, x: float, tolerance: float) -> int | None:
    """The engine_slices row of the shortest slice in `lane` covering x (± tolerance), or None."""
    best: tuple[float, int] | None = None
    for g in np.flatnonzero(lanes.group_lane == lane):
        a, b = int(lanes.group_offsets[g]), int(lanes.group_offsets[g + 1])
        hi = a + int(np.searchsorted(lanes.start[a:b], x + tolerance, "right"))
        lo = a + int(np.searchsorted(lanes.reach[a:b], x - tolerance, "left"))
        if hi <= lo:
            continue
        s = np.asarray(lanes.start[lo:hi])
        e = np.asarray(lanes.end[lo:hi])
        hit = np.flatnonzero(e >= x - tolerance)
        if not len(hit):
            continue
        widths = e[hit] - s[hit]
        i = int(hit[np.argmin(widths)])
        if best is None or widths.min() < best[0]:
            best = (float(widths.min()), int(lanes.row[lo + i]))
    return None if best is None else best[1]
