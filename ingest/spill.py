"""One numeric column kept mostly on disk: appended as it is read, read back a block or a gather at a time.

The bounded-memory readers (issue 19) hold per-event columns (times, codes, links) that grow with the input;
a `DiskColumn` keeps at most `hold` values in memory and writes the rest to an anonymous temporary file (gone
when closed or when the process ends, whatever happens). Reads never map the file: `read` and `blocks` copy a
range, `take` gathers by index one window of the file at a time, so what is resident is one block or window
plus the result, whatever the column's length.

Appends go to `held` (a stdlib array: an append is a C call, no Python frame) and `settle()` writes the held
values out once there are `hold` of them; call it now and then (after each batch of events).
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

HOLD_ROWS = 1 << 20  # values kept in memory before they go to the file
WINDOW_ROWS = 1 << 21  # values read at a time by `take`
SCALAR_BLOCK = 1 << 12  # values read around one value asked alone ...
SCALAR_BLOCKS = 16  # ... and blocks of them kept for the next ones (then dropped all at once)


class DiskColumn:
    """A column of one stdlib typecode (``b``, ``i``, ``q``, ``d``...), appended at its end, mostly on disk."""

    def __init__(self, typecode: str, hold: int = HOLD_ROWS) -> None:
        self.held = array(typecode)
        self.dtype = np.dtype(typecode)
        self.hold = max(1, hold)
        self._file: BinaryIO | None = None
        self._on_disk = 0  # values in the file (they come before the held ones)
        self._blocks: dict[int, np.ndarray] = {}  # block number -> values: the last blocks read for one value

    def __len__(self) -> int:
        return self._on_disk + len(self.held)

    @property
    def on_disk(self) -> int:
        """How many of the values are in the file (the first ones)."""
        return self._on_disk

    def extend(self, values: np.ndarray) -> None:
        """Append many values (converted to the column's type) and settle."""
        values = np.ascontiguousarray(values, dtype=self.dtype)
        if len(self.held) + len(values) < self.hold:
            self.held.frombytes(values.tobytes())
            return
        self.flush()
        self._write(memoryview(values).cast("B"), len(values))

    def settle(self) -> None:
        """Write the held values to the file if there are `hold` of them or more."""
        if len(self.held) >= self.hold:
            self.flush()

    def flush(self) -> None:
        """Write every held value to the file."""
        if len(self.held):
            self._write(memoryview(self.held).cast("B"), len(self.held))
            self.held = array(self.held.typecode)

    def _write(self, data: memoryview, count: int) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="portscope-column-")  # noqa: SIM115 (lives as long as the column)
        self._file.seek(0, 2)
        self._file.write(data)
        self._on_disk += count

    def read(self, lo: int, hi: int) -> np.ndarray:
        """A copy of values lo..hi-1 (clipped to the column)."""
        n = len(self)
        lo, hi = max(0, min(lo, n)), max(0, min(hi, n))
        out = np.empty(max(0, hi - lo), dtype=self.dtype)
        if not len(out):
            return out
        size = self.dtype.itemsize
        if lo < self._on_disk:  # the part in the file
            end = min(hi, self._on_disk)
            got = self._pread(memoryview(out[: end - lo]).cast("B"), lo * size)
            if got != (end - lo) * size:
                raise OSError(f"a temporary column file was cut short ({got} of {(end - lo) * size} bytes)")
        if hi > self._on_disk:  # the held part
            first = max(lo, self._on_disk)
            held = np.frombuffer(self.held, dtype=self.dtype)
            out[first - lo :] = held[first - self._on_disk : hi - self._on_disk]
        return out

    def _pread(self, view: memoryview, offset: int) -> int:
        assert self._file is not None
        self._file.flush()
        fd, got = self._file.fileno(), 0
        while got < len(view):
            n = os.preadv(fd, [view[got:]], offset + got)
            if not n:
                break
            got += n
        return got

    def __getitem__(self, i: Any) -> Any:
        """One value (a negative index counts from the end; past the end: IndexError, so iteration stops there), or
        as a numpy array would: the values at an array of indices or flags (`take`), or a slice's (`read`)."""
        if isinstance(i, slice):
            lo, hi, step = i.indices(len(self))
            return self.read(lo, hi)[::step] if step > 0 else self.take(np.arange(lo, hi, step))
        if not isinstance(i, int | np.integer):
            at = np.asarray(i)
            if at.dtype == bool:
                at = np.flatnonzero(at)
            return self.take(at.reshape(-1)).reshape(at.shape)
        n = len(self)
        at = int(i) + n if i < 0 else int(i)
        if not 0 <= at < n:
            raise IndexError(f"index {i} outside a column of {n} values")
        if at >= self._on_disk:
            return self.held[at - self._on_disk]
        number = at // SCALAR_BLOCK  # rules ask row by row, a few places at once, each mostly ascending
        block = self._blocks.get(number)
        if block is None:
            if len(self._blocks) >= SCALAR_BLOCKS:
                self._blocks.clear()
            block = self._blocks[number] = self.read(number * SCALAR_BLOCK, min((number + 1) * SCALAR_BLOCK, self._on_disk))
        lo = number * SCALAR_BLOCK
        return block[at - lo].item()

    def blocks(self, rows: int = HOLD_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """(first index, values) for consecutive runs of at most `rows` values, in order."""
        for lo in range(0, len(self), max(1, rows)):
            yield lo, self.read(lo, lo + rows)

    def take(self, index: np.ndarray, window: int = WINDOW_ROWS) -> np.ndarray:
        """The values at `index` (any order, repeats allowed), read one window of `window` values at a time: only the
        windows some index falls in are read. Sorted indices are gathered without sorting them first."""
        index = np.asarray(index, dtype=np.int64)
        n = len(self)
        if len(index) and (int(index.min()) < 0 or int(index.max()) >= n):
            raise IndexError(f"an index outside a column of {n} values")
        out = np.empty(len(index), dtype=self.dtype)
        if not len(index):
            return out
        if self._on_disk == 0:
            out[:] = np.frombuffer(self.held, dtype=self.dtype)[index]
            return out
        ordered = bool(np.all(index[1:] >= index[:-1]))
        order = None if ordered else np.argsort(index, kind="stable")
        sorted_index = index if order is None else index[order]
        window = max(1, window)
        bounds = np.flatnonzero(np.diff(sorted_index // window)) + 1
        for lo, hi in zip(np.r_[0, bounds].tolist(), np.r_[bounds, len(sorted_index)].tolist(), strict=True):
            part = sorted_index[lo:hi]
            first = int(part[0]) // window * window
            values = self.read(first, min(first + window, n))[part - first]
            if order is None:
                out[lo:hi] = values
            else:
                out[order[lo:hi]] = values
        return out

    def put(self, index: np.ndarray, values: np.ndarray | float, window: int = WINDOW_ROWS) -> None:
        """Overwrite the values at `index` (any order; a repeated index keeps its last value) with `values` (one a
        index, or one for all): the held part in place, the file one window of `window` values at a time (read,
        changed, written back: only the windows some index falls in)."""
        self._blocks.clear()
        index = np.asarray(index, dtype=np.int64)
        values = np.broadcast_to(np.asarray(values, dtype=self.dtype), index.shape)
        n = len(self)
        if not len(index):
            return
        if int(index.min()) < 0 or int(index.max()) >= n:
            raise IndexError(f"an index outside a column of {n} values")
        if not bool(np.all(index[1:] > index[:-1])):
            order = np.argsort(index, kind="stable")
            index, values = index[order], values[order]
            last = np.r_[index[1:] != index[:-1], True]
            index, values = index[last], values[last]
        held = index >= self._on_disk
        if held.any():
            np.frombuffer(self.held, dtype=self.dtype)[index[held] - self._on_disk] = values[held]
            index, values = index[~held], values[~held]
        if not len(index):
            return
        window = max(1, window)
        bounds = np.flatnonzero(np.diff(index // window)) + 1
        for lo, hi in zip(np.r_[0, bounds].tolist(), np.r_[bounds, len(index)].tolist(), strict=True):
            part = index[lo:hi]
            first = int(part[0]) // window * window
            block = self.read(first, min(first + window, self._on_disk))
            block[part - first] = values[lo:hi]
            self._pwrite(memoryview(block).cast("B"), first * self.dtype.itemsize)

    def _pwrite(self, view: memoryview, offset: int) -> None:
        assert self._file is not None
        self._file.flush()
        fd, done = self._file.fileno(), 0
        while done < len(view):
            done += os.pwritev(fd, [view[done:]], offset + done)

    def close(self) -> None:
        """Drop the values (the file goes away)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self.held = array(self.held.typecode)
        self._on_disk = 0
        self._blocks.clear()

    def __del__(self) -> None:
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()


def release_memory() -> None:
    """Give free pages back to the system once a batch is written: Arrow's pool, and the C heap (glibc keeps the
    freed blocks of one batch's arrays between live ones, and the peak then grows with the number of batches)."""
    pa.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


MMAP_THRESHOLD = 128 * 1024  # bytes: a block this big or bigger is mapped on its own (glibc's M_MMAP_THRESHOLD)
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


LARGE_INPUT_BYTES = 3 << 30  # inputs this big (JSON/CSV bytes; a .gz counts 8x) or bigger: blocks mapped apart
# a Kineto file with NPU lanes this big or bigger: blocks from NPU_LANES_THRESHOLD mapped apart (see map_large_blocks)
NPU_LANES_INPUT_BYTES = 1 << 30
NPU_LANES_THRESHOLD = 4 << 20
_GZ_FACTOR = 8


def input_bytes(path: str | Path) -> int:
    """About how many bytes a converter reads from `path`: a file's size (8x for a .gz), a folder's files summed."""
    p = Path(path)
    try:
        files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else []
        return sum(f.stat().st_size * (_GZ_FACTOR if f.suffix.lower() == ".gz" else 1) for f in files)
    except OSError:
        return 0


def map_large_blocks(path: str | Path | None = None, *, npu_lanes: bool = False) -> bool:
    """For a converting process (`portscope convert`): ask glibc to map every block of MMAP_THRESHOLD bytes or more on
    its own, so an array freed after a batch goes back to the system at once instead of leaving a hole in the heap
    that later, smaller blocks pin (glibc's default raises the threshold to the largest block freed, up to 32 MB:
    a 1M-row column's arrays then come from the heap, and the peak grows with the number of batches). Given the
    input `path`, only for one of `LARGE_INPUT_BYTES` or more: mapping each block costs a conversion 20-35 % of its
    time in page faults (87 MB Kineto 1.53 s against 1.14 s; 2 GB Kineto CPU 33.2 s against 25.7 s, GPU 45.4 against
    34.9 s), and below 3 GB the heap's peak stays low without it (2 GB Kineto CPU / GPU 0.49 / 0.57 GB, 1 GB
    kernel_details.csv 0.45 GB, 2026-12-02). A Kineto file with NPU lanes (`npu_lanes`, the caller's guess) of
    `NPU_LANES_INPUT_BYTES` or more maps blocks from `NPU_LANES_THRESHOLD`: at 2 GB its freed per-event arrays kept
    0.82-0.85 GB resident at the peak, 0.67-0.68 GB so, for 1.5-5.5 % of its time (2026-12-03). A no-op (False)
    where the C library is not glibc, or where the user set MALLOC_MMAP_THRESHOLD_ (their setting stands)."""
    if _LIBC is None or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    size = input_bytes(path) if path is not None else LARGE_INPUT_BYTES
    if size >= LARGE_INPUT_BYTES:
        return bool(_LIBC.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    if npu_lanes and size >= NPU_LANES_INPUT_BYTES:
        return bool(_LIBC.mallopt(_M_MMAP_THRESHOLD, NPU_LANES_THRESHOLD))
    return False


def converting_process(path: str | Path, *, npu_lanes: bool = False) -> None:
    """Set up a process that converts `path` and ends (`portscope convert`, a rank's worker): `map_large_blocks`,
    and Arrow allocating from the C heap (its system pool) rather than mimalloc, whose freed segments stay resident
    while the next batch is made: writing the lanes of a 0.5 GB Kineto file with NPU lanes peaked 570 MB with
    mimalloc, 472 MB with the system pool (2026-12-03, same run, no slower); `release_memory` trims both at once."""
    map_large_blocks(path, npu_lanes=npu_lanes)
    if _LIBC is not None:
        pa.set_memory_pool(pa.system_memory_pool())


try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None)
    _LIBC.malloc_trim  # noqa: B018 (glibc only)
    _LIBC.mallopt  # noqa: B018
except (AttributeError, OSError):
    _LIBC = None


__all__ = ["HOLD_ROWS", "LARGE_INPUT_BYTES", "MMAP_THRESHOLD", "NPU_LANES_INPUT_BYTES", "NPU_LANES_THRESHOLD", "SCALAR_BLOCK",
           "SCALAR_BLOCKS", "WINDOW_ROWS", "DiskColumn", "converting_process", "input_bytes", "map_large_blocks",
           "release_memory"]
