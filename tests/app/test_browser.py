"""The viewer in real headless Chromium (dash's pytest plugin).

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless -m browser tests/app
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dash.testing.wait import until
from selenium.webdriver.common.by import By

from portscope.app.dev_samples import ODD_MODULE
from portscope.ingest import read_trace
from portscope.ingest.report import region_report_data
from portscope.ingest.summary import summarize
from portscope.ingest.viewport import KINDS

pytestmark = pytest.mark.browser


def run_id(path: Path) -> str:
    return read_trace(path).content_hash()


def grid_rows(dash_duo, grid_id: str) -> list[dict[str, str]]:
    """Cells of the rendered rows of an AG Grid, by column id."""
    rows = []
    for row in dash_duo.find_elements(f"#{grid_id} .ag-center-cols-container .ag-row"):
        cells = row.find_elements(By.CSS_SELECTOR, ".ag-cell")
        rows.append({c.get_attribute("col-id"): c.text for c in cells})
    return rows


def table_rows(dash_duo, table_id: str) -> list[list[str]]:
    return [[td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")] for tr in dash_duo.find_elements(f"#{table_id} tbody tr")]


def test_runs_page_lists_the_traces(dash_duo, make_app, demo_paths) -> None:
    dash_duo.start_server(make_app())
    dash_duo.wait_for_contains_text("#runs-list", "demo-eager.arrow", timeout=15)
    text = dash_duo.find_element("#runs-list").text
    for name in ("demo-compiled.arrow", "demo-predicted.arrow", "predicted (demo-npu)", "LlamaForCausalLM"):
        assert name in text
    eager = next(r for r in table_rows(dash_duo, "runs-list") if "demo-eager.arrow" in r[1])
    assert eager[5:10] == ["3", "34", "20", "4.1 KB", "7"]
    assert dash_duo.get_logs() == []


def test_region_page_shows_the_counts_in_the_trace(dash_duo, make_app, demo_paths) -> None:
    rid = run_id(demo_paths["eager"])
    dash_duo.start_server(make_app())
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{rid}/region/generate")
    dash_duo.wait_for_contains_text("#signal-grid", "dispatch/cpu_fallback", timeout=15)
    counts = {r["signal"]: r["count"] for r in grid_rows(dash_duo, "signal-grid")}
    report = region_report_data(summarize(read_trace(demo_paths["eager"]), 0))
    assert counts == {s["signal"]: str(s["count"]) for s in report["signals"]}
    assert counts["dispatch/cpu_fallback"] == "14"
    # click an operator: its why, call site and stack show up
    cell = until(lambda: [c for c in dash_duo.find_elements("#operator-grid .ag-cell") if c.text == "aten::pow.Tensor_Scalar"], 15)
    cell[0].click()
    dash_duo.wait_for_contains_text("#operator-detail", "dtype-not-supported (5x)", timeout=10)
    assert "modeling_llama.py:72" in dash_duo.find_element("#operator-detail").text
    # untrusted names are text: the <b> of the module name is shown, never parsed
    dash_duo.find_element("#breakdown-by input[value='module']").click()
    until(lambda: ODD_MODULE in dash_duo.driver.page_source.replace("&lt;", "<").replace("&gt;", ">"), 15)
    assert not dash_duo.driver.find_elements(By.XPATH, "//b[text()='mlp']")
    assert dash_duo.get_logs() == []


def test_timeline_draws_webgl_bars_and_zooms_on_the_server(dash_duo, make_app, demo_paths, tmp_path) -> None:
    rid = run_id(demo_paths["eager"])
    dash_duo.start_server(make_app())
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{rid}/timeline")
    dash_duo.wait_for_element("#timeline-graph .gl-container canvas", timeout=20)
    # WebGL drew under the Content-Security-Policy (regl needs 'unsafe-eval'; Plotly says so in the page if not)
    assert "WebGL is not supported" not in dash_duo.driver.page_source
    assert not [e for e in dash_duo.get_logs() or [] if "Content Security Policy" in e["message"]]
    dash_duo.wait_for_contains_text("#timeline-status", "of 92 slices in view", timeout=10)
    time.sleep(1)  # dcc.Graph listens for relayout events only once the figure is fully set up
    # zoom to the first 20 us: slices start every 1000 ns, so 21 of them touch [0, 20000]
    dash_duo.driver.execute_script(
        "const g = document.querySelector('#timeline-graph .js-plotly-plot'); Plotly.relayout(g, {'xaxis.range': [0, 20000]});"
    )
    dash_duo.wait_for_contains_text("#timeline-status", "21 bars drawn for 21 of 92 slices in view", timeout=10)
    canvas = dash_duo.find_element("#timeline-graph .gl-container canvas")
    assert canvas.size["width"] > 300
    dash_duo.driver.save_screenshot(str(tmp_path / "timeline.png"))
    assert dash_duo.get_logs() == []


def test_upload_adds_runs_and_a_broken_file_gets_its_own_error(dash_duo, make_app, demo_paths, broken_file, tmp_path) -> None:
    dash_duo.start_server(make_app(trace_paths=()))
    dash_duo.wait_for_contains_text("#runs-table", "No traces yet", timeout=15)
    upload = dash_duo.driver.find_element(By.ID, "upload-file-input")
    upload.send_keys(f"{demo_paths['compiled']}\n{broken_file}")
    dash_duo.wait_for_contains_text("#upload-messages", "Loaded demo-compiled.arrow", timeout=20)
    dash_duo.wait_for_contains_text("#upload-messages", "broken.arrow: ", timeout=10)
    dash_duo.wait_for_contains_text("#upload-status", "1 loaded, 1 failed", timeout=10)
    rid = run_id(demo_paths["compiled"])
    dash_duo.wait_for_contains_text("#runs-list", rid, timeout=10)
    # the app keeps working after the bad file: open the uploaded run
    dash_duo.find_element(f"#upload-messages a[href='/run/{rid}']").click()
    dash_duo.wait_for_contains_text("#regions-list", "generate [cold, compiled]", timeout=15)
    # the only console entry is the browser's note of the 422 answer for the broken file
    logs = dash_duo.get_logs()
    assert all("api/upload" in entry["message"] and "422" in entry["message"] for entry in logs), logs


def test_compare_shows_the_deltas_of_the_reports(dash_duo, make_app, demo_paths) -> None:
    a, b = run_id(demo_paths["eager"]), run_id(demo_paths["compiled"])
    dash_duo.start_server(make_app())
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{a}/{b}")
    dash_duo.wait_for_element("#compare-signals-table", timeout=15)
    rows = {r[0]: r for r in table_rows(dash_duo, "compare-signals-table")}
    report_a = region_report_data(summarize(read_trace(demo_paths["eager"]), 0))
    report_b = region_report_data(summarize(read_trace(demo_paths["compiled"]), 0))
    counts_a = {s["signal"]: s["count"] for s in report_a["signals"]}
    counts_b = {s["signal"]: s["count"] for s in report_b["signals"]}
    for signal in set(counts_a) | set(counts_b):
        x, y = counts_a.get(signal, 0), counts_b.get(signal, 0)
        assert rows[signal][1:4] == [f"{x:,}", f"{y:,}", f"{y - x:+,}" if y != x else "0"], signal
    assert rows["dispatch/cpu_fallback"][3] == "-14"
    assert "removed" in dash_duo.find_element("#compare-operators-table").text
    dash_duo.wait_for_element("#compare-timelines .gl-container canvas", timeout=20)
    assert dash_duo.get_logs() == []


def start_on(dash_duo, app, path: str, graph_id: str) -> None:
    """Serve `app`, open `path` and wait until the graph's WebGL lanes are drawn and listening."""
    dash_duo.start_server(app)
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}{path}")
    dash_duo.wait_for_element(f"#{graph_id} .gl-container canvas", timeout=20)
    time.sleep(1)  # dcc.Graph listens for relayout events only once the figure is fully set up


