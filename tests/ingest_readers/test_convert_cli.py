"""`portscope convert` and `portscope export --chrome` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest import read_trace

from .conftest import FIXTURES


def test_convert_then_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "alexnet.arrow"
    assert main(["convert", str(FIXTURES / "kineto" / "cuda_alexnet_small.json.gz"), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "converted from kineto" in said and "16 transfers" in said and "could not provide" in said
    trace = read_trace(out)
    assert trace.run_info.converted_from == "kineto" and trace["transfers"].num_rows == 16
    assert main(["report", str(out)]) == 0
    report = capsys.readouterr().out
    assert "transfer/h2d" in report and "this source could not provide" in report
    assert main(["export", "--chrome", str(out), "-o", str(tmp_path / "a.json")]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["traceEvents"]


def test_convert_torch_trace_and_forced_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.arrow"
    log = FIXTURES / "torch_trace" / "graph_breaks_small.log"
    assert main(["convert", str(log), "-o", str(out), "--format", "torch-trace"]) == 0
    assert read_trace(out)["compiles"].num_rows == 5


def test_convert_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", str(FIXTURES / "bad_inputs" / "binary_junk.bin"), "-o", str(tmp_path / "x.arrow")]) == 2
    err = capsys.readouterr().err
    assert "formats tried" in err and "kineto" in err
    assert not (tmp_path / "x.arrow").exists()
    log = FIXTURES / "torch_trace" / "graph_breaks_small.log"
    assert main(["convert", str(log), "-o", str(tmp_path / "y.arrow"), "--infer-fallback"]) == 2
    assert "kineto traces only" in capsys.readouterr().err
