"""Timeline tools: a search by slice or operator name that highlights matching slices and steps through them
(Enter, ◀ ▶);
a time range dragged over, summarised under the timeline (engines' busy time, operators, signals).

W/S zoom (around the mouse) and A/D pan are client-side (assets/timeline_keys.js): they relayout the
graph, and the server answers the relayout as for any zoom.
"""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, Patch, State, ctx, dcc, html

from portscope.ingest.range_summary import range_summary
from portscope.ingest.schema import TimeUnit
from portscope.ingest.slice_search import SliceMatches, find_slices, lane_of_row
from portscope.ingest.viewport import reduce_viewport

from .. import ids
from ..components import fmt_bytes, fmt_int, text_table
from ..context import store
from ..data.tables import timeline_slices
from ..figures import VIEW_PX, highlight_bars
from ..time_axis import fmt_duration, fmt_span
from .timeline_runs import extent, run_unit

MAX_HIGHLIGHTS = 4000  # highlight bars per view (merged coarser beyond): keeps a zoom's answer under 1 MB with the bars
MIN_MATCH_SHARE = 1 / 50  # stepping to a match zooms in until it is at least this share of the view


def matches(run_id: str, text: str) -> SliceMatches:
    """The run's slices whose name, or whose operator's name, contains `text`, computed once per (run, text)."""
    def find() -> SliceMatches:
        trace = store().trace(run_id)
        return find_slices(timeline_slices(trace)[0], text, store().lanes(run_id), ops=trace["ops"])

    return store().memo(f"search:{run_id}:{text.strip().lower()}", find)


def add_highlights(patch: Any, found: list[SliceMatches | None], window: tuple[float, float], indices: list[int]) -> int:
    """Put the matches of each run (`found`, in the runs' order) inside `window` into the patch's match traces;
    the number of matches in all runs."""
    total = 0
    for matched, index in zip(found, indices, strict=False):
        if matched is None or not len(matched):
            patch["data"][index]["x"], patch["data"][index]["y"] = [], []
            continue
        total += len(matched)
        view = reduce_viewport(matched.lanes, window[0], window[1], VIEW_PX, max_bars=MAX_HIGHLIGHTS)
        x, y = highlight_bars(view)
        patch["data"][index]["x"], patch["data"][index]["y"] = x, y
    return total


def text_matches(run_ids: list[str], text: str | None) -> list[SliceMatches | None]:
    """Each run's slices whose name or operator's name contains `text` (None for every run when there is no text)."""
    return [matches(run_id, text) if text else None for run_id in run_ids]


OPERATORS_NAMED = 3  # operators a search's status line names at most


def search_status(found: list[SliceMatches | None]) -> str:
    """How many slices the search matched in all runs, and what it matched: "26 slices match by their operator's
    name (aten::addmm)", "30 slices match: 4 by name, 26 by their operator's name (aten::addmm)"."""
    hits = [f for f in found if f is not None]
    total, by_operator = sum(len(f) for f in hits), sum(f.by_operator for f in hits)
    if not total:
        return "0 slices match (slice and operator names are matched case-insensitively, any part)"
    names = list(dict.fromkeys(name for f in hits for name in f.operators))
    named = ", ".join(names[:OPERATORS_NAMED]) + (f" and {len(names) - OPERATORS_NAMED:,} more" if len(names) > OPERATORS_NAMED else "")
    plural = "slice matches" if total == 1 else "slices match"
    if not by_operator:
        return f"{total:,} {plural} by name"
    if by_operator == total:
        return f"{total:,} {plural} by their operator's name ({named})"
    return f"{total:,} {plural}: {total - by_operator:,} by name, {by_operator:,} by their operator's name ({named})"


def step_window(start: float, end: float, window: tuple[float, float]) -> tuple[float, float]:
    """A view centred on a slice: the current width, narrowed until the slice is visible (≥ 1/50 of it)."""
    width = window[1] - window[0]
    dur = max(end - start, 1.0)
    if dur < width * MIN_MATCH_SHARE:
        width = dur / MIN_MATCH_SHARE
    centre = (start + end) / 2
    return (centre - width / 2, centre + width / 2)


