"""Uploads of a multi-rank run: several per-rank PyTorch-profiler traces in one drop (one multipart request to
POST /api/upload/ranks) or a .zip holding them (POST /api/upload, recognised by its content: a ZIP without the
``.arrow`` members of a portscope trace). The rank files are unpacked into a folder of their own under the store's
``incoming/`` and converted as `portscope convert DIR` converts a folder (`ingest.ranks.convert_ranks`) into one run.

A zip is checked member by member before anything is written: at most `MAX_RANK_FILES` members, each a plain file
name (no folder, no ``..``, no drive, no control characters) ending ``.json`` or ``.json.gz``, not a zip itself,
each no larger than the upload limit once unpacked and all together no larger than `UNPACKED_FACTOR` times it
(sizes counted as the bytes come out, not as the zip declares them). Every problem is named in one
TraceFormatError.

A zip of torch_npu rank folders (``*_ascend_pt``, as torch_npu writes one per rank, at any depth in the zip) is read
for what `ingest.ranks` reads of each folder: its ``profiler_info*.json`` and
``ASCEND_PROFILER_OUTPUT/trace_view.json``, unpacked as ``<folder>/...``; the folders' other files (raw device data,
CSV tables) are left in the zip. The folder names are checked as file names are.
"""

from __future__ import annotations

import os
import re
import shutil
import unicodedata
import uuid
import zipfile
import zlib
from pathlib import Path

from portscope.ingest import run_ids
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.summary import format_bytes

__all__ = ["MAX_RANK_FILES", "RANK_JOBS", "UNPACKED_FACTOR", "check_rank_name", "convert_rank_folder", "is_rank_zip",
           "remove_folder", "unpack_rank_zip"]

MAX_RANK_FILES = 1024
UNPACKED_FACTOR = 16  # a zip's members together, unpacked: at most this many times the upload limit (JSON packs ~10x)
RANK_JOBS = 2  # ranks converted at once by an upload's conversion
_TRACE_NAME = re.compile(r"^[^/\\:\x00]+\.json(\.gz)?$", re.IGNORECASE)
_ZIP_MAGIC = b"PK\x03\x04"
_ASCEND_FOLDER = re.compile(r"(?:^|/)([^/]+_ascend_pt)/", re.IGNORECASE)
_ASCEND_MEMBER = re.compile(r"^(?:[^/]+/)*([^/]+_ascend_pt)/(profiler_info(?:_\d+)?\.json|ASCEND_PROFILER_OUTPUT/trace_view\.json)$",
                            re.IGNORECASE)
_CHUNK = 1 << 20


def check_rank_name(raw: str) -> str | None:
    """Why `raw` is not acceptable as a rank file's name (None: it is): a plain name ending .json or .json.gz."""
    if not raw or raw in (".", "..") or raw.startswith(".") or "/" in raw or "\\" in raw or ":" in raw:
        return f"{_shown(raw)!r} is not a plain file name (no folders, no leading dot): zip the files themselves (zip -j)"
    if any(unicodedata.category(c)[0] == "C" for c in raw) or len(raw) > 200:
        return f"{_shown(raw)!r}: a file name with control characters or longer than 200 characters"
    if raw.lower().endswith(".zip"):
        return f"{_shown(raw)!r}: a zip inside the zip (nested zips are not read)"
    if not _TRACE_NAME.match(raw):
        return f"{_shown(raw)!r}: not a trace file name (*.json, *.json.gz)"
    return None


def _shown(raw: str) -> str:
    return "".join(c if unicodedata.category(c)[0] != "C" else "?" for c in raw)[:200]


def is_rank_zip(path: Path) -> bool:
    """Whether an uploaded file is a ZIP of rank traces rather than a portscope trace (whose members are ``.arrow``
    tables and a manifest)."""
    with path.open("rb") as f:
        if f.read(4) != _ZIP_MAGIC:
            return False
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
    return bool(names) and not any(n.endswith(".arrow") for n in names)


def unpack_rank_zip(path: Path, folder: Path, name: str, max_bytes: int) -> list[Path]:
    """Check every member of the zip `path` (see the module's docstring), then unpack them into `folder` (made
    here); their paths. One TraceFormatError naming `name` lists every problem."""
    problems: list[str] = []
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise TraceFormatError(name, f"not a readable zip ({exc})") from None
    with archive:
        infos = archive.infolist()
        if any(_ASCEND_FOLDER.search(i.filename) for i in infos):
            return _unpack_ascend(archive, infos, folder, name, max_bytes)
        if not infos:
            problems.append("the zip is empty")
        if len(infos) > MAX_RANK_FILES:
            problems.append(f"{len(infos)} members; at most {MAX_RANK_FILES} rank files are read")
        seen: set[str] = set()
        for info in infos[: MAX_RANK_FILES + 1]:
            why = check_rank_name(info.filename) if not info.is_dir() else f"{_shown(info.filename)!r} is a folder"
            if why:
                problems.append(why)
            elif info.filename.lower() in seen:
                problems.append(f"{_shown(info.filename)!r} appears twice")
            seen.add(info.filename.lower())
            if info.file_size > max_bytes:
                problems.append(f"{_shown(info.filename)!r} is {format_bytes(info.file_size)} unpacked; the limit is "
                                f"{format_bytes(max_bytes)}")
            if info.flag_bits & 0x1:
                problems.append(f"{_shown(info.filename)!r} is encrypted")
        if problems:
            raise TraceFormatError(name, problems)
        return _unpacked(archive, [(info, info.filename) for info in infos], folder, name, max_bytes)


