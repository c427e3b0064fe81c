"""Shared test helpers: tiny models are built from configs with random weights (nothing downloaded)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"


@pytest.fixture
def shared_fixtures() -> Path:
    """The real traces recorded by others (../shared/fixtures); skip when this clone has none."""
    if not SHARED_FIXTURES.is_dir():
        pytest.skip("../shared/fixtures is not present in this checkout")
    return SHARED_FIXTURES


def pytest_setup_options():  # dash pytest-plugin hook: options of the headless Chromium (NOTES.md)
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


@pytest.fixture(autouse=True, scope="session")
def _run_ids_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Run ids the tests compute are remembered in a temporary folder, not in ~/.cache (ingest/run_ids.py)."""
    before = os.environ.get("PORTSCOPE_RUN_IDS")
    os.environ["PORTSCOPE_RUN_IDS"] = str(tmp_path_factory.mktemp("run-ids"))
    yield
    if before is None:
        del os.environ["PORTSCOPE_RUN_IDS"]
    else:
        os.environ["PORTSCOPE_RUN_IDS"] = before


@pytest.fixture(scope="session")
def demo_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"eager", "compiled", "predicted"}: viewer demo traces written by the real writer."""
    from portscope.app.dev_samples import write_demo_traces

    return write_demo_traces(tmp_path_factory.mktemp("traces"))


@pytest.fixture
def make_app(tmp_path: Path, demo_paths: dict[str, Path]) -> Callable[..., object]:
    """Build a viewer app on the demo traces with a private store in tmp_path."""
    from portscope.app.config import ViewerConfig
    from portscope.app.server import create_app

    def make(**overrides: object):
        kwargs: dict[str, object] = {"trace_paths": (demo_paths["eager"].parent,), "store_dir": tmp_path / "store"}
        kwargs.update(overrides)
        return create_app(ViewerConfig(**kwargs))  # type: ignore[arg-type]

    return make
