"""Fixtures of the viewer tests (demo traces, the app factory and browser options live in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def demo_dir(demo_paths: dict[str, Path]) -> Path:
    return demo_paths["eager"].parent


@pytest.fixture
def broken_file(tmp_path: Path) -> Path:
    path = tmp_path / "broken.arrow"
    path.write_bytes(b"PK\x03\x04 this is not a trace at all")
    return path


