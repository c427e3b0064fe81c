"""One row per run for the runs list: what it is and a verdict summary that reads at a glance."""

from __future__ import annotations

import dataclasses
from typing import Any

from portscope.ingest.catalog import group_counts
from portscope.ingest.run_metadata import run_labels
from portscope.ingest.schedule_summary import critical_path_sources
from portscope.ingest.schema import Direction, SignalKind
from portscope.ingest.summary import regions_frame, run_totals, summarize, top_level_ids
from portscope.ingest.trace import RunInfo, Trace

from .seen import AI_CPU, seen_signals, seen_text, unrecorded_columns
from .tables import predicted_spans

__all__ = ["RunRow", "covered_ns", "file_model", "model_text", "regions_frame", "run_model", "run_row", "top_level_ids", "torch_text"]


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
    seen: str  # what makes it not clean, named and counted ("60 d2h copies · 67 syncs"); "" when clean
    not_recorded: dict[str, str]  # count column -> the missing-signals entry saying its source cannot record it
    time: float  # headline time of the top-level regions: predicted device time of a predicted run, else wall (ns)
    time_unit: str  # ns, or cycles (a static schedule)
    predicted_time: bool
    assumed_time: bool = False  # assumed cost figures time a region's critical path (portscope.ingest.schedule_summary)
    measured_time: bool = False  # measured figures (a calibrated target) time the critical paths, no assumed one
    model_from_file: bool = False  # no model in the trace: `model` is its file's name (another file name replaces it)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def model_text(model: dict[str, Any]) -> str:
    """A short one-line description of run_info.model."""
    if not model:
        return "?"
    head = str(model.get("class") or model.get("name") or model.get("model") or "")
    rest = [f"{k}={v}" for k, v in model.items() if k not in ("class", "name", "model")][:4]
    return ", ".join([head, *rest] if head else rest)


def _metadata(info: RunInfo) -> dict[str, Any]:
    metadata = info.extra.get("metadata")  # a converted trace's own metadata, secrets scrubbed (ingest/run_metadata.py)
    return metadata if isinstance(metadata, dict) else {}


def file_model(file: str) -> str:
    """The model a run is named by when nothing in it names one: its file's name without the trace suffixes."""
    return str(run_labels({}, file)["model"])


def run_model(info: RunInfo, file: str) -> tuple[str, bool]:
    """(the model a run is about, whether that is only its file's name): run_info.model, else its metadata's model
    id (a benchmark harness's experiment.repo_id...), else the file's name."""
    if info.model:
        return model_text(info.model), False
    named = run_labels(_metadata(info), "")["model"]
    return (str(named), False) if named else (file_model(file), True)


def torch_text(info: RunInfo) -> str | None:
    """The torch version that made a run: recorded by portscope, or in a converted trace's metadata."""
    return info.torch_version or run_labels(_metadata(info), "")["torch_version"]


def covered_ns(spans: list[tuple[int | None, int | None]]) -> int:
    """The time covered by (start, duration) spans, counted once where they overlap (spans without a time: none)."""
    total, end = 0, None
    for start, dur in sorted((s, d) for s, d in spans if s is not None and d):
        if end is None or start >= end:
            total, end = total + dur, start + dur
        elif start + dur > end:
            total, end = total + start + dur - end, start + dur
    return total


def run_row(trace: Trace, run_id: str, file: str) -> RunRow:
    """Totals over the run's top-level regions (nested regions are included in their parents); its time: predicted
    device time, else the wall its top-level regions cover (the ranks of a multi-rank run once, not summed)."""
    summaries = {rid: summarize(trace, rid, lines=False) for rid in top_level_ids(trace)}
    totals = run_totals(trace, summaries)
    ai_cpu = sum(op.reasons.get(AI_CPU, 0) for s in summaries.values() for op in s.operators
                 if op.signal == SignalKind.CPU_FALLBACK.value)
    model, from_file = run_model(trace.run_info, file)
    counts = {**group_counts(totals.counts), "d2h_bytes": totals.transfer_bytes[Direction.D2H]}
    modes = sorted(set(trace["regions"].column("mode").to_pylist()) - {"unknown"})
    info = trace.run_info
    top = list(summaries)
    spans = predicted_spans(trace)
    assumed, measured = critical_path_sources(trace) if spans else ({}, set())
    if spans:
        time, unit = float(sum(spans.get(r, 0) for r in top)), info.time_unit.value
    else:
        regions = trace["regions"].to_pydict()
        extents = {r: (s, d) for r, s, d in zip(regions["region_id"], regions["start_ns"], regions["dur_ns"], strict=True)}
        time, unit = float(covered_ns([extents[r] for r in top])), "ns"  # the ranks of a multi-rank run ran at once
    return RunRow(
        time=time,
        time_unit=unit,
        predicted_time=bool(spans),
        assumed_time=bool(assumed),
        measured_time=bool(measured) and not assumed,
        run_id=run_id,
        file=file,
        source=info.source.value,
        target=info.target,
        model=model,
        model_from_file=from_file,
        modes=", ".join(modes) or "-",
        regions=trace["regions"].num_rows,
        status=totals.status.value,
        seen=seen_text(seen_signals(s.figures() for s in summaries.values()), ai_cpu_fallbacks=ai_cpu),
        not_recorded=unrecorded_columns(info.missing_signals),
        **counts,
    )
