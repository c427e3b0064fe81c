"""Memory lanes of a static schedule: each tensor a rectangle of address range x lifetime, one band per memory tier.

A compiler schedule that lists its tensors (the Furiosa ``--dump-schedule`` converter keeps them in
``run_info.extra["tensors"]``: ``{"columns": [...], "rows": [[name, tier, address, size, begin, end], ...]}``,
addresses and sizes in bytes, lifetimes in the run's time unit) is drawn as Furiosa's Schedule
Viewer draws it: memory lanes (Spm, Vrf, Trf, Sram, then any other tier, Dram last) above the
resource lanes, x in cycles. Within a band, y is the address scaled to the tier's highest address.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .trace import Trace

TENSOR_COLUMNS = ["name", "tier", "address", "size", "begin", "end"]
TIER_ORDER = ["Spm", "Vrf", "Trf", "Sram"]  # the Schedule Viewer's order, on-chip first
_LAST = ["Dram"]
BAND = 0.9  # share of a band's height the rectangles use (a gap between bands)


@dataclasses.dataclass(frozen=True)
class MemoryLanes:
    """Rectangles per tier: band index = position in `tiers`; x in the run's time unit, y in band units."""

    tiers: list[str]
    tier_bytes: list[int]  # highest address + size per tier (the band's full height)
    tier: np.ndarray  # int: band of each tensor
    x0: np.ndarray
    x1: np.ndarray
    y0: np.ndarray
    y1: np.ndarray
    labels: list[str]

    def __len__(self) -> int:
        return len(self.labels)


def tensor_rows(trace: Trace) -> list[dict[str, Any]]:
    """The tensors a trace keeps (name, tier, address, size, begin, end); [] when it keeps none or they are malformed."""
    raw = trace.run_info.extra.get("tensors")
    if not isinstance(raw, dict) or raw.get("columns") != TENSOR_COLUMNS or not isinstance(raw.get("rows"), list):
        return []
    out = []
    for row in raw["rows"]:
        if not (isinstance(row, list) and len(row) == len(TENSOR_COLUMNS)):
            continue
        t = dict(zip(TENSOR_COLUMNS, row, strict=True))
        nums = [t[k] for k in ("address", "size", "begin", "end")]
        if all(type(v) is int for v in nums) and t["size"] >= 0 and t["begin"] <= t["end"] and isinstance(t["tier"], str):
            out.append(t)
    return out


def memory_lanes(trace: Trace) -> MemoryLanes | None:
    """The memory lanes of a trace that keeps tensors, else None."""
    rows = tensor_rows(trace)
    if not rows:
        return None
    present = {t["tier"] for t in rows}
    tiers = [t for t in TIER_ORDER if t in present] + sorted(present - set(TIER_ORDER) - set(_LAST))
    tiers += [t for t in _LAST if t in present]
    band = {t: i for i, t in enumerate(tiers)}
    top = {t: max(1, max(r["address"] + r["size"] for r in rows if r["tier"] == t)) for t in tiers}
    tier = np.array([band[r["tier"]] for r in rows], dtype=np.int64)
    scale = np.array([top[r["tier"]] for r in rows], dtype=np.float64)
    address = np.array([r["address"] for r in rows], dtype=np.float64)
    size = np.array([r["size"] for r in rows], dtype=np.float64)
    # band i spans [i, i + BAND]; addresses grow downwards like the lanes below (row 0 on top)
    y0 = tier + BAND * address / scale
    y1 = tier + BAND * (address + size) / scale
    labels = [f"{r['name']} ({r['tier']}): {r['size']:,} B at {r['address']:#x}, {r['begin']}-{r['end']}" for r in rows]
    return MemoryLanes(tiers, [top[t] for t in tiers], tier, np.array([r["begin"] for r in rows], dtype=np.float64),
                       np.array([r["end"] for r in rows], dtype=np.float64), y0, y1, labels)  # fmt: skip


__all__ = ["TENSOR_COLUMNS", "TIER_ORDER", "MemoryLanes", "memory_lanes", "tensor_rows"]
