"""Compare page, schedules section: region A's engine schedule against region B's (ingest/schedule_diff.py).

A region's schedule is every engine slice inside it, its nested regions' too: what
the timeline below draws over it. The tables say per engine how busy time, idle
time and time on the critical path moved, and what on the critical path changed;
below them the two schedules are drawn one above the other on one relative time
axis (each region from 0, one scale), their critical paths marked by a dark core,
so a user sees where B got shorter. Zooms are answered on the server as on the
timeline page.
"""

from __future__ import annotations

from typing import Any

import dash
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from portscope.ingest.errors import UsageError
from portscope.ingest.region_tree import descendants
from portscope.ingest.schedule_diff import (
    ScheduleDiff,
    aligned_slices,
    diff_schedules,
    has_schedule,
    region_slice_rows,
    verdict,
)
from portscope.ingest.schema import TimeUnit
from portscope.ingest.slice_depth import nest_slices
from portscope.ingest.slice_search import lanes_of_rows
from portscope.ingest.trace import Trace
from portscope.ingest.viewport import KINDS, Lanes, build_lanes, reduce_viewport, slice_at

from .. import ids
from ..components import LONG_NAME, fmt_int, problem, text_table
from ..context import store
from ..figures import (
    VIEW_PX,
    Panel,
    axis_ticks,
    graph_config,
    match_indices,
    panel_annotations,
    timeline_figure,
    timeline_patch,
    viewport_from_relayout,
)
from ..time_axis import fmt_duration
from . import timeline_hits
from .common import region_label
from .timeline import NO_SLICE, slice_view

CRITICAL_ROWS_DRAWN = 20_000  # the critical path's slices marked per panel (a path is a chain: rarely near this)


def _durations(unit: str) -> tuple[Any, Any, Any]:
    """Cell formatters in the schedules' unit: a duration, a signed change, a percentage."""
    u = TimeUnit(unit)

    def duration(v: Any) -> str:
        return fmt_duration(v, u) if v else "0"

    def signed(v: Any) -> str:
        return "0" if not v else ("+" if v > 0 else "−") + fmt_duration(abs(v), u)

    def pct(v: Any) -> str:
        return "new" if v is None or v != v else f"{v:+.1f} %".replace("-", "−")

    return duration, signed, pct


def tables(diff: ScheduleDiff) -> list[Any]:
    """The three tables of a schedule comparison."""
    duration, signed, pct = _durations(diff.unit)
    engines = [("engine", "Engine", None), ("engine_kind", "Kind", None), ("busy_a", "Busy A", duration),
               ("busy_b", "Busy B", duration), ("delta", "Δ busy", signed), ("percent", "Δ %", pct),
               ("idle_a", "Idle A", duration), ("idle_b", "Idle B", duration), ("critical_a", "On critical path A", duration),
               ("critical_b", "On critical path B", duration), ("slices_a", "Slices A", fmt_int), ("slices_b", "Slices B", fmt_int)]
    critical = [("change", "Change", None), ("engine", "Engine", None), ("name", "Slice", None), ("time_a", "A", duration),
                ("time_b", "B", duration), ("delta", "Δ", signed), ("count_a", "Slices A", fmt_int), ("count_b", "Slices B", fmt_int)]
    idle = [("cause", "Waiting on", None), ("idle_a", "A", duration), ("idle_b", "B", duration), ("delta", "Δ", signed)]
    path = [r for r in diff.critical_table().to_pylist() if r["change"] != "same"]
    for r in path:  # a kernel's name can run to hundreds of characters: cut with an ellipsis, whole on hover
        r["name"] = html.Span(r["name"], title=r["name"], className=LONG_NAME) if r["name"] else r["name"]
    rows = [{**r, "engine": f"{r['engine']} (B: {r['engine_b']})" if r["engine_b"] else r["engine"]}
            for r in diff.engines_table().to_pylist()]  # a paired engine: the only one of its kind each side lacks
    return [
        text_table(rows, engines, table_id=ids.COMPARE_SCHEDULE_ENGINES),
        html.H4(f"Critical path: what changed on it ({len(path)} of {len(diff.critical_path)} parts; top 20, largest change first)"),
        text_table(path[:20], critical, table_id=ids.COMPARE_SCHEDULE_CRITICAL) if path
        else html.P("Nothing on the critical path changed.", className="muted"),
        html.H4("Idle: device engines waiting, by what they waited on"),
        text_table(diff.idle_table().to_pylist(), idle, table_id=ids.COMPARE_SCHEDULE_IDLE),
    ]


