"""Fixtures of the viewer tests: demo traces with known contents, an app factory, browser options."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from portscope.app._dev_samples import write_demo_traces
from portscope.app.config import ViewerConfig


def pytest_setup_options():  # dash[testing] hook: options of the headless Chromium
    from selenium.webdriver.chrome.options import Options

    options = Options()
    for flag in (
        "--no-sandbox",
        "--disable-gpu",
        "--enable-unsafe-swiftshader",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    return options


@pytest.fixture(scope="session")
def demo_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"eager", "compiled", "predicted"}: demo traces written by the real writer."""
    return write_demo_traces(tmp_path_factory.mktemp("traces"))


@pytest.fixture
def demo_dir(demo_paths: dict[str, Path]) -> Path:
    return demo_paths["eager"].parent


@pytest.fixture
def broken_file(tmp_path: Path) -> Path:
    path = tmp_path / "broken.arrow"
    path.write_bytes(b"PK\x03\x04 this is not a trace at all")
    return path


@pytest.fixture
def make_app(tmp_path: Path, demo_dir: Path) -> Callable[..., object]:
    """Build a viewer app on the demo traces with a private store in tmp_path."""
    from portscope.app.server import create_app

    def make(**overrides: object):
        kwargs: dict[str, object] = {"trace_paths": (demo_dir,), "store_dir": tmp_path / "store"}
        kwargs.update(overrides)
        return create_app(ViewerConfig(**kwargs))  # type: ignore[arg-type]

    return make
