"""`portscope plan`: figures computed by hand from the configs in tests/fixtures/model_configs.

The configs are the published config.json fields of Llama-3.2-1B and Qwen3-0.6B, written by hand
(nothing is downloaded); the models are built on the meta device (no weights).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest import read_trace
from portscope.ingest.errors import UsageError
from portscope.profiler.plan import (
    ModelShape,
    kv_cache_bytes,
    load_config,
    model_shape,
    padding,
    plan,
    plan_row,
    read_prompt_lengths,
)
from portscope.profiler.targets import load_target
from portscope.profiler.targets.static_shapes import StepInput

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "model_configs"
LLAMA = CONFIGS / "llama-3.2-1b.json"
QWEN = CONFIGS / "qwen3-0.6b.json"


@pytest.fixture(scope="module")
def llama() -> ModelShape:
    return model_shape(load_config(LLAMA))


@pytest.fixture(scope="module")
def qwen() -> ModelShape:
    return model_shape(load_config(QWEN))


def test_shapes_from_the_configs(llama: ModelShape, qwen: ModelShape) -> None:
    # Llama-3.2-1B: embedding 128256*2048 = 262,668,288 (tied with the LM head); per layer q 2048*2048 + k, v
    # 2048*512 each + o 2048*2048 + MLP 3*2048*8192 + 2 norms of 2048 = 60,821,504; x16 + final norm 2048
    assert (llama.layers, llama.kv_heads, llama.head_dim, llama.attention_heads) == (16, 8, 64, 32)
    assert llama.parameters == 262_668_288 + 16 * 60_821_504 + 2048 == 1_235_814_400
    # matrix products per token: the 16 layers' projections (60,817,408 each) and the LM head (tied, still a product)
    assert llama.linear_weights == 16 * 60_817_408 + 262_668_288
    # Qwen3-0.6B: embedding 151936*1024; per layer q 1024*2048 + k, v 1024*1024 each + o 2048*1024
    # + MLP 3*1024*3072 + 2 norms of 1024 + q/k norms of 128 = 15,730,944; x28 + final norm 1024
    assert (qwen.layers, qwen.kv_heads, qwen.head_dim) == (28, 8, 128)
    assert qwen.parameters == 155_582_464 + 28 * 15_730_944 + 1024 == 596_049_920


def test_kv_cache_figures_from_the_issue(llama: ModelShape, qwen: ModelShape) -> None:
    # 16 x 2 x 8 x 64 x 4096 x 2 B and 28 x 2 x 8 x 128 x 4096 x 2 B
    assert kv_cache_bytes(llama, cache_length=4096, batch=1, bits=16) == 134_217_728
    assert kv_cache_bytes(qwen, cache_length=4096, batch=1, bits=16) == 469_762_048
    assert kv_cache_bytes(qwen, cache_length=4096, batch=4, bits=8) == 469_762_048 * 2


def test_plan_rows_at_4096(llama: ModelShape) -> None:
    target = load_target("static-llm-npu")
    [row] = plan(llama, target, sequences=[4096], batches=[1])
    assert row.weight_bytes == 1_235_814_400  # 8-bit weights: one byte per parameter
    assert row.kv_cache_bytes == 134_217_728
    # activations (16 bits): a layer holds 2 x 2048 + max((32 + 2 x 8) x 64, 2 x 8192) = 20,480 values per token,
    # x 4096 tokens = 83,886,080 (the last hidden states and logits: 4096 x 2048 + 128,256 = 8,516,864), x 2 B
    assert row.device_memory_bytes == 1_235_814_400 + 134_217_728 + 167_772_160 == 1_537_804_288
    assert row.memory_bytes == 17_179_869_184 and row.fits is True
    assert row.programs == 2
    assert (row.h2d_bytes_per_token, row.d2h_bytes_per_token) == (8, 128256 * 2)  # an int64 id in, fp16 logits out
    assert row.cost_source == "assumed"
    # decode: flops 2*1,235,746,816 + 4*16*32*64*4096 = 3,008,364,544 -> 37,605 ns at 80,000/ns; bytes weights +
    # cache 1,370,032,128 / 64 = 21,406,752 ns (memory-bound) + 2,000 latency; + h2d 10,000 + 8/8, d2h 10,000 +
    # 256,512/8, + 20,000 dispatch
    assert row.decode_ns_per_token == 21_406_752 + 2_000 + 10_001 + 42_064 + 20_000
    # prefill: 4096 x 3,008,364,544 flops / 80,000 = 154,028,264.65 ns (compute-bound) + 2,000; h2d 10,000 +
    # 4096*8/8; d2h 42,064; dispatch 20,000
    assert row.prefill_ns == round(154_028_264.6528 + 2_000 + 14_096 + 42_064 + 20_000)


def test_fits_at_the_boundary(llama: ModelShape) -> None:
    target = load_target("static-llm-npu")
    static = dataclasses.replace(target.static_shapes, memory_bytes=1_537_804_288)
    assert plan_row(llama, target, static).fits is True
    assert plan_row(llama, target, dataclasses.replace(static, memory_bytes=1_537_804_287)).fits is False
    assert plan_row(llama, target, dataclasses.replace(static, memory_bytes=None)).fits is None


def test_embeddings_cross_instead_of_ids(llama: ModelShape) -> None:
    target = load_target("static-llm-npu")
    static = dataclasses.replace(target.static_shapes, step_input=StepInput.EMBEDDINGS, batch_size=2)
    row = plan_row(llama, target, static)
    assert row.h2d_bytes_per_token == 2 * 2048 * 2 and row.d2h_bytes_per_token == 2 * 128256 * 2


def test_padding_waste() -> None:
    lengths = [100, 1000, 3000, 5000]
    # batch 1: 3 prompts fit (5000 is refused), each padded to 4096: 1 - 4100 / (3*4096)
    one = padding(lengths, sequence=4096, cache=4096, batch=1, new_tokens=128)
    assert (one.prompts, one.over_sequence, one.over_cache) == (4, 1, 0)
    assert one.waste == pytest.approx(8188 / 12288)
    # batch 2: two calls of 2 rows, the last with an empty row: 1 - 4100 / 16384
    two = padding(lengths, sequence=4096, cache=4096, batch=2, new_tokens=128)
    assert two.waste == pytest.approx(12284 / 16384)
    # 3000 + 1200 new tokens > 4096 positions of cache
    assert padding(lengths, sequence=4096, cache=4096, batch=1, new_tokens=1200).over_cache == 1
    assert padding([], sequence=4096, cache=4096, batch=1, new_tokens=0).waste is None


def test_sweep_sets_cache_with_sequence_unless_fixed(qwen: ModelShape) -> None:
    target = load_target("static-llm-npu")
    rows = plan(qwen, target, sequences=[1024, 2048], batches=[1, 2])
    assert [(r.max_sequence_length, r.max_cache_length, r.batch_size) for r in rows] == [
        (1024, 1024, 1), (2048, 2048, 1), (1024, 1024, 2), (2048, 2048, 2)]
    assert rows[3].kv_cache_bytes == 28 * 2 * 8 * 128 * 2048 * 2 * 2
    fixed = plan(qwen, target, sequences=[1024], batches=[1], cache_length=4096)
    assert fixed[0].kv_cache_bytes == 469_762_048
    with pytest.raises(UsageError, match="--seq 8192 is longer than --cache-length 4096"):
        plan(qwen, target, sequences=[8192], cache_length=4096)
    with pytest.raises(UsageError, match="--new-tokens -1: must not be negative"):
        plan(qwen, target, new_tokens=-1)
    with pytest.raises(UsageError, match="no \\[static_shapes\\] section"):
        plan(qwen, load_target("fp16-npu"))


def test_prompt_lengths_file(tmp_path: Path) -> None:
    good = tmp_path / "p.txt"
    good.write_text("# chat prompts\n100, 200\n300 # long\n")
    assert read_prompt_lengths(good) == [100, 200, 300]
    bad = tmp_path / "bad.txt"
    bad.write_text("100\n-5 x\n")
    with pytest.raises(UsageError, match=r"bad.txt: line 2: '-5' is not a positive whole number.*line 2: 'x'"):
        read_prompt_lengths(bad)


def test_cli_prints_the_table_and_writes_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("100\n1000\n3000\n5000\n")
    out = tmp_path / "plan.arrow"
    started = time.perf_counter()
    code = main(["plan", "--model", str(QWEN), "--target", "static-llm-npu", "--seq", "1024,4096", "--batch", "1,2",
                 "--prompt-lengths", str(prompts), "-o", str(out)])
    assert code == 0 and time.perf_counter() - started < 60  # no weights: seconds (60 on a loaded 2-core machine)
    text = capsys.readouterr().out
    assert "Qwen3ForCausalLM: 596,049,920 parameters, 28 layers, 8 KV heads x 128" in text
    assert "469.8 MB" in text and "prefill (assumed)" in text
    trace = read_trace(out)
    plan_rows = trace["plan"].to_pylist()
    assert len(plan_rows) == 4 and trace["regions"].num_rows == 0
    at_4096 = next(r for r in plan_rows if r["max_sequence_length"] == 4096 and r["batch_size"] == 1)
    assert at_4096["kv_cache_bytes"] == 469_762_048 and at_4096["programs"] == 2
    assert at_4096["prompts_over_sequence"] == 1 and at_4096["padding_waste"] == pytest.approx(8188 / 12288)
    # at 1024, two of four prompts are refused: 100 and 1000 tokens are each padded to 1024
    at_1024 = next(r for r in plan_rows if r["max_sequence_length"] == 1024 and r["batch_size"] == 1)
    assert at_1024["prompts_over_sequence"] == 2 and at_1024["padding_waste"] == pytest.approx(948 / 2048)
    assert trace.run_info.target == "static-llm-npu" and trace.run_info.config["static_shapes"]["weight_bits"] == 8


def test_cli_names_a_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.json"
    assert main(["plan", "--model", str(missing), "-o", str(tmp_path / "p.arrow")]) == 2
    assert f"portscope plan: {missing}: no such config.json" in capsys.readouterr().err
    assert not (tmp_path / "p.arrow").exists()


def test_report_prints_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.arrow"
    assert main(["plan", "--model", str(LLAMA), "--seq", "4096", "--batch", "1", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "LlamaForCausalLM: 1,235,814,400 parameters, 16 layers, 8 KV heads x 64  |  target static-llm-npu" in text
    [row] = [line.split() for line in text.splitlines() if line.lstrip().startswith("4096")]
    # seq, cache, batch, weights (8 bits), KV cache, memory, fits, programs, padding, refused
    assert row[:15] == ["4096", "4096", "1", "1.2", "GB", "134.2", "MB", "1.5", "GB", "yes", "2", "-", "-", "154.11", "ms"]


def test_cost_source_reads_the_targets_sources_table(tmp_path: Path) -> None:
    from portscope.profiler.plan import cost_source

    # every non-zero engine figure of static-llm-npu.toml, named by hand
    figures = ["dma_h2d.bytes_per_ns", "dma_h2d.latency_ns", "dma_d2h.bytes_per_ns", "dma_d2h.latency_ns",
               "matrix.flops_per_ns", "matrix.bytes_per_ns", "matrix.latency_ns", "vector.flops_per_ns",
               "vector.bytes_per_ns", "vector.latency_ns"]
    base = (Path(__file__).resolve().parents[2] / "profiler" / "targets" / "static-llm-npu.toml").read_text().replace('name = "static-llm-npu"', 'name = "sourced"')

    def with_sources(sources: dict[str, str]) -> str:
        path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.toml"
        path.write_text(base + "\n[sources]\n" + "".join(f'"engines.{f}" = "{v}"\n' for f, v in sources.items()))
        return cost_source(load_target(path))

    assert cost_source(load_target("static-llm-npu")) == "assumed"
    assert with_sources(dict.fromkeys(figures, "datasheet: vendor brief")) == "datasheet"
    assert with_sources({**dict.fromkeys(figures, "datasheet: vendor brief"),
                         "matrix.flops_per_ns": "measured: board A"}) == "datasheet+measured"
    assert with_sources(dict.fromkeys(figures[:-1], "datasheet: vendor brief")) == "assumed"  # one left unnamed
