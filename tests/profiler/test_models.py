"""Model factories behind compare-modes/validate: built-in, transformers config or directory, module:function."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from portscope.ingest import UsageError
from portscope.profiler.models import dtype_of, model_factory


def test_tiny_llama_and_dtype() -> None:
    model = model_factory("tiny-llama", dtype_of("bfloat16"))()
    assert type(model).__name__ == "LlamaForCausalLM" and next(model.parameters()).dtype is torch.bfloat16
    with pytest.raises(UsageError, match="unknown dtype"):
        dtype_of("float8")


def test_config_json_and_directory_build_random_weights(tmp_path: Path) -> None:
    from transformers import LlamaConfig

    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, vocab_size=100)
    cfg.save_pretrained(tmp_path)  # config.json only: no weights, nothing downloaded
    for spec in (tmp_path / "config.json", tmp_path):
        model = model_factory(str(spec), torch.float16)()
        assert model.config.hidden_size == 64 and next(model.parameters()).dtype is torch.float16


def test_local_model_directory_with_weights(tmp_path: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, vocab_size=100)
    torch.manual_seed(3)
    saved = LlamaForCausalLM(cfg)
    saved.save_pretrained(tmp_path)
    loaded = model_factory(str(tmp_path), torch.float32)()
    assert torch.equal(loaded.lm_head.weight, saved.lm_head.weight)  # the weights on disk, not random ones


def test_module_function_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_models.py").write_text("import torch\n\ndef make():\n    return torch.nn.Linear(4, 4)\n"
                                           "\ndef not_a_module():\n    return 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    model = model_factory("my_models:make", torch.float16)()
    assert isinstance(model, torch.nn.Linear) and model.weight.dtype is torch.float16
    with pytest.raises(UsageError, match="not an nn.Module"):
        model_factory("my_models:not_a_module", torch.float16)()
    with pytest.raises(UsageError, match="cannot import"):
        model_factory("my_models:missing", torch.float16)
    sys.modules.pop("my_models", None)


def test_bad_specs(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not tiny-llama"):
        model_factory("nonsense", torch.float16)
    (tmp_path / "config.json").write_text("{broken")
    with pytest.raises(UsageError, match="not valid JSON"):
        model_factory(str(tmp_path), torch.float16)
