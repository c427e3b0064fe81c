"""The ops table and the host lanes of a CPU-only Kineto trace, made slice by slice (bounded memory).

The operators are read back from their columns (spilled to a temporary file past one slice, see
``_kineto_ops``) one slice at a time; each slice becomes one record batch of the ops table and one of
the host lanes, written as it is made. What the linker computes over all operators at once is done
here with bounded state:

* top-level operators (the host lanes): a sweep per thread keeps only the latest end seen; exact when
  each thread's operators come in order of (start, longest first), which Kineto writes. A first pass
  checks that order (and counts the rows); a trace out of order returns None and is linked whole.
* regions (from user annotations, all read before): ``_Regions.find_many`` per slice.
* dictionaries: the distinct values every slice may use are known from the codes' counts (one pass),
  so every batch shares one dictionary, as an Arrow IPC file requires.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ..schema import EngineKind, Placement, SliceKind
from ..trace import TableSlices
from ._kineto_link import _PLACEMENTS, _coded, _Coder, _ns, _Regions, _table
from ._kineto_ops import OpColumns


class _TopSweep:
    """Top-level operators slice by slice: per thread group, the last (start, duration) and the latest end so far."""

    def __init__(self, groups: int) -> None:
        self.last_ts = np.full(groups, -np.inf)
        self.last_dur = np.full(groups, np.inf)
        self.max_end = np.full(groups, -np.inf)

    def top(self, ts: np.ndarray, dur: np.ndarray, group: np.ndarray) -> np.ndarray | None:
        """Indices (in the slice) of the operators no earlier operator of their group encloses; None when a group's
        operators are out of (start, longest first) order."""
        order = np.argsort(group, kind="stable")
        g, s, d = group[order], ts[order], dur[order]
        bounds = np.flatnonzero(np.diff(g)) + 1
        found = []
        for lo, hi in zip(np.r_[0, bounds].tolist(), np.r_[bounds, len(g)].tolist(), strict=True):
            k = g[lo]
            s_k, d_k = s[lo:hi], d[lo:hi]
            prev_s = np.r_[self.last_ts[k], s_k[:-1]]
            prev_d = np.r_[self.last_dur[k], d_k[:-1]]
            if np.any((s_k < prev_s) | ((s_k == prev_s) & (d_k > prev_d))):
                return None
            running = np.maximum.accumulate(np.r_[self.max_end[k], s_k + d_k])
            found.append(order[lo:hi][s_k >= running[:-1]])
            self.last_ts[k], self.last_dur[k], self.max_end[k] = s_k[-1], d_k[-1], running[-1]
        return np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


def ns_times(ts: np.ndarray, dur: np.ndarray, t0: float) -> tuple[np.ndarray, np.ndarray]:
    """(start, duration) in ns from t0 of microsecond times, rounded as the linker does (the end first: the duration
    is end - start in ns), the duration never negative."""
    start = _ns(ts, t0)
    span = _ns(ts + dur, t0)
    span -= start
    np.maximum(span, 0, out=span)
    return start, span


class OpTable:
    """The ops table from slices of the operators' columns, every slice coded with one dictionary a text column."""

    def __init__(self, ops: OpColumns, names_used: np.ndarray, placements_used: np.ndarray, root_device: str,
                 signatures_used: np.ndarray) -> None:  # fmt: skip
        signatures = ops.signatures
        self.columns = {
            "name": _Coder(ops.names, names_used),
            "placement": _Coder([p.value for p in _PLACEMENTS], placements_used),
            "device": _Coder(["cpu", root_device, "cpu"], placements_used),
            "input_shapes": _Coder([s[0] for s in signatures], signatures_used),
            "input_strides": _Coder([s[1] for s in signatures], signatures_used),
            "input_dtypes": _Coder([s[2] for s in signatures], signatures_used),
        }
        self.bytes_in = np.array([s[3] for s in signatures], dtype=np.int64)
        self.thread_ids = [t if type(t) is int and -(2**31) <= t < 2**31 else None for _, t in ops.threads]

    def table(self, part: dict[str, np.ndarray], first: int, start: np.ndarray, dur: np.ndarray, region: np.ndarray,
              placement: np.ndarray, call_site: pa.Array | None = None, stack_id: pa.Array | None = None) -> pa.Table:  # fmt: skip
        """The rows of one slice (`first`: the op id of its first row; placement: codes into ``_PLACEMENTS``)."""
        n, sig, columns = len(part["ts"]), part["signature"], self.columns
        return _table("ops", {
            "op_id": np.arange(first, first + n, dtype=np.int64), "region_id": region,
            "name": columns["name"](part["name"]), "start_ns": start, "dur_ns": dur,
            "placement": columns["placement"](placement), "device": columns["device"](placement),
            "input_shapes": columns["input_shapes"](sig), "input_strides": columns["input_strides"](sig),
            "input_dtypes": columns["input_dtypes"](sig), "bytes_in": self.bytes_in[sig],
            "bytes_out": np.zeros(n, dtype=np.int64), "call_site": call_site, "stack_id": stack_id,
            "thread": _coded(self.thread_ids, part["thread"], dictionary=False)})  # fmt: skip


