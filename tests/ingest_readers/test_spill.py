"""DiskColumn: values appended, partly written to a temporary file, read back by range, block and gather."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from portscope.ingest.spill import DiskColumn


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


def test_one_value_by_index_from_file_or_memory() -> None:
    col = _column([5, 6, 7, 8, 9], hold=2)  # 5..8 in the file, 9 held
    assert (col[0], col[3], col[4], col[-1], col[-5]) == (5, 8, 9, 9, 5)
    assert type(col[1]) is int
    assert list(col) == [5, 6, 7, 8, 9]  # iteration stops at the IndexError past the end
    with pytest.raises(IndexError):
        col[5]
    with pytest.raises(IndexError):
        col[-6]


def test_put_overwrites_in_file_windows_and_in_memory() -> None:
    col = _column([0, 1, 2, 3, 4, 5, 6, 7, 8], hold=4)  # 0..7 in the file, 8 held
    col.put(np.array([7, 2, 8, 2, 5]), np.array([70, 20, 80, 21, 50]), window=3)  # 2 twice: the last value stays
    assert col.read(0, 9).tolist() == [0, 1, 21, 3, 4, 50, 6, 70, 80]
    col.put(np.array([0, 1]), -1, window=3)  # one value for all
    assert col.read(0, 3).tolist() == [-1, -1, 21]
    col.held.append(9)  # the column still grows at its end after a put
    col.settle()
    assert col.read(6, 10).tolist() == [6, 70, 80, 9] and col.on_disk == 8
    col.put(np.zeros(0, dtype=np.int64), 5)  # nothing to do
    with pytest.raises(IndexError):
        col.put(np.array([10]), 1)


_MALLINFO = """
import ctypes, os, sys
from portscope.ingest import spill as _spill
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                               "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
"""
_MAPPED = _MALLINFO + """
asked = _spill.map_large_blocks() if sys.argv[1] == "1" else None
libc.free(libc.malloc(8 << 20))  # glibc's default then raises its threshold to 8 MB: smaller blocks come from the heap
before = libc.mallinfo2().hblks
block = libc.malloc(1 << 20)
print(asked, libc.mallinfo2().hblks - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="glibc only")
@pytest.mark.parametrize(("ask", "env", "expected"), [("1", {}, "True 1"), ("0", {}, "None 0"),
                                                      ("1", {"MALLOC_MMAP_THRESHOLD_": "33554432"}, "False 0")])
def test_map_large_blocks_maps_a_freed_size_again(ask: str, env: dict[str, str], expected: str) -> None:
    """After map_large_blocks() a 1 MB block is mapped on its own although an 8 MB block was freed before (glibc's
    default threshold would have risen to 8 MB and put it in the heap); a user's MALLOC_MMAP_THRESHOLD_ stands."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | env
    done = subprocess.run([sys.executable, "-c", _MAPPED, ask], capture_output=True, text=True, env=environ, check=True)
    assert done.stdout.split() == expected.split()


def test_only_a_big_input_maps_its_blocks_apart(tmp_path: Path) -> None:
    """A small conversion is not slowed by mapping every block: the size of what it reads decides (a .gz counts 8x)."""
    from portscope.ingest.spill import input_bytes, map_large_blocks

    small = tmp_path / "small.json"
    small.write_bytes(b"x" * 1000)
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(b"x" * 100)
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.log").write_bytes(b"x" * 10)
    (folder / "b.log").write_bytes(b"x" * 20)
    assert (input_bytes(small), input_bytes(packed), input_bytes(folder), input_bytes(tmp_path / "absent")) == (1000, 800, 30, 0)
    assert map_large_blocks(small) is False  # (mallopt not asked: this test process keeps glibc's default)


_NPU_LANES = _MALLINFO + """
_spill.NPU_LANES_INPUT_BYTES = 100  # the file below counts as big
asked = _spill.map_large_blocks(sys.argv[1], npu_lanes=sys.argv[2] == "1")
libc.free(libc.malloc(16 << 20))  # glibc's default then raises its threshold to 16 MB
before = libc.mallinfo2().hblks
five, one = libc.malloc(5 << 20), libc.malloc(1 << 20)
print(asked, libc.mallinfo2().hblks - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="glibc only")
@pytest.mark.parametrize(("npu_lanes", "expected"), [("1", "True 1"), ("0", "False 0")])
def test_a_big_file_with_npu_lanes_maps_blocks_from_4_mb(tmp_path: Path, npu_lanes: str, expected: str) -> None:
    """A big Kineto file with NPU lanes maps blocks of 4 MB or more apart (the 5 MB one; the 1 MB one stays in the
    heap); without NPU lanes a file under 3 GB keeps glibc's default (both in the heap, below its raised threshold)."""
    trace = tmp_path / "t.json"
    trace.write_bytes(b"x" * 1000)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", _NPU_LANES, str(trace), npu_lanes], capture_output=True, text=True,
                          env=environ, check=True)  # fmt: skip
    assert done.stdout.split() == expected.split()


