"""Find slices by name: the rows of a timeline's slices whose name, or whose operator's name, contains a text,
in time order.

The match runs on the name column's dictionary (one test per distinct name, not per
slice), so a search over millions of slices costs one `is_in` over the codes; a plain string
column (a kernel table of too many distinct names for one) is matched row by row, chunk by chunk.
Operator names are matched the same way on the ops table, then joined to the slices by op_id
(kernels launched by aten::addmm match "addmm"; memory-lane slices, levels rather than work, never
match through their operator). The matches become their own `Lanes` (a subset of the timeline's,
same lane numbers), so the viewer reduces a highlight layer per viewport exactly as it reduces the bars.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .columns import memory_slices
from .viewport import Lanes, dictionary_codes


@dataclasses.dataclass(frozen=True)
class SliceMatches:
    """Slices whose name (or operator's name) matched, in start order (ties: table order)."""

    rows: np.ndarray  # rows of the slices table
    start: np.ndarray
    end: np.ndarray
    lanes: Lanes  # the matched slices as lanes of the timeline (same lane numbers), for highlight viewports
    operator_of: np.ndarray  # per match: index into `operators` of the operator it matched through; -1: its own name
    operators: tuple[str, ...] = ()  # the operators whose names matched and brought slices, most slices first

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def by_operator(self) -> int:
        """How many slices matched through their operator's name only (not their own)."""
        return int(np.count_nonzero(self.operator_of >= 0))


def _matching(column: pa.ChunkedArray, text: str) -> np.ndarray:
    """A flag per row: the name column's value contains `text` (case-insensitive). A dictionary column is matched on
    its dictionary (one test per distinct name); plain strings (names too many for a dictionary) row by row."""
    if not len(column):
        return np.zeros(0, bool)
    if pa.types.is_dictionary(column.type):
        codes, names = dictionary_codes(column)
        hit = pc.match_substring(pa.array(names, pa.string()), text, ignore_case=True)
        return np.isin(codes, np.flatnonzero(hit.fill_null(False).to_numpy(zero_copy_only=False)))
    hit = pc.match_substring(column, text, ignore_case=True).fill_null(False)
    return np.concatenate([c.to_numpy(zero_copy_only=False) for c in hit.chunks]).astype(bool)


def _ids(column: pa.ChunkedArray) -> np.ndarray:
    """An integer id column as int64, null as -1 (no id is negative)."""
    return np.asarray(pc.fill_null(column, -1).to_numpy(), np.int64) if len(column) else np.zeros(0, np.int64)


def find_slices(slices: pa.Table, text: str, full: Lanes, *, ops: pa.Table | None = None) -> SliceMatches:
    """Slices of `slices` whose name contains `text` (case-insensitive), and with `ops` (the trace's ops table) those
    whose operator's name does (joined by op_id; never a memory-lane slice: a level, not work); `full`: the timeline's
    lanes of `slices`. The matches keep their place in `full` (lane, depth row, kind group): their lanes are a subset
    of its groups, taken by position, so no second sort and no second nesting pass.
    """
    text = text.strip()
    if not text or not slices.num_rows:
        return rows_as_matches(np.zeros(0, np.int64), full)
    by_name = _matching(slices.column("name"), text)
    operator_of = np.full(slices.num_rows, -1, np.int64)
    operators: tuple[str, ...] = ()
    if ops is not None and ops.num_rows and "op_id" in slices.column_names:
        op_codes, op_names = dictionary_codes(ops.column("name"))  # one test per distinct operator name
        named = pc.match_substring(pa.array(op_names, pa.string()), text, ignore_case=True).fill_null(False)
        hit = np.isin(op_codes, np.flatnonzero(named.to_numpy(zero_copy_only=False)))
        op_ids, op_codes = _ids(ops.column("op_id"))[hit], op_codes[hit]
        slice_ops = _ids(slices.column("op_id"))
        via = np.flatnonzero(np.isin(slice_ops, op_ids) & ~by_name & ~memory_slices(slices.column("engine")))
        if len(via):
            order = np.argsort(op_ids, kind="stable")
            code = op_codes[order][np.searchsorted(op_ids[order], slice_ops[via])]  # each slice's operator name
            distinct, inverse, counts = np.unique(code, return_inverse=True, return_counts=True)
            ranked = np.lexsort((distinct, -counts))  # most slices first (ties: first in the dictionary)
            operators = tuple(str(op_names[distinct[r]]) for r in ranked)
            rank = np.empty_like(ranked)
            rank[ranked] = np.arange(len(ranked))
            operator_of[via] = rank[inverse]
    found = np.flatnonzero(by_name | (operator_of >= 0)).astype(np.int64)
    return rows_as_matches(found, full, operator_of=operator_of[found], operators=operators)


def rows_as_matches(found: np.ndarray, full: Lanes, *, operator_of: np.ndarray | None = None,
                    operators: tuple[str, ...] = ()) -> SliceMatches:
    """Slices given by their rows of the slices table (an operator's kernels, a name's matches) as matches that
    keep their place in `full`, the timeline's lanes; `operator_of` (per row of `found`, index into `operators`, -1
    for none) says which matched through their operator's name."""
    full_row = np.asarray(full.row)
    position = np.empty(len(full_row), np.int64)
    position[full_row] = np.arange(len(full_row))
    by_position = np.argsort(position[found], kind="stable")
    pos = position[found][by_position]  # in the lanes' order: group by group, by start within a group
    via = (np.full(len(found), -1, np.int64) if operator_of is None else np.asarray(operator_of, np.int64))[by_position]
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
    return SliceMatches(rows=lanes.row[order], start=start[order], end=end[order], lanes=lanes, operator_of=via[order],
                        operators=operators)


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
