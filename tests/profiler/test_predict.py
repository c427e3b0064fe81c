"""Predictions for target devices on real tiny transformers models (random weights, float16)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import pytest
import torch

from portscope.ingest import Direction, Placement, SignalKind, Source, Trace, summarize
from portscope.profiler import explain
from portscope.profiler.demo import generate, prompt, tiny_llama
from portscope.profiler.predict import reset_program_cache

NORM_CHAIN = {"aten::pow.Tensor_Scalar", "aten::mean.dim", "aten::add.Tensor", "aten::rsqrt", "aten::mul.Tensor"}


def forward(model: torch.nn.Module, length: int, target: str = "fp16-npu") -> Trace:
    reset_program_cache()
    with torch.no_grad(), explain("forward", target=target, with_stack=True) as region:
        model(input_ids=prompt(length))
    return region.to_trace()


def signals(trace: Trace, kind: SignalKind) -> list[dict]:
    return [s for s in trace["signals"].to_pylist() if s["kind"] == kind.value]


def norm_fallbacks(trace: Trace) -> dict[str, Counter]:
    """Fallback operators per norm module."""
    by_module: dict[str, Counter] = defaultdict(Counter)
    for s in signals(trace, SignalKind.CPU_FALLBACK):
        if s["module"] and s["module"].split(".")[-1].endswith("norm"):
            by_module[s["module"]][s["op_name"]] += 1
    return by_module


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return tiny_llama()  # 2 layers, hidden 128, 4 heads: head width 32, half of it 16 < 64


def test_llama_fp16_npu_structure(llama: torch.nn.Module) -> None:
    trace = forward(llama, 7)
    assert trace.run_info.source is Source.PREDICTED and trace.run_info.target == "fp16-npu"
    norms = norm_fallbacks(trace)
    layers = llama.config.num_hidden_layers
    assert len(norms) == 2 * layers + 1  # two norms per layer plus the final norm
    for module, ops in norms.items():
        assert set(ops) == NORM_CHAIN and all(n == 1 for n in ops.values()), (module, ops)
        reasons = {s["reason"] for s in signals(trace, SignalKind.CPU_FALLBACK) if s["module"] == module}
        assert reasons == {"dtype-not-supported"}
    bounces = signals(trace, SignalKind.BOUNCE_DTYPE)
    per_norm = Counter(s["module"] for s in bounces if s["module"].endswith("norm"))
    assert len(per_norm) == 2 * layers + 1 and set(per_norm.values()) == {2}  # a cast on each side
    assert Counter(s["reason"] for s in bounces if s["module"].endswith("norm")) == {
        "float16->float32": 2 * layers + 1, "float32->float16": 2 * layers + 1}
    # rotate_half's negation of half a head (16 < 64 elements) falls back as unaligned, for q and k
    negs = [s for s in signals(trace, SignalKind.CPU_FALLBACK) if s["op_name"] == "aten::neg"]
    assert len(negs) == 2 * layers and {s["reason"] for s in negs} == {"unaligned"}
    assert all(s["note"] == "try: pad to a multiple of 64" for s in negs)
    # attention on a 7-token prompt: the fused kernel needs multiples of 32
    attn = [s for s in signals(trace, SignalKind.CPU_FALLBACK) if "scaled_dot_product" in s["op_name"]]
    if fused_attention(trace):
        assert len(attn) == layers and {s["reason"] for s in attn} == {"shape-condition"}
    else:
        assert not attn
    # the physical d2h volume is non-zero and equals the sum of its transfers
    s = summarize(trace, 0)
    d2h = [t for t in trace["transfers"].to_pylist() if t["direction"] == "d2h"]
    assert s.transfer_bytes[Direction.D2H] > 0
    assert s.transfer_bytes[Direction.D2H] == sum(t["bytes"] for t in d2h)
    assert s.bytes(SignalKind.TRANSFER_D2H) == sum(t["bytes"] for t in d2h)
    assert not s.verdict()["clean"]


def fused_attention(trace: Trace) -> bool:
    """Whether torch dispatched a fused attention op. With transformers 4.x on torch < 2.9, masked CPU
    attention runs through torch's math path (bmm, softmax): no fused op reaches the recorder."""
    names = set(trace["ops"].column("name").to_pylist())
    if any("scaled_dot_product" in name for name in names):
        return True
    assert {"aten::bmm", "aten::_safe_softmax"} <= names
    return False


def test_attention_does_not_fall_back_at_32_tokens(llama: torch.nn.Module) -> None:
    trace = forward(llama, 32)
    if not fused_attention(trace):
        pytest.skip("no fused attention op on this torch/transformers (math path)")
    attn_ops = [o for o in trace["ops"].to_pylist() if "scaled_dot_product" in o["name"]]
    assert len(attn_ops) == 2 and all(o["placement"] == Placement.DEVICE.value for o in attn_ops)
    assert not [s for s in signals(trace, SignalKind.CPU_FALLBACK) if "scaled_dot_product" in s["op_name"]]


