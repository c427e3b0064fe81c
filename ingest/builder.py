"""Build a Trace row by row (profiler, converters) with interned stacks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from . import schema
from .arrow_values import array, strings
from .errors import ColumnValueError
from .trace import RunInfo, Trace

Frame = tuple[str, int, str]  # (file, line, function)


COMPACT_ROWS = 1 << 15  # rows held as Python objects before they become arrays


class TableBuilder:
    """Columnar accumulation of rows for one table of the schema.

    Rows come in as Python values (``append``, ``extend``); every `compact_rows` rows they are turned into arrays
    (a text column that the schema dictionary-encodes: int32 codes into one value -> code dict, numbered in order of
    first appearance; any other column: an Arrow array of its type), so a table of many rows holds ~its Arrow size
    rather than a Python object per value (~200-260 bytes a row). ``build`` joins the parts: the same table as if
    every row had been held until then."""

    def __init__(self, name: str, *, compact_rows: int | None = None) -> None:
        self.name = name
        self.schema = schema.TABLES[name]
        self.columns: dict[str, list[Any]] = {f.name: [] for f in self.schema}  # the rows not yet compacted
        self._coded = {f.name for f in self.schema if pa.types.is_dictionary(f.type)}
        self._index: dict[str, dict[Any, int]] = {name: {} for name in self._coded}  # value -> code, first appearance
        self._parts: dict[str, list[Any]] = {f.name: [] for f in self.schema}  # np.int32 codes or pa.Array per part
        self._compact_rows = max(1, COMPACT_ROWS if compact_rows is None else compact_rows)
        self._compacted = 0  # rows in _parts (they come before the rows in `columns`)
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def append(self, **row: Any) -> int:
        """Append one row; missing columns are null. Returns the row's index."""
        unknown = set(row) - self.columns.keys()
        if unknown:
            raise KeyError(f"table {self.name!r} has no columns {sorted(unknown)}")
        for name, values in self.columns.items():
            value = row.get(name)
            if isinstance(value, _ENUM_TYPES):
                value = value.value
            values.append(value)
        self._rows += 1
        if self._rows - self._compacted >= self._compact_rows:
            self._compact()
        return self._rows - 1

    def extend(self, columns: dict[str, Sequence[Any]]) -> None:
        """Append many rows given as columns of equal length (missing columns are null)."""
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"table {self.name!r}: columns of unequal length {sorted(lengths)}")
        n = lengths.pop() if lengths else 0
        for name, values in self.columns.items():
            given = columns.get(name)
            if given is None:
                values.extend([None] * n)
            elif any(isinstance(v, _ENUM_TYPES) for v in given[:1]):  # enum columns: one check per column
                values.extend(v.value if isinstance(v, _ENUM_TYPES) else v for v in given)
            else:
                values.extend(given)
        self._rows += n
        if self._rows - self._compacted >= self._compact_rows:
            self._compact()

    def set(self, row: int, **values: Any) -> None:
        """Overwrite some columns of one row already appended. A row compacted already costs its part rebuilt (a text
        column the schema dictionary-encodes: the whole column renumbered, as the codes follow first appearance)."""
        unknown = set(values) - self.columns.keys()
        if unknown:
            raise KeyError(f"table {self.name!r} has no columns {sorted(unknown)}")
        if not 0 <= row < self._rows:
            raise IndexError(f"row {row} outside table {self.name!r} of {self._rows} rows")
        for name, value in values.items():
            if isinstance(value, _ENUM_TYPES):
                value = value.value
            if row >= self._compacted:
                self.columns[name][row - self._compacted] = value
            elif name in self._coded:
                inverse = list(self._index[name])
                held = [None if c < 0 else inverse[c] for part in self._parts[name] for c in part.tolist()]
                held[row] = value
                self._index[name] = {}
                self._parts[name] = [_codes(held, self._index[name])]
            else:
                parts, at, k = self._parts[name], row, 0
                while at >= len(parts[k]):
                    at, k = at - len(parts[k]), k + 1
                held = parts[k].to_pylist()
                held[at] = value
                parts[k] = self._array(held, name)

    def _array(self, values: list[Any], column: str) -> pa.Array:
        """One column's values as an Arrow array of its type; a value the type cannot hold (an integer past int64, a
        string in a number column: a reader let through what a stranger's file held) raises ColumnValueError."""
        try:
            return array(values, self.schema.field(column).type)
        except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise ColumnValueError(self.name, column, str(exc)) from exc

    def _compact(self) -> None:
        """Turn the held rows into one part of arrays per column."""
        for field in self.schema:
            values = self.columns[field.name]
            if field.name in self._coded:
                self._parts[field.name].append(_codes(values, self._index[field.name]))
            else:
                self._parts[field.name].append(self._array(values, field.name))
            values.clear()
        self._compacted = self._rows

    def build(self) -> pa.Table:
        arrays = []
        for field in self.schema:
            values, parts = self.columns[field.name], self._parts[field.name]
            if field.name in self._coded:
                index = dict(self._index[field.name])  # the held rows' new values numbered on a copy: build changes nothing
                try:
                    arrays.append(_from_codes(np.concatenate([*parts, _codes(values, index)]), index))
                except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:  # a text column given a number
                    raise ColumnValueError(self.name, field.name, str(exc)) from exc
            elif parts:
                arrays.append(pa.concat_arrays([*parts, self._array(values, field.name)]))
            else:
                arrays.append(self._array(values, field.name))
        return pa.Table.from_arrays(arrays, schema=self.schema)


