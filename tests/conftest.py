"""Shared test helpers: tiny models are built from configs with random weights (nothing downloaded)."""

from __future__ import annotations

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
