"""Call sites are the model line that made each operator (tiny random-init Llama, nothing downloaded)."""

from __future__ import annotations

import inspect
import os
import sys
import types
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import transformers
from transformers.models.llama import modeling_llama

from portscope.ingest import SignalKind, summarize
from portscope.ingest.callsites import site_line
from portscope.ingest.errors import UsageError
from portscope.ingest.lines import line_detail, line_table
from portscope.ingest.report import format_region
from portscope.ingest.trace import read_trace
from portscope.profiler import explain
from portscope.profiler.callsite import LIBRARY_ENV, Roots, StackCapture, line_of, raw_stack
from portscope.profiler.demo import prompt, tiny_llama
from portscope.profiler.predict import reset_program_cache

LLAMA_FILE = "transformers/models/llama/modeling_llama.py"


def source_line(text: str) -> int:
    """The line number of `text` in transformers' modeling_llama.py (the input the model runs)."""
    lines = inspect.getsource(modeling_llama).splitlines()
    found = [i + 1 for i, line in enumerate(lines) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return tiny_llama()  # 2 layers: 2 norms per layer and the final norm


@pytest.fixture(scope="module")
def predicted(llama: torch.nn.Module, tmp_path_factory: pytest.TempPathFactory) -> Path:
    reset_program_cache()
    with torch.no_grad(), explain("forward", target="fp16-npu", with_stack=True) as region:
        llama(input_ids=prompt(7))
    return region.save(tmp_path_factory.mktemp("sites") / "forward.arrow")


def fallback_lines(path: Path) -> dict[str, Counter]:
    """operator -> Counter of lines of its cpu_fallback signals."""
    out: dict[str, Counter] = {}
    for s in read_trace(path)["signals"].to_pylist():
        if s["kind"] == SignalKind.CPU_FALLBACK.value:
            out.setdefault(s["op_name"], Counter())[site_line(s["call_site"])] += 1
    return out


def test_the_norm_chain_is_attributed_to_the_norm_lines(predicted: Path) -> None:
    variance = source_line("variance = hidden_states.pow(2).mean(-1, keepdim=True)")
    scale = source_line("hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)")
    lines = fallback_lines(predicted)
    # 2 layers x (input, post-attention) norms + the final norm = 5 of each
    assert lines["aten::pow.Tensor_Scalar"] == {f"{LLAMA_FILE}:{variance} (LlamaRMSNorm.forward)": 5}
    assert lines["aten::mean.dim"] == {f"{LLAMA_FILE}:{variance} (LlamaRMSNorm.forward)": 5}
    assert lines["aten::rsqrt"] == {f"{LLAMA_FILE}:{scale} (LlamaRMSNorm.forward)": 5}


def test_rotate_half_and_mul_lines(predicted: Path) -> None:
    rotate = source_line("return torch.cat((-x2, x1), dim=-1)")
    lines = fallback_lines(predicted)
    # rotate_half runs for q and k in each of the 2 layers
    assert lines["aten::neg"] == {f"{LLAMA_FILE}:{rotate} (rotate_half)": 4}
    mul = lines["aten::mul.Tensor"]
    scale = source_line("hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)")
    q_embed = source_line("q_embed = (q * cos) + (rotate_half(q) * sin)")
    assert mul[f"{LLAMA_FILE}:{scale} (LlamaRMSNorm.forward)"] == 5  # the norm's scaling, not the rotary line
    assert mul[f"{LLAMA_FILE}:{q_embed} (apply_rotary_pos_emb)"] == 2
    summary = summarize(read_trace(predicted), 0)
    total = next(r.count for r in summary.operators if r.signal == "dispatch/cpu_fallback" and r.operator == "aten::mul.Tensor")
    assert sum(mul.values()) == total and len(mul) >= 2


def test_call_sites_name_the_calling_model_line(predicted: Path) -> None:
    variance = source_line("variance = hidden_states.pow(2).mean(-1, keepdim=True)")
    final_norm = source_line("hidden_states = self.norm(hidden_states)")
    sites = Counter(s["call_site"] for s in read_trace(predicted)["signals"].to_pylist()
                    if s["op_name"] == "aten::pow.Tensor_Scalar")
    assert sites[f"{LLAMA_FILE}:{variance} (LlamaRMSNorm.forward) <- {LLAMA_FILE}:{final_norm} (LlamaModel.forward)"] == 1


def test_report_groups_by_line_with_modules_and_source(predicted: Path) -> None:
    trace = read_trace(predicted)
    summary = summarize(trace, 0)
    pow_row = next(r for r in summary.operators if r.operator == "aten::pow.Tensor_Scalar")
    (line,) = pow_row.lines
    assert line.count == 5 and line.source == "variance = hidden_states.pow(2).mean(-1, keepdim=True)"
    assert line.modules == {"model.layers.[0,1].input_layernorm": 2, "model.layers.[0,1].post_attention_layernorm": 2,
                            "model.norm": 1}
    text = format_region(summary)
    assert "| variance = hidden_states.pow(2).mean(-1, keepdim=True)" in text


def test_paths_are_relative_and_roots_kept_once(predicted: Path) -> None:
    trace = read_trace(predicted)
    files = trace["frames"].column("file").to_pylist()
    assert not [f for f in files if os.path.isabs(f)]
    assert trace.run_info.roots["transformers"] == os.path.dirname(transformers.__file__)
    assert trace.run_info.roots["torch"] == os.path.dirname(torch.__file__)
    sites = [s for s in trace["signals"].column("call_site").to_pylist() if s]
    assert sites and not [s for s in sites if "/work/" in s or s.startswith("/")]


def test_by_line_table_and_detail(predicted: Path) -> None:
    trace = read_trace(predicted)
    rows = line_table(trace, 0)
    variance = source_line("variance = hidden_states.pow(2).mean(-1, keepdim=True)")
    row = next(r for r in rows if r.line == f"{LLAMA_FILE}:{variance} (LlamaRMSNorm.forward)")
    assert row.operators["aten::pow.Tensor_Scalar"] == 5 and row.operators["aten::mean.dim"] == 5
    assert row.signals["dispatch/cpu_fallback"] == 10 and row.time_ns > 0
    assert [r.count for r in rows] == sorted((r.count for r in rows), reverse=True)
    detail = line_detail(trace, 0, row.line)
    assert detail is not None and {(o["operator"], o["count"]) for o in detail.operators if o["signal"] == "dispatch/cpu_fallback"} \
        >= {("aten::pow.Tensor_Scalar", 5), ("aten::mean.dim", 5)}
    n, frames = detail.stacks[0]
    # innermost first: the norm's line (with its text), then torch's module call plumbing further out
    assert frames[0] == f"{LLAMA_FILE}:{variance} (LlamaRMSNorm.forward)    variance = hidden_states.pow(2).mean(-1, keepdim=True)"
    # the input norms of layers 0 and 1 are called from the same loop line: (pow, mean) x 2 layers share a stack
    assert frames[1].startswith("torch/nn/modules/module.py:") and n == 4


def test_library_packages_give_the_line_in_your_script(llama: torch.nn.Module, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = prompt(5)
    with torch.no_grad(), explain("wide", with_stack=True, library=["transformers"]) as region:
        llama(input_ids=ids)
    files = {site_line(s).split(":")[0] for s in region.to_trace()["ops"].column("call_site").to_pylist()}
    assert len(files) == 1 and next(iter(files)).endswith("profiler/test_callsite.py"), files
    monkeypatch.setenv(LIBRARY_ENV, "transformers")
    with torch.no_grad(), explain("wide, from the environment", with_stack=True) as region:
        llama(input_ids=ids)
    assert {site_line(s).split(":")[0] for s in region.to_trace()["ops"].column("call_site").to_pylist()} == files


def test_unknown_library_package_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no_such_package_xyz"):
        explain("x", library=["no_such_package_xyz"])


def test_line_of_matches_f_lineno() -> None:
    code, offset = raw_stack(1)[-1]  # outermost first: this function is last
    assert code is test_line_of_matches_f_lineno.__code__
    assert line_of(code, offset) == inspect.currentframe().f_lineno - 2


def test_stack_capture_equals_a_full_walk() -> None:
    """Operators from one frame, its callees, back in the caller, and a generator resumed under another caller."""
    capture = StackCapture()
    seen: list[tuple] = []

    def op() -> None:  # stands for the dispatch frames: capture the stack of op's caller
        seen.append((capture.capture(2), raw_stack(2)))

    def leaf() -> None:
        op()
        op()

    def gen() -> Iterator[None]:
        while True:
            op()
            yield

    def middle(g: Iterator[None]) -> None:
        op()
        leaf()
        op()
        next(g)

    def other(g: Iterator[None]) -> None:
        next(g)
        leaf()

    g = gen()
    middle(g)
    other(g)
    middle(g)
    capture.clear()
    op()
    assert len(seen) == 14  # middle: 1 + 2 + 1 + 1 (gen); other: 1 (gen) + 2; middle again: 5; op: 1
    assert all(fast == full for fast, full in seen), [i for i, (a, b) in enumerate(seen) if a != b]
    functions = [tuple(c.co_name for c, _ in fast[-2:]) for fast, _ in seen]  # innermost: op's caller
    test = "test_stack_capture_equals_a_full_walk"
    assert functions[:8] == [(test, "middle"), ("middle", "leaf"), ("middle", "leaf"), (test, "middle"),
                             ("middle", "gen"), ("other", "gen"), ("other", "leaf"), ("other", "leaf")]
    assert functions[-1][-1] == test


def test_roots_relative_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generated = types.ModuleType("torch._inductor.runtime.compile_tasks.cabc")
    generated.__file__ = "/var/cache/torchinductor_me/ab/cabc.py"  # torch's generated kernels: a module outside torch
    monkeypatch.setitem(sys.modules, generated.__name__, generated)
    roots = Roots(str(tmp_path))
    assert roots.relative(generated.__file__) == "torch/<_inductor.runtime.compile_tasks>/cabc.py"
    assert roots.top_package(generated.__file__) == "torch"
    assert roots.relative(modeling_llama.__file__) == LLAMA_FILE
    assert roots.relative(str(tmp_path / "sub" / "run.py")) == "sub/run.py"
    assert roots.relative("/elsewhere/x.py") == "/elsewhere/x.py"  # outside every root: kept
    assert roots.relative("<frozen runpy>") == "<frozen runpy>"
    assert roots.used == {"transformers": os.path.dirname(transformers.__file__), ".": str(tmp_path)}


def _double_sin(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).sin()


def test_a_compiled_graph_call_is_at_the_line_that_calls_the_compiled_function() -> None:
    compiled = torch.compile(_double_sin, dynamic=False, backend="eager")
    x = torch.randn(8)
    with explain("compiled", with_stack=True) as region:
        compiled(x)  # compiles, then runs the graph
    line = inspect.currentframe().f_lineno - 1
    ops = region.to_trace()["ops"].to_pylist()
    graph = [op for op in ops if op["name"].startswith("compiled graph")]
    assert len(graph) == 1, [(op["name"], op["placement"]) for op in ops]
    # not the compiled function's own (rewritten) frame: the line that called it
    assert site_line(graph[0]["call_site"]).endswith(
        f"test_callsite.py:{line} (test_a_compiled_graph_call_is_at_the_line_that_calls_the_compiled_function)")
