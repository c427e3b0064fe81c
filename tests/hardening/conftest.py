"""Fixtures of the hardening tests: a demo trace folder, an app factory, browser options."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from portscope.app._dev_samples import write_demo_traces
from portscope.app.config import ViewerConfig


def pytest_setup_options():  # dash[testing] hook: options of the headless Chromium (see NOTES.md)
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
def make_app(tmp_path: Path, demo_paths: dict[str, Path]) -> Callable[..., object]:
    """Build a viewer app on the demo traces with a private store in tmp_path."""
    from portscope.app.server import create_app

    def make(**overrides: object):
        kwargs: dict[str, object] = {"trace_paths": (demo_paths["eager"].parent,), "store_dir": tmp_path / "store"}
        kwargs.update(overrides)
        return create_app(ViewerConfig(**kwargs))  # type: ignore[arg-type]

    return make


def upload(client, path: Path, name: str | None = None):  # type: ignore[no-untyped-def]
    """POST a file to /api/upload through a Flask test client."""
    return client.post(
        f"/api/upload?name={name or path.name}",
        data=path.read_bytes(),
        headers={"X-Portscope-Upload": "1", "Content-Type": "application/octet-stream"},
    )
