"""TORCH_TRACE structured logs -> compiles table and compile/* signals."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from portscope.ingest import CompileKind, SignalKind, read_trace
from portscope.ingest.convert import detect, load_any
from portscope.ingest.graph_breaks import location
from portscope.ingest.readers import read_torch_trace
from portscope.ingest.report import format_trace

from .conftest import FIXTURES, shared

_ENVELOPE = re.compile(r"^[VIWEF]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*)$")


def plain_records(path: Path) -> list[dict]:
    """Envelopes and payloads read with the json module and a regex (independent of the reader)."""
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    out = []
    for file in files:
        for line in file.read_text().splitlines():
            if line.startswith("\t") and out:
                out[-1]["payload"].append(line[1:])
            elif m := _ENVELOPE.match(line):
                out.append({"env": json.loads(m.group(1)), "payload": []})
    return out


def _kinds(trace) -> list[str]:
    return trace["compiles"].column("kind").cast("string").to_pylist()


def _expected(records: list[dict]) -> dict[str, int]:
    graphs = sum("dynamo_output_graph" in r["env"] for r in records)
    artifacts = [r["env"]["artifact"]["name"] for r in records if "artifact" in r["env"]]
    breaks = artifacts.count("dynamo_graph_break_reason")
    if not breaks:  # older torch: graph breaks only as restart reasons in the metrics
        breaks = sum(len(r["env"]["compilation_metrics"].get("restart_reasons") or [])
                     for r in records if "compilation_metrics" in r["env"])  # fmt: skip
    recompiles = artifacts.count("recompile_reasons") or sum(
        bool(r["env"]["compilation_metrics"].get("recompile_reason")) for r in records if "compilation_metrics" in r["env"]
    )
    return {"graph": graphs, "graph_break": breaks, "recompile": recompiles}


@pytest.mark.slow
def test_real_compile_run(torch_trace_dir: Path) -> None:
    assert detect(torch_trace_dir) == "torch-trace"
    trace = load_any(torch_trace_dir)
    records = plain_records(torch_trace_dir)
    expected = _expected(records)
    assert expected["graph_break"] >= 1 and expected["recompile"] >= 1
    kinds = _kinds(trace)
    assert {k: kinds.count(k) for k in expected} == expected
    rows = trace["compiles"].to_pylist()
    user_break = next(r for r in rows if r["kind"] == "graph_break" and "graph_break()" in (r["reason"] or ""))
    assert re.search(r"compile_step\.py:6 \(step\)$", user_break["call_site"])
    recompile = next(r for r in rows if r["kind"] == "recompile")
    assert "mismatch" in recompile["reason"] and recompile["compile_id"].endswith("/1")
    graph = next(r for r in rows if r["kind"] == "graph")
    assert graph["compile_ns"] > 0 and graph["op_count"] >= 1 and graph["key"] == "step"
    assert trace.run_info.torch_version and trace.run_info.extra["problems"] == []
    signals = trace["signals"].column("kind").cast("string").to_pylist()
    assert signals.count(SignalKind.COMPILE_RECOMPILE.value) == expected["recompile"]
    assert signals.count(SignalKind.COMPILE_GRAPH_BREAK.value) == expected["graph_break"]
    assert trace["stacks"].num_rows >= 1  # the user stack of a graph break
    assert "compile/graph_break" in format_trace(trace)


def test_graph_breaks_small() -> None:
    path = FIXTURES / "torch_trace" / "graph_breaks_small.log"
    trace = read_torch_trace(path)
    kinds = _kinds(trace)
    assert {k: kinds.count(k) for k in ("graph", "graph_break", "recompile")} == _expected(plain_records(path))
    assert kinds.count(CompileKind.GRAPH.value) == 3 and kinds.count(CompileKind.GRAPH_BREAK.value) == 2
    frames = {r["frame"] for r in trace["compiles"].to_pylist()}
    assert any(f.endswith("test_misc.py:9549 (fn)") for f in frames)


@pytest.mark.parametrize("name", ["recompiles_rank3.log", "simple.log"])
def test_shared_logs(name: str) -> None:
    path = shared(f"torch_trace/{name}")
    trace = read_torch_trace(path)
    kinds = _kinds(trace)
    assert {k: kinds.count(k) for k in ("graph", "graph_break", "recompile")} == _expected(plain_records(path))
    if name == "recompiles_rank3.log":
        reasons = [r["reason"] for r in trace["compiles"].to_pylist() if r["kind"] == "recompile"]
        assert len(reasons) == 6 and reasons[0] == "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3"


def test_corrupted_payload_is_reported_not_fatal() -> None:
    trace = read_torch_trace(shared("torch_trace/simple_corrupted_json.log"))
    problems = trace.run_info.extra["problems"]
    assert len(problems) == 1 and "not valid JSON" in problems[0] and ":13:" in problems[0]
    assert _kinds(trace) == ["graph"]


_LIVE_AND_LOGGED = textwrap.dedent(
    """
    import sys, torch
    from portscope.profiler import explain

    def step(x):
        y = x.sin()
        print("a graph break")
        return y.cos() + 1

    compiled = torch.compile(step, backend="eager")
    with explain("step") as region:
        compiled(torch.randn(4))
    region.save(sys.argv[1])
    """
)


def test_live_and_logged_graph_breaks_say_the_same(tmp_path: Path) -> None:
    """One run recorded live (explain) and logged (TORCH_TRACE): the graph break's reason and line agree."""
    pytest.importorskip("torch")
    script = tmp_path / "step.py"
    script.write_text(_LIVE_AND_LOGGED)
    env = {**os.environ, "TORCH_TRACE": str(tmp_path / "logs")}
    subprocess.run([sys.executable, str(script), str(tmp_path / "live.arrow")], check=True, timeout=300, cwd=tmp_path, env=env)
    live = [c for c in read_trace(tmp_path / "live.arrow")["compiles"].to_pylist() if c["kind"] == "graph_break"]
    logged = [c for c in read_torch_trace(tmp_path / "logs")["compiles"].to_pylist() if c["kind"] == "graph_break"]
    assert len(live) == len(logged) == 1
    assert live[0]["reason"] == logged[0]["reason"] and "print" in live[0]["reason"]
    line = next(i for i, t in enumerate(_LIVE_AND_LOGGED.splitlines(), 1) if 'print("a graph break")' in t)
    for c in (live[0], logged[0]):
        assert location(c["call_site"]).endswith(f"step.py:{line}")
