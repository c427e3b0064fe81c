"""The per-app context a request works with (no module-level state)."""

from __future__ import annotations

import dataclasses

import flask

from .config import ViewerConfig
from .store import TraceStore


@dataclasses.dataclass(frozen=True)
class Viewer:
    """What a request of this app needs: its options and its store."""

    config: ViewerConfig
    store: TraceStore


def viewer() -> Viewer:
    """The Viewer of the app serving the current request."""
    return flask.current_app.extensions["portscope"]


def store() -> TraceStore:
    return viewer().store