def xtick_labels(dash_duo, graph_id: str) -> list[str]:
    """The tick labels Plotly drew on the x axes of a graph (only those inside the view)."""
    return dash_duo.driver.execute_script(  # read in one go: Plotly redraws the ticks on every relayout
        f"return Array.from(document.querySelectorAll('#{graph_id} .xtick text')).map(t => t.textContent);")


def test_timeline_axis_reads_in_time_units_chosen_by_the_zoom(dash_duo, make_app, demo_paths, tmp_path) -> None:
    rid = run_id(demo_paths["eager"])
    dash_duo.start_server(make_app())
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{rid}/timeline")
    dash_duo.wait_for_element("#timeline-graph .gl-container canvas", timeout=20)
    dash_duo.wait_for_contains_text("#timeline-status", "of 92 slices in view", timeout=10)
    labels = xtick_labels(dash_duo, "timeline-graph")
    assert labels[0] == "0" and all(t.endswith(" µs") for t in labels[1:]), labels  # 92 slices 1 µs apart
    time.sleep(1)
    dash_duo.driver.execute_script(
        "const g = document.querySelector('#timeline-graph .js-plotly-plot'); Plotly.relayout(g, {'xaxis.range': [0, 2000]});"
    )
    dash_duo.wait_for_contains_text("#timeline-status", "of 92 slices in view", timeout=10)
    # 2 µs over ~8 ticks: a 200 ns step, labelled in µs by the server's answer
    until(lambda: xtick_labels(dash_duo, "timeline-graph") == ["0", "0.2 µs", "0.4 µs", "0.6 µs", "0.8 µs", "1 µs", "1.2 µs", "1.4 µs",
                                                                  "1.6 µs", "1.8 µs", "2 µs"], 10)
    dash_duo.driver.save_screenshot(str(tmp_path / "timeline-axis.png"))
    assert dash_duo.get_logs() == []


