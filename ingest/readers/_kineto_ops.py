"""The cpu_op events of a Kineto trace as compact columns (a leaf module, like ``_kineto_events``)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

import numpy as np

NO_TENSORS: tuple[None, None, None, int] = (None, None, None, 0)
_ROWS_PER_SLICE = 1 << 16


class OpColumns:
    """cpu_op events as columns: ts and dur (float64 microseconds as read) and codes into the tables of
    names, (pid, tid) threads and tensor signatures (shapes, strides, dtypes, bytes_in).

    About 28 bytes an operator, where a tuple per operator took ~200. Indexing and iteration give the
    tuple ``(ts, dur, name, pid, tid, None, shapes, strides, dtypes, bytes_in)`` of one operator."""

    def __init__(self) -> None:
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

    def append(self, ts: float, dur: float, name: str, pid: Any, tid: Any, signature: tuple = NO_TENSORS) -> None:
        """Add one operator."""
        self.ts.append(ts)
        self.dur.append(dur)
        self.name.append(self.name_code(name))
        self.thread.append(self.thread_code(pid, tid))
        self.signature.append(self.signature_code(signature))

    def extend(self, ts: list[float], dur: list[float], name: list[int], thread: list[int], signature: list[int]) -> None:
        """Add operators given as columns of floats and codes."""
        self.ts.extend(ts)
        self.dur.extend(dur)
        self.name.extend(name)
        self.thread.extend(thread)
        self.signature.extend(signature)

    def release_times(self) -> None:
        """Give the memory of the ts and dur columns back (the linker, once it has the ns columns); the
        codes stay, indexing and iteration no longer work."""
        self.ts = array("d")
        self.dur = array("d")

    def __len__(self) -> int:
        return len(self.name)

    def __getitem__(self, i: int) -> tuple:
        pid, tid = self.threads[self.thread[i]]
        return (self.ts[i], self.dur[i], self.names[self.name[i]], pid, tid, None, *self.signatures[self.signature[i]])

    def __iter__(self) -> Iterator[tuple]:
        names, threads, signatures = self.names, self.threads, self.signatures
        for lo in range(0, len(self.ts), _ROWS_PER_SLICE):
            hi = lo + _ROWS_PER_SLICE
            for ts, dur, n, t, s in zip(self.ts[lo:hi], self.dur[lo:hi], self.name[lo:hi], self.thread[lo:hi],
                                        self.signature[lo:hi], strict=True):  # fmt: skip
                yield (ts, dur, names[n], *threads[t], None, *signatures[s])

    def numpy(self, column: str) -> np.ndarray:
        """A numpy copy-free view of one column (ts, dur: float64; name, thread, signature: int32)."""
        values = getattr(self, column)
        dtype = np.float64 if values.typecode == "d" else np.int32
        return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpColumns) and len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


__all__ = ["NO_TENSORS", "OpColumns"]
