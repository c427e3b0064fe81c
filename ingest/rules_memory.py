"""Memory peaks: each region's greatest allocator total held during it (the total it began with included)."""

from __future__ import annotations

import numpy as np

from .events import NONE, EventKind
from .linked import Linked


def memory_peaks(linked: Linked, spans: list[tuple[int, int]], device_only: bool) -> list[int | None]:
    """Per (start_ns, end_ns) span: the greatest allocator total held during it on a device (None: no memory event
    before its end): the totals of the events inside it and, per device, the total held when it began (its last
    event before the span's start). `device_only`: events of devices only (a device run's peak is its device's),
    else every event."""
    a = linked.a
    rows = linked.rows(EventKind.MEMORY)
    rows = rows[a["total_allocated"][rows] != NONE]
    if device_only:
        rows = rows[a["device"][rows] >= 0]
    if not len(rows):
        return [None] * len(spans)
    lanes = []  # per device: its events' times and totals in time order
    device = np.asarray(a["device"][rows])
    for d in np.unique(device).tolist():
        on = rows[device == d]
        order = np.argsort(a["start_ns"][on], kind="stable")
        lanes.append((np.asarray(a["start_ns"][on])[order], np.asarray(a["total_allocated"][on])[order]))
    out: list[int | None] = []
    for start, end in spans:
        peak = None
        for times, totals in lanes:
            lo, hi = np.searchsorted(times, start, "left"), np.searchsorted(times, end, "right")
            held = totals[max(lo - 1, 0) : hi]  # from the total held at the start (if any event came before)
            if len(held):
                peak = max(peak or 0, int(held.max()))
        out.append(peak)
    return out


__all__ = ["memory_peaks"]
