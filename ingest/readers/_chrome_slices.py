"""Engine slices and operators of Chrome-based readers made slice by slice from the event columns (bounded memory).

A reader says which spans (or instants) go on which lanes, part after part (`SliceRows.add`); the rows are
then made `SLICE_ROWS` at a time from the compact columns of `_chrome_events.ChromeEvents`, one record
batch each, when the trace is written (`Trace.slices`): no Arrow table of every slice is held, and every
batch shares one dictionary per column (the values some row uses, known before the first batch), as an
Arrow IPC file requires. Read whole (`sliced=False`), the same batches are gathered into one table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ..schema import REFERENCES, TABLES, EngineKind, SliceKind
from ..trace import TableSlices, Trace
from ._chrome_events import ChromeEvents
from ._kineto_link import _Coder, _table

SLICE_ROWS = 1 << 20  # rows per record batch made (tests make it tiny)
_KINDS = [k.value for k in SliceKind]


@dataclasses.dataclass(frozen=True)
class Lane:
    """Where the spans of one thread go: lane name, engine kind and slice kind."""

    engine: str
    engine_kind: EngineKind = EngineKind.OTHER
    slice_kind: SliceKind = SliceKind.COMPUTE


@dataclasses.dataclass
class _Part:
    index: np.ndarray  # spans (or instants) in row order, int64
    lane: np.ndarray  # per row: position in SliceRows.lanes, int32
    instants: bool
    correlation: np.ndarray | None  # per span, -1: none
    op_ids: np.ndarray | None  # per span, -1: none
    kinds: np.ndarray | None  # per row: position in _KINDS, -1: the lane's


class SliceRows:
    """The engine_slices table of one region, part after part, made in slices when written."""

    def __init__(self, ev: ChromeEvents, rid: int, t0: int) -> None:
        self.ev, self.rid, self.t0 = ev, rid, t0
        self.lanes: list[Lane] = []
        self._lane_at: dict[Lane, int] = {}
        self.parts: list[_Part] = []

    def add(self, lanes: dict[tuple[int, int], Lane], index: np.ndarray | None = None, *, instants: bool = False,
            correlation: np.ndarray | None = None, op_ids: np.ndarray | None = None,
            kinds: dict[int, SliceKind] | None = None) -> None:  # fmt: skip
        """The spans `index` (default all; or the instants) whose thread has a lane in `lanes`, as rows.

        `correlation` and `op_ids`: per span (-1: none); `kinds`: a span's slice kind instead of its lane's.
        """
        src = self.ev.instants if instants else self.ev
        index = np.arange(len(src), dtype=np.int64) if index is None else np.asarray(index, dtype=np.int64)
        for lane in lanes.values():
            self._lane_at.setdefault(lane, len(self._lane_at))
        self.lanes = list(self._lane_at)
        keys = np.array([(p << 32) | t for p, t in lanes], dtype=np.int64)
        at = np.array([self._lane_at[lane] for lane in lanes.values()], dtype=np.int32)
        order = np.argsort(keys)
        keys, at = keys[order], at[order]
        key = (src.col("pid")[index].astype(np.int64) << 32) | src.col("tid")[index]
        pos = np.minimum(np.searchsorted(keys, key), max(len(keys) - 1, 0)) if len(keys) else np.zeros(len(key), dtype=np.int64)
        found = keys[pos] == key if len(keys) else np.zeros(len(key), dtype=bool)
        index, pos = index[found], at[pos[found]] if len(keys) else np.zeros(0, dtype=np.int32)
        row_kinds = None
        if kinds and len(index):
            spans = np.fromiter(kinds.keys(), dtype=np.int64, count=len(kinds))
            values = np.array([_KINDS.index(k.value) for k in kinds.values()], dtype=np.int8)
            order = np.argsort(spans)
            spans, values = spans[order], values[order]
            hit = np.minimum(np.searchsorted(spans, index), len(spans) - 1)
            row_kinds = np.where(spans[hit] == index, values[hit], -1).astype(np.int8)
        self.parts.append(_Part(index, pos.astype(np.int32), instants, correlation, op_ids, row_kinds))

    def __len__(self) -> int:
        return sum(len(p.index) for p in self.parts)

    def slices(self) -> TableSlices:
        """The rows as a table made slice by slice (dictionaries fixed first)."""
        ev = self.ev
        vals = ev.values.values
        used = np.zeros(len(vals), dtype=bool)
        for part in self.parts:
            src = ev.instants if part.instants else ev
            names = src.col("name")
            for lo in range(0, len(part.index), SLICE_ROWS):
                used[names[part.index[lo : lo + SLICE_ROWS]]] = True
        name = _Coder([v if used[c] else None for c, v in enumerate(vals)], used)
        engine = _Coder(sorted({lane.engine for lane in self.lanes}), np.ones(len({lane.engine for lane in self.lanes}), dtype=bool))
        engines = {w: n for n, w in enumerate(engine.words.to_pylist())}
        lane_engine = np.array([engines[lane.engine] for lane in self.lanes] or [0], dtype=np.int32)
        ekinds = sorted({lane.engine_kind.value for lane in self.lanes})
        ekind = _Coder(ekinds, np.ones(len(ekinds), dtype=bool))
        lane_ekind = np.array([ekinds.index(lane.engine_kind.value) for lane in self.lanes] or [0], dtype=np.int32)
        kind = _Coder(_KINDS, np.ones(len(_KINDS), dtype=bool))
        lane_kind = np.array([_KINDS.index(lane.slice_kind.value) for lane in self.lanes] or [0], dtype=np.int8)
        rid, t0 = self.rid, self.t0

        def optional(column: np.ndarray | None, idx: np.ndarray) -> pa.Array | None:
            if column is None:
                return None
            values = column[idx]
            return pa.array(values, pa.int64(), mask=values < 0)

        def batches() -> Iterator[pa.RecordBatch]:
            for part in self.parts:
                src = ev.instants if part.instants else ev
                for lo in range(0, len(part.index), SLICE_ROWS):
                    idx, pos = part.index[lo : lo + SLICE_ROWS], part.lane[lo : lo + SLICE_ROWS]
                    k = lane_kind[pos]
                    if part.kinds is not None:
                        own = part.kinds[lo : lo + SLICE_ROWS]
                        k = np.where(own >= 0, own, k)
                    n = len(idx)
                    table = _table("engine_slices", {
                        "region_id": np.full(n, rid, dtype=np.int32), "engine": engine(lane_engine[pos]),
                        "engine_kind": ekind(lane_ekind[pos]), "kind": kind(k.astype(np.int32)),
                        "name": name(src.col("name")[idx]), "start": src.col("ts" if part.instants else "start")[idx] - t0,
                        "dur": np.zeros(n, dtype=np.int64) if part.instants else src.col("dur")[idx],
                        "op_id": optional(part.op_ids, idx), "correlation": optional(part.correlation, idx)})  # fmt: skip
                    yield from table.to_batches()

        return TableSlices(len(self), batches)


def finish(trace: Trace, tables: dict[str, TableSlices], *, sliced: bool) -> Trace:
    """The trace with its big tables as slices (written one slice at a time), or gathered whole (one chunk each)."""
    for name, rows in tables.items():
        if trace.tables.get(name) is not None and trace.tables[name].num_rows:
            raise RuntimeError(f"table {name!r} has rows already: the slices would replace them")
        if sliced:
            trace.tables.pop(name, None)
            trace.slices[name] = rows
        else:
            table = pa.Table.from_batches(list(rows.batches()), schema=TABLES[name])
            trace.tables[name] = table.combine_chunks()
    if sliced:  # a whole table whose rows point into a sliced one is given as slices too: checked once that one is written
        for (source, _), (target, _) in REFERENCES.items():
            if target in trace.slices and source not in trace.slices and trace.tables[source].num_rows:
                table = trace.tables.pop(source)
                trace.slices[source] = TableSlices(table.num_rows, lambda table=table: iter(table.to_batches()))
    return trace

__all__ = ["SLICE_ROWS", "Lane", "SliceRows", "finish"]