def test_a_predicted_runs_headline_time_is_the_predicted_device_time(dash_duo, make_app, demo_paths) -> None:
    rid = run_id(demo_paths["predicted"])
    dash_duo.start_server(make_app())
    dash_duo.wait_for_contains_text("#runs-list", "demo-predicted.arrow", timeout=15)
    rows = {r[1].split("\n")[0]: r for r in table_rows(dash_duo, "runs-list")}
    # demo regions: slices span 39.9 us each (two top-level regions); the eager run's walls are 100 + 60 + 20 us
    assert rows["demo-predicted.arrow"][10] == "79.8 µs predicted"
    assert rows["demo-eager.arrow"][10] == "180 µs wall"
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{rid}")
    dash_duo.wait_for_element("#regions-list", timeout=15)
    headers = [th.text for th in dash_duo.find_elements("#regions-list thead th")]
    assert headers[:3] == ["Region", "Predicted on demo-npu", "CPU wall (recording)"]
    cells = table_rows(dash_duo, "regions-list")
    assert [c[1:3] for c in cells] == [["39.9 µs", "100 µs"], ["39.9 µs", "60 µs"]]
    assert dash_duo.get_logs() == []


def test_search_highlights_matches_steps_through_them_and_keys_zoom_and_pan(dash_duo, make_app, demo_paths, tmp_path) -> None:
    from selenium.webdriver.common.keys import Keys

    start_on(dash_duo, make_app(), f"/run/{run_id(demo_paths['eager'])}/timeline", "timeline-graph")
    box = dash_duo.find_element("#timeline-search")
    # demo slices are named "slice 0".."slice 39" (twice) and "slice 0".."slice 11": "slice 1" and "slice 1x" match
    box.send_keys("SLICE 1" + Keys.ENTER)
    dash_duo.wait_for_text_to_equal("#timeline-search-status", "25 slices match by name", timeout=10)
    def highlighted() -> int:
        """Points of the search-match layer (typed arrays arrive base64-encoded)."""
        return dash_duo.driver.execute_script(
            "const g = document.querySelector('#timeline-graph .js-plotly-plot');"
            "const t = g.data.find(d => d.name === 'search matches');"
            "return t.x.bdata !== undefined ? atob(t.x.bdata).length / 8 : t.x.length;")

    until(lambda: highlighted() == 3 * 25, 10)  # x0, x1, gap per matched bar: none closer than a pixel at full view
    box.send_keys(Keys.ENTER)  # Enter again: the first match in time (slice 1 of the cold region, 1 us, on the dispatch lane)
    dash_duo.wait_for_text_to_equal("#timeline-search-status", "match 1 of 25: slice 1 on dispatch at 1 µs for 900 ns", timeout=10)
    dash_duo.find_element("#timeline-search-next").click()
    dash_duo.wait_for_text_to_equal("#timeline-search-status", "match 2 of 25: slice 10 on matrix at 10 µs for 900 ns", timeout=10)
    assert "slice 10" in dash_duo.find_element("#slice-detail").text
    # centred on slice 10 (10,000..10,900 ns), zoomed until it is 1/50 of the view: 45 us wide
    until(lambda: xtick_labels(dash_duo, "timeline-graph") == ["-10 µs", "-5 µs", "0", "5 µs", "10 µs", "15 µs", "20 µs", "25 µs", "30 µs"], 10)
    dash_duo.find_element("#timeline-search-prev").click()
    dash_duo.wait_for_text_to_equal("#timeline-search-status", "match 1 of 25: slice 1 on dispatch at 1 µs for 900 ns", timeout=10)
    # centred on slice 1 again (1,450 ns): -21.05 .. 23.95 us.  Keys: D pans a fifth of the view right (9 us) ...
    body = dash_duo.find_element("body")
    dash_duo.find_element("#timeline-status").click()  # the search box gives the keys back
    body.send_keys("d")
    until(lambda: xtick_labels(dash_duo, "timeline-graph") == ["-10 µs", "-5 µs", "0", "5 µs", "10 µs", "15 µs", "20 µs", "25 µs", "30 µs"], 10)
    for _ in range(4):  # ... and W zooms in to 80 % around the centre
        body.send_keys("w")
        time.sleep(0.3)
    # 45 us * 0.8^4 = 18.4 us around 10,450 ns: 1.2 .. 19.7 us, a 2 us step
    until(lambda: xtick_labels(dash_duo, "timeline-graph") == ["2 µs", "4 µs", "6 µs", "8 µs", "10 µs", "12 µs", "14 µs", "16 µs", "18 µs"], 10)
    # the zoom's answer keeps the matches of the new view highlighted: slices 1 (1 us) and 10..19 (10..19.9 us) touch it
    until(lambda: highlighted() == 3 * 11, 10)
    dash_duo.driver.save_screenshot(str(tmp_path / "timeline-search.png"))
    assert dash_duo.get_logs() == []


