"""A stranger's trace whose metadata holds access tokens: no output of portscope holds them (issue 34, item 6)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from portscope.app.data.runs import run_row
from portscope.ingest.convert import load_any
from portscope.ingest.export_chrome import write_chrome
from portscope.ingest.report import format_trace, trace_report_data
from portscope.ingest.trace import read_trace, write_trace

SECRETS = ("hf_abcdefghijklmnopqrstuvwxyz0123", "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", "hunter2-password")


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({
        "schemaVersion": 1, "traceName": "/tmp/tmpx/file.json",
        "metadata": {"experiment": {"repo_id": "org/tiny-llama"},
                     "system": {"torch_env_info": {"torch_version": "2.6.0"},
                                "env": {"HF_TOKEN": SECRETS[0], "PATH": "/usr/bin",
                                        "PIP_INDEX_URL": f"https://me:{SECRETS[2]}@pypi.example/simple"},
                                "note": f"pushed with {SECRETS[1]}"}},
        "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {}}],
    }))  # fmt: skip
    return path


def test_no_output_holds_a_secret_of_the_traces_metadata(tmp_path: Path) -> None:
    source = _trace(tmp_path)
    trace = load_any(source)
    assert trace.run_info.extra["metadata"]["metadata"]["experiment"]["repo_id"] == "org/tiny-llama"  # metadata is kept
    assert trace.run_info.torch_version == "2.6.0"
    written = write_trace(trace, tmp_path / "run.arrow")
    chrome = write_chrome(read_trace(written), tmp_path / "run.chrome.json")
    row = run_row(read_trace(written), "0" * 16, "bench.json")
    report = subprocess.run([sys.executable, "-m", "portscope.app.cli", "report", str(written), "--json"],
                            capture_output=True, text=True, check=True, timeout=120).stdout  # fmt: skip
    outputs = {
        "trace file": written.read_bytes().decode("latin-1"), "chrome export": chrome.read_text(),
        "report": report + format_trace(trace) + json.dumps(trace_report_data(trace), default=str),
        "run row": json.dumps(dataclasses.asdict(row) if dataclasses.is_dataclass(row) else row, default=str),
    }  # fmt: skip
    assert "org/tiny-llama" in outputs["run row"]  # the model id, read from the metadata, is shown
    for name, text in outputs.items():
        for secret in SECRETS:
            assert secret not in text, f"{name} holds {secret}"
