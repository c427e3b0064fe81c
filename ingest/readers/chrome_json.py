"""Chrome trace JSON (Kineto's export, our own export) read in batches of events, in bounded memory.

A Kineto file is one JSON object whose ``traceEvents`` array puts each event on
its own lines at a fixed indentation (``\\n  {``). JSON strings cannot hold a raw
newline, so that byte sequence only ever starts an event or a nested object; a
wrong split leaves an unbalanced piece that fails to parse, and the reader then
falls back to parsing the whole document at once. Peak memory is the file's bytes
plus one batch of parsed events instead of the whole parsed document.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..errors import TraceFormatError

BATCH_BYTES = 4 << 20
JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)
_WS = b" \t\r\n"


class SplitFailed(Exception):
    """The layout is not one the batch splitter handles; parse the whole document."""


class ChromeDocument:
    """A Chrome trace JSON document: its top-level keys and its events, in batches."""

    def __init__(self, path: Path, raw: bytes) -> None:
        self.path = path
        self.raw = raw
        self.metadata: dict[str, Any] = {}
        self._plan: tuple[int, int, bytes] | None = None  # first event, last event start, separator
        self.span: tuple[int, int] | None = None  # raw[span[0]:span[1]] holds every event (split layout only)
        self.separator: bytes | None = None  # what starts each event in that layout (b"\\n  {")
        try:
            self._plan = self._split_plan()
        except SplitFailed:
            self._plan = None
        if self._plan is None:
            self._whole = self._parse_whole()

    def batches(self) -> Iterator[list[Any]]:
        """Lists of raw events in file order (not validated)."""
        if self._plan is None:
            yield self._whole
            return
        first, last, sep = self._plan
        raw = self.raw
        pos = first
        while pos < last:
            nxt = raw.find(sep, pos + BATCH_BYTES)
            if nxt == -1 or nxt > last:
                nxt = last
            piece = raw[pos:nxt].rstrip(_WS)
            if piece.endswith(b","):
                piece = piece[:-1]
            yield self._loads(b"[" + piece + b"]")
            pos = nxt + 1
        end = _value_end(raw, last + len(sep) - 1)
        yield [self._loads(raw[last + len(sep) - 1 : end])]

    def _loads(self, text: bytes) -> Any:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            raise SplitFailed() from None

    def _split_plan(self) -> tuple[int, int, bytes] | None:
        raw = self.raw
        start = re.compile(rb"\s*").match(raw).end()
        if raw[start : start + 1] != b"{":
            return None
        key = raw.find(b'"traceEvents"')
        if key < 0:
            return None
        i = key + len(b'"traceEvents"')
        while i < len(raw) and raw[i] in _WS + b":":
            i += 1
        if raw[i : i + 1] != b"[":
            return None
        bracket = i
        i += 1
        while i < len(raw) and raw[i] in _WS:
            i += 1
        if raw[i : i + 1] != b"{":
            return None
        newline = raw.rfind(b"\n", bracket, i)
        if newline < 0:
            return None  # one-line document: no safe split points
        sep = raw[newline : i + 1]
        if sep.strip(_WS) != b"{":
            return None
        last = raw.rfind(sep)
        if last < newline:
            return None
        end = _value_end(raw, last + len(sep) - 1)
        close = end
        while close < len(raw) and raw[close] in _WS:
            close += 1
        if raw[close : close + 1] != b"]":
            raise SplitFailed()
        skeleton = raw[: bracket + 1] + raw[close:]
        self.metadata = self._loads(skeleton)
        if not isinstance(self.metadata, dict):
            raise SplitFailed()
        self.metadata.pop("traceEvents", None)
        self.span = (newline, end)
        self.separator = sep
        return newline, last, sep

    def _parse_whole(self) -> list[Any]:
        try:
            doc = orjson.loads(self.raw)
        except orjson.JSONDecodeError as exc:
            raise TraceFormatError(self.path, f"not valid JSON: {exc}") from None
        if isinstance(doc, list):
            return doc
        if not isinstance(doc, dict):
            raise TraceFormatError(self.path, f"a Chrome trace is a JSON object or array, not {type(doc).__name__}")
        events = doc.pop("traceEvents", None)
        if events is None:
            raise TraceFormatError(self.path, "no 'traceEvents' key: not a Chrome/Kineto trace")
        if not isinstance(events, list):
            raise TraceFormatError(self.path, f"'traceEvents' is a {type(events).__name__}, expected a list")
        self.metadata = doc
        return events


def _value_end(raw: bytes, start: int) -> int:
    """Index just past the JSON object or array that starts at raw[start]."""
    depth = 0
    for m in JSON_TOKEN.finditer(raw, start):
        tok = m.group()
        if tok in (b"{", b"["):
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                return m.end()
    raise SplitFailed()


def whole(doc: ChromeDocument) -> ChromeDocument:
    """The same document parsed at once (after a batch failed to parse)."""
    doc._plan = None
    doc.span = None
    doc.separator = None
    doc._whole = doc._parse_whole()
    return doc
