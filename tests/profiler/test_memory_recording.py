"""explain(memory=True): the tensor storages a region's operators allocate and release, checked against storage
sizes on the CPU (and against torch.cuda's counters where a GPU is present)."""

from __future__ import annotations

import pytest
import torch

from portscope.ingest.memory import allocator_lanes, region_memory
from portscope.profiler import explain
from portscope.profiler.demo import prompt, tiny_llama


def test_storages_allocated_and_released_by_hand() -> None:
    with explain("outer", memory=True, with_stack=True) as region:
        x = torch.empty(1000, dtype=torch.float32)  # 4,000 B
        y = x + 1  # 4,000 B: the peak, 8,000
        z = y.view(10, 100)  # a view of y's storage: nothing
        y.add_(1)  # in place: nothing
        del x  # released: 4,000
        w = torch.ones(250, dtype=torch.float64)  # 2,000 B: 6,000 live at the end
    trace = region.to_trace()
    [lane] = allocator_lanes(trace)
    assert lane.device == "cpu"
    assert lane.total.tolist() == [0, 4000, 8000, 4000, 6000] and lane.delta.tolist() == [0, 4000, 4000, -4000, 2000]
    assert trace["regions"].column("peak_memory_bytes").to_pylist() == [8000]
    found = region_memory(trace, 0)
    assert found.devices.loc[0, ["peak_bytes", "live_at_exit_bytes", "allocations", "allocated_bytes"]].tolist() == [8000, 6000, 3, 10000]
    assert found.sites["allocated_bytes"].tolist() == [4000, 4000, 2000]
    assert all(site.startswith("tests/profiler/test_memory_recording.py:") for site in found.sites["call_site"])
    assert z.shape == (10, 100) and w.numel() == 250


def test_off_by_default_and_nested_regions_share_the_record() -> None:
    with explain("plain") as plain:
        torch.ones(10) + 1
    assert plain.memory is None and not allocator_lanes(plain.to_trace())
    with explain("outer", memory=True) as outer:
        a = torch.zeros(100)  # 400 B
        with explain("inner") as inner:
            b = torch.zeros(200)  # 800 B: inside both
    trace = outer.to_trace()
    assert inner.memory is outer.memory
    peaks = dict(zip(trace["regions"].column("name").to_pylist(), trace["regions"].column("peak_memory_bytes").to_pylist(), strict=True))
    assert peaks == {"outer": 1200, "inner": 1200}
    assert a.numel() + b.numel() == 300


def test_tiny_llama_peaks_and_top_lines() -> None:
    """The logits (1 x 8 tokens x 256 vocabulary x 4 B = 8,192 B) are allocated at LlamaForCausalLM's lm_head line
    and still live when the region ends."""
    model, ids = tiny_llama(dtype=torch.float32), prompt(8)
    with torch.no_grad(), explain("forward", memory=True, with_stack=True) as region:
        out = model(ids)
    assert out.logits.untyped_storage().nbytes() == 8192
    found = region_memory(region.to_trace(), 0)
    row = found.devices.iloc[0]
    assert row["device"] == "cpu" and row["peak_bytes"] >= row["live_at_exit_bytes"] >= 8192 and row["allocations"] > 10
    lm_head = found.sites[found.sites["call_site"].str.contains(r"\(LlamaForCausalLM.forward\)")]
    assert lm_head[["allocations", "allocated_bytes"]].values.tolist() == [[1, 8192]]
    assert found.sites["allocated_bytes"].is_monotonic_decreasing


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_totals_start_from_the_device_counter() -> None:
    weights = torch.ones(1 << 20, device="cuda")  # made before the region: in the counter, not an allocation
    base = torch.cuda.memory_allocated()
    with explain("gpu", memory=True) as region:
        x = torch.empty(1 << 18, device="cuda")  # 1 MiB
    [lane] = [lane for lane in allocator_lanes(region.to_trace()) if lane.device.startswith("cuda")]
    assert lane.total.tolist()[:2] == [base, base + (1 << 20)]
    assert region.peak_memory_bytes == torch.cuda.max_memory_allocated() and weights.numel() and x.numel()


def test_predicted_device_memory_from_the_residency_model() -> None:
    """Under a target, the bytes valid on the device after each operator: the weights (4 x 8 x 2 B = 64) from the
    module's first call; mm copies its host input (1 x 4 x 2 = 8 B) and leaves its output (16 B) there: 88; mul: 104;
    y is released (88) and add's output takes its place: 104 again, so no change is recorded after add."""
    torch.manual_seed(0)
    linear, x = torch.nn.Linear(4, 8, bias=False).half(), torch.ones(1, 4, dtype=torch.float16)
    with torch.no_grad(), explain("predicted", target="fp16-npu") as region:
        y = linear(x)
        z = y * 2
        del y
        w = z + 1
    trace = region.to_trace()
    [lane] = allocator_lanes(trace)
    assert lane.device == "npu:0" and lane.total.tolist() == [0, 64, 88, 104] and lane.op_id.tolist() == [0, 0, 1, 2]
    assert trace["regions"].column("peak_memory_bytes").to_pylist() == [104]
    found = region_memory(trace, 0).devices
    assert found.loc[0, ["peak_bytes", "live_at_exit_bytes"]].tolist() == [104, 104] and w.shape == (1, 8)
