"""Trace strings are text everywhere: a trace whose names hold HTML/JS, uploaded through the page,
shows them literally and runs nothing (real headless Chromium).

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless -m browser tests/hardening
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from dash.testing.wait import until
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from portscope.app import urls
from portscope.ingest import read_trace, write_trace

pytestmark = pytest.mark.browser

SCRIPT = "<script>window.__xss = 1; alert(1)</script>"
IMG = "<img src=x onerror=\"window.__xss = 2; alert(2)\">"
REGION = "<svg onload=alert(3)>forward"
FILE_NAME = "<img src=x onerror=alert(4)>.arrow"


def _replace(table: pa.Table, column: str, old: str, new: str) -> pa.Table:
    col = table.column(column).cast(pa.string())
    fixed = pc.if_else(pc.equal(col, old), new, col)
    return table.set_column(table.schema.get_field_index(column), pa.field(column, pa.string(), nullable=True), fixed)


def hostile_trace(source: Path, folder: Path) -> Path:
    """The demo trace with hostile operator names, call site and region name."""
    trace = read_trace(source)
    t = trace.tables
    for old, new in (("aten::neg", SCRIPT), ("aten::rsqrt", IMG)):
        t["ops"] = _replace(t["ops"], "name", old, new)
        t["signals"] = _replace(t["signals"], "op_name", old, new)
    t["signals"] = t["signals"].set_column(
        t["signals"].schema.get_field_index("call_site"), "call_site", pa.array([IMG] * t["signals"].num_rows, pa.string())
    )
    first = t["regions"].column("name")[0].as_py()
    t["regions"] = _replace(t["regions"], "name", first, REGION)
    return write_trace(trace, folder / FILE_NAME)


def assert_nothing_ran(dash_duo) -> None:  # type: ignore[no-untyped-def]
    try:
        text = dash_duo.driver.switch_to.alert.text
    except NoAlertPresentException:
        text = None
    assert text is None, f"an alert opened: {text!r}"
    assert dash_duo.driver.execute_script("return window.__xss === undefined")
    assert not dash_duo.driver.find_elements(By.CSS_SELECTOR, "#react-entry-point img[src='x'], #react-entry-point svg[onload]")


def test_html_in_trace_strings_is_shown_as_text_and_runs_nothing(dash_duo, make_app, demo_paths, tmp_path: Path) -> None:
    path = hostile_trace(demo_paths["eager"], tmp_path)
    rid = read_trace(path).content_hash()
    dash_duo.start_server(make_app(trace_paths=()))
    dash_duo.wait_for_contains_text("#runs-table", "No traces yet", timeout=15)
    dash_duo.driver.find_element(By.ID, "upload-file-input").send_keys(str(path))
    dash_duo.wait_for_contains_text("#upload-messages", f"Loaded {FILE_NAME}", timeout=20)  # the file name, literally
    assert_nothing_ran(dash_duo)
    dash_duo.find_element(f"#upload-messages a[href='/run/{rid}']").click()
    dash_duo.wait_for_contains_text("#regions-list", REGION, timeout=15)
    assert_nothing_ran(dash_duo)
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}{urls.region(rid, REGION)}")
    dash_duo.wait_for_element("#operator-grid", timeout=15)
    cells = until(lambda: [c.text for c in dash_duo.find_elements("#operator-grid .ag-cell")] or None, 15)
    assert SCRIPT in cells and IMG in cells, cells
    cell = next(c for c in dash_duo.find_elements("#operator-grid .ag-cell") if c.text == IMG)
    cell.click()  # the detail panel shows the call site (also hostile)
    dash_duo.wait_for_contains_text("#operator-detail", IMG, timeout=10)
    assert_nothing_ran(dash_duo)
