"""Chrome trace events read from a file in chunks, with timestamps kept exact in integer nanoseconds.

Chrome/Perfetto JSON comes as an object (``{"traceEvents": [...]}``) or a bare
array of events. A bare array is read in chunks of the (possibly gzipped) file:
each chunk is cut after the last ``}`` ``,`` ``{`` that separates two events and
parsed as one array; a cut that lands inside a nested value or a string leaves an
unbalanced piece, which the parser refuses, and that chunk is then split exactly by
a token scan. Peak memory is one chunk plus what the caller keeps of each event.
An object (``{..., "traceEvents": [...], ...}``) streams the same way once the head
before its events parses as the start of an object; the keys after the events are
added to the metadata dict when the last batch has been read. An object whose head
does not (no ``traceEvents`` in the first 64 MB, a key inside a string) is parsed
through :class:`ChromeDocument`, whole.

A caller may give its own ``decode`` (e.g. a typed msgspec decoder): it gets the text
of a JSON array of whole events and returns a batch, or None when the text is not
valid JSON (a wrong cut); the batch after the last one of an object is a list of
dicts, parsed with orjson together with the keys that follow the events.

Timestamps: torch_npu writes ``ts`` as a quoted decimal of microseconds with a
nanosecond fraction (``"1704161511420306.491"``); a float holds only ~16 digits,
so :func:`micros_to_ns` parses the decimal text into an integer, never through a
float. Numeric ``ts`` (Kineto, Perfetto) are converted as given.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from .. import progress
from ..errors import TraceFormatError
from .chrome_json import JSON_TOKEN, ChromeDocument
from .source import DEFAULT_CAPS, GZIP_MAGIC, SizeCaps, open_checked, read_bytes

CHUNK_BYTES = 8 << 20
HEAD_LIMIT = 64 << 20  # an object's keys before its events are read this far at most
_CUT_TRIES = 8  # event starts tried, from the last, to find where an unclosed array's last whole event ends
_DECIMAL = re.compile(r"\s*([+-]?)(\d+)(?:\.(\d*))?\s*")
_WS = b" \t\r\n"
_NON_FINITE = re.compile(rb"\b(?:NaN|Infinity)\b")
UTF8_BOM = b"\xef\xbb\xbf"  # a byte order mark some tools write before UTF-8 JSON


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


def file_chunks(path: Path, caps: SizeCaps = DEFAULT_CAPS, size: int | None = None) -> Iterator[bytes]:
    """The (gunzipped) bytes of a file in pieces of about `size` (`CHUNK_BYTES`), within the caps. The next piece is
    read and gunzipped by a thread while the caller works on this one (both release the GIL); the bytes read are
    reported as each piece is handed out."""
    f, total = open_checked(path, caps)  # closed below, also when the consumer stops early
    report = progress.current().file_read
    size = size or CHUNK_BYTES
    with f, ThreadPoolExecutor(1, thread_name_prefix="portscope-read") as pool:
        pieces = _pieces(path, f, caps, total, size)
        ahead = pool.submit(next, pieces, None)
        try:
            while (got := ahead.result()) is not None:
                ahead = pool.submit(next, pieces, None)
                report(got[1], total)
                yield got[0]
        finally:  # the piece under way finished (or never begun) before the file closes
            ahead.cancel()
            wait([ahead])
            pieces.close()


def _pieces(path: Path, f: BinaryIO, caps: SizeCaps, total: int, size: int) -> Iterator[tuple[bytes, int]]:
    """(piece, bytes of the file read so far) of a file, gunzipped when it starts with the gzip magic."""
    first = f.read(size)
    if first[:2] != GZIP_MAGIC:
        while first:
            yield first, f.tell()
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
                    yield piece, f.tell()
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


Decode = Callable[[bytes], Any]
CutShort = Callable[[int], None]  # told how many events a bare array's end cut mid-way (dropped)


def event_batches(
    path: str | Path, caps: SizeCaps = DEFAULT_CAPS, decode: Decode | None = None, *, cut_short: CutShort | None = None
) -> tuple[dict[str, Any], Iterator[Any]]:
    """(top-level keys other than the events, batches of raw events) of a Chrome JSON object or bare array.

    decode: text of a JSON array of whole events -> a batch, or None when it is not valid JSON;
    orjson's lists of dicts by default. The dict of keys gains the keys written after the events
    once the batches are exhausted. cut_short: given, a bare array that is not closed (the format
    lets its ']' out: a recording process killed mid-write) is read to its last whole event, and
    cut_short(n) is told, before its last batch, the n events cut mid-way and dropped (0 or 1);
    without it, such an array is refused. An object cut short is refused either way."""
    path = Path(path)
    decode = decode or _try
    chunks = file_chunks(path, caps)
    first = b""
    for piece in chunks:
        first += piece
        if first.removeprefix(UTF8_BOM).strip(_WS):
            break
    first = first.removeprefix(UTF8_BOM)  # some Windows tools write one; JSON has no use for it
    start = first.strip(_WS)[:1]
    if start == b"[":
        return {}, _array_batches(path, first[first.index(b"[") + 1 :], chunks, decode, None, cut_short)
    if start != b"{":
        raise TraceFormatError(path, "not a JSON document (does not start with '{' or '[')")
    streamed = _object_head(first, chunks)
    if streamed is not None:
        metadata, rest = streamed
        return metadata, _array_batches(path, rest, chunks, decode, metadata)
    chunks.close()
    doc = ChromeDocument(path, read_bytes(path, caps).removeprefix(UTF8_BOM))
    if doc.span is None and not isinstance(getattr(doc, "_whole", None), list):
        raise TraceFormatError(path, "no 'traceEvents' list: not a Chrome trace")
    return dict(doc.metadata), _document_batches(path, doc)


def _object_head(first: bytes, chunks: Iterator[bytes]) -> tuple[dict[str, Any], bytes] | None:
    """(keys before the events, the bytes after the events' '[') of an object, or None when its head is unusual."""
    buf = first
    while True:
        key = buf.find(b'"traceEvents"')
        while key >= 0:
            i = key + len(b'"traceEvents"')
            while i < len(buf) and buf[i] in _WS:
                i += 1
            if buf[i : i + 1] == b":":
                i += 1
                while i < len(buf) and buf[i] in _WS:
                    i += 1
                if i >= len(buf) - 1:
                    break  # read on: the array may start in the next chunk
                if buf[i : i + 1] != b"[":
                    return None
                try:
                    head = orjson.loads(buf[:key] + b'"traceEvents": []}')
                except orjson.JSONDecodeError:
                    head = None  # the key was inside a string or the head is not an object prefix
                if isinstance(head, dict):
                    head.pop("traceEvents", None)
                    return head, buf[i + 1 :]
            key = buf.find(b'"traceEvents"', key + 1)
        if len(buf) > HEAD_LIMIT:
            return None
        piece = next(chunks, None)
        if piece is None:
            return None
        buf += piece


def _document_batches(path: Path, doc: ChromeDocument) -> Iterator[list[Any]]:
    from .chrome_json import SplitFailed, whole

    given = 0
    try:
        for batch in doc.batches():
            given += len(batch)
            yield batch
    except SplitFailed:  # a batch did not parse on its own: the rest comes from the whole document
        for batch in whole(doc).batches():
            yield batch[given:]
            given = 0


def _array_batches(
    path: Path, buf: bytes, chunks: Iterator[bytes], decode: Decode, tail_keys: dict[str, Any] | None,
    cut_short: CutShort | None = None,
) -> Iterator[Any]:
    """Batches of the events in buf + chunks (the text after the array's '['); tail_keys: the dict that
    gains the keys after the events of an object (None for a bare array); cut_short: as `event_batches`."""
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
            if tail_keys is not None:
                split = _split_tail(buf, decode)
                if split is None:
                    yield _object_tail(path, buf, tail_keys)
                else:
                    tail_keys.update(split[1])
                    yield split[0]
                return
            batch = _array_end(path, buf, decode, cut_short)
            if batch:
                yield batch
            return
        cut = _last_separator(buf)
        if cut is None:
            continue
        batch = decode(_bracketed(buf, cut))
        if batch is None:
            cut = _exact_separator(buf)
            batch = None if cut is None else decode(_bracketed(buf, cut))
            if batch is None:
                continue  # read on: the end of input parses whatever is left at once (and words the error)
        yield batch
        buf = buf[cut:]


def _array_end(path: Path, buf: bytes, decode: Decode, cut_short: CutShort | None) -> Any:
    """The last events of a bare array (buf: from an event start to the end of the file); cut_short: as
    `event_batches`."""
    tail = buf.rstrip(_WS)
    closed = tail.endswith(b"]")
    text = b"[" + tail[:-1].strip(_WS) + b"]"
    if closed:
        batch = decode(text) if len(text) > 2 else []
        if batch is not None:
            return batch
    if cut_short is None:
        if closed:
            return _parse(path, text)  # raises, wording what is wrong
        raise TraceFormatError(path, "the JSON array is not closed (file cut short?)")
    found = _unclosed_end(tail, decode)  # (a ']' at the end may close a list inside a cut event)
    if found is None:
        if closed:
            _parse(path, text)
        raise TraceFormatError(path, "the JSON array is not closed (file cut short?) and its events do not parse")
    cut_short(found[1])
    return found[0]


def _unclosed_end(text: bytes, decode: Decode) -> tuple[Any, int] | None:
    """(the events, how many were cut mid-way and dropped: 0 or 1) of the end of a bare array that is not closed
    (`text` starts at an event), or None when they do not parse. Where they do not parse whole, the last one is cut:
    the text is cut before an event start, tried from the last (the token scan may see starts inside a cut string)."""
    body = text.rstrip(_WS).removesuffix(b",")
    batch = decode(b"[" + body + b"]")
    if batch is not None:
        return batch, 0
    for start in _event_starts(body)[::-1][:_CUT_TRIES]:
        batch = decode(_bracketed(body, start))
        if batch is not None:
            return batch, 1
    return None


def _event_starts(buf: bytes) -> list[int]:
    """Where each top-level '{' of buf is, by a token scan (after a string cut short, its text scans as tokens)."""
    depth = 0
    starts = []
    for m in JSON_TOKEN.finditer(buf):
        tok = m.group()
        if tok in (b"{", b"["):
            if depth == 0 and tok == b"{":
                starts.append(m.start())
            depth += 1
        elif tok in (b"}", b"]"):
            depth = max(depth - 1, 0)
    return starts


def _bracketed(buf: bytes, cut: int) -> bytes:
    """``[`` + the events before `cut` (the separating comma and white space dropped) + ``]``, copied once."""
    end = cut
    while end > 0 and buf[end - 1] in _WS:
        end -= 1
    if end > 0 and buf[end - 1] == 0x2C:  # ','
        end -= 1
        while end > 0 and buf[end - 1] in _WS:
            end -= 1
    return b"".join((b"[", memoryview(buf)[:end], b"]"))


def _split_tail(rest: bytes, decode: Decode) -> tuple[Any, dict[str, Any]] | None:
    """(the last events decoded, the keys after them) of an object's end ``{...}, {...} ], "k": v }``: the
    ']' closing the events is the last one before which the events decode and after which an object's keys
    parse (tried from the end, a few at most); None when no ']' does."""
    pos = len(rest)
    for _ in range(8):
        pos = rest.rfind(b"]", 0, pos)
        if pos < 0:
            return None
        after = rest[pos + 1 :].strip(_WS)
        try:
            keys = orjson.loads(b"{" + (after[1:] if after[:1] == b"," else after))
        except orjson.JSONDecodeError:
            continue
        batch = decode(b"[" + rest[:pos].strip(_WS) + b"]") if isinstance(keys, dict) else None
        if batch is not None:
            return batch, keys
    return None


def _object_tail(path: Path, rest: bytes, keys: dict[str, Any]) -> list[Any]:
    """The last events of an object (orjson dicts); the keys after them go into `keys`."""
    try:
        doc = orjson.loads(b'{"traceEvents": [' + rest)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(path, f"not valid JSON: {exc}") from None
    events = doc.pop("traceEvents", None) if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise TraceFormatError(path, f"'traceEvents' is a {type(events).__name__}, expected a list")
    keys.update(doc)
    return events


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
    for m in JSON_TOKEN.finditer(buf):
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


def may_hold_non_finite(text: bytes) -> bool:
    """Whether JSON text may hold NaN or Infinity, which Python's json.dump writes and strict parsers refuse."""
    return _NON_FINITE.search(text) is not None


def json_loads(text: bytes) -> Any:
    """orjson's loads; text it refuses for a NaN or an Infinity (a trace rewritten by Python's json) is read by
    Python's json, which takes them (slower: only then). Raises orjson.JSONDecodeError for anything else."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        if not may_hold_non_finite(text):
            raise
        try:
            return json.loads(text, parse_int=_json_int)
        except ValueError:
            pass
        raise


def _json_int(text: str) -> int:
    """An integer as orjson reads one (it refuses those past 64 bits, and the readers rely on that)."""
    value = int(text)
    if not -(2**63) <= value < 2**64:
        raise ValueError(f"integer {text[:30]} exceeds 64 bits")
    return value


def _try(text: bytes) -> list[Any] | None:
    try:
        value = json_loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


def _parse(path: Path, text: bytes) -> list[Any]:
    try:
        value = json_loads(text)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(path, f"not valid JSON: {exc}") from None
    if not isinstance(value, list):
        raise TraceFormatError(path, f"expected a JSON array of events, got {type(value).__name__}")
    return value


__all__ = ["CHUNK_BYTES", "event_batches", "file_chunks", "json_loads", "may_hold_non_finite", "micros_to_ns"]
