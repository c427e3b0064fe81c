"""Crash safety of `portscope record`: a script that raises, or gets Ctrl-C, still leaves a readable trace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from portscope.ingest import read_trace

pytest.importorskip("torch")
PORTSCOPE = Path(sys.executable).with_name("portscope")

_LOOP = textwrap.dedent(
    """
    import sys
    import torch
    from portscope.profiler import explain

    x = torch.ones(8, 8)
    with explain("busy"):
        n = 0
        while True:
            x = torch.add(x, 1)
            n += 1
            if n == 50:
                print("ready", flush=True)
                if sys.argv[1] == "crash":
                    raise RuntimeError("the script broke")
    """
)


@pytest.fixture(autouse=True, scope="module")
def _native_recorder_built() -> None:
    """The scripts below must reach their region within the time they are given: not build the recorder first."""
    from portscope.profiler import native

    native.ready()


def _record(tmp_path: Path, mode: str) -> subprocess.Popen:
    script = tmp_path / "loop.py"
    script.write_text(_LOOP)
    cmd = [str(PORTSCOPE), "record", "-o", str(tmp_path / "out.arrow"), "--", sys.executable, str(script), mode]
    # SIGINT back to its default in the child: a shell starting this suite in the background (`cmd &`) ignores
    # SIGINT for it, every child inherits that, and Python then installs no KeyboardInterrupt handler
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509


def _busy_ops(path: Path) -> int:
    trace = read_trace(path)
    regions = trace["regions"].to_pylist()
    busy = [r["region_id"] for r in regions if r["name"] == "busy"]
    assert busy, regions
    return sum(1 for op in trace["ops"].column("region_id").to_pylist() if op == busy[0])


def test_ctrl_c_inside_a_region_still_writes_the_trace(tmp_path: Path) -> None:
    proc = _record(tmp_path, "loop")
    assert proc.stdout is not None
    try:
        end = time.time() + 90
        while proc.stdout.readline().strip() != "ready":
            assert time.time() < end and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:  # a failure must not leave the endless loop running (it records ~1.5 GB a minute)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "wrote" in err, err
    assert _busy_ops(tmp_path / "out.arrow") >= 50


def test_a_script_that_raises_still_writes_the_trace(tmp_path: Path) -> None:
    proc = _record(tmp_path, "crash")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "the script broke" in err
    assert _busy_ops(tmp_path / "out.arrow") >= 50
    regions = read_trace(tmp_path / "out.arrow")["regions"].to_pylist()
    assert any("the script broke" in (r["error"] or "") for r in regions)
