"""Click targets of a timeline's bars: invisible points along every drawn bar, so a click anywhere on a bar selects it.

A bar is a Scattergl line of three points (x0, x1, gap): Plotly hit-tests the points, not the line, so a click
further than `hoverdistance` from both ends of a long bar lands on nothing. One point per column of the view where a
bar is drawn, on the bar's lane (a few pixels apart on screen), gives every part of a bar a point under the mouse;
the server then resolves the click to the slice there (`viewport.slice_at`), as for a click near a bar's end. The
points follow the viewport: the zoom's answer replaces them with the bars.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from portscope.ingest.viewport import KINDS, Viewport

from ..figures import Panel, bars, typed

HITS = "bar hits"  # the name of the hit-point traces (one per panel, after every other trace of the figure)
HIT_COLUMNS = 250  # columns across the view: 4-8 screen pixels apart on a 1-2k px plot (hoverdistance is 20 px)
MAX_HIT_POINTS = 25_000  # points per panel at most (10 bytes each in a zoom's answer): many lanes get fewer columns
MIN_HIT_COLUMNS = 50


def hit_points(viewport: Viewport, lanes: int, hidden_rows: Sequence[int] = ()) -> tuple[np.ndarray, np.ndarray]:
    """x and y of the click targets of a viewport's bars: the centre of every column of the view that a bar on a lane
    covers, on that lane (a float64 x and a uint16 y per point); none on `hidden_rows` (memory lanes: their own points
    answer a click there) and none for a bar narrower than two columns (its own ends are close enough to the mouse)."""
    columns = int(min(HIT_COLUMNS, max(MIN_HIT_COLUMNS, MAX_HIT_POINTS // max(lanes, 1))))
    x0, x1 = float(viewport.x0), float(viewport.x1)
    step = (x1 - x0) / columns if x1 > x0 else 0.0
    starts, ends, rows = [], [], []
    for kind in KINDS:
        x, y = bars(viewport, kind, hidden_rows)
        if len(x):
            starts.append(x[0::3])
            ends.append(x[1::3])
            rows.append(y[0::3])
    if not starts or step <= 0 or lanes <= 0:
        return np.zeros(0, np.float64), np.zeros(0, np.uint16)
    start, end, row = np.concatenate(starts), np.concatenate(ends), np.concatenate(rows).astype(np.int64)
    # the columns whose centre (x0 + (j + 0.5) step) lies on the bar: first..last, clipped to the view
    first = np.clip(np.ceil((start - x0) / step - 0.5), 0, columns).astype(np.int64)
    last = np.clip(np.floor((end - x0) / step - 0.5), -1, columns - 1).astype(np.int64)
    keep = (end - start >= 2 * step) & (first <= last) & (row >= 0) & (row < lanes)
    first, last, row = first[keep], last[keep], row[keep]
    covered = np.zeros((lanes, columns + 1), np.int32)  # +1 at a bar's first column, -1 after its last, per lane
    np.add.at(covered, (row, first), 1)
    np.add.at(covered, (row, last + 1), -1)
    lane, column = np.nonzero(np.cumsum(covered[:, :columns], axis=1) > 0)
    return x0 + (column + 0.5) * step, lane.astype(np.uint16)


def hit_trace(suffix: str, x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """The hit points of one panel: transparent markers that answer a click (no hover label, no legend)."""
    return {"type": "scattergl", "mode": "markers", "name": HITS, "showlegend": False, "x": typed(x), "y": typed(y),
            "xaxis": f"x{suffix}", "yaxis": f"y{suffix}", "hoverinfo": "none", "marker": {"size": 8, "opacity": 0}}


def add_hit_traces(figure: dict[str, Any], viewports: list[Viewport], lanes: list[int], hidden_rows: list[list[int]]) -> list[int]:
    """Append one hit-point trace per panel to a timeline figure (after every other trace: their indices stay); the
    indices of the new traces."""
    first = len(figure["data"])
    for i, (viewport, n, hidden) in enumerate(zip(viewports, lanes, hidden_rows, strict=True)):
        figure["data"].append(hit_trace("" if i == 0 else str(i + 1), *hit_points(viewport, n, hidden)))
    return list(range(first, first + len(viewports)))


def add_panel_hits(figure: dict[str, Any], panels: Sequence[Panel]) -> list[int]:
    """`add_hit_traces` for the panels a timeline figure was drawn from (their memory lanes answer clicks themselves)."""
    return add_hit_traces(figure, [p.viewport for p in panels], [len(p.lanes.lanes) for p in panels],
                          [[level.row for level in p.levels] for p in panels])


def patch_hits(patch: Any, viewports: list[Viewport], lanes: list[int], hidden_rows: list[list[int]], indices: list[int]) -> None:
    """Put the hit points of each panel's new viewport into a zoom's patch."""
    for viewport, n, hidden, index in zip(viewports, lanes, hidden_rows, indices, strict=False):
        x, y = hit_points(viewport, n, hidden)
        patch["data"][index]["x"], patch["data"][index]["y"] = typed(x), typed(y)


def hit_panel(indices: list[int], curve: int) -> int | None:
    """The panel whose hit points a click landed on (`curve`: the clicked trace), or None for another trace."""
    return indices.index(curve) if curve in indices else None


__all__ = ["HITS", "add_hit_traces", "add_panel_hits", "hit_panel", "hit_points", "patch_hits"]
