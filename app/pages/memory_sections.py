"""Memory on the region page (peak, live at exit, allocations per device; the call sites that allocated most) and
on the compare page (A's and B's peaks; the call sites whose allocated bytes grew most), from ingest/memory.py."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, html

from portscope.ingest.catalog import format_signed_bytes
from portscope.ingest.memory import MemoryDiff, RegionMemory, RunMemory, memory_diff

from .. import ids
from ..components import fmt_bytes, fmt_int, grid, grid_height, text_table
from ..context import store

DEVICE_COLUMNS = [("device", "Device", None), ("peak_bytes", "Peak allocated", fmt_bytes), ("live_at_exit_bytes", "Live at exit", fmt_bytes),
                  ("allocations", "Allocations", fmt_int), ("allocated_bytes", "Bytes allocated", fmt_bytes),
                  ("peak_reserved_bytes", "Peak reserved", fmt_bytes)]  # fmt: skip
SITE_COLUMNS = [
    {"field": "call_site", "headerName": "Call site (model line)", "flex": 4, "minWidth": 260, "tooltipField": "call_site"},
    {"field": "device", "headerName": "Device", "width": 110},
    {"field": "allocations", "headerName": "Allocations", "type": "numericColumn", "width": 130},
    {"field": "allocated_bytes", "headerName": "Bytes allocated", "width": 160, "type": "numericColumn",
     "valueFormatter": {"function": "formatBytes(params.value)"}},  # assets/grid_format.js
]
COMPARE_COLUMNS = [("device", "Device", None), ("a_peak_bytes", "A peak", fmt_bytes), ("b_peak_bytes", "B peak", fmt_bytes),
                   ("delta_peak", "Δ peak", None), ("a_live_at_exit_bytes", "A live at exit", fmt_bytes),
                   ("b_live_at_exit_bytes", "B live at exit", fmt_bytes)]  # fmt: skip
GREW_COLUMNS = [("call_site", "Call site (model line)", None), ("device", "Device", None), ("a_allocated_bytes", "A allocated", fmt_bytes),
                ("b_allocated_bytes", "B allocated", fmt_bytes), ("delta", "Δ", None)]  # fmt: skip
GREW_SHOWN = 15


def run_memory(run_id: str) -> RunMemory:
    """The run's memory lanes and call sites, read once per process (the region pages and the timeline share them)."""
    return store().memo(f"run-memory:{run_id}", lambda: RunMemory(store().trace(run_id)))


def region_section(run_id: str, region_id: int) -> list[Any]:
    """The region's memory: nothing when the run recorded no allocator events."""
    found: RegionMemory = run_memory(run_id).region(int(region_id))
    if not len(found.devices):
        return []
    sites = [{"call_site": r.call_site, "device": r.device, "allocations": int(r.allocations), "allocated_bytes": int(r.allocated_bytes)}
             for r in found.sites.itertuples()]  # fmt: skip
    children: list[Any] = [html.H3("Memory"), html.Div("The allocator's totals inside the region, per device; the memory lanes of "
                                                       "the timeline draw them over time.", className="muted"),
                           text_table(found.devices, DEVICE_COLUMNS, table_id=ids.REGION_MEMORY_TABLE)]  # fmt: skip
    if sites:
        children += [html.H4("Where the bytes were allocated"),
                     grid(ids.REGION_MEMORY_SITES, sites, SITE_COLUMNS, height=grid_height(len(sites), most=320))]  # fmt: skip
    return children


def compare_view(diff: MemoryDiff) -> list[Any]:
    """A's and B's memory side by side, and the call sites whose allocated bytes grew most."""
    if not len(diff.devices):
        return []
    devices = diff.devices.assign(delta_peak=[format_signed_bytes(v) for v in diff.devices["delta_peak_bytes"]])
    grew = diff.sites[diff.sites["delta_bytes"] > 0].head(GREW_SHOWN)
    grew = grew.assign(delta=[format_signed_bytes(v) for v in grew["delta_bytes"]])
    return [html.H3("Memory"), text_table(devices, COMPARE_COLUMNS, table_id=ids.COMPARE_MEMORY_TABLE),
            html.H4(f"Call sites whose allocated bytes grew most (top {GREW_SHOWN})"),
            text_table(grew, GREW_COLUMNS) if len(grew) else html.P("No call site allocated more in B.", className="muted")]  # fmt: skip


def register(app: dash.Dash) -> None:
    @app.callback(
        Output(ids.COMPARE_MEMORY, "children"),
        Input(ids.COMPARE_REGION_A, "value"),
        Input(ids.COMPARE_REGION_B, "value"),
        State(ids.COMPARE_KEY, "data"),
    )
    def compare(region_a: int | None, region_b: int | None, key: dict[str, str]) -> Any:
        if region_a is None or region_b is None:
            return []
        a, b = key["a"], key["b"]
        diff = store().memo(f"memory-diff:{a}:{int(region_a)}:{b}:{int(region_b)}",
                            lambda: memory_diff(store().trace(a), int(region_a), store().trace(b), int(region_b)))
        return compare_view(diff)


__all__ = ["compare_view", "region_section", "register", "run_memory"]
