"""Build a Trace row by row (profiler, converters) with interned stacks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from . import schema
from .trace import RunInfo, Trace

Frame = tuple[str, int, str]  # (file, line, function)


class TableBuilder:
    """Columnar accumulation of rows for one table of the schema."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.schema = schema.TABLES[name]
        self.columns: dict[str, list[Any]] = {f.name: [] for f in self.schema}
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

    def build(self) -> pa.Table:
        arrays = []
        for field in self.schema:
            values = self.columns[field.name]
            if pa.types.is_dictionary(field.type):
                arrays.append(_dictionary_encoded(values))
            else:
                arrays.append(pa.array(values, field.type))
        return pa.Table.from_arrays(arrays, schema=self.schema)


def _dictionary_encoded(values: list[Any]) -> pa.DictionaryArray:
    """``pa.array(values, pa.string()).dictionary_encode()`` (values in order of first appearance, None: null)
    without first making a string array of every row (a GPU trace's kernel names: ~100 bytes a row)."""
    index: dict[Any, int] = {}
    codes = np.fromiter((-1 if v is None else index.setdefault(v, len(index)) for v in values), dtype=np.int32, count=len(values))
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
            table = table.append_column(pa.field(schema.FRAME_SOURCE, pa.string()), pa.array(text, pa.string()))
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
