"""`portscope report` and `portscope check` on a trace with known contents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fulltrace import full_trace

from portscope.app.cli import main
from portscope.ingest import UsageError, write_trace
from portscope.ingest.budget import METRICS, parse_budgets, parse_size


@pytest.fixture
def trace_path(tmp_path: Path) -> Path:
    return write_trace(full_trace(), tmp_path / "run.arrow")


def test_report_text(trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(trace_path)]) == 0
    out = capsys.readouterr().out
    assert "PREDICTED for target fp16-npu" in out
    assert "Signal" in out and "Count" in out and "Bytes" in out and "Note" in out
    assert "dispatch/cpu_fallback" in out and "try: compute in float16" in out
    assert "aten::pow.Tensor_Scalar" in out and "why: dtype-not-supported 1" in out
    assert "physical device->host volume: 896 B in 1 transfers" in out


def test_report_json_same_facts(trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(trace_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    prefill = data["regions"][0]
    assert prefill["region"] == "prefill"
    # the outer region includes its nested region's signals and transfers
    assert prefill["signals"] == [{"signal": "dispatch/cpu_fallback", "count": 1, "bytes": 0, "note": "try: compute in float16"}]
    assert prefill["d2h_bytes"] == 896
    assert prefill["verdict"]["clean"] is False
    assert data["run"]["source"] == "predicted"


def test_report_unknown_region(trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(trace_path), "--region", "nope"]) == 2
    assert "no region named 'nope'" in capsys.readouterr().err


def test_check_within_and_over_budget(trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(trace_path), "--max", "cpu_fallback=1", "--max", "d2h_bytes=1KB"]) == 0
    capsys.readouterr()
    assert main(["check", str(trace_path), "--max", "cpu_fallback=0", "--max", "d2h_bytes=100B"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert "cpu_fallback: limit 0, measured 1, region prefill" in lines
    assert "d2h_bytes: limit 100 B, measured 896 B, region prefill" in lines
    assert "cpu_fallback: limit 0, measured 1, region norm" in lines
    assert len(lines) == 4


def test_check_unknown_signal_lists_valid_names(trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(trace_path), "--max", "teleports=0"]) == 2
    err = capsys.readouterr().err
    assert "unknown signal 'teleports'" in err and "cpu_fallback" in err and "d2h_bytes" in err


def test_broken_trace_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.arrow"
    bad.write_bytes(b"junk")
    assert main(["report", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "value"), [("0", 0), ("12", 12), ("1MB", 1e6), ("2MiB", 2 * 1024**2), ("1.5 kb", 1500), ("3GB", 3e9)]
)
def test_parse_size(text: str, value: float) -> None:
    assert parse_size(text) == value


def test_parse_budgets_errors() -> None:
    with pytest.raises(UsageError, match="not NAME=LIMIT"):
        parse_budgets(["cpu_fallback"])
    with pytest.raises(UsageError, match="not a number"):
        parse_budgets(["cpu_fallback=lots"])
    assert {"cpu_fallback", "d2h_bytes", "h2d", "host_bounce", "recompile", "sync", "graph_break"} <= set(METRICS)
