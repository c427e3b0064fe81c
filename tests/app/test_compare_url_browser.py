"""The Compare page in headless Chromium: a region picked for A or B is written into the URL (?ra=, ?rb=), replacing
its history entry, so a reload (or the link shared) brings back the pair on screen.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/python -m pytest --headless tests/app/test_compare_url_browser.py
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from dash.testing.wait import until

from portscope.app import urls
from portscope.ingest import read_trace

pytestmark = pytest.mark.browser

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
SHOTS = Path("/tmp/appfix1")


def pick(dash_duo, dropdown_id: str, index: int) -> None:
    """Open a dcc.Dropdown and click its option number `index`."""
    dash_duo.find_element(f"#{dropdown_id}").click()
    dash_duo.wait_for_element(f".dash-dropdown-option[data-option-index='{index}']", timeout=5).click()


def shown(dash_duo, dropdown_id: str) -> str:
    return dash_duo.find_element(f"#{dropdown_id}-value").text


def test_a_region_picked_is_in_the_url_and_a_reload_keeps_it(dash_duo, make_app) -> None:
    npu, cuda = (read_trace(SAMPLES / f"llama_{name}.arrow").content_hash() for name in ("fp16-npu_forward", "cuda_forward"))
    dash_duo.start_server(make_app(trace_paths=(SAMPLES,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.compare(npu, cuda))
    dash_duo.wait_for_element("#compare-signals-table", timeout=15)
    assert (shown(dash_duo, "compare-region-a"), shown(dash_duo, "compare-region-b")) == (
        "forward:cold [cold, eager]", "forward:cold [cold, eager]")  # the pair the page chose
    entries = dash_duo.driver.execute_script("return window.history.length;")

    pick(dash_duo, "compare-region-a", 1)
    until(lambda: parse_qs(urlsplit(dash_duo.driver.current_url).query) == {"ra": ["1"], "rb": ["0"]}, timeout=10)
    assert urlsplit(dash_duo.driver.current_url).path == urls.compare(npu, cuda)
    assert dash_duo.driver.execute_script("return window.history.length;") == entries  # replaced, not pushed
    pick(dash_duo, "compare-region-b", 1)
    until(lambda: parse_qs(urlsplit(dash_duo.driver.current_url).query) == {"ra": ["1"], "rb": ["1"]}, timeout=10)
    SHOTS.mkdir(exist_ok=True)
    dash_duo.driver.save_screenshot(str(SHOTS / "compare-picked.png"))

    dash_duo.driver.refresh()  # the URL brings back the pair on screen
    dash_duo.wait_for_element("#compare-signals-table", timeout=15)
    until(lambda: shown(dash_duo, "compare-region-a") == "forward:warm [warm, eager]", timeout=10)
    assert shown(dash_duo, "compare-region-b") == "forward:warm [warm, eager]"
    dash_duo.driver.save_screenshot(str(SHOTS / "compare-reloaded.png"))
    assert dash_duo.get_logs() == []
