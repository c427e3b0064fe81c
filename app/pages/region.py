"""Run / region: the region's report as tables, operators with why and where, breakdown bars, all ops."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, dcc, html

from portscope.ingest.diff import diff_signals
from portscope.ingest.summary import region_ids

from .. import ids, urls
from ..components import (
    fmt_bytes,
    fmt_int,
    fmt_ratio,
    fmt_signed,
    grid,
    grid_height,
    page,
    problem,
    status_badge,
    text_table,
)
from ..context import store
from ..data.tables import OPS_COLUMNS, breakdown, operator_detail, region_ops_page
from ..figures import breakdown_figure
from . import memory_sections, region_device, region_lines
from .common import load, region_rows, time_text

SIGNAL_COLUMNS = [
    {"field": "signal", "headerName": "Signal", "flex": 2},
    {"field": "count", "headerName": "Count", "type": "numericColumn", "flex": 1},
    {"field": "bytes_text", "headerName": "Bytes", "type": "numericColumn", "flex": 1},
    {"field": "note", "headerName": "Note", "flex": 4},
]
OPERATOR_COLUMNS = [
    {"field": "signal", "headerName": "Signal", "flex": 2},
    {"field": "operator", "headerName": "Operator", "flex": 2},
    {"field": "count", "headerName": "Count", "type": "numericColumn", "flex": 1, "minWidth": 100},
    {"field": "bytes_text", "headerName": "Bytes", "type": "numericColumn", "flex": 1, "minWidth": 100},
    {"field": "why", "headerName": "Why", "flex": 2},
    {"field": "site", "headerName": "Top line", "flex": 4},
]


def signal_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**s, "bytes_text": fmt_bytes(s["bytes"])} for s in report["signals"]]


def operator_rows(report: dict[str, Any], signal: str | None = None) -> list[dict[str, Any]]:
    """Operators of a region report (of one signal, or all), with their why-breakdown and top call site."""
    rows = []
    for op in report["operators"]:
        if signal and op["signal"] != signal:
            continue
        rows.append(
            {
                "signal": op["signal"],
                "operator": op["operator"],
                "count": op["count"],
                "bytes_text": fmt_bytes(op["bytes"]),
                "why": ", ".join(f"{k} {v}" for k, v in op["reasons"].items()),
                "site": op["lines"][0]["line"].rsplit("/", 1)[-1] if op.get("lines") else next(iter(op["call_sites"]), ""),
            }
        )
    return rows


def ops_text(report: dict[str, Any]) -> str:
    """A region's operator count: the program's, and apart those the compiler ran while compiling."""
    return f"{report['ops']:,} ops" + (f" (+{report['compiler_ops']:,} run by the compiler)" if report["compiler_ops"] else "")


def counterparts(run_id: str, rows: list[dict[str, Any]], region_id: int) -> list[dict[str, Any]]:
    """Regions to show side by side: same name, other phase or mode (eager against compiled, cold against warm), the
    first of each; a name repeated in one phase and mode (a rank's steps, a collective per step) is no counterpart."""
    me = next(r for r in rows if r["region_id"] == region_id)
    seen = {(me["phase"], me["mode"])}
    out = []
    for r in rows:
        if r["name"] == me["name"] and (r["phase"], r["mode"]) not in seen:
            seen.add((r["phase"], r["mode"]))
            out.append(r)
    return out


def side_by_side(run_id: str, region_id: int, other: dict[str, Any], me_label: str) -> html.Div:
    frame = diff_signals(store().report(run_id, region_id), store().report(run_id, other["region_id"]))
    columns = [("signal", "Signal", None), ("a_count", me_label, fmt_int), ("b_count", other["label"], fmt_int), ("delta", "Δ", fmt_signed), ("ratio", "ratio", fmt_ratio)]
    return html.Div(
        [
            html.H3(["Side by side with ", dcc.Link(other["label"], href=urls.region(run_id, other["name"], other["nth"]))]),
            text_table(frame, columns, class_name="table side-by-side"),
            dcc.Link("open the full comparison", href=urls.compare(run_id, run_id, region_id, other["region_id"])),
        ]
    )


def layout(run_id: str = "", region: str = "", n: str = "0", **_query: str) -> html.Div:
    trace, error = load(run_id)
    name = urls.unquote_segment(region)
    if trace is None:
        return page(f"Region {name}", error)
    matches = region_ids(trace, name)
    nth = int(n) if str(n).isdigit() else 0
    if nth >= len(matches):
        return page(f"Region {name}", problem(f"run {run_id} has no region named {name!r}" + (f" (#{nth})" if nth else "")), dcc.Link("back to the run", href=urls.run(run_id)))
    region_id = matches[nth]
    report = store().report(run_id, region_id)
    rows = region_rows(run_id, trace)
    me = next(r for r in rows if r["region_id"] == region_id)
    verdict = report["verdict"]
    subtitle = html.Div(
        [
            status_badge(verdict["status"], me["seen"]),
            html.Span(f"  {time_text(me, trace)} · {ops_text(report)} · mode {report['mode']} · phase {report['phase']} · device {report['device'] or '?'} · d2h {fmt_bytes(report['d2h_bytes'])}"),
            html.Ul([html.Li(reason) for reason in verdict["reasons"]], className="verdict-reasons"),
        ]
    )
    signals = signal_rows(report)
    children: list[Any] = [
        dcc.Store(id=ids.REGION_KEY, data={"run_id": run_id, "region_id": region_id}),
        html.Div([dcc.Link("run", href=urls.run(run_id)), dcc.Link("timeline", href=urls.timeline(run_id))], className="links"),
        html.H3("Signals"),
        grid(ids.SIGNAL_GRID, signals, SIGNAL_COLUMNS, height=grid_height(len(signals))) if signals else html.P("No signals: everything ran where it was asked to."),
    ]
    children += region_device.section(run_id, region_id)
    children += memory_sections.region_section(run_id, region_id)
    children += region_lines.line_section(run_id, region_id)
    if signals:
        operators = operator_rows(report)
        children += [
            html.H3("Operators (click a signal above to filter, an operator for its call sites and stack)"),
            html.Div(
                [
                    html.Div(grid(ids.OPERATOR_GRID, operators, OPERATOR_COLUMNS, height=grid_height(len(operators), most=360)), className="col", style={"flex": "3"}),
                    html.Div(html.Div("Click an operator.", className="muted"), id=ids.OPERATOR_DETAIL, className="col detail"),
                ],
                className="row",
            ),
            html.H3("Where the signals come from"),
            dcc.RadioItems(id=ids.BREAKDOWN_BY, options=["operator", "module", "source line"], value="operator", inline=True),
            html.Div(
                [html.Div(dcc.Graph(id=ids.breakdown_graph(m), config={"displayModeBar": False}), className="col") for m in ("count", "bytes")],
                className="row",
            ),
        ]
    for other in counterparts(run_id, rows, region_id):
        children.append(side_by_side(run_id, region_id, other, me["label"]))
    children += [
        html.H3(f"All {report['ops'] + report['compiler_ops']:,} ops (paged from the server"
                + (f"; {report['compiler_ops']:,} of them placed compiler: the compiler ran them while compiling)" if report["compiler_ops"] else ")")),
        grid(
            ids.OPS_GRID,
            [],
            [{"field": c, "headerName": c, "filter": False} for c in OPS_COLUMNS],
            height=360,
            rowModelType="infinite",
        ),
    ]
    return page(f"Region {me['label']}", *children, subtitle=subtitle)


def detail_panel(detail: dict[str, Any]) -> list[Any]:
    def listing(title: str, counts: dict[str, int]) -> list[Any]:
        return [html.B(title), html.Ul([html.Li(f"{k} ({v}x)") for k, v in counts.items()])] if counts else []

    return [
        html.B(f"{detail['operator']} · {detail['signal']}"),
        html.Div(f"{detail['count']}x, {fmt_bytes(detail['bytes'])}"),
        *listing("why", detail["reasons"]),
        *listing("call sites", detail["call_sites"]),
        *listing("modules", detail["modules"]),
        *([html.B("stack (innermost first)"), html.Pre("\n".join(detail["stack"]))] if detail["stack"] else []),
    ]


def register(app: dash.Dash) -> None:
    dash.register_page(__name__, path_template="/run/<run_id>/region/<region>", order=2, name="Region", title="portscope: region", layout=layout)
    region_lines.register(app)

    @app.callback(Output(ids.OPERATOR_GRID, "rowData"), Input(ids.SIGNAL_GRID, "selectedRows"), State(ids.REGION_KEY, "data"), prevent_initial_call=True)
    def filter_operators(selected: list[dict[str, Any]] | None, key: dict[str, Any]) -> list[dict[str, Any]]:
        signal = selected[0]["signal"] if selected else None
        return operator_rows(store().report(key["run_id"], key["region_id"]), signal)

    @app.callback(Output(ids.OPERATOR_DETAIL, "children"), Input(ids.OPERATOR_GRID, "selectedRows"), State(ids.REGION_KEY, "data"), prevent_initial_call=True)
    def show_operator(selected: list[dict[str, Any]] | None, key: dict[str, Any]) -> Any:
        if not selected:
            return html.Div("Click an operator.", className="muted")
        row = selected[0]
        detail = operator_detail(store().trace(key["run_id"]), key["region_id"], row["signal"], row["operator"])
        return detail_panel(detail)

    @app.callback(
        Output(ids.BREAKDOWN_GRAPH_ALL, "figure"),
        Input(ids.BREAKDOWN_BY, "value"),
        State(ids.REGION_KEY, "data"),
    )
    def show_breakdown(by: str, key: dict[str, Any]) -> list[dict[str, Any]]:
        frame = breakdown(store().trace(key["run_id"]), key["region_id"], by=by)
        return [breakdown_figure(frame.sort_values(m, ascending=False).head(15), by=by, metric=m) for m in ("count", "bytes")]

    @app.callback(Output(ids.OPS_GRID, "getRowsResponse"), Input(ids.OPS_GRID, "getRowsRequest"), State(ids.REGION_KEY, "data"), prevent_initial_call=True)
    def ops_page(request: dict[str, Any] | None, key: dict[str, Any]) -> dict[str, Any]:
        if not request:
            return dash.no_update
        run_store = store()
        rows, total = region_ops_page(
            run_store.trace(key["run_id"]), key["region_id"], int(request["startRow"]), int(request["endRow"]),
            request.get("sortModel"), remember=lambda k, make: run_store.memo(f"{key['run_id']}:{k}", make))
        return {"rowData": rows, "rowCount": total}
