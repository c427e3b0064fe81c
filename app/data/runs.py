"""One row per run for the runs list: what it is and a verdict summary that reads at a glance."""

from __future__ import annotations

import dataclasses
from typing import Any

from portscope.ingest.catalog import group_counts
from portscope.ingest.schedule_summary import assumed_by_region
from portscope.ingest.schema import Direction
from portscope.ingest.summary import regions_frame, run_totals, top_level_ids
from portscope.ingest.trace import Trace

from .tables import predicted_spans

__all__ = ["RunRow", "model_text", "regions_frame", "run_row", "top_level_ids"]


@dataclasses.dataclass(frozen=True)
class RunRow:
    """A run as the runs page lists it."""

    run_id: str
    file: str
    source: str  # measured / predicted / converted
    target: str | None
    model: str
    modes: str
    regions: int
    fallbacks: int
    bounces: int
    d2h_bytes: int
    compiles: int
    status: str  # a catalogue Status value: clean / compiles / not-clean / error (the worst top-level region's)
    time: float  # headline time of the top-level regions: predicted device time of a predicted run, else wall (ns)
    time_unit: str  # ns, or cycles (a static schedule)
    predicted_time: bool
    assumed_time: bool = False  # assumed cost figures time a region's critical path (portscope.ingest.schedule_summary)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def model_text(model: dict[str, Any]) -> str:
    """A short one-line description of run_info.model."""
    if not model:
        return "?"
    head = str(model.get("class") or model.get("name") or model.get("model") or "")
    rest = [f"{k}={v}" for k, v in model.items() if k not in ("class", "name", "model")][:4]
    return ", ".join([head, *rest] if head else rest)


def run_row(trace: Trace, run_id: str, file: str) -> RunRow:
    """Totals over the run's top-level regions (nested regions are included in their parents)."""
    totals = run_totals(trace)
    counts = {**group_counts(totals.counts), "d2h_bytes": totals.transfer_bytes[Direction.D2H]}
    modes = sorted(set(trace["regions"].column("mode").to_pylist()) - {"unknown"})
    info = trace.run_info
    top = top_level_ids(trace)
    spans = predicted_spans(trace)
    if spans:
        time, unit = float(sum(spans.get(r, 0) for r in top)), info.time_unit.value
    else:
        walls = dict(zip(trace["regions"].column("region_id").to_pylist(), trace["regions"].column("dur_ns").to_pylist(), strict=True))
        time, unit = float(sum(walls[r] or 0 for r in top)), "ns"
    return RunRow(
        time=time,
        time_unit=unit,
        predicted_time=bool(spans),
        assumed_time=bool(spans) and bool(assumed_by_region(trace)),
        run_id=run_id,
        file=file,
        source=info.source.value,
        target=info.target,
        model=model_text(info.model),
        modes=", ".join(modes) or "-",
        regions=trace["regions"].num_rows,
        status=totals.status.value,
        **counts,
    )
