"""The region page's "by source line" table in real headless Chromium.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/pytest --headless -m browser tests/app
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dash.testing.wait import until
from selenium.webdriver.common.by import By

from portscope.ingest.trace import write_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))
from linestrace import LAYER, NORM, lines_trace  # noqa: E402  (the hand-built trace of the by-line tests)

pytestmark = pytest.mark.browser


def test_lines_table_lists_lines_costliest_first_and_a_click_shows_stacks(dash_duo, make_app, tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    trace = lines_trace()
    write_trace(trace, folder / "lines.arrow")
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{trace.content_hash()}/region/forward")
    dash_duo.wait_for_contains_text("#line-grid", "modeling_llama.py:65", timeout=15)
    rows = [[c.text for c in row.find_elements(By.CSS_SELECTOR, ".ag-cell")]
            for row in dash_duo.find_elements("#line-grid .ag-center-cols-container .ag-row")]
    # the norm's line: 3 signals, no bytes ("-", as every bytes cell says none); the rotary line: 2 signals, 128 bytes,
    # 400 + 500 ns of host time
    assert [r[:5] for r in rows] == [
        ["modeling_llama.py:65 (LlamaRMSNorm.forward)", "variance = x.pow(2)", "3", "-", "0.1"],
        ["modeling_llama.py:147 (apply_rotary_pos_emb)", "q_embed = q * cos", "2", "128 B", "0.9"],
    ]
    assert rows[0][6] == "model.layers.[0,1].input_layernorm 2, model.norm 1"
    dash_duo.find_elements("#line-grid .ag-center-cols-container .ag-row .ag-cell")[0].click()
    dash_duo.wait_for_contains_text("#line-detail", "stack of 2 signals", timeout=10)
    detail = dash_duo.find_element("#line-detail").text
    assert NORM in detail and f"{LAYER} (2x)" in detail and "aten::mul.Tensor · dispatch/cpu_fallback (3x)" in detail
    until(lambda: "torch/nn/modules/module.py:1778" in dash_duo.find_element("#line-detail").text, 5)
    assert dash_duo.get_logs() == []
