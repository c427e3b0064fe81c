"""Timeline: per-engine lanes, bars coloured by kind, region bands; level of detail from the server."""

from __future__ import annotations

import math
from typing import Any

import dash
from dash import Input, Output, Patch, State, dcc, html
from dash.exceptions import PreventUpdate

from portscope.ingest.memory import MemoryAt, memory_at
from portscope.ingest.memory_lanes import memory_lanes
from portscope.ingest.schema import TimeUnit, memory_engine
from portscope.ingest.viewport import KINDS, Lanes, Viewport, reduce_viewport, slice_at

from .. import ids, urls
from ..components import fmt_bytes, page
from ..context import store
from ..data.tables import memory_event_detail, slice_detail
from ..figures import (
    LEVEL_HIT,
    LEVEL_TRACES,
    VIEW_PX,
    LevelLane,
    Panel,
    axis_ticks,
    flow_indices,
    flow_lines,
    graph_config,
    match_indices,
    panel_annotations,
    patch_levels,
    timeline_figure,
    timeline_patch,
    viewport_from_relayout,
)
from ..time_axis import fmt_duration, parse_clock
from . import compare_port, memory_sections, timeline_hits, timeline_tools
from .common import load, run_label
from .timeline_runs import bands, extent, rank_lanes, run_unit


def panels(run_ids: list[str], titles: list[str], window: tuple[float, float] | None = None, *,
           clock_hz: float | None = None) -> list[Panel]:
    """One timeline panel per run, reduced to `window` (default: the union of the runs' extents)."""
    lanes = [store().lanes(r) for r in run_ids]
    x0, x1 = window or extent(run_ids)
    out = []
    for run_id, title, lane in zip(run_ids, titles, lanes, strict=True):
        trace = store().trace(run_id)
        out.append(Panel(title=title, lanes=lane, viewport=reduce_viewport(lane, x0, x1, VIEW_PX), bands=bands(run_id),
                         unit=run_unit(run_id), memory=memory_lanes(trace), clock_hz=clock_hz, levels=level_lanes(run_id, lane),
                         ranks=rank_lanes(run_id, lane)))
    return out


def level_lanes(run_id: str, lanes: Lanes) -> list[LevelLane]:
    """The run's memory lanes (allocator levels) with their rows on the timeline, read once per run."""
    found = memory_sections.run_memory(run_id).lanes
    rows = {name: k for k, name in enumerate(lanes.lanes)}
    return [LevelLane.of(rows[memory_engine(lane.device)], lane) for lane in found if memory_engine(lane.device) in rows]


def status_text(viewports: list[Viewport], totals: list[int]) -> str:
    parts = [f"{v.drawn:,} bars drawn for {v.in_view:,} of {t:,} slices in view" for v, t in zip(viewports, totals, strict=True)]
    return "; ".join(parts) + " (bars closer than a pixel are merged; zoom in for detail, double-click to reset)"


def relayout_update(run_ids: list[str], relayout: dict[str, Any] | None, clock_hz: float | None = None,
                    titles: list[str] | None = None, hits: list[int] | None = None) -> tuple[Any, str]:
    """The Patch (bars, axis ticks, band labels; with `hits`, the indices of the panels' hit-point traces, their
    points) and status line answering a zoom or pan, computed on the server."""
    lanes = [store().lanes(r) for r in run_ids]
    window = viewport_from_relayout(relayout, extent(run_ids))
    if window is None:
        raise PreventUpdate
    viewports = [reduce_viewport(lane, window[0], window[1], VIEW_PX) for lane in lanes]
    ticks = axis_ticks([run_unit(r) for r in run_ids], [clock_hz] * len(run_ids), window[0], window[1])
    labels = panel_annotations([bands(r) for r in run_ids], titles, [window] * len(run_ids))
    levels = [level_lanes(r, lane) for r, lane in zip(run_ids, lanes, strict=True)]
    patch = timeline_patch(viewports, ticks, labels, [[level.row for level in found] for found in levels])
    patch_levels(patch, levels, len(run_ids) * len(KINDS), window)
    if hits:
        timeline_hits.patch_hits(patch, viewports, [len(lane.lanes) for lane in lanes],
                                 [[level.row for level in found] for found in levels], hits)
    return patch, status_text(viewports, [len(lane) for lane in lanes])


