"""Figure builders: reduced timelines and breakdown bars, as plain Plotly dicts.

Timelines follow NOTES.md: one Scattergl per colour, three points per bar
(x0, x1, NaN), line width = row height, arrays sent base64-encoded (typed arrays).
Text from traces goes through `plot_text`, since Plotly interprets a few HTML tags.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from dash import Patch

from portscope.ingest.flows import slice_flows
from portscope.ingest.memory import MemoryLane, levels
from portscope.ingest.memory_lanes import MemoryLanes
from portscope.ingest.schema import TimeUnit
from portscope.ingest.slice_search import lanes_of_rows
from portscope.ingest.viewport import KINDS, Lanes, Viewport

from .data.tables import timeline_slices
from .time_axis import TimeTicks, time_ticks

KIND_COLOURS = {
    "compute": "#4C78A8",
    "fallback": "#E45756",
    "transfer": "#F58518",
    "compile": "#B279A2",
    "dispatch": "#9D9D9D",
    "sync": "#EECA3B",
    "communication": "#54A24B",
    "annotation": "#72B7B2",
}
ROW_PX = 26
BAR_PX = 18
VIEW_PX = 2000  # pixels a viewport is reduced to (wider than most screens)
LEVEL_TRACES, LEVEL_HIT = 3, 2  # traces per memory lane (`level_traces`), and which of them a click lands on
MEMORY_HIT = "memory at"  # the name of that trace
LEVEL_HALF = 0.42  # a memory lane's level spans its row ± this (lanes are one unit apart)
LEVEL_COLOURS = {"allocated": "rgba(84,48,112,0.75)", "reserved": "#222222"}


def plot_text(text: Any) -> str:
    """Text for Plotly labels, with the characters of its HTML subset escaped."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def typed(array: np.ndarray) -> dict[str, str]:
    """A numpy array as a Plotly typed array (base64), far smaller than a JSON list."""
    code = {np.dtype("float64"): "f8", np.dtype("float32"): "f4", np.dtype("uint16"): "u2", np.dtype("int32"): "i4"}[array.dtype]
    return {"dtype": code, "bdata": base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")}


@dataclasses.dataclass(frozen=True)
class RankLanes:
    """A multi-rank run's lanes: one group per rank (rank, first row, last row, in the lanes' order) and each
    rank's ProfilerStep starts (the axis unit), drawn as a line down its own group: lined-up ranks, lined-up lines."""

    groups: list[tuple[int, int, int]]
    step_starts: dict[int, list[float]]


STEP_START_COLOUR = "#B2182B"
RANK_GROUPS_DRAWN = 256  # separator lines between rank groups (shapes) at most


@dataclasses.dataclass
class Panel:
    """One run's timeline inside a figure."""

    title: str
    lanes: Lanes
    viewport: Viewport
    bands: list[tuple[float, float, str]]
    unit: str
    memory: MemoryLanes | None = None  # tensors of a static schedule: drawn above the lanes
    clock_hz: float | None = None  # a cycle axis is labelled in time at this clock rate
    levels: list[LevelLane] = dataclasses.field(default_factory=list)  # memory lanes drawn as levels over their bars
    ranks: RankLanes | None = None  # a multi-rank run: its lane groups and step starts


@dataclasses.dataclass(frozen=True)
class LevelLane:
    """A memory lane of a panel: its row among the lanes, its events, and the level drawn full height."""

    row: int
    lane: MemoryLane
    top: float

    @classmethod
    def of(cls, row: int, lane: MemoryLane) -> LevelLane:
        return cls(row, lane, float(max(lane.total.max(initial=0), lane.reserved.max(initial=0), 1)))

    def traces(self, x0: float, x1: float) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """x and y of the allocated area (a closed polygon on the lane's baseline), of the reserved line, and of the
        points a click on the lane lands on (`LEVEL_HIT`: one per pixel column across the window, on the lane's row)."""
        found = levels(self.lane, x0, x1, VIEW_PX)
        base = self.row + LEVEL_HALF
        y = base - 2 * LEVEL_HALF * found.allocated / self.top
        area = ({"x": typed(np.r_[found.x, found.x[-1], found.x[0]]), "y": typed(np.r_[y, base, base])} if len(found.x)
                else {"x": [], "y": []})  # fmt: skip
        line = {"x": typed(found.reserved_x), "y": typed(base - 2 * LEVEL_HALF * found.reserved / self.top)} if len(found.reserved_x) else {"x": [], "y": []}
        hit = {"x": typed(np.linspace(x0, x1, VIEW_PX)), "y": typed(np.full(VIEW_PX, float(self.row)))} if x1 > x0 else {"x": [], "y": []}
        return area, line, hit


def axis_ticks(units: list[str], clocks: list[float | None], x0: float, x1: float) -> list[TimeTicks]:
    """Human ticks (ns/µs/ms/s, or cycles) of every panel's x axis over [x0, x1].

    Only the bottom axis is titled, and any axis in another unit than the bottom one.
    """
    out = []
    for i, (unit, clock) in enumerate(zip(units, clocks, strict=True)):
        ticks = time_ticks(x0, x1, unit=TimeUnit(unit), clock_hz=clock)
        titled = i == len(units) - 1 or unit != units[-1]
        out.append(ticks if titled else dataclasses.replace(ticks, title=""))
    return out


FLOWS = "flows"
FLOW_COLOUR = "#D62728"
MATCHES = "search matches"
MATCH_PX = 6  # a dark core inside each matched bar: visible on every kind's colour
MATCH_COLOUR = "#111111"
PANEL_GAP_PX = 56
MEMORY_ROW_PX = 70
MEMORY_AXIS = 100  # memory bands of panel i use y axis number MEMORY_AXIS + i (after every bar trace: patches keep their indices)
TIER_COLOURS = ["#54A24B", "#4C78A8", "#B279A2", "#F58518", "#72B7B2", "#9D755D", "#BAB0AC"]


def memory_traces(memory: MemoryLanes, xaxis: str, yaxis: str) -> list[dict[str, Any]]:
    """One filled scatter per tier: each tensor a rectangle (address range x lifetime), hover names it."""
    out = []
    for band, tier in enumerate(memory.tiers):
        idx = np.flatnonzero(memory.tier == band)
        xs, ys, text = [], [], []
        for i in idx.tolist():
            x0, x1, y0, y1 = memory.x0[i], memory.x1[i], memory.y0[i], memory.y1[i]
            xs += [x0, x1, x1, x0, x0, None]
            ys += [y0, y0, y1, y1, y0, None]
            text += [plot_text(memory.labels[i])] * 5 + [None]
        colour = TIER_COLOURS[band % len(TIER_COLOURS)]
        out.append({"type": "scatter", "mode": "lines", "fill": "toself", "name": f"memory {plot_text(tier)}",
                    "x": xs, "y": ys, "text": text, "hoverinfo": "text", "hoveron": "points+fills",
                    "line": {"width": 1, "color": colour}, "fillcolor": colour + "88", "xaxis": xaxis, "yaxis": yaxis,
                    "showlegend": False, "connectgaps": False})  # fmt: skip
    return out


PLOT_PX = 1100  # the plot width band labels are laid out for (narrower than the usual page: a safe guess)
LABEL_ROW_PX = 13
LABEL_CHAR_PX = 6.2  # width of a character of the 10 px label font (DejaVu Sans: 5.5-6.1)
MAX_LABEL_ROWS = 3


def band_label_rows(bands: list[tuple[float, float, str]], x0: float, x1: float, *,
                    plot_px: float = PLOT_PX) -> list[tuple[int, bool] | None]:
    """Where each band's label goes so that no two labels overlap in the view [x0, x1]: (row, flush right), or None.

    Labels sit above the lanes at their band's start (or at the view's left edge when the band starts
    before it; flush with the right edge when they would run past it); a label that would run into an
    earlier one goes one row up, at most MAX_LABEL_ROWS rows. A label with no free row is left out until
    a zoom makes room (the server lays labels out again for every view).
    """
    scale = plot_px / max(x1 - x0, 1e-9)
    row_end = [-1e18] * MAX_LABEL_ROWS  # right edge (px) of the last label in each row
    places: list[tuple[int, bool] | None] = [None] * len(bands)
    for i in sorted(range(len(bands)), key=lambda k: bands[k][0]):
        start, end, text = bands[i]
        if end < x0 or start > x1:
            continue
        width = len(text) * LABEL_CHAR_PX
        left = (max(start, x0) - x0) * scale
        right = left + width > plot_px
        if right:
            left = max(plot_px - width, 0.0)
        row = next((r for r in range(MAX_LABEL_ROWS) if row_end[r] + 6 <= left), None)
        if row is not None:
            row_end[row] = left + width
            places[i] = (row, right)
    return places


def panel_annotations(bands: list[list[tuple[float, float, str]]], titles: list[str] | None,
                      windows: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """Region band labels of every panel laid out for its view, and the panels' titles (several panels)."""
    out: list[dict[str, Any]] = []
    for i, (panel_bands, window) in enumerate(zip(bands, windows, strict=True)):
        suffix = "" if i == 0 else str(i + 1)
        for (x0, _x1, label), place in zip(panel_bands, band_label_rows(panel_bands, *window), strict=True):
            if place is not None:
                row, right = place
                out.append({"xref": f"x{suffix}", "yref": f"y{suffix} domain", "x": window[1] if right else max(x0, window[0]),
                            "y": 1.0, "xanchor": "right" if right else "left", "yanchor": "bottom", "yshift": row * LABEL_ROW_PX,
                            "text": plot_text(label), "showarrow": False, "font": {"size": 10, "color": "#555"}})  # fmt: skip
        if titles and len(bands) > 1:
            # in the left margin, above the lane names: never on top of the region band labels
            out.append({"xref": "paper", "yref": f"y{suffix} domain", "x": 0, "y": 1.0, "xanchor": "right", "yanchor": "bottom",
                        "xshift": -8, "text": f"<b>{plot_text(titles[i])}</b>", "showarrow": False, "font": {"size": 14}})  # fmt: skip
    return out


LANE_CHAR_PX = 7.0  # width of a character of the 12 px lane-name font (DejaVu Sans: 6.2-7.0)
MARGIN_PX = (110, 420)  # the left margin: at least room for "host thread 1234", at most a third of a narrow plot


def lane_margin_px(labels: list[str]) -> int:
    """The left margin that shows the longest lane (or memory tier) name whole, within MARGIN_PX (longer names
    are cut by the browser, as before)."""
    longest = max((len(str(label)) for label in labels), default=0)
    return int(min(max(MARGIN_PX[0], math.ceil(longest * LANE_CHAR_PX) + 16), MARGIN_PX[1]))


def _label_rows(bands: list[tuple[float, float, str]]) -> int:
    """Rows of band labels a panel may need (room kept above its lanes)."""
    return min(max(len(bands), 1), MAX_LABEL_ROWS)


def graph_config(name: str) -> dict[str, Any]:
    """dcc.Graph config of a timeline: wheel zoom, and the camera button's image at twice the size, named for the page."""
    return {"scrollZoom": True, "displaylogo": False,
            "toImageButtonOptions": {"format": "png", "filename": f"portscope-{name}", "scale": 2}}


def timeline_figure(panels: list[Panel], *, drag: str = "zoom") -> dict[str, Any]:
    """Panels stacked vertically with one shared (matched) x axis; trace index = panel * len(KINDS) + kind.

    drag: "zoom" (drag zooms), or "select" (drag selects a time range; the wheel and W/S zoom).
    """
    memory_px = [len(p.memory.tiers) * MEMORY_ROW_PX if p.memory is not None else 0 for p in panels]
    label_px = [(_label_rows(p.bands) - 1) * LABEL_ROW_PX for p in panels]  # extra rows of band labels, above the lanes
    heights = [max(len(p.lanes.lanes), 1) * ROW_PX + 40 + m + e for p, m, e in zip(panels, memory_px, label_px, strict=True)]
    gap = PANEL_GAP_PX if len(panels) > 1 else 0  # room for the axis ticks above and the band labels below
    total = sum(heights) + gap * (len(panels) - 1)
    data, shapes, annotations, layout = [], [], [], {}
    memory_data: list[dict[str, Any]] = []
    units, clocks = [p.unit for p in panels], [p.clock_hz for p in panels]
    top = 1.0
    for i, panel in enumerate(panels):
        suffix = "" if i == 0 else str(i + 1)
        memory_rows = [level.row for level in panel.levels]
        shown = ~np.isin(panel.lanes.group_lane, memory_rows)
        present = {KINDS[int(k)] for k in np.unique(panel.lanes.group_kind[shown])}
        for kind in KINDS:
            x, y = bars(panel.viewport, kind, memory_rows)  # memory lanes: drawn as levels, not bars
            data.append(
                {
                    "type": "scattergl",
                    "mode": "lines",
                    "name": kind,
                    "legendgroup": kind,
                    "showlegend": i == 0 and kind in present,
                    "x": typed(x),
                    "y": typed(y),
                    "xaxis": f"x{suffix}",
                    "yaxis": f"y{suffix}",
                    "line": {"width": BAR_PX, "color": KIND_COLOURS[kind]},
                    "hoverinfo": "none",
                    "connectgaps": False,
                }
            )
        height = heights[i] / total
        domain = [max(top - height, 0.0), top]
        top -= height + gap / total
        if panel.memory is not None:  # memory bands on top of the panel, resource lanes below (as Furiosa's viewer)
            split = domain[1] - memory_px[i] / total
            axis = MEMORY_AXIS + i
            layout[f"yaxis{axis}"] = {
                "domain": [split, domain[1]], "range": [len(panel.memory.tiers), 0], "fixedrange": True,
                "tickvals": [b + 0.45 for b in range(len(panel.memory.tiers))], "showgrid": False, "zeroline": False,
                "ticktext": [plot_text(f"{t} ({b:,} B)") for t, b in zip(panel.memory.tiers, panel.memory.tier_bytes, strict=True)],
                "anchor": f"x{suffix}",
            }  # fmt: skip
            memory_data += memory_traces(panel.memory, f"x{suffix}", f"y{axis}")
            domain = [domain[0], split - 8 / total]
        domain = [domain[0], domain[1] - label_px[i] / total]  # extra rows of band labels: between memory and lanes
        n = len(panel.lanes.lanes)
        layout[f"yaxis{suffix}"] = {
            "domain": domain,
            "tickvals": list(range(n)),
            "ticktext": [plot_text(name) for name in panel.lanes.lanes],
            "range": [n - 0.5, -0.5] if n else [0.5, -0.5],
            "fixedrange": True,
            "showgrid": False,
            "zeroline": False,
            "anchor": f"x{suffix}",
        }
        ticks = axis_ticks(units, clocks, panel.viewport.x0, panel.viewport.x1)[i].axis()
        layout[f"xaxis{suffix}"] = {
            # cycles and ns never share an axis (issue 9): a panel in another unit than the first is not matched, and is titled
            **ticks,
            "anchor": f"y{suffix}",
            "showspikes": False,
            "zeroline": False,
            **({"matches": "x"} if i and panel.unit == panels[0].unit else {"range": [panel.viewport.x0, panel.viewport.x1]}),
        }
        for x0, x1, _label in panel.bands:
            shapes.append({"type": "rect", "xref": f"x{suffix}", "yref": f"y{suffix} domain", "x0": x0, "x1": x1, "y0": 0, "y1": 1, "fillcolor": "rgba(120,120,120,0.08)", "line": {"width": 0}, "layer": "below"})
    annotations += panel_annotations([p.bands for p in panels], [p.title for p in panels],
                                     [(p.viewport.x0, p.viewport.x1) for p in panels])
    data += level_traces(panels)  # right after every panel's bars: their indices are known to a zoom's patch
    data += memory_data
    for i in range(len(panels)):  # search matches, drawn over the bars (filled by the search callback)
        suffix = "" if i == 0 else str(i + 1)
        data.append({"type": "scattergl", "mode": "lines", "name": MATCHES, "showlegend": False, "x": [], "y": [],
                     "xaxis": f"x{suffix}", "yaxis": f"y{suffix}", "line": {"width": MATCH_PX, "color": MATCH_COLOUR},
                     "hoverinfo": "skip", "connectgaps": False})  # fmt: skip  (clicks go to the bar below)
    for i, panel in enumerate(panels):  # a multi-rank run's groups: separators, and each rank's step starts
        if panel.ranks is not None:
            suffix = "" if i == 0 else str(i + 1)
            shapes += rank_separators(panel.ranks, suffix)
            data.append(step_start_trace(panel.ranks, suffix, first=not any(p.ranks for p in panels[:i])))
    for i in range(len(panels)):  # flows of the clicked slice (filled by the click callback)
        suffix = "" if i == 0 else str(i + 1)
        data.append({"type": "scatter", "mode": "lines+markers", "name": FLOWS, "showlegend": False, "x": [], "y": [],
                     "xaxis": f"x{suffix}", "yaxis": f"y{suffix}", "line": {"width": 1.5, "color": FLOW_COLOUR},
                     "marker": {"symbol": "arrow", "angleref": "previous", "size": 11, "color": FLOW_COLOUR},
                     "hoverinfo": "text", "connectgaps": False, "cliponaxis": False})  # fmt: skip
    layout.update(
        {
            "height": total + 90,
            "margin": {"l": lane_margin_px([t for key, axis in layout.items() if key.startswith("yaxis") for t in axis.get("ticktext", [])]),
                       "r": 20, "t": 60, "b": 50},
            "hovermode": "closest",
            "spikedistance": 20,
            "hoverdistance": 20,
            "dragmode": drag,
            "selectdirection": "h",
            "uirevision": "timeline",
            "legend": {"orientation": "h", "y": 1.0, "yanchor": "top", "x": 0, "xanchor": "left", "yref": "container"},
            "shapes": shapes,
            "annotations": annotations,
            "plot_bgcolor": "white",
        }
    )
    return {"data": data, "layout": layout}


def rank_separators(ranks: RankLanes, suffix: str) -> list[dict[str, Any]]:
    """A line across the panel above each rank's lane group but the first."""
    return [{"type": "line", "xref": f"x{suffix} domain", "x0": 0, "x1": 1, "yref": f"y{suffix}", "y0": first - 0.5,
             "y1": first - 0.5, "line": {"color": "#666", "width": 1.5}, "layer": "above"}
            for _rank, first, _last in ranks.groups[1 : RANK_GROUPS_DRAWN + 1]]  # fmt: skip


def step_start_trace(ranks: RankLanes, suffix: str, *, first: bool) -> dict[str, Any]:
    """One line down each rank's lane group at each of its step starts (one trace for every rank)."""
    x: list[float] = []
    y: list[float] = []
    for rank, top, bottom in ranks.groups:
        for start in ranks.step_starts.get(rank, []):
            x += [start, start, math.nan]
            y += [top - 0.5, bottom + 0.5, math.nan]
    return {"type": "scattergl", "mode": "lines", "name": "step start", "showlegend": first and bool(x),
            "x": typed(np.array(x, np.float64)), "y": typed(np.array(y, np.float64)), "xaxis": f"x{suffix}",
            "yaxis": f"y{suffix}", "line": {"width": 2, "color": STEP_START_COLOUR}, "hoverinfo": "skip",
            "connectgaps": False}  # fmt: skip


def level_traces(panels: list[Panel]) -> list[dict[str, Any]]:
    """`LEVEL_TRACES` traces per memory lane of every panel, panel by panel: allocated bytes as an area, reserved as a
    line, and invisible points along the lane that answer a click (the levels themselves answer no hover)."""
    out = []
    legend = {"memory allocated": True, "memory reserved": True}  # one legend entry each, at the first lane that has it
    for i, panel in enumerate(panels):
        suffix = "" if i == 0 else str(i + 1)
        for level in panel.levels:
            area, line, hit = level.traces(panel.viewport.x0, panel.viewport.x1)
            common = {"type": "scattergl", "xaxis": f"x{suffix}", "yaxis": f"y{suffix}", "hoverinfo": "skip"}
            for name, part, style in (
                ("memory allocated", area, {"fill": "toself", "fillcolor": LEVEL_COLOURS["allocated"],
                                            "line": {"width": 0.5, "color": LEVEL_COLOURS["allocated"]}}),
                ("memory reserved", line, {"line": {"width": 1.5, "color": LEVEL_COLOURS["reserved"], "dash": "dot"}}),
            ):  # fmt: skip
                first = legend[name] and bool(len(level.lane.reserved) if name == "memory reserved" else len(level.lane.total))
                legend[name] = legend[name] and not first
                out.append({**common, **part, **style, "mode": "lines", "name": name, "legendgroup": name, "showlegend": first})
            out.append({**common, **hit, "mode": "markers", "name": MEMORY_HIT, "showlegend": False, "hoverinfo": "none",
                        "marker": {"size": 8, "opacity": 0}})  # fmt: skip
    return out


def patch_levels(patch: Any, panels_levels: list[list[LevelLane]], first: int, window: tuple[float, float]) -> None:
    """Put each memory lane's levels over `window` into a patch; `first`: the index of the first level trace."""
    index = first
    for lane_levels in panels_levels:
        for level in lane_levels:
            for part in level.traces(*window):
                patch["data"][index]["x"], patch["data"][index]["y"] = part["x"], part["y"]
                index += 1


def bars(viewport: Viewport, kind: str, hidden_rows: Sequence[int] = ()) -> tuple[np.ndarray, np.ndarray]:
    """x and y of the bars of one kind, without those on `hidden_rows` (memory lanes: drawn as levels instead)."""
    x, y = viewport.x[kind], viewport.y[kind]
    if len(hidden_rows) and len(y):
        keep = ~np.isin(y, hidden_rows)
        x, y = x[keep], y[keep]
    return x, y


def timeline_patch(viewports: list[Viewport], ticks: list[TimeTicks] | None = None,
                   annotations: list[dict[str, Any]] | None = None, hidden_rows: list[list[int]] | None = None) -> Patch:
    """Replace only the bars of every panel, its axis ticks and band labels (the zoom stays as the browser has it);
    `hidden_rows`: per panel, the rows whose bars are not drawn (its memory lanes)."""
    patch = Patch()
    if annotations is not None:
        patch["layout"]["annotations"] = annotations
    for i, viewport in enumerate(viewports):
        hidden = hidden_rows[i] if hidden_rows else []
        for k, kind in enumerate(KINDS):
            x, y = bars(viewport, kind, hidden)
            patch["data"][i * len(KINDS) + k]["x"] = typed(x)
            patch["data"][i * len(KINDS) + k]["y"] = typed(y)
    for i, tick in enumerate(ticks or []):
        axis = patch["layout"][f"xaxis{'' if i == 0 else i + 1}"]
        axis["tickmode"] = "array"
        axis["tickvals"] = tick.values
        axis["ticktext"] = tick.labels
        axis["title"] = {"text": tick.title} if tick.title else None
    return patch


def flow_indices(figure: dict[str, Any]) -> list[int]:
    """Indices of the flow traces of a timeline figure, one per panel."""
    return [i for i, trace in enumerate(figure["data"]) if trace.get("name") == FLOWS]


def flow_lines(trace: Any, lanes: Lanes, row: int) -> tuple[list[float | None], list[float | None], list[str | None]]:
    """x, y and hover text of the arrows of one slice's flows: from a source's end to a target's start.

    Each arrow is three points (source end, target start, gap); only the target point shows its marker.
    """
    slices = timeline_slices(trace)[0]
    flows = slice_flows(slices, row)
    if not flows:
        return [], [], []
    rows = sorted({f.source for f in flows} | {f.target for f in flows})
    lane = lanes_of_rows(lanes, rows)
    start = {r: float(slices.column("start")[r].as_py()) for r in rows}
    end = {r: start[r] + float(slices.column("dur")[r].as_py()) for r in rows}
    xs: list[float | None] = []
    ys: list[float | None] = []
    text: list[str | None] = []
    for f in flows:
        xs += [end[f.source], start[f.target], None]
        ys += [lane[f.source], lane[f.target], None]
        text += [f.label, f.label, None]
    return xs, ys, text


def match_indices(figure: dict[str, Any]) -> list[int]:
    """Indices of the search-match traces of a timeline figure, one per panel."""
    return [i for i, trace in enumerate(figure["data"]) if trace.get("name") == MATCHES]


def highlight_bars(viewport: Viewport) -> tuple[dict[str, str], dict[str, str]]:
    """x and y (typed arrays) of the matched slices of one viewport, every kind together."""
    xs = [viewport.x[k] for k in KINDS if len(viewport.x[k])]
    ys = [viewport.y[k] for k in KINDS if len(viewport.y[k])]
    x = np.concatenate(xs) if xs else np.zeros(0)
    y = np.concatenate(ys).astype(np.uint16) if ys else np.zeros(0, np.uint16)
    return typed(x), typed(y)


def viewport_from_relayout(relayout: dict[str, Any] | None, extent: tuple[float, float]) -> tuple[float, float] | None:
    """The x range a relayout event asks for (any x axis; autorange = the whole run), or None if not a zoom."""
    if not relayout:
        return None
    for key, value in relayout.items():
        if key.startswith("xaxis") and key.endswith(".autorange") and value:
            return extent
        if key.startswith("xaxis") and key.endswith(".range") and isinstance(value, list) and len(value) == 2:
            return (float(value[0]), float(value[1]))
        if key.startswith("xaxis") and key.endswith(".range[0]"):
            end = relayout.get(key.replace("[0]", "[1]"))
            if end is not None:
                return (float(value), float(end))
    return None


def _whole_axis(title: str, top: float, *, bytes_: bool) -> dict[str, Any]:
    """An axis of whole numbers (counts, bytes): no fractional ticks ("0.2 signals") when the largest is small;
    bytes in SI units (`200kB`, `1.6GB`: decimal, as the tables write them)."""
    axis: dict[str, Any] = {"title": {"text": title}, "rangemode": "tozero",
                            "tickformat": "~s" if bytes_ else ",d", "ticksuffix": "B" if bytes_ else ""}
    if top <= 5:
        axis["dtick"] = 1
    return axis


def breakdown_figure(frame: pd.DataFrame, *, by: str, metric: str) -> dict[str, Any]:
    """Horizontal bars of a breakdown table (key, count, bytes), largest on top."""
    frame = frame.iloc[::-1]
    values = frame[metric].astype(float).tolist()
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "x": values,
                "y": [plot_text(k) for k in frame["key"]],
                "marker": {"color": "#E45756" if metric == "count" else "#F58518"},
                "hovertemplate": "%{y}: %{x}<extra></extra>",
            }
        ],
        "layout": {
            "height": 80 + 24 * max(len(frame), 1),
            "margin": {"l": 20, "r": 20, "t": 30, "b": 40},
            "yaxis": {"automargin": True},
            "xaxis": _whole_axis("signals" if metric == "count" else "bytes", max(values, default=0.0),
                                 bytes_=metric != "count"),
            "title": {"text": f"by {by}", "font": {"size": 13}},
            "plot_bgcolor": "white",
        },
    }