def op_slices(ops: OpColumns, t0: float, regions: _Regions, root_device: str) -> dict[str, TableSlices] | None:
    """The ops table and the host lanes (engine_slices) of a trace without Python frames, runtime calls or device
    work, as slices; None when some thread's operators are out of order (the caller links them whole)."""
    tids = [t for _, t in ops.threads]
    group_of: dict[object, int] = {}
    for t in tids:
        group_of.setdefault(t, len(group_of))  # threads by tid (as the linker's sweep groups them), first seen first
    group_code = np.array([group_of[t] for t in tids], dtype=np.int32)
    used = ops.code_counts()
    sweep = _TopSweep(len(group_of))
    tops = 0  # pass 1: the order, the rows of the host lanes and the names they use
    top_names = np.zeros(len(ops.names), dtype=np.int64)
    for part in ops.slices():
        top = sweep.top(part["ts"], part["dur"], group_code[part["thread"]])
        if top is None:
            return None
        tops += len(top)
        top_names += np.bincount(part["name"][top], minlength=len(ops.names))
    counts: dict[object, int] = {}
    for t, c in zip(tids, used["thread"].tolist(), strict=True):
        counts[t] = counts.get(t, 0) + c
    main_tid = max(counts, key=counts.__getitem__)
    host = np.zeros(1, dtype=bool)
    host[0] = True
    op_table = OpTable(ops, used["name"] > 0, np.array([p is Placement.HOST for p in _PLACEMENTS]), root_device, used["signature"] > 0)
    lane_columns = {
        "engine": _Coder(["host" if t == main_tid else f"host thread {t}" for t in group_of],
                         np.bincount(group_code, weights=used["thread"], minlength=len(group_of)) > 0),
        "engine_kind": _Coder([EngineKind.HOST.value], host),
        "kind": _Coder([SliceKind.COMPUTE.value], host),
        "name": _Coder(ops.names, top_names > 0),
    }

    def times(part: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        start, dur = ns_times(part["ts"], part["dur"], t0)
        return start, dur, regions.find_many(start).astype(np.int32)

    def op_batches() -> Iterator[pa.RecordBatch]:
        first = 0
        for part in ops.slices():
            n = len(part["ts"])
            start, dur, region = times(part)
            table = op_table.table(part, first, start, dur, region, np.zeros(n, dtype=np.int32))
            first += n
            yield from table.to_batches()

    def lane_batches() -> Iterator[pa.RecordBatch]:
        lanes = _TopSweep(len(group_of))
        first = 0
        for part in ops.slices():
            groups = group_code[part["thread"]]
            top = lanes.top(part["ts"], part["dur"], groups)
            if top is None:  # the first pass saw them in order
                raise RuntimeError("operators changed order between two passes")
            start, dur, region = times(part)
            zeros = np.zeros(len(top), dtype=np.int32)
            table = _table("engine_slices", {
                "region_id": region[top], "engine": lane_columns["engine"](groups[top]),
                "engine_kind": lane_columns["engine_kind"](zeros), "kind": lane_columns["kind"](zeros),
                "name": lane_columns["name"](part["name"][top]), "start": start[top], "dur": dur[top],
                "op_id": top + first})  # fmt: skip
            first += len(part["ts"])
            if table.num_rows:
                yield from table.to_batches()

    return {"ops": TableSlices(len(ops), op_batches), "engine_slices": TableSlices(tops, lane_batches)}


__all__ = ["OpTable", "ns_times", "op_slices"]
