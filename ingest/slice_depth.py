"""Nested slices at depth: slices that overlap on one engine get rows of their own, as Perfetto draws them.

An operator and the operators it called (a CPU op and its children on one thread, a
kernel inside a launch span) overlap on their lane. `nest_slices` gives each slice its
depth on its engine (the number of slices still open when it starts, in start order,
longer first on ties) and renames the engine of every slice below the top to
"ENGINE · DEPTH", so the timeline draws one row per depth under its engine and every
query on lanes (viewport, click, range, search) works unchanged. Engines whose slices
never overlap cost one vectorized check.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .columns import memory_slices
from .viewport import dictionary_codes

DEPTH_MARK = " · "


def _any_overlap(engine: np.ndarray, start: np.ndarray, end: np.ndarray) -> bool:
    """Whether two slices of one engine overlap; engine by engine, so the temporaries stay a fraction of the columns."""
    for e in np.flatnonzero(np.bincount(engine)):
        mine = engine == e
        s, f = start[mine], end[mine]
        order = np.argsort(s, kind="stable")
        s, f = s[order], f[order]
        if len(s) > 1 and (s[1:] < np.maximum.accumulate(f)[:-1]).any():
            return True
    return False


def slice_depths(engine: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of every slice on its engine (0: nothing open above it)."""
    n = len(start)
    depth = np.zeros(n, np.int32)
    if n < 2 or not _any_overlap(engine, start, end):
        return depth
    order = np.lexsort((-(end - start), start, engine))
    e_sorted, s_sorted, end_sorted = engine[order], start[order], end[order]
    new_engine = np.empty(n, bool)
    new_engine[0] = True
    new_engine[1:] = e_sorted[1:] != e_sorted[:-1]
    # running max of the end within each engine: a slice starting before it overlaps an earlier one
    bounds = np.flatnonzero(new_engine)
    reach = np.empty(n)
    for a, b in zip(bounds, [*bounds[1:], n], strict=True):
        np.maximum.accumulate(end_sorted[a:b], out=reach[a:b])
    overlaps = np.zeros(n, bool)
    overlaps[1:] = (s_sorted[1:] < reach[:-1]) & ~new_engine[1:]
    for a, b in zip(bounds, [*bounds[1:], n], strict=True):
        if not overlaps[a:b].any():
            continue
        stack: list[float] = []
        for i in range(a, b):  # a stack of open ends: pop what ended before this start
            s = s_sorted[i]
            while stack and stack[-1] <= s:
                stack.pop()
            depth[order[i]] = len(stack)
            stack.append(end_sorted[i])
    return depth


def nest_slices(slices: pa.Table) -> pa.Table:
    """The slices with the engine of every nested slice renamed "ENGINE · DEPTH" (the table unchanged when none nest);
    memory lanes never nest."""
    if slices.num_rows < 2:
        return slices
    codes, names = dictionary_codes(slices.column("engine"))
    start = slices.column("start").to_numpy().astype(np.float64)
    end = start + slices.column("dur").to_numpy().astype(np.float64)
    depth = slice_depths(codes, start, end)
    depth[memory_slices(slices.column("engine"))] = 0  # a memory lane's slices are levels, drawn on one row
    if not depth.any():
        return slices
    nested = np.flatnonzero(depth)
    engine = pc.cast(slices.column("engine"), pa.string()).to_numpy(zero_copy_only=False).astype(object)
    engine[nested] = [f"{names[c]}{DEPTH_MARK}{d}" for c, d in zip(codes[nested], depth[nested], strict=True)]
    index = slices.schema.get_field_index("engine")
    column = pa.array(engine, pa.string()).dictionary_encode()
    return slices.set_column(index, slices.schema.field(index).with_type(column.type), column)
