"""The Query page in headless Chromium: SQL over the ticked runs, the answer in the grid, DuckDB's message on a
bad query.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/python -m pytest --headless -p no:randomly tests/app/test_query_browser.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dash.testing.wait import until
from selenium.webdriver.common.keys import Keys

from portscope.app import urls
from portscope.ingest import read_trace

pytestmark = pytest.mark.browser

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def grid_rows(dash_duo) -> list[list[str]]:
    return dash_duo.driver.execute_script(
        "const rows = Array.from(document.querySelectorAll('#query-grid .ag-center-cols-container .ag-row'));"
        "rows.sort((a, b) => Number(a.getAttribute('row-index')) - Number(b.getAttribute('row-index')));"
        "return rows.map(r => Array.from(r.querySelectorAll('.ag-cell')).sort((a, b) =>"
        " Number(a.getAttribute('aria-colindex')) - Number(b.getAttribute('aria-colindex'))).map(c => c.innerText));")


def type_query(dash_duo, sql: str) -> None:
    box = dash_duo.find_element("#query-sql")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(sql)
    dash_duo.find_element("#query-run").click()


def test_query_page_answers_in_the_grid_and_shows_duckdbs_message(dash_duo, make_app, tmp_path: Path) -> None:
    h100, mi300 = (read_trace(SAMPLES / f"bert_small_{gpu}.arrow").content_hash() for gpu in ("h100", "mi300"))
    dash_duo.start_server(make_app(trace_paths=(SAMPLES,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.query([h100, mi300]))
    dash_duo.wait_for_contains_text("#query-runs", "bert_small_mi300.arrow", timeout=15)
    # report --ops: 309.4 µs of device work on the H100 (61 kernels and copies, 26 of them aten::addmm's 197.6 µs)
    type_query(dash_duo, "SELECT run, count(*) AS kernels, round(sum(dur) / 1e3, 1) AS device_us, "
                         "round(sum(dur) FILTER (operator = 'aten::addmm') / 1e3, 1) AS addmm_us FROM kernels GROUP BY run ORDER BY run")
    dash_duo.wait_for_element("#query-grid .ag-row", timeout=20)
    until(lambda: len(grid_rows(dash_duo)) == 2, timeout=10)
    rows = grid_rows(dash_duo)
    assert rows[0] == ["bert_small_h100", "61", "309.4", "197.6"] and rows[1][0] == "bert_small_mi300"
    assert "2 rows in" in dash_duo.find_element("#query-status").text
    SHOTS.mkdir(exist_ok=True)
    dash_duo.driver.save_screenshot(str(tmp_path / "query.png"))

    type_query(dash_duo, "SELECT nope FROM ops")
    dash_duo.wait_for_contains_text("#query-error", 'Referenced column "nope" not found', timeout=15)
    type_query(dash_duo, "COPY ops TO '/tmp/portscope-escape.csv'")
    dash_duo.wait_for_contains_text("#query-error", "only SELECT queries are allowed here", timeout=15)
    assert not Path("/tmp/portscope-escape.csv").exists()
    assert dash_duo.get_logs() == []
