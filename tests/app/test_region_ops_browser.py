"""The region page's op table in real headless Chromium: pages and sorts served by the server (region_ops_page).

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless tests/app/test_region_ops_browser.py
"""

from __future__ import annotations

import os

import pytest
from dash.testing.wait import until
from selenium.common.exceptions import StaleElementReferenceException
from test_browser import grid_rows  # tests/app is on the path (no __init__.py)

from portscope.ingest import read_trace

pytestmark = pytest.mark.browser


def ops_rows(dash_duo) -> list[dict[str, str]]:  # noqa: ANN001
    """The op table's rendered rows, in their order on screen ([] while the grid re-renders them)."""
    try:
        return grid_rows(dash_duo, "ops-grid")
    except StaleElementReferenceException:
        return []


def test_a_nested_regions_op_table_pages_and_sorts_by_name(dash_duo, make_app, demo_paths) -> None:
    # demo eager run (app/dev_samples.py): "rmsnorm" holds ops 80..91, names cycling mm, add, pow, rsqrt
    rid = read_trace(demo_paths["eager"]).content_hash()
    dash_duo.start_server(make_app())
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{rid}/region/rmsnorm")
    rows = until(lambda: (lambda got: got if len(got) >= 12 else None)(ops_rows(dash_duo)), 15)
    assert [r["op_id"] for r in rows[:5]] == ["80", "81", "82", "83", "84"]
    assert rows[0]["name"] == "aten::mm" and rows[0]["dur_ns"] == "800"
    dash_duo.find_element("#ops-grid .ag-header-cell[col-id='name']").click()  # sort by name, ascending
    rows = until(lambda: (lambda got: got if got and got[0].get("op_id") == "81" else None)(ops_rows(dash_duo)), 15)
    assert [r["op_id"] for r in rows[:4]] == ["81", "85", "89", "80"]  # three add.Tensor in row order, then mm
    if os.environ.get("PORTSCOPE_SCREENSHOTS"):
        dash_duo.driver.execute_script("document.getElementById('ops-grid').scrollIntoView()")
        dash_duo.driver.save_screenshot(os.path.join(os.environ["PORTSCOPE_SCREENSHOTS"], "region-ops-sorted.png"))
    assert dash_duo.get_logs() == []
