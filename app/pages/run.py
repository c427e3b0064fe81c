"""Run: what the run was, its regions with their verdicts, cold/warm and eager/compiled pairs, numerics."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, dcc, html

from portscope.ingest.diff import pair_regions
from portscope.ingest.plan_report import static_shapes_line
from portscope.ingest.schedule_summary import cost_sources_text

from .. import ids, urls
from ..components import LONG_NAME, fmt_bytes, fmt_int, not_recorded, page, status_badge, text_table
from ..data.runs import file_model, regions_frame, run_model, torch_text
from ..data.seen import NOT_RECORDED, unrecorded_columns
from ..data.tables import numerics_frame
from ..shell import session_entries
from .common import load, region_rows

REGION_COLUMNS = [
    ("link", "Region", None),
    ("wall_ms", "Wall (ms)", None),
    ("ops", "Ops", fmt_int),
    ("fallbacks", "Fallbacks", fmt_int),
    ("bounces", "Host bounces", fmt_int),
    ("d2h_bytes", "D2H bytes", fmt_bytes),
    ("compiles", "Compiles", fmt_int),
    ("badge", "Verdict", None),
]


def facts(trace: Any, file: str) -> html.Dl:
    info = trace.run_info
    model = run_model(info, file)[0]
    pairs: list[tuple[str, Any]] = [
        ("source", info.source.value + (f" for target {info.target}" if info.target else "") + (f" from {info.converted_from}" if info.converted_from else "")),
        ("model", html.Span(model, id=ids.RUN_MODEL, title=model, className=LONG_NAME)),
        ("devices", ", ".join(info.devices) or "?"),
        ("torch", torch_text(info) or NOT_RECORDED),
        ("command", info.command or "?"),
        ("recorded", info.start_time or "?"),
        ("time unit", info.time_unit.value),
    ]
    static = static_shapes_line(info)
    if static:
        pairs.append(("static shapes", static.removeprefix("static shapes: ")))
    if info.config:
        pairs.append(("configuration", ", ".join(f"{k}={v}" for k, v in info.config.items())))
    sourced = cost_sources_text(info.extra)
    if sourced:  # predicted times rest on these figures: say how many are only assumed
        pairs.append(("cost figures", sourced))
    if info.missing_signals:
        pairs.append(("not in this source", ", ".join(info.missing_signals)))
    items: list[Any] = []
    for key, value in pairs:
        items += [html.Dt(key), html.Dd(value if isinstance(value, html.Span) else str(value))]
    return html.Dl(items, className="facts")


def layout(run_id: str = "", **_query: str) -> html.Div:
    trace, error = load(run_id)
    if trace is None:
        return page("Run", error)
    rows = region_rows(run_id, trace)
    unrecorded = unrecorded_columns(trace.run_info.missing_signals)
    columns = REGION_COLUMNS
    if trace.predicted and any(r["predicted"] for r in rows):  # the prediction is the headline; the CPU's wall is context
        target = trace.run_info.target or "the target"
        columns = [REGION_COLUMNS[0], ("predicted", f"Predicted on {target}", None), ("wall", "CPU wall (recording)", None), *REGION_COLUMNS[2:]]
    for r in rows:
        # nested regions are indented under their parent (their figures are included in the parent's)
        r["link"] = html.Span(dcc.Link(r["label"], href=urls.region(run_id, r["name"], r["nth"]), title=r["label"],
                                       className=LONG_NAME), style={"paddingLeft": f"{1.2 * r['depth']}em"})
        r["badge"] = status_badge(r["status"], r["seen"])
        for column, why in unrecorded.items():
            if not r[column]:  # a count the source recorded anyway (a guess it made) is shown
                r[column] = not_recorded(why)
    regions = regions_frame(trace)
    a, b = pair_regions(regions, regions, same_run=True)
    links = [dcc.Link("Engine timeline", href=urls.timeline(run_id)), dcc.Link("All runs", href=urls.runs())]
    if trace["plan"].num_rows:
        links.insert(0, dcc.Link("Static-shape plan (charts)", href=urls.plan(run_id)))
    if trace.run_info.extra.get("ranks"):
        links.insert(0, dcc.Link("Ranks: steps and stragglers", href=urls.ranks(run_id)))
    if a is not None and b is not None and a != b:
        label = {r["region_id"]: r["label"] for r in rows}
        links.insert(1, dcc.Link(f"Compare {label[a]} with {label[b]}", href=urls.compare(run_id, run_id, a, b)))
    file = (trace.path or "").rsplit("/", 1)[-1]
    children: list[Any] = [facts(trace, file), html.Div(links, className="links", style={"margin": "12px 0"}), html.H3("Regions"), text_table(rows, columns, table_id="regions-list")]
    numerics = numerics_frame(trace)
    if len(numerics):
        children += [html.H3("Numerics (validation)"), text_table(numerics, [("comparison", "Comparison", None), ("metric", "Metric", None), ("value", "Value", lambda v: "" if v is None or v != v else f"{v:.4g}"), ("text", "Text", None)])]
    model_from_file = run_model(trace.run_info, file)[1]
    children.append(dcc.Store(id=ids.RUN_PAGE_ID, data={"run_id": run_id, "file": file, "model_from_file": model_from_file}))
    return page(f"Run {run_id}", *children, subtitle=html.Span(file, id=ids.RUN_FILE, title=file, className=LONG_NAME))


def _uploaded_name(page_run: dict[str, Any], session_runs: Any) -> str | None:
    return next((name for rid, name in session_entries(session_runs) if rid == page_run.get("run_id") and name), None)


def file_text(page_run: dict[str, Any] | None, session_runs: Any) -> str:
    """The run page's subtitle: the name this browser uploaded the run under, if it did, then the run's file."""
    page_run = page_run if isinstance(page_run, dict) else {}
    file = str(page_run.get("file") or "")
    uploaded = _uploaded_name(page_run, session_runs)
    return f"uploaded as {uploaded} · {file}" if uploaded else file


def model_update(page_run: dict[str, Any] | None, session_runs: Any) -> Any:
    """A run named after its file names it after the file this browser uploaded (the store keeps `<run id>.arrow`)."""
    page_run = page_run if isinstance(page_run, dict) else {}
    uploaded = _uploaded_name(page_run, session_runs) if page_run.get("model_from_file") else None
    return file_model(uploaded) if uploaded else dash.no_update


def names_update(page_run: dict[str, Any] | None, session_runs: Any) -> tuple[str, str, Any, Any]:
    """The subtitle and the model, each with its title: the whole name where a long one is cut (LONG_NAME)."""
    file, model = file_text(page_run, session_runs), model_update(page_run, session_runs)
    return file, file, model, model


def register(app: dash.Dash) -> None:
    dash.register_page(__name__, path_template="/run/<run_id>", order=5, name="Run", title="portscope: run", layout=layout)

    @app.callback(Output(ids.RUN_FILE, "children"), Output(ids.RUN_FILE, "title"), Output(ids.RUN_MODEL, "children"),
                  Output(ids.RUN_MODEL, "title"), Input(ids.RUN_PAGE_ID, "data"), Input(ids.SESSION_RUNS, "data"))
    def show_file(page_run: dict[str, Any] | None, session_runs: Any) -> tuple[str, str, Any, Any]:
        return names_update(page_run, session_runs)
