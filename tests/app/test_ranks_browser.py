"""The ranks page in headless Chromium: a three-rank run (tests/ingest/test_ranks.py's hand-written files, rank 1
slowed) shows its per-rank table, the busy-time heatmap with rank 1 outlined in both steps, the stragglers, the
operator that made it slow and its collectives matched across ranks; a single-rank run says it is not a multi-rank run.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/python -m pytest --headless -p no:randomly tests/app/test_ranks_browser.py
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dash.testing.wait import until

from portscope.app import urls
from portscope.ingest import read_trace, write_trace
from portscope.ingest.ranks import convert_ranks
from portscope.ingest.readers import read_kineto

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))
from test_ranks import kineto  # noqa: E402

pytestmark = pytest.mark.browser


def decoded(values: Any) -> list[float]:
    """A Plotly typed array ({"dtype": "f8", "bdata": base64}) or a plain list, as a list."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), np.dtype(values["dtype"])).tolist()
    return list(values)


def table_rows(dash_duo, css: str) -> list[list[str]]:
    return [[td.text for td in tr.find_elements("css selector", "td")] for tr in dash_duo.find_elements(f"{css} tbody tr")]


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, str, str]:
    folder, traces = tmp_path / "runs", tmp_path / "traces"
    folder.mkdir()
    traces.mkdir()
    for rank, doc in enumerate([kineto(0), kineto(1, step=150.0, gemm=90.0), kineto(2)]):
        (traces / f"rank{rank}.json").write_text(json.dumps(doc))
    convert_ranks(traces, folder / "ranks.arrow", jobs=1)
    write_trace(read_kineto(traces / "rank0.json"), folder / "single.arrow")
    return folder, read_trace(folder / "ranks.arrow").content_hash(), read_trace(folder / "single.arrow").content_hash()


def test_ranks_page(dash_duo, make_app, runs, tmp_path: Path) -> None:
    folder, run_id, single = runs
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.run(run_id))
    dash_duo.wait_for_element(f"a[href='{urls.ranks(run_id)}']", timeout=20).click()
    dash_duo.wait_for_element("#ranks-table", timeout=20)
    # figures of test_the_straggler_and_what_made_it_slow: busy 85 µs a step on ranks 0 and 2, 150 on rank 1; host
    # comm. wait: nccl:all_reduce [12, 17) less its launch [13, 15), 3 µs a step; skew: rank 1's steps start at 0
    # and 150 µs, rank 0's at 0 and 100: median difference 25 µs, removed
    assert table_rows(dash_duo, "#ranks-table") == [
        ["0", "2", "0.20", "0.08", "0.06", "0.03", "0.09", "0.17", "0.01", "0", "0.000"],
        ["1", "2", "0.30", "0.18", "0.06", "0.00", "0.12", "0.30", "0.01", "2", "0.025"],
        ["2", "2", "0.20", "0.08", "0.06", "0.03", "0.09", "0.17", "0.01", "0", "0.000"]]
    assert "lined up on their step starts" in dash_duo.find_element(".ranks-alignment").text
    assert table_rows(dash_duo, "#ranks-stragglers") == [["0", "1", "0.15", "0.09", "0.07", "76.5 %"],
                                                         ["1", "1", "0.15", "0.09", "0.07", "76.5 %"]]
    assert table_rows(dash_duo, "#ranks-slow-operators") == [["aten::mm", "0.18", "0.08", "0.10"]]
    # collectives (device arrivals: each nccl:all_reduce's kernel at t+30 µs of its rank's step): rank 1's steps, moved
    # as above, put its kernels at 30 and 180 µs, ranks 0 and 2's at 55 and 155: skew 25 µs each; the last rank on a
    # tie is the highest, the first the lowest
    assert table_rows(dash_duo, "#ranks-collectives") == [
        ["nccl:all_reduce", "1", "0", "3", "0.025", "2", "1", "rank 0 +0.025, rank 1 +0.000, rank 2 +0.025", "device"],
        ["nccl:all_reduce", "2", "1", "3", "0.025", "1", "0", "rank 0 +0.000, rank 1 +0.025, rank 2 +0.000", "device"]]
    assert table_rows(dash_duo, "#ranks-collective-ranks") == [  # waits 25 µs in one of two; mean skew 12.5 µs
        ["0", "2", "0", "1", "0.03", "0.013", "0"], ["1", "2", "1", "1", "0.03", "0.013", "0"],
        ["2", "2", "1", "0", "0.03", "0.013", "0"]]
    dash_duo.wait_for_element("#ranks-heatmap .heatmaplayer", timeout=20)
    outlined = dash_duo.driver.execute_script(
        "const p = document.querySelector('#ranks-heatmap .js-plotly-plot');"
        "const s = p.data.find(t => t.name === 'straggler'); return [s.x, s.y, s.text];")
    assert outlined == [["0", "1"], ["rank 1", "rank 1"], ["+76%", "+76%"]]
    until(lambda: len(dash_duo.find_elements("#ranks-heatmap .layer-above .shapelayer path")) == 2, timeout=10)
    dash_duo.driver.set_window_size(1300, 1300)
    dash_duo.driver.save_screenshot(str(tmp_path / "ranks.png"))
    assert dash_duo.get_logs() == []
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.ranks(single))
    dash_duo.wait_for_contains_text(".problem", "is not a multi-rank run", timeout=20)
    assert dash_duo.get_logs() == []


