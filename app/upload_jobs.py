"""Uploads converted in the background: a large trace of another format is converted in a thread while the
server goes on answering; the page polls GET /api/upload/<job> for its progress and the run id.

The status of a job is a small JSON file in ``<store>/jobs/`` (written atomically, at most 4 times a
second), so that any worker sharing the store answers the poll, whichever received the upload.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from portscope.ingest import progress
from portscope.ingest.errors import TraceFormatError

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


class UploadJobs:
    """Background conversions of uploaded files into one store."""

    def __init__(self, store: TraceStore) -> None:
        self.store = store
        self.folder = private_dir(store.root / "jobs")

    def start(self, tmp: Path, name: str) -> str:
        """Convert `tmp` (which the job then owns and deletes) in a thread; return the job id."""
        job = uuid.uuid4().hex
        listener = JobProgress(self.folder / f"{job}.json", name)
        listener.save(force=True)
        threading.Thread(target=self._run, args=(tmp, name, listener), name=f"portscope-convert-{job[:8]}", daemon=True).start()
        return job

    def _run(self, tmp: Path, name: str, listener: JobProgress) -> None:
        try:
            with progress.reporting(listener):
                run_id = self.store.add_upload(tmp, name)
            listener.stage(progress.Stage.DONE)
            listener.save(force=True, ok=True, run_id=run_id, text=f"{name}: converted")
        except TraceFormatError as exc:
            listener.save(force=True, ok=False, stage="failed", error=str(exc))
        except Exception as exc:  # a converter bug must not take the server down
            log.exception("background conversion of %s failed", name)
            listener.save(force=True, ok=False, stage="failed", error=f"{name}: could not be loaded ({type(exc).__name__}: {exc})")
        finally:
            tmp.unlink(missing_ok=True)

    def status(self, job: str) -> dict[str, Any] | None:
        """The latest status of a job (None: no such job)."""
        if not JOB_ID.match(job):
            return None
        try:
            return json.loads((self.folder / f"{job}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None


__all__ = ["JobProgress", "UploadJobs"]
