"""Kineto runtime calls and device work as compact columns (a leaf module, like ``_kineto_ops``).

A GPU trace holds about as many runtime calls and kernels/copies as operators; kept as one Python tuple
each (two floats, a fresh name string, four ints) they took ~600 bytes an event, most of a GPU trace's
conversion memory. :class:`RowColumns` keeps each field as a column: times as float64, repeated values
(names, categories, pids, tids, devices, streams) as int32 codes into one list of distinct values, ids
and sizes as int64 — 40-50 bytes an event. Indexing and iteration give the same tuples as before (built
when read, names shared), so the linker reads them as it read the lists.
"""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Callable, Iterator
from enum import Enum
from typing import Any, BinaryIO

import numpy as np


class Field(Enum):
    """How a column keeps its values."""

    TIME = "time"  # float64 (microseconds as read)
    CODED = "coded"  # an int32 code into the distinct values (any hashable; others kept aside)
    INT = "int"  # int64; None and anything not an int64 kept aside


_NONE = NONE_INT = -(2**63)  # an INT column's None
_ASIDE = ASIDE = -(2**63) + 1  # an INT or CODED column's value kept in `_aside` (and a CODED column's unhashable values)
_CHUNK = 1 << 14
SPILL_ROWS = 1 << 20  # rows held in memory: past them, a slice of this many goes to a temporary file (~40 MB)


