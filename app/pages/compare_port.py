"""Compare page, port diff section: operators of A and B aligned by what they compute (ingest/port_diff.py),
what got slower first, with device time per category as bars; clicking an operator highlights its device
work on both timelines."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, Patch, State, dcc, html

from portscope.ingest.op_device import OpCalls, device_rows, op_calls
from portscope.ingest.port_diff import PortDiff, port_diff_of, row_op_ids
from portscope.ingest.slice_search import SliceMatches, rows_as_matches

from .. import ids
from ..components import grid, grid_height, problem
from ..context import store
from ..figures import category_figure, viewport_from_relayout
from . import timeline_tools
from .timeline_runs import extent

COLUMNS = [
    {"field": "operator", "headerName": "Operator (both sides)", "flex": 4, "minWidth": 220, "tooltipField": "operator"},
    {"field": "category", "headerName": "Category", "width": 125},
    {"field": "a_calls", "headerName": "A calls", "type": "numericColumn", "width": 100},
    {"field": "b_calls", "headerName": "B calls", "type": "numericColumn", "width": 100},
    {"field": "a_us", "headerName": "A device µs", "type": "numericColumn", "width": 125},
    {"field": "b_us", "headerName": "B device µs", "type": "numericColumn", "width": 125},
    {"field": "delta_us", "headerName": "Δ µs", "type": "numericColumn", "width": 115, "sort": "desc"},
    {"field": "ratio", "headerName": "B/A", "type": "numericColumn", "width": 90},
    {"field": "own", "headerName": "Each side's own operators", "flex": 3, "minWidth": 200, "tooltipField": "own"},
]


def section() -> html.Div:
    """The section's place on the page; the callback fills it for the chosen regions."""
    return html.Div([
        html.H3("Device time by operator, aligned by what it computes"),
        html.Div("Each operator's own device time in A and B, what got slower first. An operator one side has and the "
                 "other does not (cudnn vs miopen convolution, flash vs efficient attention) counts in the lowest operator "
                 "around it that both sides have, named in the last column. Click an operator to highlight its device work "
                 "on both timelines (two runs).", className="muted"),
        html.Div(id=ids.COMPARE_PORT),
        html.Div(id=ids.COMPARE_PORT_STATUS, className="muted"),
    ])  # fmt: skip


def calls_of(run_id: str, region_id: int) -> OpCalls:
    """A region's operator calls and device work (the program's: not those the compiler ran while compiling), read once
    for its diffs and its highlights."""
    return store().memo(f"op-calls:{run_id}:{int(region_id)}",
                        lambda: op_calls(store().trace(run_id), [int(region_id)]))


def diff_of(a: str, region_a: int, b: str, region_b: int) -> PortDiff:
    return store().memo(f"port-diff:{a}:{int(region_a)}:{b}:{int(region_b)}",
                        lambda: port_diff_of(calls_of(a, region_a), calls_of(b, region_b)))


def _round(v: Any) -> float | None:
    return None if v is None or v != v else round(float(v), 2)


def grid_rows(diff: PortDiff) -> list[dict[str, Any]]:
    """Rows with device time on either side, as the grid shows them (µs)."""
    rows = diff.ops[(diff.ops["a_device_self_ns"] > 0) | (diff.ops["b_device_self_ns"] > 0)]
    return [{"operator": r.operator, "category": r.category, "a_calls": int(r.a_calls), "b_calls": int(r.b_calls),
             "a_us": round(r.a_device_self_ns / 1e3, 3), "b_us": round(r.b_device_self_ns / 1e3, 3),
             "delta_us": round(r.delta_ns / 1e3, 3), "ratio": _round(r.ratio),
             "own": "; ".join(p for p in (f"A: {', '.join(r.a_ops)}" if r.a_ops else "", f"B: {', '.join(r.b_ops)}" if r.b_ops else "") if p)}
            for r in rows.itertuples()]  # fmt: skip


