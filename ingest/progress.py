"""Progress of a long conversion (bytes of the input read, events decoded, stage), for whoever listens.

Readers report to :func:`current`, which is a silent :class:`Progress` unless a caller set one with
:func:`reporting` (a context variable: each thread or task has its own). ``portscope convert`` shows
:class:`TerminalProgress` on a terminal; the viewer's background conversions keep a
:class:`ProgressState` the upload page polls.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import enum
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

from .catalog import format_bytes


class Stage(enum.Enum):
    """What a conversion is doing."""

    READING = "reading"
    LINKING = "linking"
    WRITING = "writing"
    DONE = "done"
    FAILED = "failed"


class Progress:
    """A listener that ignores everything; subclasses override what they show."""

    def file_read(self, done_bytes: int, total_bytes: int) -> None:
        """`done_bytes` of the `total_bytes` of the input file have been read."""

    def events_read(self, count: int) -> None:
        """`count` more events have been decoded."""

    def stage(self, stage: Stage) -> None:
        """The conversion moved on to `stage`."""


_SILENT = Progress()
_CURRENT: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("portscope_progress", default=None)


def current() -> Progress:
    """The listener of this thread's conversion (a silent one by default)."""
    return _CURRENT.get() or _SILENT


@contextlib.contextmanager
def reporting(listener: Progress) -> Iterator[Progress]:
    """Send the progress of conversions run inside the block to `listener`."""
    token = _CURRENT.set(listener)
    try:
        yield listener
    finally:
        _CURRENT.reset(token)


@dataclasses.dataclass
class Snapshot:
    """Where a conversion stands: bytes read of the total, events, stage, rate and time left."""

    done_bytes: int
    total_bytes: int
    events: int
    stage: Stage
    seconds: float

    @property
    def fraction(self) -> float:
        return min(self.done_bytes / self.total_bytes, 1.0) if self.total_bytes else 0.0

    @property
    def bytes_per_s(self) -> float:
        return self.done_bytes / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        rate = self.bytes_per_s
        if self.stage is not Stage.READING or rate <= 0:
            return None
        return max(self.total_bytes - self.done_bytes, 0) / rate

    def line(self) -> str:
        """One line of text: '412 MB of 2.0 GB (20%), 1,234,567 events, 85 MB/s, about 19 s left'."""
        if self.stage is Stage.READING and not self.total_bytes:
            return "starting"
        if self.stage is not Stage.READING:
            return f"{self.stage.value}: {self.events:,} events read, {self.seconds:.0f} s so far"
        eta = self.eta_s
        left = f", about {eta:.0f} s left" if eta is not None else ""
        return (f"reading: {format_bytes(self.done_bytes)} of {format_bytes(self.total_bytes)} ({self.fraction:.0%}), "
                f"{self.events:,} events, {format_bytes(int(self.bytes_per_s))}/s{left}")  # fmt: skip


class ProgressState(Progress):
    """The latest snapshot of one conversion, safe to read from another thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._done = self._total = self._events = 0
        self._stage = Stage.READING

    def file_read(self, done_bytes: int, total_bytes: int) -> None:
        with self._lock:
            self._done, self._total = done_bytes, total_bytes

    def events_read(self, count: int) -> None:
        with self._lock:
            self._events += count

    def stage(self, stage: Stage) -> None:
        with self._lock:
            self._stage = stage

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(self._done, self._total, self._events, self._stage, time.monotonic() - self._started)


class TerminalProgress(ProgressState):
    """A status line on a terminal (stderr), redrawn at most `interval_s` apart; cleared at the end."""

    def __init__(self, stream: TextIO | None = None, *, interval_s: float = 0.25) -> None:
        super().__init__()
        self.stream = stream or sys.stderr
        self.interval_s = interval_s
        self._shown = 0.0
        self._width = 0

    def file_read(self, done_bytes: int, total_bytes: int) -> None:
        super().file_read(done_bytes, total_bytes)
        self._draw()

    def events_read(self, count: int) -> None:
        super().events_read(count)
        self._draw()

    def stage(self, stage: Stage) -> None:
        super().stage(stage)
        self._draw(force=True)

    def _draw(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._shown < self.interval_s:
            return
        self._shown = now
        text = self.snapshot().line()
        self.stream.write("\r" + text.ljust(self._width))
        self._width = len(text)
        self.stream.flush()

    def close(self) -> None:
        """Erase the status line."""
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def for_terminal(stream: TextIO | None = None) -> TerminalProgress | None:
    """A terminal status line when `stream` (stderr by default) is a terminal, else None."""
    stream = stream or sys.stderr
    return TerminalProgress(stream) if stream.isatty() else None


__all__ = ["Stage", "Progress", "ProgressState", "Snapshot", "TerminalProgress", "current", "for_terminal", "reporting"]
