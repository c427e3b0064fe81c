"""`report`, `check` and `diff` on files other tools wrote: converted in memory, nothing written beside them.

The tiny Kineto traces are written here; every expected figure is counted by hand from their events.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from portscope.app.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "llama_cpu_measured.arrow"


def _kineto(path: Path, syncs: int, d2h_bytes: int) -> Path:
    """A GPU trace: aten::mm launching one kernel, then `syncs` aten::item calls each waiting in a
    cudaStreamSynchronize, then one aten::to whose cudaMemcpyAsync (kind 2: device->host) copies `d2h_bytes`."""
    def op(name: str, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}

    def rt(name: str, ts: float, dur: float, **args: object) -> dict:
        return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}

    def dev(cat: str, name: str, ts: float, dur: float, corr: int, **args: object) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"device": 0, "stream": 7, "correlation": corr, **args}}  # fmt: skip

    events = [op("aten::mm", 0, 10), rt("cudaLaunchKernel", 1, 2, correlation=1), dev("kernel", "gemm", 3, 5, 1)]
    for i in range(syncs):
        t = 20 + 20 * i
        events += [op("aten::item", t, 10), rt("cudaStreamSynchronize", t + 2, 5)]
    t = 20 + 20 * syncs
    events += [op("aten::to", t, 10), rt("cudaMemcpyAsync", t + 1, 4, correlation=2, kind=2, bytes=d2h_bytes),
               dev("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", t + 2, 2, 2, bytes=d2h_bytes)]
    path.write_text(json.dumps({"schemaVersion": 1, "traceName": "/tmp/tmpzz/x.json", "traceEvents": events}))
    return path


def test_report_reads_a_kineto_export_as_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _kineto(tmp_path / "step.pt.trace.json", syncs=2, d2h_bytes=4096)
    assert main(["report", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    region = json.loads(out)["regions"][0]
    assert region["region"] == "step.pt.trace.json"  # the file's name, not traceName
    counts = {s["signal"]: (s["count"], s["bytes"]) for s in region["signals"]}
    assert counts == {"sync": (2, 0), "transfer/d2h": (1, 4096)}
    assert "read as kineto and converted in memory" in err and "-o step.pt.trace.arrow" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step.pt.trace.json"]  # nothing written


def test_check_gates_a_kineto_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _kineto(tmp_path / "run.json", syncs=3, d2h_bytes=100)
    assert main(["check", str(path), "--max", "sync=3", "--max", "d2h_bytes=100B"]) == 0
    assert main(["check", str(path), "--max", "sync=2"]) == 1
    out = capsys.readouterr().out
    assert "sync" in out.splitlines()[-1] and "3" in out.splitlines()[-1]


def test_diff_of_two_kineto_exports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _kineto(tmp_path / "a.json", syncs=1, d2h_bytes=64)
    b = _kineto(tmp_path / "b.json", syncs=4, d2h_bytes=64)
    assert main(["diff", str(a), str(b), "--json", "--fail-on-increase"]) == 1
    signals = {s["signal"]: (s["a_count"], s["b_count"], s["delta"]) for s in json.loads(capsys.readouterr().out)["signals"]}
    assert signals["sync"] == (1, 4, 3)
    assert signals["transfer/d2h"][2] == 0


def test_a_portscope_trace_is_read_without_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(SAMPLE)]) == 0
    assert capsys.readouterr().err == ""


def test_inputs_that_cannot_be_reported_say_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "notes.txt"
    garbage.write_text("nothing a profiler wrote\n")
    assert main(["report", str(garbage)]) == 2
    assert str(garbage) in capsys.readouterr().err
    fake = tmp_path / "notes.arrow"  # named as a portscope trace: read as one, and told why it is not
    fake.write_text("nothing a profiler wrote\n")
    assert main(["report", str(fake)]) == 2
    assert f"{fake}: not a portscope trace" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "absent.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    _kineto(ranks / "rank0.json", syncs=1, d2h_bytes=1)
    _kineto(ranks / "rank1.json", syncs=1, d2h_bytes=1)
    assert main(["report", str(ranks)]) == 2
    assert f"portscope convert {ranks} -o run.arrow" in capsys.readouterr().err


def test_reporting_on_a_portscope_trace_loads_no_reader() -> None:
    code = (f"import sys\nfrom portscope.app.cli import main\nmain(['report', {str(SAMPLE)!r}])\n"
            "print(sorted(m for m in sys.modules if m.startswith('portscope.ingest.readers')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_sql_over_a_kineto_export_beside_a_portscope_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _kineto(tmp_path / "gpu.json", syncs=2, d2h_bytes=512)  # device work: the gemm kernel and the d2h copy
    query = "SELECT run, count(*) AS n, sum(bytes) AS bytes FROM kernels GROUP BY run ORDER BY run"
    assert main(["sql", query, str(path), "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["run,n,bytes", "gpu.json,2,512"]
    assert "portscope sql: " in err and "converted in memory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu.json"]
