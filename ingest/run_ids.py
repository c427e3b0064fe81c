"""Run ids already computed, by file: so opening a converted run does not hash the whole file again.

A run id is `Trace.content_hash()`: SHA-256 over the run's tables, ~0.8 s for a 1.2 GB trace here. Whoever
computed it for a file (`write_run` as it writes, the viewer's store when it first hashes a listed file)
remembers it here, keyed by what identifies that file's bytes on disk: resolved path, device, inode, size,
mtime_ns and ctime_ns. ctime cannot be set by a user (any write, `utime` or rename moves it), so a file
changed in any way, or another file at the same path, no longer matches and is hashed again.

Trust: an entry is only ever written by this user's own processes, into a folder only this user can
write (0700, checked on every read); nothing inside a trace file is believed. Traces come from strangers:
a file can name any run id inside itself, but its id here is only ever one that portscope computed.

The folder is $PORTSCOPE_RUN_IDS, else $XDG_CACHE_HOME/portscope/run-ids (~/.cache/portscope/run-ids).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
from pathlib import Path

_RUN_ID = re.compile(r"[0-9a-f]{16}")
VERSION = 2  # of `Trace.content_hash`'s definition: bump it when that changes (ids remembered before are then not used)


def folder() -> Path:
    """Where the ids are kept (not created)."""
    if os.environ.get("PORTSCOPE_RUN_IDS"):
        return Path(os.environ["PORTSCOPE_RUN_IDS"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "portscope" / "run-ids"


def file_key(path: str | Path, st: os.stat_result | None = None) -> str:
    """What identifies a file's bytes: resolved path, device, inode, size, mtime_ns, ctime_ns."""
    path = Path(path).resolve()
    st = st or path.stat()
    return f"v{VERSION}\0{path}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"


def _entry(key: str) -> Path:
    return folder() / hashlib.sha256(key.encode()).hexdigest()[:40]


def _private(where: Path) -> bool:
    """Whether a folder is ours and no one else can write into it."""
    try:
        st = where.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def recall(key: str) -> str | None:
    """The run id remembered for a file key (`file_key`), or None."""
    entry = _entry(key)
    if not _private(entry.parent):
        return None
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if os.fstat(f.fileno()).st_uid != os.getuid():
            return None
        raw = f.read(4096).decode("utf-8", errors="replace").split("\n")
    # the entry names its key too: a collision of the entry's name cannot hand out another file's id
    if len(raw) < 2 or raw[1] != key.replace("\0", "\t") or not _RUN_ID.fullmatch(raw[0]):
        return None
    return raw[0]


def remember(key: str, run_id: str) -> None:
    """Keep a file's run id (best effort: a folder that cannot be written only costs a hash later)."""
    if not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"not a run id: {run_id!r}")
    entry = _entry(key)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _private(entry.parent):
            return
        fd, tmp = tempfile.mkstemp(prefix=".", dir=entry.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{run_id}\n{key.replace(chr(0), chr(9))}\n")
        os.replace(tmp, entry)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return
    _prune(entry.parent)


MAX_ENTRIES = 10_000  # ~120 bytes each; past it the older half goes (their files are hashed again if still opened)


def _prune(where: Path) -> None:
    try:
        entries = [(e.stat().st_mtime_ns, e.path) for e in os.scandir(where) if not e.name.startswith(".")]
    except OSError:
        return
    if len(entries) <= MAX_ENTRIES:
        return
    for _, path in sorted(entries)[: len(entries) - MAX_ENTRIES // 2]:
        Path(path).unlink(missing_ok=True)
