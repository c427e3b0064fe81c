"""The plan page: `portscope plan`'s table as charts against the sequence length, one line per batch."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from portscope.app.plan_charts import DECODE, MEMORY, PADDING, plan_chart
from portscope.ingest import read_trace, write_trace
from portscope.profiler.plan import ModelShape, plan, plan_trace
from portscope.profiler.targets import load_target

# Llama-3.2-1B's figures (hand-checked in tests/profiler/test_plan.py); no torch needed here
LLAMA = ModelShape(name="LlamaForCausalLM", layers=16, attention_heads=32, kv_heads=8, head_dim=64, hidden_size=2048,
                   vocab_size=128256, parameters=1_235_814_400, linear_weights=1_235_746_816)


def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "max_sequence_length": [2048, 1024, 1024, 2048],
        "batch_size": [1, 1, 2, 2],
        "device_memory_bytes": [2e9, 1e9, 3e9, 5e9],
        "padding_waste": [0.5, 0.25, None, 0.75],
        "decode_ns_per_token": [2e6, 1e6, 3e6, 4e6],
    })


def test_one_line_per_batch_in_sequence_order() -> None:
    figure = plan_chart(_frame(), MEMORY, memory_bytes=6_000_000_000)
    assert [t["name"] for t in figure["data"]] == ["batch 1", "batch 2"]
    assert figure["data"][0]["x"] == [1024, 2048] and figure["data"][0]["y"] == [1.0, 2.0]  # GB
    assert figure["data"][1]["y"] == [3.0, 5.0]
    [line] = figure["layout"]["shapes"]
    assert line["y0"] == 6.0  # the device's memory, near enough to draw
    far = plan_chart(_frame(), MEMORY, memory_bytes=17_000_000_000)
    assert far["layout"]["shapes"] == [] and "17 GB: above the chart" in far["layout"]["annotations"][0]["text"]


def test_padding_in_percent_with_gaps_and_decode_in_ms() -> None:
    padding = plan_chart(_frame(), PADDING)
    assert padding["data"][0]["y"] == [25.0, 50.0] and padding["data"][1]["y"] == [None, 75.0]
    decode = plan_chart(_frame(), DECODE, cost_source="assumed")
    assert decode["data"][1]["y"] == [3.0, 4.0] and "(assumed figures)" in decode["layout"]["title"]["text"]


@pytest.mark.browser
def test_plan_page_draws_the_charts(dash_duo, make_app, tmp_path: Path) -> None:
    target = load_target("static-llm-npu")
    rows = plan(LLAMA, target, sequences=[1024, 2048, 4096], batches=[1, 4], prompt_lengths=[100, 1000, 3000])
    folder = tmp_path / "plans"
    folder.mkdir()
    path = write_trace(plan_trace(rows, LLAMA, target), folder / "llama-plan.arrow")
    rid = read_trace(path).content_hash()
    dash_duo.start_server(make_app(trace_paths=(folder,)))
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{rid}")
    dash_duo.wait_for_contains_text("#_pages_content", "Static-shape plan (charts)", timeout=15)
    dash_duo.wait_for_page(url=f"{dash_duo.server_url}/run/{rid}/plan")
    dash_duo.wait_for_element("#plan-table", timeout=15)
    for graph in ("plan-memory", "plan-padding", "plan-decode"):
        dash_duo.wait_for_element(f"#{graph} .scatterlayer", timeout=15)
        assert len(dash_duo.find_elements(f"#{graph} .scatterlayer .trace")) == 2  # batch 1 and batch 4
    cells = [[td.text for td in tr.find_elements("css selector", "td")]
             for tr in dash_duo.find_elements("#plan-table tbody tr")]
    # sequence 4096, batch 1: KV cache 16*2*8*64*4096*2 B = 134.2 MB; 3 prompts padded to 4096: 1 - 4100/12288
    row = next(c for c in cells if c[:3] == ["4096", "4096", "1"])
    assert row[4] == "134.2 MB" and row[6] == "yes" and row[7] == "2" and row[8] == "66.6%"
    assert "LlamaForCausalLM: 1,235,814,400 parameters" in dash_duo.find_element("#_pages_content").text
    dash_duo.driver.save_screenshot(str(tmp_path / "plan.png"))
    assert dash_duo.get_logs() == []
