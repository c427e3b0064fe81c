"""Device work -> the runtime call that launched it, by correlation id, in bounded memory (the sliced GPU path).

The linker keeps a dict (or a `CorrelationIndex`) of every runtime call's correlation id; here (id, row) pairs of
the runtime calls and of the device work are distributed into correlation-range buckets (`Buckets`: ~1M calls a
bucket, bounds from a sample of the ids) and joined bucket by bucket: an id's calls and device slices all fall in
its bucket, so each bucket's index answers as the whole one would (the last call holding the id).
"""

from __future__ import annotations

import numpy as np

from . import _kineto_sweep as sweep
from ._kineto_rows import NONE_INT, CorrelationIndex, RowColumns
from ._kineto_sweep import DEV_CORR, RUNTIME_CORR, RUNTIME_SIZE, Buckets, column, filled
from ._spill import DiskColumn

_PAIR = np.dtype([("corr", "<i8"), ("row", "<i8"), ("side", "<i1")])  # side 0: a runtime call, 1: device work
_SAMPLES = 1 << 16


def device_calls(runtime: RowColumns, device: RowColumns) -> tuple[DiskColumn, DiskColumn]:
    """(per device slice its runtime call's row or -1, per runtime call its size (NONE_INT: none)), both spilled."""
    sizes = column("q")

    def samples() -> np.ndarray:
        step = max(1, len(runtime) // _SAMPLES)
        parts = [part[RUNTIME_CORR][::step] for _, part in runtime.chunks(sweep.CHUNK_ROWS)]
        ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        ids = ids[ids != NONE_INT]
        return ids if len(ids) else np.zeros(1, dtype=np.int64)

    buckets = Buckets(len(runtime), samples, _PAIR)
    for side, rows, k in ((0, runtime, RUNTIME_CORR), (1, device, DEV_CORR)):
        for lo, part in rows.chunks(sweep.CHUNK_ROWS):
            if side == 0:
                sizes.extend(part[RUNTIME_SIZE])
            corr = part[k]
            at = np.flatnonzero(corr != NONE_INT)
            pairs = np.empty(len(at), dtype=_PAIR)
            pairs["corr"], pairs["row"], pairs["side"] = corr[at], lo + at, side
            buckets.add(pairs, pairs["corr"])
    calls = filled("q", len(device), -1)
    for pairs in buckets:
        launches, work = pairs[pairs["side"] == 0], pairs[pairs["side"] == 1]  # each in row order
        found = CorrelationIndex(launches["corr"]).find(work["corr"])  # the last call's position in this bucket
        hit = found >= 0
        calls.put(work["row"][hit], launches["row"][found[hit]], sweep.WINDOW_ROWS)
    return calls, sizes


__all__ = ["device_calls"]
