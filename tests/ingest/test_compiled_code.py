"""What torch.compile leaves in a profiler trace: the operators the compiler ran while it traced or compiled are its
own (placement ``compiler``), not the program's; a region in which the program called compiled code ran compiled.
Each expected figure of a hand-written trace is counted by hand from its events; those of the recorded fixtures were
counted once from their raw JSON by a separate script (plain `json`, no portscope code), as written next to them."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from portscope.ingest.assemble import assemble
from portscope.ingest.convert import load_any
from portscope.ingest.events import EventColumns, EventKind, RegionFacts, Translated
from portscope.ingest.op_device import op_calls
from portscope.ingest.op_diff import op_diff
from portscope.ingest.op_report import format_ops, ops_report_data
from portscope.ingest.report import format_trace, region_report_data
from portscope.ingest.schema import Mode, Placement
from portscope.ingest.summary import summarize
from portscope.ingest.trace import RunInfo, Trace

KINETO = Path(__file__).resolve().parents[1] / "fixtures" / "kineto"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "kineto"


def _kineto(tmp_path: Path, events: list[dict]) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _op(name: str, ts: float, dur: float, tid: int = 1) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def _ann(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}


def _launch(ts: float, corr: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 5,
            "args": {"correlation": corr}}  # fmt: skip


def _kernel(name: str, ts: float, dur: float, corr: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr}}  # fmt: skip


def _placements(trace: Trace) -> list[tuple[str, int, str]]:
    """(name, start in µs, placement) of every operator, in operator order."""
    ops = trace["ops"].to_pydict()
    return [(n, s // 1000, p) for n, s, p in zip(ops["name"], ops["start_ns"], ops["placement"], strict=True)]


def _modes(trace: Trace) -> list[tuple[str, str]]:
    regions = trace["regions"].to_pydict()
    return list(zip(regions["name"], regions["mode"], strict=True))


def test_operators_the_compiler_ran_while_compiling_are_its_own(tmp_path: Path) -> None:
    # "cold" [0, 3000) holds a frame's compile: Dynamo's compile event "dynamo" [90, 2020) (its marker
    # dynamo_data at 95 inside it) around the phase _compile.compile_inner (dynamo_timed) [100, 2000), in which the
    # compiler traces aten::add and aten::mm on fake tensors; meanwhile thread 2 runs aten::mul [500, 510) (the
    # program's). Then the compiled code runs: Torch-Compiled Region [2500, 2600) around aten::addmm; a range also
    # named "dynamo" [2800, 2850) with no marker is the program's. "warm" [4000, 4200): the compiled code again.
    # Expected: 4 operators the compiler's (dynamo, the phase, add, mm); cold 4 of the program's, warm 2.
    trace = load_any(_kineto(tmp_path, [
        _ann("cold", 0, 3000), _op("dynamo", 90, 1930), _ann("dynamo_data: compile_id=0/0", 95, 1),
        _op("_compile.compile_inner (dynamo_timed)", 100, 1900),
        _ann("entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=0/0", 101, 1),
        _op("aten::add", 200, 10), _op("aten::mm", 300, 10), _op("aten::mul", 500, 10, tid=2),
        _op("Torch-Compiled Region: 0/0", 2500, 100), _op("aten::addmm", 2510, 50), _op("dynamo", 2800, 50),
        _ann("warm", 4000, 200), _op("Torch-Compiled Region: 0/0", 4010, 100), _op("aten::addmm", 4020, 50),
    ]))  # fmt: skip
    compiler, host = Placement.COMPILER.value, Placement.HOST.value
    assert _placements(trace) == [
        ("dynamo", 90, compiler), ("_compile.compile_inner (dynamo_timed)", 100, compiler), ("aten::add", 200, compiler),
        ("aten::mm", 300, compiler), ("aten::mul", 500, host), ("Torch-Compiled Region: 0/0", 2500, host),
        ("aten::addmm", 2510, host), ("dynamo", 2800, host), ("Torch-Compiled Region: 0/0", 4010, host),
        ("aten::addmm", 4020, host)]  # fmt: skip
    assert trace["ops"].to_pydict()["device"] == ["cpu"] * 10
    assert trace["compiles"].to_pydict()["reason"] == ["_compile.compile_inner"]  # still one compile, as before
    counts = [(s.name, s.op_count, s.compiler_op_count) for s in (summarize(trace, r) for r in range(3))]
    assert counts == [("run.json", 6, 4), ("cold", 4, 4), ("warm", 2, 0)]
    report = region_report_data(summarize(trace, 1))
    assert (report["ops"], report["compiler_ops"]) == (4, 4)
    assert "  4 ops (and 4 the compiler ran while compiling, not counted)" in format_trace(trace, "cold")
    data = ops_report_data(trace, "cold")
    assert sorted((r["operator"], r["calls"]) for r in data["ops"]) == [
        ("Torch-Compiled Region: 0/0", 1), ("aten::addmm", 1), ("aten::mul", 1), ("dynamo", 1)]
    assert data["compiler_ops"] == 4
    assert "(4 operator calls the compiler ran while compiling are not counted)" in format_ops(data)
    assert len(op_calls(trace).op_id) == 6 and trace["ops"].num_rows == 10  # the program's calls, of 10 operators
    # the timeline's host lanes draw the operators no other encloses (the compiler's "dynamo" as a compile); the
    # compiler's markers, recorded as annotations, are on a lane of the compiler's
    lanes = trace["engine_slices"].to_pydict()
    assert list(zip(lanes["engine"], lanes["name"], lanes["kind"], strict=True)) == [
        ("host", "dynamo", "compile"), ("host thread 2", "aten::mul", "compute"),
        ("host", "Torch-Compiled Region: 0/0", "compute"), ("host", "dynamo", "compute"),
        ("host", "Torch-Compiled Region: 0/0", "compute"), ("compiler", "dynamo_data: compile_id=0/0", "compile"),
        ("compiler", "entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=0/0", "compile")]  # fmt: skip


def test_device_work_the_compiler_launched_is_not_the_programs(tmp_path: Path) -> None:
    # In ProfilerStep#0 [0, 3000), Inductor's autotuner benchmarks a kernel inside the phase [100, 1100): aten::mm
    # [200, 250) launches triton_benchmark (20 µs). The compiled code then runs: Torch-Compiled Region [2000, 2200)
    # around aten::mm [2010, 2060), which launches triton_mm (30 µs). Expected: the first aten::mm is the compiler's
    # (not "device"), the program's device time is triton_mm's 30 µs alone; both kernels still drawn on the stream.
    trace = load_any(_kineto(tmp_path, [
        _ann("ProfilerStep#0", 0, 3000),
        _op("_compile.compile_inner (dynamo_timed)", 100, 1000), _op("aten::mm", 200, 50), _launch(210, 1),
        _kernel("triton_benchmark", 220, 20, 1),
        _op("Torch-Compiled Region: 0/0", 2000, 200), _op("aten::mm", 2010, 50), _launch(2020, 2),
        _kernel("triton_mm", 2030, 30, 2),
    ]))  # fmt: skip
    assert _placements(trace) == [("_compile.compile_inner (dynamo_timed)", 100, "compiler"), ("aten::mm", 200, "compiler"),
                                  ("Torch-Compiled Region: 0/0", 2000, "device"), ("aten::mm", 2010, "device")]  # fmt: skip
    assert trace["ops"].to_pydict()["device"] == ["cpu", "cpu", "cuda:0", "cuda:0"]
    data = ops_report_data(trace)
    assert data["device_ns"] == 30_000 and data["compiler_ops"] == 2
    mm = next(r for r in data["ops"] if r["operator"] == "aten::mm")
    assert (mm["calls"], mm["device_self_ns"]) == (1, 30_000)
    slices = trace["engine_slices"].to_pydict()
    assert sorted(n for n, e in zip(slices["name"], slices["engine"], strict=True) if e == "stream 7") == [
        "triton_benchmark", "triton_mm"]


def test_a_region_in_which_compiled_code_ran_is_compiled(tmp_path: Path) -> None:
    # ProfilerStep#0: eager aten::add only. #1: Torch-Compiled Region (a cpu_op). #2: "## Call CompiledFxGraph ##"
    # inside its nested "forward"; its "backward" holds aten::mul only. #3: a CompiledFunction inside a compiler
    # phase (the compiler's, not the program's call). #4: CompiledFunction as a user_annotation (an older torch):
    # a region of its own. Expected: compiled where a call starts in the region or a region nested in it, the run's
    # own region too; unknown elsewhere (a profiler trace does not say eager).
    trace = load_any(_kineto(tmp_path, [
        _ann("ProfilerStep#0", 0, 1000), _op("aten::add", 10, 10),
        _ann("ProfilerStep#1", 1000, 1000), _op("Torch-Compiled Region: 0/0", 1010, 500), _op("aten::addmm", 1020, 50),
        _ann("ProfilerStep#2", 2000, 1000), _ann("forward", 2010, 900), _op("## Call CompiledFxGraph abc123 ##", 2020, 100),
        _ann("backward", 2950, 40), _op("aten::mul", 2955, 5),
        _ann("ProfilerStep#3", 3000, 1000), _op("_compile.compile_inner (dynamo_timed)", 3010, 800),
        _op("CompiledFunction", 3100, 10),
        _ann("ProfilerStep#4", 4000, 1000), _ann("CompiledFunction", 4010, 100),
    ]))  # fmt: skip
    compiled, unknown = Mode.COMPILED.value, Mode.UNKNOWN.value
    assert _modes(trace) == [("run.json", compiled), ("ProfilerStep#0", unknown), ("ProfilerStep#1", compiled),
                             ("ProfilerStep#2", compiled), ("forward", compiled), ("backward", unknown),
                             ("ProfilerStep#3", unknown), ("ProfilerStep#4", compiled), ("CompiledFunction", compiled)]  # fmt: skip
    assert region_report_data(summarize(trace, 2))["mode"] == compiled
    assert "  1 ops, mode compiled" in format_trace(trace, "forward")


def test_a_mode_the_file_states_is_kept() -> None:
    # a reader that states a region's mode (eager) around a call of compiled code: the file's word stands; the run's
    # own region, of no stated mode, ran compiled code.
    ev = EventColumns()
    ev.add(EventKind.ANNOTATION, "step", 1, 1, 0, 1000, region_facts=ev.region_facts(RegionFacts(mode=Mode.EAGER)))
    ev.add(EventKind.OP, "Torch-Compiled Region: 1/0", 1, 1, 10, 100)
    trace = assemble(Translated(ev, RunInfo(), root_name="t", root_device="cpu"))
    assert _modes(trace) == [("t", "compiled"), ("step", "eager")]


def test_a_cold_torch_compile_recorded_by_the_profiler_counts_the_programs_operators() -> None:
    # tests/fixtures/kineto/cpu_cold_compile.json.gz (torch 2.13, CPU): 3172 cpu_ops, all on thread 12771, all inside
    # "cold" (3154) or "warm" (18). The compiler's spans on that thread: 54 "<phase> (dynamo_timed)" and 55 compile
    # events with their "<event>_data: ...compile_id=0/0" marker inside them ("dynamo" [5491915878713.121, +4791388.951]
    # outermost); 3133 cpu_ops start inside them, all in "cold": its other 21 and warm's 18 are the program's.
    # The compiled code ran once in each region (Torch-Compiled Region: 0/0, CompiledFunction, ## Call
    # CompiledFxGraph ... ## outside the compiler's spans); cold's longest program operator is its Torch-Compiled
    # Region, 2377.172 µs.
    trace = load_any(KINETO / "cpu_cold_compile.json.gz")
    ops = trace["ops"].to_pydict()
    names = trace["regions"].to_pydict()["name"]
    by_region = collections.Counter((names[r], p) for r, p in zip(ops["region_id"], ops["placement"], strict=True))
    assert by_region == {("cold", "compiler"): 3133, ("cold", "host"): 21, ("warm", "host"): 18}
    assert _modes(trace) == [("cpu_cold_compile.json.gz", "compiled"), ("cold", "compiled"), ("warm", "compiled")]
    assert [(s.op_count, s.compiler_op_count) for s in (summarize(trace, r) for r in range(3))] == [
        (39, 3133), (21, 3133), (18, 0)]
    data = ops_report_data(trace, "cold")
    assert data["compiler_ops"] == 3133 and sum(r["calls"] for r in data["ops"]) == 21
    top = max(data["ops"], key=lambda r: r["cpu_ns"])
    assert top["operator"] == "Torch-Compiled Region: 0/0" and abs(top["cpu_ns"] - 2_377_172) <= 1
    assert not [r for r in data["ops"] if "dynamo" in r["operator"] or r["operator"] == "entire_frame_compile"]


def test_a_compiled_training_run_without_compiler_phases() -> None:
    # /work/shared/fixtures/kineto/cuda_diff_test.json.gz: a compiled DDP training job, no compiler span, 12 calls of
    # compiled code (6 CompiledFunction, 6 CompiledFunctionBackward); of its 288 user_annotations 24 hold one:
    # ProfilerStep#1009..1014 and 6 each of "## forward ##", "## forward:over_arch ##", "## backward ##".
    path = SHARED / "cuda_diff_test.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    trace = load_any(path)
    modes = collections.Counter(m for _, m in _modes(trace))
    assert modes == {"compiled": 25, "unknown": 264}
    compiled = collections.Counter(n for n, m in _modes(trace) if m == "compiled")
    assert compiled == {"cuda_diff_test.json.gz": 1, "## forward ##": 6, "## forward:over_arch ##": 6, "## backward ##": 6,
                        **{f"ProfilerStep#{n}": 1 for n in range(1009, 1015)}}  # fmt: skip
    assert Placement.COMPILER.value not in set(trace["ops"].column("placement").to_pylist())


def test_the_operator_diff_keeps_the_compilers_operators_apart(tmp_path: Path) -> None:
    # cold [0, 3000): the compiler's phase [100, 2000) traces aten::add [200, 210) and aten::mm [300, 310); then the
    # compiled code, Torch-Compiled Region [2500, 2600) around aten::addmm [2510, 2560). warm [4000, 4200): the
    # compiled code only. cold against warm: the compiler's rows deleted, the program's unchanged.
    trace = load_any(_kineto(tmp_path, [
        _ann("cold", 0, 3000), _op("_compile.compile_inner (dynamo_timed)", 100, 1900), _op("aten::add", 200, 10),
        _op("aten::mm", 300, 10), _op("Torch-Compiled Region: 0/0", 2500, 100), _op("aten::addmm", 2510, 50),
        _ann("warm", 4000, 200), _op("Torch-Compiled Region: 0/0", 4010, 100), _op("aten::addmm", 4020, 50),
    ]))  # fmt: skip
    diff = op_diff(trace, 1, trace, 2)
    rows = sorted((r["change"], r["kind"], r["name"], r["a_count"], r["b_count"], r["a_ns"])
                  for r in diff.ops.to_dict("records") if r["kind"] in ("operator", "compiler"))  # fmt: skip
    assert rows == [
        ("deleted", "compiler", "_compile.compile_inner (dynamo_timed)", 1, 0, 1_900_000),
        ("deleted", "compiler", "aten::add", 1, 0, 10_000), ("deleted", "compiler", "aten::mm", 1, 0, 10_000),
        ("unchanged", "operator", "Torch-Compiled Region: 0/0", 1, 1, 100_000),
        ("unchanged", "operator", "aten::addmm", 1, 1, 50_000)]  # fmt: skip