def match_text(run_id: str, found: SliceMatches, k: int) -> str:
    """"match 3 of 120: NAME on LANE at T for D"; "NAME (operator OP)" when the slice matched through its operator."""
    row = int(found.rows[k])
    lanes = store().lanes(run_id)
    lane = lanes.lanes[lane_of_row(found.lanes, row)]
    unit = TimeUnit(run_unit(run_id))
    name = timeline_slices(store().trace(run_id))[0].column("name")[row].as_py()
    via = int(found.operator_of[k])
    if via >= 0:  # matched through its operator's name: say which
        name = f"{name} (operator {found.operators[via]})"
    return (f"match {k + 1:,} of {len(found):,}: {name} on {lane} at {fmt_duration(found.start[k], unit)}"
            f" for {fmt_duration(found.end[k] - found.start[k], unit)}")


def controls(tools: ids.TimelineTools) -> list[Any]:
    """The search box, its step buttons and its status line."""
    return [
        html.Div(
            [
                dcc.Input(id=tools.search, type="search", placeholder="search slices by name or operator (Enter: next)", debounce=True,
                          style={"minWidth": "320px"}),
                html.Button("◀", id=tools.prev, title="previous match", n_clicks=0),
                html.Button("▶", id=tools.next, title="next match", n_clicks=0),
                html.Span(id=tools.status, className="muted"),
                html.Span("drag: select a range · wheel, W/S: zoom · A/D: pan", className="muted", style={"marginLeft": "auto"}),
            ],
            className="compare-bar",
        ),
        dcc.Store(id=tools.match, data={"text": "", "index": -1}),
    ]


def range_from_selection(selected: dict[str, Any] | None) -> tuple[float, float] | None:
    """The x range of a box selection (any panel's axis), or None."""
    box = (selected or {}).get("range") or {}
    for axis, value in box.items():
        if axis.startswith("x") and isinstance(value, list) and len(value) == 2:
            return (float(min(value)), float(max(value)))
    return None


def range_tables(run_id: str, window: tuple[float, float] | None, tools: ids.TimelineTools, *, stacked: bool = False) -> Any:
    """What happened in the dragged range: engines' busy time, operators by time, signals of those operators."""
    if window is None:
        return html.Div("Drag over the timeline to sum up a time range here.", className="muted")
    trace = store().trace(run_id)
    summary = range_summary(timeline_slices(trace)[0], store().lanes(run_id), trace["signals"], *window)
    unit = TimeUnit(run_unit(run_id))

    def duration(v: Any) -> str:
        return fmt_duration(v, unit)

    head = f"{fmt_span(summary.x0, summary.x1, unit)}: {summary.slices:,} slice{'' if summary.slices == 1 else 's'}"
    if not summary.slices:
        return html.Div([html.P(head, id=tools.range_head), html.P("Nothing runs in this range.", className="muted")])
    return html.Div([
        html.P(head, id=tools.range_head),
        html.Div([
            html.Div([html.H4("Engines (busy = time with a slice running)"),
                      text_table(summary.engines.to_pylist(), [("engine", "Engine", None), ("busy", "Busy", duration),
                                 ("share", "Busy share", _share), ("slices", "Slices", fmt_int)], table_id=tools.range_engines)],
                     className="col"),
            html.Div([html.H4("Operators (time inside the range)"),
                      text_table(summary.operators.to_pylist(), [("name", "Name", None), ("count", "Slices", fmt_int), ("time", "Time", duration)],
                                 table_id=tools.range_operators)], className="col"),
            html.Div([html.H4("Signals of those operators"),
                      text_table(summary.signals.to_pylist(), [("signal", "Signal", None), ("count", "Count", fmt_int), ("bytes", "Bytes", fmt_bytes)],
                                 table_id=tools.range_signals) if summary.signals.num_rows else html.P("No signals.", className="muted")],
                     className="col"),
        ], className="stack" if stacked else "row"),
    ])


