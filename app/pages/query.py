"""Query: SQL over the runs ticked (the views of ingest/sql.py), the answer in a grid, downloadable as CSV.

Read-only and bounded (`Limits.sandbox`): one SELECT, over a fresh DuckDB connection that holds only the ticked
runs' tables, with file access, extensions and the network off and its configuration locked; a row, byte, memory
and time limit (a runaway query is interrupted; other requests go on being served).
"""

from __future__ import annotations

from typing import Any

import dash
import pyarrow as pa
from dash import Input, Output, State, dcc, html

from portscope.ingest.errors import PortscopeError
from portscope.ingest.sql import RUN, VIEWS, Limits, Run, connect, run_query, views_in

from .. import ids
from ..components import grid, page, problem, url_query_writer
from ..context import store
from ..shell import session_entries
from .common import run_label

EXAMPLE = ("SELECT run, operator, count(*) AS kernels, round(sum(dur) / 1e3, 1) AS device_us\n"
           "FROM kernels\nGROUP BY ALL\nORDER BY device_us DESC\nLIMIT 20")


def layout(runs: str = "", sql: str = "", **_query: str) -> html.Div:
    """`/query?runs=ID,ID&sql=...`: those runs ticked and the query run as the page opens (a shareable URL)."""
    ticked = [r for r in runs.split(",") if r]
    return page(
        "Query",
        html.Div("Runs", className="muted"),
        dcc.Checklist(id=ids.QUERY_RUNS, options=[], value=ticked, className="query-runs"),
        dcc.Textarea(id=ids.QUERY_SQL, value=sql or EXAMPLE, spellCheck=False, className="query-sql",
                     style={"width": "100%", "height": "140px", "fontFamily": "ui-monospace, monospace"}),
        html.Div(id=ids.QUERY_ERROR),
        html.Div([html.Button("Run", id=ids.QUERY_RUN), html.Button("Download CSV", id=ids.QUERY_CSV),
                  html.Span(id=ids.QUERY_STATUS, className="muted")], className="query-bar"),
        grid(ids.QUERY_GRID, [], [], height=420, csvExportParams={"fileName": "query.csv"}),
        html.Details([html.Summary("Views and columns"), html.Pre(_schema(), className="query-schema")]),
        subtitle="SQL (DuckDB) over the runs you tick: every view has a run column. Read-only; at most "
                 f"{Limits.sandbox().rows:,} rows, {Limits.sandbox().seconds:g} s. Examples: docs/sql.md.",
    )


def _schema() -> str:
    return "\n".join(f"{v.name}: {', '.join(c.name for c in (RUN, *v.columns))}" for v in VIEWS.values())


def run_options(session_runs: Any) -> list[dict[str, str]]:
    """A checkbox per listed run and per run this browser uploaded, labelled by its file."""
    s = store()
    listed, _ = s.listed()
    options = {run_id: path.name for run_id, path in listed}
    for run_id, name in session_entries(session_runs):
        if run_id not in options and s.exists(run_id):
            options[run_id] = name or run_id
    return [{"label": f"{name} ({run_id})", "value": run_id} for run_id, name in options.items()]


def _runs(run_ids: list[str]) -> list[Run]:
    """The ticked runs, named as the pages name them (by run id where two share a name)."""
    traces = [(run_id, store().trace(run_id)) for run_id in dict.fromkeys(run_ids)]
    labels = [run_label(run_id, trace) for run_id, trace in traces]
    return [Run(label if labels.count(label) == 1 else run_id, trace, file=store().path(run_id).name)  # no server paths
            for label, (run_id, trace) in zip(labels, traces, strict=True)]


def _cell_values(column: pa.ChunkedArray) -> list[Any]:
    """A column as JSON-ready values: DuckDB's DECIMAL sums as numbers, dates and anything nested as text."""
    kind = column.type
    if pa.types.is_decimal(kind):
        return [None if v is None else (int(v) if v == v.to_integral_value() else float(v)) for v in column.to_pylist()]
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind) or pa.types.is_string(kind):
        return column.to_pylist()
    return [None if v is None else str(v) for v in column.to_pylist()]


