"""`portscope targets calibrate`: the sync cost, the host's FLOP rate and per-operator-kind figures, on hand-made
traces and samples whose figures are worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest.builder import TraceBuilder
from portscope.ingest.schema import Placement
from portscope.ingest.trace import RunInfo
from portscope.profiler.calibrate import Sample, TraceSamples, calibrate, samples_from_trace, write_calibrated
from portscope.profiler.targets import KindFigures


def _x(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
    device = cat in ("kernel", "gpu_memcpy")
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if device else 1, "tid": 7 if device else 1, "ts": ts,
            "dur": dur, "args": {**args, **({"device": 0, "stream": 7} if device else {})}}


def _sync_trace(path: Path) -> Path:
    """A kernel runs 100-160 us; cudaStreamSynchronize 120-165 waits for it: its own cost 165 - 160 = 5 us.
    cudaDeviceSynchronize 300-303 with nothing running: 3 us. A blocking cudaMemcpy 400-420 whose d2h copy runs
    405-414: 420 - 414 = 6 us. Median: 5 us. An async copy call is no wait."""
    events = [
        _x("cuda_runtime", "cudaLaunchKernel", 90, 4, correlation=1), _x("kernel", "gemm", 100, 60, correlation=1),
        _x("cuda_runtime", "cudaStreamSynchronize", 120, 45),
        _x("cuda_runtime", "cudaDeviceSynchronize", 300, 3),
        _x("cuda_runtime", "cudaMemcpy", 400, 20, correlation=2, kind=2),
        _x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 405, 9, correlation=2, bytes=4096),
        _x("cuda_runtime", "cudaMemcpyAsync", 500, 20, correlation=3, kind=2),
        _x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 505, 9, correlation=3, bytes=4096),
    ]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_sync_cost_is_each_waits_own_time_after_the_device_work(tmp_path: Path) -> None:
    from portscope.ingest.convert import load_any

    trace = _sync_trace(tmp_path / "gpu.json")
    assert sorted(samples_from_trace(load_any(trace)).syncs) == [3_000, 5_000, 6_000]
    target, cal = write_calibrated([trace], "fp16-npu", tmp_path / "mine.toml")
    assert target.sync_ns == 5_000
    assert str(target.source_of("cost.sync_ns")).startswith("measured: gpu.json, n=3, median of the synchronize calls")


def test_no_sync_in_the_traces_keeps_the_base_figure_and_says_why() -> None:
    doc, cal = calibrate([], "fp16-npu", samples=[("t.json", TraceSamples(launches=[4_000.0]))])
    assert doc["cost"]["sync_ns"] == 20_000  # fp16-npu's, assumed
    assert doc["sources"]["cost.sync_ns"] == "assumed: t.json hold no synchronize call or blocking d2h copy"
    assert doc["sources"]["cost.host_flops_per_ns"] == "assumed: no operator ran on the host in t.json"
    assert "cost.sync_ns: assumed: t.json hold no synchronize call" in cal.summary()


def test_host_flop_rate_from_a_host_only_trace() -> None:
    # host calls of 2e6, 4e6 and 8e6 FLOPs taking 10 us + flops / 50: the rate is 50 flops/ns
    calls = [Sample("aten::mm", f, 0, 10_000 + f / 50) for f in (2e6, 4e6, 8e6) for _ in range(2)]
    samples = TraceSamples(ops=calls, device_time=False, host_ops=calls)
    doc, _ = calibrate([], "fp16-npu", samples=[("cpu.json", samples)])
    assert doc["cost"]["host_flops_per_ns"] == pytest.approx(50, rel=1e-3)
    assert doc["sources"]["cost.host_flops_per_ns"].startswith("measured: cpu.json, n=6, 3 shapes, fit error 0%")


def test_a_measured_runs_fallbacks_are_its_host_calls() -> None:
    """A measured run on a device: aten::mm launched 20 us of device work; two aten::cumsum fell back to the host
    (3 and 5 us, 64 and 128 elements)."""
    b = TraceBuilder(RunInfo())
    b.add_region("step", start_ns=0, dur_ns=100_000)
    for op_id, name, dur, shapes, placement in ((0, "aten::mm", 30_000, "8x8;8x8", Placement.DEVICE),
                                                (1, "aten::cumsum", 3_000, "64;", Placement.FALLBACK),
                                                (2, "aten::cumsum", 5_000, "128;", Placement.FALLBACK)):
        b.ops.append(op_id=op_id, region_id=0, name=name, start_ns=op_id * 40_000, dur_ns=dur, placement=placement,
                     bytes_in=0, bytes_out=0, thread=0, input_shapes=shapes, input_dtypes="float;")
    b.engine_slices.append(region_id=0, engine="stream 7", engine_kind="stream", kind="compute", name="gemm",
                           start=1_000, dur=20_000, op_id=0)
    samples = samples_from_trace(b.build())
    assert [(s.name, s.dur_ns) for s in samples.ops] == [("aten::mm", 20_000)]
    assert [(s.name, s.flops, s.dur_ns) for s in samples.host_ops] == [("aten::cumsum", 64, 3_000), ("aten::cumsum", 128, 5_000)]


def _kinds_samples() -> TraceSamples:
    """Adds take 1 us + bytes / 10, sums 20 us + bytes / 2, three sizes each, on the vector engine: one line through
    both misses both; each kind's own line is exact."""
    adds = [Sample("aten::add", 0, b, 1_000 + b / 10) for b in (1e4, 2e4, 4e4)]
    sums = [Sample("aten::sum", 0, b, 20_000 + b / 2) for b in (1e4, 2e4, 4e4)]
    return TraceSamples(ops=adds + sums)


def test_each_kind_gets_its_own_figures_where_they_fit_better() -> None:
    doc, cal = calibrate([], "fp16-npu", samples=[("t.json", _kinds_samples())])
    kinds = doc["engines"]["vector"]["kinds"]
    assert kinds["elementwise"] == {"latency_ns": 1_000, "flops_per_ns": 0, "bytes_per_ns": 10}
    assert kinds["reduction"] == {"latency_ns": 20_000, "flops_per_ns": 0, "bytes_per_ns": 2}
    own, engine = cal.kind_errors["vector.elementwise"]
    assert own == pytest.approx(0, abs=1e-9) and engine > 0.1
    assert doc["sources"]["engines.vector.kinds.reduction.bytes_per_ns"].startswith("measured: t.json, n=3, 3 shapes")
    # without per-kind figures the errors are still reported, and nothing is written
    doc, cal = calibrate([], "fp16-npu", samples=[("t.json", _kinds_samples())], per_kind=False)
    assert "kinds" not in doc["engines"]["vector"] and "vector.reduction" in cal.kind_errors


def test_a_calibrated_file_with_kinds_loads(tmp_path: Path) -> None:
    from portscope.profiler.calibrate import render_toml
    from portscope.profiler.targets import load_target

    doc, _ = calibrate([], "fp16-npu", samples=[("t.json", _kinds_samples())])
    path = tmp_path / "kinds.toml"
    path.write_text(render_toml(doc))
    vector = next(e for e in load_target(path).engines if e.name == "vector")
    assert vector.figures("reduction") == KindFigures(20_000, 0, 2)
    assert "[engines.vector.kinds.reduction]" in path.read_text()
