"""The `[static_shapes]` section of a target: an LLM compiled ahead of time for fixed shapes.

Its fields mirror the configurations of ahead-of-time LLM compilers (maximum sequence and cache
length, batch size, bit widths, device memory, cores). Torch-free: `portscope targets` validates it.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


class StepInput(enum.Enum):
    """What the host hands the device for each token: token ids, or embeddings it prepared itself."""

    IDS = "ids"
    EMBEDDINGS = "embeddings"


# TOML key -> the type name the target loader checks it against (`_check_keys` in __init__.py)
KEYS: dict[str, str] = {
    "max_sequence_length": "integer",
    "max_cache_length": "integer",
    "batch_size": "integer",
    "weight_bits": "integer",
    "activation_bits": "integer",
    "kv_cache_bits": "integer",
    "memory_bytes": "integer",
    "cores": "integer",
    "step_input": "string",
}
BITS = (4, 8, 16, 32)
ID_BYTES = 8  # token ids cross as int64


@dataclasses.dataclass(frozen=True)
class StaticShapes:
    """One prefill program for (batch_size, max_sequence_length) and one decode program for (batch_size, 1)
    attending over a KV cache of max_cache_length positions that stays on the device."""

    max_sequence_length: int
    max_cache_length: int
    batch_size: int = 1
    weight_bits: int = 16
    activation_bits: int = 16
    kv_cache_bits: int = 16
    memory_bytes: int | None = None  # device memory; None: unknown (nothing is said to fit or not)
    cores: int = 1
    step_input: StepInput = StepInput.IDS

    def with_lengths(self, *, sequence: int, cache: int, batch: int) -> StaticShapes:
        """The same device compiled for other lengths and batch (what `portscope plan` sweeps)."""
        return dataclasses.replace(self, max_sequence_length=sequence, max_cache_length=cache, batch_size=batch)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["step_input"] = self.step_input.value
        return out


def parse_static_shapes(section: dict[str, Any], problems: list[str]) -> StaticShapes | None:
    """A type-checked `[static_shapes]` table as StaticShapes; appends every problem with its values."""
    for key in ("max_sequence_length", "max_cache_length"):
        if key not in section:
            problems.append(f"missing required key static_shapes.{key}")
    for key in ("max_sequence_length", "max_cache_length", "batch_size", "memory_bytes", "cores"):
        if key in section and section[key] <= 0:
            problems.append(f"static_shapes.{key} must be a positive integer, got {section[key]}")
    for key in ("weight_bits", "activation_bits", "kv_cache_bits"):
        if key in section and section[key] not in BITS:
            problems.append(f"static_shapes.{key} must be one of {', '.join(map(str, BITS))}, got {section[key]}")
    step_input = StepInput.IDS
    if "step_input" in section:
        try:
            step_input = StepInput(section["step_input"])
        except ValueError:
            problems.append(f"static_shapes.step_input must be \"ids\" or \"embeddings\", got {section['step_input']!r}")
    seq, cache = section.get("max_sequence_length", 0), section.get("max_cache_length", 0)
    if seq > 0 and cache > 0 and cache < seq:
        problems.append(f"static_shapes.max_cache_length ({cache}) must be at least max_sequence_length ({seq}): "
                        "the cache holds the prompt")
    if problems or seq <= 0 or cache <= 0:
        return None
    activation_bits = section.get("activation_bits", 16)
    return StaticShapes(
        max_sequence_length=seq,
        max_cache_length=cache,
        batch_size=section.get("batch_size", 1),
        weight_bits=section.get("weight_bits", 16),
        activation_bits=activation_bits,
        kv_cache_bits=section.get("kv_cache_bits", activation_bits),
        memory_bytes=section.get("memory_bytes"),
        cores=section.get("cores", 1),
        step_input=step_input,
    )
