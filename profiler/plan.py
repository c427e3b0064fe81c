"""`portscope plan`: what compiling a decoder for fixed shapes would cost, before compiling it.

For each (compiled sequence length, batch) of a static-shape target: device memory (weights at the
target's bits + the KV cache reserved up front), whether it fits, the programs (one prefill, one
decode), the padding waste at a prompt-length distribution, predicted prefill and per-token decode
time from the target's engine figures, and the bytes crossing host<->device per token.

The arithmetic is torch-free; only `model_shape` builds the model (on the meta device: no weights).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from portscope.ingest.builder import TableBuilder
from portscope.ingest.errors import UsageError
from portscope.ingest.schema import EngineKind, Source
from portscope.ingest.trace import RunInfo, Trace

from .targets import Engine, Target
from .targets.cost_sources import SourceKind, used_sources
from .targets.static_shapes import ID_BYTES, StaticShapes, StepInput

PROGRAMS = 2  # one prefill program, one decode program: whatever the prompt length


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """What the plan needs of a decoder: sizes from its config, counts from its parameters."""

    name: str
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int
    parameters: int  # distinct parameters (tied embeddings counted once)
    linear_weights: int  # weights of every matrix product a token goes through (the LM head included, tied or not)
    intermediate_size: int = 0  # the MLP's inner width (0: 4 x hidden_size)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def model_shape(config: Any) -> ModelShape:
    """A transformers config's decoder, built on the meta device (no weights, no memory): seconds."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return shape_of(model, config)


def shape_of(model: Any, config: Any) -> ModelShape:
    """The shape of a built decoder (on any device) and its transformers config."""
    import torch

    heads = int(config.num_attention_heads)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return ModelShape(
        name=type(model).__name__,
        layers=int(config.num_hidden_layers),
        attention_heads=heads,
        kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
        head_dim=int(head_dim),
        hidden_size=int(config.hidden_size),
        vocab_size=int(config.vocab_size),
        parameters=sum(p.numel() for p in model.parameters()),
        linear_weights=int(linear),
        intermediate_size=int(getattr(config, "intermediate_size", None) or 4 * config.hidden_size),
    )


def load_config(path: str | Path) -> Any:
    """A transformers config from a config.json or a model folder holding one (read locally, never downloaded)."""
    from transformers import AutoConfig

    path = Path(path)
    config_file = path / "config.json" if path.is_dir() else path
    if not config_file.is_file():
        raise UsageError(f"{path}: no such config.json")
    try:
        return AutoConfig.from_pretrained(str(config_file), local_files_only=True)
    except (ValueError, OSError, KeyError) as exc:
        raise UsageError(f"{config_file}: not a transformers model config ({exc})") from None


# ---- memory --------------------------------------------------------------------------------------


def kv_cache_bytes(shape: ModelShape, *, cache_length: int, batch: int, bits: int) -> int:
    """layers x 2 (keys, values) x kv_heads x head_dim x cache_length x batch x bytes: reserved up front."""
    return shape.layers * 2 * shape.kv_heads * shape.head_dim * cache_length * batch * bits // 8


def weight_bytes(shape: ModelShape, bits: int) -> int:
    return shape.parameters * bits // 8


def activation_bytes(shape: ModelShape, *, sequence: int, batch: int, bits: int) -> int:
    """An estimate of the prefill program's largest live activations: inside a layer, per token of batch x
    sequence, the residual stream in and out (2 x hidden) with its widest products (queries, keys and values, or
    the MLP's two inner products: 2 x intermediate); after the last layer, the hidden states and the logits of each
    sequence's last position (generation keeps those only). Attention is taken as fused (no sequence x sequence
    score matrix is kept)."""
    inner = shape.intermediate_size or 4 * shape.hidden_size
    qkv = (shape.attention_heads + 2 * shape.kv_heads) * shape.head_dim
    layer = sequence * (2 * shape.hidden_size + max(qkv, 2 * inner))
    head = sequence * shape.hidden_size + shape.vocab_size
    return batch * max(layer, head) * bits // 8


def device_bytes(shape: ModelShape, static: StaticShapes) -> tuple[int, int, int]:
    """(weights, KV cache, activations) a static-shape program set holds on the device."""
    return (weight_bytes(shape, static.weight_bits),
            kv_cache_bytes(shape, cache_length=static.max_cache_length, batch=static.batch_size, bits=static.kv_cache_bits),
            activation_bytes(shape, sequence=static.max_sequence_length, batch=static.batch_size, bits=static.activation_bits))


# ---- prompts and padding -------------------------------------------------------------------------


