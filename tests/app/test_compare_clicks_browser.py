"""The compare page's timelines in real headless Chromium: a real mouse click in the middle of a long bar selects it,
on the two runs' timelines and on the aligned schedules (Plotly hit-tests a bar's ends only; the hit points along
the bars answer the rest).

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless tests/app/test_compare_clicks_browser.py
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from dash.testing.wait import until
from plot_clicks import click_on_lane

from portscope.app.dev_samples import write_schedule_pair
from portscope.ingest import read_trace

pytestmark = pytest.mark.browser

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
RMSNORM = "llama_fp16-npu_rmsnorm_narrow.arrow"  # its compiler lane: one 40 ms compile, 205,288 .. 40,205,288 ns
FORWARD = "llama_fp16-npu_forward.arrow"


def facts(dash_duo, detail: str) -> dict[str, str]:
    pairs = dash_duo.driver.execute_script(
        f"return Array.from(document.querySelectorAll('#{detail} dt')).map(dt => [dt.innerText, dt.nextElementSibling.innerText]);")
    return dict(pairs or [])


def test_a_click_in_the_middle_of_a_long_bar_on_the_compare_timelines(dash_duo, make_app, tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in (RMSNORM, FORWARD):
        shutil.copy(SAMPLES / name, folder / name)
    a, b = (read_trace(folder / n).content_hash() for n in (RMSNORM, FORWARD))
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{a}/{b}")
    dash_duo.wait_for_element("#compare-timelines .gl-container canvas", timeout=30)
    time.sleep(1)
    start, end = 205_288, 40_205_288
    click_on_lane(dash_duo, "compare-timelines", "compiler", start + 0.5 * (end - start))  # A's compile, in its middle
    until(lambda: facts(dash_duo, "slice-detail").get("name") == "compile aten::mul.Tensor", 10)
    assert facts(dash_duo, "slice-detail")["duration"] == "40 ms (40,000,000 ns)"
    assert dash_duo.find_element("#timeline-detail h4").text == "A: a slice of llama_fp16-npu_rmsnorm_narrow"
    assert dash_duo.get_logs() == []


def test_a_click_in_the_middle_of_a_bar_on_the_aligned_schedules(dash_duo, make_app, tmp_path: Path) -> None:
    a, b = (read_trace(p).content_hash() for p in write_schedule_pair(tmp_path / "pair"))
    dash_duo.start_server(make_app(trace_paths=(tmp_path / "pair",)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{a}/{b}")
    dash_duo.wait_for_element("#compare-schedule-timelines .gl-container canvas", timeout=30)
    time.sleep(1)
    # A's matrix lane: mm from 10 to 40 ns (tests/app/test_compare_schedules_browser.py), clicked at 25 ns, its middle
    click_on_lane(dash_duo, "compare-schedule-timelines", "matrix", 25)
    until(lambda: facts(dash_duo, "compare-schedule-slice").get("name") == "mm", 10)
    assert dash_duo.find_element("#compare-schedule-detail h4").text == "A: a slice 10 ns after the region's start"
    assert dash_duo.get_logs() == []
