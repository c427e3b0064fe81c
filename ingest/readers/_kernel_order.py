"""kernel_details' kernels put in start order on disk (issue 19): an external sort, stable by file row.

The columns (`DiskColumn`s, one value a kernel) are cut into runs of `RUN_ROWS` kernels, each sorted in memory by
start (stably) and written back to disk with its rows' file positions; the runs are then merged by (start, file
row) holding at most `MERGE_ROWS` kernels of all runs at a time. What is resident is one run while the runs are
made, the merge's buffers while they are merged: the same whatever the table's length.
"""

from __future__ import annotations

import numpy as np

from ..spill import DiskColumn

RUN_ROWS = 1 << 20  # kernels sorted in memory at a time (tests make it tiny)
MERGE_ROWS = 1 << 21  # kernels of all runs held while merging


def in_order(start: DiskColumn, rows: int) -> bool:
    """True when `start` never decreases (read `rows` values at a time)."""
    last = None
    for _, block in start.blocks(rows):
        if len(block) and ((last is not None and block[0] < last) or not (block[1:] >= block[:-1]).all()):
            return False
        if len(block):
            last = block[-1]
    return True


def _column(like: DiskColumn, hold: int) -> DiskColumn:
    return DiskColumn(like.held.typecode, hold=hold)


def sort_by_start(columns: dict[str, DiskColumn], *, hold: int, run_rows: int | None = None,
                  merge_rows: int | None = None) -> dict[str, DiskColumn]:  # fmt: skip
    """The columns with their kernels in order of `columns["start"]`, kernels of one start in file order; the
    columns given are closed. `hold`: values the new columns keep in memory; `run_rows`, `merge_rows`: values
    sorted at a time and held while merging (default `RUN_ROWS`, `MERGE_ROWS`)."""
    names = list(columns)
    n = len(columns["start"])
    run_rows = run_rows or RUN_ROWS
    runs: list[dict[str, DiskColumn]] = []
    for lo in range(0, n, max(1, run_rows)):
        start = columns["start"].read(lo, lo + run_rows)
        order = np.argsort(start, kind="stable")
        run = {c: _column(columns[c], 1) for c in names}  # hold 1: all on disk
        run["start"].extend(start[order])
        del start
        for c in [c for c in names if c != "start"]:
            run[c].extend(columns[c].read(lo, lo + run_rows)[order])
        run["row"] = DiskColumn("q", hold=1)
        run["row"].extend(order.astype(np.int64) + lo)
        runs.append(run)
    for column in columns.values():
        column.close()
    out = {c: _column(runs[0][c], hold) for c in names} if runs else {c: _column(columns[c], hold) for c in names}
    if len(runs) == 1:  # one run: in order already
        for c in names:
            for _, block in runs[0][c].blocks(merge_rows or MERGE_ROWS):
                out[c].extend(block)
    elif runs:
        _merge(runs, out, merge_rows or MERGE_ROWS)
    for run in runs:
        for column in run.values():
            column.close()
    return out


def _merge(runs: list[dict[str, DiskColumn]], out: dict[str, DiskColumn], merge_rows: int) -> None:
    """Runs sorted by (start, row) merged into `out`, each run read `merge_rows // len(runs)` kernels at a time.

    Every kernel not yet read from a run comes after that run's last buffered one, so all buffered kernels up to
    the least of the runs' last buffered (start, row) can be written: they come before anything still on disk."""
    names = list(out)
    per = max(1, merge_rows // len(runs))
    sizes = [len(run["start"]) for run in runs]
    read = [0] * len(runs)
    buffers: list[dict[str, np.ndarray]] = [{} for _ in runs]

    def load(r: int) -> None:
        lo = read[r]
        buffers[r] = {c: runs[r][c].read(lo, lo + per) for c in (*names, "row")}
        read[r] = min(lo + per, sizes[r])

    for r in range(len(runs)):
        load(r)
    while True:
        live = [r for r in range(len(runs)) if len(buffers[r]["start"])]
        if not live:
            return
        bound: tuple[int, int] | None = None  # the least last buffered (start, row) of runs with more on disk
        for r in live:
            if read[r] < sizes[r]:
                key = (int(buffers[r]["start"][-1]), int(buffers[r]["row"][-1]))
                bound = key if bound is None or key < bound else bound
        parts: list[dict[str, np.ndarray]] = []
        for r in live:
            b = buffers[r]
            if bound is None:
                cut = len(b["start"])
            else:
                lo, hi = np.searchsorted(b["start"], bound[0], "left"), np.searchsorted(b["start"], bound[0], "right")
                cut = int(lo + np.searchsorted(b["row"][lo:hi], bound[1], "right"))
            if cut:
                parts.append({c: v[:cut] for c, v in b.items()})
                buffers[r] = {c: v[cut:] for c, v in b.items()}
            if not len(buffers[r]["start"]) and read[r] < sizes[r]:
                load(r)
        merged = {c: np.concatenate([p[c] for p in parts]) for c in (*names, "row")}
        order = np.lexsort((merged["row"], merged["start"]))
        for c in names:
            out[c].extend(merged[c][order])


def first_seen(name: DiskColumn, count: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Name codes renumbered in order of first appearance in `name` (read `rows` at a time): (new code of each
    of the `count` old codes, -1 where unused; the old codes in their new order)."""
    renumber = np.full(max(count, 1), -1, dtype=np.int32)
    order: list[np.ndarray] = []
    seen = 0
    for _, codes in name.blocks(rows):
        new = codes[renumber[codes] < 0]
        if len(new):
            used, first = np.unique(new, return_index=True)
            used = used[np.argsort(first, kind="stable")]
            renumber[used] = np.arange(seen, seen + len(used), dtype=np.int32)
            seen += len(used)
            order.append(used.astype(np.int64))
    return renumber, np.concatenate(order) if order else np.zeros(0, dtype=np.int64)


__all__ = ["MERGE_ROWS", "RUN_ROWS", "first_seen", "in_order", "sort_by_start"]
