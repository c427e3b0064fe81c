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


def test_a_search_also_matches_the_slices_whose_operator_name_contains_the_text() -> None:
    # kernels named for what they compute (no "addmm" in their names), launched by aten::addmm (op 0) and aten::mm
    # (op 1); a memory-lane level set by aten::addmm (a level, not work: never a match through its operator)
    from portscope.ingest.schema import MEMORY_ENGINE_PREFIX

    b = TableBuilder("engine_slices")
    for engine, name, start, dur, op_id in [
        ("stream 7", "sm90_xmma_gemm_bf16bf16", 100, 30, 0),  # row 0: by operator
        ("host", "aten::addmm", 90, 50, 0),  # row 1: by its own name (and its operator's)
        ("stream 7", "cutlass::Kernel2<gemm_64x64>", 200, 20, 1),  # row 2: aten::mm: no match
        ("stream 7", "void cutlass::Kernel2<gemm_32x32>", 300, 10, 0),  # row 3: by operator
        (f"{MEMORY_ENGINE_PREFIX}cuda:0", "allocated", 100, 400, 0),  # row 4: memory level: no match
        ("stream 7", "addmm_epilogue", 400, 5, None),  # row 5: by name, no operator
        ("stream 7", "ampere_sgemm", 500, 5, 2),  # row 6: by operator aten::addmm again (a second op of that name)
        ("stream 7", "fused_bias_gelu", 600, 5, 3),  # row 7: by operator aten::_addmm_activation
    ]:
        b.append(engine=engine, engine_kind="stream" if engine != "host" else "host", kind="compute", name=name,
                 start=start, dur=dur, op_id=op_id)
    table = b.build()
    ops = TableBuilder("ops")
    for op_id, name in [(0, "aten::addmm"), (1, "aten::mm"), (2, "aten::addmm"), (3, "aten::_addmm_activation")]:
        ops.append(op_id=op_id, region_id=0, name=name, start_ns=0, dur_ns=1, placement="device", bytes_in=0, bytes_out=0)
    full = build_lanes(table)
    found = find_slices(table, "ADDMM", full, ops=ops.build())
    assert found.rows.tolist() == [1, 0, 3, 5, 6, 7]  # time order
    # aten::addmm brought three slices, aten::_addmm_activation one: most first; -1: the slice's own name matched
    assert found.operators == ("aten::addmm", "aten::_addmm_activation")
    assert found.operator_of.tolist() == [-1, 0, 0, -1, 0, 1]
    assert found.by_operator == 4 and len(found) == 6
    assert lane_of_row(found.lanes, 3) == full.lanes.index("stream 7")
    # without the ops table (or for a text no operator has), names alone
    assert find_slices(table, "addmm", full).rows.tolist() == [1, 5]
    assert find_slices(table, "addmm", full).by_operator == 0
    assert find_slices(table, "gemm_64", full, ops=ops.build()).operators == ()
