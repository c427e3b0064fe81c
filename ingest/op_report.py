"""Device time per operator and the port diff as text (for people) and as JSON-ready data (for CI):
`portscope report --ops` and the head of `portscope diff --ops`."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .op_device import category_totals, device_by_operator, op_calls
from .port_diff import PortDiff
from .summary import compiler_op_count, region_ids
from .trace import Trace

__all__ = ["format_ops", "format_port_diff", "ops_report_data", "port_diff_data", "records"]


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows as JSON-ready dicts: numpy scalars as Python numbers, NaN as None, lists kept."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None if math.isnan(v) else "inf"
        return v.item() if hasattr(v, "item") else v

    return [{k: clean(v) for k, v in row.items()} for row in frame.to_dict("records")]


def ops_report_data(trace: Trace, region: str | None = None) -> dict[str, Any]:
    """Device time per operator of the regions named `region` (None: the whole run): `ops` (OPS_COLUMNS, by
    self device time), `categories`, the device time in all and the part no operator launched; the program's
    operators only, `compiler_ops` counting those the compiler ran while it traced or compiled (left out, with the
    device work they launched)."""
    ids = region_ids(trace, region) if region else None
    calls = op_calls(trace, ids)
    return {"region": region, "device_ns": calls.device_ns, "unattributed_device_ns": calls.unattributed_ns,
            "ops": records(device_by_operator(calls)), "categories": records(category_totals(calls)),
            "compiler_ops": compiler_op_count(trace, ids)}  # fmt: skip


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f}"


def _share(v: float | None) -> str:
    return "" if v is None else f"{v:.1%}"


def format_ops(data: dict[str, Any]) -> str:
    """`ops_report_data` as text: the operators with device time or calls, then the categories."""
    where = f"regions named {data['region']!r}" if data["region"] else "the whole run"
    lines = [f"device time per operator, {where}: {_us(data['device_ns'])} us of device work"
             + (f" ({_us(data['unattributed_device_ns'])} us launched outside any operator)" if data["unattributed_device_ns"] else "")]  # fmt: skip
    if data.get("compiler_ops"):
        lines.append(f"  ({data['compiler_ops']:,} operator calls the compiler ran while compiling are not counted)")
    if not data["ops"]:
        return "\n".join(lines) + "\n  no operators\n"
    if not data["device_ns"]:
        lines.append("  (no device work in the trace: only calls and CPU time)")
    lines.append(f"  {'calls':>7} {'dev calls':>9} {'self us':>11} {'total us':>11} {'cpu us':>11} {'share':>6}  {'category':<13} operator")
    for r in data["ops"]:
        lines.append(f"  {r['calls']:>7} {r['device_calls']:>9} {_us(r['device_self_ns']):>11} {_us(r['device_total_ns']):>11} "
                     f"{_us(r['cpu_ns']):>11} {_share(r['share']):>6}  {r['category']:<13} {r['operator']}")  # fmt: skip
    lines += ["", "device time per category (each kernel by what it computes):"]
    lines += [f"  {r['category']:<13} {_us(r['device_ns']):>11} us {_share(r['share']):>6}" for r in data["categories"] if r["device_ns"]]
    return "\n".join(lines) + "\n"


def port_diff_data(diff: PortDiff) -> dict[str, Any]:
    """The port diff's rows (`ops`), categories and unattributed device time as JSON-ready values."""
    return {"ops": records(diff.ops), "categories": records(diff.categories), "lines": records(diff.lines),
            "unattributed": {"a": diff.unattributed[0], "b": diff.unattributed[1]}}  # fmt: skip


def _ratio(v: float | None) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}x"


def format_port_diff(diff: PortDiff, top: int) -> str:
    """The operators aligned by what they compute, what got slower first (top `top` with device time), each
    side's own names where they differ; then device time per category."""
    ops = diff.ops[(diff.ops["a_device_self_ns"] > 0) | (diff.ops["b_device_self_ns"] > 0)]
    lines = ["", f"operators aligned by what they compute, by device time: what got slower first ({len(ops)} with device "
             f"time, top {top} each way):",  # fmt: skip
             f"  {'category':<13} {'A calls':>7} {'B calls':>7} {'A dev us':>11} {'B dev us':>11} {'Δ us':>11} {'B/A':>7}  operator"]
    shown = pd.concat([ops.head(top), ops.tail(min(top, max(len(ops) - top, 0)))]) if len(ops) > top else ops
    for r in shown.itertuples():
        lines.append(f"  {r.category:<13} {r.a_calls:>7} {r.b_calls:>7} {_us(r.a_device_self_ns):>11} {_us(r.b_device_self_ns):>11} "
                     f"{r.delta_ns / 1e3:>+11,.1f} {_ratio(r.ratio):>7}  {r.operator}")  # fmt: skip
        if r.a_ops or r.b_ops:
            lines.append(f"  {'':<13} {'':>7} {'':>7} {'':>11} {'':>11} {'':>11} {'':>7}  as A: {', '.join(r.a_ops) or '-'}; "
                         f"as B: {', '.join(r.b_ops) or '-'}")  # fmt: skip
    for side, ns in zip("AB", diff.unattributed, strict=True):
        if ns:
            lines.append(f"  {side}: {_us(ns)} us of device work launched outside any operator (in the categories only)")
    lines += ["", "device time per category (each kernel by what it computes):",
              f"  {'category':<13} {'A us':>11} {'B us':>11} {'Δ us':>11} {'B/A':>7}"]
    for r in diff.categories.itertuples():
        if r.a_device_ns or r.b_device_ns:
            lines.append(f"  {r.category:<13} {_us(r.a_device_ns):>11} {_us(r.b_device_ns):>11} {r.delta_ns / 1e3:>+11,.1f} {_ratio(r.ratio):>7}")
    if len(diff.lines):
        lines += ["", f"device time per model line (the launching operator's call site; {len(diff.lines)} lines, top {top}):",
                  f"  {'A us':>11} {'B us':>11} {'Δ us':>11} {'B/A':>7}  line"]  # fmt: skip
        lines += [f"  {_us(r.a_device_ns):>11} {_us(r.b_device_ns):>11} {r.delta_ns / 1e3:>+11,.1f} {_ratio(r.ratio):>7}  {r.line}"
                  for r in diff.lines.head(top).itertuples()]  # fmt: skip
    return "\n".join(lines) + "\n"
