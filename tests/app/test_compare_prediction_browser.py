"""The compare page's prediction check (a predicted run against a measured one, per operator) in headless Chromium.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless tests/app/test_compare_prediction_browser.py
The hand-made pair is tests/ingest/prediction_pair.py (its figures worked out in tests/ingest/test_prediction_check.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from portscope.ingest import read_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))
from prediction_pair import write_pair  # noqa: E402

pytestmark = pytest.mark.browser


def table_rows(dash_duo) -> list[list[str]]:
    return dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('#compare-prediction-table tbody tr'))"
        "  .map(r => Array.from(r.querySelectorAll('td')).map(td => td.innerText));")


def test_a_predicted_and_a_measured_run_line_up_per_operator(dash_duo, make_app, tmp_path: Path) -> None:
    predicted, measured = write_pair(tmp_path)
    p, m = (read_trace(x).content_hash() for x in (predicted, measured))
    dash_duo.start_server(make_app(trace_paths=(tmp_path,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{p}/{m}?ra=0&rb=0")
    dash_duo.wait_for_element("#compare-prediction-table tbody tr", timeout=20)
    rows = table_rows(dash_duo)
    assert rows[0] == ["aten::addmm", "GEMM", "1", "1", "300 ns", "800 ns", "−500 ns", "-62 %", "matrix: calibrated"]
    assert [r[0] for r in rows] == ["aten::addmm", "aten::linear", "aten::nonzero", "aten::add", "aten::view", "total"]
    assert rows[2][-1] == "host: assumed" and rows[-1][-1] == "2 calibrated, 1 datasheet, 4 assumed"
    assert rows[-1][4:7] == ["930 ns", "1.53 µs", "−600 ns"]
    text = dash_duo.find_element("#compare-prediction-section").text
    assert "A is predicted for demo-npu" in text and "its own host time (a CPU run)" in text
    assert "calibrated: engines.matrix.flops_per_ns, engines.matrix.latency_ns" in text
    # the section leads the page
    page = dash_duo.find_element("#_pages_content").text
    assert page.index("Predicted against measured, per operator") < page.index("Signals")
    assert dash_duo.get_logs() == []


def test_two_measured_runs_have_no_prediction_check(dash_duo, make_app, tmp_path: Path) -> None:
    _, measured = write_pair(tmp_path)
    m = read_trace(measured).content_hash()
    dash_duo.start_server(make_app(trace_paths=(tmp_path,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/compare/{m}/{m}?ra=0&rb=0")
    dash_duo.wait_for_element("#compare-signals-table", timeout=20)
    assert dash_duo.find_element("#compare-prediction-section").text == ""
    assert dash_duo.get_logs() == []
