"""A refused upload's message: a file of no format portscope knows reads as one line, the formats tried folded away
(they are not problems of the file); every other error as the command line words it."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
from dash import html

from portscope.app.components import problem
from portscope.app.shell import apply_upload_results, render_messages
from portscope.app.upload_errors import upload_error
from portscope.app.upload_jobs import convert_upload
from portscope.ingest.convert import FORMATS, detect
from portscope.ingest.errors import TraceFormatError, UnrecognisedFormatError

UPLOAD = {"X-Portscope-Upload": "1"}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
GZIP_TEXT = gzip.compress(b"just some words, not JSON\n" * 50)
TRIED = [f"{f.name}: {f.looks_like}" for f in FORMATS.values()]


def refused(tmp_path: Path, name: str, content: bytes) -> TraceFormatError:
    """What detect() raises for the file, named as the upload names it (the upload's conversion renames it so)."""
    (tmp_path / name).write_bytes(content)
    with pytest.raises(TraceFormatError) as caught:
        detect(tmp_path / name)
    return caught.value.with_path(name)


@pytest.mark.parametrize(("name", "content", "what"), [("picture.png", PNG, "content"),
                                                       ("notes.json.gz", GZIP_TEXT, "gzip-compressed content")])
def test_an_unrecognised_file_is_one_line_with_the_formats_tried_after_it(tmp_path: Path, name: str, content: bytes, what: str) -> None:
    exc = refused(tmp_path, name, content)
    assert str(exc).startswith(f"{name}: not a trace portscope reads (unrecognised {what}); formats tried:\n  - ")
    assert "problems" not in str(exc)  # the command line's message: one problem, the 14 formats listed under it
    message = upload_error(exc)
    first, _, details = message.partition("\n\n")
    assert first == f"{name}: not a trace portscope reads (unrecognised {what})"
    assert details.splitlines() == ["formats tried:", *(f"  - {t}" for t in TRIED)] and len(TRIED) == 14
    assert "problems" not in message


def test_a_real_unrecognised_file_reads_as_written_here(tmp_path: Path) -> None:
    exc = refused(tmp_path, "picture.png", PNG)
    assert isinstance(exc, UnrecognisedFormatError) and exc.path == "picture.png"
    lines = upload_error(exc).splitlines()
    assert lines[:5] == ["picture.png: not a trace portscope reads (unrecognised content)",
                         "",
                         "formats tried:",
                         "  - portscope: a ZIP of Arrow tables with manifest.json",
                         "  - kineto: JSON with a 'traceEvents' list (torch.profiler export_chrome_trace, .json or .json.gz)"]
    assert lines[-1] == ("  - chrome: any other Chrome/Perfetto trace JSON (object with 'traceEvents' or a bare array of events "
                         "with 'ph'): generic lanes")  # fmt: skip
    assert len(lines) == 3 + 14


def test_other_errors_keep_their_own_message(tmp_path: Path) -> None:
    for exc in (TraceFormatError("a.json", ["events 3 and 4 overlap", "no region"]), refused(tmp_path, "empty.json", b"")):
        assert upload_error(exc) == str(exc)


def test_a_plain_error_worded_like_detect_is_not_taken_for_it() -> None:
    """The error's class says what it is, not its wording: a reader's own problem that happens to read alike stays
    a list of problems."""
    exc = TraceFormatError("a.json", ["unrecognised content; tried these formats:", "kineto: JSON"])
    assert upload_error(exc) == "a.json: 2 problems:\n  - unrecognised content; tried these formats:\n  - kineto: JSON"


def test_the_upload_job_keeps_the_error_and_names_the_users_file(tmp_path: Path) -> None:
    """The job's process, run here: the temporary file's error, renamed to the user's file name, keeps its class."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "upload-1234.tmp").write_bytes(GZIP_TEXT)
    convert_upload(tmp_path / "runs", tmp_path / "upload-1234.tmp", "notes.json.gz", tmp_path / "status.json")
    status = json.loads((tmp_path / "status.json").read_text(encoding="utf-8"))
    assert status["ok"] is False and status["stage"] == "failed"
    assert status["error"].startswith("notes.json.gz: not a trace portscope reads (unrecognised gzip-compressed content)\n\n"
                                      "formats tried:\n  - portscope: a ZIP of Arrow tables with manifest.json\n")
    assert "upload-1234" not in status["error"] and not (tmp_path / "upload-1234.tmp").exists()


def test_the_message_box_folds_the_formats_tried(tmp_path: Path) -> None:
    box = problem(upload_error(refused(tmp_path, "picture.png", PNG)))
    line, details = box.children
    assert line.children == "picture.png: not a trace portscope reads (unrecognised content)"
    assert isinstance(details, html.Details) and not getattr(details, "open", False)  # folded until clicked
    summary, listed = details.children
    assert summary.children == "formats tried" and listed.children.splitlines() == [f"  - {t}" for t in TRIED]


def test_a_message_without_details_is_one_box_as_before() -> None:
    for message in ("x.json: 2 problems:\n  - a\n  - b", 'Parser Error: syntax error at or near "FORM"\n\nLINE 1: SELECT * FORM ops\n                  ^'):
        box = problem(message)
        assert isinstance(box.children, html.Pre) and box.children.children == message  # every problem shown


def test_the_upload_answer_and_the_page_say_it_in_one_line(make_app) -> None:
    client = make_app(trace_paths=()).server.test_client()
    answer = client.post("/api/upload?name=picture.png", data=PNG, headers=UPLOAD)
    assert answer.status_code == 422 and answer.json["ok"] is False
    assert answer.json["error"].startswith("picture.png: not a trace portscope reads (unrecognised content)\n\nformats tried:\n")
    _, messages = apply_upload_results({"results": [answer.json]}, [])
    (box,) = render_messages(messages)
    assert box.children[0].children == "picture.png: not a trace portscope reads (unrecognised content)"
    assert box.children[1].children[0].children == "formats tried"


def test_a_background_conversion_words_it_the_same(make_app) -> None:
    client = make_app(trace_paths=(), background_convert_bytes=10).server.test_client()
    answer = client.post("/api/upload?name=notes.json.gz", data=GZIP_TEXT, headers=UPLOAD)
    assert answer.status_code == 202
    deadline = time.monotonic() + 60
    while "ok" not in (status := client.get(f"/api/upload/{answer.json['job']}").json) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status["ok"] is False
    assert status["error"].startswith("notes.json.gz: not a trace portscope reads (unrecognised gzip-compressed content)\n\n"
                                      "formats tried:\n")
