"""The fuzzers' sliced check (tests/hardening/_sliced.py): the seeds convert sliced with tiny knobs to the whole
conversion's tables, and a sliced conversion that loses a row, or accepts what the whole one refuses, is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from portscope.ingest import assemble
from portscope.ingest.readers import ascend_csv

from . import _sliced, fuzz_targets
from .fuzz_targets import READERS, feed, seed

SLICED = sorted(name for name, r in READERS.items() if r.sliced is not None)


def test_the_readers_that_slice_are_checked() -> None:
    assert SLICED == ["ascend-kernels", "ascend-trace", "detect", "kineto", "npu-kineto"]


@pytest.mark.parametrize("reader", SLICED)
def test_seed_converts_sliced_to_the_same_tables(reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = []
    check = _sliced.check_sliced
    monkeypatch.setattr(fuzz_targets, "check_sliced", lambda *a: outcomes.append(check(*a)) or outcomes[-1])
    assert feed(reader, seed(reader)) == "ok"
    assert outcomes == ["ok"]  # converted sliced, written, read back: the whole conversion's tables


def test_tiny_knobs_are_set_inside_and_restored() -> None:
    with _sliced.tiny_knobs():
        assert (assemble.SLICE_ROWS, ascend_csv.BLOCK_BYTES) == (3, 1)
    assert (assemble.SLICE_ROWS, ascend_csv.BLOCK_BYTES) == (1 << 18, 4 << 20)


def test_a_knob_that_is_gone_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sliced, "TINY_KNOBS", (*_sliced.TINY_KNOBS[:2], ("portscope.ingest.readers.ascend_csv", "GONE_ROWS", 3)))
    with pytest.raises(AttributeError, match="ascend_csv has no knob GONE_ROWS"), _sliced.tiny_knobs():
        pass
    assert assemble.SLICE_ROWS == 1 << 18  # the knobs set before it are restored


def test_a_lost_row_is_a_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "k.csv"
    path.write_bytes(seed("ascend-kernels"))
    read = READERS["ascend-kernels"]

    def lossy(p: Path) -> object:
        trace = read.sliced(p)  # type: ignore[misc]
        trace.gather()  # type: ignore[attr-defined]
        trace.tables["engine_slices"] = trace.tables["engine_slices"].slice(1)  # type: ignore[attr-defined]
        return trace

    with pytest.raises(_sliced.SlicedMismatch, match=r"tables \['engine_slices'\] differ"):
        _sliced.check_sliced(lossy, path, read.read(path), tmp_path)


def test_sliced_accepting_what_whole_refuses_is_a_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "k.csv"
    path.write_bytes(seed("ascend-kernels"))
    with pytest.raises(_sliced.SlicedMismatch, match="the whole conversion raised TraceFormatError"):
        _sliced.check_sliced(READERS["ascend-kernels"].sliced, path, None, tmp_path)  # type: ignore[arg-type]


def test_a_sliced_error_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "k.csv"
    path.write_bytes(b"Name,Type,Accelerator Core,Start Time(us),Duration(us)\n")  # a header, no rows
    assert _sliced.check_sliced(READERS["ascend-kernels"].sliced, path, None, tmp_path) == "error"  # type: ignore[arg-type]
