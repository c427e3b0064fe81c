"""First contact: the README's first command on a machine without torch, as a stranger runs it.

A fresh venv gets the viewer-only install from the lock exactly as `make view` does (`make install`), then
the viewer is started on a free port and every file command is run there. A `torch` package that records
its own import sits on PYTHONPATH, so a command that so much as tries to import torch is caught. The same
checks then run against the installed wheel, from a folder outside the checkout.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(p.name for p in (ROOT / "sample_traces").glob("*.arrow"))
KINETO = ROOT / "tests" / "fixtures" / "kineto" / "cuda_alexnet_small.json.gz"
TORCH_STUB = '''
import os, pathlib
pathlib.Path(os.environ["PORTSCOPE_TORCH_MARKER"]).write_text("torch was imported")
raise ImportError("portscope test stub: torch must not be imported by this command")
'''

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("make") is None, reason="needs make")]


@pytest.fixture(scope="module")
def viewer_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv made by the README's install step (`make install`, the first half of `make view`)."""
    venv = tmp_path_factory.mktemp("first-contact") / "venv"
    subprocess.run(["make", "-C", str(ROOT), "install", f"VENV={venv}", f"PY={sys.executable}"],
                   check=True, capture_output=True, text=True, timeout=900)
    return venv


@pytest.fixture()
def stubbed(tmp_path: Path) -> dict[str, str]:
    """Environment whose `import torch` leaves a marker file (and fails)."""
    stub = tmp_path / "stub" / "torch"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(TORCH_STUB)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(stub.parent), PORTSCOPE_TORCH_MARKER=str(tmp_path / "torch-imported"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    return env


def _run(venv: Path, args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "portscope"), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, data: bytes | None = None) -> bytes:
    headers = {"Content-Type": "application/json"} if data is not None else {}
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=30) as response:
        return response.read()


def _check_viewer(venv: Path, env: dict[str, str], cwd: Path) -> None:
    port = _free_port()
    server = subprocess.Popen([str(venv / "bin" / "portscope"), "view", "--no-browser", "--port", str(port)],
                              env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                listed = json.loads(_get(f"{base}/api/runs"))
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"portscope view did not serve: {server.communicate()[0]}")
                time.sleep(0.3)
        assert len(listed["runs"]) == len(SAMPLES) and listed["problems"] == []
        assert b"<html" in _get(f"{base}/").lower()
        # The runs page's table, fetched the way the page itself fetches it.
        callback = {"output": "runs-table.children", "outputs": {"id": "runs-table", "property": "children"},
                    "inputs": [{"id": "session-runs", "property": "data", "value": None}], "changedPropIds": [],
                    "state": []}
        page = _get(f"{base}/_dash-update-component", json.dumps(callback).encode()).decode()
        for name in SAMPLES:
            assert name in page, f"{name} not listed on the runs page"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _check_file_commands(venv: Path, env: dict[str, str], cwd: Path, samples: Path) -> None:
    forward = samples / "llama_fp16-npu_forward.arrow"
    report = _run(venv, ["report", str(forward)], env, cwd)
    assert report.returncode == 0, report.stderr
    assert "Region 'forward:cold'" in report.stdout and "dispatch/cpu_fallback" in report.stdout

    as_json = _run(venv, ["report", "--json", str(forward)], env, cwd)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)

    within = _run(venv, ["check", str(forward), "--max", "cpu_fallback=100000"], env, cwd)
    assert within.returncode == 0, within.stderr
    over = _run(venv, ["check", str(forward), "--max", "cpu_fallback=0"], env, cwd)
    assert over.returncode == 1, over.stdout + over.stderr

    diff = _run(venv, ["diff", str(samples / "cuda_diff_control.arrow"), str(samples / "cuda_diff_test.arrow")], env, cwd)
    assert diff.returncode == 0, diff.stderr

    converted = cwd / "alexnet.arrow"
    convert = _run(venv, ["convert", str(KINETO), "-o", str(converted)], env, cwd)
    assert convert.returncode == 0, convert.stderr
    # 16 `Memcpy HtoD` of 244,403,360 bytes in all (tests/fixtures/README.md, hand-checked there).
    moved = _run(venv, ["report", "--json", str(converted)], env, cwd)
    assert moved.returncode == 0 and "244403360" in moved.stdout.replace(",", "")

    exported = cwd / "forward.json"
    export = _run(venv, ["export", str(forward), "--chrome", "-o", str(exported)], env, cwd)
    assert export.returncode == 0, export.stderr
    assert json.loads(exported.read_text())["traceEvents"]

    targets = _run(venv, ["targets"], env, cwd)
    assert targets.returncode == 0 and "fp16-npu" in targets.stdout

    assert _run(venv, ["--help"], env, cwd).returncode == 0
    assert not Path(env["PORTSCOPE_TORCH_MARKER"]).exists(), "a file command imported torch"


