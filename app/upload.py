"""The streaming upload route: the request body goes to disk in chunks, hashed as it streams.

POST /api/upload?name=<file name> with the raw file as the body (application/octet-stream)
and the header `X-Portscope-Upload: 1` (a custom header, so other sites cannot post here
without a CORS preflight). One file per request; the answer is JSON:
{"file", "ok", "run_id", "bytes", "sha256"} or {"file", "ok": false, "error"} with
413 (too large), 400 (empty or malformed request), 422 (not a valid trace) or 500.

A file of another format larger than `background_bytes` is converted in the background: the
answer is 202 {"file", "ok", "job", "bytes", "sha256"} at once, and GET /api/upload/<job> says
how far the conversion is ({"stage", "done_bytes", "total_bytes", "events", "eta_s", "text"}) and,
when it is done, {"ok": true, "run_id"} or {"ok": false, "error"}.

A multi-rank run (`upload_ranks`): a .zip of per-rank PyTorch-profiler traces posted to /api/upload, or several
rank files in one drop posted together to POST /api/upload/ranks (multipart/form-data, each file a `file` part;
the whole request within the upload limit), is converted into one run; the answer is as above.
"""

from __future__ import annotations

import hashlib
import logging
import unicodedata
from pathlib import Path
from typing import Any

from flask import Flask, jsonify, request
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge

from portscope.ingest.errors import TraceFormatError
from portscope.ingest.summary import format_bytes

from .store import TraceStore
from .upload_errors import upload_error
from .upload_jobs import UploadJobs
from .upload_ranks import (
    MAX_RANK_FILES,
    check_rank_name,
    convert_rank_folder,
    is_rank_zip,
    remove_folder,
    unpack_rank_zip,
)

log = logging.getLogger(__name__)
CHUNK = 1 << 20
UPLOAD_HEADER = "X-Portscope-Upload"


def display_name(raw: str | None) -> str:
    """A file name fit to show as text: no path, no control characters, at most 200 characters."""
    name = (raw or "upload").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c)[0] != "C")
    return name[:200] or "upload"


def too_large_message(name: str, size: int | None, limit: int) -> str:
    what = f"is {format_bytes(size)}" if size is not None else "is larger than the limit"
    return f"{name} {what}; this viewer accepts files up to {format_bytes(limit)} (start it with --max-upload-mb to change that)"


def _answer(status: int, **body: Any) -> tuple[Any, int]:
    return jsonify(body), status


