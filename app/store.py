"""The server-side store of runs, keyed by content hash.

Runs come from the folders and files named on the command line (listed for
everyone) and from uploads (kept in `<store>/runs/<run id>.arrow`, listed only
in the browser that uploaded them; anyone with the URL can open them). Derived
data goes to the shared cache (small tables) or to `<store>/derived/<run id>/`
(timeline arrays, memory-mapped by every worker). Nothing here is global: a
store belongs to one app.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from flask_caching import Cache

from portscope.ingest import progress, run_ids
from portscope.ingest.errors import PortscopeError, TraceFormatError
from portscope.ingest.report import region_report_data
from portscope.ingest.slice_depth import nest_slices
from portscope.ingest.summary import summarize
from portscope.ingest.trace import Trace, read_trace, write_trace
from portscope.ingest.viewport import Lanes, build_lanes

from .config import private_dir
from .data.runs import RunRow, file_model, run_row
from .data.tables import timeline_slices

RUN_ID = re.compile(r"^[0-9a-f]{16}$")
_ZIP_MAGIC = b"PK\x03\x04"
T = TypeVar("T")


def _writer_dead(name: str) -> bool:
    """Whether the process that wrote `<pid>-<uuid>.part…` is gone (False when the name carries no pid)."""
    pid = name.split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by someone else
        return False
    try:  # a killed worker whose parent died too can linger as a zombie until it is reaped
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


class RunNotFound(PortscopeError, KeyError):
    """No run with this id is in the store or in the listed folders."""

    def __str__(self) -> str:
        return f"no run {self.args[0]!r} here (uploads are kept per store; open the URL on the viewer that received it)"


class _Lru(collections.OrderedDict):
    """A tiny bounded mapping for per-process handles (memory-mapped traces, lane arrays)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.lock = threading.Lock()

    def get_or(self, key: str, make: Callable[[], T]) -> T:
        with self.lock:
            if key in self:
                self.move_to_end(key)
                return self[key]
        value = make()
        with self.lock:
            self[key] = value
            while len(self) > self.size:
                self.popitem(last=False)
        return value


# Part of every derived-data cache key: bump when report or run-row data change shape (a disk cache outlives the process).
_DERIVED_VERSION = "d8"  # d8: lanes grouped by rank (viewport order)


