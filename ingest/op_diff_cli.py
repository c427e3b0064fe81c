"""`portscope diff --ops`: the operator diff of the compared regions as text or JSON."""

from __future__ import annotations

from typing import Any

from .op_diff import OpChange, OpDiff, change_sets, op_diff, set_sizes
from .op_report import format_port_diff, port_diff_data
from .port_diff import port_diff
from .trace import Trace

_SITES_PER_NAME = 3


def op_diff_json(diff: OpDiff) -> dict[str, Any]:
    """The operator diff by name as JSON-ready values: every name's row (`names`), the changed call sites, HTA's
    sets."""
    return {
        "sets": {c.value: names for c, names in change_sets(diff.ops).items()},
        "names": [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for row in diff.ops.to_dict("records")],
        "call_sites": [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
                       for row in diff.sites.to_dict("records")],  # fmt: skip
        "unlaunched": {"a": diff.unlaunched[0], "b": diff.unlaunched[1]},
    }


def format_op_diff(diff: OpDiff, top: int) -> str:
    """The set sizes, then each changed set's first `top` names with counts, times (µs, as HTA gives them) and
    the call-site lines whose count changed."""
    ops = diff.ops
    by_name, by_row = set_sizes(ops)
    lines = ["", f"every operator, runtime call, kernel and annotation: HTA's sets (by name alone): {sum(by_name.values())} "
             "names: " + ", ".join(f"{c.value} {n}" for c, n in by_name.items())]  # fmt: skip
    if by_row != by_name:
        lines.append(f"  by kind and name (the rows below): {len(ops)} rows: " + ", ".join(f"{c.value} {n}" for c, n in by_row.items()))
    for side, n in zip("AB", diff.unlaunched, strict=True):
        if n:
            lines.append(f"  {n} device slices of {side}'s trace were launched before it began: counted in no region")
    sites = {key: group for key, group in diff.sites.groupby(["kind", "name"], sort=False)}
    for change in (OpChange.ADDED, OpChange.DELETED, OpChange.INCREASED, OpChange.DECREASED):
        rows = ops[ops["change"] == change.value]
        if not len(rows):
            continue
        lines += ["", f"{change.value} ({len(rows)}, top {top}):",
                  f"  {'kind':<10} {'A':>7} {'B':>7} {'Δ':>7} {'A us':>11} {'B us':>11}  name"]  # fmt: skip
        for r in rows.head(top).itertuples():
            lines.append(f"  {r.kind:<10} {r.a_count:>7} {r.b_count:>7} {r.delta:>+7} {r.a_ns / 1000:>11.1f} "
                         f"{r.b_ns / 1000:>11.1f}  {r.name}")  # fmt: skip
            changed = sites.get((r.kind, r.name))
            if changed is None:
                continue
            for s in changed.head(_SITES_PER_NAME).itertuples():
                lines.append(f"  {'':<10} {s.a_count:>7} {s.b_count:>7} {s.delta:>+7}   at {s.call_site}")
            if len(changed) > _SITES_PER_NAME:
                lines.append(f"  {'':<10} ... and {len(changed) - _SITES_PER_NAME} more call sites")
    return "\n".join(lines) + "\n"


def op_section(trace_a: Trace, region_a: int, trace_b: Trace, region_b: int, *, wanted: bool, as_json: bool,
               top: int) -> dict[str, Any]:
    """What `diff --ops` adds: {} when not asked, {"op_diff": ...} for --json, else {"text": ...}."""
    if not wanted:
        return {}
    aligned = port_diff(trace_a, [region_a], trace_b, [region_b])
    diff = op_diff(trace_a, region_a, trace_b, region_b)
    if as_json:
        return {"op_diff": {**port_diff_data(aligned), **op_diff_json(diff)}}
    return {"text": format_port_diff(aligned, top) + format_op_diff(diff, top)}
