"""The compare page's operator diff section in headless Chromium.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless tests/app/test_compare_ops_browser.py
The hand-written pair is tests/ingest/kineto_pair.py (its figures worked out in tests/ingest/test_op_diff.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dash.testing.wait import until

from portscope.ingest import read_trace
from portscope.ingest.region_tree import region_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))
from kineto_pair import CONTROL, TEST, convert  # noqa: E402

pytestmark = pytest.mark.browser


COLUMNS = ["change", "kind", "name", "a_count", "b_count", "delta", "a_us", "b_us", "delta_us", "call_sites"]


def rows(dash_duo) -> list[list[str]]:
    """The grid's rendered rows in display order, cells in column order, read in one script (redrawn on a new set)."""
    return dash_duo.driver.execute_script(
        "const cols = arguments[0];"
        "const rows = Array.from(document.querySelectorAll('#compare-ops-table .ag-center-cols-container .ag-row'));"
        "rows.sort((a, b) => Number(a.getAttribute('row-index')) - Number(b.getAttribute('row-index')));"
        "return rows.map(r => cols.map(c => { const td = r.querySelector(`.ag-cell[col-id=\"${c}\"]`);"
        " return td ? td.innerText : null; }));", COLUMNS)


def test_op_diff_section_sets_and_call_sites(dash_duo, make_app, tmp_path) -> None:
    folder = tmp_path / "pair"
    folder.mkdir()
    paths = [convert(folder, "control", CONTROL), convert(folder, "test", TEST)]
    (a, ra), (b, rb) = ((t.content_hash(), region_ids(t, "ProfilerStep#1")[0]) for t in map(read_trace, paths))
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{a}/{b}?ra={ra}&rb={rb}")
    dash_duo.wait_for_element("#compare-ops-table .ag-row", timeout=20)
    assert dash_duo.find_element("#compare-ops-summary").text == (
        "HTA's sets (by name alone): 10 names: added 3 · deleted 2 · increased 1 · decreased 2 · unchanged 2")
    assert "1 device slices of B's trace were launched before the trace began" in dash_duo.find_element("#compare-ops").text
    got = rows(dash_duo)  # all changed: added, deleted, increased, decreased (unchanged left out)
    assert [r[:6] for r in got] == [
        ["added", "operator", "CompiledFunction", "0", "1", "1"],  # by |Δ count|, then |Δ time|: 60, 4, 2 µs
        ["added", "kernel", "gemm_b", "0", "1", "1"],
        ["added", "runtime", "cudaGraphLaunch", "0", "1", "1"],
        ["deleted", "operator", "aten::mm", "1", "0", "-1"],
        ["deleted", "kernel", "gemm_a", "1", "0", "-1"],
        ["increased", "operator", "aten::relu", "1", "2", "1"],
        ["decreased", "runtime", "cudaLaunchKernel", "3", "1", "-2"],
        ["decreased", "operator", "aten::add", "2", "1", "-1"],
    ]
    launch = got[6]
    assert launch[6:9] == ["6", "2", "-4"]  # µs
    assert launch[9] == "model.py:12 (forward): 1 → 0; model.py:20 (forward): 2 → 1"
    dash_duo.find_element("#compare-ops-set input[value='unchanged']").click()  # the unchanged set
    until(lambda: [r[2] for r in rows(dash_duo)] == ["add_kernel", "ProfilerStep#1"], 10)
    # unchanged in count, yet its call sites moved: one add_kernel now runs inside the CUDA graph at line 12
    assert rows(dash_duo)[0][9] == "model.py:12 (forward): 0 → 1; model.py:20 (forward): 2 → 1"
    dash_duo.find_element("#compare-ops-table .ag-header-cell[col-id='name']").click()  # sorted by name, A to Z
    until(lambda: [r[2] for r in rows(dash_duo)] == ["ProfilerStep#1", "add_kernel"], 10)
    assert dash_duo.get_logs() == []

