"""Uploads converted in the background: a large trace of another format is converted in a process of its
own (``python -m portscope.app.upload_jobs``) while the server goes on answering, with neither the GIL nor
the converter's memory shared; the page polls GET /api/upload/<job> for its progress and the run id.

The status of a job is a small JSON file in ``<store>/jobs/`` (written atomically, at most 4 times a
second by the converting process), so that any worker sharing the store answers the poll, whichever
received the upload. A thread of the server waits for the process and says so when it died.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from portscope.ingest import progress, run_ids
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.trace import write_run

from .config import private_dir
from .store import TraceStore

log = logging.getLogger(__name__)
JOB_ID = re.compile(r"^[0-9a-f]{32}$")
_INTERVAL_S = 0.25


class JobProgress(progress.ProgressState):
    """Progress of one conversion, mirrored to its status file."""

    def __init__(self, status: Path, name: str) -> None:
        super().__init__()
        self.status = status
        self.name = name
        self._written = 0.0
        self._save_lock = threading.Lock()  # the reading thread and the heartbeat both save (not `_lock`: the base class has one)

    def file_read(self, done_bytes: int, total_bytes: int) -> None:
        super().file_read(done_bytes, total_bytes)
        self.save()

    def events_read(self, count: int) -> None:
        super().events_read(count)
        self.save()

    def stage(self, stage: progress.Stage) -> None:
        super().stage(stage)
        self.save(force=True)

    def save(self, *, force: bool = False, **extra: Any) -> None:
        """Write the status file (at most every 0.25 s unless forced)."""
        with self._save_lock:
            self._save(force, extra)

    def _save(self, force: bool, extra: dict[str, Any]) -> None:
        now = time.monotonic()
        if not force and now - self._written < _INTERVAL_S:
            return
        self._written = now
        snap = self.snapshot()
        body = {"file": self.name, "stage": snap.stage.value, "done_bytes": snap.done_bytes, "total_bytes": snap.total_bytes,
                "events": snap.events, "fraction": round(snap.fraction, 4), "eta_s": snap.eta_s,
                "text": f"converting {self.name}: {snap.line()}", **extra}  # fmt: skip
        tmp = self.status.with_name(f".{self.status.name}.{uuid.uuid4().hex}")
        tmp.write_text(json.dumps(body), encoding="utf-8")
        os.replace(tmp, self.status)


NICENESS = 10  # added to a background conversion's nice value: the server's requests are served first


class UploadJobs:
    """Background conversions of uploaded files into one store."""

    def __init__(self, store: TraceStore) -> None:
        self.store = store
        self.folder = private_dir(store.root / "jobs")

    def start(self, tmp: Path, name: str) -> str:
        """Convert `tmp` (which the job then owns and deletes; a folder: rank files, one multi-rank run) in a process
        of its own; return the job id."""
        job = uuid.uuid4().hex
        status = self.folder / f"{job}.json"
        JobProgress(status, name).save(force=True)
        argv = [sys.executable, "-m", "portscope.app.upload_jobs", str(self.store.runs_dir), str(tmp), name, str(status)]
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        threading.Thread(target=self._wait, args=(child, tmp, name, status), name=f"portscope-convert-{job[:8]}",
                         daemon=True).start()  # fmt: skip
        return job

    def _wait(self, child: subprocess.Popen, tmp: Path, name: str, status: Path) -> None:
        _, err = child.communicate()
        _discard(tmp)
        last = self.status(status.stem) or {}
        if "ok" not in last:  # killed (out of memory?) or crashed before it could say so
            log.error("conversion of %s ended with exit code %s: %s", name, child.returncode, err.decode(errors="replace")[-2000:])
            stopped = JobProgress(status, name)
            stopped.stage(progress.Stage.FAILED)
            stopped.save(force=True, ok=False, error=f"{name}: the conversion stopped (exit code {child.returncode})")

    def status(self, job: str) -> dict[str, Any] | None:
        """The latest status of a job (None: no such job)."""
        if not JOB_ID.match(job):
            return None
        try:
            return json.loads((self.folder / f"{job}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None


@contextlib.contextmanager
def heartbeat(listener: JobProgress, every_s: float = 1.0) -> Iterator[None]:
    """Save the status every `every_s` while the body runs, so stages that report nothing (writing) still show their
    time going on; stopped and joined before the body's exit, so it never overwrites a final status."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            listener.save()

    thread = threading.Thread(target=beat, name="portscope-job-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _discard(tmp: Path) -> None:
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.unlink(missing_ok=True)


def convert_upload(runs_dir: Path, tmp: Path, name: str, status: Path) -> None:
    """Convert an uploaded file (or a folder of rank files: one multi-rank run) into `<runs_dir>/<run id>.arrow`,
    reporting to its status file (the job's process)."""
    listener = JobProgress(status, name)
    try:
        with heartbeat(listener), progress.reporting(listener):
            if tmp.is_dir():
                from .upload_ranks import convert_rank_folder

                run_id = convert_rank_folder(runs_dir, tmp, name)
                listener.stage(progress.Stage.DONE)
                listener.save(force=True, ok=True, run_id=run_id, text=f"{name}: converted")
                return
            from portscope.ingest.convert import load_any

            try:
                trace = load_any(tmp, sliced=True, name=name)  # a Kineto CPU trace: its big tables made as written
            except TraceFormatError as exc:
                raise exc.with_path(name) from None  # the user's file name, not the temporary path
            listener.stage(progress.Stage.WRITING)
            written = runs_dir / f".{os.getpid()}-{uuid.uuid4().hex}.partial"  # named by its id once written
            try:  # hashed as it is written: a sliced table is made once, not once for the id and again to write
                run_id = write_run(trace, written, remember=False)
                if not (runs_dir / f"{run_id}.arrow").exists():
                    os.replace(written, runs_dir / f"{run_id}.arrow")
                    run_ids.remember(run_ids.file_key(runs_dir / f"{run_id}.arrow"), run_id)  # the viewer maps it as is
            finally:
                written.unlink(missing_ok=True)
        listener.stage(progress.Stage.DONE)
        listener.save(force=True, ok=True, run_id=run_id, text=f"{name}: converted")
    except TraceFormatError as exc:
        # the page's wording; imported only when a conversion fails (it imports dash)
        from .upload_errors import upload_error

        listener.stage(progress.Stage.FAILED)
        listener.save(force=True, ok=False, error=upload_error(exc))
    except Exception as exc:  # a converter bug: said on the page, not a traceback
        log.exception("background conversion of %s failed", name)
        listener.stage(progress.Stage.FAILED)
        listener.save(force=True, ok=False, error=f"{name}: could not be loaded ({type(exc).__name__}: {exc})")
    finally:
        _discard(tmp)


def main(argv: list[str]) -> None:
    """The job's process: `RUNS_DIR UPLOADED_FILE NAME STATUS_FILE`, at a lower priority than the server."""
    from portscope.ingest.convert import big_npu_lanes
    from portscope.ingest.readers import map_large_blocks

    map_large_blocks(argv[1], npu_lanes=big_npu_lanes(argv[1]))  # as `portscope convert`: freed batches go back (glibc)
    os.nice(NICENESS)  # the viewer's own requests come first: a multi-GB conversion takes idle CPU, not theirs
    convert_upload(Path(argv[0]), Path(argv[1]), argv[2], Path(argv[3]))


__all__ = ["NICENESS", "JobProgress", "UploadJobs", "convert_upload", "heartbeat", "main"]

if __name__ == "__main__":
    main(sys.argv[1:])
