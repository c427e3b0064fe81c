"""Pure data functions behind the viewer's callbacks: tables in, tables out, no dash.

These belong in `portscope.ingest` (shared queries); they live here until its owner moves them.
"""

from .diff import diff_operators, diff_signals, pair_regions
from .runs import run_row
from .viewport import Lanes, Viewport, build_lanes, reduce_viewport, slice_at

__all__ = [
    "Lanes",
    "Viewport",
    "build_lanes",
    "diff_operators",
    "diff_signals",
    "pair_regions",
    "reduce_viewport",
    "run_row",
    "slice_at",
]