def register_upload_route(server: Flask, store: TraceStore, max_bytes: int, *, background_bytes: int = 32 * 1024**2) -> None:
    """Add POST /api/upload and GET /api/upload/<job> to the Flask server."""
    jobs = UploadJobs(store)

    def job_status(job: str) -> tuple[Any, int]:
        status = jobs.status(job)
        return (jsonify(status), 200) if status is not None else _answer(404, ok=False, error="no such conversion")

    def upload() -> tuple[Any, int]:
        name = display_name(request.args.get("name"))
        if request.headers.get(UPLOAD_HEADER) != "1":
            return _answer(400, file=name, ok=False, error=f"{name}: upload requests need the {UPLOAD_HEADER} header")
        length = request.content_length
        if length is not None and length > max_bytes:
            return _answer(413, file=name, ok=False, error=too_large_message(name, length, max_bytes))
        tmp = store.new_upload_path(name)
        digest = hashlib.sha256()
        size = 0
        try:
            try:
                with tmp.open("wb") as out:
                    while True:
                        chunk = request.stream.read(CHUNK)
                        if not chunk:
                            break
                        size += len(chunk)
                        if size > max_bytes:
                            return _answer(413, file=name, ok=False, error=too_large_message(name, None, max_bytes))
                        digest.update(chunk)
                        out.write(chunk)
            except RequestEntityTooLarge:
                return _answer(413, file=name, ok=False, error=too_large_message(name, None, max_bytes))
            except ClientDisconnected:
                return _answer(400, file=name, ok=False, error=f"{name}: the upload was interrupted after {format_bytes(size)}")
            if size == 0:
                return _answer(400, file=name, ok=False, error=f"{name}: the file is empty (0 bytes)")
            if is_rank_zip(tmp):  # a zip of rank traces (a portscope trace is a zip of .arrow members)
                folder = store.new_upload_path("")
                try:
                    unpack_rank_zip(tmp, folder, name, max_bytes)
                except TraceFormatError as exc:
                    remove_folder(folder)
                    return _answer(422, file=name, ok=False, error=str(exc))
                return ranks(folder, name, size, digest.hexdigest())
            if size > background_bytes and not _native(tmp):
                job = jobs.start(tmp, name)  # the job owns the file now
                tmp = None
                return _answer(202, file=name, ok=True, job=job, bytes=size, sha256=digest.hexdigest())
            try:
                run_id = store.add_upload(tmp, name)
            except TraceFormatError as exc:
                return _answer(422, file=name, ok=False, error=upload_error(exc))
            except Exception as exc:  # a converter bug must not take the server down
                log.exception("upload of %s failed", name)
                return _answer(500, file=name, ok=False, error=f"{name}: could not be loaded ({type(exc).__name__}: {exc})")
            return _answer(200, file=name, ok=True, run_id=run_id, bytes=size, sha256=digest.hexdigest())
        finally:
            if tmp is not None:
                tmp.unlink(missing_ok=True)

    def ranks(folder: Path, name: str, size: int, sha256: str | None) -> tuple[Any, int]:
        """Convert a folder of rank files (which this call then owns) into one run: in the background when large."""
        if size > background_bytes:
            job = jobs.start(folder, name)  # the job owns the folder now
            return _answer(202, file=name, ok=True, job=job, bytes=size, sha256=sha256)
        try:
            run_id = convert_rank_folder(store.runs_dir, folder, name, jobs=1)
        except TraceFormatError as exc:
            return _answer(422, file=name, ok=False, error=str(exc))
        except Exception as exc:  # a converter bug must not take the server down
            log.exception("upload of %s failed", name)
            return _answer(500, file=name, ok=False, error=f"{name}: could not be loaded ({type(exc).__name__}: {exc})")
        finally:
            remove_folder(folder)
        return _answer(200, file=name, ok=True, run_id=run_id, bytes=size, sha256=sha256)

    def upload_ranks() -> tuple[Any, int]:
        """Several rank files in one multipart request: one multi-rank run."""
        if request.headers.get(UPLOAD_HEADER) != "1":
            return _answer(400, file="ranks", ok=False, error=f"upload requests need the {UPLOAD_HEADER} header")
        length = request.content_length
        if length is not None and length > max_bytes:
            return _answer(413, file="ranks", ok=False, error=too_large_message("these rank files", length, max_bytes))
        try:
            parts = request.files.getlist("file")
        except RequestEntityTooLarge:
            return _answer(413, file="ranks", ok=False, error=too_large_message("these rank files", None, max_bytes))
        except ClientDisconnected:
            return _answer(400, file="ranks", ok=False, error="the upload was interrupted")
        name = f"{len(parts)} rank files"
        problems = [why for part in parts if (why := check_rank_name(part.filename or ""))]
        if not parts:
            problems.append("no files (send each rank's trace as a `file` part)")
        if len(parts) > MAX_RANK_FILES:
            problems.append(f"{len(parts)} files; at most {MAX_RANK_FILES} rank files are read")
        if len({(p.filename or "").lower() for p in parts}) != len(parts):
            problems.append("two files have the same name")
        if problems:
            return _answer(422, file=name, ok=False, error=str(TraceFormatError(name, problems)))
        folder = store.new_upload_path("")
        folder.mkdir()
        size = 0
        try:
            for part in parts:
                with (folder / str(part.filename)).open("wb") as out:
                    while chunk := part.stream.read(CHUNK):
                        size += len(chunk)
                        out.write(chunk)
        except BaseException:
            remove_folder(folder)
            raise
        return ranks(folder, name, size, None)

    server.add_url_rule("/api/upload", "portscope_upload", upload, methods=["POST"])
    server.add_url_rule("/api/upload/ranks", "portscope_upload_ranks", upload_ranks, methods=["POST"])
    server.add_url_rule("/api/upload/<job>", "portscope_upload_job", job_status, methods=["GET"])


def _native(path: Path) -> bool:
    """Whether a file is a portscope trace already (a ZIP container): nothing to convert."""
    with path.open("rb") as f:
        return f.read(4) == b"PK\x03\x04"