def _codes(values: list[Any], index: dict[Any, int]) -> np.ndarray:
    """int32 codes of values into index (new values added in order of first appearance), -1 for None."""
    return np.fromiter((-1 if v is None else index.setdefault(v, len(index)) for v in values), dtype=np.int32, count=len(values))


def _from_codes(codes: np.ndarray, index: dict[Any, int]) -> pa.DictionaryArray:
    """The dictionary array of codes (-1: null; changed in place) into index's values, in the index's order (as
    ``pa.array(values, pa.string()).dictionary_encode()`` without a string array of every row)."""
    nulls = codes < 0
    codes[nulls] = 0
    return pa.DictionaryArray.from_arrays(pa.array(codes, mask=nulls if nulls.any() else None), pa.array(list(index), pa.string()))


_ENUM_TYPES = (
    schema.SignalKind,
    schema.Direction,
    schema.Placement,
    schema.Mode,
    schema.Phase,
    schema.CompileKind,
    schema.EngineKind,
    schema.SliceKind,
)


class StackInterner:
    """Interns frames and stacks so each distinct stack is stored once.

    `sources` maps frames to their line's source text (the optional `frames.source` column); a frame
    with a source that no stack uses is still written, so call sites without stacks find their text.
    """

    def __init__(self) -> None:
        self._frames: dict[Frame, int] = {}
        self._stacks: dict[tuple[int, ...], int] = {}
        self.sources: dict[Frame, str] = {}

    def frame(self, frame: Frame) -> int:
        """The frame id of one frame."""
        fid = self._frames.get(frame)
        if fid is None:
            fid = self._frames[frame] = len(self._frames)
        return fid

    def intern(self, frames: Iterable[Frame]) -> int:
        """The stack id of a stack given innermost frame first."""
        key = tuple(self.frame(frame) for frame in frames)
        sid = self._stacks.get(key)
        if sid is None:
            sid = self._stacks[key] = len(self._stacks)
        return sid

    def frames_table(self) -> pa.Table:
        for frame in self.sources:
            self.frame(frame)
        b = TableBuilder("frames")
        for (file, line, function), fid in self._frames.items():
            b.append(frame_id=fid, file=file, line=line, function=function)
        table = b.build()
        if self.sources:
            text = [self.sources.get(frame) or None for frame in self._frames]
            table = table.append_column(pa.field(schema.FRAME_SOURCE, pa.string()), strings(text))
        return table

    def stacks_table(self) -> pa.Table:
        b = TableBuilder("stacks")
        for ids, sid in self._stacks.items():
            b.append(stack_id=sid, frame_ids=list(ids))
        return b.build()


class TraceBuilder:
    """All tables of one run under construction."""

    def __init__(self, run_info: RunInfo | None = None) -> None:
        self.run_info = run_info or RunInfo()
        self.tables = {name: TableBuilder(name) for name in schema.TABLES if name not in ("frames", "stacks")}
        self.stacks = StackInterner()

    def __getattr__(self, name: str) -> TableBuilder:
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(name)

    def add_region(
        self,
        name: str,
        *,
        start_ns: int = 0,
        dur_ns: int = 0,
        parent_id: int | None = None,
        mode: schema.Mode = schema.Mode.UNKNOWN,
        phase: schema.Phase = schema.Phase.NONE,
        device: str | None = None,
        peak_memory_bytes: int | None = None,
        error: str | None = None,
        tags: str | None = None,
    ) -> int:
        """Add a region and return its id."""
        region_id = len(self.tables["regions"])
        self.tables["regions"].append(
            region_id=region_id,
            parent_id=parent_id,
            name=name,
            start_ns=start_ns,
            dur_ns=dur_ns,
            mode=mode,
            phase=phase,
            device=device,
            peak_memory_bytes=peak_memory_bytes,
            error=error,
            tags=tags,
        )
        return region_id

    def build(self) -> Trace:
        tables = {name: b.build() for name, b in self.tables.items()}
        tables["frames"] = self.stacks.frames_table()
        tables["stacks"] = self.stacks.stacks_table()
        return Trace(run_info=self.run_info, tables=tables)
