"""Region page, device time per operator: the table `portscope report --ops` prints (ingest/op_device.py), the
program's operators only (those the compiler ran while compiling left out, as there), sortable, and device time per
category as bars."""

from __future__ import annotations

from typing import Any

import pandas as pd
from dash import dcc, html

from portscope.ingest.op_device import category_totals, device_by_operator, op_calls

from .. import ids
from ..components import grid, grid_height
from ..context import store
from ..figures import category_figure
from ..time_axis import fmt_duration

COLUMNS = [
    {"field": "operator", "headerName": "Operator", "flex": 4, "minWidth": 220, "tooltipField": "operator"},
    {"field": "category", "headerName": "Category", "width": 125},
    {"field": "calls", "headerName": "Calls", "type": "numericColumn", "width": 90, "headerTooltip": "calls of the operator"},
    {"field": "device_calls", "headerName": "Dev calls", "type": "numericColumn", "width": 100,
     "headerTooltip": "calls with device work in them (their own or their children's)"},
    {"field": "device_self_us", "headerName": "Self µs", "type": "numericColumn", "width": 120, "sort": "desc",
     "headerTooltip": "device time of the work the operator launched itself"},
    {"field": "device_total_us", "headerName": "Total µs", "type": "numericColumn", "width": 105,
     "headerTooltip": "device time with the operators nested in it"},
    {"field": "cpu_us", "headerName": "CPU µs", "type": "numericColumn", "width": 105},
    {"field": "share_pct", "headerName": "Share %", "type": "numericColumn", "width": 95,
     "headerTooltip": "share of the region's device time (self)"},
]


def tables(run_id: str, region_id: int) -> tuple[pd.DataFrame, pd.DataFrame, int, int]:
    """(operators, categories, device ns, device ns launched outside any operator) of the region, computed once."""

    def make() -> tuple[pd.DataFrame, pd.DataFrame, int, int]:
        calls = op_calls(store().trace(run_id), [region_id])
        return device_by_operator(calls), category_totals(calls), calls.device_ns, calls.unattributed_ns

    return store().memo(f"op-device:{run_id}:{int(region_id)}", make)


def grid_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The operators as the grid shows them: times in µs, the share in percent."""
    return [{"operator": r.operator, "category": r.category, "calls": int(r.calls), "device_calls": int(r.device_calls),
             "device_self_us": round(r.device_self_ns / 1e3, 3), "device_total_us": round(r.device_total_ns / 1e3, 3),
             "cpu_us": round(r.cpu_ns / 1e3, 3), "share_pct": round(100 * float(r.share), 2)}
            for r in frame.itertuples()]  # fmt: skip


def section(run_id: str, region_id: int) -> list[Any]:
    """The section: nothing for a region without operators; a note when none launched device work."""
    ops, categories, device_ns, unattributed = tables(run_id, region_id)
    if not len(ops):
        return []
    rows = grid_rows(ops)
    note = (f"{fmt_duration(device_ns)} of device work in this region"
            + (f", {fmt_duration(unattributed)} of it launched outside any operator" if unattributed else "")
            + ". Self: the device work an operator launched itself; total: with the operators nested in it. "
              "Click a header to sort.") if device_ns else "No device work in this region: calls and CPU time only."  # fmt: skip
    children: list[Any] = [html.H3("Device time per operator"), html.Div(note, className="muted")]
    table = html.Div(grid(ids.REGION_DEVICE_GRID, rows, COLUMNS, height=grid_height(len(rows), most=420)), className="col", style={"flex": "5"})
    if device_ns:
        bars = dcc.Graph(id=ids.REGION_DEVICE_CATEGORIES, figure=category_figure(categories, [("device", "device_ns")]),
                         config={"displayModeBar": False})  # fmt: skip
        children.append(html.Div([table, html.Div(bars, className="col", style={"flex": "2", "minWidth": "280px"})], className="row"))
    else:
        children.append(table)
    return children
