"""A corpus of broken inputs: each gives one clear TraceFormatError; none crashes or hangs."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import pytest

from portscope.ingest import TraceFormatError
from portscope.ingest.convert import SizeCaps, detect, load_any

from .conftest import FIXTURES

BAD = FIXTURES / "bad_inputs"

# file -> a phrase the message must contain
EXPECTED = {
    "truncated.json": "not valid JSON",
    "truncated.json.gz": "gzip stream is truncated",
    "not_gzip_inside.json.gz": "not a valid gzip stream",
    "empty.json": "empty (0 bytes)",
    "wrong_types.json": "'ts' is str, expected a number",
    "missing_fields.json": "'name' is NoneType",
    "events_not_list.json": "'traceEvents' is a dict, expected a list",
    "no_trace_events.json": "formats tried",
    "json_scalar.json": "formats tried",
    "binary_junk.bin": "formats tried",
    "non_utf8_fallback.log": "not UTF-8",
    "torch_trace_no_records.log": "formats tried",
}


def test_corpus_is_complete() -> None:
    assert sorted(p.name for p in BAD.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_input_gives_a_clear_error(name: str) -> None:
    path = BAD / name
    started = time.monotonic()
    with pytest.raises(TraceFormatError) as info:
        load_any(path)
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert message.startswith(str(path)), message  # names the file
    assert EXPECTED[name] in message, message


def test_gzip_bomb_beyond_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(b'{"traceEvents": [')
        block = b" " * (1 << 20)
        for _ in range(64):  # 64 MB of spaces, ~64 KB compressed (ratio ~1000)
            f.write(block)
        f.write(b"]}")
    assert path.stat().st_size < 1 << 20
    assert detect(path) == "kineto"
    with pytest.raises(TraceFormatError, match="gzip bomb"):
        load_any(path)
    with pytest.raises(TraceFormatError, match="exceeds the cap of 1048576 bytes"):
        load_any(path, caps=SizeCaps(max_decompressed_bytes=1 << 20, max_gzip_ratio=10**6))


def test_input_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": []}' + " " * 2000)
    with pytest.raises(TraceFormatError, match="over the cap"):
        load_any(path, caps=SizeCaps(max_input_bytes=1000))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="no such file"):
        load_any(tmp_path / "nope.json")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.txt").write_text("hello\n")
    with pytest.raises(TraceFormatError, match="none of its 1 files is a TORCH_TRACE log"):
        load_any(tmp_path / "d")


def test_empty_events_and_non_profiler_json(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    path.write_text('{"traceEvents": []}')
    with pytest.raises(TraceFormatError, match="empty: nothing to convert"):
        load_any(path)
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "foo", "name": "a", "ts": 1, "dur": 1}]}')
    with pytest.raises(TraceFormatError, match="not a PyTorch profiler trace"):
        load_any(path, format="kineto")
    # detected, it opens as generic lanes (issue 16): one lane "pid None / tid None", one slice of 1 us
    trace = load_any(path)
    assert trace.run_info.converted_from == "chrome"
    assert trace["engine_slices"].select(["engine", "start", "dur"]).to_pylist() == [
        {"engine": "pid None / tid None", "start": 0, "dur": 1000}]


def test_broken_portscope_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.arrow"
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    with pytest.raises(TraceFormatError):
        load_any(path)


def test_malformed_events_are_all_listed(tmp_path: Path) -> None:
    events = ",".join(f'{{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "{i}", "dur": 1}}' for i in range(30))
    path = tmp_path / "m.json"
    path.write_text('{"traceEvents": [' + events + "]}")
    with pytest.raises(TraceFormatError) as info:
        load_any(path)
    assert "30 of 30 events are malformed (and 20 more)" in str(info.value)
    assert len(info.value.problems) == 11


@pytest.mark.parametrize(
    "event",
    [
        '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1e300, "dur": 1}',
        '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1,'
        ' "args": {"Input Dims": [[-5, 99999999999999]], "Input type": ["float"]}}',
        '{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH", "pid": 0, "tid": 7, "ts": 1, "dur": 1,'
        ' "args": {"bytes": 99999999999999999999999, "correlation": 99999999999999999999999}}',
    ],
)
def test_out_of_range_numbers(tmp_path: Path, event: str) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"traceEvents": [' + event + "]}")
    try:
        trace = load_any(path)
    except TraceFormatError as exc:
        assert "out of range" in str(exc)
    else:
        from portscope.ingest import write_trace

        write_trace(trace, tmp_path / "r.arrow")  # whatever was kept is a valid trace
