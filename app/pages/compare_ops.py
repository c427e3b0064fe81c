"""Compare page, operator diff section: every operator, runtime call, kernel and annotation of region A
against region B by name (ingest/op_diff.py) — HTA's ops diff sets — and beside each name the call-site
lines whose count changed."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, dcc, html

from portscope.ingest.op_diff import OpChange, OpDiff, op_diff, set_sizes

from .. import ids
from ..components import grid, grid_height, problem
from ..context import store

CHANGED = "changed"  # the radio's default: every set but unchanged
_SITES_SHOWN = 4
# An AG Grid: it draws only the rows in view, so a pair with hundreds of changed kernels opens at once (a plain
# table of 270 rows took headless Chromium ~25 s to render); sortable and filterable by every column.
COLUMNS = [
    {"field": "change", "headerName": "Change", "width": 105},
    {"field": "kind", "headerName": "Kind", "width": 100},
    {"field": "name", "headerName": "Name", "flex": 4, "minWidth": 220, "tooltipField": "name"},
    {"field": "a_count", "headerName": "A", "type": "numericColumn", "width": 90},
    {"field": "b_count", "headerName": "B", "type": "numericColumn", "width": 90},
    {"field": "delta", "headerName": "Δ", "type": "numericColumn", "width": 90},
    {"field": "a_us", "headerName": "A µs", "type": "numericColumn", "width": 110},
    {"field": "b_us", "headerName": "B µs", "type": "numericColumn", "width": 110},
    {"field": "delta_us", "headerName": "Δ µs", "type": "numericColumn", "width": 110},
    {"field": "call_sites", "headerName": "Call sites whose count changed (A → B)", "flex": 4, "minWidth": 220,
     "tooltipField": "call_sites"},
]


def section() -> html.Div:
    """The section's place on the page: a title, the set chooser and the table the callback fills."""
    choices = [{"label": "all changed", "value": CHANGED}] + [{"label": c.value, "value": c.value} for c in OpChange]
    return html.Div([
        html.H3("Every operator, runtime call and kernel, by name"),
        html.Div("Counts and total times in A and B, sorted into the sets Holistic Trace Analysis' ops diff gives "
                 "(added, deleted, increased, decreased, unchanged); beside each name, the model lines where its "
                 "count changed. Click a header to sort, hover a name for all of it.", className="muted"),
        dcc.RadioItems(id=ids.COMPARE_OPS_SET, options=choices, value=CHANGED, inline=True, className="choice"),
        html.Div(id=ids.COMPARE_OPS),
    ])  # fmt: skip


def site_texts(diff: OpDiff) -> dict[tuple[str, str], str]:
    """(kind, name) -> its changed call sites, "line: a → b" joined by "; ", largest change first."""
    out: dict[tuple[str, str], str] = {}
    for key, group in diff.sites.groupby(["kind", "name"], sort=False):
        lines = [f"{s.call_site}: {s.a_count} → {s.b_count}" for s in group.head(_SITES_SHOWN).itertuples()]
        if len(group) > _SITES_SHOWN:
            lines.append(f"… {len(group) - _SITES_SHOWN} more")
        out[key] = "; ".join(lines)
    return out


def _us(ns: Any) -> float:
    return round(float(ns) / 1e3, 3)


def grid_rows(diff: OpDiff, which: str) -> list[dict[str, Any]]:
    """The chosen set's rows as the grid shows them: counts, times in µs, call sites as text."""
    rows = diff.ops[diff.ops["change"] != OpChange.UNCHANGED.value] if which == CHANGED else diff.ops[diff.ops["change"] == which]
    sites = site_texts(diff)
    return [
        {"change": r.change, "kind": r.kind, "name": r.name, "a_count": int(r.a_count), "b_count": int(r.b_count),
         "delta": int(r.delta), "a_us": _us(r.a_ns), "b_us": _us(r.b_ns), "delta_us": _us(r.delta_ns),
         "call_sites": sites.get((r.kind, r.name), "")}
        for r in rows.itertuples()
    ]  # fmt: skip


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
    rows = grid_rows(diff, which)
    if not rows:
        return [*children, html.P("No operator in this set.", className="muted")]
    if not len(diff.sites):
        children.append(html.P("No call site's count changed, or the traces carry no call sites (a PyTorch profiler "
                               "trace has them when recorded with with_stack=True).", className="muted"))  # fmt: skip
    columns = COLUMNS if len(diff.sites) else COLUMNS[:-1]
    children.append(grid(ids.COMPARE_OPS_TABLE, rows, columns, height=grid_height(len(rows), most=520)))
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


__all__ = ["COLUMNS", "grid_rows", "ops_view", "register", "section", "site_texts"]
