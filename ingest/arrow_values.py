"""Arrow arrays made from numpy and Python values without importing pandas.

`pa.array`, `pa.scalar`, `Array.to_numpy` and `fill_null` with a Python value ask pandas whether their argument
is a pandas object, and the first ask imports it: ~0.25 s and ~380 modules, a fifth of a small trace's whole
conversion, which never uses pandas. `array` builds the same arrays from buffers where the values are numbers,
booleans, strings or lists of them of the exact Python or numpy types the column holds; anything else (a
value the type cannot hold, another type) goes to `pa.array`, which converts it or words the error as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

_PY_TYPES: dict[str, tuple[type, ...]] = {"i": (int,), "u": (int,), "f": (float,), "b": (bool,)}


def array(values: Any, type: pa.DataType, mask: np.ndarray | None = None) -> pa.Array:
    """`values` (a numpy array, a list, an Arrow array) as an Arrow array of `type`, null where `mask` or None."""
    if isinstance(values, pa.Array):
        return values if values.type == type else values.cast(type)
    made = _from_numpy(values, type, mask) if isinstance(values, np.ndarray) else _from_list(values, type, mask)
    return made if made is not None else pa.array(values, type, mask=mask)


def numbers(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """A numpy array of numbers or booleans as an Arrow array of its own type, null where `mask`."""
    return array(values, pa.from_numpy_dtype(values.dtype), mask)


def strings(values: Sequence[str | None]) -> pa.Array:
    """Python strings (None: null) as an Arrow string array."""
    return array(values, pa.string())


def values_of(column: pa.Array | pa.ChunkedArray, null: Any = None) -> np.ndarray:
    """A column of numbers or booleans as a numpy array (`to_numpy` imports pandas), its nulls as `null`; raises
    ValueError where it holds nulls and `null` is None. Zero-copy for one chunk without nulls."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    dtype = _numpy_dtype(column.type)
    if dtype is None:
        raise ValueError(f"a column of {column.type} is not numbers")
    if column.null_count and null is None:
        raise ValueError(f"a column of {column.type} holds {column.null_count} nulls")
    parts = [_chunk_values(c, dtype, null) for c in chunks]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _bits(buffer: pa.Buffer, offset: int, n: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(buffer, np.uint8), count=offset + n, bitorder="little")[offset:].astype(bool)


def _chunk_values(chunk: pa.Array, dtype: np.dtype, null: Any) -> np.ndarray:
    validity, data = chunk.buffers()[:2]
    n, offset = len(chunk), chunk.offset
    if data is None or not n:
        return np.full(n, null if null is not None else 0, dtype)
    if dtype.kind == "b":
        values = _bits(data, offset, n)
    else:
        values = np.frombuffer(data, dtype, count=offset + n)[offset:]
    if chunk.null_count:
        values = values.copy()
        values[~_bits(validity, offset, n)] = null
    return values


def _int_dtype(type: pa.DataType) -> np.dtype:
    return np.dtype(f"{'i' if pa.types.is_signed_integer(type) else 'u'}{type.bit_width // 8}")


def _numpy_dtype(type: pa.DataType) -> np.dtype | None:
    if pa.types.is_integer(type):
        return _int_dtype(type)
    if pa.types.is_floating(type) and type.bit_width in (32, 64):
        return np.dtype(f"f{type.bit_width // 8}")
    return np.dtype(np.bool_) if pa.types.is_boolean(type) else None


def _validity(null: np.ndarray | None) -> tuple[pa.Buffer | None, int]:
    if null is None or not null.any():
        return None, 0
    return pa.py_buffer(np.packbits(~null, bitorder="little")), int(np.count_nonzero(null))


def _from_numpy(values: np.ndarray, to: pa.DataType, mask: np.ndarray | None) -> pa.Array | None:
    dtype = _numpy_dtype(to)
    kind = values.dtype.kind
    if dtype is None or values.ndim != 1 or kind not in "iufb" or (mask is not None and mask.dtype.kind != "b"):
        return None
    if dtype.kind in "iu":
        if kind not in "iu":
            return None  # a float into an integer column: pa.array's safe cast words what it truncates
        if len(values) and kind != dtype.kind or values.dtype.itemsize > dtype.itemsize:
            info = np.iinfo(dtype)
            low, high = (int(values.min()), int(values.max())) if len(values) else (0, 0)
            if low < info.min or high > info.max:
                return None
    elif dtype.kind == "b" and kind != "b" or dtype.kind == "f" and (kind != "f" or values.dtype.itemsize > dtype.itemsize):
        return None  # pa.array words what such a cast would change
    validity, nulls = _validity(mask)
    n = len(values)
    if dtype.kind == "b":
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        data = pa.py_buffer(np.ascontiguousarray(values, dtype=dtype))
    return pa.Array.from_buffers(to, n, [validity, data], null_count=nulls)


def _from_list(values: Any, to: pa.DataType, mask: np.ndarray | None) -> pa.Array | None:
    if not isinstance(values, (list, tuple)) or mask is not None:
        return None
    null = np.fromiter((v is None for v in values), np.bool_, len(values))
    present = [v for v in values if v is not None] if null.any() else values
    if pa.types.is_string(to):
        return _strings(values, present, null)
    if pa.types.is_list(to):
        if not all(type(v) is list for v in present):
            return None
        child = _from_list([s for v in present for s in v], to.value_type, None)
        if child is None:
            return None
        offsets = np.zeros(len(values) + 1, np.int32)
        np.cumsum([0 if v is None else len(v) for v in values], out=offsets[1:])
        validity, nulls = _validity(null)
        return pa.ListArray.from_buffers(to, len(values), [validity, pa.py_buffer(offsets)], null_count=nulls,
                                         children=[child])  # fmt: skip
    dtype = _numpy_dtype(to)
    if dtype is None or not all(type(v) in _PY_TYPES[dtype.kind] for v in present):
        return None
    filled = present if not null.any() else [False if v is None else v for v in values]
    try:
        got = np.array(filled, dtype=np.int64 if dtype.kind in "iu" else dtype)
    except OverflowError:
        return None  # past int64: pa.array words it
    return _from_numpy(got, to, null if null.any() else None)


def _strings(values: Sequence[Any], present: Sequence[Any], null: np.ndarray) -> pa.Array | None:
    if not all(type(v) is str for v in present):
        return None
    try:
        encoded = [v.encode() for v in present]
    except UnicodeEncodeError:
        return None  # a lone surrogate: pa.array words it
    lengths = np.zeros(len(values), np.int64)
    lengths[~null] = np.fromiter(map(len, encoded), np.int64, len(encoded))
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 2**31:
        return None
    validity, nulls = _validity(null)
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded)),
                                       validity, null_count=nulls)  # fmt: skip


__all__ = ["array", "numbers", "strings", "values_of"]
