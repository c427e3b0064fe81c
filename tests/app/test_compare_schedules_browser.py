"""The compare page's schedules section in headless Chromium: the tables and the two aligned timelines.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless tests/app/test_compare_schedules_browser.py
The pair is app/dev_samples.py's SCHEDULE_BASELINE / SCHEDULE_CHANGED (worked out in tests/ingest/test_schedule_diff.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dash.testing.wait import until
from selenium.webdriver.common.by import By

from portscope.app.dev_samples import write_schedule_pair
from portscope.ingest import read_trace
from portscope.ingest.viewport import KINDS

pytestmark = pytest.mark.browser
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def table_rows(dash_duo, table_id: str) -> list[list[str]]:
    return [[td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")] for tr in dash_duo.find_elements(f"#{table_id} tbody tr")]


def figure(dash_duo) -> dict:
    """What the aligned timelines' graph holds: axes, lanes, critical-path marks, band labels."""
    return dash_duo.driver.execute_script("""
        const g = document.querySelector('#compare-schedule-timelines .js-plotly-plot');
        const crit = g.data.filter(d => d.name === 'critical path');
        return {range: g._fullLayout.xaxis.range, matches: g.layout.xaxis2.matches,
                lanes: [g.layout.yaxis.ticktext, g.layout.yaxis2.ticktext],
                critical: crit.map(d => [Array.from(d.x), Array.from(d.y), d.xaxis]),
                labels: g.layout.annotations.map(a => a.text)};""")


def test_a_schedule_pair_compared_engine_by_engine_and_drawn_aligned(dash_duo, make_app, tmp_path) -> None:
    a, b = (read_trace(p).content_hash() for p in write_schedule_pair(tmp_path / "pair"))
    dash_duo.start_server(make_app(trace_paths=(tmp_path / "pair",)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{a}/{b}")
    dash_duo.wait_for_element("#compare-schedule-engines", timeout=20)
    assert dash_duo.find_element("#compare-schedule-verdict").text.startswith(
        "B: schedule 60 ns -> 50 ns (-10 ns, -16.7%); critical path 60 ns -> 50 ns")
    rows = {r[0]: r[1:] for r in table_rows(dash_duo, "compare-schedule-engines")}
    # engine: kind, busy A, busy B, Δ, Δ %, idle A, idle B, critical A, critical B, slices A, slices B
    assert rows["dma"] == ["dma_h2d", "20 ns", "10 ns", "−10 ns", "−50.0 %", "0", "0", "10 ns", "5 ns", "2", "2"]
    assert rows["matrix"][1:8] == ["30 ns", "30 ns", "0", "+0.0 %", "10 ns", "5 ns", "30 ns"]
    assert rows["vector"][1:11] == ["20 ns", "15 ns", "−5 ns", "−25.0 %", "40 ns", "35 ns", "20 ns", "15 ns", "1", "2"]
    critical = [r[:6] for r in table_rows(dash_duo, "compare-schedule-critical")]
    assert critical == [["shorter", "vector", "add", "20 ns", "10 ns", "−10 ns"],
                        ["shorter", "dma", "load x", "10 ns", "5 ns", "−5 ns"],
                        ["added", "vector", "relu", "0", "5 ns", "+5 ns"]]
    assert table_rows(dash_duo, "compare-schedule-idle") == [["dependency", "40 ns", "35 ns", "−5 ns"],
                                                             ["transfer", "10 ns", "5 ns", "−5 ns"]]
    # two timelines, one above the other, on one axis from 0 (B's slices start at 1000 in its file)
    dash_duo.wait_for_element("#compare-schedule-timelines .gl-container canvas", timeout=20)
    fig = figure(dash_duo)
    assert fig["matches"] == "x" and fig["range"] == [0, 60]
    assert fig["lanes"] == [["dma", "matrix", "vector"]] * 2
    assert fig["critical"] == [  # the critical paths, last slice first: A add <- mm <- load x; B relu <- add <- mm <- load x
        [[40, 60, None, 10, 40, None, 0, 10, None], [2, 2, None, 1, 1, None, 0, 0, None], "x"],
        [[45, 50, None, 35, 45, None, 5, 35, None, 0, 5, None], [2, 2, None, 2, 2, None, 1, 1, None, 0, 0, None], "x2"],
    ]
    assert "kernel: 60 ns" in fig["labels"] and "kernel: 50 ns" in fig["labels"]
    time.sleep(1)  # dcc.Graph listens for relayout events once the figure is set up
    dash_duo.driver.execute_script(  # a click on B's vector lane at 47 ns: relu (45..50 from B's start, 1045 in its file)
        "const g = document.querySelector('#compare-schedule-timelines .js-plotly-plot');"
        f"g.emit('plotly_click', {{points: [{{curveNumber: {len(KINDS)}, x: 47, y: 2}}]}});")  # B's compute bars
    dash_duo.wait_for_element("#compare-schedule-slice", timeout=10)
    facts = [dd.text for dd in dash_duo.find_elements("#compare-schedule-slice dd")]
    assert facts[:5] == ["vector", "compute", "relu", "1.04 µs (1,045 ns)", "5 ns"]
    assert dash_duo.find_element("#compare-schedule-detail h4").text == "B: a slice 45 ns after the region's start"
    dash_duo.driver.execute_script(  # zoom on the second panel: both follow, the server answers with ticks for 0..20 ns
        "const g = document.querySelector('#compare-schedule-timelines .js-plotly-plot'); Plotly.relayout(g, {'xaxis2.range': [0, 20]});")
    until(lambda: dash_duo.driver.execute_script(
        "return document.querySelector('#compare-schedule-timelines .js-plotly-plot').layout.xaxis2.ticktext.includes('20 ns');"), 10)
    assert dash_duo.get_logs() == []


def test_eager_against_compiled_sample_shows_where_b_got_shorter(dash_duo, make_app, tmp_path) -> None:
    sample = SAMPLES / "llama_fp16-npu_eager_vs_compiled.arrow"
    run = read_trace(sample).content_hash()
    dash_duo.start_server(make_app(trace_paths=(sample,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{run}/{run}?ra=1&rb=3")  # eager:warm against compiled:warm
    dash_duo.wait_for_element("#compare-schedule-timelines .gl-container canvas", timeout=30)
    rows = {r[0]: r for r in table_rows(dash_duo, "compare-schedule-engines")}
    assert rows["host"][5] == "−100.0 %" and rows["matrix"][3] != "0"  # the host's work is gone; the matrix engine works in both
    fig = figure(dash_duo)
    assert fig["range"][0] == 0 and fig["matches"] == "x"
    assert [c[2] for c in fig["critical"]] == ["x", "x2"] and all(len(c[0]) for c in fig["critical"])
    dash_duo.driver.execute_script("document.querySelector('#compare-schedules').scrollIntoView();")
    time.sleep(1)
    dash_duo.driver.save_screenshot(str(tmp_path / "compare-schedules.png"))
    assert dash_duo.get_logs() == []
