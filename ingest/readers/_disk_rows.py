"""Rows of one table of the schema kept on disk until written: the signals and compiles a reader finds as it goes
(bounded memory, issue 19).

A reader adds rows a block at a time (`DiskRows.add`: numbers as numpy arrays, texts as strings, both or a value
for the whole block); each column is a `DiskColumn` that holds SPILL_HOLD values before they go to its file
(texts as codes of distinct strings: each distinct text once in memory). `slices()` makes the table
`_chrome_slices.SLICE_ROWS` rows at a time when it is written, with the columns `TraceBuilder` would have given
the same rows: a dictionary column's words in order of first appearance, plain text as strings, nulls where a
column is not given (an optional number: where it is negative).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import Enum
from typing import Any

import numpy as np
import pyarrow as pa

from ..schema import TABLES
from ..spill import DiskColumn, release_memory
from ..trace import TableSlices
from . import _chrome_slices
from ._chrome_events import Values

SPILL_HOLD = 1 << 13  # values of a column held in memory before they go to its file
_NONE = np.iinfo(np.int64).max


class DiskRows:
    """The rows of table `table`: `numbers` (column -> stdlib typecode), of which `optional` are null where negative;
    `texts` (string or dictionary columns, None: null); `fixed` (column -> one value for every row)."""

    def __init__(self, table: str, *, numbers: dict[str, str], texts: Sequence[str], optional: Sequence[str] = (),
                 fixed: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.schema = TABLES[table]
        self.numbers = {name: DiskColumn(typecode, SPILL_HOLD) for name, typecode in numbers.items()}
        self.texts = {name: DiskColumn("i", SPILL_HOLD) for name in texts}
        self.optional = frozenset(optional)
        self.fixed = {k: v.value if isinstance(v, Enum) else v for k, v in (fixed or {}).items()}
        self.words = Values()
        unknown = (set(numbers) | set(texts) | set(self.fixed)) - set(self.schema.names)
        if unknown:
            raise KeyError(f"table {table!r} has no columns {sorted(unknown)}")

    def __len__(self) -> int:
        return len(next(iter({**self.numbers, **self.texts}.values())))

    def add(self, n: int, **columns: Any) -> None:
        """Append n rows: every number and text column given, as n values or one value for all."""
        if not n:
            return
        for name, column in self.numbers.items():
            column.extend(np.broadcast_to(np.asarray(columns[name], dtype=column.dtype), (n,)))
            column.settle()
        code = self.words.code
        for name, column in self.texts.items():
            value = columns[name]
            if value is None or isinstance(value, str | Enum):
                value = -1 if value is None else code(value.value if isinstance(value, Enum) else value)
                column.extend(np.full(n, value, dtype=np.int32))
            else:
                if len(value) != n:
                    raise ValueError(f"column {name!r}: {len(value)} values for {n} rows")
                column.extend(np.fromiter((-1 if v is None else code(v) for v in value), dtype=np.int32, count=n))
            column.settle()

    def slices(self) -> TableSlices:
        """The rows as a table made slice by slice (each dictionary fixed first, in order of first appearance)."""
        n, rows = len(self), max(1, _chrome_slices.SLICE_ROWS)
        words = self.words.values
        coders: dict[str, tuple[np.ndarray, pa.Array] | None] = {}
        for name, column in self.texts.items():
            if not pa.types.is_dictionary(self.schema.field(name).type):
                coders[name] = None
                continue
            first = np.full(len(words), _NONE, dtype=np.int64)  # per word: the first row that uses it
            for lo, codes in column.blocks(rows):
                at = np.flatnonzero(codes >= 0)
                used, where = np.unique(codes[at], return_index=True)
                first[used] = np.minimum(first[used], lo + at[where])
            order = np.argsort(first, kind="stable")[: int(np.count_nonzero(first < _NONE))]
            remap = np.full(len(words) + 1, -1, dtype=np.int32)  # by code + 1 (-1: null)
            remap[order + 1] = np.arange(len(order), dtype=np.int32)
            coders[name] = remap, pa.array([words[c] for c in order.tolist()], pa.string())

        def batches() -> Iterator[pa.RecordBatch]:
            for lo in range(0, n, rows):
                release_memory()  # the previous slice's arrays are written and dropped: their pages go back
                hi = min(lo + rows, n)
                arrays = []
                for field in self.schema:
                    name = field.name
                    if name in self.numbers:
                        values = self.numbers[name].read(lo, hi)
                        nulls = values < 0 if name in self.optional else np.zeros(len(values), dtype=bool)
                        values[nulls] = 0
                        arrays.append(pa.array(values, field.type, mask=nulls if nulls.any() else None))
                    elif name in self.texts:
                        codes = self.texts[name].read(lo, hi)
                        coder = coders[name]
                        if coder is None:
                            arrays.append(pa.array([words[c] if c >= 0 else None for c in codes.tolist()], field.type))
                        else:
                            arrays.append(_dictionary(coder[0][codes + 1], coder[1]))
                    elif name in self.fixed:
                        value = self.fixed[name]
                        if pa.types.is_dictionary(field.type):
                            arrays.append(_dictionary(np.zeros(hi - lo, dtype=np.int32), pa.array([value], pa.string())))
                        elif pa.types.is_integer(field.type):
                            arrays.append(pa.array(np.full(hi - lo, value), field.type))
                        else:
                            arrays.append(pa.array([value] * (hi - lo), field.type))
                    elif pa.types.is_dictionary(field.type):
                        arrays.append(_dictionary(np.full(hi - lo, -1, dtype=np.int32), pa.array([], pa.string())))
                    else:
                        arrays.append(pa.array([None] * (hi - lo), field.type))
                yield from pa.Table.from_arrays(arrays, schema=self.schema).to_batches()

        return TableSlices(n, batches)

    def close(self) -> None:
        for column in (*self.numbers.values(), *self.texts.values()):
            column.close()


def _dictionary(indices: np.ndarray, words: pa.Array) -> pa.DictionaryArray:
    """Codes into `words` (-1: null) as a dictionary array, as `TraceBuilder` makes one."""
    nulls = indices < 0
    indices = np.where(nulls, 0, indices).astype(np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(indices, mask=nulls if nulls.any() else None), words)


__all__ = ["SPILL_HOLD", "DiskRows"]
