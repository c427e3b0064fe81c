"""Two predicted schedules of a tiny random-init Llama compared (ingest/schedule_diff.py): a baseline, one change.

The change: the prompt padded from 7 to 32 tokens. fp16-npu's fused attention needs the query length to be a
multiple of 32 (profiler/targets/fp16-npu.toml, [[shape_condition]]), so at 7 tokens each of the 2 layers'
attention falls back to the host; at 32 it is issued to the device, each call one dispatch (dispatch_ns = 25000).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from portscope.ingest.schedule_diff import Change, diff_schedules  # noqa: E402
from portscope.profiler.demo import prompt, tiny_llama  # noqa: E402
from portscope.profiler.region import explain_steady  # noqa: E402

SDPA = "aten::_scaled_dot_product_flash_attention_for_cpu"


def test_padding_the_prompt_moves_attention_off_the_hosts_critical_path() -> None:
    model = tiny_llama()  # 2 layers, float16
    traces = []
    for length in (7, 32):
        ids = prompt(length)
        with torch.no_grad():
            warm = explain_steady(lambda ids=ids: model(input_ids=ids), warmup=2, name=f"forward {length}", target="fp16-npu")
        traces.append(warm.to_trace())
    diff = diff_schedules(traces[0], 0, traces[1], 0)
    parts = {(p.engine, p.name): p for p in diff.critical_path}
    host, device = parts[("host", SDPA)], parts[("dispatch", SDPA)]
    assert (host.change, host.count_a, host.count_b) == (Change.REMOVED, 2, 0)  # one fallback per layer, gone
    assert (device.change, device.count_a, device.count_b, device.time_b) == (Change.ADDED, 0, 2, 2 * 25_000)
    engines = {e.engine: e for e in diff.engines}
    assert engines["host"].busy_b < engines["host"].busy_a  # less host work ...
    assert engines["matrix"].busy_b > engines["matrix"].busy_a  # ... while the matrix engine works on 32 tokens, not 7