def ranges_view(key: dict[str, Any], window: tuple[float, float] | None, tools: ids.TimelineTools) -> Any:
    """The range tables of every run of the page (A and B side by side on a compare page)."""
    run_ids, titles = key["run_ids"], key.get("titles")
    if len(run_ids) == 1:
        return range_tables(run_ids[0], window, tools)
    return html.Div([html.Div([html.H4(title), range_tables(run_id, window, tools.of_run(k), stacked=True)], className="col")
                     for k, (run_id, title) in enumerate(zip(run_ids, titles or run_ids, strict=True))], className="row")


def _share(value: float) -> str:
    return f"{value:.0%}" if value >= 0.1 or value == 0 else f"{value:.1%}" if value >= 0.001 else "<0.1%"


def register(app: dash.Dash, graph_id: str, tools: ids.TimelineTools, detail: Any) -> None:
    """Search and range callbacks of the timeline in `graph_id`; `detail(run_id, row)` shows one slice.

    Stepping to a match sets the graph's range and its relayoutData: the page's zoom callback then
    answers as for any zoom (bars, ticks, labels, highlights), and later clicks know the view.
    """

    @app.callback(
        Output(graph_id, "figure", allow_duplicate=True),
        Output(graph_id, "relayoutData", allow_duplicate=True),
        Output(tools.status, "children"),
        Output(tools.match, "data"),
        Output(ids.TIMELINE_DETAIL, "children", allow_duplicate=True),
        Input(tools.search, "value"),
        Input(tools.search, "n_submit"),
        Input(tools.next, "n_clicks"),
        Input(tools.prev, "n_clicks"),
        State(graph_id, "relayoutData"),
        State(ids.TIMELINE_KEY, "data"),
        State(tools.match, "data"),
        prevent_initial_call=True,
    )
    def search(text: str | None, _submit: Any, _next: Any, _prev: Any, relayout: dict[str, Any] | None,
               key: dict[str, Any], state: dict[str, Any]) -> tuple[Any, Any, str, dict[str, Any], Any]:
        return search_update(key, text or "", ctx.triggered_id, relayout, state, detail, tools)

    @app.callback(Output(tools.range, "children"), Input(graph_id, "selectedData"), State(ids.TIMELINE_KEY, "data"),
                  prevent_initial_call=True)
    def select(selected: dict[str, Any] | None, key: dict[str, Any]) -> Any:
        return ranges_view(key, range_from_selection(selected), tools)


def search_update(key: dict[str, Any], text: str, trigger: Any, relayout: dict[str, Any] | None, state: dict[str, Any],
                  detail: Any, tools: ids.TimelineTools) -> tuple[Any, Any, str, dict[str, Any], Any]:
    """For a new text: its highlights in the view; for Enter/◀/▶: the next or previous match, centred (a new
    range and relayoutData for the zoom callback to answer), with its details.

    key: the page's TIMELINE_KEY ({"run_ids", "match_traces", ...}); state: {"text", "index"}.
    Returns (figure patch, relayoutData, status, state, details).
    """
    from ..figures import viewport_from_relayout

    run_ids = key["run_ids"]
    opened = tuple(key["window"]) if key.get("window") else None  # the view the page opened on (its URL's)
    window = viewport_from_relayout(relayout, extent(run_ids)) or opened or extent(run_ids)
    stepping = trigger in (tools.next, tools.prev) or (trigger == tools.search and state.get("text") == text)
    found = matches(run_ids[0], text) if text.strip() else None
    if found is None or not stepping or not len(found):
        patch = Patch()
        every = text_matches(run_ids, text if found is not None else None)
        add_highlights(patch, every, window, key.get("match_traces") or [])
        status = "" if found is None else search_status(every)
        return patch, dash.no_update, status, {"text": text, "index": -1}, dash.no_update
    k = state.get("index", -1) if state.get("text") == text else -1
    k = (k - 1) % len(found) if trigger == tools.prev else (k + 1) % len(found)
    x0, x1 = step_window(float(found.start[k]), float(found.end[k]), window)
    patch = Patch()
    patch["layout"]["xaxis"]["range"] = [x0, x1]
    patch["layout"]["xaxis"]["autorange"] = False
    return (patch, {"xaxis.range[0]": x0, "xaxis.range[1]": x1}, match_text(run_ids[0], found, k), {"text": text, "index": k},
            detail(run_ids[0], int(found.rows[k])))
