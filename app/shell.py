"""The frame around every page: navigation, the upload widget, and the browser-side run list."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, dcc, html

from . import ids, urls
from .components import problem
from .config import ViewerConfig


def layout(config: ViewerConfig) -> html.Div:
    zone = html.Div(
        [
            html.Div("Drop traces here, or click to choose (.arrow, PyTorch profiler / Chrome JSON, NPU traces and tables, fallback and compile logs)", className="upload-hint"),
            # hidden until a file is sent (assets/upload.js shows it): an empty bar before any upload reads as one stuck
            html.Progress(id=ids.UPLOAD_PROGRESS, value="0", max="100", className="upload-progress", hidden=True),
            html.Span(id=ids.UPLOAD_STATUS, className="upload-status"),
        ],
        id=ids.UPLOAD_ZONE,
        className="upload-zone",
        title="Upload traces",
        **{"data-max-bytes": str(config.max_upload_bytes)},
    )
    return html.Div(
        [
            html.Header(
                [
                    dcc.Link("portscope", href=urls.runs(), className="brand"),
                    html.Nav([dcc.Link("Runs", href=urls.runs()), dcc.Link("Query", href=urls.query())]),
                    zone,
                ],
                className="topbar",
            ),
            html.Div(id=ids.UPLOAD_MESSAGES, className="upload-messages"),
            dcc.Store(id=ids.UPLOAD_RESULT),
            dcc.Store(id=ids.SESSION_RUNS, storage_type="local", data=[]),
            html.Main(dash.page_container, className="content"),
        ],
        className="shell",
    )


_NAME_CHARS = 200  # an uploaded file's name as the run list shows it, at most


def session_entries(session_runs: Any) -> list[tuple[str, str | None]]:
    """(run id, uploaded file's name or None) of each entry of this browser's run list, in order. Entries are
    `[run id, file name]`; a bare run id (what earlier versions stored) has no name; anything else (the list lives
    in the browser's localStorage) is skipped."""
    out = []
    for entry in session_runs if isinstance(session_runs, list) else []:
        if isinstance(entry, str):
            out.append((entry, None))
        elif isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str):
            out.append((entry[0], entry[1][:_NAME_CHARS] if isinstance(entry[1], str) and entry[1] else None))
    return out


def apply_upload_results(batch: dict[str, Any] | None, session_runs: Any) -> tuple[list[list[str | None]], list[dict[str, Any]]]:
    """Add the good uploads of a batch to this browser's run list (`[run id, file name]` each, a run once: named by
    its latest upload); one message per file."""
    runs = {run_id: name for run_id, name in session_entries(session_runs)}
    messages = []
    for result in (batch or {}).get("results", []):
        name = str(result.get("file", "upload"))
        if result.get("ok") and isinstance(result.get("run_id"), str):
            runs[result["run_id"]] = name
            messages.append({"ok": True, "file": name, "run_id": result["run_id"]})
        else:
            messages.append({"ok": False, "file": name, "error": str(result.get("error") or f"{name}: upload failed")})
    return [[run_id, name] for run_id, name in runs.items()], messages


def render_messages(messages: list[dict[str, Any]]) -> list[Any]:
    out = []
    for m in messages:
        if m["ok"]:
            out.append(html.Div([html.Span(f"Loaded {m['file']}: "), dcc.Link("open run " + m["run_id"], href=urls.run(m["run_id"]))], className="upload-ok"))
        else:
            out.append(problem(m["error"]))
    return out


def register_callbacks(app: dash.Dash) -> None:
    @app.callback(
        Output(ids.SESSION_RUNS, "data"),
        Output(ids.UPLOAD_MESSAGES, "children"),
        Input(ids.UPLOAD_RESULT, "data"),
        State(ids.SESSION_RUNS, "data"),
        prevent_initial_call=True,
    )
    def on_upload(batch: dict[str, Any] | None, session_runs: Any) -> tuple[list[list[str | None]], list[Any]]:
        runs, messages = apply_upload_results(batch, session_runs)
        return runs, render_messages(messages)
