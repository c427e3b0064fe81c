"""DiskColumn: values appended, partly written to a temporary file, read back by range, block and gather."""

from __future__ import annotations

import numpy as np
import pytest

from portscope.ingest.readers._spill import DiskColumn


def _column(values: list[int], hold: int) -> DiskColumn:
    col = DiskColumn("q", hold=hold)
    for v in values:
        col.held.append(v)
        col.settle()
    return col


def test_values_come_back_from_file_and_memory() -> None:
    col = _column([10, 11, 12, 13, 14, 15, 16], hold=3)
    assert len(col) == 7
    assert col.on_disk == 6  # two settles of three; 16 is held
    assert col.read(0, 7).tolist() == [10, 11, 12, 13, 14, 15, 16]
    assert col.read(5, 7).tolist() == [15, 16]  # across the file's end and the held part
    assert col.read(4, 100).tolist() == [14, 15, 16]
    assert col.read(9, 12).tolist() == []


def test_blocks_in_order() -> None:
    col = _column([1, 2, 3, 4, 5], hold=2)
    assert [(lo, v.tolist()) for lo, v in col.blocks(2)] == [(0, [1, 2]), (2, [3, 4]), (4, [5])]


def test_take_any_order_with_repeats_and_small_windows() -> None:
    col = _column([100, 101, 102, 103, 104, 105, 106, 107], hold=3)
    assert col.take(np.array([7, 0, 3, 3, 6]), window=2).tolist() == [107, 100, 103, 103, 106]
    assert col.take(np.array([1, 2, 5]), window=2).tolist() == [101, 102, 105]
    assert col.take(np.array([], dtype=np.int64)).tolist() == []
    with pytest.raises(IndexError):
        col.take(np.array([8]))


def test_extend_past_hold_writes_through() -> None:
    col = DiskColumn("i", hold=4)
    col.extend(np.array([1, 2], dtype=np.int64))
    assert col.on_disk == 0
    col.extend(np.array([3, 4, 5], dtype=np.int64))
    assert col.on_disk == 5
    col.held.append(6)
    assert col.read(0, 6).tolist() == [1, 2, 3, 4, 5, 6]
    assert col.dtype == np.int32
    col.close()
    assert len(col) == 0
