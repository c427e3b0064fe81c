"""The Arrow compute kernels the read path needs, called without importing `pyarrow.compute`.

`pyarrow.compute` builds a Python wrapper for each of its hundreds of kernels when imported (about 70 ms on
the 2-core machine, a fifth of `portscope report`'s whole start-up budget); the kernels themselves live in
`pyarrow._compute` (5 ms). Arguments must be Arrow arrays, chunked arrays, tables or scalars: converting
Python values (`pa.array([...])`, `pa.scalar(0)`) makes pyarrow import pandas to look for pandas objects.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from pyarrow import _compute

from .arrow_values import numbers, values_of


def call(name: str, *args: Any, options: Any = None) -> Any:
    """The kernel `name` on `args` (Arrow values only)."""
    return _compute.call_function(name, list(args), options)


def is_in(values: pa.Array | pa.ChunkedArray, value_set: pa.Array) -> Any:
    """A boolean array: which of `values` are in `value_set`."""
    return call("is_in", values, options=_compute.SetLookupOptions(value_set))


def min_max(values: pa.Array | pa.ChunkedArray) -> tuple[Any, Any]:
    """(min, max) of the non-null values; (None, None) when there are none."""
    got = call("min_max", values).as_py()
    return got["min"], got["max"]


def total(values: pa.Array | pa.ChunkedArray) -> int:
    """The sum of the non-null values (a boolean array counts its true values); 0 when empty."""
    return call("sum", values).as_py() or 0


def cast(values: pa.Array, to: pa.DataType) -> pa.Array:
    """`values` as type `to` (itself when already of that type); a value the type cannot hold raises, as
    `Array.cast` does (which imports `pyarrow.compute`)."""
    return values if values.type == to else call("cast", values, options=_compute.CastOptions.safe(to))


def dictionary_encode(values: pa.Array) -> pa.DictionaryArray:
    """`values` dictionary-encoded, as `Array.dictionary_encode` (which imports `pyarrow.compute`) gives them."""
    return call("dictionary_encode", values)


def int32_array(values: list[int]) -> pa.Array:
    """Python ints as an int32 Arrow array, built from a buffer (see the module docstring)."""
    return numbers(np.asarray(values, dtype=np.int32))


def int_values(array: pa.Array, fill: int = -1) -> Any:
    """An integer Arrow array's values as an int64 numpy array, nulls as `fill`, read from its buffers
    (`Array.to_numpy` imports pyarrow.compute and pandas: see the module docstring)."""
    return values_of(array, null=fill).astype(np.int64)
