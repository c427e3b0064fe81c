"""Compare page, operator diff section: every operator, runtime call, kernel and annotation of region A
against region B by name (ingest/op_diff.py) — HTA's ops diff sets — and beside each name the call-site
lines whose count changed."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, dcc, html

from portscope.ingest.op_diff import OpChange, OpDiff, op_diff, set_sizes
from portscope.ingest.schema import TimeUnit

from .. import ids
from ..components import fmt_int, fmt_signed, problem, text_table
from ..context import store
from ..time_axis import fmt_duration

CHANGED = "changed"  # the radio's default: every set but unchanged
ROWS_SHOWN = 500  # rows drawn per choice (`portscope diff --ops --json` lists every one)
_SITES_SHOWN = 4
NAME_CHARS = 120


def _time(v: Any) -> str:
    return fmt_duration(v, TimeUnit.NS) if v else "0"


def _signed_time(v: Any) -> str:
    return "0" if not v else ("+" if v > 0 else "−") + fmt_duration(abs(v), TimeUnit.NS)


COLUMNS = [
    ("change", "Change", None),
    ("kind", "Kind", None),
    ("name", "Name", None),
    ("a_count", "A", fmt_int),
    ("b_count", "B", fmt_int),
    ("delta", "Δ", fmt_signed),
    ("a_ns", "A time", _time),
    ("b_ns", "B time", _time),
    ("delta_ns", "Δ time", _signed_time),
    ("call_sites", "Call sites whose count changed (A → B)", None),
]


def section() -> html.Div:
    """The section's place on the page: a title, the set chooser and the table the callback fills."""
    choices = [{"label": "all changed", "value": CHANGED}] + [{"label": c.value, "value": c.value} for c in OpChange]
    return html.Div([
        html.H3("Every operator, runtime call and kernel, by name"),
        html.Div("Counts and total times in A and B, sorted into the sets Holistic Trace Analysis' ops diff gives "
                 "(added, deleted, increased, decreased, unchanged); beside each name, the model lines where its "
                 "count changed.", className="muted"),
        dcc.RadioItems(id=ids.COMPARE_OPS_SET, options=choices, value=CHANGED, inline=True, className="choice"),
        html.Div(id=ids.COMPARE_OPS),
    ])  # fmt: skip


def _name(name: str) -> Any:
    """A long kernel name (C++ templates run to a thousand characters) cut short, whole in its tooltip."""
    return name if len(name) <= NAME_CHARS else html.Span(name[: NAME_CHARS - 1] + "…", title=name)


def _sites_cell(diff: OpDiff) -> dict[tuple[str, str], html.Div]:
    """(kind, name) -> its changed call sites, one line each ("line: a → b"), largest change first."""
    out: dict[tuple[str, str], html.Div] = {}
    for key, group in diff.sites.groupby(["kind", "name"], sort=False):
        lines = [html.Div(f"{s.call_site}: {s.a_count} → {s.b_count}") for s in group.head(_SITES_SHOWN).itertuples()]
        if len(group) > _SITES_SHOWN:
            lines.append(html.Div(f"… {len(group) - _SITES_SHOWN} more", className="muted"))
        out[key] = html.Div(lines)
    return out


def ops_view(diff: OpDiff, which: str) -> list[Any]:
    """The set sizes, a note on device work counted nowhere, and the chosen set's rows."""
    by_name, by_row = set_sizes(diff.ops)
    summary = f"HTA's sets (by name alone): {sum(by_name.values()):,} names: " + " · ".join(f"{c.value} {n:,}" for c, n in by_name.items())
    children: list[Any] = [html.P(summary, id=ids.COMPARE_OPS_SUMMARY)]
    if by_row != by_name:
        children.append(html.P(f"By kind and name (the rows below): {len(diff.ops):,} rows: "
                               + " · ".join(f"{c.value} {n:,}" for c, n in by_row.items())))  # fmt: skip
    for side, n in zip("AB", diff.unlaunched, strict=True):
        if n:
            children.append(html.P(f"{n:,} device slices of {side}'s trace were launched before the trace began: "
                                   "counted in no region.", className="muted"))  # fmt: skip
    rows = diff.ops[diff.ops["change"] != OpChange.UNCHANGED.value] if which == CHANGED else diff.ops[diff.ops["change"] == which]
    if not len(rows):
        return [*children, html.P("No operator in this set.", className="muted")]
    sites = _sites_cell(diff)
    shown = rows.head(ROWS_SHOWN)
    shown = shown.assign(call_sites=[sites.get((k, n), "") for k, n in zip(shown["kind"], shown["name"], strict=True)],
                         name=[_name(n) for n in shown["name"]])
    if not len(diff.sites):
        children.append(html.P("No call site's count changed, or the traces carry no call sites (a PyTorch profiler "
                               "trace has them when recorded with with_stack=True).", className="muted"))  # fmt: skip
    children.append(text_table(shown, COLUMNS if len(diff.sites) else COLUMNS[:-1], table_id=ids.COMPARE_OPS_TABLE))
    if len(rows) > ROWS_SHOWN:
        children.append(html.P(f"… and {len(rows) - ROWS_SHOWN:,} more (portscope diff --ops --json lists every one).",
                               className="muted"))  # fmt: skip
    return children


def _diff(a: str, b: str, region_a: int, region_b: int) -> OpDiff:
    return store().memo(f"op-diff:{a}:{int(region_a)}:{b}:{int(region_b)}",
                        lambda: op_diff(store().trace(a), int(region_a), store().trace(b), int(region_b)))


def register(app: dash.Dash) -> None:
    @app.callback(
        Output(ids.COMPARE_OPS, "children"),
        Input(ids.COMPARE_REGION_A, "value"),
        Input(ids.COMPARE_REGION_B, "value"),
        Input(ids.COMPARE_OPS_SET, "value"),
        State(ids.COMPARE_KEY, "data"),
    )
    def show(region_a: int | None, region_b: int | None, which: str, key: dict[str, str]) -> Any:
        if region_a is None or region_b is None:
            return problem("pick a region on each side")
        return ops_view(_diff(key["a"], key["b"], region_a, region_b), which or CHANGED)


__all__ = ["COLUMNS", "ops_view", "register", "section"]
