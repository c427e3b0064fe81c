"""Viewport reduction on engine slices with known positions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from portscope.ingest.builder import TableBuilder
from portscope.ingest.viewport import KINDS, Lanes, build_lanes, reduce_viewport, slice_at


def slices(rows: list[tuple[str, str, str, int, int]]) -> pa.Table:
    b = TableBuilder("engine_slices")
    for engine, engine_kind, kind, start, dur in rows:
        b.append(engine=engine, engine_kind=engine_kind, kind=kind, name=f"{engine}@{start}", start=start, dur=dur)
    return b.build()


def test_lanes_are_ordered_by_engine_kind_then_name() -> None:
    lanes = build_lanes(slices([("vector", "vector", "compute", 0, 5), ("stream 10", "stream", "compute", 0, 5), ("stream 2", "stream", "compute", 0, 5), ("host", "host", "fallback", 0, 5)]))
    assert lanes.lanes == ["host", "stream 2", "stream 10", "vector"]
    assert lanes.lane_kinds == ["host", "stream", "stream", "vector"]


def test_bars_far_apart_stay_separate_and_keep_their_rows() -> None:
    table = slices([("m", "matrix", "compute", i * 100, 10) for i in range(10)])
    lanes = build_lanes(table)
    view = reduce_viewport(lanes, 0, 1000, 1000)  # one pixel = 1 unit; gaps of 90 px
    assert view.in_view == 10 and view.drawn == 10
    x = view.x["compute"]
    assert len(x) == 30 and np.isnan(x[2::3]).all()
    assert x[0::3].tolist() == [i * 100 for i in range(10)]
    assert x[1::3].tolist() == [i * 100 + 10 for i in range(10)]
    assert view.rows["compute"].tolist() == list(range(10))
    assert (view.y["compute"] == 0).all()


def test_bars_closer_than_a_pixel_merge() -> None:
    table = slices([("m", "matrix", "compute", i * 10, 5) for i in range(100)])  # gaps of 5 units
    lanes = build_lanes(table)
    coarse = reduce_viewport(lanes, 0, 1000, 100)  # 10 units per pixel: every gap < 1 px
    assert coarse.drawn == 1 and coarse.in_view == 100
    assert coarse.x["compute"][:2].tolist() == [0, 995] and coarse.rows["compute"].tolist() == [-1]
    fine = reduce_viewport(lanes, 0, 1000, 1000)  # 1 unit per pixel: gaps of 5 px stay
    assert fine.drawn == 100


def test_viewport_keeps_a_long_bar_that_starts_before_it() -> None:
    table = slices([("h", "host", "compute", 0, 4500), ("h", "host", "compute", 100, 10), ("h", "host", "compute", 5000, 10), ("h", "host", "compute", 20_000, 10)])
    lanes = build_lanes(table)
    view = reduce_viewport(lanes, 4000, 6000, 2000)
    starts = view.x["compute"][0::3].tolist()
    assert 0 in starts and 5000 in starts and 20_000 not in starts


def test_in_view_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    n = 5000
    engines = rng.integers(0, 4, n)
    kinds = rng.integers(0, 3, n)
    starts = rng.integers(0, 1_000_000, n)
    durs = rng.integers(1, 20_000, n)
    rows = [(f"e{e}", "stream", KINDS[k], int(s), int(d)) for e, k, s, d in zip(engines, kinds, starts, durs, strict=True)]
    lanes = build_lanes(slices(rows))
    x0, x1 = 300_000, 420_000
    expected = int(np.sum((starts <= x1) & (starts + durs >= x0)))
    assert reduce_viewport(lanes, x0, x1, 10**9).in_view == expected


def test_output_is_bounded_by_max_bars() -> None:
    table = slices([("m", "matrix", "compute", i * 10, 5) for i in range(20_000)])
    view = reduce_viewport(build_lanes(table), 0, 200_000, 100_000, max_bars=500)
    assert 0 < view.drawn <= 500


def test_slice_at_finds_the_bar_under_the_click() -> None:
    table = slices([("h", "host", "compute", 0, 100), ("h", "host", "fallback", 40, 10), ("v", "vector", "compute", 200, 50)])
    lanes = build_lanes(table)
    assert slice_at(lanes, 0, 45, 0.5) == 1  # the shortest slice covering x
    assert slice_at(lanes, 0, 10, 0.5) == 0
    assert slice_at(lanes, 1, 210, 0.5) == 2
    assert slice_at(lanes, 1, 100, 0.5) is None


def test_lanes_round_trip_through_npy(tmp_path) -> None:
    table = slices([("odd\tname\n", "other", "compute", 5, 5), ("host", "host", "sync", 1, 1)])
    lanes = build_lanes(table)
    lanes.save(tmp_path / "lanes")
    again = Lanes.load(tmp_path / "lanes")
    assert again.lanes == lanes.lanes == ["host", "odd\tname\n"]
    assert np.array_equal(again.start, lanes.start)


def test_empty_table() -> None:
    lanes = build_lanes(slices([]))
    assert len(lanes) == 0
    assert reduce_viewport(lanes, 0, 10, 100).drawn == 0


@pytest.mark.parametrize("width", [1, 2000])
def test_widths(width: int) -> None:
    lanes = build_lanes(slices([("m", "matrix", "compute", 0, 10)]))
    assert reduce_viewport(lanes, 0, 10, width).drawn == 1