def test_dragging_over_a_time_range_sums_it_up_under_the_timeline(dash_duo, make_app, demo_paths) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    rid = run_id(demo_paths["eager"])
    dash_duo.start_server(make_app())
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{rid}/timeline")
    dash_duo.wait_for_element("#timeline-graph .gl-container canvas", timeout=20)
    time.sleep(1)
    # a real drag over the middle of the lanes selects a range: its tables appear
    layer = dash_duo.find_element("#timeline-graph .nsewdrag")
    dash_duo.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", layer)
    time.sleep(0.5)
    # from 500 px left of the centre, 200 px to the right: inside the cold region (0..100 us of 320 us)
    ActionChains(dash_duo.driver).move_to_element_with_offset(layer, -500, 0).click_and_hold().move_by_offset(200, 0).release().perform()
    dash_duo.wait_for_element("#timeline-range-engines", timeout=10)
    # the range 0..20 us exactly (the event a drag sends): the cold region's slices 0..20, 1 us apart, 900 ns long,
    # on six lanes in turn; slice 20 starts at 20 us: it touches the range with no time in it
    dash_duo.driver.execute_script(
        "const g = document.querySelector('#timeline-graph .js-plotly-plot'); g.emit('plotly_selected', {points: [], range: {x: [0, 20000]}});")
    dash_duo.wait_for_text_to_equal("#timeline-range-head", "0.0 µs to 20.0 µs (20 µs): 21 slices", timeout=10)
    busy = {r[0]: (r[1], r[3]) for r in table_rows(dash_duo, "timeline-range-engines")}
    assert busy == {"host": ("3.6 µs", "4"), "dispatch": ("3.6 µs", "4"), "DMA h2d": ("2.7 µs", "4"), "DMA d2h": ("2.7 µs", "3"),
                    "matrix": ("2.7 µs", "3"), "vector": ("2.7 µs", "3")}
    operators = table_rows(dash_duo, "timeline-range-operators")
    assert len(operators) == 21 and operators[0] == ["slice 0", "1", "900 ns"] and operators[-1] == ["slice 20", "1", "0 ns"]
    assert dash_duo.get_logs() == []


