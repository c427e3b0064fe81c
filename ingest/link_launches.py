"""Launches: device work -> the runtime call that launched it, or the operator it ran as, by correlation id.

`launches` joins device work to the runtime call that holds the same correlation id (the last one in file order when
a broken file repeats an id), a sort-merge join (measured faster than DuckDB's at every size tried, and linear where
a broken file repeats one id on many calls). Device work no runtime call launched joins the operator that holds its
correlation id (`ran_as`), where a format lists device work with the operator it ran as. Columns are read
`link_nesting.CHUNK_ROWS` rows at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import link_nesting
from .events import NONE, rows_where

_MIN = np.iinfo(np.int64).min


def launches(correlation: np.ndarray, calls: np.ndarray, work: np.ndarray) -> np.ndarray:
    """Per row: for device work, the last runtime call (file order) with its correlation id; else -1.

    A sort-merge join in numpy: the calls sorted by id (stable: equal ids keep file order, so the last one found is
    the latest call), then the device work `link_nesting.CHUNK_ROWS` rows at a time, each chunk sorted by id and searched forward. Against the DuckDB hash join it replaced
    (bench/link_join_bench.py, device work in random id order): 0.01 s against 0.6-1.0 s for 40k launches (DuckDB's
    import and connection), about equal at 2M (~0.9 s), 11.3 s against 8.8 s at 20M (a ~20 GB trace; real files
    list their work nearly in id order, which the stable sort takes in one pass); and a broken file that repeats one
    id on many calls and kernels costs no more (DuckDB's join made every pair: minutes at 2M launches). What is held
    is the calls' sorted ids and rows (16 bytes a call) and one chunk of work."""
    call_rows = np.flatnonzero(calls)
    keys = np.asarray(correlation[call_rows])
    call_rows, keys = call_rows[keys != NONE], keys[keys != NONE]
    if not len(call_rows) or not work.any():
        return np.broadcast_to(np.int32(-1), (len(calls),))
    order = np.argsort(keys, kind="stable")
    keys, call_rows = keys[order], call_rows[order]
    del order
    out = np.full(len(calls), -1, dtype=np.int32)
    step = link_nesting.CHUNK_ROWS
    for lo in range(0, len(work), step):
        work_rows = lo + np.flatnonzero(work[lo : lo + step])
        wanted = np.asarray(correlation[work_rows])
        work_rows, wanted = work_rows[wanted != NONE], wanted[wanted != NONE]
        by_id = np.argsort(wanted, kind="stable")  # the chunk in id order: the search walks the keys forward
        wanted, work_rows = wanted[by_id], work_rows[by_id]
        at = np.searchsorted(keys, wanted, side="right") - 1
        hit = at >= 0
        hit[hit] = keys[at[hit]] == wanted[hit]
        out[work_rows[hit]] = call_rows[at[hit]]
    return out


def ran_as(correlation: Any, ops: np.ndarray, work: np.ndarray, op: np.ndarray) -> np.ndarray:
    """`op` with, for device work, the last operator (file order) holding its correlation id (where one does). A
    merge a million rows at a time where both sides' ids never decrease in file order (a format that lists its
    device work with operators pairs every kernel, in order), else a sort and a binary search (DuckDB's join would
    hold hash tables of them all)."""
    op_rows, work_rows = rows_where(ops), rows_where(work)
    if not len(op_rows) or not len(work_rows):
        return op
    out = op if op.flags.writeable and op.dtype == np.int32 else np.array(op, dtype=np.int32)  # a constant: made
    if not _ran_as_in_order(correlation, op_rows, work_rows, out):
        keys = correlation[op_rows]
        op_rows, keys = op_rows[keys != NONE], keys[keys != NONE]
        order = np.argsort(keys, kind="stable")  # ties in file order: the last of a key is the last in the file
        keys, op_rows = keys[order], op_rows[order]
        del order
        step = link_nesting.CHUNK_ROWS
        for lo in range(0, len(work_rows), step):
            _join(correlation, work_rows[lo : lo + step], op_rows, keys, out)
    return out


def _join(correlation: Any, part: np.ndarray, op_rows: np.ndarray, keys: np.ndarray, out: np.ndarray) -> None:
    """Work rows `part` -> the last of `op_rows` (by sorted `keys`) with their id, written into `out`."""
    if not len(keys):
        return
    ids = correlation[part]
    at = np.searchsorted(keys, ids, side="right") - 1
    hit = (at >= 0) & (keys[np.maximum(at, 0)] == ids) & (ids != NONE)
    out[part[hit]] = op_rows[at[hit]]


def _ran_as_in_order(correlation: Any, op_rows: np.ndarray, work_rows: np.ndarray, out: np.ndarray) -> bool:
    """The ran-as join as a merge: a window of the operators whose ids a chunk of work asks for, read a million at a
    time. False (stop) where the operators' ids decrease or a chunk asks for ids the window has passed."""
    step = link_nesting.CHUNK_ROWS
    chunks = (op_rows[lo : lo + step] for lo in range(0, len(op_rows), step))
    rows, keys = op_rows[:0], np.zeros(0, dtype=np.int64)
    floor, more = _MIN, True
    for lo in range(0, len(work_rows), step):
        part = work_rows[lo : lo + step]
        ids = correlation[part]
        given = ids[ids != NONE]
        if not len(given):
            continue
        least, most = int(given.min()), int(given.max())
        if least < floor:
            return False
        cut = int(np.searchsorted(keys, least))  # operators below every id asked from here on (in order): dropped
        rows, keys, floor = rows[cut:], keys[cut:], least
        while more and (not len(keys) or keys[-1] <= most):
            chunk = next(chunks, None)
            if chunk is None:
                more = False
                break
            k = correlation[chunk]
            chunk, k = chunk[k != NONE], k[k != NONE]
            if len(k) and ((k[1:] < k[:-1]).any() or (len(keys) and k[0] < keys[-1])):
                return False
            rows, keys = np.concatenate([rows, chunk]), np.concatenate([keys, k])
        _join(correlation, part, rows, keys, out)
    return True


__all__ = ["launches", "ran_as"]