def category_figure(categories: pd.DataFrame, sides: list[tuple[str, str]]) -> dict[str, Any]:
    """Horizontal bars of device time (µs) per category, one bar per side (`sides`: (label, ns column)), the
    categories with no device time on any side left out; the first category on top."""
    spent = categories[categories[[column for _, column in sides]].sum(axis=1) > 0].iloc[::-1]
    colours = ["#4C78A8", "#F58518"]
    data = [{"type": "bar", "orientation": "h", "name": plot_text(label), "x": (spent[column] / 1e3).round(3).tolist(),
             "y": [plot_text(c) for c in spent["category"]], "marker": {"color": colours[k % len(colours)]},
             "hovertemplate": f"{plot_text(label)} %{{y}}: %{{x:,.1f}} µs<extra></extra>"}
            for k, (label, column) in enumerate(sides)]  # fmt: skip
    return {
        "data": data,
        "layout": {
            "barmode": "group",
            "height": 90 + 26 * len(sides) * max(len(spent), 1),
            "margin": {"l": 20, "r": 20, "t": 30, "b": 40},
            "yaxis": {"automargin": True},
            "xaxis": {"title": {"text": "device time (µs)"}},
            "title": {"text": "device time per category", "font": {"size": 13}},
            "showlegend": len(sides) > 1,
            "plot_bgcolor": "white",
        },
    }
