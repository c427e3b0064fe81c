"""Ranks: a multi-rank run (`portscope convert FOLDER`) per rank: compute, communication, exposed communication and
idle time, a heatmap of each rank's step time by step with each step's straggler outlined, and the operators that
made the straggler slow (`ingest/rank_report.py` computes all of it)."""

from __future__ import annotations

from typing import Any

import dash
from dash import dcc, html

from portscope.ingest.collectives import MatchRule
from portscope.ingest.rank_report import ranks_report_data

from .. import ids, urls
from ..components import page, problem, text_table
from .common import load, run_label


def _ms(v: Any) -> str:
    return "-" if v is None or v != v else f"{v / 1e6:,.2f}"


def _skew(v: Any) -> str:
    return "-" if v is None or v != v else f"{v / 1e6:,.3f}"


def _pct(v: Any) -> str:
    return "-" if v is None or v != v else f"{v:,.1f} %"


RANK_COLUMNS = [
    ("rank", "Rank", None),
    ("steps", "Steps", None),
    ("step_ns", "Step (ms)", _ms),
    ("compute_ns", "Compute (ms)", _ms),
    ("communication_ns", "Communication (ms)", _ms),
    ("exposed_communication_ns", "Exposed comm. (ms)", _ms),
    ("idle_ns", "Idle (ms)", _ms),
    ("busy_ns", "Busy (ms)", _ms),
    ("host_comm_wait_ns", "Host comm. wait (ms)", _ms),
    ("straggler_steps", "Straggler in", None),
    ("skew_ns", "Skew removed (ms)", _skew),
]
STRAGGLER_COLUMNS = [
    ("step", "Step", None),
    ("rank", "Straggler", None),
    ("busy_ns", "Busy (ms)", _ms),
    ("median_ns", "Median of the others (ms)", _ms),
    ("slowdown_ns", "Slower by (ms)", _ms),
    ("slowdown_pct", "Slower by", _pct),
]
COLLECTIVE_COLUMNS = [
    ("name", "Collective", None),
    ("occurrence", "#", None),
    ("step", "Step", lambda v: "-" if v is None or v < 0 else str(v)),
    ("ranks", "Ranks", None),
    ("skew_ns", "Arrival skew (ms)", _skew),
    ("last_rank", "Arrived last", None),
    ("first_rank", "Arrived first", None),
    ("arrivals", "Each rank's arrival (ms after the first)", None),
    ("process_group", "Process group", lambda v: "-" if v is None else str(v)),
    ("seq", "Seq", lambda v: "-" if v is None else str(v)),
    ("clock", "Read on", None),
]
COLLECTIVE_RANK_COLUMNS = [
    ("rank", "Rank", None),
    ("collectives", "Collectives", None),
    ("arrived_last", "Arrived last in", None),
    ("arrived_first", "Arrived first in", None),
    ("wait_ns", "Waited for the others (ms)", _ms),
    ("mean_skew_ns", "Mean arrival skew (ms)", _skew),
    ("point_to_point", "Send/recv", None),
]
_COLLECTIVES_LISTED = 20  # collectives listed at most (the largest arrival skews)
_ARRIVALS_LISTED = 16  # ranks whose arrival a collective's row spells out

_OUTLINED = 60  # stragglers outlined by a shape each; more: a marker each
_LISTED = 20  # rows of the stragglers table at most (the largest slowdowns)

SLOW_COLUMNS = [("operator", "Operator", None), ("straggler_ns", "Straggler (ms)", _ms), ("median_ns", "Median (ms)", _ms),
                ("excess_ns", "More (ms)", _ms)]  # fmt: skip


