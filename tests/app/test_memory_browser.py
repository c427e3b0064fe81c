"""Memory in the viewer, in headless Chromium: the region page's memory table and call sites, the compare page's
memory section, and the timeline's memory lane drawn as levels that follow a zoom.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless tests/app/test_memory_browser.py
The trace is tests/ingest/memory_trace.py (its figures worked out in tests/ingest/test_memory.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from dash.testing.wait import until
from plot_clicks import click_on_lane

from portscope.app import urls
from portscope.ingest import read_trace, write_trace
from portscope.ingest.readers import read_kineto
from portscope.ingest.region_tree import region_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))
from memory_trace import EVENTS  # noqa: E402

pytestmark = pytest.mark.browser


def table_rows(dash_duo, css: str) -> list[list[str]]:
    return [[td.text for td in tr.find_elements("css selector", "td")] for tr in dash_duo.find_elements(f"{css} tbody tr")]


def level_points(dash_duo, graph: str) -> list[int]:
    """Bytes of x values of each memory-level trace of a timeline (typed arrays or lists)."""
    return dash_duo.driver.execute_script(
        "const plot = document.querySelector(`#${arguments[0]} .js-plotly-plot`);"
        "return plot.data.filter(t => (t.name || '').startsWith('memory allocated'))"
        "  .map(t => !t.x ? 0 : t.x.bdata ? atob(t.x.bdata).length : (t.x.byteLength ?? t.x.length));", graph)


def exact_ns(shown: str) -> int:
    """The exact figure of a time shown as "40.1 µs (40,087 ns)" (or "87 ns")."""
    return int(shown.rsplit("(", 1)[-1].split(" ns")[0].replace(",", ""))


@pytest.fixture
def run(tmp_path: Path) -> tuple[Path, str, Path]:
    folder = tmp_path / "runs"
    folder.mkdir()
    source = tmp_path / "mem.json"
    source.write_text(json.dumps({"schemaVersion": 1, "traceEvents": EVENTS}))
    path = write_trace(read_kineto(source), folder / "mem.arrow")
    return folder, read_trace(path).content_hash(), path


def test_region_page_memory(dash_duo, make_app, run) -> None:
    folder, run_id, _ = run
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.region(run_id, "ProfilerStep#1", 0))
    dash_duo.wait_for_element("#region-memory-table", timeout=20)
    assert table_rows(dash_duo, "#region-memory-table") == [["cuda:0", "3.5 KB", "3.0 KB", "2", "2.5 KB", "4.1 KB"]]
    dash_duo.wait_for_element("#region-memory-sites .ag-row", timeout=10)
    sites = dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('#region-memory-sites .ag-center-cols-container .ag-row'))"
        ".sort((a, b) => a.getAttribute('row-index') - b.getAttribute('row-index'))"
        ".map(r => [r.querySelector('[col-id=call_site]').innerText, r.querySelector('[col-id=allocated_bytes]').innerText]);")
    assert sites == [["model.py:20 (forward)", "2.0 KB"], ["model.py:10 (forward)", "500 B"]]  # as the table above says bytes
    assert dash_duo.get_logs() == []


def test_compare_memory_and_levels_follow_a_zoom(dash_duo, make_app, run, tmp_path: Path) -> None:
    folder, run_id, path = run
    source = tmp_path / "again.json"  # the same events under another name: a second run, B's whole run against A's step
    source.write_text(json.dumps({"schemaVersion": 1, "traceEvents": EVENTS}))
    second = read_trace(write_trace(read_kineto(source), folder / "again.arrow"))
    other = second.content_hash()
    ra, rb = region_ids(read_trace(path), "ProfilerStep#1")[0], region_ids(second, "again.json")[0]
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{run_id}/{other}?ra={ra}&rb={rb}")
    dash_duo.wait_for_element("#compare-memory-table", timeout=20)
    assert table_rows(dash_duo, "#compare-memory-table") == [["cuda:0", "3.5 KB", "7.0 KB", "+3.5 KB", "3.0 KB", "7.0 KB"]]
    assert "(no call site)" in dash_duo.find_element("#compare-memory").text  # the 4000 B after the step
    dash_duo.wait_for_element("#compare-timelines .main-svg", timeout=20)
    before = level_points(dash_duo, "compare-timelines")
    assert len(before) == 2 and all(n > 0 for n in before)
    def zoomed() -> bool:  # zoom into the step: the levels are reduced to the new window on the server (the zoom is
        dash_duo.driver.execute_script(  # asked again while no answer came: one made as the page settles can be lost)
            "Plotly.relayout(document.querySelector('#compare-timelines .js-plotly-plot'), {'xaxis.range[0]': 0, 'xaxis.range[1]': 50000});")
        return level_points(dash_duo, "compare-timelines") != before

    until(zoomed, 20, poll=1)
    assert dash_duo.get_logs() == []


def test_timeline_legend_names_the_memory_levels(dash_duo, make_app, run) -> None:
    # Lanes of the trace: the host thread (three operators: compute) and the memory lane of cuda:0, whose bars are
    # drawn under its levels. The legend names the levels, not the kind those bars are coded as (annotation).
    folder, run_id, _ = run
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.timeline(run_id))
    dash_duo.wait_for_element("#timeline-graph .legendtext", timeout=20)
    legend = [e.text for e in dash_duo.find_elements("#timeline-graph .legendtext")]
    assert legend == ["compute", "memory allocated", "memory reserved"]
    assert dash_duo.get_logs() == []


def memory_click(dash_duo, graph: str, panel: str, lane: str, x: float) -> dict[str, str]:
    """A real mouse click on a timeline at time `x` on the lane named `lane` of a panel ("" the first, "2" the
    second: its axes' suffix); the memory detail's facts it brings."""
    dash_duo.wait_for_element(f"#{graph} .gl-container canvas", timeout=20)
    time.sleep(1)
    click_on_lane(dash_duo, graph, lane, x, panel)
    dash_duo.wait_for_element("#memory-detail dd", timeout=10)
    return dict(zip([e.text for e in dash_duo.find_elements("#memory-detail dt")],
                    [e.text for e in dash_duo.find_elements("#memory-detail dd")], strict=True))  # fmt: skip


def test_a_click_on_the_memory_lane_shows_the_memory_then(dash_duo, make_app, run) -> None:
    # A real mouse click in Chromium on cuda:0's memory lane at 40 µs (drawn as levels: no bar there). From EVENTS
    # (tests/ingest/memory_trace.py): aten::mm's 2000 B at 35 µs set the level to 3500 B in ProfilerStep#1, model.py:20
    # called it, 4096 B were reserved then.
    folder, run_id, _ = run
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.timeline(run_id))
    facts = memory_click(dash_duo, "timeline-graph", "", "memory cuda:0", 40_000)
    assert abs(exact_ns(facts.pop("at")) - 40_000) < 1_000, facts  # the click's time, to a pixel
    assert facts == {"memory": "cuda:0", "allocated": "3.5 KB (3,500 B)", "reserved": "4.1 KB (4,096 B)",
                     "last change": "+2.0 KB (2,000 B) at 35 µs (35,000 ns)", "by operator": "aten::mm",
                     "call site": "model.py:20 (forward)", "region": "ProfilerStep#1"}  # fmt: skip
    if os.environ.get("PORTSCOPE_SCREENSHOTS"):
        dash_duo.driver.save_screenshot(os.path.join(os.environ["PORTSCOPE_SCREENSHOTS"], "memory-click.png"))
    assert dash_duo.get_logs() == []


def test_a_click_on_the_second_runs_memory_lane_on_the_compare_page(dash_duo, make_app, run, tmp_path: Path) -> None:
    # Run B (the same events under another name) is compared whole: a click on its memory lane (the second panel)
    # at 155 µs lands after the step, where aten::empty's 4000 B at 151 µs set the level to 7000 B (8192 B reserved)
    # in B's root region, which is named after B's file: the click was read in B's panel, not A's.
    folder, run_id, path = run
    source = tmp_path / "again.json"
    source.write_text(json.dumps({"schemaVersion": 1, "traceEvents": EVENTS}))
    second = read_trace(write_trace(read_kineto(source), folder / "again.arrow"))
    ra, rb = region_ids(read_trace(path), "mem.json")[0], region_ids(second, "again.json")[0]
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{run_id}/{second.content_hash()}?ra={ra}&rb={rb}")
    facts = memory_click(dash_duo, "compare-timelines", "2", "memory cuda:0", 155_000)
    assert abs(exact_ns(facts.pop("at")) - 155_000) < 1_000, facts  # the click's time, to a pixel
    assert facts == {"memory": "cuda:0", "allocated": "7.0 KB (7,000 B)", "reserved": "8.2 KB (8,192 B)",
                     "last change": "+4.0 KB (4,000 B) at 151 µs (151,000 ns)", "by operator": "aten::empty",
                     "region": "again.json"}  # fmt: skip
    assert dash_duo.get_logs() == []