def column_def(field: str, name: str, kind: pa.DataType) -> dict[str, Any]:
    """A grid column of a query's answer. Its data type is said, not inferred, and is part of its id: the grid keeps a
    column's type while its id stays (even when the new definition says another), so a text column where the last
    query had a number would read "Invalid Number". The header wraps, and names the column whole on hover."""
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
    shown = "number" if numeric else "boolean" if pa.types.is_boolean(kind) else "text"  # as _cell_values sends them
    return {"field": field, "colId": f"{field}-{shown}", "cellDataType": shown, "headerName": name, "headerTooltip": name,
            "tooltipField": field, "flex": 1, "minWidth": 110, "wrapHeaderText": True, "autoHeaderHeight": True,
            **({"type": "numericColumn"} if numeric else {})}


def answer(run_ids: list[str], sql: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any, str]:
    """(column defs, rows, the error under the box, the status line) of a query over the ticked runs."""
    if not run_ids:
        return [], [], problem("Tick at least one run."), ""
    if not (sql or "").strip():
        return [], [], problem("Type a query."), ""
    limits = Limits.sandbox()
    try:
        con = connect(_runs(run_ids), limits=limits, views=views_in(sql))
        try:
            result = run_query(con, sql, limits=limits)
        finally:
            con.close()
    except PortscopeError as exc:  # DuckDB's message, a limit, or a run that cannot be opened
        return [], [], problem(str(exc)), ""
    table = result.table
    fields = [f"c{i}" for i in range(table.num_columns)]  # names may repeat or hold dots: the grid keys by position
    columns = [column_def(f, name, t) for f, name, t in zip(fields, table.column_names, table.schema.types, strict=True)]
    values = [_cell_values(table.column(i)) for i in range(table.num_columns)]
    rows = [dict(zip(fields, cells, strict=True)) for cells in zip(*values, strict=True)] if values else []
    status = f"{table.num_rows:,} rows in {result.seconds * 1e3:,.0f} ms"
    if result.truncated:
        status += f": the first {table.num_rows:,} only (a query here returns at most {limits.rows:,} rows, {limits.result_bytes >> 20} MB)"
    return columns, rows, None, status


def register(app: dash.Dash) -> None:
    dash.register_page(__name__, path="/query", order=5, name="Query", title="portscope: query", layout=layout)

    @app.callback(Output(ids.QUERY_RUNS, "options"), Input(ids.SESSION_RUNS, "data"))
    def show_runs(session_runs: Any) -> list[dict[str, str]]:
        return run_options(session_runs)

    @app.callback(
        Output(ids.QUERY_GRID, "columnDefs"),
        Output(ids.QUERY_GRID, "rowData"),
        Output(ids.QUERY_ERROR, "children"),
        Output(ids.QUERY_STATUS, "children"),
        Input(ids.QUERY_RUN, "n_clicks"),
        State(ids.QUERY_RUNS, "value"),
        State(ids.QUERY_SQL, "value"),
    )
    def run(clicks: int | None, run_ids: list[str] | None, sql: str | None) -> tuple[Any, ...]:
        if not clicks and not run_ids:  # the page opened with no run ticked: nothing to say yet
            return [], [], None, ""
        return answer(list(run_ids or []), sql or "")

    # Run writes the runs and the query into the URL (replacing its history entry), so a reload or a shared link
    # brings back what is on screen
    app.clientside_callback(url_query_writer(None, "runs", "sql"), Input(ids.QUERY_RUN, "n_clicks"), State(ids.QUERY_RUNS, "value"),
                            State(ids.QUERY_SQL, "value"), prevent_initial_call=True)

    @app.callback(Output(ids.QUERY_GRID, "exportDataAsCsv"), Input(ids.QUERY_CSV, "n_clicks"), prevent_initial_call=True)
    def download(_clicks: int | None) -> bool:
        return True
