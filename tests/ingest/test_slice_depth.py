"""Nested slices at depth: rows per depth under their engine, nothing changed where nothing nests."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from portscope.ingest.builder import TableBuilder
from portscope.ingest.slice_depth import nest_slices, slice_depths
from portscope.ingest.viewport import build_lanes

ROWS = [  # engine, name, start, dur
    ("thread", "forward", 0, 100),  # depth 0
    ("thread", "linear", 10, 30),  # 10..40 inside forward: 1
    ("thread", "mm", 15, 5),  # 15..20 inside linear: 2
    ("thread", "relu", 50, 40),  # 50..90: linear ended, forward open: 1
    ("stream", "kernel", 0, 50),  # another engine: its own depths
    ("stream", "kernel", 50, 50),  # touches the previous end: not nested
    ("thread", "backward", 100, 10),  # starts as forward ends: 0
]


def table() -> pa.Table:
    b = TableBuilder("engine_slices")
    for engine, name, start, dur in ROWS:
        b.append(engine=engine, engine_kind="host" if engine == "thread" else "stream", kind="compute", name=name, start=start, dur=dur)
    return b.build()


def test_depth_is_the_number_of_slices_open_at_the_start() -> None:
    engine = np.array([0 if r[0] == "thread" else 1 for r in ROWS])
    start = np.array([r[2] for r in ROWS], float)
    end = start + np.array([r[3] for r in ROWS], float)
    assert slice_depths(engine, start, end).tolist() == [0, 1, 2, 1, 0, 0, 0]


def test_nested_slices_get_a_row_per_depth_under_their_engine() -> None:
    nested = nest_slices(table())
    assert nested.column("engine").cast(pa.string()).to_pylist() == [
        "thread", "thread · 1", "thread · 2", "thread · 1", "stream", "stream", "thread"]
    assert build_lanes(nested).lanes == ["thread", "thread · 1", "thread · 2", "stream"]


def test_nothing_nests_nothing_changes() -> None:
    flat = table().slice(4, 2)
    assert nest_slices(flat) is flat


def test_slices_of_different_engines_never_nest() -> None:
    engine = np.array([0, 1, 0, 1])
    start = np.array([0.0, 10.0, 100.0, 50.0])
    end = np.array([100.0, 200.0, 150.0, 60.0])  # engine 1: 10..200 holds 50..60 (nested); engine 0 only touches
    assert slice_depths(engine, start, end).tolist() == [0, 0, 0, 1]
