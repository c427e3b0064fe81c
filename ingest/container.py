"""The on-disk container: an uncompressed ZIP of Arrow IPC files, 64-byte aligned.

Writing goes to a temporary file in the destination folder, is fsynced and then
renamed over the final name, so a crash never leaves a partial trace there.
Reading memory-maps the file and hands each member to Arrow without copying.
"""

from __future__ import annotations

import os
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from .errors import TraceFormatError

ALIGN = 64
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_MAGIC = b"PK\x03\x04"
_CHUNK = 64 << 20
INFLATE_LIMIT = 2 << 30  # bytes that compressed members (a trace zipped again by another tool) may take in memory
_UMASK = os.umask(0)
os.umask(_UMASK)
_PAD_ID = 0xD935  # the extra-field id zipalign uses for padding


def _padding_extra(offset: int, name: str, zip64: bool) -> bytes:
    """An extra field that makes the member's data start on an ALIGN boundary."""
    base = offset + _LOCAL_HEADER.size + len(name.encode()) + 4 + (20 if zip64 else 0)
    pad = (-base) % ALIGN
    return struct.pack("<HH", _PAD_ID, pad) + b"\0" * pad


Payload = bytes | pa.Buffer | Callable[[BinaryIO], None]


def write_members(path: str | Path, members: list[tuple[str, Payload]]) -> os.stat_result:
    """Write (name, payload) members atomically as an aligned, stored ZIP; return the written file's stat
    (taken before the rename: its device and inode say whether the file at `path` is still that one).

    A payload is bytes, or a callable that streams the member into the file object it is given.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; a trace gets the usual permissions
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_STORED) as zf:
            for name, payload in members:
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_STORED
                if callable(payload):
                    info.extra = _padding_extra(raw.tell(), name, True)
                    with zf.open(info, "w", force_zip64=True) as member:
                        payload(member)
                    continue
                view = memoryview(payload)
                info.file_size = view.nbytes
                zip64 = view.nbytes * 1.05 > zipfile.ZIP64_LIMIT
                info.extra = _padding_extra(raw.tell(), name, zip64)
                with zf.open(info, "w", force_zip64=zip64) as member:
                    for at in range(0, view.nbytes, _CHUNK):
                        member.write(view[at : at + _CHUNK])
            zf.close()
            raw.flush()
            os.fsync(raw.fileno())
            written = os.fstat(raw.fileno())
        os.replace(tmp, path)
        return written
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read_members(path: str | Path) -> tuple[dict[str, pa.Buffer], list[str]]:
    """Memory-map a container; return its members as Arrow buffers and any problems found."""
    problems: list[str] = []
    source = pa.memory_map(str(path), "r")
    whole = source.read_buffer()
    members: dict[str, pa.Buffer] = {}
    try:
        zf = zipfile.ZipFile(pa.BufferReader(whole))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:  # NotImplementedError: an unknown ZIP version
        raise NotAContainer(str(exc)) from None
    with zf:
        inflated = sum(i.file_size for i in zf.infolist() if i.compress_type != zipfile.ZIP_STORED)
        if inflated > INFLATE_LIMIT:  # a member inflates in memory: a ZIP bomb is refused before any is read
            raise TraceFormatError(path, f"its compressed members would take {inflated / 1e9:.1f} GB of memory (at "
                                         f"most {INFLATE_LIMIT / 1e9:.1f} GB); a trace's members are stored (zip -0)")
        for info in zf.infolist():
            if info.compress_type != zipfile.ZIP_STORED:  # unzipped and zipped again by another tool: inflated in memory
                try:
                    members[info.filename] = pa.py_buffer(zf.read(info))
                except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, NotImplementedError, RuntimeError) as exc:
                    problems.append(f"member {info.filename!r} is compressed and cannot be read: {exc}")
                continue
            problem = _stored(whole, info, members)
            if problem:
                problems.append(f"member {info.filename!r} {problem}")
    return members, problems


def _stored(whole: pa.Buffer, info: zipfile.ZipInfo, members: dict[str, pa.Buffer]) -> str | None:
    """Add a stored member's bytes (no copy where aligned) to `members`; else say what is wrong with it."""
    start, size = info.header_offset, whole.size
    if start < 0:  # the central directory points before the file's start (bytes cut from its head)
        return "starts before the beginning of the file (corrupt directory)"
    if start + _LOCAL_HEADER.size > size:
        return "lies past the end of the file (truncated)"
    header = _LOCAL_HEADER.unpack(whole.slice(start, _LOCAL_HEADER.size).to_pybytes())
    if header[0] != _LOCAL_MAGIC:
        return "has a corrupt local header"
    data_start = start + _LOCAL_HEADER.size + header[9] + header[10]
    if data_start + info.file_size > size:
        return "is cut short (truncated file)"
    buf = whole.slice(data_start, info.file_size)
    members[info.filename] = pa.py_buffer(buf.to_pybytes()) if data_start % 8 else buf  # unaligned (another tool's): copy
    return None


class NotAContainer(Exception):
    """Raised by read_members when the file is not a ZIP container at all."""
