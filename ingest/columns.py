"""Arrow columns of the trace's tables made from numpy codes: dictionary columns sharing one dictionary across
slices (`Coder`), coded values (`coded_column`) and whole tables of the schema (`table_of`); which engine slices are
memory levels, not work (`memory_slices`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from . import schema
from .arrow_compute import cast, dictionary_encode
from .arrow_values import array, numbers, strings, values_of


def coded_column(values: list, codes: np.ndarray, *, dictionary: bool = True) -> pa.Array:
    """The column values[codes] (None: null), dictionary-encoded over the distinct values used."""
    if not dictionary:
        present = np.array([v is not None for v in values], dtype=bool)
        filled = np.array([v if v is not None else 0 for v in values], dtype=np.int64)
        return numbers(filled[codes] if len(values) else np.zeros(0, dtype=np.int64), mask=~present[codes] if len(values) else None)
    return Coder(values, np.bincount(codes, minlength=len(values)) > 0 if len(values) else np.zeros(0, dtype=bool))(codes)


class Coder:
    """values[codes] (None: null) as a dictionary column over the distinct values that some row uses (`used`: one
    flag per value); every slice it codes shares one dictionary, as an Arrow IPC file requires."""

    def __init__(self, values: list, used: np.ndarray) -> None:
        distinct: dict[object, int] = {}
        remap = np.array([distinct.setdefault(v, len(distinct)) if v is not None else -1 for v in values] or [-1], dtype=np.int32)
        kept = np.zeros(len(distinct) + 1, dtype=bool)
        kept[remap[used] if len(values) else []] = True  # values some row uses (-1: null)
        compact = (np.cumsum(kept[:-1]) - 1).astype(np.int32)
        self.words = strings([v for v, i in distinct.items() if kept[i]])
        self.remap = np.where(remap >= 0, compact[np.maximum(remap, 0)] if len(distinct) else 0, -1).astype(np.int32)

    def __call__(self, codes: np.ndarray) -> pa.DictionaryArray:
        indices = self.remap[codes]  # one int32 per row, -1 for null
        nulls = indices < 0
        indices[nulls] = 0
        return pa.DictionaryArray.from_arrays(numbers(indices, mask=nulls), self.words)


def table_of(name: str, columns: dict[str, object]) -> pa.Table:
    """An Arrow table of the schema from whole columns (lists or numpy arrays); missing columns are null."""
    table_schema = schema.TABLES[name]
    n = max((len(v) for v in columns.values() if v is not None), default=0)  # type: ignore[arg-type]
    arrays = []
    for field in table_schema:
        values = columns.get(field.name)
        if values is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(values, pa.Array):
            arrays.append(cast(values, field.type))
        elif pa.types.is_dictionary(field.type):
            arrays.append(dictionary_encode(strings(values)))
        else:
            arrays.append(array(values, field.type))
    return pa.Table.from_arrays(arrays, schema=table_schema)




def memory_slices(engine: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A flag per engine slice (its `engine` column): on a memory lane (`schema.MEMORY_ENGINE_PREFIX`), a level of
    memory (the allocator's total), not work: no operator time, no busy engine, no flow."""
    chunks = engine.chunks if isinstance(engine, pa.ChunkedArray) else [engine]
    flags = []
    for chunk in chunks:
        coded = chunk if pa.types.is_dictionary(chunk.type) else dictionary_encode(chunk)
        words = coded.dictionary.to_pylist()
        memory = np.array([schema.memory_device(w) is not None for w in words] + [False])
        flags.append(memory[values_of(coded.indices, null=len(words)).astype(np.int64)])
    return np.concatenate(flags) if flags else np.zeros(0, dtype=bool)


def nullable(values: np.ndarray, null: np.ndarray) -> pa.Array:
    """An Arrow array of `values`, null where `null` (no validity buffer when nothing is null)."""
    return numbers(values, mask=null)


__all__ = ["Coder", "coded_column", "memory_slices", "nullable", "table_of"]
