"""Find slices by name: the rows of a timeline's slices whose name contains a text, in time order.

The match runs on the name column's dictionary (one test per distinct name, not per
slice), so a search over millions of slices costs one `is_in` over the codes.
The matches become their own `Lanes` (same lane names), so the viewer reduces a
highlight layer per viewport exactly as it reduces the bars.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .viewport import Lanes, _codes, build_lanes


@dataclasses.dataclass(frozen=True)
class SliceMatches:
    """Slices whose name matched, in start order (ties: table order)."""

    rows: np.ndarray  # rows of the slices table
    start: np.ndarray
    end: np.ndarray
    lanes: Lanes  # the matched slices as lanes, for highlight viewports
    lane_index: np.ndarray  # lane of `lanes` -> lane of the full timeline (by name)

    def __len__(self) -> int:
        return len(self.rows)


def find_slices(slices: pa.Table, text: str, full: Lanes) -> SliceMatches:
    """Slices of `slices` whose name contains `text` (case-insensitive); `full`: the timeline's lanes."""
    found = np.zeros(0, np.int64)  # rows of the slices table, in table order
    if text.strip() and slices.num_rows:
        codes, names = _codes(slices.column("name"))
        hit = pc.match_substring(pa.array(names, pa.string()), text.strip(), ignore_case=True)
        wanted = np.flatnonzero(hit.fill_null(False).to_numpy(zero_copy_only=False))
        found = np.flatnonzero(np.isin(codes, wanted)).astype(np.int64)
    part = slices.take(pa.array(found))
    lanes = build_lanes(part)
    lanes = dataclasses.replace(lanes, row=found[lanes.row])  # rows of `part` -> rows of the full table
    start = part.column("start").to_numpy().astype(np.float64)
    order = np.argsort(start, kind="stable")
    end = start[order] + part.column("dur").to_numpy().astype(np.float64)[order]
    position = {name: i for i, name in enumerate(full.lanes)}
    lane_index = np.array([position.get(name, 0) for name in lanes.lanes], np.uint16)
    return SliceMatches(rows=found[order], start=start[order], end=end, lanes=lanes, lane_index=lane_index)


def lane_of_row(lanes: Lanes, row: int) -> int:
    """The lane (index into lanes.lanes) that draws slices-table row `row`."""
    at = np.flatnonzero(np.asarray(lanes.row) == row)
    if not len(at):
        raise KeyError(row)
    group = int(np.searchsorted(lanes.group_offsets, at[0], "right")) - 1
    return int(lanes.group_lane[group])
