"""Runs: every loaded trace, what it is, and a verdict that reads at a glance; pick two to compare."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, dcc, html

from portscope.ingest.schema import TimeUnit

from .. import ids, urls
from ..components import LONG_NAME, fmt_bytes, fmt_int, not_recorded, page, problem, status_badge, text_table
from ..context import store
from ..shell import session_entries
from ..time_axis import fmt_duration

LONG_TEXT = "long-text"  # wrapped (anywhere if it must), cut after four lines; the title holds it whole

COLUMNS = [
    ("pick", "", None),
    ("open", "Run", None),
    ("source", "Source", None),
    ("model", "Model", None),
    ("modes", "Modes", None),
    ("regions", "Regions", fmt_int),
    ("fallbacks", "Fallbacks", fmt_int),
    ("bounces", "Host bounces", fmt_int),
    ("d2h_bytes", "D2H bytes", fmt_bytes),
    ("compiles", "Compiles", fmt_int),
    ("time", "Time", None),
    ("badge", "Verdict", None),
]


def layout(**_query: str) -> html.Div:
    return page(
        "Runs",
        html.Div(id=ids.RUNS_TABLE),
        html.Div(id=ids.RUNS_COMPARE, className="compare-bar"),
        subtitle="Every trace this viewer knows about. Open one, or tick two and compare them.",
    )


def runs_rows(session_runs: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows for the listed traces and this browser's uploads (named by the file uploaded), and messages for files
    that are not traces."""
    s = store()
    listed, problems = s.listed()
    rows, seen = [], set()
    for run_id, path in listed:
        rows.append({**s.run_row(run_id, path.name).to_json(), "uploaded": False})
        seen.add(run_id)
    for run_id, name in session_entries(session_runs):
        if run_id not in seen and s.exists(run_id):
            rows.append({**s.run_row(run_id, name or f"upload {run_id}").to_json(), "uploaded": True})
            seen.add(run_id)
    return rows, problems


def run_cells(row: dict[str, Any]) -> dict[str, Any]:
    """The cells of a run's row in the runs table (`runs_rows` gives the rows): its pick box, its link, its figures."""
    source = row["source"] + (f" ({row['target']})" if row.get("target") else "")
    unrecorded = {column: not_recorded(why) for column, why in row["not_recorded"].items() if not row[column]}
    return {
        **row,
        **unrecorded,
        "pick": dcc.Checklist(id=ids.run_pick(row["run_id"]), options=[{"label": "", "value": row["run_id"]}], value=[], className="pick"),
        # a long file or upload name is cut with an ellipsis (whole on hover), not stretching the table off the screen
        "open": html.Div([dcc.Link(row["file"], href=urls.run(row["run_id"]), title=row["file"], className=LONG_NAME),
                          html.Div(row["run_id"], className="muted")]),
        "model": html.Span(row["model"], title=row["model"], className=LONG_TEXT) if row.get("model") else row.get("model"),
        "source": source + (" · uploaded" if row.get("uploaded") else ""),
        "badge": status_badge(row["status"], row["seen"]),
        "time": html.Span(fmt_duration(row["time"], TimeUnit(row["time_unit"]))
                          + ((" predicted (assumed)" if row.get("assumed_time") else " predicted (measured)"
                              if row.get("measured_time") else " predicted") if row["predicted_time"] else " wall"),
                          title="predicted device time on the target (the CPU's wall while recording is on the run page)"
                          if row["predicted_time"] else "wall time of the top-level regions"),
    }


def register(app: dash.Dash) -> None:
    dash.register_page(__name__, path="/runs", order=1, name="Runs", title="portscope: runs", layout=layout)
    dash.register_page(f"{__name__}.home", path="/", order=0, name="Home", title="portscope: runs", layout=layout)

    @app.callback(Output(ids.RUNS_TABLE, "children"), Input(ids.SESSION_RUNS, "data"))
    def show_runs(session_runs: Any) -> list[Any]:
        rows, problems = runs_rows(session_runs)
        out: list[Any] = []
        if rows:
            out.append(text_table([run_cells(r) for r in rows], COLUMNS, table_id="runs-list"))
        else:
            out.append(html.P("No traces yet: drop a .arrow trace on the upload zone above, or start `portscope view DIR`."))
        out += [problem(p) for p in problems]
        return out

    @app.callback(Output(ids.RUNS_COMPARE, "children"), Input(ids.RUN_PICK_ALL, "value"))
    def compare_link(values: list[list[str]]) -> Any:
        picked = [v for vs in values or [] for v in vs]
        if len(picked) == 2:
            return dcc.Link(f"Compare {picked[0]} with {picked[1]}", href=urls.compare(picked[0], picked[1]), id="compare-link", className="button")
        if len(picked) == 1:
            return [html.Span("Pick one more run to compare, or "), dcc.Link("compare its regions", href=urls.compare(picked[0], picked[0]))]
        return html.Span("Tick two runs to compare them.", className="muted")
