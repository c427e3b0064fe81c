"""Model factories for the CLI: a built-in tiny model, a transformers config or local directory, or module:function."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import torch

from portscope.ingest.errors import UsageError

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def dtype_of(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise UsageError(f"unknown dtype {name!r} (choose from {', '.join(DTYPES)})")
    return DTYPES[name]


def model_factory(spec: str, dtype: torch.dtype) -> Callable[[], torch.nn.Module]:
    """`tiny-llama`, a config.json / model directory (weights loaded only from disk), or `module:function`."""
    if spec == "tiny-llama":
        from .demo import tiny_llama

        return lambda: tiny_llama(dtype=dtype)
    path = Path(spec)
    if path.exists():
        return _transformers_factory(path, dtype)
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"{spec}: cannot import the factory ({exc})") from None

        def build() -> torch.nn.Module:
            model = fn()
            if not isinstance(model, torch.nn.Module):
                raise UsageError(f"{spec} returned {type(model).__name__}, not an nn.Module")
            return model.to(dtype)

        return build
    raise UsageError(f"{spec}: not tiny-llama, an existing config/model path, or module:function")


def _transformers_factory(path: Path, dtype: torch.dtype) -> Callable[[], torch.nn.Module]:
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = path if path.is_dir() else path.parent
    config_file = path if path.is_file() else path / "config.json"
    if not config_file.is_file():
        raise UsageError(f"{path}: no config.json")
    try:
        json.loads(config_file.read_text())
    except ValueError as exc:
        raise UsageError(f"{config_file}: not valid JSON ({exc})") from None
    has_weights = path.is_dir() and any(f.suffix in (".safetensors", ".bin") for f in folder.iterdir())

    def build() -> torch.nn.Module:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if has_weights:
            return AutoModelForCausalLM.from_pretrained(folder, torch_dtype=dtype, local_files_only=True).eval()
        torch.manual_seed(0)
        config = AutoConfig.from_pretrained(str(config_file), local_files_only=True)
        return AutoModelForCausalLM.from_config(config).to(dtype).eval()

    return build
