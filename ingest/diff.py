"""Differences between two regions' reports (A and B), as tables.

Inputs are `portscope.ingest.report.region_report_data` dicts, so a comparison
shows exactly the figures `portscope report --json` prints for the two files.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from portscope.ingest.schema import SignalKind

_ORDER = {k.value: i for i, k in enumerate(SignalKind)}
SIGNAL_COLUMNS = ["signal", "a_count", "b_count", "delta", "ratio", "a_bytes", "b_bytes", "delta_bytes"]
OPERATOR_COLUMNS = ["signal", "operator", "a_count", "b_count", "delta", "a_bytes", "b_bytes", "change"]


def ratio(a: float, b: float) -> float:
    """B / A; inf when only B has it, NaN when neither has it."""
    if a == 0:
        return math.nan if b == 0 else math.inf
    return b / a


def diff_signals(a: dict[str, Any], b: dict[str, Any]) -> pd.DataFrame:
    """One row per signal present in A or B: counts, Δ = B − A, ratio B/A, bytes; plus d2h volume."""
    rows: dict[str, dict[str, Any]] = {}
    for side, report in (("a", a), ("b", b)):
        for s in report["signals"]:
            row = rows.setdefault(s["signal"], {"signal": s["signal"], "a_count": 0, "b_count": 0, "a_bytes": 0, "b_bytes": 0})
            row[f"{side}_count"] += int(s["count"])
            row[f"{side}_bytes"] += int(s["bytes"])
    frame = pd.DataFrame(sorted(rows.values(), key=lambda r: _ORDER.get(r["signal"], 99)), columns=SIGNAL_COLUMNS)
    frame["delta"] = frame["b_count"] - frame["a_count"]
    frame["delta_bytes"] = frame["b_bytes"] - frame["a_bytes"]
    frame["ratio"] = [ratio(x, y) for x, y in zip(frame["a_count"], frame["b_count"], strict=True)]
    volume = {
        "signal": "d2h volume (bytes)",
        "a_count": int(a["d2h_bytes"]),
        "b_count": int(b["d2h_bytes"]),
        "a_bytes": int(a["d2h_bytes"]),
        "b_bytes": int(b["d2h_bytes"]),
    }
    volume["delta"] = volume["b_count"] - volume["a_count"]
    volume["delta_bytes"] = volume["delta"]
    volume["ratio"] = ratio(volume["a_count"], volume["b_count"])
    frame = pd.concat([frame, pd.DataFrame([volume], columns=SIGNAL_COLUMNS)], ignore_index=True)
    return frame[SIGNAL_COLUMNS].astype({"a_count": "int64", "b_count": "int64", "delta": "int64"})


def diff_operators(a: dict[str, Any], b: dict[str, Any]) -> pd.DataFrame:
    """One row per (signal, operator) in A or B with change = added/removed/increased/decreased/same.

    Sorted by change (added, removed, increased, decreased, same), then by |Δ| descending.
    """
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    bare = _bare_packets(a, b)
    for side, report in (("a", a), ("b", b)):
        for op in report["operators"]:
            key = (op["signal"], _operator_key(op["operator"], bare))
            row = rows.setdefault(key, {"signal": key[0], "operator": key[1], "a_count": 0, "b_count": 0, "a_bytes": 0, "b_bytes": 0})
            row[f"{side}_count"] += int(op["count"])
            row[f"{side}_bytes"] += int(op["bytes"])
    for row in rows.values():
        row["delta"] = row["b_count"] - row["a_count"]
        row["change"] = _change(row["a_count"], row["b_count"])
    order = {"added": 0, "removed": 1, "increased": 2, "decreased": 3, "same": 4}
    ranked = sorted(rows.values(), key=lambda r: (order[r["change"]], -abs(r["delta"]), _ORDER.get(r["signal"], 99), r["operator"]))
    return pd.DataFrame(ranked, columns=OPERATOR_COLUMNS)


# --- operator names across sources (issue 9): vendor dumps say `aten::neg`, recordings `aten::neg.default`
def _bare_packets(a: dict[str, Any], b: dict[str, Any]) -> set[str]:
    """Overload packets some report names without an overload (``aten::neg``)."""
    return {op["operator"] for r in (a, b) for op in r["operators"] if "::" in op["operator"] and "." not in op["operator"].split("::", 1)[1]}


def _operator_key(name: str, bare: set[str]) -> str:
    """Compare by overload packet when either side names only the packet, else by the full name."""
    packet = name.split(".", 1)[0] if "::" in name else name
    return packet if packet in bare else name
# --- end operator names across sources


def diff_call_sites(a: dict[str, Any], b: dict[str, Any]) -> pd.DataFrame:
    """Call sites (over all signals) with counts in A and B and their change."""
    counts: dict[str, list[int]] = {}
    for i, report in enumerate((a, b)):
        for op in report["operators"]:
            for site, n in op["call_sites"].items():
                counts.setdefault(site, [0, 0])[i] += int(n)
    rows = [
        {"call_site": site, "a_count": x, "b_count": y, "delta": y - x, "change": _change(x, y)}
        for site, (x, y) in counts.items()
    ]
    rows.sort(key=lambda r: (-abs(r["delta"]), r["call_site"]))
    return pd.DataFrame(rows, columns=["call_site", "a_count", "b_count", "delta", "change"])


def _change(a: int, b: int) -> str:
    if a == 0 and b > 0:
        return "added"
    if b == 0 and a > 0:
        return "removed"
    if b > a:
        return "increased"
    if b < a:
        return "decreased"
    return "same"


def _first_siblings(regions: pd.DataFrame) -> tuple[int, int] | None:
    """The first two regions with one parent (``cold`` and ``warm`` of a run, its first two ``ProfilerStep#N``), the
    parent met first in region order; None when no region has a sibling."""
    parent = regions["parent_id"].fillna(-1).astype("int64")
    for p in dict.fromkeys(parent.tolist()):
        children = regions[parent == p]
        if len(children) > 1:
            return (int(children.iloc[0]["region_id"]), int(children.iloc[1]["region_id"]))
    return None


def pair_regions(regions_a: pd.DataFrame, regions_b: pd.DataFrame, *, same_run: bool) -> tuple[int | None, int | None]:
    """Default (A, B) region ids to compare.

    Inputs have columns region_id, parent_id, name, mode, phase. In one run: eager vs
    compiled, else cold vs warm, preferring regions with the same name, else the first two
    regions of one parent (a run's own cold and warm, or its first two steps); otherwise the
    first top-level region of each run, matched by name when possible.
    """
    if not len(regions_a) or not len(regions_b):
        return (None, None)
    if same_run:
        for field, first, second in (("mode", "eager", "compiled"), ("phase", "cold", "warm")):
            xs = regions_a[regions_a[field] == first]
            ys = regions_a[regions_a[field] == second]
            if len(xs) and len(ys):
                for x in xs.itertuples():
                    same = ys[ys["name"] == x.name]
                    if len(same):
                        return (int(x.region_id), int(same.iloc[0]["region_id"]))
                return (int(xs.iloc[0]["region_id"]), int(ys.iloc[0]["region_id"]))
        siblings = _first_siblings(regions_a)
        if siblings is not None:
            return siblings
        if len(regions_a) > 1:
            return (int(regions_a.iloc[0]["region_id"]), int(regions_a.iloc[1]["region_id"]))
    top_a = regions_a[regions_a["parent_id"].isna()] if regions_a["parent_id"].isna().any() else regions_a
    top_b = regions_b[regions_b["parent_id"].isna()] if regions_b["parent_id"].isna().any() else regions_b
    for x in top_a.itertuples():
        same = top_b[top_b["name"] == x.name]
        if len(same):
            return (int(x.region_id), int(same.iloc[0]["region_id"]))
    return (int(top_a.iloc[0]["region_id"]), int(top_b.iloc[0]["region_id"]))