class TraceStore:
    """Runs by content hash: listing, opening, uploads and derived data."""

    def __init__(self, *, root: Path, sources: Sequence[Path], cache: Cache, open_traces: int = 4) -> None:
        self.root = private_dir(root)
        self.runs_dir = private_dir(root / "runs")
        self.incoming = private_dir(root / "incoming")
        self.derived = private_dir(root / "derived")
        self.sources = tuple(Path(s) for s in sources)
        self.cache = cache
        self._traces = _Lru(open_traces)
        self._lanes = _Lru(open_traces)
        self._memo: _Lru = _Lru(16)  # per-process: arrays too big to serialise into the shared cache on every use
        self.discard_partial_uploads()

    # listing -----------------------------------------------------------------

    def source_files(self) -> list[Path]:
        files: list[Path] = []
        for source in self.sources:
            if source.is_dir():
                files += sorted(p for p in source.iterdir() if p.suffix == ".arrow" and not p.name.startswith("."))
            elif source.exists():
                files.append(source)
        return files

    def listed(self) -> tuple[list[tuple[str, Path]], list[str]]:
        """(run id, path) of every listed trace, and one message per file that is not a valid trace."""
        runs, problems, seen = [], [], set()
        for path in self.source_files():
            entry = self._identify(path)
            if "error" in entry:
                problems.append(entry["error"])
            elif entry["run_id"] not in seen:
                seen.add(entry["run_id"])
                runs.append((entry["run_id"], path))
        return runs, problems

    def _identify(self, path: Path) -> dict[str, str]:
        st = path.stat()
        key = f"file:{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
        entry = self.cache.get(key)
        if entry is None:
            try:
                trace, run_id, file_key = self._open(path)
                if run_id is None:
                    run_id = trace.content_hash()
                    if file_key is not None:
                        run_ids.remember(file_key, run_id)  # this store or another need not hash these bytes again
                self._traces.get_or(run_id, lambda: trace)  # mapped already: the run's page uses it
                entry = {"run_id": run_id}
            except TraceFormatError as exc:
                entry = {"error": str(exc)}
            self.cache.set(key, entry)
        return entry

    def _read(self, path: Path, name: str | None = None) -> Trace:
        """Read a portscope trace (validated), or convert another format."""
        return self._open(path, name)[0]

    def _open(self, path: Path, name: str | None = None) -> tuple[Trace, str | None, str | None]:
        """(trace, its remembered run id or None, the file's `run_ids` key or None).

        A portscope trace whose exact bytes have a remembered run id (`run_ids`: computed by `portscope
        convert` as it wrote them, or by a store after validating them) is mapped without reading it through
        again: not hashed, not validated a second time. Any other is validated in full. The key is given
        only for a portscope trace that did not change while it was read (then its id may be remembered).
        Another format is converted (its id also depends on the converter: never remembered).
        """
        with path.open("rb") as f:
            head = f.read(4)
        if head == _ZIP_MAGIC or Path(name or path.name).suffix == ".arrow":
            before = run_ids.file_key(path)
            run_id = run_ids.recall(before)
            trace = read_trace(path, validate=run_id is None)
            if run_ids.file_key(path) == before:
                return trace, run_id, before
            return (read_trace(path) if run_id is not None else trace), None, None  # changed meanwhile: validated
        from portscope.ingest.convert import load_any  # the readers load on the first file of another format

        return load_any(path, name=name), None, None

    # opening -----------------------------------------------------------------

    def path(self, run_id: str) -> Path:
        if not isinstance(run_id, str) or not RUN_ID.match(run_id):
            raise RunNotFound(run_id)
        stored = self.runs_dir / f"{run_id}.arrow"
        if stored.exists():
            return stored
        for rid, path in self.listed()[0]:
            if rid == run_id:
                return path
        raise RunNotFound(run_id)

    def trace(self, run_id: str) -> Trace:
        """The run, memory-mapped (kept open for the next request in this process)."""
        path = self.path(run_id)
        return self._traces.get_or(run_id, lambda: self._read(path))

    def exists(self, run_id: str) -> bool:
        try:
            self.path(run_id)
        except RunNotFound:
            return False
        return True

    def lanes(self, run_id: str) -> Lanes:
        """Timeline arrays of a run, built once per store and memory-mapped by every worker."""
        folder = self.derived / run_id / f"lanes-{_DERIVED_VERSION}"  # rebuilt when the derived data changes (nesting)

        def make() -> Lanes:
            if not (folder / "lanes.txt").exists():
                tmp = self.derived / run_id / f".lanes-{uuid.uuid4().hex}"
                build_lanes(nest_slices(timeline_slices(self.trace(run_id))[0])).save(tmp)
                try:
                    os.rename(tmp, folder)
                except OSError:  # another worker got there first
                    shutil.rmtree(tmp, ignore_errors=True)
            return Lanes.load(folder)

        self.path(run_id)
        return self._lanes.get_or(run_id, make)

    def memo(self, key: str, make: Callable[[], T]) -> T:
        """A value computed once per process (the last 16): search matches of a run, kept as arrays."""
        return self._memo.get_or(key, make)

    # cached small tables -------------------------------------------------------

    def cached(self, key: str, make: Callable[[], Any]) -> Any:
        key = f"{_DERIVED_VERSION}:{key}"
        value = self.cache.get(key)
        if value is None:
            value = make()
            self.cache.set(key, value)
        return value

    def run_row(self, run_id: str, file: str | None = None) -> RunRow:
        """A run's row in the run list, under `file` (default: its file's name; the cached row is shared by every
        browser, the name each gives it is not)."""
        raw = self.cached(f"row:{run_id}", lambda: run_row(self.trace(run_id), run_id, self.path(run_id).name).to_json())
        if not file:
            return RunRow(**raw)
        return RunRow(**{**raw, "file": file, **({"model": file_model(file)} if raw["model_from_file"] else {})})

    def report(self, run_id: str, region_id: int) -> dict[str, Any]:
        """`portscope report --json` data of one region (cached by run id and region id)."""
        return self.cached(f"report:{run_id}:{int(region_id)}", lambda: region_report_data(summarize(self.trace(run_id), int(region_id))))

    # uploads -------------------------------------------------------------------

    def new_upload_path(self, name: str = "") -> Path:
        """A fresh temporary file for an upload, keeping the name's suffixes (.json.gz) for format detection."""
        suffix = "".join(s for s in Path(name).suffixes[-2:] if re.fullmatch(r"\.[A-Za-z0-9]{1,8}", s))
        return self.incoming / f"{os.getpid()}-{uuid.uuid4().hex}.part{suffix}"

    def discard_partial_uploads(self, *, stale_s: float = 3600.0) -> list[Path]:
        """Delete what a killed server left behind: uploads whose worker is gone, and stale temporary files.

        An upload in `incoming/` is named `<worker pid>-<uuid>.part…`: it is partial for good once that
        process is dead (the store is shared by workers, so a live worker's upload is left alone). Temporary
        traces and timeline folders (`runs/.*.partial`, `derived/*/.lanes-*`) carry no pid: they go when
        older than `stale_s`. Returns what was deleted.
        """
        now = time.time()
        gone: list[Path] = []
        candidates = [(p, _writer_dead(p.name) or now - p.lstat().st_mtime > stale_s) for p in self.incoming.iterdir()]
        candidates += [(p, now - p.lstat().st_mtime > stale_s) for p in self.runs_dir.glob(".*.partial")]
        candidates += [(p, now - p.lstat().st_mtime > stale_s) for p in self.derived.glob("*/.lanes-*")]
        for path, discard in candidates:
            if not discard:
                continue
            try:
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
                gone.append(path)
            except FileNotFoundError:
                pass  # another worker starting at the same time got it first
        return gone

    def add_upload(self, tmp: Path, name: str) -> str:
        """Validate (or convert) an uploaded file and keep it under its content hash; return the run id.

        Raises TraceFormatError naming `name` (the user's file name), not the temporary path.
        """
        with tmp.open("rb") as f:
            native = f.read(4) == _ZIP_MAGIC
        try:
            trace = self._read(tmp, name)
        except TraceFormatError as exc:
            raise exc.with_path(name) from None
        run_id = trace.content_hash()
        dest = self.runs_dir / f"{run_id}.arrow"
        if not dest.exists():
            progress.current().stage(progress.Stage.WRITING)
            if native:
                os.replace(tmp, dest)  # already a valid portscope trace: keep the bytes as they are
            else:
                write_trace(trace, dest)
            run_ids.remember(run_ids.file_key(dest), run_id)  # validated (or written) here: not read through again
        return run_id
