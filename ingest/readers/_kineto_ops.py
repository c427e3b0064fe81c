"""The cpu_op events of a Kineto trace as compact columns (a leaf module, like ``_kineto_events``).

Columns past ``spill_rows`` operators go to an anonymous temporary file, a slice of ``spill_rows`` at
a time, so the reader holds one slice whatever the trace's size; :meth:`OpColumns.slices` reads them
back in order (the converter writes the ops table slice by slice), and whole-column access
(:meth:`numpy`, indexing) loads them all back into memory first.
"""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np

NO_TENSORS: tuple[None, None, None, int] = (None, None, None, 0)
SPILL_ROWS = 1 << 20  # operators per slice: ~28 MB of columns (and the rows of one Arrow record batch)
_ROWS_PER_SLICE = 1 << 16
_COLUMNS = ("ts", "dur", "name", "thread", "signature")


class OpColumns:
    """cpu_op events as columns: ts and dur (float64 microseconds as read) and codes into the tables of
    names, (pid, tid) threads and tensor signatures (shapes, strides, dtypes, bytes_in).

    About 28 bytes an operator, where a tuple per operator took ~200. Indexing and iteration give the
    tuple ``(ts, dur, name, pid, tid, None, shapes, strides, dtypes, bytes_in)`` of one operator."""

    def __init__(self, *, spill_rows: int | None = None) -> None:
        self.spill_rows = spill_rows or SPILL_ROWS
        self._spill: BinaryIO | None = None  # the slices written out, each column after the other
        self._spilled: list[tuple[int, int]] = []  # (offset in the spill file, rows) per slice written out
        self._spilled_rows = 0
        self.ts = array("d")
        self.dur = array("d")
        self.name = array("i")
        self.thread = array("i")
        self.signature = array("i")
        self.names: list[str] = []
        self.threads: list[tuple[Any, Any]] = []
        self.signatures: list[tuple[str | None, str | None, str | None, int]] = [NO_TENSORS]
        self._name_codes: dict[str, int] = {}
        self._thread_codes: dict[tuple[Any, Any], int] = {}
        self._signature_codes: dict[tuple, int] = {NO_TENSORS: 0}
        # the few operators with communication arguments (`events.Comm`): their rows (in the order added) and values
        self.comm_rows: list[int] = []
        self.comm_values: list[Any] = []

    def add_comm(self, row: int, comm: Any) -> None:
        """The communication arguments of operator `row` (rows added in order)."""
        self.comm_rows.append(row)
        self.comm_values.append(comm)

    def comms_in(self, lo: int, hi: int) -> tuple[np.ndarray, list[Any]]:
        """(rows less `lo`, values) of the communication arguments of operators lo..hi-1."""
        if not self.comm_rows:
            return np.zeros(0, dtype=np.int64), []
        rows = np.asarray(self.comm_rows, dtype=np.int64)
        a, b = np.searchsorted(rows, [lo, hi]).tolist()
        return rows[a:b] - lo, self.comm_values[a:b]

    def name_code(self, name: str) -> int:
        """The code of an operator name (new names get the next code)."""
        code = self._name_codes.get(name)
        if code is None:
            code = self._name_codes[name] = len(self.names)
            self.names.append(name)
        return code

    def thread_code(self, pid: Any, tid: Any) -> int:
        """The code of a (pid, tid) thread."""
        key = (pid, tid)
        code = self._thread_codes.get(key)
        if code is None:
            code = self._thread_codes[key] = len(self.threads)
            self.threads.append(key)
        return code

    def signature_code(self, signature: tuple[str | None, str | None, str | None, int]) -> int:
        """The code of a (shapes, strides, dtypes, bytes_in) signature."""
        code = self._signature_codes.get(signature)
        if code is None:
            code = self._signature_codes[signature] = len(self.signatures)
            self.signatures.append(signature)
        return code

    def append(self, ts: float, dur: float, name: str, pid: Any, tid: Any, signature: tuple = NO_TENSORS,
               comm: Any = None) -> None:
        """Add one operator (comm: its communication arguments, an `events.Comm`)."""
        if comm is not None:
            self.add_comm(len(self), comm)
        self.ts.append(ts)
        self.dur.append(dur)
        self.name.append(self.name_code(name))
        self.thread.append(self.thread_code(pid, tid))
        self.signature.append(self.signature_code(signature))
        if len(self.name) >= self.spill_rows:
            self._spill_slice()

    def extend(self, ts: list[float], dur: list[float], name: list[int], thread: list[int], signature: list[int]) -> None:
        """Add operators given as columns of floats and codes."""
        self.ts.extend(ts)
        self.dur.extend(dur)
        self.name.extend(name)
        self.thread.extend(thread)
        self.signature.extend(signature)
        if len(self.name) >= self.spill_rows:
            self._spill_slice()

    def _spill_slice(self) -> None:
        """Write the first ``spill_rows`` operators held in memory to the spill file as one slice (every slice
        but the last has exactly that many rows: the batches of the ops table, as a whole table is cut)."""
        if self._spill is None:
            self._spill = tempfile.TemporaryFile(prefix="portscope-ops-")  # noqa: SIM115 (lives as long as the columns)
        rows = self.spill_rows
        while len(self.name) >= rows:
            self._spill.seek(0, 2)
            self._spilled.append((self._spill.tell(), rows))
            self._spilled_rows += rows
            for column in _COLUMNS:
                values = getattr(self, column)
                values[:rows].tofile(self._spill)
                del values[:rows]

    def slices(self) -> Iterator[dict[str, np.ndarray]]:
        """The columns slice by slice in order (each at most ``spill_rows`` rows): ts, dur as float64, the codes as int32."""
        for offset, rows in self._spilled:
            spill = self._spill
            if spill is None:
                break
            spill.seek(offset)
            yield {column: np.fromfile(spill, dtype=np.float64 if column in ("ts", "dur") else np.int32, count=rows)
                   for column in _COLUMNS}  # fmt: skip
        if len(self.name):
            for lo in range(0, len(self.name), self.spill_rows):
                yield {column: self._view(column)[lo : lo + self.spill_rows] for column in _COLUMNS}

    def code_counts(self) -> dict[str, np.ndarray]:
        """How many operators have each code of the name, thread and signature columns (one pass over the slices)."""
        counts = {"name": np.zeros(len(self.names), dtype=np.int64), "thread": np.zeros(len(self.threads), dtype=np.int64),
                  "signature": np.zeros(len(self.signatures), dtype=np.int64)}  # fmt: skip
        for part in self.slices():
            for column, total in counts.items():
                total += np.bincount(part[column], minlength=len(total))
        return counts

    def _load(self) -> None:
        """Bring every spilled slice back into the in-memory columns (whole-column access)."""
        if not self._spilled:
            return
        whole = {column: array(getattr(self, column).typecode) for column in _COLUMNS}
        for part in self.slices():
            for column, values in whole.items():
                values.frombytes(part[column].tobytes())
        for column, values in whole.items():
            setattr(self, column, values)
        self._spilled, self._spilled_rows = [], 0
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def __len__(self) -> int:
        return self._spilled_rows + len(self.name)

    def __getitem__(self, i: int) -> tuple:
        self._load()
        pid, tid = self.threads[self.thread[i]]
        return (self.ts[i], self.dur[i], self.names[self.name[i]], pid, tid, None, *self.signatures[self.signature[i]])

    def __iter__(self) -> Iterator[tuple]:
        self._load()
        names, threads, signatures = self.names, self.threads, self.signatures
        for lo in range(0, len(self.ts), _ROWS_PER_SLICE):
            hi = lo + _ROWS_PER_SLICE
            for ts, dur, n, t, s in zip(self.ts[lo:hi], self.dur[lo:hi], self.name[lo:hi], self.thread[lo:hi],
                                        self.signature[lo:hi], strict=True):  # fmt: skip
                yield (ts, dur, names[n], *threads[t], None, *signatures[s])

    def numpy(self, column: str) -> np.ndarray:
        """A numpy copy-free view of one whole column (ts, dur: float64; name, thread, signature: int32)."""
        self._load()
        return self._view(column)

    def _view(self, column: str) -> np.ndarray:
        values = getattr(self, column)
        dtype = np.float64 if values.typecode == "d" else np.int32
        return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpColumns) and len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


__all__ = ["NO_TENSORS", "OpColumns"]
