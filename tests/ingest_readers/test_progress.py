"""Conversion progress: what a listener hears while a trace streams, and the terminal line of `portscope convert`."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest import progress
from portscope.ingest.progress import Snapshot, Stage
from portscope.ingest.readers import read_kineto

from .conftest import FIXTURES

ALEXNET = FIXTURES / "kineto" / "cuda_alexnet_small.json.gz"  # 24,808 bytes gzipped, 1,408 events


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_listener_hears_every_byte_and_event() -> None:
    heard = progress.ProgressState()
    with progress.reporting(heard):
        read_kineto(ALEXNET)
    got = heard.snapshot()
    assert (got.done_bytes, got.total_bytes) == (24_808, 24_808)
    assert got.events == 1_408  # `zcat | grep -c '"ph"'`: one "ph" per event
    assert got.stage is Stage.LINKING
    assert progress.current() is not heard  # the listener ends with the block


def test_snapshot_line_has_bytes_events_rate_and_time_left() -> None:
    snap = Snapshot(done_bytes=500_000_000, total_bytes=2_000_000_000, events=1_234_567, stage=Stage.READING, seconds=10.0)
    assert snap.bytes_per_s == 50_000_000 and snap.eta_s == 30.0
    line = snap.line()
    assert "25%" in line and "1,234,567 events" in line and "/s" in line and "about 30 s left" in line
    assert Snapshot(10, 10, 5, Stage.LINKING, 3.0).eta_s is None


def test_terminal_line_is_redrawn_and_cleared() -> None:
    tty = _Tty()
    shown = progress.for_terminal(tty)
    assert shown is not None
    shown.interval_s = 0.0
    shown.file_read(50, 100)
    shown.events_read(7)
    assert tty.getvalue().count("\r") == 2 and "(50%)" in tty.getvalue() and "7 events" in tty.getvalue()
    shown.close()
    assert tty.getvalue().endswith("\r")
    assert progress.for_terminal(io.StringIO()) is None  # not a terminal: nothing shown


def test_convert_cli_says_nothing_about_progress_off_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", str(ALEXNET), "-o", str(tmp_path / "a.arrow")]) == 0
    err = capsys.readouterr().err
    assert "reading:" not in err and "\r" not in err


@pytest.mark.parametrize("chunk", [4096, 65536])
def test_small_chunks_keep_every_event_and_the_keys_after_them(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Chunks far smaller than the file: cuts land inside args, names and numbers; the events and the keys
    written before and after them (schemaVersion first, traceName last) are those of one whole parse."""
    from portscope.ingest.readers import chrome_stream
    from portscope.ingest.readers.chrome_json import ChromeDocument
    from portscope.ingest.readers.kineto import collect
    from portscope.ingest.readers.kineto_stream import collect_file
    from portscope.ingest.readers.source import read_bytes

    whole = collect(ALEXNET, ChromeDocument(ALEXNET, read_bytes(ALEXNET)))
    monkeypatch.setattr(chrome_stream, "CHUNK_BYTES", chunk)
    streamed, _ = collect_file(ALEXNET)
    assert streamed.metadata["traceName"] == "benchmark_result_2869224_1695835535_trace.json"
    assert streamed.metadata["schemaVersion"] == 1 and streamed.metadata == whole.metadata
    assert streamed.events == 1_408 and len(streamed.ops) == len(whole.ops) > 100
    assert streamed.ops == whole.ops and streamed.device == whole.device and streamed.runtime == whole.runtime


class _Heard(progress.Progress):
    def __init__(self) -> None:
        self.read: list[tuple[int, int]] = []

    def file_read(self, done_bytes: int, total_bytes: int) -> None:
        self.read.append((done_bytes, total_bytes))


def test_pieces_read_ahead_are_reported_when_handed_out(tmp_path: Path) -> None:
    """A file of 25 bytes read 10 at a time: the next piece is read by a thread ahead of the consumer, but the bytes
    are said read as each piece is handed out, and a consumer that stops early leaves no reading thread behind."""
    import threading

    from portscope.ingest.readers.chrome_stream import file_chunks

    path = tmp_path / "t.json"
    path.write_bytes(b"0123456789abcdefghijKLMNO")
    heard = _Heard()
    with progress.reporting(heard):
        assert list(file_chunks(path, size=10)) == [b"0123456789", b"abcdefghij", b"KLMNO"]
        assert heard.read == [(10, 25), (20, 25), (25, 25)]
        chunks = file_chunks(path, size=10)
        assert next(chunks) == b"0123456789"
        chunks.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("portscope-read")]
