"""The region report: the same facts as text (for people) and as data (for CI)."""

from __future__ import annotations

from typing import Any

from .catalog import Status
from .plan_report import format_plan, static_shapes_line
from .schema import Direction, Source
from .summary import OperatorTotal, RegionSummary, format_bytes, region_ids, run_totals, summarize
from .trace import Trace

_MAX_SITES = 3
_VERDICT_TEXT = {Status.CLEAN: "clean", Status.COMPILES: "clean (compiles only)", Status.NOT_CLEAN: "NOT clean",
                 Status.ERROR: "ERROR"}


def region_report_data(summary: RegionSummary) -> dict[str, Any]:
    """Plain JSON-serialisable counters of one region."""
    return {
        "region": summary.name,
        "region_id": summary.region_id,
        "parent_id": summary.parent_id,  # nested regions' figures are included in their parent's
        "depth": summary.depth,
        "wall_ns": int(summary.wall_ns),
        "peak_memory_bytes": summary.peak_memory_bytes,
        "mode": summary.mode,
        "phase": summary.phase,
        "device": summary.device,
        "error": summary.error,
        "tags": summary.tags,
        "ops": summary.op_count,  # the program's operators
        "compiler_ops": summary.compiler_op_count,  # operators the compiler ran while it traced or compiled
        "signals": [
            {"signal": r.signal, "count": int(r.count), "bytes": int(r.bytes), "note": r.note}
            for r in summary.signals
        ],
        "operators": [
            {
                "signal": r.signal,
                "operator": r.operator,
                "count": int(r.count),
                "bytes": int(r.bytes),
                "reasons": r.reasons,
                "call_sites": r.call_sites,
                "lines": [t.to_json() for t in r.lines],
            }
            for r in summary.operators
        ],
        "transfers": {
            d.value: {"count": summary.transfer_counts[d], "bytes": summary.transfer_bytes[d]} for d in Direction
        },
        "d2h_bytes": summary.transfer_bytes[Direction.D2H],
        "verdict": summary.verdict(),
    }


def trace_report_data(trace: Trace, region: str | None = None) -> dict[str, Any]:
    """The report of every region (or those named `region`) as data."""
    info = trace.run_info
    summaries = {rid: summarize(trace, rid) for rid in region_ids(trace, region)}
    return {
        "trace": trace.path,
        "run": {
            "source": info.source.value,
            "target": info.target,
            "torch_version": info.torch_version,
            "devices": info.devices,
            "model": info.model,
            "command": info.command,
            "start_time": info.start_time,
            "missing_signals": info.missing_signals,
        },
        "regions": [region_report_data(s) for s in summaries.values()],
        "totals": run_totals(trace, summaries).to_json(),  # top-level regions only: never double-counts nested ones
    }


def _operator_lines(r: OperatorTotal) -> list[str]:
    """An operator's source lines (count, line, modules, source text), or its call sites when it has no lines."""
    out = []
    for t in r.lines[:_MAX_SITES]:
        modules = ", ".join(f"{m} {n}" for m, n in list(t.modules.items())[:_MAX_SITES])
        out.append(f"           {t.count:>4}x at {t.line}" + (f"  in {modules}" if modules else ""))
        if t.source:
            out.append(f"                  | {t.source}")
    if len(r.lines) > _MAX_SITES:
        out.append(f"                 ... and {len(r.lines) - _MAX_SITES} more line{'s' if len(r.lines) - _MAX_SITES > 1 else ''}")
    if not r.lines:
        out += [f"             at {site} ({n}x)" for site, n in list(r.call_sites.items())[:_MAX_SITES]]
    return out


def format_region(summary: RegionSummary, *, source: Source = Source.MEASURED, target: str | None = None) -> str:
    """The text report of one region."""
    lines = []
    where = f"PREDICTED for target {target}" if source is Source.PREDICTED else source.value
    header = f"Region {summary.name!r}  [{where}]  wall {summary.wall_ns / 1e6:.3f} ms"
    if summary.peak_memory_bytes is not None:
        header += f"  peak memory {format_bytes(summary.peak_memory_bytes)}"
    details = [f"{summary.op_count} ops" + (f" (and {summary.compiler_op_count:,} the compiler ran while compiling, not counted)"
                                            if summary.compiler_op_count else "")]
    if summary.mode != "unknown":
        details.append(f"mode {summary.mode}")
    if summary.phase != "none":
        details.append(f"phase {summary.phase}")
    if summary.device:
        details.append(f"device {summary.device}")
    lines += [header, "  " + ", ".join(details)]
    if summary.error:
        lines.append(f"  ERROR: the region raised {summary.error}")
    lines.append("")
    if not len(summary.signals):
        lines.append("  no signals: everything ran where it was asked to")
    else:
        rows = [("Signal", "Count", "Bytes", "Note")]
        rows += [
            (r.signal, str(int(r.count)), format_bytes(r.bytes) if r.bytes else "-", r.note) for r in summary.signals
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        for i, row in enumerate(rows):
            lines.append(f"  {row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]}")
            if i == 0:
                lines.append("  " + "-" * (sum(widths) + 4 + max(len(r[3]) for r in rows)))
        for kind in (r.signal for r in summary.signals):
            lines += ["", f"  {kind}:"]
            for r in summary.operators_of(kind):
                why = ", ".join(f"{k} {v}" for k, v in r.reasons.items())
                size = f" {format_bytes(r.bytes)}" if r.bytes else ""
                lines.append(f"    {r.count:>6}x {r.operator}{size}" + (f"  why: {why}" if why else ""))
                lines += _operator_lines(r)
    d2h = summary.transfer_bytes[Direction.D2H]
    lines += [
        "",
        f"  physical device->host volume: {format_bytes(d2h)} in {summary.transfer_counts[Direction.D2H]} transfers"
        f" (host->device {format_bytes(summary.transfer_bytes[Direction.H2D])})",
    ]
    verdict = summary.verdict_of()
    lines.append(f"  verdict: {_VERDICT_TEXT[verdict.status]}" + (" -- " + "; ".join(verdict.reasons) if verdict.reasons else ""))
    return "\n".join(lines)


def format_trace(trace: Trace, region: str | None = None) -> str:
    """The text report of every region of a trace (or those named `region`)."""
    info = trace.run_info
    parts = []
    head = f"portscope trace {trace.path or ''}".rstrip()
    what = info.source.value + (f" (target {info.target})" if info.target else "")
    parts.append(f"{head}\n  {what}; torch {info.torch_version or '?'}; devices {', '.join(info.devices) or '?'}")
    if info.model:
        parts[-1] += "\n  model: " + ", ".join(f"{k}={v}" for k, v in info.model.items())
    if info.missing_signals:
        parts[-1] += "\n  this source could not provide: " + ", ".join(info.missing_signals)
    static = static_shapes_line(info)
    if static:
        parts[-1] += "\n  " + static
    if trace["plan"].num_rows:
        parts.append(format_plan(trace["plan"], info))
    for rid in region_ids(trace, region):
        parts.append(format_region(summarize(trace, rid), source=info.source, target=info.target))
    return "\n\n".join(parts) + "\n"
