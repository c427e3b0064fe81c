"""Chrome trace events read from a file in chunks, with timestamps kept exact in integer nanoseconds.

Chrome/Perfetto JSON comes as an object (``{"traceEvents": [...]}``) or a bare
array of events. A bare array is read in chunks of the (possibly gzipped) file:
each chunk is cut after the last ``}`` ``,`` ``{`` that separates two events and
parsed as one array; a cut that lands inside a nested value or a string leaves an
unbalanced piece, which orjson refuses, and that chunk is then split exactly by
a token scan. Peak memory is one chunk plus what the caller keeps of each event.
An object is parsed through :class:`ChromeDocument` (its events are in one array
whose position in the object is not known before parsing).

Timestamps: torch_npu writes ``ts`` as a quoted decimal of microseconds with a
nanosecond fraction (``"1704161511420306.491"``); a float holds only ~16 digits,
so :func:`micros_to_ns` parses the decimal text into an integer, never through a
float. Numeric ``ts`` (Kineto, Perfetto) are converted as given.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..errors import TraceFormatError
from ._source import DEFAULT_CAPS, GZIP_MAGIC, SizeCaps, read_bytes
from .chrome_json import _TOKEN, ChromeDocument

CHUNK_BYTES = 8 << 20
_DECIMAL = re.compile(r"\s*([+-]?)(\d+)(?:\.(\d*))?\s*")
_WS = b" \t\r\n"


def micros_to_ns(value: Any) -> int | None:
    """Integer ns of a microsecond figure: a decimal string exactly (digits past ns truncated), a number as given."""
    kind = type(value)
    if kind is str:
        m = _DECIMAL.fullmatch(value)
        if m is None:
            return None
        sign, whole, frac = m.groups()
        ns = int(whole) * 1000 + int(((frac or "") + "000")[:3])
        return -ns if sign == "-" else ns
    if kind is int:
        return value * 1000
    if kind is float and math.isfinite(value) and abs(value) < 9e15:
        return round(value * 1000)
    return None


def file_chunks(path: Path, caps: SizeCaps = DEFAULT_CAPS, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The (gunzipped) bytes of a file in pieces of about `size`, within the caps."""
    try:
        total = path.stat().st_size
        if path.is_dir():
            raise TraceFormatError(path, "is a directory, not a file")
        if total == 0:
            raise TraceFormatError(path, "the file is empty (0 bytes)")
        if total > caps.max_input_bytes:
            raise TraceFormatError(path, f"the file is {total} bytes, over the cap of {caps.max_input_bytes}")
        f = open(path, "rb")  # noqa: SIM115 - closed below, also when the consumer stops early
    except FileNotFoundError:
        raise TraceFormatError(path, "no such file") from None
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    with f:
        first = f.read(size)
        if first[:2] != GZIP_MAGIC:
            while first:
                yield first
                first = f.read(size)
            return
        limit = min(caps.max_decompressed_bytes, max(total * caps.max_gzip_ratio, 1 << 20))
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = 0
        data = first
        try:
            while data:
                piece = d.decompress(data, size)
                while True:
                    out += len(piece)
                    if out > limit:
                        raise TraceFormatError(path, f"gzip content exceeds the cap of {limit} bytes: refusing a possible gzip bomb")
                    if piece:
                        yield piece
                    if not d.unconsumed_tail:
                        break
                    piece = d.decompress(d.unconsumed_tail, size)
                if d.eof:
                    rest = d.unused_data
                    if rest[:2] != GZIP_MAGIC:
                        return  # trailing garbage after the last member: ignored like gzip(1)
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    data = rest
                    continue
                data = f.read(size)
        except zlib.error as exc:
            raise TraceFormatError(path, f"not a valid gzip stream ({exc})") from None
        if not d.eof:
            raise TraceFormatError(path, "the gzip stream is truncated")


def event_batches(path: str | Path, caps: SizeCaps = DEFAULT_CAPS) -> tuple[dict[str, Any], Iterator[list[Any]]]:
    """(top-level keys other than the events, batches of raw events) of a Chrome JSON object or bare array."""
    path = Path(path)
    chunks = file_chunks(path, caps)
    first = b""
    for piece in chunks:
        first += piece
        if first.strip(_WS):
            break
    start = first.strip(_WS)[:1]
    if start == b"[":
        return {}, _array_batches(path, first, chunks)
    if start != b"{":
        raise TraceFormatError(path, "not a JSON document (does not start with '{' or '[')")
    chunks.close()
    doc = ChromeDocument(path, read_bytes(path, caps))
    if doc.span is None and not isinstance(getattr(doc, "_whole", None), list):
        raise TraceFormatError(path, "no 'traceEvents' list: not a Chrome trace")
    return dict(doc.metadata), _document_batches(path, doc)


def _document_batches(path: Path, doc: ChromeDocument) -> Iterator[list[Any]]:
    from .chrome_json import _SplitFailed, whole

    given = 0
    try:
        for batch in doc.batches():
            given += len(batch)
            yield batch
    except _SplitFailed:  # a batch did not parse on its own: the rest comes from the whole document
        for batch in whole(doc).batches():
            yield batch[given:]
            given = 0


def _array_batches(path: Path, first: bytes, chunks: Iterator[bytes]) -> Iterator[list[Any]]:
    buf = first[first.index(b"[") + 1 :]
    done = False
    while True:
        if not done:
            piece = next(chunks, None)
            if piece is None:
                done = True
            else:
                buf += piece
                if len(buf) < CHUNK_BYTES:
                    continue
        if done:
            tail = buf.rstrip(_WS)
            if not tail.endswith(b"]"):
                raise TraceFormatError(path, "the JSON array is not closed (file cut short?)")
            body = tail[:-1].strip(_WS)
            if body:
                yield _parse(path, b"[" + body + b"]")
            return
        cut = _last_separator(buf)
        if cut is None:
            continue
        batch = _try(b"[" + buf[:cut].rstrip(_WS).rstrip(b",") + b"]")
        if batch is None:
            cut = _exact_separator(buf)
            batch = None if cut is None else _try(b"[" + buf[:cut].rstrip(_WS).rstrip(b",") + b"]")
            if batch is None:
                continue  # read on: the end of input parses whatever is left at once (and words the error)
        yield batch
        buf = buf[cut:]


def _last_separator(buf: bytes) -> int | None:
    """Index of the '{' that follows the last '}' ',' in buf (a likely event start), or None."""
    pos = len(buf)
    while True:
        pos = buf.rfind(b"{", 0, pos)
        if pos <= 0:
            return None
        j = pos - 1
        while j >= 0 and buf[j] in _WS:
            j -= 1
        if j >= 0 and buf[j] == 0x2C:  # ','
            j -= 1
            while j >= 0 and buf[j] in _WS:
                j -= 1
            if j >= 0 and buf[j] == 0x7D:  # '}'
                return pos


def _exact_separator(buf: bytes) -> int | None:
    """Index of the start of the last complete top-level event of buf, found by a token scan."""
    depth = 0
    last = None
    for m in _TOKEN.finditer(buf):
        tok = m.group()
        if tok in (b"{", b"["):
            if depth == 0 and tok == b"{":
                last = m.start()
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
            if depth < 0:
                return None
    return last if last else None


def _try(text: bytes) -> list[Any] | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


def _parse(path: Path, text: bytes) -> list[Any]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(path, f"not valid JSON: {exc}") from None
    if not isinstance(value, list):
        raise TraceFormatError(path, f"expected a JSON array of events, got {type(value).__name__}")
    return value


__all__ = ["CHUNK_BYTES", "event_batches", "file_chunks", "micros_to_ns"]