def test_rank_lane_groups_on_the_timeline(dash_duo, make_app, runs, tmp_path: Path) -> None:
    """One lane group per rank, in rank order, a line between groups, each rank's step starts drawn down its own
    group: ranks 0 and 2 start their steps at 0 and 100 µs, rank 1 (steps of 150 µs) at 0 and 150: the differences,
    0 and 50 µs, have a median of 25 µs, removed: rank 1's steps at -25 and 125 µs; then every rank moves 25 µs later
    so that none starts before 0."""
    folder, run_id, _ = runs
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=dash_duo.server_url + urls.timeline(run_id))
    dash_duo.wait_for_element("#timeline-graph .gl-container canvas", timeout=30)
    figure = dash_duo.driver.execute_script(
        "const p = document.querySelector('#timeline-graph .js-plotly-plot');"
        "const s = p.data.find(t => t.name === 'step start');"
        "return [p.layout.yaxis.ticktext, s.x, s.y,"
        " p.layout.shapes.filter(h => h.type === 'line').map(h => h.y0)];")
    lanes, x, y, separators = figure
    x, y = decoded(x), decoded(y)
    assert lanes == [f"rank {r} · {lane}" for r in range(3) for lane in ("host", "stream 7", "stream 20")]
    starts = [v for v in x if v == v][::2]  # one line (two points, then a NaN) a start
    assert starts == [25_000, 125_000, 0, 150_000, 25_000, 125_000]
    assert [v for v in y if v == v] == [-0.5, 2.5] * 2 + [2.5, 5.5] * 2 + [5.5, 8.5] * 2
    assert separators == [2.5, 5.5]
    dash_duo.driver.save_screenshot(str(tmp_path / "rank-lanes.png"))
    assert dash_duo.get_logs() == []


def test_rank_against_rank_on_the_compare_page(dash_duo, make_app, runs) -> None:
    """Two ranks of one run compared as two regions: rank 1's gemm took 90 µs a step against rank 0's 40 (two steps:
    180 against 80 µs); both all-reduce kernels took 30 µs a step (60 µs each)."""
    folder, run_id, _ = runs
    trace = read_trace(folder / "ranks.arrow")
    ids = dict(zip(trace["regions"].column("name").to_pylist(), trace["regions"].column("region_id").to_pylist(), strict=True))
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{run_id}/{run_id}?ra={ids['rank 0']}&rb={ids['rank 1']}")
    dash_duo.wait_for_element("#compare-port-table-alone .ag-row", timeout=20)
    rows = dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('#compare-port-table-alone .ag-center-cols-container .ag-row'))"
        ".sort((a, b) => a.getAttribute('row-index') - b.getAttribute('row-index'))"
        ".map(r => ['operator', 'category', 'a_us', 'b_us', 'delta_us'].map(c => r.querySelector(`[col-id=${c}]`).innerText));")
    assert rows == [["aten::mm", "GEMM", "80", "180", "100"], ["nccl:all_reduce", "communication", "60", "60", "0"]]
    assert dash_duo.get_logs() == []
