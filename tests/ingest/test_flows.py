"""Flows of a slice: its operator's other slices in time order, and the slice whose end released it."""

from __future__ import annotations

import pyarrow as pa

from portscope.ingest.builder import TableBuilder
from portscope.ingest.flows import Flow, slice_flows


def slices() -> pa.Table:
    b = TableBuilder("engine_slices")
    rows = [  # engine, engine_kind, name, start, dur, op_id, waited_on
        ("dispatch", "dispatch", "aten::mm", 0, 100, 1, None),  # row 0
        ("DMA h2d", "dma_h2d", "h2d aten::mm", 100, 30, 1, "dispatch"),  # row 1
        ("matrix", "matrix", "aten::mm", 150, 250, 1, "transfer"),  # row 2: released by the copy (ends 130)
        ("dispatch", "dispatch", "aten::add", 100, 100, 2, None),  # row 3
        ("vector", "vector", "aten::add", 420, 50, 2, "dependency"),  # row 4: released by the matrix (ends 400)
    ]
    for engine, engine_kind, name, start, dur, op, waited in rows:
        b.append(engine=engine, engine_kind=engine_kind, kind="compute", name=name, start=start, dur=dur, op_id=op, waited_on=waited)
    return b.build()


def test_an_operators_slices_chain_in_time_order() -> None:
    assert slice_flows(slices(), 0) == [Flow(0, 1, "same operator"), Flow(1, 2, "same operator")]


def test_what_released_a_slice_joins_its_operators_chain() -> None:
    # row 2 waited on a transfer: the h2d copy, already in the chain (not drawn twice)
    assert slice_flows(slices(), 2) == [Flow(0, 1, "same operator"), Flow(1, 2, "same operator")]
    # row 4 waited on a dependency: the latest compute slice ending before 420 is the matrix one
    assert slice_flows(slices(), 4) == [Flow(3, 4, "same operator"), Flow(2, 4, "waited on dependency")]


def test_a_slice_without_operator_or_cause_has_no_flows() -> None:
    b = TableBuilder("engine_slices")
    b.append(engine="core", engine_kind="vector", kind="compute", name="x", start=0, dur=5)
    assert slice_flows(b.build(), 0) == []
