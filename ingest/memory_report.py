"""Memory per region and two regions' memory compared, as text (for people) and as JSON-ready data (for CI):
`portscope report --memory` and `portscope diff --memory`."""

from __future__ import annotations

from typing import Any

from .catalog import format_bytes
from .memory import MemoryDiff, RunMemory
from .op_report import records
from .summary import region_ids, regions_frame
from .trace import Trace

__all__ = ["format_memory", "format_memory_diff", "memory_diff_data", "memory_report_data"]

TOP_SITES = 10


def memory_report_data(trace: Trace, region: str | None = None) -> dict[str, Any]:
    """Per region (those named `region`, else every one): its devices' memory and its top allocating call sites."""
    names = regions_frame(trace).set_index("region_id")["name"]
    out, memory = [], RunMemory(trace)
    for rid in region_ids(trace, region):
        found = memory.region(rid)
        out.append({"region": names[rid], "region_id": rid, "devices": records(found.devices),
                    "sites": records(found.sites.groupby("device").head(TOP_SITES))})  # fmt: skip
    return {"regions": out}


def _b(v: Any) -> str:
    return "-" if v is None else format_bytes(int(v))


def format_memory(data: dict[str, Any]) -> str:
    """`memory_report_data` as text, region by region."""
    lines: list[str] = []
    for r in data["regions"]:
        lines.append(f"memory of region {r['region']!r}:")
        if not r["devices"]:
            lines.append("  no memory events (record with profile_memory=True, or a trace with [memory] events)")
            continue
        w = max(10, *(len(d["device"]) for d in r["devices"]))  # a multi-rank run's devices: "rank 0 · cuda:0"
        lines.append(f"  {'device':<{w}} {'peak':>10} {'live at exit':>13} {'allocations':>12} {'allocated':>10} {'peak reserved':>14}")
        for d in r["devices"]:
            lines.append(f"  {d['device']:<{w}} {_b(d['peak_bytes']):>10} {_b(d['live_at_exit_bytes']):>13} {d['allocations']:>12,} "
                         f"{_b(d['allocated_bytes']):>10} {_b(d['peak_reserved_bytes']):>14}")  # fmt: skip
        for s in r["sites"]:
            plural = "" if s["allocations"] == 1 else "s"
            lines.append(f"    {s['device']:<{w - 2}} {_b(s['allocated_bytes']):>10} in {s['allocations']:>6,} allocation{plural}  {s['call_site']}")
        lines.append("")
    return "\n".join(lines) + ("\n" if lines and lines[-1] else "")


def memory_diff_data(diff: MemoryDiff) -> dict[str, Any]:
    """The memory comparison as JSON-ready values: devices, and the call sites by growth of bytes allocated."""
    return {"devices": records(diff.devices), "sites": records(diff.sites)}


def format_memory_diff(diff: MemoryDiff, top: int) -> str:
    """Peaks of A and B per device, then the call sites whose allocated bytes grew most."""
    if not len(diff.devices):
        return "\nmemory: neither region has memory events\n"
    lines = ["", "memory per device:", f"  {'device':<10} {'A peak':>10} {'B peak':>10} {'Δ peak':>11} {'A live':>10} {'B live':>10}"]
    for d in diff.devices.to_dict("records"):
        delta = d["delta_peak_bytes"]
        shown = "-" if delta != delta else ("+" if delta >= 0 else "-") + format_bytes(abs(int(delta)))
        lines.append(f"  {d['device']:<10} {_b(_num(d['a_peak_bytes'])):>10} {_b(_num(d['b_peak_bytes'])):>10} {shown:>11} "
                     f"{_b(_num(d['a_live_at_exit_bytes'])):>10} {_b(_num(d['b_live_at_exit_bytes'])):>10}")  # fmt: skip
    grew = diff.sites[diff.sites["delta_bytes"] > 0].head(top)
    lines += ["", f"call sites whose allocated bytes grew most (top {top}):"]
    lines += [f"  {r.device:<8} {_b(r.a_allocated_bytes):>10} -> {_b(r.b_allocated_bytes):>10}  {r.call_site}" for r in grew.itertuples()]
    if not len(grew):
        lines.append("  none")
    return "\n".join(lines) + "\n"


def _num(v: Any) -> Any:
    return None if v is None or v != v else v
