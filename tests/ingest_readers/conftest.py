"""Fixtures of the converter tests: real profiler/compile runs made here, and traces recorded by others."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "fixtures"
SHARED = TESTS.parent.parent / "shared" / "fixtures"  # ../shared/fixtures relative to the repo


def shared(relative: str) -> Path:
    """A file of ../shared/fixtures; the test skips when that folder is absent (a user's clone)."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


_PROFILE = textwrap.dedent(
    """
    import sys, torch
    from torch.profiler import ProfilerActivity, profile, record_function
    from transformers import LlamaConfig, LlamaForCausalLM

    out, shapes, stack = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (1, 7))
    with torch.no_grad():
        model(ids)  # warm-up outside the profile
        with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes, with_stack=stack) as prof:
            with record_function("prefill"):
                logits = model(ids).logits
            with record_function("decode"):
                token = logits[:, -1].argmax(-1)
                model(token[:, None]).logits.argmax(-1).item()
    prof.export_chrome_trace(out)
    """
)


@pytest.fixture(scope="session")
def kineto_cpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """torch.profiler exports of a tiny random-init Llama on CPU: {"plain", "shapes_stack"} (the latter gzipped)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("kineto_cpu")
    script = folder / "profile_llama.py"
    script.write_text(_PROFILE)
    out = {"plain": folder / "plain.json", "shapes_stack": folder / "shapes_stack.json.gz"}
    for key, flags in (("plain", ("0", "0")), ("shapes_stack", ("1", "1"))):
        subprocess.run([sys.executable, str(script), str(out[key]), *flags], check=True, timeout=300, cwd=folder)
    return out


_COMPILE = textwrap.dedent(
    """
    import torch

    def step(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos() + 1

    compiled = torch.compile(step, backend="eager")
    compiled(torch.randn(4))
    compiled(torch.randn(4))  # cached: no compile
    compiled(torch.randn(5, 3))  # new rank: recompiles
    """
)


@pytest.fixture(scope="session")
def torch_trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TORCH_TRACE directory of a real torch.compile run with a graph break and a recompile."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("torch_trace")
    script = folder / "compile_step.py"
    script.write_text(_COMPILE)
    logs = folder / "logs"
    env = {**os.environ, "TORCH_TRACE": str(logs)}
    subprocess.run([sys.executable, str(script)], check=True, timeout=300, cwd=folder, env=env)
    return logs
