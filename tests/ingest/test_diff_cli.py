"""`portscope diff` on the bundled sample traces: pairing, tables, JSON, the CI gate, bad region names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest import SignalKind, read_trace, summarize
from portscope.ingest.summary import region_ids

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
MODES = SAMPLES / "llama_fp16-npu_eager_vs_compiled.arrow"
NPU = SAMPLES / "llama_fp16-npu_forward.arrow"
CUDA = SAMPLES / "llama_cuda_forward.arrow"


def test_one_trace_pairs_eager_with_compiled(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(MODES)]) == 0
    out = capsys.readouterr().out
    assert "region 'eager:cold' (eager, cold)" in out and "region 'compiled:cold' (compiled, cold)" in out
    trace = read_trace(MODES)
    eager = summarize(trace, region_ids(trace, "eager:cold")[0]).count(SignalKind.CPU_FALLBACK)
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("dispatch/cpu_fallback"))
    assert row[1:4] == [str(eager), "0", str(-eager)] and eager > 0


def test_json_matches_the_reports_of_both_regions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(NPU), str(CUDA), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"]["file"] == str(NPU) and data["b"]["region"] == "forward:cold"
    rows = {r["signal"]: r for r in data["signals"]}
    npu, cuda = (summarize(read_trace(p), 0) for p in (NPU, CUDA))
    fallback = rows[SignalKind.CPU_FALLBACK.value]
    assert (fallback["a_count"], fallback["b_count"]) == (npu.count(SignalKind.CPU_FALLBACK), cuda.count(SignalKind.CPU_FALLBACK))
    assert fallback["ratio"] == 0.0 and all(op["change"] != "same" for op in data["operators"])


def test_fail_on_increase_is_a_ci_gate(capsys: pytest.CaptureFixture[str]) -> None:
    # warm after cold: the recompiles are gone and nothing else grew
    assert main(["diff", str(NPU), "--region-a", "forward:cold", "--region-b", "forward:warm", "--fail-on-increase"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["diff", str(CUDA), str(NPU), "--fail-on-increase"]) == 1
    assert "increased in B: dispatch/cpu_fallback" in capsys.readouterr().err
    # npu -> cuda: every fallback and bounce is gone, but the norm's float32 upcasts (host bounces on the
    # npu) are device-side dtype copies on cuda: 14 copy/dtype_cast where there were none
    assert main(["diff", str(NPU), str(CUDA), "--fail-on-increase"]) == 1
    err = capsys.readouterr().err
    assert "copy/dtype_cast" in err and "cpu_fallback" not in err


def test_named_regions_and_bad_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(MODES), "--region-a", "compiled:cold", "--region-b", "compiled:warm", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "compile/graph" in out and "region 'compiled:warm'" in out
    assert main(["diff", str(MODES), "--region-a", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no region named 'nope'" in err and "eager:cold" in err and str(MODES) in err


def test_a_one_region_trace_needs_a_second(capsys: pytest.CaptureFixture[str]) -> None:
    narrow = SAMPLES / "llama_fp16-npu_rmsnorm_narrow.arrow"
    assert read_trace(narrow).region_names() == ["rmsnorm (narrow)"]
    assert main(["diff", str(narrow)]) == 2
    assert "give a second trace" in capsys.readouterr().err


def test_one_trace_without_modes_pairs_cold_with_warm(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(NPU)]) == 0
    out = capsys.readouterr().out
    assert "region 'forward:cold'" in out and "region 'forward:warm'" in out


def test_byte_changes_read_in_units(capsys: pytest.CaptureFixture[str]) -> None:
    """The real CUDA pair (the samples' sources): gpu_memcpy bytes summed from the JSON by hand: DtoD 1,821,299,360
    (18 copies) -> 27,916,597,296 (4,645), HtoD 423,923,260 -> 423,923,264, DtoH 100,896 -> 117,936."""
    control, test = SAMPLES / "cuda_diff_control.arrow", SAMPLES / "cuda_diff_test.arrow"
    assert main(["diff", str(control), str(test)]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert rows["transfer/d2d"][1:] == ["18", "4645", "4627", "258.06x", "+26.1", "GB"]
    assert rows["transfer/h2d"][-2:] == ["+4", "B"] and rows["transfer/d2h"][-2:] == ["+17.0", "KB"]
    assert rows["sync"][-2:] == ["0", "B"]
