"""The viewer's papercuts (issue 34 item 5) in headless Chromium: converted runs named by their metadata or file,
counts their source cannot record shown as such, verdicts that name what was seen, the compared schedules and the
timeline on one set of slices, and no progress bar before an upload.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless tests/app/test_papercuts_browser.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dash.testing.wait import until
from selenium.webdriver.common.by import By

from portscope.app import urls
from portscope.ingest import TraceBuilder, read_trace, write_trace
from portscope.ingest.schema import EngineKind, SignalKind, SliceKind, Source
from portscope.ingest.trace import RunInfo

pytestmark = pytest.mark.browser
KINETO_MISSING = ["dispatch/recompile (not in profiler traces)", "host_bounce/* (Kineto records no tensor devices)",
                  "dispatch/cpu_fallback (Kineto records no tensor devices; operators that launched no GPU work are "
                  "placed on the host)"]  # what the Kineto reader says it cannot record
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
HARNESS = {"metadata": {"experiment": {"repo_id": "org/tiny-bert"},
                        "system": {"torch_env_info": {"torch_version": "2.6.0+cu124"}}}}


def table_rows(dash_duo, table_id: str) -> list[list[str]]:
    return [[td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")] for tr in dash_duo.find_elements(f"#{table_id} tbody tr")]


def converted(metadata: dict | None) -> object:
    """A converted Kineto-like run: one step, three d2h copies of 4 KiB, two syncs; what Kineto cannot record said."""
    b = TraceBuilder(RunInfo(source=Source.CONVERTED, converted_from="kineto", devices=["cpu", "cuda:0"],
                             missing_signals=KINETO_MISSING, extra={"metadata": metadata} if metadata else {}))
    rid = b.add_region("ProfilerStep#1", start_ns=0, dur_ns=1_000_000, device="cuda:0")
    for i in range(3):
        b.signals.append(region_id=rid, kind=SignalKind.TRANSFER_D2H, count=1, bytes=4096, time_ns=100 * i)
        b.transfers.append(region_id=rid, direction="d2h", bytes=4096, start_ns=100 * i, dur_ns=10)
    b.signals.append(region_id=rid, kind=SignalKind.SYNC, count=2, bytes=0)
    return b.build()


def nested_run(forward_ns: int) -> object:
    """The file's root region 0 > a step > an annotation holding two kernels; one more kernel in the step itself:
    stream 7 busy 10 + forward_ns + 20 ns; a host slice of 5 ns in the root region (as tests/app/test_papercuts.py)."""
    b = TraceBuilder(RunInfo(source=Source.CONVERTED, converted_from="kineto"))
    root = b.add_region("run.json", start_ns=0, dur_ns=200)
    step = b.add_region("ProfilerStep#1", start_ns=0, dur_ns=150, parent_id=root)
    inner = b.add_region("## forward ##", start_ns=10, dur_ns=100, parent_id=step)
    for rid, start, dur in ((inner, 10, 10), (inner, 40, forward_ns), (step, 120, 20)):
        b.engine_slices.append(region_id=rid, engine="stream 7", engine_kind=EngineKind.STREAM, kind=SliceKind.COMPUTE,
                               name="gemm", start=start, dur=dur)
    b.engine_slices.append(region_id=root, engine="host", engine_kind=EngineKind.HOST, kind=SliceKind.COMPUTE,
                           name="setup", start=0, dur=5)
    return b.build()


def test_converted_runs_are_named_and_say_what_they_cannot_record(dash_duo, make_app, tmp_path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    harness = write_trace(converted(HARNESS), folder / "harness_run.arrow")
    write_trace(converted(None), folder / "plain_run.arrow")
    shutil.copy(SAMPLES / "ascend_kernel_details_591.arrow", folder)
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_contains_text("#runs-list", "harness_run.arrow", timeout=20)
    # columns: pick, run, source, model, modes, regions, fallbacks, bounces, d2h bytes, compiles, time, verdict
    rows = {r[1].split("\n")[0]: r for r in table_rows(dash_duo, "runs-list")}
    assert rows["harness_run.arrow"][3] == "org/tiny-bert" and rows["plain_run.arrow"][3] == "plain_run"
    assert [rows["harness_run.arrow"][i] for i in (6, 7, 8, 9, 11)] == [
        "not recorded", "not recorded", "12.3 KB", "not recorded", "3 d2h copies · 2 syncs"]
    # kernel_details: 7 Cast kernels on the AI CPU; no host transfers or compiles in such a table
    assert [rows["ascend_kernel_details_591.arrow"][i] for i in (3, 6, 8, 9, 11)] == [
        "ascend_kernel_details_591", "7", "not recorded", "not recorded", "7 AI-CPU fallbacks"]
    assert "host work" not in dash_duo.find_element("#runs-list").text
    dash_duo.driver.save_screenshot(str(tmp_path / "runs.png"))

    dash_duo.wait_for_page(url=dash_duo.server_url + urls.run(read_trace(harness).content_hash()))
    dash_duo.wait_for_element("#regions-list", timeout=20)
    facts = dict(zip([e.text for e in dash_duo.find_elements(".facts dt")], [e.text for e in dash_duo.find_elements(".facts dd")],
                     strict=True))
    assert (facts["model"], facts["torch"]) == ("org/tiny-bert", "2.6.0+cu124")
    # region, wall, ops, fallbacks, bounces, d2h bytes, compiles, verdict
    assert table_rows(dash_duo, "regions-list")[0][3:] == ["not recorded", "not recorded", "12.3 KB", "not recorded",
                                                           "3 d2h copies · 2 syncs"]
    cell = dash_duo.find_element("#regions-list .not-recorded")
    assert cell.get_attribute("title") == "this source could not provide: " + KINETO_MISSING[2]
    dash_duo.driver.save_screenshot(str(tmp_path / "run.png"))
    assert dash_duo.get_logs() == []


def test_no_progress_bar_before_an_upload(dash_duo, make_app, demo_paths) -> None:
    dash_duo.start_server(make_app())
    dash_duo.wait_for_contains_text("#runs-list", "demo-eager.arrow", timeout=15)
    bar = dash_duo.find_element("#upload-progress")
    assert not bar.is_displayed()
    dash_duo.driver.find_element(By.ID, "upload-file-input").send_keys(str(demo_paths["compiled"]))
    dash_duo.wait_for_contains_text("#upload-status", "1 loaded", timeout=20)
    assert bar.is_displayed() and bar.get_attribute("value") == "100"
    assert dash_duo.get_logs() == []


def test_compared_schedules_take_the_slices_the_timeline_draws(dash_duo, make_app, tmp_path) -> None:
    """Both runs keep their kernels in an annotation nested in the step nested in the file's root region: compared at
    the root, stream 7 is busy 60 ns in A and 80 ns in B (tests/app/test_papercuts.py), as the timeline below draws
    it, not 0 (the root region's own slices: none on the stream)."""
    folder = tmp_path / "pair"
    folder.mkdir()
    a, b = write_trace(nested_run(30), folder / "a.arrow"), write_trace(nested_run(50), folder / "b.arrow")
    ra, rb = read_trace(a).content_hash(), read_trace(b).content_hash()
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.compare(ra, rb, 0, 0))
    dash_duo.wait_for_element("#compare-schedule-engines", timeout=20)
    rows = {r[0]: r[1:] for r in table_rows(dash_duo, "compare-schedule-engines")}
    # engine: kind, busy A, busy B, Δ, Δ %, idle A, idle B, critical A, critical B, slices A, slices B
    assert rows["stream 7"][1:4] == ["60 ns", "80 ns", "+20 ns"] and rows["stream 7"][9:11] == ["3", "3"]
    dash_duo.wait_for_element("#compare-schedule-timelines .gl-container canvas", timeout=20)
    lanes = dash_duo.driver.execute_script(
        "const g = document.querySelector('#compare-schedule-timelines .js-plotly-plot');"
        "return [g.layout.yaxis.ticktext, g.layout.yaxis2.ticktext];")
    assert lanes == [["host", "stream 7"]] * 2
    until(lambda: dash_duo.driver.execute_script(
        "return document.querySelector('#compare-timelines .js-plotly-plot') !== null;"), 20)
    timeline = dash_duo.driver.execute_script(
        "const g = document.querySelector('#compare-timelines .js-plotly-plot');"
        "return [g.layout.yaxis.ticktext, g.layout.yaxis2.ticktext];")
    assert timeline == lanes  # the timeline below: the same lanes
    dash_duo.driver.execute_script("document.querySelector('#compare-schedule-engines').scrollIntoView();")
    dash_duo.driver.save_screenshot(str(tmp_path / "compare.png"))
    assert dash_duo.get_logs() == []