def read_prompt_lengths(path: str | Path) -> list[int]:
    """Prompt lengths in tokens: integers separated by commas, spaces or newlines; `#` starts a comment."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the prompt lengths ({exc})") from None
    lengths, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        for word in line.split("#", 1)[0].replace(",", " ").split():
            if word.isdigit() and int(word) > 0:
                lengths.append(int(word))
            else:
                problems.append(f"line {number}: {word!r} is not a positive whole number of tokens")
    if problems:
        raise UsageError(f"{path}: " + "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))
    if not lengths:
        raise UsageError(f"{path}: no prompt lengths")
    return lengths


@dataclasses.dataclass(frozen=True)
class Padding:
    """Prefill padding of a prompt-length distribution under one static shape."""

    prompts: int
    over_sequence: int  # prompts longer than the compiled sequence length: refused
    over_cache: int  # prompts that fit but whose generation runs past the cache
    waste: float | None  # share of the computed prefill token positions that were padding (None: no prompts)


def padding(lengths: Sequence[int], *, sequence: int, cache: int, batch: int, new_tokens: int) -> Padding:
    """Prompts run in batches of `batch` in the given order; each row is padded to `sequence` tokens and a
    last, partial batch computes its empty rows too. Prompts over `sequence` are refused (not counted)."""
    accepted = [n for n in lengths if n <= sequence]
    over_cache = sum(1 for n in accepted if n + new_tokens > cache)
    if not accepted:
        return Padding(len(lengths), len(lengths), 0, None if not lengths else 1.0)
    computed = math.ceil(len(accepted) / batch) * batch * sequence
    return Padding(len(lengths), len(lengths) - len(accepted), over_cache, 1 - sum(accepted) / computed)


# ---- time ----------------------------------------------------------------------------------------


def engine_ns(engine: Engine | None, *, flops: float = 0.0, nbytes: float = 0.0) -> float | None:
    """latency + max(flops / flops_per_ns, bytes / bytes_per_ns), as schedules cost an operator; None without figures."""
    if engine is None or (not engine.flops_per_ns and not engine.bytes_per_ns):
        return None
    compute = flops / engine.flops_per_ns if engine.flops_per_ns else 0.0
    memory = nbytes / engine.bytes_per_ns if engine.bytes_per_ns else 0.0
    return engine.latency_ns + max(compute, memory)


def cost_source(target: Target) -> str:
    """Where the engine figures that time the plan come from, as the target's [sources] names them:
    "assumed" when any of them is assumed (or named nowhere), else e.g. "datasheet" or "datasheet+measured"."""
    kinds = {target.source_of(f).kind for f in used_sources(target) if f.startswith("engines.")}
    if not kinds or SourceKind.ASSUMED in kinds:
        return SourceKind.ASSUMED.value
    return "+".join(sorted(k.value for k in kinds))


def step_bytes(shape: ModelShape, static: StaticShapes, *, tokens: int) -> tuple[int, int]:
    """(host->device, device->host) bytes of one program call over `tokens` positions per sequence:
    ids (int64) or host-prepared embeddings in; the last position's logits out. The KV cache stays."""
    per_token_in = ID_BYTES if static.step_input is StepInput.IDS else shape.hidden_size * static.activation_bits // 8
    h2d = static.batch_size * tokens * per_token_in
    d2h = static.batch_size * shape.vocab_size * static.activation_bits // 8
    return h2d, d2h


def program_ns(shape: ModelShape, static: StaticShapes, target: Target, *, prefill: bool) -> int | None:
    """Predicted time of one prefill call (batch x sequence) or one decode step (batch x 1 over the whole cache)."""
    tokens = static.max_sequence_length if prefill else 1
    positions = static.max_sequence_length if prefill else static.max_cache_length
    per_token = 2 * shape.linear_weights + 4 * shape.layers * shape.attention_heads * shape.head_dim * positions
    flops = static.batch_size * tokens * per_token
    cache = kv_cache_bytes(shape, cache_length=positions, batch=static.batch_size, bits=static.kv_cache_bits)
    compute = engine_ns(target.engine(EngineKind.MATRIX), flops=flops,
                        nbytes=weight_bytes(shape, static.weight_bits) + cache)
    if compute is None:
        return None
    h2d, d2h = step_bytes(shape, static, tokens=tokens)
    moves = [engine_ns(target.engine(EngineKind.DMA_H2D), nbytes=h2d), engine_ns(target.engine(EngineKind.DMA_D2H), nbytes=d2h)]
    return round(compute + sum(m for m in moves if m is not None) + target.dispatch_ns)


