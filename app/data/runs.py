"""One row per run for the runs list: what it is and a verdict summary that reads at a glance."""

from __future__ import annotations

import dataclasses
from typing import Any

from portscope.ingest.report import region_report_data
from portscope.ingest.schema import SignalKind
from portscope.ingest.summary import regions_frame, summarize
from portscope.ingest.trace import Trace

_BOUNCES = {k.value for k in SignalKind if k.is_bounce}
_COMPILES = {SignalKind.RECOMPILE.value, SignalKind.COMPILE_GRAPH.value, SignalKind.COMPILE_RECOMPILE.value}
_FALLBACKS = {SignalKind.CPU_FALLBACK.value}


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
    status: str  # clean / compiles / not-clean / error

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def top_level_ids(trace: Trace) -> list[int]:
    regions = regions_frame(trace)
    return [int(r) for r in regions[regions["parent_id"].isna()]["region_id"]]


def model_text(model: dict[str, Any]) -> str:
    """A short one-line description of run_info.model."""
    if not model:
        return "?"
    head = str(model.get("class") or model.get("name") or model.get("model") or "")
    rest = [f"{k}={v}" for k, v in model.items() if k not in ("class", "name", "model")][:4]
    return ", ".join([head, *rest] if head else rest)


def run_row(trace: Trace, run_id: str, file: str) -> RunRow:
    """Totals over the run's top-level regions (nested regions are included in their parents)."""
    counts = {"fallbacks": 0, "bounces": 0, "compiles": 0, "d2h_bytes": 0}
    for rid in top_level_ids(trace):
        report = region_report_data(summarize(trace, rid))
        for s in report["signals"]:
            if s["signal"] in _FALLBACKS:
                counts["fallbacks"] += s["count"]
            elif s["signal"] in _BOUNCES:
                counts["bounces"] += s["count"]
            elif s["signal"] in _COMPILES:
                counts["compiles"] += s["count"]
        counts["d2h_bytes"] += report["d2h_bytes"]
    modes = sorted(set(trace["regions"].column("mode").to_pylist()) - {"unknown"})
    if counts["fallbacks"] or counts["bounces"] or counts["d2h_bytes"]:
        status = "not-clean"
    elif counts["compiles"]:
        status = "compiles"
    else:
        status = "clean"
    info = trace.run_info
    return RunRow(
        run_id=run_id,
        file=file,
        source=info.source.value,
        target=info.target,
        model=model_text(info.model),
        modes=", ".join(modes) or "-",
        regions=trace["regions"].num_rows,
        status=status,
        **counts,
    )
