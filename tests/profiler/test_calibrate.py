"""`portscope targets calibrate`: the fit on hand-made data, a hand-written Kineto file end to end, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from portscope.ingest.catalog import SourceKind
from portscope.profiler.calibrate import (
    CalibrationError,
    Sample,
    calibrate,
    fit_engine,
    fit_transfer,
    render_toml,
)
from portscope.profiler.plan import cost_source
from portscope.profiler.targets import load_target

MB = 1_000_000


def test_copies_give_bandwidth_and_latency_worked_out_by_hand() -> None:
    # three copies of 1 MB in 100 us and three of 2 MB in 180 us: the second MB costs 80 us, so
    # bytes_per_ns = 1e6 B / 80_000 ns = 12.5 and latency = 100_000 ns - 80_000 ns = 20_000 ns
    samples = [Sample("h2d", 0, MB, 100_000)] * 3 + [Sample("h2d", 0, 2 * MB, 180_000)] * 3
    fit = fit_transfer(samples)
    assert fit.bytes_per_ns == pytest.approx(12.5)
    assert fit.latency_ns == pytest.approx(20_000)
    assert (fit.n, fit.buckets, fit.outliers, fit.error) == (6, 2, 0, pytest.approx(0.0, abs=1e-9))
    assert set(fit.fitted) == {"latency_ns", "bytes_per_ns"}


def test_an_outlier_is_left_out_and_reported() -> None:
    # a 1 MB copy of 1 ms (10x its bucket's median) does not move the fit; it is counted
    samples = [Sample("h2d", 0, MB, 100_000)] * 3 + [Sample("h2d", 0, 2 * MB, 180_000)] * 3
    fit = fit_transfer([*samples, Sample("h2d", 0, MB, 1_000_000)])
    assert fit.outliers == 1 and "1000.0 us vs median 100.0 us" in fit.worst_outliers[0]
    assert fit.bytes_per_ns == pytest.approx(12.5) and fit.latency_ns == pytest.approx(20_000)


def test_compute_and_memory_bound_calls_give_both_rates() -> None:
    # latency 2_000 ns; 50 flops/ns; 10 bytes/ns. Matrix products are compute-bound, copies memory-bound:
    # mm 1e6 flops, 1e4 bytes -> 2_000 + max(20_000, 1_000) = 22_000; copy 1e3 flops, 1e5 bytes -> 12_000
    def t(flops: float, nbytes: float) -> float:
        return 2_000 + max(flops / 50, nbytes / 10)

    calls = [("aten::mm", k * 1e6, k * 1e4) for k in (1, 2, 4)] + [("aten::copy_", k * 1e3, k * 1e5) for k in (1, 2, 4)]
    samples = [Sample(name, f, b, t(f, b)) for name, f, b in calls for _ in range(3)]
    fit = fit_engine(samples)
    assert fit.flops_per_ns == pytest.approx(50, rel=1e-6)
    assert fit.bytes_per_ns == pytest.approx(10, rel=1e-6)
    assert fit.latency_ns == pytest.approx(2_000, rel=1e-6)
    assert fit.predict(8e6, 0) == pytest.approx(t(8e6, 0))


def test_calls_without_shapes_give_a_latency_only() -> None:
    fit = fit_engine([Sample("aten::add", 0, 0, d) for d in (5_000, 6_000, 7_000)])
    assert fit.fitted == ("latency_ns",) and fit.latency_ns == pytest.approx(6_000)
    assert fit.flops_per_ns == 0 and fit.bytes_per_ns == 0


def _kineto(path: Path, *, steps: int = 3) -> Path:
    """A CUDA step: aten::mm (64x64 @ 64x64) launching a 20 us GEMM, aten::add of 64x64 launching a 5 us kernel (of
    128x128, 11 us, every second step), and a 1 MB h2d copy of 60 us (2 MB, 100 us every second step); launches
    take 4 us."""
    ev: list[dict] = []
    corr = 0
    for k in range(steps):
        t = k * 1_000.0

        def launched(name: str, ts: float, dims: list, kernel: str, kdur: float, cat: str = "kernel",
                     args: dict | None = None) -> None:
            nonlocal corr
            corr += 1
            ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 30,
                       "args": {"External id": corr, "Input Dims": dims, "Input type": ["float"] * len(dims)}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel" if cat == "kernel" else "cudaMemcpyAsync",
                       "pid": 1, "tid": 1, "ts": ts + 5, "dur": 4, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": cat, "name": kernel, "pid": 0, "tid": 7, "ts": ts + 40, "dur": kdur,
                       "args": {"correlation": corr, "device": 0, "stream": 7, **(args or {})}})

        launched("aten::mm", t, [[64, 64], [64, 64]], "ampere_sgemm_64x64_nn", 20)
        side, kdur = (128, 11) if k % 2 else (64, 5)
        launched("aten::add", t + 100, [[side, side], [side, side], []], "vectorized_elementwise_kernel", kdur)
        size, dur = (2 * MB, 100) if k % 2 else (MB, 60)
        launched("aten::copy_", t + 200, [[size // 4], [size // 4], []], "Memcpy HtoD (Pageable -> Device)", dur,
                 cat="gpu_memcpy", args={"bytes": size})
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    code = ("import sys; from portscope.app.cli import main; rc = main(sys.argv[1:]); "
            "assert 'torch' not in sys.modules, 'calibrate imported torch'; sys.exit(rc)")
    return subprocess.run([sys.executable, "-c", code, "targets", *args], capture_output=True, text=True, timeout=120)


def test_calibrate_a_kineto_file_end_to_end(tmp_path: Path) -> None:
    trace = _kineto(tmp_path / "gpu_run.json")
    out = tmp_path / "mydevice.toml"
    done = _cli("calibrate", str(trace), "--base", "fp16-npu", "-o", str(out))
    assert done.returncode == 0, done.stderr + done.stdout
    target = load_target(out)
    assert target.name == "mydevice"
    assert target.dtypes == load_target("fp16-npu").dtypes  # the rules are the base's
    h2d = next(e for e in target.engines if e.name == "dma_h2d")
    # 60 us for 1 MB, 100 us for 2 MB: 1e6 B / 40_000 ns = 25 bytes/ns, latency 20 us
    assert h2d.bytes_per_ns == pytest.approx(25, rel=1e-3) and h2d.latency_ns == pytest.approx(20_000, rel=1e-3)
    assert target.dispatch_ns == 4_000  # the median launch call
    source = target.source_of("engines.dma_h2d.bytes_per_ns")
    assert source.kind is SourceKind.MEASURED and source.detail.startswith("gpu_run.json, n=3")
    assert target.source_of("cost.dispatch_ns").kind is SourceKind.MEASURED
    # the vector engine is fitted on the three adds: the copies' memcpys are the DMA fit's, not compute work
    assert target.source_of("engines.vector.latency_ns").detail.startswith("gpu_run.json, n=3, 2 shapes")
    matrix = next(e for e in target.engines if e.name == "matrix")
    assert matrix.latency_ns == pytest.approx(20_000)  # one shape: a latency only; its rates stay the base's
    assert target.source_of("engines.matrix.flops_per_ns").kind is SourceKind.ASSUMED
    assert target.source_of("cost.compile_ns").kind is SourceKind.ASSUMED  # no compiles in the trace
    assert "engines.matrix.latency_ns" in out.read_text() and "measured: gpu_run.json" in out.read_text()
    assert "ok (mydevice)" in done.stdout
    assert _cli(str(out)).returncode == 0  # `portscope targets mydevice.toml` validates it


def test_every_engine_figure_measured_reads_measured(tmp_path: Path) -> None:
    doc, cal = calibrate([], "cuda", samples=[("t.json", _samples())])
    for figure in ("flops_per_ns", "bytes_per_ns", "latency_ns"):
        for engine in ("matrix", "vector", "dma_h2d", "dma_d2h"):
            doc["sources"].setdefault(f"engines.{engine}.{figure}", f"measured: t.json ({engine})")
    path = tmp_path / "all.toml"
    path.write_text(render_toml(doc))
    assert cost_source(load_target(path)) == "measured"
    assert cal.fits["matrix"].n == 3


def _samples():  # noqa: ANN202
    from portscope.profiler.calibrate import TraceSamples

    return TraceSamples(ops=[Sample("aten::mm", f, 0, 1_000 + f / 10) for f in (1e4, 2e4, 4e4)])


def test_no_usable_events_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 10}]}))
    with pytest.raises(CalibrationError, match="no usable events in empty.json"):
        calibrate([empty], "fp16-npu")
    done = _cli("calibrate", str(empty), "-o", str(tmp_path / "x.toml"))
    assert done.returncode == 1 and "no usable events" in done.stderr
    assert not (tmp_path / "x.toml").exists()
    assert _cli("calibrate").returncode == 2


def test_a_predicted_run_is_refused(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "sample_traces" / "llama_fp16-npu_forward.arrow"
    if not root.exists():
        pytest.skip("sample trace not built")
    with pytest.raises(CalibrationError, match="is a prediction"):
        calibrate([root], "fp16-npu")


def test_collectives_are_left_out_of_the_engine_fits() -> None:
    from portscope.profiler.calibrate import TraceSamples, is_collective

    assert is_collective("hcom_allReduce_") and is_collective("nccl:all_reduce") and not is_collective("aten::add")
    ops = [Sample("aten::add", 0, 0, 5_000)] * 3 + [Sample("hcom_allReduce_", 0, 0, 2_000_000)] * 3
    _, cal = calibrate([], "fp16-npu", samples=[("t.json", TraceSamples(ops=ops))])
    assert cal.fits["vector"].latency_ns == pytest.approx(5_000) and cal.fits["vector"].n == 3
    assert any("3 collective calls left out" in note for note in cal.notes)


def test_a_critical_path_timed_by_measured_figures_reads_measured() -> None:
    import pyarrow as pa

    from portscope.ingest.schedule_summary import format_schedule, measured_critical_path, summarize_slices

    table = pa.table({"engine": ["dispatch", "matrix"], "engine_kind": ["dispatch", "matrix"],
                      "kind": ["dispatch", "compute"], "start": [0, 10], "dur": [10, 20], "waited_on": [None, "dispatch"]})
    summary = summarize_slices(table, name="step")
    sources = {"cost.dispatch_ns": "measured: run.json, n=8", "engines.matrix.latency_ns": "measured: run.json, n=3",
               "engines.matrix.flops_per_ns": "datasheet: manual", "engines.vector.latency_ns": "assumed"}
    assert measured_critical_path(summary, sources)  # the vector engine is not on the critical path
    summary.measured = True
    assert "critical path 30 ns (measured)" in format_schedule([summary])
    sources["engines.matrix.flops_per_ns"] = "assumed"
    assert not measured_critical_path(summary, sources)


def test_a_prediction_on_a_calibrated_target_reads_measured(make_app, tmp_path: Path) -> None:  # noqa: ANN001
    torch = pytest.importorskip("torch")

    from portscope.app.context import store
    from portscope.app.pages.common import region_rows
    from portscope.ingest.schedule_summary import format_schedule, schedule_summaries
    from portscope.ingest.trace import read_trace
    from portscope.profiler import explain
    from portscope.profiler.calibrate import write_calibrated

    target, _ = write_calibrated([_kineto(tmp_path / "gpu_run.json")], "cuda", tmp_path / "mine.toml")
    assert target.source_of("engines.vector.latency_ns").kind is SourceKind.MEASURED
    with torch.no_grad(), explain("step", target=str(tmp_path / "mine.toml")) as region:
        torch.ones(8) * 2
    path = region.save(tmp_path / "p.arrow")
    trace = read_trace(path)
    (summary,) = schedule_summaries(trace)
    assert summary.measured and not summary.assumed  # dispatch (measured) and the vector engine's latency time it
    assert "(measured)" in format_schedule([summary]).splitlines()[0]
    with make_app(trace_paths=(path,)).server.test_request_context("/"):
        (row,) = region_rows(trace.content_hash(), trace)
        run = store().run_row(trace.content_hash(), path.name)
    assert row["predicted"].endswith(" (measured)") and run.measured_time and not run.assumed_time


def test_a_host_only_trace_counts_each_outermost_call_with_the_gap_before_it(tmp_path: Path) -> None:
    from portscope.ingest.convert import load_any
    from portscope.profiler.calibrate import samples_from_trace

    def op(name: str, ts: float, dur: float, dims: list) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"Input Dims": dims, "Input type": ["float"] * len(dims)}}

    # mm 0-10 us (its child addmm is inside it), a view 12-13, add 15-20: the add's sample is its 5 us + the 5 us
    # since the mm ended (the view does no work: its time is the host's gap); a 2 ms pause is not a gap
    events = [op("aten::mm", 0, 10, [[8, 8], [8, 8]]), op("aten::addmm", 1, 8, [[8], [8, 8], [8, 8]]),
              op("aten::view", 12, 1, [[8, 8], []]), op("aten::add", 15, 5, [[8, 8], [8, 8], []]),
              op("aten::add", 2020, 5, [[8, 8], [8, 8], []])]
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    samples = samples_from_trace(load_any(path))
    assert not samples.device_time
    assert [(s.name, s.dur_ns) for s in samples.ops] == [("aten::mm", 10_000), ("aten::add", 10_000),
                                                          ("aten::add", 5_000)]
    # mm: 2*M*N*K; add: reads two 8x8 floats and the 0-dim scalar (4 B, as the reader counts it), writes one
    assert samples.ops[0].flops == 2 * 8 * 8 * 8 and samples.ops[1].nbytes == 2 * 256 + 4 + 256


def test_compiles_give_compile_ns() -> None:
    from portscope.profiler.calibrate import TraceSamples

    doc, cal = calibrate([], "fp16-npu", samples=[("log", TraceSamples(compiles=[30e6, 40e6, 90e6]))])
    assert doc["cost"]["compile_ns"] == 40_000_000  # the median of three compiles
    assert cal.sources["cost.compile_ns"] == "measured: log, n=3, median of the compiles"
    assert doc["engines"]["matrix"]["latency_ns"] == 2000 and "engines.matrix.latency_ns" not in doc["sources"]


def test_calibrate_engines_only_fits_no_operator_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from portscope.app.cli import main
    from portscope.profiler import calibrate

    asked: list[bool] = []
    real = calibrate.write_calibrated
    monkeypatch.setattr(calibrate, "write_calibrated", lambda *a, per_kind, **kw: asked.append(per_kind) or real(*a, per_kind=per_kind, **kw))
    trace = _kineto(tmp_path / "gpu_run.json")
    for flags in ([], ["--engines-only"]):
        assert main(["targets", "calibrate", str(trace), "-o", str(tmp_path / "t.toml"), *flags]) == 0
    assert asked == [True, False]