# ---- the plan ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PlanRow:
    """One (compiled sequence length, batch): the columns of the trace's `plan` table."""

    max_sequence_length: int
    max_cache_length: int
    batch_size: int
    weight_bytes: int
    kv_cache_bytes: int
    device_memory_bytes: int
    memory_bytes: int | None
    fits: bool | None
    programs: int
    prompts: int
    prompts_over_sequence: int
    prompts_over_cache: int
    padding_waste: float | None
    prefill_ns: int | None
    decode_ns_per_token: int | None
    h2d_bytes_per_token: int
    d2h_bytes_per_token: int
    cost_source: str


def plan_row(shape: ModelShape, target: Target, static: StaticShapes, *, prompt_lengths: Sequence[int] = (),
             new_tokens: int = 0) -> PlanRow:
    weights, cache, activations = device_bytes(shape, static)
    pad = padding(prompt_lengths, sequence=static.max_sequence_length, cache=static.max_cache_length,
                  batch=static.batch_size, new_tokens=new_tokens)
    h2d, d2h = step_bytes(shape, static, tokens=1)
    memory = static.memory_bytes
    return PlanRow(
        max_sequence_length=static.max_sequence_length,
        max_cache_length=static.max_cache_length,
        batch_size=static.batch_size,
        weight_bytes=weights,
        kv_cache_bytes=cache,
        device_memory_bytes=weights + cache + activations,
        memory_bytes=memory,
        fits=None if memory is None else weights + cache + activations <= memory,
        programs=PROGRAMS,
        prompts=pad.prompts,
        prompts_over_sequence=pad.over_sequence,
        prompts_over_cache=pad.over_cache,
        padding_waste=pad.waste,
        prefill_ns=program_ns(shape, static, target, prefill=True),
        decode_ns_per_token=program_ns(shape, static, target, prefill=False),
        h2d_bytes_per_token=h2d,
        d2h_bytes_per_token=d2h,
        cost_source=cost_source(target),
    )


def plan(shape: ModelShape, target: Target, *, sequences: Sequence[int] = (), batches: Sequence[int] = (),
         cache_length: int | None = None, prompt_lengths: Sequence[int] = (), new_tokens: int = 0) -> list[PlanRow]:
    """One row per (sequence, batch). A sequence length sets the cache length too, unless `cache_length` fixes it."""
    static = target.static_shapes
    if static is None:
        raise UsageError(f"target {target.name} ({target.path}) has no [static_shapes] section: nothing to plan "
                         "(try the built-in static-llm-npu)")
    sequences = list(sequences) or [static.max_sequence_length]
    batches = list(batches) or [static.batch_size]
    problems = [f"--seq {s}: must be positive" for s in sequences if s <= 0]
    problems += [f"--batch {b}: must be positive" for b in batches if b <= 0]
    if new_tokens < 0:
        problems.append(f"--new-tokens {new_tokens}: must not be negative")
    if cache_length is not None and cache_length <= 0:
        problems.append(f"--cache-length {cache_length}: must be positive")
    elif cache_length is not None:
        problems += [f"--seq {s} is longer than --cache-length {cache_length}: the cache holds the prompt"
                     for s in sequences if s > cache_length]
    if problems:
        raise UsageError("; ".join(problems))
    return [
        plan_row(shape, target, static.with_lengths(sequence=s, cache=cache_length or s, batch=b),
                 prompt_lengths=prompt_lengths, new_tokens=new_tokens)
        for b in batches for s in sequences
    ]


def plan_table(rows: Sequence[PlanRow]) -> pa.Table:
    b = TableBuilder("plan")
    for row in rows:
        b.append(**dataclasses.asdict(row))
    return b.build()


def plan_trace(rows: Sequence[PlanRow], shape: ModelShape, target: Target, *, command: str | None = None,
               sweep: dict[str, Any] | None = None, torch_version: str | None = None) -> Trace:
    """A trace with no regions and the plan table; run_info says for which model and target."""
    static = target.static_shapes
    config = {"static_shapes": static.to_json() if static else None, **(sweep or {})}
    info = RunInfo(source=Source.PREDICTED, target=target.name, devices=[target.device], command=command,
                   torch_version=torch_version,
                   start_time=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                   model={"class": shape.name, "layers": shape.layers, "hidden_size": shape.hidden_size,
                          "parameters": shape.parameters, "kv_heads": shape.kv_heads, "head_dim": shape.head_dim},
                   config=config)
    return Trace(run_info=info, tables={"plan": plan_table(rows)})
