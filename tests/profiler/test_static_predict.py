"""Predictions under a static-shape target on a real tiny Llama (random weights, float16): generate runs as
one prefill and one decode program, the KV cache stays on the device, padding and over-length are signals."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from portscope.ingest import Direction, Placement, SignalKind, Trace
from portscope.ingest.report import format_trace
from portscope.profiler import explain
from portscope.profiler.demo import prompt, tiny_llama
from portscope.profiler.predict import reset_program_cache
from portscope.profiler.static_predict import StaticPredictor, predictor_for
from portscope.profiler.targets import Target, load_target

VOCAB = 256  # tiny_llama: vocab 256, hidden 128, 2 layers, 4 heads, 2 KV heads (head width 32), float16


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return tiny_llama()


@pytest.fixture(scope="module")
def target() -> Target:
    """static-llm-npu compiled for 1 x 16 (prefill) and a 32-position cache."""
    base = load_target("static-llm-npu")
    return dataclasses.replace(base, name="static-test",
                               static_shapes=base.static_shapes.with_lengths(sequence=16, cache=32, batch=1))


def generate(model: torch.nn.Module, target: Target, length: int, new_tokens: int) -> Trace:
    reset_program_cache()
    with torch.no_grad(), explain("generate", target=target) as region:
        model.generate(prompt(length), max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    return region.to_trace()


def rows(trace: Trace, kind: SignalKind) -> list[dict]:
    return [s for s in trace["signals"].to_pylist() if s["kind"] == kind.value]


def test_predictor_for_picks_by_section(target: Target) -> None:
    assert isinstance(predictor_for(target), StaticPredictor)
    assert not isinstance(predictor_for("fp16-npu"), StaticPredictor)


def test_generate_is_two_programs_with_the_cache_on_the_device(llama: torch.nn.Module, target: Target) -> None:
    trace = generate(llama, target, 7, 4)
    ops = trace["ops"].to_pylist()
    calls = [o for o in ops if o["name"].startswith("program ")]
    # the first token comes from the prefill call, the other three from decode calls
    assert [c["name"] for c in calls] == ["program prefill 1x16"] + ["program decode 1x1 cache 32"] * 3
    assert calls[0]["input_shapes"] == "1x7"
    assert sorted(trace["compiles"].column("key").to_pylist()) == ["program decode 1x1 cache 32", "program prefill 1x16"]
    # inside the programs nothing falls back: every operator of the model is part of a program call
    inside = [o for o in ops if o["module"] is not None]
    assert inside and all(o["placement"] == Placement.GRAPH.value for o in inside)
    assert {o["graph_id"] for o in inside} == {c["graph_id"] for c in calls}
    assert not rows(trace, SignalKind.CPU_FALLBACK) and not rows(trace, SignalKind.RECOMPILE)
    # what crosses back per token is the logits of one position: 256 x 2 B; nothing else (no KV cache)
    transfers = trace["transfers"].to_pylist()
    d2h = [t["bytes"] for t in transfers if t["direction"] == Direction.D2H.value]
    assert d2h == [VOCAB * 2] * 4
    # what goes in per decode step is a few int64s (the new token's id, its position): never a cache layer
    # (one layer's keys alone: 2 KV heads x 32 wide x 32 positions x 2 B = 4096 B)
    decode_ids = {c["op_id"] for c in calls[1:]}
    per_step = [sum(t["bytes"] for t in transfers if t["op_id"] == i and t["direction"] == "h2d") for i in decode_ids]
    assert all(8 <= b <= 3 * 8 for b in per_step)
    # padding: the prefill program computes 16 positions for a 7-token prompt; decode has no padding at batch 1
    [padding] = rows(trace, SignalKind.STATIC_PADDING)
    assert padding["count"] == 16 - 7 and padding["reason"] == "prefill"
    assert not rows(trace, SignalKind.STATIC_OVER_LENGTH)


def test_run_config_reserves_weights_and_cache(llama: torch.nn.Module, target: Target) -> None:
    config = generate(llama, target, 5, 2).run_info.config
    # KV cache: 2 layers x 2 x 2 KV heads x 32 wide x 32 positions x 1 sequence x 2 B
    assert config["kv_cache_bytes"] == 2 * 2 * 2 * 32 * 32 * 1 * 2 == 16_384
    # weights at 8 bits: embedding and LM head 256 x 128 each (untied); per layer q, o 128x128, k, v 128x64,
    # MLP 3 x 128x256, two norms of 128; final norm 128
    assert config["weight_bytes"] == 2 * 32_768 + 2 * (2 * 16_384 + 2 * 8_192 + 98_304 + 256) + 128 == 361_088
    # activations (16 bits): a layer holds 2 x 128 + max((4 + 2 x 2) x 32, 2 x 256) = 768 values per token, x 16
    # positions = 12,288 (the last hidden states and logits: 16 x 128 + 256 = 2,304), x 2 B = 24,576
    assert config["activation_bytes"] == 24_576
    assert config["device_memory_bytes"] == 361_088 + 16_384 + 24_576 == 402_048 and config["fits"] is True
    assert config["kv_cache"] == "device" and config["program_calls"] == {"prefill": 1, "decode": 1}
    assert config["static_shapes"]["max_sequence_length"] == 16


def test_programs_do_not_grow_with_prompt_lengths(llama: torch.nn.Module, target: Target) -> None:
    reset_program_cache()
    with torch.no_grad(), explain("three prompts", target=target) as region:
        for length in (3, 9, 14):
            llama.generate(prompt(length), max_new_tokens=2, min_new_tokens=2, do_sample=False)
    trace = region.to_trace()
    assert trace["compiles"].num_rows == 2
    assert sorted(r["count"] for r in rows(trace, SignalKind.STATIC_PADDING)) == [16 - 14, 16 - 9, 16 - 3]


def test_prompt_one_token_over_the_sequence_length(llama: torch.nn.Module, target: Target) -> None:
    assert not rows(generate(llama, target, 16, 1), SignalKind.STATIC_OVER_LENGTH)
    [over] = rows(generate(llama, target, 17, 1), SignalKind.STATIC_OVER_LENGTH)
    assert over["reason"] == "prompt-exceeds-max-sequence-length" and "max_sequence_length >= 17" in over["note"]
    assert over["op_name"] == "program prefill 1x16"


def test_generation_past_the_cache(llama: torch.nn.Module, target: Target) -> None:
    # 7 prompt tokens + 25 decode steps fill the 32 positions; a 26th decode step is the 33rd position
    assert not rows(generate(llama, target, 7, 26), SignalKind.STATIC_OVER_LENGTH)
    [over] = rows(generate(llama, target, 7, 27), SignalKind.STATIC_OVER_LENGTH)
    assert over["reason"] == "generation-exceeds-max-cache-length" and "max_cache_length >= 33" in over["note"]
    assert over["op_name"] == "program decode 1x1 cache 32"


def test_report_says_programs_and_reserved_memory(llama: torch.nn.Module, target: Target) -> None:
    text = format_trace(generate(llama, target, 7, 4))
    assert ("static shapes: 2 programs, prefill 1x16 (1 call) and decode 1x1 over a 32-position cache (3 calls); "
            "KV cache on the device (16.4 KB reserved); device memory 402.0 KB with weights at 8 bits of 17.2 GB (fits)"
            ) in text
    assert "9x program prefill 1x16  why: prefill 9" in text  # 16 - 7 padded positions


def test_a_model_without_token_input_is_one_program_call_without_length_signals(target: Target) -> None:
    """No input embedding reads ids and no host-made 3-D embeddings: one call, no padding or length claims."""
    reset_program_cache()
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).half()
    with torch.no_grad(), explain("mlp", target=target) as region:
        mlp(torch.ones(4, 8, dtype=torch.float16))
    trace = region.to_trace()
    ops = trace["ops"].to_pylist()
    # torch.ones runs in the host runtime; then one program call and the operators inside it
    assert [(o["name"], o["placement"]) for o in ops[:2]] == [("aten::ones", "host"), ("program prefill 1x16", "graph")]
    assert {o["placement"] for o in ops[2:]} == {Placement.GRAPH.value}
    assert not rows(trace, SignalKind.STATIC_PADDING) and not rows(trace, SignalKind.STATIC_OVER_LENGTH)
    # the input crosses once (4 x 8 x 2 B); the output stays on the device (nothing on the host reads it)
    assert [(t["direction"], t["bytes"]) for t in trace["transfers"].to_pylist()] == [("h2d", 64)]
