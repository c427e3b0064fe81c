"""Finding slices by name: rows in time order, lanes mapped onto the full timeline's lanes."""

from __future__ import annotations

import pyarrow as pa

from portscope.ingest.builder import TableBuilder
from portscope.ingest.slice_search import find_slices, lane_of_row
from portscope.ingest.viewport import build_lanes, reduce_viewport


def slices(rows: list[tuple[str, str, str, int, int]]) -> pa.Table:
    b = TableBuilder("engine_slices")
    for engine, engine_kind, name, start, dur in rows:
        b.append(engine=engine, engine_kind=engine_kind, kind="compute", name=name, start=start, dur=dur)
    return b.build()


TABLE = slices([
    ("vector", "vector", "aten::softmax", 500, 10),  # row 0
    ("matrix", "matrix", "aten::mm", 300, 50),  # row 1
    ("host", "host", "aten::pow", 0, 20),  # row 2
    ("vector", "vector", "Softmax backward", 100, 5),  # row 3
    ("matrix", "matrix", "aten::addmm", 700, 40),  # row 4
])


def test_matches_are_case_insensitive_substrings_in_time_order() -> None:
    full = build_lanes(TABLE)
    assert full.lanes == ["host", "matrix", "vector"]
    found = find_slices(TABLE, "SOFTMAX", full)
    assert found.rows.tolist() == [3, 0] and found.start.tolist() == [100, 500] and found.end.tolist() == [105, 510]
    mm = find_slices(TABLE, "mm", full)
    assert mm.rows.tolist() == [1, 4]
    assert mm.lanes.lanes == full.lanes and mm.lanes.group_lane.tolist() == [1]  # on the timeline's matrix lane
    assert lane_of_row(mm.lanes, 4) == 1
    assert len(find_slices(TABLE, "", full)) == 0 and len(find_slices(TABLE, "conv", full)) == 0


def test_match_lanes_reduce_like_the_timeline_and_keep_table_rows() -> None:
    full = build_lanes(TABLE)
    found = find_slices(TABLE, "softmax", full)
    view = reduce_viewport(found.lanes, 0, 1000, 1000)
    assert view.rows["compute"].tolist() == [3, 0]  # rows of the full table, not of the matches
    assert view.x["compute"][0::3].tolist() == [100, 500]


def test_matches_keep_the_depth_row_of_a_nested_slice() -> None:
    from portscope.ingest.slice_depth import nest_slices

    nested = slices([("t", "host", "forward", 0, 100), ("t", "host", "linear", 10, 30), ("t", "host", "mm", 15, 5)])
    full = build_lanes(nest_slices(nested))
    assert full.lanes == ["t", "t · 1", "t · 2"]
    found = find_slices(nested, "mm", full)
    assert found.rows.tolist() == [2] and found.lanes.group_lane.tolist() == [2]  # drawn on the depth-2 row