def with_nested(trace: Trace, region_id: int) -> Trace:
    """The run with the engine slices of the regions nested in `region_id` counted as its own: the slices the timeline
    below draws over the region (a converted trace puts a step's kernels in the innermost annotation around them, so
    a region's own slices alone would show its streams idle there). Row order is kept: a row is the trace's row."""
    nested = descendants(trace, region_id)
    if len(nested) == 1:
        return trace
    slices = trace["engine_slices"]
    column = slices.column("region_id")
    inside = pc.fill_null(pc.is_in(column, value_set=pa.array(nested, column.type)), False)
    regions = pc.if_else(inside, pa.scalar(region_id, column.type), column)
    tables = {**trace.gather().tables, "engine_slices": slices.set_column(slices.column_names.index("region_id"), "region_id", regions)}
    return Trace(run_info=trace.run_info, tables=tables, path=trace.path)


def schedule_trace(run_id: str, region_id: int) -> Trace:
    """`with_nested` of a stored run (kept per process)."""
    return store().memo(f"schedule-trace:{run_id}:{region_id}", lambda: with_nested(store().trace(run_id), region_id))


def aligned_lanes(run_id: str, region_id: int) -> Lanes:
    """Timeline arrays of one region's schedule, counted from its first slice (kept per process)."""
    return store().memo(f"aligned-lanes:{run_id}:{region_id}",
                        lambda: build_lanes(nest_slices(aligned_slices(schedule_trace(run_id, region_id), region_id))))


def _diff(a: str, region_a: int, b: str, region_b: int) -> ScheduleDiff:
    return store().memo(f"schedule-diff:{a}:{region_a}:{b}:{region_b}",
                        lambda: diff_schedules(schedule_trace(a, region_a), region_a, schedule_trace(b, region_b), region_b))


def _bands(key: dict[str, Any]) -> list[list[tuple[float, float, str]]]:
    return [[(0.0, float(span), label)] for span, label in zip(key["spans"], key["labels"], strict=True)]


def aligned_figure(key: dict[str, Any], window: tuple[float, float] | None = None) -> dict[str, Any]:
    """A's and B's schedules one above the other, each from 0 on one axis, their critical paths marked; the bars'
    hit points last (one trace per panel: a click anywhere on a bar selects it)."""
    x0, x1 = window or (0.0, float(max(key["spans"])))
    panels = []
    for side, run_id, rid, bands in zip("AB", (key["a"], key["b"]), (key["ra"], key["rb"]), _bands(key), strict=True):
        lanes = aligned_lanes(run_id, rid)
        panels.append(Panel(title=side, lanes=lanes, viewport=reduce_viewport(lanes, x0, x1, VIEW_PX), bands=bands,
                            unit=key["unit"]))
    figure = timeline_figure(panels)
    diff = _diff(key["a"], key["ra"], key["b"], key["rb"])
    for index, panel, summary in zip(match_indices(figure), panels, (diff.a, diff.b), strict=True):
        figure["data"][index].update(critical_bars(panel.lanes, summary.critical_rows[:CRITICAL_ROWS_DRAWN]))
        figure["data"][index]["name"] = "critical path"
    timeline_hits.add_panel_hits(figure, panels)
    return figure


def _hit_traces(figure: dict[str, Any]) -> list[int]:
    """The indices of the aligned figure's hit-point traces (its last two)."""
    n = len(figure["data"])
    return [n - 2, n - 1]


def critical_bars(lanes: Lanes, rows: list[int]) -> dict[str, list[float | None]]:
    """x and y of the critical path's slices (slices-table rows) in a panel's lanes: x0, x1, None per bar."""
    lane_of = lanes_of_rows(lanes, rows)
    row = np.asarray(lanes.row)
    position = np.empty(len(row), np.int64)
    position[row] = np.arange(len(row))
    xs: list[float | None] = []
    ys: list[float | None] = []
    for r in rows:
        p = position[r]
        xs += [float(lanes.start[p]), float(lanes.end[p]), None]
        ys += [lane_of[r], lane_of[r], None]
    return {"x": xs, "y": ys}


def section(a: str, b: str, region_a: int | None, region_b: int | None) -> list[Any]:
    """The schedules section for a region pair: nothing unless both regions carry engine slices."""
    if region_a is None or region_b is None:
        return []
    trace_a, trace_b = schedule_trace(a, region_a), schedule_trace(b, region_b)
    if not (has_schedule(trace_a, region_a) and has_schedule(trace_b, region_b)):
        return []
    head = html.H3("Schedules: A against B, engine by engine")
    try:
        diff = _diff(a, region_a, b, region_b)
    except UsageError as exc:
        return [head, problem(str(exc))]
    labels = []
    for trace, rid, summary in ((trace_a, region_a, diff.a), (trace_b, region_b, diff.b)):
        row = next(r for r in trace["regions"].to_pylist() if r["region_id"] == rid)
        labels.append(f"{region_label(row)}: {fmt_duration(summary.total, TimeUnit(diff.unit))}")
    key = {"a": a, "b": b, "ra": region_a, "rb": region_b, "unit": diff.unit, "spans": [diff.a.total, diff.b.total],
           "labels": labels}
    figure = aligned_figure(key)
    return [
        head,
        html.P(verdict(diff), id=ids.COMPARE_SCHEDULE_VERDICT, className="verdict"),
        *tables(diff),
        html.H4("The two schedules aligned: each region from 0, one scale (dark core: on the critical path)"),
        dcc.Store(id=ids.COMPARE_SCHEDULE_KEY, data={**key, "hit_traces": _hit_traces(figure)}),
        dcc.Graph(id=ids.COMPARE_SCHEDULE_TIMELINES, figure=figure, config=graph_config("compare-schedules")),
        html.Div(html.Div("Click a bar for its facts.", className="muted"), id=ids.COMPARE_SCHEDULE_DETAIL, className="detail"),
    ]


