"""Small layout pieces shared by the pages. Every trace string goes in as text, never as HTML."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import dash_ag_grid as dag
import pandas as pd
from dash import html
from dash.development.base_component import Component

from portscope.ingest.summary import format_bytes

from .data.seen import NOT_RECORDED

Column = tuple[str, str, Callable[[Any], str] | None]  # (key, header, formatter)

STATUS_TEXT = {
    "clean": "clean",
    "compiles": "compiles only",
    "not-clean": "not clean",  # shown only when nothing names what was seen (app/data/seen.py names it)
    "error": "error",
}


def fmt_int(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{int(v):,}"


def fmt_bytes(v: Any) -> str:
    return "-" if not v or v != v else format_bytes(int(v))  # v != v: NaN, a side that has no such row


def fmt_ratio(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if math.isinf(v):
        return "new"
    return f"{v:.2f}x"


def fmt_signed(v: Any) -> str:
    return f"{int(v):+,}" if v else "0"


def text_table(rows: Sequence[dict[str, Any]] | pd.DataFrame, columns: Sequence[Column], *, table_id: str | None = None, class_name: str = "table") -> html.Table:
    """A plain table; cells are strings (React renders them as text)."""
    records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)
    head = html.Thead(html.Tr([html.Th(label) for _, label, _ in columns]))
    body = html.Tbody(
        [html.Tr([html.Td(_cell(r.get(key), fmt)) for key, _, fmt in columns]) for r in records]
    )
    kwargs = {"id": table_id} if table_id else {}
    return html.Table([head, body], className=class_name, **kwargs)


def _cell(value: Any, fmt: Callable[[Any], str] | None) -> Any:
    if isinstance(value, Component):
        return value
    if fmt is not None:
        return fmt(value)
    return "" if _missing(value) else str(value)


def _missing(value: Any) -> bool:
    """None, or the NaN pandas puts where a text column has no value (never shown as "nan")."""
    return value is None or (isinstance(value, float) and value != value)


def status_badge(status: str, seen: str = "") -> html.Span:
    """A verdict at a glance. A not-clean one names what was seen ("60 d2h copies · 67 syncs"): those are facts to
    read, not all of them faults (a converted CUDA run's ordinary copies, an Ascend run's AI-CPU kernels)."""
    text = seen if status == "not-clean" and seen else STATUS_TEXT.get(status, status)
    return html.Span(text, className=f"badge badge-{status}", title=STATUS_TEXT.get(status, status))


def not_recorded(why: str) -> html.Span:
    """A count the run's source cannot record: not a 0. `why`: the source's own words (run_info.missing_signals)."""
    return html.Span(NOT_RECORDED, className="muted not-recorded", title=f"this source could not provide: {why}")


def with_details(message: str, summary: str, lines: Sequence[str]) -> str:
    """A message followed by details that are not problems of their own (the formats an upload was tried as): as text
    (an API answer, a log) it reads as it is; `problem()` shows the message and folds the details under `summary`."""
    return f"{message}\n\n{summary}:\n" + "\n".join(f"  - {line}" for line in lines)


_DETAILS = re.compile(r"(?P<message>.*?)\n\n(?P<summary>[^\n]+):\n(?P<lines>(?:  - [^\n]*\n?)+)", re.DOTALL)


def problem(message: str) -> html.Div:
    """A clear error box (the text is shown as is, newlines kept); details written by `with_details` folded away."""
    found = _DETAILS.fullmatch(message)
    if found is None:
        return html.Div(html.Pre(message, className="problem-text"), className="problem")
    return html.Div([html.Pre(found["message"], className="problem-text"),
                     html.Details([html.Summary(found["summary"]), html.Pre(found["lines"].rstrip("\n"), className="problem-text")],
                                  className="problem-details")], className="problem")  # fmt: skip


_URL_QUERY_JS = """function (...values) {
    const names = NAMES;
    const params = new URLSearchParams(window.location.search);
    names.forEach((name, i) => {
        if (name === null) { return; }
        const value = Array.isArray(values[i]) ? values[i].join(",") : values[i];
        if (value === null || value === undefined || value === "") { params.delete(name); } else { params.set(name, String(value)); }
    });
    const search = params.toString() ? "?" + params.toString() : "";
    if (search !== window.location.search) {
        window.history.replaceState(window.history.state, "", window.location.pathname + search + window.location.hash);
    }
}"""


def url_query_writer(*names: str | None) -> str:
    """The JavaScript of a clientside callback (no outputs) that writes its arguments into the page URL's query string,
    one parameter per name (None: an argument not written, such as a button's clicks; a list is joined by commas, an
    empty value drops its parameter). It replaces the history entry: the page is not rendered again, its other
    parameters are kept, and Back leaves the page as a link's navigation would."""
    return _URL_QUERY_JS.replace("NAMES", json.dumps(list(names)))


LONG_NAME = "long-name"  # one line, cut with an ellipsis (assets/portscope.css); the element's title holds it whole


def page(title: str, *children: Any, subtitle: Any = None) -> html.Div:
    head = [html.H2(title)]
    if subtitle is not None:
        head.append(html.Div(subtitle, className="subtitle"))
    return html.Div([*head, *children], className="page")


def grid(grid_id: Any, frame: pd.DataFrame | list[dict[str, Any]], columns: Sequence[dict[str, Any]], *, height: int = 300, **kwargs: Any) -> dag.AgGrid:
    """An AG Grid (cells are text: no HTML renderers) with sortable, filterable columns."""
    rows = frame.to_dict("records") if isinstance(frame, pd.DataFrame) else frame
    if kwargs.get("rowModelType") != "infinite":  # rows of an infinite grid come from getRowsResponse
        kwargs["rowData"] = rows
    return dag.AgGrid(
        id=grid_id,
        columnDefs=list(columns),
        defaultColDef={"sortable": True, "resizable": True, "filter": True},
        dashGridOptions={"rowSelection": {"mode": "singleRow", "checkboxes": False, "enableClickSelection": True}, "animateRows": False},
        style={"height": f"{height}px"},
        **kwargs,
    )


def grid_height(rows: int, *, row_px: int = 42, header_px: int = 50, most: int = 480) -> int:
    return min(most, header_px + row_px * max(rows, 1) + 4)
