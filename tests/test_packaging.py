"""Packaging: one `portscope.*` namespace from the wheel and from the editable install, and a console script."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
IMPORTS = "import portscope.app, portscope.ingest, portscope.profiler, portscope.app.cli as c; print(portscope.ingest.__file__)"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    (path,) = out.glob("portscope-*.whl")
    return path


def test_wheel_contents_live_under_portscope(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    code = [n for n in names if not n.startswith("portscope-")]
    assert code and all(n.startswith("portscope/") for n in code), [n for n in code if not n.startswith("portscope/")]
    for needed in ("portscope/ingest/FORMAT.md", "portscope/profiler/targets/fp16-npu.toml",
                   "portscope/profiler/targets/README.md", "portscope/sample_traces/llama_fp16-npu_forward.arrow",
                   "portscope/profiler/_native.cpp"):
        assert needed in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "portscope = portscope.app.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_plain_wheel_install_imports(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    # -S: no site processing, so the editable install of this checkout cannot answer the import
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), sysconfig.get_paths()["purelib"]]))
    proc = subprocess.run([sys.executable, "-S", "-c", IMPORTS], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(str(target))


def test_editable_install_imports_from_the_checkout() -> None:
    proc = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(REPO / "ingest" / "__init__.py")
    for generic in ("app", "ingest", "profiler"):
        probe = subprocess.run([sys.executable, "-c", f"import {generic}"], capture_output=True, cwd="/", timeout=60)
        assert probe.returncode != 0, f"a top-level `{generic}` module is importable"
