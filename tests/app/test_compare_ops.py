"""The compare page's operator diff section as a plain function (ops_view): what it says and lists."""

from __future__ import annotations

import pandas as pd

from portscope.app.pages.compare_ops import NAME_CHARS, ops_view
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
    assert long_name not in texts and long_name[: NAME_CHARS - 1] + "…" in texts  # cut short, whole in the tooltip
    assert "Call sites whose count changed (A → B)" not in texts  # no call site changed: no column, a note instead
    assert any(t.startswith("No call site's count changed") for t in texts)
    assert _texts(ops_view(OpDiff(ops=ops, sites=pd.DataFrame(columns=SITE_COLUMNS), unlaunched=(0, 0)), "unchanged"))[-1] == (
        "No operator in this set.")