def _check_profile_commands_refuse(venv: Path, env: dict[str, str], cwd: Path) -> None:
    plain = {k: v for k, v in env.items() if k != "PYTHONPATH"}  # no stub: torch is simply absent
    for args in (["record", "--", "python", "-c", "pass"], ["demo"], ["compare-modes"], ["validate"]):
        done = _run(venv, args, plain, cwd)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "needs torch" in lines[0] and "pip install" in lines[0], done.stderr
        assert "Traceback" not in done.stderr


def test_no_torch_in_the_viewer_venv(viewer_venv: Path) -> None:
    done = subprocess.run([str(viewer_venv / "bin" / "python"), "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "None", "the viewer-only install pulled torch in"


def test_editable_install_serves_and_converts_without_torch(viewer_venv: Path, stubbed: dict[str, str],
                                                           tmp_path: Path) -> None:
    _check_viewer(viewer_venv, stubbed, tmp_path)
    _check_file_commands(viewer_venv, stubbed, tmp_path, ROOT / "sample_traces")
    _check_profile_commands_refuse(viewer_venv, stubbed, tmp_path)


def test_installed_wheel_serves_and_converts_without_torch(viewer_venv: Path, stubbed: dict[str, str],
                                                          tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    pip = str(viewer_venv / "bin" / "pip")
    subprocess.run([pip, "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)], check=True, capture_output=True,
                   timeout=600)
    (wheel,) = wheels.glob("portscope-*.whl")
    try:
        subprocess.run([pip, "install", "-q", "--no-deps", "--force-reinstall", str(wheel)], check=True,
                       capture_output=True, timeout=300)
        where = subprocess.run([str(viewer_venv / "bin" / "python"), "-c", "import portscope.app as a; print(a.__file__)"],
                               capture_output=True, text=True, check=True, cwd=tmp_path, env=stubbed).stdout
        assert "site-packages" in where and str(ROOT) not in where
        work = tmp_path / "elsewhere"
        work.mkdir()
        # The samples as the wheel carries them, not the checkout's.
        samples = Path(where).parents[1] / "sample_traces"
        assert sorted(p.name for p in samples.glob("*.arrow")) == SAMPLES
        _check_viewer(viewer_venv, stubbed, work)
        _check_file_commands(viewer_venv, stubbed, work, samples)
        _check_profile_commands_refuse(viewer_venv, stubbed, work)
    finally:  # leave the module's venv as `make install` made it for any later test
        subprocess.run([pip, "install", "-q", "--no-deps", "-e", str(ROOT)], check=True, capture_output=True, timeout=300)


def test_kineto_fixture_is_what_the_check_reads() -> None:
    """The convert check's figure comes from this file: 16 HtoD copies of 244,403,360 bytes."""
    events = json.loads(gzip.decompress(KINETO.read_bytes()))["traceEvents"]
    htod = [e for e in events if e.get("name", "").startswith("Memcpy HtoD") and e.get("ph") == "X"]
    assert len(htod) == 16 and sum(e["args"]["bytes"] for e in htod) == 244_403_360