class RowColumns:
    """Fixed-width tuples kept as columns, one :class:`Field` per position; a list of tuples to read
    (``len``, indexing, iteration, ``==`` with a list), appended to one tuple at a time."""

    def __init__(self, fields: tuple[Field, ...], *, spill_rows: int | None = None) -> None:
        self.fields = fields
        self.spill_rows = spill_rows or SPILL_ROWS
        self._spill: BinaryIO | None = None  # slices written out, each column after the other
        self._spilled: list[tuple[int, int]] = []  # (offset in the spill file, rows) per slice written out
        self._spilled_rows = 0
        self._columns: list[array] = [array("d") if f is Field.TIME else array("i") if f is Field.CODED else array("q")
                                      for f in fields]  # fmt: skip
        self._values: list[Any] = []  # the distinct values of every CODED column (one table: names recur across fields)
        self._codes: dict[tuple[type, Any], int] = {}
        self._aside: dict[tuple[int, int], Any] = {}  # (row, field) -> a value no column holds as is

    def _code(self, value: Any) -> int:
        key = (type(value), value)  # 1 and 1.0 and True stay distinct values
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self._values)
            self._values.append(value)
        return code

    def append(self, row: tuple) -> None:
        """Add one tuple (as many values as fields)."""
        if len(row) != len(self.fields):
            raise ValueError(f"{len(row)} values for {len(self.fields)} fields")
        n = -1
        codes = self._codes
        for k, field in enumerate(self.fields):
            value, column = row[k], self._columns[k]
            if field is Field.TIME:
                column.append(value)
                continue
            if field is Field.CODED:
                try:
                    code = codes.get((type(value), value))
                    column.append(self._code(value) if code is None else code)
                    continue
                except TypeError:  # unhashable (an args value of another JSON type)
                    raw = -1
            elif value is None:
                column.append(_NONE)
                continue
            elif type(value) is int and _ASIDE < value < 2**63:
                column.append(value)
                continue
            else:
                raw = _ASIDE
            n = self._spilled_rows + len(self._columns[0]) - (k > 0) if n < 0 else n  # this row's index (field 0 is in)
            column.append(raw)
            self._aside[(n, k)] = value
        if len(self._columns[0]) >= self.spill_rows:
            self._spill_slice()

    def extend(self, columns: list[list]) -> None:
        """Add rows given column by column (one list a field, equal lengths): the rows `append` would add one at a
        time, converted a column at a time; a batch with a value only `append` keeps (unhashable, not an int64)
        goes through it row by row."""
        if len(columns) != len(self.fields):
            raise ValueError(f"{len(columns)} columns for {len(self.fields)} fields")
        raws: list[list] = []
        try:
            for field, values in zip(self.fields, columns, strict=True):
                if field is Field.TIME:
                    raws.append(values)
                elif field is Field.CODED:
                    got = list(map(self._codes.get, zip(map(type, values), values, strict=True)))  # TypeError: unhashable
                    if None in got:
                        got = [self._code(v) if c is None else c for v, c in zip(values, got, strict=True)]
                    raws.append(got)
                else:
                    present = [v for v in values if v is not None]
                    if not all(type(v) is int for v in present) or (
                            present and (min(present) <= _ASIDE or max(present) >= 2**63)):
                        raise TypeError("a value kept aside")
                    raws.append([_NONE if v is None else v for v in values])
        except TypeError:
            for row in zip(*columns, strict=True):
                self.append(row)
            return
        for column, raw in zip(self._columns, raws, strict=True):
            column.extend(raw)
        if len(self._columns[0]) >= self.spill_rows:
            self._spill_slice()

    def _dtype(self, k: int) -> type:
        return np.float64 if self.fields[k] is Field.TIME else np.int32 if self.fields[k] is Field.CODED else np.int64

    def _spill_slice(self) -> None:
        """Write the rows held in memory to the spill file as one slice."""
        if self._spill is None:
            self._spill = tempfile.TemporaryFile(prefix="portscope-rows-")  # noqa: SIM115 (lives as long as the columns)
        self._spill.seek(0, 2)
        rows = len(self._columns[0])
        self._spilled.append((self._spill.tell(), rows))
        self._spilled_rows += rows
        for k, column in enumerate(self._columns):
            column.tofile(self._spill)
            self._columns[k] = array(column.typecode)

    def chunks(self, rows: int = _CHUNK) -> Iterator[tuple[int, list[np.ndarray]]]:
        """(first row, one numpy array a field) for consecutive runs of at most `rows` rows, in order, without loading
        the spilled slices all at once (raw columns as :meth:`numpy` gives them)."""
        first = 0
        for offset, count in self._spilled:
            if self._spill is None:
                break
            self._spill.seek(offset)
            part = [np.fromfile(self._spill, dtype=self._dtype(k), count=count) for k in range(len(self.fields))]
            for lo in range(0, count, rows):
                yield first + lo, [column[lo : lo + rows] for column in part]
            first += count
        held = len(self._columns[0]) if self._columns else 0
        for lo in range(0, held, rows):
            yield first + lo, [np.frombuffer(column, dtype=self._dtype(k))[lo : lo + rows] for k, column in enumerate(self._columns)]

    def any_row(self, test: Callable[[list[np.ndarray]], np.ndarray]) -> bool:
        """Whether `test` flags some row, given the raw columns (as :meth:`numpy` gives them) a run of rows at a time."""
        return any(bool(test(columns).any()) for _, columns in self.chunks(self.spill_rows))

    def count_rows(self, test: Callable[[list[np.ndarray]], np.ndarray]) -> int:
        """How many rows `test` flags (as `any_row`)."""
        return sum(int(test(columns).sum()) for _, columns in self.chunks(self.spill_rows))

    def _load(self) -> None:
        """Bring every spilled slice back into the in-memory columns (whole-column access, indexing)."""
        if not self._spilled:
            return
        whole = [array(column.typecode) for column in self._columns]
        for _, part in self.chunks(self.spill_rows):
            for column, values in zip(whole, part, strict=True):
                column.frombytes(values.tobytes())
        self._columns = whole
        self._spilled, self._spilled_rows = [], 0
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def __getitem__(self, i: int) -> tuple:
        self._load()
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        i %= n
        row = []
        for k, field in enumerate(self.fields):
            raw = self._columns[k][i]
            if field is Field.TIME:
                row.append(raw)
            elif field is Field.CODED:
                row.append(self._values[raw] if raw >= 0 else self._aside[(i, k)])
            else:
                row.append(raw if raw > _ASIDE else None if raw == _NONE else self._aside[(i, k)])
        return tuple(row)

    def __iter__(self) -> Iterator[tuple]:
        values, aside, fields = self._values, self._aside, self.fields
        for lo, columns in self.chunks():
            parts = []
            for k, (field, column) in enumerate(zip(fields, columns, strict=True)):
                raw = column.tolist()
                if field is Field.TIME:
                    parts.append(raw)
                elif field is Field.CODED:
                    parts.append([values[c] if c >= 0 else aside[(lo + j, k)] for j, c in enumerate(raw)])
                else:
                    parts.append([c if c > _ASIDE else None if c == _NONE else aside[(lo + j, k)] for j, c in enumerate(raw)])
            yield from zip(*parts, strict=True)

    def __len__(self) -> int:
        return self._spilled_rows + (len(self._columns[0]) if self._columns else 0)

    def int_column(self, k: int) -> np.ndarray | None:
        """Field k (an INT field) as int64, None as NONE_INT; None when some value of it is not an int64 or None."""
        if self.fields[k] is not Field.INT or any(key[1] == k for key in self._aside):
            return None
        self._load()
        return np.frombuffer(self._columns[k], dtype=np.int64).copy() if len(self) else np.zeros(0, dtype=np.int64)

    def numpy(self, k: int) -> np.ndarray:
        """Field k's raw column as a copy-free numpy view (TIME: float64; CODED: int32 codes into :attr:`values`, -1
        for a value kept aside; INT: int64, NONE_INT for None); the columns cannot grow while a view lives."""
        self._load()
        dtype = self._dtype(k)
        return np.frombuffer(self._columns[k], dtype=dtype) if len(self) else np.zeros(0, dtype=dtype)

    @property
    def values(self) -> list[Any]:
        """The distinct values of the CODED fields (a code indexes this list)."""
        return self._values

    def kept_aside(self) -> bool:
        """Whether some value is held outside the columns (an unhashable value, an id that is not an int64)."""
        return bool(self._aside)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RowColumns | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RowColumns({list(self)!r})"


# (ts, dur, name, pid, tid, correlation, External id, bytes, copy kind)
RUNTIME_FIELDS = (Field.TIME, Field.TIME, Field.CODED, Field.CODED, Field.CODED, Field.INT, Field.INT, Field.INT, Field.INT)
"""(ts, dur, name, pid, tid, correlation, External id, size)"""
PYTHON_FIELDS = (Field.TIME, Field.TIME, Field.CODED, Field.CODED, Field.CODED)
"""(ts, dur, name, pid, tid) of a Python frame (``python_function``)"""
DEVICE_FIELDS = (Field.TIME, Field.TIME, Field.CODED, Field.CODED, Field.CODED, Field.CODED, Field.INT, Field.INT)
"""(ts, dur, category, name, device, stream, correlation, bytes)"""

__all__ = ["ASIDE", "DEVICE_FIELDS", "NONE_INT", "PYTHON_FIELDS", "RUNTIME_FIELDS", "Field", "RowColumns"]
