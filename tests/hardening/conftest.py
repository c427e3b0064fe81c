"""Helpers of the hardening tests (demo traces, the app factory and browser options live in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path


def upload(client, path: Path, name: str | None = None):  # type: ignore[no-untyped-def]
    """POST a file to /api/upload through a Flask test client."""
    return client.post(
        f"/api/upload?name={name or path.name}",
        data=path.read_bytes(),
        headers={"X-Portscope-Upload": "1", "Content-Type": "application/octet-stream"},
    )