def test_npu_lanes_are_guessed_from_a_files_start(tmp_path: Path) -> None:
    """torch-rbln's launch ids (or an NPU label) in the first chunk say NPU lanes; a CUDA trace's start does not."""
    from portscope.ingest.readers.npu_kineto import npu_lanes_at_start

    npu = tmp_path / "npu.json"
    npu.write_text('{"traceEvents": [{"ph": "X", "cat": "privateuse1_runtime", "name": "rbln_run", "pid": 100, '
                   '"tid": 100, "ts": 20.0, "dur": 0, "args": {"launch_id": 7}}]}')  # fmt: skip
    cuda = tmp_path / "cuda.json"
    cuda.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, '
                    '"args": {"correlation": 3, "device": 0, "stream": 7}}]}')  # fmt: skip
    assert npu_lanes_at_start(npu) is True
    assert npu_lanes_at_start(cuda) is False
    assert npu_lanes_at_start(tmp_path / "absent.json") is False  # unreadable: the conversion words why
    assert npu_lanes_at_start(tmp_path) is False  # a folder


_POOL = """
import sys
import pyarrow as pa
from portscope.ingest import spill
before = pa.default_memory_pool().backend_name
spill.converting_process(sys.argv[1])
print(before, pa.default_memory_pool().backend_name)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "malloc_trim"), reason="glibc only")
def test_a_converting_process_allocates_arrow_from_the_c_heap(tmp_path: Path) -> None:
    """`portscope convert` (and a rank's worker) have Arrow allocate from the C heap, which `release_memory` trims,
    not from mimalloc's segments (kept resident after a batch is freed)."""
    small = tmp_path / "t.json"
    small.write_bytes(b"[]")
    environ = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    done = subprocess.run([sys.executable, "-c", _POOL, str(small)], capture_output=True, text=True, env=environ, check=True)
    before, after = done.stdout.split()
    assert before != "system"  # pyarrow's default (mimalloc or jemalloc) ...
    assert after == "system"  # ... replaced


def test_values_read_one_at_a_time_come_from_blocks_and_see_later_puts(monkeypatch: pytest.MonkeyPatch) -> None:
    """One value asked alone reads its block of the file once (the rules ask row by row); a `put` after it is seen."""
    from portscope.ingest import spill

    monkeypatch.setattr(spill, "SCALAR_BLOCK", 4)
    monkeypatch.setattr(spill, "SCALAR_BLOCKS", 2)
    column = spill.DiskColumn("q", hold=3)
    column.extend(np.arange(0, 100, 10))  # 0 10 ... 90: all in the file
    reads = []
    read = column.read
    monkeypatch.setattr(column, "read", lambda lo, hi: reads.append((lo, hi)) or read(lo, hi))
    assert [column[i] for i in (5, 4, 6, 1, 7, 9, 5)] == [50, 40, 60, 10, 70, 90, 50]
    assert reads == [(4, 8), (0, 4), (8, 10), (4, 8)]  # two blocks kept: the third one dropped them
    column.put(np.array([5]), np.array([-7]))
    assert (column[5], column[4], column[-1]) == (-7, 40, 90)
