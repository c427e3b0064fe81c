"""Compare: two runs (or two regions of one run) side by side: A, B, Δ, ratio; operators added/removed."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, dcc, html

from portscope.ingest.catalog import format_signed_bytes
from portscope.ingest.diff import diff_call_sites, diff_operators, diff_signals, pair_regions

from .. import ids, urls
from ..components import (
    LONG_NAME,
    fmt_bytes,
    fmt_int,
    fmt_ratio,
    fmt_signed,
    page,
    problem,
    text_table,
    url_query_writer,
)
from ..context import store
from ..data.runs import regions_frame
from ..data.tables import numerics_frame
from ..figures import flow_indices, graph_config, match_indices, timeline_figure
from . import (
    compare_ops,
    compare_port,
    compare_prediction,
    compare_schedules,
    memory_sections,
    timeline_hits,
    timeline_tools,
)
from .common import load, region_label, run_label
from .timeline import click_update, panels, slice_view, zoom_update

SIGNAL_COLUMNS = [
    ("signal", "Signal", None),
    ("a_count", "A", fmt_int),
    ("b_count", "B", fmt_int),
    ("delta", "Δ (B − A)", fmt_signed),
    ("ratio", "ratio B/A", fmt_ratio),
    ("a_bytes", "A bytes", fmt_bytes),
    ("b_bytes", "B bytes", fmt_bytes),
    ("delta_bytes", "Δ bytes", format_signed_bytes),
]
OPERATOR_COLUMNS = [
    ("change", "Change", None),
    ("signal", "Signal", None),
    ("operator", "Operator", None),
    ("a_count", "A", fmt_int),
    ("b_count", "B", fmt_int),
    ("delta", "Δ", fmt_signed),
]
SITE_COLUMNS = [("change", "Change", None), ("call_site", "Call site", None), ("a_count", "A", fmt_int), ("b_count", "B", fmt_int), ("delta", "Δ", fmt_signed)]


def region_options(trace: Any) -> list[dict[str, Any]]:
    return [{"label": region_label(r), "value": int(r["region_id"])} for r in regions_frame(trace).to_dict("records")]


def _pick(raw: str | None, options: list[dict[str, Any]], default: int | None) -> int | None:
    values = {o["value"] for o in options}
    if raw is not None and str(raw).isdigit() and int(raw) in values:
        return int(raw)
    return default


def layout(a: str = "", b: str = "", ra: str | None = None, rb: str | None = None, **_query: str) -> html.Div:
    trace_a, error_a = load(a)
    trace_b, error_b = load(b)
    if trace_a is None or trace_b is None:
        return page("Compare", *(e for e in (error_a, error_b) if e is not None))
    default_a, default_b = pair_regions(regions_frame(trace_a), regions_frame(trace_b), same_run=a == b)
    options_a, options_b = region_options(trace_a), region_options(trace_b)
    children: list[Any] = [
        dcc.Store(id=ids.COMPARE_KEY, data={"a": a, "b": b}),
        html.Div(
            [
                html.Span("A:"),
                dcc.Dropdown(id=ids.COMPARE_REGION_A, options=options_a, value=_pick(ra, options_a, default_a), clearable=False),
                html.Span("B:"),
                dcc.Dropdown(id=ids.COMPARE_REGION_B, options=options_b, value=_pick(rb, options_b, default_b), clearable=False),
            ],
            className="compare-bar",
        ),
        html.Div([dcc.Link(text, href=urls.run(r), title=text, className=LONG_NAME)  # a long file name cut, whole on hover
                  for text, r in ((f"A: {run_label(a, trace_a)} ({a})", a), (f"B: {run_label(b, trace_b)} ({b})", b))],
                 className="links"),
        compare_prediction.section(trace_a, trace_b),
        compare_port.section(),
        html.H3("Signals"),
        html.Div(id=ids.COMPARE_SIGNALS),
        html.H3("Operators added, removed, increased, decreased"),
        html.Div(id=ids.COMPARE_OPERATORS),
        html.H3("Call sites"),
        html.Div(id=ids.COMPARE_SITES),
        compare_ops.section(),
        html.Div(id=ids.COMPARE_MEMORY),
        html.Div(id=ids.COMPARE_SCHEDULES),  # filled by compare_schedules when both regions carry schedules
        html.Div(numerics_side_by_side(trace_a, trace_b), id=ids.COMPARE_NUMERICS),
    ]
    if a != b:
        built = panels([a, b], ["A", "B"])
        figure = timeline_figure(built, drag="select")
        hits = timeline_hits.add_panel_hits(figure, built)  # a click anywhere on a bar selects it
        children += [
            html.H3("Timelines (zoom one, both follow)"),
            dcc.Store(id=ids.TIMELINE_KEY, data={"run_ids": [a, b], "titles": ["A", "B"], "flow_traces": flow_indices(figure),
                                                 "match_traces": match_indices(figure), "hit_traces": hits}),
            *timeline_tools.controls(ids.COMPARE_TOOLS),
            html.Div(id=ids.TIMELINE_STATUS, className="muted"),
            dcc.Graph(id=ids.COMPARE_TIMELINES, figure=figure, config=graph_config("compare")),
            html.H3("Selected range"),
            html.Div(html.Div("Drag over the timelines to sum up a time range in A and in B here.", className="muted"),
                     id=ids.COMPARE_TOOLS.range),
            html.Div(id=ids.TIMELINE_DETAIL, className="detail"),
        ]
    name_a, name_b = run_label(a, trace_a), run_label(b, trace_b)
    title = f"Compare {name_a} with {name_b}" if a != b else f"Compare regions of {name_a}"
    return page(title, *children, subtitle="Δ = B − A; ratio = B / A; the counts are those of `portscope report` on each file.")


def numerics_side_by_side(trace_a: Any, trace_b: Any) -> list[Any]:
    na, nb = numerics_frame(trace_a), numerics_frame(trace_b)
    if not len(na) and not len(nb):
        return []
    merged = na.merge(nb, on=["comparison", "metric"], how="outer", suffixes=("_a", "_b"))

    for side in ("a", "b"):  # a row without a figure (the verdict) shows its text
        merged[f"shown_{side}"] = [
            f"{v:.4g}" if v is not None and v == v else ("" if t is None or t != t else str(t))
            for v, t in zip(merged[f"value_{side}"], merged[f"text_{side}"], strict=True)
        ]
    columns = [("comparison", "Comparison", None), ("metric", "Metric", None), ("shown_a", "A", None), ("shown_b", "B", None)]
    return [html.H3("Numerics"), text_table(merged, columns)]


def comparison_tables(a: str, b: str, region_a: int | None, region_b: int | None) -> tuple[Any, Any, Any]:
    if region_a is None or region_b is None:
        message = problem("pick a region on each side")
        return message, "", ""
    report_a = store().report(a, region_a)
    report_b = store().report(b, region_b)
    signals = diff_signals(report_a, report_b)
    operators = diff_operators(report_a, report_b)
    sites = diff_call_sites(report_a, report_b).head(30)
    changed = operators[operators["change"] != "same"]
    ops_view = text_table(changed, OPERATOR_COLUMNS, table_id="compare-operators-table") if len(changed) else html.P("No operator changed.", className="muted")
    return (
        text_table(signals, SIGNAL_COLUMNS, table_id="compare-signals-table"),
        ops_view,
        text_table(sites, SITE_COLUMNS) if len(sites) else html.P("No call sites.", className="muted"),
    )


def register(app: dash.Dash) -> None:
    dash.register_page(__name__, path_template="/compare/<a>/<b>", order=4, name="Compare", title="portscope: compare", layout=layout)

    @app.callback(
        Output(ids.COMPARE_SIGNALS, "children"),
        Output(ids.COMPARE_OPERATORS, "children"),
        Output(ids.COMPARE_SITES, "children"),
        Input(ids.COMPARE_REGION_A, "value"),
        Input(ids.COMPARE_REGION_B, "value"),
        State(ids.COMPARE_KEY, "data"),
    )
    def compare(region_a: int | None, region_b: int | None, key: dict[str, str]) -> tuple[Any, Any, Any]:
        return comparison_tables(key["a"], key["b"], region_a, region_b)

    @app.callback(
        Output(ids.COMPARE_TIMELINES, "figure"),
        Output(ids.TIMELINE_STATUS, "children", allow_duplicate=True),
        Input(ids.COMPARE_TIMELINES, "relayoutData"),
        State(ids.TIMELINE_KEY, "data"),
        State(ids.COMPARE_TOOLS.match, "data"),
        prevent_initial_call=True,
    )
    def zoom(relayout: dict[str, Any] | None, key: dict[str, Any], match: dict[str, Any] | None) -> tuple[Any, str]:
        return zoom_update(key, relayout, match)

    # a region picked is written into the URL (?ra=, ?rb=; replacing its history entry): a reload or a shared link
    # brings back the pair on screen
    app.clientside_callback(url_query_writer("ra", "rb"), Input(ids.COMPARE_REGION_A, "value"), Input(ids.COMPARE_REGION_B, "value"),
                            prevent_initial_call=True)

    timeline_tools.register(app, ids.COMPARE_TIMELINES, ids.COMPARE_TOOLS, slice_view)
    compare_schedules.register(app)
    compare_ops.register(app)
    compare_port.register(app)
    compare_prediction.register(app)
    memory_sections.register(app)

    @app.callback(
        Output(ids.TIMELINE_DETAIL, "children", allow_duplicate=True),
        Output(ids.COMPARE_TIMELINES, "figure", allow_duplicate=True),
        Input(ids.COMPARE_TIMELINES, "clickData"),
        State(ids.COMPARE_TIMELINES, "relayoutData"),
        State(ids.TIMELINE_KEY, "data"),
        prevent_initial_call=True,
    )
    def click(click: dict[str, Any] | None, relayout: dict[str, Any] | None, key: dict[str, Any]) -> tuple[Any, Any]:
        return click_update(key, click, relayout)  # the slice's facts and its flows, in its panel
