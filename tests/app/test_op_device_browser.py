"""Device time per operator on the region page, and the port diff leading the compare page, in headless Chromium.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless tests/app/test_op_device_browser.py
The hand-written CUDA / ROCm pair is tests/ingest/port_pair.py (its figures worked out in tests/ingest/test_op_device.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dash.testing.wait import until

from portscope.app import urls
from portscope.ingest import read_trace
from portscope.ingest.region_tree import region_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))
from port_pair import CUDA, ROCM, convert  # noqa: E402

pytestmark = pytest.mark.browser


def grid_rows(dash_duo, grid: str, columns: list[str]) -> list[list[str]]:
    """A grid's rendered rows in display order, cells in column order."""
    return dash_duo.driver.execute_script(
        "const [grid, cols] = arguments;"
        "const rows = Array.from(document.querySelectorAll(`#${grid} .ag-center-cols-container .ag-row`));"
        "rows.sort((a, b) => Number(a.getAttribute('row-index')) - Number(b.getAttribute('row-index')));"
        "return rows.map(r => cols.map(c => { const td = r.querySelector(`.ag-cell[col-id=\"${c}\"]`);"
        " return td ? td.innerText : null; }));", grid, columns)


def highlighted(dash_duo) -> list[int]:
    """Bytes of x values drawn in each panel's highlight trace of the compare timelines (typed arrays or lists)."""
    return dash_duo.driver.execute_script(
        "const plot = document.querySelector('#compare-timelines .js-plotly-plot');"
        "return plot.data.filter(t => t.name === 'search matches')"
        "  .map(t => !t.x ? 0 : t.x.bdata ? atob(t.x.bdata).length : (t.x.byteLength ?? t.x.length));")


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, list[tuple[str, int]]]:
    folder = tmp_path / "pair"
    folder.mkdir()
    paths = [convert(folder, "cuda", CUDA), convert(folder, "rocm", ROCM)]
    return folder, [(t.content_hash(), region_ids(t, "ProfilerStep#1")[0]) for t in map(read_trace, paths)]


def test_region_page_device_time_per_operator(dash_duo, make_app, pair) -> None:
    folder, [(cuda, _), _] = pair
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.region(cuda, "ProfilerStep#1", 0))
    dash_duo.wait_for_element("#region-device-grid .ag-row", timeout=20)
    columns = ["operator", "category", "calls", "device_calls", "device_self_us", "device_total_us", "share_pct"]
    got = grid_rows(dash_duo, "region-device-grid", columns)
    assert got[0] == ["aten::cudnn_convolution", "convolution", "1", "1", "35", "35", "47.3"]  # 35 of 74 µs
    assert ["aten::add", "elementwise", "2", "1", "3", "3", "4.05"] in got
    assert "74 µs of device work in this region, 4 µs of it launched outside any operator" in dash_duo.find_element("#_pages_content").text
    dash_duo.wait_for_element("#region-device-categories .main-svg", timeout=10)
    assert dash_duo.get_logs() == []


def test_compare_page_leads_with_the_port_diff(dash_duo, make_app, pair) -> None:
    folder, [(cuda, ra), (rocm, rb)] = pair
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{cuda}/{rocm}?ra={ra}&rb={rb}")
    dash_duo.wait_for_element("#compare-port-table .ag-row", timeout=20)
    columns = ["operator", "category", "a_calls", "b_calls", "a_us", "b_us", "delta_us", "own"]
    got = grid_rows(dash_duo, "compare-port-table", columns)
    assert got[0] == ["aten::_convolution", "convolution", "1", "1", "35", "50", "15", "A: aten::cudnn_convolution; B: aten::miopen_convolution"]
    assert [r[0] for r in got] == ["aten::_convolution", "aten::scaled_dot_product_attention", "aten::add", "aten::addmm"]
    # the section comes before the signals
    text = dash_duo.find_element("#_pages_content").text
    assert text.index("Device time by operator, aligned by what it computes") < text.index("Signals")
    dash_duo.wait_for_element("#compare-port-categories .main-svg", timeout=10)
    dash_duo.wait_for_element("#compare-timelines .main-svg", timeout=20)
    until(lambda: highlighted(dash_duo) == [0, 0], 10)
    dash_duo.find_element("#compare-port-table .ag-row[row-index='0'] .ag-cell[col-id='operator']").click()
    until(lambda: "aten::_convolution: 2 device slices of A and 1 of B highlighted" in dash_duo.find_element("#compare-port-status").text, 10)
    until(lambda: all(n > 0 for n in highlighted(dash_duo)), 10)
    assert dash_duo.get_logs() == []


def test_same_run_compare_has_the_table_without_highlights(dash_duo, make_app, pair) -> None:
    folder, [(cuda, ra), _] = pair
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{cuda}/{cuda}?ra={ra}&rb={ra}")
    dash_duo.wait_for_element("#compare-port-table-alone .ag-row", timeout=20)
    dash_duo.find_element("#compare-port-table-alone .ag-row[row-index='0'] .ag-cell[col-id='operator']").click()
    assert dash_duo.get_logs() == []
