"""torch.compile inside regions: graphs, graph breaks, recompiles, eager vs compiled, validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from portscope.app.cli import main
from portscope.ingest import CompileKind, Mode, Phase, SignalKind, read_trace, summarize
from portscope.ingest.numerics import Comparison, Verdict, read_numerics, verdict
from portscope.profiler import explain
from portscope.profiler.compare import compare_modes, validate
from portscope.profiler.demo import prompt, tiny_llama
from portscope.profiler.predict import reset_program_cache


def compiles(region, kind: CompileKind) -> list[dict]:  # noqa: ANN001
    return [c for c in region.to_trace()["compiles"].to_pylist() if c["kind"] == kind.value]


def test_graph_break_and_recompile_are_reported() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = torch.sin(x) * 3
        print("a graph break")
        return torch.cos(y) + 1

    cf = torch.compile(f, dynamic=False, backend="eager")
    with explain("cold") as cold:
        cf(torch.randn(8))
    graphs = compiles(cold, CompileKind.GRAPH)
    assert len(graphs) == 2 and all(g["op_count"] >= 1 and g["compile_ns"] > 0 for g in graphs)
    assert graphs[0]["frame"].endswith("(f)") and Path(__file__).name in graphs[0]["frame"]
    (brk,) = compiles(cold, CompileKind.GRAPH_BREAK)
    assert "print" in brk["reason"]
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if 'print("a graph break")' in text)
    # the structured artifact's site, parsed as TORCH_TRACE logs are (portscope.ingest.graph_breaks)
    assert brk["call_site"].endswith(f"{Path(__file__).name}:{line} (f)")
    s = summarize(cold.to_trace(), 0)
    assert s.count(SignalKind.COMPILE_GRAPH) == 2 and s.count(SignalKind.COMPILE_GRAPH_BREAK) == 1
    # graph calls are recorded as operators of their own, with their duration
    ops = cold.to_trace()["ops"].to_pylist()
    calls = [o for o in ops if o["name"].startswith("compiled graph")]
    assert len(calls) == 2 and all(o["placement"] == "graph" and o["dur_ns"] > 0 for o in calls)

    with explain("warm") as warm:
        cf(torch.randn(8))
    assert compiles(warm, CompileKind.GRAPH) == [] and compiles(warm, CompileKind.RECOMPILE) == []

    with explain("new shape") as changed:
        cf(torch.randn(12))
    recompiles = compiles(changed, CompileKind.RECOMPILE)
    assert recompiles and "size mismatch at index 0" in recompiles[0]["reason"] and "expected 8, actual 12" in recompiles[0]["reason"]
    assert summarize(changed.to_trace(), 0).count(SignalKind.COMPILE_RECOMPILE) == len(recompiles)


def test_region_never_resets_dynamo(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._dynamo

    def forbidden() -> None:
        raise AssertionError("portscope called torch._dynamo.reset()")

    monkeypatch.setattr(torch._dynamo, "reset", forbidden)
    cf = torch.compile(lambda x: x * 2, backend="eager")
    with explain("r"):
        cf(torch.randn(3))


def test_compiled_code_stays_compiled_across_regions() -> None:
    """A region never makes Dynamo give up on the user's code (torch 2.5-2.9: see profiler/legacy_compile.py)."""
    from torch._dynamo.utils import counters

    def g(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * 2 + 1

    cg = torch.compile(g, dynamic=False, backend="eager")
    cg(torch.randn(5))  # compiled before any region
    before = counters["stats"]["unique_graphs"]
    for name in ("first", "second", "third"):
        with explain(name) as region:
            out = cg(torch.randn(5))
        assert compiles(region, CompileKind.GRAPH) == [] and compiles(region, CompileKind.RECOMPILE) == [], name
        calls = [o for o in region.to_trace()["ops"].to_pylist() if o["name"].startswith("compiled graph")]
        assert len(calls) <= 1 and out.shape == (5,)
    cg(torch.randn(5))
    assert counters["stats"]["unique_graphs"] == before  # no recompiles, in regions or after them

    def h(x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x) - 1

    ch = torch.compile(h, dynamic=False, backend="eager")
    with explain("first call inside") as region:
        ch(torch.randn(4))
    assert len(compiles(region, CompileKind.GRAPH)) == 1
    graphs = counters["stats"]["unique_graphs"]
    with explain("again"):
        ch(torch.randn(4))
    ch(torch.randn(4))
    assert counters["stats"]["unique_graphs"] == graphs


@pytest.fixture(scope="module")
def modes_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reset_program_cache()
    ids = prompt(7)
    out = tmp_path_factory.mktemp("modes") / "modes.arrow"
    return compare_modes(lambda: tiny_llama(), lambda: {"input_ids": ids}, out, target="fp16-npu", pad_to=64)


def test_compare_modes_four_regions(modes_trace: Path) -> None:
    trace = read_trace(modes_trace)
    regions = trace["regions"].to_pylist()
    assert [(r["name"], r["mode"], r["phase"]) for r in regions] == [
        ("eager:cold", Mode.EAGER.value, Phase.COLD.value), ("eager:warm", Mode.EAGER.value, Phase.WARM.value),
        ("compiled:cold", Mode.COMPILED.value, Phase.COLD.value), ("compiled:warm", Mode.COMPILED.value, Phase.WARM.value)]
    assert all(json.loads(r["tags"])["pair"] == "eager-vs-compiled" for r in regions)
    eager_warm, compiled_cold, compiled_warm = (summarize(trace, i) for i in (1, 2, 3))
    # the fixed 64-token forward is one graph, compiled once in the cold region, with its compile time
    graphs = [c for c in trace["compiles"].to_pylist() if c["kind"] == "graph"]
    assert len(graphs) == 1 and graphs[0]["region_id"] == 2 and graphs[0]["compile_ns"] > 0 and graphs[0]["op_count"] > 50
    assert compiled_cold.count(SignalKind.COMPILE_GRAPH_BREAK) == 0
    assert compiled_warm.count(SignalKind.COMPILE_GRAPH) == 0 and compiled_warm.count(SignalKind.COMPILE_RECOMPILE) == 0
    # under fp16-npu: the compiled warm region is clean, the eager one is not
    assert compiled_warm.verdict()["clean"], compiled_warm.verdict()
    assert not eager_warm.verdict()["clean"] and eager_warm.count(SignalKind.CPU_FALLBACK) > 10
    numerics = read_numerics(trace)["eager-vs-compiled"]
    assert numerics["argmax_match"] == 1.0 and numerics["max_abs_diff"] < 0.05


def test_verdict_rule() -> None:
    assert verdict(True, 0.0, 1.0) is Verdict.MATCH
    assert verdict(False, top2_gap=0.001, max_abs_diff=0.01) is Verdict.NOISE  # a near tie flipped
    assert verdict(False, top2_gap=5.0, max_abs_diff=0.01) is Verdict.DEFECT  # decisive, yet different
    c = Comparison("x", greedy_match=False, argmax_match=True, max_abs_diff=0.02, top2_gap=0.03, steps=4)
    assert c.verdict is Verdict.NOISE  # 0.03 is not clearly above 0.02


def test_validate_float16_against_float32() -> None:
    ids = prompt(7)
    c = validate(lambda: tiny_llama(dtype=torch.float32), ids, dtype=torch.float16, steps=4)
    assert c.name == "float16-vs-float32-reference" and c.steps == 4
    assert 0 < c.max_abs_diff < 0.5 and c.top2_gap > 0


def test_validate_a_port_identical_to_the_reference_matches_exactly() -> None:
    """float32 against float32: the same numbers, so every figure is known before running."""
    c = validate(lambda: tiny_llama(dtype=torch.float32), prompt(7), dtype=torch.float32, steps=3)
    assert (c.name, c.greedy_match, c.argmax_match, c.max_abs_diff, c.steps) == (
        "float32-vs-float32-reference", True, True, 0.0, 3)
    assert c.verdict is Verdict.MATCH


def test_validate_cli_and_numerics_tolerances(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "v.arrow"
    rc = main(["validate", "--steps", "3", "-o", str(out)])
    text = capsys.readouterr().out
    assert "float16-vs-float32-reference" in text and "max |logit diff|" in text
    trace = read_trace(out)
    metrics = read_numerics(trace)["float16-vs-float32-reference"]
    recorded = next(r["text"] for r in trace["numerics"].to_pylist() if r["metric"] == "verdict")
    assert rc == (1 if recorded == Verdict.DEFECT.value else 0)  # the exit status is the recorded verdict's
    assert set(metrics) >= {"greedy_match", "argmax_match", "max_abs_diff", "top2_gap", "verdict"}
    tol = tmp_path / "tol.json"
    assert main(["check", str(out), "--record-numerics", str(tol)]) == 0
    assert main(["check", str(out), "--numerics", str(tol)]) == 0
    limits = json.loads(tol.read_text())
    limits["float16-vs-float32-reference"]["max_abs_diff"] = metrics["max_abs_diff"] / 10
    tol.write_text(json.dumps(limits))
    capsys.readouterr()
    assert main(["check", str(out), "--numerics", str(tol)]) == 1
    assert "numerics float16-vs-float32-reference.max_abs_diff" in capsys.readouterr().out
