"""The sample traces: tiny random-init transformers models profiled the ways users do.

`portscope demo -o sample_traces/` regenerates every file listed in SAMPLES.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from portscope.ingest.trace import Trace, read_trace, write_trace

from .predict import reset_program_cache
from .region import Region, default_run_info, explain, explain_steady
from .tables import build_trace


def tiny_llama(*, hidden: int = 128, layers: int = 2, heads: int = 4, kv_heads: int = 2, vocab: int = 256,
               dtype: torch.dtype = torch.float16, seed: int = 0, **config: Any) -> torch.nn.Module:
    """A random-init LlamaForCausalLM small enough for tests (nothing is downloaded)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                      max_position_embeddings=256, **config)
    return LlamaForCausalLM(cfg).eval().to(dtype)


def prompt(length: int, *, vocab: int = 256, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + length)
    return torch.randint(3, vocab, (1, length), generator=g)


def generate(model: torch.nn.Module, ids: torch.Tensor, *, new_tokens: int = 4, cache_len: int = 64) -> torch.Tensor:
    """Greedy generation with a fixed-size static KV cache (decode shapes do not depend on the prompt)."""
    from transformers import StaticCache

    cache = StaticCache(config=model.config, max_cache_len=cache_len)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # `past_key_values` is renamed in transformers 5
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                              do_sample=False, past_key_values=cache, pad_token_id=0)


@dataclasses.dataclass(frozen=True)
class Sample:
    """A sample trace: either regions to save (`make`) or a function that writes the file itself (`write`)."""

    file: str
    description: str
    make: Callable[[], list[Region]] | None = None
    predicted_target: str | None = None
    write: Callable[[Path], Path] | None = None


def _forward_cold_warm(target: str | None, length: int = 7) -> Callable[[], list[Region]]:
    def make() -> list[Region]:
        model, ids = tiny_llama(), prompt(length)
        with torch.no_grad():
            cold, warm = explain_steady(lambda: model(input_ids=ids), warmup=2, return_cold=True,
                                        name="forward", with_stack=True, target=target)
        return [cold, warm]
    return make


def _narrow_norm() -> list[Region]:
    model = tiny_llama()
    x = torch.randn(1, 7, 128, dtype=torch.float16)  # made before the region: the port moved it to the device
    norm = model.model.layers[0].input_layernorm
    with torch.no_grad(), explain("rmsnorm (narrow)", with_stack=True, target="fp16-npu",
                                  tags={"narrow": "model.layers.0.input_layernorm"}) as region:
        norm(x)
    return [region]


def _generate_three() -> list[Region]:
    model = tiny_llama()
    regions = []
    with torch.no_grad():
        for i, length in enumerate((7, 7, 12)):
            with explain(f"generate #{i + 1} ({length}-token prompt)", with_stack=True, target="fp16-npu",
                         tags={"prompt_len": str(length)}) as region:
                generate(model, prompt(length))
            regions.append(region)
    return regions


def _measured_cpu() -> list[Region]:
    model, ids = tiny_llama(dtype=torch.float32), prompt(7)
    with torch.no_grad():
        cold, warm = explain_steady(lambda: model(input_ids=ids), warmup=2, return_cold=True,
                                    name="forward", with_stack=True, memory=True)
    return [cold, warm]


def _eager_vs_compiled(path: Path) -> Path:
    from .compare import compare_modes

    return compare_modes(tiny_llama, lambda: {"input_ids": prompt(7)}, path, target="fp16-npu", pad_to=64)


SAMPLES: list[Sample] = [
    Sample("llama_fp16-npu_forward.arrow",
           "tiny Llama (2 layers, hidden 128, float16) forward on a 7-token prompt, cold and warm, predicted for fp16-npu",
           _forward_cold_warm("fp16-npu"), "fp16-npu"),
    Sample("llama_fp16-npu_rmsnorm_narrow.arrow",
           "a narrow region around one RMSNorm fed a float16 tensor made before it, predicted for fp16-npu",
           _narrow_norm, "fp16-npu"),
    Sample("llama_fp16-npu_generate.arrow",
           "generate() with a 7-token prompt, the same prompt again, then a 12-token prompt (static KV cache of 64), predicted for fp16-npu",
           _generate_three, "fp16-npu"),
    Sample("llama_cuda_forward.arrow",
           "the same forward, cold and warm, predicted for cuda (nothing should fall back)",
           _forward_cold_warm("cuda"), "cuda"),
    Sample("llama_fp16-npu_eager_vs_compiled.arrow",
           "`portscope compare-modes`: the forward eager and torch.compile'd (inductor, prompt padded to 64), cold and warm, predicted for fp16-npu",
           predicted_target="fp16-npu", write=_eager_vs_compiled),
    Sample("llama_cpu_measured.arrow",
           "the same model in float32, measured on this CPU (no target), cold and warm, with its memory",
           _measured_cpu),
]


def make_samples(folder: str | Path, *, only: list[str] | None = None,
                 progress: Callable[[str], None] = lambda _: None) -> list[Path]:
    """Regenerate the sample traces into `folder`; return the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny operators on a busy machine: more threads only wait for each other (100x slower)
    try:
        return _make(folder, only, progress)
    finally:
        torch.set_num_threads(threads)


def _make(folder: Path, only: list[str] | None, progress: Callable[[str], None]) -> list[Path]:
    written = []
    for sample in SAMPLES:
        if only and sample.file not in only:
            continue
        progress(sample.file)
        reset_program_cache()  # each sample is profiled as in a fresh process
        if sample.write is not None:
            path = sample.write(folder / sample.file)
            trace = read_trace(path)
            _for_sharing(trace, sample)
            written.append(write_trace(trace, path))
            continue
        assert sample.make is not None, sample.file
        regions = sample.make()
        info = default_run_info(regions)
        info.extra["description"] = sample.description
        trace = build_trace(regions, info)
        _for_sharing(trace, sample)
        written.append(write_trace(trace, folder / sample.file, compression="zstd"))
    return written


def _for_sharing(trace: Trace, sample: Sample) -> None:
    """Samples travel: call sites are already relative; drop the folders they are relative to and the command
    line, which name the machine that made them."""
    trace.run_info.roots = {}
    trace.run_info.command = f"portscope demo ({sample.file})"
