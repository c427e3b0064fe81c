"""Find slices by name: the rows of a timeline's slices whose name contains a text, in time order.

The match runs on the name column's dictionary (one test per distinct name, not per
slice), so a search over millions of slices costs one `is_in` over the codes; a plain string
column (a kernel table of too many distinct names for one) is matched row by row, chunk by chunk.
The matches become their own `Lanes` (a subset of the timeline's, same lane numbers), so
the viewer reduces a highlight layer per viewport exactly as it reduces the bars.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .viewport import Lanes, dictionary_codes


@dataclasses.dataclass(frozen=True)
class SliceMatches:
    """Slices whose name matched, in start order (ties: table order)."""

    rows: np.ndarray  # rows of the slices table
    start: np.ndarray
    end: np.ndarray
    lanes: Lanes  # the matched slices as lanes of the timeline (same lane numbers), for highlight viewports

    def __len__(self) -> int:
        return len(self.rows)


def find_slices(slices: pa.Table, text: str, full: Lanes) -> SliceMatches:
    """Slices of `slices` whose name contains `text` (case-insensitive); `full`: the timeline's lanes of `slices`.
    The matches keep their place in `full` (lane, depth row, kind group): their lanes are a subset of its
    groups, taken by position, so no second sort and no second nesting pass.
    """
    found = np.zeros(0, np.int64)  # rows of the slices table
    column = slices.column("name") if slices.num_rows else None
    if text.strip() and column is not None and pa.types.is_dictionary(column.type):
        codes, names = dictionary_codes(column)
        hit = pc.match_substring(pa.array(names, pa.string()), text.strip(), ignore_case=True)
        wanted = np.flatnonzero(hit.fill_null(False).to_numpy(zero_copy_only=False))
        found = np.flatnonzero(np.isin(codes, wanted)).astype(np.int64)
    elif text.strip() and column is not None:  # plain strings (names too many for a dictionary): matched row by row
        hit = pc.match_substring(column, text.strip(), ignore_case=True).fill_null(False)
        found = np.flatnonzero(np.concatenate([c.to_numpy(zero_copy_only=False) for c in hit.chunks])).astype(np.int64)
    return rows_as_matches(found, full)


def rows_as_matches(found: np.ndarray, full: Lanes) -> SliceMatches:
    """Slices given by their rows of the slices table (an operator's kernels, a name's matches) as matches that
    keep their place in `full`, the timeline's lanes."""
    full_row = np.asarray(full.row)
    position = np.empty(len(full_row), np.int64)
    position[full_row] = np.arange(len(full_row))
    pos = np.sort(position[found])  # in the lanes' order: group by group, by start within a group
    group = np.searchsorted(np.asarray(full.group_offsets), pos, "right") - 1
    counts = np.bincount(group, minlength=len(full.group_lane))
    kept = np.flatnonzero(counts)
    offsets = np.concatenate([[0], np.cumsum(counts[kept])]).astype(np.int64)
    start, end = np.asarray(full.start)[pos], np.asarray(full.end)[pos]
    reach = np.empty_like(end)
    for a, b in zip(offsets[:-1], offsets[1:], strict=True):
        np.maximum.accumulate(end[a:b], out=reach[a:b])
    lanes = Lanes(lanes=full.lanes, lane_kinds=full.lane_kinds, start=start, end=end, reach=reach, row=full_row[pos],
                  group_offsets=offsets, group_lane=np.asarray(full.group_lane)[kept], group_kind=np.asarray(full.group_kind)[kept])
    order = np.lexsort((lanes.row, start))  # time order, ties by table row
    return SliceMatches(rows=lanes.row[order], start=start[order], end=end[order], lanes=lanes)


def lanes_of_rows(lanes: Lanes, rows: list[int]) -> dict[int, int]:
    """The lane (index into lanes.lanes) that draws each of the slices-table `rows`: one pass over the lanes."""
    row = np.asarray(lanes.row)
    pos = np.flatnonzero(np.isin(row, np.asarray(rows, np.int64), kind="table")) if rows else np.zeros(0, np.int64)
    group = np.searchsorted(np.asarray(lanes.group_offsets), pos, "right") - 1
    return {int(row[p]): int(lanes.group_lane[g]) for p, g in zip(pos, group, strict=True)}


def lane_of_row(lanes: Lanes, row: int) -> int:
    """The lane (index into lanes.lanes) that draws slices-table row `row`."""
    found = lanes_of_rows(lanes, [row])
    if row not in found:
        raise KeyError(row)
    return found[row]