def step_heatmap(data: dict[str, Any]) -> dict[str, Any]:
    """Busy time (ms) by rank (rows) and step (columns); each step's straggler outlined in red."""
    ranks = sorted({s["rank"] for s in data["steps"]})
    steps = sorted({s["step"] for s in data["steps"]})
    busy = {(s["rank"], s["step"]): s for s in data["steps"]}
    z = [[busy[(r, k)]["busy_ns"] / 1e6 if (r, k) in busy else None for k in steps] for r in ranks]
    text = [[(f"rank {r}, step {k}<br>busy {busy[(r, k)]['busy_ns'] / 1e6:,.2f} ms<br>step {busy[(r, k)]['step_ns'] / 1e6:,.2f} ms"
              f"<br>exposed comm. {busy[(r, k)]['exposed_communication_ns'] / 1e6:,.2f} ms") if (r, k) in busy else ""
             for k in steps] for r in ranks]  # fmt: skip
    labels = [f"rank {r}" for r in ranks]
    slow = data["stragglers"]
    many = len(slow) > _OUTLINED  # shapes cost O(n²) to draw: markers then, and no labels
    outlines = [] if many else [{"type": "rect", "xref": "x", "yref": "y", "x0": steps.index(s["step"]) - 0.5, "x1": steps.index(s["step"]) + 0.5,
                 "y0": ranks.index(s["rank"]) - 0.5, "y1": ranks.index(s["rank"]) + 0.5,
                 "line": {"color": "#E45756", "width": 4}} for s in slow]  # fmt: skip
    return {
        "data": [
            {"type": "heatmap", "x": [str(k) for k in steps], "y": labels, "z": z, "text": text, "hoverinfo": "text",
             "colorscale": [[0.0, "#F7FBFF"], [1.0, "#2171B5"]], "colorbar": {"title": {"text": "busy ms"}}},
            {"type": "scatter", "mode": "markers" if many else "text", "name": "straggler", "x": [str(s["step"]) for s in slow],
             "y": [f"rank {s['rank']}" for s in slow], "text": [f"+{s['slowdown_pct']:.0f}%" for s in slow],
             "textfont": {"color": "#B2182B", "size": 14}, "hoverinfo": "skip",
             "marker": {"symbol": "square-open", "size": 10, "color": "#E45756", "line": {"width": 2}}},
        ],  # fmt: skip
        "layout": {
            "title": {"text": "Busy time per step (the step less its exposed communication); each step's straggler outlined"},
            "xaxis": {"title": {"text": "ProfilerStep"}, "type": "category"},
            "yaxis": {"autorange": "reversed", "type": "category"},
            "shapes": outlines, "height": 160 + 60 * len(ranks), "margin": {"l": 80, "r": 20, "t": 60, "b": 50},
            "showlegend": False,
        },
    }


def layout(run_id: str = "", **_query: str) -> html.Div:
    trace, error = load(run_id)
    if trace is None:
        return page("Ranks", error)
    back = html.Div([dcc.Link("Run", href=urls.run(run_id)), dcc.Link("Engine timeline", href=urls.timeline(run_id))],
                    className="links")
    if not trace.run_info.extra.get("ranks"):
        return page("Ranks", back, problem(f"{run_label(run_id, trace)} is not a multi-rank run "
                                           "(convert a folder of per-rank traces: portscope convert FOLDER -o run.arrow)."))
    data = ranks_report_data(trace)
    children: list[Any] = [back, html.P(
        f"{len(data['ranks'])} ranks (world size {data['world_size']}). Busy time is a step's time less its exposed "
        "communication (communication overlapped by no compute of the rank): in synchronised training every rank's "
        "step lasts as long as the slowest one's, the others wait in a collective. Host comm. wait: time a host "
        "thread of the rank spent inside collectives, their kernel launches excepted.")]
    if data.get("reference_rank") is not None:
        children.append(html.P(f"The ranks are lined up on their step starts: each rank's skew against rank "
                               f"{data['reference_rank']} (the median difference of their ProfilerStep starts) was removed "
                               "from its times; a rank that shares no step with it keeps its file's start time.",
                               className="ranks-alignment"))
    children += [html.H3("Per rank"), text_table(data["ranks"], RANK_COLUMNS, table_id=ids.RANKS_TABLE)]
    if not data["steps"]:
        children.append(problem("No ProfilerStep#N ranges: record with a torch.profiler schedule and call prof.step()."))
        return page("Ranks", *children, subtitle=run_label(run_id, trace))
    children += [dcc.Graph(id=ids.RANKS_HEATMAP, figure=step_heatmap(data), config={"displaylogo": False}),
                 html.H3("Stragglers")]
    worst = sorted(data["stragglers"], key=lambda s: -s["slowdown_ns"])[:_LISTED]
    if len(worst) < len(data["stragglers"]):
        children.append(html.P(f"The {len(worst)} steps of largest slowdown of {len(data['stragglers'])} "
                               "(portscope report --ranks --json lists every step)."))
    children.append(text_table(sorted(worst, key=lambda s: s["step"]), STRAGGLER_COLUMNS, table_id=ids.RANKS_STRAGGLERS))
    if data["slowest_rank"] is not None:
        children.append(html.H3(f"Operators slower on rank {data['slowest_rank']} than on the others (median)"))
        children.append(text_table(data["slow_operators"], SLOW_COLUMNS, table_id=ids.RANKS_SLOW_OPERATORS) if data["slow_operators"]
                        else html.P("None: its time went outside operators (idle, waiting)."))
    children.append(collectives_section(data))
    return page("Ranks", *children, subtitle=run_label(run_id, trace))


