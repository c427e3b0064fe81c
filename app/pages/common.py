"""Helpers shared by the run pages: loading a run for a page, region rows from report data."""

from __future__ import annotations

from typing import Any

from dash import html

from portscope.ingest.catalog import group_counts
from portscope.ingest.errors import PortscopeError
from portscope.ingest.schedule_summary import critical_path_sources
from portscope.ingest.schema import SignalKind
from portscope.ingest.trace import Trace

from ..components import problem
from ..context import store
from ..data.runs import regions_frame
from ..data.seen import report_seen
from ..data.tables import predicted_spans
from ..time_axis import fmt_duration


def load(run_id: str) -> tuple[Trace | None, html.Div | None]:
    """The run, or a page-sized problem box saying why it cannot be shown."""
    try:
        return store().trace(run_id), None
    except PortscopeError as exc:
        return None, problem(str(exc))


def run_label(run_id: str, trace: Trace) -> str:
    """How a page names a run: its file name when it has a meaningful one, else its id."""
    name = (trace.path or "").rsplit("/", 1)[-1].removesuffix(".arrow")
    return name if name and name != run_id else run_id


def region_label(row: dict[str, Any]) -> str:
    bits = [b for b in (row.get("phase"), row.get("mode")) if b and b not in ("none", "unknown")]
    return row["name"] + (f" [{', '.join(bits)}]" if bits else "")


def region_rows(run_id: str, trace: Trace) -> list[dict[str, Any]]:
    """One row per region: identity, nth among same-named regions, and its report counters."""
    frame = regions_frame(trace)
    spans = predicted_spans(trace)  # a predicted run's headline time is its predicted device time
    # ... and says so when assumed figures time it, or a calibrated target's measured ones
    assumed, measured = critical_path_sources(trace) if spans else ({}, set())
    seen: dict[str, int] = {}
    rows = []
    for r in frame.to_dict("records"):
        nth = seen.get(r["name"], 0)
        seen[r["name"]] = nth + 1
        report = store().report(run_id, int(r["region_id"]))
        counts = group_counts({SignalKind(s["signal"]): s["count"] for s in report["signals"]})
        rows.append(
            {
                "region_id": int(r["region_id"]),
                "parent_id": None if r["parent_id"] != r["parent_id"] or r["parent_id"] is None else int(r["parent_id"]),
                "name": r["name"],
                "nth": nth,
                "mode": r["mode"],
                "phase": r["phase"],
                "label": region_label(r),
                "wall_ms": f"{report['wall_ns'] / 1e6:.3f}",
                "wall": fmt_duration(report["wall_ns"]),
                "predicted": (fmt_duration(spans[r["region_id"]], trace.run_info.time_unit)
                              + (" (assumed)" if r["region_id"] in assumed else " (measured)" if r["region_id"] in measured
                                 else "")) if r["region_id"] in spans else "",
                "ops": report["ops"],
                "d2h_bytes": report["d2h_bytes"],
                "depth": report["depth"],
                "clean": report["verdict"]["clean"],
                "status": report["verdict"]["status"],
                "seen": report_seen(report),
                **counts,
            }
        )
    return rows


def time_text(row: dict[str, Any], trace: Trace) -> str:
    """A region's headline time: the predicted device time of a predicted run (the CPU's wall as context), else the wall."""
    if row.get("predicted"):
        return f"predicted {row['predicted']} on {trace.run_info.target or 'the target'} (CPU wall while recording {row['wall']})"
    return f"wall {row['wall']}"
