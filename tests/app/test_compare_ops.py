"""The compare page's operator diff section as a plain function (ops_view): what it says and lists."""

from __future__ import annotations

import pandas as pd

from portscope.app.pages.compare_ops import grid_rows, ops_view
from portscope.ingest.op_diff import OP_COLUMNS, SITE_COLUMNS, OpDiff


def _texts(component) -> list[str]:  # noqa: ANN001
    """Every string in a component tree, depth first."""
    if isinstance(component, str):
        return [component]
    if isinstance(component, list | tuple):
        return [t for c in component for t in _texts(c)]
    children = getattr(component, "children", None)
    return _texts(children) if children is not None else []


def test_a_name_of_two_kinds_counts_once_in_hta_sets_and_twice_in_rows() -> None:
    long_name = "void gemm<" + "float, " * 40 + ">"
    ops = pd.DataFrame([  # aten::mm: an operator in A only, a (predicted) kernel in B only: by name it is unchanged
        ["added", "kernel", "aten::mm", 0, 1, 1, 0, 5, 5],
        ["added", "kernel", long_name, 0, 2, 2, 0, 7, 7],
        ["deleted", "operator", "aten::mm", 1, 0, -1, 9, 0, -9],
    ], columns=OP_COLUMNS)
    view = ops_view(OpDiff(ops=ops, sites=pd.DataFrame(columns=SITE_COLUMNS), unlaunched=(3, 0)), "changed")
    texts = _texts(view)
    assert texts[0] == "HTA's sets (by name alone): 2 names: added 1 · deleted 0 · increased 0 · decreased 0 · unchanged 1"
    assert texts[1] == "By kind and name (the rows below): 3 rows: added 2 · deleted 1 · increased 0 · decreased 0 · unchanged 0"
    assert texts[2].startswith("3 device slices of A's trace were launched before the trace began")
    grid = view[-1]  # the rows, whole names (the grid cuts them to its column and shows all in a tooltip)
    assert [r["name"] for r in grid.rowData] == ["aten::mm", long_name, "aten::mm"]
    assert grid.rowData[1] == {"change": "added", "kind": "kernel", "name": long_name, "a_count": 0, "b_count": 2, "delta": 2,
                               "a_us": 0.0, "b_us": 0.007, "delta_us": 0.007, "call_sites": ""}
    # no call site changed: no call-site column, a note instead
    assert [c["field"] for c in grid.columnDefs][-1] == "delta_us"
    assert any(t.startswith("No call site's count changed") for t in texts)
    assert _texts(ops_view(OpDiff(ops=ops, sites=pd.DataFrame(columns=SITE_COLUMNS), unlaunched=(0, 0)), "unchanged"))[-1] == (
        "No operator in this set.")


def test_grid_rows_carry_the_call_sites_largest_change_first_and_times_in_us() -> None:
    ops = pd.DataFrame([["decreased", "runtime", "cudaLaunchKernel", 3, 1, -2, 6000, 2000, -4000],
                        ["unchanged", "kernel", "add_kernel", 2, 2, 0, 1500, 1500, 0]], columns=OP_COLUMNS)
    sites = pd.DataFrame([["runtime", "cudaLaunchKernel", "model.py:12 (forward)", 1, 0, -1],
                          ["runtime", "cudaLaunchKernel", "model.py:20 (forward)", 2, 1, -1]], columns=SITE_COLUMNS)
    diff = OpDiff(ops=ops, sites=sites, unlaunched=(0, 0))
    assert grid_rows(diff, "changed") == [{
        "change": "decreased", "kind": "runtime", "name": "cudaLaunchKernel", "a_count": 3, "b_count": 1, "delta": -2,
        "a_us": 6.0, "b_us": 2.0, "delta_us": -4.0, "call_sites": "model.py:12 (forward): 1 → 0; model.py:20 (forward): 2 → 1"}]
    assert [r["name"] for r in grid_rows(diff, "unchanged")] == ["add_kernel"]
    assert [c["field"] for c in ops_view(diff, "changed")[-1].columnDefs][-1] == "call_sites"