def clicked(key: dict[str, Any], click: dict[str, Any] | None, relayout: dict[str, Any] | None) -> Any:
    """The facts of the slice under a click on the aligned timelines (found on the server: the nearest in that lane)."""
    if not click or not click.get("points"):
        raise PreventUpdate
    point = click["points"][0]
    curve = int(point.get("curveNumber", 0))
    panel = timeline_hits.hit_panel(key.get("hit_traces") or [], curve)
    panel = curve // len(KINDS) if panel is None else panel
    if panel > 1:
        raise PreventUpdate  # a critical-path mark: the bar under it answers
    run_id, rid = (key["a"], key["ra"]) if panel == 0 else (key["b"], key["rb"])
    lanes = aligned_lanes(run_id, rid)
    x0, x1 = viewport_from_relayout(relayout, (0.0, float(max(key["spans"])))) or (0.0, float(max(key["spans"])))
    row = slice_at(lanes, int(round(float(point["y"]))), float(point["x"]), 3 * (x1 - x0) / VIEW_PX)
    if row is None:
        return html.Div(NO_SLICE, className="muted")
    trace_row = int(store().memo(f"region-rows:{run_id}:{rid}", lambda: region_slice_rows(schedule_trace(run_id, rid), rid))[row])
    facts = slice_view(run_id, trace_row)
    facts.id = ids.COMPARE_SCHEDULE_SLICE  # the page's other timeline has its own slice facts
    offset = float(lanes.start[int(np.flatnonzero(np.asarray(lanes.row) == row)[0])])
    return [html.H4(f"{'AB'[panel]}: a slice {fmt_duration(offset, TimeUnit(key['unit']))} after the region's start"), facts]


def zoom_update(key: dict[str, Any], relayout: dict[str, Any] | None) -> Any:
    """The bars, ticks and band labels of both panels for a zoom (the critical-path marks stay as drawn)."""
    window = viewport_from_relayout(relayout, (0.0, float(max(key["spans"]))))
    if window is None:
        raise PreventUpdate
    lanes = [aligned_lanes(key["a"], key["ra"]), aligned_lanes(key["b"], key["rb"])]
    viewports = [reduce_viewport(lane, window[0], window[1], VIEW_PX) for lane in lanes]
    ticks = axis_ticks([key["unit"]] * 2, [None, None], *window)
    patch = timeline_patch(viewports, ticks, panel_annotations(_bands(key), ["A", "B"], [window, window]))
    if key.get("hit_traces"):
        timeline_hits.patch_hits(patch, viewports, [len(lane.lanes) for lane in lanes], [[], []], key["hit_traces"])
    return patch


def register(app: dash.Dash) -> None:
    """Callbacks of the section (the compare page calls this from its own register)."""

    @app.callback(
        Output(ids.COMPARE_SCHEDULES, "children"),
        Input(ids.COMPARE_REGION_A, "value"),
        Input(ids.COMPARE_REGION_B, "value"),
        State(ids.COMPARE_KEY, "data"),
    )
    def schedules(region_a: int | None, region_b: int | None, key: dict[str, str]) -> list[Any]:
        return section(key["a"], key["b"], region_a, region_b)

    @app.callback(
        Output(ids.COMPARE_SCHEDULE_TIMELINES, "figure"),
        Input(ids.COMPARE_SCHEDULE_TIMELINES, "relayoutData"),
        State(ids.COMPARE_SCHEDULE_KEY, "data"),
        prevent_initial_call=True,
    )
    def zoom(relayout: dict[str, Any] | None, key: dict[str, Any]) -> Any:
        return zoom_update(key, relayout)

    @app.callback(
        Output(ids.COMPARE_SCHEDULE_DETAIL, "children"),
        Input(ids.COMPARE_SCHEDULE_TIMELINES, "clickData"),
        State(ids.COMPARE_SCHEDULE_TIMELINES, "relayoutData"),
        State(ids.COMPARE_SCHEDULE_KEY, "data"),
        prevent_initial_call=True,
    )
    def click(click: dict[str, Any] | None, relayout: dict[str, Any] | None, key: dict[str, Any]) -> Any:
        return clicked(key, click, relayout)