def test_narrow_rmsnorm_region(llama: torch.nn.Module) -> None:
    x = torch.randn(1, 7, 128, dtype=torch.float16)  # made before the region: the port's input, on the device
    with torch.no_grad(), explain("norm", target="fp16-npu") as region:
        llama.model.layers[0].input_layernorm(x)
    s = summarize(region.to_trace(), 0)
    assert s.count(SignalKind.CPU_FALLBACK) == 5
    assert s.count(SignalKind.BOUNCE_DTYPE) == 2
    # the upcast (a dtype change the device cannot do) reads x back: 7 x 128 float16
    assert s.transfer_counts[Direction.D2H] == 1 and s.transfer_bytes[Direction.D2H] == 7 * 128 * 2
    # the final multiply by the (device-resident) weight needs the host result on the device
    assert s.transfer_counts[Direction.H2D] == 1 and s.transfer_bytes[Direction.H2D] == 7 * 128 * 2


def test_generation_compiles_prefill_only_for_a_new_prompt_length(llama: torch.nn.Module) -> None:
    reset_program_cache()
    compiled = []
    with torch.no_grad():
        for length in (7, 7, 12):
            with explain(f"generate {length}", target="fp16-npu") as region:
                generate(llama, prompt(length), new_tokens=4)
            trace = region.to_trace()
            compiled.append(trace["compiles"].column("key").to_pylist())
            assert summarize(trace, 0).count(SignalKind.RECOMPILE) == len(compiled[-1])
    first, second, third = compiled
    assert len(first) > 10
    assert second == []  # same prompt: every program is warm
    assert 0 < len(third) < len(first)
    for key in third:  # only programs whose shapes hold the new length (prefill; on transformers 4.x also
        dims = {int(d) for d in re.findall(r"\d+", key.split(" strides ")[0].split(" ", 1)[1])}  # decode masks)
        assert dims & set(range(12, 12 + 4 + 1)), key


def test_qwen3_qk_norm_and_wide_heads() -> None:
    """Qwen3 adds a norm on q and k per head: four norm chains per layer instead of two. Its head width
    here is 128 (hidden 256, 2 heads), so half a head is 64 elements: rotate_half is aligned and never
    falls back, and q/k norms run on head-width rows."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=128, vocab_size=256, max_position_embeddings=256)
    model = Qwen3ForCausalLM(cfg).eval().half()
    trace = forward(model, 7)
    norms = norm_fallbacks(trace)
    assert len(norms) == 4 * 2 + 1
    assert any(m.endswith("q_norm") for m in norms) and any(m.endswith("k_norm") for m in norms)
    assert all(set(ops) == NORM_CHAIN for ops in norms.values())
    assert not [s for s in signals(trace, SignalKind.CPU_FALLBACK) if s["op_name"] == "aten::neg"]


def test_cuda_target_has_no_fallbacks(llama: torch.nn.Module) -> None:
    trace = forward(llama, 7, target="cuda")
    s = summarize(trace, 0)
    assert s.count(SignalKind.CPU_FALLBACK) == 0 and s.count(SignalKind.BOUNCE_DTYPE) == 0
    assert s.transfer_bytes[Direction.D2H] == 0 and s.count(SignalKind.RECOMPILE) == 0
    assert s.verdict()["clean"]


def test_bf16_target_flags_float16_models(llama: torch.nn.Module) -> None:
    trace = forward(llama, 7, target="bf16-npu")
    mms = [s for s in signals(trace, SignalKind.CPU_FALLBACK) if s["op_name"] == "aten::mm"]
    assert mms and {s["reason"] for s in mms} == {"dtype-not-supported"}  # fp16 matmuls on a bf16-only device
    assert mms[0]["note"] == "try: compute in bfloat16"


def test_warm_region_compiles_nothing(llama: torch.nn.Module) -> None:
    reset_program_cache()
    ids = prompt(7)
    with torch.no_grad():
        with explain("cold", target="fp16-npu") as cold:
            llama(input_ids=ids)
        with explain("warm", target="fp16-npu") as warm:
            llama(input_ids=ids)
    assert summarize(cold.to_trace(), 0).count(SignalKind.RECOMPILE) > 0
    assert summarize(warm.to_trace(), 0).count(SignalKind.RECOMPILE) == 0


def test_residency_tracking_is_bounded(llama: torch.nn.Module) -> None:
    """Tracked storages follow live tensors: repeating the forward inside one region does not grow them."""
    ids = prompt(7)
    counts = []
    with torch.no_grad(), explain("r", target="fp16-npu") as region:
        for _ in range(8):
            llama(input_ids=ids)
            counts.append(region.predictor.tracked())
    assert counts[-1] == counts[2]
    assert counts[-1] < 3 * sum(1 for _ in llama.parameters())
