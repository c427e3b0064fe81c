"""What every timeline view asks of a run: its region bands, the span it covers, the unit of its axis.

Shared by the timeline page and its tools (timeline_tools), so neither imports the other's module for them.
"""

from __future__ import annotations

from ..context import store
from ..data.tables import region_bands


def bands(run_id: str) -> list[tuple[float, float, str]]:
    """A run's region bands, computed once (every zoom lays their labels out again)."""
    return [tuple(b) for b in store().cached(f"bands:{run_id}", lambda: region_bands(store().trace(run_id)))]


def extent(run_ids: list[str]) -> tuple[float, float]:
    """The span of every run's slices and region bands (what "reset zoom" shows)."""
    spans = [store().lanes(r).extent for r in run_ids]
    spans += [(b[0], b[1]) for r in run_ids for b in bands(r)]
    return (min(s[0] for s in spans), max(s[1] for s in spans))


def run_unit(run_id: str) -> str:
    """The unit of a run's timeline axis: its engine slices' unit, ns when the slices are derived from ops."""
    trace = store().trace(run_id)
    return trace.run_info.time_unit.value if trace["engine_slices"].num_rows else "ns"


__all__ = ["bands", "extent", "run_unit"]
