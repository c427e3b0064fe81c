"""Cost-figure sources: the kind a recorded source text names, and the run's one-line count of them."""

from __future__ import annotations

from portscope.ingest.catalog import SourceKind
from portscope.ingest.schedule_summary import cost_sources_text


def test_kind_of_recorded_text() -> None:
    assert SourceKind.of_text("measured: RBLN-CA12, torch-rbln 0.9") is SourceKind.MEASURED
    assert SourceKind.of_text("datasheet: PCIe 4.0 x16") is SourceKind.DATASHEET
    assert SourceKind.of_text("assumed") is SourceKind.ASSUMED
    assert SourceKind.of_text("guessed: by me") is None


def test_cost_sources_text_counts_each_kind_in_a_fixed_order() -> None:
    extra = {"cost_sources": {"cost.dispatch_ns": "assumed", "cost.compile_ns": "assumed",
                              "engines.dma_h2d.bytes_per_ns": "datasheet: PCIe 4.0 x16",
                              "engines.matrix.flops_per_ns": "measured: board 3", "engines.vector.latency_ns": "guessed"}}
    assert cost_sources_text(extra) == "1 measured, 1 datasheet, 2 assumed"
    assert cost_sources_text({}) is None