def collectives_section(data: dict[str, Any]) -> html.Div:
    """The collectives matched across ranks, largest arrival skew first, each one's last rank named; per rank, how
    often it arrived last and how long it waited for the others."""
    out: list[Any] = [html.H3("Collectives across ranks")]
    if data.get("point_to_point"):
        out.append(html.P(f"{data['point_to_point']} point-to-point transfers (send/recv), not matched as collectives. "
                          "Ranks that talk by send/recv run different pipeline stages: a step's straggler is then its "
                          "slowest stage, the pipeline's bottleneck, and its excess over the others mixes their "
                          "different work with any slowdown."))
    if not data.get("collectives"):
        return html.Div([*out, html.P("No collective ran on two ranks or more.")], id=ids.RANKS_COLLECTIVES_SECTION)
    arrivals: dict[int, list[dict[str, Any]]] = {}
    for a in data.get("collective_arrivals") or []:
        arrivals.setdefault(a["collective"], []).append(a)
    shown = []
    for c in data["collectives"][:_COLLECTIVES_LISTED]:
        mine = arrivals.get(c["collective"], [])
        text = ", ".join(f"rank {a['rank']} +{a['skew_ns'] / 1e6:,.3f}" for a in mine[:_ARRIVALS_LISTED])
        shown.append({**c, "arrivals": text + (", ..." if len(mine) > _ARRIVALS_LISTED else "")})
    clocks = {c["clock"] for c in data["collectives"]}
    by_sequence = data.get("collective_rule") == MatchRule.SEQUENCE.value
    columns = [c for c in COLLECTIVE_COLUMNS if by_sequence or c[0] not in ("process_group", "seq")]
    out.append(html.P(
        f"{len(data['collectives'])} collectives matched "
        + ("by process group and sequence number (every call's, from its record_param_comms arguments)" if by_sequence
           else "by name and order on each rank (some call has no process group or sequence number in the trace)")
        + (f"; the {len(shown)} of largest arrival skew" if len(shown) < len(data["collectives"]) else "")
        + ". A rank's arrival is " + ("the start of the communication kernel its call launched" if clocks == {"device"} else
                                      "the start of its call on the host" if clocks == {"host"} else
                                      "its kernel's start where every rank launched one, else its call's start")
        + "; the skew is the last arrival less the first, the time the first rank waited for the last.",
        className="ranks-collectives-note"))  # fmt: skip
    out += [html.Div([html.P(p, className="problem") for p in data.get("collective_problems") or []]),
            text_table(shown, columns, table_id=ids.RANKS_COLLECTIVES),
            html.H4("Collectives per rank: how often it arrived last, how long it waited for the others"),
            text_table(data.get("collective_ranks") or [], COLLECTIVE_RANK_COLUMNS, table_id=ids.RANKS_COLLECTIVE_RANKS)]
    return html.Div(out, id=ids.RANKS_COLLECTIVES_SECTION)


def register(app: dash.Dash) -> None:
    dash.register_page(__name__, path_template="/run/<run_id>/ranks", order=3, name="Ranks", title="portscope: ranks", layout=layout)
