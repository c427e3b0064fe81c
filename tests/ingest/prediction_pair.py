"""A hand-made predicted run and a measured CPU run of the same few operators: the prediction check's figures are
worked out by hand in tests/ingest/test_prediction_check.py; the viewer's browser test shows the pair too.

Predicted (target "demo-npu"): aten::addmm 300 ns on the matrix engine (calibrated figures) after a 50 ns dispatch;
two aten::add, 40 and 60 ns on the vector engine (assumed); aten::nonzero a 500 ns fallback on the host lane and a
30 ns d2h copy; an aten::view with no work.
Measured (a CPU run, no device work): aten::linear 1000 ns around aten::addmm 800 ns; aten::add 50 and 70 ns;
aten::nonzero 400 ns; aten::view 10 ns.
"""

from __future__ import annotations

from pathlib import Path

from portscope.ingest import write_trace
from portscope.ingest.builder import TraceBuilder
from portscope.ingest.schema import Placement, Source
from portscope.ingest.trace import RunInfo, Trace

CALIBRATED = "measured: control.json, n=120, 9 shapes, fit error 12%, 0 outliers left out"
SOURCES = {"engines.matrix.latency_ns": CALIBRATED, "engines.matrix.flops_per_ns": CALIBRATED,
           "engines.vector.latency_ns": "assumed", "engines.vector.bytes_per_ns": "assumed",
           "cost.dispatch_ns": "assumed", "cost.host_flops_per_ns": "assumed",
           "engines.dma_d2h.bytes_per_ns": "datasheet: PCIe 4.0"}


def _op(b: TraceBuilder, op_id: int, name: str, start: int, dur: int, placement: Placement) -> None:
    b.ops.append(op_id=op_id, region_id=0, name=name, start_ns=start, dur_ns=dur, placement=placement, bytes_in=0,
                 bytes_out=0, thread=0, module="model")


def predicted() -> Trace:
    b = TraceBuilder(RunInfo(source=Source.PREDICTED, target="demo-npu", extra={"cost_sources": SOURCES}))
    b.add_region("forward", start_ns=0, dur_ns=5000)
    for op_id, name, placement in ((0, "aten::addmm", Placement.DEVICE), (1, "aten::add", Placement.DEVICE),
                                   (2, "aten::add", Placement.DEVICE), (3, "aten::nonzero", Placement.FALLBACK),
                                   (4, "aten::view", Placement.DEVICE)):
        _op(b, op_id, name, 100 * op_id, 90, placement)
    for engine, kind, what, start, dur, op_id in (
        ("dispatch", "dispatch", "dispatch", 0, 50, 0), ("matrix", "matrix", "compute", 50, 300, 0),
        ("vector", "vector", "compute", 350, 40, 1), ("vector", "vector", "compute", 390, 60, 2),
        ("dma_d2h", "dma_d2h", "transfer", 450, 30, 3), ("host", "host", "fallback", 480, 500, 3),
    ):
        b.engine_slices.append(region_id=0, engine=engine, engine_kind=kind, kind=what, name="x", start=start, dur=dur,
                               op_id=op_id)
    return b.build()


def measured() -> Trace:
    b = TraceBuilder(RunInfo(source=Source.MEASURED))
    b.add_region("forward", start_ns=0, dur_ns=5000)
    for op_id, name, start, dur in ((0, "aten::linear", 0, 1000), (1, "aten::addmm", 100, 800), (2, "aten::add", 1100, 50),
                                    (3, "aten::add", 1200, 70), (4, "aten::nonzero", 1300, 400), (5, "aten::view", 1800, 10)):
        _op(b, op_id, name, start, dur, Placement.HOST)
    return b.build()


def write_pair(folder: Path) -> tuple[Path, Path]:
    """The pair as two run files: (predicted, measured)."""
    return write_trace(predicted(), folder / "pair_predicted.arrow"), write_trace(measured(), folder / "pair_measured.arrow")
