"""The timeline page in real headless Chromium: a click anywhere on a long bar selects it; the zoom and the range
dragged over are kept in the URL and restored by a reload; a search matches operator names; long names do not widen
the runs, run and compare pages.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless tests/app/test_timeline_view_browser.py
Screenshots go to $PORTSCOPE_SCREENSHOTS when it is set.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from dash.testing.wait import until
from plot_clicks import click_on_lane
from selenium.webdriver.common.action_chains import ActionChains

from portscope.ingest import read_trace

pytestmark = pytest.mark.browser

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
RMSNORM = "llama_fp16-npu_rmsnorm_narrow.arrow"  # lanes: host, dispatch, compiler, dma_h2d, dma_d2h, vector, memory
COMPILE = (205_288, 40_205_288)  # the compiler lane's one slice: a 40 ms compile of aten::mul.Tensor
LONG = ("a_very_long_upload_name_from_a_tester_" + "x" * 250)[:242] + ".arrow"  # 248 characters


def serve(dash_duo, make_app, tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    """Serve sample traces under the given names ({sample: name}); their run ids by name."""
    folder = tmp_path / "runs"
    folder.mkdir()
    for sample, name in files.items():
        shutil.copy(SAMPLES / sample, folder / name)
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    return {name: read_trace(folder / name).content_hash() for name in files.values()}


def open_timeline(dash_duo, url: str) -> None:
    dash_duo.wait_for_page(url=url)
    dash_duo.wait_for_element("#timeline-graph .gl-container canvas", timeout=20)
    dash_duo.wait_for_contains_text("#timeline-status", "slices in view", timeout=10)
    time.sleep(1)


def screenshot(dash_duo, name: str) -> None:
    if os.environ.get("PORTSCOPE_SCREENSHOTS"):
        dash_duo.driver.save_screenshot(os.path.join(os.environ["PORTSCOPE_SCREENSHOTS"], name))


def click_at(dash_duo, lane: str, x: float) -> None:
    """A real mouse click on the timeline at time `x` on the lane named `lane`."""
    click_on_lane(dash_duo, "timeline-graph", lane, x)


def facts(dash_duo) -> dict[str, str]:
    """The clicked slice's facts, read in one go (the panel is re-rendered by every click)."""
    pairs = dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('#slice-detail dt')).map(dt => [dt.innerText, dt.nextElementSibling.innerText]);")
    return dict(pairs or [])


def test_a_click_anywhere_on_a_long_bar_selects_it(dash_duo, make_app, tmp_path: Path) -> None:
    run_id = serve(dash_duo, make_app, tmp_path, {RMSNORM: RMSNORM})[RMSNORM]
    open_timeline(dash_duo, f"{dash_duo.server_url}/run/{run_id}/timeline")
    start, end = COMPILE
    # the compile bar is ~1,200 px wide: its middle is ~600 px from either end, far past Plotly's 20 px hover distance
    click_at(dash_duo, "compiler", start + 0.5 * (end - start))
    until(lambda: facts(dash_duo).get("name") == "compile aten::mul.Tensor", 10)
    assert facts(dash_duo)["duration"] == "40 ms (40,000,000 ns)"
    screenshot(dash_duo, "click-middle-of-long-bar.png")
    click_at(dash_duo, "dispatch", 192_000)  # another slice (the dispatch of aten::mul.Tensor, 180,288 .. 205,288 ns) ...
    until(lambda: facts(dash_duo).get("engine") == "dispatch", 10)
    click_at(dash_duo, "compiler", start + 0.3 * (end - start))  # ... then 30 % into the compile: the compile again
    until(lambda: facts(dash_duo).get("name") == "compile aten::mul.Tensor", 10)
    assert dash_duo.get_logs() == []