def open_timeline(dash_duo, make_app, trace, folder: Path) -> None:
    """Serve one trace alone and open its timeline."""
    from portscope.ingest.trace import write_trace

    folder.mkdir()
    path = write_trace(trace, folder / "run.arrow")
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{run_id(path)}/timeline")
    dash_duo.wait_for_element("#timeline-graph .gl-container canvas", timeout=20)


def test_a_cycle_axis_reads_in_cycles_or_in_time_at_a_typed_clock(dash_duo, make_app, tmp_path) -> None:
    from portscope.ingest.builder import TraceBuilder
    from portscope.ingest.schema import Source, TimeUnit
    from portscope.ingest.trace import RunInfo

    b = TraceBuilder(RunInfo(source=Source.CONVERTED, time_unit=TimeUnit.CYCLES))
    rid_region = b.add_region("schedule", start_ns=0, dur_ns=0)
    for i in range(12):  # 12 slices of 8,000 cycles, 10,000 cycles apart: 0 .. 118,000 cycles
        b.engine_slices.append(region_id=rid_region, engine="core", engine_kind="vector", kind="compute", name=f"op {i}",
                               start=i * 10_000, dur=8_000)
    open_timeline(dash_duo, make_app, b.build(), tmp_path / "cycles")
    assert xtick_labels(dash_duo, "timeline-graph") == ["0", "20k", "40k", "60k", "80k", "100k"]
    assert dash_duo.find_element("#timeline-graph .g-xtitle").text == "cycles"
    box = dash_duo.find_element("#timeline-clock")
    box.send_keys("800 MHz\n")  # 118k cycles at 0.8 GHz = 147.5 us: ticks every 20 us = 16k cycles
    until(lambda: xtick_labels(dash_duo, "timeline-graph") == ["0", "20 µs", "40 µs", "60 µs", "80 µs", "100 µs", "120 µs", "140 µs"], 10)
    assert dash_duo.find_element("#timeline-graph .g-xtitle").text == "time (cycles at 0.8 GHz)"
    assert dash_duo.get_logs() == []


