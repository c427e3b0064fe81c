"""Helpers of the hardening tests (demo traces, the app factory and browser options live in tests/conftest.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str) -> ModuleType:
    """A script of bench/ imported as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def upload(client, path: Path, name: str | None = None):  # type: ignore[no-untyped-def]
    """POST a file to /api/upload through a Flask test client."""
    return client.post(
        f"/api/upload?name={name or path.name}",
        data=path.read_bytes(),
        headers={"X-Portscope-Upload": "1", "Content-Type": "application/octet-stream"},
    )