def _unpack_ascend(archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo], folder: Path, name: str,
                   max_bytes: int) -> list[Path]:
    """The members `ingest.ranks` reads of each torch_npu rank folder in the zip, checked, then unpacked."""
    problems: list[str] = []
    picked: list[tuple[zipfile.ZipInfo, str]] = []
    seen: set[str] = set()
    for info in infos:
        match = _ASCEND_MEMBER.match(info.filename)
        if match is None or info.is_dir():
            continue
        rank_folder, member = match.groups()
        why = check_rank_name(rank_folder + ".json")  # the folder's name, checked as a file name is
        if why or ".." in info.filename.split("/") or info.filename.startswith("/"):
            problems.append(why or f"{_shown(info.filename)!r} is not a plain path")
            continue
        relative = f"{rank_folder}/{member}"
        if relative.lower() in seen:
            problems.append(f"{_shown(relative)!r} appears twice")
        seen.add(relative.lower())
        if info.file_size > max_bytes:
            problems.append(f"{_shown(info.filename)!r} is {format_bytes(info.file_size)} unpacked; the limit is "
                            f"{format_bytes(max_bytes)}")
        if info.flag_bits & 0x1:
            problems.append(f"{_shown(info.filename)!r} is encrypted")
        picked.append((info, relative))
    if not any(rel.lower().endswith("trace_view.json") for _, rel in picked):
        problems.append("no *_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json in the zip's torch_npu rank folders")
    if len({rel.split("/")[0] for _, rel in picked}) > MAX_RANK_FILES:
        problems.append(f"more than {MAX_RANK_FILES} rank folders")
    if problems:
        raise TraceFormatError(name, problems)
    return _unpacked(archive, picked, folder, name, max_bytes)


def _unpacked(archive: zipfile.ZipFile, members: list[tuple[zipfile.ZipInfo, str]], folder: Path, name: str,
              max_bytes: int) -> list[Path]:
    """Unpack each (member, relative path) into `folder` (made here), removing it all on any failure."""
    folder.mkdir(parents=True)
    try:
        return _unpack(archive, members, folder, name, max_bytes)
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, EOFError, zlib.error) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise TraceFormatError(name, f"a member could not be unpacked ({type(exc).__name__}: {exc})") from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _unpack(archive: zipfile.ZipFile, members: list[tuple[zipfile.ZipInfo, str]], folder: Path, name: str,
            max_bytes: int) -> list[Path]:
    total_cap = UNPACKED_FACTOR * max_bytes
    total = 0
    written: list[Path] = []
    for info, relative in members:
        dest = folder / relative
        dest.parent.mkdir(parents=True, exist_ok=True)
        size = 0
        with archive.open(info) as src, dest.open("wb") as out:
            first = True
            while chunk := src.read(_CHUNK):
                if first and chunk[:4] == _ZIP_MAGIC:
                    raise TraceFormatError(name, f"{_shown(info.filename)!r}: a zip inside the zip (nested zips are "
                                                 "not read)")
                first = False
                size += len(chunk)
                total += len(chunk)
                if size > max_bytes:  # the declared size lied
                    raise TraceFormatError(name, f"{_shown(info.filename)!r} unpacks past the limit of "
                                                 f"{format_bytes(max_bytes)}")
                if total > total_cap:
                    raise TraceFormatError(name, f"the zip unpacks past {format_bytes(total_cap)} in all "
                                                 f"({UNPACKED_FACTOR}x the upload limit)")
                out.write(chunk)
        written.append(dest)
    return written


def convert_rank_folder(runs_dir: Path, folder: Path, name: str, *, jobs: int = RANK_JOBS) -> str:
    """Convert a folder of rank files into one run kept as ``<runs_dir>/<run id>.arrow``; its run id. Errors name
    `name` (the upload), not the temporary folder."""
    from portscope.ingest.ranks import convert_ranks

    written = runs_dir / f".{os.getpid()}-{uuid.uuid4().hex}.partial"  # named by its id once written
    try:
        try:
            _, run_id = convert_ranks(folder, written, jobs=jobs)
        except TraceFormatError as exc:
            raise exc.with_path(name) from None
        dest = runs_dir / f"{run_id}.arrow"
        if not dest.exists():
            os.replace(written, dest)
            run_ids.remember(run_ids.file_key(dest), run_id)  # written here: the viewer maps it as is
    finally:
        written.unlink(missing_ok=True)
    return run_id


def remove_folder(folder: Path) -> None:
    """Delete an upload's folder of rank files."""
    shutil.rmtree(folder, ignore_errors=True)