def test_clicking_a_slice_draws_its_flows(dash_duo, make_app, tmp_path) -> None:
    from portscope.ingest.builder import TraceBuilder
    from portscope.ingest.schema import Source
    from portscope.ingest.trace import RunInfo

    b = TraceBuilder(RunInfo(source=Source.PREDICTED, target="demo-npu"))
    region = b.add_region("step", start_ns=0, dur_ns=1000)
    for op, name in enumerate(("aten::mm", "aten::add")):
        b.ops.append(op_id=op, region_id=region, name=name, start_ns=op * 100, dur_ns=100, placement="device", bytes_in=0, bytes_out=0)
    for engine, kind, name, start, dur, op, waited in [
        ("dispatch", "dispatch", "aten::mm", 0, 100, 0, None),
        ("matrix", "matrix", "aten::mm", 150, 250, 0, "dispatch"),
        ("vector", "vector", "aten::add", 420, 50, 1, "dependency"),
    ]:
        b.engine_slices.append(region_id=region, engine=engine, engine_kind=kind, kind="compute", name=name, start=start, dur=dur,
                               op_id=op, waited_on=waited)
    open_timeline(dash_duo, make_app, b.build(), tmp_path / "flows")
    time.sleep(1)
    # lanes: dispatch 0, matrix 1, vector 2; click the vector slice (a compute bar: trace 0)
    dash_duo.driver.execute_script(
        "const g = document.querySelector('#timeline-graph .js-plotly-plot');"
        "g.emit('plotly_click', {points: [{curveNumber: 0, x: 440, y: 2}]});")
    dash_duo.wait_for_contains_text("#slice-detail", "aten::add", timeout=10)

    def flows() -> list:
        return dash_duo.driver.execute_script(
            "const t = document.querySelector('#timeline-graph .js-plotly-plot').data.find(d => d.name === 'flows');"
            "return [t.x, t.y];")

    # it waited on a dependency: the matrix slice (ends at 400) released it
    until(lambda: flows() == [[400, 420, None], [1, 2, None]], 10)
    dash_duo.driver.execute_script(
        "const g = document.querySelector('#timeline-graph .js-plotly-plot');"
        "g.emit('plotly_click', {points: [{curveNumber: 0, x: 200, y: 1}]});")
    # the matrix slice: its operator's dispatch (0..100) launched it
    until(lambda: flows() == [[100, 150, None], [0, 1, None]], 10)
    assert dash_duo.get_logs() == []


def test_nested_slices_are_drawn_at_depth(dash_duo, make_app, tmp_path) -> None:
    from portscope.ingest.builder import TraceBuilder
    from portscope.ingest.schema import Source
    from portscope.ingest.trace import RunInfo

    b = TraceBuilder(RunInfo(source=Source.CONVERTED))
    region = b.add_region("step", start_ns=0, dur_ns=200)
    for name, start, dur in [("forward", 0, 100), ("linear", 10, 30), ("mm", 15, 5), ("relu", 50, 40)]:
        b.engine_slices.append(region_id=region, engine="thread 1", engine_kind="host", kind="compute", name=name, start=start, dur=dur)
    open_timeline(dash_duo, make_app, b.build(), tmp_path / "nested")
    lanes = dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('#timeline-graph .ytick text')).map(t => t.textContent);")
    assert lanes == ["thread 1", "thread 1 · 1", "thread 1 · 2"]
    dash_duo.driver.execute_script(  # mm (15..20) is the only slice of depth 2
        "const g = document.querySelector('#timeline-graph .js-plotly-plot');"
        "g.emit('plotly_click', {points: [{curveNumber: 0, x: 17, y: 2}]});")
    dash_duo.wait_for_element("#slice-detail", timeout=10)
    facts = [dd.text for dd in dash_duo.find_elements("#slice-detail dd")]
    assert facts[:3] == ["thread 1", "compute", "mm"]  # the slice keeps its engine's name in its facts
    assert dash_duo.get_logs() == []


def test_compare_timelines_draw_the_flows_of_a_clicked_slice_in_its_panel(dash_duo, make_app, tmp_path) -> None:
    from portscope.ingest.builder import TraceBuilder
    from portscope.ingest.schema import Source
    from portscope.ingest.trace import RunInfo, write_trace

    folder = tmp_path / "pair"
    folder.mkdir()
    paths = []
    for k, launch_ns in enumerate((100, 300)):  # B launches later: its kernel starts at 350
        b = TraceBuilder(RunInfo(source=Source.PREDICTED, target="demo-npu", command=f"run {k}"))
        region = b.add_region("step", start_ns=0, dur_ns=1000)
        b.ops.append(op_id=0, region_id=region, name="aten::mm", start_ns=0, dur_ns=100, placement="device", bytes_in=0, bytes_out=0)
        b.engine_slices.append(region_id=region, engine="dispatch", engine_kind="dispatch", kind="dispatch", name="aten::mm",
                               start=0, dur=launch_ns, op_id=0)
        b.engine_slices.append(region_id=region, engine="matrix", engine_kind="matrix", kind="compute", name="aten::mm",
                               start=launch_ns + 50, dur=200, op_id=0, waited_on="dispatch")
        paths.append(write_trace(b.build(), folder / f"run{k}.arrow"))
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{run_id(paths[0])}/{run_id(paths[1])}")
    dash_duo.wait_for_element("#compare-timelines .gl-container canvas", timeout=20)
    time.sleep(1)
    # panel B's compute bars are trace len(KINDS) + 0; the matrix lane is row 1
    dash_duo.driver.execute_script(
        "const g = document.querySelector('#compare-timelines .js-plotly-plot');"
        f"g.emit('plotly_click', {{points: [{{curveNumber: {len(KINDS)}, x: 400, y: 1}}]}});")

    def flows() -> list:
        return dash_duo.driver.execute_script(
            "const ts = document.querySelector('#compare-timelines .js-plotly-plot').data.filter(d => d.name === 'flows');"
            "return ts.map(t => [t.x, t.y]);")

    until(lambda: flows() == [[[], []], [[300, 350, None], [0, 1, None]]], 10)
    assert dash_duo.get_logs() == []


