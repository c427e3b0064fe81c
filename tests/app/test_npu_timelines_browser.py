"""NPU traces (issue 16) in the viewer, in real headless Chromium: their lanes, and a schedule's memory lanes.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless tests/app/test_npu_timelines_browser.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from portscope.ingest import write_trace
from portscope.ingest.convert import load_any

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).resolve().parents[1] / "vendor" / "fixtures"


def _converted(folder: Path, name: str) -> str:
    trace = load_any(FIXTURES / name)
    write_trace(trace, folder / f"{name.split('.')[0]}.arrow")
    return trace.content_hash()


def test_npu_lanes_and_memory_lanes(dash_duo, make_app, tmp_path: Path) -> None:
    folder = tmp_path / "npu"
    folder.mkdir()
    ascend = _converted(folder, "ascend_trace_view.json")
    schedule = _converted(folder, "furiosa_schedule.json")
    dash_duo.start_server(make_app(trace_paths=(folder,)))

    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{ascend}/timeline")
    dash_duo.wait_for_element("#timeline-graph .gl-container canvas", timeout=20)
    dash_duo.wait_for_contains_text("#timeline-status", "of 17 slices in view", timeout=10)
    ticks = [t.text for t in dash_duo.find_elements("#timeline-graph .ytick text")]
    for lane in ("host", "CANN", "host queue", "NPU Stream 2", "NPU Stream 9", "overlap Free"):
        assert lane in ticks
    dash_duo.driver.save_screenshot(str(tmp_path / "ascend.png"))

    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{schedule}/timeline")
    dash_duo.wait_for_element("#timeline-graph .gl-container canvas", timeout=20)
    dash_duo.wait_for_contains_text("#timeline-graph", "Sram (16,384 B)", timeout=10)
    # memory bands (their own y axis) above the resource lanes: compare where the labels sit on the page
    top = {t.text: t.location["y"] for t in dash_duo.find_elements("#timeline-graph g[class$='tick'] text") if t.text}
    assert top["Sram (16,384 B)"] < top["Dram (12,288 B)"] < top["DmaEngine"] < top["MainContext"]
    # one filled path per tier (SVG scatter): the 4 Sram and 3 Dram tensors as closed rectangles
    fills = dash_duo.find_elements("#timeline-graph .scatterlayer .trace .fills path")
    assert len(fills) >= 2
    dash_duo.driver.save_screenshot(str(tmp_path / "schedule.png"))
    assert dash_duo.get_logs() == []
