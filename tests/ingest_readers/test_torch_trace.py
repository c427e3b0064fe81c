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

from portscope.ingest import CompileKind, SignalKind, TraceFormatError, read_trace
from portscope.ingest.convert import detect, load_any
from portscope.ingest.graph_breaks import location
from portscope.ingest.readers import read_torch_trace
from portscope.ingest.readers.source import decode_text
from portscope.ingest.report import format_trace

from .conftest import FIXTURES, shared

_ENVELOPE = re.compile(r"^[VIWEF]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*)$")


def plain_records(path: Path) -> list[dict]:
    """Envelopes and payloads read with the json module and a regex (independent of the reader), with their file."""
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    out = []
    for file in files:
        for line in file.read_text().splitlines():
            if line.startswith("\t") and out:
                out[-1]["payload"].append(line[1:])
            elif m := _ENVELOPE.match(line):
                out.append({"env": json.loads(m.group(1)), "payload": [], "file": file.name})
    return out


def _kinds(trace) -> list[str]:
    return trace["compiles"].column("kind").cast("string").to_pylist()


def _expected(records: list[dict]) -> dict[str, int]:
    """Graphs, breaks and recompiles as a reader of the log should count them: a frame (of its file: every rank's log
    numbers its own) compiles one graph, however many attempts logged one; a frame with no break or recompile record
    of its own (older torch) has its metrics' restart reasons as breaks (but those Dynamo names by their class, its
    own restarts) and its metrics' recompile reason."""

    def frame(r: dict) -> tuple:
        return r["file"], r["env"].get("frame_id"), r["env"].get("frame_compile_id")

    def named(r: dict, name: str) -> bool:
        return isinstance(r["env"].get("artifact"), dict) and r["env"]["artifact"].get("name") == name

    metrics = [(frame(r), r["env"]["compilation_metrics"]) for r in records if "compilation_metrics" in r["env"]]
    break_records = [frame(r) for r in records if named(r, "dynamo_graph_break_reason")]
    recompile_records = [frame(r) for r in records if named(r, "recompile_reasons")]
    restarts = [why for f, m in metrics if f not in break_records for why in m.get("restart_reasons") or []]
    return {"graph": len({frame(r) for r in records if "dynamo_output_graph" in r["env"]}),
            "graph_break": len(break_records) + sum(not why.startswith("<class '") for why in restarts),
            "recompile": len(recompile_records) + sum(bool(m.get("recompile_reason")) for f, m in metrics
                                                      if f not in recompile_records)}  # fmt: skip


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


_RESTARTS = textwrap.dedent(
    """
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(8, 8)
            self.scale = 2.0

        def forward(self, x):
            y = self.l(x).relu()
            print("a graph break")
            z = y * self.scale
            if z.sum().item() > 0:  # a graph break
                z = z + 1
            return z

    torch.manual_seed(0)
    m = M()
    compiled = torch.compile(m, backend="aot_eager")
    compiled(torch.randn(4, 8))
    compiled(torch.randn(4, 8))  # the item's value is a guard: the last frame recompiles
    m.scale = 3.0
    compiled(torch.randn(4, 8))  # the middle frame recompiles
    torch.compile(M().double(), backend="aot_eager")(torch.randn(4, 8, dtype=torch.double))  # a new dtype: recompiles
    """
)


