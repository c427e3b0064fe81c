"""The region page's "by source line" table: which model line made which signals; click a line for its
operators and full stacks. Data from portscope.ingest.lines."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, html

from portscope.ingest.lines import LineDetail, LineTotal, line_detail, line_table

from .. import ids
from ..components import fmt_bytes, grid, grid_height
from ..context import store

LINE_COLUMNS = [
    {"field": "where", "headerName": "Line", "flex": 4, "tooltipField": "line"},
    {"field": "source", "headerName": "Source", "flex": 5, "tooltipField": "source", "cellClass": "code"},
    {"field": "count", "headerName": "Signals", "type": "numericColumn", "flex": 1, "minWidth": 100},
    {"field": "bytes", "headerName": "Bytes", "type": "numericColumn", "flex": 1, "minWidth": 100,
     "valueFormatter": {"function": "formatBytes(params.value)"}},  # assets/grid_format.js
    {"field": "time_us", "headerName": "Time µs", "type": "numericColumn", "flex": 1, "minWidth": 100},
    {"field": "what", "headerName": "What", "flex": 3, "tooltipField": "what"},
    {"field": "modules", "headerName": "Modules", "flex": 3, "tooltipField": "modules"},
]


def _counts(values: dict[str, int], most: int = 3) -> str:
    shown = ", ".join(f"{k} {n}" for k, n in list(values.items())[:most])
    return shown + (f", +{len(values) - most} more" if len(values) > most else "")


def line_rows(lines: list[LineTotal]) -> list[dict[str, Any]]:
    """Grid rows of a region's lines (costliest first, as ingest.lines.line_table sorts them)."""
    return [
        {
            "line": t.line,
            "where": t.line.rsplit("/", 1)[-1],  # file name, line and function; the full path in the tooltip
            "source": t.source or "",
            "count": t.count,
            "bytes": t.bytes,
            "time_us": round(t.time_ns / 1e3, 1),
            "what": _counts({op.removeprefix("aten::"): n for op, n in t.operators.items()}),
            "modules": _counts(t.modules),
        }
        for t in lines
    ]


def line_section(run_id: str, region_id: int) -> list[Any]:
    """The heading, grid and detail panel; nothing when no signal of the region has a call site."""
    lines = store().cached(f"lines:{run_id}:{int(region_id)}",
                           lambda: line_rows(line_table(store().trace(run_id), int(region_id))))
    if not lines:
        return []
    return [
        html.H3("By source line (costliest first; click a line for its operators and stacks)"),
        grid(ids.LINE_GRID, lines, LINE_COLUMNS, height=grid_height(len(lines), most=420)),
        html.Div(html.Div("Click a line.", className="muted"), id=ids.LINE_DETAIL, className="detail"),
    ]


def line_panel(detail: LineDetail) -> list[Any]:
    """A line's source text, its (signal, operator) counts and its most used full stacks."""
    t = detail.line
    out: list[Any] = [html.B(t.line)]
    if t.source:
        out.append(html.Pre(t.source, className="source-line"))
    out.append(html.Div(f"{t.count} signals" + (f", {fmt_bytes(t.bytes)}" if t.bytes else "") + f", {t.time_ns / 1e3:.1f} µs"))
    out += [html.B("operators"), html.Ul([html.Li(f"{o['operator']} · {o['signal']} ({o['count']}x"
                                                  + (f", {fmt_bytes(o['bytes'])})" if o["bytes"] else ")"))
                                          for o in detail.operators])]
    if t.modules:
        out += [html.B("modules"), html.Ul([html.Li(f"{m} ({n}x)") for m, n in t.modules.items()])]
    if t.callers:
        out += [html.B("called from"), html.Ul([html.Li(f"{c} ({n}x)") for c, n in t.callers.items()])]
    for n, frames in detail.stacks:
        out += [html.B(f"stack of {n} signals (innermost first)"), html.Pre("\n".join(frames))]
    return out


def register(app: dash.Dash) -> None:
    @app.callback(Output(ids.LINE_DETAIL, "children"), Input(ids.LINE_GRID, "selectedRows"), State(ids.REGION_KEY, "data"),
                  prevent_initial_call=True)
    def show_line(selected: list[dict[str, Any]] | None, key: dict[str, Any]) -> Any:
        if not selected:
            return html.Div("Click a line.", className="muted")
        detail = line_detail(store().trace(key["run_id"]), key["region_id"], selected[0]["line"])
        return line_panel(detail) if detail is not None else html.Div("No such line in this region.", className="muted")