def clicked_slice(run_ids: list[str], click: dict[str, Any] | None, relayout: dict[str, Any] | None, *,
                  hits: list[int] | None = None, window: tuple[float, float] | None = None) -> tuple[int, str, int | None]:
    """(panel, run, slices-table row or None) under a click (resolved on the server: the nearest slice in that lane).

    The click lands on a point of a bar (its ends), or on a trace of one point per panel (`hits`: their indices, in
    the panels' order: the hit points along the bars, the flow arrows' ends). `window`: the view when the relayout
    does not say (the one the page opened on)."""
    if not click or not click.get("points"):
        raise PreventUpdate
    point = click["points"][0]
    curve = int(point.get("curveNumber", 0))
    panel = timeline_hits.hit_panel(hits or [], curve)
    if panel is None:
        panel = curve // len(KINDS)
    if panel >= len(run_ids):
        raise PreventUpdate  # a memory band (tensor rectangles): its hover says everything
    run_id = run_ids[min(panel, len(run_ids) - 1)]
    lanes = store().lanes(run_id)
    window = viewport_from_relayout(relayout, lanes.extent) or window or lanes.extent
    return panel, run_id, slice_at(lanes, int(round(float(point["y"]))), float(point["x"]), 3 * (window[1] - window[0]) / VIEW_PX)


NO_SLICE = "No slice there; zoom in and click a bar."