@pytest.mark.slow
def test_a_real_run_whose_frames_restart(tmp_path: Path) -> None:
    """torch 2.13 (aot_eager): 3 frames (forward, its resume after the print, its resume after the item), compiled 3,
    3 and 2 times (8 compile ids); a print break in each of forward's 2 compiles and an item break in each of the
    middle frame's 3: 5 breaks; recompiles: 2/1 (the item's value), 1/1 (the scale), 0/1, 1/2, 2/2 (the dtype): 5.
    The last frame's 2/1 and 2/2 restart once Dynamo tensorifies the float (TensorifyScalarRestartAnalysis): a graph
    logged at attempt 0 and at 1, no break; each graph carries its frame's compile time once."""
    pytest.importorskip("torch")
    script = tmp_path / "restarts.py"
    script.write_text(_RESTARTS)
    # a cache of its own: torch keeps what varied in earlier runs (PGO) there, and compiles it dynamic from the start
    env = {**os.environ, "TORCH_TRACE": str(tmp_path / "logs"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([sys.executable, str(script)], check=True, timeout=600, cwd=tmp_path, env=env, capture_output=True)
    trace = read_torch_trace(tmp_path / "logs")
    kinds = _kinds(trace)
    records = plain_records(tmp_path / "logs")
    assert {k: kinds.count(k) for k in ("graph", "graph_break", "recompile")} == {"graph": 8, "graph_break": 5,
                                                                               "recompile": 5} == _expected(records)
    seconds = [r["env"]["compilation_metrics"]["entire_frame_compile_time_s"] for r in records
               if "compilation_metrics" in r["env"]]  # fmt: skip
    graphs = [r for r in trace["compiles"].to_pylist() if r["kind"] == "graph"]
    assert sorted(g["compile_ns"] for g in graphs) == sorted(int(t * 1e9) for t in seconds)
    assert sum(1 for r in records if "dynamo_output_graph" in r["env"]) == 10  # 2/1 and 2/2 logged two each
    assert not any((r["reason"] or "").startswith("<class") for r in trace["compiles"].to_pylist())


# Tiny hand-written logs: a record is a glog line with a JSON envelope, its payload lines start with a tab.


def _record(clock: str, body: dict, frame: tuple[int, int, int] | None = None, payload: str | None = None) -> str:
    env = {**body, **({"frame_id": frame[0], "frame_compile_id": frame[1], "attempt": frame[2]} if frame else {})}
    if payload is not None:
        env["has_payload"] = "0123"
    line = f"V{clock} 1204 torch/_dynamo/utils.py:1] {json.dumps(env)}"
    return "\n".join([line, *("\t" + p for p in (payload or "").split("\n") if payload is not None)])


def _graph(clock: str, frame: tuple[int, int, int]) -> str:
    return _record(clock, {"dynamo_output_graph": {"sizes": {}}}, frame, "class GraphModule(torch.nn.Module):\n    ...")


def _metrics(clock: str, frame: tuple[int, int, int], name: str, seconds: float, restarts: tuple[str, ...] = (),
             recompile: str | None = None) -> str:  # fmt: skip
    return _record(clock, {"compilation_metrics": {"co_name": name, "co_filename": "/w/m.py", "co_firstlineno": 5,
                                                   "graph_op_count": 2, "entire_frame_compile_time_s": seconds,
                                                   "restart_reasons": list(restarts), "recompile_reason": recompile}},
                   frame)  # fmt: skip


def _break(clock: str, frame: tuple[int, int, int], why: str, line: int) -> str:
    text = (f"Graph break in user code at /w/m.py:{line}\nGraph Break Reason: {why}\nUser code traceback:\n"
            f'  File "/w/m.py", line {line}, in step\n    x')  # fmt: skip
    return _record(clock, {"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}}, frame, text)


def _write(path: Path, *records: str, bom: bool = False) -> Path:
    path.write_text(("\ufeff" if bom else "") + "\n".join(records) + "\n", encoding="utf-8")
    return path


def _compiles(trace) -> list[tuple]:  # noqa: ANN001
    c = trace["compiles"].to_pydict()
    return list(zip(c["kind"], c["compile_id"], c["key"], c["compile_ns"], c["reason"], strict=True))


TENSORIFY = "<class 'torch._dynamo.exc.TensorifyScalarRestartAnalysis'>"


def test_a_restarted_frame_is_one_graph_and_a_restart_of_its_own_is_no_break(tmp_path: Path) -> None:
    # torch 2.13: frame 0/0 logs a graph at attempt 0, restarts (a float tensorified: TensorifyScalarRestartAnalysis,
    # its class as the reason) and logs attempt 1's: one graph, 0.25 s, no break. Frame 1/0 breaks at attempt 0 (a
    # break record, the same words as its metrics' restart reason) and compiles attempt 1's graph, 1.5 s: one break.
    # Frame 2/0 (older torch): a graph, 0.5 s, and a restart reason in words, no break record: a break.
    # Expected: 3 graphs, 0.25 + 1.5 + 0.5 = 2.25 s; 2 breaks.
    log = _write(tmp_path / "run.log",
                 _graph("1204 01:00:00.000000", (0, 0, 0)), _graph("1204 01:00:00.100000", (0, 0, 1)),
                 _metrics("1204 01:00:00.250000", (0, 0, 1), "step", 0.25, (TENSORIFY,)),
                 _break("1204 01:00:00.300000", (1, 0, 0), "Failed to trace builtin operator", 7),
                 _graph("1204 01:00:01.000000", (1, 0, 1)),
                 _metrics("1204 01:00:01.800000", (1, 0, 1), "resume", 1.5, ("Failed to trace builtin operator",)),
                 _graph("1204 01:00:02.000000", (2, 0, 1)),
                 _metrics("1204 01:00:02.300000", (2, 0, 1), "resume2", 0.5, ("'skip function graph_break in file d.py'",)))  # fmt: skip
    trace = read_torch_trace(log)
    assert _compiles(trace) == [
        ("graph", "0/0_1", "step", 250_000_000, None),
        ("graph_break", "1/0", "resume", None, "Failed to trace builtin operator"),
        ("graph", "1/0_1", "resume", 1_500_000_000, None),
        ("graph", "2/0_1", "resume2", 500_000_000, None),
        ("graph_break", "2/0_1", "resume2", None, "'skip function graph_break in file d.py'")]  # fmt: skip
    signals = trace["signals"].column("kind").cast("string").to_pylist()
    assert sorted(signals) == ["compile/graph"] * 3 + ["compile/graph_break"] * 2


def test_every_rank_of_a_folder_has_its_own_frames(tmp_path: Path) -> None:
    # Two ranks' logs, each numbering its frames from 0/0. Rank 0: 0/0 "step" (1 s) with a break record, 1/0 "resume"
    # (2 s), 2/0 with no metrics, named by its dynamo_start's stack (interned file id 0: rank 0's "a.py"). Rank 1:
    # 0/0 "other" (10 s) with an older torch's restart reason and no break record: a break of rank 1's own.
    # Expected: graphs step 1 s, resume 2 s, g (a.py:3) no time, other 10 s = 13 s; 2 breaks, one a rank.
    folder = tmp_path / "ranks"
    folder.mkdir()
    _write(folder / "rank_0.log",
           _record("1204 01:00:00.000000", {"str": ["a.py", 0]}),
           _break("1204 01:00:00.010000", (0, 0, 0), "Failed to trace builtin operator", 7),
           _graph("1204 01:00:00.020000", (0, 0, 1)), _metrics("1204 01:00:01.000000", (0, 0, 1), "step", 1.0),
           _graph("1204 01:00:01.100000", (1, 0, 0)), _metrics("1204 01:00:03.000000", (1, 0, 0), "resume", 2.0),
           _record("1204 01:00:03.100000", {"dynamo_start": {"stack": [{"line": 3, "name": "g", "filename": 0}]}},
                   (2, 0, 0)),
           _graph("1204 01:00:03.200000", (2, 0, 0)))  # fmt: skip
    _write(folder / "rank_1.log",
           _record("1204 01:00:00.000000", {"str": ["b.py", 0]}),
           _graph("1204 01:00:00.500000", (0, 0, 1)),
           _metrics("1204 01:00:10.000000", (0, 0, 1), "other", 10.0, ("'skip function graph_break in file d.py'",)))  # fmt: skip
    trace = read_torch_trace(folder)
    assert _compiles(trace) == [
        ("graph_break", "0/0", "step", None, "Failed to trace builtin operator"),
        ("graph", "0/0_1", "step", 1_000_000_000, None),
        ("graph", "1/0", "resume", 2_000_000_000, None),
        ("graph", "2/0", "g", None, None),
        ("graph", "0/0_1", "other", 10_000_000_000, None),
        ("graph_break", "0/0_1", "other", None, "'skip function graph_break in file d.py'")]  # fmt: skip
    frames = trace["compiles"].column("frame").to_pylist()
    assert frames == ["/w/m.py:5 (step)", "/w/m.py:5 (step)", "/w/m.py:5 (resume)", "a.py:3 (g)",
                      "/w/m.py:5 (other)", "/w/m.py:5 (other)"]  # fmt: skip


@pytest.mark.parametrize(("clocks", "expected_ms"), [
    (["0430 23:59:59.990000", "0501 00:00:00.016000"], [0, 26]),  # a month end
    (["1231 23:59:59.990000", "0101 00:00:00.016000", "0101 00:00:01.000000"], [0, 26, 1010]),  # New Year
    (["0228 23:59:59.990000", "0301 00:00:00.010000"], [0, 20]),  # a common year: Mar 1 is the next day
    (["0228 23:59:59.990000", "0229 12:00:00.000000", "0301 00:00:00.010000"], [0, 43_200_010, 86_400_020]),  # leap
    (["0101 00:00:00.010000", "1231 23:59:59.995000", "0101 00:00:00.020000"], [15, 0, 25]),  # a line out of order
])  # fmt: skip
def test_times_across_a_month_end_or_new_year(tmp_path: Path, clocks: list[str], expected_ms: list[int]) -> None:
    log = _write(tmp_path / "run.log", *(_graph(c, (i, 0, 0)) for i, c in enumerate(clocks)))
    trace = read_torch_trace(log)
    assert trace["compiles"].column("time_ns").to_pylist() == [ms * 1_000_000 for ms in expected_ms]
    assert trace["regions"].column("dur_ns").to_pylist() == [max(expected_ms) * 1_000_000]


def test_ranks_that_start_on_either_side_of_midnight_share_one_clock(tmp_path: Path) -> None:
    # rank 0's first record at Dec 31 23:59:59.990, rank 1's at Jan 1 00:00:00.005: 15 ms later
    folder = tmp_path / "ranks"
    folder.mkdir()
    _write(folder / "rank_0.log", _graph("1231 23:59:59.990000", (0, 0, 0)))
    _write(folder / "rank_1.log", _graph("0101 00:00:00.005000", (0, 0, 0)))
    assert read_torch_trace(folder)["compiles"].column("time_ns").to_pylist() == [0, 15_000_000]


def test_a_byte_order_mark_keeps_the_first_record(tmp_path: Path) -> None:
    log = _write(tmp_path / "run.log", _graph("0403 07:28:48.000000", (0, 0, 0)),
                 _graph("0403 07:28:48.500000", (1, 0, 0)), bom=True)  # fmt: skip
    trace = read_torch_trace(log)
    assert trace["compiles"].column("compile_id").to_pylist() == ["0/0", "1/0"]
    assert trace.run_info.extra["problems"] == []


def test_decode_text_drops_a_byte_order_mark_for_every_reader() -> None:
    assert decode_text(Path("x.log"), b"\xef\xbb\xbfV0403 a\n") == "V0403 a\n"
    assert decode_text(Path("x.log"), "a\ufeffb".encode()) == "a\ufeffb"  # only a leading one


def test_a_stray_binary_file_in_a_folder_is_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    _write(folder / "rank_0.log", _graph("0403 07:28:48.000000", (0, 0, 0)))
    (folder / "core.bin").write_bytes(b"\x00\xff" * 512)  # not UTF-8 at offset 1
    for trace in (read_torch_trace(folder), load_any(folder)):
        assert trace["compiles"].column("kind").to_pylist() == ["graph"]
        assert trace.run_info.extra["problems"] == ["core.bin: skipped, not UTF-8 text (invalid byte at offset 1)"]
        assert trace.run_info.extra["files"] == ["rank_0.log"]
    with pytest.raises(TraceFormatError, match="not UTF-8"):  # given on its own, it is refused
        read_torch_trace(folder / "core.bin")
