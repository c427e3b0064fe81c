"""explain() on real tiny models: what is recorded, and that recording changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from portscope.ingest import Direction, Mode, Phase, Placement, SignalKind, Source, read_trace, summarize
from portscope.profiler import explain, explain_steady, save
from portscope.profiler.demo import prompt, tiny_llama

CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return tiny_llama(dtype=torch.float32)


def test_records_every_operator_with_metadata(llama: torch.nn.Module) -> None:
    ids = prompt(7)
    with torch.no_grad(), explain("prefill") as region:
        llama(input_ids=ids)
    trace = region.to_trace()
    ops = trace["ops"].to_pylist()
    names = [o["name"] for o in ops]
    assert names.count("aten::embedding") == 1
    assert names.count("aten::rsqrt") == 2 * 2 + 1  # two norms per layer plus the final norm
    emb = next(o for o in ops if o["name"] == "aten::embedding")
    assert emb["input_shapes"] == "256x128;1x7" and emb["input_dtypes"] == "float32;int64"
    assert emb["output_shapes"] == "1x7x128" and emb["bytes_out"] == 7 * 128 * 4
    assert emb["module"] == "model.embed_tokens" and emb["placement"] == Placement.HOST.value
    assert any(o["module"] == "model.layers.1.self_attn.q_proj" for o in ops)
    assert all(o["dur_ns"] >= 0 for o in ops)
    assert trace.run_info.source is Source.MEASURED and trace.run_info.model["class"] == "LlamaForCausalLM"


def test_region_does_not_change_outputs(llama: torch.nn.Module) -> None:
    ids = prompt(9)
    with torch.no_grad():
        plain = llama(input_ids=ids).logits
        with explain("x", with_stack=True):
            recorded = llama(input_ids=ids).logits
        with explain("y", target="fp16-npu"):
            predicted = llama(input_ids=ids).logits
    assert torch.equal(plain, recorded) and torch.equal(plain, predicted)


def test_call_site_is_the_model_line_and_stacks_are_relative(llama: torch.nn.Module) -> None:
    ids = prompt(5)
    with torch.no_grad(), explain("s", with_stack=True) as region:
        llama(input_ids=ids)
        ids.to("meta")  # the line below the model call
    trace = region.to_trace()
    sites = [s for s in trace["ops"].column("call_site").to_pylist() if s]
    here = Path(__file__).name
    # operators of the model are at transformers' lines; the copy is at this test's line
    assert sum(s.startswith("transformers/models/llama/modeling_llama.py:") for s in sites) > len(sites) // 2
    transfer = trace["transfers"].to_pylist()[0]
    assert transfer["call_site"].split(":")[0].endswith(here)
    assert transfer["call_site"].endswith("(test_call_site_is_the_model_line_and_stacks_are_relative)")
    stacks, frames = trace["stacks"].to_pylist(), trace["frames"].to_pylist()
    assert len(stacks) >= 1 and len(frames) > 5
    # whole stacks, relative to their roots: the test's own frame is further out than transformers' and torch's
    files = [frames[i]["file"] for i in stacks[0]["frame_ids"]]
    assert any(f.endswith(here) for f in files) and any(f.startswith(("transformers/", "torch/")) for f in files)
    assert not [f["file"] for f in frames if f["file"].startswith("/")]


def test_copies_to_meta_are_h2d_transfers() -> None:
    x = torch.randn(16, 32)
    with explain("move") as region:
        x.to("meta")
        x.to("meta", dtype=torch.float16)
        x.t().to("meta")
    s = summarize(region.to_trace(), 0)
    assert s.transfer_counts[Direction.H2D] == 3
    assert s.transfer_bytes[Direction.H2D] == 3 * 16 * 32 * 4
    assert s.count(SignalKind.TRANSFER_H2D) == 3
    assert s.count(SignalKind.COPY_DTYPE) == 1
    assert s.count(SignalKind.COPY_NONCONTIGUOUS) == 1
    assert s.transfer_bytes[Direction.D2H] == 0


def test_nested_and_sequential_regions(tmp_path: Path) -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with explain("outer") as outer:
        a + b
        with explain("inner") as inner:
            a.to("meta")
        a * b
    with explain("second") as second:
        a - b
    path = save([outer, second], tmp_path / "run.arrow")
    trace = read_trace(path)
    regions = trace["regions"].to_pylist()
    assert [r["name"] for r in regions] == ["outer", "inner", "second"]
    assert regions[1]["parent_id"] == regions[0]["region_id"] and regions[2]["parent_id"] is None
    assert inner.parent is outer
    outer_summary = summarize(trace, 0)
    assert outer_summary.op_count == 3 and outer_summary.transfer_counts[Direction.H2D] == 1  # includes inner
    assert summarize(trace, 1).op_count == 1 and summarize(trace, 2).op_count == 1


def test_region_that_raises_records_and_propagates() -> None:
    x = torch.randn(3)
    with pytest.raises(ZeroDivisionError), explain("boom") as region:
        x.to("meta")
        1 / 0  # noqa: B018
    assert region.error.startswith("ZeroDivisionError")
    trace = region.to_trace()
    assert trace["ops"].num_rows == 1 and trace["regions"].column("error")[0].as_py().startswith("ZeroDivisionError")
    assert not region.verdict()["clean"]


def test_compile_still_compiles_after_a_region() -> None:
    torch._dynamo.reset()
    calls = []

    def backend(gm, example_inputs):  # noqa: ANN001, ANN202
        calls.append(gm)
        return gm.forward

    @torch.compile(backend=backend)
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * 2

    x = torch.randn(8)
    with explain("around compile"):
        f(x)
    assert len(calls) == 1  # compiled inside the region (the mode is off during compilation)
    y = torch.randn(8, 3)
    f(y)
    assert len(calls) == 2  # and a new shape still compiles after it


def test_explain_steady_cold_and_warm(llama: torch.nn.Module) -> None:
    ids = prompt(7)
    n = []
    with torch.no_grad():
        cold, warm = explain_steady(lambda: n.append(llama(input_ids=ids)), warmup=3, return_cold=True)
    assert len(n) == 4  # cold, two more warm-up calls, warm
    assert cold.phase is Phase.COLD and warm.phase is Phase.WARM and cold.mode is Mode.EAGER
    assert len(cold.raw) == len(warm.raw) > 100


def test_report_verdict_dump_save(llama: torch.nn.Module, tmp_path: Path) -> None:
    with torch.no_grad(), explain("p") as region:
        llama(input_ids=prompt(4)).logits.to("meta")
    text = region.report()
    assert "Region 'p'" in text and "transfer/h2d" in text and "physical device->host volume: 0 B" in text
    assert region.verdict() == {"clean": True, "status": "clean", "reasons": []}
    dump = region.dump()
    assert json.loads(json.dumps(dump)) == dump
    assert dump["transfers"]["h2d"]["count"] == 1
    path = region.save(tmp_path / "p.arrow")
    assert read_trace(path)["ops"].num_rows == len(region.raw)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_transfers_syncs_and_fallbacks() -> None:
    x = torch.randn(256, 256, device="cuda")
    with explain("gpu") as region:
        y = x @ x
        y.sum().item()
        y.cpu()
        torch.randn(8).neg()  # a host operator inside a GPU region
        y[y > 0]
    s = summarize(region.to_trace(), 0)
    assert s.count(SignalKind.SYNC) >= 2
    assert s.transfer_bytes[Direction.D2H] >= 256 * 256 * 4
    assert s.count(SignalKind.CPU_FALLBACK) == 1
    assert s.peak_memory_bytes is not None and s.peak_memory_bytes > 0