def test_w_zooms_around_the_mouse(dash_duo, make_app, demo_paths) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    rid = run_id(demo_paths["eager"])
    dash_duo.start_server(make_app())
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{rid}/timeline")
    dash_duo.wait_for_element("#timeline-graph .gl-container canvas", timeout=20)
    time.sleep(1)
    dash_duo.driver.execute_script(
        "const g = document.querySelector('#timeline-graph .js-plotly-plot'); Plotly.relayout(g, {'xaxis.range': [0, 20000]});")
    time.sleep(1)
    layer = dash_duo.find_element("#timeline-graph .nsewdrag")
    dash_duo.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", layer)
    width = layer.size["width"]
    # the mouse a quarter into the lanes (5 us): W keeps 5 us under it and narrows the view to 80 %
    ActionChains(dash_duo.driver).move_to_element_with_offset(layer, -width // 4, 0).perform()
    dash_duo.find_element("body").send_keys("w")

    def view() -> list[float]:
        return dash_duo.driver.execute_script("return document.querySelector('#timeline-graph .js-plotly-plot')._fullLayout.xaxis.range;")

    until(lambda: abs(view()[1] - view()[0] - 16_000) < 1, 10)
    x0, x1 = view()
    px = 20_000 / width  # the mouse sits on a whole pixel
    assert abs(x0 - 1_000) < 2 * px and abs(x1 - 17_000) < 2 * px, (x0, x1)
    assert dash_duo.get_logs() == []


def test_compare_searches_both_runs_and_sums_a_range_in_each(dash_duo, make_app, demo_paths) -> None:
    from selenium.webdriver.common.keys import Keys

    start_on(dash_duo, make_app(), f"/compare/{run_id(demo_paths['eager'])}/{run_id(demo_paths['compiled'])}", "compare-timelines")
    # A (eager): 25 slices named "slice 1" or "slice 1x" (see the timeline search test); B (compiled, two regions of 40): 22
    box = dash_duo.find_element("#compare-search")
    box.send_keys("slice 1" + Keys.ENTER)
    dash_duo.wait_for_text_to_equal("#compare-search-status", "47 slices match by name", timeout=10)
    box.send_keys(Keys.ENTER)
    dash_duo.wait_for_text_to_equal("#compare-search-status", "match 1 of 25: slice 1 on dispatch at 1 µs for 900 ns", timeout=10)
    dash_duo.driver.execute_script(
        "const g = document.querySelector('#compare-timelines .js-plotly-plot'); g.emit('plotly_selected', {points: [], range: {x2: [0, 20000]}});")
    # both runs' cold regions start with slices 0..20 1 us apart: the same 21 slices in each
    dash_duo.wait_for_text_to_equal("#compare-range-head-0", "0.0 µs to 20.0 µs (20 µs): 21 slices", timeout=10)
    assert dash_duo.find_element("#compare-range-head-1").text == "0.0 µs to 20.0 µs (20 µs): 21 slices"
    assert {r[0]: r[1] for r in table_rows(dash_duo, "compare-range-engines-1")}["host"] == "3.6 µs"
    assert dash_duo.get_logs() == []