def clicked_memory(run_ids: list[str], click: dict[str, Any] | None) -> tuple[str, MemoryAt | None] | None:
    """(run, the memory lane's state at the clicked time, None before its first event) when the click is on a memory
    lane; None when it is elsewhere. The level traces follow every panel's bars, `LEVEL_TRACES` per memory lane."""
    if not click or not click.get("points"):
        return None
    point = click["points"][0]
    at = int(point.get("curveNumber", 0)) - len(run_ids) * len(KINDS)
    if at < 0 or at % LEVEL_TRACES != LEVEL_HIT:
        return None
    for run_id in run_ids:
        found = level_lanes(run_id, store().lanes(run_id))
        if at < len(found) * LEVEL_TRACES:
            return run_id, memory_at(found[at // LEVEL_TRACES].lane, float(point["x"]))
        at -= len(found) * LEVEL_TRACES
    return None


def memory_view(run_id: str, at: MemoryAt | None) -> html.Div | html.Dl:
    """A memory lane at the clicked time: bytes allocated and reserved, and the allocator event that set the level
    (its bytes, time, operator, call site and region)."""
    if at is None:
        return html.Div("No memory event on that lane before this time.", className="muted", id="memory-detail")
    event = memory_event_detail(store().trace(run_id), at.op_id, at.region_id)
    change = ("+" if at.event_bytes >= 0 else "−") + _bytes(abs(at.event_bytes))
    lines = [
        ("memory", at.device),
        ("at", _when(at.time, run_id)),
        ("allocated", _bytes(at.allocated)),
        ("reserved", _bytes(at.reserved) if at.reserved is not None else None),
        ("last change", f"{change} at {_when(at.event_start, run_id)}"),
        ("by operator", event.get("operator")),
        ("call site", event.get("call_site")),
        ("region", event.get("region")),
    ]
    return html.Dl([item for key, value in lines if value not in (None, "") for item in (html.Dt(key), html.Dd(value))],
                   className="facts", id="memory-detail")  # fmt: skip


def _bytes(n: int) -> str:
    """Bytes in a human unit with the exact figure: "3.4 KB (3,500 B)"."""
    human, exact = fmt_bytes(n) if n else "0 B", f"{n:,} B"
    return exact if human.replace(",", "") == exact.replace(",", "") else f"{human} ({exact})"


def click_update(key: dict[str, Any], click: dict[str, Any] | None, relayout: dict[str, Any] | None) -> tuple[Any, Any]:
    """The clicked slice's facts, and its flows drawn (the other slices of its operator, what released it); on a
    memory lane, the memory there at that time."""
    hits, traces = key.get("hit_traces") or [], key.get("flow_traces") or []
    curve = int(((click or {}).get("points") or [{}])[0].get("curveNumber", 0))
    memory = None if curve in hits or curve in traces else clicked_memory(key["run_ids"], click)
    if memory is not None:
        return memory_view(*memory), dash.no_update
    # a click on a bar's hit point or on an arrow's end (a slice's start or end on its lane): the slice there
    on = hits if curve in hits else traces
    panel, run_id, row = clicked_slice(key["run_ids"], click, relayout, hits=on, window=key_window(key))
    patch = Patch()
    for index in traces:
        patch["data"][index]["x"], patch["data"][index]["y"] = [], []
    if row is None:
        return html.Div(NO_SLICE, className="muted"), patch
    if panel < len(traces):
        trace = store().trace(run_id)
        x, y, text = flow_lines(trace, store().lanes(run_id), row)
        patch["data"][traces[panel]]["x"], patch["data"][traces[panel]]["y"] = x, y
        patch["data"][traces[panel]]["text"] = text
        patch["data"][traces[panel]]["marker"]["size"] = [0, 11, 0] * (len(x) // 3)  # an arrowhead at each target
    facts = slice_view(run_id, row)
    titles = key.get("titles")
    if titles and len(key["run_ids"]) > 1:  # the compare page: which run the slice is of
        facts = html.Div([html.H4(f"{titles[panel]}: a slice of {run_label(run_id, store().trace(run_id))}"), facts])
    return facts, patch


def _when(value: int | None, run_id: str) -> str | None:
    """A time of a slice in a human unit, with the exact figure: "3.44 ms (3,441,280 ns)"."""
    if value is None:
        return None
    unit = TimeUnit(run_unit(run_id))
    exact = f"{value:,} {unit.value}"
    human = fmt_duration(value, unit)
    return exact if human.replace(",", "") == exact.replace(",", "") else f"{human} ({exact})"


def slice_view(run_id: str, row: int) -> html.Dl:
    """One slice's facts: engine, kind, name, times, and its operator's shapes, bytes, call site and stack."""
    detail = slice_detail(store().trace(run_id), row)
    lines = [
        ("engine", detail.get("engine")),
        ("kind", detail.get("kind")),
        ("name", detail.get("name")),
        ("start", _when(detail.get("start"), run_id)),
        ("duration", _when(detail.get("dur"), run_id)),
        ("module", detail.get("module")),
        ("bytes", fmt_bytes(detail.get("bytes"))),
        ("waited on", detail.get("waited_on")),
    ]
    op = detail.get("op")
    if op:
        lines += [
            ("operator", op.get("name")),
            ("placement", op.get("placement")),
            ("input shapes", op.get("input_shapes")),
            ("input dtypes", op.get("input_dtypes")),
            ("output shapes", op.get("output_shapes")),
            ("bytes in / out", f"{fmt_bytes(op.get('bytes_in'))} / {fmt_bytes(op.get('bytes_out'))}"),
            ("op module", op.get("module")),
            ("call site", op.get("call_site")),
        ]
    items: list[Any] = []
    for key, value in lines:
        if value not in (None, "", "-"):
            items += [html.Dt(key), html.Dd(str(value))]
    if detail.get("stack"):
        items += [html.Dt("stack"), html.Dd(html.Pre("\n".join(detail["stack"])))]
    return html.Dl(items, className="facts", id="slice-detail")


def zoom_update(key: dict[str, Any], relayout: dict[str, Any] | None, match: dict[str, Any] | None) -> tuple[Any, str]:
    """A zoom's answer with the search matches of the new view highlighted."""
    patch, status = relayout_update(key["run_ids"], relayout, key.get("clock_hz"), key.get("titles"), key.get("hit_traces"))
    text, operator = (match or {}).get("text"), (match or {}).get("operator")
    if (text or operator) and key.get("match_traces"):
        window = viewport_from_relayout(relayout, extent(key["run_ids"])) or extent(key["run_ids"])
        found = compare_port.operator_matches(key["run_ids"], operator) if operator else timeline_tools.text_matches(key["run_ids"], text)
        timeline_tools.add_highlights(patch, found, window, key["match_traces"])
    return patch, status


def clock_box(units: list[str], clock: str | None) -> list[Any]:
    """A clock-rate box when an axis is in cycles (its ticks then read in time)."""
    if "cycles" not in units:
        return []
    return [html.Div([html.Label("clock rate (labels cycles as time):", htmlFor=ids.TIMELINE_CLOCK),
                      dcc.Input(id=ids.TIMELINE_CLOCK, value=clock or "", placeholder="e.g. 1 GHz", debounce=True, type="text",
                                style={"width": "12em"})],
                     className="compare-bar")]


def clock_update(key: dict[str, Any], text: str | None, relayout: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
    """New ticks for a typed clock rate (over the current zoom), and the key that remembers it (the rest of the key
    kept: the traces a search, a click and a zoom fill)."""
    run_ids = key["run_ids"]
    clock_hz = parse_clock(text)
    window = viewport_from_relayout(relayout, extent(run_ids)) or key_window(key) or extent(run_ids)
    ticks = axis_ticks([run_unit(r) for r in run_ids], [clock_hz] * len(run_ids), window[0], window[1])
    return timeline_patch([], ticks), {**key, "clock_hz": clock_hz}


def window_from_query(value: str | None) -> tuple[float, float] | None:
    """A time window written in the page's URL ("x0,x1", in the axis unit: `view` the zoom, `range` the range dragged
    over), or None: absent, or not two finite numbers in order (a hand-edited URL still opens the page, whole)."""
    parts = str(value or "").split(",")
    if len(parts) != 2:
        return None
    try:
        x0, x1 = float(parts[0]), float(parts[1])
    except ValueError:
        return None
    return (x0, x1) if math.isfinite(x0) and math.isfinite(x1) and x0 < x1 else None


def key_window(key: dict[str, Any]) -> tuple[float, float] | None:
    """The view the page opened on (from its URL), when it was not the whole run."""
    window = key.get("window")
    return (float(window[0]), float(window[1])) if window else None


def selection_box(window: tuple[float, float], lanes: int) -> dict[str, Any]:
    """The range dragged over, drawn as Plotly draws a selection (full height: the timeline selects along x only)."""
    return {"type": "rect", "xref": "x", "yref": "y", "x0": window[0], "x1": window[1], "y0": lanes - 0.5, "y1": -0.5}


def layout(run_id: str = "", clock: str | None = None, view: str | None = None, **query: str) -> html.Div:
    """The timeline of a run; `view` and `range` ("x0,x1" in the axis unit, written to the URL by
    assets/timeline_keys.js as the view is zoomed and a range dragged over) open it on that zoom and range."""
    trace, error = load(run_id)
    if trace is None:
        return page("Timeline", error)
    clock_hz = parse_clock(clock)
    window, picked = window_from_query(view), window_from_query(query.get("range"))
    built = panels([run_id], [run_id], window, clock_hz=clock_hz)
    figure = timeline_figure(built, drag="select")
    hits = timeline_hits.add_panel_hits(figure, built)
    if picked is not None:
        figure["layout"]["selections"] = [selection_box(picked, len(built[0].lanes.lanes))]
    if not len(built[0].lanes):
        return page("Timeline", html.P("This run has nothing to draw: no engine slices, ops, timed transfers or compiles."), dcc.Link("back to the run", href=urls.run(run_id)))
    derived = not trace["engine_slices"].num_rows
    return page(
        f"Timeline of {run_label(run_id, trace)}",
        html.Div([dcc.Link("run", href=urls.run(run_id)), dcc.Link("all runs", href=urls.runs())], className="links"),
        dcc.Store(id=ids.TIMELINE_KEY, data={"run_ids": [run_id], "clock_hz": clock_hz, "match_traces": match_indices(figure),
                                             "flow_traces": flow_indices(figure), "hit_traces": hits,
                                             "window": list(window) if window else None}),
        *clock_box([p.unit for p in built], clock),
        *timeline_tools.controls(ids.TIMELINE_TOOLS),
        html.Div(status_text([p.viewport for p in built], [len(p.lanes) for p in built]), id=ids.TIMELINE_STATUS, className="muted"),
        dcc.Graph(id=ids.TIMELINE_GRAPH, figure=figure, config=graph_config("timeline")),
        html.H3("Selected range"),
        html.Div(timeline_tools.range_tables(run_id, picked, ids.TIMELINE_TOOLS), id=ids.TIMELINE_TOOLS.range),
        html.H3("Clicked"),
        html.Div(html.Div("Click a bar to see its operator, module, shapes, bytes and call site; a memory lane, the memory then.", className="muted"), id=ids.TIMELINE_DETAIL, className="detail"),
        subtitle=(
            f"no engine slices in this run: {len(built[0].lanes):,} ops, timed transfers and compiles drawn by where they ran (host wall time, ns)"
            if derived
            else f"{len(trace['engine_slices']):,} engine slices, unit {trace.run_info.time_unit.value}"
        ),
    )


def register(app: dash.Dash) -> None:
    dash.register_page(__name__, path_template="/run/<run_id>/timeline", order=3, name="Timeline", title="portscope: timeline", layout=layout)

    @app.callback(
        Output(ids.TIMELINE_GRAPH, "figure"),
        Output(ids.TIMELINE_STATUS, "children"),
        Input(ids.TIMELINE_GRAPH, "relayoutData"),
        State(ids.TIMELINE_KEY, "data"),
        State(ids.TIMELINE_TOOLS.match, "data"),
        prevent_initial_call=True,
    )
    def zoom(relayout: dict[str, Any] | None, key: dict[str, Any], match: dict[str, Any] | None) -> tuple[Any, str]:
        return zoom_update(key, relayout, match)

    timeline_tools.register(app, ids.TIMELINE_GRAPH, ids.TIMELINE_TOOLS, slice_view)

    @app.callback(
        Output(ids.TIMELINE_GRAPH, "figure", allow_duplicate=True),
        Output(ids.TIMELINE_KEY, "data"),
        Input(ids.TIMELINE_CLOCK, "value"),
        State(ids.TIMELINE_GRAPH, "relayoutData"),
        State(ids.TIMELINE_KEY, "data"),
        prevent_initial_call=True,
    )
    def clock(text: str | None, relayout: dict[str, Any] | None, key: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        return clock_update(key, text, relayout)

    @app.callback(
        Output(ids.TIMELINE_DETAIL, "children"),
        Output(ids.TIMELINE_GRAPH, "figure", allow_duplicate=True),
        Input(ids.TIMELINE_GRAPH, "clickData"),
        State(ids.TIMELINE_GRAPH, "relayoutData"),
        State(ids.TIMELINE_KEY, "data"),
        prevent_initial_call=True,
    )
    def click(click: dict[str, Any] | None, relayout: dict[str, Any] | None, key: dict[str, Any]) -> tuple[Any, Any]:
        return click_update(key, click, relayout)
