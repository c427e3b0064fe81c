"""What every timeline view asks of a run: its region bands, the span it covers, the unit of its axis.

Shared by the timeline page and its tools (timeline_tools), so neither imports the other's module for them.
"""

from __future__ import annotations

from portscope.ingest.ranks import STEP_REGION, lane_rank, rank_of_regions
from portscope.ingest.trace import Trace
from portscope.ingest.viewport import Lanes

from ..context import store
from ..data.tables import region_bands
from ..figures import RankLanes


def bands(run_id: str) -> list[tuple[float, float, str]]:
    """A run's region bands, computed once (every zoom lays their labels out again). A multi-rank run's top-level
    regions are its ranks, which its lane groups name: its bands are the reference rank's steps instead (the ranks
    are lined up on them)."""
    return [tuple(b) for b in store().cached(f"bands:{run_id}", lambda: _bands(store().trace(run_id)))]


def _bands(trace: Trace) -> list[tuple[float, float, str]]:
    if not _is_ranked(trace):
        return region_bands(trace)
    reference = trace.run_info.extra.get("reference_rank")
    return [(start, end, name) for rank, start, end, name in _steps(trace) if rank == reference]


def _is_ranked(trace: Trace) -> bool:
    return bool(trace.run_info.extra.get("ranks")) and trace.run_info.time_unit.value == "ns"


def _steps(trace: Trace) -> list[tuple[int, float, float, str]]:
    """A multi-rank run's ProfilerStep ranges: (rank, start, end, name)."""
    regions = trace["regions"]
    ranks = rank_of_regions(trace)
    return [(ranks[rid], float(start), float(start + dur), name) for rid, name, start, dur in
            zip(*(regions.column(c).to_pylist() for c in ("region_id", "name", "start_ns", "dur_ns")), strict=True)
            if rid in ranks and STEP_REGION.match(str(name))]  # fmt: skip


def rank_lanes(run_id: str, lanes: Lanes) -> RankLanes | None:
    """A multi-rank run's lane groups (one per rank, in the lanes' order) and each rank's step starts; None for
    another run."""
    trace = store().trace(run_id)
    if not _is_ranked(trace):
        return None
    groups: list[tuple[int, int, int]] = []
    for row, name in enumerate(lanes.lanes):
        rank = lane_rank(name)
        if rank is None:
            continue
        if groups and groups[-1][0] == rank and groups[-1][2] == row - 1:
            groups[-1] = (rank, groups[-1][1], row)
        else:
            groups.append((rank, row, row))
    starts: dict[int, list[float]] = {}
    for rank, start, _end, _name in store().cached(f"rank-steps:{run_id}", lambda: _steps(trace)):
        starts.setdefault(rank, []).append(start)
    return RankLanes(groups=groups, step_starts=starts)


def extent(run_ids: list[str]) -> tuple[float, float]:
    """The span of every run's slices and region bands (what "reset zoom" shows)."""
    spans = [store().lanes(r).extent for r in run_ids]
    spans += [(b[0], b[1]) for r in run_ids for b in bands(r)]
    return (min(s[0] for s in spans), max(s[1] for s in spans))


def run_unit(run_id: str) -> str:
    """The unit of a run's timeline axis: its engine slices' unit, ns when the slices are derived from ops."""
    trace = store().trace(run_id)
    return trace.run_info.time_unit.value if trace["engine_slices"].num_rows else "ns"


__all__ = ["bands", "extent", "rank_lanes", "run_unit"]
