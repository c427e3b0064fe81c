"""Reading a converter's input bytes safely: size caps, gzip with a bomb guard, text decoding."""

from __future__ import annotations

import dataclasses
import json
import zlib
from pathlib import Path
from typing import BinaryIO

from ..errors import TraceFormatError

GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass(frozen=True)
class SizeCaps:
    """Limits on what a converter will read (defaults suit traces of a few GB)."""

    max_input_bytes: int = 8 * 2**30  # the file on disk
    max_decompressed_bytes: int = 8 * 2**30  # after gunzip
    max_gzip_ratio: int = 200  # decompressed / compressed; JSON traces compress 5-30x


DEFAULT_CAPS = SizeCaps()


def head(path: Path, n: int = 4096) -> bytes:
    """The first n bytes of a file, decompressed when it is gzip (never more than n)."""
    with open(path, "rb") as f:
        raw = f.read(n)
    if raw[:2] != GZIP_MAGIC:
        return raw
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        return d.decompress(raw, n)
    except zlib.error:
        return b""


def open_checked(path: Path, caps: SizeCaps) -> tuple[BinaryIO, int]:
    """(the open file, its size) of an input within the caps; one clear error for a missing, empty,
    oversized or unreadable file or a directory."""
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise TraceFormatError(path, "is a directory, not a file")
        if size == 0:
            raise TraceFormatError(path, "the file is empty (0 bytes)")
        if size > caps.max_input_bytes:
            raise TraceFormatError(path, f"the file is {size} bytes, over the cap of {caps.max_input_bytes}")
        return open(path, "rb"), size  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise TraceFormatError(path, "no such file") from None
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None


def read_bytes(path: str | Path, caps: SizeCaps = DEFAULT_CAPS) -> bytes:
    """The whole content of a file, gunzipped when it starts with the gzip magic, within the caps."""
    path = Path(path)
    f, _ = open_checked(path, caps)
    try:
        with f:
            raw = f.read()
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if raw[:2] != GZIP_MAGIC:
        return raw
    return _gunzip(path, raw, caps)


def _gunzip(path: Path, raw: bytes, caps: SizeCaps) -> bytes:
    limit = min(caps.max_decompressed_bytes, max(len(raw) * caps.max_gzip_ratio, 1 << 20))
    out: list[bytes] = []
    total = 0
    data = raw
    try:
        while data:  # concatenated gzip members are allowed
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            buf = data
            while True:
                piece = d.decompress(buf, 1 << 22)
                total += len(piece)
                if total > limit:
                    raise TraceFormatError(
                        path,
                        f"gzip content exceeds the cap of {limit} bytes "
                        f"(ratio cap {caps.max_gzip_ratio}x of {len(raw)} compressed bytes): refusing a possible gzip bomb",
                    )
                out.append(piece)
                buf = d.unconsumed_tail
                if d.eof or (not buf and not piece):
                    break
            if not d.eof:
                raise TraceFormatError(path, "the gzip stream is truncated")
            data = d.unused_data
            if data and data[:2] != GZIP_MAGIC:
                break  # trailing garbage after the last member: ignore like gzip(1)
    except zlib.error as exc:
        raise TraceFormatError(path, f"not a valid gzip stream ({exc})") from None
    return b"".join(out)


def decode_text(path: Path, raw: bytes) -> str:
    """UTF-8 text of a log file, without a leading byte order mark (an editor's on Windows: "\ufeff" would be part of
    the first line); invalid bytes raise a clear error naming the offset."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"not UTF-8 text (invalid byte at offset {exc.start})") from None


def read_json(path: str | Path, caps: SizeCaps = DEFAULT_CAPS) -> object:
    """A JSON document from a (possibly gzipped) file, within the size caps; one clear error otherwise."""
    try:
        return json.loads(read_bytes(path, caps))
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceFormatError(path, f"not valid JSON ({exc})") from None
