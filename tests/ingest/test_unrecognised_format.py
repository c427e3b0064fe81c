"""A file of no format portscope reads raises an UnrecognisedFormatError: the content it looked like and the formats
tried are attributes (the viewer reads them), the message the command line prints is a TraceFormatError's as before."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from portscope.ingest.convert import FORMATS, detect
from portscope.ingest.errors import TraceFormatError, UnrecognisedFormatError

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def unrecognised(path: Path) -> UnrecognisedFormatError:
    with pytest.raises(UnrecognisedFormatError) as caught:
        detect(path)
    return caught.value


def test_the_error_carries_what_it_saw_and_the_formats_tried() -> None:
    exc = UnrecognisedFormatError("/tmp/up-1", looks_like="content", formats_tried=["kineto: JSON", "chrome: JSON too"])
    assert isinstance(exc, TraceFormatError) and isinstance(exc, ValueError)
    assert (exc.path, exc.looks_like, exc.formats_tried) == ("/tmp/up-1", "content", ("kineto: JSON", "chrome: JSON too"))
    assert exc.problems == ["unrecognised content; tried these formats:", "kineto: JSON", "chrome: JSON too"]
    assert str(exc) == ("/tmp/up-1: not a trace portscope reads (unrecognised content); formats tried:\n"
                        "  - kineto: JSON\n"
                        "  - chrome: JSON too")  # fmt: skip (one problem: the formats are not problems of the file)


def test_a_renamed_copy_keeps_the_class_and_names_the_other_path() -> None:
    exc = UnrecognisedFormatError(Path("/tmp/up-1"), looks_like="gzip-compressed content", formats_tried=["kineto: JSON"])
    renamed = exc.with_path("notes.json.gz")
    assert type(renamed) is UnrecognisedFormatError and renamed is not exc
    assert (renamed.path, renamed.looks_like, renamed.formats_tried) == ("notes.json.gz", "gzip-compressed content", ("kineto: JSON",))
    assert str(renamed) == ("notes.json.gz: not a trace portscope reads (unrecognised gzip-compressed content); formats "
                            "tried:\n  - kineto: JSON")  # fmt: skip
    assert renamed.args == (str(renamed),)
    assert exc.path == "/tmp/up-1" and str(exc).startswith("/tmp/up-1: not a trace")  # the original is untouched
    renamed.problems.append("more")
    assert len(exc.problems) == 2


def test_a_plain_trace_format_error_renames_too() -> None:
    renamed = TraceFormatError("/tmp/up-2", ["events 3 and 4 overlap", "no region"]).with_path("run.json")
    assert type(renamed) is TraceFormatError
    assert str(renamed) == "run.json: 2 problems:\n  - events 3 and 4 overlap\n  - no region"
    assert str(TraceFormatError("/tmp/up-2", "no such file").with_path("run.json")) == "run.json: no such file"


def test_detect_raises_it_for_content_it_does_not_know(tmp_path: Path) -> None:
    (tmp_path / "picture.png").write_bytes(PNG)
    exc = unrecognised(tmp_path / "picture.png")
    assert exc.path == str(tmp_path / "picture.png") and exc.looks_like == "content"
    assert exc.formats_tried[:2] == ("portscope: a ZIP of Arrow tables with manifest.json",
                                     "kineto: JSON with a 'traceEvents' list (torch.profiler export_chrome_trace, .json or .json.gz)")
    assert exc.formats_tried[-1] == ("chrome: any other Chrome/Perfetto trace JSON (object with 'traceEvents' or a bare array of "
                                     "events with 'ph'): generic lanes")  # fmt: skip
    assert len(exc.formats_tried) == len(FORMATS) == 14
    assert str(exc).startswith(f"{tmp_path / 'picture.png'}: not a trace portscope reads (unrecognised content); "
                               "formats tried:\n"  # the command line's wording
                               "  - portscope: a ZIP of Arrow tables with manifest.json\n"
                               "  - kineto: JSON with a 'traceEvents' list")  # fmt: skip


def test_detect_says_when_the_content_was_gzip_compressed(tmp_path: Path) -> None:
    (tmp_path / "notes.json.gz").write_bytes(gzip.compress(b"just some words, not JSON\n" * 50))
    exc = unrecognised(tmp_path / "notes.json.gz")
    assert exc.looks_like == "gzip-compressed content"
    assert exc.problems[0] == "unrecognised gzip-compressed content; tried these formats:"


@pytest.mark.parametrize(("name", "content"), [("empty.json", b""), ("snapshot.pickle", b"\x80\x04\x95")])
def test_other_refusals_stay_plain_trace_format_errors(tmp_path: Path, name: str, content: bytes) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(TraceFormatError) as caught:
        detect(tmp_path / name)
    assert type(caught.value) is TraceFormatError