def test_the_zoom_and_the_range_dragged_over_round_trip_through_the_url(dash_duo, make_app, tmp_path: Path) -> None:
    run_id = serve(dash_duo, make_app, tmp_path, {RMSNORM: RMSNORM})[RMSNORM]
    open_timeline(dash_duo, f"{dash_duo.server_url}/run/{run_id}/timeline")
    driver = dash_duo.driver

    def params() -> dict[str, list[str]]:
        return parse_qs(urlparse(driver.current_url).query)

    def view() -> list[float]:
        return driver.execute_script("return document.querySelector('#timeline-graph .js-plotly-plot')._fullLayout.xaxis.range;")

    assert params() == {}
    entries = driver.execute_script("return window.history.length;")
    body = dash_duo.find_element("body")
    dash_duo.find_element("#timeline-status").click()  # keys to the page, not to the search box
    for key in "wwwdd":
        body.send_keys(key)
        time.sleep(0.4)
    # 0.8^3 of the run around its centre, then two fifths of that to the right
    until(lambda: "view" in params() and abs(float(params()["view"][0].split(",")[1]) - view()[1]) < 1, 10)
    x0, x1 = view()
    whole = 40_211_409
    assert abs((x1 - x0) - 0.512 * whole) < 1 and abs(x0 - (0.244 * whole + 0.4 * 0.512 * whole)) < 1, (x0, x1)
    assert [float(v) for v in params()["view"][0].split(",")] == pytest.approx([x0, x1], abs=1e-3)
    assert driver.execute_script("return window.history.length;") == entries  # replaced, not pushed: one entry
    # a real drag over the lanes selects a range: into the URL as well
    layer = dash_duo.find_element("#timeline-graph .nsewdrag")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", layer)
    time.sleep(0.5)
    ActionChains(driver).move_to_element_with_offset(layer, -300, 0).click_and_hold().move_by_offset(250, 0).release().perform()
    dash_duo.wait_for_element("#timeline-range-engines", timeout=10)
    until(lambda: "range" in params(), 10)
    head = dash_duo.find_element("#timeline-range-head").text
    status = dash_duo.find_element("#timeline-status").text
    r0, r1 = (float(v) for v in params()["range"][0].split(","))
    assert x0 < r0 < r1 < x1
    screenshot(dash_duo, "url-before-reload.png")
    # a reload (or the link sent to someone) opens on the same zoom, with the range summed up and drawn
    driver.refresh()
    open_timeline(dash_duo, driver.current_url)
    assert view() == pytest.approx([x0, x1], abs=1e-3)
    assert dash_duo.find_element("#timeline-range-head").text == head
    assert dash_duo.find_element("#timeline-status").text == status
    box = driver.execute_script("return document.querySelector('#timeline-graph .js-plotly-plot').layout.selections;")
    assert [box[0]["x0"], box[0]["x1"]] == pytest.approx([r0, r1], abs=1e-3)
    screenshot(dash_duo, "url-after-reload.png")
    # a click on a bar in the restored view is read at that view's scale: the compile under the mouse
    click_at(dash_duo, "compiler", (x0 + x1) / 2)
    until(lambda: facts(dash_duo).get("name") == "compile aten::mul.Tensor", 10)
    # the whole run again (the modebar's autoscale): the view leaves the URL
    ActionChains(driver).move_to_element(dash_duo.find_element("#timeline-graph .nsewdrag")).perform()
    dash_duo.find_element("#timeline-graph .modebar-btn[data-title='Autoscale']").click()
    until(lambda: "view" not in params(), 10)
    until(lambda: dash_duo.find_element("#timeline-status").text.startswith("7 bars drawn for 15 of 15 slices in view"), 10)
    assert view()[0] <= 0 and view()[1] >= 40_211_409
    assert dash_duo.get_logs() == []


def test_a_search_matches_the_kernels_of_an_operator(dash_duo, make_app, tmp_path: Path) -> None:
    from selenium.webdriver.common.keys import Keys

    run_id = serve(dash_duo, make_app, tmp_path, {"bert_small_h100.arrow": "bert_small_h100.arrow"})["bert_small_h100.arrow"]
    open_timeline(dash_duo, f"{dash_duo.server_url}/run/{run_id}/timeline")
    box = dash_duo.find_element("#timeline-search")
    box.send_keys("addmm" + Keys.ENTER)  # no slice is named for aten::addmm: its GEMM kernels are
    dash_duo.wait_for_text_to_equal("#timeline-search-status", "26 slices match by their operator's name (aten::addmm)", timeout=10)
    box.send_keys(Keys.ENTER)
    dash_duo.wait_for_contains_text("#timeline-search-status", "(operator aten::addmm) on stream 7 at 1.34 ms", timeout=10)
    assert facts(dash_duo)["operator"] == "aten::addmm"
    screenshot(dash_duo, "search-by-operator.png")
    assert dash_duo.get_logs() == []


def test_long_names_do_not_widen_the_pages(dash_duo, make_app, tmp_path: Path) -> None:
    ran = serve(dash_duo, make_app, tmp_path, {"bert_small_h100.arrow": LONG, "bert_small_mi300.arrow": "bert_small_mi300.arrow"})
    driver = dash_duo.driver

    def overflow() -> int:
        return driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth;")

    dash_duo.wait_for_contains_text("#runs-list", "bert_small_mi300.arrow", timeout=15)
    assert overflow() <= 0
    link = dash_duo.find_element(f"#runs-list a[href='/run/{ran[LONG]}']")
    assert link.get_attribute("title") == LONG and link.size["width"] < 600  # cut, whole on hover
    screenshot(dash_duo, "runs-long-name.png")
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{ran[LONG]}")
    dash_duo.wait_for_element("#regions-list", timeout=15)
    assert overflow() <= 0
    assert dash_duo.find_element("#run-file").get_attribute("title") == LONG
    screenshot(dash_duo, "run-long-name.png")
    # the compare page's critical path: kernel names of hundreds of characters (cutlass, Tensile) on one line each
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{ran[LONG]}/{ran['bert_small_mi300.arrow']}")
    dash_duo.wait_for_element("#compare-schedule-critical", timeout=30)
    cells = dash_duo.find_elements("#compare-schedule-critical td .long-name")
    longest = max(cells, key=lambda c: len(c.get_attribute("title")))
    assert len(longest.get_attribute("title")) > 150 and longest.size["width"] < 600
    assert overflow() <= 0  # the title wraps; the link to A is cut, whole on hover
    link = dash_duo.find_element(f".links a[href='/run/{ran[LONG]}']")
    assert link.get_attribute("title") == f"A: {LONG.removesuffix('.arrow')} ({ran[LONG]})" and link.size["width"] < 600
    table = dash_duo.find_element("#compare-schedule-critical")
    assert table.location["x"] + table.size["width"] <= driver.execute_script("return window.innerWidth;")
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", table)
    screenshot(dash_duo, "compare-critical-path-long-names.png")
    assert dash_duo.get_logs() == []