def view(diff: PortDiff, *, timelines: bool) -> list[Any]:
    """The table and the category bars, or a note when neither side has device work. With `timelines` (two runs
    drawn below), a click on a row highlights its device work there."""
    rows = grid_rows(diff)
    if not rows:
        return [html.P("Neither region has device work that an operator launched.", className="muted")]
    notes = [html.P(f"{side}: {ns / 1e3:,.1f} µs of device work launched outside any operator (in the categories only).", className="muted")
             for side, ns in zip("AB", diff.unattributed, strict=True) if ns]  # fmt: skip
    bars = dcc.Graph(id=ids.COMPARE_PORT_CATEGORIES, config={"displayModeBar": False},
                     figure=category_figure(diff.categories, [("A", "a_device_ns"), ("B", "b_device_ns")]))  # fmt: skip
    table = grid(ids.COMPARE_PORT_TABLE if timelines else ids.COMPARE_PORT_TABLE_ALONE, rows, COLUMNS, height=grid_height(len(rows), most=460))
    return [*notes, table, html.Div(bars, style={"maxWidth": "760px"})]


def operator_matches(run_ids: list[str], picked: dict[str, Any]) -> list[SliceMatches | None]:
    """The device work of the port diff's row `picked["operator"]` in each run (regions `picked["regions"]`),
    as highlights of each run's timeline."""
    (a, b), (region_a, region_b), operator = run_ids, picked["regions"], picked["operator"]

    def make() -> list[SliceMatches | None]:
        trace_a, trace_b = store().trace(a), store().trace(b)
        calls_a, calls_b = calls_of(a, region_a), calls_of(b, region_b)
        found = [device_rows(trace_a, row_op_ids(calls_a, calls_b, operator)), device_rows(trace_b, row_op_ids(calls_b, calls_a, operator))]
        return [rows_as_matches(rows, store().lanes(run_id)) for run_id, rows in zip(run_ids, found, strict=True)]

    return store().memo(f"port-rows:{a}:{int(region_a)}:{b}:{int(region_b)}:{operator}", make)


def register(app: dash.Dash) -> None:
    @app.callback(
        Output(ids.COMPARE_PORT, "children"),
        Input(ids.COMPARE_REGION_A, "value"),
        Input(ids.COMPARE_REGION_B, "value"),
        State(ids.COMPARE_KEY, "data"),
    )
    def show(region_a: int | None, region_b: int | None, key: dict[str, str]) -> Any:
        if region_a is None or region_b is None:
            return problem("pick a region on each side")
        return view(diff_of(key["a"], region_a, key["b"], region_b), timelines=key["a"] != key["b"])

    @app.callback(
        Output(ids.COMPARE_TIMELINES, "figure", allow_duplicate=True),
        Output(ids.COMPARE_TOOLS.match, "data", allow_duplicate=True),
        Output(ids.COMPARE_PORT_STATUS, "children"),
        Input(ids.COMPARE_PORT_TABLE, "selectedRows"),
        State(ids.COMPARE_REGION_A, "value"),
        State(ids.COMPARE_REGION_B, "value"),
        State(ids.COMPARE_TIMELINES, "relayoutData"),
        State(ids.TIMELINE_KEY, "data"),
        prevent_initial_call=True,
    )
    def highlight(selected: list[dict[str, Any]] | None, region_a: int, region_b: int, relayout: dict[str, Any] | None,
                  key: dict[str, Any] | None) -> tuple[Any, Any, str]:
        if not selected or not key or len(key.get("run_ids", [])) != 2:
            return dash.no_update, dash.no_update, ""
        picked = {"operator": selected[0]["operator"], "regions": [int(region_a), int(region_b)]}
        found = operator_matches(key["run_ids"], picked)
        window = viewport_from_relayout(relayout, extent(key["run_ids"])) or extent(key["run_ids"])
        patch = Patch()
        timeline_tools.add_highlights(patch, found, window, key.get("match_traces") or [])
        counts = [len(f) if f is not None else 0 for f in found]
        status = f"{picked['operator']}: {counts[0]:,} device slices of A and {counts[1]:,} of B highlighted on the timelines."
        return patch, {"text": "", "index": -1, "operator": picked}, status


__all__ = ["COLUMNS", "grid_rows", "operator_matches", "register", "section", "view"]
