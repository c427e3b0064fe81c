"""The Query page in headless Chromium: a second query's text column after a first query's numeric one, the URL
after Run (it brings back what is on screen), headers that show their whole name.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/python -m pytest --headless tests/app/test_query_url_browser.py
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from dash.testing.wait import until
from selenium.webdriver.common.by import By
from test_query_browser import grid_rows, type_query

from portscope.app import urls
from portscope.ingest import read_trace

pytestmark = pytest.mark.browser

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
SHOTS = Path("/tmp/appfix1")


def _id(name: str) -> str:
    return read_trace(SAMPLES / f"{name}.arrow").content_hash()


def tick(dash_duo, run_id: str) -> None:
    box = dash_duo.driver.find_element(By.CSS_SELECTOR, f"#query-runs input[value='{run_id}']")
    box.click()


def open_first_query(dash_duo, make_app) -> tuple[str, str]:
    """Open `/query` on one run and a query of one numeric column (its answer shown); the ids of two runs."""
    h100, mi300 = _id("bert_small_h100"), _id("bert_small_mi300")
    dash_duo.start_server(make_app(trace_paths=(SAMPLES,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.query([h100], "SELECT count(*) FROM fallbacks"))
    dash_duo.wait_for_contains_text("#query-runs", "bert_small_mi300.arrow", timeout=15)
    until(lambda: grid_rows(dash_duo) == [["0"]], timeout=20)
    return h100, mi300


SECOND = "SELECT run, count(*) n FROM ops GROUP BY run ORDER BY run"


def test_a_text_column_where_the_last_query_had_a_number_shows_its_text(dash_duo, make_app) -> None:
    _, mi300 = open_first_query(dash_duo, make_app)
    tick(dash_duo, mi300)
    type_query(dash_duo, SECOND)
    until(lambda: len(grid_rows(dash_duo)) == 2, timeout=20)
    rows = grid_rows(dash_duo)
    assert rows == [["bert_small_h100", "479"], ["bert_small_mi300", "519"]]  # not "Invalid Number"
    SHOTS.mkdir(exist_ok=True)
    dash_duo.driver.save_screenshot(str(SHOTS / "query-after-run.png"))
    assert dash_duo.get_logs() == []


def test_run_writes_the_runs_and_the_query_into_the_url_and_a_reload_brings_them_back(dash_duo, make_app) -> None:
    h100, mi300 = open_first_query(dash_duo, make_app)
    entries = dash_duo.driver.execute_script("return window.history.length;")
    tick(dash_duo, mi300)
    type_query(dash_duo, SECOND)
    until(lambda: parse_qs(urlsplit(dash_duo.driver.current_url).query) == {"runs": [f"{h100},{mi300}"], "sql": [SECOND]},
          timeout=10)
    assert urlsplit(dash_duo.driver.current_url).path == "/query"
    assert dash_duo.driver.execute_script("return window.history.length;") == entries  # replaced, not pushed

    dash_duo.driver.refresh()  # the URL brings back what was on screen
    dash_duo.wait_for_contains_text("#query-runs", "bert_small_mi300.arrow", timeout=15)
    until(lambda: [r[0] for r in grid_rows(dash_duo)] == ["bert_small_h100", "bert_small_mi300"], timeout=20)
    assert dash_duo.find_element("#query-sql").get_attribute("value") == SECOND
    ticked = dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('#query-runs input:checked')).map(i => i.value);")
    assert sorted(ticked) == sorted([h100, mi300])
    dash_duo.driver.save_screenshot(str(SHOTS / "query-reloaded.png"))
    assert dash_duo.get_logs() == []


def test_grid_headers_show_their_whole_names(dash_duo, make_app) -> None:
    """Many columns with long names: each header shows its whole name (wrapped), none cut off with an ellipsis."""
    names = ["Dev count", "Shared memory bytes", "device_time_per_kernel_us", "run", "Host bounces d2h", "Compiles",
             "Operators with fallbacks", "Kernel launches", "Bytes moved host to device", "Verdict"]
    sql = "SELECT " + ", ".join(f"{i} AS \"{name}\"" for i, name in enumerate(names))
    dash_duo.start_server(make_app(trace_paths=(SAMPLES,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.query([_id("bert_small_h100")], sql))
    until(lambda: len(grid_rows(dash_duo)) == 1, timeout=20)
    headers = dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('#query-grid .ag-header-cell-text')).map(e =>"
        " [e.innerText, e.scrollWidth <= e.clientWidth + 1 && e.scrollHeight <= e.clientHeight + 1]);")
    assert sorted(h[0] for h in headers) == sorted(names)
    assert [h[0] for h in headers if not h[1]] == []  # every header whole: wrapped, not cut off
    dash_duo.driver.save_screenshot(str(SHOTS / "query-headers.png"))
    assert dash_duo.get_logs() == []
